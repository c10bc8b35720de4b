"""The CPU a send calibrated to the model host's delivered capacity (rocketsim.validation.host_capacity):
the rounds' search for the scale, and the cut of the saturated run they simulate."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketsim.validation.calibrate import CPU_KEYS
from rocketsim.validation.host_capacity import (
    LEAD_S,
    TOLERANCE,
    TOP_S,
    cut_run,
    cut_scenario,
    fit_scale,
    scaled,
)
from rocketsim.validation.hosts import FIT_ROUNDS
from rocketsim.warehouse.measured_runs import read_run

DATA = Path(__file__).parent / "data" / "realbroker"


def host(cpu_us: float, stall_us: float, delivers: float, offered: float):
    """A host of 2 cores that delivers ``delivers`` of them outside its stalls (``stall_us`` of the wall
    clock a send): its completions a second at a CPU a send of ``cpu_us`` x scale, at most ``offered``."""
    return lambda scale: min(offered, 2e6 * delivers / (cpu_us * scale + 2 * delivers * stall_us))


@pytest.mark.parametrize(("delivers", "stall_us"), [(0.88, 3.6), (1.0, 3.6), (0.7, 8.0), (0.75, 0.0)])
def test_the_rounds_find_the_scale_at_which_the_host_delivers_the_measured_rate(
    delivers: float, stall_us: float
) -> None:
    delivered = host(22.0, stall_us, delivers, offered=70_000.0)
    fit = fit_scale(delivered, 68_787.0)
    assert len(fit.rounds) <= FIT_ROUNDS and fit.rounds[0].scale == 1.0
    assert delivered(fit.scale) == pytest.approx(68_787.0, rel=TOLERANCE)
    assert fit_scale(delivered, 68_787.0) == fit  # deterministic


def test_a_host_already_at_the_measured_rate_takes_one_round() -> None:
    fit = fit_scale(lambda s: 68_787.0 * (1 + 0.005 * (s - 1)), 68_787.0)
    assert fit.scale == 1.0 and len(fit.rounds) == 1


def test_rounds_that_stop_moving_keep_the_best_scale() -> None:
    # a whole-us step: the first correction changes nothing, the ratio's step is taken again
    steps = {1.0: 60_000.0}
    fit = fit_scale(lambda s: steps.get(s, 60_000.0 if s > 0.8 else 69_000.0), 68_787.0)
    assert fit.rounds[-1].delivered_per_s == pytest.approx(69_000.0)
    assert fit.scale < 0.8 and len(fit.rounds) <= FIT_ROUNDS


def test_the_cut_is_the_runs_first_rate_then_its_top_rate() -> None:
    run = read_run(DATA / "b_ramp_async_p1")
    cut = cut_run(run)
    assert cut.meta.steps == ((10_000.0, LEAD_S), (70_000.0, TOP_S))
    assert cut.meta.n == 10_000 * LEAD_S + 70_000 * TOP_S
    values = {"producers.send_cpu_us": 10.0, "brokers.default.store.io_us": 4.0, "x": 3.0}
    values["brokers.default.store.append_us"] = 2.0
    out = scaled(values, 0.5)
    assert {k: out[k] for k in CPU_KEYS} == {k: values[k] / 2 for k in CPU_KEYS} and out["x"] == 3.0
    # the rounds run on the work-conserving fair host (the validation's default host is the fair one)
    sc = cut_scenario(run, {}, seed=1)
    assert sc.producers.host_scheduler == "fair_conserving" and sc.workload.messages == cut.meta.n
