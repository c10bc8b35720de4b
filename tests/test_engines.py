"""The two send engines give the same tables: :mod:`rocketsim.engine.compiled` against
:mod:`rocketsim.engine.reference`, and the choice between them (``ROCKETSIM_ENGINE``).

Every case runs one small scenario through both engines and compares the two Arrow tables (schema, rows,
values, order). A mismatch fails with the first differing rows of each column. Cases are chosen so that
each one really exercises its feature (the comments say what it hits: pickOneAtLeast, the 4.9.7 slot
rewrite, route changes, ...); the cells of :data:`rocketsim.client.fault.FAULT_UPDATES` are each exercised,
and each one the compiled engine reads is shown to be read from the table.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketsim.broker import latency as bm
from rocketsim.client.connection import budget_check_closes
from rocketsim.client.fault import FaultStrategy, Reachable, Site, fault_updates
from rocketsim.client.outcomes import Catch, OutcomeKind
from rocketsim.client.versions import parse_version
from rocketsim.engine import ENGINE_VARIABLE, compiled, reference, simulate, simulate_producer
from rocketsim.engine.plan import SimOutput, SimulationError, batch_aligned, prepare
from rocketsim.errors import ConfigError
from rocketsim.scenario import Scenario, scenario_from_mapping, workload
from rocketsim.vectors.fault_strategy import REAL_CLIENT_TAGS

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
        assert compiled.supports(sc, m)
        ref = reference.simulate_producer(m, sc)
        fast = compiled.simulate_producer(m, sc)
        assert_same(ref, fast)
        first = first or ref
    assert first is not None
    return first


def statuses(out: SimOutput) -> dict[str, int]:
    return {d["values"]: d["counts"] for d in pc.value_counts(out.results.column("status")).to_pylist()}


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
    # ok, 3 statuses, 3 remoting, 2 broker; with several threads a timeout closes the channel they share
    # (4.9.1+ clientCloseSocketIfTimeout): the others' requests on it fail as send-request errors
    kinds = set(out.attempts.column("outcome").to_pylist())
    assert len(kinds) == 9 + (threads > 1) and ("remoting:send_request" in kinds) == (threads > 1)
    assert (out.attempts.column("fault_isolated_until_ms").null_count < out.attempts.num_rows) == fault


@pytest.mark.parametrize("model", ["pool", "partitioned"])
@pytest.mark.parametrize("version", VERSIONS)
def test_sender_models(version: str, model: str) -> None:
    # the pool hands the next send to the thread idle the longest (a hang holds one thread, the others go
    # on); partitioned threads each take seq % threads in order; ordered async sends free their thread
    faults = (OUTAGE, {"broker": "broker-a", "kind": "hang", "start_s": 5.0, "end_s": 40.0})
    errors = {"connect_refused": 0.05, "remoting_timeout": 0.01}
    for modes, types in (
        ({"sync": 2, "oneway": 1}, {"normal": 2, "ordered": 2, "batch": 1}),
        ({"sync": 1, "async": 1}, {"ordered": 1}),
    ):
        out = check(
            scenario(
                version,
                threads=4,
                messages=1500,
                rate=20.0,
                faults=faults,
                errors=errors,
                producers={"sender_model": model, "send_mode": modes},
                work={"message_types": types},
            )
        )
        assert set(out.results.column("sender_thread").to_pylist()) - {None} == {0, 1, 2, 3}


# ---- every fault kind -----------------------------------------------------------------------------


FAULTS = {
    "hang": {"broker": "broker-a", "kind": "hang", "start_s": 5.0, "end_s": 40.0},
    "partition": {"broker": "broker-b", "kind": "partition", "start_s": 5.0, "end_s": 40.0},
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
def test_ordered_sends_in_every_mode(version: str) -> None:
    # ASYNC selector sends retry the same queue (timeouts fail at the response-table scan, after which 4.9
    # refuses every retry: no time left), ONEWAY ones return after the write, SYNC ones throw raw
    out = check(
        scenario(
            version,
            threads=2,
            messages=900,
            rate=6.0,
            faults=(FAULTS["hang"], OUTAGE),
            errors={"connect_refused": 0.1, "remoting_timeout": 0.05, "system_busy": 0.05},
            producers={"send_mode": {"sync": 1, "async": 1, "oneway": 1}},
            work={"message_types": {"ordered": 1}},
        )
    )
    labels = set(out.attempts.column("outcome").to_pylist())
    assert ("remoting:too_many_requests" in labels) == (not version.startswith("5"))
    assert {"ONEWAY_SENT", "FAILED", "SEND_OK"} <= set(statuses(out))


@pytest.mark.usefixtures("every_outcome_kind")
@pytest.mark.parametrize("version", VERSIONS)
def test_ordered_sends_see_every_outcome_kind(version: str) -> None:
    out = check(
        scenario(
            version,
            threads=3,
            messages=900,
            errors=CELL_ERRORS,
            producers={"send_mode": {"sync": 1, "async": 1, "oneway": 1}},
            work={"message_types": {"ordered": 1}},
        )
    )
    labels = set(out.attempts.column("outcome").to_pylist())
    assert {"client", "interrupted", "remoting:send_request", "remoting:connect", "ok"} <= labels


@pytest.mark.parametrize("version", VERSIONS)
def test_every_broker_gone_from_the_route(version: str) -> None:
    # both brokers out for 240 s: the name server has no route for the topic, the producers keep their
    # stale one (TOPIC_NOT_EXIST is swallowed) and fail with connect errors, never "No route info"
    down = tuple(
        {"broker": b, "kind": "outage", "start_s": 10.0, "end_s": 250.0} for b in ("broker-a", "broker-b")
    )
    out = check(scenario(version, messages=1500, rate=6.0, brokers=("broker-a", "broker-b"), faults=down))
    errors = [e for e in out.results.column("error").to_pylist() if e]
    assert errors and not any("No route info" in e for e in errors)
    assert any(e.startswith("MQClientException: Send [3] times, still failed") for e in errors)


@pytest.mark.parametrize("version", VERSIONS)
def test_partition_and_hang_with_route_changes(version: str) -> None:
    # a partition (3 s connect timeouts, route untouched) next to a hang long enough for the idle handler
    # to drop the hung broker (route change), fault strategy on and off
    faults = (
        {"broker": "broker-a", "kind": "partition", "start_s": 5.0, "end_s": 90.0},
        {"broker": "broker-b", "kind": "hang", "start_s": 20.0, "end_s": 250.0},
    )
    for fault in (True, False):
        out = check(scenario(version, fault=fault, threads=3, messages=1200, rate=5.0, faults=faults))
        labels = out.attempts.column("outcome").to_pylist()
        latencies = out.attempts.column("latency_ms").to_pylist()
        assert any(
            lb == "remoting:connect" and lat == 3000 for lb, lat in zip(labels, latencies, strict=True)
        )


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
    fast = simulate(messages, sc)  # each producer through the chosen engine
    producer_col = messages.column("producer")
    refs = [
        reference.simulate_producer(messages.filter(pc.equal(producer_col, p)), sc)
        for p in sorted(pc.unique(producer_col).to_pylist())
    ]
    assert_same(
        SimOutput(pa.concat_tables([r.attempts for r in refs]), pa.concat_tables([r.results for r in refs])),
        fast,
    )


# ---- plain ASYNC sends ---------------------------------------------------------------------------------
# send(msg, callback): DefaultMQProducerImpl.sendAsync submits sendDefaultImpl(ASYNC) to the async sender
# executor; its first selection runs there, MQClientAPIImpl.sendMessageAsync takes a permit of
# NettyRemotingAbstract.semaphoreAsync, and onExceptionImpl retries on the callback's thread, selecting again
# (retryTimesWhenSendAsyncFailed); unanswered requests fail at NettyRemotingClient.scanResponseTable.


def async_attempts(out: SimOutput) -> tuple[int, int]:
    """(attempts, retried attempts) of the async sends."""
    res = out.results
    seqs = res.filter(pc.equal(res.column("send_mode"), "async")).column("seq")
    att = out.attempts.filter(pc.is_in(out.attempts.column("seq"), value_set=seqs.combine_chunks()))
    return att.num_rows, pc.sum(pc.greater(att.column("attempt"), 0).cast(pa.int64())).as_py() or 0


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("fault", [True, False], ids=["fault-on", "fault-off"])
@pytest.mark.parametrize("version", VERSIONS)
def test_async_grid(version: str, fault: bool, threads: int) -> None:
    # plain ASYNC beside SYNC, ONEWAY, ordered, batches and transactions, over a route change and a
    # slow broker: retries reselect (4.9 pickOneAtLeast and 4.9.7 slot rewrites on the executor's and the
    # callbacks' own indexes), timeouts fail at the response-table scan, 4.9 refuses retries with no time left
    out = check(
        scenario(
            version,
            fault=fault,
            threads=threads,
            messages=1500,
            rate=6.0,
            faults=(OUTAGE, SLOWDOWN),
            errors=EVERY_ERROR,
            producers={
                "send_mode": {"sync": 1, "async": 2, "oneway": 1},
                "retry_times_when_send_async_failed": 3,
            },
            work={"message_types": {"normal": 4, "ordered": 1, "batch": 1, "transaction": 1}},
        )
    )
    n, retried = async_attempts(out)
    assert n > 500 and retried > 0
    assert {"SEND_OK", "FAILED", "ONEWAY_SENT"} <= set(statuses(out))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", list(FAULTS))
def test_async_fault_kinds(kind: str, version: str) -> None:
    another = kind == "burst-flush"
    check(
        scenario(
            version,
            threads=2,
            messages=600,
            faults=(FAULTS[kind],),
            producers={
                "send_mode": {"async": 3, "sync": 1},
                "retry_another_broker_when_not_store_ok": another,
                "retry_times_when_send_async_failed": 2,
            },
        )
    )


@pytest.mark.parametrize("offset", [0, 500, 1700])
@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_the_response_scan_ticks_after_the_clients_start(version: str, offset: int) -> None:
    # the broker stopped 5 s: the requests written meanwhile get no answer until it continues, and
    # NettyRemotingClient's scanResponseTable fails those whose begin + timeout + 1000 comes first, at its
    # ticks: response_scan_first_ms after the client's start, then every response_scan_period_ms. With the
    # client started `offset` ms before the schedule's 0 (producers.response_scan_offset_ms) every failure
    # ends on a tick of that phase, in both engines, and how many fail is the phase's
    paused = {"broker": "broker-a", "kind": "paused", "start_s": 2.0, "end_s": 7.0}
    out = check(
        scenario(
            version,
            fault=False,
            messages=1000,
            rate=100.0,
            brokers=("broker-a",),
            faults=(paused,),
            producers={"send_mode": {"async": 1}, "response_scan_offset_ms": offset},
        )
    )
    v = parse_version(version)
    failed = out.results.filter(pc.equal(out.results.column("status"), "FAILED"))
    ends = np.asarray(failed.column("end_ts_ms"))
    assert failed.num_rows > 0
    assert set((ends - (v.response_scan_first_ms - offset)) % v.response_scan_period_ms) == {0}


@pytest.mark.parametrize("model", ["pool", "partitioned"])
@pytest.mark.parametrize("version", VERSIONS)
def test_async_on_busy_client_pools(version: str, model: str) -> None:
    # One executor and one callback thread: a 4.9 connect to a partitioned broker waits 3 s inside
    # invokeAsync (thrown synchronously, retried at once on the executor) and holds the executor, so the
    # sends behind it wait and some run out of budget before it takes them (DefaultMQProducerImpl.sendAsync's
    # runnable: "DEFAULT ASYNC send call timeout"); 5.x connects asynchronously. Answers past the timeout but
    # before the scan are late successes (NettyRemotingAbstract.processResponseCommand).
    # (latency fault tolerance off: broker-a stays in the rotation)
    partition = {"broker": "broker-a", "kind": "partition", "start_s": 5.0, "end_s": 25.0}
    slow = {"broker": "broker-c", "kind": "slowdown", "start_s": 30.0, "end_s": 45.0, "factor": 1200.0}
    out = check(
        scenario(
            version,
            fault=False,
            threads=2,
            messages=900,
            rate=20.0,
            faults=(partition, slow),
            producers={
                "send_mode": {"async": 1},
                "async_sender_threads": 1,
                "callback_executor_threads": 1,
                "sender_model": model,
            },
        )
    )
    att = out.attempts
    late = pc.and_(pc.equal(att.column("outcome"), "ok"), pc.greater(att.column("latency_ms"), 3000))
    assert pc.any(late).as_py()
    errors = set(out.results.column("error").to_pylist())
    timed_out = "RemotingTooMuchRequestException: DEFAULT ASYNC send call timeout"
    assert (timed_out in errors) == (not version.startswith("5"))


@pytest.mark.parametrize("version", VERSIONS)
def test_async_semaphore(version: str) -> None:
    # 3 permits (NettyRemotingAbstract.semaphoreAsync): a hung broker holds them until the scan fails its
    # requests; the next sends wait for a release up to their timeout (tryAcquire(timeout)), else are
    # refused: 4.9 throws "invokeAsyncImpl tryAcquire semaphore timeout" (retries with nothing left:
    # "invoke too fast"), 5.x completes the future exceptionally: the callback's "wait response timeout"
    out = check(
        scenario(
            version,
            threads=3,
            messages=900,
            rate=30.0,
            faults=(FAULTS["hang"],),
            errors={"remoting_timeout": 0.05},
            producers={
                "send_mode": {"async": 1},
                "async_semaphore_permits": 3,
                "send_msg_timeout_ms": 1500,
                "retry_times_when_send_async_failed": 3,
            },
        )
    )
    errors = " ".join(e for e in out.results.column("error").to_pylist() if e)
    refused = "tryAcquire semaphore timeout" in errors or "invoke too fast" in errors
    assert refused == (not version.startswith("5"))
    att = out.attempts
    waited = pc.and_(
        pc.equal(att.column("outcome"), "remoting:timeout"), pc.equal(att.column("latency_ms"), 1500)
    )
    assert pc.any(waited).as_py()  # a refusal after waiting the whole timeout for a permit


@pytest.mark.parametrize("version", VERSIONS)
def test_async_tiny_timeouts(version: str) -> None:
    out = check(
        scenario(
            version,
            threads=3,
            messages=600,
            errors={"connect_refused": 0.2, "remoting_timeout": 0.05},
            latency={"median_ms": 2.0, "sigma": 1.2, "spike_probability": 0.05, "spike_scale_ms": 5.0},
            producers={
                "send_mode": {"async": 1},
                "send_msg_timeout_ms": 7,
                "retry_times_when_send_async_failed": 5,
                "async_sender_threads": 2,
            },
        )
    )
    assert async_attempts(out)[1] > 0


@pytest.mark.parametrize("version", VERSIONS)
def test_async_more_brokers_than_the_fault_table_bins_hold(version: str) -> None:
    brokers = tuple(f"b{i:02d}" for i in range(30))
    check(
        scenario(
            version,
            threads=3,
            messages=800,
            brokers=brokers,
            queues=1,
            errors={"connect_refused": 0.3},
            producers={"send_mode": {"async": 1}},
        )
    )


@pytest.mark.parametrize("version", ["5.3.3", "5.2.0"])
def test_async_with_the_detector(version: str) -> None:
    check(
        scenario(
            version,
            threads=2,
            messages=1200,
            rate=6.0,
            faults=(FAULTS["partition"], FAULTS["flapping"]),
            errors={"connect_refused": 0.1, "remoting_timeout": 0.05},
            producers={"start_detector_enable": True, "send_mode": {"async": 2, "sync": 1}},
        )
    )


# ---- the 5.x detector --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["hang", "partition", "flapping", "burst-connect"])
def test_detector(kind: str) -> None:
    # 5.3.3 LatencyFaultToleranceImpl.startDetector / detectByOneRound: every 3 s each fault item due (its
    # checkStamp passed) is probed (getMaxOffset); a probe that answers marks it reachable, an item whose
    # broker left the route (the outage: the route changes twice) is removed. With the detector on, a
    # RemotingException marks the broker unreachable (MQFaultStrategy: reachable = !startDetectorEnable),
    # so the reachable filter of selectOneMessageQueue sees what the probes found.
    outage = dict(OUTAGE, broker="broker-a" if FAULTS[kind]["broker"] == "broker-b" else "broker-b")

    def run(detector: bool) -> SimOutput:
        return check(
            scenario(
                "5.3.3",
                threads=3,
                messages=1500,
                rate=6.0,
                faults=(FAULTS[kind], outage),
                errors={"connect_refused": 0.1, "remoting_timeout": 0.03, "system_busy": 0.03},
                producers={"start_detector_enable": detector, "send_mode": {"sync": 2, "oneway": 1}},
                work={"message_types": {"normal": 3, "ordered": 1}},
            )
        )

    assert not run(True).attempts.equals(run(False).attempts)


# ---- random scenarios ----------------------------------------------------------------------------


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    version = draw(st.sampled_from(["4.8.0", *VERSIONS, "5.2.0"]))
    n_brokers = draw(st.integers(1, 5))
    brokers = tuple(f"broker-{c}" for c in "abcde"[:n_brokers])
    kinds = st.sampled_from(["outage", "hang", "slowdown", "flapping", "error_burst", "partition", "paused"])
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
            "send_mode": draw(
                st.sampled_from(
                    [
                        {"sync": 1},
                        {"sync": 1, "oneway": 1},
                        {"async": 1},
                        {"sync": 1, "async": 1, "oneway": 1},
                    ]
                )
            ),
            "sender_model": draw(st.sampled_from(["pool", "partitioned"])),
            "start_detector_enable": draw(st.booleans()),
            "retry_times_when_send_async_failed": draw(st.integers(0, 3)),
            "async_semaphore_permits": draw(st.sampled_from([65535, 2])),
            "async_sender_threads": draw(st.integers(1, 3)),
            "callback_executor_threads": draw(st.integers(1, 3)),
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
    assert compiled.supports(sc, messages)
    assert_same(reference.simulate_producer(messages, sc), compiled.simulate_producer(messages, sc))


# ---- the updateFaultItem table: every cell exercised, and read by both engines ------------------------
# The broker model never answers with a client error, an interrupt or a failed request write; these
# tests make three error-mix entries do so, so every catch clause of sendDefaultImpl is reached.
CELL_ERRORS = {
    "connect_refused": 0.06,
    "remoting_timeout": 0.03,
    "system_busy": 0.04,  # a retry code in 5.3.x only
    "system_error": 0.03,  # always retried
    "flush_disk_timeout": 0.03,  # -> MQClientException
    "slave_not_available": 0.02,  # -> InterruptedException
    "flush_slave_timeout": 0.02,  # -> RemotingSendRequestException
}


@pytest.fixture
def every_outcome_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(bm.ERROR_KINDS, "flush_disk_timeout", (OutcomeKind.CLIENT_ERROR, 0))
    monkeypatch.setitem(bm.ERROR_KINDS, "slave_not_available", (OutcomeKind.INTERRUPTED, 0))
    monkeypatch.setitem(bm.ERROR_KINDS, "flush_slave_timeout", (OutcomeKind.REMOTING_SEND_REQUEST, 0))


def cell_scenario(version: str, modes: dict[str, float], **kw: Any) -> Scenario:
    return scenario(
        version,
        threads=3,
        messages=kw.pop("messages", 600),
        errors=kw.pop("errors", CELL_ERRORS),
        **kw,
        producers={"send_mode": modes, "retry_times_when_send_async_failed": 2},
    )


@pytest.mark.usefixtures("every_outcome_kind")
@pytest.mark.parametrize("version", (*VERSIONS, "4.3.2", "5.2.0"))  # and CS-1/uncaught, CS-2/thrown
def test_every_fault_update_cell_is_exercised(version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: set[tuple[str, Site, Catch]] = set()
    record = FaultStrategy.record_outcome

    def spy(self: FaultStrategy, site: Site, catch: Catch, *args: Any) -> Any:
        seen.add((self.line.name, site, catch))
        return record(self, site, catch, *args)

    monkeypatch.setattr(FaultStrategy, "record_outcome", spy)
    sc = cell_scenario(version, {"sync": 1, "oneway": 1, "async": 2}, messages=1500)
    reference.simulate_producer(workload.generate(sc), sc)
    line = sc.producers.version.fault_line
    assert seen == {(line, site, c) for site, cells in fault_updates(line).items() for c in cells}


@pytest.mark.usefixtures("every_outcome_kind")
@pytest.mark.parametrize("version", VERSIONS)
def test_engines_agree_on_every_outcome_kind(version: str) -> None:
    out = check(cell_scenario(version, {"sync": 2, "oneway": 1}))
    labels = set(out.attempts.column("outcome").to_pylist())
    assert {"client", "interrupted", "remoting:send_request", "remoting:connect", "ok"} <= labels


@pytest.mark.usefixtures("every_outcome_kind")
@pytest.mark.parametrize("version", VERSIONS)
def test_engines_agree_on_every_outcome_kind_of_async_sends(version: str) -> None:
    # a client error on the first request: sendDefaultImpl's "Send [1] times" (its catch's update); on a
    # retry: thrown inside sendMessageAsync; an interrupt (4.9: thrown, 5.x: "unknown reason"); a failed
    # request write (retried)
    out = check(cell_scenario(version, {"async": 2, "sync": 1}, messages=900))
    labels = set(out.attempts.column("outcome").to_pylist())
    assert {"client", "interrupted", "remoting:send_request", "remoting:connect", "ok"} <= labels
    errors = " ".join(e for e in out.results.column("error").to_pylist() if e)
    assert "Send [1] times, still failed" in errors


@pytest.mark.usefixtures("every_outcome_kind")
@pytest.mark.parametrize("site", [Site.ASYNC_CALLBACK, Site.SEND_MESSAGE_ASYNC_CATCH])
@pytest.mark.parametrize("version", VERSIONS)
def test_both_engines_read_each_async_cell(version: str, site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    # flipping the isolation of every cell of an ASYNC call site changes the tables; both engines agree
    modes = {"async": 2, "sync": 1}
    before = check(cell_scenario(version, modes))
    cells = fault_updates(parse_version(version).line)[site]
    for catch, (isolation, reachable) in list(cells.items()):
        monkeypatch.setitem(cells, catch, (not isolation, reachable))
    after = check(cell_scenario(version, modes))
    assert not after.attempts.equals(before.attempts)


@pytest.mark.usefixtures("every_outcome_kind")
@pytest.mark.parametrize("catch", list(Catch))
@pytest.mark.parametrize("version", VERSIONS)
def test_both_engines_read_each_send_default_impl_cell(
    version: str, catch: Catch, monkeypatch: pytest.MonkeyPatch
) -> None:
    # flipping a cell's isolation changes the tables, and both engines still agree: both read the table
    modes = {"sync": 2, "oneway": 1}
    before = check(cell_scenario(version, modes))
    cells = fault_updates(parse_version(version).line)[Site.SEND_DEFAULT_IMPL]
    isolation, reachable = cells[catch]
    monkeypatch.setitem(cells, catch, (not isolation, reachable))
    after = check(cell_scenario(version, modes))
    assert not after.attempts.equals(before.attempts)


@pytest.mark.usefixtures("every_outcome_kind")
@pytest.mark.parametrize("catch", [Catch.RESULT, Catch.REMOTING, Catch.BROKER])
def test_both_engines_read_the_5x_reachable_flag(catch: Catch, monkeypatch: pytest.MonkeyPatch) -> None:
    # two brokers that errors isolate often: selection falls back to the reachable filter
    errors = {"connect_refused": 0.3, "system_error": 0.2, "remoting_timeout": 0.1}
    sc_args = {"brokers": BROKERS4[:2], "errors": errors}
    before = check(cell_scenario("5.3.3", {"sync": 1}, **sc_args))
    cells = fault_updates(parse_version("5.3.3").line)[Site.SEND_DEFAULT_IMPL]
    isolation, reachable = cells[catch]
    flipped = Reachable.NO if reachable.value_for(False) else Reachable.YES
    monkeypatch.setitem(cells, catch, (isolation, flipped))
    after = check(cell_scenario("5.3.3", {"sync": 1}, **sc_args))
    assert not after.attempts.equals(before.attempts)


# ---- what the compiled engine leaves to the reference, and the choice of engine ---------------------------


def test_what_the_compiled_engine_covers() -> None:
    sc = scenario("4.9.8", messages=300, errors={"connect_refused": 0.1})
    messages = workload.generate(sc)
    assert compiled.supports(sc, messages)
    assert_same(reference.simulate_producer(messages, sc), simulate_producer(messages, sc))

    mixed = scenario("4.9.8", messages=300, producers={"send_mode": {"sync": 1, "async": 1}})
    assert compiled.supports(mixed, workload.generate(mixed))  # ASYNC too
    detector = scenario("5.3.3", messages=50, producers={"start_detector_enable": True})
    assert compiled.supports(detector, workload.generate(detector))
    no_detector = scenario("4.9.8", messages=50, producers={"start_detector_enable": True})
    assert compiled.supports(no_detector, workload.generate(no_detector))  # 4.9 has no detector to start
    two = scenario("4.9.8", count=2, messages=20)
    assert not compiled.supports(two, workload.generate(two))
    twice = pa.concat_tables([messages.slice(0, 10), messages.slice(5, 10)])
    assert not compiled.supports(sc, twice)  # repeated seqs: the reference's order interleaves them
    with pytest.raises(SimulationError, match="repeated seq values"):
        compiled.simulate_producer(twice, sc)
    empty = messages.slice(0, 0)
    assert compiled.supports(sc, empty)
    assert_same(reference.simulate_producer(empty, sc), compiled.simulate_producer(empty, sc))


def test_every_message_rejected() -> None:
    sc = scenario("5.3.3", messages=50, work={"invalid": {"bad_topic": 1.0}})
    messages = workload.generate(sc)
    out = check(sc)
    assert out.attempts.num_rows == 0 and set(out.results.column("status").to_pylist()) == {"REJECTED"}
    assert out.results.num_rows == messages.num_rows


def test_repeated_seqs_keep_the_reference_order() -> None:
    sc = scenario("4.9.8", threads=2, messages=40, errors={"connect_refused": 0.3})
    m = workload.generate(sc)
    twice = pa.concat_tables([m, m])  # every send twice, in the same threads
    out = simulate_producer(twice, sc)  # the reference: the compiled engine does not cover it
    keys = list(
        zip(out.attempts.column("seq").to_pylist(), out.attempts.column("attempt").to_pylist(), strict=True)
    )
    assert keys == sorted(keys) and out.results.num_rows == 2 * m.num_rows


@pytest.fixture
def engine_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The engine functions called, in order (each still runs)."""
    calls: list[str] = []
    for module, name in (
        (reference, "simulate_producer"),
        (compiled, "simulate_producer"),
        (compiled, "simulate_covered"),
    ):
        real = getattr(module, name)

        def spy(
            *args: Any, _real: Any = real, _name: str = f"{module.__name__.rsplit('.', 1)[1]}.{name}"
        ) -> Any:
            calls.append(_name)
            return _real(*args)

        monkeypatch.setattr(module, name, spy)
    return calls


