"""``brokers.coupling = "iterative"``: the closed-loop brokers by rounds to a fixed point, per producer.

More: docs/reference/modules.md, rocketsim/engine/iterative.py.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from rocketsim.broker.queue import (
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
from rocketsim.engine import trajectory_layout as tl
from rocketsim.engine.choice import COMPILED, REFERENCE, chosen
from rocketsim.engine.plan import SimChunk, SimOutput, chunk_cuts, gather_chunks, prepare, slice_output
from rocketsim.engine.reference import ProducerSimulation, engine_output, producer_tables, sends_of
from rocketsim.scenario import Scenario

__all__ = [
    "EMPTY_WORK",
    "MAX_ROUNDS",
    "WORK_SCHEMA",
    "ArrivalWork",
    "IterativeRun",
    "Trajectories",
    "Trajectory",
    "arrival_work",
    "converged",
    "replayed",
    "round_chunks",
    "round_work",
    "simulate_iterative",
    "simulate_round",
    "simulate_round_reference",
    "stops",
    "store_params",
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
    """One broker's store state per ms, replayed from a round's arrival work (module docstring): the
    columns of :mod:`rocketsim.engine.trajectory_layout` (``snap``, ``mid``, ``leave``, ``busy``;
    :meth:`arrays`), the compiled answer's layout too."""

    params: StoreParams
    snap: np.ndarray = field(default_factory=lambda: tl.empty_columns()["snap"])
    mid: np.ndarray = field(default_factory=lambda: tl.empty_columns()["mid"])
    leave: np.ndarray = field(default_factory=lambda: tl.empty_columns()["leave"])
    busy: np.ndarray = field(default_factory=lambda: tl.empty_columns()["busy"])  # [from, to) ms spans
    _busy_list: list[tuple[int, int]] | None = field(default=None, repr=False)

    @classmethod
    def replay(cls, params: StoreParams, ms: np.ndarray, count: np.ndarray, size: np.ndarray) -> Trajectory:
        """The store over one broker's arrival work (ascending ``ms``, ``count`` requests and ``size``
        bytes each): each ms's requests share its bytes. The readable one; its compiled twin is
        :func:`rocketsim.engine.compiled_store.replay` (:func:`trajectories` chooses)."""
        store = BrokerStore(params)
        rows: list[list[int]] = []
        mids: list[list[int]] = []
        queued_leaves: list[int] = []
        for m, c, n in zip(ms.tolist(), count.tolist(), size.tolist(), strict=True):
            base = m * 1000
            k = (c - 1) // 2  # the others ahead of a request of this ms, on average
            for i in range(c):
                if i == k and k > 0:  # others of its ms before it (else: the state after the ms before)
                    while store.queued and store.queued[0] <= base:  # as offer() does first
                        heapq.heappop(store.queued)
                    free = [max(0, store.threads[0] - base), max(0, store.writer_free_us - base)]
                    mids.append([m, *free, len(store.queued)])
                wire = n // c + (1 if i < n % c else 0)
                ans = store.offer(m, wire)
                if ans.left_us > ans.arrival_us:
                    queued_leaves.append(ans.left_us)
            after = [max(0, store.threads[0] - base), max(0, store.writer_free_us - base)]
            rows.append([m, *after, len(store.admitted_ms), len(queued_leaves)])
        snap = np.asarray(rows, np.int64).reshape(-1, tl.N_SNAP_COLUMNS).T
        return cls(
            params,
            np.ascontiguousarray(snap),
            np.ascontiguousarray(np.asarray(mids, np.int64).reshape(-1, tl.N_MID_COLUMNS).T),
            tl.leave_rows(np.asarray(queued_leaves, np.int64)),
            np.asarray(store.busy_log, np.int64).reshape(-1, 2),
        )

    def arrays(self) -> dict[str, np.ndarray]:
        """Its columns (:func:`rocketsim.engine.trajectory_layout.pack`)."""
        return {"snap": self.snap, "mid": self.mid, "leave": self.leave, "busy": self.busy}

    @classmethod
    def from_arrays(cls, params: StoreParams, a: Mapping[str, np.ndarray]) -> Trajectory:
        return cls(params, a["snap"], a["mid"], a["leave"], a["busy"])

    def same(self, other: Trajectory) -> bool:
        """Whether two trajectories hold the same state."""
        return all(np.array_equal(v, other.arrays()[k]) for k, v in self.arrays().items())

    def admitted_by(self, ms: int) -> int:
        """Requests the queue took at or before ``ms`` (the sweeper's size of queue is a difference)."""
        i = int(np.searchsorted(self.snap[tl.C_MS], ms, "right")) - 1
        return int(self.snap[tl.C_ADMITTED, i]) if i >= 0 else 0

    def state(self, ms: int) -> tuple[int, int, int]:
        """(first free send thread, free writer, queue depth) for a request arriving at ``ms`` (a thread
        or writer free before the snapshot's ms began is given as free then)."""
        i = int(np.searchsorted(self.snap[tl.C_MS], ms, "right")) - 1
        if i >= 0 and int(self.snap[tl.C_MS, i]) == ms:  # the ms's middle request
            j = int(np.searchsorted(self.mid[tl.M_MS], ms, "left"))
            if j < self.mid.shape[1] and int(self.mid[tl.M_MS, j]) == ms:
                _, thread, writer, depth = self.mid[:, j].tolist()
                return ms * 1000 + thread, ms * 1000 + writer, depth
            i -= 1  # the first of its ms: the state after the ms before
        if i < 0:
            return 0, 0, 0
        at, thread, writer, _, queued = self.snap[:, i].tolist()
        j = int(np.searchsorted(self.leave[tl.L_MS], ms, "right")) - 1
        left = int(self.leave[tl.L_LEFT, j]) if j >= 0 else 0
        return at * 1000 + thread, at * 1000 + writer, max(0, queued - left)

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
            size = self.admitted_by(d.tick) - self.admitted_by(ms)
            remark = sweep_remark(d.fate, d.tick - ms, str(max(size, 0)))
            return StoreAnswer(d.fate, a, d.answer_us, remark=remark, queue_depth=depth)
        return StoreAnswer(Fate.SERVED, a, d.answer_us, d.end, queue_depth=depth, service_us=d.end - d.begin)


