"""The validation report: measured runs against their simulation, an HTML page with PNG charts.

The page opens with one row per run (OK share, OK latency p50 / p99, the largest outcome classes, each
measured / simulated), then per run its table of figures and one chart of three panels over the seconds
of due time: OK sends per second, failures per second by class, and the OK latency p50 and p99 (log
scale). Measured is solid, simulated dashed, a class keeps its colour in both.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from rocketsim.present.calibration_report import CSS, html_table
from rocketsim.present.plots import DPI
from rocketsim.validation.classes import SEND_OK
from rocketsim.validation.compare import RunComparison

MEASURED, SIMULATED = "-", "--"
OK_COLOR = "#2c7fb8"


def _class_colors(classes: Sequence[str]) -> dict[str, str]:
    palette = ["#d62728", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
    return {c: palette[i % len(palette)] for i, c in enumerate(c for c in classes if c != SEND_OK)}


def _series(frame: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray]:
    if frame.empty or column not in frame.columns:
        return np.zeros(0), np.zeros(0)
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(float)
    return frame["second"].to_numpy(float), values


def per_second_figure(cmp: RunComparison) -> Figure:
    """OK per second, failures per second by class, OK latency p50 / p99: measured solid, simulated dashed."""
    fig = Figure(figsize=(13, 3.6), dpi=DPI, layout="constrained")
    ax_ok, ax_fail, ax_lat = fig.subplots(1, 3)
    sides = (
        (cmp.measured.per_second, MEASURED, "measured"),
        (cmp.simulated.per_second, SIMULATED, "simulated"),
    )
    for frame, style, label in sides:
        x, y = _series(frame, "ok")
        ax_ok.plot(x, y, style, color=OK_COLOR, label=label)
    ax_ok.set(xlabel="second of due time", ylabel="OK sends per second", title="OK sends")
    ax_ok.legend(fontsize=8)
    colors = _class_colors(cmp.classes())
    for cls, color in colors.items():
        for frame, style, label in sides:
            x, y = _series(frame, f"err_{cls}")
            if y.size and np.nansum(y) > 0:
                ax_fail.plot(x, y, style, color=color, label=f"{cls} ({label})")
    ax_fail.set(xlabel="second of due time", ylabel="failed sends per second", title="failures by class")
    if ax_fail.lines:
        ax_fail.legend(fontsize=7)
    for key, color in (("p50", "#1b9e77"), ("p99", "#d95f02")):
        for frame, style, label in sides:
            x, y = _series(frame, f"ok_latency_{key}_ms")
            keep = np.isfinite(y) & (y > 0)
            ax_lat.plot(x[keep], y[keep], style, color=color, label=f"{key} ({label})")
    ax_lat.set(
        yscale="log", xlabel="second of due time", ylabel="OK latency (ms)", title="OK latency p50, p99"
    )
    ax_lat.legend(fontsize=7)
    fig.suptitle(f"{cmp.name}: measured (solid) and simulated (dashed)", fontsize=10)
    return fig


def _pair(m: float | None, s: float | None, fmt: str) -> str:
    def one(v: float | None) -> str:
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)

    return f"{one(m)} / {one(s)}"


def summary_frame(comparisons: Sequence[RunComparison]) -> pd.DataFrame:
    """One row per run: measured / simulated OK share, p50, p99 and the two largest classes."""
    rows = []
    for c in comparisons:
        m, s = c.measured, c.simulated
        top = [k for k in c.classes() if k != SEND_OK][:2]
        rows.append(
            {
                "run": c.name + (" (calibration)" if c.calibration else ""),
                "OK share": _pair(m.ok_share, s.ok_share, ".1%"),
                "OK p50 ms": _pair(m.ok_latency_ms.get("p50"), s.ok_latency_ms.get("p50"), ",.3g"),
                "OK p99 ms": _pair(m.ok_latency_ms.get("p99"), s.ok_latency_ms.get("p99"), ",.3g"),
                **{
                    f"class {i + 1}": f"{k}: {_pair(m.outcomes.get(k, 0), s.outcomes.get(k, 0), ',')}"
                    for i, k in enumerate(top)
                },
            }
        )
    return pd.DataFrame(rows).fillna("")


def write_report(
    comparisons: Sequence[RunComparison], out_dir: str | Path, header: Sequence[str] = ()
) -> Path:
    """Write ``index.html`` with a PNG chart and a CSV table per run into ``out_dir``; the page's path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>rocketsim validation</title><style>{CSS}</style></head><body>",
        "<h1>rocketsim against measured runs</h1>",
        *(f"<p>{html.escape(line)}</p>" for line in header),
        "<p>Each cell: measured / simulated.</p>",
        html_table(summary_frame(comparisons)),
    ]
    for c in comparisons:
        table = c.table()
        table.to_csv(out / f"{c.name}.csv", index=False)
        per_second_figure(c).savefig(out / f"{c.name}.png")
        parts += [
            f"<h2>{html.escape(c.name)}{' (calibration run)' if c.calibration else ''}</h2>",
            f'<figure><img src="{html.escape(c.name)}.png" alt="{html.escape(c.name)} per second"></figure>',
            html_table(table),
        ]
        if c.notes:
            parts.append("<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in c.notes) + "</ul>")
    parts.append("</body></html>")
    page = out / "index.html"
    page.write_text("\n".join(parts), encoding="utf-8")
    return page
