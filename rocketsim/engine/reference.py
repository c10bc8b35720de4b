"""The readable send engine: one producer's sends driven in simulated time over :mod:`rocketsim.client.send`.

The queue choice, fault table and retry loop are :mod:`rocketsim.client.fault` and
:mod:`rocketsim.client.send` (the
send loops are generators); the answers come from :mod:`rocketsim.broker.latency`; this module drives them.
Time and order, per producer instance (its own fault table, route cache and per-thread queue indexes):

More: docs/reference/modules.md, rocketsim/engine/reference.py.
"""

# Mirrored by engine/compiled.py (the numba kernel: same events, same order, same tables, only faster);
# tests/test_engines.py runs both on the same inputs and compares every table. This one covers every
# input; the compiled one the cases its ``supports`` accepts. Both read engine/plan/ (prepared sends,
# the scenario's routes and rules, the output tables) and rocketsim.client.fault.FAULT_UPDATES.

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Generator, Hashable, Iterable, Iterator
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from rocketsim.broker import latency as bm
from rocketsim.broker import store
from rocketsim.broker.queue import (
    BrokerStore,
    ConnectionThreads,
    StoreAnswer,
    StoreCluster,
    carries_load,
    closed_outcome,
)
from rocketsim.client.backpressure import Backpressure, PermitGate
from rocketsim.client.connection import (
    LOGGED_CATCHES,
    Connections,
    FailureCpu,
    Fate,
    Pending,
    Waiter,
    budget_check_closes,
    race_draws,
    unwritten_kind,
)
from rocketsim.client.fault import DETECT_PERIOD_MS, Detector, FaultStrategy, ThreadLocalIndex, new_strategy
from rocketsim.client.heap import ClientHeap, client_heap
from rocketsim.client.host import Host, HostCores, client_threads, host_others, host_stalls
from rocketsim.client.route import TopicPublishInfo, topic_publish_info
from rocketsim.client.send import (
    IO_THREAD,
    ON_EXCEPTION,
    Action,
    AsyncSemaphore,
    Call,
    Outcome,
    Pool,
    Resume,
    SendConfig,
    SendRecord,
    Step,
    async_send_steps,
    callback_thread,
    executor_thread,
    oneway_caller_sees,
    oneway_send_steps,
    ordered_send_steps,
    sync_send_steps,
)
from rocketsim.engine.plan import (
    EngineOutput,
    Event,
    Prepared,
    SendKind,
    SimChunk,
    SimOutput,
    build_tables,
    chunk_cuts,
    gather_chunks,
    one_producer,
    prepare,
    producer_route_versions,
    route_version_at,
    slice_output,
    start_detector_enable,
    to_outcome,
)
from rocketsim.engine.pools import ClientPool, PartitionedSenders, PoolSenders, SenderThreads
from rocketsim.engine.reference_rows import engine_output
from rocketsim.engine.sync_answers import ConnectEnd, after_connect, failed_fast
from rocketsim.rng import SplitMixIntSource, derive_key
from rocketsim.scenario import Scenario

__all__ = ["ProducerSimulation", "Send", "engine_output", "producer_tables", "sends_of", "simulate_producer"]

EXPIRE = "backpressure:expire"  # DELIVER payloads: a send's wait for a permit reached its deadline,
PERMIT = "backpressure:permit"  # or a release granted it one
SEM_EXPIRE = "semaphoreAsync:expire"  # a thread's wait in tryAcquire reached its timeout,
SEM_FREED = "semaphoreAsync:release"  # or a permit is released: the waiting threads take what is free

ORDERED_MODES = {SendKind.ORDERED: "sync", SendKind.ORDERED_ASYNC: "async", SendKind.ORDERED_ONEWAY: "oneway"}


@dataclass(frozen=True)
class Send:
    """One send as the producer makes it (a row of :class:`rocketsim.engine.plan.Prepared`)."""

    index: int  # the send's index in the prepared sends
    seq: int
    thread: int
    born_ms: int
    kind: SendKind
    topic: str
    order_hash: int  # String.hashCode of an ordered send's key
    props_base: int = 0  # what the broker checks of its properties (store.illegal_properties_parts)
    props_qid: bool = False
    props_chars: int = 0
    wire: int = 0  # the request's bytes (what the closed-loop store appends)
    body: int = 0  # the body length the backpressure size semaphore takes

    @property
    def waits(self) -> bool:
        """Whether the sender thread waits for this send to end before taking its next one."""
        return self.kind not in (SendKind.ASYNC, SendKind.ORDERED_ASYNC)


