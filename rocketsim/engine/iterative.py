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

Speed: a round's producers run on the compiled engine (:func:`rocketsim.engine.compiled.simulate_round`,
the trajectories as :class:`rocketsim.engine.compiled_store.StoreTables`), the trajectories are replayed
compiled (:func:`rocketsim.engine.compiled_store.replay`) and the arrival work is numpy arrays
(:class:`ArrivalWork`); ``ROCKETSIM_ENGINE=reference`` runs the readable twins.

Against :mod:`rocketsim.engine.joint` (exact) the approximations are: a request does not see the requests
of its own ms in order, only half of them; a producer sees its own earlier load through the trajectory of
the previous round; the sweeper's ``size of queue`` counts the trajectory's admissions.
tests/test_engine_iterative.py states how close it comes.
"""

from __future__ import annotations

import heapq
import io
import weakref
from collections.abc import Mapping, Sequence
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
from rocketsim.engine import compiled, compiled_store
from rocketsim.engine.choice import COMPILED, REFERENCE, chosen
from rocketsim.engine.plan import SimOutput, prepare
from rocketsim.engine.reference import ProducerSimulation, engine_output, producer_tables, sends_of
from rocketsim.scenario import Scenario

__all__ = [
    "EMPTY_WORK",
    "MAX_ROUNDS",
    "WORK_SCHEMA",
    "ArrivalWork",
    "IterativeRun",
    "Trajectory",
    "arrival_work",
    "converged",
    "simulate_iterative",
    "simulate_round",
    "simulate_round_reference",
    "trajectories",
    "trajectories_from_bytes",
    "trajectories_to_bytes",
    "work_from_table",
    "work_table",
]

MAX_ROUNDS = 12

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
_MS_BITS = 40  # a (broker, ms) bucket's key: broker << 40 | ms


@dataclass(frozen=True, eq=False)
class ArrivalWork:
    """A round's arrival work: per (broker, ms) bucket with arrivals, the requests' count and bytes (int64
    arrays sorted by (broker, ms), one entry per bucket). Sums: mergeable in any order
    (:func:`arrival_work`)."""

    broker: np.ndarray
    ms: np.ndarray
    count: np.ndarray
    bytes: np.ndarray

    @classmethod
    def of(cls, broker: np.ndarray, ms: np.ndarray, count: np.ndarray, size: np.ndarray) -> ArrivalWork:
        """Work from cells in any order, several per bucket allowed (summed, with numpy)."""
        broker, ms = np.asarray(broker, np.int64), np.asarray(ms, np.int64)
        count, size = np.asarray(count, np.int64), np.asarray(size, np.int64)
        if broker.size == 0:
            return cls(broker, ms, count, size)
        key = (broker << _MS_BITS) | ms
        order = np.argsort(key, kind="stable")
        key = key[order]
        first = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
        return cls(
            key[first] >> _MS_BITS,
            key[first] & ((1 << _MS_BITS) - 1),
            np.add.reduceat(count[order], first),
            np.add.reduceat(size[order], first),
        )

    @classmethod
    def of_requests(cls, broker: np.ndarray, ms: np.ndarray, wire: np.ndarray) -> ArrivalWork:
        """Work from single requests (broker, arrival ms, bytes)."""
        return cls.of(broker, ms, np.ones(np.asarray(ms).size, np.int64), wire)

    @classmethod
    def of_cells(cls, cells: Mapping[tuple[int, int], Sequence[int]]) -> ArrivalWork:
        """Work from a mapping (broker, ms) -> (count, bytes)."""
        keys = list(cells)
        values = [cells[k] for k in keys]
        return cls.of(
            np.asarray([b for b, _ in keys], np.int64),
            np.asarray([m for _, m in keys], np.int64),
            np.asarray([c for c, _ in values], np.int64),
            np.asarray([n for _, n in values], np.int64),
        )

    def keys(self) -> np.ndarray:
        return (self.broker << _MS_BITS) | self.ms

    @property
    def buckets(self) -> int:
        return int(self.ms.size)

    @property
    def requests(self) -> int:
        return int(self.count.sum())

    def of_broker(self, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Broker ``b``'s (ms, count, bytes), ascending ms."""
        lo, hi = np.searchsorted(self.broker, [b, b + 1])
        return self.ms[lo:hi], self.count[lo:hi], self.bytes[lo:hi]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ArrivalWork):
            return NotImplemented
        return all(
            np.array_equal(getattr(self, f), getattr(other, f)) for f in ("broker", "ms", "count", "bytes")
        )


