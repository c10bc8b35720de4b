"""The closed-loop store: send queue, send threads, one commit-log writer, admission and the sweeper, against
hand-computed cases. Texts and timers are upstream's (4.9.8 and 5.3.3 alike):
NettyRemotingAbstract.processRequestCommand ([REJECTREQUEST], [OVERLOAD]), BrokerFastFailure.start
(1000 ms, then every 10 ms), BrokerFastFailure.cleanExpiredRequest ([PCBUSY_CLEAN_QUEUE]) and
cleanExpiredRequestInQueue ([TIMEOUT_CLEAN_QUEUE], behind >= waitTimeMillsInSendQueue, size after the
removal), DefaultMessageStore.isOSPageCacheBusy (diff > osPageCacheBusyTimeOutMills),
SendMessageProcessor.handlePutMessageResult (OS_PAGECACHE_BUSY -> [PC_SYNCHRONIZED])."""

from __future__ import annotations

import dataclasses

import pytest

from rocketsim.broker import latency as bm
from rocketsim.broker.queue import (
    REMARKS,
    BrokerStore,
    Fate,
    Stall,
    StoreAnswer,
    StoreCluster,
    StoreParams,
    answer_code,
    closed_outcome,
    sweep_tick_at_or_after,
)
from rocketsim.client.outcomes import OutcomeKind
from rocketsim.client.versions import BROKER_4_9_8, BROKER_5_3_3
from rocketsim.scenario import ScenarioError, StoreConfig, scenario_from_mapping

KIB = 1024


def params(append_us: float = 1000.0, threads: int = 1, capacity: int = 10_000, **kw: object) -> StoreParams:
    cfg = StoreConfig(append_us=append_us, send_threads=threads, send_queue_capacity=capacity)
    return dataclasses.replace(StoreParams.from_config(cfg, BROKER_4_9_8), **kw)


def test_sweeper_ticks_from_one_second_every_ten_ms() -> None:
    # BrokerFastFailure.start: scheduleAtFixedRate(.., 1000, 10, TimeUnit.MILLISECONDS)
    assert [sweep_tick_at_or_after(t) for t in (0, 999, 1000, 1001, 1234, 1240)] == [
        1000,
        1000,
        1000,
        1010,
        1240,
        1240,
    ]


def test_service_grows_with_the_append_size() -> None:
    p = params(append_us=10.0)
    assert (p.service_us(KIB), p.service_us(4 * KIB), p.service_us(1)) == (10, 40, 1)


def test_fifo_one_writer_waits_and_depth() -> None:
    s = BrokerStore(params())  # 1 ms per KiB, one send thread
    a, b, c = (s.offer(2000, KIB) for _ in range(3))
    assert (a.fate, a.answer_us, a.stored_us, a.queue_depth) == (Fate.SERVED, 2_001_000, 2_001_000, 0)
    assert (b.answer_us, b.queue_depth) == (2_002_000, 0)  # waited for a's append, first in the queue
    assert (c.answer_us, c.queue_depth) == (2_003_000, 1)  # b ahead of it


def test_writer_is_shared_by_the_send_threads() -> None:
    s = BrokerStore(params(threads=4))
    answers = [s.offer(2000, KIB) for _ in range(3)]
    # three threads take them at once (nothing queued), the appends still take turns under the lock
    assert [x.answer_us for x in answers] == [2_001_000, 2_002_000, 2_003_000]
    assert [x.queue_depth for x in answers] == [0, 0, 0]


def test_flush_and_replica_waits_add_latency_not_occupancy() -> None:
    cfg = StoreConfig(append_us=1000.0, send_threads=1, flush="sync", replication="sync")
    s = BrokerStore(StoreParams.from_config(cfg, BROKER_4_9_8))
    a, b = s.offer(2000, KIB), s.offer(2000, KIB)
    assert (a.stored_us, a.answer_us) == (2_001_000, 2_003_000)  # + sync_flush_ms 1 + sync_replica_ms 1
    assert (b.stored_us, b.answer_us) == (2_002_000, 2_004_000)  # the writer was free at 2_001_000


