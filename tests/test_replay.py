"""Incident replay (rocketsim.replay, jobs/replay.py): an incident built from a known fault timeline,
rendered as Prometheus range queries and as Grafana CSV downloads, comes back as that timeline (edges
within one 10 s window, levels within 20 %), and the scenario written from it runs the user's cluster
and workload with the incident's faults."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from rocketsim.replay import buckets
from rocketsim.replay.scenario_text import replay_text
from rocketsim.replay.series import ERRORS, LATENCY, UP, SeriesError, read_series
from rocketsim.replay.timeline import Fault, replay, segments
from rocketsim.scenario import ScenarioError, load_scenario

BROKERS = ("broker-a", "broker-b", "broker-c")
T0 = 1_726_000_000.0  # unix seconds of the first sample
SPAN_S = 900
STEP_S = 15  # the scrape interval
LE_MS = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0, math.inf)  # rocketmq_rpc_latency's bounds
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Truth:
    broker: str
    kind: str
    start_s: float
    end_s: float
    level: float = 0.0  # slowdown factor, error ratio


TRUTH = (
    Truth("broker-b", "slowdown", 120, 250, 6.0),
    Truth("broker-a", "error_burst", 330, 400, 0.3),
    Truth("broker-c", "outage", 450, 520),
    Truth("broker-b", "hang", 600, 660),
    Truth("broker-a", "slowdown", 720, 800, 3.0),
)
BASE_P99_MS = {"broker-a": 6.0, "broker-b": 7.5, "broker-c": 5.0}
BASE_ERROR = 0.0005
RATE = 200.0  # requests per second per broker


def _state(broker: str, t: float) -> dict:
    """The broker at time t (seconds from the first sample): its factor, error ratio, up, answering."""
    out = {"factor": 1.0, "error": BASE_ERROR, "up": 1.0, "answers": True}
    for f in TRUTH:
        if f.broker == broker and f.start_s <= t < f.end_s:
            if f.kind == "slowdown":
                out["factor"] = f.level
            elif f.kind == "error_burst":
                out["error"] = f.level
            elif f.kind == "outage":
                out.update(up=0.0, answers=False)
            elif f.kind == "hang":
                out["answers"] = False
    return out


def _times() -> np.ndarray:
    return np.arange(0, SPAN_S, STEP_S, dtype=float)


def _noise(rng: np.random.Generator) -> float:
    return float(np.exp(rng.normal(0.0, 0.05)))


def _quantile_series(rng: np.random.Generator) -> dict[str, list[tuple[float, float]]]:
    """A p99 per broker per scrape: its baseline times the slowdown, with 5 % noise; no value while the
    broker answers nothing (histogram_quantile of zero rates)."""
    out: dict[str, list[tuple[float, float]]] = {b: [] for b in BROKERS}
    for b in BROKERS:
        for t in _times():
            s = _state(b, t)
            out[b].append((t, BASE_P99_MS[b] * s["factor"] * _noise(rng) if s["answers"] else math.nan))
    return out


def _code_rates(rng: np.random.Generator) -> dict[tuple[str, str], list[tuple[float, float]]]:
    out: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for b in BROKERS:
        for t in _times():
            s = _state(b, t)
            total = RATE * _noise(rng) if s["answers"] else 0.0
            out.setdefault((b, "success"), []).append((t, total * (1 - s["error"])))
            out.setdefault((b, "system_busy"), []).append((t, total * s["error"]))
    return out


def _prometheus(series: list[tuple[dict, list[tuple[float, float]]]]) -> str:
    result = [
        {"metric": labels, "values": [[T0 + t, repr(v) if math.isfinite(v) else "NaN"] for t, v in points]}
        for labels, points in series
    ]
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}})


def _grafana(columns: dict[str, list[tuple[float, float]]], fmt, sep: str = ",", excel: bool = False) -> str:  # noqa: ANN001
    buf = io.StringIO()
    if excel:
        buf.write(f"sep={sep}\r\n")
    w = csv.writer(buf, delimiter=sep, quoting=csv.QUOTE_ALL, lineterminator="\r\n")
    w.writerow(["Time", *columns])
    first = next(iter(columns.values()))
    for i, (t, _) in enumerate(first):
        w.writerow([int((T0 + t) * 1000), *(fmt(col[i][1]) for col in columns.values())])
    return buf.getvalue()


def _up() -> dict[str, list[tuple[float, float]]]:
    return {b: [(t, _state(b, t)["up"]) for t in _times()] for b in BROKERS}


def _find(faults: tuple[Fault, ...], broker: str, kind: str, start_s: float) -> Fault | None:
    """The fault of that broker and kind starting within one window of ``start_s``."""
    got = [f for f in faults if f.broker == broker and f.kind == kind and abs(f.start_s - start_s) <= 10]
    return got[0] if len(got) == 1 else None


def _check(faults: tuple[Fault, ...]) -> None:
    """The truth, each fault within one window and 20 %."""
    assert len(faults) == len(TRUTH), [f.describe() for f in faults]
    for truth in TRUTH:
        got = [
            f
            for f in faults
            if f.broker == truth.broker and f.kind == truth.kind and abs(f.start_s - truth.start_s) <= 10
        ]
        assert len(got) == 1, (truth, [f.describe() for f in faults])
        f = got[0]
        assert abs(f.end_s - truth.end_s) <= 10, (truth, f)
        if truth.kind == "slowdown":
            assert abs(f.factor / truth.level - 1) <= 0.2, (truth, f)
        if truth.kind == "error_burst":
            assert f.error == "system_busy" and abs(f.rate / truth.level - 1) <= 0.2, (truth, f)


def test_prometheus_range_queries_give_back_the_timeline() -> None:
    rng = np.random.default_rng(1)
    p99 = _prometheus([({"node_id": b}, pts) for b, pts in _quantile_series(rng).items()])
    codes = _prometheus(
        [({"node_id": b, "response_code": c}, pts) for (b, c), pts in _code_rates(rng).items()]
    )
    up = _prometheus(
        [({"__name__": "up", "instance": f"{b}:5557", "job": "rocketmq"}, pts) for b, pts in _up().items()]
    )
    series = (
        read_series(p99, "p99.json", LATENCY)
        + read_series(codes, "codes.json", ERRORS)
        + read_series(up, "up.json", UP)
    )
    result = replay(series, BROKERS)
    _check(result.faults)
    assert result.t0_s == T0 and result.windows == SPAN_S // 10 - 1 and result.resolution_s == STEP_S
    assert any("15 s" in n for n in result.notes)


def test_grafana_csv_downloads_give_back_the_timeline() -> None:
    """Formatted values with units, a ';' locale with Excel's sep= line, a tab-separated file, and series
    named by their label sets (requests by response code)."""
    rng = np.random.default_rng(2)
    p99 = _grafana(
        _quantile_series(rng), lambda v: f"{v:.2f} ms" if math.isfinite(v) else "", sep=";", excel=True
    )
    rates = _code_rates(rng)
    by_code = {f'{{node_id="{b}", response_code="{c}"}}': pts for (b, c), pts in rates.items()}
    codes = _grafana(by_code, lambda v: f"{v:.3f}")
    up = _grafana(_up(), lambda v: f"{v:g}", sep="\t")
    series = read_series(p99, "p99.csv", LATENCY) + read_series(codes, "codes.csv", ERRORS)
    result = replay(series + read_series(up, "up.csv", UP), BROKERS)
    _check(result.faults)
    # an error ratio per broker instead (in %), without request rates: broker-b's hang cannot be told
    # from a broker that is down, it is an outage; the rest is the same
    ratio = {
        b: [(t, busy / (ok + busy) if ok + busy > 0 else math.nan)
            for (t, ok), (_, busy) in zip(rates[(b, "success")], rates[(b, "system_busy")], strict=True)]
        for b in BROKERS
    }  # fmt: skip
    errors = _grafana(ratio, lambda v: f"{100 * v:.3f}%" if math.isfinite(v) else "")
    without = replay(read_series(p99, "p99.csv", LATENCY) + read_series(errors, "e.csv", ERRORS), BROKERS)
    got = {(f.broker, f.kind): f.start_s for f in without.faults}
    assert abs(got[("broker-b", "outage")] - 600) <= 10 and abs(got[("broker-a", "error_burst")] - 330) <= 10
    assert any("no up series" in n for n in without.notes)


def test_histogram_buckets_give_the_slowdown_factor_not_an_interpolated_quantile() -> None:
    """Raw bucket counters (rocketmq_rpc_latency_milliseconds_bucket, cumulative over time): the factor
    from the lognormal's location, within 20 % though the factors fall between bounds 10 and 100 ms."""
    rng = np.random.default_rng(3)
    counts: dict[tuple[str, float], list[tuple[float, float]]] = {}
    for b in BROKERS:
        totals = np.zeros(len(LE_MS))
        for t in _times():
            s = _state(b, t)
            n = rng.poisson(RATE * STEP_S) if s["answers"] else 0
            lat = np.exp(rng.normal(math.log(2.0 * s["factor"]), 0.5, n))
            totals += np.array([(lat <= le).sum() for le in LE_MS])
            for le, c in zip(LE_MS, totals, strict=True):
                counts.setdefault((b, le), []).append((t, float(c)))
    name = "rocketmq_rpc_latency_milliseconds_bucket"
    text = _prometheus(
        [
            ({"__name__": name, "node_id": b, "le": "+Inf" if math.isinf(le) else repr(le)}, pts)
            for (b, le), pts in counts.items()
        ]
    )
    series = read_series(text, "buckets.json", LATENCY) + read_series(
        _prometheus([({"__name__": "up", "node_id": b}, pts) for b, pts in _up().items()]), "up.json", UP
    )
    result = replay(series, BROKERS)
    assert abs(_find(result.faults, "broker-b", "slowdown", 120).factor / 6.0 - 1) <= 0.2
    assert abs(_find(result.faults, "broker-a", "slowdown", 720).factor / 3.0 - 1) <= 0.2
    # the widest bucket counts the requests: broker-b, up but answering nothing, hangs
    assert {(f.broker, f.kind) for f in result.faults} >= {("broker-c", "outage"), ("broker-b", "hang")}


