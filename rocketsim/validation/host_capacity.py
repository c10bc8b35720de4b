"""The CPU a send calibrated to what the model's host delivers: the saturated run's top rate simulated, and
the CPU values scaled until the simulated host completes what the measured one did. The validation runs it
with ``--fit-host-capacity`` only, on the work-conserving fair host (``FIT_HOST_SCHEDULER``).

More: docs/reference/modules.md, rocketsim/validation/host_capacity.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from rocketsim.engine import simulate
from rocketsim.scenario import Scenario
from rocketsim.scenario.workload import generate
from rocketsim.validation.calibrate import CPU_KEYS, saturation
from rocketsim.validation.classes import SEND_OK
from rocketsim.validation.compare import due_latency_ms, result_classes
from rocketsim.validation.hosts import FIT_HOST_SCHEDULER, FIT_ROUNDS
from rocketsim.validation.measured import MeasuredRun
from rocketsim.validation.scenario import run_scenario

LEAD_S = 1.0  # the cut's first seconds, at the run's first rate (the host and the heap warmed up)
TOP_S = 3.0  # the cut's seconds at the run's last rate: the completions counted
TOLERANCE = 0.01  # done once the delivered rate is within 1% of the measured one

OTHER_CPU_KEY = "producers.host_other_cpu_us"  # --thread-split: the other threads' CPU a send


@dataclass(frozen=True)
class CapacityRound:
    """One simulation: the CPU values times ``scale`` completed ``delivered_per_s`` OK sends a second."""

    scale: float
    delivered_per_s: float


@dataclass(frozen=True)
class CapacityFit:
    """The scale found for the CPU values, the rounds that found it and the rate they aimed at."""

    scale: float
    target_per_s: float
    rounds: tuple[CapacityRound, ...]


def cut_run(run: MeasuredRun) -> MeasuredRun:
    """``run`` cut to :data:`LEAD_S` at its first rate, then :data:`TOP_S` at its last."""
    steps = ((run.meta.steps[0][0], LEAD_S), (run.meta.steps[-1][0], TOP_S))
    n = int(sum(rate * secs for rate, secs in steps))
    return replace(run, meta=replace(run.meta, steps=steps, n=n))


def cut_scenario(run: MeasuredRun, values: dict[str, float], seed: int) -> Scenario:
    """The scenario of ``run``'s cut (:func:`cut_run`) with ``values``, on the host ``FIT_HOST_SCHEDULER``."""
    return run_scenario(cut_run(run), values, seed=seed, host_scheduler=FIT_HOST_SCHEDULER)


def delivered_rate(run: MeasuredRun, values: dict[str, float], seed: int) -> float:
    """The OK sends a second that ``run``'s cut (:func:`cut_scenario`), simulated with ``values``, completes
    within its top-rate seconds (each send's end: its due time and its latency from it)."""
    sc = cut_scenario(run, values, seed)
    messages = generate(sc)
    results = simulate(messages, sc).results
    ok = result_classes(results) == SEND_OK
    end_s = (np.asarray(results["born_ts_ms"], np.float64) + due_latency_ms(results)) / 1000.0
    within = ok & (end_s >= LEAD_S) & (end_s < LEAD_S + TOP_S)
    return float(within.sum()) / TOP_S


def scaled(values: dict[str, float], scale: float) -> dict[str, float]:
    """``values`` with the CPU a send (:data:`CPU_KEYS`, and the other threads' part of it where
    ``--thread-split`` set one) times ``scale``."""
    keys = (*CPU_KEYS, OTHER_CPU_KEY)
    return {k: v * scale if k in keys else v for k, v in values.items()}


def fit_scale(delivered: Callable[[float], float], target: float) -> CapacityFit:
    """The scale of the CPU values at which ``delivered(scale)`` is ``target``: the host's time a send is
    taken as linear in the scale (so ``1 / delivered`` is), a first step by the ratio, then the secant of
    ``1 / delivered`` through the last two rounds; at most ``FIT_ROUNDS``, done within :data:`TOLERANCE`."""
    rounds: list[CapacityRound] = []
    scale = 1.0
    for _ in range(FIT_ROUNDS):
        rounds.append(CapacityRound(scale, delivered(scale)))
        last = rounds[-1]
        if abs(last.delivered_per_s / target - 1.0) <= TOLERANCE:
            break
        if len(rounds) == 1:
            scale = last.scale * last.delivered_per_s / target
            continue
        prev = rounds[-2]
        slope = (1.0 / last.delivered_per_s - 1.0 / prev.delivered_per_s) / (last.scale - prev.scale)
        ratio_step = last.scale * last.delivered_per_s / target
        if slope <= 0.0:  # no change, or the wrong way (a whole-us step): the ratio's step
            scale = ratio_step
        else:
            scale = last.scale + (1.0 / target - 1.0 / last.delivered_per_s) / slope
    best = min(rounds, key=lambda r: abs(r.delivered_per_s / target - 1.0))
    return CapacityFit(best.scale, target, tuple(rounds))


def capacity_fit(runs: Sequence[MeasuredRun], values: dict[str, float], seed: int) -> CapacityFit | None:
    """The scale of the CPU values of ``values`` at which the saturated run among ``runs``, its top rate
    simulated (:func:`delivered_rate`), completes its measured saturation rate (None without such a run
    or without the CPU values)."""
    saturated = [(r, sat) for r in runs if (sat := saturation(r)) is not None]
    if not saturated or not all(k in values for k in CPU_KEYS):
        return None
    run, sat = saturated[0]
    return fit_scale(lambda s: delivered_rate(run, scaled(values, s), seed), sat.msgs_per_s)
