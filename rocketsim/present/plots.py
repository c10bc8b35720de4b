"""Charts of a run and of a comparison: matplotlib over the pandas frames of the summary tables.

Every function takes frames as read by :mod:`rocketsim.present.explore` (or ``read_pandas``) and returns a
:class:`matplotlib.figure.Figure` with a title, axis labels with units and a legend. A chart over time
takes the run's :class:`~rocketsim.present.timeline.Timeline` (``RunData.timeline``): a window the run's
end cuts short is drawn over the part it covers, its rates scaled to it, and the scenario's faults and
where producers stop are marked the one way, each named in the legend below the chart. No pyplot state
is used, so figures can be made anywhere (notebooks, the HTML report, tests); :func:`save_figure` writes
a PNG, :func:`figure_png_base64` embeds one.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib import colors as mcolors
from matplotlib.axes import Axes
from matplotlib.figure import Figure  # no pyplot: no global state, no GUI backend needed
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from rocketsim.present import timeline
from rocketsim.present.timeline import (
    NO_TIMELINE,
    TIME_LABEL,
    Timeline,
    broker_styles,
    empty_note,
    per_covered,
    per_second,
    series_styles,
    window_label,
    zero_floor,
)

NO_DATA_COLOR = "0.55"
DPI = 110
MAX_TICK_LABELS = 24  # on a category axis; more rows are labelled by group (broker)
_OUTCOMES = {
    "failed_timeout": "remoting timeout",
    "failed_connect": "connect refused",
    "failed_broker_error": "broker error code",
    "not_store_ok": "stored, not SEND_OK",
    "failed_other": "other",
}
_BUSY = {
    "busy_rejectrequest": "[REJECTREQUEST]",
    "busy_overload": "[OVERLOAD]",
    "busy_pc_synchronized": "[PC_SYNCHRONIZED]",
    "busy_pcbusy_clean_queue": "[PCBUSY_CLEAN_QUEUE]",
    "busy_timeout_clean_queue": "[TIMEOUT_CLEAN_QUEUE]",
}
NO_BROKER_LOAD = (
    "open-loop brokers (brokers.coupling = open) model no commit-log writer, send queue or flow control, "
    "so this run has no broker-load data"
)


# ---- helpers ------------------------------------------------------------------------------------


def broker_colors(brokers: Sequence[str]) -> dict[str, tuple]:
    """A fixed color per broker (sorted names), the same in every chart."""
    return {b: style["color"] for b, style in broker_styles(brokers).items()}


def legend_right(ax: Axes, handles: Sequence[object] = ()) -> None:
    """The axes' legend (of ``handles``, else of its labelled artists) outside its right edge, never over
    the data; none if there is nothing to name."""
    handles = list(handles) or ax.get_legend_handles_labels()[0]
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)


def label_groups(ax: Axes, groups: Sequence[str], axis: str = "y") -> None:
    """Label a category axis whose rows 0..n-1 belong to ``groups`` (in row order, e.g. each queue's
    broker): one label per group at its middle, a minor tick per row, a line between groups."""
    starts = [i for i in range(len(groups)) if i == 0 or groups[i] != groups[i - 1]]
    ends = [*starts[1:], len(groups)]
    centers = [(s + e - 1) / 2 for s, e in zip(starts, ends, strict=True)]
    names = [groups[s] for s in starts]
    set_ticks, line = (ax.set_yticks, ax.axhline) if axis == "y" else (ax.set_xticks, ax.axvline)
    set_ticks(centers, names, fontsize=8)
    set_ticks(range(len(groups)), minor=True)
    for s in starts[1:]:
        line(s - 0.5, color="k", lw=0.8)


def thin_labels(ax: Axes, axis: str = "x", most: int = MAX_TICK_LABELS) -> None:
    """Keep every k-th tick label of a category axis so at most ``most`` show (the ticks stay)."""
    ticks = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    step = math.ceil(len(ticks) / most) if ticks else 1
    for i, label in enumerate(ticks):
        label.set_visible(i % step == 0)


def save_figure(fig: Figure, out_dir: str | Path, name: str) -> Path:
    """Write ``<out_dir>/<name>.png`` (folders made as needed) and return its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.png"
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    return path


