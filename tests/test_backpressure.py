"""Async backpressure (5.x ``enableBackpressureForAsyncMode``): the fair semaphores of
:mod:`rocketsim.client.backpressure` and what they do to a producer's async sends.

Upstream: client/src/main/java/org/apache/rocketmq/client/impl/producer/DefaultMQProducerImpl.java at
rocketmq-all-5.2.0..5.3.3 (``start``, ``executeAsyncMessageSend``, ``BackpressureSendCallBack``;
clients.md A.3.11, BP-3/BP-4). Both engines model it (the readable ``client.backpressure.PermitGate``, the
compiled ``permit_*`` twin): every engine test runs on each, and they give the same tables.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketsim.client.backpressure import NUM_TIMEOUT, SIZE_TIMEOUT, FairSemaphore
from rocketsim.engine import COMPILED, ENGINE_VARIABLE, REFERENCE, compiled, reference, simulate_producer
from rocketsim.engine.plan import SimOutput
from rocketsim.scenario import ScenarioError, scenario_from_mapping, workload

# ---- the fair semaphore -------------------------------------------------------------------------------


def test_a_fair_semaphore_serves_first_come_first_served() -> None:
    # new Semaphore(n, true): tryAcquire(permits, timeout) queues behind earlier waiters even when the
    # permits it wants are free; a head that needs more than is free keeps the later ones waiting
    sem = FairSemaphore(10)
    assert sem.try_acquire(1, 8, 0, 100) is True
    assert sem.try_acquire(2, 5, 0, 100) is None  # 2 free: waits
    assert sem.try_acquire(3, 1, 0, 100) is None  # 2 free, but 2 waits before it
    assert sem.release(8, 5) == [2, 3]  # in their order
    assert sem.available == 4


def test_a_waiter_is_refused_at_its_deadline() -> None:
    # tryAcquire(timeout) returns false once the timeout passed; executeAsyncMessageSend checks
    # timeout - costTime > 0 first: no time left is refused at once
    sem = FairSemaphore(1)
    assert sem.try_acquire(1, 1, 0, 100) is True
    assert sem.try_acquire(2, 1, 0, 50) is None
    assert sem.expire(2) is True
    assert sem.release(1, 60) == []
    assert sem.try_acquire(3, 2, 70, 70) is False


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 30)), min_size=1, max_size=40))
def test_a_fair_semaphore_never_grants_more_than_it_has(requests) -> None:
    sem = FairSemaphore(8)
    held: dict[int, int] = {}
    for key, (n, hold) in enumerate(requests):
        now = key + 1
        if sem.try_acquire(key, n, now, now + hold):
            held[key] = n
        if held and hold % 3 == 0:  # some sends end
            k = min(held)
            for g in sem.release(held.pop(k), now):
                held[g] = requests[g][0]
        assert sum(held.values()) + sem.available == 8 and sem.available >= 0


# ---- the engines --------------------------------------------------------------------------------------

HANG = {"broker": "broker-a", "kind": "hang", "start_s": 0.02, "end_s": 5.0}


@pytest.fixture(params=[REFERENCE, COMPILED])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test on each engine (the engine choice reads ROCKETSIM_ENGINE)."""
    monkeypatch.setenv(ENGINE_VARIABLE, request.param)
    return request.param


def scenario(**producers):
    return scenario_from_mapping(
        {
            "seed": 5,
            "producers": {
                "client_version": "5.3.3",
                "count": 1,
                "threads": 4,
                "send_mode": {"async": 1.0},
                "enable_backpressure_for_async_mode": True,
                **producers,
            },
            "workload": {
                "messages": 1200,
                "rate_per_s": 20000,
                "body_size": {"distribution": "uniform", "min": 100, "max": 200_000},
            },
            "faults": [HANG],
        }
    )


def in_flight_peak(r: pd.DataFrame, weight: np.ndarray) -> int:
    """The most ``weight`` held at once by sends between their first attempt and their end."""
    sent = r.attempts > 0
    start = r.first_attempt_ms[sent].to_numpy()
    end = r.end_ts_ms[sent].to_numpy()
    w = weight[sent.to_numpy()]
    times = np.concatenate([start, end])
    deltas = np.concatenate([w, -w])
    order = np.lexsort((deltas, times))  # at one ms, releases before grants
    return int(np.cumsum(deltas[order]).max())


def with_first_attempts(sc) -> pd.DataFrame:
    out = simulate_producer(workload.generate(sc), sc)
    r = out.results.to_pandas()
    first = out.attempts.to_pandas().groupby("seq").start_ts_ms.min()
    r["first_attempt_ms"] = r.seq.map(first).fillna(-1).astype(np.int64)
    return r


def test_sends_in_flight_never_exceed_the_count_permits(engine: str) -> None:
    # semaphoreAsyncSendNum.tryAcquire before executor.submit, released by
    # BackpressureSendCallBack.semaphoreProcessor when the callback runs: at most num sends in flight
    sc = scenario(back_pressure_for_async_send_num=10)
    r = with_first_attempts(sc)
    assert in_flight_peak(r, np.ones(len(r), np.int64)) == 10
    refused = r[r.error.fillna("").str.endswith(NUM_TIMEOUT)]
    assert len(refused) > 0
    assert (refused.attempts == 0).all() and (refused.status == "FAILED").all()
    # refused when its wait reached beginStartTime + sendMsgTimeout
    assert (refused.end_ts_ms - refused.send_ts_ms == 3000).all()
    assert r.error.fillna("").str.startswith("RemotingTooMuchRequestException: send message").sum() == len(
        refused
    )


