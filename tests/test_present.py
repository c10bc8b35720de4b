"""The charts and the report read at a glance (rocketsim/present): the window-coverage rule, fault windows
marked once and the one way on every time axis, no chart or panel without data, never a negative axis for
counts, no series hidden under another, bounded tick labels, a summary table that fits the page.

On small runs simulated here (tests/present_runs.py, no Spark) and on frames made to the purpose."""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from rocketsim.present import plots, plots_storage, report, timeline
from rocketsim.present.timeline import FAULT_GID, MIN_COVERED, TIME_LABEL, FaultSpan, Timeline
from tests import present_runs

FAULT = FaultSpan("broker-b", "slowdown", 20_000, 35_000)


def _bw(brokers: int, windows: int, sends: int, last: int, window_ms: int = 10_000) -> pd.DataFrame:
    """broker_windows rows: ``sends`` attempts per broker and window, ``last`` in the last window."""
    rows = []
    for w in range(windows):
        for b in range(brokers):
            n = last if w == windows - 1 else sends
            rows.append(
                {
                    "broker": f"broker-{b:02d}",
                    "window_start_ms": w * window_ms,
                    "window_ms": window_ms,
                    "sends": n,
                    "failed_timeout": n // 10,
                    **{
                        c: 0
                        for c in ("failed_connect", "failed_broker_error", "not_store_ok", "failed_other")
                    },
                    "latency_p50_ms": 3.0,
                    "latency_p99_ms": 10.0,
                    "latency_p999_ms": 40.0,
                    "latency_max_ms": 40,  # = p99.9: two series on one path
                }
            )
    return pd.DataFrame(rows)


def _storage(brokers: list[str], queues: int, delay_levels: int, windows: int = 1) -> pd.DataFrame:
    """broker_storage rows: 10 records per (queue, window) of the topic and of each delay level."""
    return pd.DataFrame(
        [
            {
                "broker": b,
                "topic": t,
                "queue_id": q,
                "window_start_ms": w * 1000,
                "window_ms": 1000,
                "messages": 10,
                "commit_log_bytes": 1000 * (w + 1),
            }
            for b in brokers
            for t, n in (("TopicTest", queues), ("SCHEDULE_TOPIC_XXXX", delay_levels))
            for q in range(n)
            for w in range(windows)
        ]
    )


def _time_axes(fig: Figure) -> list[Axes]:
    """The figure's axes over time: labelled with the time axis, or sharing x with one that is."""
    labelled = [ax for ax in fig.axes if ax.get_xlabel() == TIME_LABEL]
    return [ax for ax in fig.axes if any(ax is t or ax.get_shared_x_axes().joined(ax, t) for t in labelled)]


def _legend_texts(fig: Figure) -> list[str]:
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
    return [t.get_text() for legend in legends for t in legend.get_texts()]


def _run_figures() -> Iterator[tuple[str, Figure]]:
    for chart in report.figures(present_runs.small_run()):
        if chart.figure is not None:
            yield chart.name, chart.figure


# ---- the window-coverage rule ---------------------------------------------------------------------


def test_a_window_the_run_cuts_short_is_drawn_over_its_covered_part_and_scaled() -> None:
    # 6 windows of 10 s, 100 attempts per broker each; the run ends at 54 s: the last window holds 40
    bw = _bw(brokers=2, windows=6, sends=100, last=40)
    fig = plots.traffic_share(bw, Timeline(end_ms=54_000))
    rate = fig.axes[1].get_lines()[0]
    assert list(rate.get_xdata()) == [5.0, 15.0, 25.0, 35.0, 45.0, 52.0]  # the middle of 50-54 s
    assert list(rate.get_ydata()) == [10.0] * 6  # 40 in 4 s: the same 10/s, not a drop to 4/s
    failed = plots.retries_and_failures(bw, bw.iloc[:0], Timeline(end_ms=54_000)).axes[0].patches
    assert [round(p.get_height(), 9) for p in failed] == [2.0] * 6  # 2 x 10 or 2 x 4 timeouts, per second
    assert [round(p.get_width(), 9) for p in failed][-1] == 3.6  # 90% of the covered 4 s


