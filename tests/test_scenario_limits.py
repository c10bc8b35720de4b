"""Out-of-range scenario values must fail at load time, not after Spark started (docs/design.md §8: a scenario
error fails fast).

Every case here once validated and then crashed or hung inside generate/simulate (overflowing an int64,
dividing by zero, looping forever), i.e. after the job had started Spark and possibly committed tables.
The sweep drives every numeric key through extreme values and asserts the only two acceptable outcomes:
a ``ScenarioError`` naming key, rule and value, or a workload that generates and simulates (reference and
compiled paths) to one result per message within a few seconds.
"""

from __future__ import annotations

import copy
import re
import signal
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from rocketsim import engine
from rocketsim.engine import compiled
from rocketsim.engine import reference as engine_reference
from rocketsim.scenario import ScenarioError, scenario_from_mapping, workload

JAVA_INT = "must fit a Java int (-2147483648..2147483647)"
YEAR_S = 31_536_000

LIMIT_CASES: list[tuple[dict[str, Any], str]] = [
    # int64 overflow in the compiled path's settings array
    (
        {"producers": {"send_msg_timeout_ms": 2**63}},
        f"producers.send_msg_timeout_ms {JAVA_INT}, got 9223372036854775808",
    ),
    ({"route": {"poll_interval_ms": 2**40}}, f"route.poll_interval_ms {JAVA_INT}, got 1099511627776"),
    ({"workload": {"messages": 2**31}}, f"workload.messages {JAVA_INT}, got 2147483648"),
    # runs.seed is an int64 column: a larger seed failed the very last write of the pipeline
    (
        {"seed": 2**63},
        "seed must fit a Java long (-9223372036854775808..9223372036854775807), got 9223372036854775808",
    ),
    # born_ts_ms overflow: total messages or their time span beyond int64 milliseconds
    (
        {"workload": {"messages": 0, "duration_s": 1e300}},
        f"workload.duration_s must be > 0 and <= {YEAR_S}, got 1e+300",
    ),
    (
        {"workload": {"messages": 0, "duration_s": 3e6, "rate_per_s": 1e5}},
        "workload.duration_s x workload.rate_per_s must give at most 2147483647 messages, got 300000000000",
    ),
    (
        {"workload": {"messages": 50, "rate_per_s": 1e-300}},
        f"workload.rate_per_s must send workload.messages (50) within {YEAR_S} s, got 1e-300",
    ),
    # int32 columns: an oversize body is max + 1, and wire and store sizes add headers to a body; at
    # 2147483647 they wrapped to negative sizes and offsets that still reconciled
    (
        {"producers": {"max_message_size": 2**31 - 1}, "workload": {"invalid": {"oversize_body": 0.1}}},
        "producers.max_message_size must be between 1 and 1073741824 (a commit-log file; beyond it a body, "
        "its wire and store sizes overflow a Java int), got 2147483647",
    ),
    # the generator materialises one name per order key
    (
        {"workload": {"order_keys": 10**9}},
        "workload.order_keys must be between 1 and 1000000, got 1000000000",
    ),
    # latencies that overflow to inf (reference: int(round(inf)); compiled: x / 0.0)
    (
        {"brokers": {"default": {"latency": {"sigma": 1e3}}}},
        "brokers.default.latency.sigma must be between 0 and 10, got 1000.0",
    ),
    (
        {"workload": {"body_size": {"sigma": 1e3}}},
        "workload.body_size.sigma must be between 0 and 10, got 1000.0",
    ),
    (
        {"brokers": {"default": {"latency": {"spike_alpha": 1e-3}}}},
        "brokers.default.latency.spike_alpha must be >= 0.1, got 0.001",
    ),
    (
        {"brokers": {"broker-a": {"latency": {"median_ms": 1e300}}}},
        "brokers.broker-a.latency.median_ms must be > 0 and <= 86400000, got 1e+300",
    ),
    (
        {"brokers": {"default": {"latency": {"spike_scale_ms": 1e300}}}},
        "brokers.default.latency.spike_scale_ms must be > 0 and <= 86400000, got 1e+300",
    ),
    (
        {"brokers": {"default": {"latency": {"connect_refused_ms": 1e20}}}},
        "brokers.default.latency.connect_refused_ms must be between 0 and 86400000, got 1e+20",
    ),
    # fault timeline in int64 ms, flapping cycles of 0 ms (an endless loop), too many cycles
    (
        {"faults": [{"broker": "broker-a", "kind": "outage", "start_s": 1e17, "end_s": 2e17}]},
        f"faults[0].start_s must be between 0 and {YEAR_S}, got 1e+17",
    ),
    (
        {"faults": [{"broker": "broker-a", "kind": "outage", "start_s": 0, "end_s": 1e300}]},
        f"faults[0].end_s must be > 0 and <= {YEAR_S}, got 1e+300",
    ),
    (
        {"faults": [{"broker": "broker-a", "kind": "slowdown", "start_s": 0, "end_s": 9, "factor": 1e308}]},
        "faults[0].factor must be between 1 and 1000000, got 1e+308",
    ),
    (
        {
            "faults": [
                {
                    "broker": "broker-a",
                    "kind": "flapping",
                    "start_s": 0,
                    "end_s": 9,
                    "period_s": 4e-4,
                    "down_s": 1e-4,
                }
            ]
        },
        f"faults[0].period_s must be between 0.001 and {YEAR_S}, got 0.0004",
    ),
    (
        {
            "faults": [
                {
                    "broker": "broker-a",
                    "kind": "flapping",
                    "start_s": 0,
                    "end_s": 2e6,
                    "period_s": 1,
                    "down_s": 0.5,
                }
            ]
        },
        "faults[0].period_s must give at most 100000 flapping cycles between start_s and end_s "
        "(2000000 cycles), got 1.0",
    ),
    # java.util.zip.Deflater refuses levels above 9 (the simulate stage raised ConfigError)
    (
        {"producers": {"compress_type": "ZLIB", "compress_level": 15}},
        "producers.compress_level must be between -1 and 9 with compress_type ZLIB, got 15",
    ),
]