def test_rocketsim_engine_chooses(engine_calls: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    sync = scenario("4.9.8", messages=60, producers={"send_mode": {"sync": 1, "async": 1}})
    m_sync = workload.generate(sync)
    m_twice = pa.concat_tables([m_sync, m_sync])  # repeated seqs: the reference only

    monkeypatch.delenv(ENGINE_VARIABLE, raising=False)  # unset: compiled where it covers the input
    simulate_producer(m_sync, sync)
    simulate_producer(m_twice, sync)
    assert engine_calls == ["compiled.simulate_covered", "reference.simulate_producer"]

    engine_calls.clear()
    monkeypatch.setenv(ENGINE_VARIABLE, "reference")
    simulate_producer(m_sync, sync)
    simulate(m_sync, sync)  # every producer through the facade
    assert engine_calls == ["reference.simulate_producer"] * 2

    engine_calls.clear()
    monkeypatch.setenv(ENGINE_VARIABLE, "compiled")
    simulate_producer(m_sync, sync)
    with pytest.raises(SimulationError, match=r"^the compiled engine does not cover repeated seq values"):
        simulate_producer(m_twice, sync)
    assert engine_calls == [
        "compiled.simulate_producer",
        "compiled.simulate_covered",
        "compiled.simulate_producer",
    ]

    monkeypatch.setenv(ENGINE_VARIABLE, "fast")
    with pytest.raises(ConfigError) as info:
        simulate_producer(m_sync, sync)
    assert str(info.value) == "ROCKETSIM_ENGINE must be one of reference, compiled (or unset), got 'fast'"
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("version", VERSIONS)
def test_ordered_async_on_busy_client_pools(version: str) -> None:
    # One executor and one callback thread (DefaultMQProducerImpl's async sender executor,
    # NettyRemotingClient's public executor): a 4.9 connect to a partitioned broker waits 3 s inside
    # invokeAsync (createChannel, thrown synchronously) and holds its thread, so the sends behind it wait
    # (FIFO) and some run out of budget before an executor takes them (the runnable's `timeout > costTime`:
    # "call timeout"); 5.x connects asynchronously. Slow answers past the timeout but before the
    # response-table scan are late successes (NettyRemotingAbstract.processResponseCommand).
    partition = {"broker": "broker-a", "kind": "partition", "start_s": 5.0, "end_s": 25.0}
    slow = {"broker": "broker-c", "kind": "slowdown", "start_s": 30.0, "end_s": 45.0, "factor": 1200.0}
    out = check(
        scenario(
            version,
            threads=2,
            messages=900,
            rate=20.0,
            faults=(partition, slow),
            producers={
                "send_mode": {"async": 1},
                "async_sender_threads": 1,
                "callback_executor_threads": 1,
            },
            work={"message_types": {"ordered": 1}},
        )
    )
    att = out.attempts
    late = pc.and_(pc.equal(att.column("outcome"), "ok"), pc.greater(att.column("latency_ms"), 3000))
    assert pc.any(late).as_py()
    errors = set(out.results.column("error").to_pylist())
    assert ("RemotingTooMuchRequestException: call timeout" in errors) == (not version.startswith("5"))


# ---- chunks: one producer's run in parts (engine.simulate_chunks) ------------------------------------

CHUNK_MIX = {
    "topics": ["TopicA", "TopicB"],
    "message_types": {"normal": 3, "ordered": 2, "transaction": 1, "batch": 2},
    "batch_size": 4,
    "invalid": {"empty_body": 0.02, "oversize_properties": 0.02},
}


def chunk_scenario(modes: dict[str, int], version: str = "4.9.8", **producers: Any) -> Scenario:
    """Batches, transactions, ordered sends and rejected rows on three threads through a brown-out."""
    return scenario(
        version,
        threads=3,
        messages=400,
        rate=6.0,
        faults=(OUTAGE, SLOWDOWN),
        errors={"connect_refused": 0.05, "system_busy": 0.05, "remoting_timeout": 0.05},
        producers={"send_mode": modes, **producers},
        work=CHUNK_MIX,
    )


@pytest.fixture
def small_ring(monkeypatch: pytest.MonkeyPatch) -> None:
    """A streamed run's ring starts with room for its first chunk only: it wraps and grows."""
    monkeypatch.setattr(compiled, "RING_SPARE", 0)
    monkeypatch.setattr(compiled, "RING_MIN", 1)


def in_chunks(messages: pa.Table, sizes: list[int]) -> list[pa.RecordBatch]:
    """``messages`` cut into record batches of ``sizes`` rows (cycled), as a generator yields them."""
    out, at, k = [], 0, 0
    while at < messages.num_rows:
        n = sizes[k % len(sizes)]
        out.extend(messages.slice(at, n).to_batches())
        at, k = at + n, k + 1
    return out


def joined(chunks: list, exact: bool = False) -> SimOutput:
    """Chunks (:class:`rocketsim.engine.plan.SimChunk`) concatenated; each checked to hold whole sends,
    and to tell a time no attempt of the chunks after it starts before (``exact``: their earliest start,
    what a run made whole knows; a streamed run knows a bound: the sends still in flight began then);
    the last one tells that none comes."""
    from rocketsim.engine.plan import NO_LATER_ATTEMPT

    starts = [pc.min(c.attempts.column("start_ts_ms")).as_py() for c in chunks]
    for k, c in enumerate(chunks):
        later = [x for x in starts[k + 1 :] if x is not None]
        earliest = min(later) if later else NO_LATER_ATTEMPT
        assert c.later_start_ms == earliest if exact else c.later_start_ms <= earliest
    assert not chunks or chunks[-1].later_start_ms == NO_LATER_ATTEMPT
    for c in chunks:
        seq = c.results.column("seq")
        assert c.messages.column("seq").equals(seq)
        if c.coded is not None:  # the engine's codes: the same rows, its string columns as dictionaries
            assert c.coded[0].cast(c.attempts.schema).equals(c.attempts)
            assert c.coded[1].cast(c.results.schema).equals(c.results)
            assert pa.types.is_dictionary(c.coded[1].schema.field("status").type)
        if c.attempts.num_rows:
            assert pc.is_in(c.attempts.column("seq"), value_set=seq.combine_chunks()).to_pylist() == [
                True
            ] * (c.attempts.num_rows)
    return SimOutput(
        pa.concat_tables([c.attempts for c in chunks]).combine_chunks(),
        pa.concat_tables([c.results for c in chunks]).combine_chunks(),
    )


@pytest.mark.parametrize("sizes", [[1], [2], [3], [7, 1, 5], [64], [399], [10_000]], ids=str)
@pytest.mark.parametrize("modes", [{"sync": 2, "oneway": 1}, {"sync": 1, "async": 1}], ids=["sync", "async"])
def test_chunks_join_to_the_whole_run(modes: dict[str, int], sizes: list[int]) -> None:
    # chunk ends inside a batch move on past it (its members' records need its attempts); every other cut
    # splits retries, in-flight sends of the other threads and ASYNC sends still waiting for answers
    sc = chunk_scenario(modes)
    m = workload.generate(sc)
    whole = reference.simulate_producer(m, sc)
    ref = joined(list(reference.simulate_chunks(in_chunks(m, sizes), sc)), exact=True)
    assert_same(whole, ref)
    if compiled.supports(sc, m):
        assert_same(whole, joined(list(compiled.simulate_chunks(in_chunks(m, sizes), sc))))


@pytest.mark.usefixtures("small_ring")
@pytest.mark.parametrize("sizes", [[1], [5, 2], [61], [10_000]], ids=str)
@pytest.mark.parametrize(
    "producers",
    [
        {"send_mode": {"sync": 1, "async": 2, "oneway": 1}, "sender_model": "pool"},
        {"send_mode": {"async": 1}, "start_detector_enable": True, "async_semaphore_permits": 2},
        {"send_mode": {"sync": 2, "oneway": 1}, "start_detector_enable": True},
        {"send_mode": {"async": 1}, "async_sender_threads": 1, "callback_executor_threads": 1},
    ],
    ids=["pool", "async-detector-permits", "sync-detector", "async-busy-pools"],
)
def test_streamed_chunks_wrap_and_grow_the_ring(producers: dict[str, Any], sizes: list[int]) -> None:
    # the compiled engine streams: a send's slot is reused once its rows are out, the ring grows when the
    # sends in flight and a chunk need more (ASYNC sends waiting for a pool thread, the heap's and the
    # attempts' pointers move with it); chunk sizes 1, small primes and whole against the whole run
    rest = {k: v for k, v in producers.items() if k != "send_mode"}
    sc = chunk_scenario(producers["send_mode"], "5.3.3", **rest)
    m = workload.generate(sc)
    whole = reference.simulate_producer(m, sc)
    assert_same(whole, joined(list(compiled.simulate_chunks(in_chunks(m, sizes), sc))))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios(), sizes=st.sampled_from([[1], [2, 3], [7], [13, 1, 5], [10_000]]))
