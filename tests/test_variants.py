"""Variants and sweeps of a comparison: parsing, naming, validation before Spark, shared messages, the
groups of variants that share them, and the comparison table (by hand, and row by row from its
definition)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from rocketsim.present.text import comparison_text
from rocketsim.scenario import ScenarioError, workload
from rocketsim.scenario.variants import (
    COMPARED_METRICS,
    Variant,
    build_scenarios,
    combine,
    comparison_table,
    message_signature,
    parse_variants,
    signature_groups,
    sweep_variants,
)
from rocketsim.spark.cli import parse_compare_args
from rocketsim.tables import schemas

BROWNOUT = str(Path(__file__).resolve().parents[1] / "conf" / "scenarios" / "brownout.toml")
SMALL = ("workload.messages=400",)


def test_parse_variants_merges_repeated_names_in_order() -> None:
    got = parse_variants(
        [
            "off:producers.send_latency_fault_enable=false",
            "on:producers.send_latency_fault_enable=true",
            "off:producers.retry_times_when_send_failed=4",
            "plain",
        ]
    )
    assert got == [
        Variant(
            "off", ("producers.send_latency_fault_enable=false", "producers.retry_times_when_send_failed=4")
        ),
        Variant("on", ("producers.send_latency_fault_enable=true",)),
        Variant("plain", ()),
    ]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("bad name:producers.count=2", "variant name 'bad name'"),
        ("-x:producers.count=2", "variant name '-x'"),
        ("x:", "must look like NAME:key.path=value"),
        ("x:novalue", "must look like key.path=value"),
    ],
)
def test_parse_variants_refuses_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        parse_variants([spec])


def test_sweep_builds_the_grid_with_readable_names() -> None:
    got = sweep_variants(
        ["producers.client_version=4.9.7,4.9.8,5.3.3", "producers.retry_times_when_send_failed=0,2"]
    )
    assert [v.name for v in got] == [
        "client_version=4.9.7+retry_times_when_send_failed=0",
        "client_version=4.9.7+retry_times_when_send_failed=2",
        "client_version=4.9.8+retry_times_when_send_failed=0",
        "client_version=4.9.8+retry_times_when_send_failed=2",
        "client_version=5.3.3+retry_times_when_send_failed=0",
        "client_version=5.3.3+retry_times_when_send_failed=2",
    ]
    assert got[-1].overrides == ("producers.client_version=5.3.3", "producers.retry_times_when_send_failed=2")
    crossed = combine(parse_variants(["on:producers.send_latency_fault_enable=true"]), got[:2])
    assert [v.name for v in crossed] == [f"on+{s.name}" for s in got[:2]]
    assert crossed[0].overrides == ("producers.send_latency_fault_enable=true", *got[0].overrides)


@pytest.mark.parametrize(
    ("sweep", "message"),
    [
        ("producers.client_version", "must look like key.path=v1,v2,v3"),
        ("producers.client_version=4.9.7,,5.3.3", "must look like"),
        ("producers.client_version=4.9.7,4.9.7", "repeats a value"),
        ('producers.group="a b",c', "not a usable variant name"),
    ],
)
def test_sweep_refuses_bad_axes(sweep: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        sweep_variants([sweep])


def test_build_scenarios_validates_each_variant_and_names_it() -> None:
    ok = parse_variants(["a:producers.send_latency_fault_enable=false", "b:producers.client_version=5.3.3"])
    base, scenarios = build_scenarios(BROWNOUT, SMALL, ok)
    assert base.workload.messages == 400
    assert scenarios["b"].producers.client_version == "5.3.3"
    assert not scenarios["a"].producers.send_latency_fault_enable
    with pytest.raises(
        ScenarioError, match=r"^variant b: producers.retry_times_when_send_failed must be between"
    ):
        build_scenarios(BROWNOUT, SMALL, parse_variants(["a", "b:producers.retry_times_when_send_failed=-1"]))
    with pytest.raises(ScenarioError, match="variant b: must not change seed, workload"):
        build_scenarios(BROWNOUT, SMALL, parse_variants(["a", "b:workload.rate_per_s=900"]))
    with pytest.raises(ScenarioError, match="at least 2 variants"):
        build_scenarios(BROWNOUT, SMALL, parse_variants(["a"]))
    with pytest.raises(ScenarioError, match="unique"):
        build_scenarios(BROWNOUT, SMALL, [Variant("a"), Variant("a", ("seed=3",))])


def test_variants_that_change_only_sending_share_the_very_same_messages() -> None:
    _, sc = build_scenarios(
        BROWNOUT,
        SMALL,
        parse_variants(
            [
                "base",
                "off:producers.send_latency_fault_enable=false",
                "retries:producers.retry_times_when_send_failed=5",
                "timeout:producers.send_msg_timeout_ms=500",
                "v5:producers.client_version=5.3.3",
            ]
        ),
    )
    base = workload.generate(sc["base"])
    for name in ("off", "retries", "timeout"):
        assert message_signature(sc[name]) == message_signature(sc["base"])
        assert workload.generate(sc[name]).equals(base), name
    # 5.x keeps the trailing property separator: other messages, but the same arrivals
    assert message_signature(sc["v5"]) != message_signature(sc["base"])
    v5 = workload.generate(sc["v5"])
    assert not v5.equals(base)
    assert v5.column("born_ts_ms").equals(base.column("born_ts_ms"))
    assert np.all(np.asarray(v5.column("properties_size")) - np.asarray(base.column("properties_size")) == 1)
    assert signature_groups(sc) == [["base", "off", "retries", "timeout"], ["v5"]]


SUMMARY_ROWS = [  # a few run_summary columns of two variants; the baseline lacks broker-c
    {"variant": "off", "scope": "all", "messages": 100, "latency_p99_ms": 20.0, "queue_gini": None},
    {"variant": "off", "scope": "broker-b", "messages": 40, "latency_p99_ms": 0.0, "queue_gini": 0.1},
    {"variant": "on", "scope": "all", "messages": 100, "latency_p99_ms": 15.0, "queue_gini": 0.2},
    {"variant": "on", "scope": "broker-b", "messages": 30, "latency_p99_ms": 5.0, "queue_gini": 0.3},
    {"variant": "on", "scope": "broker-c", "messages": 10, "latency_p99_ms": 7.5, "queue_gini": 0.0},
]
VARIANTS = (Variant("off", ("producers.send_latency_fault_enable=false",)), Variant("on", ()))


def summary_table(rows: list[dict] = SUMMARY_ROWS) -> pa.Table:
    """run_summary rows keyed by variant, every metric (those not given: 1 for the first row, else 0)."""
    from rocketsim.tables import schemas

    fields = [pa.field("variant", pa.string(), nullable=False), *schemas.data_schema(schemas.RUN_SUMMARY)]
    filled = [{f.name: r.get(f.name, 1 if i == 0 else 0) for f in fields} for i, r in enumerate(rows)]
    return pa.Table.from_pylist(filled, pa.schema(fields))


def test_comparison_table_puts_each_metric_beside_the_baseline() -> None:
    rows = comparison_table(summary_table(), VARIANTS, "off")
    assert rows.num_rows == len(SUMMARY_ROWS) * len(COMPARED_METRICS)
    by = {(r["variant"], r["scope"], r["metric"]): r for r in rows.to_pylist()}
    p99 = by[("on", "all", "latency_p99_ms")]
    assert (p99["value"], p99["baseline_value"], p99["delta"], p99["delta_pct"]) == (15.0, 20.0, -5.0, -25.0)
    assert p99["baseline"] == "off" and p99["overrides"] == []
    assert by[("off", "all", "messages")]["overrides"] == ["producers.send_latency_fault_enable=false"]
    zero = by[("on", "broker-b", "latency_p99_ms")]  # baseline 0: no percentage
    assert (zero["delta"], zero["delta_pct"]) == (5.0, None)
    gini = by[("on", "all", "queue_gini")]  # the baseline's value is null
    assert (gini["value"], gini["baseline_value"], gini["delta"], gini["delta_pct"]) == (
        0.2,
        None,
        None,
        None,
    )
    new = by[("on", "broker-c", "messages")]  # a scope the baseline does not have
    assert (new["value"], new["baseline_value"], new["delta"]) == (10.0, None, None)


def test_comparison_table_holds_every_metric_of_every_scope_beside_the_baseline() -> None:
    """Row by row, from the definition: one row per (variant, scope, run_summary metric), its value as a
    double, the baseline variant's value of that scope and metric (None if it has none),
    ``delta = value - baseline_value`` and ``delta_pct = 100 delta / |baseline_value|`` (None when that is
    0 or a value is missing), the variant's overrides; on the rows above and on the same rows with every
    latency_p99_ms negated (|baseline_value|: the sign of delta_pct is the change's)."""
    negated = [{**r, "latency_p99_ms": -r["latency_p99_ms"]} for r in SUMMARY_ROWS]
    metrics = [f.name for f in schemas.RUN_SUMMARY if f.name not in ("run_id", "scope")]
    overrides = {v.name: list(v.overrides) for v in VARIANTS}
    for summary in (summary_table(), summary_table(negated)):
        given = {(r["variant"], r["scope"]): r for r in summary.to_pylist()}
        rows = comparison_table(summary, VARIANTS, "off").to_pylist()
        assert sorted((r["variant"], r["scope"], r["metric"]) for r in rows) == sorted(
            (variant, scope, m) for variant, scope in given for m in metrics
        )
        for r in rows:
            value = given[r["variant"], r["scope"]][r["metric"]]
            base = given.get(("off", r["scope"]), {}).get(r["metric"])
            delta = None if value is None or base is None else value - base
            pct = None if delta is None or base == 0 else 100.0 * delta / abs(base)
            want = [None if x is None else float(x) for x in (value, base, delta, pct)]
            assert [r["value"], r["baseline_value"], r["delta"], r["delta_pct"]] == want, r
            assert (r["baseline"], r["overrides"]) == ("off", overrides[r["variant"]])


def test_compare_args_exit_2_before_spark_on_a_bad_variant(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_compare_args(
            [
                "--scenario",
                BROWNOUT,
                "--variant",
                "on:producers.send_latency_fault_enable=maybe",
                "--variant",
                "off:producers.send_latency_fault_enable=false",
            ]
        )
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert (
        err
        == "ScenarioError: variant on: producers.send_latency_fault_enable must be true or false, got 'maybe'"
    )
    with pytest.raises(SystemExit) as exc:
        parse_compare_args(["--scenario", BROWNOUT, "--variant", "a", "b", "--baseline", "c"])
    assert exc.value.code == 2
    assert "--baseline must name a variant (a, b), got 'c'" in capsys.readouterr().err


def test_compare_args_default_ids_baseline_and_sweep() -> None:
    args, base, scenarios = parse_compare_args(
        [
            "--scenario",
            BROWNOUT,
            "--set",
            "workload.messages=100",
            "--set",
            "workload.rate_per_s=0.5",  # the 100 messages over brownout.toml's fault
            "--sweep",
            "producers.client_version=4.9.8,5.3.3",
        ]
    )
    assert args.run_id == f"{base.run_id}-compare" == "brownout-s11-compare"
    assert args.baseline == "client_version=4.9.8"
    assert list(scenarios) == ["client_version=4.9.8", "client_version=5.3.3"]


def test_the_printed_comparison_puts_variants_side_by_side_with_honest_changes() -> None:
    """Send latency named as such, a broker's latency its attempts', delivery outcomes and failures by
    class shown; a change from a zero or near-zero baseline as it is (it read "+98529.8%"), a rate's in
    percentage points."""
    rows = [
        ("all", "messages", "off", 1000.0),
        ("all", "messages", "on", 1000.0),
        ("all", "latency_p99_ms", "off", 200.0),
        ("all", "latency_p99_ms", "on", 150.0),
        ("all", "queue_gini", "off", 0.00016),
        ("all", "queue_gini", "on", 0.062),
        ("all", "isolations", "off", 0.0),
        ("all", "isolations", "on", 28.0),
        ("all", "duplicates", "off", 3.0),
        ("all", "duplicates", "on", 5.0),
        ("all", "failed_timeout", "off", 15.0),
        ("all", "failed_timeout", "on", 6.0),
        ("all", "attempt_error_rate", "off", 0.05),
        ("all", "attempt_error_rate", "on", 0.02),
        ("broker-b", "sends", "off", 250.0),
        ("broker-b", "sends", "on", 200.0),
        ("broker-b", "attempt_latency_p99_ms", "off", 3001.0),
        ("broker-b", "attempt_latency_p99_ms", "on", 3001.0),
    ]
    table = [{"scope": s, "metric": m, "variant": v, "value": x} for s, m, v, x in rows]
    text = comparison_text(table, ["off", "on"], "off", "cmp-1")
    lines = text.splitlines()
    assert "comparison cmp-1" in lines[1] and "changes vs off" in lines[1]
    assert lines[2].split() == ["metric", "off", "(baseline)", "on"]

    def line(label: str) -> list[str]:
        return next(x for x in lines if x.strip().startswith(label)).split()

    assert line("send p99 (ms)") == ["send", "p99", "(ms)", "200.0", "150.0", "(-25.0%)"]
    assert line("queue Gini") == ["queue", "Gini", "0.000", "0.062", "(+0.062)"]
    assert line("isolations") == ["isolations", "0", "28", "(+28)"]
    assert line("duplicate copies") == ["duplicate", "copies", "3", "5", "(+66.7%)"]
    assert line("timeout") == ["timeout", "15", "6", "(-60.0%)"]
    assert line("failed attempts") == ["failed", "attempts", "5.00%", "2.00%", "(-3.00", "pp)"]
    assert line("broker-b attempts") == ["broker-b", "attempts", "250", "200", "(-20.0%)"]
    assert line("broker-b attempt p99 (ms)")[-3:] == ["3,001.0", "3,001.0", "(+0.0%)"]
    assert "%)" not in line("lost (told sent, not stored)")  # no such metric: "-"


def test_analysis_core_modules_import_no_pyspark() -> None:
    import subprocess
    import sys

    code = (
        "import sys, tests.analysis, rocketsim.scenario.variants, rocketsim.warehouse.read; "
        "import rocketsim.present.plots, rocketsim.present.frames; "
        "import rocketsim.present.explore, rocketsim.present.report; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pyspark'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.spark
def test_compare_runs_a_coupled_variant_whole_beside_open_ones(spark, tmp_path: Path) -> None:
    """cascade.toml (broker-b browning out near capacity): the open-loop brokers never push back, the
    closed-loop ones (``brokers.coupling = joint``, one step of the job, run whole) shed load with
    ``[TIMEOUT_CLEAN_QUEUE]`` and their p99 rises; both variants send every message."""
    from rocketsim.spark.compare import run_compare
    from rocketsim.warehouse.read import read_pandas

    cascade = str(Path(BROWNOUT).with_name("cascade.toml"))
    args, base, scenarios = parse_compare_args(
        ["--scenario", cascade, "--set", "workload.duration_s=50"]
        + ["--variant", "open:brokers.coupling=open", "--variant", "joint:brokers.coupling=joint"]
        + ["--variant", "open_off:brokers.coupling=open"]
        + ["--variant", "open_off:producers.send_latency_fault_enable=false"]
        + ["--warehouse", str(tmp_path), "--partitions", "2", "--quiet"]
    )
    run_compare(spark, args, base, scenarios)
    rows = read_pandas(tmp_path, "comparisons", args.run_id)
    value = rows[rows.scope == "all"].set_index(["variant", "metric"])["value"]
    total = base.workload.total_messages()
    assert (
        value[("open", "messages")]
        == value[("joint", "messages")]
        == value[("open_off", "messages")]
        == total
    )
    busy = {v: sum(value[(v, c)] for c in schemas.BUSY_COLUMNS) for v in ("open", "joint", "open_off")}
    assert busy["open"] == 0 == busy["open_off"] and busy["joint"] > 100
    assert value[("joint", "busy_timeout_clean_queue")] > 100
    assert value[("joint", "latency_p99_ms")] > 2 * value[("open", "latency_p99_ms")]
    windows = read_pandas(tmp_path, "comparison_windows", args.run_id)
    assert windows.groupby("variant").sends.sum().to_dict() == {
        v: value[(v, "attempts")] for v in ("open", "joint", "open_off")
    }
