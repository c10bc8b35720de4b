"""The host's stalls fitted to latency against load (``producers.host_stall_*``).

More: docs/reference/modules.md, rocketsim/calibration/stalls.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

QUANTILES = (50.0, 90.0, 99.0)
DRAWS = 65_536  # stalls drawn once (unit exponentials), scaled by the parameters
MIN_SHARE, MAX_SHARE = 0.005, 0.5  # the stalls take at most half the host's time
GRID_SHARES = (0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
GRID_MEANS_MS = tuple(2.0 ** np.arange(0.0, 6.5, 0.5))  # 1 ms to 64 ms
SEED = 20_260_427


@dataclass(frozen=True)
class StepLatency:
    """One step of a measured schedule: its load (rate / saturation rate), seconds, and the OK latency
    p50, p90, p99 (ms) of its seconds (the median of each)."""

    load: float
    seconds: float
    quantiles_ms: tuple[float, float, float]


@dataclass(frozen=True)
class StallFit:
    """The fitted stalls: the ``share`` of the host's time they take at its saturation rate, each
    ``mean_ms`` long on average, and the fit's residual."""

    share: float
    mean_ms: float
    loss: float

    def every(self, saturation_per_s: float) -> float:
        """The sends between two stalls on average at that saturation rate."""
        return self.mean_ms / 1000.0 * saturation_per_s / self.share


def stall_mask(
    starts_per_ms: np.ndarray, mean_ms: float, gaps: np.ndarray, lengths: np.ndarray
) -> np.ndarray:
    """Which milliseconds are stalled: stalls start at the expected rate ``starts_per_ms`` of each ms
    (the i-th once the rate's running sum passes the sum of the first i ``gaps``, unit exponentials),
    each ``lengths`` (unit exponentials) x mean long."""
    mask = np.zeros(starts_per_ms.size, dtype=bool)
    starts = np.searchsorted(np.cumsum(starts_per_ms), np.cumsum(gaps))
    for start, length in zip(starts.tolist(), (lengths * mean_ms).tolist(), strict=True):
        if start >= mask.size:
            break
        mask[start : start + max(int(round(length)), 1)] = True
    return mask


def fluid_waits(load_per_ms: np.ndarray, stalled: np.ndarray) -> np.ndarray:
    """The wait (ms) of work arriving in each millisecond: the backlog of work before it, and the rest of
    a stall it arrives in. ``load_per_ms``: the work (ms) that arrives in each ms."""
    stall_left = np.zeros(stalled.size)
    for t in range(stalled.size - 2, -1, -1):  # the stalled milliseconds from each on
        stall_left[t] = stall_left[t + 1] + 1.0 if stalled[t] else 0.0
    waits = np.empty(load_per_ms.size)
    backlog = 0.0
    for t, (work, stop) in enumerate(zip(load_per_ms.tolist(), stalled.tolist(), strict=True)):
        backlog = backlog + work if stop else max(0.0, backlog + work - 1.0)
        waits[t] = backlog
    return waits + stall_left


def step_quantiles(
    steps: Sequence[StepLatency], share: float, mean_ms: float, draws: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    """The fluid queue's wait p50/p90/p99 per step (rows) when stalls take ``share`` of the host's time
    at its saturation rate (one every so many sends, ``mean_ms`` long): the other work then takes the
    rest (loads are relative to the saturation rate)."""
    load = np.concatenate([np.full(int(s.seconds * 1000), s.load) for s in steps])
    waits = fluid_waits(load * (1.0 - share), stall_mask(load * share / mean_ms, mean_ms, *draws))
    out, at = [], 0
    for s in steps:
        n = int(s.seconds * 1000)
        out.append(np.percentile(waits[at : at + n], QUANTILES))
        at += n
    return np.array(out)


def fit_stalls(steps: Sequence[StepLatency], base_ms: float = 0.0) -> StallFit:
    """The stalls' share and mean length that make the fluid queue's per-step quantiles (plus
    ``base_ms``, the latency at no load) closest to the measured ones (log ratios, 1 ms added to both
    sides): the best of a grid, refined by Nelder-Mead."""
    rng = np.random.default_rng(SEED)
    draws = (rng.exponential(size=DRAWS), rng.exponential(size=DRAWS))
    measured = np.log1p(np.array([s.quantiles_ms for s in steps]))

    def loss(x: np.ndarray) -> float:
        share, mean = float(np.clip(x[0], MIN_SHARE, MAX_SHARE)), float(np.exp(x[1]))
        simulated = np.log1p(step_quantiles(steps, share, mean, draws) + base_ms)
        return float(((simulated - measured) ** 2).sum())

    grid = [np.array([a, np.log(b)]) for a in GRID_SHARES for b in GRID_MEANS_MS]
    start = min(grid, key=loss)
    best = minimize(loss, start, method="Nelder-Mead", options={"xatol": 1e-3, "fatol": 1e-5, "maxiter": 200})
    x = best.x if best.fun <= loss(start) else start
    return StallFit(float(np.clip(x[0], MIN_SHARE, MAX_SHARE)), float(np.exp(x[1])), loss(x))
