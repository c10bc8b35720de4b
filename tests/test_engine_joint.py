"""brokers.coupling = joint: the producers and the closed-loop brokers in one event loop. Load moves
latency: near capacity the queue waits grow, past it BrokerFastFailure's sweeper answers SYSTEM_BUSY
"[TIMEOUT_CLEAN_QUEUE]..." (BrokerFastFailure.cleanExpiredRequestInQueue, 4.9.8 and 5.3.3), which a
4.9.8 client does not retry (DefaultMQProducer.retryResponseCodes has no SYSTEM_BUSY before 5.3.0)."""

from __future__ import annotations

import re
from functools import cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from rocketsim import engine
from rocketsim.scenario import Scenario, scenario_from_mapping, workload
from rocketsim.stage import tables as stage

CAPACITY = 400  # msg/s of the four brokers: 10 ms per ~1 KiB append each


def scenario(rate: float, coupling: str = "joint", **producers: object) -> Scenario:
    return scenario_from_mapping(
        {
            "producers": {"count": 4, "send_mode": {"async": 1.0}, "threads": 32, **producers},
            "cluster": {"brokers": ["a", "b", "c", "d"]},
            "workload": {
                "duration_s": 12,
                "rate_per_s": rate,
                "body_size": {"distribution": "fixed", "median": 950},
            },
            "brokers": {
                "coupling": coupling,
                "default": {"store": {"append_us": 1024 * 10_000 / 1024 / 1.05}},
            },
        }
    )


def messages(sc: Scenario) -> pa.Table:
    return pa.concat_tables([stage.producer_messages(sc, s) for s in workload.producer_shares(sc)])


@cache
def run(rate: float, coupling: str = "joint") -> engine.SimOutput:
    sc = scenario(rate, coupling)
    return engine.simulate(messages(sc), sc)


def p99(out: engine.SimOutput) -> float:
    return float(np.percentile(np.asarray(out.results.column("latency_ms")), 99))


def busy(out: engine.SimOutput) -> int:
    return pc.sum(pc.equal(out.attempts.column("outcome"), "broker:2")).as_py() or 0


def test_half_capacity_queues_a_little_and_rejects_nothing() -> None:
    out, base = run(0.5 * CAPACITY), run(0.5 * CAPACITY, "open")
    assert busy(out) == 0
    assert p99(base) < p99(out) <= p99(base) + 100  # M/D/1 at rho 0.5 with 10 ms appends


def test_past_capacity_the_sweeper_sheds_load_with_upstreams_text() -> None:
    out, base = run(1.2 * CAPACITY), run(1.2 * CAPACITY, "open")
    assert busy(out) > 0.05 * out.attempts.num_rows
    assert p99(out) >= 10 * p99(base)
    errors = out.results.filter(pc.is_valid(out.results.column("error"))).column("error").to_pylist()
    pattern = re.compile(
        r"MQBrokerException: CODE: 2  DESC: \[TIMEOUT_CLEAN_QUEUE\]broker busy, start flow control for a "
        r"while, period in queue: (\d+)ms, size of queue: (\d+) BROKER: [abcd]\n"
    )
    matched = [pattern.match(e) for e in errors]
    assert errors and all(matched)
    # behind >= waitTimeMillsInSendQueue (200) at a 10 ms tick; the first tick runs at 1000 ms
    assert all(int(m[1]) >= 200 and int(m[2]) >= 0 for m in matched if m)
    assert sum(int(m[1]) < 210 for m in matched if m) > 0.99 * len(matched)


def test_same_inputs_same_tables() -> None:
    sc = scenario(1.2 * CAPACITY)
    a, b = engine.simulate(messages(sc), sc), run(1.2 * CAPACITY)
    assert a.attempts.equals(b.attempts) and a.results.equals(b.results)


def test_a_request_the_client_gave_up_on_is_still_stored() -> None:
    # the broker appends what it takes from its queue whether the client still waits or not: a retry of
    # would be a duplicate (docs/design.md §4: a timed-out request may still be stored). SYNC: an ASYNC
    # answer that comes after the timeout still counts until the response-table scan
    sc = scenario(1.2 * CAPACITY, send_msg_timeout_ms=150, send_mode={"sync": 1.0})
    out = engine.simulate(messages(sc), sc)
    a = out.attempts
    late = a.filter(pc.and_(pc.equal(a.column("outcome"), "remoting:timeout"), a.column("stored")))
    assert late.num_rows > 0
    after = pc.subtract(late.column("stored_ts_ms"), late.column("start_ts_ms"))
    assert pc.max(after).as_py() >= 150  # some appended after the client gave up
    failed = out.results.filter(pc.equal(out.results.column("status"), "FAILED"))
    assert failed.num_rows > 0  # the client saw a failure of a message the broker holds


def test_the_compiled_engine_refuses_coupled_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCKETSIM_ENGINE", "compiled")
    sc = scenario(0.5 * CAPACITY)
    with pytest.raises(engine.SimulationError, match="brokers.coupling = joint"):
        engine.simulate_producer(stage.producer_messages(sc, workload.producer_shares(sc)[0]), sc)
