"""The shipped pipeline benchmark runs whole processes and reports what it measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rocketsim.bench import pipeline

pytestmark = pytest.mark.spark


def test_bench_pipeline_times_the_job_and_the_floor_as_processes(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    cmd = [sys.executable, "-m", "rocketsim.bench", "pipeline", "--sizes", "3000", "--modes", "sync"]
    flags = ["--compare-size", "0", "--hot-share", "0", "--no-one-producer", "--json", str(out)]
    flags += ["--coupled-sizes", "3000", "--summary-sizes", ""]
    done = subprocess.run([*cmd, *flags], capture_output=True, text=True, timeout=600, check=False)
    report = json.loads(out.read_text())
    row, open_, coupled = report["rows"]
    assert done.returncode == (0 if row["met"] and coupled["met"] else 1), done.stderr[-2000:]
    # the closed-loop model's cost: capacity_steady.toml's iterative rounds against its open-loop run
    assert (open_["case"], open_["target"], open_["against"]) == ("capacity open", None, "floor")
    assert (coupled["case"], coupled["messages"], coupled["target"]) == ("capacity iterative", 3000, 1.5)
    assert coupled["ratio"] == pytest.approx(coupled["job_s"] / open_["job_s"], rel=0.02)
    assert coupled["stages_s"]["iterative rounds"] >= 2 and coupled["floor_s"] == row["floor_s"]
    assert "capacity iterative at 3,000" in done.stdout and "target <= 1.5 of capacity open" in done.stdout
    assert (row["case"], row["messages"], row["target"]) == ("brownout sync", 3000, pipeline.PIPELINE_TARGET)
    assert row["floor_s"] > 0 and row["job_s"] > 0
    assert row["ratio"] == pytest.approx(row["job_s"] / row["floor_s"], rel=0.02)
    # the stage breakdown is read off the pipeline's own output: its stages sum to less than the process
    stages = row["stages_s"]
    assert {"producers", "brokers", "driver", "commits", "rest of the process"} <= set(stages)
    assert 0 < sum(stages[k] for k in ("producers", "brokers", "driver", "commits")) < row["job_s"]
    assert row["driver_peak_mib"] > 100 and row["worker_peak_mib"] > 10
    assert ("PASS" if row["met"] else "FAIL") + " brownout sync at 3,000" in done.stdout
    assert "cores" in report["machine"]


def test_cases_follow_the_sizes_and_modes() -> None:
    small = pipeline.cases_for(400_000, ["sync", "async"], largest=False, hot_share=0.5, one_producer=True)
    assert [(c.name, c.scenario) for c in small] == [
        ("steady sync", pipeline.STEADY),
        ("steady async", pipeline.STEADY),
    ]
    assert small[1].overrides == (pipeline.ASYNC,)
    big = pipeline.cases_for(10_000_000, ["sync"], largest=True, hot_share=0.5, one_producer=True)
    assert [c.name for c in big] == ["brownout sync", "hot 0.5", "one producer"]
    assert [c.target for c in big] == [pipeline.PIPELINE_TARGET, pipeline.PIPELINE_TARGET, None]
    argv = big[2].argv(Path("/tmp/wh"), "local[2]")
    assert argv[1:3] == ["--master", "local[2]"] and argv[3].endswith("jobs/pipeline.py")
    assert "workload.messages=10000000" in argv and "producers.count=1" in argv


def test_the_large_summaries_only_and_coupled_cases_are_one_flag_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--large adds the 100M case (sync and async) with its floor, the skewed and one-producer cases stay
    at 10M; --coupled-sizes and --summary-sizes add their cases at their size (issue 30)."""
    measured: list[tuple[int, list[tuple[str, float | None, str]]]] = []

    def fake_measure(cases: list, n: int, work: Path, ns: object) -> list:
        measured.append((n, [(c.name, c.target, c.tables) for c in cases]))
        return []

    monkeypatch.setattr(pipeline, "measure", fake_measure)
    monkeypatch.setattr(pipeline, "print_table", lambda rows, master: None)
    flags = ["--sizes", "10000000", "--large", "--compare-size", "0", "--json", "/dev/null"]
    assert pipeline.main([*flags, "--summary-sizes", "2000000", "--coupled-sizes", "2000000"]) == 0
    assert measured == [
        (
            10_000_000,
            [
                ("brownout sync", pipeline.PIPELINE_TARGET, ""),
                ("brownout async", pipeline.PIPELINE_TARGET, ""),
                ("hot 0.5", pipeline.PIPELINE_TARGET, ""),
                ("one producer", None, ""),
            ],
        ),
        (
            pipeline.LARGE,
            [
                ("brownout sync", pipeline.PIPELINE_TARGET, ""),
                ("brownout async", pipeline.PIPELINE_TARGET, ""),
            ],
        ),
        (2_000_000, [("capacity open", None, ""), ("capacity iterative", pipeline.COUPLED_TARGET, "")]),
        (2_000_000, [("summaries only", None, "summary")]),
    ]
    argv = pipeline.summary_case(2_000_000).argv(Path("/tmp/wh"), "local[2]")
    assert argv[-2:] == ["--tables", "summary"]


def test_a_summaries_only_verdict_gives_its_job_and_rate_not_a_ratio() -> None:
    # a summaries-only run has no floor (ratio 0): its line said "0.00x" where it meant its rate
    stages = {"producers": 10.0}
    summary = pipeline.Row("summaries only", 2_000_000, 0.0, 42.5, 0.0, None, 0, stages, min_rate=100_000)
    line = pipeline.verdict(summary)
    assert "0.00x" not in line and "job 42.5 s" in line
    assert line.startswith("PASS summaries only at 2,000,000:") and "producer tasks 200,000 msg/s" in line
    slow = pipeline.Row(
        "summaries only", 2_000_000, 0.0, 42.5, 0.0, None, 0, {"producers": 40.0}, min_rate=100_000
    )
    assert pipeline.verdict(slow).startswith("FAIL")
    floored = pipeline.Row("steady sync", 400_000, 10.0, 14.0, 1.4, 1.6, 28_571)
    assert "1.40x (target <= 1.6)" in pipeline.verdict(floored)
