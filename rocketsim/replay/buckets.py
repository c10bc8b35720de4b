"""A slowdown factor per window from latency histogram buckets (Prometheus ``le`` series), not from a
quantile interpolated between coarse bucket bounds (RocketMQ's ``rocketmq_rpc_latency`` has bounds 1, 3,
5, 7, 10, 100, 1000 ms...: ``histogram_quantile`` draws a straight line between 10 and 100 ms).

The broker model's latency body is lognormal (``LatencyConfig``: median and sigma) and a ``slowdown``
multiplies it by a factor, which moves the lognormal's location ``mu`` by ``ln(factor)`` and keeps its
shape. So: the shape ``sigma`` and location ``mu_0`` are fitted to the baseline windows' bucket counts
together, each window's ``mu_t`` with that ``sigma`` to its own counts (maximum likelihood of grouped
data: a bucket ``(a, b]`` has probability ``Phi((ln b - mu) / sigma) - Phi((ln a - mu) / sigma)``), and
the window's factor is ``exp(mu_t - mu_0)``. Rates serve as counts (the likelihood's maximum does not
depend on their scale). The log-likelihood is concave in ``mu``, so a bounded scalar search finds it;
the bucket probabilities are calibration's (:func:`rocketsim.calibration.fit.interval_probs`, the one
definition of a grouped latency likelihood).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize_scalar

from rocketsim.calibration.fit import interval_probs
from rocketsim.calibration.model import LatencyDistribution

DEFAULT_SIGMA = 0.5  # LatencyConfig.sigma: when the baseline cannot tell the shape (one bucket)


def bucket_counts(cumulative: np.ndarray) -> np.ndarray:
    """Per-bucket counts (rows: buckets by upper bound) of cumulative counts by ``le``."""
    filled = np.nan_to_num(cumulative, nan=0.0)
    return np.clip(np.diff(filled, axis=0, prepend=0.0), 0.0, None)


def log_likelihood(edges: np.ndarray, counts: np.ndarray, mu: float, sigma: float) -> float:
    """Grouped-data log-likelihood of a lognormal: buckets ``(edges[j-1], edges[j]]``, the first from 0."""
    lower = np.concatenate([[0.0], edges[:-1]])
    p = np.maximum(interval_probs(LatencyDistribution(math.exp(mu), sigma), lower, edges), 1e-300)
    used = counts > 0
    return float(np.sum(counts[used] * np.log(p[used])))


def _argmax(f, low: float, high: float) -> float:  # noqa: ANN001
    """The maximum of a unimodal ``f`` on ``[low, high]``."""
    return float(minimize_scalar(lambda x: -f(x), bounds=(low, high), method="bounded").x)


def _mu_range(edges: np.ndarray, sigma: float) -> tuple[float, float]:
    finite = edges[np.isfinite(edges) & (edges > 0)]
    return float(np.log(finite.min())) - 6.0 * sigma, float(np.log(finite.max())) + 6.0 * sigma


def fit_mu(edges: np.ndarray, counts: np.ndarray, sigma: float) -> float:
    """The location of the lognormal with shape ``sigma`` that best explains ``counts``; NaN for none."""
    if counts.sum() <= 0:
        return math.nan
    return _argmax(lambda mu: log_likelihood(edges, counts, mu, sigma), *_mu_range(edges, sigma))


def fit_lognormal(edges: np.ndarray, counts: np.ndarray) -> tuple[float, float]:
    """(mu, sigma) of grouped counts: sigma by a bounded search on the profile likelihood."""
    if (counts > 0).sum() < 2:
        return fit_mu(edges, counts, DEFAULT_SIGMA), DEFAULT_SIGMA

    def profile(log_sigma: float) -> float:
        sigma = math.exp(log_sigma)
        return log_likelihood(edges, counts, fit_mu(edges, counts, sigma), sigma)

    sigma = math.exp(_argmax(profile, math.log(0.02), math.log(5.0)))
    return fit_mu(edges, counts, sigma), sigma


def slowdowns(edges: np.ndarray, cumulative: np.ndarray, base: np.ndarray) -> np.ndarray:
    """``exp(mu_t - mu_0)`` per window (columns of ``cumulative``, rows by ``edges`` ascending); NaN for a
    window without counts. ``base``: the baseline windows."""
    counts = bucket_counts(cumulative)
    mu0, sigma = fit_lognormal(edges, counts[:, base].sum(axis=1))
    out = np.full(counts.shape[1], np.nan)
    for t in range(counts.shape[1]):
        mu = fit_mu(edges, counts[:, t], sigma)
        if math.isfinite(mu):
            out[t] = math.exp(mu - mu0)
    return out
