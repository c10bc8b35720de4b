"""The compiled send loop (:mod:`rocketsim.fastsim`) gives exactly the reference's tables.

Every case runs one small scenario through ``simulate_producer(..., fast=False)`` (the readable reference)
and through the fast path, and compares the two Arrow tables (schema, rows, values, order). A mismatch
fails with the first differing rows of each column. Cases are chosen so that each one really exercises
its feature (the comments say what it hits: pickOneAtLeast, the 4.9.7 slot rewrite, route changes, ...).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketsim import brokers as bm
from rocketsim import fastsim, workload
from rocketsim.fault import SplitMixIntSource, derive_key
from rocketsim.scenario import Scenario, scenario_from_mapping
from rocketsim.simulate import SimOutput, simulate, simulate_producer

VERSIONS = ("4.9.7", "4.9.8", "5.3.3")
BROKERS4 = ("broker-a", "broker-b", "broker-c", "broker-d")
# broker-b is away long enough (> 120 s expiry + scan + 30 s poll) for the producer's route to change twice
OUTAGE = {"broker": "broker-b", "kind": "outage", "start_s": 20.0, "end_s": 230.0}
SLOWDOWN = {"broker": "broker-c", "kind": "slowdown", "start_s": 10.0, "end_s": 120.0, "factor": 40.0}
EVERY_ERROR = {
    "remoting_timeout": 0.01,
    "connect_refused": 0.01,
    "system_busy": 0.02,
    "system_error": 0.02,
    "service_not_available": 0.01,
    "flush_disk_timeout": 0.01,
    "flush_slave_timeout": 0.01,
    "slave_not_available": 0.01,
}
HEAVY_TAIL = {
    "median_ms": 3.0,
    "sigma": 0.6,
    "spike_probability": 0.01,
    "spike_scale_ms": 40.0,
    "spike_alpha": 1.3,
}


def scenario(
    version: str = "4.9.8",
    *,
    fault: bool = True,
    threads: int = 1,
    messages: int = 600,
    rate: float = 10.0,
    brokers: tuple[str, ...] = BROKERS4,
    queues: int = 4,
    faults: tuple[dict, ...] = (),
    errors: dict[str, float] | None = None,
    latency: dict[str, float] | None = None,
    producers: dict[str, Any] | None = None,
    work: dict[str, Any] | None = None,
    cluster: dict[str, Any] | None = None,
    count: int = 1,
    seed: int = 7,
) -> Scenario:
    """A small scenario; ``producers``/``work``/``cluster`` add raw settings."""
    default: dict[str, Any] = {"latency": latency or HEAVY_TAIL}
    if errors:
        default["errors"] = errors
    raw = {
        "name": "fastsim",
        "seed": seed,
        "cluster": {
            "brokers": list(brokers),
            "write_queues": queues,
            "read_queues": queues,
            **(cluster or {}),
        },
        "producers": {
            "count": count,
            "client_version": version,
            "send_latency_fault_enable": fault,
            "threads": threads,
            **(producers or {}),
        },
        "workload": {"messages": messages, "rate_per_s": rate, **(work or {})},
        "brokers": {"default": default},
        "faults": [dict(f) for f in faults],
    }
    return scenario_from_mapping(raw)


def table_diff(name: str, ref: pa.Table, fast: pa.Table, limit: int = 4) -> list[str]:
    """Readable differences between two tables: schema, row count, then per column the first rows."""
    out: list[str] = []
    if ref.schema != fast.schema:
        out.append(f"{name}: schema\n  ref:  {ref.schema}\n  fast: {fast.schema}")
    if ref.num_rows != fast.num_rows:
        out.append(f"{name}: {ref.num_rows} rows in the reference, {fast.num_rows} in the fast path")
    keys = ref.column("seq").to_pylist() if "seq" in ref.column_names else []
    for col in ref.column_names:
        if col not in fast.column_names:
            out.append(f"{name}.{col}: missing in the fast path")
            continue
        a, b = ref.column(col).to_pylist(), fast.column(col).to_pylist()
        bad = [i for i in range(min(len(a), len(b))) if a[i] != b[i]]
        if bad:
            rows = ", ".join(
                f"row {i} (seq {keys[i] if i < len(keys) else '?'}): {a[i]!r} != {b[i]!r}"
                for i in bad[:limit]
            )
            out.append(f"{name}.{col}: {len(bad)} rows differ; {rows}")
    return out


def assert_same(ref: SimOutput, fast: SimOutput) -> None:
    diff = table_diff("attempts", ref.attempts, fast.attempts) + table_diff(
        "results", ref.results, fast.results
    )
    assert not diff, "fast path differs from the reference:\n" + "\n".join(diff)
    # equal values with equal schemas: the tables are equal as Arrow sees them too
    assert ref.attempts.equals(fast.attempts) and ref.results.equals(fast.results)


def check(sc: Scenario) -> SimOutput:
    """Both paths on every producer of the scenario; returns the (equal) outputs of the first producer."""
    messages = workload.generate(sc)
    first = None
    producer_col = messages.column("producer")
    for p in sorted(pc.unique(producer_col).to_pylist()):
        m = messages.filter(pc.equal(producer_col, p))
        assert fastsim.supports(sc, m)
        ref = simulate_producer(m, sc, fast=False)
        fast = fastsim.simulate_producer(m, sc)
        assert_same(ref, fast)
        first = first or ref
    assert first is not None
    return first


def statuses(out: SimOutput) -> dict[str, int]:
    return {d["values"]: d["counts"] for d in pc.value_counts(out.results.column("status")).to_pylist()}


# ---- the draws are the reference's, bit for bit ----------------------------------------------------


def test_draw_keys_match_the_reference() -> None:
    seed, producer = 123456789, 5
    z = bm._mix((seed * bm._GOLDEN + 0x632BE59BD9B4E019) & fastsim._M64)
    z2 = np.uint64(bm._mix((z + producer * bm._GOLDEN + 1) & fastsim._M64))
    for seq, attempt in ((0, 0), (1, 2), (10**9, 7), (2**40 + 3, 1)):
        key = np.uint64(fastsim._attempt_key(z2, seq, attempt))  # boxed as a Python int: keep it uint64
        assert int(key) == bm.draw_key(seed, producer, seq, attempt)
        for stream in range(bm.N_STREAMS):
            assert fastsim._uniform(key, stream) == bm.uniform(int(key), stream)
    base = np.uint64(derive_key(seed, producer))
    bits = np.uint64(fastsim._part_bits("sendWhichQueue:TopicTest"))
    for thread, generation in ((0, 0), (3, 2), (17, 11)):
        key = fastsim._index_key(base, thread, bits, generation)
        src = SplitMixIntSource.for_index(seed, producer, thread, "sendWhichQueue:TopicTest", generation)
        assert int(key) == src.key


# ---- the grid: client lines x fault tolerance x threads, on a route change and a brown-out ---------------


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("fault", [True, False], ids=["fault-on", "fault-off"])
@pytest.mark.parametrize("version", VERSIONS)
def test_grid(version: str, fault: bool, threads: int) -> None:
    # fault on: pickOneAtLeast (4.9), slot rewrites (4.9.7), fresh queues (4.9.8), index resets (5.x), a table
    # entry removed after the route lost broker-b; timeouts eat the budget (call-timeout breaks)
    out = check(
        scenario(
            version,
            fault=fault,
            threads=threads,
            messages=1500,
            rate=6.0,
            faults=(OUTAGE, SLOWDOWN),
            errors=EVERY_ERROR,
        )
    )
    assert pc.sum(out.results.column("retry_budget_exhausted").cast(pa.int64())).as_py() > 0
    assert len(set(out.attempts.column("outcome").to_pylist())) == 9  # ok, 3 statuses, 3 remoting, 2 broker
    assert (out.attempts.column("fault_isolated_until_ms").null_count < out.attempts.num_rows) == fault


# ---- every fault kind -----------------------------------------------------------------------------


FAULTS = {
    "hang": {"broker": "broker-a", "kind": "hang", "start_s": 5.0, "end_s": 40.0},
    "flapping": {
        "broker": "broker-c",
        "kind": "flapping",
        "start_s": 5.0,
        "end_s": 60.0,
        "period_s": 10.0,
        "down_s": 4.0,
    },
    "slowdown": {"broker": "broker-d", "kind": "slowdown", "start_s": 5.0, "end_s": 50.0, "factor": 200.0},
    "burst-timeout": {
        "broker": "broker-d",
        "kind": "error_burst",
        "start_s": 5.0,
        "end_s": 50.0,
        "error": "remoting_timeout",
        "rate": 0.6,
    },
    "burst-connect": {
        "broker": "broker-d",
        "kind": "error_burst",
        "start_s": 5.0,
        "end_s": 50.0,
        "error": "connect_refused",
        "rate": 0.6,
    },
    "burst-busy": {
        "broker": "broker-a",
        "kind": "error_burst",
        "start_s": 5.0,
        "end_s": 50.0,
        "error": "system_busy",
        "rate": 0.7,
    },
    "burst-unavailable": {
        "broker": "broker-b",
        "kind": "error_burst",
        "start_s": 5.0,
        "end_s": 50.0,
        "error": "service_not_available",
        "rate": 0.7,
    },
    "burst-flush": {
        "broker": "broker-c",
        "kind": "error_burst",
        "start_s": 5.0,
        "end_s": 50.0,
        "error": "flush_slave_timeout",
        "rate": 0.7,
    },
}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", list(FAULTS))
def test_fault_kinds(kind: str, version: str) -> None:
    another = kind == "burst-flush"  # retryAnotherBrokerWhenNotStoreOK on the not-OK statuses
    check(
        scenario(
            version,
            threads=2,
            messages=600,
            faults=(FAULTS[kind],),
            producers={"retry_another_broker_when_not_store_ok": another},
        )
    )


# ---- error mixes, retry settings, budgets ------------------------------------------------------------


@pytest.mark.parametrize("another", [False, True], ids=["store-ok-returns", "retry-another-broker"])
@pytest.mark.parametrize("retries", [0, 4])
@pytest.mark.parametrize("version", VERSIONS)
def test_high_error_rates(version: str, retries: int, another: bool) -> None:
    heavy = {k: v * 8 for k, v in EVERY_ERROR.items()}  # 80% of attempts fail one way or another
    out = check(
        scenario(
            version,
            threads=3,
            messages=500,
            errors=heavy,
            producers={
                "retry_times_when_send_failed": retries,
                "retry_another_broker_when_not_store_ok": another,
            },
        )
    )
    assert statuses(out).get("FAILED", 0) > 0


@pytest.mark.parametrize("version", VERSIONS)
def test_tiny_timeouts_break_on_the_call_timeout(version: str) -> None:
    out = check(
        scenario(
            version,
            threads=3,
            messages=600,
            errors={"connect_refused": 0.2},
            latency={"median_ms": 2.0, "sigma": 1.2, "spike_probability": 0.05, "spike_scale_ms": 5.0},
            producers={"send_msg_timeout_ms": 7, "retry_times_when_send_failed": 5},
        )
    )
    assert pc.sum(out.results.column("retry_budget_exhausted").cast(pa.int64())).as_py() > 0


@pytest.mark.parametrize("version", ["5.3.3", "5.2.0"])
def test_per_request_timeout_cap(version: str) -> None:
    # 5.3.3 caps every attempt but the last at 4 ms (so slow attempts time out and retry); 5.2.0 has no cap
    out = check(
        scenario(
            version,
            messages=500,
            latency={"median_ms": 3.0, "sigma": 1.0},
            producers={"send_msg_timeout_ms": 50, "send_msg_max_timeout_per_request_ms": 4},
        )
    )
    retried = out.attempts.num_rows > out.results.num_rows
    assert retried == (version == "5.3.3")


@pytest.mark.parametrize("version", VERSIONS)
def test_every_broker_isolated(version: str) -> None:
    # 45% refused connections: each broker gets isolated for 600 s (4.9) -> pickOneAtLeast, and in 4.9.7 the
    # cached queue slots are rewritten (the route-mutation quirk), read again by the other threads
    check(scenario(version, threads=3, messages=800, errors={"connect_refused": 0.45}))


@pytest.mark.parametrize("version", VERSIONS)
def test_more_brokers_than_the_fault_table_bins_hold(version: str) -> None:
    # 30 brokers: the ConcurrentHashMap of fault items resizes (32 -> 64 bins) and reorders its iteration
    brokers = tuple(f"b{i:02d}" for i in range(30))
    check(
        scenario(version, threads=3, messages=800, brokers=brokers, queues=1, errors={"connect_refused": 0.3})
    )


# ---- message kinds, send modes, routes ------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_mixed_workload(version: str) -> None:
    # ordered (selector) sends, batches, transactional half messages, delay, oneway, three topics, rejected
    # rows of every kind, and a route change in the middle
    out = check(
        scenario(
            version,
            threads=3,
            messages=1500,
            rate=6.0,
            faults=(OUTAGE,),
            errors={"connect_refused": 0.05, "system_busy": 0.05, "remoting_timeout": 0.02},
            producers={"send_mode": {"sync": 2, "oneway": 1}},
            work={
                "topics": ["TopicA", "TopicB", "TopicC"],
                "message_types": {"normal": 3, "ordered": 2, "transaction": 1, "delay": 1, "batch": 2},
                "invalid": {
                    "bad_topic": 0.02,
                    "empty_body": 0.02,
                    "oversize_body": 0.02,
                    "oversize_properties": 0.02,
                    "reserved_property": 0.02,
                },
                "body_size": {"distribution": "lognormal", "median": 3000, "sigma": 1.0, "max": 20000},
            },
        )
    )
    assert {"REJECTED", "ONEWAY_SENT", "FAILED", "SEND_OK"} <= set(statuses(out))
    assert pc.any(out.results.column("compressed")).as_py()


@pytest.mark.parametrize("version", VERSIONS)
def test_oneway(version: str) -> None:
    # a hang costs a oneway send nothing; refused connections fail it; its next send may start before the
    # hung call's completion event
    check(
        scenario(
            version,
            threads=2,
            messages=1500,
            rate=6.0,
            faults=(OUTAGE, FAULTS["hang"]),
            errors={"connect_refused": 0.1, "remoting_timeout": 0.1, "system_busy": 0.1},
            producers={"send_mode": {"oneway": 1}},
        )
    )


def test_ordered_async_sends_do_not_hold_the_thread() -> None:
    check(
        scenario(
            "4.9.7",
            threads=2,
            messages=600,
            errors={"connect_refused": 0.2, "remoting_timeout": 0.05},
            producers={"send_mode": {"sync": 1, "async": 1}},
            work={"message_types": {"ordered": 1}},
        )
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_every_broker_gone_from_the_route(version: str) -> None:
    # both brokers out for 240 s: after the name server dropped them the route is empty ("No route info")
    down = tuple(
        {"broker": b, "kind": "outage", "start_s": 10.0, "end_s": 250.0} for b in ("broker-a", "broker-b")
    )
    out = check(scenario(version, messages=1500, rate=6.0, brokers=("broker-a", "broker-b"), faults=down))
    assert any(e and "No route info of this topic" in e for e in out.results.column("error").to_pylist())


def test_read_only_broker_is_never_selected() -> None:
    out = check(
        scenario(
            "4.9.7",
            threads=3,
            messages=600,
            errors={"connect_refused": 0.3},
            cluster={"read_only_brokers": ["broker-a"]},
        )
    )
    assert "broker-a" not in out.attempts.column("broker").to_pylist()


def test_several_producers_through_simulate() -> None:
    sc = scenario("4.9.8", count=3, threads=2, messages=900, errors={"connect_refused": 0.1})
    messages = workload.generate(sc)
    fast = simulate(messages, sc)  # dispatches each producer to the fast path
    producer_col = messages.column("producer")
    refs = [
        simulate_producer(messages.filter(pc.equal(producer_col, p)), sc, fast=False)
        for p in sorted(pc.unique(producer_col).to_pylist())
    ]
    assert_same(
        SimOutput(pa.concat_tables([r.attempts for r in refs]), pa.concat_tables([r.results for r in refs])),
        fast,
    )


# ---- random scenarios ----------------------------------------------------------------------------


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    version = draw(st.sampled_from(["4.8.0", *VERSIONS, "5.2.0"]))
    n_brokers = draw(st.integers(1, 5))
    brokers = tuple(f"broker-{c}" for c in "abcde"[:n_brokers])
    kinds = st.sampled_from(["outage", "hang", "slowdown", "flapping", "error_burst"])
    faults = []
    for b in draw(st.lists(st.sampled_from(brokers), max_size=2, unique=True)):
        start = draw(st.floats(0.0, 60.0))
        faults.append(
            {
                "broker": b,
                "kind": draw(kinds),
                "start_s": start,
                "end_s": start + draw(st.floats(5.0, 200.0)),
                "error": draw(st.sampled_from(sorted(bm.ERROR_KINDS))),
                "rate": draw(st.floats(0.0, 1.0)),
                "period_s": 10.0,
                "down_s": draw(st.floats(1.0, 9.0)),
                "factor": draw(st.floats(1.0, 100.0)),
            }
        )
    errors = draw(st.dictionaries(st.sampled_from(sorted(bm.ERROR_KINDS)), st.floats(0.0, 0.12), max_size=4))
    return scenario(
        version,
        fault=draw(st.booleans()),
        threads=draw(st.integers(1, 4)),
        messages=draw(st.integers(1, 400)),
        rate=draw(st.sampled_from([2.0, 20.0, 500.0])),
        brokers=brokers,
        queues=draw(st.integers(1, 4)),
        faults=tuple(faults),
        errors=errors,
        seed=draw(st.integers(0, 2**40)),
        producers={
            "retry_times_when_send_failed": draw(st.integers(0, 3)),
            "retry_another_broker_when_not_store_ok": draw(st.booleans()),
            "send_msg_timeout_ms": draw(st.sampled_from([5, 30, 3000])),
            "send_msg_max_timeout_per_request_ms": draw(st.sampled_from([-1, 3])),
            "send_mode": draw(st.sampled_from([{"sync": 1}, {"sync": 1, "oneway": 1}])),
        },
        work={
            "message_types": draw(st.sampled_from([{"normal": 1}, {"normal": 2, "ordered": 1, "batch": 1}])),
            "batch_size": draw(st.integers(1, 5)),
        },
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios())
def test_random_scenarios(sc: Scenario) -> None:
    messages = workload.generate(sc)
    assert fastsim.supports(sc, messages)
    assert_same(simulate_producer(messages, sc, fast=False), fastsim.simulate_producer(messages, sc))


# ---- what the fast path leaves to the reference, and the dispatch ----------------------------------------


def test_dispatch_uses_the_fast_path_and_falls_back() -> None:
    sc = scenario("4.9.8", messages=300, errors={"connect_refused": 0.1})
    messages = workload.generate(sc)
    assert_same(simulate_producer(messages, sc, fast=False), simulate_producer(messages, sc))

    mixed = scenario("4.9.8", messages=300, producers={"send_mode": {"sync": 1, "async": 1}})
    m = workload.generate(mixed)
    assert not fastsim.supports(mixed, m)  # ASYNC stays on the reference path
    assert_same(simulate_producer(m, mixed, fast=False), simulate_producer(m, mixed))

    detector = scenario("5.3.3", messages=50, producers={"start_detector_enable": True})
    assert not fastsim.supports(detector, workload.generate(detector))
    no_detector = scenario("4.9.8", messages=50, producers={"start_detector_enable": True})
    assert fastsim.supports(no_detector, workload.generate(no_detector))  # 4.9 has no detector to start
    assert not fastsim.supports(sc, messages.slice(0, 0))
    two = scenario("4.9.8", count=2, messages=20)
    assert not fastsim.supports(two, workload.generate(two))
