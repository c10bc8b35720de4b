"""jobs/export_omb.py on real runs: a run made by the pipeline and a comparison made by jobs/compare.py,
every field of the files checked against the run's own send_results (the readable oracle of
tests/omb_oracle.py), the files read as OMB's bin/create_charts.py reads them, and a comparison's
variant equal to the plain run of the same scenario."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from omb_oracle import check_quantile_map, create_charts_reading, expected

from rocketsim.omb.result import FIELD_ORDER
from rocketsim.warehouse.read import read_arrow

SCENARIO = """
name = "ombcase"
seed = 5

[cluster]
brokers = ["broker-a", "broker-b"]
write_queues = 2

[producers]
count = 3
threads = 2
client_version = "5.3.3"
send_mode = { sync = 0.7, async = 0.3 }
send_msg_timeout_ms = 800

[workload]
messages = 2400
rate_per_s = 80.0
invalid = { bad_topic = 0.01 }

[brokers.default]
errors = { system_busy = 0.01, flush_disk_timeout = 0.02 }

[[faults]]
broker = "broker-b"
kind = "slowdown"
start_s = 12.0
end_s = 25.0
factor = 400.0
"""
NAME = re.compile(r"^ombcase-(rocketsim(-[a-z_]+)?)-\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d\.json$")


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A run and a comparison (the scenario as it is, and with the fault strategy on) in one warehouse."""
    from rocketsim.spark.cli import parse_compare_args, parse_job_args
    from rocketsim.spark.compare import run_compare
    from rocketsim.spark.pipeline import run_pipeline

    tmp = tmp_path_factory.mktemp("omb")
    scenario = tmp / "ombcase.toml"
    scenario.write_text(SCENARIO)
    common = ["--scenario", str(scenario), "--warehouse", str(tmp / "wh"), "--partitions", "2", "--quiet"]
    args, sc = parse_job_args(common, "jobs/pipeline.py", None)
    run_pipeline(spark, args, sc)
    cargs, base, scenarios = parse_compare_args(
        [*common, "--variant", "as_is", "--variant", "fault_on:producers.send_latency_fault_enable=true"]
    )
    run_compare(spark, cargs, base, scenarios)
    return tmp / "wh", args.run_id, cargs.run_id


def _job():  # noqa: ANN202 - the module of jobs/export_omb.py
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "export_omb", Path(__file__).parents[1] / "jobs" / "export_omb.py"
    )
    job = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(job)  # type: ignore[union-attr]
    return job


def _export(warehouse: Path, run_id: str, out: Path, *extra: str) -> list[dict]:
    assert _job().main(["--warehouse", str(warehouse), "--run-id", run_id, "--out", str(out), *extra]) == 0
    files = sorted(out.iterdir())
    assert all(NAME.match(f.name) for f in files), [f.name for f in files]
    return [json.loads(f.read_text()) for f in files]


@pytest.mark.spark
def test_a_runs_file_has_omb_fields_counted_from_its_own_sends(runs, tmp_path: Path) -> None:
    warehouse, run_id, _ = runs
    (result,) = _export(warehouse, run_id, tmp_path)
    results = read_arrow(warehouse, "send_results", run_id)
    want = expected(results)
    assert list(result) == list(FIELD_ORDER)
    for name, values in want.items():
        if not name.startswith("_"):
            assert result[name] == values, name
    n = len(result["publishRate"])
    assert n >= 4 and all(len(result[f]) == n for f in FIELD_ORDER if isinstance(result[f], list))
    assert (
        sum(result["publishErrorRate"]) * 10
        == sum(1 for s in results.column("status").to_pylist() if s in ("FAILED", "REJECTED"))
        > 0
    )
    # the slowdown (x400 on broker-b from 12 s to 25 s) shows in the windows its sends end in
    assert result["publishLatency99pct"][1] > 10 * result["publishLatency99pct"][0]
    check_quantile_map(result["aggregatedPublishLatencyQuantiles"], want["_publishLatency_all"], True)
    check_quantile_map(
        result["aggregatedPublishDelayLatencyQuantiles"], want["_publishDelayLatency_all"], False
    )
    assert (result["workload"], result["driver"], result["partitions"], result["producersPerTopic"]) == (
        "ombcase", "rocketsim", 4, 3
    )  # fmt: skip
    charts = create_charts_reading([result])
    assert len(charts) == 10


@pytest.mark.spark
def test_a_comparisons_variants_are_its_runs_sends_simulated_again(runs, tmp_path: Path) -> None:
    warehouse, run_id, comparison = runs
    (plain,) = _export(warehouse, run_id, tmp_path / "run")
    as_is, fault_on = _export(warehouse, comparison, tmp_path / "cmp", "--warmup-s", "0")
    assert (as_is["driver"], fault_on["driver"]) == ("rocketsim-as_is", "rocketsim-fault_on")
    assert {k: v for k, v in as_is.items() if k != "driver"} == {
        k: v for k, v in plain.items() if k != "driver"
    }
    messages = 2400  # every message ends in some window, published or not
    for variant in (as_is, fault_on):
        assert round(10 * (sum(variant["publishRate"]) + sum(variant["publishErrorRate"]))) == messages
    create_charts_reading([plain, as_is, fault_on])  # one workload, three lines


@pytest.mark.spark
def test_a_warm_up_leaves_out_whole_windows(runs, tmp_path: Path) -> None:
    warehouse, run_id, _ = runs
    (result,) = _export(warehouse, run_id, tmp_path, "--warmup-s", "11")
    want = expected(read_arrow(warehouse, "send_results", run_id), skip=2)
    assert len(result["publishRate"]) == 2
    for name in (
        "publishRate",
        "publishLatency99pct",
        "aggregatedPublishLatency999pct",
        "aggregatedPublishDelayLatencyMax",
    ):
        assert result[name] == want[name], name


@pytest.mark.spark
def test_a_missing_run_is_one_line_and_exit_2(
    runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    warehouse, _, _ = runs
    assert _job().main(["--warehouse", str(warehouse), "--run-id", "nosuchrun", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "nosuchrun" in err and "runs" in err
    assert not any(tmp_path.iterdir())


@pytest.mark.spark
def test_the_report_charts_the_run_beside_a_measured_omb_file(runs, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    import importlib.util

    warehouse, run_id, _ = runs
    spec = importlib.util.spec_from_file_location("report", Path(__file__).parents[1] / "jobs" / "report.py")
    job = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(job)  # type: ignore[union-attr]
    kafka = Path(__file__).parent / "data" / "omb" / "kafka-sync-200k.json"
    out = tmp_path / "r.html"
    argv = ["--warehouse", str(warehouse), "--run-id", run_id, "--out", str(out), "--omb", str(kafka)]
    assert job.main(argv) == 0
    page = out.read_text()
    assert 'id="omb_overlay"' in page and "kafka-sync-200k.json" in page and "rocketsim (ombcase)" in page
    bad = tmp_path / "bad.json"
    bad.write_text('{"publishRate": "fast"}')
    assert job.main([*argv[:-1], str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "bad.json: field publishRate: expected an array of numbers" in err