def show(fig: Figure, out_dir: str | Path, name: str) -> object:
    """Save the figure (:func:`save_figure`) and return the PNG as an IPython image, for notebooks."""
    from IPython.display import Image

    return Image(filename=str(save_figure(fig, out_dir, name)))


def figure_png_base64(fig: Figure) -> str:
    """The figure as a base64 PNG (for ``<img src="data:image/png;base64,...">``)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


# ---- one run ------------------------------------------------------------------------------------

_PERCENTILES = (
    ("latency_p50_ms", "p50"),
    ("latency_p99_ms", "p99"),
    ("latency_p999_ms", "p99.9"),
    ("latency_max_ms", "max"),
)


def latency_percentiles(bw: pd.DataFrame, tl: Timeline = NO_TIMELINE) -> Figure:
    """Attempt latency p50 / p99 / p99.9 / max over time, one panel per broker (log scale)."""
    brokers = sorted(bw["broker"].unique())
    n = max(1, len(brokers))
    fig = Figure(figsize=(11, 2.3 * n + 1.0), layout="constrained")
    axes = fig.subplots(n, 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    styles = series_styles(len(_PERCENTILES))
    for ax, broker in zip(axes, brokers, strict=False):
        d = tl.windows(bw[bw["broker"] == broker].sort_values("window_start_ms"))
        tl.mark(ax)
        for (col, label), style in zip(_PERCENTILES, styles, strict=True):
            ax.plot(d["x_s"], d[col].astype(float), label=label, **style)
        ax.set_yscale("log")
        ax.set_ylabel("latency (ms)")
        ax.set_title(broker, loc="left", fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
    if not brokers:
        empty_note(axes[0], "no attempts")
    legend_right(axes[0])
    axes[-1].set_xlabel(TIME_LABEL)
    tl.legend(fig)
    fig.suptitle(f"Send-attempt latency percentiles per broker ({window_label(bw)}, log scale)")
    return fig


def traffic_share(bw: pd.DataFrame, tl: Timeline = NO_TIMELINE) -> Figure:
    """Share of attempts per broker over time (stacked), and attempts per second."""
    fig = Figure(figsize=(11, 5.8), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[2, 1])
    brokers = sorted(bw["broker"].unique()) if len(bw) else []
    sends = bw.pivot_table(
        index=["window_start_ms", "window_ms"], columns="broker", values="sends", aggfunc="sum"
    )
    w = tl.windows(sends.fillna(0).reset_index())
    styles = broker_styles(brokers)
    if len(w):
        totals = w[brokers].sum(axis=1).replace(0, np.nan)
        share = w[brokers].div(totals, axis=0).fillna(0) * 100
        top.stackplot(
            w["x_s"], share.T.to_numpy(), labels=brokers, colors=[styles[b]["color"] for b in brokers]
        )
        for b in brokers:
            bottom.plot(w["x_s"], per_second(w[b], w), label=b, **styles[b])
    else:
        empty_note(top, "no attempts")
    for ax in (top, bottom):
        tl.mark(ax)
        legend_right(ax)
    top.set_ylim(0, 100)
    top.set_ylabel("share of attempts (%)")
    bottom.set_ylabel("attempts / s")
    bottom.set_xlabel(TIME_LABEL)
    bottom.grid(True, alpha=0.3)
    zero_floor(bottom)
    tl.legend(fig)
    fig.suptitle(f"Traffic per broker ({window_label(bw)})")
    return fig


def retries_and_failures(bw: pd.DataFrame, pw: pd.DataFrame, tl: Timeline = NO_TIMELINE) -> Figure:
    """Failed attempts per second by outcome (all brokers), and retries / lost retry budget per second."""
    fig = Figure(figsize=(11, 5.8), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    per = tl.sums(bw, list(_OUTCOMES))
    stacked = np.zeros(len(per))
    for col, label in _OUTCOMES.items():
        rate = per_second(per[col], per)
        if rate.any():
            top.bar(per["x_s"], rate, width=per["covered_ms"] / 1000 * 0.9, bottom=stacked, label=label)
            stacked = stacked + rate
    if not stacked.any():
        empty_note(top, "no failed attempts" if len(bw) else "no attempts")
    top.set_ylabel("failed attempts / s")
    series = {
        "retries": "retries",
        "retry_budget_exhausted": "lost retry budget (timeout)",
        "failed": "messages FAILED",
    }
    per = tl.sums(pw, list(series))
    for (col, label), style in zip(series.items(), series_styles(len(series)), strict=True):
        bottom.plot(per["x_s"], per_second(per[col], per), label=label, **style)
    if not len(per) or not per[list(series)].to_numpy().any():
        empty_note(bottom, "no retries and no failed message" if len(per) else "no sends")
    bottom.set_ylabel("per second")
    bottom.set_xlabel(TIME_LABEL)
    bottom.grid(True, alpha=0.3)
    for ax in (top, bottom):
        tl.mark(ax)
        legend_right(ax)
        zero_floor(ax)
    tl.legend(fig)
    fig.suptitle(f"Failures, retries and lost retry budget ({window_label(bw)})")
    return fig


def has_broker_load(bw: pd.DataFrame) -> bool:
    """Whether the run's brokers are closed-loop (``brokers.coupling`` joint or iterative): only then do
    ``broker_windows`` hold the writer's utilisation, the send-queue depth and flow control."""
    return "utilisation" in bw.columns and bool(bw["utilisation"].notna().any())