def sends_of(prep: Prepared) -> list[Send]:
    """The prepared sends, in seq order."""
    return [
        Send(s, seq, thread, born, SendKind(kind), prep.topics[topic], ohash, base, qid, chars, wire, body)
        for s, (seq, thread, born, kind, topic, ohash, base, qid, chars, wire, body) in enumerate(
            zip(
                prep.s_seq.tolist(),
                prep.s_thread.tolist(),
                prep.s_born.tolist(),
                prep.s_kind.tolist(),
                prep.s_topic.tolist(),
                prep.s_order_hash.tolist(),
                prep.s_props_base.tolist(),
                prep.s_props_qid.tolist(),
                prep.s_props_chars.tolist(),
                prep.s_wire.tolist(),
                (prep.s_body if prep.s_body is not None else prep.s_wire).tolist(),
                strict=True,
            )
        )
    ]


class ProducerSimulation:
    """The state of one producer instance: strategy, route cache, indexes, clock, and the event loop."""

    def __init__(
        self,
        sc: Scenario,
        producer: int,
        stores: StoreCluster | None = None,
        host: Host | None = None,
        heap: ClientHeap | None = None,
    ) -> None:
        self.sc = sc
        self.producer = producer
        self.stores = stores  # the closed-loop brokers every producer of the run shares (None: open)
        self.store_answers: dict[tuple[int, int], StoreAnswer] = {}  # (send, attempt) -> the store's
        # the cores the client's CPU work runs on: the producer's host (shared: joint's, with others)
        self.host = host if host is not None else HostCores(sc.producers.processors)
        self.cpu_us = sc.producers.send_cpu_us
        # the client process's heap (producers.heap_mb; shared: joint's, with the host's other producers)
        self.heap = heap if heap is not None else client_heap(sc, self.host)
        self.held: dict[int, int] = {}  # send index -> the heap's epoch when it was handed to the client
        self.stalls = host_stalls(sc, producer)
        self.others = host_others(sc)  # the host's other threads' CPU after each send's
        self.threads = client_threads(sc, self.host, producer)  # its CPU beside the executor's or caller's
        self.call_us: dict[int, float] = {}  # send index -> when its next request starts (us), if known
        self.start_us: dict[tuple[int, int], int] = {}  # (send, attempt) -> its request's start (us)
        self.broker_threads: dict[str, ConnectionThreads] = {}  # broker -> its connection's threads there
        p = sc.producers
        self.failures = FailureCpu(
            self.host,
            producer,
            p.failure_cpu_us,
            p.failure_log_cpu_us,
            p.async_failure_cpu_us,
            p.async_failure_log_cpu_us,
        )
        self.version = p.version
        self.line = self.version.line
        self.cfg = SendConfig.from_settings(p)
        self.model = bm.BrokerModel.from_scenario(sc)
        self.versions = producer_route_versions(sc)
        self._version_starts = [t for t, _ in self.versions]
        self._tp: dict[str, tuple[int, TopicPublishInfo]] = {}
        self._route_now = self.versions[0][1]
        self._tick_ms = 0
        detecting = start_detector_enable(sc)
        detector = Detector(DETECT_PERIOD_MS, self._resolve, self._probe) if detecting else None
        self.strategy: FaultStrategy = new_strategy(
            self.line,
            send_latency_fault_enable=p.send_latency_fault_enable,
            which_item_worst_source=SplitMixIntSource(derive_key(sc.seed, producer, "whichItemWorst")),
            shuffle_source=SplitMixIntSource(derive_key(sc.seed, producer, "shuffle")),
            start_detector_enable=detecting,
            detector=detector,
        )
        if detector is not None:
            detector.on_tick = self._on_tick
        # with the client's Netty and callback threads an answer's callback runs later than its arrival:
        # its permit is released then (EventLoop.free_permit)
        self.semaphore = AsyncSemaphore(p.async_semaphore_permits, callback_releases=self.threads is not None)
        # the SYNC requests pending on each broker's channel, and who waits for a channel's connect
        self.connections = Connections(self.version, p.connect_ms)
        self.sync_call: dict[int, str] = {}  # send index -> the broker its pending SYNC request went to
        backpressure = p.async_backpressure
        self.gate = (
            PermitGate(Backpressure(backpressure), p.send_msg_timeout_ms)
            if backpressure is not None and backpressure.enable_backpressure_for_async_mode
            else None
        )

    # -- 5.x detector hooks: resolve through the producer's route, probe the broker model --
    def _on_tick(self, t: int) -> None:
        self._tick_ms = t

    def _resolve(self, broker: str) -> str | None:
        return self._route_now.master_addr(broker)

    def _probe(self, addr: str, timeout_ms: int) -> bool:
        return self.model.answers_probe(addr.removeprefix("addr-of-"), self._tick_ms)

    # -- routes --
    def publish_info(self, topic: str, now: int) -> TopicPublishInfo:
        """The producer's cached TopicPublishInfo of ``topic``, rebuilt after each route change."""
        v = route_version_at(self._version_starts, now)
        self._route_now = self.versions[v][1]
        cached = self._tp.get(topic)
        if cached is not None and cached[0] == v:
            return cached[1]
        sc, producer = self.sc, self.producer

        def source_for(thread: int, v: int = v) -> SplitMixIntSource:
            return SplitMixIntSource.for_index(sc.seed, producer, thread, f"sendWhichQueue:{topic}", v)

        index = ThreadLocalIndex(self.line, source_for, f"sendWhichQueue:{topic}")
        tp = topic_publish_info(topic, self.versions[v][1], index, v + 1)
        self._tp[topic] = (v, tp)
        return tp

    # -- the transport: the broker model, keyed by (seed, producer, seq, attempt) --
    def transport_for(self, s: Send) -> Callable[[int, str, int, int, int], Outcome]:
        def transport(attempt: int, broker: str, queue_id: int, start_ms: int, timeout_ms: int) -> Outcome:
            start_us = self.request_start_us(s, start_ms)
            self.start_us[(s.index, attempt)] = start_us
            answer = self.model.attempt(self.producer, s.seq, attempt, broker, start_ms, timeout_ms)
            if self.stores is not None and carries_load(answer):
                broker_store = self.stores.store(broker)
                written = self.threads.write(start_us) if self.split(s) else start_us
                offered = broker_store.offer_us(self.read_by_broker(broker_store, broker, written), s.wire)
                self.store_answers[(s.index, attempt)] = offered
                answer = closed_outcome(answer, offered, start_ms, timeout_ms, start_us)
            if store.properties_illegal(s.props_base, s.props_qid, s.props_chars, queue_id):
                answer = bm.refused_as_illegal(answer)
            return to_outcome(answer)

        return transport

    def split(self, s: Send) -> bool:
        """Whether ``s``'s client CPU is split over the client's threads (a oneway's stays on its caller)."""
        return self.threads is not None and s.kind not in (SendKind.ONEWAY, SendKind.ORDERED_ONEWAY)

    def request_start_us(self, s: Send, start_ms: int) -> int:
        """When ``s``'s request starting at ``start_ms`` starts in microseconds: when its thread finished
        the send's CPU work, if that is the ms, else the ms itself."""
        at = self.call_us.pop(s.index, None)
        return int(at) if at is not None and int(at // 1000) == start_ms else start_ms * 1000

    def read_by_broker(self, broker_store: BrokerStore, broker: str, arrival_us: int) -> int:
        """When the broker has read a request of this producer's connection that arrived at ``arrival_us``
        (``store.io_us`` on the connection's I/O thread, one request after another; a paused process reads
        nothing until it continues; ``store.codec_share``: its selector thread, then its codec thread). The
        thread also writes each answer back (``store.reply_us``), booked after the request's read in the
        thread's order: the next read waits for it, so a host that cannot give the thread its share leaves
        written requests unread in the socket, holding their permits."""
        params = broker_store.params
        ready = params.held_until(arrival_us)
        if params.connection_us <= 0:
            return ready
        conn = self.broker_threads.get(broker) or self.broker_threads.setdefault(
            broker, broker_store.connection()
        )
        return int(broker_store.read_request(conn, ready))

    def executor_queue_bound(self) -> int | None:
        """The bound of the queue ASYNC sends wait in (``producers.async_queue_bound``; None: unbounded)."""
        return self.sc.producers.async_queue_bound

    def cpu_done(self, s: Send, ready_us: float, thread: Hashable) -> float:
        """When the client's CPU work of send ``s`` (``send_cpu_us``) ready at ``ready_us`` on ``thread``
        ends (after a young collection its allocation starts, if any; a stall of the host may follow it)."""
        if self.heap is not None:
            self.heap.allocate(ready_us)
        work = self.threads.executor_us if self.split(s) else self.cpu_us
        done = self.host.run(ready_us, work, (self.producer, thread))
        if self.others is not None:
            self.others.after_send(self.host, s.seq, done)
        if self.stalls is not None:
            self.stalls.after_send(self.host, s.seq, done)
        return done

    def steps(self, s: Send, begin: int) -> Generator:
        tp = self.publish_info(s.topic, begin)
        if s.kind in ORDERED_MODES:
            return ordered_send_steps(
                self.strategy, tp, self.cfg, s.topic, begin, s.order_hash, ORDERED_MODES[s.kind]
            )
        if s.kind == SendKind.ASYNC:
            return async_send_steps(self.strategy, tp, self.cfg, s.topic, begin, semaphore=self.semaphore)
        if s.kind == SendKind.ONEWAY:
            return oneway_send_steps(self.strategy, tp, self.cfg, s.topic, begin, thread=s.thread)
        return sync_send_steps(self.strategy, tp, self.cfg, s.topic, begin, thread=s.thread)

    def run(self, sends: list[Send]) -> list[tuple[Send, SendRecord]]:
        """Drive every send to its end in simulated time; returns (send, record) in completion order (each
        send with the thread that sent it)."""
        done: list[tuple[Send, SendRecord]] = []
        for _ in self.stepper(sends, done):
            pass
        return done

    def stepper(self, sends: list[Send], done: list[tuple[Send, SendRecord]]) -> Iterator[tuple[int, int]]:
        """The event loop of :meth:`run`, one event per step: yields the (time, :class:`Event`) of its next
        event before handling it, so a driver of several producers (:mod:`rocketsim.engine.joint`) can
        interleave them in time order; appends to ``done``."""
        yield from EventLoop(self, sends, done).events()


class EventLoop:
    """One run of :meth:`ProducerSimulation.stepper`: the event heap, the client's pools and which send
    holds which of their threads, the sender threads; its methods handle the events."""

    def __init__(
        self, sim: ProducerSimulation, sends: list[Send], done: list[tuple[Send, SendRecord]]
    ) -> None:
        self.sim = sim
        self.done = done
        self.heap: list[tuple[int, int, int, object]] = []
        self.counter = itertools.count()
        p = sim.sc.producers
        callbacks = ClientPool([callback_thread(j + 1) for j in range(p.callback_threads)])
        executor = (  # 4.3.x: getCallbackExecutor(), unbounded (compiled.async_event's exec_pool)
            callbacks
            if sim.version.async_sends_on_callback_executor
            else ClientPool(
                [executor_thread(j + 1) for j in range(p.executor_threads)], sim.executor_queue_bound()
            )
        )
        self.pools = {Pool.EXECUTOR: executor, Pool.CALLBACK: callbacks}
        self.holding: dict[int, tuple[ClientPool, int]] = {}  # send index -> the pool thread it runs on
        self.handed_us: dict[int, float] = {}  # send index -> when its answer's callback was handed over
        self.scan_ms: dict[int, int] = {}  # send index -> the scan's tick its answer must be read before
        self.scanned: set[int] = set()  # sends whose answer the scan's tick beat (Resume.scanned)
        self.sync_reads: dict[int, tuple[int, int]] = {}  # SYNC send -> its call's start, timeout (ms)
        self.gate_held: set[int] = set()  # async sends whose caller's thread waits on the backpressure
        self.permit_open: set[int] = set()  # sends whose request's permit its callback's end releases
        self.senders: SenderThreads = (
            PoolSenders(sends, p.threads, self.push_start)
            if p.sender_model == "pool"
            else PartitionedSenders(sends, self.push_start)
        )

    def push(self, t: int, event: Event, payload: object) -> None:
        heapq.heappush(self.heap, (t, event, next(self.counter), payload))

    def push_start(self, t: int, payload: object) -> None:
        self.push(t, Event.START, payload)

    def events(self) -> Iterator[tuple[int, int]]:
        """Handle the events in (time, kind, creation) order, yielding each one's (time, kind) first."""
        sim, heap = self.sim, self.heap
        self.senders.begin()
        while heap:
            yield heap[0][0], heap[0][1]
            t, kind, _, payload = heapq.heappop(heap)
            sim.strategy.advance_to(t)
            if sim.cpu_us > 0 or sim.failures.on() or sim.failures.async_on():
                sim.host.advance(t * 1000.0)
            if sim.threads is not None:
                sim.threads.advance(t * 1000.0)
            if kind == Event.START:
                self.start(payload, t)
            else:
                self.deliver(payload, t)  # type: ignore[arg-type]

    def start(self, payload: object, t: int) -> None:
        """A sender thread takes its next send at ``t``."""
        sim = self.sim
        s = self.senders.take(payload, t)
        if sim.heap is not None:
            sim.held[s.index] = sim.heap.hold()
        begin = t
        if s.waits and sim.cpu_us > 0:  # SYNC, ONEWAY: the caller's thread does the CPU work first
            sim.call_us[s.index] = cpu_end = sim.cpu_done(s, t * 1000.0, ("sender", s.thread))
            begin = int(cpu_end // 1000)
        elif sim.threads is not None and sim.threads.submit_us > 0:  # ASYNC: the caller's submit first
            sim.call_us[s.index] = submitted = sim.threads.submit(t * 1000.0)
            begin = int(submitted // 1000)
        gen = sim.steps(s, begin)
        if sim.gate is not None and not s.waits:
            sim.gate.begin(s, t)  # the caller's thread waits for the permits (gated frees it)
            self.gate_held.add(s.index)
        elif not s.waits:
            self.senders.free(s, t)  # the caller's thread does not wait for an async send
        if begin > t:
            self.push(begin, Event.DELIVER, (s, gen, None))
        else:
            self.advance(s, gen, None, t)
        self.senders.taken(t)

    def deliver(self, payload: tuple[Send, Generator, object], t: int) -> None:
        """What a send's loop waited for is due at ``t``: an outcome, a time, or a thread of a pool."""
        s, gen, value = payload
        if value is EXPIRE or value is PERMIT:  # a backpressure wait ended: its deadline, a permit
            self.permit_wait_ended(s, gen, value is EXPIRE, t)
        elif value is SEM_FREED:
            self.grant_permits(s, t)
        elif value is SEM_EXPIRE:
            if self.sim.semaphore.give_up((s, gen)):
                self.advance(s, gen, Resume(t, rejected=True), t)  # on the thread it waited on
        elif isinstance(value, Pool) and value == Pool.IO:  # a 5.x connect listener: on the event loop
            self.advance(s, gen, Resume(t, IO_THREAD), t)
        elif isinstance(value, Pool):  # the callback is a task of the callback executor
            if self.read_later(payload, t):
                return
            resume = self.take(s, gen, Pool.CALLBACK, t)
            if resume is not None:
                self.advance(s, gen, resume, t)
        elif isinstance(value, ConnectEnd):  # a channel's connect ended: every request waiting for it
            self.connect_ended(payload, t)
        else:
            if isinstance(value, Outcome) and self.read_sync_later(payload, t):  # type: ignore[arg-type]
                return
            if isinstance(value, Outcome):
                self.answered(s, value, t)
            self.advance(s, gen, value, t)  # type: ignore[arg-type]

    def answered(self, s: Send, outcome: Outcome, now: int) -> None:
        """``s``'s SYNC request came to ``outcome``: a close it causes fails the others pending on the
        channel now (their answers, due later, are dropped; :mod:`rocketsim.client.connection`)."""
        sim = self.sim
        if sim.failures.on() and s.kind == SendKind.SYNC and outcome.catch in LOGGED_CATCHES:
            sim.failures.failed(("sender", s.thread), now)  # sendDefaultImpl's catch logs it
        broker = sim.sync_call.pop(s.index, None)
        if broker is None:
            return
        self.fail_fast(sim.connections.answered(broker, s.index, outcome.kind, now), now)

    def fail_fast(self, failed: list[Pending], now: int) -> None:
        """A close at ``now`` failed the SYNC requests ``failed``: each waited from its start until now."""
        if not failed:
            return
        heap = self.heap
        gone = {p.send for p in failed}
        due = [e for e in heap if e[1] == Event.DELIVER and e[3][0].index in gone]  # type: ignore[index]
        heap[:] = [e for e in heap if not (e[1] == Event.DELIVER and e[3][0].index in gone)]  # type: ignore[index]
        heapq.heapify(heap)
        for _, _, _, (other, gen, answer) in sorted(due, key=lambda e: e[2]):  # type: ignore[misc]
            waited = now - next(p.start_ms for p in failed if p.send == other.index)
            self.push(now, Event.DELIVER, (other, gen, failed_fast(answer, waited)))

    def permit_wait_ended(self, s: Send, gen: Generator, expired: bool, t: int) -> None:
        """``s``'s wait for backpressure permits ended at ``t`` (its deadline, or a release granted it):
        with its permits it asks the executor for a thread."""
        if self.sim.gate.waiting(s, expired) and self.gated(s, gen, t):  # type: ignore[union-attr]
            resume = self.take(s, gen, Pool.EXECUTOR, t)
            if resume is not None:
                self.advance(s, gen, resume, t)

    def gated(self, s: Send, gen: Generator, now: int) -> bool:
        """``executeAsyncMessageSend``'s permits for ``s`` at its EXECUTE step: True: taken, go on
        (its caller's thread is free); False: it waits (an event resumes it) or was refused (ended)."""
        gate = self.sim.gate
        verdict = gate.acquire(s, gen, now)  # type: ignore[union-attr]
        if verdict is None:  # waiting: its deadline is an event
            self.push(gate.deadline(s), Event.DELIVER, (s, gen, EXPIRE))  # type: ignore[union-attr]
            return False
        self.gate_held.discard(s.index)
        self.senders.free(s, now)
        if verdict is True:
            return True
        self.advance(s, gen, Resume(now, None, refused=verdict), now)
        return False

    def release(self, s: Send, now: int) -> None:
        """``s`` stops running on its pool thread: the thread takes the next waiting task, or idles."""
        held = self.holding.pop(s.index, None)
        if held is None:
            return
        pool, j = held
        waiter = pool.release(j, now)
        if waiter is not None:  # it runs on the freed thread, as an event of its own
            w, gen, task = waiter
            self.holding[w.index] = (pool, j)
            at = self.run_on(w, pool, j, now, task)
            self.push(at, Event.DELIVER, (w, gen, Resume(at, pool.names[j])))

    def free_permit(self, s: Send, at: int) -> None:
        """``s``'s request's permit, held until its callback has run, is released at ``at`` (after the
        callback, or at the scan's tick before it: :class:`rocketsim.client.send.AsyncSemaphore`)."""
        if s.index in self.permit_open:
            self.permit_open.discard(s.index)
            self.sim.semaphore.release_open(at)
            self.permit_released(s, at)

    def permit_released(self, s: Send, at: int | None) -> None:
        """A permit is released at ``at``: an event then if a thread waits for one."""
        if at is not None and self.sim.semaphore.waiters:
            self.push(at, Event.DELIVER, (s, None, SEM_FREED))

    def grant_permits(self, s: Send, now: int) -> None:
        """The threads waiting in tryAcquire take the permits free at ``now``, first come first served
        (each dispatches its request, holding its permit, before the next is granted)."""
        semaphore = self.sim.semaphore
        while (waiter := semaphore.next_granted(now)) is not None:
            w, gen = waiter  # type: ignore[misc]
            self.advance(w, gen, Resume(now), now)
        self.permit_released(s, semaphore.next_release())

    def read_later(self, payload: tuple[Send, Generator, object], t: int) -> bool:
        """With the client's Netty threads (:class:`rocketsim.client.host.ClientThreads`) an ASYNC send's
        answer, in at ``t``, is read and decoded before its callback is handed to the callback executor
        (``processResponseCommand``, ``executeInvokeCallback``): True when that is in a later ms, an event
        then (the callback's thread is not taken while the answer waits for the Netty threads). Read at or
        after the response-table scan's tick (``Step.scan_ms``), the scan has failed the request then."""
        s, sim = payload[0], self.sim
        if sim.threads is None or s.waits or s.index in self.handed_us:
            return False
        handed = sim.threads.read(t * 1000.0)
        scan_ms = self.scan_ms.pop(s.index, -1)
        if 0 <= scan_ms * 1000 <= handed:  # scanResponseTable failed it first: its callback is handed then
            self.scanned.add(s.index)
            handed = scan_ms * 1000.0
            self.free_permit(s, scan_ms)  # the scan releases the permit before the callback
        self.handed_us[s.index] = handed
        if int(handed // 1000) <= t:
            return False
        self.push(int(handed // 1000), Event.DELIVER, payload)
        return True

    def read_sync_later(self, payload: tuple[Send, Generator, Outcome], t: int) -> bool:
        """With the client's Netty threads a SYNC answer, in at ``t``, is read on the selector and decoded on
        the worker, whose ``putResponse`` wakes the caller, which then makes its SendResult
        (``processSendResponse``: ``callback_cpu_share``): True when that ends in a later ms, an event then
        (a timeout instead if the read came after it: :meth:`Outcome.read_after`)."""
        s, gen, outcome = payload
        call = self.sync_reads.pop(s.index, None)
        if call is None or not outcome.is_answer:
            return False
        (start_ms, timeout_ms), threads = call, self.sim.threads
        read = threads.read(t * 1000.0)  # type: ignore[union-attr]
        end = threads.callback(read, 0.0, ("sender", s.thread))  # type: ignore[union-attr]
        later = outcome.read_after(int(read // 1000) - start_ms, int(end // 1000) - start_ms, timeout_ms)
        if start_ms + later.latency_ms <= t:
            return False
        self.push(start_ms + later.latency_ms, Event.DELIVER, (s, gen, later))
        return True

    def run_on(self, s: Send, pool: ClientPool, j: int, now: int, task: Pool) -> int:
        """``s`` runs ``task`` on thread ``j`` of ``pool`` from ``now``: the ms it goes on at, once the
        thread has done the send's CPU work (a send's, ``Pool.EXECUTOR``; a callback's only with
        ``producers.callback_cpu_share``: :class:`rocketsim.client.host.ClientThreads`)."""
        sim = self.sim
        if task == Pool.CALLBACK and sim.threads is not None and not s.waits:  # its client CPU's last part
            handed = max(now * 1000.0, self.handed_us.pop(s.index, 0.0))
            pool.free_us[j] = done = sim.threads.callback(handed, pool.free_us[j], pool.names[j])
            return int(done // 1000)
        if task != Pool.EXECUTOR or sim.cpu_us <= 0:
            return now
        done = sim.cpu_done(
            s, max(now * 1000.0, pool.free_us[j], sim.call_us.pop(s.index, 0.0)), pool.names[j]
        )
        pool.free_us[j] = sim.call_us[s.index] = done
        return int(done // 1000)

    def take(self, s: Send, gen: Generator, task: Pool, now: int) -> Resume | None:
        """``s`` asks the pool that runs ``task`` (the send: ``Pool.EXECUTOR``, its callback:
        ``Pool.CALLBACK``; one pool on 4.3.x) for a thread at ``now``: refused (a full executor queue), a
        thread now, or None: it waits (for a thread, which :meth:`release` hands it, or for its CPU work)."""
        pool = self.pools[task]
        if pool.full():  # executor.submit: RejectedExecutionException, in the caller's thread
            self.sim.call_us.pop(s.index, None)
            return Resume(now, None, rejected=True)
        j = pool.take((s, gen, task))
        if j is None:
            return None  # waits for a thread (release hands it one)
        self.holding[s.index] = (pool, j)
        at = self.run_on(s, pool, j, now, task)
        if at > now:  # the thread goes on with the send once it has done its CPU work
            self.push(at, Event.DELIVER, (s, gen, Resume(at, pool.names[j])))
            return None
        return Resume(now, pool.names[j])

    def advance(self, s: Send, gen: Generator, value: Outcome | Resume | None, now: int) -> None:
        """Run ``s``'s loop from ``value`` until it waits for something later, or ends."""
        sim = self.sim
        if s.index in self.scanned and isinstance(value, Resume):  # the callback's thread, for the scan's
            self.scanned.discard(s.index)  # failure
            value = replace(value, scanned=True)
        while True:
            try:
                item = next(gen) if value is None else gen.send(value)
            except StopIteration as stop:
                record: SendRecord = stop.value
                self.done.append((s, record))
                self.free_permit(s, now)  # the callback's finally
                if sim.heap is not None:
                    sim.heap.release(sim.held.pop(s.index))
                self.release(s, now)
                if s.waits or s.index in self.gate_held:  # (an ordered send without a route never
                    self.gate_held.discard(s.index)  # reaches the backpressure)
                    self.senders.free(s, record.end_ms)
                if sim.gate is not None:  # BackpressureSendCallBack: permits back before the callback
                    for waiter in sim.gate.release(s.index, record.end_ms):
                        self.push(record.end_ms, Event.DELIVER, (*waiter, PERMIT))
                return
            if isinstance(item, Call) and item.mode == "sync":
                if not self.waits_for_channel(s, gen, item):
                    self.write_sync(s, gen, item, item.start_ms)
                return
            if isinstance(item, Call):
                outcome = sim.transport_for(s)(
                    item.attempt, item.broker, item.queue_id, item.start_ms, item.timeout_ms
                )
                if item.mode == "async":  # dispatched: the loop itself waits for the callback
                    value = outcome
                    continue
                # a oneway caller waits only for the write: over at once unless the write failed
                sees = item.mode != "oneway" or oneway_caller_sees(outcome, sim.version)
                waited = outcome.latency_ms if sees else 0
                self.push(item.start_ms + waited, Event.DELIVER, (s, gen, outcome))
                return
            step: Step = item
            if step.action == Action.EXECUTE:
                if sim.gate is not None and not self.gated(s, gen, now):
                    return
                value = self.take(s, gen, Pool.EXECUTOR, now)
                if value is None:
                    return
                continue
            if step.action == Action.PERMIT:  # tryAcquire: the thread waits for a release or its timeout
                sim.semaphore.wait((s, gen))
                self.push(now + step.wait_ms, Event.DELIVER, (s, gen, SEM_EXPIRE))
                self.permit_released(s, sim.semaphore.next_release())
                return
            if step.action == Action.CALLBACK:
                self.free_permit(s, now)  # a retry dispatched in the callback: the callback's finally
                if step.permit:
                    self.permit_open.add(s.index)
                else:  # released at the answer (known now): a thread waiting may take it then
                    self.permit_released(s, step.at_ms)
                self.release(s, now)  # the thread is done with the send until its callback
                if step.scan_ms >= 0 and sim.threads is not None and not s.waits:
                    self.scan_ms[s.index] = step.scan_ms
                self.push(step.at_ms, Event.DELIVER, (s, gen, step.pool))
                return
            if step.at_ms > now:  # e.g. a connect failure thrown after its latency
                self.push(step.at_ms, Event.DELIVER, (s, gen, Resume(step.at_ms, step.thread)))
                return
            if step.source == ON_EXCEPTION and sim.failures.async_on():
                at = self.on_exception_cpu(s, step, now)
                if at > now:  # its thread goes on once it has done onExceptionImpl's CPU
                    self.push(at, Event.DELIVER, (s, gen, Resume(at, step.thread)))
                    return
            value = Resume(now, step.thread)

    def on_exception_cpu(self, s: Send, step: Step, now: int) -> int:
        """``onExceptionImpl`` of ``s``'s failed ASYNC attempt at ``now`` (``step``: a retry's SEND, whose
        WARN line the logger writes where the version logs it, or the RESULT of onException) on the pool
        thread ``s`` runs on, before that thread's next task (:meth:`FailureCpu.failed_async`): the ms
        ``s`` goes on at."""
        sim, held = self.sim, self.holding.get(s.index)
        logged = step.action == Action.SEND and sim.version.async_retry_logs_stack
        if held is None:
            return int(sim.failures.failed_async(step.thread, now * 1000.0, logged) // 1000)
        pool, j = held
        ready = max(now * 1000.0, pool.free_us[j])
        pool.free_us[j] = done = sim.failures.failed_async(pool.names[j], ready, logged)
        return int(done // 1000)

    def waits_for_channel(self, s: Send, gen: Generator, call: Call) -> bool:
        """Whether ``s``'s SYNC request ``call`` waits for its broker's channel to connect
        (``getAndCreateChannel``: the first request after a close starts the connect, every request
        until its end waits for it); the connect's end is an event."""
        sim = self.sim
        if not sim.connections.needs_connect(call.broker):
            return False
        order, took = race_draws(sim.sc.seed, sim.producer, s.seq, call.attempt)
        waiter = Waiter(s.index, call.start_ms, call.timeout_ms, order, took, (s, gen, call))
        ready, starts = sim.connections.wait_for_channel(call.broker, waiter)
        if starts:
            self.push(ready, Event.DELIVER, (s, gen, ConnectEnd(call.broker, call.start_ms)))
        return True

    def write_sync(self, s: Send, gen: Generator, call: Call, now: int) -> None:
        """``s``'s SYNC request ``call`` is written on its broker's channel at ``now`` (its start, or the end
        of the connect it waited for, which its timeout already paid for): the broker model answers it from
        then, and it is pending on the channel until its answer."""
        sim = self.sim
        wait = now - call.start_ms
        begin_us = sim.request_start_us(s, call.start_ms) if wait else 0  # before the connect it waited for
        outcome = sim.transport_for(s)(call.attempt, call.broker, call.queue_id, now, call.timeout_ms - wait)
        if wait:  # the attempt's row counts from its start, as its latency does (the broker's from now)
            outcome = after_connect(outcome, wait)
            sim.start_us[(s.index, call.attempt)] = begin_us
        done_ms = call.start_ms + outcome.latency_ms
        sim.connections.wrote(call.broker, s.index, call.start_ms, done_ms, call.timeout_ms - wait)
        sim.sync_call[s.index] = call.broker
        if sim.split(s):  # its answer is read on the client's Netty threads (read_sync_later)
            self.sync_reads[s.index] = (call.start_ms, call.timeout_ms)
        self.push(done_ms, Event.DELIVER, (s, gen, outcome))

    def connect_ended(self, payload: tuple[Send, Generator, ConnectEnd], now: int) -> None:
        """The broker's new channel connected at ``now``: each request that waited is written, or fails
        (:func:`rocketsim.client.connection.settle_connect`); a budget check that closes the channel fails
        the requests written on it first (NettyRemotingClient.invokeSync at 4.9.8). Its end is decided at
        ``connect_ms`` (:meth:`FailureCpu.connect_done`): a later one is one more event."""
        sim = self.sim
        s, gen, end = payload
        broker = end.broker
        if not end.decided:
            done = sim.failures.connect_done(broker, end.start_ms, sim.sc.producers.connect_ms)
            if done > now:
                sim.connections.connect_later(broker, done)
                self.push(done, Event.DELIVER, (s, gen, replace(end, decided=True)))
                return
        closes = False
        for waiter, fate in sim.connections.connect_ended(broker, now):
            s, gen, call = waiter.payload  # type: ignore[misc]
            if fate == Fate.WRITE:
                self.write_sync(s, gen, call, now)
                continue
            budget = fate == Fate.BUDGET  # invokeSync's own text (errors.invoke_sync_timeout_error)
            unwritten = Outcome(unwritten_kind(fate), now - call.start_ms, budget_check=budget)
            self.push(now, Event.DELIVER, (s, gen, unwritten))
            closes = closes or (budget and budget_check_closes(sim.version))
        if closes:
            self.fail_fast(sim.connections.close(broker, now), now)


# ---- records -> the engine output ----------------------------------------------------------------


def simulate_producer(messages: pa.Table, sc: Scenario) -> SimOutput:
    """Simulate one producer's messages (schema ``MESSAGES`` without run_id, any row order)."""
    if messages.num_rows == 0:
        return SimOutput.empty()
    producer = one_producer(messages)
    prep = prepare(messages, sc)
    sends = sends_of(prep)
    sim = ProducerSimulation(sc, producer)
    done = sim.run(sends)
    out, ranks = engine_output(sc, len(sends), done, start_us=sim.start_us)
    return producer_tables(prep, out, ranks)


def producer_tables(prep: Prepared, out: EngineOutput, ranks: np.ndarray) -> SimOutput:
    """The two tables of one producer from what the engine decided (``ranks``: each attempt's rank in
    completion order, from :func:`engine_output`)."""
    tables = build_tables(prep, out)
    if len(set(prep.s_seq.tolist())) == prep.n_sends:
        return tables  # unique seqs: (send, attempt) order is (seq, attempt) order
    # sends sharing a seq: their attempts in (seq, attempt) order, ties in completion order
    attempts = tables.attempts.append_column("rank", pa.array(ranks))
    attempts = attempts.sort_by([("seq", "ascending"), ("attempt", "ascending"), ("rank", "ascending")])
    return SimOutput(attempts.drop_columns(["rank"]), tables.results)


def simulate_chunks(chunks: Iterable[pa.Table | pa.RecordBatch], sc: Scenario) -> Iterator[SimChunk]:
    """One producer's messages given in chunks (seq order) -> its tables in chunks
    (:class:`rocketsim.engine.plan.SimChunk`): run whole (:func:`simulate_producer`) and cut where the
    chunks end. The readable oracle keeps every row in memory: it is meant for small runs."""
    messages, ends = gather_chunks(chunks)
    if messages.num_rows:
        yield from slice_output(messages, simulate_producer(messages, sc), chunk_cuts(messages, ends))
