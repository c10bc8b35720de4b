"""A simulated run beside measured OpenMessaging Benchmark runs, on OMB's own axes.

Both sides are :class:`rocketsim.omb.measured.OmbRun`: a measured run read from its result file, the
simulated run exported as OMB would have recorded it (:func:`simulated_runs`: its ``send_results``,
:mod:`rocketsim.warehouse.omb`). The chart has what ``bin/create_charts.py`` draws for publishing: per
10 s window the publish latency p99, the publish rate and the error rate, and the aggregated latency
quantile curve on OMB's axis (``log10(100 / (100 - p))``: 90 %, 99 %, 99.9 % ... evenly spaced).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from rocketsim.omb.measured import OmbRun, from_mapping, parse_result
from rocketsim.warehouse.omb import run_exports

SERIES_PANELS = (
    ("publishLatency99pct", "publish latency p99 (ms)", True),
    ("publishRate", "publish rate (msg/s)", False),
    ("publishErrorRate", "publish errors (err/s)", False),
)
QUANTILES = "aggregatedPublishLatencyQuantiles"
NINES = (1, 2, 3, 4, 5)  # the quantile axis' ticks: 90 % ... 99.999 %
SIMULATED_STYLE = {"lw": 1.8}
MEASURED_STYLE = {"lw": 1.4, "ls": "--"}


def simulated_runs(warehouse: str | os.PathLike[str], run_id: str) -> list[OmbRun]:
    """The run (or each variant of a comparison) as OMB would have recorded it."""
    return [from_mapping(e.result, e.name) for e in run_exports(warehouse, run_id)]


def load_measured(paths: Sequence[str | os.PathLike[str]]) -> list[OmbRun]:
    """OMB result files, read (:func:`rocketsim.omb.measured.parse_result`)."""
    return [parse_result(Path(p).read_bytes().decode("utf-8", "replace"), Path(p).name) for p in paths]


def _plot_series(ax: Axes, runs: Sequence[tuple[OmbRun, dict]], name: str, label: str, log: bool) -> None:
    missing = []
    for run, style in runs:
        if name not in run.series or not len(run.series[name]):
            missing.append(run.label)
            continue
        ax.plot(run.times_s(name), run.series[name], label=run.label, **style)
    ax.set_ylabel(label)
    ax.set_xlabel("time since the run's start (s), 10 s windows")
    if ax.lines and (log or _far_apart([line.get_ydata() for line in ax.lines])):
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    if missing:
        ax.text(0.01, 0.97, "not in the file: " + "; ".join(missing), transform=ax.transAxes, va="top",
                fontsize=7, color="0.3", bbox={"facecolor": "white", "alpha": 0.85, "lw": 0})  # fmt: skip


def _far_apart(lines: Sequence[np.ndarray]) -> bool:
    """Whether the lines' typical levels differ by more than 50x (a log scale shows both)."""
    levels = [float(np.nanmedian(y)) for y in lines if len(y) and np.nanmedian(y) > 0]
    return len(levels) > 1 and max(levels) > 50 * min(levels)


def _plot_quantiles(ax: Axes, runs: Sequence[tuple[OmbRun, dict]]) -> None:
    for run, style in runs:
        if QUANTILES not in run.quantiles:
            continue
        p, v = run.quantiles[QUANTILES]
        keep = p <= 99.999  # as create_charts.py: 100 % would be at infinity
        x = np.log10(100.0 / (100.0 - p[keep]))
        ax.plot(x, v[keep], label=run.label, **style)
    ax.set_xticks(NINES, [f"{100 - 100 / 10**n:g} %" for n in NINES])
    ax.set_xlim(0, max(NINES))
    ax.set_xlabel("percentile (OMB's axis)")
    ax.set_ylabel("publish latency (ms)")
    if ax.lines:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)


def overlay_figure(simulated: Sequence[OmbRun], measured: Sequence[OmbRun]) -> Figure:
    """Publish latency p99, rate and error rate per window, and the latency quantile curve: simulated
    runs solid, measured ones dashed."""
    runs = [(r, SIMULATED_STYLE) for r in simulated] + [(r, MEASURED_STYLE) for r in measured]
    fig = Figure(figsize=(12, 8), layout="constrained")
    axes = fig.subplots(2, 2)
    for ax, (name, label, log) in zip(axes.flat, SERIES_PANELS, strict=False):
        _plot_series(ax, runs, name, label, log)
        ax.set_title(name)
    _plot_quantiles(axes.flat[3], runs)
    axes.flat[3].set_title(QUANTILES)
    axes.flat[0].legend(fontsize=8, loc="upper right")
    fig.suptitle("simulated (solid) vs measured (dashed), as OpenMessaging Benchmark records them")
    return fig


def summary_frame(runs: Sequence[OmbRun]) -> pd.DataFrame:
    """Per run: windows, mean publish and error rates, aggregated publish latency p50 / p99 / p99.9 /
    max (ms); NaN where the file has no such field."""
    rows = []
    for r in runs:
        rate = r.series.get("publishRate", np.array([]))
        errors = r.series.get("publishErrorRate")
        rows.append(
            {
                "run": r.label,
                "windows": len(rate),
                "publish rate (msg/s)": float(np.nanmean(rate)) if len(rate) else math.nan,
                "errors (err/s)": float(np.nanmean(errors))
                if errors is not None and len(errors)
                else math.nan,
                **{
                    f"{p} (ms)": r.aggregated.get(f"aggregatedPublishLatency{k}", math.nan)
                    for p, k in (("p50", "50pct"), ("p99", "99pct"), ("p99.9", "999pct"), ("max", "Max"))
                },
            }
        )
    return pd.DataFrame(rows).set_index("run")