def broker_load(bw: pd.DataFrame, tl: Timeline = NO_TIMELINE) -> Figure | None:
    """The closed-loop brokers: per broker, the commit-log writer's utilisation, the send-queue depth
    requests found (mean and max), and the flow-control rejections per second by kind if there were any.
    None for open-loop brokers (:func:`has_broker_load`; :data:`NO_BROKER_LOAD` says why)."""
    if not has_broker_load(bw):
        return None
    brokers = sorted(bw["broker"].unique())
    busy = tl.sums(bw, list(_BUSY))
    kinds = [c for c in _BUSY if busy[c].any()]
    fig = Figure(figsize=(11, 7.8 if kinds else 5.6), layout="constrained")
    axes = fig.subplots(3 if kinds else 2, 1, sharex=True)
    util_ax, depth_ax = axes[:2]
    styles = broker_styles(brokers)
    for broker in brokers:
        d = tl.windows(bw[bw["broker"] == broker].sort_values("window_start_ms"))
        util = per_covered(d["utilisation"].astype(float), d) * 100
        util_ax.plot(d["x_s"], util, label=broker, **styles[broker])
        depth_ax.plot(d["x_s"], d["queue_depth_mean"].astype(float), label=f"{broker} mean", **styles[broker])
        depth_ax.plot(
            d["x_s"], d["queue_depth_max"].astype(float), ls=":", color=styles[broker]["color"], lw=1.0
        )
    util_ax.axhline(100, color="0.4", lw=0.8, ls="--")
    util_ax.set_ylabel("writer utilisation (%)")
    depth_ax.set_ylabel("send-queue depth")
    if kinds:
        stacked = np.zeros(len(busy))
        for col in kinds:
            rate = per_second(busy[col], busy)
            axes[2].bar(
                busy["x_s"], rate, width=busy["covered_ms"] / 1000 * 0.9, bottom=stacked, label=_BUSY[col]
            )
            stacked = stacked + rate
        axes[2].set_ylabel("SYSTEM_BUSY / s (all brokers)")
    axes[-1].set_xlabel(TIME_LABEL)
    max_key = {depth_ax: [Line2D([], [], ls=":", color="0.3", lw=1.0, label="max (dotted)")]}
    for ax in axes:
        tl.mark(ax)
        ax.grid(True, alpha=0.3)
        legend_right(ax, [*ax.get_legend_handles_labels()[0], *max_key.get(ax, [])])
        zero_floor(ax)
    tl.legend(fig)
    none = "" if kinds else "; no flow-control rejection in this run"
    fig.suptitle(f"Broker load: commit-log writer, send queue and flow control ({window_label(bw)}{none})")
    return fig


