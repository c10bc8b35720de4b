"""The three questions a new user asked, rerun through the jobs at small sizes (tests/data/questions/):

1. a 2-minute hang of broker-b on client 4.9.8 against 5.3.3 (``jobs/compare.py``);
2. how many brokers for 20,000 msg/s at p99 < 50 ms with one degraded (``jobs/capacity.py``);
3. a 6-broker fleet with a 5-minute brown-out (``jobs/pipeline.py``).

Each answer must be honest: a broker's latency over every attempt sent to it, the fault-window view, a
capacity answer that converged or says it did not.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow.compute as pc
import pytest

from rocketsim import stage
from rocketsim.scenario import capacity
from rocketsim.spark.cli import parse_capacity_args, parse_compare_args, parse_job_args
from rocketsim.tables import summaries
from rocketsim.warehouse.read import read_arrow, read_pandas

QUESTIONS = Path(__file__).resolve().parent / "data" / "questions"
pytestmark = pytest.mark.spark


def test_a_hang_on_4_9_8_against_5_3_3(spark, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The hung broker's attempts time out (3 s): its latency says so on both lines, where the stored
    results' send latency said 6 ms; the fault-window view sets the hang against the rest."""
    from rocketsim.spark.compare import run_compare

    argv = ["--scenario", str(QUESTIONS / "hang.toml"), "--warehouse", str(tmp_path), "--partitions", "2"]
    argv += ["--set", "workload.rate_per_s=20", "--sweep", "producers.client_version=4.9.8,5.3.3"]
    args, base, scenarios = parse_compare_args(argv)
    run_compare(spark, args, base, scenarios)
    rows = read_pandas(tmp_path, "comparisons", args.run_id).set_index(["variant", "scope", "metric"])
    for v in scenarios:
        assert rows.loc[(v, "broker-b", "attempt_latency_p99_ms"), "value"] == 3001.0, v
        assert rows.loc[(v, "broker-b", "failed_timeout"), "value"] > 0, v
    fw = read_pandas(tmp_path, "comparison_fault_windows", args.run_id).set_index(
        ["variant", "scope", "period"]
    )
    for v in scenarios:
        during, outside = fw.loc[(v, "broker-b", "during")], fw.loc[(v, "broker-b", "outside")]
        assert during.attempt_error_rate == 1.0 and outside.attempt_error_rate == 0.0, v
    out = capsys.readouterr().out
    assert "broker-b attempt p99 (ms)" in out and "fault 0: hang broker-b, 30-150 s" in out
    assert "duplicate copies" in out and "  timeout" in out


def test_a_fleet_with_a_brown_out(spark, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The one pass writes fault_windows (reconciled with the run), and prints it."""
    from rocketsim.spark.pipeline import run_pipeline

    argv = ["--scenario", str(QUESTIONS / "fleet_brownout.toml"), "--warehouse", str(tmp_path)]
    argv += ["--set", "workload.rate_per_s=10", "--partitions", "2"]
    args, sc = parse_job_args(argv, "jobs/pipeline.py", None)
    run_pipeline(spark, args, sc)
    fw = read_pandas(tmp_path, "fault_windows", args.run_id).set_index(["scope", "period"])
    attempts = read_arrow(str(tmp_path), "send_attempts", args.run_id)
    assert fw.loc[("all", "during"), "sends"] + fw.loc[("all", "outside"), "sends"] == attempts.num_rows
    c = attempts.filter(pc.equal(attempts.column("broker"), "broker-c"))
    start = c.column("start_ts_ms").to_numpy()
    assert fw.loc[("broker-c", "during"), "sends"] == ((start >= 60_000) & (start < 360_000)).sum()
    assert (
        fw.loc[("broker-c", "during"), "attempt_latency_p99_ms"]
        > 10 * fw.loc[("broker-c", "outside"), "attempt_latency_p99_ms"]
    )
    out = capsys.readouterr().out
    assert "fault 0: slowdown broker-c, 60-360 s" in out and "14 tables:" in out
    assert "simulated span: 0-420.0 s (4,200 messages at 10 msg/s)" in out


def test_brokers_for_20k_per_second_with_one_degraded(
    spark, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every size's answer converged or says it did not: here the iterative rounds stop at their limit,
    so each size runs again with the exact joint loop, whose figures are the direct joint run's."""
    from rocketsim.spark.capacity import run_capacity

    argv = ["--scenario", str(QUESTIONS / "capacity_degraded.toml"), "--brokers", "3,4"]
    argv += ["--target-p99-ms", "50", "--set", "workload.duration_s=1.0", "--set", "faults.0.end_s=1.0"]
    argv += ["--warehouse", str(tmp_path), "--chart", str(tmp_path / "c.png"), "--window-ms", "500"]
    args, base, scenarios = parse_capacity_args(argv)
    rows = run_capacity(spark, args, base, scenarios).to_pylist()
    out = capsys.readouterr().out
    for r in rows:
        assert r["coupling_rounds"] is not None, r["variant"]
        if r["coupling_residual"]:
            assert r["coupling"] == "joint" and r["converged"], r["variant"]
            assert f"{r['variant']} did not converge (iterative, {r['coupling_rounds']} rounds" in out
        assert r["limited_by"] and r["peak_writer_busy"] <= 1.0
    assert any(r["coupling_residual"] for r in rows)  # the question's case: it did not converge
    again = next(r for r in rows if r["coupling"] == "joint")
    exact = dataclasses.replace(scenarios[again["variant"]], broker_coupling="joint")
    joint = summaries.summary_tables(stage.whole_run_aggregates(exact, again["variant"], 500).aggregates)
    (every,) = [r for r in joint["run_summary"].to_pylist() if r["scope"] == "all"]
    assert again["latency_p99_ms"] == every["latency_p99_ms"] and again["failed"] == every["failed"]
    assert capacity.answer(read_arrow(str(tmp_path), "capacity", args.run_id).sort_by("brokers")) in out
