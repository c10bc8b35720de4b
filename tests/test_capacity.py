"""A capacity sweep (rocketsim.scenario.capacity, rocketsim.spark.capacity, jobs/capacity.py): one variant per
cluster size, each run whole (closed-loop brokers couple its producers), the smallest size meeting the p99
target and the failure bound is the answer."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from rocketsim.scenario import ScenarioError, capacity, load_scenario
from rocketsim.spark.capacity import format_capacity, run_capacity
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


def _summary(sizes: list[tuple[int, int, float]], degraded_p99: float = 20.0) -> pa.Table:
    """run_summary rows of sizes (brokers, failed, p99): "all", and broker-b's (the degraded one)."""
    rows = []
    for n, f, p99 in sizes:
        common = {"variant": f"brokers={n}", "rejected": 0, **dict.fromkeys(schemas.BUSY_COLUMNS, 0)}
        rows.append(
            common
            | {"scope": "all", "messages": 1000, "failed": f, "latency_p99_ms": p99, "latency_p999_ms": p99}
            | {"sends": 1000, "duration_ms": 3_000, "queue_wait_p99_ms": 2.0, "attempt_latency_p99_ms": p99}
        )
        rows.append(
            common
            | {"scope": "broker-b", "messages": 1000 // n, "failed": 0, "latency_p99_ms": None}
            | {"latency_p999_ms": None, "sends": 1000 // n, "duration_ms": 3_000, "queue_wait_p99_ms": 2.0}
            | {"attempt_latency_p99_ms": degraded_p99}
        )
    return pa.Table.from_pylist(rows)


def _sizes(*ns: int) -> dict:
    """Scenarios of cascade.toml at these broker counts, joint (their figures exact)."""
    base = load_scenario(CASCADE)
    return {
        v.name: load_scenario(CASCADE, [*v.overrides, "brokers.coupling=joint"])
        for v in capacity.size_variants(base, capacity.BROKERS, list(ns))
    }


def _windows(variant: str, utilisation: float, window_ms: int = 10_000) -> pa.Table:
    return pa.table(
        {
            "variant": [variant],
            "window_start_ms": [0],
            "window_ms": [window_ms],
            "utilisation": [utilisation],
            "queue_depth_max": [120],
        }
    )


def test_capacity_table_marks_the_smallest_size_meeting_both_bounds() -> None:
    summary = _summary([(3, 50, 400.0), (4, 0, 120.0), (5, 0, 80.0)])
    windows = _windows("brokers=3", 0.99, window_ms=3_000)
    scs = _sizes(3, 4, 5)
    rows = capacity.capacity_table(summary, windows, scs, 150.0, 0.001).to_pylist()
    assert [(r["brokers"], r["meets_target"], r["smallest"]) for r in rows] == [
        (3, False, False),
        (4, True, True),
        (5, True, False),
    ]
    assert rows[0]["failure_rate"] == 0.05 and rows[0]["peak_writer_load"] == 0.99
    assert rows[1]["peak_writer_load"] is None and rows[1]["peak_queue_depth"] is None
    assert rows[0]["degraded_share"] == pytest.approx(333 / 1000)
    assert rows[0]["limited_by"].startswith("the brokers' writers (busiest window offered 99% of a writer")
    assert rows[1]["limited_by"] == "nothing near its limit"
    assert capacity.answer(capacity.capacity_table(summary, windows, scs, 150.0, 0.001)).startswith(
        "smallest cluster meeting p99 <= 150 ms and failures <= 0.100%: brokers=4 (4 brokers x 4 write "
        "queues)"
    )
    assert capacity.answer(capacity.capacity_table(summary, windows, scs, 50.0, 0.001)).startswith(
        "no cluster"
    )


def test_an_overloaded_writer_reads_as_offered_load_and_a_capped_busy_share() -> None:
    """A window's writer time over the window can pass 100% (appends queue into the next window): it is
    the offered load against the writer's capacity, and the busy share is capped at 100%; a run shorter
    than its window is not diluted by the empty rest of it (2.58 over the 3 s the run covers of 10 s)."""
    summary = _summary([(3, 0, 40.0), (4, 0, 30.0)])
    windows = pa.concat_tables([_windows("brokers=3", 0.774), _windows("brokers=4", 0.2)])
    (three, four) = capacity.capacity_table(summary, windows, _sizes(3, 4), 50.0, 0.001).to_pylist()
    assert three["peak_writer_load"] == pytest.approx(2.58) and three["peak_writer_busy"] == 1.0
    assert four["peak_writer_load"] == pytest.approx(0.2 * 10 / 3) and four["peak_writer_busy"] < 1.0
    assert "offered 258% of a writer's capacity" in three["limited_by"]
    assert "writer load" in format_capacity(
        capacity.capacity_table(summary, windows, _sizes(3, 4), 50.0, 0.001)
    )


def test_what_limits_a_size_is_said() -> None:
    """The degraded broker (its attempts' p99 over the target) and the client (sends waiting for a
    sender thread) name themselves."""
    summary = _summary([(3, 0, 40.0), (4, 0, 30.0)], degraded_p99=3_001.0)
    summary = summary.set_column(
        summary.schema.get_field_index("queue_wait_p99_ms"),
        "queue_wait_p99_ms",
        pa.array([900.0, 900.0, 2.0, 2.0]),
    )
    rows = capacity.capacity_table(summary, _windows("brokers=3", 0.1), _sizes(3, 4), 50.0, 0.001).to_pylist()
    assert "the degraded broker broker-b (33% of attempts, attempt p99 3,001 ms)" in rows[0]["limited_by"]
    assert "the client (sends wait 900 ms for a sender thread" in rows[0]["limited_by"]
    assert "the client" not in rows[1]["limited_by"]


def test_a_size_that_did_not_converge_is_flagged_and_answered_only_when_run_again_exactly() -> None:
    """The iterative coupling stopped at its round limit (residual > 0): the size's figures are not
    trusted. Run again with the joint loop, the size answers (coupling joint, the rounds and residual
    kept); otherwise it answers nothing, and no larger size can be called the smallest."""
    summary = _summary([(3, 0, 40.0), (4, 0, 30.0)])
    scs = _sizes(3, 4)
    windows = _windows("brokers=3", 0.5)
    stuck = {
        "brokers=3": capacity.Coupling("iterative", 12, 53_343),
        "brokers=4": capacity.Coupling("iterative", 3, 0),
    }
    rows = capacity.capacity_table(summary, windows, scs, 50.0, 0.001, stuck)
    three, four = rows.to_pylist()
    assert (three["converged"], three["meets_target"], three["smallest"]) == (False, None, False)
    assert (four["converged"], four["meets_target"], four["smallest"]) == (True, True, False)
    assert (three["coupling_rounds"], three["coupling_residual"]) == (12, 53_343)
    text = capacity.answer(rows)
    assert text.startswith("no answer: brokers=3 did not converge")
    assert "brokers=3 did not converge (iterative, 12 rounds, residual 53,343): no answer for it" in text
    again = dict(stuck, **{"brokers=3": capacity.Coupling("joint", 12, 53_343)})
    rows = capacity.capacity_table(summary, windows, scs, 50.0, 0.001, again)
    assert rows.column("smallest").to_pylist() == [True, False]
    assert "its figures are the exact joint loop's" in capacity.answer(rows)
    assert "joint (again)" in format_capacity(rows)
    sc = scs["brokers=3"]
    assert capacity.exact_rerun(sc).coupling == "joint"
    big = load_scenario(
        CASCADE, ["cluster.brokers=['broker-a','broker-b','broker-c']", "workload.duration_s=1000"]
    )
    assert capacity.exact_rerun(big) is None  # 400,000 messages: beyond the joint loop's size


def test_an_open_loop_sweep_is_refused_before_spark(capsys: pytest.CaptureFixture[str]) -> None:
    """Open-loop latency ignores load: every size would answer alike (it answered "1 broker" for 20,000
    msg/s)."""
    argv = ["--scenario", str(CASCADE), "--brokers", "4,5", "--target-p99-ms", "50"]
    with pytest.raises(SystemExit) as exc:
        parse_capacity_args([*argv, "--set", "brokers.coupling=open"])
    assert exc.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "brokers.coupling must be iterative or joint for a capacity sweep, got 'open'" in line
    assert "open-loop broker latency ignores load" in line


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
    assert rows[0]["busy_rejections"] > 100 and rows[0]["peak_writer_busy"] > 0.95
    assert rows[0]["coupling"] == "joint" and rows[0]["converged"] and rows[0]["coupling_rounds"] is None
    table = read_arrow(str(tmp_path), "capacity", args.run_id)
    assert table.num_rows == 2 and (tmp_path / "chart.png").stat().st_size > 10_000
    assert (
        "smallest cluster meeting p99 <= 1000 ms and failures <= 1.000%: brokers=6" in capsys.readouterr().out
    )
