"""What both send engines need: a scenario's arrays, the prepared sends, rejections, and the output tables.

The two engines (:mod:`rocketsim.engine.reference`, :mod:`rocketsim.engine.compiled`) differ only in how
they run the per-producer event loop. Everything else is here, once:

* the scenario side: the route timeline and route versions a producer sees, the broker model and the
  rules of its client line as flat arrays (:class:`Plan`, :func:`plan_for`; the compiled kernel takes
  them as the NamedTuples :class:`Config`, :class:`FaultRules`, :class:`Routes`, :class:`Model`);
* the messages side: :func:`prepare` turns one producer's messages into sends in seq order (a batch is
  one send led by its first accepted member), with sizes, flags and the rows the client refuses up front
  (:func:`rejection`, :func:`batch_rejections`, with the client's own texts);
* the output: an engine reports what it decided as an :class:`EngineOutput` (attempts in (send, attempt)
  order, one outcome per send); :func:`build_tables` makes the ``send_attempts`` and ``send_results``
  rows (schemas ``ATTEMPTS_SCHEMA`` / ``RESULTS_SCHEMA``) from it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum
from functools import cache
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim.broker import latency as bm
from rocketsim.broker import store
from rocketsim.broker.fault_kinds import RouteDrop
from rocketsim.broker.queue import BUSY_KINDS
from rocketsim.client.fault import DETECT_INTERVAL_MS, DETECT_PERIOD_MS, FaultArrays, Site, fault_updates
from rocketsim.client.outcomes import CATCH_OF_KIND, ONEWAY_SEES, Catch, OutcomeKind
from rocketsim.client.route import (
    PERM_READ,
    BrokerData,
    BrokerOutage,
    QueueData,
    RouteRefresh,
    RouteTimeline,
    TopicPublishInfo,
    TopicRouteData,
    build_queue_list,
    route_versions,
)
from rocketsim.client.send import Outcome, SendConfig
from rocketsim.errors import MQClientError, RocketSimError
from rocketsim.format import codec
from rocketsim.format.compression import (
    CompressibilityModel,
    CompressionType,
    compressed_sys_flag,
    default_model,
)
from rocketsim.format.message import Message, MessageSysFlag
from rocketsim.format.validate import MAX_PROPERTIES_SIZE, check_message, check_properties_size
from rocketsim.javaint import chm_spread, java_string_hash
from rocketsim.scenario import Scenario, workload
from rocketsim.tables.schemas import MESSAGES, SEND_ATTEMPTS, SEND_RESULTS, data_schema, without_run_id

ATTEMPTS_SCHEMA = without_run_id(SEND_ATTEMPTS)
RESULTS_SCHEMA = without_run_id(SEND_RESULTS)
MESSAGES_SCHEMA = data_schema(MESSAGES)

TIMEOUT_OVERSHOOT_MS = 1  # a RemotingTimeoutException is raised once the wait has passed the timeout
NO_ISOLATION = np.iinfo(np.int64).min  # "not isolated" in an attempt's isolated-until array (null)
NO_LATER_ATTEMPT = int(np.iinfo(np.int64).max)  # SimChunk.later_start_ms of a run's last chunk
BATCH_FAILED = "Failed to initiate the MessageBatch"  # DefaultMQProducer.batch() wraps any member's error
MODES = ("sync", "oneway", "async")  # the send_mode column's values, in :attr:`Prepared.s_mode` order
MESSAGE_TYPES = ("normal", "ordered", "delay", "transaction", "batch")


class Status(IntEnum):
    """The ``status`` column: a stored message's SendStatus (0..3, equal to its :class:`OutcomeKind`),
    ``FAILED`` (the send threw), ``ONEWAY_SENT`` (a oneway request was written), ``REJECTED``."""

    SEND_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3
    FAILED = 4
    ONEWAY_SENT = 5  # a oneway send has no SendResult: it was written, nothing more is known
    REJECTED = 6  # refused by the client's validators before any send


STATUS_NAMES = tuple(s.name for s in Status)
FAILED = Status.FAILED.name
ONEWAY_SENT = Status.ONEWAY_SENT.name
REJECTED = Status.REJECTED.name


class Event(IntEnum):
    """The event loops' heap order at equal times (both engines: a heap of ``(time, event, push counter)``):
    call completions and callbacks (DELIVER) before send starts (START), then the order of the pushes."""

    DELIVER = 0
    START = 1


class SendKind(IntEnum):
    """How a prepared send is made."""

    SYNC = 0  # sendDefaultImpl(SYNC): also transactional half messages and oneway batches
    ONEWAY = 1  # sendDefaultImpl(ONEWAY)
    ORDERED = 2  # send(msg, selector, key): SelectMessageQueueByHash, one attempt, the thread waits
    ORDERED_ASYNC = 3  # send(msg, selector, key, callback): retries to the same queue, the thread goes on
    ASYNC = 4  # send(msg, callback): sendDefaultImpl(ASYNC)
    ORDERED_ONEWAY = 5  # sendOneway(msg, selector, key): the thread waits for the write only


class SimulationError(RocketSimError):
    """The input cannot be simulated (e.g. rows of several producers, or a missing column)."""


@dataclass(frozen=True)
class SimOutput:
    """The two tables of a simulation: one row per attempt, one per message."""

    attempts: pa.Table
    results: pa.Table

    @classmethod
    def empty(cls) -> SimOutput:
        return cls(ATTEMPTS_SCHEMA.empty_table(), RESULTS_SCHEMA.empty_table())


@dataclass(frozen=True)
class SimChunk:
    """A part of one producer's simulation: consecutive messages in seq order (never part of a batch),
    their results (one row each, in the same order) and the attempts of their sends in (seq, attempt)
    order. The chunks of a run, concatenated, are the whole run's tables."""

    messages: pa.Table
    attempts: pa.Table
    results: pa.Table
    # no attempt of a later chunk starts before this (ms; NO_LATER_ATTEMPT: none comes)
    later_start_ms: int = NO_LATER_ATTEMPT


# ---- the broker model's answer as the send loop's Outcome ----------------------------------------


