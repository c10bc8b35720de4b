"""A static, self-contained HTML report of one run: the summary tables and the charts (base64 PNGs).

For people who do not use notebooks; needs no Spark (the tables are read with ``deltalake``).
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import pandas as pd
from matplotlib.figure import Figure

from rocketsim import __version__
from rocketsim.omb.measured import OmbRun
from rocketsim.present import frames, plots, plots_storage, text
from rocketsim.present import omb as omb_plots
from rocketsim.present.explore import RunData, load_run

# the page never scrolls sideways: images shrink to its width, a table wider than it scrolls in its box
_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1200px;
       color: #222; line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.6em 0; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; overflow-wrap: anywhere; }
th { background: #f4f4f4; } td:first-child, th:first-child { text-align: left; }
.meta td { text-align: left; } .muted { color: #777; font-size: 0.85em; }
.wide { max-width: 100%; overflow-x: auto; }
figure { margin: 1em 0; } figure.absent figcaption { color: #777; font-style: italic; }
img { max-width: 100%; height: auto; border: 1px solid #eee; margin: 0.5em 0; }
pre { background: #f8f8f8; padding: 0.8em; overflow-x: auto; font-size: 0.8em; }
"""


def _table(df: pd.DataFrame, floatfmt: str = "{:,.2f}") -> str:
    def fmt(v: object) -> str:
        if isinstance(v, float):
            return "-" if pd.isna(v) else floatfmt.format(v)
        if isinstance(v, int):
            return f"{v:,}"
        return html.escape(str(v))

    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in [df.index.name or "", *df.columns])
    body = "".join(
        "<tr>" + f"<td>{html.escape(str(idx))}</td>" + "".join(f"<td>{fmt(v)}</td>" for v in row) + "</tr>"
        for idx, row in zip(df.index, df.itertuples(index=False), strict=True)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _meta(run: RunData) -> str:
    row = run.runs_row or {}
    sc = run.scenario
    items = [("run id", run.run_id)]
    if row:
        items += [
            ("scenario", f"{row['scenario_name']} (seed {row['seed']})"),
            ("overrides", " ".join(row["overrides"]) or "none"),
            ("messages / attempts", f"{row['messages']:,} / {row['attempts']:,}"),
            ("started at (UTC) / wall time", f"{row['started_at']} / {row['wall_time_s']:.1f} s"),
            ("rocketsim version", row["code_version"]),
        ]
    if sc is not None:
        p = sc.producers
        items += [
            ("producers", f"{p.count} x client {p.client_version}, {p.threads} thread(s)"),
            ("fault strategy", "on (sendLatencyFaultEnable)" if p.send_latency_fault_enable else "off"),
            ("retries / timeout", f"{p.retry_times_when_send_failed} / {p.send_msg_timeout_ms} ms"),
            ("brokers", ", ".join(sc.cluster.brokers)),
        ]
    faults = "; ".join(f"{f.label} {f.start_ms / 1000:g}-{f.end_ms / 1000:g} s" for f in run.faults)
    items.append(("fault timeline", faults or "none"))
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in items)
    return f'<table class="meta">{rows}</table>'


def fault_section(run: RunData) -> list[str]:
    """During each fault against the rest of the run (``fault_windows``): a table per fault, a row per
    figure and a column per scope and period; the report's first section after the run's settings."""
    parts = ["<h2>During each fault</h2>"]
    if run.fault_windows.empty:
        return [*parts, '<p class="muted">The run has no fault (or was written before fault_windows).</p>']
    parts.append(
        '<p class="muted">Per fault, its window against the rest of the run: the attempts that started in '
        "it (latency and failed share of every attempt, failed ones included; share: of the period's "
        "attempts) and the messages whose send began in it (a broker's: those whose last attempt went to "
        'it; "send p99" is the send call, on "all" only).</p>'
    )
    for head, table in frames.fault_window_frames(run.fault_windows):
        parts.append(f"<h3>{html.escape(text.fault_heading(head))}</h3>")
        by_metric = table.T.rename_axis("metric")  # a column per scope and period, as the summary's
        by_metric.columns = [f"{scope} {period}" for scope, period in table.index]
        parts.append(f'<div class="wide">{_table(by_metric)}</div>')
    return parts


class Chart(NamedTuple):
    """One chart of the report: its figure, or None with the caption saying why the run has none."""

    name: str
    caption: str
    figure: Figure | None


def figures(run: RunData) -> list[Chart]:
    """Every chart of the run, in report order (the faults and the run's end marked on each time axis)."""
    bw, pw, tl = run.broker_windows, run.producer_windows, run.timeline
    load = plots.broker_load(bw, tl)
    return [
        Chart(
            "latency_percentiles",
            "Attempt latency percentiles per broker: a slow broker shows as a raised p99 band.",
            plots.latency_percentiles(bw, tl),
        ),
        Chart(
            "traffic_share",
            "Share of attempts per broker: with the fault strategy on, a slow broker loses traffic.",
            plots.traffic_share(bw, tl),
        ),
        Chart(
            "retries_failures",
            "Failed attempts by outcome, retries, and sends that ran out of time with retries left.",
            plots.retries_and_failures(bw, pw, tl),
        ),
        Chart(
            "broker_load",
            "Closed-loop brokers: writer utilisation, send-queue depth and flow-control rejections by kind."
            if load is not None
            else f"Broker load: no chart, as {plots.NO_BROKER_LOAD}.",
            load,
        ),
        Chart(
            "publish_delay",
            "Queue wait before a send starts (publish delay): producers falling behind.",
            plots.publish_delay(pw, tl),
        ),
        Chart(
            "isolation_gantt",
            "When each producer's latency-fault table isolated a broker (derived from the attempts).",
            plots.isolation_gantt(run.intervals, tl, run.brokers),
        ),
        Chart(
            "queue_heatmap",
            "Sends per queue relative to the broker's mean queue: persistent red rows are skew.",
            plots.queue_heatmap(run.queue_windows, tl),
        ),
    ]