EMPTY_WORK = ArrivalWork.of(*(np.zeros(0, np.int64) for _ in range(4)))


@dataclass(eq=False)
class Trajectory:
    """One broker's store state per ms, replayed from a round's arrival work (module docstring); int64
    arrays (:meth:`arrays`)."""

    params: StoreParams
    snap_ms: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # ms with arrivals, ascending
    mid: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int64))  # (thread, writer, depth)
    after: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))  # (thread, writer) after
    admitted_ms: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # sorted
    leave_us: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # sorted
    busy: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))  # [from, to) ms spans
    _busy_list: list[tuple[int, int]] | None = field(default=None, repr=False)

    @classmethod
    def replay(cls, params: StoreParams, ms: np.ndarray, count: np.ndarray, size: np.ndarray) -> Trajectory:
        """The store over one broker's arrival work (ascending ``ms``, ``count`` requests and ``size``
        bytes each): each ms's requests share its bytes. The readable one; its compiled twin is
        :func:`rocketsim.engine.compiled_store.replay` (:func:`trajectories` chooses)."""
        store = BrokerStore(params)
        snap_ms: list[int] = []
        mid: list[tuple[int, int, int]] = []
        after: list[tuple[int, int]] = []
        leaves: list[int] = []
        for m, c, n in zip(ms.tolist(), count.tolist(), size.tolist(), strict=True):
            k = (c - 1) // 2  # the others ahead of a request of this ms, on average
            for i in range(c):
                if i == k:
                    while store.queued and store.queued[0] <= m * 1000:  # as offer() does first
                        heapq.heappop(store.queued)
                    snap_ms.append(m)
                    mid.append((store.threads[0], store.writer_free_us, len(store.queued)))
                wire = n // c + (1 if i < n % c else 0)
                ans = store.offer(m, wire)
                if ans.left_us >= 0:
                    leaves.append(ans.left_us)
            after.append((store.threads[0], store.writer_free_us))
        return cls.from_arrays(
            params,
            {
                "snap_ms": np.asarray(snap_ms, np.int64),
                "mid": np.asarray(mid, np.int64).reshape(-1, 3),
                "after": np.asarray(after, np.int64).reshape(-1, 2),
                "admitted_ms": np.asarray(store.admitted_ms, np.int64),
                "leave_us": np.sort(np.asarray(leaves, np.int64)),
                "busy": np.asarray(store.busy_log, np.int64).reshape(-1, 2),
            },
        )

    def arrays(self) -> dict[str, np.ndarray]:
        """Its state as int64 arrays (:func:`trajectories_to_bytes`)."""
        return {k: getattr(self, k) for k in _TRAJECTORY_ARRAYS}

    @classmethod
    def from_arrays(cls, params: StoreParams, a: Mapping[str, np.ndarray]) -> Trajectory:
        return cls(params, *(np.asarray(a[k], np.int64) for k in _TRAJECTORY_ARRAYS))

    def same(self, other: Trajectory) -> bool:
        """Whether two trajectories hold the same state."""
        return all(np.array_equal(getattr(self, k), getattr(other, k)) for k in _TRAJECTORY_ARRAYS)

    def state(self, ms: int) -> tuple[int, int, int]:
        """(first free send thread, free writer, queue depth) for a request arriving at ``ms``."""
        i = int(np.searchsorted(self.snap_ms, ms, "right")) - 1
        if i >= 0 and int(self.snap_ms[i]) == ms:
            thread, writer, depth = self.mid[i].tolist()
            return thread, writer, depth
        thread, writer = self.after[i].tolist() if i >= 0 else (0, 0)
        arrived = int(np.searchsorted(self.admitted_ms, ms, "left"))
        left = int(np.searchsorted(self.leave_us, ms * 1000, "right"))
        return thread, writer, max(0, arrived - left)

    def answer(self, ms: int, wire: int) -> StoreAnswer:
        """The store's answer to a request arriving at ``ms`` (the readable one; compiled:
        :func:`rocketsim.engine.compiled_store.trajectory_answer`)."""
        if self._busy_list is None:
            self._busy_list = [(lo, hi) for lo, hi in self.busy.tolist()]
        thread, writer, depth = self.state(ms)
        a = ms * 1000
        d = decide(self.params, self._busy_list, a, wire, depth, thread, writer)
        if d.fate in (Fate.REJECT_REQUEST, Fate.OVERLOAD, Fate.PC_SYNCHRONIZED):
            return StoreAnswer(
                d.fate, a, d.answer_us, remark=REMARKS[d.fate], queue_depth=depth, pc_code=self.params.pc_code
            )
        if d.tick >= 0:
            size = int(np.searchsorted(self.admitted_ms, d.tick, "right")) - int(
                np.searchsorted(self.admitted_ms, ms, "right")
            )
            remark = sweep_remark(d.fate, d.tick - ms, str(max(size, 0)))
            return StoreAnswer(d.fate, a, d.answer_us, remark=remark, queue_depth=depth)
        return StoreAnswer(Fate.SERVED, a, d.answer_us, d.end, queue_depth=depth, service_us=d.end - d.begin)