def test_timeout_clean_queue_and_its_sizes() -> None:
    cluster = StoreCluster([BrokerStore(params(append_us=300_000.0))], ("b",))  # 300 ms per append
    s = cluster.stores[0]
    a = s.offer(2000, KIB)  # appended 2000..2300 ms
    b = s.offer(2000, KIB)  # waits; behind = 200 at the 2200 tick
    c = s.offer(2005, KIB)  # behind = 205 at the 2210 tick
    d = s.offer(2100, KIB)  # 2300 tick: taken by the thread at 2300 first
    assert a.fate == Fate.SERVED and a.answer_us == 2_300_000
    assert (b.fate, b.answer_us, c.fate, c.answer_us) == (
        Fate.TIMEOUT_CLEAN_QUEUE,
        2_200_000,
        Fate.TIMEOUT_CLEAN_QUEUE,
        2_210_000,
    )
    assert (d.fate, d.answer_us) == (Fate.SERVED, 2_600_000)
    text = (
        "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: {}ms, "
        "size of queue: {}"
    )
    # size of queue after the removal: b leaves c and d behind it, c leaves d
    assert cluster.fill_sizes(b.remark) == text.format(200, 2)
    assert cluster.fill_sizes(c.remark) == text.format(205, 1)
    assert b.code == bm.SYSTEM_BUSY


def test_overload_when_the_queue_is_full() -> None:
    s = BrokerStore(params(append_us=300_000.0, capacity=2))
    fates = [s.offer(2000, KIB).fate for _ in range(3)]
    d = s.offer(2001, KIB)
    # one taken, two queued until the sweeper removes them at 2200
    assert fates == [Fate.SERVED, Fate.TIMEOUT_CLEAN_QUEUE, Fate.TIMEOUT_CLEAN_QUEUE]
    assert d.fate == Fate.OVERLOAD and d.answer_us == 2_001_000 and d.queue_depth == 2
    assert d.remark == "[OVERLOAD]system busy, start flow control for a while"
    assert s.offer(2200, KIB).queue_depth == 0  # swept at the 2200 tick, before it arrived


def test_store_stall_page_cache_busy_storm() -> None:
    # a 1.5 s stall at 5 s: the append taken at 5000 holds the lock until 6501 ms; the page cache is busy
    # from 5000 + 1000 + 1 (diff > 1000) until the lock is released
    stall = Stall(5_000_000, 6_000_000, 60_000_000, 1_500_000)
    cluster = StoreCluster([BrokerStore(params(stalls=(stall,)))], ("b",))
    s = cluster.stores[0]
    a = s.offer(5000, KIB)
    assert s.busy == [(6001, 6501)]
    b = s.offer(5100, KIB)  # expires first: 5300 tick
    c = s.offer(5900, KIB)  # the 6010 tick drains the queue (page cache busy) before it expires (6100)
    f = s.offer(5950, KIB)
    d = s.offer(6001, KIB)  # busy at admission
    e = s.offer(6600, KIB)  # the lock is free again
    assert (a.fate, a.stored_us) == (Fate.SERVED, 6_501_000)
    assert (b.fate, b.answer_us) == (Fate.TIMEOUT_CLEAN_QUEUE, 5_300_000)
    assert (c.fate, c.answer_us, f.fate, f.answer_us) == (
        Fate.PCBUSY_CLEAN_QUEUE,
        6_010_000,
        Fate.PCBUSY_CLEAN_QUEUE,
        6_010_000,
    )
    pc = (
        "[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: {}ms, "
        "size of queue: {}"
    )
    assert cluster.fill_sizes(c.remark) == pc.format(110, 1)  # f is still behind it
    assert cluster.fill_sizes(f.remark) == pc.format(60, 0)
    assert (d.fate, d.answer_us, d.remark) == (Fate.REJECT_REQUEST, 6_001_000, REMARKS[Fate.REJECT_REQUEST])
    assert d.remark == "[REJECTREQUEST]system busy, start flow control for a while"
    assert (e.fate, e.answer_us) == (Fate.SERVED, 6_601_000)


def test_stall_hits_only_the_append_that_overlaps_it() -> None:
    stall = Stall(5_000_000, 200_000_000, 60_000_000, 1_500_000)
    assert stall.delay(4_000_000, 1000) == 0
    assert stall.delay(4_999_500, 1000) == 1_500_000  # running at the stall's start
    assert stall.delay(5_500_000, 1000) == 1_000_000  # starts inside: waits for the rest
    assert stall.delay(65_000_000, 10) == 1_500_000  # the next period
    assert stall.delay(66_600_000, 10) == 0


def test_pc_synchronized_code_by_broker_version() -> None:
    # SendMessageProcessor.handlePutMessageResult, OS_PAGECACHE_BUSY: SYSTEM_ERROR in 4.9.8,
    # SYSTEM_BUSY in 5.3.3 (apache/rocketmq PR #8054)
    cfg = StoreConfig()
    assert StoreParams.from_config(cfg, BROKER_4_9_8).pc_code == 1
    assert StoreParams.from_config(cfg, BROKER_5_3_3).pc_code == 2
    assert REMARKS[Fate.PC_SYNCHRONIZED] == "[PC_SYNCHRONIZED]broker busy, start flow control for a while"


