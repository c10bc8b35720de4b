"""One producer's sends, simulated: messages (Arrow) in, attempts and results (Arrow) out.

This is the function the Spark layer maps per producer, and the readable reference of the send engine:
the queue choice, fault table and retry loop are :mod:`rocketsim.fault` and :mod:`rocketsim.send`, the
answers come from :mod:`rocketsim.brokers`, and this module drives them in simulated time.

Time and order, per producer instance (its own fault table, route cache and per-thread queue indexes):

* Sender threads take their messages in seq order (``thread = seq % threads``, from the workload). A sync
  or oneway send starts at ``max(born, thread free)``, so queueing delay is an outcome; an async send is
  dispatched at its born time and its thread moves on at once (bounded by the async semaphore).
* Every call is an event at its end time; events are handled in time order (calls ending before sends
  starting at the same ms, then by creation order), so the fault table sees updates in the order the
  client would, across threads and overlapping async sends.
* The route a producer sees changes only at its 30 s polls after the name server dropped or re-added a
  broker (:mod:`rocketsim.route`); each change builds a new TopicPublishInfo with a new index.
* Ordered messages go through ``send(msg, selector, key)`` (SelectMessageQueueByHash, one attempt, no
  fault-table update); batches are one send of a ``MessageBatch`` (never compressed): every member gets
  the batch's outcome, and its attempts are counted (and its attempt rows keyed) on the first member;
  invalid messages are not sent: they become ``REJECTED`` results with the client's own error text.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from functools import cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim import brokers as bm
from rocketsim import codec
from rocketsim.compression import CompressionType, compressed_sys_flag, default_model
from rocketsim.errors import MQClientError, RocketSimError
from rocketsim.fault import (
    LINE_5,
    Detector,
    FaultStrategy,
    SplitMixIntSource,
    ThreadLocalIndex,
    derive_key,
    java_abs,
    java_rem,
    java_string_hash,
    new_strategy,
)
from rocketsim.message import MessageSysFlag
from rocketsim.route import (
    PERM_READ,
    BrokerData,
    BrokerOutage,
    QueueData,
    RouteRefresh,
    RouteTimeline,
    TopicPublishInfo,
    TopicRouteData,
    route_versions,
    topic_publish_info,
)
from rocketsim.scenario import Scenario
from rocketsim.schemas import SEND_ATTEMPTS, SEND_RESULTS, without_run_id
from rocketsim.send import (
    AsyncSemaphore,
    AttemptRecord,
    Call,
    MQBrokerError,
    Outcome,
    SendConfig,
    SendInterruptedError,
    SendRecord,
    SendResult,
    _broker_not_exist,
    _remoting_exception,
    async_send_steps,
    no_route_select,
    oneway_send_steps,
    oneway_write_failed,
    sync_send_steps,
)
from rocketsim.validate import check_message, check_properties_size

ATTEMPTS_SCHEMA = without_run_id(SEND_ATTEMPTS)
RESULTS_SCHEMA = without_run_id(SEND_RESULTS)

TIMEOUT_OVERSHOOT_MS = 1  # a RemotingTimeoutException is raised once the wait has passed the timeout
ONEWAY_SENT = "ONEWAY_SENT"  # a oneway send has no SendResult: it was written, nothing more is known
FAILED = "FAILED"
REJECTED = "REJECTED"


class SimulationError(RocketSimError):
    """The input cannot be simulated (e.g. rows of several runs, or a missing column)."""


@dataclass(frozen=True)
class SimOutput:
    """The two tables of a simulation: one row per attempt, one per message."""

    attempts: pa.Table
    results: pa.Table


# ---- the broker model as a transport --------------------------------------------------------------

_KIND_TO_OUTCOME: dict[int, Callable[[bm.AttemptOutcome], Outcome]] = {
    bm.OK: lambda o: Outcome.ok(o.latency_ms),
    bm.FLUSH_DISK_TIMEOUT: lambda o: Outcome.not_ok("FLUSH_DISK_TIMEOUT", o.latency_ms),
    bm.FLUSH_SLAVE_TIMEOUT: lambda o: Outcome.not_ok("FLUSH_SLAVE_TIMEOUT", o.latency_ms),
    bm.SLAVE_NOT_AVAILABLE: lambda o: Outcome.not_ok("SLAVE_NOT_AVAILABLE", o.latency_ms),
    bm.REMOTING_CONNECT: lambda o: Outcome.remoting_error("connect", o.latency_ms),
    bm.REMOTING_TIMEOUT: lambda o: Outcome.remoting_error("timeout", o.latency_ms + TIMEOUT_OVERSHOOT_MS),
    bm.REMOTING_SEND_REQUEST: lambda o: Outcome.remoting_error("send_request", o.latency_ms),
    bm.BROKER_ERROR: lambda o: Outcome.broker_error(o.response_code, o.latency_ms),
    bm.CLIENT_ERROR: lambda o: Outcome.client_error(o.latency_ms),
    bm.INTERRUPTED: lambda o: Outcome.interrupted(o.latency_ms),
}


def to_outcome(o: bm.AttemptOutcome) -> Outcome:
    """The broker model's answer as the send loop's :class:`Outcome`."""
    return _KIND_TO_OUTCOME[o.kind](o)


# ---- the cluster as routes ----------------------------------------------------------------------


def cluster_route(sc: Scenario) -> TopicRouteData:
    """The full route of a workload topic: every broker with its write/read queues and permission."""
    c = sc.cluster
    queue_datas = tuple(
        QueueData(b, c.read_queues, c.write_queues, PERM_READ if b in c.read_only_brokers else c.perm)
        for b in c.brokers
    )
    broker_datas = tuple(BrokerData.of(b, {0: f"addr-of-{b}"}) for b in c.brokers)
    return TopicRouteData(queue_datas, broker_datas)


def route_timeline(sc: Scenario) -> RouteTimeline:
    """Brokers that are down (outages, flap downs) stop heartbeating; the name server and polls follow."""
    model = bm.BrokerModel.from_scenario(sc)
    line = sc.producers.version.fault_line
    hb = sc.route.heartbeat_interval_ms
    refresh = RouteRefresh.for_line(line)
    refresh = (
        type(refresh)(
            **{
                **refresh.__dict__,
                "poll_interval_ms": sc.route.poll_interval_ms,
                "broker_expire_ms": sc.route.broker_expire_ms,
            }
        )
        if hasattr(refresh, "broker_expire_ms")
        else refresh
    )
    outages = []
    horizon = _horizon_ms(sc)
    for b in sc.cluster.brokers:
        for start, end in model.down_intervals(b, horizon):
            outages.append(BrokerOutage(b, (start // hb) * hb, end))
    return RouteTimeline(cluster_route(sc), tuple(outages), refresh)


def _horizon_ms(sc: Scenario) -> int:
    """A time safely after every send of the scenario (for route change lists)."""
    wl = sc.workload
    per_producer_rate = wl.rate_per_s / sc.producers.count
    n = -(-wl.total_messages() // sc.producers.count)
    arrivals_ms = int(n / per_producer_rate * 1000 * 1.5) + 60_000
    faults_ms = max((int(f.end_s * 1000) for f in sc.faults), default=0)
    return max(arrivals_ms, faults_ms) + 600_000


@cache
def _compression_model(ctype: str, level: int):  # noqa: ANN202 - cached model object
    return default_model(CompressionType[ctype], level)


# ---- one producer -------------------------------------------------------------------------------


@dataclass
class _Send:
    """One send as the producer makes it: a message, or a batch led by its first message."""

    row: int  # the leading message's row in the input
    seq: int
    thread: int
    born_ms: int
    mode: str
    topic: str
    order_key: str | None
    members: list[int]  # rows whose result this send decides
    wire_bytes: int
    compressed: bool
    sys_flag: int


@dataclass
class _Results:
    """Column lists of the results table, filled row by row (by input row index)."""

    n: int
    cols: dict[str, list] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.cols = {f.name: [None] * self.n for f in RESULTS_SCHEMA}

    def set(self, row: int, **values: object) -> None:
        for k, v in values.items():
            self.cols[k][row] = v


class ProducerSimulation:
    """The state of one producer instance: strategy, route cache, indexes, clock, and the event loop."""

    def __init__(self, sc: Scenario, producer: int) -> None:
        self.sc = sc
        self.producer = producer
        p = sc.producers
        self.version = p.version
        self.line = self.version.fault_line
        self.cfg = SendConfig.from_settings(p)
        self.model = bm.BrokerModel.from_scenario(sc)
        self.timeline = route_timeline(sc)
        self.versions = route_versions(self.timeline, _horizon_ms(sc))
        self._version_starts = [t for t, _ in self.versions]
        self._tp: dict[str, tuple[int, TopicPublishInfo]] = {}
        self._route_now = self.versions[0][1]
        self._tick_ms = 0
        detector = None
        if p.start_detector_enable and self.line == LINE_5:
            detector = Detector(3000, self._resolve, self._probe)
        self.strategy: FaultStrategy = new_strategy(
            self.line,
            send_latency_fault_enable=p.send_latency_fault_enable,
            which_item_worst_source=SplitMixIntSource(derive_key(sc.seed, producer, "whichItemWorst")),
            start_detector_enable=p.start_detector_enable and self.line == LINE_5,
            detector=detector,
        )
        if detector is not None:
            detector.on_tick = self._on_tick
        self.semaphore = AsyncSemaphore(p.async_semaphore_permits)

    # -- 5.x detector hooks: resolve through the producer's route, probe the broker model --
    def _on_tick(self, t: int) -> None:
        self._tick_ms = t

    def _resolve(self, broker: str) -> str | None:
        return self._route_now.master_addr(broker)

    def _probe(self, addr: str, timeout_ms: int) -> bool:
        broker = addr.removeprefix("addr-of-")
        return not any(w.down(self._tick_ms) for w in self.model.faults[self.model.index(broker)])

    # -- routes --
    def publish_info(self, topic: str, now: int) -> TopicPublishInfo:
        """The producer's cached TopicPublishInfo of ``topic``, rebuilt after each route change."""
        import bisect

        v = bisect.bisect_right(self._version_starts, now) - 1
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
    def transport_for(self, seq: int) -> Callable[[int, str, int, int, int], Outcome]:
        def transport(attempt: int, broker: str, queue_id: int, start_ms: int, timeout_ms: int) -> Outcome:
            return to_outcome(self.model.attempt(self.producer, seq, attempt, broker, start_ms, timeout_ms))

        return transport

    # -- ordered sends: SelectMessageQueueByHash, one attempt --
    def ordered_steps(self, s: _Send, begin: int) -> Generator:
        """``send(msg, selector, key)``: SelectMessageQueueByHash over the cached queue list, one call.

        The queue object is read once, when it is chosen (``sendKernelImpl`` takes its broker and id
        before the call), so a concurrent 4.9.7 rewrite of the slot does not change where this send went.
        """
        tp = self.publish_info(s.topic, begin)
        queues = tp.message_queue_list
        if not queues:
            return SendRecord(
                "sync", s.topic, begin, begin, (), None, no_route_select(s.topic, self.version), ()
            )
        slot = queues[java_abs(java_rem(java_string_hash(s.order_key or ""), len(queues)))]
        broker, queue_id = slot.broker_name, slot.queue_id
        timeout = self.cfg.send_msg_timeout_ms
        outcome = yield Call(0, broker, queue_id, begin, timeout)
        end = begin + outcome.latency_ms
        rec = AttemptRecord(
            0,
            None,
            False,
            begin,
            broker,
            queue_id,
            timeout,
            outcome,
            None,
            "return",
            self.strategy.isolated_until(broker, end),
            end,
        )
        error: BaseException | None = None
        result = None
        if outcome.kind in ("ok", "status"):
            result = SendResult(outcome.status, broker, queue_id, 0)
        elif outcome.kind == "remoting":
            error = _remoting_exception(outcome.remoting, broker, timeout)
        elif outcome.kind == "broker":
            error = MQBrokerError(outcome.response_code, outcome.remark)
        elif outcome.kind == "client":
            error = _broker_not_exist(broker, self.version)
        else:
            error = SendInterruptedError("interrupted")
        return SendRecord("sync", s.topic, begin, end, (rec,), result, error, (broker,))

    def steps(self, s: _Send, begin: int) -> Generator:
        if s.order_key is not None:
            return self.ordered_steps(s, begin)
        tp = self.publish_info(s.topic, begin)
        if s.mode == "async":
            return async_send_steps(
                self.strategy, tp, self.cfg, s.topic, begin, semaphore=self.semaphore, thread=s.thread
            )
        if s.mode == "oneway":
            return oneway_send_steps(self.strategy, tp, self.cfg, s.topic, begin, thread=s.thread)
        return sync_send_steps(self.strategy, tp, self.cfg, s.topic, begin, thread=s.thread)

    def run(self, sends: list[_Send]) -> list[tuple[_Send, SendRecord]]:
        """Drive every send to its end in simulated time; returns (send, record) in completion order."""
        per_thread: dict[int, list[_Send]] = {}
        for s in sends:  # already in seq order
            per_thread.setdefault(s.thread, []).append(s)
        cursor = dict.fromkeys(per_thread, 0)
        heap: list[tuple[int, int, int, object]] = []
        counter = itertools.count()
        done: list[tuple[_Send, SendRecord]] = []
        START, DELIVER = 1, 0  # call completions first at equal times

        def schedule_thread(th: int, free_at: int) -> None:
            i = cursor[th]
            if i < len(per_thread[th]):
                s = per_thread[th][i]
                heapq.heappush(heap, (max(s.born_ms, free_at), START, next(counter), th))

        def advance(s: _Send, gen: Generator, value: Outcome | None) -> None:
            try:
                call = next(gen) if value is None else gen.send(value)
            except StopIteration as stop:
                record: SendRecord = stop.value
                done.append((s, record))
                if s.mode != "async":
                    schedule_thread(s.thread, record.end_ms)
                return
            outcome = self.transport_for(s.seq)(
                call.attempt, call.broker, call.queue_id, call.start_ms, call.timeout_ms
            )
            # a oneway caller waits only for the write: the call is over at once unless the write failed
            waited = outcome.latency_ms if call.mode != "oneway" or oneway_write_failed(outcome) else 0
            heapq.heappush(heap, (call.start_ms + waited, DELIVER, next(counter), (s, gen, outcome)))

        for th in per_thread:
            schedule_thread(th, 0)
        while heap:
            t, kind, _, payload = heapq.heappop(heap)
            self.strategy.advance_to(t)
            if kind == START:
                th = payload  # type: ignore[assignment]
                s = per_thread[th][cursor[th]]
                cursor[th] += 1
                gen = self.steps(s, t)
                if s.mode == "async":
                    schedule_thread(th, t)  # the caller's thread does not wait for an async send
                advance(s, gen, None)
            else:
                s, gen, outcome = payload  # type: ignore[misc]
                advance(s, gen, outcome)
        return done