def publish_delay(pw: pd.DataFrame, tl: Timeline = NO_TIMELINE) -> Figure:
    """Queue wait before the send starts ("publish delay"): p50 and p99 over producers, per window."""
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    ax = fig.subplots()
    tl.mark(ax)
    if len(pw):
        per = pw.groupby("window_start_ms", as_index=False).agg(
            window_ms=("window_ms", "first"),
            p50=("queue_wait_p50_ms", "median"),
            p99=("queue_wait_p99_ms", "median"),
            worst=("queue_wait_p99_ms", "max"),
        )
        per = tl.windows(per)
        lines = {
            "p50": "median of producers' p50",
            "p99": "median of producers' p99",
            "worst": "worst producer's p99",
        }
        for (col, label), style in zip(lines.items(), series_styles(len(lines)), strict=True):
            ax.plot(per["x_s"], per[col], label=label, **style)
        ax.set_yscale("symlog", linthresh=1.0)  # log above 1 ms, linear down to 0
        if not per[list(lines)].to_numpy().any():
            empty_note(ax, "no publish delay: every send started as its message was born")
    else:
        empty_note(ax, "no sends")
    zero_floor(ax)
    ax.set_ylabel("queue wait (ms, symlog)")
    ax.set_xlabel(TIME_LABEL)
    legend_right(ax)
    ax.grid(True, alpha=0.3)
    tl.legend(fig)
    fig.suptitle(f"Publish delay: born -> send start ({window_label(pw)})")
    return fig


def isolation_gantt(
    intervals: pd.DataFrame, tl: Timeline = NO_TIMELINE, brokers: Sequence[str] = ()
) -> Figure:
    """One row per (producer, broker): when the producer's latency-fault table isolated the broker; rows
    grouped by broker (labelled by producer while there are few). ``brokers``: the run's, so that each
    has its color of the other charts (default: those isolated)."""
    pairs = (
        intervals[["broker", "producer"]].drop_duplicates().sort_values(["broker", "producer"])
        if len(intervals)
        else pd.DataFrame(columns=["broker", "producer"])
    )
    n = len(pairs)
    fig = Figure(figsize=(11, min(2.4 + 0.22 * n, 14)), layout="constrained")
    ax = fig.subplots()
    tl.mark(ax)
    span_ms = tl.end_ms if tl.end_ms is not None else int(intervals["end_ms"].max()) if n else 0
    end_s = max(span_ms, 1) / 1000.0
    colors = broker_colors([*brokers] or list(pairs["broker"].unique()))
    colors = {b: c for b, c in colors.items() if b in set(pairs["broker"])}
    for row, (broker, producer) in enumerate(pairs.itertuples(index=False)):
        d = intervals[(intervals.broker == broker) & (intervals.producer == producer)]
        bars = [(s / 1000, (min(e, span_ms) - s) / 1000) for s, e in zip(d.start_ms, d.end_ms, strict=True)]
        ax.broken_barh(bars, (row - 0.4, 0.8), facecolors=colors[broker], zorder=2)
        last = int(d.end_ms.max())
        if last > span_ms:
            ax.text(
                end_s, row, f"until {last / 1000:,.0f} s  ", ha="right", va="center", fontsize=7, color="w"
            )
    if 0 < n <= MAX_TICK_LABELS:
        ax.set_yticks(range(n), [f"producer {p} / {b}" for b, p in pairs.itertuples(index=False)], fontsize=7)
        ax.set_ylabel("producer / isolated broker")
    elif n:
        label_groups(ax, list(pairs["broker"]))
        ax.set_ylabel("isolated broker (a row per producer)")
    ax.set_ylim(-0.8, max(n, 1) - 0.2)
    ax.set_xlim(0, end_s)
    ax.invert_yaxis()
    ax.set_xlabel(TIME_LABEL)
    if n == 0:
        ax.set_yticks([])
        empty_note(ax, "no isolation: fault strategy off, or no slow or failed attempt isolated a broker")
    legend_right(ax, handles=[Patch(color=c, label=f"{b} isolated") for b, c in colors.items()])
    tl.legend(fig)
    fig.suptitle(f"Latency-fault isolation intervals ({len(intervals)} intervals, bars clipped to the run)")
    return fig