def test_a_sliver_of_a_window_is_left_out_and_whole_windows_stay_whole() -> None:
    bw = _bw(brokers=2, windows=6, sends=100, last=5)
    sliver = 50_000 + int(MIN_COVERED * 10_000) - 1
    x = plots.traffic_share(bw, Timeline(end_ms=sliver)).axes[1].get_lines()[0].get_xdata()
    assert list(x) == [5.0, 15.0, 25.0, 35.0, 45.0]
    whole = plots.traffic_share(bw).axes[1].get_lines()[0]  # no end given: every window is whole
    assert list(whole.get_xdata())[-1] == 55.0 and list(whole.get_ydata())[-1] == 0.5


def test_utilisation_of_a_cut_window_is_a_share_of_its_covered_part() -> None:
    windows = pd.DataFrame(
        {"window_start_ms": [0, 10_000], "window_ms": [10_000, 10_000], "busy": [0.8, 0.2]}
    )
    covered = timeline.covered_windows(windows, 12_500)
    assert list(covered["covered_ms"]) == [10_000, 2_500]
    assert list(timeline.per_covered(covered["busy"], covered)) == [0.8, 0.8]


def test_the_last_window_of_a_real_run_is_not_a_drop_in_rate() -> None:
    """Producers at a steady 400 msg/s all stop at 7.5 s (uniform arrivals): the window 7-8 s holds half
    a window of sends; drawn at 7-7.5 s and scaled, it reads the same rate, not half of it."""
    run = present_runs.small_run()
    fig = plots.traffic_share(run.broker_windows, run.timeline)
    lines = [line for line in fig.axes[1].get_lines() if line.get_gid() is None]  # not the fault's
    total = np.sum([line.get_ydata() for line in lines], axis=0)
    assert lines[0].get_xdata()[-1] == pytest.approx(7.25, abs=0.01)
    assert total[-1] == pytest.approx(present_runs.RATE_PER_S, rel=0.05)
    assert total[-1] == pytest.approx(np.median(total), rel=0.05)


# ---- what a chart holds ---------------------------------------------------------------------------


def test_an_open_loop_run_has_no_broker_load_chart_and_the_report_says_why() -> None:
    run = present_runs.small_run()
    assert plots.broker_load(run.broker_windows, run.timeline) is None
    load = next(c for c in report.figures(run) if c.name == "broker_load")
    assert load.figure is None and "open-loop" in load.caption and "brokers.coupling = open" in load.caption
    ylabels = {ax.get_ylabel() for _, fig in _run_figures() for ax in fig.axes}
    assert not {"writer utilisation (%)", "send-queue depth"} & ylabels
    page = report.render_page(run, report.figures(run), "here")
    assert re.search(r'<figure id="broker_load" class="absent"><figcaption>Broker load: no chart', page)


def test_a_closed_loop_run_without_rejections_draws_no_empty_flow_control_panel() -> None:
    run = present_runs.small_run(closed=True)
    fig = plots.broker_load(run.broker_windows, run.timeline)
    assert [ax.get_ylabel() for ax in fig.axes] == ["writer utilisation (%)", "send-queue depth"]
    assert "no flow-control rejection in this run" in fig.get_suptitle()


def test_no_count_or_rate_axis_goes_below_zero() -> None:
    """The run has no failed attempt and no retry: those panels say so, over 0..1, not -0.05..0.05."""
    for name, fig in _run_figures():
        for ax in fig.axes:
            if ax.get_yscale() in ("linear", "symlog") and ax.get_ylabel():
                assert ax.get_ylim()[0] >= 0, (name, ax.get_ylabel(), ax.get_ylim())
    rows = pd.DataFrame(
        [
            {"variant": v, "scope": scope, "metric": m, "value": 0.0, "delta_pct": np.nan, "baseline": "off"}
            for v in ("off", "on")
            for scope in ("all", "broker-a")
            for m in (*(m for m, _ in plots.DEFAULT_COMPARED), "sends")
        ]
    )
    for fig in (
        plots.variant_metrics(rows, ["off", "on"], "off"),
        plots.variant_broker_sends(rows, ["off", "on"], "off"),
    ):
        assert all(ax.get_ylim() == (0, 1) for ax in fig.axes if ax.get_visible()), fig.get_suptitle()
    failures = plots.retries_and_failures(
        present_runs.small_run().broker_windows, present_runs.small_run().producer_windows
    )
    assert [ax.get_ylim() for ax in failures.axes] == [(0, 1), (0, 1)]
    assert {t.get_text() for ax in failures.axes for t in ax.texts} == {
        "no failed attempts",
        "no retries and no failed message",
    }