def test_a_lognormal_fits_its_own_bucket_counts() -> None:
    edges = np.array(LE_MS)
    z = (np.log(np.where(np.isinf(edges), 1e300, edges)) - math.log(4.0)) / 0.7
    cdf = np.array([0.5 * math.erfc(-x / math.sqrt(2)) for x in z])
    mu, sigma = buckets.fit_lognormal(edges, np.diff(cdf, prepend=0.0) * 1e6)
    assert abs(math.exp(mu) - 4.0) < 0.01 and abs(sigma - 0.7) < 0.01


def test_segments_join_short_gaps_and_drop_single_windows() -> None:
    active = np.array([0, 1, 1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1], bool)
    assert segments(active) == [(1, 6), (8, 13)]
    assert segments(np.array([0, 1, 0, 0, 0, 1, 1], bool)) == [(5, 7)]


def test_closed_loop_brokers_make_their_own_system_busy_and_load_moved_by_routes_is_left_out() -> None:
    rng = np.random.default_rng(4)
    codes = _code_rates(rng)
    # broker-a's load rises 1.6x and its latency 2x while broker-c is down: the model moves that traffic
    p99 = _quantile_series(rng)
    for i, (t, v) in enumerate(p99["broker-a"]):
        if 450 <= t < 520:
            p99["broker-a"][i] = (t, v * 2)
            codes[("broker-a", "success")][i] = (t, codes[("broker-a", "success")][i][1] * 1.6)
    series = (
        read_series(_prometheus([({"node_id": b}, p) for b, p in p99.items()]), "p99.json", LATENCY)
        + read_series(
            _prometheus([({"node_id": b, "response_code": c}, p) for (b, c), p in codes.items()]),
            "c.json",
            ERRORS,
        )
        + read_series(_prometheus([({"node_id": b}, p) for b, p in _up().items()]), "up.json", UP)
    )
    result = replay(series, BROKERS, closed_loop=True)
    assert _find(result.faults, "broker-a", "error_burst", 330) is None
    assert _find(result.faults, "broker-a", "slowdown", 450) is None
    assert any("flow control" in line for line in result.left_out)
    assert any("traffic the producers moved there" in line for line in result.left_out)
    open_loop = replay(series, BROKERS, closed_loop=False)
    assert _find(open_loop.faults, "broker-a", "error_burst", 330) is not None