@pytest.mark.parametrize(("raw", "message"), LIMIT_CASES, ids=[m.split(" ")[0] for _, m in LIMIT_CASES])
def test_out_of_range_values_fail_at_load_naming_key_rule_and_value(
    raw: dict[str, Any], message: str
) -> None:
    with pytest.raises(ScenarioError) as info:
        scenario_from_mapping(raw)
    assert str(info.value) == message


def test_limits_leave_every_default_and_shipped_value_alone() -> None:
    scenario_from_mapping({})
    scenario_from_mapping({"producers": {"compress_type": "ZSTD", "compress_level": 22}})
    scenario_from_mapping({"producers": {"compress_type": "LZ4", "compress_level": 17}})
    scenario_from_mapping({"seed": -(2**63), "workload": {"messages": 2**31 - 1}})


# ---------------------------------------------------------------------------------- the sweep

BASE: dict[str, Any] = {
    "cluster": {"brokers": ["broker-a", "broker-b"]},
    "producers": {"count": 1, "threads": 2},
    "workload": {
        "messages": 16,
        "rate_per_s": 2000.0,
        "message_types": {"normal": 1, "ordered": 1, "delay": 1, "transaction": 1, "batch": 1},
        "body_size": {"median": 5000, "max": 9000},
        "invalid": {"bad_topic": 0.1, "oversize_body": 0.1},
    },
    "brokers": {"default": {"errors": {"system_busy": 0.1}, "latency": {"spike_probability": 0.5}}},
}
EXTREMES: tuple[int | float, ...] = (-1, 0, 1e-300, 4e-4, 0.5, 1, 3, 2**31 - 1, 2**31, 2**63, 1e12, 1e300)
INT_KEYS = (
    "seed",
    "cluster.write_queues",
    "cluster.read_queues",
    "cluster.perm",
    "producers.count",
    "producers.threads",
    "producers.send_msg_timeout_ms",
    "producers.retry_times_when_send_failed",
    "producers.compress_msg_body_over_howmuch",
    "producers.compress_level",
    "producers.max_message_size",
    "producers.default_topic_queue_nums",
    "producers.send_msg_max_timeout_per_request_ms",
    "producers.async_semaphore_permits",
    "producers.connect_timeout_ms",
    "producers.connect_ms",
    "producers.async_sender_threads",
    "producers.callback_executor_threads",
    "workload.body_size.median",
    "workload.body_size.min",
    "workload.body_size.max",
    "workload.order_keys",
    "workload.batch_size",
    "route.poll_interval_ms",
    "route.broker_expire_ms",
    "route.heartbeat_interval_ms",
)
FLOAT_KEYS = (
    "workload.rate_per_s",
    "workload.body_size.sigma",
    "workload.compressibility",
    "brokers.default.latency.median_ms",
    "brokers.default.latency.sigma",
    "brokers.default.latency.spike_scale_ms",
    "brokers.default.latency.spike_alpha",
    "brokers.default.latency.connect_refused_ms",
)
FAULT_KEYS = {
    "outage": ("start_s", "end_s"),
    "slowdown": ("factor",),
    "flapping": ("period_s", "down_s", "end_s"),
    "error_burst": ("rate",),
    "partition": ("start_s", "end_s"),
}


