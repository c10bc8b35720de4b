"""The calibration's own latency by load: the fluid queue with the fitted stalls
(``rocketsim.calibration.stalls``, as ``python -m rocketsim.validation`` fits them to ``b_ramp_async_p1``)
per step of the ramp beside the measured p50 / p90 / p99 (the medians over each step's seconds), and at
``b_steady_async_p2_60000``'s load: the default fit (exponential lengths, the quantiles of each step
whole) and ``--fit-stall-shape``'s (gamma lengths, the median of each second's quantiles, as measured).
docs/validation.md, "`b_steady`'s latency below the host's capacity". Run from the project's root:
python tests/data/realbroker-reruns/threads/stall_shape.py (about a minute)."""

import numpy as np

from rocketsim.calibration.stalls import (
    DRAWS,
    SEED,
    ShapeDraws,
    StepLatency,
    fit_stall_shape,
    fit_stalls,
    shape_quantiles,
    step_quantiles,
)
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
    shaped = fit_stall_shape(steps, BASE_MS)
    print(
        f"saturation {sat.msgs_per_s:,.0f}/s; default: stalls {fit.share:.3f} of the host, "
        f"{fit.mean_ms:.2f} ms"
    )
    print(
        f"--fit-stall-shape: stalls {shaped.share:.3f} of the host, {shaped.mean_ms:.2f} ms, shape "
        f"{shaped.shape:.2f}, one every {shaped.every(sat.msgs_per_s):,.0f} sends (loss {shaped.loss:.2f})"
    )
    rng = np.random.default_rng(SEED)
    draws = (rng.exponential(size=DRAWS), rng.exponential(size=DRAWS))
    shape_draws = ShapeDraws.drawn()
    steady = read_run(RUNS + "b_steady_async_p2_60000")
    rate = steady.meta.steps[-1][0]
    quantiles = ("ok_latency_p50_ms", "ok_latency_p90_ms", "ok_latency_p99_ms")
    rows = steady.per_second[steady.per_second["second"] >= steady.meta.steps[0][1]]
    measured = tuple(float(np.median(rows[c])) for c in quantiles)
    steady_step = StepLatency(rate / sat.msgs_per_s, steady.meta.steps[-1][1], measured)  # type: ignore[arg-type]
    print(
        "run, rate     load  measured p50 / p90 / p99 ms   the default fit's fluid queue   "
        "--fit-stall-shape's"
    )
    for name, group in (("ramp", steps), ("b_steady", [steady_step])):
        fitted = step_quantiles(group, fit.share, fit.mean_ms, draws) + BASE_MS
        fitted_shape = (
            shape_quantiles(group, shaped.share, shaped.mean_ms, shaped.shape, shape_draws) + BASE_MS
        )
        for s, q, r in zip(group, fitted, fitted_shape, strict=True):
            m, f, g = (" / ".join(f"{x:5.1f}" for x in v) for v in (s.quantiles_ms, q, r))
            print(f"{name:8s} {s.load * sat.msgs_per_s:6,.0f} {s.load:5.2f}  {m:26s}  {f:30s}  {g}")


if __name__ == "__main__":
    main()