def test_bytes_in_flight_never_exceed_the_size_permits(engine: str) -> None:
    # semaphoreAsyncSendSize.tryAcquire(msgLen, ...): msgLen is the body's length
    # (the count's 10000 permits never bind here: the bytes do)
    sc = scenario(back_pressure_for_async_send_size=1024 * 1024)
    body = workload.generate(sc).to_pandas().set_index("seq").body_size
    on = with_first_attempts(sc)
    off = with_first_attempts(scenario(enable_backpressure_for_async_mode=False))
    assert 900_000 < in_flight_peak(on, on.seq.map(body).to_numpy(np.int64)) <= 1024 * 1024
    assert in_flight_peak(off, off.seq.map(body).to_numpy(np.int64)) > 4 * 1024 * 1024
    assert not on.error.fillna("").str.endswith(NUM_TIMEOUT).any()


def test_a_body_larger_than_the_size_permits_waits_out_its_timeout(engine: str) -> None:
    # tryAcquire(msgLen) of more permits than the semaphore has can only time out; being first in a fair
    # queue, it keeps every later send waiting until then
    sc = scenario_from_mapping(
        {
            "seed": 5,
            "producers": {
                "client_version": "5.3.3",
                "count": 1,
                "send_mode": {"async": 1.0},
                "enable_backpressure_for_async_mode": True,
                "back_pressure_for_async_send_size": 1024 * 1024,
                "max_message_size": 4 * 1024 * 1024,
            },
            "workload": {
                "messages": 50,
                "rate_per_s": 1000,
                "body_size": {"distribution": "uniform", "min": 100, "max": 1_500_000},
            },
        }
    )
    r = with_first_attempts(sc)
    body = workload.generate(sc).to_pandas().body_size.to_numpy()
    too_big = body > 1024 * 1024
    assert too_big.any()
    assert r.error[too_big].str.endswith(SIZE_TIMEOUT).all()


def test_without_backpressure_the_same_sends_are_not_held(engine: str) -> None:
    on = with_first_attempts(scenario(back_pressure_for_async_send_num=10))
    off = with_first_attempts(scenario(enable_backpressure_for_async_mode=False))
    assert in_flight_peak(off, np.ones(len(off), np.int64)) > 10
    assert on.queue_wait_ms.max() > off.queue_wait_ms.max()  # the callers' threads waited for permits


def same_tables(a: SimOutput, b: SimOutput) -> bool:
    return a.attempts.equals(b.attempts) and a.results.equals(b.results)


@pytest.mark.parametrize(
    "settings",
    [
        {"back_pressure_for_async_send_num": 10},  # the count binds
        {"back_pressure_for_async_send_size": 1024 * 1024},  # the bytes bind
        {"back_pressure_for_async_send_num": 10, "sender_model": "partitioned", "send_msg_timeout_ms": 700},
    ],
)
def test_both_engines_give_the_same_tables(settings: dict) -> None:
    sc = scenario(**settings)
    messages = workload.generate(sc)
    assert compiled.supports(sc, messages)
    ref = reference.simulate_producer(messages, sc)
    assert ref.results.to_pandas().error.fillna("").str.contains("tryAcquire semaphoreAsync").any()
    assert same_tables(ref, compiled.simulate_producer(messages, sc))


def test_both_engines_agree_with_ordered_and_sync_sends_and_a_chunked_run() -> None:
    # ordered async sends take permits too (send(msg, selector, arg, callback) -> executeAsyncMessageSend);
    # sync and oneway sends none; the streamed run moves waiting sends when its ring grows
    sc = scenario_from_mapping(
        {
            "seed": 3,
            "producers": {
                "client_version": "5.2.0",
                "count": 1,
                "threads": 6,
                "send_mode": {"async": 0.8, "sync": 0.1, "oneway": 0.1},
                "enable_backpressure_for_async_mode": True,
                "back_pressure_for_async_send_num": 40,
                "send_msg_timeout_ms": 800,
            },
            "faults": [{"broker": "broker-a", "kind": "hang", "start_s": 0.2, "end_s": 1.5}],
            "workload": {
                "messages": 4000,
                "rate_per_s": 5000,
                "message_types": {"normal": 0.8, "ordered": 0.2},
                "body_size": {"distribution": "uniform", "min": 100, "max": 100_000},
            },
        }
    )
    messages = workload.generate(sc)
    ref = reference.simulate_producer(messages, sc)
    assert ref.results.to_pandas().error.fillna("").str.endswith(NUM_TIMEOUT).sum() > 5
    assert same_tables(ref, compiled.simulate_producer(messages, sc))
    parts = [messages.slice(k, 150) for k in range(0, messages.num_rows, 150)]
    chunks = list(compiled.simulate_chunks(parts, sc))
    streamed = SimOutput(
        pa.concat_tables([c.attempts for c in chunks]), pa.concat_tables([c.results for c in chunks])
    )
    assert same_tables(ref, streamed)


def test_settings_it_cannot_run_are_refused() -> None:
    with pytest.raises(ScenarioError, match="producers.async_sender_queue must be at least"):
        scenario(back_pressure_for_async_send_num=100, async_sender_queue=50)
