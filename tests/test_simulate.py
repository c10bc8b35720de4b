"""Simulation semantics on edge cases, through the facade (the engine ROCKETSIM_ENGINE names), checked
against the reference engine."""

from __future__ import annotations

import pyarrow.compute as pc

from rocketsim import workload
from rocketsim.engine import reference
from rocketsim.scenario import scenario_from_mapping
from rocketsim.simulate import simulate_producer


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


def test_ordered_send_on_an_empty_route_fails_with_upstream_text() -> None:
    sc, messages = _one_producer(
        {
            "cluster": {"brokers": ["broker-a"]},
            "workload": {"messages": 100, "rate_per_s": 0.2, "message_types": {"ordered": 1.0}},
            "faults": [{"broker": "broker-a", "kind": "outage", "start_s": 10, "end_s": 400}],
        }
    )
    out = _same(sc, messages).results.to_pandas()
    no_route = out[out.error.fillna("").str.contains("No route info for this topic, TopicTest")]
    assert len(no_route) > 0 and (no_route.attempts == 0).all()
    assert no_route.error.iloc[0].startswith("MQClientException: No route info for this topic, TopicTest\n")


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