def test_random_scenarios_streamed(sc: Scenario, sizes: list[int]) -> None:
    messages = workload.generate(sc)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(compiled, "RING_SPARE", 0)
        mp.setattr(compiled, "RING_MIN", 1)
        chunks = list(compiled.simulate_chunks(in_chunks(messages, sizes), sc))
    assert_same(reference.simulate_producer(messages, sc), joined(chunks))


@pytest.mark.parametrize("modes", [{"sync": 2, "oneway": 1}, {"sync": 1, "async": 1}], ids=["sync", "async"])
def test_the_benchmarks_kernel_driver_makes_the_streamed_runs_attempts(modes: dict[str, int]) -> None:
    # run_prepared_chunks (what `bench send` times) drives the kernel as simulate_chunks does, without
    # making tables: as many attempts as the streamed run's table, in small chunks through a small ring
    sc = chunk_scenario(modes)
    m = workload.generate(sc)
    topics: list[str] = []
    parts = [prepare(c, sc, topics) for c in batch_aligned(in_chunks(m, [37]))]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(compiled, "RING_SPARE", 0)
        mp.setattr(compiled, "RING_MIN", 1)
        n_attempts = compiled.run_prepared_chunks(parts, sc)
    assert n_attempts == reference.simulate_producer(m, sc).attempts.num_rows > 0


