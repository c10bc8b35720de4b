"""Fitting the latency model: each measurement becomes a likelihood term, their sum is maximised.

* Binned counts: the grouped-data (interval-censored) multinomial likelihood
  ``Σ n_i log P_i - N log Σ P_i`` with ``P_i = F(hi_i) - F(lo_i)`` (conditional on the range the
  intervals cover: exact for a histogram that drops values past its last edge).
* Quantiles ``q_1 < ... < q_k`` at levels ``P_j`` of ``n`` sends: the same likelihood over the intervals
  they cut, ``n (P_j - P_j-1)`` sends in ``(q_j-1, q_j]`` (quantile matching, weighted as the binomial
  counts behind each quantile; ``n`` taken as :data:`ASSUMED_N` when unknown).
* A mean and a maximum over ``n`` sends (the benchmark tool): the mean of ``min(T, max)`` as a normal
  with the model's variance / n, the max as the likelihood of the largest of ``n``,
  ``F(m + r)^n - F(m - r)^n``.

More: docs/reference/modules.md, rocketsim/calibration/fit.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, special

from rocketsim.calibration.measurements import Binned, MeanMax, Quantiles
from rocketsim.calibration.model import LATENCY_KEYS, LatencyDistribution

MAX_BINS = 128  # intervals a term keeps (coarsened on a log grid past that)
ASSUMED_N = 1000.0  # sends behind quantiles whose count the input does not give
TINY = 1e-300
SCOUT_ITERATIONS = 25  # L-BFGS-B iterations from each start before the best one is run to the end


@dataclass(frozen=True)
class ParamSpec:
    """One fitted parameter: its range (the scenario's, narrowed where the optimiser needs a bound) and
    the scale it is optimised on."""

    name: str
    lower: float
    upper: float
    scale: str  # "log" or "logit"

    def to_free(self, value: float) -> float:
        v = min(max(value, self.lower), self.upper)
        return math.log(v) if self.scale == "log" else special.logit(v)

    def from_free(self, t: float) -> float:
        value = math.exp(t) if self.scale == "log" else float(special.expit(t))
        return min(max(value, self.lower), self.upper)  # exp(log(10.0)) is 10.000000000000002

    def bounds(self) -> tuple[float, float]:
        return self.to_free(self.lower), self.to_free(self.upper)


SPECS = {
    s.name: s
    for s in (
        ParamSpec("median_ms", 1e-4, 86_400_000.0, "log"),
        ParamSpec("sigma", 1e-3, 10.0, "log"),
        ParamSpec("spike_probability", 1e-8, 0.5, "logit"),
        ParamSpec("spike_scale_ms", 1e-3, 1e6, "log"),
        ParamSpec("spike_alpha", 0.1, 20.0, "log"),
        ParamSpec("spike_max_ms", 1e-3, 86_400_000.0, "log"),
    )
}
DEFAULTS = {
    "median_ms": 2.0,
    "sigma": 0.5,
    "spike_probability": 0.0,
    "spike_scale_ms": 50.0,
    "spike_alpha": 1.5,
    "spike_max_ms": math.inf,
}


@dataclass(frozen=True)
class Estimate:
    """One estimated value: ``key`` its name (a dotted scenario path once a part places it, e.g.
    ``brokers.default.latency.median_ms``), ``fixed`` and ``why``: fitted how, or held why."""

    key: str
    value: float
    fixed: bool
    why: str
    source: str = ""
    se: float | None = None
    ci: tuple[float, float] | None = None


@dataclass(frozen=True)
class Candidate:
    """A model to try: which latency parameters are free (the others keep their fixed values)."""

    name: str
    free: tuple[str, ...]


CANDIDATES = (
    Candidate("lognormal", ("median_ms", "sigma")),
    Candidate(
        "lognormal + spikes (alpha fixed)", ("median_ms", "sigma", "spike_probability", "spike_scale_ms")
    ),
    Candidate("lognormal + spikes", LATENCY_KEYS[:5]),
    Candidate("lognormal + spikes up to a maximum", LATENCY_KEYS),
)


# ---- likelihood terms -----------------------------------------------------------------------------


def interval_probs(dist: LatencyDistribution, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """P(lo < T <= hi) per interval: from F in the lower half, from 1 - F in the upper (no cancellation);
    each distinct edge evaluated once."""
    edges, where = np.unique(np.concatenate([lo, hi]), return_inverse=True)
    f, s = dist.cdf_sf(edges)
    i_lo, i_hi = where[: len(lo)], where[len(lo) :]
    upper = f[i_lo] > 0.5
    return np.maximum(np.where(upper, s[i_lo] - s[i_hi], f[i_hi] - f[i_lo]), 0.0)


@dataclass(frozen=True)
class BinnedTerm:
    """Counts per interval (a histogram, or the intervals between quantiles)."""

    lo: np.ndarray
    hi: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, m: Binned | Quantiles) -> BinnedTerm:
        if isinstance(m, Binned):
            return cls(np.asarray(m.lo), np.asarray(m.hi), np.asarray(m.counts, dtype=float))
        n = m.n or ASSUMED_N
        edges = np.concatenate([[0.0], m.values_ms, [math.inf]])
        levels = np.concatenate([[0.0], m.levels, [1.0]])
        return cls(edges[:-1], edges[1:], n * np.diff(levels))

    @property
    def n(self) -> float:
        return float(self.counts.sum())

    @property
    def dof(self) -> int:
        return max(int((self.counts > 0).sum()) - 1, 0) if len(self.counts) > 1 else 0

    @property
    def covers_all(self) -> bool:
        """Whether the intervals tile [0, inf) (then no conditioning on the covered range is needed)."""
        return bool(self.lo[0] <= 0 and np.isinf(self.hi[-1]) and np.all(self.lo[1:] == self.hi[:-1]))

    def coarsened(self, max_bins: int = MAX_BINS) -> BinnedTerm:
        """At most about ``max_bins`` intervals: neighbours merged on a log grid of their upper edges (an
        HdrHistogram walk has ~2,000 points; the fit needs far fewer, and each costs time)."""
        if len(self.counts) <= max_bins:
            return self
        finite = self.hi[np.isfinite(self.hi) & (self.hi > 0)]
        grid = np.geomspace(finite.min(), finite.max(), max_bins)
        cell = np.searchsorted(grid, self.hi)
        starts = np.flatnonzero(np.r_[True, cell[1:] != cell[:-1]])
        ends = np.r_[starts[1:], len(cell)] - 1
        return BinnedTerm(self.lo[starts], self.hi[ends], np.add.reduceat(self.counts, starts))

    def nll(self, dist: LatencyDistribution) -> float:
        p = interval_probs(dist, self.lo, self.hi)
        used = self.counts > 0
        out = -float(np.sum(self.counts[used] * np.log(np.maximum(p[used], TINY))))
        if not self.covers_all:  # condition on the covered range (floored: far off is no way out)
            out += self.n * math.log(max(float(p.sum()), 1e-3))
        return out


@dataclass(frozen=True)
class MeanMaxTerm:
    """A mean over ``n`` sends (normal, the model's variance of ``min(T, cap)``) and their maximum."""

    n: float
    mean_ms: float
    max_ms: float | None
    resolution_ms: float

    @classmethod
    def of(cls, m: MeanMax) -> MeanMaxTerm:
        return cls(m.n, m.mean_ms, m.max_ms, m.resolution_ms)

    @property
    def dof(self) -> int:
        return 1 + (self.max_ms is not None)

    def nll(self, dist: LatencyDistribution) -> float:
        cap = (self.max_ms + self.resolution_ms) if self.max_ms is not None else 1e9
        mean, second = dist.capped_moments(cap)
        var = max(second - mean * mean, TINY) / self.n
        out = 0.5 * ((self.mean_ms - mean) ** 2 / var + math.log(2 * math.pi * var))
        if self.max_ms is not None:
            hi = self.max_ms + self.resolution_ms
            lo = max(self.max_ms - self.resolution_ms, 0.0)
            log_f_hi = math.log1p(-min(float(dist.sf(hi)), 1 - 1e-16))
            log_f_lo = math.log1p(-min(float(dist.sf(lo)), 1 - 1e-16)) if lo > 0 else -math.inf
            gap = self.n * (log_f_lo - log_f_hi)
            out -= self.n * log_f_hi + math.log(max(-math.expm1(gap), TINY))
        return out


Term = BinnedTerm | MeanMaxTerm


def term_of(m: Binned | Quantiles | MeanMax) -> Term:
    return MeanMaxTerm.of(m) if isinstance(m, MeanMax) else BinnedTerm.of(m).coarsened()


# ---- the optimisation ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FitOutcome:
    """One candidate's maximum: the values, the free ones' standard errors on the optimiser's scale
    (None: the likelihood is flat there, i.e. the data do not identify it), and the criteria."""

    candidate: Candidate
    values: dict[str, float]
    free: tuple[str, ...]
    nll: float
    n: float
    converged: bool
    se_free: dict[str, float | None] = field(default_factory=dict)

    @property
    def k(self) -> int:
        return len(self.free)

    @property
    def aic(self) -> float:
        return 2 * self.nll + 2 * self.k

    @property
    def bic(self) -> float:
        return 2 * self.nll + self.k * math.log(max(self.n, 2.0))

    def distribution(self) -> LatencyDistribution:
        return LatencyDistribution.from_values(self.values)


def total_nll(terms: Sequence[Term], values: dict[str, float]) -> float:
    try:
        dist = LatencyDistribution.from_values(values)
        out = sum(t.nll(dist) for t in terms)
    except (FloatingPointError, ValueError, OverflowError, ZeroDivisionError):
        return 1e300
    return out if math.isfinite(out) else 1e300


def _hessian(f: Callable[[np.ndarray], float], x: np.ndarray, h: float = 1e-3) -> np.ndarray:
    """Central-difference Hessian of ``f`` at ``x`` (the optimiser's scale, so one step fits all)."""
    k = len(x)
    out = np.zeros((k, k))
    f0 = f(x)
    for i in range(k):
        for j in range(i, k):
            ei, ej = np.eye(k)[i] * h, np.eye(k)[j] * h
            if i == j:
                out[i, i] = (f(x + ei) - 2 * f0 + f(x - ei)) / h**2
            else:
                out[i, j] = out[j, i] = (
                    f(x + ei + ej) - f(x + ei - ej) - f(x - ei + ej) + f(x - ei - ej)
                ) / (4 * h * h)
    return out


def standard_errors(
    f: Callable[[np.ndarray], float], x: np.ndarray, names: Sequence[str]
) -> dict[str, float | None]:
    """Standard errors from the inverse observed information; None where it is not positive definite."""
    h = _hessian(f, x)
    try:
        cov = np.linalg.inv(h)
    except np.linalg.LinAlgError:
        return dict.fromkeys(names)
    diag = np.diag(cov)
    eig_ok = bool(np.all(np.linalg.eigvalsh((h + h.T) / 2) > 0))
    return {n: (math.sqrt(d) if eig_ok and d > 0 else None) for n, d in zip(names, diag, strict=True)}


def _minimize(
    f: Callable[[np.ndarray], float], x0: np.ndarray, specs: list[ParamSpec], maxiter: int | None
) -> optimize.OptimizeResult:
    if not specs:
        return optimize.OptimizeResult(x=x0, fun=f(x0), success=True)
    options = {"maxiter": maxiter} if maxiter else {}
    return optimize.minimize(f, x0, method="L-BFGS-B", bounds=[s.bounds() for s in specs], options=options)


def fit_candidate(
    terms: Sequence[Term], candidate: Candidate, fixed: dict[str, float], starts: list[dict[str, float]]
) -> FitOutcome:
    """The best of L-BFGS-B runs from ``starts`` with ``candidate``'s free parameters (minus ``fixed``)."""
    free = tuple(p for p in candidate.free if p not in fixed)
    specs = [SPECS[p] for p in free]

    def values_of(x: np.ndarray, base: dict[str, float]) -> dict[str, float]:
        return {**base, **{s.name: s.from_free(float(t)) for s, t in zip(specs, x, strict=True)}}

    best = None
    for start in starts:  # a short run from each start, then the best one to convergence
        base = {**DEFAULTS, **start, **fixed}

        def f(x: np.ndarray, base: dict[str, float] = base) -> float:
            return total_nll(terms, values_of(x, base))

        x0 = np.array([s.to_free(base[s.name]) for s in specs])
        res = _minimize(f, x0, specs, SCOUT_ITERATIONS if len(starts) > 1 else None)
        if best is None or res.fun < best[0].fun:
            best = (res, base, f)
    if len(starts) > 1:
        best = (_minimize(best[2], best[0].x, specs, None), best[1], best[2])
    res, base, f = best
    values = values_of(res.x, base)
    se = standard_errors(f, res.x, free) if free else {}
    n = sum(t.n for t in terms)
    return FitOutcome(candidate, values, free, float(res.fun), n, bool(res.success), se)
