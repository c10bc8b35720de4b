"""Topic routes as the producer sees them: TopicRouteData -> TopicPublishInfo, TBW102 fallback, route expiry.

Upstream: ``MQClientInstance.topicRouteData2TopicPublishInfo`` (queue datas sorted by broker name, writable
perm only, brokers with a master address only, queue ids ``0..writeQueueNums-1``; or the order-topic form
``"brokerA:4;brokerB:4"``), ``updateTopicRouteInfoFromNameServer(topic, isDefault=true, producer)`` (the
TBW102 auto-create route with ``min(defaultTopicQueueNums, readQueueNums)`` queues per broker), and the
route in simulated time (:class:`RouteTimeline`): a dead broker leaves the name server at once, a hung
one 120 s after its last registration, the client re-polls every 30 s and keeps a stale route when the
topic has no broker left.

The queue list of a :class:`TopicPublishInfo` holds :class:`QueueSlot` objects, which are *mutable* on
purpose: the 4.9.7 fault strategy rewrites the cached queue object in place (see ``rocketsim.client.fault``),
and
that skew persists until the route changes. Everything else here is frozen. Pure: the clock is an argument.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from rocketsim.client.versions import BROKER_4_9_8, BrokerVersion
from rocketsim.errors import ConfigError

# PermName bits
PERM_PRIORITY = 0x8
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1

MASTER_ID = 0  # MixAll.MASTER_ID
AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"  # TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC

BROKER_CHANNEL_EXPIRED_TIME_MS = 120_000  # RouteInfoManager: no heartbeat for this long -> dropped
POLL_NAME_SERVER_INTERVAL_MS = 30_000  # ClientConfig.pollNameServerInterval
REGISTER_NAME_SERVER_PERIOD_MS = 30_000  # BrokerConfig.registerNameServerPeriod (the heartbeat)


class QueueIndex(Protocol):
    """What a TopicPublishInfo's ``sendWhichQueue`` does (``rocketsim.client.fault.ThreadLocalIndex``, which
    lives with the selection logic)."""

    def increment_and_get(self, thread: int = 0) -> int: ...

    def reset(self, thread: int = 0) -> None: ...


def is_writeable(perm: int) -> bool:
    return (perm & PERM_WRITE) == PERM_WRITE


def is_readable(perm: int) -> bool:
    return (perm & PERM_READ) == PERM_READ


@dataclass(frozen=True)
class QueueData:
    """A broker's queues for one topic (``QueueData``)."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = PERM_READ | PERM_WRITE
    topic_sys_flag: int = 0

    @property
    def writeable(self) -> bool:
        return is_writeable(self.perm)


@dataclass(frozen=True)
class BrokerData:
    """A broker group: name and addresses by broker id (0 is the master)."""

    broker_name: str
    addresses: tuple[tuple[int, str], ...] = ()
    cluster: str = "DefaultCluster"

    @classmethod
    def of(cls, broker_name: str, addresses: Mapping[int, str] | None = None) -> BrokerData:
        """A broker with the given addresses; by default just a master at ``addr-of-<name>``."""
        addrs = {MASTER_ID: f"addr-of-{broker_name}"} if addresses is None else addresses
        return cls(broker_name, tuple(sorted(addrs.items())))

    @property
    def master_addr(self) -> str | None:
        for broker_id, addr in self.addresses:
            if broker_id == MASTER_ID:
                return addr
        return None


