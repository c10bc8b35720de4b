"""``brokers.coupling = "iterative"``: the closed-loop brokers by rounds to a fixed point, per producer.

Round 0 simulates every producer alone against idle brokers. Each round records every request that
reaches a broker's store (:func:`rocketsim.broker_store.carries_load`) as arrival work per (broker, ms):
a count and a byte sum, integer sums mergeable in any order. From the sum over all producers each
broker's :class:`Trajectory` is rebuilt: the exact store (:class:`rocketsim.broker_store.BrokerStore`)
replayed over those arrivals, with its state (first free send thread, free writer, queue depth, the
page cache's busy spans) at every ms. The next round simulates every producer again, each request
answered by :func:`rocketsim.broker_store.decide` from the trajectory's state at its ms (as if half of that
ms's other arrivals came before it). The rounds stop when a round's arrivals equal the previous round's
(the trajectory it was simulated against is the one its arrivals make: a fixed point; residual 0) or
after ``MAX_ROUNDS``; the last round's rows are the run's, with its round count and residual (the
(broker, ms) buckets whose arrivals still changed).

Every round is deterministic and each producer depends only on the trajectories, so the result does not
depend on how producers are spread over tasks: :func:`simulate_iterative` runs the rounds in one process;
:func:`rocketsim.spark.run.iterate_rounds` spreads them over executors with the same pieces
(:func:`simulate_round`, :func:`arrival_work`, :func:`converged`, :func:`trajectories`; arrival work and
trajectories cross processes as :func:`work_table` rows and :func:`trajectories_to_bytes`).

Against :mod:`rocketsim.engine.joint` (exact) the approximations are: a request does not see the requests
of its own ms in order, only half of them; a producer sees its own earlier load through the trajectory of
the previous round; the sweeper's ``size of queue`` counts the trajectory's admissions.
tests/test_engine_iterative.py states how close it comes.
"""

from __future__ import annotations

import bisect
import heapq
import io
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from rocketsim.broker_store import (
    REMARKS,
    BrokerStore,
    Fate,
    StoreAnswer,
    StoreCluster,
    StoreParams,
    decide,
    sweep_remark,
)
from rocketsim.engine.plan import SimOutput, prepare
from rocketsim.engine.reference import ProducerSimulation, engine_output, producer_tables, sends_of
from rocketsim.scenario import Scenario

__all__ = [
    "MAX_ROUNDS",
    "WORK_SCHEMA",
    "IterativeRun",
    "Trajectory",
    "arrival_work",
    "converged",
    "simulate_iterative",
    "simulate_round",
    "trajectories",
    "trajectories_from_bytes",
    "trajectories_to_bytes",
    "work_from_table",
    "work_table",
]

MAX_ROUNDS = 12

# arrival work: (broker, ms) -> [count, bytes]
ArrivalWork = dict[tuple[int, int], list[int]]
# arrival work as rows (what a producer task of a round writes, in (broker, ms) order)
WORK_SCHEMA = pa.schema(
    [
        pa.field("broker", pa.int32(), nullable=False),
        pa.field("ms", pa.int64(), nullable=False),
        pa.field("count", pa.int64(), nullable=False),
        pa.field("bytes", pa.int64(), nullable=False),
    ]
)
_TRAJECTORY_ARRAYS = ("snap_ms", "mid", "after", "admitted_ms", "leave_us", "busy")


