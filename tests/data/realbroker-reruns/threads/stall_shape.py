"""The calibration's own latency by load: the fluid queue with the fitted stalls
(``rocketsim.calibration.stalls``, as ``python -m rocketsim.validation`` fits them to ``b_ramp_async_p1``)
per step of the ramp beside the measured p50 / p90 / p99 (the medians over each step's seconds), and at
``b_steady_async_p2_60000``'s load. docs/validation.md, "`b_steady`'s latency below the host's capacity".
Run from the project's root: python tests/data/realbroker-reruns/threads/stall_shape.py (a few seconds)."""

import numpy as np

from rocketsim.calibration.stalls import DRAWS, SEED, StepLatency, fit_stalls, step_quantiles
from rocketsim.validation.calibrate import saturation, step_latencies
from rocketsim.warehouse.measured_runs import read_run

RUNS = "tests/data/realbroker/"
BASE_MS = 0.241  # the calibrated latency at no load (brokers.default.latency.median_ms), as the command adds


def main() -> None:
    ramp = read_run(RUNS + "b_ramp_async_p1")
    sat = saturation(ramp)
    assert sat is not None
    steps = step_latencies(ramp, sat.msgs_per_s)
    fit = fit_stalls(steps, BASE_MS)
    print(f"saturation {sat.msgs_per_s:,.0f}/s; stalls {fit.share:.3f} of the host, {fit.mean_ms:.1f} ms")
    rng = np.random.default_rng(SEED)
    draws = (rng.exponential(size=DRAWS), rng.exponential(size=DRAWS))
    steady = read_run(RUNS + "b_steady_async_p2_60000")
    rate = steady.meta.steps[-1][0]
    quantiles = ("ok_latency_p50_ms", "ok_latency_p90_ms", "ok_latency_p99_ms")
    rows = steady.per_second[steady.per_second["second"] >= steady.meta.steps[0][1]]
    measured = tuple(float(np.median(rows[c])) for c in quantiles)
    steady_step = StepLatency(rate / sat.msgs_per_s, steady.meta.steps[-1][1], measured)  # type: ignore[arg-type]
    print("run, rate     load  measured p50 / p90 / p99 ms   the fit's fluid queue")
    for name, group in (("ramp", steps), ("b_steady", [steady_step])):
        fitted = step_quantiles(group, fit.share, fit.mean_ms, draws) + BASE_MS
        for s, q in zip(group, fitted, strict=True):
            m = " / ".join(f"{x:5.1f}" for x in s.quantiles_ms)
            f = " / ".join(f"{x:5.1f}" for x in q)
            print(f"{name:8s} {s.load * sat.msgs_per_s:6,.0f} {s.load:5.2f}  {m:26s}  {f}")


if __name__ == "__main__":
    main()