@dataclass(frozen=True)
class TopicRouteData:
    """What the name server returns for a topic."""

    queue_datas: tuple[QueueData, ...]
    broker_datas: tuple[BrokerData, ...]
    order_topic_conf: str | None = None

    @classmethod
    def simple(cls, write_queues: Mapping[str, int], perm: int = PERM_READ | PERM_WRITE) -> TopicRouteData:
        """Brokers with a master each and ``write_queues[name]`` read/write queues."""
        qds = tuple(QueueData(b, n, n, perm) for b, n in write_queues.items())
        return cls(qds, tuple(BrokerData.of(b) for b in write_queues))

    def broker(self, broker_name: str) -> BrokerData | None:
        for bd in self.broker_datas:
            if bd.broker_name == broker_name:
                return bd
        return None

    def master_addr(self, broker_name: str) -> str | None:
        """``findBrokerAddressInPublish``: the master's address, None if unknown or master-less."""
        bd = self.broker(broker_name)
        return None if bd is None else bd.master_addr

    @property
    def broker_names(self) -> tuple[str, ...]:
        return tuple(qd.broker_name for qd in self.queue_datas)

    def without_brokers(self, names: Iterable[str]) -> TopicRouteData:
        """The route after the name server forgot ``names`` (their queue and broker datas go)."""
        gone = set(names)
        return replace(
            self,
            queue_datas=tuple(q for q in self.queue_datas if q.broker_name not in gone),
            broker_datas=tuple(b for b in self.broker_datas if b.broker_name not in gone),
        )

    def sorted_queue_datas(self) -> tuple[QueueData, ...]:
        # QueueData.compareTo compares broker names (String.compareTo: UTF-16 code units)
        return tuple(sorted(self.queue_datas, key=lambda q: _utf16_key(q.broker_name)))

    def as_auto_create(self, default_topic_queue_nums: int) -> TopicRouteData:
        """The TBW102 route as the producer rewrites it: min(defaultTopicQueueNums, readQueueNums) queues."""
        qds = []
        for q in self.queue_datas:
            n = min(default_topic_queue_nums, q.read_queue_nums)
            qds.append(replace(q, read_queue_nums=n, write_queue_nums=n))
        return replace(self, queue_datas=tuple(qds))


def _utf16_key(s: str) -> bytes:
    # Java compares strings by UTF-16 code units; big-endian UTF-16 bytes sort the same way
    return s.encode("utf-16-be", "surrogatepass")


@dataclass(frozen=True)
class MessageQueue:
    """``MessageQueue`` as a value (results, records)."""

    topic: str
    broker_name: str
    queue_id: int


@dataclass(slots=True, eq=False)
class QueueSlot:
    """A cached ``MessageQueue`` object of a TopicPublishInfo: mutable, because 4.9.7 mutates it.

    Identity matters (``eq=False``): the send loop keeps a reference to the selected slot and reads its
    broker name again after the call, as ``sendDefaultImpl`` reads ``mq.getBrokerName()``.
    """

    topic: str
    broker_name: str
    queue_id: int

    def frozen(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name, self.queue_id)

    def as_pair(self) -> tuple[str, int]:
        return (self.broker_name, self.queue_id)


@dataclass(eq=False)
class TopicPublishInfo:
    """The producer's cached view of a topic route (``TopicPublishInfo``); selection is in
    rocketsim.client.fault.

    ``send_which_queue`` is this object's own ``ThreadLocalIndex``: a route change builds a new
    TopicPublishInfo and therefore a new index (with a new random start), as upstream does.
    """

    topic: str
    route: TopicRouteData  # queue datas in the sorted order upstream leaves them in
    message_queue_list: list[QueueSlot]
    send_which_queue: QueueIndex
    order_topic: bool = False
    have_topic_router_info: bool = True
    generation: int = field(default=1)

    def ok(self) -> bool:
        return bool(self.message_queue_list)

    def write_queue_nums_by_broker(self, broker_name: str | None, *, writable_only: bool) -> int:
        """``getQueueIdByBroker`` / ``getWriteQueueNumsByBroker``: -1 if no (writable) queue data matches.

        4.9.8 added the ``PermName.isWriteable`` test (``writable_only``); 4.9.7 and 5.x match any perm.
        """
        for qd in self.route.queue_datas:
            if writable_only and not qd.writeable:
                continue
            if qd.broker_name == broker_name:
                return qd.write_queue_nums
        return -1

    def queue_pairs(self) -> list[tuple[str, int]]:
        """The queue list as ``[broker, queueId]`` pairs (what the vectors print)."""
        return [slot.as_pair() for slot in self.message_queue_list]


