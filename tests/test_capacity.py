"""A capacity sweep (rocketsim.scenario.capacity, rocketsim.spark.capacity, jobs/capacity.py): one variant per
cluster size, each run whole (closed-loop brokers couple its producers), the smallest size meeting the p99
target and the failure bound is the answer."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from rocketsim.scenario import ScenarioError, capacity, load_scenario
from rocketsim.spark.capacity import run_capacity
from rocketsim.spark.cli import parse_capacity_args
from rocketsim.spark.launch import PublishedRunError, describe_failure
from rocketsim.tables import schemas
from rocketsim.warehouse.read import read_arrow

ROOT = Path(__file__).resolve().parents[1]
CASCADE = ROOT / "conf" / "scenarios" / "cascade.toml"
STEADY_FILE = ROOT / "conf" / "scenarios" / "steady.toml"


def test_size_variants_grow_the_cluster_keeping_its_brokers() -> None:
    sc = load_scenario(CASCADE)
    v = capacity.size_variants(sc, capacity.BROKERS, [6, 4, 5])
    assert [x.name for x in v] == ["brokers=4", "brokers=5", "brokers=6"]
    grown = load_scenario(CASCADE, list(v[-1].overrides))
    assert grown.cluster.brokers == ("broker-a", "broker-b", "broker-c", "broker-d", "broker-e", "broker-f")
    assert capacity.broker_names(["x", "broker-a"], 3) == ["x", "broker-a", "broker-b"]
    q = capacity.size_variants(sc, capacity.QUEUES, [2, 8])
    assert [x.overrides for x in q] == [("cluster.write_queues=2",), ("cluster.write_queues=8",)]
    with pytest.raises(ScenarioError, match="at least 2 distinct sizes"):
        capacity.size_variants(sc, capacity.BROKERS, [4, 4])
    # past the 42 lettered spare names (this was StopIteration), up to MAX_BROKERS
    names = capacity.broker_names(sc.cluster.brokers, 50)
    assert len(set(names)) == 50 and names[-1] == "broker-50"
    big = load_scenario(CASCADE, list(capacity.size_variants(sc, capacity.BROKERS, [4, 60])[-1].overrides))
    assert len(big.cluster.brokers) == 60
    with pytest.raises(ScenarioError, match="--brokers sizes must be at most 1024, got 5000"):
        capacity.size_variants(sc, capacity.BROKERS, [4, 5000])


def test_capacity_table_marks_the_smallest_size_meeting_both_bounds() -> None:
    summary = pa.Table.from_pylist(
        [
            {
                "variant": f"brokers={n}",
                "scope": "all",
                "messages": 1000,
                "failed": f,
                "rejected": 0,
                "latency_p99_ms": p99,
                "latency_p999_ms": p99,
                "sends": 1000,
                **dict.fromkeys(schemas.BUSY_COLUMNS, 0),
            }
            for n, f, p99 in ((3, 50, 400.0), (4, 0, 120.0), (5, 0, 80.0))
        ]
    )
    windows = pa.table({"variant": ["brokers=3"], "utilisation": [0.99]})
    scs = {
        f"brokers={n}": load_scenario(CASCADE, list(v.overrides))
        for n, v in zip(
            (3, 4, 5),
            capacity.size_variants(load_scenario(CASCADE), capacity.BROKERS, [3, 4, 5]),
            strict=True,
        )
    }
    rows = capacity.capacity_table(summary, windows, scs, 150.0, 0.001).to_pylist()
    assert [(r["brokers"], r["meets_target"], r["smallest"]) for r in rows] == [
        (3, False, False),
        (4, True, True),
        (5, True, False),
    ]
    assert (
        rows[0]["failure_rate"] == 0.05
        and rows[0]["max_utilisation"] == 0.99
        and rows[1]["max_utilisation"] is None
    )
    assert capacity.answer(capacity.capacity_table(summary, windows, scs, 150.0, 0.001)).startswith(
        "smallest cluster meeting p99 <= 150 ms and failures <= 0.100%: brokers=4"
    )
    assert capacity.answer(capacity.capacity_table(summary, windows, scs, 50.0, 0.001)).startswith(
        "no cluster"
    )


def test_bad_sweeps_exit_2_before_spark(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["--scenario", str(CASCADE), "--brokers", "1,2", "--target-p99-ms", "100"],  # broker-b's fault: none
        ["--scenario", str(CASCADE), "--brokers", "4,x", "--target-p99-ms", "100"],
        ["--scenario", str(CASCADE), "--brokers", "4,5", "--target-p99-ms", "0"],
    ):
        with pytest.raises(SystemExit) as exc:
            parse_capacity_args(argv)
        assert exc.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and "variant brokers=1: faults[0].broker must name a broker" in err[0]


def test_a_chart_it_cannot_write_is_refused_before_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The chart is written after the sweep is published: a bad --chart published the sweep, then failed
    saying nothing was visible. A folder named as the chart wrote <folder>.png beside it."""
    (tmp_path / "charts").mkdir()
    base = ["--scenario", str(CASCADE), "--brokers", "4,5", "--target-p99-ms", "100"]
    base += ["--warehouse", str(tmp_path / "wh")]
    for chart, line in (
        (
            str(tmp_path / "charts"),
            f"ScenarioError: --chart must name a PNG file, not a folder, got '{tmp_path}/charts'",
        ),
        (
            "/sys/rocketsim/c.png",
            "ScenarioError: --chart's folder must be a folder this job can write (/sys, ",
        ),
        (
            str(STEADY_FILE / "c.png"),
            "ScenarioError: --chart's folder must be a folder, not a file, got ",
        ),
    ):
        with pytest.raises(SystemExit) as exc:
            parse_capacity_args([*base, "--chart", chart])
        err = capsys.readouterr().err.splitlines()
        assert exc.value.code == 2 and len(err) == 1 and err[0].startswith(line), err
    assert not (tmp_path / "wh").exists() and not (tmp_path / "charts.png").exists()


