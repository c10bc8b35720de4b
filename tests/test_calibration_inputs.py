"""The calibration parsers on real-format samples (tests/data/calibration/README.md names each source),
the one-line errors of bad inputs, the fragment as a scenario, and jobs/calibrate.py end to end."""

from __future__ import annotations

import math
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from rocketsim.calibration.formats import detect_format, parse_input
from rocketsim.calibration.measurements import View
from rocketsim.errors import MeasurementError
from rocketsim.scenario import load_scenario, scenario_from_mapping

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "calibration"


def read(name: str):
    text = (DATA / name).read_text(encoding="utf-8")
    return parse_input(text, name, detect_format(text, name))


def test_omb_old_schema_quantile_map() -> None:
    ms = read("omb_kafka_sync-200k.json")
    (b,) = ms.binned
    # 1,946 keys give 1,946 intervals from 0; "100.0" (the max) is the last: none above it
    assert b.view == View.CLIENT and len(b.counts) == 1947 and b.counts[-1] == 0 and math.isinf(b.hi[-1])
    assert b.lo[0] == 0.0 and b.hi[0] == 1.044 and b.hi[-2] == 330.533
    # 60 windows x ~200k msg/s x 10 s; the first key (8.28e-7 %) is one send of them
    assert b.total == pytest.approx(sum(60 * [200_000.0]) * 10, rel=0.001)
    assert b.counts[0] == pytest.approx(1.0, rel=0.01)
    assert ms.windows[0].levels == (0.5, 0.75, 0.95, 0.99) and len(ms.windows[0].starts_s) == 60
    assert ms.throughputs[0].msgs_per_s == pytest.approx(200_065, rel=1e-4)


def test_realbroker_histogram_store_watermark_and_benchmark() -> None:
    (h,) = read("realbroker_a_low_async_latency_hist.json").binned
    assert h.total == 10_000 and h.lo[0] == 0.0 and h.hi[-1] == 60000.0
    store = read("realbroker_b_steady_store.log")
    (s,) = store.binned
    assert s.view == View.STORE and s.total == 528_136 + 1_356_145  # two PAGECACHERT windows summed
    assert s.counts[:4] == (527_167 + 1_353_431, 826 + 2_378, 118 + 284, 25 + 52)
    assert (s.lo[1], s.hi[1]) == (1.0, 10.0)  # [0~10ms] is 1..9 whole ms: [1, 10) of true time
    assert store.throughputs[0].msgs_per_s == pytest.approx(22587.73463915122)
    (q,) = read("realbroker_b_steady_watermark.log").queues
    assert max(q.depth) == 6509 and max(q.head_wait_ms) == 64 and q.t_s[0] == 0
    (m,) = read("realbroker_bench_producer.out").means
    assert m.max_ms == 338 and m.mean_ms == pytest.approx(1.43, abs=0.01)  # 4.9.8 lines, no '|'


def test_a_brokers_first_minute_logs_an_empty_put_rate() -> None:
    # StoreStatsService.getPutTps (rocketmq-all-4.9.8, store module) returns "" until its sampling list holds
    # a snapshot printTPSInterval (60 s) old, so printTps's first [STORETPS] line of a fresh broker has no
    # numbers; its [PAGECACHERT] line is whole (a harness run made within a minute of ./start.sh)
    text = (
        "2026-11-29 10:39:40 INFO StoreStatsService - [STORETPS] put_tps  get_found_tps  get_miss_tps  "
        "get_transfered_tps \n"
        "2026-11-29 10:39:40 INFO StoreStatsService - [PAGECACHERT] TotalPut 14500, PutMessageDistributeTime "
        "[<=0ms]:14044 [0~10ms]:451 [10~50ms]:5 [50~100ms]:0 [100~200ms]:0 [200~500ms]:0 [500ms~1s]:0 "
        "[1~2s]:0 [2~3s]:0 [3~4s]:0 [4~5s]:0 [5~10s]:0 [10s~]:0 \n"
        "2026-11-29 10:40:40 INFO StoreStatsService - [STORETPS] put_tps 241.5 get_found_tps 0.0 "
        "get_miss_tps 0.03 get_transfered_tps 0.0\n"
    )
    ms = parse_input(text, "store.log", "store-log")
    assert ms.binned[0].total == 14_500 and ms.throughputs[0].msgs_per_s == 241.5
    with pytest.raises(MeasurementError, match="STORETPS"):
        parse_input("2026 INFO - [STORETPS] put_tps x get_found_tps 0\n", "s.log", "store-log")


def test_5x_broker_scrape_rpc_latency_and_response_mix() -> None:
    ms = read("broker_5x_scrape.prom")
    (b,) = ms.binned
    assert b.view == View.BROKER and b.labels["response_code"] == "success"
    assert b.counts[0] == 98000 and b.total == 123456
    assert (b.lo[1], b.hi[1]) == (2.0, 4.0)  # le=1 .. le=3 of floor(ms): true time [2, 4)
    assert math.isinf(b.hi[-1])
    (mix,) = ms.responses
    assert dict(mix.counts) == {"success": 123456.0, "system_busy": 44.0}
    assert mix.labels["node_id"] == "broker-a"
    assert ms.queues[0].depth == (0.0,) and ms.queues[0].source == "broker_5x_scrape.prom"