def test_taking_a_chunks_rows_refuses_attempt_rows_its_sends_do_not_count() -> None:
    # take sizes a chunk's attempt table by its sends' n_sent (a row each, record_attempt): rows that do
    # not add up to it are refused before take_attempts writes one (the kernel checks no bounds)
    sc = chunk_scenario({"sync": 1})
    prep = prepare(workload.generate(sc), sc, [])
    kernel = compiled._Kernel(sc, prep.producer, prep.n_sends, 3)
    kernel.give(prep, final=True)
    kernel.run()
    kernel.state.outcomes.n_sent[0] += 1
    with pytest.raises(SimulationError, match="attempt rows"):
        kernel.take(0, prep.n_sends)


def test_a_streamed_run_refuses_born_times_going_back() -> None:
    # a START waiting for a send not given yet is due at its born time at the earliest: the kernel relies
    # on born times not decreasing in seq order (every generated workload's)
    sc = chunk_scenario({"sync": 1})
    m = workload.generate(sc)
    born = np.asarray(m.column("born_ts_ms")).copy()
    born[200:] -= 10_000
    m = m.set_column(m.schema.get_field_index("born_ts_ms"), "born_ts_ms", pa.array(born))
    with pytest.raises(SimulationError, match="born times"):
        list(compiled.simulate_chunks(in_chunks(m, [100]), sc))
    assert_same(reference.simulate_producer(m, sc), compiled.simulate_producer(m, sc))  # whole: any order


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 120), min_size=1, max_size=6))
def test_chunks_of_any_sizes_join_to_the_whole_run(sizes: list[int]) -> None:
    sc = chunk_scenario({"sync": 2, "oneway": 1}, "5.3.3")
    m = workload.generate(sc)
    whole = compiled.simulate_producer(m, sc)
    chunks = list(compiled.simulate_chunks(in_chunks(m, sizes), sc))
    assert_same(whole, joined(chunks))
    assert len(chunks) > 1 or sum(sizes) >= m.num_rows