def queue_heatmap(qw: pd.DataFrame, tl: Timeline = NO_TIMELINE) -> Figure:
    """Sends per queue relative to its broker's mean queue, per window (1 = even, red = hot); rows
    grouped and labelled by broker."""
    fig = Figure(figsize=(11, 5.0), layout="constrained")
    ax = fig.subplots()
    if len(qw) == 0:
        empty_note(ax, "no attempts")
        fig.suptitle("Queue skew heat map")
        return fig
    pivot = qw.pivot_table(
        index=["broker", "queue_id"], columns="window_start_ms", values="skew", aggfunc="first"
    ).sort_index()
    window_ms = int(qw["window_ms"].iloc[0])
    starts = np.arange(pivot.columns.min(), pivot.columns.max() + 1, window_ms)  # windows without rows: grey
    w = tl.windows(pd.DataFrame({"window_start_ms": starts, "window_ms": window_ms}))
    data = pivot.reindex(columns=w["window_start_ms"]).to_numpy(dtype=float)
    edges = np.append(
        w["window_start_ms"].to_numpy(), w["window_start_ms"].iloc[-1] + w["covered_ms"].iloc[-1]
    )
    vmax = max(2.0, float(np.nanmax(data)) if np.isfinite(data).any() else 2.0)
    mesh = ax.pcolormesh(
        edges / 1000.0,
        np.arange(len(pivot) + 1) - 0.5,
        np.ma.masked_invalid(data),
        cmap=matplotlib.colormaps["RdBu_r"].with_extremes(bad=NO_DATA_COLOR),
        norm=mcolors.TwoSlopeNorm(vmin=0.0, vcenter=1.0, vmax=vmax),
    )
    ax.set_ylim(len(pivot) - 0.5, -0.5)
    label_groups(ax, [b for b, _ in pivot.index])
    tl.mark(ax)
    ax.set_xlabel(TIME_LABEL)
    ax.set_ylabel("broker (a row per queue, q0 first)")
    fig.colorbar(mesh, ax=ax).set_label("sends / broker's mean queue (1 = even)")
    tl.legend(fig, also=[Patch(color=NO_DATA_COLOR, label="no attempt to the broker in the window")])
    fig.suptitle(f"Queue skew heat map ({window_ms / 1000:g} s windows)")
    return fig


# ---- a comparison -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Panel:
    """A row of :func:`variant_timelines`: one ``broker_windows`` column per broker over time. ``per``
    says how to read a window the run cuts short: ``"value"`` as it is (a share, a percentile, producers
    isolating), ``"second"`` a count per second of the part covered, ``"time"`` a share of the window's
    time as a % of the part covered (utilisation)."""

    column: str
    label: str
    per: str = "value"
    log: bool = False

    def values(self, d: pd.DataFrame) -> np.ndarray:
        """The panel's y values over the covered windows ``d`` (:func:`timeline.covered_windows`)."""
        if self.per == "second":
            return per_second(d[self.column].astype(float), d)
        if self.per == "time":
            return per_covered(d[self.column].astype(float), d) * 100
        return d[self.column].astype(float).to_numpy()


VARIANT_PANELS = (
    Panel("share", "share of attempts (%)"),
    Panel("latency_p99_ms", "attempt p99 (ms, log)", log=True),
    Panel("isolated_producers", "producers isolating it"),
)