def storage_figures(run: RunData) -> list[Chart]:
    """The broker-side chart (commit log, stored queues, consumer load) if the run has its tables."""
    if run.storage.empty:
        return []
    return [
        Chart(
            "broker_storage",
            "Commit-log growth per broker, records per stored queue, and messages per consumer.",
            plots_storage.storage_and_consumers(run.storage, run.consumer_load, run.timeline),
        )
    ]


def _chart_html(chart: Chart) -> str:
    caption = f"<figcaption>{html.escape(chart.caption)}</figcaption>"
    if chart.figure is None:
        return f'<figure id="{chart.name}" class="absent">{caption}</figure>'
    data = plots.figure_png_base64(chart.figure)
    img = f'<img alt="{html.escape(chart.caption)}" src="data:image/png;base64,{data}">'
    return f'<figure id="{chart.name}">{img}{caption}</figure>'


def omb_section(warehouse: str | os.PathLike[str], run_id: str, measured: Sequence[OmbRun]) -> list[str]:
    """The run beside measured OpenMessaging Benchmark runs: a table and the overlay chart."""
    simulated = omb_plots.simulated_runs(warehouse, run_id)
    caption = (
        "The run as OpenMessaging Benchmark would have recorded it (solid) beside measured OMB results "
        "(dashed): publish p99, rate and errors per 10 s window, and the aggregated latency quantiles."
    )
    chart = Chart("omb_overlay", caption, omb_plots.overlay_figure(simulated, measured))
    return [
        "<h2>Simulated vs measured (OpenMessaging Benchmark)</h2>",
        '<p class="muted">Measured: ' + html.escape(", ".join(m.source for m in measured)) + ". Simulated: "
        "published sends (a SendResult of any status) by the window their send ended in, as OMB's RocketMQ "
        "driver counts them (docs/omb.md).</p>",
        f'<div class="wide">{_table(omb_plots.summary_frame([*simulated, *measured]))}</div>',
        _chart_html(chart),
    ]


def render_page(run: RunData, charts: Sequence[Chart], source: str, extra: Sequence[str] = ()) -> str:
    """The report of ``run`` with ``charts`` as one HTML document (figures embedded as base64 PNG);
    ``source`` names where the tables came from; ``extra``: more sections (HTML) after the charts."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>rocketsim run {html.escape(run.run_id)}</title><style>{_CSS}</style></head><body>",
        f"<h1>rocketsim run {html.escape(run.run_id)}</h1>",
        f'<p class="muted">generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by rocketsim {__version__} '
        f"from {html.escape(source)}</p>",
        "<h2>Run</h2>",
        _meta(run),
        *fault_section(run),
        "<h2>Summary</h2>",
        '<p class="muted">A column per scope (the whole run, then each broker). "send" latency is the send '
        "call of every message (all its attempts, failed sends included), for the whole run only: a send "
        'may try several brokers. "attempt" latency, "attempts sent" and "failed attempts" are every '
        "attempt sent to the scope, failed and timed-out ones included. The messages' statuses add up to "
        'the messages; "isolated" is producer-seconds of latency-fault isolation within the run.</p>',
        f'<div class="wide">{_table(frames.summary_frame(run.summary).T.rename_axis("metric"))}</div>',
        "<h2>Charts</h2>",
        *[_chart_html(c) for c in charts],
        *extra,
    ]
    if run.scenario is not None:
        parts += ["<h2>Scenario file</h2>", f"<pre>{html.escape(run.scenario.source_text)}</pre>"]
    parts.append("</body></html>")
    return "\n".join(parts)


def render_report(
    warehouse: str | os.PathLike[str], run_id: str, measured: Sequence[OmbRun] | None = None
) -> str:
    """The report of ``run_id`` as one HTML document (figures embedded as base64 PNG); ``measured``:
    OMB results to put the run beside (:func:`omb_section`)."""
    run = load_run(os.fspath(warehouse), run_id)
    charts = figures(run) + storage_figures(run)
    extra = omb_section(warehouse, run_id, measured) if measured else []
    return render_page(run, charts, str(Path(warehouse).resolve()), extra)


def write_report(
    warehouse: str | os.PathLike[str],
    run_id: str,
    out: str | os.PathLike[str],
    measured: list[OmbRun] | None = None,
) -> Path:
    """Write the report of ``run_id`` to ``out`` (folders made as needed, once the report is made: a run
    that cannot be read leaves nothing behind)."""
    page = render_report(warehouse, run_id, measured)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path