def test_chunks_never_split_a_batch() -> None:
    sc = chunk_scenario({"sync": 1})
    m = workload.generate(sc)
    batches = [c.messages for c in reference.simulate_chunks(in_chunks(m, [1]), sc)]
    ids = [b.column("batch_id").to_pylist() for b in batches]
    firsts, lasts = [i[0] for i in ids], [i[-1] for i in ids]
    assert all(a is None or a != b for a, b in zip(lasts[:-1], firsts[1:], strict=True))
    assert any(len(i) > 1 for i in ids)  # some chunk of 1 row grew to hold its whole batch


@pytest.mark.parametrize("sizes", [[1], [2, 5], [7], [400]], ids=str)
def test_batch_aligned_chunks_hold_whole_batches(sizes: list[int]) -> None:
    # plan.batch_aligned: what an engine preparing a chunk at a time is given (a batch is one send)
    from rocketsim.engine.plan import batch_aligned

    m = workload.generate(chunk_scenario({"sync": 1}))
    chunks = list(batch_aligned(in_chunks(m, sizes)))
    assert pa.concat_tables(chunks).equals(m)
    for a, b in zip(chunks[:-1], chunks[1:], strict=True):
        end, start = a.column("batch_id")[a.num_rows - 1].as_py(), b.column("batch_id")[0].as_py()
        assert end is None or end != start
    assert any(c.column("batch_id").null_count < c.num_rows for c in chunks)