def variant_timelines(
    cw: pd.DataFrame,
    variants: Sequence[str],
    timelines: Mapping[str, Timeline] | None = None,
    panels: Sequence[Panel] = VARIANT_PANELS,
) -> Figure:
    """The same fault timeline under each variant, side by side: per broker over time, one row per
    :class:`Panel` (default traffic share, p99 latency and isolating producers), one column per variant,
    shared y axes; ``timelines``: each variant's (``ComparisonData.timelines``)."""
    timelines = timelines or {}
    n = max(1, len(variants))
    fig = Figure(figsize=(max(5.0 * n, 8), 2.8 * len(panels) + 0.9), layout="constrained")
    axes = fig.subplots(len(panels), n, sharex=True, sharey="row", squeeze=False)
    styles = broker_styles(list(cw["broker"].unique()) if len(cw) else [])
    for j, v in enumerate(variants):
        d = cw[cw["variant"] == v].copy()
        if len(d):
            totals = d.groupby("window_start_ms")["sends"].transform("sum").replace(0, np.nan)
            d["share"] = (d["sends"] / totals * 100).fillna(0)
        for i, panel in enumerate(panels):
            ax = axes[i, j]
            tl = timelines.get(v, NO_TIMELINE)
            tl.mark(ax)
            for b in sorted(d["broker"].unique()) if len(d) else []:
                s = tl.windows(d[d["broker"] == b].sort_values("window_start_ms"))
                ax.plot(s["x_s"], panel.values(s), label=b, **styles[b])
            if panel.log:
                ax.set_yscale("log")
            if j == 0:
                ax.set_ylabel(panel.label)
            ax.grid(True, alpha=0.3)
            if i == 0:
                ax.set_title(v, fontsize=10)
        axes[-1, j].set_xlabel(TIME_LABEL)
    for row, panel in zip(axes, panels, strict=True):
        if not panel.log:
            zero_floor(*row)
    legend_right(axes[0, -1])
    timeline.legend(fig, timelines.values())
    fig.suptitle(f"Per broker over time, under each variant ({window_label(cw)})")
    return fig


DEFAULT_COMPARED = (
    ("attempts", "attempts"),
    ("retries", "retries"),
    ("latency_p99_ms", "send latency p99 (ms)"),
    ("latency_p999_ms", "send latency p99.9 (ms)"),
    ("queue_wait_p99_ms", "publish delay p99 (ms)"),
    ("isolations", "isolation intervals"),
)


MAX_LABELLED_BARS = 8  # variants whose bars get their change vs the baseline written on them


def variant_metrics(
    rows: pd.DataFrame,
    variants: Sequence[str],
    baseline: str,
    metrics: Sequence[tuple[str, str]] = DEFAULT_COMPARED,
) -> Figure:
    """Run-level metrics (scope "all") per variant as bars, labelled with the delta vs the baseline."""
    cols = 3
    nrows = math.ceil(len(metrics) / cols)
    fig = Figure(figsize=(12, 3.0 * nrows + 0.6), layout="constrained")
    axes = fig.subplots(nrows, cols, squeeze=False).ravel()
    allrows = rows[rows["scope"] == "all"]
    cmap = matplotlib.colormaps["tab10"]
    for ax, (metric, label) in zip(axes, metrics, strict=False):
        d = allrows[allrows["metric"] == metric].set_index("variant").reindex(list(variants))
        values = d["value"].astype(float).fillna(0).to_numpy()
        bars = ax.bar(range(len(variants)), values, color=[cmap(i % 10) for i in range(len(variants))])
        if len(variants) > MAX_LABELLED_BARS:  # a sweep: labels would overlap, the axis says it
            bars = []
        for bar, v, pct in zip(bars, variants, d["delta_pct"].to_numpy(), strict=False):
            text = "baseline" if v == baseline else ("n/a" if pd.isna(pct) else f"{pct:+.1f}%")
            ax.annotate(
                text,
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=8,
            )
        ax.set_xticks(range(len(variants)), variants, rotation=45 if len(variants) > 6 else 20, ha="right",
                      fontsize=8)  # fmt: skip
        ax.set_ylabel(label)
        ax.set_title(label, fontsize=10)
        ax.margins(y=0.18)
        zero_floor(ax)
    for ax in axes[len(metrics) :]:
        ax.set_visible(False)
    handles = [Patch(color=cmap(i % 10), label=v) for i, v in enumerate(variants)]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(variants), 6), fontsize=8)
    labels = f" (labels: change vs {baseline})" if len(variants) <= MAX_LABELLED_BARS else ""
    fig.suptitle(f"Whole-run metrics per variant{labels}")
    return fig


