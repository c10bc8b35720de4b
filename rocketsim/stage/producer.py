"""A producer task: a bin of producers' part of the stage, written through the stage's sinks.

More: docs/reference/modules.md, rocketsim/stage/producer.py.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from rocketsim import engine
from rocketsim.broker import side as broker_side
from rocketsim.broker.queue import ITERATIVE, JOINT
from rocketsim.scenario import Scenario, workload
from rocketsim.stage.coupled import IterativeRound, JointProducers
from rocketsim.stage.inputs import (
    ATTEMPTS_DATA,
    RESULTS_DATA,
    CommittedInputs,
    committed_inputs,
    concat_inputs,
    input_messages,
    read_producer_rows,
)
from rocketsim.stage.plan import StagePlan
from rocketsim.stage.protocols import (
    AGGREGATES,
    LOG,
    OTHER_HALVES,
    PRODUCER,
    RESULTS,
    StageIO,
    Task,
    scratch_key,
    write_through,
)
from rocketsim.stage.scratch import (
    RESULTS_SCRATCH,
    ScratchCodes,
    log_scratch_schema,
    scratch_log,
    scratch_results,
)
from rocketsim.stage.tables import (
    MESSAGES_DATA,
    ProducerTables,
    coded_message_chunks,
    producer_chunks,
    without_records,
)
from rocketsim.stage.tables import with_records as tables_with_records
from rocketsim.tables import reconcile, summaries
from rocketsim.tables.schemas import BROKER_SIDE, GENERATE, SIMULATE, SUMMARIZE

# small producers are gathered into groups of about this many messages: enough to spread what a group
# costs whatever its size (a row group, a fold, the counts: milliseconds) over many producers, and far
# below a chunk, so that one chunk (or one coupled producer) is what bounds a task's memory
GATHER_ROWS = 1 << 14
Coupling = JointProducers | IterativeRound


def producer_task(
    sc: Scenario,
    plan: StagePlan,
    io: StageIO,
    task: int,
    shares: Sequence[workload.ProducerShare],
    last_round: int | None = None,
    release: Callable[[], object] = lambda: None,
    hand_on: bool = False,
) -> dict[str, int]:
    """Producer task ``task``: its producers' (``shares``, in producer order) part of the stage (the
    module docstring); returns its counts. ``last_round``: ``brokers.coupling = iterative``'s last round
    (:func:`rocketsim.stage.coupled.iterate_rounds`), which the simulation runs against; ``hand_on``: a
    round that may be the last, its arrival work handed on too (:class:`IterativeRound`). ``release``:
    called once a group's or a large producer's rows are written (a worker gives back the memory they
    took, so the next one starts from as little)."""
    gathered = _Gathered(min(plan.chunk_rows, GATHER_ROWS), release)
    if plan.runs(SIMULATE):
        coupling = _coupling(sc, plan, io, shares, last_round, hand_on)
        counts = _simulated(sc, plan, io, task, shares, coupling, gathered)
        if isinstance(coupling, IterativeRound):
            coupling.put_work(io.scratch, task)
        return counts
    if plan.runs(GENERATE):  # the stages are contiguous: generate alone
        return _generated(sc, plan, io, task, shares, gathered)
    return _read_back(sc, plan, io, task, shares, gathered)


def _coupling(
    sc: Scenario,
    plan: StagePlan,
    io: StageIO,
    shares: Sequence[workload.ProducerShare],
    last_round: int | None,
    hand_on: bool = False,
) -> Coupling | None:
    """How the producers' simulation is made when the brokers couple them (None: each alone)."""
    if sc.coupling == JOINT:
        return JointProducers(
            sc, lambda: {s.producer: input_messages(sc, plan, io.committed, s) for s in shares}
        )
    if sc.coupling == ITERATIVE:
        if last_round is None:
            raise ValueError("brokers.coupling = iterative: the producer task needs the last round")
        return IterativeRound(sc, io.scratch, last_round, hand_on)
    return None