def build_queue_list(topic: str, route: TopicRouteData) -> tuple[list[QueueSlot], bool, TopicRouteData]:
    """``topicRouteData2TopicPublishInfo``: (queue slots, order_topic, route with sorted queue datas)."""
    if route.order_topic_conf:
        slots: list[QueueSlot] = []
        for item in route.order_topic_conf.split(";"):
            if not item:
                continue
            parts = item.split(":")
            if len(parts) < 2:
                raise ConfigError(f"order_topic_conf items must look like brokerA:4, got {item!r}")
            slots.extend(QueueSlot(topic, parts[0], i) for i in range(int(parts[1])))
        return slots, True, route
    sorted_route = replace(route, queue_datas=route.sorted_queue_datas())
    slots = []
    for qd in sorted_route.queue_datas:
        if not qd.writeable:
            continue
        bd = route.broker(qd.broker_name)
        if bd is None or bd.master_addr is None:
            continue
        slots.extend(QueueSlot(topic, qd.broker_name, i) for i in range(qd.write_queue_nums))
    return slots, False, sorted_route


def topic_publish_info(
    topic: str, route: TopicRouteData, send_which_queue: QueueIndex, generation: int = 1
) -> TopicPublishInfo:
    """Build the TopicPublishInfo of ``topic`` from ``route`` with a fresh index."""
    slots, order, sorted_route = build_queue_list(topic, route)
    return TopicPublishInfo(topic, sorted_route, slots, send_which_queue, order, True, generation)


def publish_route(
    topic_route: TopicRouteData | None,
    default_route: TopicRouteData | None,
    default_topic_queue_nums: int = 4,
) -> TopicRouteData | None:
    """``tryToFindTopicPublishInfo``: the topic's own route, else the TBW102 auto-create route, else None.

    A topic route that exists but has no writable queue is still returned (the send then fails with "No
    route info of this topic"), as upstream keeps a route it has (``haveTopicRouterInfo``).
    """
    if topic_route is not None:
        return topic_route
    if default_route is not None:
        return default_route.as_auto_create(default_topic_queue_nums)
    return None


# ---- route expiry in simulated time -----------------------------------------------------------


REGISTER_FIRST_MS = 10_000  # BrokerController.start: scheduleAtFixedRate(registerBrokerAll, 1000 * 10, ...)
REGISTER_PERIOD_MIN_MS = 10_000  # Math.max(10000, Math.min(registerNameServerPeriod, 60000))
REGISTER_PERIOD_MAX_MS = 60_000


def registration_period_ms(register_name_server_period_ms: int) -> int:
    """The broker's registration period: ``Math.max(10000, Math.min(registerNameServerPeriod, 60000))``."""
    return max(REGISTER_PERIOD_MIN_MS, min(register_name_server_period_ms, REGISTER_PERIOD_MAX_MS))