def test_every_fault_window_is_marked_once_the_same_way_on_every_time_axis() -> None:
    run = present_runs.small_run()
    (fault,) = run.faults
    gid = f"{FAULT_GID}:{fault.legend}"
    styles = set()
    storage = plots_storage.storage_and_consumers(
        _storage(run.brokers, queues=4, delay_levels=2, windows=8), pd.DataFrame(), run.timeline
    )
    charts = [*_run_figures(), ("variant_timelines", _variants(run.timeline)), ("broker_storage", storage)]
    for name, fig in charts:
        axes = _time_axes(fig)
        assert axes, name
        for ax in axes:
            bands = [p for p in ax.patches if p.get_gid() == gid]
            edges = [line for line in ax.get_lines() if line.get_gid() == gid]
            assert len(bands) == 1 and len(edges) == 2, (name, ax.get_ylabel())
            assert sorted(line.get_xdata()[0] for line in edges) == [2.0, 5.0]
            styles.add((bands[0].get_facecolor(), *(e.get_color() for e in edges), edges[0].get_linestyle()))
        assert _legend_texts(fig).count(fault.legend) == 1, name
        assert "fault: slowdown broker-b, 2-5 s" in _legend_texts(fig)
    assert len(styles) == 1  # the same band and edges in every chart


def test_where_producers_stop_is_marked_on_every_time_axis() -> None:
    run = present_runs.small_run()
    assert run.timeline.stop_ms == 7000 and run.timeline.end_ms == run.span_ms
    for name, fig in _run_figures():
        for ax in _time_axes(fig):
            assert [
                line.get_xdata()[0] for line in ax.get_lines() if line.get_gid() == timeline.STOP_GID
            ] == [7.0], name
        assert sum("producers stop" in t for t in _legend_texts(fig)) == 1, name


def _variants(tl: Timeline) -> Figure:
    bw = present_runs.small_run().broker_windows
    cw = pd.concat([bw.assign(variant="on"), bw.assign(variant="off", isolated_producers=0)])
    return plots.variant_timelines(cw, ["off", "on"], {"off": tl, "on": tl})


def test_a_shared_row_of_variant_timelines_holds_every_variants_data() -> None:
    fig = _variants(present_runs.small_run().timeline)
    for ax in fig.axes:
        low, high = ax.get_ylim()
        for line in ax.get_lines():
            if line.get_gid() is None:
                y = np.asarray(line.get_ydata(), float)
                assert low <= np.nanmin(y) and np.nanmax(y) <= high, ax.get_ylabel()


# ---- every series visible, readable labels ----------------------------------------------------------


def _coincident_pairs(ax: Axes) -> Iterator[tuple[Line2D, Line2D]]:
    lines = sorted(
        (x for x in ax.get_lines() if x.get_gid() is None and len(x.get_xdata())), key=Line2D.get_zorder
    )
    for i, below in enumerate(lines):
        for above in lines[i + 1 :]:
            if np.array_equal(below.get_xydata(), above.get_xydata(), equal_nan=True):
                yield below, above


def test_series_on_the_same_path_stay_visible() -> None:
    """Four brokers with the same rate, p99.9 equal to the max: each later series is narrower, with a
    smaller marker of another shape, so the one below shows around it."""
    bw = _bw(brokers=4, windows=6, sends=100, last=100)
    figures = [plots.traffic_share(bw), plots.latency_percentiles(bw), _variants(Timeline())]
    pairs = [pair for fig in figures for ax in fig.axes for pair in _coincident_pairs(ax)]
    assert len(pairs) >= 6 + 4  # the brokers' rates; p99.9 and max in each broker's panel
    for below, above in pairs:
        assert below.get_linewidth() > above.get_linewidth()
        assert below.get_markersize() > above.get_markersize()
        assert below.get_marker() != above.get_marker()


def _visible(labels: list) -> list[str]:
    return [t.get_text() for t in labels if t.get_visible() and t.get_text()]


