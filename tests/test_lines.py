"""Every remoting client line from 4.3 to 5.3.3 (clients.md A.1): each behaviour that tells two lines apart,
stated as upstream's source at the tag does it (file and method cited beside each test; CL/ is
client/src/main/java/org/apache/rocketmq/client/ in apache/rocketmq at the tag rocketmq-all-<tag>).

The readable strategy is checked here and against the real client (tests/data/conformance: the SYNC vectors,
the probes and the ASYNC/ONEWAY traces of every tag); tests/test_engines.py runs both engines on one tag of
every line (test_every_line, test_every_line_async), and the compiled ThreadLocalIndex is checked here.
"""

from __future__ import annotations

import pytest

from rocketsim.client.fault import ReplayIntSource, Site, ThreadLocalIndex, new_strategy, queue_pos
from rocketsim.client.outcomes import Catch
from rocketsim.client.route import TopicPublishInfo, TopicRouteData, topic_publish_info
from rocketsim.client.send import MQBrokerError, Outcome, SendConfig, retry_response_codes, send_async
from rocketsim.client.versions import REMOTING_LINES, parse_version
from rocketsim.engine import compiled
from rocketsim.errors import ConfigError
from rocketsim.format.validate import ResponseCode
from rocketsim.javaint import INT_MAX, INT_MIN
from rocketsim.rng import SplitMixIntSource
from rocketsim.scenario import scenario_from_mapping

# clients.md A.1: tag -> line; the tags between two measured ones take the row of the line before them
TAG_LINES = {
    "4.3.0": "R4.3",
    "4.3.2": "R4.3",
    "4.4.0": "R4.4",  # the async sender executor (DefaultMQProducerImpl.getAsyncSenderExecutor)
    "4.5.2": "R4.4",
    "4.6.1": "R4.4",
    "4.7.1": "R4.7",
    "4.8.0": "R4.8",
    "4.9.5": "R4.9.7",
    "4.9.7": "R4.9.7",
    "4.9.8": "R4.9.8",
    "5.0.0": "R5.0",
    "5.1.0": "R5.1.0",
    "5.1.2": "R5.1.3",
    "5.1.3": "R5.1.3",
    "5.1.4": "R5.1.4",
    "5.2.0": "R5.2",
    "5.3.0": "R5.3.0",
    "5.3.1": "R5.3.1",
    "5.3.2": "R5.3.2",
    "5.3.3": "R5.3.3",
}


@pytest.mark.parametrize(("tag", "line"), TAG_LINES.items())
def test_every_tag_maps_to_its_line(tag: str, line: str) -> None:
    assert parse_version(tag).line.name == line


def test_the_runs_row_names_the_line() -> None:
    def line_of(producers: dict) -> str:
        return scenario_from_mapping({"name": "x", "producers": producers}).producers.client_line

    assert line_of({"client_version": "4.6.0"}) == "R4.4"
    assert line_of({"client_version": "5.1.2"}) == "R5.1.3"
    assert line_of({"client_family": "grpc", "client_version": "java-5.2.1"}) == "java-5.2.1"


@pytest.mark.parametrize("tag", ["4.2.0", "5.3.4", "6.0.0"])
def test_a_version_outside_the_range_is_refused(tag: str) -> None:
    with pytest.raises(ConfigError, match=r"must be a release from 4\.3\.0 to 5\.3\.3.*" + tag):
        parse_version(tag)


def test_every_row_is_a_distinct_line() -> None:
    # a row per behaviour line: no two rows alike but for their names
    rows = [{**vars(row), "name": None, "since": None} for row in REMOTING_LINES]
    assert all(a != b for i, a in enumerate(rows) for b in rows[i + 1 :])


def _tp(tag: str, queues: dict[str, int], draws: list[int] | None = None) -> TopicPublishInfo:
    line = parse_version(tag).line
    if draws is None:
        index = ThreadLocalIndex(line, lambda t: SplitMixIntSource.for_index(7, 0, t, "swq"), "swq")
    else:
        index = ThreadLocalIndex.shared(line, ReplayIntSource([("nextInt()", d) for d in draws]), "swq")
    return topic_publish_info("T", TopicRouteData.simple(queues), index)