class _TrajectoryStore:
    """What a producer's transport asks in a round: the trajectory's answer; records the arrival."""

    def __init__(self, trajectory: Trajectory, broker: int, requests: list[tuple[int, int, int]]) -> None:
        self.trajectory, self.broker, self.requests = trajectory, broker, requests

    def offer(self, arrival_ms: int, wire_bytes: int) -> StoreAnswer:
        self.requests.append((self.broker, arrival_ms, wire_bytes))
        return self.trajectory.answer(arrival_ms, wire_bytes)


class _TrajectoryCluster:
    def __init__(self, trajectories: list[Trajectory], brokers: tuple[str, ...]) -> None:
        self.trajectories, self.brokers = trajectories, brokers
        self.requests: list[tuple[int, int, int]] = []

    def store(self, broker: str) -> _TrajectoryStore:
        b = self.brokers.index(broker)
        return _TrajectoryStore(self.trajectories[b], b, self.requests)

    def work(self) -> ArrivalWork:
        cols = np.asarray(self.requests, np.int64).reshape(-1, 3)
        return ArrivalWork.of_requests(cols[:, 0], cols[:, 1], cols[:, 2])


def _params(sc: Scenario) -> list[StoreParams]:
    return [s.params for s in StoreCluster.from_scenario(sc).stores]


def trajectories(sc: Scenario, work: ArrivalWork | None) -> list[Trajectory]:
    """Every broker's trajectory from a round's arrival work (None: idle brokers), replayed by the engine
    ``ROCKETSIM_ENGINE`` names: the readable :meth:`Trajectory.replay` with ``reference``, else its compiled
    twin :func:`rocketsim.engine.compiled_store.replay`."""
    work = EMPTY_WORK if work is None else work
    out = []
    for b, p in enumerate(_params(sc)):
        ms, count, size = work.of_broker(b)
        if chosen() == REFERENCE:
            out.append(Trajectory.replay(p, ms, count, size))
        else:
            out.append(Trajectory.from_arrays(p, compiled_store.replay(p, ms, count, size)))
    return out