@pytest.mark.parametrize(
    ("text", "kind", "message"),
    [
        ('"when","broker-a"\r\n1,2\r\n', LATENCY, r"x\.csv: line 1: expected a header with a Time column"),
        (
            '"Time","broker-a"\r\n1726000000000,fast\r\n',
            LATENCY,
            r"x\.csv: line 2: column 'broker-a': expected a number",
        ),
        ('"Time","broker-a"\r\n1726000000000,1,2\r\n', LATENCY, r"x\.csv: line 2: expected 2 cells"),
        (
            '"Time","broker-a"\r\nyesterday-ish,1\r\n',
            LATENCY,
            r"x\.csv: line 2: Time: expected epoch milliseconds",
        ),
        (
            '{"status": "success", "data": {"resultType": "vector", "result": []}}',
            LATENCY,
            'expected "matrix"',
        ),
        ('{"status": "error"}', UP, "expected a Prometheus query_range answer"),
        (
            '{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": '
            '{"__name__": "node_cpu_seconds_total", "instance": "a"}, "values": [[1, "1"]]}]}}',
            LATENCY,
            "metric 'node_cpu_seconds_total' is not a latency metric",
        ),
        (
            '{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {"job": "x"}, '
            '"values": [[1, "1"]]}]}}',
            UP,
            "expected a label naming the broker",
        ),
        (
            '{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {"node_id": "a"}, '
            '"values": [[1, "one"]]}]}}',
            UP,
            r"values\[0\]: expected a number as text",
        ),  # fmt: skip
    ],
)
def test_bad_input_names_the_file_the_line_or_field_and_what_was_expected(
    text: str, kind: str, message: str
) -> None:
    with pytest.raises(SeriesError, match=message):
        read_series(text, "x.csv" if not text.startswith("{") else "x.json", kind)