def _strategy(tag: str, fault: bool = True):  # noqa: ANN202 - a FaultStrategy
    return new_strategy(
        parse_version(tag).line,
        send_latency_fault_enable=fault,
        which_item_worst_source=SplitMixIntSource(99),
        shuffle_source=SplitMixIntSource(5),
    )


# ---- ThreadLocalIndex [A.3.1] -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        # CL/common/ThreadLocalIndex.java getAndIncrement at 4.7.1: index = Math.abs(index + 1), a negative
        # one stored as 0: past MAX_VALUE it goes on from 0
        ("4.7.1", [INT_MAX, 0, 1]),
        # the same at 4.8.0 without the `if (index < 0) index = 0` guards: Math.abs(MIN_VALUE) is MIN_VALUE,
        # Math.abs(MIN_VALUE + 1) is MAX_VALUE: it alternates for ever (fixed by #2783 / #4349)
        ("4.8.0", [INT_MAX, INT_MIN, INT_MAX, INT_MIN]),
        # incrementAndGet at 4.9.8: ++index & 0x7FFFFFFF
        ("4.9.8", [INT_MAX, 0, 1]),
    ],
)
def test_thread_local_index_past_max_value_in_both_engines(tag: str, expected: list[int]) -> None:
    line = parse_version(tag).line
    index = ThreadLocalIndex.shared(line, ReplayIntSource([]))
    index.preset(0, INT_MAX - 1)
    assert [index.increment_and_get() for _ in expected] == expected
    stored, got = INT_MAX - 1, []
    for _ in expected:  # the compiled engine's step (engine.compiled.increment_and_get)
        stored, value = compiled._next_index(stored, int(line.index_wrap))
        got.append(int(value))
    assert got == expected


def test_4_8_0_index_wrap_alternates_queue_0_and_the_last_queue() -> None:
    # CL/impl/producer/TopicPublishInfo.java selectOneMessageQueue() at 4.8.0: pos = Math.abs(index) % size,
    # pos < 0 -> 0: MIN_VALUE gives queue 0, MAX_VALUE % 8 queue 7 (probes P02-P05 on the real client)
    assert [queue_pos(v, 8) for v in (INT_MIN, INT_MAX, INT_MIN)] == [0, 7, 0]
    assert [int(compiled.queue_pos(v, 8)) for v in (INT_MIN, INT_MAX, INT_MIN)] == [0, 7, 0]
    tp = _tp("4.8.0", {"broker-a": 4, "broker-b": 4})
    tp.send_which_queue.preset(0, INT_MAX - 1)
    s = _strategy("4.8.0", fault=False)
    picks = [s.select_one_message_queue(tp, None, 0) for _ in range(4)]
    assert [(q.broker_name, q.queue_id) for q in picks] == [("broker-b", 3), ("broker-a", 0)] * 2


# ---- queue selection [A.3.2, A.3.3] ---------------------------------------------------------------------


def test_4_3_latency_retry_sticks_to_the_broker_that_failed_and_rewrites_the_cached_queue() -> None:
    # CL/latency/MQFaultStrategy.java selectOneMessageQueue at 4.7.1: a queue qualifies only if
    # `null == lastBrokerName || mq.getBrokerName().equals(lastBrokerName)`; the failed broker is isolated,
    # so the scan finds nothing and pickOneAtLeast's broker is written into the cached MessageQueue
    # (mq.setBrokerName / setQueueId). 4.8.0 (#1576) accepts any available broker: no rewrite.
    for tag, rewrites in (("4.7.1", True), ("4.8.0", False)):
        s, tp = _strategy(tag), _tp(tag, {"broker-a": 4, "broker-b": 4})
        s.update_fault_item("broker-b", 5, False, 0)
        s.update_fault_item("broker-a", 4000, True, 0)  # isolated for 600 s
        before = tp.queue_pairs()
        mq = s.select_one_message_queue(tp, "broker-a", 10)
        assert mq.broker_name == "broker-b"
        assert (tp.queue_pairs() != before) == rewrites, tag