# ---- every client line: one tag per row of versions.REMOTING_LINES besides VERSIONS ---------------------

# clients.md A.1's lines (R4.3 4.3.2, R4.4 4.5.2, R4.7 4.7.1, R4.8 4.8.0, R5.0 5.0.0, 5.1.0's overflow edge,
# R5.1.3, R5.1.4, R5.2, R5.3.0, R5.3.1, R5.3.2): both engines decide every send alike
OTHER_LINES = REAL_CLIENT_TAGS


@pytest.mark.parametrize("fault", [True, False], ids=["fault-on", "fault-off"])
@pytest.mark.parametrize("version", OTHER_LINES)
def test_every_line(version: str, fault: bool) -> None:
    # retries after isolating errors: 4.3-4.7 stick to the failed broker and go through pickOneAtLeast's
    # shuffle and slot rewrite, 5.1.3 skips the last broker, 5.1.4 keeps an erroring broker out
    out = check(
        scenario(
            version,
            fault=fault,
            threads=3,
            messages=800,
            rate=6.0,
            faults=(OUTAGE, SLOWDOWN),
            errors=EVERY_ERROR,
        )
    )
    # 4.9.1+ close the channel the 3 threads share on a timeout: the others' requests on it fail at once
    # (NettyRemotingClient.invokeSync, clientCloseSocketIfTimeout; NettyRemotingAbstract.failFast)
    closes = parse_version(version).closes_channel_on_sync_timeout
    kinds = set(out.attempts.column("outcome").to_pylist())
    assert len(kinds) == 9 + closes and ("remoting:send_request" in kinds) == closes
    assert (out.attempts.column("fault_isolated_until_ms").null_count < out.attempts.num_rows) == fault


