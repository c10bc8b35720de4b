"""Fault table and queue selection: the behaviours that differ between 4.9.7, 4.9.8 and 5.x."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from rocketsim.client.fault import (
    Detector,
    FaultArrays,
    FaultStrategy,
    FaultTable,
    Reachable,
    ReplayIntSource,
    Site,
    ThreadLocalIndex,
    fault_updates,
    new_strategy,
)
from rocketsim.client.outcomes import Catch
from rocketsim.client.route import TopicPublishInfo, TopicRouteData, topic_publish_info
from rocketsim.client.versions import LINE_4_9_7, LINE_4_9_8, LINE_5, LINES, remoting_line
from rocketsim.javaint import INT_MAX, INT_MIN, chm_spread, java_string_hash
from rocketsim.rng import SplitMixIntSource


def _tp(line: str, queues: dict[str, int], seed: int = 7) -> TopicPublishInfo:
    index = ThreadLocalIndex(line, lambda t: SplitMixIntSource.for_index(seed, 0, t, "sendWhichQueue"), "swq")
    return topic_publish_info("T", TopicRouteData.simple(queues), index)


def _strategy(line: str, enabled: bool = True, **kw: object) -> FaultStrategy:
    return new_strategy(
        line, send_latency_fault_enable=enabled, which_item_worst_source=SplitMixIntSource(99), **kw
    )


# ---- ThreadLocalIndex -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "start", "expected"),
    [
        (LINE_4_9_8, INT_MAX - 1, [INT_MAX, 0, 1]),  # abs(start), then ++ wraps to MIN; & 0x7FFFFFFF -> 0
        (LINE_4_9_8, INT_MIN, [1, 2]),  # Math.abs(MIN_VALUE) stays MIN_VALUE
        (LINE_5, -2, [INT_MAX, 0, 1]),  # 5.x keeps a negative start: -1 & mask, 0, 1
        (LINE_5, INT_MAX, [0, 1]),  # ++MAX wraps to MIN -> 0
    ],
)
def test_index_overflow_wraps_like_java(line: str, start: int, expected: list[int]) -> None:
    index = ThreadLocalIndex.shared(line, ReplayIntSource([("nextInt()", start)]))
    assert [index.increment_and_get() for _ in expected] == expected


def test_5x_reset_draws_a_bounded_nonnegative_position() -> None:
    index = ThreadLocalIndex.shared(LINE_5, ReplayIntSource([("nextInt()", 5), ("nextInt(2147483647)", 40)]))
    assert index.increment_and_get() == 6
    index.reset()
    assert index.increment_and_get() == 41
    with pytest.raises(Exception, match="5.x"):
        ThreadLocalIndex.shared(LINE_4_9_8, ReplayIntSource([])).reset()


def test_one_index_value_per_thread() -> None:
    index = ThreadLocalIndex(LINE_4_9_8, lambda t: ReplayIntSource([("nextInt()", 100 * (t + 1))]))
    assert index.increment_and_get(0) == 101
    assert index.increment_and_get(1) == 201
    assert index.increment_and_get(0) == 102


# ---- the fault table --------------------------------------------------------------------------


def test_table_iterates_in_concurrent_hash_map_order() -> None:
    table = FaultTable(LINE_4_9_8)
    for name in ("broker-a", "broker-b", "broker-c"):
        table.update_fault_item(name, 1, 0, now=0)
    assert table.names() == ["broker-b", "broker-c", "broker-a"]  # as the vectors print it
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == INT_MIN  # the well-known Java overflow example
    # a table that grows past 24 entries doubles its bins and keeps every name findable in bin order
    for i in range(40):
        table.update_fault_item(f"b{i}", i, 0, now=0)
    names = table.names()
    assert len(names) == 43 and len(set(names)) == 43
    bins = [chm_spread(java_string_hash(n)) & 63 for n in names]
    assert bins == sorted(bins)


def test_4_9_isolation_lasts_600s_and_5x_10s() -> None:
    s49, s5 = _strategy(LINE_4_9_8), _strategy(LINE_5)
    assert s49.update_fault_item("b", 3, isolation=True, now=0).duration == 600_000
    assert s5.update_fault_item("b", 3, isolation=True, now=0, reachable=True).duration == 10_000
    assert not s49.table.is_available("b", 599_999) and s49.table.is_available("b", 600_000)
    assert not s5.table.is_available("b", 9_999) and s5.table.is_available("b", 10_000)
    assert s5.isolated_until("b", 5_000) == 10_000 and s5.isolated_until("b", 10_000) is None


def test_5x_update_only_extends_while_4_9_overwrites() -> None:
    s49, s5 = _strategy(LINE_4_9_8), _strategy(LINE_5)
    for s in (s49, s5):
        s.update_fault_item("b", 4, isolation=True, now=0)
        s.update_fault_item("b", 4, isolation=False, now=1_000)  # a fast success
    assert s49.table.is_available("b", 1_000)  # 4.9: start = now + 0 ends the isolation
    assert s5.table.get("b").start_timestamp == 10_000  # 5.x: a 0 duration changes nothing
    s5.update_fault_item("b", 600, isolation=False, now=7_000)  # 550 ms -> 2 s, ends at 9 s: ignored
    assert s5.table.get("b").start_timestamp == 10_000
    s5.update_fault_item("b", 3_500, isolation=False, now=9_000)  # 3000 ms -> 6 s, ends later: extends
    assert s5.table.get("b").start_timestamp == 15_000
    fresh = _strategy(LINE_5)
    fresh.update_fault_item("c", 10, isolation=False, now=123)
    assert fresh.table.get("c").start_timestamp == 0  # a new item keeps start 0


def test_fault_off_leaves_the_table_alone() -> None:
    s = _strategy(LINE_4_9_8, enabled=False)
    upd = s.update_fault_item("b", 5000, isolation=True, now=0)
    assert upd.duration is None and len(s.table) == 0


def test_custom_arrays() -> None:
    arrays = FaultArrays((10, 100, 500, 2000), (0, 1000, 5000, 20000))
    assert [arrays.not_available_duration_for(x) for x in (9, 10, 99, 100, 499, 500, 30000)] == [
        0,
        0,
        0,
        1000,
        1000,
        5000,
        20000,
    ]
    with pytest.raises(Exception, match="same length"):
        FaultArrays((1, 2), (0,))


def test_pick_one_at_least_sorts_stably_and_picks_from_the_better_half() -> None:
    table = FaultTable(LINE_4_9_8, ThreadLocalIndex.shared(LINE_4_9_8, ReplayIntSource([("nextInt()", 0)])))
    for name, latency in (("broker-a", 50), ("broker-b", 50), ("broker-c", 10), ("broker-d", 70)):
        table.update_fault_item(name, latency, 60_000, now=0)
    order = table.names()  # CHM order decides the tie between a and b
    tie = [n for n in order if n in ("broker-a", "broker-b")]
    picks = [table.pick_one_at_least(now=1) for _ in range(4)]
    # sorted: c(10), then a/b tied at 50 in table order; half = 2 -> indices 1, 0, 1, 0
    assert picks == [tie[0], "broker-c", tie[0], "broker-c"]


# ---- selection -------------------------------------------------------------------------------


def _isolate_all(s: FaultStrategy, tp: TopicPublishInfo, now: int) -> None:
    for slot in tp.message_queue_list:
        s.update_fault_item(slot.broker_name, 5, isolation=True, now=now)


def _distribution(s: FaultStrategy, tp: TopicPublishInfo, now: int, n: int = 800) -> Counter[str]:
    return Counter(s.select_one_message_queue(tp, None, now).broker_name for _ in range(n))


def test_4_9_7_route_mutation_skew_persists_after_the_fault_and_4_9_8_has_none() -> None:
    lists = {}
    for line in (LINE_4_9_7, LINE_4_9_8):
        s, tp = _strategy(line), _tp(line, {"broker-a": 4, "broker-b": 4})
        before = tp.queue_pairs()
        _isolate_all(s, tp, now=0)
        for t in range(1, 40):  # every broker isolated: each selection falls back to pickOneAtLeast
            s.select_one_message_queue(tp, None, now=t)
        lists[line] = tp.queue_pairs()
        if line == LINE_4_9_8:
            assert lists[line] == before
            assert _distribution(s, tp, now=700_000) == Counter({"broker-a": 400, "broker-b": 400})
        else:
            assert lists[line] != before
            # long after the isolation ended, round robin still follows the rewritten slots
            dist = _distribution(s, tp, now=700_000)
            slots = Counter(b for b, _ in lists[line])
            assert dist == Counter({b: 100 * c for b, c in slots.items()})
            assert dist != Counter({"broker-a": 400, "broker-b": 400})
    # a route change builds fresh slots and ends the skew
    fresh = _tp(LINE_4_9_7, {"broker-a": 4, "broker-b": 4})
    assert fresh.queue_pairs() == [(b, i) for b in ("broker-a", "broker-b") for i in range(4)]


def test_4_9_selection_with_fault_on_skips_isolated_brokers_and_ignores_last_broker() -> None:
    s, tp = _strategy(LINE_4_9_8), _tp(LINE_4_9_8, {"broker-a": 2, "broker-b": 2})
    s.update_fault_item("broker-a", 5, isolation=True, now=0)
    assert {s.select_one_message_queue(tp, "broker-b", now=1).broker_name for _ in range(10)} == {"broker-b"}


@pytest.mark.parametrize("line", [LINE_4_9_8, LINE_5])
def test_fault_off_avoids_the_last_broker(line: str) -> None:
    s, tp = _strategy(line, enabled=False), _tp(line, {"broker-a": 3, "broker-b": 1})
    picks = {
        s.select_one_message_queue(tp, "broker-a", now=0, reset_index=True).broker_name for _ in range(20)
    }
    assert picks == {"broker-b"}
    single = _tp(line, {"broker-a": 2})  # nothing else: falls back to plain round robin
    assert s.select_one_message_queue(single, "broker-a", now=0).broker_name == "broker-a"


def test_5x_filters_available_then_reachable_then_round_robin() -> None:
    s, tp = _strategy(LINE_5), _tp(LINE_5, {"broker-a": 2, "broker-b": 2, "broker-c": 2})
    s.update_fault_item("broker-a", 5, isolation=True, now=0, reachable=False)
    s.update_fault_item("broker-b", 5, isolation=True, now=0, reachable=True)
    # available and not last: only c
    assert {s.select_one_message_queue(tp, "broker-b", 1, True).broker_name for _ in range(10)} == {
        "broker-c"
    }
    # c is the last broker: nothing available -> reachable and not last: b
    assert {s.select_one_message_queue(tp, "broker-c", 1, True).broker_name for _ in range(10)} == {
        "broker-b"
    }
    s.update_fault_item("broker-c", 5, isolation=True, now=0, reachable=False)
    # nothing available or reachable but b, and b is last: plain round robin over everything
    assert {s.select_one_message_queue(tp, "broker-b", 1, True).broker_name for _ in range(60)} == {
        "broker-a",
        "broker-b",
        "broker-c",
    }


def test_5x_detector_marks_reachable_and_drops_unresolvable_items() -> None:
    probes: list[str] = []
    route = {"broker-a": "addr-a", "broker-b": "addr-b"}
    detector = Detector(3_000, route.get, lambda addr, timeout: probes.append(addr) or True)
    s = _strategy(LINE_5, start_detector_enable=True, detector=detector)
    s.update_fault_item("broker-a", 5, isolation=True, now=0, reachable=False)
    s.update_fault_item("broker-b", 5, isolation=True, now=0, reachable=False)
    s.update_fault_item("broker-x", 5, isolation=True, now=0, reachable=False)
    s.advance_to(2_999)
    assert probes == [] and not s.table.is_reachable("broker-a")
    s.advance_to(3_000)
    assert s.table.is_reachable("broker-a") and s.table.is_reachable("broker-b")
    assert s.table.get("broker-x") is None  # no longer resolves: removed
    assert s.table.get("broker-a").check_stamp == 5_000
    s.advance_to(6_000)  # both due again (6000 - 5000 >= 0)
    assert len(probes) == 4
    off = _strategy(LINE_5, detector=Detector(3_000, route.get, lambda a, t: True))
    off.update_fault_item("broker-a", 5, isolation=True, now=0, reachable=False)
    off.advance_to(60_000)  # startDetectorEnable=false: ticks do nothing
    assert not off.table.is_reachable("broker-a")


# ---- FAULT_UPDATES against upstream's source ----------------------------------------------------------
# Each cell's updateFaultItem call as written at the tags (file:line). 4.9: (broker, latency, isolation);
# 5.x: (broker, latency, isolation, reachable). rocketmq-all-4.9.7 and -4.9.8 have the same
# DefaultMQProducerImpl lines; their MQClientAPIImpl differs only in line numbers (4.9.8's shown).
_SDI = "this.updateFaultItem(mq.getBrokerName(), endTimestamp - beginTimestampPrev, "
_RF = "producer.updateFaultItem(brokerName, System.currentTimeMillis() - responseFuture.getBeginTimestamp(), "
_BS = "producer.updateFaultItem(brokerName, System.currentTimeMillis() - beginStartTime, "
UPSTREAM_CALLS: dict[str, dict[Site, dict[Catch, str | tuple[str, str]]]] = {
    "CS-1": {
        Site.SEND_DEFAULT_IMPL: {  # DefaultMQProducerImpl.sendDefaultImpl (4.9.7 = 4.9.8)
            Catch.RESULT: _SDI + "false);",  # :578, after sendKernelImpl returned
            Catch.REMOTING: _SDI + "true);",  # :597 catch (RemotingException e)
            Catch.CLIENT: _SDI + "true);",  # :604 catch (MQClientException e)
            Catch.BROKER: _SDI + "true);",  # :611 catch (MQBrokerException e)
            Catch.INTERRUPTED: _SDI + "false);",  # :626 catch (InterruptedException e)
        },
        Site.SEND_MESSAGE_ASYNC_CATCH: {  # MQClientAPIImpl.sendMessageAsync: catch (Exception ex), :576
            Catch.REMOTING: "producer.updateFaultItem(brokerName, cost, true);",
            Catch.CLIENT: "producer.updateFaultItem(brokerName, cost, true);",
            Catch.INTERRUPTED: "producer.updateFaultItem(brokerName, cost, true);",
        },
        Site.ASYNC_CALLBACK: {  # its InvokeCallback.operationComplete
            Catch.RESULT: _RF + "false);",  # :549, after sendCallback.onSuccess
            Catch.BROKER: _RF + "true);",  # :551, processSendResponse threw
            Catch.REMOTING: _RF + "true);",  # :556, response == null (send failed, timeout)
        },
    },
    "CS-2": {
        Site.SEND_DEFAULT_IMPL: {  # DefaultMQProducerImpl.sendDefaultImpl at rocketmq-all-5.3.3
            Catch.RESULT: _SDI + "false, true);",  # :791
            Catch.CLIENT: _SDI + "false, true);",  # :810 catch (MQClientException e)
            # :819 / :822 catch (RemotingException e): if (isStartDetectorEnable()) ... else ...
            Catch.REMOTING: (_SDI + "true, false);", _SDI + "true, true);"),
            Catch.BROKER: _SDI + "true, false);",  # :832 catch (MQBrokerException e)
            Catch.INTERRUPTED: _SDI + "false, true);",  # :849 catch (InterruptedException e)
        },
        Site.SEND_MESSAGE_ASYNC_CATCH: {  # MQClientAPIImpl.sendMessageAsync: catch (Exception ex), :672
            Catch.CLIENT: "producer.updateFaultItem(brokerName, cost, true, false);",
        },
        Site.ASYNC_CALLBACK: {
            Catch.RESULT: _BS + "false, true);",  # :642 operationSucceed, after onSuccess
            Catch.BROKER: _BS + "true, true);",  # :644 operationSucceed, processSendResponse threw
            Catch.REMOTING: _BS + "true, true);",  # :652 operationFail
            Catch.INTERRUPTED: _BS + "true, true);",  # :652 operationFail ("unknown reason")
        },
    },
}
# 4.3-4.8 (rocketmq-all-4.8.0; 4.3.2 the same calls at other lines): sendDefaultImpl's five calls as 4.9's
# (:586, :605, :612, :619, :640) and the callback's (:557, :559, :564); sendMessageAsync has no catch (its
# failures reach sendDefaultImpl's catch, or onExceptionImpl's updateFaultItem(brokerName, 3000, true) on a
# retry, :616 / :623, which the send loop makes itself)
UPSTREAM_CALLS["CS-1/uncaught"] = {
    site: cells for site, cells in UPSTREAM_CALLS["CS-1"].items() if site != Site.SEND_MESSAGE_ASYNC_CATCH
}
# 5.1.4 and 5.2.0 (rocketmq-all-5.2.0): sendDefaultImpl's calls as 5.3.3's (:742-:800); sendMessageAsync's
# catch (Exception ex) takes what invokeAsync throws (:702); the callbacks (:656, :673, :675, :683; 5.1.4
# measures from responseFuture.getBeginTimestamp(), the same flags) see no interrupt (it is thrown)
UPSTREAM_CALLS["CS-2/thrown"] = {
    Site.SEND_DEFAULT_IMPL: UPSTREAM_CALLS["CS-2"][Site.SEND_DEFAULT_IMPL],
    Site.SEND_MESSAGE_ASYNC_CATCH: {
        c: "producer.updateFaultItem(brokerName, cost, true, false);"
        for c in (Catch.REMOTING, Catch.CLIENT, Catch.INTERRUPTED)
    },
    Site.ASYNC_CALLBACK: {
        c: call for c, call in UPSTREAM_CALLS["CS-2"][Site.ASYNC_CALLBACK].items() if c != Catch.INTERRUPTED
    },
}
_ARGS = re.compile(r", (true|false)(?:, (true|false))?\);$")


def _parsed(call: str) -> tuple[bool, bool | None]:
    m = _ARGS.search(call)
    assert m is not None, call
    return m[1] == "true", None if m[2] is None else m[2] == "true"


@pytest.mark.parametrize("line", LINES)
def test_fault_updates_are_upstream_calls(line: str) -> None:
    quoted = UPSTREAM_CALLS[remoting_line(line).fault_updates]
    table = fault_updates(line)
    assert {s: set(c) for s, c in table.items()} == {s: set(c) for s, c in quoted.items()}
    for site, cells in table.items():
        for catch, (isolation, reachable) in cells.items():
            call = quoted[site][catch]
            if isinstance(call, tuple):  # reachable depends on startDetectorEnable
                with_detector, without = (_parsed(c) for c in call)
                assert reachable is Reachable.UNLESS_DETECTOR
                assert (isolation, reachable.value_for(True)) == with_detector
                assert (isolation, reachable.value_for(False)) == without
                continue
            upstream_isolation, upstream_reachable = _parsed(call)
            assert isolation == upstream_isolation, (line, site, catch)
            if upstream_reachable is None:
                assert reachable is Reachable.NO_ARGUMENT
            else:
                assert reachable.value_for(False) == upstream_reachable == reachable.value_for(True)


def test_record_outcome_reads_the_table_and_reports_the_call() -> None:
    s5 = _strategy(LINE_5)
    upd = s5.record_outcome(Site.SEND_DEFAULT_IMPL, Catch.BROKER, "b", 3, now=0)
    assert (upd.isolation, upd.reachable, upd.duration) == (True, False, 10_000)
    assert not s5.table.is_reachable("b")
    s49 = _strategy(LINE_4_9_8)
    upd = s49.record_outcome(Site.SEND_DEFAULT_IMPL, Catch.CLIENT, "b", 3, now=0)
    assert (upd.isolation, upd.reachable, upd.duration) == (True, None, 600_000)
    with pytest.raises(KeyError):  # a cell the simulation cannot reach is not in the table
        s5.record_outcome(Site.SEND_MESSAGE_ASYNC_CATCH, Catch.REMOTING, "b", 3, now=0)
