"""Fit the latency model to the measurements of one view, choose among the candidate models, and say
which parameters the data could not tell.

Candidates (:data:`rocketsim.calibration.fit.CANDIDATES`): the lognormal alone (no spikes), spikes with
``spike_alpha`` fixed at its default, spikes with every parameter free, and spikes up to a maximum
(``spike_max_ms``: a tail that ends, as a VM's scheduling delays do); a candidate is tried only when
the inputs hold more independent numbers than it has free parameters, and BIC picks among those
tried. A parameter is then *fixed* because the user fixed it, because the chosen model leaves it out
(with the BIC margin that decided it), or because there were too few numbers; a free parameter whose
standard error is undefined (flat likelihood) or larger than a factor e is reported as weakly
identified.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rocketsim.calibration.diagnostics import InputFit, input_fit, interpolated_quantiles
from rocketsim.calibration.fit import (
    CANDIDATES,
    DEFAULTS,
    SPECS,
    Estimate,
    FitOutcome,
    fit_candidate,
    term_of,
)
from rocketsim.calibration.measurements import Binned, MeanMax, Quantiles, View, WindowQuantiles
from rocketsim.calibration.model import LATENCY_KEYS, LatencyDistribution

WEAK_SE = 1.0  # a standard error above 1 on the log / logit scale: the value is known to a factor e at best
Z95 = 1.959963984540054


@dataclass(frozen=True)
class WindowScale:
    """The per-window scale of a windowed input: ``factor`` = rocketsim's ``slowdown.factor`` that
    matches the window's quantiles with the fitted shape (geometric mean of the quantile ratios)."""

    source: str
    start_s: float
    factor: float
    spread: float  # the largest |log ratio| deviation from the factor over the window's levels


@dataclass(frozen=True)
class LatencyFit:
    """The fitted latency of one view, every candidate tried, and the diagnostics of each input."""

    view: View
    params: tuple[Estimate, ...]
    chosen: FitOutcome
    tried: tuple[tuple[str, str], ...]  # (candidate, BIC or why it was not tried)
    inputs: tuple[InputFit, ...]
    windows: tuple[WindowScale, ...] = ()

    @property
    def distribution(self) -> LatencyDistribution:
        return self.chosen.distribution()

    def param(self, name: str) -> Estimate:
        return next(p for p in self.params if p.key == name)


def start_points(items: Sequence[Binned | Quantiles | MeanMax]) -> dict[str, float]:
    """Median and sigma to start from: the data's own p50 and p90 (or the mean for a mean)."""
    for m in items:
        if isinstance(m, Binned):
            q = interpolated_quantiles(m, (0.5, 0.9))
        elif isinstance(m, Quantiles):
            q = dict(zip(m.levels, m.values_ms, strict=True))
        else:
            continue
        if q.get(0.5, 0) > 0:
            sigma = math.log(q[0.9] / q[0.5]) / 1.2816 if q.get(0.9, 0) > q[0.5] else 0.5
            return {"median_ms": q[0.5], "sigma": min(max(sigma, 0.05), 3.0)}
        if q:  # quantiles without a median (the exporter's p99 / p99.9): back off from the lowest
            level, value = min(q.items())
            return {"median_ms": value / math.exp(0.5 * 2.3263 * (level >= 0.99)), "sigma": 0.5}
    means = [m for m in items if isinstance(m, MeanMax)]
    if means:
        return {"median_ms": means[0].mean_ms * math.exp(-0.125), "sigma": 0.5}
    return {"median_ms": DEFAULTS["median_ms"], "sigma": DEFAULTS["sigma"]}


def _spike_starts(body: dict[str, float], free: list[str]) -> list[dict[str, float]]:
    m = body["median_ms"]
    alphas = (1.5, 4.0) if "spike_alpha" in free else (DEFAULTS["spike_alpha"],)
    caps = (8.0, 64.0) if "spike_max_ms" in free else (None,)  # times the spike scale
    return [
        {
            **body,
            "spike_probability": p,
            "spike_scale_ms": m * s,
            "spike_alpha": a,
            **({} if c is None else {"spike_max_ms": m * s * c}),
        }
        for p in (1e-3, 2e-2)
        for s in (2.0, 10.0)
        for a in alphas
        for c in caps
    ]


class Unresolved(ValueError):
    """Measurements whose buckets are too coarse for the latency's body (most counts in the first)."""


def check_resolution(items: Sequence[Binned | Quantiles | MeanMax], view: View) -> None:
    """Refuse to fit when every input holds half its counts or more in a first bucket from 0: the
    median is below the resolution and any fit would only echo the starting point."""
    shares = []
    for m in items:
        if not isinstance(m, Binned) or m.lo[0] > 0 or m.total <= 0:
            return
        shares.append((m.counts[0] / m.total, m.hi[0], m.source))
    if shares and all(share >= 0.5 for share, _, _ in shares):
        share, hi, source = shares[0]
        raise Unresolved(
            f"{share:.2%} of the {view} times in {source} lie in its first bucket [0, {hi:g} ms): the "
            "buckets cannot resolve the median; no fit"
        )


