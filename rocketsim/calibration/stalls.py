"""The host's stalls fitted to latency against load (``producers.host_stall_*``).

More: docs/reference/modules.md, rocketsim/calibration/stalls.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from rocketsim.client.stall_lengths import unit_lengths

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


# --fit-stall-shape: the lengths' gamma shape fitted too, against the measured statistic itself
REPLICAS = 8  # the schedule simulated this many times over, each with its own draws
SHAPE_MAX_SHARE = 0.9  # the stalls take at most this share of the host's time
SHAPE_GRID = tuple(
    (share, mean, shape)
    for share in (0.2, 0.4, 0.6)
    for mean in (2.0, 5.0, 12.0)
    for shape in (0.5, 1.0, 4.0)
)


@dataclass(frozen=True)
class StallShapeFit:
    """Stalls whose lengths are a gamma distribution: the ``share`` of the host's time they take at its
    saturation rate, ``mean_ms`` and ``shape`` (``producers.host_stall_shape``), and the fit's residual."""

    share: float
    mean_ms: float
    shape: float
    loss: float

    def every(self, saturation_per_s: float) -> float:
        """The sends between two stalls on average at that saturation rate."""
        return self.mean_ms / 1000.0 * saturation_per_s / self.share


@dataclass(frozen=True)
class ShapeDraws:
    """The uniforms a shape fit draws once (``gaps``: unit exponentials between stall starts; ``lengths``:
    uniforms for :func:`rocketsim.client.stall_lengths.unit_lengths`), one row a replica."""

    gaps: np.ndarray
    lengths: np.ndarray

    @classmethod
    def drawn(cls, replicas: int = REPLICAS, seed: int = SEED) -> ShapeDraws:
        rng = np.random.default_rng(seed)
        return cls(rng.exponential(size=(replicas, DRAWS)), rng.uniform(size=(replicas, DRAWS)))


def chained_stalls(starts: np.ndarray, lengths: np.ndarray, size: int) -> np.ndarray:
    """Which of ``size`` milliseconds are stalled when each stall starts at its start or when the one
    before it ended, whichever is later (as a fair host chains its stops, ``FairShareHost.stop_all``)."""
    before = np.concatenate([[0.0], np.cumsum(lengths)[:-1]])
    begin = np.maximum.accumulate(starts - before) + before  # begin_i = max(start_i, end_{i-1})
    edges = np.zeros(size + 1)
    np.add.at(edges, np.minimum(np.round(begin).astype(int), size), 1.0)
    np.add.at(edges, np.minimum(np.round(begin + lengths).astype(int), size), -1.0)
    return np.cumsum(edges)[:size] > 0.5


def queue_waits(work_per_ms: np.ndarray, stalled: np.ndarray) -> np.ndarray:
    """:func:`fluid_waits` without the loops: the backlog by Lindley's recursion on the running sum of the
    work less the host's free time, and the rest of the stall each millisecond is in."""
    net = np.cumsum(work_per_ms - ~stalled)
    backlog = net - np.minimum(0.0, np.minimum.accumulate(net))
    index = np.arange(stalled.size)
    free_from = np.minimum.accumulate(np.where(stalled, stalled.size, index)[::-1])[::-1]
    return backlog + np.where(stalled, free_from - index, 0)


def shape_quantiles(
    steps: Sequence[StepLatency], share: float, mean_ms: float, shape: float, draws: ShapeDraws
) -> np.ndarray:
    """The fluid queue's wait p50/p90/p99 per step (rows), each the median over the step's seconds (of
    every replica) of that second's quantile, as the measured runs' per-step figures are: stalls of gamma
    lengths (``shape``) taking ``share`` of the host's time at its saturation rate."""
    load = np.concatenate([np.full(int(s.seconds * 1000), s.load) for s in steps])
    per_second: list[list[np.ndarray]] = [[] for _ in steps]
    for gaps, uniforms in zip(draws.gaps, draws.lengths, strict=True):
        starts = np.searchsorted(np.cumsum(load * share / mean_ms), np.cumsum(gaps))
        n = int(np.searchsorted(starts, load.size))
        lengths = np.maximum(mean_ms * np.asarray(unit_lengths(uniforms[:n], shape)), 1.0)
        waits = queue_waits(
            load * (1.0 - share), chained_stalls(starts[:n].astype(float), lengths, load.size)
        )
        at = 0
        for i, s in enumerate(steps):
            for second in range(int(s.seconds)):
                per_second[i].append(
                    np.percentile(waits[at + second * 1000 : at + (second + 1) * 1000], QUANTILES)
                )
            at += int(s.seconds * 1000)
    return np.array([np.median(np.array(rows), axis=0) for rows in per_second])


def fit_stall_shape(
    steps: Sequence[StepLatency], base_ms: float = 0.0, draws: ShapeDraws | None = None
) -> StallShapeFit:
    """The stalls' share, mean length and gamma shape that make :func:`shape_quantiles` (plus ``base_ms``)
    closest to the measured per-step quantiles (log ratios, 1 ms added to both sides): the best of
    :data:`SHAPE_GRID`, refined by Nelder-Mead on the share, log mean and log shape."""
    draws = draws or ShapeDraws.drawn()
    measured = np.log1p(np.array([s.quantiles_ms for s in steps]))

    def unpack(x: np.ndarray) -> tuple[float, float, float]:
        return (
            float(np.clip(x[0], MIN_SHARE, SHAPE_MAX_SHARE)),
            float(np.exp(x[1])),
            float(np.exp(np.clip(x[2], -3.0, 6.9))),
        )

    def loss(x: np.ndarray) -> float:
        simulated = np.log1p(shape_quantiles(steps, *unpack(x), draws) + base_ms)
        return float(((simulated - measured) ** 2).sum())

    grid = [np.array([a, np.log(b), np.log(k)]) for a, b, k in SHAPE_GRID]
    start = min(grid, key=loss)
    simplex = np.array([start] + [start + d for d in np.diag([0.1, 0.4, 0.5])])
    best = minimize(
        loss,
        start,
        method="Nelder-Mead",
        options={"xatol": 1e-3, "fatol": 1e-4, "maxiter": 300, "initial_simplex": simplex},
    )
    x = best.x if best.fun <= loss(start) else start
    return StallShapeFit(*unpack(x), loss(x))