def _set(raw: dict[str, Any], path: str, value: object) -> None:
    node: Any = raw
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    node[int(parts[-1]) if isinstance(node, list) else parts[-1]] = value


def _sweep() -> Iterator[tuple[str, dict[str, Any]]]:
    for key in INT_KEYS + FLOAT_KEYS:
        for value in EXTREMES:
            if key in INT_KEYS and isinstance(value, float):
                continue
            raw = copy.deepcopy(BASE)
            _set(raw, key, value)
            yield f"{key}={value}", raw
    for value in (1e-9, 1e300):  # duration-based workloads (messages = 0)
        for key in ("workload.duration_s", "workload.rate_per_s"):
            raw = copy.deepcopy(BASE)
            raw["workload"].update(messages=0, duration_s=0.008, rate_per_s=2000.0)
            _set(raw, key, value)
            yield f"{key}={value} (messages=0)", raw
    for kind, keys in FAULT_KEYS.items():
        for key in keys:
            for value in EXTREMES:
                raw = copy.deepcopy(BASE)
                raw["faults"] = [
                    {
                        "broker": "broker-a",
                        "kind": kind,
                        "start_s": 0.0,
                        "end_s": 0.004,
                        "period_s": 0.002,
                        "down_s": 0.001,
                    }
                ]
                _set(raw, f"faults.0.{key}", value)
                yield f"faults.0.{key}={value} ({kind})", raw


SWEEP = list(_sweep())
ERROR_SHAPE = re.compile(r"^[a-z_]+(\.[a-z_\-0-9]+|\[\d+\])*(\.[a-z_]+)? .+, got .+$")


@contextmanager
def _time_limit(seconds: int) -> Iterator[None]:
    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _wrapped(table: pa.Table) -> list[str]:
    """Integer columns holding negative values where none can be (a narrowing that wrapped)."""
    out = []
    for name in table.column_names:
        col = table.column(name)
        if pa.types.is_integer(col.type) and name not in SIGNED_COLUMNS:
            low = pc.min(col).as_py()
            if low is not None and low < 0:
                out.append(f"{name} wrapped to {low}")
    return out


SIGNED_COLUMNS = {"response_code", "queue_id", "fault_isolated_until_ms", "batch_id"}


def test_sweep_has_many_cases() -> None:
    assert len(SWEEP) > 300


def test_every_extreme_value_is_refused_or_runs() -> None:
    """One test (not 400 parametrized ones) so the whole sweep costs a few seconds."""
    warm = scenario_from_mapping(BASE)  # compile the kernels first: the time limit is for the model
    engine.simulate(workload.generate(warm), warm)
    problems: list[str] = []
    accepted = 0
    for label, raw in SWEEP:
        try:
            sc = scenario_from_mapping(raw)
        except ScenarioError as exc:
            if not ERROR_SHAPE.match(str(exc)):
                problems.append(f"{label}: message does not name key, rule and value: {exc}")
            continue
        accepted += 1
        try:
            with _time_limit(10), warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)  # numpy overflow: a value out of range
                messages = workload.generate(sc)
                results = engine.simulate(messages, sc).results  # the compiled path where it applies
                first = messages.filter(pc.equal(messages.column("producer"), 0))
                reference = engine_reference.simulate_producer(first, sc).results
        except Exception as exc:  # noqa: BLE001 - every escape is a finding
            problems.append(f"{label}: validated, then {type(exc).__name__}: {str(exc)[:160]}")
            continue
        if results.num_rows != messages.num_rows or reference.num_rows != first.num_rows:
            problems.append(f"{label}: {messages.num_rows} messages but {results.num_rows} results")
        problems += [f"{label}: {w}" for w in _wrapped(messages) + _wrapped(results)]
    assert not problems, "\n".join(problems)
    assert accepted > 100  # the sweep really ran workloads, not only refusals


def test_ordered_send_on_an_empty_route() -> None:
    """A valid scenario that crashed the reference (SelectMessageQueueByHash divided by zero while the
    only broker was out of the route); upstream's sendSelectImpl fails with 'No route info' first."""
    sc = scenario_from_mapping(
        {
            "cluster": {"brokers": ["a"]},
            "producers": {"count": 1},
            "faults": [{"broker": "a", "kind": "outage", "start_s": 0, "end_s": 600}],
            "workload": {"messages": 200, "rate_per_s": 0.5, "message_types": {"ordered": 1}},
        }
    )
    messages = workload.generate(sc)
    for simulate_producer in (compiled.simulate_producer, engine_reference.simulate_producer):
        results = simulate_producer(messages, sc).results
        assert results.num_rows == 200
        assert set(results.column("status").to_pylist()) == {"FAILED"}
        assert any("No route info" in e for e in results.column("error").to_pylist())