def variant_broker_sends(rows: pd.DataFrame, variants: Sequence[str], baseline: str) -> Figure:
    """Attempts sent to each broker under each variant (grouped bars), with the delta vs the baseline."""
    fig = Figure(figsize=(11, 4.5), layout="constrained")
    ax = fig.subplots()
    d = rows[(rows["scope"] != "all") & (rows["metric"] == "sends")]
    brokers = sorted(d["scope"].unique())
    width = 0.8 / max(1, len(variants))
    cmap = matplotlib.colormaps["tab10"]
    for i, v in enumerate(variants):
        dv = d[d["variant"] == v].set_index("scope").reindex(brokers)
        x = np.arange(len(brokers)) + (i - (len(variants) - 1) / 2) * width
        bars = ax.bar(x, dv["value"].fillna(0).to_numpy(), width, label=v, color=cmap(i % 10))
        if v != baseline:
            for bar, pct in zip(bars, dv["delta_pct"].to_numpy(), strict=True):
                if not pd.isna(pct):
                    ax.annotate(
                        f"{pct:+.0f}%",
                        (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center",
                        va="bottom",
                        fontsize=7,
                    )
    ax.set_xticks(range(len(brokers)), brokers)
    ax.set_xlabel("broker")
    ax.set_ylabel("attempts sent (count)")
    ax.legend(title="variant", loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)  # off the bars
    ax.grid(True, axis="y", alpha=0.3)
    zero_floor(ax)
    fig.suptitle(f"Attempts per broker under each variant (labels: change vs {baseline})")
    return fig


# ---- a capacity sweep ---------------------------------------------------------------------------


def capacity_chart(rows: pd.DataFrame) -> Figure:
    """A capacity sweep (the ``capacity`` table): send-latency p99 and the failed share of sends per
    cluster size, with the target and the bound (green: meets both, red: does not, grey: not known, the
    size did not converge); the smallest size meeting both is marked."""
    fig = Figure(figsize=(9, 6), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    d = rows.sort_values(["brokers", "write_queues"]).reset_index(drop=True)
    x = np.arange(len(d))
    meets = d["meets_target"]
    colors = np.where(
        meets.isna(), "tab:gray", np.where(meets.fillna(False).astype(bool), "tab:green", "tab:red")
    )
    top.bar(x, d["latency_p99_ms"].astype(float), color=colors)
    bottom.bar(x, d["failure_rate"].astype(float) * 100, color=colors)
    if len(d):
        top.axhline(float(d["target_p99_ms"].iloc[0]), color="k", ls="--", lw=1, label="target p99")
        bottom.axhline(float(d["max_failure_rate"].iloc[0]) * 100, color="k", ls="--", lw=1, label="bound")
        for i in np.flatnonzero(d["smallest"].to_numpy(bool)):
            top.annotate(
                "smallest meeting both", (i, float(d["latency_p99_ms"].iloc[i])), ha="center", va="bottom"
            )
    top.set_ylabel("send latency p99 (ms)")
    bottom.set_ylabel("failed sends (%)")
    bottom.set_xticks(x, list(d["variant"]))
    bottom.set_xlabel("cluster size")
    for ax in (top, bottom):
        ax.grid(True, axis="y", alpha=0.3)
        zero_floor(ax)
        ax.legend(loc="upper right", fontsize=8)
    fig.suptitle("Capacity sweep: green meets the p99 target and the failure bound (grey: not converged)")
    return fig
