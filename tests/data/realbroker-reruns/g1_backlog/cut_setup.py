"""What the cut scripts of tests/data/realbroker-reruns share (``g1_backlog/cut_gcload.py``,
``cut_c_overload.py``, ``threads/cut_waits.py``, ``cut_execq.py`` and those that run through them): their
command line (STEPS, ``--run=NAME``, ``--set=KEY=VALUE``, ``--fit-stall-shape``, ``--no-split``, each
script reading those it takes), the values ``python -m rocketsim.validation`` calibrates from a_low_async
and b_ramp_async_p1 (with ``--thread-split``'s over them, ``split_values``), a measured run cut to the
steps, and its simulation. The scripts import it from beside them (``sys.path``), as they import each
other."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa

from rocketsim.calibration.thread_split import split_values
from rocketsim.engine import SimOutput, simulate
from rocketsim.scenario.overrides import parse_override
from rocketsim.scenario.workload import generate
from rocketsim.validation.calibrate import validation_values
from rocketsim.validation.measured import MeasuredRun
from rocketsim.validation.scenario import request_bytes, run_scenario
from rocketsim.warehouse.measured_runs import read_run
from rocketsim.warehouse.thread_runs import read_thread_split

RUNS = "tests/data/realbroker/"
CALIBRATED_FROM = ("a_low_async", "b_ramp_async_p1")  # the runs the validation command calibrates from
FIT_STALL_SHAPE = "--fit-stall-shape"  # the command's option: the stalls' lengths with their shape
NO_SPLIT = "--no-split"  # the validation scenario without --thread-split's values

Steps = tuple[tuple[int, float], ...]


def steps(argv: Sequence[str], default: str) -> Steps:
    """The cut's schedule: ``RATE:SECONDS,...``, the first of ``argv`` not an option, else ``default``."""
    args = positional(argv)
    return tuple(
        (int(r), float(s)) for r, s in (x.split(":") for x in (args[0] if args else default).split(","))
    )


def positional(argv: Sequence[str]) -> list[str]:
    """The arguments of ``argv`` that are not options (``--...``)."""
    return [a for a in argv if not a.startswith("--")]


def run_name(argv: Sequence[str], default: str) -> str:
    """The measured run ``--run=NAME`` names, else ``default``."""
    return next((a[len("--run=") :] for a in argv if a.startswith("--run=")), default)


def overrides(argv: Sequence[str]) -> list[tuple[str, object]]:
    """The ``--set=KEY=VALUE`` of ``argv`` as the scenario's ``--set`` reads them (a TOML value, else a
    string); a bad one refused before anything runs."""
    return [parse_override(a[len("--set=") :]) for a in argv if a.startswith("--set=")]


def read(name: str) -> MeasuredRun:
    """The measured run ``name`` of tests/data/realbroker."""
    return read_run(RUNS + name)


def calibrated(
    sets: Sequence[tuple[str, object]], *, fit_stall_shape: bool = False, split: bool = False
) -> dict[str, Any]:
    """The values the validation command simulates with (``fit_stall_shape``, ``split``: its
    ``--fit-stall-shape``, ``--thread-split``) and ``sets`` over them, each printed."""
    chosen = [read(name) for name in CALIBRATED_FROM]
    values: dict[str, Any] = validation_values(chosen, fit_stall_shape)
    if split:
        values = split_values(values, read_thread_split(), request_bytes(chosen[0]))
    for key, value in sets:
        values[key] = value
        print(f"set {key} = {value}")
    return values


def cut(run: MeasuredRun, steps: Steps) -> MeasuredRun:
    """``run`` with the schedule ``steps`` (its messages those steps send) in place of its own."""
    return replace(run, meta=replace(run.meta, steps=steps, n=int(sum(rate * secs for rate, secs in steps))))


def simulated(run: MeasuredRun, values: dict[str, Any]) -> tuple[pa.Table, SimOutput]:
    """``run`` simulated as the validation simulates it with ``values`` (seed 1): its messages and the
    engine's output."""
    sc = run_scenario(run, values, seed=1)
    messages = generate(sc)
    return messages, simulate(messages, sc)