def test_category_axes_are_labelled_by_broker_when_rows_are_many() -> None:
    brokers = [f"broker-{b:02d}" for b in range(16)]
    qw = pd.DataFrame(
        [
            {"broker": b, "queue_id": q, "window_start_ms": w * 10_000, "window_ms": 10_000, "skew": 1.0}
            for b in brokers
            for q in range(8)
            for w in range(5)
        ]
    )
    heat = plots.queue_heatmap(qw, Timeline((FAULT,), end_ms=45_000)).axes[0]
    assert _visible(heat.get_yticklabels()) == brokers  # not 128 "broker-xx qN"
    assert len(heat.get_yticks(minor=True)) == 128
    intervals = pd.DataFrame(
        [
            {"producer": p, "broker": b, "start_ms": 1000 * p, "end_ms": 1000 * p + 500}
            for b in brokers
            for p in range(20)
        ]
    )
    gantt = plots.isolation_gantt(intervals, Timeline((FAULT,), end_ms=45_000), brokers).axes[0]
    assert _visible(gantt.get_yticklabels()) == brokers
    storage = _storage(brokers, queues=8, delay_levels=18)
    load = pd.DataFrame(
        {"consumer_group": "cg", "consumer": [f"consumer-{c}" for c in range(100)], "messages": 1}
    )
    _, queues, consumers = plots_storage.storage_and_consumers(storage, load).axes[:3]
    assert _visible(queues.get_xticklabels()) == brokers  # not 416 rotated "broker\ntopic:queue"
    assert 0 < len(_visible(consumers.get_xticklabels())) <= plots.MAX_TICK_LABELS


def test_few_isolated_pairs_keep_their_producer_labels() -> None:
    run = present_runs.small_run()
    ax = plots.isolation_gantt(run.intervals, run.timeline, run.brokers).axes[0]
    pairs = run.intervals[["producer", "broker"]].drop_duplicates()
    assert len(_visible(ax.get_yticklabels())) == len(pairs) <= plots.MAX_TICK_LABELS
    assert all(t.startswith("producer ") for t in _visible(ax.get_yticklabels()))
    colors = plots.broker_colors(run.brokers)
    bars = [c for c in ax.collections if len(c.get_facecolors())]
    assert {tuple(c.get_facecolors()[0]) for c in bars} == {tuple(colors["broker-b"])}  # its color everywhere


# ---- the report page --------------------------------------------------------------------------------


def test_the_report_summary_has_a_column_per_scope() -> None:
    run = present_runs.small_run()
    page = report.render_page(run, [], "here").split("<h2>Summary</h2>", 1)[1]
    head = re.search(r'<div class="wide"><table><thead><tr>(.*?)</tr>', page).group(1)
    assert re.findall(r"<th>(.*?)</th>", head) == [
        "metric",
        "all",
        "broker-a",
        "broker-b",
        "broker-c",
        "broker-d",
    ]
    assert "<td>messages</td><td>3,000</td>" in page
    # the send call's latency on the whole run only; a broker's, every attempt sent to it (broker-b's
    # 600 ms answers during its slowdown: they were left out when its figure was its stored results')
    summary = run.summary.set_index("scope")
    send = re.search(r"<tr><td>send p99 \(ms\)</td>(.*?)</tr>", page).group(1)
    assert re.findall(r"<td>(.*?)</td>", send)[1:] == ["-"] * 4
    attempt = re.findall(
        r"<td>(.*?)</td>", re.search(r"<tr><td>attempt p99 \(ms\)</td>(.*?)</tr>", page).group(1)
    )
    assert (
        attempt[2] == f"{summary.loc['broker-b', 'attempt_latency_p99_ms']:,.2f}"
        and float(attempt[2].replace(",", "")) > 500
    )
    for label in ("duplicate copies", "failed attempts: timeout", "stored, not-OK status"):
        assert f"<td>{label}</td>" in page, label


def test_the_report_shows_each_fault_against_the_rest_of_the_run() -> None:
    """The fault-window view, first after the run's settings: per fault, a row per figure and a column
    per scope and period (during, outside)."""
    run = present_runs.small_run()
    page = report.render_page(run, [], "here")
    assert page.index("<h2>During each fault</h2>") < page.index("<h2>Summary</h2>")
    assert "<h3>fault 0: slowdown broker-b, 2-5 s</h3>" in page
    fw = run.fault_windows.set_index(["scope", "period"])
    during, outside = fw.loc[("broker-b", "during")], fw.loc[("broker-b", "outside")]
    assert during.attempt_latency_p99_ms > 10 * outside.attempt_latency_p99_ms
    fault = page.split("<h2>During each fault</h2>", 1)[1].split("<h2>Summary</h2>", 1)[0]
    columns = re.findall(r"<th>(.*?)</th>", re.search(r"<thead><tr>(.*?)</tr>", fault).group(1))
    attempts = re.findall(r"<td>(.*?)</td>", re.search(r"<tr><td>attempts</td>.*?</tr>", fault).group(0))
    assert dict(zip(columns, attempts, strict=True))["broker-b during"] == f"{int(during.sends):,}"
