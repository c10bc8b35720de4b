"""Routes: TopicPublishInfo building, the TBW102 fallback, and when a dead broker leaves the route."""

from __future__ import annotations

import pytest

from rocketsim.client.fault import ReplayIntSource, ThreadLocalIndex
from rocketsim.client.route import (
    PERM_READ,
    BrokerData,
    BrokerOutage,
    QueueData,
    RouteRefresh,
    RouteTimeline,
    TopicRouteData,
    publish_route,
    route_at,
    route_versions,
    topic_publish_info,
)
from rocketsim.client.versions import LINE_4_9_8, V4_9_8, parse_version
from rocketsim.engine import plan
from rocketsim.errors import ConfigError
from rocketsim.scenario import scenario_from_mapping


def _index() -> ThreadLocalIndex:
    return ThreadLocalIndex.shared(LINE_4_9_8, ReplayIntSource([]), "sendWhichQueue#1")


def test_publish_info_sorts_brokers_and_keeps_writable_masters_only() -> None:
    route = TopicRouteData(
        (
            QueueData("broker-c", 4, 2),
            QueueData("broker-a", 4, 3),
            QueueData("broker-b", 4, 4, perm=PERM_READ),  # read-only: no write queues
            QueueData("broker-d", 4, 1),  # no master address
        ),
        (
            BrokerData.of("broker-a"),
            BrokerData.of("broker-b"),
            BrokerData.of("broker-c"),
            BrokerData.of("broker-d", {1: "slave"}),
        ),
    )
    tp = topic_publish_info("T", route, _index())
    assert tp.queue_pairs() == [
        ("broker-a", 0),
        ("broker-a", 1),
        ("broker-a", 2),
        ("broker-c", 0),
        ("broker-c", 1),
    ]
    assert [q.broker_name for q in tp.route.queue_datas] == ["broker-a", "broker-b", "broker-c", "broker-d"]
    # 4.9.8's getQueueIdByBroker skips the read-only broker, 4.9.7's does not
    assert tp.write_queue_nums_by_broker("broker-b", writable_only=True) == -1
    assert tp.write_queue_nums_by_broker("broker-b", writable_only=False) == 4
    assert tp.write_queue_nums_by_broker(None, writable_only=False) == -1


def test_order_topic_conf_keeps_its_order() -> None:
    route = TopicRouteData((QueueData("a", 8, 8),), (BrokerData.of("a"),), order_topic_conf="b:2;a:1")
    tp = topic_publish_info("T", route, _index())
    assert tp.order_topic
    assert tp.queue_pairs() == [("b", 0), ("b", 1), ("a", 0)]


@pytest.mark.parametrize(("read_queues", "default_nums", "expected"), [(8, 4, 4), (2, 4, 2), (16, 8, 8)])
def test_tbw102_fallback_queue_count(read_queues: int, default_nums: int, expected: int) -> None:
    tbw102 = TopicRouteData.simple({"broker-a": read_queues, "broker-b": read_queues})
    route = publish_route(None, tbw102, default_topic_queue_nums=default_nums)
    assert route is not None
    tp = topic_publish_info("NewTopic", route, _index())
    assert len(tp.message_queue_list) == 2 * expected
    assert {slot.topic for slot in tp.message_queue_list} == {"NewTopic"}
    assert all(q.read_queue_nums == q.write_queue_nums == expected for q in route.queue_datas)


def test_own_route_wins_and_no_route_is_none() -> None:
    own = TopicRouteData.simple({"broker-a": 2})
    assert publish_route(own, TopicRouteData.simple({"broker-b": 8})) is own
    assert publish_route(None, None) is None


def _line_timeline(sc_raw: dict) -> RouteTimeline:
    return plan.route_timeline(scenario_from_mapping(sc_raw))


def _two_brokers(client: str, fault: dict, **raw: object) -> dict:
    return {
        "cluster": {"brokers": ["broker-a", "broker-b"]},
        "producers": {"client_version": client},
        "faults": [{"broker": "broker-b", **fault}],
        **raw,
    }


