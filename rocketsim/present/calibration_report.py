"""The fit report of a calibration: an HTML page with PNG charts beside it, and its tables as CSV.

Per latency input: observed vs fitted CDF (log time), the tail (1 - F, log-log), and the Pearson
residual of each bucket; quantile inputs as observed vs fitted quantiles on a "nines" axis; windowed
inputs as the slowdown factor per window. Then the fitted values with their standard errors and what
was held fixed, the fit statistics per input, and the error mix, throughput and queue tables.
"""

from __future__ import annotations

import html
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from rocketsim.calibration.calibrate import Calibration
from rocketsim.calibration.diagnostics import InputFit
from rocketsim.calibration.latency_fit import LatencyFit
from rocketsim.present.plots import DPI

OBSERVED, MODEL = "#1f77b4", "#d62728"
CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1300px; color: #222; padding: 0 1em; }
h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.82em; margin: 0.6em 0; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: right; } th { background: #f4f4f4; }
td:first-child { text-align: left; } .muted { color: #777; font-size: 0.85em; }
img { max-width: 100%; } pre { background: #f8f8f8; padding: 0.8em; font-size: 0.8em; }
"""


def _grid(fit: InputFit) -> np.ndarray:
    b = fit.buckets
    finite = b["hi_ms"][np.isfinite(b["hi_ms"]) & (b["hi_ms"] > 0)]
    lo = max(float(b["lo_ms"][b["lo_ms"] > 0].min()) if (b["lo_ms"] > 0).any() else finite.min() / 10, 1e-4)
    return np.geomspace(lo, float(finite.max()) * 2, 400)


def _centres(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Where to draw each bucket on a log axis: its geometric middle (past its lower edge if open)."""
    finite = np.isfinite(hi)
    return np.where(finite, np.sqrt(np.maximum(lo, hi / 100) * np.where(finite, hi, 1.0)), lo * 1.5)


def buckets_figure(fit: InputFit, lf: LatencyFit) -> Figure:
    """CDF, tail and residuals of one binned input against the fitted distribution."""
    dist = lf.distribution
    b = fit.buckets
    hi = b["hi_ms"].to_numpy()
    finite = np.isfinite(hi)
    x = _grid(fit)
    base = float(dist.cdf(float(b["lo_ms"].iloc[0])))  # the model on the range the buckets cover
    top = float(dist.cdf(hi[-1]))
    model_cdf = (dist.cdf(x) - base) / max(top - base, 1e-300)
    fig = Figure(figsize=(13, 3.8), dpi=DPI, layout="constrained")
    ax1, ax2, ax3 = fig.subplots(1, 3)
    ax1.step(
        hi[finite], b["obs_cdf_hi"][finite], where="post", color=OBSERVED, label="observed (bucket edges)"
    )
    ax1.plot(x, np.clip(model_cdf, 0, 1), color=MODEL, label="fitted model")
    ax1.set(xscale="log", xlabel="latency (ms)", ylabel="P(latency <= x)", title="CDF")
    ax1.legend(loc="lower right", fontsize=8)
    obs_sf = 1.0 - b["obs_cdf_hi"].to_numpy()
    keep = finite & (obs_sf > 0)
    ax2.plot(hi[keep], obs_sf[keep], "o", ms=3, color=OBSERVED, label="observed")
    ax2.plot(x, dist.sf(x), color=MODEL, label="fitted model")
    ax2.set(xscale="log", yscale="log", xlabel="latency (ms)", ylabel="P(latency > x)", title="tail")
    lowest = float(obs_sf[keep].min()) if keep.any() else 1e-3
    ax2.set_ylim(bottom=max(min(lowest, 1e-3) / 10, 1e-9), top=1.2)
    ax2.legend(loc="lower left", fontsize=8)
    ax3.vlines(_centres(b["lo_ms"].to_numpy(), hi), 0, b["pearson_resid"].fillna(0), color="0.45", lw=1.2)
    ax3.axhline(0, color="k", lw=0.8)
    ax3.set(
        xscale="log",
        xlabel="latency (ms)",
        ylabel="(observed - expected) / √expected",
        title="residual per bucket",
    )
    fig.suptitle(
        f"{fit.source} ({fit.view} view{', ' + fit.labels if fit.labels else ''}): {fit.verdict}", fontsize=10
    )
    return fig


def quantiles_figure(fit: InputFit) -> Figure:
    """Observed vs fitted quantiles on a nines axis (-log10(1 - P))."""
    q = fit.quantiles.dropna(subset=["level"])
    fig = Figure(figsize=(6.5, 3.8), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    nines = -np.log10(1.0 - q["level"].to_numpy())
    ax.plot(nines, q["observed_ms"], "o", color=OBSERVED, label=f"observed ({q['observed_is'].iloc[0]})")
    ax.plot(nines, q["model_ms"], "x-", color=MODEL, label="fitted model")
    ax.set(
        yscale="log", xlabel="nines: -log10(1 - level)  (1 = p90, 2 = p99, 3 = p99.9)", ylabel="latency (ms)"
    )
    ax.set_title(f"{fit.source} ({fit.view} view): quantiles", fontsize=10)
    ax.legend(fontsize=8)
    return fig


def windows_figure(lf: LatencyFit) -> Figure:
    fig = Figure(figsize=(9, 3.2), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    for source in dict.fromkeys(w.source for w in lf.windows):
        ws = [w for w in lf.windows if w.source == source]
        ax.plot([w.start_s for w in ws], [w.factor for w in ws], "o-", ms=3, label=source)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set(
        xlabel="window start (s)", ylabel="slowdown factor", title="per-window scale against the fitted shape"
    )
    ax.legend(fontsize=8)
    return fig


def html_table(df: pd.DataFrame) -> str:
    """``df`` as an HTML table (numbers to 6 significant digits, NaN as "-")."""

    def cell(v: object) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return "-" if math.isnan(v) else f"{v:,.6g}"
        return html.escape(str(v))

    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    rows = "".join(
        "<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>" for row in df.itertuples(index=False)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def estimates_frame(cal: Calibration) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "key": e.key,
                "value": e.value,
                "fixed": "fixed" if e.fixed else "fitted",
                "se": e.se if e.se is not None else math.nan,
                "ci95": f"{e.ci[0]:.6g} .. {e.ci[1]:.6g}" if e.ci else "-",
                "why": e.why,
                "source": e.source,
            }
            for e in cal.estimates
        ]
    )


def inputs_frame(cal: Calibration) -> pd.DataFrame:
    rows = []
    for lf in cal.latency:
        for f in lf.inputs:
            q = f.quantiles.set_index("observed_is", append=True)
            rows.append(
                {
                    "source": f.source,
                    "view": str(f.view),
                    "kind": f.kind,
                    "labels": f.labels,
                    "n": f.n,
                    "G2": f.g2 if f.g2 is not None else math.nan,
                    "df": f.df if f.df is not None else "-",
                    "max |ΔCDF|": f.max_dcdf if f.max_dcdf is not None else math.nan,
                    "worst |rel_err|": float(q["rel_err"].abs().max()) if len(q) else math.nan,
                    "verdict": f.verdict,
                }
            )
    return pd.DataFrame(rows)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")[:60] or "input"


def _latency_section(lf: LatencyFit, k: int, out: Path) -> list[str]:
    used = "used for the fragment" if k == 0 and lf.view.value != "store" else "for comparison only"
    parts = [
        f"<h2>Latency, {lf.view} view ({used}): {html.escape(lf.chosen.candidate.name)}</h2>",
        "<p>Candidates: " + "; ".join(html.escape(f"{n}: {why}") for n, why in lf.tried) + "</p>",
    ]
    for i, f in enumerate(lf.inputs):
        name = f"latency_{lf.view}_{i}_{_slug(f.source)}"
        fig = (
            buckets_figure(f, lf)
            if f.buckets is not None
            else quantiles_figure(f)
            if f.kind == "quantiles"
            else None
        )
        if fig is not None:
            fig.savefig(out / f"{name}.png")
            parts.append(f'<figure><img src="{name}.png" alt="{html.escape(f.source)}"></figure>')
        parts.append(f"<p class='muted'>{html.escape(f.note)}</p>" + html_table(f.quantiles))
        if f.buckets is not None:
            f.buckets.to_csv(out / f"{name}_buckets.csv", index=False)
        f.quantiles.to_csv(out / f"{name}_quantiles.csv", index=False)
    if lf.windows:
        name = f"windows_{lf.view}"
        windows_figure(lf).savefig(out / f"{name}.png")
        parts.append(f'<figure><img src="{name}.png" alt="per-window slowdown"></figure>')
    return parts


def write_report(cal: Calibration, sources: list[str], fragment: str, out_dir: str | Path) -> Path:
    """Write ``index.html``, its PNGs and CSVs into ``out_dir``; the page's path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    est = estimates_frame(cal)
    est.to_csv(out / "estimates.csv", index=False)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>rocketsim calibration</title><style>{CSS}</style></head><body>",
        "<h1>rocketsim calibration</h1>",
        "<p>Inputs: " + ", ".join(html.escape(s) for s in sources) + "</p>",
        "<h2>Fitted values</h2>",
        html_table(est),
    ]
    if cal.notes:
        parts.append("<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in cal.notes) + "</ul>")
    inputs = inputs_frame(cal)
    if len(inputs):
        inputs.to_csv(out / "inputs.csv", index=False)
        parts += [
            "<h2>Fit per input</h2>",
            "<p class='muted'>Gates: |rel_err| <= 10% at p50-p99, <= 25% at p99.9, max |ΔCDF| <= 0.01; "
            "G² with df = buckets - 1 - free parameters (p-values are ~0 at these sizes: read the effect "
            "sizes).</p>",
            html_table(inputs),
        ]
    for k, lf in enumerate(cal.latency):
        parts += _latency_section(lf, k, out)
    for name, df in cal.tables.items():
        df.to_csv(out / f"{name}.csv", index=False)
        parts += [f"<h2>{html.escape(name.capitalize())}</h2>", html_table(df)]
    parts += ["<h2>Scenario fragment</h2>", f"<pre>{html.escape(fragment)}</pre>", "</body></html>"]
    page = out / "index.html"
    page.write_text("\n".join(parts), encoding="utf-8")
    return page
