"""How well a fitted distribution matches each input: observed vs expected per bucket, per quantile.

Per bucket (``calibration_buckets`` in the reference notes): observed and expected counts and shares,
Pearson residual ``(O - E)/√E``, deviance residual, observed and model CDF at the bucket's upper edge.
Per quantile: observed (given, or interpolated in the buckets: ``observed_is`` says which), model,
``rel_err = model/observed - 1`` and ``tail_ratio = (1 - F(q_obs)) / (1 - P)``. Per input: N, G²
(``scipy.stats.power_divergence``, log-likelihood ratio) with its degrees of freedom, and
``max |ΔCDF|`` over the bucket edges. With millions of sends p-values are ~0 for any real data, so the
effect sizes carry the verdict (:data:`GATES`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from rocketsim.calibration.fit import interval_probs
from rocketsim.calibration.measurements import Binned, MeanMax, Quantiles, View, label_text
from rocketsim.calibration.model import LatencyDistribution

REPORT_LEVELS = (0.5, 0.9, 0.99, 0.999)
# suggested effect-size gates (reference notes §3.5): |rel_err| at p50/p90/p99 and p99.9, max |ΔCDF|
GATES = {"rel_err_body": 0.10, "rel_err_p999": 0.25, "max_dcdf": 0.01}


@dataclass(frozen=True)
class InputFit:
    """One input against the fitted distribution."""

    source: str
    view: View
    kind: str  # "buckets", "quantiles" or "mean and max"
    labels: str
    n: float
    buckets: pd.DataFrame | None
    quantiles: pd.DataFrame
    g2: float | None = None
    df: int | None = None
    max_dcdf: float | None = None
    note: str = ""

    @property
    def verdict(self) -> str:
        """``ok`` when every gate holds, else the gates that fail."""
        bad = []
        q = self.quantiles.dropna(subset=["rel_err"])
        body = q[q["level"] <= 0.99]
        if len(body) and body["rel_err"].abs().max() > GATES["rel_err_body"]:
            bad.append("|rel_err| p50-p99")
        tail = q[q["level"] >= 0.999]
        if len(tail) and tail["rel_err"].abs().max() > GATES["rel_err_p999"]:
            bad.append("|rel_err| p99.9")
        if self.max_dcdf is not None and self.max_dcdf > GATES["max_dcdf"]:
            bad.append("max |ΔCDF|")
        return "ok" if not bad else "off: " + ", ".join(bad)


def bucket_table(b: Binned, dist: LatencyDistribution) -> pd.DataFrame:
    lo, hi = np.asarray(b.lo), np.asarray(b.hi)
    observed = np.asarray(b.counts, dtype=float)
    n = observed.sum()
    p = interval_probs(dist, lo, hi)
    expected = n * p / max(p.sum(), 1e-300)
    with np.errstate(divide="ignore", invalid="ignore"):
        pearson = np.where(expected > 0, (observed - expected) / np.sqrt(expected), np.nan)
        term = np.where(observed > 0, observed * np.log(observed / expected), 0.0) - (observed - expected)
        deviance = np.sign(observed - expected) * np.sqrt(np.maximum(2 * term, 0.0))
    covered = max(p.sum(), 1e-300)
    return pd.DataFrame(
        {
            "lo_ms": lo,
            "hi_ms": hi,
            "observed": observed,
            "expected": expected,
            "obs_frac": observed / n,
            "exp_frac": expected / n,
            "pearson_resid": pearson,
            "deviance_resid": deviance,
            "obs_cdf_hi": np.cumsum(observed) / n,
            "model_cdf_hi": np.cumsum(p) / covered,
        }
    )


def interpolated_quantiles(b: Binned, levels: tuple[float, ...] = REPORT_LEVELS) -> dict[float, float]:
    """Quantiles of binned data, log-linear inside the bucket that holds them (none past a finite edge)."""
    counts = np.asarray(b.counts, dtype=float)
    cdf = np.cumsum(counts) / counts.sum()
    out = {}
    for level in levels:
        i = int(np.searchsorted(cdf, level))
        if i >= len(cdf) or not math.isfinite(b.hi[i]):
            continue
        below = cdf[i - 1] if i > 0 else 0.0
        frac = (level - below) / max(cdf[i] - below, 1e-300)
        lo, hi = b.lo[i], b.hi[i]
        out[level] = (
            math.exp(math.log(lo) + frac * (math.log(hi) - math.log(lo))) if lo > 0 else lo + frac * (hi - lo)
        )
    return out


def quantile_table(observed: dict[float, float], dist: LatencyDistribution, observed_is: str) -> pd.DataFrame:
    levels = np.array(sorted(observed), dtype=float)
    obs = np.array([observed[lv] for lv in levels])
    model = dist.quantile(levels) if len(levels) else np.array([])
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(obs > 0, model / obs - 1.0, np.nan)
        tail = dist.sf(obs) / (1.0 - levels)
    return pd.DataFrame(
        {
            "level": levels,
            "observed_ms": obs,
            "model_ms": model,
            "rel_err": rel,
            "tail_ratio": tail,
            "observed_is": observed_is,
        }
    )


def input_fit(m: Binned | Quantiles | MeanMax, dist: LatencyDistribution, k: int) -> InputFit:
    """The diagnostics of one input; ``k`` free parameters (the degrees of freedom G² loses)."""
    labels = label_text(m.labels)
    if isinstance(m, Binned):
        table = bucket_table(m, dist)
        observed, expected = table["observed"].to_numpy(), table["expected"].to_numpy()
        keep = expected > 0
        df = int(keep.sum()) - 1 - k
        g2 = float(
            stats.power_divergence(
                observed[keep],
                expected[keep] * observed[keep].sum() / expected[keep].sum(),
                lambda_="log-likelihood",
            )[0]
        )
        dcdf = float(np.max(np.abs(table["obs_cdf_hi"] - table["model_cdf_hi"])))
        q = quantile_table(interpolated_quantiles(m), dist, "interpolated")
        return InputFit(m.source, m.view, "buckets", labels, m.total, table, q, g2, df, dcdf, m.note)
    if isinstance(m, Quantiles):
        q = quantile_table(dict(zip(m.levels, m.values_ms, strict=True)), dist, "given")
        return InputFit(m.source, m.view, "quantiles", labels, m.n or math.nan, None, q, note=m.note)
    mean, _ = dist.capped_moments((m.max_ms or 1e9) + m.resolution_ms)
    rows = [
        {
            "level": math.nan,
            "observed_ms": m.mean_ms,
            "model_ms": mean,
            "rel_err": mean / m.mean_ms - 1,
            "tail_ratio": math.nan,
            "observed_is": "mean",
        }
    ]
    if m.max_ms is not None:
        level = 1.0 - 1.0 / (m.n + 1.0)  # where the largest of n sits on average
        model_max = float(dist.quantile(level)[0])
        tail = float(dist.sf(m.max_ms)) * (m.n + 1.0)
        rows.append(
            {
                "level": level,
                "observed_ms": m.max_ms,
                "model_ms": model_max,
                "rel_err": model_max / m.max_ms - 1,
                "tail_ratio": tail,
                "observed_is": "max",
            }
        )
    return InputFit(m.source, m.view, "mean and max", labels, m.n, None, pd.DataFrame(rows), note=m.note)