def to_outcome(o: bm.AttemptOutcome) -> Outcome:
    """The broker model's answer as the send loop's :class:`rocketsim.client.send.Outcome` (the same kind;
    a timeout waits :data:`TIMEOUT_OVERSHOOT_MS` past it, a broker error carries its remark; the answer's
    microseconds, ``exact_us``, go with the answer: a timeout's to its late answer)."""
    late = None
    if o.late_ms >= 0:  # a timeout whose answer still comes
        code = o.late_code
        kind = OutcomeKind.OK if code == 0 else OutcomeKind.BROKER_ERROR
        remark = (o.remark or bm.broker_remark(code)) if code else ""
        late = Outcome(kind, o.late_ms, code, remark, latency_us=o.exact_us)
    if o.kind == OutcomeKind.REMOTING_TIMEOUT:
        latency, code, remark, exact = o.latency_ms + TIMEOUT_OVERSHOOT_MS, 0, "", -1
    elif o.kind == OutcomeKind.BROKER_ERROR:
        latency, code, exact = o.latency_ms, o.response_code, o.exact_us
        remark = o.remark or bm.broker_remark(code)
    else:
        latency, code, remark, exact = o.latency_ms, 0, "", o.exact_us
    store_ms = o.store_ms if o.stored else 0
    return Outcome(OutcomeKind(o.kind), latency, code, remark, o.stored, store_ms, late, exact)


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
    """The name server's view of each broker, as each fault kind's ``route`` column says
    (:class:`rocketsim.broker.fault_kinds.RouteDrop`), and the producer's polls of it.

    * ``AT_ONCE``: over each interval the broker's process is dead its channel to the name server is
      closed: the name server drops it at once (``BrokerHousekeepingService.onChannelClose`` ->
      ``RouteInfoManager.onChannelDestroy``) and has it again when it restarts (its start-time
      registration);
    * ``AFTER_HEARTBEAT_TIMEOUT``: the channel stays open and the broker stops registering: the name
      server's idle handler drops it 120 s (``route.broker_expire_ms``) after its last registration (0,
      10 s, then every ``route.heartbeat_interval_ms`` (registerNameServerPeriod) from 10 s), unless it is
      back first;
    * ``UNTOUCHED``: the route is (e.g. a partition cuts producers off from the broker, not the name server).

    Producers poll every ``route.poll_interval_ms`` (10 ms after they start); the name server's scan
    timers are upstream's of the broker's release (``cluster.broker_version``).
    """
    model = bm.BrokerModel.from_scenario(sc)
    route = sc.route
    refresh = RouteRefresh.for_broker(
        sc.broker_version,
        poll_interval_ms=route.poll_interval_ms,
        expiry_ms=route.broker_expire_ms,
        register_name_server_period_ms=route.heartbeat_interval_ms,
    )
    outages = []
    horizon = horizon_ms(sc)
    for b, windows in zip(model.brokers, model.faults, strict=True):
        for w in windows:
            drop = w.rule.route
            if drop == RouteDrop.AT_ONCE:
                outages += [
                    BrokerOutage(b, t0, t1, drop_immediately=True) for t0, t1 in w.down_intervals(horizon)
                ]
            elif drop == RouteDrop.AFTER_HEARTBEAT_TIMEOUT:
                outages.append(BrokerOutage(b, refresh.last_registration_at_or_before(w.start_ms), w.end_ms))
    return RouteTimeline(cluster_route(sc), tuple(outages), refresh)


