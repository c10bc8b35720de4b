"""``rocketsim validate`` (and ``python -m rocketsim.validation``): the model against runs of the real-broker
harness. Needs no Spark.

Each RUN_DIR is a run folder (meta.json, outcomes.csv, summary.json, per_second.csv, ...) or a folder of
them. The runs named by --calibrate-from calibrate the model; every other run (with
--include-calibration-runs, those too) is then simulated on its exact schedule and reported beside its
measurement (docs/validation.md). The host is the fair one with the CPU a send from the ramp's CPU figures;
--fit-host-capacity scales that CPU until the model's work-conserving fair host completes the saturated
calibration run's rate (rocketsim.validation.host_capacity) and simulates on that host; --thread-split runs
each send's CPU on the threads the harness's per-thread run measured (rocketsim.calibration.thread_split).

The command line, its help and ``main`` are :mod:`rocketsim.command.validate_options`'s, which imports
this module only once it parsed one (the engine and the report's charts take seconds to import).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from rocketsim.calibration.thread_split import split_values
from rocketsim.engine import simulate
from rocketsim.errors import RocketSimError
from rocketsim.present.validation_report import write_report
from rocketsim.scenario.workload import generate
from rocketsim.validation.calibrate import validation_values
from rocketsim.validation.compare import RunComparison, measured_metrics, simulated_metrics
from rocketsim.validation.host_capacity import CapacityFit, capacity_fit, scaled
from rocketsim.validation.hosts import FIT_HOST_SCHEDULER, HOST_SCHEDULER
from rocketsim.validation.measured import MeasuredRun
from rocketsim.validation.scenario import request_bytes, run_scenario
from rocketsim.warehouse.calibration_inputs import write_text
from rocketsim.warehouse.measured_runs import read_run, run_folders
from rocketsim.warehouse.thread_runs import read_thread_split


def simulate_run(
    run: MeasuredRun,
    values: dict[str, float],
    seed: int,
    calibration: bool,
    host_scheduler: str = HOST_SCHEDULER,
) -> RunComparison:
    """Simulate ``run``'s schedule with the calibrated ``values`` on the host ``host_scheduler`` says and
    compare it with its measurement."""
    sc = run_scenario(run, values, seed=seed, host_scheduler=host_scheduler)
    messages = generate(sc)
    out = simulate(messages, sc)
    simulated = simulated_metrics(messages, out.attempts, out.results, run.meta.counted_at_ms)
    notes = () if run.stored.copies is not None else (f"stored copies not measured: {run.stored.note}",)
    return RunComparison(run.name, measured_metrics(run), simulated, calibration, notes)


def _print_capacity(fit: CapacityFit) -> None:
    rounds = ", ".join(f"x{r.scale:.4g}: {r.delivered_per_s:,.0f}/s" for r in fit.rounds)
    print(
        f"capacity: the CPU a send x{fit.scale:.4g}, the simulated saturated step completing "
        f"{fit.target_per_s:,.0f}/s as measured (rounds: {rounds})"
    )


def _ms(value: float) -> str:
    """A latency as the README's table shows it: three significant digits, thousands written out."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _line(c: RunComparison) -> str:
    m, s = c.measured, c.simulated
    return (
        f"{c.name}{' (calibration)' if c.calibration else ''}: OK {m.ok_share:.1%} / {s.ok_share:.1%}, "
        f"p50 {_ms(m.ok_latency_ms['p50'])} / {_ms(s.ok_latency_ms['p50'])} ms, "
        f"p99 {_ms(m.ok_latency_ms['p99'])} / {_ms(s.ok_latency_ms['p99'])} ms"
    )


def run(args: argparse.Namespace, prog: str) -> int:
    """The validation (module docstring) of the parsed command line; its exit code (2: bad input, one
    line)."""
    try:
        runs = [read_run(p) for p in run_folders(args.runs)]
        names = {r.name for r in runs}
        unknown = [n for n in args.calibrate_from if n not in names]
        if unknown:
            raise RocketSimError(
                f"--calibrate-from {unknown[0]}: no such run among {', '.join(sorted(names))}"
            )
        chosen = [r for r in runs if r.name in args.calibrate_from]
        values = validation_values(chosen, getattr(args, "fit_stall_shape", False))
    except (RocketSimError, ValueError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    host_scheduler = FIT_HOST_SCHEDULER if args.fit_host_capacity else HOST_SCHEDULER
    fit = None
    if values.get("producers.send_cpu_us", 0) > 0:  # the host's cores are the model's
        if args.thread_split:
            split = read_thread_split()
            values = split_values(values, split, request_bytes(chosen[0]), not args.fit_host_capacity)
        fit = capacity_fit(chosen, values, args.seed) if args.fit_host_capacity else None
        if fit is not None:
            _print_capacity(fit)
            values = scaled(values, fit.scale)
    if args.fit_host_capacity and fit is None:
        print(
            "capacity: no saturated calibration run with the host's CPU figures: the CPU a send as calibrated"
        )
    print(f"host: producers.host_scheduler = {host_scheduler}")
    for key, value in values.items():
        print(f"calibrated {key} = {_value(value)}")
    comparisons = []
    for run in runs:
        if run.name in args.calibrate_from and not args.include_calibration_runs:
            continue
        t0 = time.monotonic()
        c = simulate_run(run, values, args.seed, run.name in args.calibrate_from, host_scheduler)
        comparisons.append(c)
        print(f"{_line(c)}  [{run.meta.n:,} sends, {time.monotonic() - t0:.0f} s]  (measured / simulated)")
    if args.json:
        doc = {c.name: {**c.to_json(), "calibration": c.calibration} for c in comparisons}
        print(f"json: {write_text(args.json, json.dumps(doc, indent=2) + chr(10)).resolve()}")
    if args.report:
        header = [
            f"Calibrated from {', '.join(args.calibrate_from)}: "
            + ", ".join(f"{k} = {_value(v)}" for k, v in values.items())
        ]
        print(f"report: {write_report(comparisons, args.report, header).resolve()}")
    return 0


def _value(value: float | str) -> str:
    """A calibrated value as the command prints it (a number to 6 digits; a choice, ``heap_stops``, as is)."""
    return value if isinstance(value, str) else f"{value:.6g}"