# ---- validation, sizes and the tables ----------------------------------------------------------


def rejection(
    topic: str, body_size: int, properties_size: int, reserved: str | None, sc: Scenario
) -> str | None:
    """The client's error text if this message is refused before any send, else None.

    Order as the client meets the checks: ``putUserProperty`` (at message construction), then
    ``Validators.checkMessage`` on send, then the properties length when the request is encoded.
    """
    version = sc.producers.version
    if reserved is not None:
        from rocketsim.message import Message

        try:
            Message(topic, b"x").put_user_property(reserved, "v", version=version)
        except RocketSimError as exc:
            return str(exc)
    try:
        check_message(topic, body_size, sc.producers.max_message_size, None, version)
        check_properties_size(properties_size)
    except (MQClientError, RocketSimError) as exc:
        return getattr(exc, "full_message", None) or str(exc)
    return None


BATCH_FAILED = "Failed to initiate the MessageBatch"  # DefaultMQProducer.batch() wraps any member's error


def batch_rejections(
    reject: dict[int, str], batch_ids: list[int | None], reserved: list[str | None], sc: Scenario
) -> dict[int, str]:
    """Spread a member's rejection to its whole batch, as ``DefaultMQProducer.batch()`` does.

    ``batch()`` validates every member (and ``generateFromList`` their common topic) and wraps the first
    failure in ``MQClientException("Failed to initiate the MessageBatch", e)``: nothing of the batch is
    sent. A member whose ``putUserProperty`` failed was never made, so only it is rejected (with its own
    text) and the rest of its batch goes on.
    """
    broken = {batch_ids[r] for r in reject if batch_ids[r] is not None and reserved[r] is None}
    if not broken:
        return reject
    text = MQClientError(-1, BATCH_FAILED, sc.producers.version.faq_url).full_message
    out = dict(reject)
    for r, bid in enumerate(batch_ids):
        if bid in broken and (r not in out or reserved[r] is None):
            out[r] = text
    return out