@dataclass
class Trajectory:
    """One broker's store state per ms, replayed from a round's arrival work (module docstring)."""

    params: StoreParams
    snap_ms: list[int] = field(default_factory=list)  # ms with arrivals, ascending
    mid: list[tuple[int, int, int]] = field(default_factory=list)  # (thread free, writer free, depth)
    after: list[tuple[int, int]] = field(default_factory=list)  # (thread free, writer free) after the ms
    admitted_ms: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # sorted
    leave_us: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # sorted
    busy: list[tuple[int, int]] = field(default_factory=list)

    @classmethod
    def replay(cls, params: StoreParams, work: list[tuple[int, int, int]]) -> Trajectory:
        """The store over ``work`` ((ms, count, bytes), ascending ms): each ms's requests share its bytes."""
        store = BrokerStore(params)
        t = cls(params)
        leaves: list[int] = []
        for ms, count, size in work:
            k = (count - 1) // 2  # the others ahead of a request of this ms, on average
            for i in range(count):
                if i == k:
                    while store.queued and store.queued[0] <= ms * 1000:  # as offer() does first
                        heapq.heappop(store.queued)
                    t.snap_ms.append(ms)
                    t.mid.append((store.threads[0], store.writer_free_us, len(store.queued)))
                wire = size // count + (1 if i < size % count else 0)
                ans = store.offer(ms, wire)
                if ans.left_us >= 0:
                    leaves.append(ans.left_us)
            t.after.append((store.threads[0], store.writer_free_us))
        t.admitted_ms = np.asarray(store.admitted_ms, np.int64)
        t.leave_us = np.sort(np.asarray(leaves, np.int64))
        t.busy = list(store.busy_log)
        return t

    def arrays(self) -> dict[str, np.ndarray]:
        """Its state as int64 arrays (:func:`trajectories_to_bytes`)."""
        return {
            "snap_ms": np.asarray(self.snap_ms, np.int64),
            "mid": np.asarray(self.mid, np.int64).reshape(-1, 3),
            "after": np.asarray(self.after, np.int64).reshape(-1, 2),
            "admitted_ms": self.admitted_ms,
            "leave_us": self.leave_us,
            "busy": np.asarray(self.busy, np.int64).reshape(-1, 2),
        }

    @classmethod
    def from_arrays(cls, params: StoreParams, a: Mapping[str, np.ndarray]) -> Trajectory:
        return cls(
            params,
            a["snap_ms"].tolist(),
            [tuple(r) for r in a["mid"].tolist()],
            [tuple(r) for r in a["after"].tolist()],
            a["admitted_ms"],
            a["leave_us"],
            [tuple(r) for r in a["busy"].tolist()],
        )

    def state(self, ms: int) -> tuple[int, int, int]:
        """(first free send thread, free writer, queue depth) for a request arriving at ``ms``."""
        i = bisect.bisect_right(self.snap_ms, ms) - 1
        if i >= 0 and self.snap_ms[i] == ms:
            return self.mid[i]
        thread, writer = self.after[i] if i >= 0 else (0, 0)
        arrived = int(np.searchsorted(self.admitted_ms, ms, "left"))
        left = int(np.searchsorted(self.leave_us, ms * 1000, "right"))
        return thread, writer, max(0, arrived - left)

    def answer(self, ms: int, wire: int) -> StoreAnswer:
        thread, writer, depth = self.state(ms)
        a = ms * 1000
        d = decide(self.params, self.busy, a, wire, depth, thread, writer)
        if d.fate in (Fate.REJECT_REQUEST, Fate.OVERLOAD, Fate.PC_SYNCHRONIZED):
            return StoreAnswer(d.fate, a, d.answer_us, remark=REMARKS[d.fate], queue_depth=depth)
        if d.tick >= 0:
            size = int(np.searchsorted(self.admitted_ms, d.tick, "right")) - int(
                np.searchsorted(self.admitted_ms, ms, "right")
            )
            remark = sweep_remark(d.fate, d.tick - ms, str(max(size, 0)))
            return StoreAnswer(d.fate, a, d.answer_us, remark=remark, queue_depth=depth)
        return StoreAnswer(Fate.SERVED, a, d.answer_us, d.end, queue_depth=depth, service_us=d.end - d.begin)


class _TrajectoryStore:
    """What a producer's transport asks in a round: the trajectory's answer; records the arrival."""

    def __init__(self, trajectory: Trajectory, broker: int, work: ArrivalWork) -> None:
        self.trajectory, self.broker, self.work = trajectory, broker, work

    def offer(self, arrival_ms: int, wire_bytes: int) -> StoreAnswer:
        cell = self.work.setdefault((self.broker, arrival_ms), [0, 0])
        cell[0] += 1
        cell[1] += wire_bytes
        return self.trajectory.answer(arrival_ms, wire_bytes)


class _TrajectoryCluster:
    def __init__(self, trajectories: list[Trajectory], brokers: tuple[str, ...]) -> None:
        self.trajectories, self.brokers = trajectories, brokers
        self.work: ArrivalWork = {}

    def store(self, broker: str) -> _TrajectoryStore:
        b = self.brokers.index(broker)
        return _TrajectoryStore(self.trajectories[b], b, self.work)


def _params(sc: Scenario) -> list[StoreParams]:
    return [s.params for s in StoreCluster.from_scenario(sc).stores]


def trajectories(sc: Scenario, work: ArrivalWork | None) -> list[Trajectory]:
    """Every broker's trajectory from a round's arrival work (None: idle brokers)."""
    params = _params(sc)
    per_broker: list[list[tuple[int, int, int]]] = [[] for _ in params]
    for (b, ms), (count, size) in sorted((work or {}).items()):
        per_broker[b].append((ms, count, size))
    return [Trajectory.replay(p, w) for p, w in zip(params, per_broker, strict=True)]


