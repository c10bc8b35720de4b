"""``MQFaultStrategy``: :class:`FaultStrategy`'s ``selectOneMessageQueue`` and ``updateFaultItem`` per line,
and the 5.x detector ticks driven by the simulated clock (:class:`Detector`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rocketsim.client.fault.index import EventHook, IntSource, ThreadKey, ThreadLocalIndex
from rocketsim.client.fault.table import (
    DETECT_INTERVAL_MS,
    DETECT_PERIOD_MS,
    DETECT_TIMEOUT_MS,
    FaultArrays,
    FaultTable,
    IndexOutOfBounds,
    queue_pos,
)
from rocketsim.client.fault.updates import Site, fault_update_rule
from rocketsim.client.outcomes import Catch
from rocketsim.client.route import QueueSlot, TopicPublishInfo
from rocketsim.client.versions import RemotingLine, ScanBroker, remoting_line
from rocketsim.errors import ConfigError
from rocketsim.javaint import int32, java_abs, java_rem

# ---- 6. MQFaultStrategy -------------------------------------------------------------------------


@dataclass(frozen=True)
class FaultUpdate:
    """One ``updateFaultItem`` call made by the send loop.

    ``duration`` is what reached the table (None when ``sendLatencyFaultEnable`` is off and the strategy
    did nothing); ``reachable`` is None in the 4.9 lines, which have no such argument.
    """

    broker: str
    latency: int
    isolation: bool
    reachable: bool | None
    duration: int | None

    def as_vector(self) -> list:
        if self.reachable is None:
            return [self.broker, self.latency, self.isolation, self.duration]
        return [self.broker, self.latency, self.isolation, self.reachable, self.duration]


@dataclass
class Detector:
    """The 5.x ``LatencyFaultToleranceImpl`` detector: ``detectByOneRound`` every ``period_ms`` from
    ``first_tick_ms``, doing nothing unless ``startDetectorEnable``. The resolver maps a broker name to its
    master address (None when gone from the route); the probe answers ``detect(addr, timeoutMs)``."""

    first_tick_ms: int
    resolver: Callable[[str], str | None]
    probe: Callable[[str, int], bool] | None
    period_ms: int = DETECT_PERIOD_MS
    on_tick: Callable[[int], None] | None = None
    on_tick_done: Callable[[int], None] | None = None

    def __post_init__(self) -> None:
        self.next_tick_ms = self.first_tick_ms


class FaultStrategy:
    """``MQFaultStrategy`` of one producer: its fault table and its line's selection and update rules."""

    def __init__(
        self,
        line: RemotingLine | str,
        table: FaultTable | None = None,
        *,
        send_latency_fault_enable: bool = False,
        arrays: FaultArrays | None = None,
        start_detector_enable: bool = False,
        detector: Detector | None = None,
    ) -> None:
        self.line = remoting_line(line)
        if start_detector_enable and not self.line.has_fault_detector:
            raise ConfigError(f"start_detector_enable exists only in the 5.x lines, not in {self.line.name}")
        self.table = table if table is not None else FaultTable(self.line)
        self.send_latency_fault_enable = send_latency_fault_enable
        self.arrays = arrays if arrays is not None else FaultArrays.default(self.line)
        self.start_detector_enable = start_detector_enable
        self.detector = detector

    # -- clock --
    def advance_to(self, now: int) -> None:
        """Run the detector ticks due at or before ``now``, each at its own tick time (5.x)."""
        d = self.detector
        if d is None:
            return
        while d.next_tick_ms <= now:
            tick = d.next_tick_ms
            d.next_tick_ms += d.period_ms
            if not self.start_detector_enable:
                continue
            if d.on_tick is not None:
                d.on_tick(tick)
            self.table.detect_by_one_round(tick, d.resolver, d.probe)
            if d.on_tick_done is not None:
                d.on_tick_done(tick)

    # -- updateFaultItem --
    def update_fault_item(
        self, broker: str, latency: int, isolation: bool, now: int, reachable: bool = True
    ) -> FaultUpdate:
        """The loop's call; the table changes only when latency fault tolerance is on."""
        reach = reachable if self.line.tracks_reachability else None
        if not self.send_latency_fault_enable:
            return FaultUpdate(broker, latency, isolation, reach, None)
        duration = self.arrays.not_available_duration_for(
            self.line.isolation_latency_ms if isolation else latency
        )
        self.table.update_fault_item(broker, latency, duration, now, reachable)
        return FaultUpdate(broker, latency, isolation, reach, duration)

    def record_outcome(self, site: Site, catch: Catch, broker: str, latency: int, now: int) -> FaultUpdate:
        """The ``updateFaultItem`` call the client makes at ``site`` for an outcome caught as ``catch``:
        its (isolation, reachable) come from :data:`FAULT_UPDATES`."""
        isolation, reachable = fault_update_rule(self.line, site, catch)
        return self.update_fault_item(
            broker, latency, isolation, now, reachable.value_for(self.start_detector_enable)
        )

    def isolated_until(self, broker: str, now: int) -> int | None:
        return self.table.isolated_until(broker, now)

    # -- selectOneMessageQueue --
    def select_one_message_queue(
        self,
        tp: TopicPublishInfo,
        last_broker_name: str | None,
        now: int,
        reset_index: bool = False,
        thread: ThreadKey = 0,
    ) -> QueueSlot | None:
        """The queue for the next attempt. ``reset_index`` is 5.x's flag (true on retries)."""
        if self.line.uses_queue_filters:
            return self._select_by_filters(tp, last_broker_name, now, reset_index, thread)
        return self._select_available(tp, last_broker_name, now, thread)

    def _select_available(
        self, tp: TopicPublishInfo, last: str | None, now: int, thread: ThreadKey
    ) -> QueueSlot:
        if not self.send_latency_fault_enable:
            if not self.line.ticks_per_candidate:
                return select_avoiding_broker_one_tick(tp, last, thread)
            return select_avoiding_broker_4_9(tp, last, thread)
        try:
            return self._scan_then_pick(tp, last, now, thread)
        except IndexOutOfBounds:  # upstream's catch (Exception e): log, then round robin
            return select_plain(tp, thread)

    def _accepts(self, broker: str, last: str | None, now: int) -> bool:
        """The latency scan's test: available, and the line's clause about the last broker."""
        rule = self.line.latency_scan_broker
        if rule == ScanBroker.SAME_AS_LAST and last is not None and broker != last:
            return False
        if rule == ScanBroker.NOT_LAST and broker == last:
            return False
        return self.table.is_available(broker, now)

    def _scan_then_pick(
        self, tp: TopicPublishInfo, last: str | None, now: int, thread: ThreadKey
    ) -> QueueSlot:
        queues = tp.message_queue_list
        n = len(queues)
        # one incrementAndGet, then a local `index++` (which may wrap) per probe
        index = tp.send_which_queue.increment_and_get(thread)
        for _ in range(n):
            if self.line.latency_scan_keeps_sign:  # 5.1.0+: `index++ % size`, no Math.abs
                pos = java_rem(index, n)
                if pos < 0:
                    raise IndexOutOfBounds(f"selectOneMessageQueue: position {pos}")
            else:
                pos = queue_pos(index, n)
            index = int32(index + 1)
            mq = queues[pos]
            if self._accepts(mq.broker_name, last, now):
                return mq
        not_best = self.table.pick_one_at_least(now, thread)
        write_queue_nums = tp.write_queue_nums_by_broker(
            not_best, writable_only=self.line.counts_writable_queues_only
        )
        if write_queue_nums > 0:
            mq = select_plain(tp, thread)
            if not_best is None:
                return mq
            queue_id = java_rem(tp.send_which_queue.increment_and_get(thread), write_queue_nums)
            if self.line.rewrites_cached_queue:
                # the quirk: the cached MessageQueue of the route is rewritten in place, so this queue
                # slot points at `not_best` for every later send until the route changes
                mq.broker_name = not_best
                mq.queue_id = queue_id
                return mq
            return QueueSlot(mq.topic, not_best, queue_id)
        if not_best is not None:  # remove(null) throws inside upstream's try; it ends up below as well
            self.table.remove(not_best)
        return select_plain(tp, thread)

    def _select_by_filters(
        self, tp: TopicPublishInfo, last: str | None, now: int, reset_index: bool, thread: int
    ) -> QueueSlot | None:
        def not_last(mq: QueueSlot) -> bool:  # BrokerFilter
            return last is None or mq.broker_name != last

        if self.send_latency_fault_enable:
            if reset_index:
                tp.send_which_queue.reset(thread)
            table = self.table
            mq = select_filtered(tp, thread, lambda q: table.is_available(q.broker_name, now) and not_last(q))
            if mq is not None:
                return mq
            mq = select_filtered(tp, thread, lambda q: table.is_reachable(q.broker_name) and not_last(q))
            if mq is not None:
                return mq
            return select_plain(tp, thread)
        mq = select_filtered(tp, thread, not_last)
        return mq if mq is not None else select_plain(tp, thread)