def _prepare(messages: pa.Table, sc: Scenario) -> tuple[list[_Send], _Results, list[int]]:
    """Sends in seq order, the results skeleton, and the rows rejected up front."""
    p = sc.producers
    n = messages.num_rows
    res = _Results(n)
    col = {
        name: messages.column(name).to_pylist()
        for name in (
            "seq",
            "thread",
            "topic",
            "uniq_msg_id",
            "body_size",
            "compressibility",
            "properties_size",
            "message_type",
            "send_mode",
            "born_ts_ms",
            "batch_id",
            "order_key",
            "reserved_property",
        )
    }
    body = np.asarray(messages.column("body_size"), np.int64)
    comp = np.asarray(messages.column("compressibility"), np.float64)
    is_batch = np.asarray(pc.is_valid(messages.column("batch_id")))
    compress = (body >= p.compress_msg_body_over_howmuch) & ~is_batch
    sent_body = body.copy()
    if compress.any():
        model = _compression_model(p.compress_type, p.compress_level)
        sent_body[compress] = model.predict_sizes(body[compress], comp[compress])
    zflag = compressed_sys_flag(CompressionType[p.compress_type], version=p.version)
    txn = np.asarray(pc.equal(messages.column("message_type"), "transaction"))
    sys_flag = np.where(compress, zflag, 0) | np.where(txn, MessageSysFlag.TRANSACTION_PREPARED_TYPE, 0)
    props = np.asarray(messages.column("properties_size"), np.int64)
    element = codec.encoded_message_sizes(
        body, props, version=p.version
    )  # a batch element: the body is never compressed
    batch_props = (
        4 + 2 + 4 + 8 + 2 + 32 + (0 if p.version.properties_trailing_separator else -1)
    )  # WAIT, UNIQ_KEY

    whys: dict[int, str] = {}
    for i in range(n):
        why = rejection(col["topic"][i], int(body[i]), int(props[i]), col["reserved_property"][i], sc)
        if why is not None:
            whys[i] = why
    whys = batch_rejections(whys, col["batch_id"], col["reserved_property"], sc)

    rejected: list[int] = []
    sends: list[_Send] = []
    batches: dict[int, _Send] = {}
    for i in range(n):
        seq = col["seq"][i]
        res.set(
            i,
            producer=None,
            seq=seq,
            uniq_msg_id=col["uniq_msg_id"][i],
            born_ts_ms=col["born_ts_ms"][i],
            send_mode=col["send_mode"][i],
            compressed=bool(compress[i]),
            sys_flag=int(sys_flag[i]),
        )
        why = whys.get(i)
        if why is not None:
            rejected.append(i)
            res.set(
                i,
                status=REJECTED,
                error=why,
                attempts=0,
                brokers_sent=[],
                broker=None,
                queue_id=None,
                send_ts_ms=col["born_ts_ms"][i],
                end_ts_ms=col["born_ts_ms"][i],
                queue_wait_ms=0,
                latency_ms=0,
                wire_bytes=0,
                retry_budget_exhausted=False,
            )
            continue
        mode = col["send_mode"][i]
        mtype = col["message_type"][i]
        if mtype == "transaction" or (mode == "oneway" and is_batch[i]):
            mode = "sync"  # sendMessageInTransaction and batch sends are synchronous calls
        bid = col["batch_id"][i]
        if bid is not None:
            b = batches.get(bid)
            if b is None:
                b = batches[bid] = _Send(
                    i,
                    seq,
                    col["thread"][i],
                    col["born_ts_ms"][i],
                    mode,
                    col["topic"][i],
                    None,
                    [],
                    batch_props,
                    False,
                    0,
                )
                sends.append(b)
            b.members.append(i)
            b.born_ms = max(b.born_ms, col["born_ts_ms"][i])  # sent once the last member is made
            b.wire_bytes += int(element[i])
            res.set(i, wire_bytes=int(element[i]))
            continue
        wire = int(sent_body[i] + props[i])
        res.set(i, wire_bytes=wire)
        sends.append(
            _Send(
                i,
                seq,
                col["thread"][i],
                col["born_ts_ms"][i],
                mode,
                col["topic"][i],
                col["order_key"][i] if mtype == "ordered" else None,
                [i],
                wire,
                bool(compress[i]),
                int(sys_flag[i]),
            )
        )
    return sends, res, rejected


