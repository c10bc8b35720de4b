"""Routes: TopicPublishInfo building, the TBW102 fallback, and when a dead broker leaves the route."""

from __future__ import annotations

import pytest

from rocketsim.errors import ConfigError
from rocketsim.fault import LINE_4_9_8, ReplayIntSource, ThreadLocalIndex
from rocketsim.route import (
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
from rocketsim.versions import V4_9_8, parse_version


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


@pytest.mark.parametrize(
    ("client", "drop_at", "seen_until"), [("4.9.8", 185_000, 210_010), ("5.3.3", 180_005, 180_010)]
)
def test_dead_broker_selectable_until_route_expiry_and_poll(
    client: str, drop_at: int, seen_until: int
) -> None:
    full = TopicRouteData.simple({"broker-a": 4, "broker-b": 4})
    timeline = RouteTimeline(
        full,
        (BrokerOutage("broker-b", last_heartbeat_ms=60_000),),
        RouteRefresh.for_broker(parse_version(client).broker),
    )
    # name server: strictly more than 120 s after the last heartbeat, at a scan tick (10 s in 4.9, 5 s in 5.x)
    assert "broker-b" in timeline.nameserver_route_at(drop_at - 1).broker_names
    assert "broker-b" not in timeline.nameserver_route_at(drop_at).broker_names
    # producer: at its next 30 s poll
    assert "broker-b" in timeline.producer_route_at(seen_until - 1).broker_names
    assert timeline.producer_route_at(seen_until).broker_names == ("broker-a",)
    assert timeline.change_times(400_000) == [seen_until]
    assert timeline.broker_selectable_until("broker-b", 0) == seen_until
    versions = route_versions(timeline, 400_000)
    assert route_at(versions, seen_until - 1) == full
    assert route_at(versions, seen_until).broker_names == ("broker-a",)


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
