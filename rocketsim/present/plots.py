"""Charts of a run and of a comparison: matplotlib over the pandas frames of the summary tables.

Every function takes frames as read by :mod:`rocketsim.present.explore` (or ``read_pandas``) and returns a
:class:`matplotlib.figure.Figure` with a title, axis labels with units and a legend; faults of the
scenario, when given, are shaded. No pyplot state is used, so figures can be made anywhere (notebooks,
the HTML report, tests); :func:`save_figure` writes a PNG, :func:`figure_png_base64` embeds one.
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
from matplotlib.patches import Patch

from rocketsim.scenario import Scenario

TIME_LABEL = "time since scenario start (s)"
FAULT_COLOR = "#f4a582"
NO_DATA_COLOR = "0.55"
DPI = 110
_OUTCOMES = {
    "failed_timeout": "remoting timeout",
    "failed_connect": "connect refused",
    "failed_broker_error": "broker error code",
    "not_store_ok": "stored, not SEND_OK",
    "failed_other": "other",
}


@dataclass(frozen=True)
class FaultSpan:
    """One fault of the timeline, in simulated milliseconds."""

    broker: str
    kind: str
    start_ms: int
    end_ms: int

    @property
    def label(self) -> str:
        return f"{self.kind} {self.broker}"


def fault_spans(sc: Scenario) -> list[FaultSpan]:
    """The scenario's fault timeline, in start order."""
    spans = [
        FaultSpan(f.broker, f.kind, int(round(f.start_s * 1000)), int(round(f.end_s * 1000)))
        for f in sc.faults
    ]
    return sorted(spans, key=lambda s: (s.start_ms, s.broker))


# ---- helpers ------------------------------------------------------------------------------------


def broker_colors(brokers: Sequence[str]) -> dict[str, tuple]:
    """A fixed color per broker (sorted names), the same in every chart."""
    cmap = matplotlib.colormaps["tab10"]
    return {b: cmap(i % 10) for i, b in enumerate(sorted(brokers))}


def _centers_s(df: pd.DataFrame) -> pd.Series:
    return (df["window_start_ms"] + df["window_ms"] / 2) / 1000.0


def _shade_faults(ax: Axes, faults: Sequence[FaultSpan], labelled: bool = True, edges: bool = False) -> None:
    """Shade each fault's span (``edges``: dashed lines at its start and end instead, over filled plots)."""
    for i, f in enumerate(faults):
        label = f"fault: {f.label}" if labelled and i < 4 else None
        if edges:
            ax.axvline(f.start_ms / 1000, color="k", ls="--", lw=1.0, label=label)
            ax.axvline(f.end_ms / 1000, color="k", ls="--", lw=1.0)
            continue
        ax.axvspan(
            f.start_ms / 1000,
            f.end_ms / 1000,
            color=FAULT_COLOR,
            alpha=0.25,
            lw=0,
            label=label,
        )