@dataclass(frozen=True)
class RouteRefresh:
    """Timers that decide when the name server forgets a broker and when a producer sees it.

    Broker (``BrokerController.start``, 4.9.8 and 5.3.3): ``registerBrokerAll`` once at start, then at a
    fixed rate from 10 s: registrations at ``0, 10 s, 10 s + period, ...`` with ``period =
    max(10 s, min(registerNameServerPeriod, 60 s))`` (30 s by default: 0, 10, 40, 70 s, ...). Brokers
    start with the scenario (at 0).

    Name server: its channel to a broker carries ``IdleStateHandler(0, 0, serverChannelMaxIdleTimeSeconds
    = 120)``; ``ALL_IDLE`` closes the channel and ``BrokerHousekeepingService.onChannelIdle`` ->
    ``RouteInfoManager.onChannelDestroy`` drops the broker ``expiry_ms`` after its last registration (the
    last I/O on that channel, give or take the registration's round trip). ``scanNotActiveBroker``
    (4.9: ``scheduleAtFixedRate(.., 5, 10, SECONDS)``; 5.x: ``(.., 5, scanNotActiveBrokerInterval=5000,
    MILLISECONDS)``) drops a broker at the first tick ``T`` with ``last + 120000 < T``: always after the
    idle handler, so it never decides. A broker whose process dies closes the channel and is dropped at
    once (:class:`BrokerOutage` ``drop_immediately``).

    Client (``MQClientInstance.startScheduledTask``): the route poll runs 10 ms after the producer starts,
    then every ``pollNameServerInterval`` (30 s). Times are ms from the scenario start; the producer
    starts at ``producer_start_ms``.
    """

    scan_first_ms: int
    scan_interval_ms: int
    expiry_ms: int = BROKER_CHANNEL_EXPIRED_TIME_MS
    poll_first_ms: int = 10
    poll_interval_ms: int = POLL_NAME_SERVER_INTERVAL_MS
    producer_start_ms: int = 0
    register_period_ms: int = REGISTER_NAME_SERVER_PERIOD_MS

    @classmethod
    def for_broker(
        cls,
        broker: BrokerVersion,
        producer_start_ms: int = 0,
        *,
        poll_interval_ms: int = POLL_NAME_SERVER_INTERVAL_MS,
        expiry_ms: int = BROKER_CHANNEL_EXPIRED_TIME_MS,
        register_name_server_period_ms: int = REGISTER_NAME_SERVER_PERIOD_MS,
    ) -> RouteRefresh:
        """The name server's timers of a broker release (``Scenario.broker_version``), the settings."""
        return cls(
            broker.nameserver_scan_first_ms,
            broker.nameserver_scan_interval_ms,
            expiry_ms=expiry_ms,
            poll_interval_ms=poll_interval_ms,
            producer_start_ms=producer_start_ms,
            register_period_ms=registration_period_ms(register_name_server_period_ms),
        )

    def scan_drop_ms(self, last_heartbeat_ms: int) -> int:
        """The first ``scanNotActiveBroker`` tick ``T`` with ``last + expiry < T``."""
        deadline = last_heartbeat_ms + self.expiry_ms  # must be strictly before the tick
        if deadline < self.scan_first_ms:
            return self.scan_first_ms
        k = (deadline - self.scan_first_ms) // self.scan_interval_ms + 1
        return self.scan_first_ms + k * self.scan_interval_ms

    def nameserver_drop_ms(self, last_heartbeat_ms: int) -> int:
        """When the name server forgets a broker that stopped registering: the idle handler's
        ``last + expiry``, or the scan if it came first (it never does)."""
        return min(last_heartbeat_ms + self.expiry_ms, self.scan_drop_ms(last_heartbeat_ms))

    def last_registration_at_or_before(self, t_ms: int) -> int:
        """The broker's latest ``registerBrokerAll`` at or before ``t_ms`` (the one at start: 0)."""
        if t_ms < REGISTER_FIRST_MS:
            return 0
        return (
            REGISTER_FIRST_MS
            + (t_ms - REGISTER_FIRST_MS) // self.register_period_ms * self.register_period_ms
        )

    def last_poll_at_or_before(self, t_ms: int) -> int | None:
        """The producer's latest route poll at or before ``t_ms``, None before the first one."""
        first = self.producer_start_ms + self.poll_first_ms
        if t_ms < first:
            return None
        return first + (t_ms - first) // self.poll_interval_ms * self.poll_interval_ms

    def first_poll_at_or_after(self, t_ms: int) -> int:
        first = self.producer_start_ms + self.poll_first_ms
        if t_ms <= first:
            return first
        return first + -(-(t_ms - first) // self.poll_interval_ms) * self.poll_interval_ms


@dataclass(frozen=True)
class BrokerOutage:
    """A broker that leaves the name server and registers again at ``back_ms``.

    ``drop_immediately``: the broker's channel to the name server closed at ``last_heartbeat_ms`` (its
    process died, or it unregistered): ``BrokerHousekeepingService.onChannelClose`` ->
    ``RouteInfoManager.onChannelDestroy`` drops it at once (4.9.8 synchronously, 5.3.3 through
    ``BatchUnregistrationService``'s queue: a thread hand-off). Otherwise the channel stays open and the
    broker stops registering after ``last_heartbeat_ms`` (a hung process): the name server drops it after
    the 120 s expiry (:meth:`RouteRefresh.nameserver_drop_ms`).
    """

    broker_name: str
    last_heartbeat_ms: int
    back_ms: int | None = None
    drop_immediately: bool = False

    def __post_init__(self) -> None:
        if self.back_ms is not None and self.back_ms < self.last_heartbeat_ms:
            raise ConfigError(
                "BrokerOutage.back_ms must be >= last_heartbeat_ms "
                f"{self.last_heartbeat_ms}, got {self.back_ms}"
            )


@dataclass(frozen=True)
class RouteTimeline:
    """The route the name server holds, and the route a producer sees, at any simulated time.

    A broker the name server dropped stays in the producer's route (and selectable) until the producer's
    next poll fetches the smaller route. When the name server has no queue data left for the topic (every
    broker gone), it answers TOPIC_NOT_EXIST: ``getTopicRouteInfoFromNameServer`` throws,
    ``updateTopicRouteInfoFromNameServer`` swallows the ``MQClientException`` and the producer keeps its
    stale route (``tryToFindTopicPublishInfo`` returns the old, ``ok()`` TopicPublishInfo), so its sends
    go on to the dead brokers and fail with connect errors. A producer whose very first fetch finds
    nothing has no route ("No route info of this topic") until a poll finds one (upstream would also
    fetch again at each send; the model waits for the poll).
    """

    full_route: TopicRouteData
    outages: tuple[BrokerOutage, ...] = ()
    refresh: RouteRefresh = field(default_factory=lambda: RouteRefresh.for_broker(BROKER_4_9_8))

    def _absent_intervals(self) -> list[tuple[str, int, int | None]]:
        """(broker, dropped_from, back_at) intervals in name-server time."""
        out = []
        for o in self.outages:
            drop = (
                o.last_heartbeat_ms
                if o.drop_immediately
                else self.refresh.nameserver_drop_ms(o.last_heartbeat_ms)
            )
            if o.back_ms is not None and o.back_ms <= drop:
                continue  # back (re-registered) before the name server noticed
            out.append((o.broker_name, drop, o.back_ms))
        return out

    def nameserver_route_at(self, t_ms: int) -> TopicRouteData:
        gone = [
            b for b, drop, back in self._absent_intervals() if drop <= t_ms and (back is None or t_ms < back)
        ]
        return self.full_route.without_brokers(gone) if gone else self.full_route

    def _initial_route(self) -> TopicRouteData:
        return self.nameserver_route_at(self.refresh.producer_start_ms)

    def changes(self, until_ms: int) -> list[tuple[int, TopicRouteData]]:
        """``[(poll, route)]``: the polls <= ``until_ms`` that change the producer's route, and the route."""
        ns_changes = sorted(
            {t for _, drop, back in self._absent_intervals() for t in (drop, back) if t is not None}
        )
        polls = sorted({self.refresh.first_poll_at_or_after(t) for t in ns_changes})
        out: list[tuple[int, TopicRouteData]] = []
        prev = self._initial_route()
        for t in polls:
            if t > until_ms:
                break
            cur = self.nameserver_route_at(t)
            if not cur.queue_datas:
                continue  # TOPIC_NOT_EXIST: the producer keeps its stale route
            if cur != prev:  # a drop and return between polls cancel
                out.append((t, cur))
                prev = cur
        return out

    def producer_route_at(self, t_ms: int) -> TopicRouteData:
        """The route of the producer's latest poll that found one (before any: its first fetch)."""
        changes = self.changes(t_ms)
        return changes[-1][1] if changes else self._initial_route()

    def change_times(self, until_ms: int) -> list[int]:
        """The poll times <= ``until_ms`` at which the producer's route differs from the previous poll."""
        return [t for t, _ in self.changes(until_ms)]

    def broker_selectable_until(self, broker_name: str, after_ms: int) -> int | None:
        """When the producer stops seeing ``broker_name`` after ``after_ms`` (None if it never does)."""
        for t, route in self.changes(10**15):
            if t >= after_ms and broker_name not in route.broker_names:
                return t
        return None


def route_versions(timeline: RouteTimeline, until_ms: int) -> list[tuple[int, TopicRouteData]]:
    """``[(from_ms, route)]``: the producer's route from 0 and at each change (rebuild TopicPublishInfo)."""
    return [(0, timeline.producer_route_at(0)), *timeline.changes(until_ms)]


def route_at(versions: list[tuple[int, TopicRouteData]], t_ms: int) -> TopicRouteData:
    """Look a time up in :func:`route_versions`' output."""
    i = bisect.bisect_right([v[0] for v in versions], t_ms) - 1
    return versions[max(i, 0)][1]