def arrival_work(parts: Sequence[ArrivalWork]) -> ArrivalWork:
    """Arrival work merged (sums: any order, any split gives the same)."""
    parts = list(parts)
    if not parts:
        return EMPTY_WORK
    fields = ("broker", "ms", "count", "bytes")
    return ArrivalWork.of(*(np.concatenate([getattr(w, f) for w in parts]) for f in fields))


def work_table(work: ArrivalWork) -> pa.Table:
    """Arrival work as rows of :data:`WORK_SCHEMA`, in (broker, ms) order."""
    return pa.table(
        [
            pa.array(work.broker.astype(np.int32), pa.int32()),
            pa.array(work.ms, pa.int64()),
            pa.array(work.count, pa.int64()),
            pa.array(work.bytes, pa.int64()),
        ],
        schema=WORK_SCHEMA,
    )


def work_from_table(rows: pa.Table) -> ArrivalWork:
    """:func:`work_table`'s rows back as arrival work (one part: merge parts with :func:`arrival_work`)."""
    cols = [np.asarray(rows.column(n).to_numpy(), np.int64) for n in WORK_SCHEMA.names]
    return ArrivalWork.of(*cols)


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
    """One producer in one round: its tables against ``trajs``, and the arrival work it made. The engine:
    as :func:`rocketsim.engine.simulate_producer` chooses (``ROCKETSIM_ENGINE``; unset: the compiled
    :func:`rocketsim.engine.compiled.simulate_round` where it supports the messages, else
    :func:`simulate_round_reference`)."""
    if messages.num_rows == 0:
        return SimOutput.empty(), EMPTY_WORK
    name = chosen()
    if name == COMPILED or (name is None and compiled.unsupported(sc, messages) is None):
        out, requests = compiled.simulate_round(messages, sc, _tables(trajs))
        return out, ArrivalWork.of_requests(requests[:, 0], requests[:, 1], requests[:, 2])
    return simulate_round_reference(messages, sc, producer, trajs)


# the trajectories packed for the compiled engine, by their first: (weak references to all, the tables)
_PACKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _tables(trajs: list[Trajectory]) -> compiled_store.StoreTables:
    """The trajectories packed for the compiled engine, once per set of trajectories (a round's producer
    task simulates several producers against the same ones)."""
    hit = _PACKED.get(trajs[0])
    if hit is not None and [r() for r in hit[0]] == trajs:
        return hit[1]
    tables = compiled_store.store_tables([t.params for t in trajs], [t.arrays() for t in trajs])
    _PACKED[trajs[0]] = ([weakref.ref(t) for t in trajs], tables)
    return tables


def simulate_round_reference(
    messages: pa.Table, sc: Scenario, producer: int, trajs: list[Trajectory]
) -> tuple[SimOutput, ArrivalWork]:
    """:func:`simulate_round` on the readable engine (its compiled twin:
    :func:`rocketsim.engine.compiled.simulate_round`)."""
    if messages.num_rows == 0:
        return SimOutput.empty(), EMPTY_WORK
    cluster = _TrajectoryCluster(trajs, tuple(sc.cluster.brokers))
    prep = prepare(messages, sc)
    sends = sends_of(prep)
    sim = ProducerSimulation(sc, producer, cluster)  # type: ignore[arg-type]
    done = sim.run(sends)
    out, ranks = engine_output(sc, len(sends), done, sim.store_answers)
    return producer_tables(prep, out, ranks), cluster.work()


@dataclass(frozen=True)
class IterativeRun:
    outputs: dict[int, SimOutput]
    rounds: int
    residual: int  # (broker, ms) buckets whose arrival work changed in the last round (0: fixed point)


def residual(a: ArrivalWork | None, b: ArrivalWork) -> int:
    """How many (broker, ms) buckets differ between two rounds' arrival work."""
    if a is None:
        return b.buckets or 1
    _, ia, ib = np.intersect1d(a.keys(), b.keys(), assume_unique=True, return_indices=True)
    same = int(np.count_nonzero((a.count[ia] == b.count[ib]) & (a.bytes[ia] == b.bytes[ib])))
    return a.buckets + b.buckets - ia.size - same


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