def test_4_3_no_latency_retry_takes_one_tick() -> None:
    # CL/impl/producer/TopicPublishInfo.java selectOneMessageQueue(lastBrokerName) at 4.7.1: one
    # getAndIncrement, then a local `index++` scan; at 4.8.0 (#2223) a tick per candidate examined
    for tag, ticks in (("4.7.1", 1), ("4.8.0", 3)):
        tp = _tp(tag, {"broker-a": 4, "broker-b": 4}, draws=[0])
        s = _strategy(tag, fault=False)
        first = s.select_one_message_queue(tp, None, 0)  # index 1: broker-a/1
        assert (first.broker_name, first.queue_id) == ("broker-a", 1)
        retry = s.select_one_message_queue(tp, "broker-a", 0)
        assert retry.broker_name == "broker-b"
        assert tp.send_which_queue.value(0) == 1 + ticks, tag


def test_5_1_3_latency_scan_skips_the_last_broker() -> None:
    # CL/latency/MQFaultStrategy.java selectOneMessageQueue at 5.1.3 (#6272): `!StringUtils.equals(
    # lastBrokerName, mq.getBrokerName()) && isAvailable(..)`; 5.1.0 takes the first available queue,
    # the broker that just failed included when it is not isolated
    for tag, broker in (("5.1.0", "broker-a"), ("5.1.3", "broker-b")):
        tp = _tp(tag, {"broker-a": 4, "broker-b": 4}, draws=[0])
        s = _strategy(tag)
        assert s.select_one_message_queue(tp, "broker-a", 0).broker_name == broker, tag


def test_5_1_0_latency_scan_overflow_falls_back_to_round_robin() -> None:
    # CL/latency/MQFaultStrategy.java selectOneMessageQueue at 5.1.0: `int pos = index++ % size` (no
    # Math.abs): near MAX_VALUE the local index wraps negative, get(pos) throws and the catch returns
    # tpInfo.selectOneMessageQueue(); 5.0.0's Math.abs maps it to queue 0 and scans on (probes P04-P05).
    # Six queues (MIN_VALUE % 6 = -2), broker-a isolated, the index two below MAX_VALUE.
    picks = {}
    for tag in ("5.0.0", "5.1.0"):
        tp = _tp(tag, {"broker-a": 3, "broker-b": 3})
        tp.send_which_queue.preset(0, INT_MAX - 2)
        s = _strategy(tag)
        s.update_fault_item("broker-a", 4000, True, 0)
        mq = s.select_one_message_queue(tp, None, 10)
        picks[tag] = (mq.broker_name, mq.queue_id)
    assert picks["5.0.0"] == ("broker-b", 2)  # MAX-1: a0, MAX: a1, MIN: 0 (a0), MAX: a1, MAX-1: a0, MAX-2: b2
    assert picks["5.1.0"] == ("broker-a", 1)  # at MIN_VALUE the catch: one more tick (MAX: a1), unfiltered


def test_4_3_pick_one_at_least_shuffles_ties() -> None:
    # CL/latency/LatencyFaultToleranceImpl.java pickOneAtLeast at 4.8.0: Collections.shuffle(tmpList), then
    # Collections.sort: tied items come in a random order; 4.9.7 (#3985) sorts the map's order as is
    def picks(tag: str) -> set[str]:
        got = set()
        for seed in range(12):
            s = new_strategy(
                parse_version(tag).line,
                send_latency_fault_enable=True,
                which_item_worst_source=ReplayIntSource([("nextInt()", 0)] * 2),
                shuffle_source=SplitMixIntSource(seed),
            )
            for b in ("broker-a", "broker-b", "broker-c", "broker-d"):
                s.update_fault_item(b, 5, False, 0)  # four items, equal in every sort key
            got.add(s.table.pick_one_at_least(1))
        return got

    assert len(picks("4.8.0")) > 1  # items[1] of a shuffled order: any of the four
    assert len(picks("4.9.7")) == 1


# ---- the fault items [A.3.5] ------------------------------------------------------------------------------