def test_a_broker_the_scenario_does_not_have_must_be_mapped() -> None:
    series = read_series('"Time","10.0.0.9:5557"\r\n1726000000000,1\r\n', "p99.csv", LATENCY)
    with pytest.raises(
        SeriesError, match=r"p99\.csv: broker '10\.0\.0\.9:5557' is not a broker.*--broker-map"
    ):
        replay(series, BROKERS)
    assert replay(series, BROKERS, broker_map={"10.0.0.9:5557": "broker-c"}).signals.keys() == {"broker-c"}


def test_the_scenario_keeps_the_base_text_and_replaces_its_faults() -> None:
    base = (ROOT / "conf" / "scenarios" / "brownout.toml").read_text()
    faults = (
        Fault("broker-a", "outage", 30.0, 60.0),
        Fault("broker-b", "error_burst", 60.0, 90.0, error="system_busy", rate=0.25),
    )
    text, sc = replay_text(base, "incident-42", ["from a test"], faults)
    assert text.startswith('# from a test\nname = "incident-42"\n')
    assert "# Question: broker-b is 30x slower" in text and "factor = 30.0" not in text
    assert sc.name == "incident-42" and sc.seed == 11 and len(sc.cluster.brokers) == 4
    assert [(f.broker, f.kind, f.start_s, f.end_s) for f in sc.faults] == [
        ("broker-a", "outage", 30.0, 60.0),
        ("broker-b", "error_burst", 60.0, 90.0),
    ]
    assert sc.faults[1].rate == 0.25
    with pytest.raises(ScenarioError, match=r"faults\[0\]\.broker must name a broker"):
        replay_text(base, "x", [], (Fault("broker-z", "outage", 0.0, 10.0),))