def fit_latency(
    items: Sequence[Binned | Quantiles | MeanMax],
    view: View,
    fixed: dict[str, float] | None = None,
    windows: Sequence[WindowQuantiles] = (),
) -> LatencyFit:
    """The latency model fitted jointly to ``items`` (one view), ``fixed`` values held (``--fix``)."""
    fixed = dict(fixed or {})
    check_resolution(items, view)
    terms = [term_of(m) for m in items]
    numbers = sum(t.dof for t in terms)
    start = {**start_points(items), **{k: v for k, v in fixed.items() if k in ("median_ms", "sigma")}}
    outcomes: list[FitOutcome] = []
    tried: list[tuple[str, str]] = []
    for cand in CANDIDATES:
        free = [p for p in cand.free if p not in fixed]
        if outcomes and len(free) == outcomes[-1].k and set(free) == set(outcomes[-1].free):
            tried.append((cand.name, "same free parameters as the one before (the rest fixed)"))
            continue
        if len(free) > numbers:
            tried.append(
                (cand.name, f"not tried: {len(free)} free parameters, the inputs hold {numbers} numbers")
            )
            continue
        body = (
            {k: v for k, v in outcomes[0].values.items() if k in ("median_ms", "sigma")}
            if outcomes
            else start
        )
        starts = [body] if cand.name == "lognormal" else _spike_starts(body, free)
        out = fit_candidate(terms, cand, fixed, starts)
        outcomes.append(out)
        converged = "" if out.converged else "; the optimiser stopped before converging"
        tried.append((cand.name, f"BIC {out.bic:,.1f} (k={out.k}, -logL {out.nll:,.1f}{converged})"))
    if not outcomes:
        raise ValueError(f"no latency model can be fitted: the {view} inputs hold {numbers} numbers")
    chosen = min(outcomes, key=lambda o: o.bic)
    params = _params(chosen, outcomes, fixed, numbers)
    diag = tuple(input_fit(m, chosen.distribution(), chosen.k) for m in items)
    scales = tuple(s for w in windows for s in window_scales(w, chosen.distribution()))
    return LatencyFit(view, params, chosen, tuple(tried), diag, scales)


def _params(
    chosen: FitOutcome, outcomes: list[FitOutcome], fixed: dict[str, float], numbers: int
) -> tuple[Estimate, ...]:
    out = []
    for name in LATENCY_KEYS:
        value = chosen.values[name]
        if name in chosen.free:
            se_t = chosen.se_free.get(name)
            spec = SPECS[name]
            t = spec.to_free(value)
            ci = (
                (spec.from_free(t - Z95 * se_t), spec.from_free(t + Z95 * se_t)) if se_t is not None else None
            )
            se = _natural_se(spec.scale, value, se_t)
            why = "grouped-data maximum likelihood"
            if se_t is None or se_t > WEAK_SE:
                why += "; weakly identified (flat likelihood: the data barely constrain it)"
            out.append(Estimate(name, value, False, why, se=se, ci=ci))
        else:
            out.append(Estimate(name, value, True, _why_fixed(name, chosen, outcomes, fixed, numbers)))
    return tuple(out)


def _natural_se(scale: str, value: float, se_t: float | None) -> float | None:
    if se_t is None:
        return None
    return value * se_t if scale == "log" else value * (1 - value) * se_t


def _why_fixed(
    name: str, chosen: FitOutcome, outcomes: list[FitOutcome], fixed: dict[str, float], numbers: int
) -> str:
    if name in fixed:
        return "fixed by the user (--fix)"
    richer = [o for o in outcomes if name in o.free]
    if not richer:
        return f"not identified: the inputs hold {numbers} numbers, too few to free it"
    margin = min(o.bic for o in richer) - chosen.bic
    what = "no spikes" if chosen.values["spike_probability"] == 0 else f"{name} at its default"
    return f"not identified: BIC prefers {what} by {margin:,.1f} (the data hold no sign of it)"


def window_scales(w: WindowQuantiles, dist: LatencyDistribution) -> list[WindowScale]:
    """Each window's slowdown factor against ``dist`` (the whole latency scales with a slowdown)."""
    model = np.log(dist.quantile(np.asarray(w.levels)))
    out = []
    for start, row in zip(w.starts_s, w.values_ms, strict=True):
        obs = np.asarray(row, dtype=float)
        ok = obs > 0
        if not ok.any():
            continue
        ratios = np.log(obs[ok]) - model[ok]
        factor = float(np.mean(ratios))
        out.append(WindowScale(w.source, start, math.exp(factor), float(np.max(np.abs(ratios - factor)))))
    return out
