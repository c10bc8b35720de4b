"""Producers coupled through closed-loop brokers (``brokers.coupling``) in the stage.

``joint``: every producer in one task, simulated together once (:class:`JointProducers`). ``iterative``
(:mod:`rocketsim.engine.iterative`): rounds before the stage's producer tasks (:func:`iterate_rounds`):
the driver puts the brokers' trajectories of a round into the scratch store, each producer task
simulates its producers against them and hands on their arrival work (:func:`round_task`), the driver
merges it a broker at a time (:func:`after_round`; sums, any order, so any split of the producers gives
the same) and replays the next trajectories until a fixed point (a round makes no rows: its producers
streamed, :func:`rocketsim.engine.iterative.round_work`); the producer tasks then simulate against the last
round's (:class:`IterativeRound`), a chunk at a time as an open-loop producer. A round that may be the last
(:func:`rows_in_round`) is run by those producer tasks themselves, which hand on its work as well: the
last round's rows are the run's without a pass after it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from rocketsim import engine
from rocketsim.engine import iterative
from rocketsim.scenario import Scenario, workload
from rocketsim.stage.inputs import input_message_chunks
from rocketsim.stage.plan import StagePlan
from rocketsim.stage.protocols import ROUND_WORK, TRAJECTORIES, Scratch, StageIO, scratch_key


class JointProducers:
    """``brokers.coupling = joint``: the producers of a run simulated together, once, where the first of
    them is asked for (``messages``: every producer's, asked then), each output kept until its producer's
    turn."""

    def __init__(self, sc: Scenario, messages: Callable[[], Mapping[int, pa.Table]]) -> None:
        self.sc, self._messages = sc, messages
        self._outputs: dict[int, engine.SimOutput] | None = None

    def output(self, producer: int, messages: pa.Table) -> engine.SimOutput:
        """The producer's simulation (``messages``: unused, every producer's are given at the first call)."""
        if self._outputs is None:
            self._outputs = engine.simulate_coupled(self._messages(), self.sc)
        return self._outputs.pop(producer)


class IterativeRound:
    """Round ``number`` of ``brokers.coupling = iterative`` as a producer task sees it: the brokers'
    trajectories the driver put in the scratch store, mapped once (not copied: the engines read its
    pages). ``hand_on``: the round makes its rows and hands on its arrival work too (a round that may be
    the last, :func:`rows_in_round`): :meth:`output` and :meth:`chunks` gather the work, :meth:`put_work`
    puts it in the scratch store."""

    def __init__(self, sc: Scenario, scratch: Scratch, number: int, hand_on: bool = False) -> None:
        self.sc, self.number = sc, number
        self._trajectories = iterative.trajectories_from_bytes(
            sc, scratch.map_bytes(scratch_key(TRAJECTORIES, number))
        )
        self.works: list[iterative.ArrivalWork] | None = [] if hand_on else None

    def work(self, producer: int, chunks: Iterable[pa.Table]) -> iterative.ArrivalWork:
        """The producer's arrival work against this round's trajectories (no rows made), a chunk of
        messages at a time."""
        return iterative.round_work(chunks, self.sc, producer, self._trajectories)

    def chunks(self, producer: int, chunks: Iterable[pa.Table]) -> Iterator[engine.SimChunk]:
        """The producer's rows against this round's trajectories, a chunk of messages at a time."""
        return iterative.round_chunks(chunks, self.sc, producer, self._trajectories, self.works)

    def output(self, producer: int, messages: pa.Table) -> engine.SimOutput:
        """The producer's simulation against this round's trajectories (the last round's: its rows)."""
        out, work = iterative.simulate_round(messages, self.sc, producer, self._trajectories)
        if self.works is not None:
            self.works.append(work)
        return out

    def put_work(self, scratch: Scratch, task: int) -> None:
        """The arrival work gathered (``hand_on``), merged, as producer task ``task``'s of the round."""
        if self.works is not None:
            put_round_work(self.sc, scratch, self.number, task, iterative.arrival_work(self.works))


def round_task(
    sc: Scenario,
    plan: StagePlan,
    io: StageIO,
    task: int,
    shares: Sequence[workload.ProducerShare],
    number: int,
) -> dict[str, int]:
    """A producer task's part of round ``number``: its producers simulated against the round's
    trajectories, their arrival work merged and handed on; its counts."""
    rnd = IterativeRound(sc, io.scratch, number)
    works = [rnd.work(s.producer, input_message_chunks(sc, plan, io.committed, s)) for s in shares]
    merged = iterative.arrival_work(works)
    put_round_work(sc, io.scratch, number, task, merged)
    return {"round.requests": merged.requests}


def put_round_work(
    sc: Scenario, scratch: Scratch, number: int, task: int, work: iterative.ArrivalWork
) -> None:
    """Producer task ``task``'s arrival work of round ``number``, one group per broker (the driver reads
    a broker's at a time: :func:`broker_round_work`)."""
    brokers = len(sc.cluster.brokers)
    sink = scratch.grouped_sink(scratch_key(ROUND_WORK, number, task), iterative.WORK_SCHEMA, brokers)
    sink.write(iterative.work_table(work), work.broker)
    sink.close()


def broker_round_work(
    sc: Scenario, scratch: Scratch, number: int, tasks: int, broker: int
) -> iterative.ArrivalWork:
    """Broker ``broker``'s arrival work of round ``number``: every producer task's, merged (sums: any
    order, so any split of the producers gives the same)."""
    return iterative.work_from_table(_round_work_rows(sc, scratch, number, range(tasks), broker))


def _round_work_rows(
    sc: Scenario, scratch: Scratch, number: int, tasks: Iterable[int], broker: int
) -> pa.Table:
    keys = [scratch_key(ROUND_WORK, number, t) for t in tasks]
    brokers = len(sc.cluster.brokers)
    return scratch.group_source(keys, broker, iterative.WORK_SCHEMA, brokers)()


def tasks_work_unchanged(sc: Scenario, scratch: Scratch, number: int, tasks: int) -> bool:
    """Whether every producer task handed on the same arrival work in round ``number`` as in the round
    before (the tasks hold the same producers each round): then the merged work is the same too, a fixed
    point found without merging (read a broker and a task at a time, mapped where local)."""
    return number > 1 and all(
        _round_work_rows(sc, scratch, number, [t], b).equals(
            _round_work_rows(sc, scratch, number - 1, [t], b)
        )
        for t in range(tasks)
        for b in range(len(sc.cluster.brokers))
    )


def rows_in_round(sc: Scenario, number: int, max_rounds: int) -> bool:
    """Whether round ``number`` is run by the stage's producer tasks themselves, making the rows the pass
    after the last round would make (the same trajectories, so the same rows) and handing on the work:
    the round limit (the last for sure), and round 2, the first that can be the last (round 1 is not,
    below the limit), where the answers do not pace the arrivals (:func:`answers_pace_arrivals`): then it
    saves the pass after the rounds. A round that makes rows and is not the last has them written over by
    a later pass (the same tables either way; only the time differs)."""
    return number == max_rounds or (number == 2 and not answers_pace_arrivals(sc))


def answers_pace_arrivals(sc: Scenario) -> bool:
    """Whether the answers can move a producer's later requests more than its retries do, so that the
    rounds rarely stop at 2: a sender thread waits for the answer (SYNC sends; transactional messages,
    sent SYNC) or the fault strategy steers by its latency. A hint for :func:`rows_in_round` (the shipped
    closed-loop scenarios with it take 6 to 12 rounds, ``capacity_steady.toml`` without it 2)."""
    p = sc.producers
    return (
        p.send_latency_fault_enable
        or p.send_mode.get("sync", 0.0) > 0
        or sc.workload.message_types.get("transaction", 0.0) > 0
    )


@dataclass(frozen=True)
class Rounds:
    """What :func:`iterate_rounds` ran: the last round, its residual, and what ``run_round`` returned
    for it when it made the rows (None: the producer tasks still have to simulate against it)."""

    last: int
    residual: int
    rows: object | None


def iterate_rounds(
    sc: Scenario,
    scratch: Scratch,
    run_round: Callable[[int, bool], object],
    tasks: int,
    max_rounds: int = iterative.MAX_ROUNDS,
) -> Rounds:
    """The driver's side of the rounds (those of :func:`rocketsim.engine.iterative.simulate_iterative`,
    spread over ``tasks`` producer tasks): per round it puts the trajectories in the scratch store,
    ``run_round(number, rows)`` runs :func:`round_task` of every producer task (``rows`` False) or the
    stage's producer tasks against the round (``rows`` True, :func:`rows_in_round`: they hand on the work
    too, :class:`IterativeRound`), and :func:`after_round` checks the residual and replays the next
    trajectories. Deterministic and partition-invariant: a producer depends only on the trajectories,
    and the merge is a sum."""
    trajs = iterative.trajectories(sc, None)
    number = 0
    while True:
        number += 1
        scratch.put_bytes(scratch_key(TRAJECTORIES, number), iterative.trajectories_to_bytes(trajs))
        del trajs  # the producer tasks read them from the scratch store
        rows = rows_in_round(sc, number, max_rounds)
        ran = run_round(number, rows)
        left, following = after_round(sc, scratch, number, tasks, max_rounds)
        if following is None:
            return Rounds(number, left, ran if rows else None)
        trajs = following


def after_round(
    sc: Scenario, scratch: Scratch, number: int, tasks: int, max_rounds: int
) -> tuple[int, iterative.Trajectories | None]:
    """After round ``number``: its residual (:func:`rocketsim.engine.iterative.converged`) and the next
    round's trajectories (None: it was the last). A broker at a time (its work merged from the tasks', the
    round before's merged again for the residual, its trajectory replayed), so the driver holds one
    broker's work at a time; no merge at all where every task's work is unchanged
    (:func:`tasks_work_unchanged`: a fixed point)."""
    if tasks_work_unchanged(sc, scratch, number, tasks):
        return 0, None
    left, replayed = 0, []
    for b, params in enumerate(iterative.store_params(sc)):
        work = broker_round_work(sc, scratch, number, tasks, b)
        before = broker_round_work(sc, scratch, number - 1, tasks, b) if number > 1 else None
        left += work.buckets if before is None else iterative.residual(before, work)
        if number < max_rounds:
            replayed.append(iterative.replayed(params, *work.of_broker(b)))
    left = left or int(number == 1)  # round 1 is never the last below the limit
    if iterative.stops(left, number, max_rounds):
        return left, None
    return left, iterative.Trajectories.of(replayed)