def test_a_base_shorter_than_the_incident_runs_as_long_as_it_at_its_own_rate() -> None:
    """A fault after the simulated span would change nothing (the run refuses it): the replay's run lasts
    the incident's span, the base's rate kept; a base long enough keeps its length."""
    base = 'name = "small"\n[cluster]\nbrokers = ["broker-a"]\n'
    base += "[workload]\nmessages = 6000  # mine\nrate_per_s = 20.0\n"
    late = (Fault("broker-a", "slowdown", 440.0, 500.0, factor=6.0),)
    text, sc = replay_text(base, "x", [], late, span_s=900.0)
    assert (sc.workload.span_s, sc.workload.rate_per_s, sc.workload.messages) == (900.0, 20.0, 0)
    assert "messages = 6000" not in text and "rate_per_s = 20.0" in text
    _, kept = replay_text(base, "x", [], late[:0], span_s=100.0)
    assert kept.workload.span_s == 300.0 and kept.workload.messages == 6000


def _job():  # noqa: ANN202 - the module of jobs/replay.py
    import importlib.util

    spec = importlib.util.spec_from_file_location("replay_job", ROOT / "jobs" / "replay.py")
    job = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(job)  # type: ignore[union-attr]
    return job


def test_the_job_writes_a_scenario_that_loads_with_the_incidents_faults(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    rng = np.random.default_rng(5)
    base = tmp_path / "base.toml"
    base.write_text('name = "mine"\nseed = 3\n[cluster]\nbrokers = ["broker-a", "broker-b", "broker-c"]\n'
                    '[workload]\nduration_s = 900.0\nrate_per_s = 50.0\n')  # fmt: skip
    p99 = tmp_path / "p99.csv"
    p99.write_text(_grafana(_quantile_series(rng), lambda v: f"{v:.3f}" if math.isfinite(v) else ""))
    codes = tmp_path / "codes.json"
    codes.write_text(
        _prometheus([({"node_id": b, "response_code": c}, p) for (b, c), p in _code_rates(rng).items()])
    )
    up = tmp_path / "up.json"
    up.write_text(_prometheus([({"node_id": b}, p) for b, p in _up().items()]))
    out = tmp_path / "incident.toml"
    code = _job().main(
        [
            "--base",
            str(base),
            "--latency",
            str(p99),
            "--errors",
            str(codes),
            "--up",
            str(up),
            "--out",
            str(out),
        ]
    )
    assert code == 0, capsys.readouterr().err
    sc = load_scenario(out)
    assert sc.name == "mine-replay" and sc.workload.rate_per_s == 50.0
    burst = {"error_burst"}
    _check(
        tuple(
            Fault(
                f.broker,
                f.kind,
                f.start_s,
                f.end_s,
                f.factor if f.kind == "slowdown" else None,
                f.error if f.kind in burst else None,
                f.rate if f.kind in burst else None,
            )  # fmt: skip
            for f in sc.faults
        )
    )
    printed = capsys.readouterr().out
    assert "fault  broker-b slowdown 110-250 s x6" in printed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--latency", "missing.csv"], "missing.csv"),
        (["--latency", "{bad}"], r"bad\.csv: line 1: expected a header with a Time column"),
        (["--up", "{up}", "--baseline-s", "5"], "--baseline-s must look like A:B"),
        (["--up", "{up}", "--broker-map", "x"], "--broker-map must look like A=B"),
    ],
)
def test_the_job_says_what_is_wrong_in_one_line_and_exits_2(
    tmp_path: Path, capsys, args: list[str], message: str
) -> None:  # noqa: ANN001
    (tmp_path / "bad.csv").write_text('"when","broker-a"\r\n1,2\r\n')
    (tmp_path / "up.json").write_text(_prometheus([({"node_id": "broker-a"}, [(0.0, 1.0)])]))
    argv = ["--base", str(ROOT / "conf" / "scenarios" / "brownout.toml"), "--out", str(tmp_path / "o.toml")]
    argv += [a.format(bad=tmp_path / "bad.csv", up=tmp_path / "up.json") for a in args]
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(_job().main(argv))
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and __import__("re").search(message, err), err
    assert not (tmp_path / "o.toml").exists()


