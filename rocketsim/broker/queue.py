"""The closed-loop broker store: a send queue, send threads and one commit-log writer, so load moves latency.

``brokers.coupling = "open"`` (the default) leaves every answer to :mod:`rocketsim.broker.latency` (latency
drawn independently of load). ``joint`` and ``iterative`` put each attempt the open model answers with a
latency (SEND_OK, or a slow answer the client times out on) through its broker's :class:`BrokerStore`:

More: docs/reference/modules.md, rocketsim/broker/queue.py.
"""

from __future__ import annotations

import bisect
import heapq
import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import NamedTuple

from rocketsim.broker import latency as bm
from rocketsim.broker.fault_kinds import Store
from rocketsim.client.host import Host
from rocketsim.client.outcomes import OutcomeKind
from rocketsim.client.versions import BrokerVersion
from rocketsim.client.wakeups import WakeupLeg, wakeup_leg
from rocketsim.scenario import Scenario, StoreConfig

SWEEP_FIRST_MS = 1000  # BrokerFastFailure.start: scheduleAtFixedRate(.., 1000, 10, MILLISECONDS)
SWEEP_PERIOD_MS = 10
BUSY_DIFF_LIMIT_MS = 10_000_000  # isOSPageCacheBusy: diff < 10000000
OPEN, JOINT, ITERATIVE = "open", "joint", "iterative"


class Fate(IntEnum):
    """What the store does with one request."""

    SERVED = 0  # appended (stored)
    REJECT_REQUEST = 1  # NettyRemotingAbstract.processRequestCommand: rejectRequest() (page cache busy)
    OVERLOAD = 2  # the send executor refused it (RejectedExecutionException: the queue is full)
    PC_SYNCHRONIZED = 3  # checkStoreStatus: OS_PAGECACHE_BUSY when a send thread took it
    PCBUSY_CLEAN_QUEUE = 4  # BrokerFastFailure.cleanExpiredRequest, page cache busy
    TIMEOUT_CLEAN_QUEUE = 5  # BrokerFastFailure.cleanExpiredRequestInQueue, waited too long


FATE_NAMES = tuple(f.name.lower() for f in Fate)
# send_attempts.busy_kind of each flow-control fate: the tag its remark starts with
BUSY_KINDS = {
    Fate.REJECT_REQUEST: "REJECTREQUEST",
    Fate.OVERLOAD: "OVERLOAD",
    Fate.PC_SYNCHRONIZED: "PC_SYNCHRONIZED",
    Fate.PCBUSY_CLEAN_QUEUE: "PCBUSY_CLEAN_QUEUE",
    Fate.TIMEOUT_CLEAN_QUEUE: "TIMEOUT_CLEAN_QUEUE",
}
SYSTEM_BUSY = bm.SYSTEM_BUSY

# the remarks, verbatim (4.9.8 and 5.3.3 alike): NettyRemotingAbstract.processRequestCommand,
# SendMessageProcessor.handlePutMessageResult (OS_PAGECACHE_BUSY), BrokerFastFailure
REMARKS = {
    Fate.REJECT_REQUEST: "[REJECTREQUEST]system busy, start flow control for a while",
    Fate.OVERLOAD: "[OVERLOAD]system busy, start flow control for a while",
    Fate.PC_SYNCHRONIZED: "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
    Fate.PCBUSY_CLEAN_QUEUE: "[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while, "
    "period in queue: %sms, size of queue: %d",
    Fate.TIMEOUT_CLEAN_QUEUE: "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, "
    "period in queue: %sms, size of queue: %d",
}
_MARK = re.compile("\x00q(\\d+):(\\d+):(\\d+)\x00")


