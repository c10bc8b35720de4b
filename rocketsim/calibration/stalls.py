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
REPLICAS = 4  # the schedule simulated this many times over, each with its own draws
SHAPE_MAX_SHARE = 0.9  # the stalls take at most this share of the host's time
# the lengths' gamma shape: the ramp's per-step quantiles barely tell it (the best share and mean for each
# shape, loss: 0.5 2.04, 1 2.01, 2 1.96, 4 1.77, 8 1.91; docs/validation.md), so it is fixed at the best
# of those, 4 (a coefficient of variation of 0.5: stalls of a like length)
STALL_SHAPE = 4.0
CANDIDATES_PER_MS = 1.0  # ShapeDraws' candidate starts: at most one stall a ms on average
MIN_MEAN_MS = 1.0  # so the stalls' rate at the largest share and load, 0.9 x ~1 / 1 ms, is within it
GRID_SHARES_SHAPE = (0.2, 0.4, 0.6, 0.8)
GRID_MEANS_SHAPE_MS = (1.5, 3.0, 6.0, 12.0, 24.0)
STARTS = 3  # the grid's best points refined


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
    """What a shape fit draws once, one row a replica: candidate stall starts at :data:`CANDIDATES_PER_MS`
    (``starts``, ms), each kept when its ``marks`` (uniform) is below the stalls' rate then over that
    (thinning: a change of the rate keeps or drops a few stalls, and moves none), and ``lengths``
    (uniforms for :func:`rocketsim.client.stall_lengths.unit_lengths`)."""

    starts: np.ndarray
    marks: np.ndarray
    lengths: np.ndarray

    @classmethod
    def drawn(cls, replicas: int = REPLICAS, seed: int = SEED) -> ShapeDraws:
        rng = np.random.default_rng(seed)
        starts = np.cumsum(rng.exponential(size=(replicas, DRAWS)), axis=1) / CANDIDATES_PER_MS
        return cls(starts, rng.uniform(size=(replicas, DRAWS)), rng.uniform(size=(replicas, DRAWS)))


def chained_stalls(starts_ms: np.ndarray, lengths_ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The stalls' (begin, end), ms: each from its start or the end of the one before it, whichever is
    later (as a fair host chains its stops, ``FairShareHost.stop_all``)."""
    before = np.concatenate([[0.0], np.cumsum(lengths_ms)[:-1]])
    begin = np.maximum.accumulate(starts_ms - before) + before  # begin_i = max(start_i, end_{i-1})
    return begin, begin + lengths_ms


def stalled_before(begin: np.ndarray, end: np.ndarray, at_ms: np.ndarray) -> np.ndarray:
    """The stalled time before each of ``at_ms`` (stalls ``begin``-``end``, in order, not overlapping)."""
    done = np.searchsorted(end, at_ms, side="right")  # the stalls ended by then
    whole = np.concatenate([[0.0], np.cumsum(end - begin)])[done]
    k = np.minimum(done, begin.size - 1)
    part = np.where(done < begin.size, np.clip(at_ms - begin[k], 0.0, None), 0.0) if begin.size else 0.0
    return whole + part


def queue_waits(work_per_ms: np.ndarray, begin: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The wait of work arriving in the middle of each millisecond: the backlog by Lindley's recursion on
    the running sum of the work less the host's time outside the stalls (a fraction of a millisecond where
    a stall covers part of it), and the rest of the stall it arrives in and of those chained after it.
    Continuous in the stalls' times, so a fit's loss is too."""
    grid = np.arange(work_per_ms.size + 1, dtype=float)
    free = 1.0 - np.diff(stalled_before(begin, end, grid))
    net = np.cumsum(work_per_ms - free)
    backlog = net - np.minimum(0.0, np.minimum.accumulate(net))
    if not begin.size:
        return backlog
    middle = grid[:-1] + 0.5
    k = np.clip(np.searchsorted(begin, middle, side="right") - 1, 0, None)
    block = np.cumsum(np.concatenate([[True], begin[1:] > end[:-1]])) - 1  # stalls end to end: one block
    block_end = np.maximum.reduceat(end, np.flatnonzero(np.diff(np.concatenate([[-1], block]))))[block]
    return backlog + np.where((middle >= begin[k]) & (middle < end[k]), block_end[k] - middle, 0.0)


def shape_quantiles(
    steps: Sequence[StepLatency], share: float, mean_ms: float, shape: float, draws: ShapeDraws
) -> np.ndarray:
    """The fluid queue's wait p50/p90/p99 per step (rows), each the median over the step's seconds (of
    every replica) of that second's quantile, as the measured runs' per-step figures are: stalls of gamma
    lengths (``shape``) taking ``share`` of the host's time at its saturation rate."""
    load = np.concatenate([np.full(int(s.seconds * 1000), s.load) for s in steps])
    rate = load * share / max(mean_ms, MIN_MEAN_MS) / CANDIDATES_PER_MS  # a candidate's chance
    per_second: list[list[np.ndarray]] = [[] for _ in steps]
    for starts, marks, uniforms in zip(draws.starts, draws.marks, draws.lengths, strict=True):
        n = int(np.searchsorted(starts, load.size))
        kept = marks[:n] < rate[starts[:n].astype(int)]
        lengths = mean_ms * np.asarray(unit_lengths(uniforms[:n][kept], shape))
        waits = queue_waits(load * (1.0 - share), *chained_stalls(starts[:n][kept], lengths))
        at = 0
        for i, s in enumerate(steps):
            for second in range(int(s.seconds)):
                window = waits[at + second * 1000 : at + (second + 1) * 1000]
                per_second[i].append(np.percentile(window, QUANTILES))
            at += int(s.seconds * 1000)
    return np.array([np.median(np.array(rows), axis=0) for rows in per_second])


def fit_stall_shape(
    steps: Sequence[StepLatency],
    base_ms: float = 0.0,
    shape: float = STALL_SHAPE,
    draws: ShapeDraws | None = None,
) -> StallShapeFit:
    """The stalls' share and mean length, their lengths of gamma ``shape``, that make
    :func:`shape_quantiles` (plus ``base_ms``) closest to the measured per-step quantiles (log ratios, 1 ms
    added to both sides): the best :data:`STARTS` of a grid, each refined by Nelder-Mead on the share and
    the log mean, the best of those. The
    shape is fixed: the per-step quantiles leave it open (:data:`STALL_SHAPE`)."""
    draws = draws or ShapeDraws.drawn()
    measured = np.log1p(np.array([s.quantiles_ms for s in steps]))

    def unpack(x: np.ndarray) -> tuple[float, float]:
        return float(np.clip(x[0], MIN_SHARE, SHAPE_MAX_SHARE)), max(float(np.exp(x[1])), MIN_MEAN_MS)

    def loss(x: np.ndarray) -> float:
        simulated = np.log1p(shape_quantiles(steps, *unpack(x), shape, draws) + base_ms)
        return float(((simulated - measured) ** 2).sum())

    grid = [np.array([a, np.log(b)]) for a in GRID_SHARES_SHAPE for b in GRID_MEANS_SHAPE_MS]
    ends = []
    for start in sorted(grid, key=loss)[:STARTS]:
        simplex = np.array([start, start + [0.05, 0.0], start + [0.0, 0.3]])
        options = {"xatol": 1e-4, "fatol": 1e-6, "maxiter": 200, "initial_simplex": simplex}
        ends.append(minimize(loss, start, method="Nelder-Mead", options=options).x)
    x = min(ends, key=loss)
    return StallShapeFit(*unpack(x), shape, loss(x))
