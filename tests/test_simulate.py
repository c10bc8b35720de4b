"""Simulation semantics on edge cases, through the facade (the engine ROCKETSIM_ENGINE names), checked
against the reference engine."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pytest

from rocketsim.broker import store
from rocketsim.client.fault import Site
from rocketsim.client.outcomes import Catch
from rocketsim.engine import reference, simulate, simulate_producer
from rocketsim.scenario import load_scenario, scenario_from_mapping, workload


def _one_producer(raw: dict):
    sc = scenario_from_mapping({"producers": {"count": 1}, **raw})
    return sc, workload.generate(sc)


def _same(sc, messages):
    ref = reference.simulate_producer(messages, sc)
    fast = simulate_producer(messages, sc)
    assert ref.results.equals(fast.results) and ref.attempts.equals(fast.attempts)
    return ref


def test_oneway_caller_does_not_wait_for_a_hung_broker() -> None:
    sc, messages = _one_producer(
        {
            "cluster": {"brokers": ["broker-a"]},
            "producers": {"count": 1, "send_mode": {"oneway": 1.0}},
            "workload": {"messages": 200, "rate_per_s": 100.0, "arrival": "uniform"},
            "faults": [{"broker": "broker-a", "kind": "hang", "start_s": 0, "end_s": 100}],
        }
    )
    out = _same(sc, messages).results.to_pandas()
    assert (out.status == "ONEWAY_SENT").all()
    assert (out.queue_wait_ms == 0).all() and (out.latency_ms == 0).all()
    # each send starts when its message is born: simulated time never runs backwards
    assert (out.send_ts_ms == out.born_ts_ms).all()


def test_ordered_send_with_every_broker_gone_throws_the_raw_connect_error() -> None:
    # Upstream: the producer keeps its stale route (TOPIC_NOT_EXIST swallowed by
    # MQClientInstance.updateTopicRouteInfoFromNameServer), so DefaultMQProducerImpl.sendSelectImpl selects a
    # stale queue and sendKernelImpl's RemotingConnectException propagates unwrapped (no "No route info").
    sc, messages = _one_producer(
        {
            "cluster": {"brokers": ["broker-a"]},
            "workload": {"messages": 100, "rate_per_s": 0.2, "message_types": {"ordered": 1.0}},
            "faults": [{"broker": "broker-a", "kind": "outage", "start_s": 10, "end_s": 400}],
        }
    )
    out = _same(sc, messages).results.to_pandas()
    dead = out[(out.send_ts_ms >= 10_000) & (out.send_ts_ms < 400_000)]
    assert len(dead) > 0 and (dead.attempts == 1).all() and (dead.status == "FAILED").all()
    assert (dead.error == "RemotingConnectException: connect to broker-a failed").all()
    assert not out.error.fillna("").str.contains("No route info").any()


def test_all_brokers_gone_fails_with_connect_errors_not_no_route() -> None:
    # Upstream (4.9.8): stale route (see test_route.test_all_brokers_gone_keeps_the_stale_route); every
    # attempt of sendDefaultImpl gets RemotingConnectException (connect refused, ~1 ms), updateFaultItem,
    # retries, then MQClientException("Send [3] times, still failed, cost [N]ms, Topic: T, BrokersSent:
    # [...]" + suggestTodo).setResponseCode(CONNECT_BROKER_EXCEPTION = 10001), cause the connect error.
    sc, messages = _one_producer(
        {
            "cluster": {"brokers": ["broker-a"]},
            "producers": {"count": 1, "send_latency_fault_enable": False},
            "workload": {"messages": 4, "rate_per_s": 0.01, "arrival": "uniform"},  # born 100, 200, .. s
            "brokers": {"default": {"latency": {"connect_refused_ms": 1.0}}},
            "faults": [{"broker": "broker-a", "kind": "outage", "start_s": 10, "end_s": 400}],
        }
    )
    out = _same(sc, messages)
    res = out.results.to_pandas().set_index("seq")
    first = res.loc[0]
    assert first.born_ts_ms == 100_000 and first.attempts == 3 and first.status == "FAILED"
    assert first.brokers_sent.tolist() == ["broker-a"] * 3
    assert first.error == (
        "MQClientException: Send [3] times, still failed, cost [3]ms, Topic: TopicTest, BrokersSent: "
        "[broker-a, broker-a, broker-a]\nSee http://rocketmq.apache.org/docs/faq/ for further details."
    )
    att = out.attempts.to_pandas()
    assert set(att[att.seq == 0].outcome) == {"remoting:connect"}


def test_connect_timeout_is_not_capped_by_the_request_timeout() -> None:
    # Upstream NettyRemotingClient.createChannel (4.9.8): the connect waits connectTimeoutMillis (3000)
    # before invokeSync checks its timeout; sendDefaultImpl: `if (timeout < costTime) { callTimeout = true;
    # break; }`. A partition from 0 (no channel open): attempt 1 fails at 3000 (cost 3000, 3000 < 3000 is
    # false), attempt 2 runs with timeout - costTime = 0 and fails at 6000, attempt 3 breaks:
    # RemotingTooMuchRequestException("sendDefaultImpl call timeout").
    sc, messages = _one_producer(
        {
            "cluster": {"brokers": ["broker-a"]},
            "producers": {"count": 1, "send_latency_fault_enable": False},
            "workload": {"messages": 1, "rate_per_s": 1.0},
            "faults": [{"broker": "broker-a", "kind": "partition", "start_s": 0, "end_s": 100}],
        }
    )
    out = _same(sc, messages)
    att = out.attempts.to_pandas()
    born = int(messages.column("born_ts_ms")[0].as_py())
    assert att.outcome.tolist() == ["remoting:connect"] * 2
    assert att.latency_ms.tolist() == [3000, 3000]
    assert att.start_ts_ms.tolist() == [born, born + 3000]
    res = out.results.to_pandas().iloc[0]
    assert res.error == "RemotingTooMuchRequestException: sendDefaultImpl call timeout"
    assert res.retry_budget_exhausted and res.end_ts_ms == born + 6000


def test_broker_outage_toml_stops_choosing_b_after_the_next_poll() -> None:
    # The gate: with the fault strategy off, no attempt goes to the dead broker-b after the first
    # route poll (every 30 s) that follows its death at 60 s, until it is back at 300 s.
    sc = load_scenario(
        Path(__file__).parent.parent / "conf" / "scenarios" / "broker_outage.toml",
        ["producers.send_latency_fault_enable=false"],
    )
    out = simulate(workload.generate(sc), sc)
    att = out.attempts
    b = pc.equal(att.column("broker"), "broker-b")
    start = att.column("start_ts_ms")
    late = pc.and_(b, pc.and_(pc.greater_equal(start, 91_000), pc.less(start, 300_000)))
    assert pc.sum(late.cast("int64")).as_py() == 0
    assert pc.sum(pc.and_(b, pc.greater_equal(start, 300_010)).cast("int64")).as_py() > 0  # back after


def test_tiny_spike_alpha_is_bounded_not_a_crash() -> None:
    sc, messages = _one_producer(
        {
            "brokers": {"default": {"latency": {"spike_probability": 0.5, "spike_alpha": 0.1}}},
            "workload": {"messages": 300},
        }
    )
    out = _same(sc, messages)
    assert pc.max(out.attempts.column("latency_ms")).as_py() <= 3001
    assert (
        pc.count(
            pc.filter(
                out.attempts.column("outcome"), pc.equal(out.attempts.column("outcome"), "remoting:timeout")
            )
        ).as_py()
        > 0
    )


def test_one_bad_member_rejects_its_whole_batch() -> None:
    sc, messages = _one_producer(
        {
            "workload": {
                "messages": 2000,
                "message_types": {"batch": 1.0},
                "batch_size": 4,
                "invalid": {"bad_topic": 0.02, "reserved_property": 0.02},
            },
        }
    )
    out = (
        _same(sc, messages)
        .results.to_pandas()
        .merge(messages.to_pandas()[["seq", "batch_id", "topic", "reserved_property"]], on="seq")
    )
    batch_failed = out[out.error.fillna("").str.startswith("Failed to initiate the MessageBatch\n")]
    assert len(batch_failed) > 0 and (batch_failed.status == "REJECTED").all()
    for _, block in out.groupby("batch_id"):
        if (block.topic == "bad topic!").any():  # generateFromList/checkMessage fail: nothing is sent
            assert (block.status == "REJECTED").all()
        elif block.reserved_property.notna().any():  # that member was never made; the rest is sent
            made = block[block.reserved_property.isna()]
            assert (made.status != "REJECTED").all()
            assert (block[block.reserved_property.notna()].error.str.contains("is used by system")).all()


def test_detector_probe_of_a_hung_broker_fails() -> None:
    # Upstream 5.3.3 LatencyFaultToleranceImpl.detectByOneRound: every 3 s, for each due fault item,
    # getMaxOffset(brokerAddr, .., detectTimeout = 200): a hung broker accepts the connection and never
    # answers -> RemotingTimeoutException -> false, so reachableFlag stays false; once it answers again
    # the next round sets it reachable. (A dead broker refuses, a partitioned one never connects: false.)
    sc = scenario_from_mapping(
        {
            "cluster": {"brokers": ["broker-a", "broker-b"]},
            "producers": {
                "count": 1,
                "client_version": "5.3.3",
                "send_latency_fault_enable": True,
                "start_detector_enable": True,
            },
            "faults": [{"broker": "broker-a", "kind": "hang", "start_s": 5, "end_s": 30}],
        }
    )
    sim = reference.ProducerSimulation(sc, 0)
    strategy = sim.strategy
    strategy.advance_to(6_000)
    # a SYNC timeout: sendDefaultImpl's updateFaultItem(broker, latency, true, !startDetectorEnable)
    strategy.record_outcome(Site.SEND_DEFAULT_IMPL, Catch.REMOTING, "broker-a", 3001, 9_001)
    item = strategy.table.get("broker-a")
    assert item is not None and not item.reachable
    for t in range(9_001, 30_000, 1_000):
        strategy.advance_to(t)
        assert not item.reachable, t  # every probe during the hang times out
    strategy.advance_to(33_000)  # the first detector round after the hang
    assert item.reachable


@pytest.mark.parametrize(("client", "isolation_ms"), [("4.9.8", 600_000), ("5.3.3", 10_000)])
def test_single_message_oversize_properties_fails_at_the_broker(client: str, isolation_ms: int) -> None:
    # Upstream: Validators.checkMessage (4.9.8, 5.3.3) has no properties check; the broker refuses them
    # (4.9.8 DefaultMessageStore.checkMessage / CommitLog encoder, 5.3.3 MessageExtEncoder.encode) and
    # SendMessageProcessor.handlePutMessageResult answers MESSAGE_ILLEGAL (13) with its remark;
    # processSendResponse throws MQBrokerException(13, remark, addr); sendDefaultImpl's catch
    # (MQBrokerException) updates the fault item with isolation (4.9: 600 s; 5.x: 10 s, unreachable) and,
    # 13 not being a retry code, throws it: one attempt. Nothing is stored.
    sc, messages = _one_producer(
        {
            "producers": {"count": 1, "client_version": client, "send_latency_fault_enable": True},
            "workload": {"messages": 1, "invalid": {"oversize_properties": 1.0}},
        }
    )
    assert messages.column("properties_size")[0].as_py() > 32767
    out = _same(sc, messages)
    (att,) = out.attempts.to_pylist()
    res = out.results.to_pylist()[0]
    assert att["outcome"] == "broker:13" and att["response_code"] == 13
    assert res["status"] == "FAILED" and res["attempts"] == 1
    assert res["error"] == (
        "MQBrokerException: CODE: 13  DESC: the message is illegal, maybe msg body or properties length not "
        f"matched. msg body length limit 4194304B, msg properties length limit 32KB. BROKER: {att['broker']}"
        f"\nFor more information, please visit the url, {sc.producers.version.faq_url}"
    )
    assert att["fault_isolated_until_ms"] == res["end_ts_ms"] + isolation_ms
    assert store.log_records(messages, out.attempts, out.results, sc).num_rows == 0
    # ONEWAY: the caller sees nothing, and nothing is stored
    sc1, m1 = _one_producer(
        {
            "producers": {"count": 1, "client_version": client, "send_mode": {"oneway": 1.0}},
            "workload": {"messages": 1, "invalid": {"oversize_properties": 1.0}},
        }
    )
    out1 = _same(sc1, m1)
    assert out1.results.column("status").to_pylist() == ["ONEWAY_SENT"]
    assert store.log_records(m1, out1.attempts, out1.results, sc1).num_rows == 0


@pytest.mark.parametrize("model", ["pool", "partitioned"])
def test_pool_sender_threads_route_around_a_blocked_thread(model: str) -> None:
    # Upstream has no sender pool: DefaultMQProducer.send runs sendDefaultImpl in the caller's thread, which
    # a SYNC send blocks for its whole retry loop. An application feeding a ThreadPoolExecutor ("pool")
    # hands the next message to an idle worker; one that splits messages over threads by seq
    # ("partitioned") queues message 2 behind the hung message 0. Two threads; the broker hangs only for
    # message 0 (born at 10 ms: a 3 s timeout, the whole budget), messages 1-3 are born at 20, 30, 40 ms.
    sc, messages = _one_producer(
        {
            "cluster": {"brokers": ["broker-a"]},
            "producers": {"count": 1, "threads": 2, "sender_model": model},
            "workload": {"messages": 4, "rate_per_s": 100.0, "arrival": "uniform"},
            "brokers": {"default": {"latency": {"median_ms": 2.0, "sigma": 0.0, "spike_probability": 0.0}}},
            "faults": [{"broker": "broker-a", "kind": "hang", "start_s": 0, "end_s": 0.015}],
        }
    )
    res = _same(sc, messages).results.to_pandas().set_index("seq")
    assert res.born_ts_ms.tolist() == [10, 20, 30, 40]
    assert res.loc[0, "end_ts_ms"] == 3011 and res.loc[0, "sender_thread"] == 0
    if model == "pool":
        assert res.loc[[1, 2, 3], "sender_thread"].tolist() == [1, 1, 1]
        assert res.loc[[1, 2, 3], "queue_wait_ms"].tolist() == [0, 0, 0]
        assert res.end_ts_ms.loc[[1, 2, 3]].max() <= 42
    else:
        assert res.sender_thread.tolist() == [0, 1, 0, 1]
        assert res.loc[2, "send_ts_ms"] == 3011  # behind message 0 on thread 0


def test_client_pools_hand_out_threads_like_a_thread_pool_executor() -> None:
    # ThreadPoolExecutor.execute starts a new worker per task while workerCount < corePoolSize, then idle
    # workers take tasks from the LinkedBlockingQueue in the order they started waiting: with short tasks
    # the threads take turns (NettyClientPublicExecutor_1, _2, _1, ... in every 4.9.8 trace); a task that
    # finds every thread busy waits for the first one to become free.
    pool = reference.ClientPool(["T1", "T2"])
    assert pool.take(("a", None)) == 0 and pool.release(0, 5) is None  # type: ignore[arg-type]
    assert pool.take(("b", None)) == 1  # type: ignore[arg-type]  # T2 never ran: it goes first
    assert pool.release(1, 6) is None
    assert [pool.take(("c", None)), pool.take(("d", None))] == [0, 1]  # type: ignore[arg-type]
    assert pool.take(("e", None)) is None  # type: ignore[arg-type]  # both busy: it waits
    assert pool.release(1, 9) == ("e", None)  # the first thread free takes the waiting task


@pytest.mark.parametrize("executors", [1, 2])
def test_async_executor_thread_held_by_a_synchronous_connect(executors: int) -> None:
    # 4.9.8 NettyRemotingClient.invokeAsync -> getAndCreateChannel connects in the calling thread (up to
    # connectTimeoutMillis, 3000 ms, for a host that never answers) and throws RemotingConnectException;
    # MQClientAPIImpl.sendMessageAsync's catch retries at once on the same thread (onExceptionImpl). The
    # async sender executor's thread is held meanwhile: with one thread, the next send waits, and the
    # runnable of DefaultMQProducerImpl.send(msg, callback, timeout) finds `timeout > costTime` false:
    # onException(RemotingTooMuchRequestException("DEFAULT ASYNC send call timeout")).
    sc, messages = _one_producer(
        {
            "cluster": {"brokers": ["broker-a"]},
            "producers": {"count": 1, "send_mode": {"async": 1.0}, "async_sender_threads": executors},
            "workload": {"messages": 2, "rate_per_s": 100.0, "arrival": "uniform"},  # born 10, 20 ms
            "faults": [{"broker": "broker-a", "kind": "partition", "start_s": 0, "end_s": 10}],
        }
    )
    out = _same(sc, messages)
    res = out.results.to_pandas().set_index("seq")
    assert res.loc[0, "end_ts_ms"] == 6010  # two 3 s connects, then no budget: refused at once
    refused = "RemotingTooMuchRequestException: invokeAsync call the addr[broker-a] timeout"
    assert res.loc[0, "error"] == refused
    if executors == 1:
        assert res.loc[1, "error"] == "RemotingTooMuchRequestException: DEFAULT ASYNC send call timeout"
        assert res.loc[1, "end_ts_ms"] == 6010 and res.loc[1, "attempts"] == 0
    else:
        assert res.loc[1, "end_ts_ms"] == 6020 and res.loc[1, "attempts"] == 3


def test_late_async_answer_is_a_success_and_sync_one_a_timeout() -> None:
    # A broker slowed to ~3.6 s answers after the 3000 ms timeout: SYNC callers have given up
    # (NettyRemotingAbstract.invokeSyncImpl removes the future: remoting:timeout, retried), ASYNC requests
    # are still in the response table until the scan (begin + timeout + 1000), so processResponseCommand
    # runs their success callback (ok, latency over 3000, one attempt).
    by_mode = {}
    for mode in ("sync", "async"):
        sc, messages = _one_producer(
            {
                "cluster": {"brokers": ["broker-a"]},
                "producers": {"count": 1, "send_mode": {mode: 1.0}},
                "workload": {"messages": 20, "rate_per_s": 2.0, "arrival": "uniform"},
                "brokers": {
                    "default": {"latency": {"median_ms": 3600.0, "sigma": 0.01, "spike_probability": 0.0}}
                },
            }
        )
        by_mode[mode] = _same(sc, messages).attempts.to_pandas()
    sync, asyn = by_mode["sync"], by_mode["async"]
    assert (sync.outcome == "remoting:timeout").all() and (sync.latency_ms == 3001).all()
    assert (asyn.outcome == "ok").all() and (asyn.latency_ms > 3000).all() and (asyn.attempt == 0).all()
