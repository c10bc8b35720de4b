"""The scenario side: the route timeline and route versions a producer sees, the broker model and the rules
of its client line as flat arrays (:class:`Plan`, :func:`plan_for`; the compiled kernel takes them as the
NamedTuples :class:`Config`, :class:`FaultRules`, :class:`Routes`, :class:`Model`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from rocketsim.broker import latency as bm
from rocketsim.broker.fault_kinds import RouteDrop
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
from rocketsim.client.send import ResponseScan, SendConfig
from rocketsim.engine.plan.kinds import to_outcome
from rocketsim.javaint import LONG_MAX, chm_spread, java_string_hash
from rocketsim.scenario import Scenario

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
    fails_late_async_request_twice: bool  # invokeAsync fails a request with no time left twice (5.3.0+)
    async_retry_gets_budget: bool  # a retry gets the time left (else 0, 4.3-4.6)
    async_sends_on_callback_executor: bool  # the callback executor runs ASYNC sends (4.3.x; unbounded)
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
    scan_first_ms: int  # the response-table scan: first run (ResponseScan.for_version: the offset taken off)
    scan_period_ms: int  # and period
    executor_threads: int  # the async sender executor's threads (producers.async_sender_threads)
    executor_queue: int  # the bound of the queue ASYNC sends wait in (producers.async_queue_bound; unbounded:
    # Long.MAX_VALUE): a full one rejects
    callback_threads: int  # the callback executor's threads (producers.callback_executor_threads)
    async_permits: int  # the async semaphore's permits (producers.async_semaphore_permits)
    detector: bool  # the 5.x detector runs (start_detector_enable)
    detect_period_ms: int  # its ticks: every period from one period after the start (fault.DETECT_PERIOD_MS)
    detect_interval_ms: int  # an item is probed again this long after its last probe
    backpressure: bool  # enableBackpressureForAsyncMode (5.x): an async send takes permits before submit


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
    scan = ResponseScan.for_version(p.version, cfg.response_scan_offset_ms)  # the reference's ticks
    bp = p.async_backpressure
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
        fails_late_async_request_twice=p.version.fails_late_async_request_twice,
        async_retry_gets_budget=line.async_retry_gets_budget,
        async_sends_on_callback_executor=line.async_sends_on_callback_executor,
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
        scan_first_ms=scan.first_ms,
        scan_period_ms=scan.period_ms,
        executor_threads=p.executor_threads,
        executor_queue=LONG_MAX if p.async_queue_bound is None else p.async_queue_bound,
        callback_threads=p.callback_threads,
        async_permits=p.async_semaphore_permits,
        detector=start_detector_enable(sc),
        detect_period_ms=DETECT_PERIOD_MS,
        detect_interval_ms=DETECT_INTERVAL_MS,
        backpressure=bp is not None and bp.enable_backpressure_for_async_mode,
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