def sweep_tick_at_or_after(ms: int) -> int:
    """The first run of ``BrokerFastFailure``'s sweeper at or after ``ms`` (broker started at 0)."""
    if ms <= SWEEP_FIRST_MS:
        return SWEEP_FIRST_MS
    return SWEEP_FIRST_MS + -(-(ms - SWEEP_FIRST_MS) // SWEEP_PERIOD_MS) * SWEEP_PERIOD_MS


@dataclass(frozen=True)
class Stall:
    """A ``store_stall`` fault: from ``start_us`` to ``end_us``, every ``period_us`` the disk makes no
    progress for ``stall_us``."""

    start_us: int
    end_us: int
    period_us: int
    stall_us: int

    def delay(self, begin_us: int, service_us: int) -> int:
        """How much longer an append over [begin, begin + service) takes: the part of the first stall
        overlapping it that lies after ``begin``."""
        k = max(0, (begin_us - self.start_us - self.stall_us) // self.period_us + 1)
        t0 = self.start_us + k * self.period_us
        if t0 >= self.end_us or t0 >= begin_us + service_us or t0 + self.stall_us <= begin_us:
            return 0
        return t0 + self.stall_us - max(begin_us, t0)


@dataclass(frozen=True)
class StoreParams:
    """One broker's store in flat numbers."""

    append_us: float
    send_threads: int
    capacity: int
    wait_ms: int
    busy_timeout_ms: int
    extra_us: int  # the SYNC_FLUSH / SYNC_MASTER waits added to a stored request's answer
    pc_code: int  # [PC_SYNCHRONIZED]'s response code (BrokerVersion.pc_synchronized_code)
    stalls: tuple[Stall, ...] = ()
    # [start, end) us in which the process takes no request (a paused process, Store.DEFERS): a request
    # that arrives then waits in its socket and reaches the send queue at the end, in arrival order
    holds: tuple[tuple[int, int], ...] = ()
    io_us: float = 0.0  # store.io_us: its CPU per request on a client connection's I/O thread
    reply_us: float = 0.0  # store.reply_us: its CPU per answer written back on that thread
    unlocked_share: float = 0.0  # store.unlocked_share: the append's part on the send thread, before the lock
    reput_share: float = 0.0  # store.reput_share: its part on the reput thread, after it
    codec_share: float = 0.0  # store.codec_share: io_us's part on the connection's codec thread
    selector_wakeup_us: float = 0.0  # store.selector_wakeup_us and selector_request_us: the selector's leg
    selector_request_us: float = 0.0
    codec_wakeup_us: float = 0.0  # store.codec_wakeup_us and codec_request_us: the codec thread's leg
    codec_request_us: float = 0.0

    @property
    def connection_us(self) -> float:
        """The connection's I/O thread's CPU per request: reading it and writing its answer back."""
        return self.io_us + self.reply_us

    @classmethod
    def from_config(
        cls, cfg: StoreConfig, version: BrokerVersion, faults: tuple[bm.FaultWindow, ...] = ()
    ) -> StoreParams:
        extra = (cfg.sync_flush_ms if cfg.flush == "sync" else 0.0) + (
            cfg.sync_replica_ms if cfg.replication == "sync" else 0.0
        )
        stalls = tuple(
            Stall(w.start_ms * 1000, w.end_ms * 1000, w.period_ms * 1000, w.down_ms * 1000)
            for w in faults
            if w.rule.store == Store.STALLS
        )
        holds = tuple((w.start_ms * 1000, w.end_ms * 1000) for w in faults if w.rule.store == Store.DEFERS)
        return cls(
            cfg.append_us,
            cfg.send_threads,
            cfg.send_queue_capacity,
            cfg.wait_time_ms_in_send_queue,
            cfg.os_page_cache_busy_timeout_ms,
            int(round(extra * 1000)),
            version.pc_synchronized_code,
            stalls,
            holds,
            cfg.io_us,
            cfg.reply_us,
            cfg.unlocked_share,
            cfg.reput_share,
            cfg.codec_share,
            cfg.selector_wakeup_us,
            cfg.selector_request_us,
            cfg.codec_wakeup_us,
            cfg.codec_request_us,
        )

    def held_until(self, t_us: int) -> int:
        """When a request that arrives at ``t_us`` is taken: at once, or at the end of a hold over it."""
        return next((end for start, end in self.holds if start <= t_us < end), t_us)

    def service_us(self, wire_bytes: int) -> int:
        """The append's time: ``append_us`` per KiB of the request, at least 1 us."""
        return max(1, int(round(self.append_us * wire_bytes / 1024)))


@dataclass(frozen=True)
class StoreAnswer:
    """The store's answer to one request (times in us from the scenario start)."""

    fate: Fate
    arrival_us: int
    answer_us: int  # when the broker answers
    stored_us: int = -1  # when the append ended (SERVED), else -1
    remark: str = ""
    queue_depth: int = 0  # requests in the send queue when it arrived (before it)
    left_us: int = -1  # when it left the send queue (taken by a thread or swept); -1: never queued
    service_us: int = 0  # the writer's time of its append (SERVED: end - begin, a stall included)

    pc_code: int = SYSTEM_BUSY  # the broker's [PC_SYNCHRONIZED] code (StoreParams.pc_code)

    @property
    def code(self) -> int:
        """The response code: :func:`answer_code`."""
        return answer_code(self.fate, self.pc_code)

    @property
    def stored(self) -> bool:
        return self.fate == Fate.SERVED

    @property
    def busy_kind(self) -> str | None:
        """``send_attempts.busy_kind``: the flow-control tag of a rejection, None when served."""
        return BUSY_KINDS.get(self.fate)


def sweep_remark(fate: Fate, period_ms: int, size: str) -> str:
    """A sweeper's remark with its ``%s`` (period in queue) and ``%d`` (size of queue) filled in."""
    return REMARKS[fate].replace("%s", str(period_ms)).replace("%d", size)


class Decision(NamedTuple):
    """:func:`decide`'s verdict: the fate, when the broker answers, the sweep tick (-1: none), when a
    send thread takes the request, and its append's begin and end (0 where none)."""

    fate: Fate
    answer_us: int
    tick: int = -1
    taken: int = 0
    begin: int = 0
    end: int = 0


def _busy_at(busy: Sequence[tuple[int, int]], t_ms: int) -> bool:
    return any(lo <= t_ms < hi for lo, hi in busy)


def _first_busy_tick(busy: Sequence[tuple[int, int]], from_ms: int, before_us: int) -> int:
    for lo, hi in busy:
        t = sweep_tick_at_or_after(max(from_ms, lo))
        if t < hi and t * 1000 < before_us:
            return t
    return -1


def decide(
    p: StoreParams,
    busy: Sequence[tuple[int, int]],
    a: int,
    wire_bytes: int,
    depth: int,
    thread_free_us: int,
    writer_free_us: int,
) -> Decision:
    """The fate of a request arriving at ``a`` (us) given the store's state then: ``busy`` (the page
    cache's busy [from, to) ms), ``depth`` requests queued, the first send thread free at
    ``thread_free_us``, the writer free at ``writer_free_us`` (the rules of the module docstring). Its
    compiled twin (the compiled engine's iterative rounds): :func:`rocketsim.engine.compiled_store.decide`."""
    a_ms = a // 1000
    if _busy_at(busy, a_ms):
        return Decision(Fate.REJECT_REQUEST, a)
    if depth >= p.capacity:
        return Decision(Fate.OVERLOAD, a)
    taken = max(a, thread_free_us)
    if taken > a:  # it waits in the queue: the sweeper may answer it first
        t_pc = _first_busy_tick(busy, a_ms, taken)
        t_to = sweep_tick_at_or_after(a_ms + p.wait_ms)
        if t_pc >= 0 and (t_pc <= t_to or t_to * 1000 >= taken):  # cleanExpiredRequest drains first
            return Decision(Fate.PCBUSY_CLEAN_QUEUE, t_pc * 1000, t_pc)
        if t_to * 1000 < taken:
            return Decision(Fate.TIMEOUT_CLEAN_QUEUE, t_to * 1000, t_to)
    if _busy_at(busy, taken // 1000):  # checkStoreStatus: the thread answers at once
        return Decision(Fate.PC_SYNCHRONIZED, taken, -1, taken)
    begin = max(taken, writer_free_us)
    service = p.service_us(wire_bytes)
    end = begin + service + sum(s.delay(begin, service) for s in p.stalls)
    return Decision(Fate.SERVED, end + p.extra_us, -1, taken, begin, end)


@dataclass
class ConnectionThreads:
    """A client connection's threads at the broker (``NettyRemotingServer``: its socket on one
    ``NettyServerNIOSelector_``, its decoding on one ``NettyServerCodecThread_``): when each is free, and
    each as a leg of a cost a wakeup and a cost a request (None: ``io_us``'s constant cost)."""

    free_us: list[float]  # selector, codec
    legs: tuple[WakeupLeg | None, WakeupLeg | None]
    # the two threads' names on the shared host (BrokerStore.named_threads; None: a thread of its own a piece)
    names: tuple[Hashable, Hashable] = (None, None)


@dataclass
class BrokerStore:
    """One broker's send queue, send threads and commit-log writer (see the module docstring); offer it
    requests in arrival order."""

    params: StoreParams
    index: int = 0  # the broker's place in cluster.brokers (in size markers)
    threads: list[int] = field(default_factory=list)  # heap of the send threads' free times
    writer_free_us: int = 0
    queued: list[int] = field(default_factory=list)  # heap: when each queued request leaves the queue
    busy: list[tuple[int, int]] = field(default_factory=list)  # [from, to) ms the page cache is busy
    busy_log: list[tuple[int, int]] = field(default_factory=list)  # every busy span, never pruned
    admitted_ms: list[int] = field(default_factory=list)  # arrival ms of each request the queue took
    last_us: int = 0
    served_us: list[tuple[int, int]] = field(default_factory=list)  # [begin, end) of each append
    cores: Host | None = None  # the producers' host when the broker runs on it (its CPU work there)
    reput_free_us: float = 0.0  # when the reput thread's work (store.reput_share) ends
    # its pieces on the host named by the thread that runs them (producers.host_counts = "threads"): each
    # connection's selector and codec thread, each send thread; else each piece a thread of its own
    named_threads: bool = False
    connections: int = 0  # the client connections made (connection())
    # named_threads: the send threads' free times with their numbers, as ``threads`` (the one that takes it)
    send_free: list[tuple[int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.threads:
            self.threads = [0] * self.params.send_threads
        if self.named_threads and not self.send_free:
            self.send_free = [(free, j) for j, free in enumerate(sorted(self.threads))]

    def _hold_lock(self, begin_us: int, end_us: int) -> None:
        """An append holds ``putMessageLock`` over [begin, end): the page cache is busy where
        ``now - beginTimeInLock > osPageCacheBusyTimeOutMills`` (in ms) while it holds it."""
        lo = begin_us // 1000 + self.params.busy_timeout_ms + 1
        hi = min(-(-end_us // 1000), begin_us // 1000 + BUSY_DIFF_LIMIT_MS)
        if lo < hi:
            self.busy.append((lo, hi))
            self.busy_log.append((lo, hi))

    def offer(self, arrival_ms: int, wire_bytes: int) -> StoreAnswer:
        """Decide one request arriving at ``arrival_ms`` (not before the previous one: an earlier time is
        taken as the previous one's), and take it into the store's state."""
        return self.offer_us(arrival_ms * 1000, wire_bytes)

    def run_cpu(self, ready_us: float, work_us: float, thread: Hashable = None) -> float:
        """When ``work_us`` of the broker's CPU ready at ``ready_us`` ends (on the host's cores when it
        shares the producers' host; on ``thread``, None: a thread of its own)."""
        return self.cores.run(ready_us, work_us, thread) if self.cores is not None else ready_us + work_us

    def connection(self) -> ConnectionThreads:
        """A new client connection's threads at this broker (free from the start). Named
        (``named_threads``): a selector and a codec thread of its own (rocketmq-all-4.9.8
        ``NettyServerConfig``: ``serverSelectorThreads`` 3, ``serverWorkerThreads`` 8, a channel bound to
        one of each; the harness's two connections ran on two of each, the per-thread reruns)."""
        p = self.params
        legs = (
            wakeup_leg(p.selector_wakeup_us, p.selector_request_us),
            wakeup_leg(p.codec_wakeup_us, p.codec_request_us),
        )
        k, self.connections = self.connections, self.connections + 1
        if not self.named_threads:
            return ConnectionThreads([0.0, 0.0], legs)
        names = (("broker selector", self.index, k), ("broker codec", self.index, k))
        return ConnectionThreads([0.0, 0.0], legs, names)

    def read_request(self, conn: ConnectionThreads, ready_us: float) -> float:
        """When a request of a client connection, in its socket from ``ready_us``, has been read: ``io_us``
        on the connection's selector thread, then its ``codec_share`` on the connection's codec thread, each
        one request after another (``conn``: the connection's threads, kept per connection by the caller; a
        thread that is a leg of a cost a wakeup and a cost a request, ``store.selector_wakeup_us`` and
        ``codec_wakeup_us``, costs those instead); the answer's write (``reply_us``) follows on the last of
        them, before its next request."""
        p = self.params
        read = p.io_us * (1.0 - p.codec_share)
        done = self._on_thread(conn, 0, ready_us, read)
        last = 0
        if p.codec_share > 0:
            conn.free_us[0], last = done, 1
            done = self._on_thread(conn, 1, done, p.io_us - read)
        conn.free_us[last] = self.run_cpu(done, p.reply_us, conn.names[last])
        return done

    def _on_thread(self, conn: ConnectionThreads, i: int, ready_us: float, work_us: float) -> float:
        """``work_us`` ready at ``ready_us`` on the connection's thread ``i`` (0: selector, 1: codec), after
        its previous piece; or, where the thread is a leg, the leg's cost: when it ends."""
        leg, joins = conn.legs[i], False
        if leg is not None:
            ready_us, work_us, joins = leg.piece(ready_us)
        at = max(ready_us, conn.free_us[i])
        if self.cores is not None:
            start, end = self.cores.place(at, work_us, conn.names[i])
        else:
            start, end = at, at + work_us
        if leg is not None:
            leg.placed(start, end, joins)
        return end

    def offer_us(self, arrival_us: int, wire_bytes: int) -> StoreAnswer:
        """:meth:`offer` at a time in microseconds (a hold defers it to the hold's end)."""
        a = max(self.params.held_until(arrival_us), self.last_us)
        self.last_us = a
        a_ms = a // 1000
        self.busy = [(lo, hi) for lo, hi in self.busy if hi > a_ms]
        while self.queued and self.queued[0] <= a:
            heapq.heappop(self.queued)
        depth = len(self.queued)
        d = decide(self.params, self.busy, a, wire_bytes, depth, self.threads[0], self.writer_free_us)
        if d.fate in (Fate.REJECT_REQUEST, Fate.OVERLOAD):
            return StoreAnswer(d.fate, a, a, remark=REMARKS[d.fate], queue_depth=depth)
        idx = len(self.admitted_ms)
        self.admitted_ms.append(a_ms)
        if d.tick >= 0:  # swept from the queue
            heapq.heappush(self.queued, d.tick * 1000)
            remark = sweep_remark(d.fate, d.tick - a_ms, f"\x00q{self.index}:{idx}:{d.tick}\x00")
            return StoreAnswer(
                d.fate, a, d.answer_us, remark=remark, queue_depth=depth, left_us=d.tick * 1000
            )
        if d.taken > a:
            heapq.heappush(self.queued, d.taken)
        if d.fate == Fate.PC_SYNCHRONIZED:
            heapq.heapreplace(self.threads, d.taken)
            if self.send_free:
                heapq.heapreplace(self.send_free, (d.taken, self.send_free[0][1]))
            return StoreAnswer(
                d.fate,
                a,
                d.answer_us,
                remark=REMARKS[d.fate],
                queue_depth=depth,
                left_us=d.taken,
                pc_code=self.params.pc_code,
            )
        if self.cores is not None:  # the append also waits for a core of the shared host (and its share)
            d = self._on_host(d, self.cores)
        self.writer_free_us = d.end
        heapq.heapreplace(self.threads, d.end)
        if self.send_free:
            heapq.heapreplace(self.send_free, (d.end, self.send_free[0][1]))
        if d.end - d.begin > self.params.busy_timeout_ms * 1000:
            self._hold_lock(d.begin, d.end)
        self.served_us.append((d.begin, d.end))
        return StoreAnswer(
            Fate.SERVED, a, d.answer_us, d.end, queue_depth=depth, left_us=d.taken, service_us=d.end - d.begin
        )

    def _on_host(self, d: Decision, cores: Host) -> Decision:
        """A served append on the shared host's cores: the send thread's part outside ``putMessageLock``
        (``unlocked_share``) from when it took the request, the writer's under the lock from when the lock
        is free, and the reput thread's after it (``reput_share``; the answer does not wait for it)."""
        p, work, begin = self.params, d.end - d.begin, d.begin
        unlocked, reput = work * p.unlocked_share, work * p.reput_share
        if unlocked > 0:  # on the send thread that took it (named_threads; else a thread of its own a piece)
            thread = ("broker send", self.index, self.send_free[0][1]) if self.send_free else None
            begin = max(cores.run(d.taken, unlocked, thread), self.writer_free_us)
        start, stop = cores.place(begin, work - unlocked - reput, ("writer", self.index))
        if reput > 0:
            self.reput_free_us = cores.run(max(stop, self.reput_free_us), reput, ("reput", self.index))
        end = int(round(stop))
        return d._replace(begin=end - int(round(stop - start)), end=end, answer_us=d.answer_us + end - d.end)

    def queue_size_at(self, idx: int, tick_ms: int) -> int:
        """The sweeper's ``size of queue`` after it removed admitted request ``idx`` at ``tick_ms``: the
        requests admitted after it up to that tick (all still queued: FIFO, nothing behind it was taken,
        and the sweeps take the oldest first)."""
        return bisect.bisect_right(self.admitted_ms, tick_ms) - (idx + 1)


@dataclass
class StoreCluster:
    """Every broker's store, in ``cluster.brokers`` order."""

    stores: list[BrokerStore]
    brokers: tuple[str, ...]

    @classmethod
    def from_scenario(cls, sc: Scenario, host: Host | None = None) -> StoreCluster:
        """Every broker's store; those whose ``store.on_producer_host`` is set run on ``host``'s cores."""
        model = bm.BrokerModel.from_scenario(sc)
        version = sc.broker_version
        stores = []
        for i, b in enumerate(sc.cluster.brokers):
            cfg = sc.broker_model(b).store
            cores = host if cfg.on_producer_host else None
            params = StoreParams.from_config(cfg, version, model.faults[i])
            named = cores is not None and sc.producers.host_counts == "threads"
            stores.append(BrokerStore(params, i, cores=cores, named_threads=named))
        return cls(stores, tuple(sc.cluster.brokers))

    def store(self, broker: str) -> BrokerStore:
        return self.stores[self.brokers.index(broker)]

    def fill_sizes(self, text: str) -> str:
        """``text`` with each sweeper remark's size-of-queue marker replaced by the final number."""
        if "\x00q" not in text:
            return text
        return _MARK.sub(lambda m: str(self.stores[int(m[1])].queue_size_at(int(m[2]), int(m[3]))), text)


def answer_code(fate: Fate, pc_code: int) -> int:
    """The response code of the store's answer: SUCCESS when appended; ``[PC_SYNCHRONIZED]`` the broker
    version's (``pc_code``: SYSTEM_ERROR before 5.3.0, SYSTEM_BUSY from it,
    ``SendMessageProcessor.handlePutMessageResult``); every other refusal SYSTEM_BUSY. Compiled twin: the
    code :func:`rocketsim.engine.compiled_store.closed_outcome` gives."""
    if fate == Fate.SERVED:
        return 0
    return pc_code if fate == Fate.PC_SYNCHRONIZED else SYSTEM_BUSY


def carries_load(o: bm.AttemptOutcome) -> bool:
    """Whether the open model's answer is one the store decides: an answer with a latency (SEND_OK, or a
    slow answer the client timed out on), i.e. the request reached a working broker."""
    return o.kind == OutcomeKind.OK or (o.kind == OutcomeKind.REMOTING_TIMEOUT and o.late_ms >= 0)


def closed_outcome(
    o: bm.AttemptOutcome, ans: StoreAnswer, start_ms: int, timeout_ms: int, start_us: int | None = None
) -> bm.AttemptOutcome:
    """The attempt's answer with the store's part: the open answer's latency is the network round trip
    (``o.store_ms``), the store adds its wait, service and flush/replica waits (rounded to whole ms).
    Past the timeout the client gives up (REMOTING_TIMEOUT); the answer still comes late, and a request
    the store appended is stored whatever the client saw. Compiled twin:
    :func:`rocketsim.engine.compiled_store.closed_outcome`."""
    network = o.store_ms
    timeout_ms = max(int(timeout_ms), 0)
    delay = (ans.answer_us - start_ms * 1000 + 500) // 1000
    total = network + delay
    # the same in microseconds, unrounded (send_results.latency_us)
    begin_us = start_ms * 1000 if start_us is None else start_us
    exact = (o.exact_us if o.exact_us >= 0 else network * 1000) + ans.answer_us - begin_us
    if ans.stored:
        store_ms = (ans.stored_us - start_ms * 1000 + 500) // 1000
        if total >= timeout_ms:
            return bm.AttemptOutcome(
                OutcomeKind.REMOTING_TIMEOUT, timeout_ms, 0, True, store_ms, total, exact_us=exact
            )
        return bm.AttemptOutcome(OutcomeKind.OK, total, 0, True, store_ms, exact_us=exact)
    if total >= timeout_ms:
        return bm.AttemptOutcome(
            OutcomeKind.REMOTING_TIMEOUT,
            timeout_ms,
            late_ms=total,
            late_code=ans.code,
            remark=ans.remark,
            exact_us=exact,
        )
    return bm.AttemptOutcome(OutcomeKind.BROKER_ERROR, total, ans.code, remark=ans.remark, exact_us=exact)
