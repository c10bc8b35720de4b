"""The client's CPU per failed ASYNC attempt (``producers.async_failure_cpu_us`` and
``async_failure_log_cpu_us``): ``MQClientAPIImpl.onExceptionImpl`` on the thread that runs it, a retry's WARN
line on the client logger's one thread, which drops lines while 1,024 wait."""

from __future__ import annotations

from typing import Any

import pyarrow.compute as pc

from rocketsim.client.connection import LOG_QUEUE, FailureCpu
from rocketsim.client.host import LOGGER, HostCores
from rocketsim.client.versions import parse_version
from rocketsim.engine import compiled, reference, simulate_producer
from rocketsim.engine.plan import SimOutput
from rocketsim.scenario import Scenario, scenario_from_mapping, workload


def hung_async(**producers: Any) -> tuple[Scenario, SimOutput]:
    """ASYNC sends at 200/s to one broker that hangs 1-3 s (its requests time out in the response-table
    scan, and their retries, sent with no time left, fail at once), with more ``producers`` settings."""
    raw = {
        "name": "async-failures",
        "seed": 3,
        "cluster": {"brokers": ["broker-a"], "write_queues": 4, "read_queues": 4},
        "producers": {
            "count": 1,
            "client_version": "4.9.8",
            "send_mode": {"async": 1.0},
            "send_msg_timeout_ms": 500,
            "processors": 2,
            **producers,
        },
        "workload": {"messages": 1000, "rate_per_s": 200.0},
        "brokers": {"default": {"latency": {"median_ms": 1.0, "sigma": 0.3}}},
        "faults": [{"broker": "broker-a", "kind": "hang", "start_s": 1.0, "end_s": 3.0}],
    }
    sc = scenario_from_mapping(raw)
    return sc, simulate_producer(workload.generate(sc), sc)


def test_on_exception_impl_holds_the_thread_that_runs_it() -> None:
    # rocketmq-all-4.9.8 MQClientAPIImpl.sendMessageAsync: a request with no answer in time is failed by
    # NettyRemotingAbstract.scanResponseTable; its InvokeCallback (on the callback executor) makes
    # MQClientException("wait response timeout ...") and calls onExceptionImpl, which retries on that
    # thread: selectOneMessageQueue, log.warn("async send msg by retry {} times. ...", ..., e), then
    # sendMessageAsync, whose invokeAsync throws RemotingTooMuchRequestException ("invokeAsync call the
    # addr[...] timeout": no time left) into its own catch -> onExceptionImpl again; the last calls the
    # application's onException. Each of those runs on the thread before its next task.
    _, free = hung_async()
    sc, charged = hung_async(async_failure_cpu_us=3000.0, async_failure_log_cpu_us=50.0)
    a0, a = free.attempts.to_pandas(), charged.attempts.to_pandas()
    retries0, retries = a0[a0.attempt > 0], a[a.attempt > 0]
    assert len(retries0) > 100 and len(retries) == len(retries0)  # the same retries ...
    assert (retries.start_ts_ms.to_numpy() >= retries0.start_ts_ms.to_numpy()).all()
    assert (retries.start_ts_ms.to_numpy() > retries0.start_ts_ms.to_numpy()).any()  # ... some later
    r0, r = free.results.to_pandas(), charged.results.to_pandas()
    failed0, failed = r0[r0.status == "FAILED"], r[r.status == "FAILED"]
    assert len(failed) == len(failed0) > 100
    assert (failed.end_ts_ms.to_numpy() > failed0.end_ts_ms.to_numpy()).any()  # onException later
    # the OK sends before the hang are untouched
    assert r[r.seq < 150].equals(r0[r0.seq < 150])
    # the host model is the readable engine's: the compiled engine hands such a producer to it
    messages = workload.generate(sc)
    assert not compiled.supports(sc, messages)
    out = reference.simulate_producer(messages, sc)
    assert out.attempts.equals(charged.attempts) and out.results.equals(charged.results)


def test_no_failed_async_attempt_no_change() -> None:
    # the keys cost only failed ASYNC attempts: with the broker healthy every table is the same
    sc0 = hung_async()[0]
    raw_free = scenario_from_mapping({**_healthy(sc0), "producers": _producers()})
    raw_charged = scenario_from_mapping(
        {**_healthy(sc0), "producers": _producers(async_failure_cpu_us=3000.0, async_failure_log_cpu_us=50.0)}
    )
    free = simulate_producer(workload.generate(raw_free), raw_free)
    charged = simulate_producer(workload.generate(raw_charged), raw_charged)
    assert pc.all(pc.equal(free.results.column("status"), "SEND_OK")).as_py()
    assert free.attempts.equals(charged.attempts) and free.results.equals(charged.results)


def _producers(**more: Any) -> dict[str, Any]:
    return {"count": 1, "client_version": "4.9.8", "send_mode": {"async": 1.0}, "processors": 2, **more}


def _healthy(sc: Scenario) -> dict[str, Any]:
    return {
        "name": "async-healthy",
        "seed": 3,
        "cluster": {"brokers": ["broker-a"], "write_queues": 4, "read_queues": 4},
        "workload": {"messages": 600, "rate_per_s": 200.0},
        "brokers": {"default": {"latency": {"median_ms": 1.0, "sigma": 0.3}}},
    }


def test_the_logger_drops_a_line_while_1024_wait() -> None:
    # rocketmq-all-4.9.8 ClientLogger.createClientAppender: withAsync(false, queueSize), queueSize from
    # rocketmq.client.logAsyncQueueSize (default "1024"); LoggingBuilder.AsyncAppender.append, not
    # blocking: while the buffer holds bufferSize events a new one is discarded (a DiscardSummary)
    host = HostCores(2)
    cpu = FailureCpu(host, 0, 0.0, 0.0, 0.0, 100.0)
    for _ in range(LOG_QUEUE + 500):  # a storm at one instant: 100 us a line on the logger's one thread
        cpu.failed_async(("x", 0), 0.0, logged=True)
    # the lines are written one after another until LOG_QUEUE of them are queued; the rest are dropped
    assert host.free_us[LOGGER] == LOG_QUEUE * 100.0
    cpu.failed_async(("x", 0), 200.0, logged=False)  # onException writes no line
    assert host.free_us[LOGGER] == LOG_QUEUE * 100.0
    cpu.failed_async(("x", 0), 300.0, logged=True)  # three written since: room for one more
    assert host.free_us[LOGGER] == (LOG_QUEUE + 1) * 100.0


def test_a_retry_is_logged_with_its_stack_from_4_9_4() -> None:
    # apache/rocketmq MQClientAPIImpl.onExceptionImpl: log.info("async send msg by retry {} times. ...")
    # without the exception at rocketmq-all-4.9.3, log.warn(..., e) at rocketmq-all-4.9.4 (and 4.9.8,
    # 5.3.3)
    assert not parse_version("4.9.3").async_retry_logs_stack
    assert parse_version("4.9.4").async_retry_logs_stack
    assert parse_version("4.9.8").async_retry_logs_stack
    assert parse_version("5.3.3").async_retry_logs_stack
