"""Open-loop rate schedules (``workload.rate_steps``): steps of a rate held for some seconds, and the due
time of every send of such a schedule.

A schedule ``[[rate, seconds], ...]`` sends ``round(rate x seconds)`` messages in each step, all
producers together, as the real-broker harness's driver does: the schedule's ``j``-th send (counting
from 0 over the whole schedule) goes to producer ``j % producers``. With ``arrival = "uniform"`` it is
due at its step's start plus ``(j - first j of the step) / rate`` (the harness's schedule exactly); with
``"poisson"`` each producer's sends of a step are the order statistics of uniform times over the step
(a Poisson process given its count): normalised exponential spacings, drawn per (producer, seq) as the
rest of the workload.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

Steps = Sequence[tuple[float, float]]  # (rate msg/s, seconds)
# (producer, seqs, which draw of a seq) -> uniforms in [0, 1): the workload's counter-based draws
Draws = Callable[[int, np.ndarray, int], np.ndarray]


def step_messages(steps: Steps) -> np.ndarray:
    """The messages each step sends, all producers together."""
    return np.array([int(round(rate * secs)) for rate, secs in steps], np.int64)


def total_messages(steps: Steps) -> int:
    return int(step_messages(steps).sum())


def producer_messages(steps: Steps, producers: int) -> list[int]:
    """Each producer's messages: the schedule's sends ``j`` with ``j % producers`` its number."""
    n = total_messages(steps)
    return [(n - p + producers - 1) // producers for p in range(producers)]


def _bounds(steps: Steps) -> tuple[np.ndarray, np.ndarray]:
    """Each step's first schedule index and start (ms), with one past the end."""
    first = np.concatenate([[0], np.cumsum(step_messages(steps))])
    start = np.concatenate([[0.0], np.cumsum([secs for _, secs in steps])]) * 1000.0
    return first, start


def due_ms(
    steps: Steps, producers: int, producer: int, seqs: np.ndarray, draws: Draws | None = None
) -> np.ndarray:
    """The due time (ms from the start, fractional) of ``producer``'s sends ``seqs``: uniform spacing
    when ``draws`` is None, else Poisson arrivals from ``draws``."""
    first, start = _bounds(steps)
    j = producer + np.asarray(seqs, np.int64) * producers
    step = np.searchsorted(first, j, side="right") - 1
    if draws is None:
        rates = np.array([rate for rate, _ in steps], float)
        return start[step] + (j - first[step]) * 1000.0 / rates[step]
    out = np.empty(j.size)
    for i in np.unique(step):
        at = step == i
        out[at] = _poisson_step(first, start, int(i), producers, producer, np.asarray(seqs)[at], draws)
    return out


def _poisson_step(
    first: np.ndarray,
    start: np.ndarray,
    i: int,
    producers: int,
    producer: int,
    seqs: np.ndarray,
    draws: Draws,
) -> np.ndarray:
    """Step ``i``'s sends of ``producer`` at ``seqs``: uniform order statistics over the step, as
    normalised exponential spacings (the step's own seqs' draws, and one more for the gap after the last)."""
    lo = (first[i] - producer + producers - 1) // producers  # the producer's first seq in the step
    hi = (first[i + 1] - producer + producers - 1) // producers
    own = np.arange(lo, hi, dtype=np.int64)
    gaps = -np.log1p(-draws(producer, own, 0))
    closing = -np.log1p(-draws(producer, own[:1], 1))  # the gap after the step's last send
    cum = np.cumsum(gaps) / (gaps.sum() + closing.sum())
    return start[i] + (start[i + 1] - start[i]) * cum[np.asarray(seqs) - lo]