def test_5x_client_send_cost_and_4x_exporter() -> None:
    (c,) = read("client_5x_send_cost.prom").binned  # the failure series is no latency sample
    assert c.view == View.CLIENT and c.total == 10000 and c.hi[:2] == (2.0, 6.0)
    exporter = read("exporter_4x_scrape.prom")
    (s,) = exporter.binned
    assert s.view == View.STORE and s.total == 605_420 and s.labels["brokerIP"] == "10.0.0.1:10911"
    (q,) = exporter.quantiles
    assert q.levels == (0.99, 0.999) and q.values_ms == (61.0, 98.0) and q.n == 605_420


def test_query_range_counters_and_csv() -> None:
    (b,) = read("query_range_rpc_latency.json").binned
    assert b.counts[0] == 8000 and b.total == 18778  # the increase over the range, not the totals
    (c,) = read("latencies.csv").binned
    assert c.total == 10  # the FAILED row is not a latency sample


@pytest.mark.parametrize(
    ("fmt", "text", "line", "expected"),
    [
        ("omb", '{\n  "publishRate" : [ 1.0, "x" ],\n  "aggregatedPublishLatency50pct" : 3\n}', 2, "a rate"),
        ("omb", '{\n  "driver" : "Kafka",\n  oops\n}', 3, "OpenMessaging Benchmark result"),
        ("benchmark", "hello\nCurrent Time: 2026-11-27 07:29:28,403 Send TPS: x\n", 2, "Send TPS: n"),
        ("prometheus", 'rocketmq_rpc_latency_bucket{le="1.0"} 3\nrocketmq_x{a="b" 4\n', 2, "label"),
        ("prometheus", "rocketmq_rpc_latency_bucket 1 2 3\n", 1, "sample"),
        ("csv", "latency_ms\n1.5\n2.5\nabc\n", 4, "a latency"),
        (
            "store-log",
            "2026 INFO - [PAGECACHERT] TotalPut 3, PutMessageDistributeTime [<=0ms]:3\n",
            1,
            "13 buckets",
        ),
        (
            "watermark-log",
            "2026-11-27 15:17:45 - [WATERMARK] Send Queue Size: x SlowTimeMills: 0\n",
            1,
            "WATERMARK",
        ),
        ("histogram", '{"edges_ms": [0, 1, 2],\n "counts": [1]}', 2, "2 counts"),
        (
            "prometheus-json",
            '{"status": "success", "data": {"resultType": "matrix",\n "result": [{"metric": {"le": "1"}, '
            '"values": [[1, "1"], [2, "2"]]}]}}',
            2,
            "__name__",
        ),
    ],
    ids=[
        "omb-type",
        "omb-syntax",
        "benchmark",
        "prom-label",
        "prom-value",
        "csv",
        "pagecachert",
        "watermark",
        "histogram",
        "query",
    ],
)
def test_bad_inputs_name_the_line_and_what_was_expected(fmt, text, line, expected) -> None:
    with pytest.raises(MeasurementError) as err:
        parse_input(text, "bad.input", fmt)
    assert err.value.line == line and expected in err.value.reason
    assert str(err.value).startswith(f"bad.input line {line}: expected")
    assert "\n" not in str(err.value)


def test_unknown_content_is_refused() -> None:
    with pytest.raises(MeasurementError, match="expected one of the formats"):
        detect_format("just some words\n", "notes.txt")


def run_job(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(ROOT) + ":" + ":".join(sys.path), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, str(ROOT / "jobs" / "calibrate.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )


def test_the_job_writes_a_fragment_that_loads_as_a_scenario_and_a_report(tmp_path: Path) -> None:
    out, report = tmp_path / "cal.toml", tmp_path / "report"
    done = run_job(
        "--input",
        f"histogram:{DATA / 'realbroker_a_low_async_latency_hist.json'}",
        "--input",
        str(DATA / "broker_5x_scrape.prom"),
        "--input",
        str(DATA / "realbroker_b_steady_store.log"),
        "--saturation",
        "65000@1100",
        "--fix",
        "latency.spike_alpha=3",
        "--out",
        str(out),
        "--report",
        str(report),
    )
    assert done.returncode == 0, done.stderr
    raw = tomllib.loads(out.read_text())
    latency = raw["brokers"]["default"]["latency"]
    assert latency["spike_alpha"] == 3.0 and 0.2 < latency["median_ms"] < 0.4  # the client view wins
    assert raw["brokers"]["default"]["errors"]["system_busy"] == pytest.approx(44 / 123500)
    sc = scenario_from_mapping({**raw, "name": "calibrated"})
    assert sc.broker_model("broker-a").latency.median_ms == latency["median_ms"]
    assert load_scenario(out).broker_model("broker-b").store.append_us == pytest.approx(
        1e6 * 1024 / (65000 * 1100)
    )
    sets = [line.split("--set ", 1)[1] for line in done.stdout.splitlines() if "--set " in line]
    steady = load_scenario(ROOT / "conf" / "scenarios" / "steady.toml", sets)
    assert steady.broker_model("default").latency.spike_alpha == 3.0
    assert (report / "index.html").is_file() and list(report.glob("latency_client_*.png"))
    assert "pyspark" not in done.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--input", "nope:/x"], "expected FORMAT:PATH"),
        (["--input", "/does/not/exist.json"], "/does/not/exist.json: cannot be read"),
        (
            ["--input", f"csv:{DATA / 'realbroker_bench_producer.out'}"],
            "realbroker_bench_producer.out line 1: expected a",
        ),
        (
            ["--input", str(DATA / "latencies.csv"), "--fix", "latency.sigma=99"],
            "--fix latency.sigma must be between",
        ),
        (["--input", str(DATA / "latencies.csv"), "--saturation", "fast"], "expected RATE[@BYTES]"),
        ([], "give at least one --input"),
    ],
)
def test_the_job_fails_fast_with_one_line(tmp_path: Path, args: list[str], expected: str) -> None:
    done = run_job(*args, "--out", str(tmp_path / "f.toml"))
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and expected in done.stderr, done.stderr
    assert not (tmp_path / "f.toml").exists()