class _Gathered:
    """Whole producers' parts gathered into groups of at most ``rows`` rows (a larger part: alone).
    ``release`` is called by :meth:`settle` once a group was taken (written) since the last call."""

    def __init__(self, rows: int, release: Callable[[], object]) -> None:
        self.limit, self.release, self.parts, self.rows = rows, release, [], 0
        self.taken = False

    def add(self, part: object, rows: int) -> list[list]:
        """Keep ``part``; the groups to write now, in order: those gathered before it when it would take
        them past the limit, and its own once it reaches the limit (nothing is kept longer than needed)."""
        full = [self.take()] if self.parts and self.rows + rows > self.limit else []
        self.parts.append(part)
        self.rows += rows
        return [*full, self.take()] if self.rows >= self.limit else full

    def take(self) -> list:
        parts, self.parts, self.rows = self.parts, [], 0
        self.taken = self.taken or bool(parts)
        return parts

    def settle(self) -> None:
        """Between producers, once what a written group held is let go: ``release``, if one was."""
        if self.taken:
            self.taken = False
            self.release()


class ProducerSinks:
    """A simulating producer task's parts: ``messages`` (when it generates them), ``send_attempts``, the
    ``send_results`` rows that point at no record, whole, and the ``transactions`` rows of messages whose
    result points at no half (with the broker side); for the broker tasks, grouped by broker, its records,
    the results pointing at them and the results of messages with another stored half."""

    def __init__(self, sc: Scenario, plan: StagePlan, io: StageIO, task: int) -> None:
        brokers, t = len(sc.cluster.brokers), Task(PRODUCER, task)
        self.messages = io.tables.sink("messages", t, MESSAGES_DATA) if plan.runs(GENERATE) else None
        self.attempts = io.tables.sink("send_attempts", t, ATTEMPTS_DATA)
        self.unstored = io.tables.sink("send_results", t, RESULTS_DATA)
        self.transactions = io.tables.sink("transactions", t, None) if plan.runs(BROKER_SIDE) else None
        self.results = io.scratch.grouped_sink(scratch_key(RESULTS, task), RESULTS_SCRATCH, brokers)
        self.log_schema = log_scratch_schema(sc)
        self.log = io.scratch.grouped_sink(scratch_key(LOG, task), self.log_schema, brokers)
        self.codes = {LOG: ScratchCodes(), RESULTS: ScratchCodes()}  # each scratch file's dictionaries
        self.other = io.scratch.grouped_sink(
            scratch_key(OTHER_HALVES, task), broker_side.HALF_RESULTS, brokers
        )
        # only a transactional message has halves: without any, each part of other halves is empty
        self.halves = sc.workload.message_types.get("transaction", 0) > 0

    def all(self) -> list:
        sinks = (self.messages, self.attempts, self.unstored, self.transactions, self.results, self.log)
        return [s for s in (*sinks, self.other) if s is not None]

    def write(self, tables: ProducerTables) -> None:
        self.attempts.write(tables.coded_attempts())
        self.unstored.write(tables.unstored_results())
        rows, brokers = tables.stored_result_rows()  # status and broker: the engine's codes, if it gave them
        self.results.write(scratch_results(tables.coded_results(), rows, self.codes[RESULTS]), brokers, rows)
        self.log.write(scratch_log(tables.log, self.log_schema, self.codes[LOG]), tables.log_broker)
        if self.halves:
            self.other.write(*tables.other_half_results())
        else:
            self.other.write(broker_side.HALF_RESULTS.empty_table(), np.zeros(0, np.int64))