@pytest.mark.parametrize("client", ["4.9.8", "5.3.3"])
def test_dead_broker_leaves_the_route_at_the_next_poll(client: str) -> None:
    # Upstream (rocketmq-all-4.9.8 and 5.3.3): the dead process's channel closes ->
    # BrokerHousekeepingService.onChannelClose -> RouteInfoManager.onChannelDestroy (4.9.8 removes the
    # broker at once; 5.3.3 submits it to BatchUnregistrationService, whose thread takes it at once);
    # MQClientInstance.startScheduledTask polls routes 10 ms after start, then every 30 s; a restarted
    # broker registers at start (BrokerController.start -> registerBrokerAll).
    timeline = _line_timeline(_two_brokers(client, {"kind": "outage", "start_s": 60.0, "end_s": 300.0}))
    assert "broker-b" in timeline.nameserver_route_at(59_999).broker_names
    assert "broker-b" not in timeline.nameserver_route_at(60_000).broker_names
    assert "broker-b" in timeline.producer_route_at(60_009).broker_names
    assert timeline.producer_route_at(60_010).broker_names == ("broker-a",)
    assert "broker-b" in timeline.nameserver_route_at(300_000).broker_names
    assert timeline.producer_route_at(300_009).broker_names == ("broker-a",)
    assert "broker-b" in timeline.producer_route_at(300_010).broker_names
    assert timeline.change_times(10**6) == [60_010, 300_010]


@pytest.mark.parametrize("client", ["4.9.8", "5.3.3"])
def test_hung_broker_dropped_by_the_idle_handler(client: str) -> None:
    # Upstream: NettyRemotingServer's pipeline has IdleStateHandler(0, 0, serverChannelMaxIdleTimeSeconds
    # = 120); ALL_IDLE closes the channel -> BrokerHousekeepingService.onChannelIdle -> onChannelDestroy,
    # 120 s after the last registration (BrokerController.start: registerBrokerAll at start, then
    # scheduleAtFixedRate(.., 10 s, 30 s): 0, 10, 40, 70 s, ...). scanNotActiveBroker (last + 120000 < now,
    # every 10 s in 4.9.8 / 5 s in 5.3.3) can only come later. A hang from 60 s: last registration 40 s.
    timeline = _line_timeline(_two_brokers(client, {"kind": "hang", "start_s": 60.0, "end_s": 400.0}))
    assert "broker-b" in timeline.nameserver_route_at(159_999).broker_names
    assert "broker-b" not in timeline.nameserver_route_at(160_000).broker_names
    assert "broker-b" in timeline.producer_route_at(180_009).broker_names  # polls: ..., 150 010, 180 010
    assert timeline.producer_route_at(180_010).broker_names == ("broker-a",)
    assert timeline.change_times(10**6) == [180_010, 420_010]


@pytest.mark.parametrize(
    ("client", "broker", "timers"),
    [
        ("4.9.8", None, (5_000, 10_000)),
        ("5.3.3", None, (5, 5_000)),
        ("4.9.8", "5.3.3", (5, 5_000)),
        ("5.3.3", "4.9.8", (5_000, 10_000)),
    ],
)
def test_the_name_servers_scan_timers_are_the_broker_releases(
    client: str, broker: str | None, timers: tuple[int, int]
) -> None:
    # NamesrvController.initialize: 4.9.8 scheduleAtFixedRate(scanNotActiveBroker, 5, 10, SECONDS); 5.3.3
    # (.., 5, namesrvConfig.getScanNotActiveBrokerInterval() = 5 * 1000, MILLISECONDS). The name server is
    # the cluster's (cluster.broker_version, by default the client line's), not the client's.
    raw = _two_brokers(client, {"kind": "hang", "start_s": 60.0, "end_s": 400.0})
    if broker is not None:
        raw["cluster"] = {**raw["cluster"], "broker_version": broker}
    refresh = _line_timeline(raw).refresh
    assert (refresh.scan_first_ms, refresh.scan_interval_ms) == timers


@pytest.mark.parametrize("client", ["4.9.8", "5.3.3"])
def test_broker_that_stops_registering_expires_after_120_s(client: str) -> None:
    # the idle handler fires at last + 120 s in both lines (not at the next scan tick)
    full = TopicRouteData.simple({"broker-a": 4, "broker-b": 4})
    refresh = RouteRefresh.for_broker(parse_version(client).broker)
    timeline = RouteTimeline(full, (BrokerOutage("broker-b", last_heartbeat_ms=60_000),), refresh)
    assert "broker-b" in timeline.nameserver_route_at(179_999).broker_names
    assert "broker-b" not in timeline.nameserver_route_at(180_000).broker_names
    assert refresh.scan_drop_ms(60_000) > refresh.nameserver_drop_ms(60_000) == 180_000
    assert "broker-b" in timeline.producer_route_at(180_009).broker_names
    assert timeline.producer_route_at(180_010).broker_names == ("broker-a",)
    assert timeline.change_times(400_000) == [180_010]
    assert timeline.broker_selectable_until("broker-b", 0) == 180_010
    versions = route_versions(timeline, 400_000)
    assert route_at(versions, 180_009) == full
    assert route_at(versions, 180_010).broker_names == ("broker-a",)


