"""Analysis end to end, on a small real run and a small comparison made here with the pipeline functions:
isolation intervals against the reference, the comparison's direction (fault strategy on sends fewer
attempts to the slow broker), both notebooks executed headless, and the HTML report."""

from __future__ import annotations

import base64
import importlib.util
import re
import shutil
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from nbclient import NotebookClient

from rocketsim.present import explore, report
from rocketsim.scenario import load_scenario
from rocketsim.spark import compare, delta_sink, pipeline
from rocketsim.spark.cli import JobArgs, parse_compare_args
from rocketsim.stage.graph import RUN_TABLES
from rocketsim.warehouse.read import read_pandas
from tests import analysis

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
RUN_ID = "flap-small"
CMP_ID = "brownout-cmp"
# broker-c flaps (down 1.5 s every 4 s) through most of a 12 s run: connect failures, retries, isolation
RUN_OVERRIDES = [
    "workload.messages=6000",
    "faults.0.start_s=2",
    "faults.0.end_s=11",
    "faults.0.period_s=4",
    "faults.0.down_s=1.5",
]
# broker-b 30x slower from 1 s to the end of a 16 s run
CMP_OVERRIDES = ("workload.messages=8000", "faults.0.start_s=1", "faults.0.end_s=16")
# the run's brokers are open-loop: no broker_load chart (the notebook and the report say why)
EXPLORE_FIGURES = {
    "latency_percentiles",
    "traffic_share",
    "retries_failures",
    "publish_delay",
    "isolation_gantt",
    "queue_heatmap",
    "broker_storage",
}
COMPARE_FIGURES = {"variant_timelines", "variant_broker_sends", "variant_metrics"}