def _empty(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4")


def _window_s(df: pd.DataFrame) -> str:
    return f"{int(df['window_ms'].iloc[0]) / 1000:g} s windows" if len(df) else "no windows"


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


def latency_percentiles(bw: pd.DataFrame, faults: Sequence[FaultSpan] = ()) -> Figure:
    """Attempt latency p50 / p99 / p99.9 / max over time, one panel per broker (log scale)."""
    brokers = sorted(bw["broker"].unique())
    n = max(1, len(brokers))
    fig = Figure(figsize=(11, 2.3 * n + 0.8), layout="constrained")
    axes = fig.subplots(n, 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    lines = [
        ("latency_p50_ms", "p50", "-"),
        ("latency_p99_ms", "p99", "-"),
        ("latency_p999_ms", "p99.9", "-"),
        ("latency_max_ms", "max", ":"),
    ]
    for ax, broker in zip(axes, brokers, strict=False):
        d = bw[bw["broker"] == broker].sort_values("window_start_ms")
        _shade_faults(ax, faults)
        for col, label, style in lines:
            ax.plot(_centers_s(d), d[col].astype(float), style, marker=".", ms=3, label=label)
        ax.set_yscale("log")
        ax.set_ylabel("latency (ms)")
        ax.set_title(broker, loc="left", fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
    if not brokers:
        _empty(axes[0], "no attempts")
    axes[0].legend(loc="upper right", ncols=6, fontsize=8)
    axes[-1].set_xlabel(TIME_LABEL)
    fig.suptitle(f"Send-attempt latency percentiles per broker ({_window_s(bw)}, log scale)")
    return fig


def traffic_share(bw: pd.DataFrame, faults: Sequence[FaultSpan] = ()) -> Figure:
    """Share of attempts per broker over time (stacked), and attempts per second."""
    fig = Figure(figsize=(11, 5.5), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[2, 1])
    pivot = bw.pivot_table(index="window_start_ms", columns="broker", values="sends", aggfunc="sum").fillna(0)
    pivot = pivot.sort_index()
    colors = broker_colors(list(pivot.columns))
    if len(pivot):
        window_ms = int(bw["window_ms"].iloc[0])
        x = (pivot.index.to_numpy() + window_ms / 2) / 1000.0
        totals = pivot.sum(axis=1).replace(0, np.nan)
        share = pivot.div(totals, axis=0).fillna(0) * 100
        top.stackplot(
            x, share.T.to_numpy(), labels=list(share.columns), colors=[colors[b] for b in share.columns]
        )
        for b in pivot.columns:
            bottom.plot(x, pivot[b] * 1000 / window_ms, color=colors[b], label=b)
    else:
        _empty(top, "no attempts")
    _shade_faults(top, faults, edges=True)
    _shade_faults(bottom, faults, labelled=False)
    top.set_ylim(0, 100)
    top.set_ylabel("share of attempts (%)")
    top.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    bottom.set_ylabel("attempts / s")
    bottom.set_xlabel(TIME_LABEL)
    bottom.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    bottom.grid(True, alpha=0.3)
    fig.suptitle(f"Traffic per broker ({_window_s(bw)})")
    return fig


def retries_and_failures(bw: pd.DataFrame, pw: pd.DataFrame, faults: Sequence[FaultSpan] = ()) -> Figure:
    """Failed attempts per second by outcome (all brokers), and retries / lost retry budget per second."""
    fig = Figure(figsize=(11, 5.5), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    _shade_faults(top, faults)
    _shade_faults(bottom, faults, labelled=False)
    if len(bw):
        window_ms = int(bw["window_ms"].iloc[0])
        per = bw.groupby("window_start_ms")[list(_OUTCOMES)].sum().sort_index()
        x = (per.index.to_numpy() + window_ms / 2) / 1000.0
        bottom_y = np.zeros(len(per))
        for col, label in _OUTCOMES.items():
            rate = per[col].to_numpy() * 1000 / window_ms
            top.bar(x, rate, width=window_ms / 1000 * 0.9, bottom=bottom_y, label=label)
            bottom_y = bottom_y + rate
    else:
        _empty(top, "no attempts")
    top.set_ylabel("failed attempts / s")
    top.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    if len(pw):
        window_ms = int(pw["window_ms"].iloc[0])
        per = (
            pw.groupby("window_start_ms")[["retries", "retry_budget_exhausted", "failed"]].sum().sort_index()
        )
        x = (per.index.to_numpy() + window_ms / 2) / 1000.0
        bottom.plot(x, per["retries"] * 1000 / window_ms, marker=".", label="retries")
        bottom.plot(
            x,
            per["retry_budget_exhausted"] * 1000 / window_ms,
            marker=".",
            label="lost retry budget (timeout)",
        )
        bottom.plot(x, per["failed"] * 1000 / window_ms, marker=".", label="messages FAILED")
    else:
        _empty(bottom, "no sends")
    bottom.set_ylabel("per second")
    bottom.set_xlabel(TIME_LABEL)
    bottom.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    bottom.grid(True, alpha=0.3)
    fig.suptitle(f"Failures, retries and lost retry budget ({_window_s(bw)})")
    return fig


_BUSY = {
    "busy_rejectrequest": "[REJECTREQUEST]",
    "busy_overload": "[OVERLOAD]",
    "busy_pc_synchronized": "[PC_SYNCHRONIZED]",
    "busy_pcbusy_clean_queue": "[PCBUSY_CLEAN_QUEUE]",
    "busy_timeout_clean_queue": "[TIMEOUT_CLEAN_QUEUE]",
}


def broker_load(bw: pd.DataFrame, faults: Sequence[FaultSpan] = ()) -> Figure:
    """The closed-loop brokers (``brokers.coupling`` joint or iterative): per broker, the commit-log
    writer's utilisation, the send-queue depth requests found (mean and max) and the flow-control
    rejections per second by kind. With coupling open the store is not modelled: the panels say so."""
    brokers = sorted(bw["broker"].unique()) if len(bw) else []
    fig = Figure(figsize=(11, 7.5), layout="constrained")
    util_ax, depth_ax, busy_ax = fig.subplots(3, 1, sharex=True)
    for ax, labelled in ((util_ax, True), (depth_ax, False), (busy_ax, False)):
        _shade_faults(ax, faults, labelled=labelled)
    closed = "utilisation" in bw.columns and bw["utilisation"].notna().any()
    if not closed:
        for ax in (util_ax, depth_ax, busy_ax):
            _empty(ax, "open-loop brokers (brokers.coupling = open): no store, no queue, no flow control")
    else:
        colors = broker_colors(brokers)
        window_ms = int(bw["window_ms"].iloc[0])
        for broker in brokers:
            d = bw[bw["broker"] == broker].sort_values("window_start_ms")
            x = _centers_s(d)
            util_ax.plot(
                x, d["utilisation"].astype(float) * 100, marker=".", ms=3, color=colors[broker], label=broker
            )
            depth_ax.plot(
                x, d["queue_depth_mean"].astype(float), "-", color=colors[broker], label=f"{broker} mean"
            )
            depth_ax.plot(
                x, d["queue_depth_max"].astype(float), ":", color=colors[broker], label=f"{broker} max"
            )
        per = bw.groupby("window_start_ms")[list(_BUSY)].sum().sort_index()
        x = (per.index.to_numpy() + window_ms / 2) / 1000.0
        bottom = np.zeros(len(per))
        for col, label in _BUSY.items():
            rate = per[col].to_numpy() * 1000 / window_ms
            if rate.any():
                busy_ax.bar(x, rate, width=window_ms / 1000 * 0.9, bottom=bottom, label=label)
                bottom = bottom + rate
        if not bottom.any():
            _empty(busy_ax, "no flow-control rejections")
    util_ax.axhline(100, color="0.4", lw=0.8, ls="--")
    util_ax.set_ylabel("writer utilisation (%)")
    depth_ax.set_ylabel("send-queue depth")
    busy_ax.set_ylabel("SYSTEM_BUSY / s (all brokers)")
    busy_ax.set_xlabel(TIME_LABEL)
    for ax in (util_ax, depth_ax, busy_ax):
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.suptitle(f"Broker load: commit-log writer, send queue and flow control ({_window_s(bw)})")
    return fig


def publish_delay(pw: pd.DataFrame, faults: Sequence[FaultSpan] = ()) -> Figure:
    """Queue wait before the send starts ("publish delay"): p50 and p99 over producers, per window."""
    fig = Figure(figsize=(11, 3.8), layout="constrained")
    ax = fig.subplots()
    _shade_faults(ax, faults)
    if len(pw):
        g = pw.groupby("window_start_ms")
        per = pd.DataFrame(
            {
                "median of producers' p50": g["queue_wait_p50_ms"].median(),
                "median of producers' p99": g["queue_wait_p99_ms"].median(),
                "worst producer's p99": g["queue_wait_p99_ms"].max(),
            }
        ).sort_index()
        window_ms = int(pw["window_ms"].iloc[0])
        x = (per.index.to_numpy() + window_ms / 2) / 1000.0
        for col in per.columns:
            ax.plot(x, per[col], marker=".", label=col)
        ax.set_yscale("symlog", linthresh=1.0)  # log above 1 ms, linear down to 0
    else:
        _empty(ax, "no sends")
    ax.set_ylabel("queue wait (ms, symlog)")
    ax.set_xlabel(TIME_LABEL)
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.suptitle(f"Publish delay: born -> send start ({_window_s(pw)})")
    return fig


def isolation_gantt(intervals: pd.DataFrame, span_ms: int, faults: Sequence[FaultSpan] = ()) -> Figure:
    """One row per (producer, broker): when the producer's latency-fault table isolated the broker."""
    pairs = (
        intervals[["broker", "producer"]].drop_duplicates().sort_values(["broker", "producer"])
        if len(intervals)
        else pd.DataFrame(columns=["broker", "producer"])
    )
    n = len(pairs)
    fig = Figure(figsize=(11, min(2.0 + 0.28 * n, 14)), layout="constrained")
    ax = fig.subplots()
    _shade_faults(ax, faults)
    end_s = max(span_ms, 1) / 1000.0
    colors = broker_colors(list(pairs["broker"].unique()) if n else [])
    for row, (broker, producer) in enumerate(pairs.itertuples(index=False)):
        d = intervals[(intervals.broker == broker) & (intervals.producer == producer)]
        bars = [(s / 1000, (min(e, span_ms) - s) / 1000) for s, e in zip(d.start_ms, d.end_ms, strict=True)]
        ax.broken_barh(bars, (row - 0.4, 0.8), facecolors=colors[broker])
        last = int(d.end_ms.max())
        if last > span_ms:
            ax.text(
                end_s, row, f"until {last / 1000:,.0f} s  ", ha="right", va="center", fontsize=7, color="w"
            )
    ax.set_yticks(range(n), [f"producer {p} / {b}" for b, p in pairs.itertuples(index=False)], fontsize=7)
    ax.set_ylim(-0.8, max(n, 1) - 0.2)
    ax.set_xlim(0, end_s)
    ax.invert_yaxis()
    ax.set_xlabel(TIME_LABEL)
    ax.set_ylabel("producer / isolated broker")
    handles = [Patch(color=c, label=f"{b} isolated") for b, c in colors.items()]
    handles += [h for h in ax.get_legend_handles_labels()[0] if isinstance(h, Patch) and h not in handles]
    if n == 0:
        _empty(ax, "no isolation: fault strategy off, or no slow or failed attempt isolated a broker")
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.suptitle(f"Latency-fault isolation intervals ({len(intervals)} intervals, bars clipped to the run)")
    return fig


def queue_heatmap(qw: pd.DataFrame) -> Figure:
    """Sends per queue relative to its broker's mean queue, per window (1 = even, red = hot)."""
    fig = Figure(figsize=(11, 5.0), layout="constrained")
    ax = fig.subplots()
    if len(qw) == 0:
        _empty(ax, "no attempts")
        fig.suptitle("Queue skew heat map")
        return fig
    pivot = qw.pivot_table(
        index=["broker", "queue_id"], columns="window_start_ms", values="skew", aggfunc="first"
    )
    pivot = pivot.sort_index()
    window_ms = int(qw["window_ms"].iloc[0])
    data = np.ma.masked_invalid(pivot.to_numpy(dtype=float))
    vmax = max(2.0, float(np.nanmax(pivot.to_numpy(dtype=float))) if data.count() else 2.0)
    cmap = matplotlib.colormaps["RdBu_r"].with_extremes(bad=NO_DATA_COLOR)
    norm = mcolors.TwoSlopeNorm(vmin=0.0, vcenter=1.0, vmax=vmax)
    x0 = pivot.columns.min() / 1000.0
    x1 = (pivot.columns.max() + window_ms) / 1000.0
    img = ax.imshow(
        data,
        aspect="auto",
        cmap=cmap,
        norm=norm,
        interpolation="nearest",
        extent=(x0, x1, len(pivot) - 0.5, -0.5),
    )
    ax.set_yticks(range(len(pivot)), [f"{b} q{q}" for b, q in pivot.index], fontsize=7)
    brokers = [b for b, _ in pivot.index]
    for i in range(1, len(brokers)):
        if brokers[i] != brokers[i - 1]:
            ax.axhline(i - 0.5, color="k", lw=0.8)
    ax.set_xlabel(TIME_LABEL)
    ax.set_ylabel("broker / queue")
    cbar = fig.colorbar(img, ax=ax)
    cbar.set_label("sends / broker's mean queue (1 = even)")
    ax.legend(
        handles=[Patch(color=NO_DATA_COLOR, label="broker got no attempts")], loc="upper right", fontsize=8
    )
    fig.suptitle(f"Queue skew heat map ({window_ms / 1000:g} s windows)")
    return fig


# ---- a comparison -------------------------------------------------------------------------------

VARIANT_PANELS = (
    ("share", "share of attempts (%)"),
    ("latency_p99_ms", "attempt p99 (ms, log)"),
    ("isolated_producers", "producers isolating it"),
)


def variant_timelines(
    cw: pd.DataFrame,
    variants: Sequence[str],
    faults: Mapping[str, Sequence[FaultSpan]] | None = None,
    panels: Sequence[tuple[str, str]] = VARIANT_PANELS,
) -> Figure:
    """The same fault timeline under each variant, side by side: per broker over time, one row per panel
    (``(column, label)``; default traffic share, p99 latency and isolating producers), one column per
    variant, shared y axes."""
    faults = faults or {}
    n = max(1, len(variants))
    fig = Figure(figsize=(max(5.0 * n, 8), 2.8 * len(panels) + 0.5), layout="constrained")
    axes = fig.subplots(len(panels), n, sharex=True, sharey="row", squeeze=False)
    colors = broker_colors(list(cw["broker"].unique()) if len(cw) else [])
    for j, v in enumerate(variants):
        d = cw[cw["variant"] == v].copy()
        if len(d):
            totals = d.groupby("window_start_ms")["sends"].transform("sum").replace(0, np.nan)
            d["share"] = (d["sends"] / totals * 100).fillna(0)
        for i, (col, label) in enumerate(panels):
            ax = axes[i, j]
            _shade_faults(ax, faults.get(v, ()), labelled=(i == 0))
            for b in sorted(d["broker"].unique()) if len(d) else []:
                s = d[d["broker"] == b].sort_values("window_start_ms")
                ax.plot(_centers_s(s), s[col].astype(float), marker=".", ms=3, color=colors[b], label=b)
            if col == "latency_p99_ms":
                ax.set_yscale("log")
            if j == 0:
                ax.set_ylabel(label)
            ax.grid(True, alpha=0.3)
            if i == 0:
                ax.set_title(v, fontsize=10)
        axes[-1, j].set_xlabel(TIME_LABEL)
    axes[0, -1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.suptitle(f"Per broker over time, under each variant ({_window_s(cw)})")
    return fig


DEFAULT_COMPARED = (
    ("attempts", "attempts"),
    ("retries", "retries"),
    ("latency_p99_ms", "send latency p99 (ms)"),
    ("latency_p999_ms", "send latency p99.9 (ms)"),
    ("queue_wait_p99_ms", "publish delay p99 (ms)"),
    ("isolations", "isolation intervals"),
)


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
        for bar, v, pct in zip(bars, variants, d["delta_pct"].to_numpy(), strict=True):
            text = "baseline" if v == baseline else ("n/a" if pd.isna(pct) else f"{pct:+.1f}%")
            ax.annotate(
                text,
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=8,
            )
        ax.set_xticks(range(len(variants)), variants, rotation=20, ha="right", fontsize=8)
        ax.set_ylabel(label)
        ax.set_title(label, fontsize=10)
        ax.margins(y=0.18)
    for ax in axes[len(metrics) :]:
        ax.set_visible(False)
    handles = [Patch(color=cmap(i % 10), label=v) for i, v in enumerate(variants)]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(variants), 6), fontsize=8)
    fig.suptitle(f"Whole-run metrics per variant (labels: change vs {baseline})")
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
    ax.legend(title="variant", fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"Attempts per broker under each variant (labels: change vs {baseline})")
    return fig


# ---- a capacity sweep ---------------------------------------------------------------------------


def capacity_chart(rows: pd.DataFrame) -> Figure:
    """A capacity sweep (the ``capacity`` table): send-latency p99 and the failed share of sends per
    cluster size, with the target and the bound; the smallest size meeting both is marked."""
    fig = Figure(figsize=(9, 6), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    d = rows.sort_values(["brokers", "write_queues"]).reset_index(drop=True)
    x = np.arange(len(d))
    ok = d["meets_target"].to_numpy(bool)
    colors = np.where(ok, "tab:green", "tab:red")
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
        ax.legend(loc="upper right", fontsize=8)
    fig.suptitle("Capacity sweep: green meets the p99 target and the failure bound")
    return fig