def test_5_1_4_never_goes_back_to_a_broker_that_answered_an_error() -> None:
    # CL/latency/LatencyFaultToleranceImpl.java FaultItem.isAvailable at 5.1.4: `reachableFlag &&
    # now >= startTimestamp`; DefaultMQProducerImpl.sendDefaultImpl's MQBrokerException catch updates with
    # reachable=false, so the broker stays out of the first filter pass after its 10 s. 5.2.0 (#7812):
    # `now >= startTimestamp` only (probe P01 on the real client).
    for tag, back in (("5.1.4", False), ("5.2.0", True)):
        s = _strategy(tag)
        s.record_outcome(Site.SEND_DEFAULT_IMPL, Catch.BROKER, "broker-a", 5, 0)
        assert not s.table.is_available("broker-a", 9_999)
        assert s.table.is_available("broker-a", 10_000) == back, tag


# ---- retries and texts [A.3.7, A.3.9] ---------------------------------------------------------------------


def test_system_busy_and_go_away_join_the_retried_codes() -> None:
    # CL/producer/DefaultMQProducer.java retryResponseCodes: + SYSTEM_BUSY at 5.3.0 (#5845), + GO_AWAY at
    # 5.3.1 (#8603); 4.3-4.8 hard-code the same six codes in sendDefaultImpl's switch
    busy, away = ResponseCode.SYSTEM_BUSY, ResponseCode.GO_AWAY
    assert {
        t: (busy in retry_response_codes(parse_version(t)), away in retry_response_codes(parse_version(t)))
        for t in ("4.3.2", "5.2.0", "5.3.0", "5.3.1")
    } == {
        "4.3.2": (False, False),
        "5.2.0": (False, False),
        "5.3.0": (True, False),
        "5.3.1": (True, True),
    }


def test_broker_error_names_the_broker_from_4_8_0() -> None:
    # CL/impl/MQClientAPIImpl.java processSendResponse at 4.7.1: new MQBrokerException(code, remark); at
    # 4.8.0: new MQBrokerException(code, remark, addr) (" BROKER: " + addr)
    old = MQBrokerError(1, "boom", "broker-a", parse_version("4.7.1"))
    new = MQBrokerError(1, "boom", "broker-a", parse_version("4.8.0"))
    assert "BROKER:" not in old.message and "DESC: boom BROKER: broker-a" in new.message


@pytest.mark.parametrize(("tag", "retry_timeout"), [("4.5.2", 0), ("4.7.1", 2000)])
def test_async_retry_timeout(tag: str, retry_timeout: int) -> None:
    # CL/impl/MQClientAPIImpl.java sendMessageAsync at 4.5.2: a request with no response calls
    # onExceptionImpl(.., 0L, ..): the retry goes out with timeoutMillis 0 (AR-1); at 4.7.1 with
    # `timeoutMillis - cost` (AR-2)
    version = parse_version(tag)
    s, tp = _strategy(tag), _tp(tag, {"broker-a": 4, "broker-b": 4})
    cfg = SendConfig(version=version, send_msg_timeout_ms=3000, retry_times_when_send_async_failed=1)

    def transport(attempt: int, broker: str, queue_id: int, start_ms: int, timeout_ms: int) -> Outcome:
        return Outcome.remoting_error("send_request", 1000) if attempt == 0 else Outcome.ok(5)

    rec = send_async(s, tp, cfg, "T", 0, transport)
    assert [a.timeout_ms for a in rec.attempts] == [3000, retry_timeout]
    assert rec.result is not None


def test_4_x_async_connect_failure_of_the_first_request_is_not_retried() -> None:
    # CL/impl/MQClientAPIImpl.java sendMessageAsync at 4.8.0 has no catch around invokeAsync: a connect
    # failure leaves through sendDefaultImpl ("Send [1] times"); from 4.9.3 (#3555) its catch retries it
    for tag, attempts in (("4.8.0", 1), ("4.9.8", 2)):
        version = parse_version(tag)
        s, tp = _strategy(tag), _tp(tag, {"broker-a": 4, "broker-b": 4})
        cfg = SendConfig(version=version, send_msg_timeout_ms=3000, retry_times_when_send_async_failed=2)

        def transport(attempt: int, broker: str, queue_id: int, start_ms: int, timeout_ms: int) -> Outcome:
            return Outcome.remoting_error("connect", 1) if attempt == 0 else Outcome.ok(5)

        rec = send_async(s, tp, cfg, "T", 0, transport)
        assert len(rec.attempts) == attempts, tag
        if attempts == 1:
            assert rec.error is not None and "Send [1] times" in rec.error.error_message  # type: ignore[union-attr]