class _Simulated:
    """What a simulating producer task keeps while it runs: its sinks, counts and aggregates."""

    def __init__(self, sc: Scenario, plan: StagePlan, io: StageIO, task: int) -> None:
        self.sc, self.plan = sc, plan
        # a summaries-only run writes no row: its chunks are only counted and folded
        self.sinks = None if plan.summaries_only else ProducerSinks(sc, plan, io, task)
        self.counts: list[dict[str, int]] = []
        self.aggregates: list[summaries.SummaryAggregates] = []
        if plan.runs(GENERATE):  # its names, were there no message
            self.counts.append(reconcile.message_counts(MESSAGES_DATA.empty_table()))

    def messages(self, messages: pa.Table) -> None:
        """Messages: generated ones written (unless summaries only) and counted, committed ones counted
        (their string columns strings, or dictionary arrays as drawn:
        :func:`rocketsim.stage.tables.coded_message_chunks`)."""
        if not self.plan.runs(GENERATE):
            self.counts.append(reconcile.message_counts(messages, "read"))
            return
        if self.sinks is not None and self.sinks.messages is not None:
            self.sinks.messages.write(messages)
        self.counts.append(reconcile.message_counts(messages))

    def rows(self, chunks: Iterator[ProducerTables]) -> None:
        """Rows of whole producers (one producer a chunk at a time, or several whole): written, counted,
        and folded into their summary aggregates."""
        fold = None
        if self.plan.runs(SUMMARIZE):
            fold = summaries.ProducerFold(self.plan.window_ms, faults=summaries.fault_spans(self.sc.faults))
        for tables in chunks:
            if self.sinks is not None:
                self.sinks.write(tables)
            self.counts.append(
                reconcile.attempt_counts(tables.attempts) | reconcile.result_counts(tables.results)
            )
            if fold is not None:
                copies = tables.result_copies()
                attempts, results = tables.coded_attempts(), tables.coded_results()
                fold.add(attempts, results, tables.messages, tables.later_start_ms, copies)
            if self.sinks is not None and self.sinks.transactions is not None:
                txns = tables.unstored_transactions(self.sc)
                self.sinks.transactions.write(txns)
                self.counts.append(reconcile.transaction_counts(txns))
        if fold is not None:
            self.aggregates.append(fold.result())


def _simulated(
    sc: Scenario,
    plan: StagePlan,
    io: StageIO,
    task: int,
    shares: Sequence[workload.ProducerShare],
    coupling: Coupling | None,
    gathered: _Gathered,
) -> dict[str, int]:
    """A producer task that simulates: a producer larger than a chunk streams a chunk at a time, the
    others are simulated whole and gathered (``joint`` producers are simulated whole whatever their size)."""
    state = _Simulated(sc, plan, io, task)
    records = not plan.summaries_only

    def write(group: list[tuple[pa.Table, engine.SimOutput]]) -> None:
        if group:
            messages = pa.concat_tables([MESSAGES_DATA.empty_table(), *(m for m, _ in group)])
            state.messages(messages)
            state.rows(iter([_whole_producers(sc, messages, [o for _, o in group], records)]))

    def whole(share: workload.ProducerShare) -> None:  # its rows let go when it returns, unless kept
        messages = input_messages(sc, plan, io.committed, share)
        out = _simulate_whole(sc, messages) if coupling is None else coupling.output(share.producer, messages)
        for group in gathered.add((messages, out), messages.num_rows):
            write(group)

    def body() -> None:
        for share in shares:
            if not isinstance(coupling, JointProducers) and share.messages > plan.chunk_rows:
                write(gathered.take())
                simulate = None if coupling is None else functools.partial(coupling.chunks, share.producer)
                state.rows(
                    producer_chunks(sc, _generated_chunks(sc, plan, io, share, state), records, simulate)
                )
                gathered.taken = True
            else:
                whole(share)
            gathered.settle()
        write(gathered.take())

    write_through([] if state.sinks is None else state.sinks.all(), body)
    if state.aggregates:
        io.scratch.put_bytes(scratch_key(AGGREGATES, task), summaries.merge(state.aggregates).to_bytes())
    return reconcile.add_counts(state.counts)


def _generated_chunks(
    sc: Scenario, plan: StagePlan, io: StageIO, share: workload.ProducerShare, state: _Simulated
) -> Iterator[pa.Table]:
    """A large producer's messages a chunk at a time: generated (and written and counted), or its
    committed ones (read whole, and counted) cut into chunks."""
    if plan.runs(GENERATE):  # as drawn: the engine reads their codes and hands on their strings
        for coded in coded_message_chunks(sc, share, plan.chunk_rows):
            state.messages(coded)
            yield from _cut(coded, plan.chunk_rows)
        return
    messages = read_producer_rows(io.committed, "messages", share.producer, MESSAGES_DATA)
    state.messages(messages)
    yield from _cut(messages, plan.chunk_rows)