def simulate_producer(messages: pa.Table, sc: Scenario, *, fast: bool = True) -> SimOutput:
    """Simulate one producer's messages (schema ``MESSAGES`` without run_id, any row order).

    ``fast``: use the compiled path (:mod:`rocketsim.fastsim`, the same tables) where it applies;
    ``fast=False`` always runs this reference.
    """
    if fast:
        from rocketsim import fastsim

        if fastsim.supports(sc, messages):
            return fastsim.simulate_producer(messages, sc)
    if messages.num_rows == 0:
        return SimOutput(ATTEMPTS_SCHEMA.empty_table(), RESULTS_SCHEMA.empty_table())
    producers = pc.unique(messages.column("producer")).to_pylist()
    if len(producers) != 1:
        raise SimulationError(f"simulate_producer takes one producer's messages, got producers {producers}")
    producer = producers[0]
    messages = messages.sort_by([("seq", "ascending")])
    sends, res, _ = _prepare(messages, sc)
    sim = ProducerSimulation(sc, producer)
    att: dict[str, list] = {f.name: [] for f in ATTEMPTS_SCHEMA}
    for s, record in sim.run(sends):
        sent = [a for a in record.attempts if a.outcome is not None]
        for a in sent:
            att["producer"].append(producer)
            att["seq"].append(s.seq)
            att["attempt"].append(a.index)
            att["start_ts_ms"].append(a.start_ms)
            # a oneway caller waits for the write only; other modes wait for the broker's answer
            att["latency_ms"].append(
                a.end_ms - a.start_ms if record.mode == "oneway" else a.outcome.latency_ms
            )
            att["broker"].append(a.broker)
            att["queue_id"].append(a.queue_id)
            att["outcome"].append(a.outcome.label)
            att["response_code"].append(a.outcome.response_code if a.outcome.kind == "broker" else None)
            att["fault_isolated_until_ms"].append(a.isolated_until_ms)
            att["wire_bytes"].append(s.wire_bytes)
        if record.error is not None:
            status, error = FAILED, _error_text(record.error)
        elif record.result is not None:
            status, error = record.result.status, None
        else:
            status, error = ONEWAY_SENT, None
        last = sent[-1] if sent else None
        broker = record.result.broker if record.result is not None else (last.broker if last else None)
        queue_id = record.result.queue_id if record.result is not None else (last.queue_id if last else None)
        exhausted = any(a.flow.startswith("break:callTimeout") for a in record.attempts)
        for row in s.members:
            # a batch's attempts are counted once, on its first message (where its attempt rows are)
            lead = row == s.row
            res.set(
                row,
                status=status,
                error=error,
                attempts=len(sent) if lead else 0,
                brokers_sent=[a.broker for a in sent] if lead else [],
                broker=broker,
                queue_id=queue_id,
                send_ts_ms=record.begin_ms,
                end_ts_ms=record.end_ms,
                queue_wait_ms=record.begin_ms - res.cols["born_ts_ms"][row],
                latency_ms=record.end_ms - record.begin_ms,
                retry_budget_exhausted=exhausted,
            )
    res.cols["producer"] = [producer] * res.n
    attempts = pa.Table.from_pydict(att, schema=ATTEMPTS_SCHEMA).sort_by(
        [("seq", "ascending"), ("attempt", "ascending")]
    )
    results = pa.Table.from_pydict(res.cols, schema=RESULTS_SCHEMA)
    return SimOutput(attempts, results)


def _error_text(err: BaseException) -> str:
    cls = getattr(err, "java_class", type(err).__name__)
    text = getattr(err, "full_message", None) or str(err)
    return f"{cls}: {text}"


def simulate(messages: pa.Table, sc: Scenario) -> SimOutput:
    """Simulate any producers' messages: each producer separately, outputs in (producer, seq) order."""
    if messages.num_rows == 0:
        return SimOutput(ATTEMPTS_SCHEMA.empty_table(), RESULTS_SCHEMA.empty_table())
    outs = []
    producer_col = messages.column("producer")
    for p in sorted(pc.unique(producer_col).to_pylist()):
        outs.append(simulate_producer(messages.filter(pc.equal(producer_col, p)), sc))
    return SimOutput(
        pa.concat_tables([o.attempts for o in outs]), pa.concat_tables([o.results for o in outs])
    )
