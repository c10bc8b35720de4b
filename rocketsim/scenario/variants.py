"""Variants of one scenario for a comparison: named sets of ``--set`` overrides, and sweep grids.

A comparison runs every variant on the same messages (same arrivals) and the same fault timeline, so a
variant may change how producers send (fault strategy, client version, retries, timeouts, ...) or the
broker model, but not what is sent and when: ``seed``, ``workload.*`` and ``producers.count`` belong in
the base overrides (``--set``), and a variant that changes them is refused.

Syntax (command line):

More: docs/reference/modules.md, rocketsim/scenario/variants.py.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from rocketsim.scenario import (
    ProducerConfig,
    Scenario,
    ScenarioError,
    apply_overrides,
    load_scenario,
    parse_override,
    scenario_from_mapping,
)
from rocketsim.tables import schemas

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.=+-]{0,79}$")
NAME_RULE = "must be 1-80 characters: letters, digits and _ . = + - (not starting with a symbol)"

# Producer settings the message generator never reads (rocketsim.scenario.workload.generate_producer):
# variants
# that differ only in these (and in cluster, brokers, faults, route) share one set of messages. Anything
# not listed here is assumed to shape the messages, so a new setting is safe by default.
SEND_ONLY_PRODUCER_SETTINGS = (
    "send_msg_timeout_ms",
    "retry_times_when_send_failed",
    "retry_times_when_send_async_failed",
    "send_latency_fault_enable",
    "compress_msg_body_over_howmuch",
    "compress_type",
    "compress_level",
    "default_topic_queue_nums",
    "retry_another_broker_when_not_store_ok",
    "send_msg_max_timeout_per_request_ms",
    "async_semaphore_permits",
    "start_detector_enable",
    "async_sender_threads",
    "callback_executor_threads",
    "processors",
    "async_sender_queue",
    "send_cpu_us",
    "netty_write_cpu_share",
    "netty_read_cpu_share",
    "callback_cpu_share",
    "netty_worker_wakeup_us",
    "netty_worker_request_us",
    "netty_selector_wakeup_us",
    "netty_selector_request_us",
    "failure_cpu_us",
    "failure_log_cpu_us",
    "async_failure_cpu_us",
    "async_failure_log_cpu_us",
    "shared_host",
    "host_scheduler",
    "heap_mb",
    "heap_alloc_kib",
    "heap_pending_kib",
    "heap_pause_us",
    "heap_copy_us_per_kib",
    "heap_full_us_per_kib",
    "heap_stops",
    "host_counts",
    "heap_marking_ms",
    "heap_marking_on_host",
    "heap_pause_goal_ms",
    "host_stall_every",
    "host_stall_ms",
    "host_stall_shape",
    "host_other_cpu_us",
    "host_other_threads",
)


@dataclass(frozen=True)
class Variant:
    """A named set of scenario overrides, applied after the base ``--set`` overrides."""

    name: str
    overrides: tuple[str, ...] = ()

    def describe(self) -> str:
        return "; ".join(self.overrides) if self.overrides else "(scenario as is)"


def check_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise ScenarioError(f"variant name {name!r} {NAME_RULE}")
    return name


def parse_variants(specs: Sequence[str]) -> list[Variant]:
    """``NAME[:KEY=VALUE]`` items -> variants, in first-seen order (a repeated NAME adds overrides)."""
    order: list[str] = []
    overrides: dict[str, list[str]] = {}
    for spec in specs:
        name, sep, override = spec.partition(":")
        name = check_name(name.strip())
        if name not in overrides:
            order.append(name)
            overrides[name] = []
        if sep:
            if not override.strip():
                raise ScenarioError(f"--variant {spec!r} must look like NAME:key.path=value")
            parse_override(override)  # the same rule as --set: key.path=value
            overrides[name].append(override.strip())
    return [Variant(n, tuple(overrides[n])) for n in order]


def _short_key(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def sweep_variants(sweeps: Sequence[str]) -> list[Variant]:
    """``KEY=V1,V2,...`` items -> the grid of every combination (the first key varies slowest)."""
    axes: list[list[tuple[str, str]]] = []
    seen: set[str] = set()
    for item in sweeps:
        key, sep, values = item.partition("=")
        key = key.strip()
        parts = [v.strip() for v in values.split(",")]
        if not sep or not key or any(not p for p in key.split(".")) or not all(parts):
            raise ScenarioError(f"--sweep {item!r} must look like key.path=v1,v2,v3")
        if key in seen:
            raise ScenarioError(f"--sweep {key} is given twice")
        if len(set(parts)) != len(parts):
            raise ScenarioError(f"--sweep {key} repeats a value: {values}")
        seen.add(key)
        axes.append([(key, v) for v in parts])
    out: list[Variant] = []
    if not axes:
        return out
    for combo in itertools.product(*axes):
        name = "+".join(f"{_short_key(k)}={v}" for k, v in combo)
        if not NAME_RE.match(name):
            raise ScenarioError(
                f"sweep point {name!r} is not a usable variant name ({NAME_RULE}); "
                "use --variant NAME:KEY=VALUE"
            )
        for k, v in combo:
            parse_override(f"{k}={v}")
        out.append(Variant(name, tuple(f"{k}={v}" for k, v in combo)))
    return out


def combine(variants: Sequence[Variant], sweep: Sequence[Variant]) -> list[Variant]:
    """Variants crossed with sweep points (either side may be empty)."""
    if not sweep:
        return list(variants)
    if not variants:
        return list(sweep)
    return [
        Variant(check_name(f"{v.name}+{s.name}"), (*v.overrides, *s.overrides))
        for v in variants
        for s in sweep
    ]


def arrival_signature(sc: Scenario) -> tuple:
    """What decides which messages exist and when they are born."""
    return (sc.seed, sc.workload, sc.producers.count)


def message_signature(sc: Scenario) -> tuple:
    """Everything the message generator reads: variants with equal signatures share their messages."""
    p = sc.producers
    trailing = p.version.properties_trailing_separator  # the only thing the version changes in messages
    defaults = ProducerConfig()
    p = dataclasses.replace(
        p, client_version="", **{k: getattr(defaults, k) for k in SEND_ONLY_PRODUCER_SETTINGS}
    )
    return (*arrival_signature(sc), p, trailing)


def build_scenarios(
    path: str | Path, base_overrides: Sequence[str], variants: Sequence[Variant]
) -> tuple[Scenario, dict[str, Scenario]]:
    """The base scenario and each variant's, validated; raises ``ScenarioError`` naming the variant.
    A variant may couple its producers (closed-loop brokers): the jobs run such a variant whole."""
    if len(variants) < 2:
        raise ScenarioError(f"a comparison needs at least 2 variants, got {len(variants)}")
    names = [v.name for v in variants]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ScenarioError(f"variant names must be unique, got {', '.join(dupes)} more than once")
    base = load_scenario(path, list(base_overrides))
    out: dict[str, Scenario] = {}
    for v in variants:
        try:
            sc = load_scenario(path, [*base_overrides, *v.overrides])
        except ScenarioError as exc:
            raise ScenarioError(f"variant {v.name}: {exc}") from None
        if arrival_signature(sc) != arrival_signature(base):
            raise ScenarioError(
                f"variant {v.name}: must not change seed, workload.* or producers.count "
                f"(variants share the same messages; put such overrides in --set), got {v.describe()}"
            )
        out[v.name] = sc
    return base, out


def scenario_of_run(runs_row: Mapping, extra_overrides: Sequence[str] = ()) -> Scenario:
    """The scenario a run ran, from its ``runs`` row (the file's text, its name, the ``--set``
    overrides), with ``extra_overrides`` after them (a comparison's variant: its ``comparisons.overrides``).
    Raises ``ScenarioError`` when the text no longer loads (written by another version of rocketsim)."""
    try:
        raw = tomllib.loads(runs_row["scenario_text"])
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"the scenario text of the runs row is not valid TOML: {exc}") from None
    raw.setdefault("name", runs_row["scenario_name"])
    raw = apply_overrides(raw, [*list(runs_row["overrides"]), *extra_overrides])
    return scenario_from_mapping(raw, source_text=runs_row["scenario_text"])


# ---- the comparison table -------------------------------------------------------------------------

# every run_summary metric is compared
COMPARED_METRICS = tuple(f.name for f in schemas.RUN_SUMMARY if f.name not in ("run_id", "scope"))
COMPARISONS_DATA = schemas.data_schema(schemas.COMPARISONS)


def signature_groups(scenarios: Mapping[str, Scenario]) -> list[list[str]]:
    """The variants grouped by :func:`message_signature` (variants of a group share their messages), in
    the order of their first variant."""
    groups: list[tuple[tuple, list[str]]] = []  # signatures compare by value (they hold mappings)
    for name, sc in scenarios.items():
        signature = message_signature(sc)
        group = next((names for s, names in groups if s == signature), None)
        if group is None:
            groups.append((signature, [name]))
        else:
            group.append(name)
    return [names for _, names in groups]


def comparison_table(summary: pa.Table, variants: Sequence[Variant], baseline: str) -> pa.Table:
    """``run_summary`` rows of every variant (``variant`` and ``scope`` first) -> ``comparisons`` rows
    (without ``run_id``): one per (variant, scope, metric of :data:`COMPARED_METRICS`), its value as a
    double, the baseline variant's value of that scope and metric (null if the baseline has no such
    scope), ``delta = value - baseline_value`` and ``delta_pct = 100.0 * delta / |baseline_value|``
    (null when that is 0 or null)."""
    n, m = summary.num_rows, len(COMPARED_METRICS)
    values = np.zeros((n, m), np.float64)
    valid = np.zeros((n, m), bool)
    for j, name in enumerate(COMPARED_METRICS):
        col = summary.column(name).cast(pa.float64())
        values[:, j] = np.asarray(col.fill_null(0.0).to_numpy(), np.float64)
        valid[:, j] = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), bool)
    variant = summary.column("variant").to_pylist()
    scope = summary.column("scope").to_pylist()  # a row per variant and scope: a few dozen
    base_row = {s: i for i, (v, s) in enumerate(zip(variant, scope, strict=True)) if v == baseline}
    at = np.array([base_row.get(s, -1) for s in scope], np.int64)
    has_base = (at >= 0)[:, None] & valid[np.maximum(at, 0)]
    base = np.where(has_base, values[np.maximum(at, 0)], 0.0)
    delta_valid = valid & has_base
    delta = values - base
    pct_valid = has_base & (np.abs(base) > 0) & delta_valid
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = 100.0 * delta / np.abs(base)
    overrides = {v.name: list(v.overrides) for v in variants}
    rows = np.repeat(np.arange(n), m)

    def flat(x: np.ndarray, ok: np.ndarray) -> pa.Array:
        return pa.array(x.reshape(-1), pa.float64(), mask=~ok.reshape(-1))

    out = {
        "variant": pa.array([variant[i] for i in rows], pa.string()),
        "overrides": pa.array([overrides[variant[i]] for i in rows], pa.list_(pa.string())),
        "baseline": pa.array([baseline] * (n * m), pa.string()),
        "scope": pa.array([scope[i] for i in rows], pa.string()),
        "metric": pa.array(list(COMPARED_METRICS) * n, pa.string()),
        "value": flat(values, valid),
        "baseline_value": flat(base, has_base),
        "delta": flat(delta, delta_valid),
        "delta_pct": flat(pct, pct_valid),
    }
    return pa.table(out, schema=COMPARISONS_DATA)