def _served(answer_us: int, stored_us: int) -> StoreAnswer:
    return StoreAnswer(Fate.SERVED, 1_000_000, answer_us, stored_us)


def test_closed_outcome_adds_the_store_to_the_network() -> None:
    net = bm.AttemptOutcome(OutcomeKind.OK, 2, 0, True, 2)
    ok = closed_outcome(net, _served(1_005_000, 1_004_000), 1000, 3000)
    assert (ok.kind, ok.latency_ms, ok.stored, ok.store_ms) == (OutcomeKind.OK, 7, True, 4)
    late = closed_outcome(net, _served(4_500_000, 4_400_000), 1000, 3000)
    # the client gives up at its timeout; the broker stores it anyway and its SEND_OK comes late
    assert (late.kind, late.latency_ms, late.stored, late.store_ms, late.late_ms, late.late_code) == (
        OutcomeKind.REMOTING_TIMEOUT,
        3000,
        True,
        3400,
        3502,
        0,
    )
    busy = StoreAnswer(Fate.OVERLOAD, 1_000_000, 1_000_000, remark=REMARKS[Fate.OVERLOAD])
    rej = closed_outcome(net, busy, 1000, 3000)
    assert (rej.kind, rej.response_code, rej.latency_ms, rej.stored, rej.remark) == (
        OutcomeKind.BROKER_ERROR,
        bm.SYSTEM_BUSY,
        2,
        False,
        REMARKS[Fate.OVERLOAD],
    )


def test_pc_synchronized_answers_with_the_broker_versions_code() -> None:
    """broker/src/main/java/org/apache/rocketmq/broker/processor/SendMessageProcessor.java
    handlePutMessageResult: OS_PAGECACHE_BUSY answers SYSTEM_ERROR (1) at rocketmq-all-4.9.8,
    OS_PAGE_CACHE_BUSY SYSTEM_BUSY (2) at rocketmq-all-5.3.3; every other refusal is SYSTEM_BUSY, an
    appended request SUCCESS."""
    net = bm.AttemptOutcome(OutcomeKind.OK, 2, 0, True, 2)
    for version, code in ((BROKER_4_9_8, 1), (BROKER_5_3_3, 2)):
        params = StoreParams.from_config(StoreConfig(), version)
        ans = StoreAnswer(Fate.PC_SYNCHRONIZED, 1_000_000, 1_001_000, pc_code=params.pc_code)
        assert ans.code == code == answer_code(Fate.PC_SYNCHRONIZED, params.pc_code)
        assert closed_outcome(net, ans, 1000, 3000).response_code == code
        late = closed_outcome(net, ans, 1000, 1)
        assert (late.kind, late.late_code) == (OutcomeKind.REMOTING_TIMEOUT, code)
        for fate in (Fate.REJECT_REQUEST, Fate.OVERLOAD, Fate.TIMEOUT_CLEAN_QUEUE, Fate.PCBUSY_CLEAN_QUEUE):
            assert answer_code(fate, params.pc_code) == bm.SYSTEM_BUSY
        assert answer_code(Fate.SERVED, params.pc_code) == 0


def test_scenario_keys_and_their_rules() -> None:
    sc = scenario_from_mapping({"brokers": {"coupling": "joint", "default": {"store": {"append_us": 720}}}})
    assert sc.coupling == "joint" and sc.broker_model("broker-a").store.append_us == 720.0
    assert sc.broker_version == BROKER_4_9_8  # the producers' line
    assert scenario_from_mapping({"cluster": {"broker_version": "5.3.3"}}).broker_version == BROKER_5_3_3
    assert scenario_from_mapping({}).coupling == "open"
    cases = {
        "brokers.coupling must be one of open, joint, iterative, got 'closed'": {
            "brokers": {"coupling": "closed"}
        },
        "brokers.default.store.flush must be one of async, sync, got 'never'": {
            "brokers": {"default": {"store": {"flush": "never"}}}
        },
        "brokers.default.store.send_queue_capacity must be between 1 and 100000000, got 0": {
            "brokers": {"default": {"store": {"send_queue_capacity": 0}}}
        },
        "faults[0].kind store_stall needs a closed-loop store (brokers.coupling = joint or iterative), got "
        "'store_stall'": {
            "faults": [{"broker": "broker-a", "kind": "store_stall", "start_s": 1, "end_s": 2, "down_s": 0.5}]
        },
    }
    for message, raw in cases.items():
        with pytest.raises(ScenarioError) as err:
            scenario_from_mapping(raw)
        assert str(err.value) == message
    with pytest.raises(ScenarioError, match="^cluster.broker_version must be a 4.x or 5.x release"):
        scenario_from_mapping({"cluster": {"broker_version": "3.2.6"}})