class Trajectories(Sequence[Trajectory]):
    """Every broker's trajectory, packed once (:mod:`rocketsim.engine.trajectory_layout`): the compiled
    engine reads the packed arrays (:attr:`tables`), the readable one the brokers' views of them."""

    def __init__(self, params: Sequence[StoreParams], head: np.ndarray, data: np.ndarray) -> None:
        self.tables = compiled_store.StoreTables(
            compiled_store.params_rows(params), head, data, np.zeros(0, np.int64)
        )
        self.brokers = tuple(
            Trajectory.from_arrays(p, tl.unpack(head, data, b)) for b, p in enumerate(params)
        )

    @classmethod
    def of(cls, trajs: Sequence[Trajectory]) -> Trajectories:
        """The trajectories packed."""
        stalls = [compiled_store.stall_array(t.params) for t in trajs]
        head, data = tl.pack([t.arrays() for t in trajs], stalls)
        return cls([t.params for t in trajs], head, data)

    def __getitem__(self, b):  # type: ignore[override]
        return self.brokers[b]

    def __len__(self) -> int:
        return len(self.brokers)

    def to_bytes(self) -> bytes:
        return tl.to_bytes(self.tables.head, self.tables.data, len(self.brokers))


class _TrajectoryStore:
    """What a producer's transport asks in a round: the trajectory's answer; records the arrival."""

    def __init__(self, trajectory: Trajectory, broker: int, requests: list[tuple[int, int, int]]) -> None:
        self.trajectory, self.broker, self.requests = trajectory, broker, requests

    def offer(self, arrival_ms: int, wire_bytes: int) -> StoreAnswer:
        self.requests.append((self.broker, arrival_ms, wire_bytes))
        return self.trajectory.answer(arrival_ms, wire_bytes)

    @property
    def params(self) -> StoreParams:
        return self.trajectory.params

    def offer_us(self, arrival_us: int, wire_bytes: int) -> StoreAnswer:
        """:meth:`offer` at its whole ms (the rounds work in ms)."""
        return self.offer(arrival_us // 1000, wire_bytes)

    def run_cpu(self, ready_us: float, work_us: float) -> float:
        return ready_us + work_us  # no shared host in the rounds (producers.shared_host needs joint)


class _TrajectoryCluster:
    def __init__(self, trajectories: Sequence[Trajectory], brokers: tuple[str, ...]) -> None:
        self.trajectories, self.brokers = trajectories, brokers
        self.requests: list[tuple[int, int, int]] = []

    def store(self, broker: str) -> _TrajectoryStore:
        b = self.brokers.index(broker)
        return _TrajectoryStore(self.trajectories[b], b, self.requests)

    def work(self) -> ArrivalWork:
        cols = np.asarray(self.requests, np.int64).reshape(-1, 3)
        return ArrivalWork.of_requests(cols[:, 0], cols[:, 1], cols[:, 2])


def store_params(sc: Scenario) -> list[StoreParams]:
    """Every broker's store parameters, in the cluster's broker order."""
    return [s.params for s in StoreCluster.from_scenario(sc).stores]


def trajectories(sc: Scenario, work: ArrivalWork | None) -> Trajectories:
    """Every broker's trajectory from a round's arrival work (None: idle brokers), :func:`replayed`."""
    work = EMPTY_WORK if work is None else work
    return Trajectories.of([replayed(p, *work.of_broker(b)) for b, p in enumerate(store_params(sc))])


def replayed(p: StoreParams, ms: np.ndarray, count: np.ndarray, size: np.ndarray) -> Trajectory:
    """One broker's trajectory from its arrival work (:meth:`ArrivalWork.of_broker`), replayed by the
    engine ``ROCKETSIM_ENGINE`` names: the readable :meth:`Trajectory.replay` with ``reference``, else its
    compiled twin :func:`rocketsim.engine.compiled_store.replay`."""
    if chosen() == REFERENCE:
        return Trajectory.replay(p, ms, count, size)
    return Trajectory.from_arrays(p, tl.compact(compiled_store.replay(p, ms, count, size)))


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


def trajectories_to_bytes(trajs: Sequence[Trajectory]) -> bytes:
    """Every broker's trajectory as bytes (:func:`rocketsim.engine.trajectory_layout.to_bytes`), for a
    round's producer tasks."""
    return _packed(trajs).to_bytes()


def trajectories_from_bytes(sc: Scenario, data: bytes | np.ndarray) -> Trajectories:
    """:func:`trajectories_to_bytes` read back (the stores' parameters from ``sc``), viewing ``data``
    (bytes, or a uint8 array such as a file mapped copy-on-write) without a copy."""
    buf = np.frombuffer(bytearray(data), np.uint8) if isinstance(data, bytes) else np.asarray(data)
    brokers, head, arrays = tl.from_buffer(buf)
    params = store_params(sc)
    if brokers != len(params):
        raise ValueError(f"trajectories of {brokers} brokers for {len(params)} brokers")
    return Trajectories(params, head, arrays)


def simulate_round(
    messages: pa.Table, sc: Scenario, producer: int, trajs: Sequence[Trajectory]
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


def round_work(
    chunks: Iterable[pa.Table | pa.RecordBatch], sc: Scenario, producer: int, trajs: Sequence[Trajectory]
) -> ArrivalWork:
    """:func:`simulate_round`'s arrival work alone, what a round that is not the last hands on (one
    producer's messages in chunks, seq order): the same work, cheaper. The compiled engine streams the
    chunks and makes no table (:func:`rocketsim.engine.compiled.round_requests`: a producer's memory is its
    chunks in flight); the readable one simulates whole (:func:`simulate_round_reference`). The engine is
    told from the first chunk."""
    it = iter(chunks)
    first = next(it, None)
    if first is None:
        return EMPTY_WORK
    table = first if isinstance(first, pa.Table) else pa.Table.from_batches([first])
    name = chosen()
    if name == COMPILED or (name is None and compiled.unsupported(sc, table) is None):
        requests = compiled.round_requests(itertools.chain([table], it), sc, _tables(trajs))
        return ArrivalWork.of_requests(requests[:, 0], requests[:, 1], requests[:, 2])
    messages, _ = gather_chunks(itertools.chain([table], it))
    return simulate_round_reference(messages, sc, producer, trajs)[1]


def round_chunks(
    chunks: Iterable[pa.Table | pa.RecordBatch],
    sc: Scenario,
    producer: int,
    trajs: Sequence[Trajectory],
    work: list[ArrivalWork] | None = None,
) -> Iterator[SimChunk]:
    """:func:`simulate_round`'s tables a chunk at a time (the last round's rows; one producer's messages in
    chunks, seq order): the compiled engine streams them against the trajectories
    (:func:`rocketsim.engine.compiled.simulate_chunks`: a producer's memory is its chunks in flight, as in
    an open run); the readable one simulates whole, then cuts. The engine is told from the first chunk.
    ``work``: the producer's arrival work (:func:`simulate_round`'s) is added to it once every chunk is
    out (a round that makes its rows hands it on)."""
    it = iter(chunks)
    first = next(it, None)
    if first is None:
        return iter(())
    table = first if isinstance(first, pa.Table) else pa.Table.from_batches([first])
    name = chosen()
    if name == COMPILED or (name is None and compiled.unsupported(sc, table) is None):
        if work is None:
            return compiled.simulate_chunks(itertools.chain([table], it), sc, _tables(trajs))
        requests: list[np.ndarray] = []
        out = compiled.simulate_chunks(itertools.chain([table], it), sc, _tables(trajs), requests)
        return _then_work(out, requests, work)
    messages, ends = gather_chunks(itertools.chain([table], it))
    out, made = simulate_round_reference(messages, sc, producer, trajs)
    if work is not None:
        work.append(made)
    return iter(slice_output(messages, out, chunk_cuts(messages, ends)))


def _then_work(
    chunks: Iterator[SimChunk], requests: list[np.ndarray], work: list[ArrivalWork]
) -> Iterator[SimChunk]:
    """``chunks``, then the arrival work of the ``requests`` they gathered added to ``work``."""
    yield from chunks
    cols = np.concatenate([np.zeros((0, 3), np.int64), *requests])
    work.append(ArrivalWork.of_requests(cols[:, 0], cols[:, 1], cols[:, 2]))


def _packed(trajs: Sequence[Trajectory]) -> Trajectories:
    return trajs if isinstance(trajs, Trajectories) else Trajectories.of(trajs)


def _tables(trajs: Sequence[Trajectory]) -> compiled_store.StoreTables:
    """The trajectories' packed arrays for the compiled engine (packed already by :func:`trajectories`
    and :func:`trajectories_from_bytes`)."""
    return _packed(trajs).tables


def simulate_round_reference(
    messages: pa.Table, sc: Scenario, producer: int, trajs: Sequence[Trajectory]
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
    return stops(left, rounds, max_rounds), left


def stops(left: int, rounds: int, max_rounds: int) -> bool:
    """Whether round ``rounds``, whose residual is ``left``, is the last: a fixed point, or the limit."""
    return left == 0 or rounds >= max_rounds


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