@pytest.mark.parametrize("fault", [True, False], ids=["fault-on", "fault-off"])
@pytest.mark.parametrize("version", OTHER_LINES)
def test_every_line_async(version: str, fault: bool) -> None:
    # ASYNC beside ordered sends: 4.3-4.8 end a first request that fails to connect at once ("Send [1]
    # times") and isolate the previous broker when a retry fails to connect; 4.3-4.6 retry with timeout 0
    out = check(
        scenario(
            version,
            fault=fault,
            threads=3,
            messages=900,
            rate=6.0,
            faults=(OUTAGE, SLOWDOWN),
            errors=EVERY_ERROR,
            producers={
                "send_mode": {"sync": 1, "async": 3},
                "retry_times_when_send_async_failed": 3,
            },
            work={"message_types": {"normal": 4, "ordered": 1}},
        )
    )
    n, retried = async_attempts(out)
    assert n > 300 and retried > 0


# ---- the channel a producer's threads share (rocketsim.client.connection) ------------------------------


@pytest.mark.parametrize("version", ["4.9.0", "4.9.8", "5.1.4", "5.3.3"])
def test_a_sync_timeout_closes_the_channel_under_the_other_threads(version: str) -> None:
    # one broker stopped for 5 s (kill -STOP) under 6 sender threads: 4.9.1+ NettyRemotingClient.invokeSync
    # closes the channel on the first timeout (clientCloseSocketIfTimeout), NettyConnectManageHandler.close
    # runs NettyRemotingAbstract.failFast: the other threads' requests fail at once
    # (RemotingSendRequestException) and retry on a new channel, while what they wrote is stored when the
    # broker continues; 4.9.0 keeps the channel (NettyClientConfig.clientCloseSocketIfTimeout = false)
    paused = {"broker": "broker-a", "kind": "paused", "start_s": 5.0, "end_s": 10.0}
    out = check(
        scenario(version, threads=6, messages=400, rate=40.0, brokers=("broker-a",), faults=(paused,))
    )
    a = out.attempts.to_pandas()
    failed_fast = a[a.outcome == "remoting:send_request"]
    copies = a[a.stored].groupby("seq").size()
    if not parse_version(version).closes_channel_on_sync_timeout:
        assert failed_fast.empty and (copies == 1).all()
        return
    # every request the close failed was written before it: the broker stores it (a second copy when a
    # retry of the same send is stored too), and each failed before its own timeout
    assert len(failed_fast) >= 5 and failed_fast.stored.all()
    assert (copies > 1).sum() > 0
    assert (failed_fast.latency_ms < 3000).all()
    timed_out = a[a.outcome == "remoting:timeout"]
    closed_at = (timed_out.start_ts_ms + timed_out.latency_ms).min()
    assert ((failed_fast.start_ts_ms + failed_fast.latency_ms) >= closed_at).all()


@pytest.mark.parametrize("version", ["5.3.0", "5.3.1", "5.3.2"])
def test_a_retry_with_no_time_left_fails_twice_on_5_3_0_and_5_3_1(version: str) -> None:
    # Requests that get no answer fail at the response-table scan, after the budget is gone. 5.3.0/5.3.1
    # retry anyway (MQClientAPIImpl.onExceptionImpl has no `timeoutMillis > 0` guard before 5.3.2) and
    # NettyRemotingClient.invokeAsync's listener fails each such retry twice (no `return` after its
    # operationFail; invokeAsyncImpl -> NettyRemotingAbstract.invoke0 fails it again): the second failure
    # retries while tries are left, so with 5 retries a send makes 3 refused requests after the scan,
    # each isolating the broker it selected. The send's row is its first onException, at the scan.
    out = check(
        scenario(
            version,
            messages=500,
            errors={"remoting_timeout": 0.05},
            producers={"send_mode": {"async": 1}, "retry_times_when_send_async_failed": 5},
        )
    )
    att = out.attempts
    refused = pc.equal(att.column("outcome"), "remoting:too_many_requests")
    twice = parse_version(version).fails_late_async_request_twice and not version.endswith("2")
    if not twice:
        assert not pc.any(refused).as_py()
        return
    seqs = set(att.filter(refused).column("seq").to_pylist())
    assert len(seqs) > 5
    assert att.filter(refused).column("fault_isolated_until_ms").null_count == 0
    res = out.results.filter(pc.is_in(out.results.column("seq"), pa.array(sorted(seqs))))
    assert set(res.column("status").to_pylist()) == {"FAILED"}
    assert {e.split("\n")[0] for e in res.column("error").to_pylist()} == {
        "MQClientException: unknown reason"
    }
    for seq in sorted(seqs)[:5]:
        rows = att.filter(pc.equal(att.column("seq"), seq))
        kinds = rows.column("outcome").to_pylist()
        assert kinds[1:] == ["remoting:too_many_requests"] * 3, kinds
        # the refused requests go out, and the send ends (its first onException), when the scan fails its
        # first request
        scan = set(rows.column("start_ts_ms").to_pylist()[1:])
        row = res.filter(pc.equal(res.column("seq"), seq))
        assert scan == {row.column("end_ts_ms")[0].as_py()} and row.column("attempts")[0].as_py() == 4


def paused_under_16_threads(connect_ms: int, **producers: Any) -> tuple[Scenario, SimOutput]:
    """f_stop5s_sync's shape in small: 16 SYNC threads at 500/s, the one broker stopped 1-6 s (more
    ``producers`` settings given)."""
    paused = {"broker": "broker-a", "kind": "paused", "start_s": 1.0, "end_s": 6.0}
    sc = scenario(
        threads=16,
        messages=2500,
        rate=500.0,
        brokers=("broker-a",),
        faults=(paused,),
        latency={"median_ms": 1.0, "sigma": 0.3},
        producers={"connect_ms": connect_ms, **producers},
    )
    out = simulate_producer(workload.generate(sc), sc)  # the public choice: the readable engine
    return sc, out


def test_requests_wait_for_a_new_channels_connect_and_some_are_never_written() -> None:
    # rocketmq-all-4.9.8 NettyRemotingClient.invokeSync -> getAndCreateChannel -> createChannel: the first
    # request after a close starts bootstrap.connect, the others awaitUninterruptibly the same future; then
    # `if (timeoutMillis < costTime) throw new RemotingTimeoutException("invokeSync call the addr[...]
    # timeout")`, whose catch closes the new channel (clientCloseSocketIfTimeout) before anything is
    # written; threads that had taken it fail their write (invokeSyncImpl's listener), threads that check
    # cw.isOK() after the close get RemotingConnectException. Nothing of theirs reaches the broker.
    _, instant = paused_under_16_threads(0)
    sc, out = paused_under_16_threads(3)
    a0, a = instant.attempts.to_pandas(), out.attempts.to_pandas()
    assert a0.stored.all()  # a connect in no time: every request is written and stored
    unwritten = a[~a.stored]
    kinds = set(unwritten.outcome)
    assert kinds == {"remoting:connect", "remoting:send_request", "remoting:timeout"}
    assert (unwritten.latency_ms <= 3).all()  # each failed at the connect's end, having waited for it
    assert unwritten.stored_ts_ms.isna().all()
    instant_copies, copies = (int(t[t.stored].groupby("seq").size().sub(1).sum()) for t in (a0, a))
    assert 0 < copies < instant_copies  # the stored duplicates: 32 and 18 here
    # the very first request connects too: the broker model answers it from the connect's end
    first0, first = a0.iloc[0], a.iloc[0]
    assert first.latency_ms == first0.latency_ms + 3 and first.stored_ts_ms == first0.stored_ts_ms + 3
    # and its send's latency in microseconds counts from its start, the connect included once
    us0, us = (int(o.results.column("latency_us")[0].as_py()) for o in (instant, out))
    assert us == us0 + 3000
    assert out.results.num_rows == instant.results.num_rows == 2500
    # both engines model the connect (the public choice runs the compiled one): the same tables
    messages = workload.generate(sc)
    assert compiled.supports(sc, messages)
    assert_same(reference.simulate_producer(messages, sc), compiled.simulate_producer(messages, sc))