def test_partition_leaves_route_untouched() -> None:
    # a partition between producers and broker-b: the broker keeps registering with the name server
    timeline = _line_timeline(_two_brokers("4.9.8", {"kind": "partition", "start_s": 10.0, "end_s": 400.0}))
    assert timeline.change_times(10**6) == []
    assert "broker-b" in timeline.producer_route_at(300_000).broker_names


def test_all_brokers_gone_keeps_the_stale_route() -> None:
    # Upstream: the name server answers TOPIC_NOT_EXIST (17) when no queue data is left;
    # MQClientAPIImpl.getTopicRouteInfoFromNameServer throws MQClientException,
    # MQClientInstance.updateTopicRouteInfoFromNameServer catches it (log.warn) and leaves topicRouteTable
    # and the TopicPublishInfo as they were; tryToFindTopicPublishInfo returns the old, ok() one.
    raw = {
        "cluster": {"brokers": ["broker-a", "broker-b"]},
        "faults": [
            {"broker": "broker-a", "kind": "outage", "start_s": 10.0, "end_s": 100.0},
            {"broker": "broker-b", "kind": "outage", "start_s": 40.0, "end_s": 200.0},
        ],
    }
    timeline = _line_timeline(raw)
    full = timeline.full_route
    assert timeline.nameserver_route_at(50_000).queue_datas == ()
    # 30 010: only broker-b is left; 60 010 and 90 010: nothing left, the route of 30 010 stays;
    # 120 010: broker-a is back (a change: the stale route was broker-b's); 210 010: both
    assert timeline.changes(10**6) == [
        (30_010, full.without_brokers(["broker-a"])),
        (120_010, full.without_brokers(["broker-b"])),
        (210_010, full),
    ]
    assert timeline.producer_route_at(100_000).broker_names == ("broker-b",)


def test_route_settings_are_applied() -> None:
    # route.poll_interval_ms (pollNameServerInterval), route.broker_expire_ms (the idle time) and
    # route.heartbeat_interval_ms (registerNameServerPeriod, clamped to 10-60 s) all count
    hang = {"kind": "hang", "start_s": 60.0, "end_s": 400.0}
    route = {"poll_interval_ms": 7_000, "broker_expire_ms": 20_000, "heartbeat_interval_ms": 25_000}
    timeline = _line_timeline(_two_brokers("4.9.8", hang, route=route))
    # registrations 0, 10, 35, 60 s -> drop at 80 s -> the poll at 10 + 12 * 7000 = 84 010
    assert timeline.change_times(10**6)[0] == 84_010
    assert (
        RouteRefresh.for_broker(V4_9_8.broker, register_name_server_period_ms=5_000).register_period_ms
        == 10_000
    )
    assert (
        RouteRefresh.for_broker(V4_9_8.broker, register_name_server_period_ms=90_000).register_period_ms
        == 60_000
    )


def test_broker_back_before_expiry_never_leaves_and_graceful_drop_is_immediate() -> None:
    full = TopicRouteData.simple({"broker-a": 4, "broker-b": 4})
    refresh = RouteRefresh.for_broker(V4_9_8.broker)
    blip = RouteTimeline(full, (BrokerOutage("broker-b", 60_000, back_ms=120_000),), refresh)
    assert blip.change_times(10**6) == []
    graceful = RouteTimeline(
        full, (BrokerOutage("broker-b", 60_000, back_ms=200_000, drop_immediately=True),), refresh
    )
    assert graceful.change_times(10**6) == [60_010, 210_010]
    assert graceful.producer_route_at(100_000).broker_names == ("broker-a",)
    assert graceful.producer_route_at(210_010) == full


def test_outage_rejects_return_before_last_heartbeat() -> None:
    with pytest.raises(ConfigError, match="back_ms"):
        BrokerOutage("b", 10_000, back_ms=5_000)