def horizon_ms(sc: Scenario) -> int:
    """A time safely after every send of the scenario (for route change lists)."""
    wl = sc.workload
    if wl.rate_steps:
        arrivals_ms = int(wl.span_s * 1000 * 1.5) + 60_000
    else:
        per_producer_rate = wl.rate_per_s / sc.producers.count
        n = -(-wl.total_messages() // sc.producers.count)
        arrivals_ms = int(n / per_producer_rate * 1000 * 1.5) + 60_000
    faults_ms = max((int(f.end_s * 1000) for f in sc.faults), default=0)
    return max(arrivals_ms, faults_ms) + 600_000


def producer_route_versions(sc: Scenario) -> list[tuple[int, TopicRouteData]]:
    """``[(from_ms, route)]``: the route a producer sees from 0 and after each change it polls."""
    return route_versions(route_timeline(sc), horizon_ms(sc))


def route_version_at(starts: list[int], now: int) -> int:
    """The index of the route version in force at ``now`` (``starts``: the versions' start times)."""
    return bisect.bisect_right(starts, now) - 1


# ---- the scenario as arrays (what the compiled kernel takes) --------------------------------------


class Config(NamedTuple):
    """The producer settings and client-line behaviours the kernel branches on: each line behaviour is a
    column of the version's row of :data:`rocketsim.client.versions.REMOTING_LINES`, by its name (never a
    version or a line number)."""

    index_start_signed: bool  # ThreadLocalIndex's first value is nextInt() (else Math.abs of it)
    index_wrap: int  # versions.IndexWrap: how ThreadLocalIndex steps past Integer.MAX_VALUE
    ticks_per_candidate: bool  # selectOneMessageQueue(last): a tick per candidate (else one, 4.3-4.7)
    latency_scan_broker: int  # versions.ScanBroker: the 4.x latency scan's clause about the last broker
    latency_scan_keeps_sign: bool  # 5.1.0-5.1.3: `index++ % size` (a negative one: round robin)
    shuffles_before_pick: bool  # pickOneAtLeast shuffles first (4.3-4.8)
    availability_needs_reachable: bool  # 5.1.4: isAvailable needs the reachable flag
    resets_index_on_retry: bool  # sendDefaultImpl resets the index on every retry
    uses_queue_filters: bool  # the 5.x selection: QueueFilters, no pickOneAtLeast
    rewrites_cached_queue: bool  # 4.9.7: the fallback rewrites the cached MessageQueue in place
    isolation_only_extends: bool  # a fault item's start only moves forward
    tracks_reachability: bool  # updateFaultItem sets the item's reachableFlag
    remoting_completes_futures: bool  # invokeAsync hands connect failures, refusals to the callback
    async_latency_from_call_begin: bool  # callbacks measure from sendMessageAsync's beginStartTime
    async_retry_needs_budget: bool  # onExceptionImpl retries only with time left
    async_retry_gets_budget: bool  # a retry gets the time left (else 0, 4.3-4.6)
    async_catches_invoke_failure: bool  # sendMessageAsync catches invokeAsync's failures (4.9.3+)
    wait_timeout_reports_cost: bool  # the "wait response timeout" text: the cost, not the timeout
    closes_on_sync_timeout: bool  # invokeSync closes the channel on a timeout (4.9.1+), failing the others
    close_needs_time_left: bool  # and only with time left (5.1.4+ shouldClose)
    fault_on: bool  # sendLatencyFaultEnable
    timeout_ms: int  # sendMsgTimeout
    times_total: int  # 1 + retryTimesWhenSendFailed
    async_retries: int  # retryTimesWhenSendAsyncFailed
    max_timeout_per_request_ms: int  # sendMsgMaxTimeoutPerRequest (5.3.3+), -1: none
    retry_another_broker: bool  # retryAnotherBrokerWhenNotStoreOK
    isolation_latency_ms: int  # what updateFaultItem(.., isolation=true) feeds computeNotAvailableDuration
    pool: bool  # producers.sender_model == "pool" (else "partitioned")
    scan_first_ms: int  # the response-table scan: first run (ClientVersion.response_scan_first_ms)
    scan_period_ms: int  # and period
    executor_threads: int  # the async sender executor's threads (producers.async_sender_threads)
    executor_queue: int  # its queue's bound (producers.async_sender_queue): a full one rejects
    callback_threads: int  # the callback executor's threads (producers.callback_executor_threads)
    async_permits: int  # the async semaphore's permits (producers.async_semaphore_permits)
    detector: bool  # the 5.x detector runs (start_detector_enable)
    detect_period_ms: int  # its ticks: every period from one period after the start (fault.DETECT_PERIOD_MS)
    detect_interval_ms: int  # an item is probed again this long after its last probe


class FaultRules(NamedTuple):
    """The line's rules as arrays: its cells of :data:`rocketsim.client.fault.FAULT_UPDATES`, the
    retry codes, what a oneway caller sees."""

    retry_codes: np.ndarray  # retryResponseCodes
    latency_max: np.ndarray
    not_available_duration: np.ndarray
    catch_of_kind: np.ndarray  # [OutcomeKind] -> Catch
    isolation: np.ndarray  # [Site, Catch] -> bool (a cell FAULT_UPDATES lacks: False, never read)
    reachable: np.ndarray  # [Site, Catch] -> bool, resolved against startDetectorEnable
    oneway_sees: np.ndarray  # [OutcomeKind] -> bool: outcomes.ONEWAY_SEES of the version


class Routes(NamedTuple):
    """The route versions a producer sees, as queue lists of broker indexes."""

    start: np.ndarray  # [V] start ms of each version
    n_queues: np.ndarray  # [V] writable queues in the version
    queue_broker: np.ndarray  # [V, Q] broker index of each queue slot
    queue_id: np.ndarray  # [V, Q]
    write_queue_nums: np.ndarray  # [V, B] getWriteQueueNumsByBroker of each broker (-1: none)
    resolves: np.ndarray  # [V, B] findBrokerAddressInPublish finds the broker's master (the detector)


# column layout of Model's arrays
P_MEDIAN, P_SIGMA, P_SPIKE_PROBABILITY, P_SPIKE_SCALE, P_SPIKE_ALPHA, P_SPIKE_MAX = range(6)
# a fault window's columns: its span, its kind's row resolved (fault_kinds.FAULT_KINDS: what an attempt
# meets while the process lives, Effect; the process's down pattern, fault_kinds.down_cycle; the probe while
# it lives, Probe) and its burst's error
W_START, W_END, W_EFFECT, W_CYCLE, W_CYCLE_DOWN, W_PROBE, W_BURST_KIND, W_BURST_CODE = range(8)
WF_FACTOR, WF_RATE = range(2)


class Model(NamedTuple):
    """:class:`rocketsim.broker.latency.BrokerModel` as arrays (per broker, then its fault windows)."""

    params: np.ndarray  # [B, 6] float: P_* columns
    connect_ms: np.ndarray  # [B] a refused connection's latency
    connect_timeout_ms: np.ndarray  # [B] a connect nothing answers (partition): CONNECT_TIMEOUT_MILLIS
    error_cum: np.ndarray  # [B, E] cumulative probabilities of the error mix
    error_kind: np.ndarray  # [B, E] OutcomeKind
    error_code: np.ndarray  # [B, E] response code
    window_offsets: np.ndarray  # [B + 1] broker b's windows are rows offsets[b]:offsets[b + 1]
    window_ints: np.ndarray  # [W, 8] W_* columns
    window_floats: np.ndarray  # [W, 2] WF_* columns


@dataclass(frozen=True)
class Plan:
    """Everything the compiled kernel needs that depends on the scenario only."""

    brokers: tuple[str, ...]
    config: Config
    rules: FaultRules
    routes: Routes
    model: Model
    broker_hash: np.ndarray  # ConcurrentHashMap.spread(name.hashCode()) of each broker
    max_bins: int  # the fault table's bins with every broker in it
    label_keys: np.ndarray  # kind << 32 | response code, of every outcome the model can give
    labels: list[str]  # their ``outcome`` column texts


_PLANS: dict[int, tuple[Scenario, Plan]] = {}


def plan_for(sc: Scenario) -> Plan:
    """The scenario's :class:`Plan`, cached per scenario object."""
    hit = _PLANS.get(id(sc))
    if hit is not None and hit[0] is sc:
        return hit[1]
    plan = _build_plan(sc)
    if len(_PLANS) > 32:
        _PLANS.clear()
    _PLANS[id(sc)] = (sc, plan)
    return plan


def _config(sc: Scenario) -> Config:
    p = sc.producers
    line = p.version.line
    cfg = SendConfig.from_settings(p)
    return Config(
        index_start_signed=line.index_start_signed,
        index_wrap=int(line.index_wrap),
        ticks_per_candidate=line.ticks_per_candidate,
        latency_scan_broker=int(line.latency_scan_broker),
        latency_scan_keeps_sign=line.latency_scan_keeps_sign,
        shuffles_before_pick=line.shuffles_before_pick,
        availability_needs_reachable=line.availability_needs_reachable,
        resets_index_on_retry=line.resets_index_on_retry,
        uses_queue_filters=line.uses_queue_filters,
        rewrites_cached_queue=line.rewrites_cached_queue,
        isolation_only_extends=line.isolation_only_extends,
        tracks_reachability=line.tracks_reachability,
        remoting_completes_futures=line.remoting_completes_futures,
        async_latency_from_call_begin=line.async_latency_from_call_begin,
        async_retry_needs_budget=line.async_retry_needs_budget,
        async_retry_gets_budget=line.async_retry_gets_budget,
        async_catches_invoke_failure=line.async_catches_invoke_failure,
        wait_timeout_reports_cost=line.wait_timeout_reports_cost,
        closes_on_sync_timeout=p.version.closes_channel_on_sync_timeout,
        close_needs_time_left=p.version.close_on_timeout_needs_time_left,
        fault_on=bool(p.send_latency_fault_enable),
        timeout_ms=cfg.send_msg_timeout_ms,
        times_total=cfg.times_total,
        async_retries=cfg.retry_times_when_send_async_failed,
        max_timeout_per_request_ms=cfg.max_timeout_per_request,
        retry_another_broker=bool(cfg.retry_another_broker_when_not_store_ok),
        isolation_latency_ms=line.isolation_latency_ms,
        pool=p.sender_model == "pool",
        scan_first_ms=p.version.response_scan_first_ms,
        scan_period_ms=p.version.response_scan_period_ms,
        executor_threads=p.executor_threads,
        executor_queue=p.async_sender_queue,
        callback_threads=p.callback_threads,
        async_permits=p.async_semaphore_permits,
        detector=start_detector_enable(sc),
        detect_period_ms=DETECT_PERIOD_MS,
        detect_interval_ms=DETECT_INTERVAL_MS,
    )


def start_detector_enable(sc: Scenario) -> bool:
    """``startDetectorEnable`` as the strategy sees it (the 4.9 lines have no detector)."""
    return bool(sc.producers.start_detector_enable) and sc.producers.version.has_fault_detector


def _fault_rules(sc: Scenario) -> FaultRules:
    line = sc.producers.version.line
    arrays = FaultArrays.default(line)
    cells = fault_updates(line)
    isolation = np.zeros((len(Site), len(Catch)), np.bool_)
    reachable = np.zeros((len(Site), len(Catch)), np.bool_)
    detector = start_detector_enable(sc)
    for site, by_catch in cells.items():
        for catch, (iso, reach) in by_catch.items():
            isolation[site, catch] = iso
            reachable[site, catch] = reach.value_for(detector)
    oneway_sees = ONEWAY_SEES[sc.producers.version.oneway_connects_synchronously]
    return FaultRules(
        retry_codes=np.array(sorted(SendConfig.from_settings(sc.producers).retry_codes), np.int64),
        latency_max=np.array(arrays.latency_max, np.int64),
        not_available_duration=np.array(arrays.not_available_duration, np.int64),
        catch_of_kind=np.array([CATCH_OF_KIND[k] for k in OutcomeKind], np.int64),
        isolation=isolation,
        reachable=reachable,
        oneway_sees=np.array([k in oneway_sees for k in OutcomeKind], np.bool_),
    )


def _routes(sc: Scenario, brokers: tuple[str, ...]) -> Routes:
    bidx = {b: k for k, b in enumerate(brokers)}
    writable_only = sc.producers.version.line.counts_writable_queues_only
    versions = producer_route_versions(sc)
    lists = [build_queue_list("T", route) for _, route in versions]
    max_q = max(1, max(len(slots) for slots, _, _ in lists))
    qb = np.zeros((len(versions), max_q), np.int64)
    qq = np.zeros((len(versions), max_q), np.int64)
    wqn = np.full((len(versions), len(brokers)), -1, np.int64)
    resolves = np.array(
        [[route.master_addr(b) is not None for b in brokers] for _, route in versions], np.bool_
    )
    for v, (slots, order, sorted_route) in enumerate(lists):
        qb[v, : len(slots)] = [bidx[s.broker_name] for s in slots]
        qq[v, : len(slots)] = [s.queue_id for s in slots]
        tp = TopicPublishInfo("T", sorted_route, slots, None, order)  # type: ignore[arg-type]
        for b, k in bidx.items():
            wqn[v, k] = tp.write_queue_nums_by_broker(b, writable_only=writable_only)
    return Routes(
        start=np.array([t for t, _ in versions], np.int64),
        n_queues=np.array([len(slots) for slots, _, _ in lists], np.int64),
        queue_broker=qb,
        queue_id=qq,
        write_queue_nums=wqn,
        resolves=resolves.reshape(len(versions), len(brokers)),
    )


def _model(sc: Scenario) -> Model:
    bmod = bm.BrokerModel.from_scenario(sc)
    params = bmod.params
    offsets = np.zeros(len(bmod.brokers) + 1, np.int64)
    ints: list[list[int]] = []
    floats: list[list[float]] = []
    for k, windows in enumerate(bmod.faults):
        for w in windows:
            rule = w.rule
            ints.append(
                [
                    w.start_ms,
                    w.end_ms,
                    w.live_effect,
                    w.cycle_ms,
                    w.dead_ms,
                    rule.probe,
                    w.burst_kind,
                    w.burst_code,
                ]
            )
            floats.append([w.factor, w.rate])
        offsets[k + 1] = len(ints)
    return Model(
        params=np.array(
            [
                [q.median_ms, q.sigma, q.spike_probability, q.spike_scale_ms, q.spike_alpha, q.spike_max_ms]
                for q in params
            ],
            np.float64,
        ),
        connect_ms=np.array([int(round(q.connect_refused_ms)) for q in params], np.int64),
        connect_timeout_ms=np.array([q.connect_timeout_ms for q in params], np.int64),
        error_cum=np.array([q.error_cum for q in params], np.float64),
        error_kind=np.array([q.error_kind for q in params], np.int64),
        error_code=np.array([q.error_code for q in params], np.int64),
        window_offsets=offsets,
        window_ints=np.array(ints, np.int64).reshape(-1, 8),
        window_floats=np.array(floats, np.float64).reshape(-1, 2),
    )


def _max_bins(n_brokers: int) -> int:
    """ConcurrentHashMap bins the fault table can grow to (from 32, doubling at 3/4 full)."""
    bins, size_ctl = 32, 24
    while n_brokers >= size_ctl:
        size_ctl = 2 * bins - (bins >> 1)
        bins *= 2
    return bins


def _labels(model: Model) -> tuple[np.ndarray, list[str]]:
    """Every (kind, response code) the model can answer, and its ``outcome`` text."""
    broker_error = OutcomeKind.BROKER_ERROR
    codes = {
        int(c)
        for c, k in zip(model.error_code.ravel(), model.error_kind.ravel(), strict=True)
        if k == broker_error
    }
    codes |= {int(r[W_BURST_CODE]) for r in model.window_ints if r[W_BURST_KIND] == broker_error}
    codes.add(bm.MESSAGE_ILLEGAL)  # the store's refusal of a message's properties
    pairs = [(int(k), 0) for k in OutcomeKind if k != broker_error] + [
        (int(broker_error), c) for c in sorted(codes)
    ]
    labels = [to_outcome(bm.AttemptOutcome(k, 0, c)).label for k, c in pairs]
    return np.array([(k << 32) + c for k, c in pairs], np.int64), labels


def _build_plan(sc: Scenario) -> Plan:
    brokers = tuple(sc.cluster.brokers)
    model = _model(sc)
    label_keys, labels = _labels(model)
    return Plan(
        brokers=brokers,
        config=_config(sc),
        rules=_fault_rules(sc),
        routes=_routes(sc, brokers),
        model=model,
        broker_hash=np.array([chm_spread(java_string_hash(b)) for b in brokers], np.int64),
        max_bins=_max_bins(len(brokers)),
        label_keys=label_keys,
        labels=labels,
    )


# ---- the messages side: rejections ----------------------------------------------------------------


def rejection(
    topic: str,
    body_size: int,
    properties_size: int,
    reserved: str | None,
    sc: Scenario,
    *,
    batch_member: bool = False,
) -> str | None:
    """The client's error text if this message is refused before any send, else None.

    Order as the client meets the checks: ``putUserProperty`` (at message construction), then
    ``Validators.checkMessage`` on send, then, for a batch member, the properties length when
    ``DefaultMQProducer.batch()`` encodes it (4.9.8 ``encodeMessage``'s RuntimeException; 5.3.3 overflows
    the short instead: either way the batch fails). No client checks a single message's properties
    (``Validators.checkMessage`` has no such check in any version): the broker does
    (``rocketsim.broker.store.properties_illegal``).
    """
    version = sc.producers.version
    if reserved is not None:
        try:
            Message(topic, b"x").put_user_property(reserved, "v", version=version)
        except RocketSimError as exc:
            return str(exc)
    try:
        check_message(topic, body_size, sc.producers.max_message_size, None, version)
        if batch_member:
            check_properties_size(properties_size)
    except (MQClientError, RocketSimError) as exc:
        return getattr(exc, "full_message", None) or str(exc)
    return None


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


def _rejections(
    messages: pa.Table, sc: Scenario, body: np.ndarray, props: np.ndarray, topic_idx: np.ndarray, topics: list
) -> dict[int, str]:
    """Rows the client refuses, with its text; only rows that can fail are checked one by one."""
    p = sc.producers
    bad_topic = np.array([rejection(t, 1, 0, None, sc) is not None for t in topics] + [True], bool)
    reserved = np.asarray(pc.is_valid(messages.column("reserved_property")))
    in_batch = np.asarray(pc.is_valid(messages.column("batch_id")))
    suspect = (
        reserved
        | bad_topic[topic_idx]
        | (body == 0)
        | (body > p.max_message_size)
        | ((props > MAX_PROPERTIES_SIZE) & in_batch)
    )
    rows = np.flatnonzero(suspect)
    if rows.size == 0:
        return {}
    topic = messages.column("topic").take(rows).to_pylist()
    res = messages.column("reserved_property").take(rows).to_pylist()
    out: dict[int, str] = {}
    for k, r in enumerate(rows.tolist()):
        why = rejection(topic[k], int(body[r]), int(props[r]), res[k], sc, batch_member=bool(in_batch[r]))
        if why is not None:
            out[r] = why
    if out and pc.any(pc.is_valid(messages.column("batch_id"))).as_py():
        out = batch_rejections(
            out, messages.column("batch_id").to_pylist(), messages.column("reserved_property").to_pylist(), sc
        )
    return out


# ---- the messages side: sends -----------------------------------------------------------------------


@cache
def compression_model(ctype: str, level: int) -> CompressibilityModel:
    """The seeded compressibility model of a compression type and level (built once)."""
    return default_model(CompressionType[ctype], level)


@dataclass
class Prepared:
    """One producer's messages as sends (arrays), plus what the result rows need."""

    messages: pa.Table  # sorted by seq
    producer: int
    topics: list[str]  # topic id -> name
    # per row
    rejected: np.ndarray  # bool
    reject_text: dict[int, str]  # row -> the client's text
    send_of_row: np.ndarray  # send index, -1 if rejected
    row_wire: np.ndarray
    compressed: np.ndarray
    sys_flag: np.ndarray
    born: np.ndarray
    # per send
    s_row: np.ndarray  # the leading row
    s_seq: np.ndarray
    s_born: np.ndarray
    s_thread: np.ndarray  # the thread value of the leading row
    s_kind: np.ndarray  # SendKind
    s_mode: np.ndarray  # index into MODES
    s_topic: np.ndarray  # index into topics
    s_order_hash: np.ndarray  # String.hashCode of an ordered send's key
    s_wire: np.ndarray
    # what the broker checks of a single message's properties (store.illegal_properties_parts)
    s_props_base: np.ndarray
    s_props_qid: np.ndarray
    s_props_chars: np.ndarray
    # UNIQ_KEY: the run's seed (the producer's process identity) and whether a batch gets a key of its own
    seed: int = 0
    batch_uniq_key: bool = False

    @property
    def n_sends(self) -> int:
        return int(self.s_seq.size)


def _codes(col: pa.ChunkedArray | pa.Array, names: tuple[str, ...] | None = None) -> tuple[np.ndarray, list]:
    """Dictionary codes of a string column (-1 for null) and the dictionary (or codes into ``names``)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()  # one dictionary for every row
    enc = pc.dictionary_encode(col)
    dictionary = enc.dictionary.to_pylist()
    idx = np.asarray(enc.indices.fill_null(-1), np.int64)
    if names is None:
        return idx, dictionary
    remap = np.array([names.index(d) if d in names else -2 for d in dictionary] + [-1], np.int64)
    return remap[idx], list(names)


def _growing_codes(col: pa.ChunkedArray | pa.Array, names: list[str]) -> np.ndarray:
    """Codes of a string column (-1 for null) into ``names``, which gains the values it lacks."""
    idx, dictionary = _codes(col)
    at = {name: k for k, name in enumerate(names)}
    for name in dictionary:
        if name not in at:
            at[name] = len(names)
            names.append(name)
    remap = np.array([at[d] for d in dictionary] + [-1], np.int64)
    return remap[idx]


def _batch_request_properties_size(sc: Scenario) -> int:
    """The batch request's own properties on the wire
    (:func:`rocketsim.broker.store.batch_request_properties`):
    4.9 ``WAIT\x01true`` (9 bytes), 5.x also its ``UNIQ_KEY`` and the trailing separator (52)."""
    version = sc.producers.version
    return codec.properties_size(store.batch_request_properties(version), version=version)


def _oversize_batches(
    messages: pa.Table, sc: Scenario, ok: np.ndarray, is_batch: np.ndarray, element: np.ndarray
) -> dict[int, str]:
    """Members of batches whose encoded body is over ``max_message_size``, with the client's text.

    ``DefaultMQProducerImpl.sendDefaultImpl`` runs ``Validators.checkMessage`` on the ``MessageBatch``
    that ``DefaultMQProducer.batch()`` made: its body is the encoded members (``MessageBatch.encode``:
    22 bytes + body + properties each), refused when longer than ``maxMessageSize`` (equal is accepted),
    after every member passed its own checks, before any selection.
    """
    rows = np.flatnonzero(ok & is_batch)
    if rows.size == 0:
        return {}
    batch_id = np.asarray(messages.column("batch_id").fill_null(0), np.int64)[rows]
    _, first, inverse = np.unique(batch_id, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    encoded = np.bincount(inverse, weights=element[rows]).astype(np.int64)
    too_big = encoded > sc.producers.max_message_size
    if not too_big.any():
        return {}
    topics = messages.column("topic").take(pa.array(rows[first])).to_pylist()
    texts = {g: rejection(topics[g], int(encoded[g]), 0, None, sc) for g in np.flatnonzero(too_big).tolist()}
    return {int(r): texts[g] for r, g in zip(rows.tolist(), inverse.tolist(), strict=True) if g in texts}


def prepare(messages: pa.Table, sc: Scenario, topics: list[str] | None = None) -> Prepared:
    """One producer's messages (any row order) as sends in seq order, rejected rows, sizes and flags.

    A send is an accepted message, or a batch (one send of a ``MessageBatch``, never compressed, sent once
    its last member is made, keyed by its first accepted member); transactional half messages and oneway
    batches are synchronous calls; ordered messages with a key go through the selector.

    ``topics``: the topic ids of a run prepared a chunk at a time (whole batches, :func:`batch_aligned`):
    its chunks' topics in the order first seen, extended with this chunk's new ones (the sends' topic ids
    index it); None: this table's own.
    """
    if messages.num_rows == 0:
        raise SimulationError("prepare needs at least one message")
    p = sc.producers
    seq_col = np.asarray(messages.column("seq"), np.int64)
    if seq_col.size > 1 and not bool(np.all(seq_col[1:] > seq_col[:-1])):
        messages = messages.sort_by([("seq", "ascending")])
        seq_col = np.asarray(messages.column("seq"), np.int64)
    n = messages.num_rows
    producer = int(messages.column("producer")[0].as_py())
    body = np.asarray(messages.column("body_size"), np.int64)
    comp = np.asarray(messages.column("compressibility"), np.float64)
    props = np.asarray(messages.column("properties_size"), np.int64)
    born = np.asarray(messages.column("born_ts_ms"), np.int64)
    thread = np.asarray(messages.column("thread"), np.int64)
    is_batch = np.asarray(pc.is_valid(messages.column("batch_id")))
    batch_id = np.asarray(messages.column("batch_id").fill_null(0), np.int64)
    mtype, _ = _codes(messages.column("message_type"), MESSAGE_TYPES)
    mode, _ = _codes(messages.column("send_mode"), MODES)

    # sizes and flags: a batch element's body is never compressed
    compress = (body >= p.compress_msg_body_over_howmuch) & ~is_batch & p.compresses_bodies  # gRPC: as sent
    sent_body = body.copy()
    if compress.any():
        model = compression_model(p.compress_type, p.compress_level)
        sent_body[compress] = model.predict_sizes(body[compress], comp[compress])
    zflag = compressed_sys_flag(CompressionType[p.compress_type], version=p.version)
    txn = mtype == MESSAGE_TYPES.index("transaction")
    sys_flag = np.where(compress, zflag, 0) | np.where(txn, MessageSysFlag.TRANSACTION_PREPARED_TYPE, 0)
    element = codec.encoded_message_sizes(body, props, version=p.version)
    batch_props = _batch_request_properties_size(sc)

    if topics is None:
        topic_idx, topics = _codes(messages.column("topic"))
    else:
        topic_idx = _growing_codes(messages.column("topic"), topics)
    reject_text = _rejections(messages, sc, body, props, topic_idx, topics)
    rejected = np.zeros(n, bool)
    if reject_text:
        rejected[np.fromiter(reject_text, np.int64, len(reject_text))] = True
    oversize = _oversize_batches(messages, sc, ~rejected, is_batch, element)
    if oversize:
        reject_text = {**reject_text, **oversize}
        rejected[np.fromiter(oversize, np.int64, len(oversize))] = True
    ok = ~rejected
    oneway = MODES.index("oneway")
    eff_mode = np.where(txn | ((mode == oneway) & is_batch), MODES.index("sync"), mode)

    # sends: every accepted non-batch row, and each batch at its first accepted member
    batch_rows = np.flatnonzero(ok & is_batch)
    _, first, inverse = np.unique(batch_id[batch_rows], return_index=True, return_inverse=True)
    leaders = batch_rows[first]
    s_row = np.sort(np.concatenate([np.flatnonzero(ok & ~is_batch), leaders]))
    n_s = s_row.size
    send_of_row = np.full(n, -1, np.int64)
    send_of_row[s_row] = np.arange(n_s)
    send_of_row[batch_rows] = send_of_row[leaders][inverse.reshape(-1)]
    s_born = born[s_row].copy()
    s_wire = (sent_body + props)[s_row]
    if batch_rows.size:
        sb = send_of_row[batch_rows]
        np.maximum.at(s_born, sb, born[batch_rows])
        batch_wire = np.zeros(n_s, np.int64)
        np.add.at(batch_wire, sb, element[batch_rows])
        s_wire = np.where(is_batch[s_row], batch_props + batch_wire, s_wire)
    row_wire = np.where(rejected, 0, np.where(is_batch, element, sent_body + props))

    # ordered sends: SelectMessageQueueByHash over String.hashCode of the key
    okey_idx, okeys = _codes(messages.column("order_key"))
    ohash = np.array([java_string_hash(k) for k in okeys] + [0], np.int64)[okey_idx]
    ordered = (mtype == MESSAGE_TYPES.index("ordered")) & (okey_idx >= 0)
    s_mode = eff_mode[s_row]
    s_ordered = ordered[s_row] & ~is_batch[s_row]
    is_async = s_mode == MODES.index("async")
    s_kind = np.select(
        [s_ordered & is_async, s_ordered & (s_mode == oneway), s_ordered, is_async, s_mode == oneway],
        [SendKind.ORDERED_ASYNC, SendKind.ORDERED_ONEWAY, SendKind.ORDERED, SendKind.ASYNC, SendKind.ONEWAY],
        SendKind.SYNC,
    ).astype(np.int64)
    props_base, props_qid, props_chars = store.illegal_properties_parts(
        messages, p.version, sc.broker_version
    )
    return Prepared(
        messages=messages,
        producer=producer,
        topics=topics,
        rejected=rejected,
        reject_text=reject_text,
        send_of_row=send_of_row,
        row_wire=row_wire,
        compressed=compress,
        sys_flag=sys_flag,
        born=born,
        s_row=s_row,
        s_seq=seq_col[s_row],
        s_born=s_born,
        s_thread=thread[s_row],
        s_kind=s_kind,
        s_mode=s_mode,
        s_topic=topic_idx[s_row],
        s_order_hash=ohash[s_row],
        s_wire=s_wire,
        s_props_base=props_base[s_row],
        s_props_qid=props_qid[s_row],
        s_props_chars=props_chars[s_row],
        seed=sc.seed,
        batch_uniq_key=p.version.gives_batch_uniq_key,
    )


def one_producer(messages: pa.Table) -> int:
    """The producer of ``messages``; :class:`SimulationError` if the rows are of several producers."""
    producers = pc.unique(messages.column("producer")).to_pylist()
    if len(producers) != 1:
        raise SimulationError(f"simulate_producer takes one producer's messages, got producers {producers}")
    return int(producers[0])


# ---- the output: what an engine decided, as the two tables ---------------------------------------


@dataclass(frozen=True)
class StoreColumns:
    """Per attempt, what the closed-loop store saw (:class:`rocketsim.broker.queue.StoreAnswer`; -1: the
    store did not see it, or for ``busy`` it was not rejected): the rejection's
    :class:`rocketsim.broker.queue.Fate`, the queue depth it found, its append's writer time (us)."""

    busy: np.ndarray
    depth: np.ndarray
    service: np.ndarray


@dataclass
class EngineOutput:
    """What an engine decided: attempts in (send, attempt) order, and one outcome per send.

    Strings are indexes: brokers into ``brokers``, outcome labels into ``labels``, error texts into
    ``texts`` (-1: none); an attempt's isolated-until time is :data:`NO_ISOLATION` when not isolated.
    """

    brokers: list[str]
    labels: list[str]
    texts: list[str]
    a_send: np.ndarray
    a_attempt: np.ndarray
    a_start: np.ndarray
    a_latency: np.ndarray
    a_broker: np.ndarray
    a_queue_id: np.ndarray
    a_label: np.ndarray
    a_code: np.ndarray
    a_has_code: np.ndarray  # the outcome is a broker error (the response_code column is not null)
    a_isolated_until: np.ndarray
    a_stored: np.ndarray  # the broker stored the request (whatever the client saw)
    a_stored_ts: np.ndarray  # when (meaningless where not stored)
    a_start_us: np.ndarray  # the attempt's start in microseconds (a_start x 1000 but for the client's CPU)
    a_latency_us: np.ndarray  # its answer's latency in microseconds before rounding (-1: none, whole ms)
    att_off: np.ndarray  # send s has attempts att_off[s]:att_off[s + 1]
    status: np.ndarray  # Status
    error: np.ndarray  # index into texts, -1: none
    broker: np.ndarray  # the result's broker, else the last attempt's, else -1
    queue_id: np.ndarray  # -1: none
    begin: np.ndarray
    end: np.ndarray
    exhausted: np.ndarray  # the call-timeout budget ran out (retry_budget_exhausted)
    n_sent: np.ndarray  # attempts sent
    thread: np.ndarray  # the sender thread that took the send
    kernel_start: np.ndarray  # when sendKernelImpl first ran (ASYNC: on an executor thread), else begin
    a_store: StoreColumns | None = None  # closed-loop brokers only (None: the store columns are null)


def _table(schema: pa.Schema, n: int, columns: dict[str, pa.Array | pa.ChunkedArray]) -> pa.Table:
    """A table of ``schema``; a column the simulation does not fill is all nulls."""
    return pa.Table.from_arrays([columns.get(f.name, pa.nulls(n, f.type)) for f in schema], schema=schema)


def _take_str(names: list[str], idx: np.ndarray) -> pa.Array:
    """``names[idx]`` as a string array, null where ``idx < 0``."""
    return pc.take(pa.array(names, pa.string()), pa.array(idx, pa.int64(), mask=idx < 0))


def _store_columns(st: StoreColumns | None) -> dict[str, pa.Array]:
    """The attempt columns of the closed-loop store (none: left null)."""
    if st is None:
        return {}
    names = [""] * (max(BUSY_KINDS) + 1)
    for fate, name in BUSY_KINDS.items():
        names[fate] = name
    return {
        "busy_kind": _take_str(names, st.busy),
        "store_queue_depth": pa.array(st.depth.astype(np.int32), mask=st.depth < 0),
        "store_service_us": pa.array(st.service, mask=st.service < 0),
    }


def _attempts_table(prep: Prepared, out: EngineOutput) -> pa.Table:
    n_a = out.a_send.size
    return _table(
        ATTEMPTS_SCHEMA,
        n_a,
        {
            "producer": pa.array(np.full(n_a, prep.producer, np.int32)),
            "seq": pa.array(prep.s_seq[out.a_send]),
            "attempt": pa.array(out.a_attempt.astype(np.int32, copy=False)),
            "start_ts_ms": pa.array(out.a_start),
            "latency_ms": pa.array(out.a_latency),
            "broker": _take_str(out.brokers, out.a_broker),
            "queue_id": pa.array(out.a_queue_id.astype(np.int32, copy=False)),
            "outcome": _take_str(out.labels, out.a_label),
            "response_code": pa.array(out.a_code.astype(np.int32, copy=False), mask=~out.a_has_code),
            "fault_isolated_until_ms": pa.array(
                out.a_isolated_until, mask=out.a_isolated_until == NO_ISOLATION
            ),
            "wire_bytes": pa.array(prep.s_wire[out.a_send].astype(np.int32)),
            "stored": pa.array(out.a_stored.astype(bool)),
            "stored_ts_ms": pa.array(out.a_stored_ts, mask=~out.a_stored.astype(bool)),
            **_store_columns(out.a_store),
        },
    )


def answer_sub_ms(out: EngineOutput) -> np.ndarray:
    """Per send, what its last attempt's answer adds to the whole-ms latency in microseconds: the answer's
    own microseconds (``a_start_us + a_latency_us``) against the whole ms the send loop took it at
    (``a_start + a_latency``), where that answer ended the send (it ended no sooner); else 0."""
    n = out.status.size
    last = out.att_off[1:] - 1
    has = out.att_off[1:] > out.att_off[:-1]
    k = np.where(has, last, 0)
    if out.a_send.size == 0:
        return np.zeros(n, np.int64)
    lat_us, start_us = out.a_latency_us[k], out.a_start_us[k]
    answer_ms = out.a_start[k] + out.a_latency[k]
    ended = has & (lat_us >= 0) & (out.end >= answer_ms)
    return np.where(ended, start_us + lat_us - answer_ms * 1000, 0).astype(np.int64)


def _results_table(prep: Prepared, out: EngineOutput, uniq: pa.Array | None = None) -> pa.Table:
    rows = prep.send_of_row
    n = rows.size
    sent = rows >= 0
    srow = np.where(sent, rows, 0)

    def per_row(values: np.ndarray, default: np.ndarray | int) -> np.ndarray:
        """A per-send array spread over the message rows (``default`` on rejected rows)."""
        if values.size == 0:  # every row rejected
            return np.broadcast_to(np.asarray(default), rows.shape).copy()
        return np.where(sent, values[srow], default)

    status = per_row(out.status, Status.REJECTED)
    texts = list(out.texts)
    err_idx = per_row(out.error, -1)
    for r in np.flatnonzero(prep.rejected).tolist():
        err_idx[r] = len(texts)
        texts.append(prep.reject_text[r])
    # a batch's attempts are counted (and its brokers listed) on its first member only
    lead = per_row(prep.s_row, -1) == np.arange(n)
    counts = np.where(lead, per_row(out.n_sent, 0), 0)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    first = per_row(out.att_off[:-1], 0)
    value_pos = np.repeat(first - offsets[:-1], counts) + np.arange(offsets[-1])
    brokers_sent = pa.ListArray.from_arrays(
        pa.array(offsets.astype(np.int32)), _take_str(out.brokers, out.a_broker[value_pos])
    )
    begin = per_row(out.begin, prep.born)
    end = per_row(out.end, prep.born)
    broker = per_row(out.broker, -1)
    qid = per_row(out.queue_id, -1)
    exhausted = per_row(out.exhausted, False)
    thread = per_row(out.thread, -1)
    m = prep.messages
    return _table(
        RESULTS_SCHEMA,
        n,
        {
            "producer": pa.array(np.full(n, prep.producer, np.int32)),
            "seq": m.column("seq"),
            "uniq_msg_id": uniq_keys(prep, out) if uniq is None else uniq,
            "send_mode": m.column("send_mode"),
            "status": _take_str(list(STATUS_NAMES), status),
            "error": _take_str(texts, err_idx),
            "attempts": pa.array(counts.astype(np.int32)),
            "brokers_sent": brokers_sent,
            "broker": _take_str(out.brokers, broker),
            "queue_id": pa.array(qid.astype(np.int32), mask=qid < 0),
            "born_ts_ms": m.column("born_ts_ms"),
            "send_ts_ms": pa.array(begin),
            "end_ts_ms": pa.array(end),
            "queue_wait_ms": pa.array(begin - prep.born),
            "latency_ms": pa.array(end - begin),
            "latency_us": pa.array((end - begin) * 1000 + per_row(answer_sub_ms(out), 0)),
            "wire_bytes": pa.array(prep.row_wire.astype(np.int32)),
            "compressed": pa.array(prep.compressed),
            "sys_flag": pa.array(prep.sys_flag.astype(np.int32)),
            "retry_budget_exhausted": pa.array(exhausted.astype(bool)),
            "sender_thread": pa.array(thread.astype(np.int32), mask=thread < 0),
        },
    )


def uniq_keys(prep: Prepared, out: EngineOutput) -> pa.Array:
    """Each message's UNIQ_KEY as the client made it (``MessageClientIDSetter.createUniqID``): its time field
    is when it was made and its counter the process-wide order of the calls (``COUNTER.getAndIncrement()``,
    one client process per producer, counting from 0), not the born time and seq.

    ``setUniqID`` (only if absent) runs in ``sendKernelImpl`` at a single message's first attempt (SYNC and
    ONEWAY in the caller's thread, ASYNC on the executor thread: :attr:`EngineOutput.kernel_start`), and in
    ``DefaultMQProducer.batch()`` for each member in order when ``send(Collection)`` is called (the batch
    send's begin); 5.x then gives the batch itself one (``setUniqID(msgBatch)``). Calls at the same ms are
    in seq order. A message the validators refused before ``sendKernelImpl`` (or a batch refused at all:
    an approximation, upstream's members before the failing one took theirs) took none: its row keeps the
    workload's placeholder (born time, seq), as does a send that never reached ``sendKernelImpl``."""
    m = prep.messages
    send = prep.send_of_row
    sent = send >= 0
    if not sent.any():
        return m.column("uniq_msg_id")
    calls = UniqCalls(prep.batch_uniq_key)
    made, time = calls.add_sends(prep, out, np.arange(out.status.size))
    rows, counters = calls.assign(np.iinfo(np.int64).max)
    counter = np.zeros(m.num_rows, np.int64)
    counter[rows] = counters
    return uniq_column(prep, made, time, counter)


def uniq_column(prep: Prepared, made: np.ndarray, time: np.ndarray, counter: np.ndarray) -> pa.Array:
    """The UNIQ_KEY column of ``prep``'s rows: a row that made a call (``made``) at ``time`` with ``counter``
    gets its key, the others keep the workload's placeholder."""
    ids = workload.uniq_ids(prep.seed, prep.producer, counter, np.where(made, time, prep.born))
    if made.all():  # every row made its call: no placeholder kept
        return ids
    return pc.if_else(pa.array(made), ids, prep.messages.column("uniq_msg_id").combine_chunks())


class UniqCalls:
    """The process-wide order of a producer's ``createUniqID`` calls (:func:`uniq_keys`), made as a run
    goes: sends are added as they end, with their calls (row, time, leading seq, seq); :meth:`assign`
    gives the next counters to every call before a time no call still to come can precede (calls at
    the same ms in (leading seq, seq) order, a 5.x batch's own key after its members)."""

    def __init__(self, batch_uniq_key: bool) -> None:
        self.batch_uniq_key = batch_uniq_key
        self.next = 0  # the counter of the next call
        self._pending: list[tuple[np.ndarray, ...]] = []  # (row, time, lead, seq) of calls not counted

    def add_sends(
        self, prep: Prepared, out: EngineOutput, sends: np.ndarray, row0: int = 0
    ) -> tuple[np.ndarray, np.ndarray]:
        """The calls of the rows of ``sends`` (ended sends of ``prep``/``out``, row ids as in ``prep`` plus
        ``row0``: a chunk's rows numbered in the run); returns per row of ``prep`` whether it made one
        (for these sends) and when."""
        m = prep.messages
        send = prep.send_of_row
        if out.status.size == 0:  # rows the validators refused only: no call
            return np.zeros(m.num_rows, bool), np.zeros(m.num_rows, np.int64)
        mine = np.zeros(out.status.size + 1, bool)
        mine[sends] = True
        sent = (send >= 0) & mine[send]
        s = np.where(sent, send, 0)
        is_batch = np.asarray(pc.is_valid(m.column("batch_id")))
        member = sent & is_batch
        made = member | (sent & ~is_batch & (out.n_sent[s] > 0))
        seq = np.asarray(m.column("seq"), np.int64)
        time = np.where(member, out.begin[s], out.kernel_start[s])
        call_row = np.flatnonzero(made) + row0
        call_time, call_lead, call_seq = time[made], prep.s_seq[s[made]], seq[made]
        if self.batch_uniq_key and member.any():
            batches = np.unique(send[member])
            last = np.iinfo(np.int64).max
            call_time = np.concatenate([call_time, out.begin[batches]])
            call_lead = np.concatenate([call_lead, prep.s_seq[batches]])
            call_seq = np.concatenate([call_seq, np.full(batches.size, last)])
            call_row = np.concatenate([call_row, np.full(batches.size, -1)])
        self._pending.append((call_row, call_time, call_lead, call_seq))
        return made, time

    def assign(self, before: int) -> tuple[np.ndarray, np.ndarray]:
        """Counters of the calls added whose time is before ``before`` (no call to come is earlier):
        (their rows, their counters); the others wait."""
        if not self._pending:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        row, time, lead, seq = (np.concatenate(c) for c in zip(*self._pending, strict=True))
        now = time < before
        self._pending = [(row[~now], time[~now], lead[~now], seq[~now])]
        row, time, lead, seq = row[now], time[now], lead[now], seq[now]
        order = np.lexsort((seq, lead, time))
        counters = self.next + np.arange(order.size)
        self.next += order.size
        mine = row[order] >= 0
        return row[order][mine], counters[mine]


def build_tables(prep: Prepared, out: EngineOutput) -> SimOutput:
    """The ``send_attempts`` and ``send_results`` rows of one producer (results in seq order)."""
    return SimOutput(_attempts_table(prep, out), _results_table(prep, out))


# ---- chunks: one producer's run in parts ------------------------------------------------------------


def gather_chunks(chunks: Iterable[pa.Table | pa.RecordBatch]) -> tuple[pa.Table, list[int]]:
    """One producer's messages given in chunks, as one table, and the row where each chunk ends."""
    tables, ends, n = [], [], 0
    for chunk in chunks:
        table = chunk if isinstance(chunk, pa.Table) else pa.Table.from_batches([chunk])
        if table.num_rows:
            tables.append(table)
            n += table.num_rows
            ends.append(n)
    if not tables:
        return MESSAGES_SCHEMA.empty_table(), []
    messages = pa.concat_tables(tables)
    seq = np.asarray(messages.column("seq"), np.int64)
    if not bool(np.all(seq[1:] >= seq[:-1])):
        messages = messages.sort_by([("seq", "ascending")])
    return messages, ends


def chunk_cuts(messages: pa.Table, ends: Iterable[int]) -> list[int]:
    """The rows where chunks of ``messages`` (seq order) end: each of ``ends`` moved on past the batch it
    would split (a batch is one send: its members' records need its attempts), then the last row.
    Messages whose seqs do not increase (several sends of one seq) are one chunk."""
    n = messages.num_rows
    seq = np.asarray(messages.column("seq"), np.int64)
    if n < 2 or not bool(np.all(seq[1:] > seq[:-1])):
        return [n] if n else []
    batch = messages.column("batch_id")
    same = np.zeros(n + 1, bool)  # same[r]: rows r - 1 and r are members of one batch
    if batch.null_count < n:
        ids = np.asarray(batch.fill_null(-1), np.int64)
        same[1:n] = (ids[1:] == ids[:-1]) & (ids[1:] >= 0)
    allowed = np.flatnonzero(~same)  # rows where a chunk may end (n included)
    cuts = sorted({int(allowed[np.searchsorted(allowed, min(max(e, 1), n))]) for e in ends} | {n})
    return cuts


def batch_aligned(chunks: Iterable[pa.Table | pa.RecordBatch]) -> Iterator[pa.Table]:
    """One producer's messages given in chunks (seq order) as chunks that never split a batch: the rows
    of a chunk's last batch go on with the next chunk (for an engine that prepares a chunk at a time: a
    batch is one send, made once its last member is)."""
    carry: pa.Table | None = None
    for chunk in chunks:
        table = chunk if isinstance(chunk, pa.Table) else pa.Table.from_batches([chunk])
        if carry is not None:
            table = pa.concat_tables([carry, table.cast(carry.schema)])
        n = table.num_rows
        if not n:
            continue
        end = _batch_start(table) if table.column("batch_id")[n - 1].is_valid else n
        if end:
            yield table.slice(0, end)
        carry = table.slice(end) if end < n else None
    if carry is not None:
        yield carry


def _batch_start(table: pa.Table) -> int:
    """The first row of the batch ``table``'s last row is a member of (its rows are consecutive)."""
    ids = np.asarray(table.column("batch_id").fill_null(-1), np.int64)
    last = ids[-1]
    other = np.flatnonzero(ids != last)
    return int(other[-1]) + 1 if other.size else 0


def slice_output(messages: pa.Table, out: SimOutput, cuts: Iterable[int]) -> Iterator[SimChunk]:
    """A whole run's tables (results in seq order, attempts in (seq, attempt) order) cut into the
    chunks that end at rows ``cuts`` of ``messages`` (:func:`chunk_cuts`)."""
    seq = np.asarray(out.results.column("seq"), np.int64)
    attempt_seq = np.asarray(out.attempts.column("seq"), np.int64)
    later = _later_starts(np.asarray(out.attempts.column("start_ts_ms"), np.int64))
    r0 = a0 = 0
    for r1 in cuts:
        a1 = int(np.searchsorted(attempt_seq, seq[r1 - 1], "right")) if r1 > r0 else a0
        yield SimChunk(
            messages.slice(r0, r1 - r0),
            out.attempts.slice(a0, a1 - a0),
            out.results.slice(r0, r1 - r0),
            int(later[a1]),
        )
        r0, a0 = r1, a1


def _later_starts(start: np.ndarray) -> np.ndarray:
    """Per attempt position k, the earliest start among attempts k.. (one more: none, NO_LATER_ATTEMPT)."""
    out = np.full(start.size + 1, NO_LATER_ATTEMPT, np.int64)
    if start.size:
        out[:-1] = np.minimum.accumulate(start[::-1])[::-1]
    return out


def sim_chunk(prep: Prepared, out: EngineOutput, uniq: pa.Array, later_start_ms: int) -> SimChunk:
    """A :class:`SimChunk` of whole sends: ``prep`` and ``out`` hold its rows and sends only, ``uniq``
    their UNIQ_KEY column (:func:`uniq_column`)."""
    return SimChunk(
        prep.messages, _attempts_table(prep, out), _results_table(prep, out, uniq), later_start_ms
    )


def error_text(err: BaseException) -> str:
    """The ``error`` column's text of an exception a send ended with: ``<Java class>: <message>``."""
    cls = getattr(err, "java_class", type(err).__name__)
    text = getattr(err, "full_message", None) or str(err)
    return f"{cls}: {text}"