def arrival_work(parts: list[ArrivalWork]) -> ArrivalWork:
    """Arrival work merged (sums: any order, any split gives the same)."""
    out: ArrivalWork = {}
    for part in parts:
        for key, (count, size) in part.items():
            cell = out.setdefault(key, [0, 0])
            cell[0] += count
            cell[1] += size
    return out


def work_table(work: ArrivalWork) -> pa.Table:
    """Arrival work as rows of :data:`WORK_SCHEMA`, in (broker, ms) order."""
    keys = sorted(work)
    cells = [work[k] for k in keys]
    return pa.table(
        [
            pa.array([b for b, _ in keys], pa.int32()),
            pa.array([ms for _, ms in keys], pa.int64()),
            pa.array([c for c, _ in cells], pa.int64()),
            pa.array([n for _, n in cells], pa.int64()),
        ],
        schema=WORK_SCHEMA,
    )


def work_from_table(rows: pa.Table) -> ArrivalWork:
    """:func:`work_table`'s rows back as arrival work (one part: merge parts with :func:`arrival_work`)."""
    cols = [rows.column(n).to_pylist() for n in WORK_SCHEMA.names]
    return {(b, ms): [c, n] for b, ms, c, n in zip(*cols, strict=True)}


def trajectories_to_bytes(trajs: list[Trajectory]) -> bytes:
    """Every broker's trajectory as bytes (numpy ``.npz``, no pickle), for a round's producer tasks."""
    buf = io.BytesIO()
    arrays = {f"{b}.{k}": v for b, t in enumerate(trajs) for k, v in t.arrays().items()}
    np.savez(buf, brokers=np.asarray([len(trajs)], np.int64), **arrays)
    return buf.getvalue()


def trajectories_from_bytes(sc: Scenario, data: bytes) -> list[Trajectory]:
    """:func:`trajectories_to_bytes` read back (the stores' parameters from ``sc``)."""
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        params = _params(sc)
        if int(z["brokers"][0]) != len(params):
            raise ValueError(f"trajectories of {int(z['brokers'][0])} brokers for {len(params)} brokers")
        return [
            Trajectory.from_arrays(p, {k: z[f"{b}.{k}"] for k in _TRAJECTORY_ARRAYS})
            for b, p in enumerate(params)
        ]


def simulate_round(
    messages: pa.Table, sc: Scenario, producer: int, trajs: list[Trajectory]
) -> tuple[SimOutput, ArrivalWork]:
    """One producer in one round: its tables against ``trajs``, and the arrival work it made."""
    if messages.num_rows == 0:
        return SimOutput.empty(), {}
    cluster = _TrajectoryCluster(trajs, tuple(sc.cluster.brokers))
    prep = prepare(messages, sc)
    sends = sends_of(prep)
    sim = ProducerSimulation(sc, producer, cluster)  # type: ignore[arg-type]
    done = sim.run(sends)
    out, ranks = engine_output(sc, len(sends), done, sim.store_answers)
    return producer_tables(prep, out, ranks), cluster.work


@dataclass(frozen=True)
class IterativeRun:
    outputs: dict[int, SimOutput]
    rounds: int
    residual: int  # (broker, ms) buckets whose arrival work changed in the last round (0: fixed point)


def residual(a: ArrivalWork | None, b: ArrivalWork) -> int:
    """How many (broker, ms) buckets differ between two rounds' arrival work."""
    if a is None:
        return len(b) or 1
    return sum(1 for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def converged(
    previous: ArrivalWork | None, work: ArrivalWork, rounds: int, max_rounds: int
) -> tuple[bool, int]:
    """After round ``rounds`` made ``work`` (the round before made ``previous``): whether it is the last
    (a fixed point, or the round limit), and its residual."""
    left = residual(previous, work)
    return left == 0 or rounds >= max_rounds, left


def simulate_iterative(
    messages: Mapping[int, pa.Table], sc: Scenario, max_rounds: int = MAX_ROUNDS
) -> IterativeRun:
    """Every producer's tables by rounds to a fixed point (module docstring), in one process."""
    previous: ArrivalWork | None = None
    trajs = trajectories(sc, None)
    rounds, left = 0, 0
    outputs: dict[int, SimOutput] = {}
    while True:
        rounds += 1
        parts = []
        for p in sorted(messages):
            outputs[p], work = simulate_round(messages[p], sc, p, trajs)
            parts.append(work)
        work = arrival_work(parts)
        last, left = converged(previous, work, rounds, max_rounds)
        if last:
            return IterativeRun(outputs, rounds, left)
        previous, trajs = work, trajectories(sc, work)