def select_plain(tp: TopicPublishInfo, thread: ThreadKey = 0) -> QueueSlot:
    """``TopicPublishInfo.selectOneMessageQueue()``: round robin (``Math.abs(index) % size``, pos < 0: 0)."""
    queues = tp.message_queue_list
    return queues[queue_pos(tp.send_which_queue.increment_and_get(thread), len(queues))]


def select_avoiding_broker_one_tick(
    tp: TopicPublishInfo, last: str | None, thread: ThreadKey = 0
) -> QueueSlot:
    """4.3-4.7 ``selectOneMessageQueue(lastBrokerName)``: one tick, then a local ``index++`` scan of up to
    ``size`` queues avoiding ``last``; else round robin (one more tick) [clients.md TPI-1]."""
    if last is None:
        return select_plain(tp, thread)
    queues = tp.message_queue_list
    index = tp.send_which_queue.increment_and_get(thread)
    for _ in range(len(queues)):
        mq = queues[queue_pos(index, len(queues))]
        index = int32(index + 1)
        if mq.broker_name != last:
            return mq
    return select_plain(tp, thread)


def select_avoiding_broker_4_9(tp: TopicPublishInfo, last: str | None, thread: ThreadKey = 0) -> QueueSlot:
    """4.9 ``selectOneMessageQueue(lastBrokerName)``: up to ``size`` round-robin steps avoiding ``last``."""
    if last is None:
        return select_plain(tp, thread)
    queues = tp.message_queue_list
    for _ in range(len(queues)):
        mq = queues[queue_pos(tp.send_which_queue.increment_and_get(thread), len(queues))]
        if mq.broker_name != last:
            return mq
    return select_plain(tp, thread)