def test_the_job_needs_no_pyspark() -> None:
    code = (
        "import runpy, sys; sys.argv = ['calibrate', '--help']\n"
        "try:\n    runpy.run_path('jobs/calibrate.py', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "assert not any(m.split('.')[0] == 'pyspark' for m in sys.modules), 'pyspark imported'"
    )
    env = {"PYTHONPATH": str(ROOT) + ":" + ":".join(sys.path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_a_broker_section_of_its_own() -> None:
    import numpy as np
    from calibration_synth import histogram_json

    from rocketsim.calibration.calibrate import Options, calibrate
    from rocketsim.calibration.fragment import check_fragment, fragment_text
    from rocketsim.calibration.model import LatencyDistribution

    latencies = LatencyDistribution(4.0, 0.3).sample(np.random.default_rng(3), 20_000)
    cal = calibrate(parse_input(histogram_json(latencies), "h.json", "histogram"), Options(target="broker-x"))
    text = fragment_text(cal, ["histogram:h.json"])
    assert "[brokers.broker-x.latency]" in text
    sc = check_fragment(text, "broker-x")  # a section for a broker of the cluster it names
    assert sc.broker_model("broker-x").latency.median_ms == pytest.approx(4.0, rel=0.05)


def test_a_few_raw_latencies_fit_where_they_are(tmp_path: Path) -> None:
    # the shipped CSV (ten sends of 1.3-3.4 ms and one of 14.5 ms) was fitted on its occupied bins alone:
    # sigma went to its bound, 10.000000000000002, and the job refused its own fragment
    from rocketsim.calibration.calibrate import Options, calibrate

    cal = calibrate(read("latencies.csv"), Options())
    values = cal.values()
    assert 1.7 <= values["brokers.default.latency.median_ms"] <= 2.8
    assert values["brokers.default.latency.sigma"] < 1.0
    (b,) = read("latencies.csv").binned
    assert b.lo[0] == 0.0 and math.isinf(b.hi[-1]) and b.lo[1:] == b.hi[:-1] and b.total == 10
    whole = parse_input("latency_ms\n2\n1\n3\n2\n14\n", "w.csv", "csv").binned[0]
    assert list(zip(whole.lo, whole.hi, whole.counts, strict=True)) == [
        (0.0, 1.0, 0.0), (1.0, 2.0, 1.0), (2.0, 3.0, 2.0), (3.0, 4.0, 1.0), (4.0, 14.0, 0.0),
        (14.0, 15.0, 1.0), (15.0, math.inf, 0.0),
    ]  # fmt: skip
    done = run_job("--input", f"csv:{DATA / 'latencies.csv'}", "--out", str(tmp_path / "f.toml"))
    assert done.returncode == 0, done.stderr


def test_a_fitted_value_at_its_bound_stays_in_the_scenarios_range() -> None:
    from rocketsim.calibration.fit import SPECS

    for spec in SPECS.values():  # exp(log(10.0)), sigma's upper bound, is 10.000000000000002
        for free in spec.bounds():
            assert spec.lower <= spec.from_free(free) <= spec.upper, spec.name


def test_a_send_queue_without_its_head_wait_says_so() -> None:
    # a Prometheus scrape's rocketmq_processor_watermark gauge has the queue's depth, not its head's wait:
    # the note said "head waited up to nan ms"
    from rocketsim.calibration.calibrate import Options, queue_part

    (note,) = queue_part(read("broker_5x_scrape.prom"), Options()).notes
    assert "up to 0 requests" in note and "head wait not measured" in note and "nan" not in note, note
    (note,) = queue_part(read("realbroker_b_steady_watermark.log"), Options()).notes
    assert "up to 6,509 requests" in note and "head waited up to 64 ms" in note, note