def test_a_storm_of_failures_slows_the_connect_made_during_it() -> None:
    # rocketmq-all-4.9.8 DefaultMQProducerImpl.sendDefaultImpl: each catch logs the failed attempt with its
    # exception (log.warn("sendKernelImpl exception, resend at once ...", e)) before the retry, whose
    # getAndCreateChannel starts the new channel's connect; the connect ends when the Netty I/O thread has
    # run it, while the threads that just failed take the host's cores (producers.failure_cpu_us, and
    # failure_log_cpu_us on the client logger's one thread: ClientLogger's AsyncAppender dispatcher)
    storm = {"failure_cpu_us": 309.0, "failure_log_cpu_us": 1272.0, "processors": 2}
    _, quick = paused_under_16_threads(1, processors=2)
    sc, slow = paused_under_16_threads(1, **storm)
    a1, a = quick.attempts.to_pandas(), slow.attempts.to_pandas()
    # those that waited for a connect and were not written failed at its end: later than 1 ms after the
    # close, some of them (the idle connect is 1 ms)
    waited = a[~a.stored & a.outcome.isin(["remoting:connect", "remoting:send_request", "remoting:timeout"])]
    assert (a1[~a1.stored].latency_ms <= 1).all() and (waited.latency_ms > 1).any()
    copies_quick, copies_slow = (int(t[t.stored].groupby("seq").size().sub(1).sum()) for t in (a1, a))
    assert copies_slow < copies_quick  # fewer retries written: fewer stored duplicates
    # the host model is the readable engine's: the compiled engine hands the producer to it
    messages = workload.generate(sc)
    assert not compiled.supports(sc, messages)
    assert_same(reference.simulate_producer(messages, sc), slow)
    # with no connect to slow, the failures' CPU changes nothing on a host with no other work
    _, none = paused_under_16_threads(0, processors=2)
    _, charged = paused_under_16_threads(0, **storm)
    assert_same(none, charged)


@pytest.mark.parametrize(
    ("version", "text"),
    [
        ("4.5.2", "RemotingTimeoutException: invokeSync call timeout"),
        ("4.9.8", "RemotingTimeoutException: invokeSync call the addr[broker-a] timeout"),
        ("5.3.3", "RemotingTimeoutException: invokeSync call the addr[broker-a] timeout"),
    ],
)
def test_the_budget_check_after_a_connect_throws_invoke_syncs_own_text(version: str, text: str) -> None:
    # apache/rocketmq remoting NettyRemotingClient.invokeSync: after getAndCreateChannel, `if (timeoutMillis <
    # costTime) throw new RemotingTimeoutException("invokeSync call timeout")` at rocketmq-all-4.3.2 ..
    # 4.9.2, "invokeSync call the addr[" + addr + "] timeout" from rocketmq-all-4.9.3 (4.9.8 too); 5.1.2+
    # name channelRemoteAddr, 5.1.4+ test `left <= 0` (rocketmq-all-5.3.3). A selector send throws it as it
    # is. A 7 ms connect and a 5 ms timeout: every request that waits for a connect is refused by it.
    sc = scenario(
        version,
        threads=2,
        messages=60,
        rate=50.0,
        brokers=("broker-a",),
        producers={"connect_ms": 7, "send_msg_timeout_ms": 5},
        work={"message_types": {"ordered": 1}},
    )
    messages = workload.generate(sc)
    ref, fast = reference.simulate_producer(messages, sc), compiled.simulate_producer(messages, sc)
    assert_same(ref, fast)
    res = ref.results.filter(pc.starts_with(ref.results.column("error"), text))
    refused = ref.attempts.filter(pc.is_in(ref.attempts.column("seq"), res.column("seq")))
    assert res.num_rows > 0 and set(refused.column("outcome").to_pylist()) == {"remoting:timeout"}
    assert not pc.any(refused.column("stored")).as_py()  # nothing written
    # 4.9.1-5.1.3 close the channel on that check, so the next connect is refused again (but for a request
    # that came late in it); 4.3-4.9.0 (no close on a timeout) and 5.1.4+ (no time left: shouldClose false)
    # keep the channel the first connect made
    written = pc.mean(pc.cast(ref.attempts.column("stored"), pa.float64())).as_py()
    assert (written < 0.2) == budget_check_closes(parse_version(version))


@st.composite
def connect_scenarios(draw: st.DrawFn) -> Scenario:
    """:func:`scenarios` with a new channel's connect: from 1 ms to past the shorter timeouts drawn."""
    sc = draw(scenarios())
    connect_ms = draw(st.sampled_from([1, 2, 4, 7, 31]))
    return dataclasses.replace(sc, producers=dataclasses.replace(sc.producers, connect_ms=connect_ms))


@st.composite
def crowded_connect_scenarios(draw: st.DrawFn) -> Scenario:
    """Many SYNC threads at a high rate against a broker that pauses, hangs or goes away for a while:
    timeouts close the channel, and each new channel's connect has many waiters (the race, the budget
    checks, the failed writes), on every line's close and budget rules."""
    brokers = tuple(f"broker-{c}" for c in "abc"[: draw(st.integers(1, 3))])
    start = draw(st.floats(0.2, 1.0))
    kind = draw(st.sampled_from(["paused", "hang", "outage"]))
    return scenario(
        draw(st.sampled_from(["4.3.2", "4.9.0", "4.9.8", "5.1.3", "5.1.4", "5.3.3"])),
        fault=draw(st.booleans()),
        threads=draw(st.integers(4, 24)),
        messages=draw(st.integers(200, 1200)),
        rate=draw(st.sampled_from([300.0, 1000.0])),
        brokers=brokers,
        faults=(
            {
                "broker": brokers[0],
                "kind": kind,
                "start_s": start,
                "end_s": start + draw(st.floats(0.3, 3.0)),
            },
        ),
        latency={"median_ms": 1.0, "sigma": 0.3},
        errors=draw(st.sampled_from([None, {"remoting_timeout": 0.05}])),
        seed=draw(st.integers(0, 2**30)),
        producers={
            "connect_ms": draw(st.integers(1, 12)),
            "send_msg_timeout_ms": draw(st.sampled_from([10, 50, 3000])),
            "retry_times_when_send_failed": draw(st.integers(0, 3)),
            "sender_model": draw(st.sampled_from(["pool", "partitioned"])),
            "send_mode": draw(st.sampled_from([{"sync": 1}, {"sync": 3, "oneway": 1, "async": 1}])),
        },
        work={"message_types": draw(st.sampled_from([{"normal": 1}, {"normal": 2, "ordered": 1}]))},
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sc=connect_scenarios())
def test_random_scenarios_with_a_connect_time(sc: Scenario) -> None:
    check(sc)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sc=crowded_connect_scenarios())
def test_random_crowded_connects(sc: Scenario) -> None:
    check(sc)
