"""The gRPC family in simulated time (rocketsim.engine.grpc): the client rows and the Proxy together over
the broker model's fault timeline. Citations: tests/test_grpc_client.py and tests/test_proxy.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from rocketsim import stage
from rocketsim.broker.proxy import CLUSTER, LOCAL
from rocketsim.client.grpc_versions import parse_grpc_version
from rocketsim.engine.grpc import GrpcConfig, simulate_producer
from rocketsim.scenario import ProxyConfig, Scenario, scenario_from_mapping, workload

JAVA = parse_grpc_version("java-5.2.1")
PYTHON = parse_grpc_version("python-5.1.2")


def scenario(faults: list[dict[str, Any]], messages: int = 2000, rate: float = 100.0, **wl: Any) -> Scenario:
    raw = {
        "seed": 5,
        "cluster": {"brokers": ["broker-a", "broker-b"], "write_queues": 2, "read_queues": 2},
        "producers": {"count": 1, "threads": 2, "client_version": "5.3.3"},
        "workload": {"messages": messages, "rate_per_s": rate, "topics": ["T"], **wl},
        "faults": faults,
    }
    return scenario_from_mapping(raw)


def run(sc: Scenario, client, mode: str = CLUSTER, **cfg: Any):  # noqa: ANN001, ANN201
    messages = stage.producer_messages(sc, workload.producer_shares(sc)[0])
    return simulate_producer(messages, sc, GrpcConfig(client, ProxyConfig(mode=mode), **cfg))


def window(table: pa.Table, column: str, start_ms: int, end_ms: int) -> pa.Table:
    t = table.column(column)
    return table.filter(pc.and_(pc.greater_equal(t, start_ms), pc.less(t, end_ms)))


def test_same_seed_same_tables_and_one_row_per_message() -> None:
    sc = scenario(
        [
            {
                "broker": "broker-b",
                "kind": "error_burst",
                "start_s": 5,
                "end_s": 15,
                "error": "system_error",
                "rate": 0.5,
            }
        ]
    )
    a, b = run(sc, JAVA), run(sc, JAVA)
    assert a.attempts.equals(b.attempts) and a.results.equals(b.results)
    assert a.results.num_rows == 2000
    assert pc.sum(pc.equal(a.results.column("status"), "SEND_OK")).as_py() > 1900


def test_in_cluster_mode_the_clients_pick_decides_nothing() -> None:
    # every queue carries the access point; the Proxy picks the queue: without throttling the Java and
    # Python clients send the same attempts to the same queues with the same answers
    sc = scenario([{"broker": "broker-b", "kind": "slowdown", "start_s": 2, "end_s": 12, "factor": 1000}])
    java, python = run(sc, JAVA), run(sc, PYTHON)
    cols = ["seq", "attempt", "broker", "queue_id", "outcome", "latency_ms"]
    assert java.attempts.select(cols).equals(python.attempts.select(cols))
    assert pc.count_distinct(java.attempts.column("broker")).as_py() == 2
    outcomes = set(java.attempts.column("outcome").to_pylist())
    assert "proxy:PROXY_TIMEOUT" in outcomes  # the Proxy's 2 s wait, then an immediate retry


def test_local_mode_outage_java_isolates_until_a_heartbeat_python_keeps_trying() -> None:
    # broker-b's process (and its Proxy) dead from 5 s to 25 s: UNAVAILABLE at once; Java isolates ep
    # broker-b and its next sends take broker-a only until a heartbeat finds broker-b answering again;
    # Python picks broker-b's queues half of the time throughout, failing fast and retrying
    sc = scenario([{"broker": "broker-b", "kind": "outage", "start_s": 5, "end_s": 25}], messages=5000)
    java, python = run(sc, JAVA, LOCAL), run(sc, PYTHON, LOCAL)
    during = (6_000, 24_000)
    j = window(java.attempts, "start_ts_ms", *during)
    p = window(python.attempts, "start_ts_ms", *during)
    j_b = pc.sum(pc.equal(j.column("broker"), "broker-b")).as_py()
    p_b = pc.sum(pc.equal(p.column("broker"), "broker-b")).as_py()
    assert j_b == 0  # the heartbeats at 11 s and 21 s find broker-b dead: isolated the whole time
    assert p_b > 0.3 * p.num_rows
    p_sick = p.filter(pc.equal(p.column("broker"), "broker-b"))
    assert set(p_sick.column("outcome").to_pylist()) == {"grpc:UNAVAILABLE"}
    # the isolation column holds the heartbeat that finds broker-b answering: after the outage and the
    # channel's reconnect backoff (down at 5 s: attempts at 6, 7.6, 10.16, 14.26, 20.81, 31.30 s), the
    # tick at 41 s
    failed_b = java.attempts.filter(
        pc.and_(
            pc.equal(java.attempts.column("broker"), "broker-b"),
            pc.equal(java.attempts.column("outcome"), "grpc:UNAVAILABLE"),
        )
    )
    assert set(failed_b.column("fault_isolated_until_ms").to_pylist()) == {41_000}
    before = window(java.attempts, "start_ts_ms", 31_000, 41_000)
    assert pc.sum(pc.equal(before.column("broker"), "broker-b")).as_py() == 0
    after = window(java.attempts, "start_ts_ms", 41_000, 46_000)
    assert pc.sum(pc.equal(after.column("broker"), "broker-b")).as_py() > 0


def test_throttling_python_fails_java_backs_off() -> None:
    # SYSTEM_BUSY -> TOO_MANY_REQUESTS: Python stops (the send fails), Java retries after 20 ms
    sc = scenario(
        [
            {
                "broker": "broker-b",
                "kind": "error_burst",
                "start_s": 2,
                "end_s": 12,
                "error": "system_busy",
                "rate": 1.0,
            }
        ]
    )
    java, python = run(sc, JAVA), run(sc, PYTHON)
    p_failed = python.results.filter(pc.equal(python.results.column("status"), "FAILED"))
    assert p_failed.num_rows > 100
    assert set(p_failed.column("attempts").to_pylist()) <= {1, 2, 3}
    assert all(e.startswith("TooManyRequestsException: 42900") for e in p_failed.column("error").to_pylist())
    j_att = java.attempts.sort_by([("seq", "ascending"), ("attempt", "ascending")])
    seq = np.asarray(j_att.column("seq"))
    start = np.asarray(j_att.column("start_ts_ms"))
    lat = np.asarray(j_att.column("latency_ms"))
    out = np.asarray(j_att.column("outcome").to_pylist())
    retried = (seq[1:] == seq[:-1]) & (out[:-1] == "proxy:TOO_MANY_REQUESTS")
    gaps = start[1:][retried] - (start[:-1][retried] + lat[:-1][retried])
    assert gaps.size > 50 and set(gaps.tolist()) <= {20, 40}
    assert pc.sum(pc.equal(java.results.column("status"), "FAILED")).as_py() < p_failed.num_rows


def test_a_reply_past_the_clients_deadline_is_stored_and_retried_a_duplicate() -> None:
    # request timeout 1 s, broker-b answering in ~1.5 s: under the Proxy's 2 s wait, past the client's
    # deadline: DEADLINE_EXCEEDED, the broker stores it all the same, and the retry makes a duplicate
    sc = scenario([{"broker": "broker-b", "kind": "slowdown", "start_s": 2, "end_s": 8, "factor": 500}])
    out = run(sc, PYTHON, request_timeout_ms=1000)
    late = out.attempts.filter(pc.equal(out.attempts.column("outcome"), "grpc:DEADLINE_EXCEEDED"))
    assert late.num_rows > 0
    assert set(late.column("latency_ms").to_pylist()) == {1000}
    assert pc.sum(late.column("stored")).as_py() > 0  # the broker stored it after the client gave up


@pytest.mark.parametrize("client", [JAVA, PYTHON])
def test_fifo_messages_keep_their_queue(client) -> None:  # noqa: ANN001
    sc = scenario([], messages=600, message_types={"ordered": 1.0})
    out = run(sc, client)
    r = out.results.select(["seq", "broker", "queue_id"]).join(
        stage.producer_messages(sc, workload.producer_shares(sc)[0]).select(["seq", "order_key"]), "seq"
    )
    per_key = r.group_by("order_key").aggregate(
        [("queue_id", "count_distinct"), ("broker", "count_distinct")]
    )
    assert max(per_key.column("queue_id_count_distinct").to_pylist()) == 1
    assert max(per_key.column("broker_count_distinct").to_pylist()) == 1


def grpc_scenario(**producers: Any) -> dict[str, Any]:
    return {
        "cluster": {"brokers": ["broker-a", "broker-b"]},
        "producers": {"count": 1, "client_family": "grpc", "client_version": "java-5.2.1", **producers},
        "workload": {"messages": 300, "rate_per_s": 100.0, "topics": ["T"]},
    }


def test_the_facade_runs_a_grpc_scenario_on_the_grpc_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    from rocketsim import simulate
    from rocketsim.engine import ENGINE_VARIABLE
    from rocketsim.engine.plan import SimulationError

    sc = scenario_from_mapping(grpc_scenario())
    messages = stage.producer_messages(sc, workload.producer_shares(sc)[0])
    monkeypatch.delenv(ENGINE_VARIABLE, raising=False)
    out = simulate.simulate_producer(messages, sc)
    assert out.results.equals(simulate_producer(messages, sc).results)
    assert not any(out.results.column("compressed").to_pylist())  # Encoding.IDENTITY, forwarded as sent
    chunks = list(simulate.simulate_chunks(messages.to_batches(max_chunksize=64), sc))
    assert pa.concat_tables([c.results for c in chunks]).equals(out.results)
    monkeypatch.setenv(ENGINE_VARIABLE, "compiled")
    with pytest.raises(SimulationError, match="does not cover producers.client_family = grpc"):
        simulate.simulate_producer(messages, sc)


@pytest.mark.parametrize(
    ("change", "key", "rule"),
    [
        ({"client_version": "5.3.3"}, "producers.client_version", "of the grpc family must be one of"),
        ({"send_mode": {"oneway": 1.0}}, "producers.send_mode.oneway", "no gRPC client sends oneway"),
        (
            {"client_version": "python-5.1.2", "request_timeout_ms": 1500},
            "producers.request_timeout_ms",
            "whole seconds",
        ),
    ],
)
def test_what_the_grpc_clients_cannot_do_is_refused_naming_the_key(change: dict, key: str, rule: str) -> None:
    from rocketsim.scenario import ScenarioError

    with pytest.raises(ScenarioError, match=rule) as err:
        scenario_from_mapping(grpc_scenario(**change))
    assert str(err.value).startswith(key)


def test_batches_and_the_closed_loop_store_are_refused_for_grpc() -> None:
    from rocketsim.scenario import ScenarioError

    raw = grpc_scenario()
    with pytest.raises(ScenarioError, match="^workload.message_types.batch"):
        scenario_from_mapping(
            {**raw, "workload": {**raw["workload"], "message_types": {"normal": 0.5, "batch": 0.5}}}
        )
    with pytest.raises(ScenarioError, match="^brokers.coupling must be open with client_family grpc"):
        scenario_from_mapping({**raw, "brokers": {"coupling": "joint"}})