def select_filtered(
    tp: TopicPublishInfo, thread: ThreadKey, accept: Callable[[QueueSlot], bool]
) -> QueueSlot | None:
    """5.x ``selectOneMessageQueue(QueueFilter...)``: up to ``size`` round-robin steps, else None."""
    queues = tp.message_queue_list
    n = len(queues)
    for _ in range(n):
        mq = queues[java_abs(java_rem(tp.send_which_queue.increment_and_get(thread), n))]
        if accept(mq):
            return mq
    return None


def new_strategy(
    line: RemotingLine | str,
    *,
    send_latency_fault_enable: bool,
    which_item_worst_source: IntSource,
    arrays: FaultArrays | None = None,
    start_detector_enable: bool = False,
    detector: Detector | None = None,
    detect_interval_ms: int = DETECT_INTERVAL_MS,
    detect_timeout_ms: int = DETECT_TIMEOUT_MS,
    on_event: EventHook = None,
    shuffle_source: IntSource | None = None,
) -> FaultStrategy:
    """A producer's strategy with a fresh table and ``whichItemWorst`` index (``shuffle_source``: the
    draws of ``pickOneAtLeast``'s ``Collections.shuffle``, in the lines that shuffle)."""
    worst = ThreadLocalIndex.shared(line, which_item_worst_source, "whichItemWorst", on_event)
    table = FaultTable(line, worst, detect_interval_ms, detect_timeout_ms, on_event, shuffle_source)
    return FaultStrategy(
        line,
        table,
        send_latency_fault_enable=send_latency_fault_enable,
        arrays=arrays,
        start_detector_enable=start_detector_enable,
        detector=detector,
    )
