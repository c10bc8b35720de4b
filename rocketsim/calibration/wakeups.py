"""The Netty legs' two constants (a cost a wakeup, a cost a request: :mod:`rocketsim.client.wakeups`) fitted
to the CPU a send each leg's threads spent in per-thread runs of the real harness at several rates
(``tests/data/realbroker-reruns/threads``, read by :mod:`rocketsim.warehouse.thread_runs`).

A wakeup takes every request queued while its thread is runnable, ``s`` times its CPU time on a shared
host (``s``: the thread group's runnable threads over the cores it used, measured per run). With requests
reaching a thread at ``lam`` a microsecond a wakeup takes ``n = (1 + lam s w) / (1 - lam s c)`` (no bound
once ``lam s c >= 1``), and a send costs the leg ``k (c + w / n)`` for its ``k`` pieces on it (client
worker and selector: the request out and the answer in; broker selector and codec: the request). ``w``
and ``c`` are the least-squares fit of that to every run's CPU a send, on the log ratio (scipy's
``least_squares``, both >= 0; docs/validation.md has the fit and its errors).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from rocketsim.errors import MeasurementError


@dataclass(frozen=True)
class Leg:
    """One Netty leg: its scenario keys' prefix, the thread group measured, its pieces a send."""

    key: str  # e.g. "producers.netty_worker": the keys key + "_wakeup_us" and key + "_request_us"
    group: str  # the group in the runs' summaries
    pieces: int  # pieces a send on one of its threads


LEGS = (
    Leg("producers.netty_worker", "driver/client netty worker", 2),
    Leg("producers.netty_selector", "driver/client netty selector", 2),
    Leg("store.selector", "broker/broker netty selector", 1),
    Leg("store.codec", "broker/broker netty worker", 1),
)


@dataclass(frozen=True)
class ThreadRun:
    """One per-thread run: its sends due a second in its window, the connections they shared (one per
    producer: each its leg's own threads), and per thread group the CPU a send due (us) and how long its
    threads were runnable per CPU second (``stretch``)."""

    name: str
    rate: float
    connections: int
    us_per_send: Mapping[str, float]
    stretch: Mapping[str, float]


@dataclass(frozen=True)
class LegFit:
    """A leg's fitted constants and, per run, the measured and the fitted CPU a send."""

    leg: Leg
    wakeup_us: float
    request_us: float
    runs: tuple[str, ...]
    measured: tuple[float, ...]
    fitted: tuple[float, ...]

    @property
    def max_relative_error(self) -> float:
        """The largest |fitted / measured - 1| over the runs."""
        return max(abs(f / m - 1.0) for f, m in zip(self.fitted, self.measured, strict=True))

    def values(self) -> dict[str, float]:
        """The scenario keys and their fitted values."""
        return {f"{self.leg.key}_wakeup_us": self.wakeup_us, f"{self.leg.key}_request_us": self.request_us}


def parse_thread_run(name: str, summary_text: str, meta_text: str, source: str) -> ThreadRun:
    """A run from its ``summary.json`` (``window_s``, ``sends``, ``groups``: ``us_per_send``,
    ``window_means``: [cores, threads, runnable]) and ``meta.json`` (``producers``)."""
    try:
        summary, meta = json.loads(summary_text), json.loads(meta_text)
        window = float(summary["window_s"][1]) - float(summary["window_s"][0])
        rate = float(summary["sends"]) / window
        connections = int(meta["producers"])
        us = {leg.group: float(summary["groups"][leg.group]["us_per_send"]) for leg in LEGS}
        means = {leg.group: summary["window_means"][leg.group] for leg in LEGS}
        stretch = {g: float(m[2]) / float(m[0]) for g, m in means.items()}
    except (ValueError, KeyError, IndexError, TypeError, ZeroDivisionError) as exc:
        raise MeasurementError(source, 0, f"expected a per-thread run's summary and meta ({exc!r})") from None
    if rate <= 0 or connections < 1 or min(us.values()) <= 0 or min(stretch.values()) <= 0:
        raise MeasurementError(source, 0, "expected sends, producers, CPU and runnable time above 0")
    return ThreadRun(name, rate, connections, us, stretch)


def leg_cost_us(
    wakeup_us: float, request_us: float, pieces: int, lam_per_us: np.ndarray, stretch: np.ndarray
) -> np.ndarray:
    """The CPU a send costs a leg (module docstring) with requests reaching one of its threads at
    ``lam_per_us`` (pieces a microsecond) and the thread runnable ``stretch`` times its CPU time."""
    room = np.maximum(1.0 - lam_per_us * stretch * request_us, 1e-12)
    per_wakeup = (1.0 + lam_per_us * stretch * wakeup_us) / room
    return pieces * (request_us + wakeup_us / per_wakeup)


def fit_leg(leg: Leg, runs: Sequence[ThreadRun]) -> LegFit:
    """``leg``'s two constants fitted to ``runs`` (module docstring)."""
    lam = np.array([leg.pieces * r.rate / r.connections / 1e6 for r in runs])
    stretch = np.array([r.stretch[leg.group] for r in runs])
    measured = np.array([r.us_per_send[leg.group] for r in runs])

    def residuals(p: np.ndarray) -> np.ndarray:
        return np.log(leg_cost_us(p[1], p[0], leg.pieces, lam, stretch) / measured)

    start = np.array([float(measured.min()) / (2 * leg.pieces), float(measured.max()) / leg.pieces])
    out = least_squares(residuals, start, bounds=([0.0, 0.0], [np.inf, np.inf]))
    request, wakeup = (float(v) for v in out.x)
    fitted = leg_cost_us(wakeup, request, leg.pieces, lam, stretch)
    return LegFit(
        leg,
        wakeup,
        request,
        tuple(r.name for r in runs),
        tuple(float(v) for v in measured),
        tuple(float(v) for v in fitted),
    )


def fit_legs(runs: Sequence[ThreadRun]) -> tuple[LegFit, ...]:
    """Every leg of :data:`LEGS` fitted to ``runs``."""
    return tuple(fit_leg(leg, runs) for leg in LEGS)