def _cut(table: pa.Table, rows: int) -> Iterator[pa.Table]:
    for at in range(0, table.num_rows, rows):
        yield table.slice(at, rows)


def _simulate_whole(sc: Scenario, messages: pa.Table) -> engine.SimOutput:
    """One producer's messages simulated whole (:func:`rocketsim.engine.simulate_chunks` of one chunk)."""
    chunks = list(engine.simulate_chunks([messages], sc)) if messages.num_rows else []
    if not chunks:
        return engine.SimOutput.empty()
    return engine.SimOutput(
        pa.concat_tables([c.attempts for c in chunks]), pa.concat_tables([c.results for c in chunks])
    )


def _whole_producers(
    sc: Scenario, messages: pa.Table, outs: Sequence[engine.SimOutput], records: bool = True
) -> ProducerTables:
    """Whole producers' messages and simulations (in producer order) as one :class:`ProducerTables`
    (``records`` False: without their commit-log records, a summaries-only run's)."""
    none = engine.SimOutput.empty()
    return (tables_with_records if records else without_records)(
        sc,
        messages,
        pa.concat_tables([none.attempts, *(o.attempts for o in outs)]),
        pa.concat_tables([none.results, *(o.results for o in outs)]),
    )


def _generated(
    sc: Scenario,
    plan: StagePlan,
    io: StageIO,
    task: int,
    shares: Sequence[workload.ProducerShare],
    gathered: _Gathered,
) -> dict[str, int]:
    """A task that only generates: its producers' messages written a chunk at a time (small producers
    gathered); their counts."""
    sink = io.tables.sink("messages", Task(PRODUCER, task), MESSAGES_DATA)
    counts = [reconcile.message_counts(MESSAGES_DATA.empty_table())]

    def write(group: list[pa.Table]) -> None:
        if group:  # one dictionary a column for the row group (coded_message_chunks')
            messages = pa.concat_tables(group).unify_dictionaries()
            sink.write(messages)
            counts.append(reconcile.message_counts(messages))

    def body() -> None:
        for share in shares:
            for messages in coded_message_chunks(sc, share, plan.chunk_rows):  # written as drawn
                for group in gathered.add(messages, messages.num_rows):
                    write(group)
            gathered.settle()
        write(gathered.take())

    write_through([sink], body)
    return reconcile.add_counts(counts)


def _read_back(
    sc: Scenario,
    plan: StagePlan,
    io: StageIO,
    task: int,
    shares: Sequence[workload.ProducerShare],
    gathered: _Gathered,
) -> dict[str, int]:
    """A task after the simulation (summaries, the broker side): what it needs of its producers' committed
    rows, a few whole producers at a time -> their summary aggregates and the ``transactions`` rows of
    their transactional messages whose result points at no half."""
    transactions = (
        io.tables.sink("transactions", Task(PRODUCER, task), None) if plan.runs(BROKER_SIDE) else None
    )
    counts: list[dict[str, int]] = []
    aggregates: list[summaries.SummaryAggregates] = []

    def write(group: list[CommittedInputs]) -> None:
        if not group:
            return
        rows = concat_inputs(group)
        counts.append(rows.counts(plan))
        if plan.runs(SUMMARIZE):
            aggregates.append(
                summaries.producer_aggregates(
                    rows.attempts,
                    rows.results,
                    plan.window_ms,
                    messages=rows.messages,
                    faults=summaries.fault_spans(sc.faults),
                )
            )
        if transactions is not None:
            halves = broker_side.result_halves(rows.results)
            txns = broker_side.unstored_transactions(rows.messages, rows.results, halves, sc)
            transactions.write(txns)
            counts.append(reconcile.transaction_counts(txns))

    def add(share: workload.ProducerShare) -> None:  # its rows let go when it returns, unless kept
        got = committed_inputs(plan, io.committed, share.producer)
        for group in gathered.add(got, got.rows):
            write(group)

    def body() -> None:
        for share in shares:
            add(share)
            gathered.settle()
        write(gathered.take())

    write_through([] if transactions is None else [transactions], body)
    if aggregates:
        io.scratch.put_bytes(scratch_key(AGGREGATES, task), summaries.merge(aggregates).to_bytes())
    return reconcile.add_counts(counts)
