"""The broker model's latency distribution in closed form: what calibration fits.

:func:`rocketsim.broker.latency.base_latency_ms` draws ``T = B + 1{spike}·S`` with ``B`` lognormal
(``median_ms``, ``sigma``) and ``S`` Pareto (``spike_scale_ms``, ``spike_alpha``, truncated at
``spike_max_ms`` when that is finite) with probability ``spike_probability``. Its CDF is

    F(x) = (1 - p)·Φ((ln x - μ)/σ) + p·∫ Φ-weighted F_S(x - b) db

and the spike part is one smooth integral over the body's quantile ``u``: with ``b(u) = e^(μ + σΦ⁻¹(u))``
and ``U* = Φ((ln(x - x_m) - μ)/σ)`` (the body values that leave room for a spike),
``P(B + S <= x) = ∫_0^U* F_S(x - b(u)) du``, ``F_S(s) = min(1, (1 - (x_m / s)^α) / (1 - (x_m / M)^α))``,
by Gauss–Legendre. Quantiles by bisection in
``log x``; the mean and second moment of ``min(T, cap)`` from ``∫ (1 - F)``. The model's own rounding to
whole ms and its cap (``MAX_LATENCY_MS``) are left out: measurements are of the real, continuous time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

# Gauss–Legendre nodes on [0, 1] for the spike integral: 48 points hold F to ~1e-9 (tests compare with a
# fine quadrature and with the model's own sampler)
_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(48)
_T = (_NODES + 1.0) / 2.0
_W = _WEIGHTS / 2.0
LATENCY_KEYS = ("median_ms", "sigma", "spike_probability", "spike_scale_ms", "spike_alpha", "spike_max_ms")


@dataclass(frozen=True)
class LatencyDistribution:
    """``brokers.<name>.latency``'s distribution: the keys of :class:`rocketsim.scenario.LatencyConfig`."""

    median_ms: float
    sigma: float
    spike_probability: float = 0.0
    spike_scale_ms: float = 50.0
    spike_alpha: float = 1.5
    spike_max_ms: float = math.inf

    @classmethod
    def from_values(cls, values: dict[str, float]) -> LatencyDistribution:
        return cls(**{k: float(values[k]) for k in LATENCY_KEYS if k in values})

    def values(self) -> dict[str, float]:
        return {k: float(getattr(self, k)) for k in LATENCY_KEYS}

    def _spike_parts(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For the sends that spiked: (mask x > x_m, U* at those x, ∫_0^U* (1 - F_S(x - b(u))) du)."""
        room = x - self.spike_scale_ms
        ok = room > 0
        u_star = special.ndtr((np.log(room[ok]) - np.log(self.median_ms)) / self.sigma)
        u = u_star[:, None] * _T[None, :]
        b = self.median_ms * np.exp(self.sigma * special.ndtri(np.clip(u, 1e-300, 1.0)))
        gap = np.maximum(x[ok][:, None] - b, self.spike_scale_ms)
        above = (self.spike_scale_ms / gap) ** self.spike_alpha  # P(S > gap), untruncated
        if math.isfinite(self.spike_max_ms):
            r = self._truncated_share()
            above = np.maximum(above - r, 0.0) / (1.0 - r)
        tail = u_star * (above @ _W)
        return ok, u_star, tail

    def cdf_sf(self, x: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
        """F(x) = P(T <= x) and 1 - F(x) (the latter without the cancellation of ``1 - F`` far in the
        tail), for ``x`` in ms (inf gives 1 and 0), from one evaluation of the spike integral."""
        x = np.asarray(x, dtype=float)
        finite = np.isfinite(x)
        with np.errstate(divide="ignore"):
            z = (np.log(np.where(finite, np.maximum(x, 0.0), 1.0)) - np.log(self.median_ms)) / self.sigma
        f_body = np.where(finite, special.ndtr(z), 1.0)
        s_body = np.where(finite, special.ndtr(-z), 0.0)
        p = self.spike_probability
        if p <= 0.0:
            return f_body, s_body
        f_spike = np.where(finite, 0.0, 1.0)
        s_spike = np.where(finite, 1.0, 0.0)
        ok, u_star, tail = self._spike_parts(np.where(finite, x, 0.0))
        f_spike[ok] = u_star - tail
        s_spike[ok] = (1.0 - u_star) + tail
        return (1.0 - p) * f_body + p * f_spike, (1.0 - p) * s_body + p * s_spike

    def cdf(self, x: np.ndarray | float) -> np.ndarray:
        """F(x) = P(T <= x), for ``x`` in ms (inf gives 1)."""
        return self.cdf_sf(x)[0]

    def sf(self, x: np.ndarray | float) -> np.ndarray:
        """1 - F(x) (see :meth:`cdf_sf`)."""
        return self.cdf_sf(x)[1]

    def quantile(self, levels: np.ndarray | float) -> np.ndarray:
        """The latency (ms) at each level in (0, 1), by bisection on ``log x``."""
        levels = np.atleast_1d(np.asarray(levels, dtype=float))
        lo = np.full(levels.shape, np.log(1e-9))
        hi = np.full(levels.shape, np.log(1e12))
        for _ in range(90):
            mid = (lo + hi) / 2.0
            below = self.cdf(np.exp(mid)) < levels
            lo = np.where(below, mid, lo)
            hi = np.where(below, hi, mid)
        return np.exp((lo + hi) / 2.0)

    def capped_moments(self, cap_ms: float) -> tuple[float, float]:
        """E[min(T, cap)] and E[min(T, cap)²]: ``∫ (1 - F)`` and ``∫ 2x (1 - F)`` over [0, cap]."""
        x = cap_ms * np.concatenate([[0.0], np.geomspace(1e-9, 1.0, 4000)])
        survival = 1.0 - self.cdf(x)
        mean = float(np.trapezoid(survival, x))
        second = float(np.trapezoid(2.0 * x * survival, x))
        return mean, second

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` latencies (ms) drawn as :func:`rocketsim.broker.latency.base_latency_ms` draws them
        (without its rounding): for synthetic measurements and bootstraps."""
        body = self.median_ms * np.exp(self.sigma * rng.standard_normal(n))
        spiked = rng.random(n) < self.spike_probability
        return body + np.where(spiked, self.spike_quantile(rng.random(n)), 0.0)

    def spike_quantile(self, u: np.ndarray) -> np.ndarray:
        """The spike at level ``u`` (inversion, as the broker model draws it): Pareto, truncated at
        ``spike_max_ms`` when that is finite."""
        return self.spike_scale_ms * (1.0 - u * (1.0 - self._truncated_share())) ** (-1.0 / self.spike_alpha)

    def _truncated_share(self) -> float:
        """``(x_m / M)^α``: the share of an untruncated Pareto above the maximum (0: no maximum; held
        below 1 so a maximum at or under the scale stays defined)."""
        if not math.isfinite(self.spike_max_ms):
            return 0.0
        return min((self.spike_scale_ms / self.spike_max_ms) ** self.spike_alpha, 1.0 - 1e-12)