@pytest.fixture(scope="module")
def warehouse(spark, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run (generate, simulate, broker side, summarize, runs row) and one comparison, in one warehouse."""
    from datetime import UTC, datetime

    wh = tmp_path_factory.mktemp("analysis-wh")
    sc = load_scenario(ROOT / "conf/scenarios/flapping.toml", RUN_OVERRIDES)
    args = JobArgs("flapping.toml", str(wh), RUN_ID, tuple(RUN_OVERRIDES), 2, 2000, quiet=True)
    started = datetime.now(UTC)
    messages = pipeline.run_generate(spark, args, sc)
    _, attempts = pipeline.run_simulate(spark, args, sc)
    pipeline.run_broker_side(spark, args, sc)  # the storage section of the explore notebook
    pipeline.run_summarize(spark, args, sc)
    runs = pipeline.write_runs_row(spark, args, sc, messages, attempts, started, 1.0, tables=RUN_TABLES)
    delta_sink.publish_run(spark, str(wh), RUN_ID, "test", [runs])

    cargs, base, scenarios = parse_compare_args(
        [
            "--scenario",
            str(ROOT / "conf/scenarios/brownout.toml"),
            *[x for o in CMP_OVERRIDES for x in ("--set", o)],
            "--variant",
            "fault_off:producers.send_latency_fault_enable=false",
            "--variant",
            "fault_on:producers.send_latency_fault_enable=true",
            "--warehouse",
            str(wh),
            "--run-id",
            CMP_ID,
            "--window-ms",
            "2000",
            "--partitions",
            "2",
            "--quiet",
        ]
    )
    compare.run_compare(spark, cargs, base, scenarios)
    return wh


def test_pipeline_isolation_intervals_equal_the_reference(warehouse: Path) -> None:
    attempts = read_pandas(warehouse, "send_attempts", RUN_ID)
    expected = analysis.isolation_intervals(attempts, keys=["run_id"])
    got = read_pandas(warehouse, "isolation_intervals", RUN_ID)
    got = got.sort_values(["producer", "broker", "start_ms"]).reset_index(drop=True)
    assert len(expected) >= 6  # every producer isolated the flapping broker at least once
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)
    windows = read_pandas(warehouse, "broker_windows", RUN_ID)
    assert windows.sends.sum() == len(attempts) == read_pandas(warehouse, "queue_windows", RUN_ID).sends.sum()
    summary = read_pandas(warehouse, "run_summary", RUN_ID).set_index("scope")
    assert summary.loc["all", "isolations"] == len(expected)
    assert summary.loc["broker-c", "failed_connect"] > 0


def test_comparison_fault_on_sends_fewer_attempts_to_the_slow_broker(warehouse: Path) -> None:
    rows = read_pandas(warehouse, "comparisons", CMP_ID)
    value = rows.set_index(["variant", "scope", "metric"])["value"]
    assert value[("fault_on", "all", "messages")] == value[("fault_off", "all", "messages")] == 8000
    on, off = value[("fault_on", "broker-b", "sends")], value[("fault_off", "broker-b", "sends")]
    assert on < 0.95 * off, (on, off)
    delta = rows[(rows.variant == "fault_on") & (rows.scope == "broker-b") & (rows.metric == "sends")]
    assert delta.delta.iloc[0] == on - off and delta.delta_pct.iloc[0] < -5
    assert value[("fault_on", "all", "isolations")] > 0 == value[("fault_off", "all", "isolations")]
    assert set(rows.baseline) == {"fault_off"}
    windows = read_pandas(warehouse, "comparison_windows", CMP_ID)
    assert set(windows.variant) == {"fault_on", "fault_off"}
    per_variant = windows.groupby("variant").sends.sum()
    assert per_variant["fault_on"] == value[("fault_on", "all", "sends")]
    # the comparison has a runs row (its scenario) but no run_summary: the notebooks tell them apart
    assert explore.latest_run(str(warehouse)) == RUN_ID
    assert explore.latest_comparison(str(warehouse)) == CMP_ID


def _execute(notebook: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch, cwd: Path) -> None:
    for key, val in env.items():
        monkeypatch.setenv(key, val)
    nb = nbformat.read(NOTEBOOKS / notebook, as_version=4)
    assert "parameters" in nb.cells[1].metadata.get("tags", [])
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
    ).execute()
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"
    ]
    assert not errors
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) >= 3


def _pngs(folder: Path) -> dict[str, bytes]:
    return {p.stem: p.read_bytes() for p in folder.glob("*.png")}


def test_explore_notebook_runs_headless(
    warehouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = tmp_path / "figures"
    env = {"ROCKETSIM_WAREHOUSE": str(warehouse), "ROCKETSIM_RUN_ID": "", "ROCKETSIM_FIGURES": str(figures)}
    _execute("explore_run.ipynb", env, monkeypatch, tmp_path)
    pngs = _pngs(figures / RUN_ID)  # the default run id: the most recent run
    assert set(pngs) == EXPLORE_FIGURES
    for name, data in pngs.items():
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000, name


def test_compare_notebook_runs_headless(
    warehouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"ROCKETSIM_WAREHOUSE": str(warehouse), "ROCKETSIM_COMPARISON_ID": "", "ROCKETSIM_FIGURES": "figs"}
    _execute("compare_strategies.ipynb", env, monkeypatch, tmp_path)
    pngs = _pngs(tmp_path / "figs" / CMP_ID)  # relative to the notebook's folder
    assert set(pngs) == COMPARE_FIGURES
    for name, data in pngs.items():
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000, name


def test_report_is_one_html_page_with_embedded_figures(warehouse: Path, tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("report_job", ROOT / "jobs" / "report.py")
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    main = job.main
    out = tmp_path / "r" / "report.html"
    assert main(["--run-id", RUN_ID, "--warehouse", str(warehouse), "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == len(EXPLORE_FIGURES)
    assert all(base64.b64decode(i).startswith(PNG_MAGIC) for i in images)
    assert 'src="http' not in page and "<script" not in page  # self-contained
    assert f"rocketsim run {RUN_ID}" in page and "flapping broker-c 2-11 s" in page
    assert '<figure id="broker_load" class="absent"><figcaption>Broker load: no chart, as open-loop' in page
    assert "<th>metric</th><th>all</th><th>broker-a</th><th>broker-b</th><th>broker-c</th>" in page
    assert main(["--run-id", "nope", "--warehouse", str(warehouse), "--out", str(out)]) == 2


@pytest.mark.skipif(
    shutil.which("chromium") is None, reason="chromium is not on PATH: the page is not rendered"
)
def test_the_report_of_a_pipeline_run_in_a_browser(warehouse: Path, tmp_path: Path) -> None:
    """The page jobs/report.py writes (the broker-side chart too) at a laptop's width: no sideways
    scroll, every chart loaded (tests/test_report_browser.py)."""
    from tests.test_report_browser import WIDTH, layout

    measured = layout(report.render_report(warehouse, RUN_ID), tmp_path)
    assert measured["scrollWidth"] <= WIDTH
    assert len(measured["images"]) == len(EXPLORE_FIGURES)
    assert all(i["complete"] and i["naturalWidth"] > 0 for i in measured["images"])


def test_broker_load_chart_of_closed_loop_brokers() -> None:
    """The broker-load chart of a saturated joint run: utilisation, queue depth and SYSTEM_BUSY by kind."""
    from test_engine_joint import CAPACITY, messages, run, scenario

    from rocketsim.present import plots
    from rocketsim.tables import summaries

    out = run(1.2 * CAPACITY)
    m = messages(scenario(1.2 * CAPACITY))
    bw = summaries.summary_tables(summaries.producer_aggregates(out.attempts, out.results, 1000, messages=m))
    fig = plots.broker_load(bw["broker_windows"].to_pandas())
    util, depth, busy = fig.axes[:3]
    assert len(util.lines) == 4 + 1 and len(depth.lines) == 8  # a line per broker (+ the 100 % mark)
    assert [t.get_text() for t in busy.get_legend().get_texts()] == ["[TIMEOUT_CLEAN_QUEUE]"]
    assert plots.figure_png_base64(fig)