def test_a_chart_that_fails_after_the_sweep_is_published_says_the_sweep_is_published() -> None:
    exc = PublishedRunError("the chart could not be written to /x/c.png: Read-only file system")
    line, known = describe_failure(exc, "wh", "s1")
    assert known and line == (
        "error: the chart could not be written to /x/c.png: Read-only file system "
        "(run s1 is published, whole)"
    )


@pytest.mark.spark
def test_capacity_job_sweeps_coupled_variants_in_one_spark_job(spark, tmp_path: Path, capsys) -> None:
    """cascade.toml (broker-b browning out, the fault strategy moving its traffic): four brokers shed
    load ([TIMEOUT_CLEAN_QUEUE]), six do not."""
    argv = [
        "--scenario",
        str(CASCADE),
        "--brokers",
        "4,6",
        "--target-p99-ms",
        "1000",
        "--max-failure-rate",
        "0.01",
    ]
    argv += [
        "--set",
        "workload.duration_s=50",
        "--set",
        "brokers.coupling=joint",
        "--warehouse",
        str(tmp_path),
    ]
    argv += ["--chart", str(tmp_path / "chart.png"), "--quiet"]
    args, base, scenarios = parse_capacity_args(argv)
    rows = run_capacity(spark, args, base, scenarios).to_pylist()
    assert [(r["brokers"], r["meets_target"], r["smallest"]) for r in rows] == [
        (4, False, False),
        (6, True, True),
    ]
    assert rows[0]["busy_rejections"] > 100 and rows[0]["max_utilisation"] > 0.95
    table = read_arrow(str(tmp_path), "capacity", args.run_id)
    assert table.num_rows == 2 and (tmp_path / "chart.png").stat().st_size > 10_000
    assert (
        "smallest cluster meeting p99 <= 1000 ms and failures <= 1.000%: brokers=6" in capsys.readouterr().out
    )
