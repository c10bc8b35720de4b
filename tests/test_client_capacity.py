"""The client's own capacity (docs/validation.md): the async sender executor's bounded queue, the CPU a send
costs the client on the host's processors, a host shared with a broker, a paused broker, and the
microseconds of a send's latency.

Upstream, rocketmq-all-4.9.8 and rocketmq-all-5.3.3 alike
(client/src/main/java/org/apache/rocketmq/client/impl/producer/DefaultMQProducerImpl.java): the constructor
builds ``defaultAsyncSenderExecutor = new ThreadPoolExecutor(availableProcessors(), availableProcessors(),
60 s, asyncSenderThreadPoolQueue = new LinkedBlockingQueue<Runnable>(50000))``, and ``send(msg, callback,
timeout)`` does ``executor.submit(...)`` and turns its ``RejectedExecutionException`` into ``throw new
MQClientException("executor rejected ", e)``: the caller gets it, no request is made.
(remoting/.../netty/NettyClientConfig.java: ``clientCallbackExecutorThreads = availableProcessors()``.)
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from rocketsim.client.host import HostCores
from rocketsim.engine import compiled, reference, simulate
from rocketsim.scenario import Scenario, ScenarioError, scenario_from_mapping
from rocketsim.scenario.workload import generate

# common/src/main/java/org/apache/rocketmq/common/help/FAQUrl.java, attachDefaultURL: the text, then
# "\nFor more information, please visit the url, " + DEFAULT_FAQ_URL (4.9.8: http://rocketmq.apache.org/docs/
# faq/; 5.3.3: https://rocketmq.apache.org/docs/bestPractice/06FAQ)
FAQ = "\nFor more information, please visit the url, "
FAQ_SUFFIX = FAQ + "http://rocketmq.apache.org/docs/faq/"
FAQ_SUFFIX_BY_VERSION = {
    "4.9.8": FAQ_SUFFIX,
    "5.3.3": FAQ + "https://rocketmq.apache.org/docs/bestPractice/06FAQ",
}
QUIET = {"median_ms": 0.3, "sigma": 0.1, "spike_probability": 0.0}


def scenario(producers: dict[str, Any], steps: list[list[float]], **extra: Any) -> Scenario:
    raw: dict[str, Any] = {
        "name": "capacity",
        "seed": 3,
        "cluster": {"brokers": ["broker-a"]},
        "producers": {"count": 1, **producers},
        "workload": {"rate_steps": steps, "arrival": "uniform", "tags": [], "keys": False},
        "brokers": {"default": {"latency": extra.pop("latency", QUIET), "errors": {}}},
        **extra,
    }
    return scenario_from_mapping(raw)


def errors(results: Any) -> Counter:
    return Counter(e for e in results["error"].to_pylist() if e)


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_a_full_async_sender_queue_refuses_the_send_at_once(version: str) -> None:
    # 1,000 sends in one ms to 1 executor thread: the first's request takes the only async permit (a
    # slow broker), the second holds the thread waiting for it (semaphoreAsync.tryAcquire), 10 wait in
    # the queue, every other is refused by executor.submit
    sc = scenario(
        {
            "client_version": version,
            "send_mode": {"async": 1},
            "async_sender_threads": 1,
            "async_semaphore_permits": 1,
            "async_sender_queue": 10,
        },
        [[1_000_000.0, 0.001]],
        latency={"median_ms": 50.0, "sigma": 0.0, "spike_probability": 0.0},
    )
    m = generate(sc)
    ref, fast = reference.simulate_producer(m, sc), compiled.simulate_producer(m, sc)
    for out in (ref, fast):
        seen = errors(out.results)
        rejected_text = "MQClientException: executor rejected " + FAQ_SUFFIX_BY_VERSION[version]
        assert seen == Counter({rejected_text: 1000 - 12})
        rejected = np.asarray(out.results["error"].is_valid())
        # nothing was sent for a refused send: no attempt row, no time taken
        assert set(out.attempts["seq"].to_pylist()).isdisjoint(np.flatnonzero(rejected).tolist())
        assert (np.asarray(out.results["latency_ms"])[rejected] == 0).all()
    assert ref.results.equals(fast.results) and ref.attempts.equals(fast.attempts)


# 4.3.x: upstream rocketmq-all-4.3.0 .. 4.3.2 DefaultMQProducerImpl.send(Message, SendCallback, long)
# submits to getCallbackExecutor() (= NettyRemotingClient.getCallbackExecutor: publicExecutor,
# Executors.newFixedThreadPool(publicThreadNums = clientCallbackExecutorThreads), an unbounded
# LinkedBlockingQueue; NettyRemotingAbstract.executeInvokeCallback runs the callbacks on it too);
# rocketmq-all-4.4.0 is the first tag with getAsyncSenderExecutor() and its LinkedBlockingQueue(50000).
REJECTED_4 = "MQClientException: executor rejected " + FAQ_SUFFIX
CALL_TIMEOUT = "RemotingTooMuchRequestException: DEFAULT ASYNC send call timeout"


def _held_threads(version: str, **producers: Any) -> Scenario:
    """1,000 ASYNC sends in one ms to a partitioned broker: each holds the thread that runs it for the
    20 ms connect timeout (4.3-4.8 getAndCreateChannel throws in that thread: "Send [1] times")."""
    return scenario(
        {"client_version": version, "send_mode": {"async": 1}, "connect_timeout_ms": 20, **producers},
        [[1_000_000.0, 0.001]],
        faults=[{"broker": "broker-a", "kind": "partition", "start_s": 0, "end_s": 10}],
    )


def test_a_4_3_client_past_its_capacity_queues_its_sends_instead_of_rejecting_them() -> None:
    # one callback thread runs every send in turn: none is rejected, each waits 20 ms longer than the one
    # before it for the thread, and those still queued when their 3 s budget is spent fail as they start
    # (the runnable's timeout > costTime check)
    sc = _held_threads("4.3.2", callback_executor_threads=1)
    m = generate(sc)
    ref, fast = reference.simulate_producer(m, sc), compiled.simulate_producer(m, sc)
    assert ref.results.equals(fast.results) and ref.attempts.equals(fast.attempts)
    seen = errors(ref.results)
    assert REJECTED_4 not in seen
    assert seen[CALL_TIMEOUT] == 850 and sum(seen.values()) == 1000
    attempts = ref.attempts.sort_by("seq")
    assert attempts["seq"].to_pylist() == list(range(150))  # the sends a thread took within their budget
    born = dict(zip(ref.results["seq"].to_pylist(), ref.results["send_ts_ms"].to_pylist(), strict=True))
    delay = [
        start - born[seq]
        for seq, start in zip(attempts["seq"].to_pylist(), attempts["start_ts_ms"].to_pylist(), strict=True)
    ]
    assert delay == [20 * k for k in range(150)]  # the publish delay grows with the backlog


def test_a_4_5_client_past_its_capacity_rejects_what_its_sender_queue_cannot_hold() -> None:
    # the same sends to 4.5.2's async sender executor of 1 thread and a queue of 10: 1 runs, 10 wait, 989
    # are refused at once by executor.submit ("executor rejected ")
    sc = _held_threads("4.5.2", async_sender_threads=1, async_sender_queue=10)
    m = generate(sc)
    ref, fast = reference.simulate_producer(m, sc), compiled.simulate_producer(m, sc)
    assert ref.results.equals(fast.results) and ref.attempts.equals(fast.attempts)
    assert errors(ref.results)[REJECTED_4] == 989 and ref.attempts.num_rows == 11


def _cpu_overload(version: str, **producers: Any) -> Any:
    """100,000 ASYNC sends/s for 0.2 s on 2 processors at 50 us a send: the client does 40 a ms (the
    readable engine: the compiled one has no host model)."""
    producers = {"client_version": version, "send_mode": {"async": 1}, "processors": 2, **producers}
    sc = scenario({**producers, "send_cpu_us": 50.0}, [[100_000.0, 0.2]])
    return simulate(generate(sc), sc)


def test_a_4_3_client_overloaded_on_its_cpu_has_a_backlog_where_4_5_rejects() -> None:
    # 4.5.2's executor queue of 2,000 fills and refuses the rest; 4.3.2 queues all 20,000 on its callback
    # executor and runs them 40 a ms: the last starts ~300 ms after its send(), and the callbacks wait
    # behind the sends queued before them on the same 2 threads (FIFO), so they end later still
    rejected = _cpu_overload("4.5.2", async_sender_queue=2000).results
    assert (np.asarray(rejected["status"]) != "SEND_OK").sum() == pytest.approx(
        20_000 - 2000 - 40 * 200, abs=60
    )
    assert set(errors(rejected)) == {REJECTED_4}
    assert np.asarray(rejected["latency_ms"]).max() <= 52
    out = _cpu_overload("4.3.2")
    r = out.results.sort_by("seq")
    assert errors(r) == Counter() and out.attempts.num_rows == 20_000
    started = np.asarray(out.attempts.sort_by("seq")["start_ts_ms"])
    delay = started - np.asarray(r["send_ts_ms"])  # the publish delay: send() to the request
    assert 295 <= delay.max() <= 305 and delay[-100:].min() >= 290  # the backlog grew to the end
    assert np.asarray(r["latency_ms"]).max() >= delay.max() + 100  # a callback waits behind the sends


@pytest.mark.parametrize(("key", "value"), [("async_sender_threads", 2), ("async_sender_queue", 100)])
def test_the_async_sender_executors_settings_are_refused_on_4_3(key: str, value: int) -> None:
    # a 4.3.x client has no async sender executor (DefaultMQProducerImpl.send: getCallbackExecutor())
    with pytest.raises(ScenarioError) as info:
        _held_threads("4.3.2", **{key: value})
    assert str(info.value) == (
        f"producers.{key} must be unset with client_version 4.3.2 (its ASYNC sends run on the callback "
        f"executor: callback_executor_threads threads, an unbounded queue), got {value}"
    )
    assert _held_threads("4.5.2", **{key: value}).producers.version.async_sends_on_callback_executor is False


def test_the_clients_cpu_per_send_caps_a_producers_rate_at_its_processors() -> None:
    # 2 processors at 50 us a send: at most 40,000 sends/s; 100,000/s offered for 0.2 s to a queue of
    # 2,000: the executor completes 40,000/s, the queue fills, the rest is refused
    sc = scenario(
        {"send_mode": {"async": 1}, "processors": 2, "send_cpu_us": 50.0, "async_sender_queue": 2000},
        [[100_000.0, 0.2]],
    )
    out = reference.simulate_producer(generate(sc), sc)
    r = out.results
    ok = np.asarray(r["status"]) == "SEND_OK"
    begin, kernel = np.asarray(r["send_ts_ms"]), np.asarray(out.attempts["start_ts_ms"])
    assert kernel.max() - begin.min() == pytest.approx(ok.sum() / 40.0, abs=2)  # 40 sends a ms
    assert (~ok).sum() == pytest.approx(20_000 - 2000 - 40 * 200, abs=60)
    assert set(errors(r)) == {"MQClientException: executor rejected " + FAQ_SUFFIX}
    # the last sends waited in the queue: 2,000 ahead of them at 40 a ms
    waited = np.asarray(r["latency_ms"])[ok]
    assert 49 <= waited.max() <= 52
    # a readable engine's own host model: the compiled engine hands such a producer over
    assert compiled.unsupported(sc, generate(sc)) is not None


def test_sync_senders_share_the_processors_too() -> None:
    # 16 sender threads on 2 processors at 100 us a send: 20,000 sends/s at most, whatever the threads
    sc = scenario(
        {"send_mode": {"sync": 1}, "threads": 16, "processors": 2, "send_cpu_us": 100.0},
        [[40_000.0, 0.1]],
    )
    r = reference.simulate_producer(generate(sc), sc).results
    end = np.asarray(r["end_ts_ms"])
    assert end.max() == pytest.approx(4000 / 20.0, abs=3)  # 4,000 sends at 20 a ms
    assert np.asarray(r["queue_wait_ms"]).max() >= 90  # the sender threads' backlog


def test_host_cores_place_work_in_the_first_room_from_when_it_is_ready() -> None:
    h = HostCores(1)
    assert h.run(10_000, 5) == 10_005  # decided early, for later: it does not block earlier work
    assert h.run(0, 3) == 3 and h.run(0, 3) == 6
    assert h.run(9998, 4) == 10_009  # no room before 10,000: after the busy interval
    two = HostCores(2)
    assert [two.run(0, 10) for _ in range(3)] == [10, 10, 20]  # two at once, the third waits
    two.advance(15)  # nothing is ready before 15 any more: what ended by then is forgotten
    assert two.run(15, 1) == 16 and two.run(15, 5) == 21  # the free core, then the first with room


def test_a_paused_broker_takes_requests_when_it_continues() -> None:
    # kill -STOP from 1 s to 5 s: a SYNC send at 1.000 s waits its 3 s timeout (plus the 1 ms the model
    # adds to a timeout) and is stored when the broker continues; one at 3.000 s is answered then (2 s late)
    for coupling in ("open", "joint"):
        sc = scenario(
            {"send_mode": {"sync": 1}, "threads": 8},
            [[1.0, 6.0]],
            faults=[{"broker": "broker-a", "kind": "paused", "start_s": 1.0, "end_s": 5.0}],
            brokers={"coupling": coupling, "default": {"latency": QUIET, "errors": {}}},
        )
        out = simulate(generate(sc), sc)
        rows = {r["born_ts_ms"]: r for r in out.results.to_pylist()}
        atts = {r["seq"]: r for r in out.attempts.to_pylist()}
        assert rows[1000]["status"] == "FAILED" and rows[1000]["latency_ms"] == 3001
        assert atts[1]["stored"] and atts[1]["stored_ts_ms"] == 5000
        assert rows[3000]["status"] == "SEND_OK" and rows[3000]["latency_ms"] == 2000
        assert rows[0]["latency_ms"] == 0 and rows[5000]["latency_ms"] == 0  # before and after: as ever


def test_latency_us_keeps_the_answers_own_microseconds() -> None:
    sc = scenario({"send_mode": {"sync": 1}}, [[100.0, 1.0]])
    ref = reference.simulate_producer(generate(sc), sc)
    us = np.asarray(ref.results["latency_us"])
    ms = np.asarray(ref.results["latency_ms"])
    assert np.all(np.abs(us - ms * 1000) <= 500)  # whole ms are the microseconds rounded
    assert 250 < np.median(us) < 350  # the 0.3 ms median the broker model draws, not 0
    fast = compiled.simulate_producer(generate(sc), sc)
    assert np.array_equal(us, np.asarray(fast.results["latency_us"]))