def test_a_broker_whose_series_stops_is_down_to_the_end() -> None:
    rng = np.random.default_rng(6)
    p99 = _quantile_series(rng)
    p99["broker-a"] = [(t, v if t < 700 else math.nan) for t, v in p99["broker-a"]]
    result = replay(
        read_series(_prometheus([({"node_id": b}, p) for b, p in p99.items()]), "p.json", LATENCY), BROKERS
    )
    gone = _find(result.faults, "broker-a", "outage", 700)
    assert gone is not None and gone.end_s == result.windows * 10


@pytest.mark.slow
def test_run_replays_the_incident_through_the_pipeline_job(tmp_path: Path) -> None:
    """``--run``: the written scenario goes through jobs/pipeline.py's steps; the run's broker_windows show
    the replayed slowdown on broker-b."""
    import os
    import subprocess
    import sys

    from rocketsim.warehouse.read import read_pandas

    rng = np.random.default_rng(7)
    base = tmp_path / "base.toml"
    base.write_text('name = "small"\nseed = 3\n[cluster]\nbrokers = ["broker-a", "broker-b", "broker-c"]\n'
                    '[workload]\nduration_s = 300.0\nrate_per_s = 20.0\n')  # fmt: skip
    p99 = tmp_path / "p99.json"
    p99.write_text(_prometheus([({"node_id": b}, pts) for b, pts in _quantile_series(rng).items()]))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROCKETSIM_", "PYSPARK_"))}
    argv = ["--base", str(base), "--latency", str(p99), "--out", str(tmp_path / "i.toml"), "--run"]
    argv += ["--warehouse", str(tmp_path / "wh"), "--run-id", "incident"]
    done = subprocess.run([sys.executable, str(ROOT / "jobs" / "replay.py"), *argv], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    runs = read_pandas(tmp_path / "wh", "runs", "incident")
    assert runs.scenario_name.tolist() == ["small-replay"] and 'kind = "slowdown"' in runs.scenario_text[0]
    bw = read_pandas(tmp_path / "wh", "broker_windows", "incident")
    b = bw[bw.broker == "broker-b"].set_index("window_start_ms").latency_p50_ms
    assert b.loc[150_000] > 4 * b.loc[30_000]  # x6 from 120 s to 250 s


def test_an_exporter_gauge_is_a_level_not_a_counter() -> None:
    """rocketmq-exporter's put_latency_99 (ms, a gauge) read as it is; a 5.x broker's delta histogram
    (metricsInDelta) too."""
    gauge = {"__name__": "rocketmq_brokeruntime_put_latency_99", "brokerIP": "broker-a"}
    delta = {
        "__name__": "rocketmq_rpc_latency_bucket",
        "node_id": "broker-a",
        "le": "10.0",
        "aggregation": "delta",
    }
    text = _prometheus([(gauge, [(0.0, 5.0), (15.0, 4.0)]), (delta, [(0.0, 7.0), (15.0, 3.0)])])
    level, buckets_ = read_series(text, "x.json", LATENCY)
    assert not level.counter and not buckets_.counter and level.values.tolist() == [5.0, 4.0]
    raw = _prometheus(
        [
            (
                {"__name__": "rocketmq_rpc_latency_milliseconds_bucket", "node_id": "a", "le": "1.0"},
                [(0.0, 1.0)],
            )
        ]
    )
    assert read_series(raw, "r.json", LATENCY)[0].counter


def test_steady_up_and_down_is_one_flapping_fault() -> None:
    """broker-a down 30 s of every 90 s from 100 s, four times: flapping, not four outages."""
    times = np.arange(0, 600, 5, dtype=float)
    down = lambda t: 100 <= t < 460 and (t - 100) % 90 < 30  # noqa: E731
    up = {b: [(t, 0.0 if b == "broker-a" and down(t) else 1.0) for t in times] for b in BROKERS}
    result = replay(
        read_series(_prometheus([({"node_id": b}, p) for b, p in up.items()]), "up.json", UP), BROKERS
    )
    (flap,) = result.faults
    assert (flap.broker, flap.kind, flap.period_s) == ("broker-a", "flapping", 90.0)
    assert abs(flap.down_s - 30) <= 10 and abs(flap.start_s - 100) <= 10 and abs(flap.end_s - 400) <= 10
