"""Calibration from measured runs: what :mod:`rocketsim.calibration` reads out of the harness's files.

From the runs named to calibrate from:

* the network round trip (``brokers.default.latency.*``): the OK sends' latency histogram of the run
  with the lowest peak rate (at low load a send's latency is the round trip and the CPU the two sides
  spend on it; the queueing of higher rates is the model's own);
* the host's capacity (``store.append_us`` and the client's CPU per send, see docs/validation.md): the
  completion rate of the last step of a run whose latency kept growing through that step (a saturation
  figure), split between the client and the broker by the CPU each used (``cpu.json``);
* the broker's store times and send queue (``store.log``, report only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from rocketsim.calibration.calibrate import Calibration, Options, calibrate
from rocketsim.calibration.measurements import Binned, CpuUse, Measurements, Throughput, View
from rocketsim.validation.measured import MeasuredRun

GROWTH = 1.5  # a step is saturated when its OK latency p50 ends at least this many times where it began


def latency_measurements(runs: Sequence[MeasuredRun]) -> Measurements:
    """The OK latency histogram of the run with the lowest peak rate (client view)."""
    with_hist = [r for r in runs if r.ok_hist is not None]
    if not with_hist:
        return Measurements()
    run = min(with_hist, key=lambda r: max(rate for rate, _ in r.meta.steps))
    edges, counts = run.ok_hist  # type: ignore[misc]
    note = f"OK sends of {run.name} (peak {max(rate for rate, _ in run.meta.steps):,.0f} msg/s)"
    return Measurements(
        binned=(Binned(run.name, View.CLIENT, tuple(edges[:-1]), tuple(edges[1:]), tuple(counts), note=note),)
    )


def saturation(run: MeasuredRun) -> Throughput | None:
    """The OK completions per second within ``run``'s last step if its latency kept growing through it
    (saturated: the step's last second's OK p50 at least :data:`GROWTH` times its first's)."""
    if not run.step_completions:
        return None
    frame = run.per_second
    start = sum(s for _, s in run.meta.steps[:-1])
    p50 = frame[frame["second"] >= int(start)]["ok_latency_p50_ms"].to_numpy(float)
    if p50.size < 2 or not np.isfinite(p50[[0, -1]]).all() or p50[-1] < GROWTH * p50[0]:
        return None
    rate = run.step_completions[-1]
    note = (
        f"{run.name}: last step ({run.meta.steps[-1][0]:,.0f} msg/s) completed {rate:,.0f}/s, "
        f"OK p50 {p50[0]:.3g} -> {p50[-1]:.3g} ms"
    )
    return Throughput(run.name, rate, saturated=True, note=note)


def cpu_use(run: MeasuredRun) -> CpuUse | None:
    """The driver's and the broker's CPU seconds of ``run`` (``cpu.json``) on the host they shared."""
    cpu = run.cpu
    if "broker_cpu_s" not in cpu or "driver_cpu_s_in_window" not in cpu:
        return None
    nproc = int(cpu["nproc"]) if cpu.get("nproc") else None
    return CpuUse(run.name, cpu["driver_cpu_s_in_window"], cpu["broker_cpu_s"], nproc, note="cpu.json")


def measurements(runs: Sequence[MeasuredRun], request_bytes: float | None = None) -> Measurements:
    """Everything the calibration runs give: the low-load latency, and for a saturated run its completion
    rate (at ``request_bytes`` a send) and the CPU its client and broker spent."""
    out = latency_measurements(runs)
    for run in runs:
        sat = saturation(run)
        cpu = cpu_use(run) if sat is not None else None
        if sat is not None:
            out += Measurements(throughputs=(replace(sat, request_bytes=request_bytes),))
        if cpu is not None:
            out += Measurements(cpu=(cpu,))
    return out


def calibrate_runs(runs: Sequence[MeasuredRun], request_bytes: float | None = None) -> Calibration:
    """:func:`rocketsim.calibration.calibrate.calibrate` over :func:`measurements`."""
    return calibrate(measurements(runs, request_bytes), Options())
