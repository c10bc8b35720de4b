"""Calibration from measured runs: what :mod:`rocketsim.calibration` reads out of the harness's files.

More: docs/reference/modules.md, rocketsim/validation/calibrate.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from rocketsim.calibration.calibrate import (
    DEFAULT_REQUEST_BYTES,
    KIB,
    Calibration,
    Options,
    calibrate,
    host_part,
)
from rocketsim.calibration.measurements import Binned, CpuUse, Measurements, Throughput, View
from rocketsim.calibration.stalls import StallShapeFit, StepLatency, fit_stall_shape, fit_stalls
from rocketsim.client.heap import KIB_PER_MB, YOUNG_MAX_SHARE
from rocketsim.scenario.config import FULL_GC_PER_COPIED_KIB
from rocketsim.validation.measured import MeasuredRun
from rocketsim.validation.scenario import DRIVER_HEAP_MB, pending_kib, request_bytes

# MaxGCPauseMillis's default, ms: the harness's driver JVM sets none (run_load.sh: -Xms1g -Xmx1g -XX:+UseG1GC)
G1_PAUSE_GOAL_MS = 200.0
GROWTH = 1.5  # a step is saturated when its OK latency p50 ends at least this many times where it began


def latency_measurements(runs: Sequence[MeasuredRun], less_us: float = 0.0) -> Measurements:
    """The OK latency histogram of the run with the lowest peak rate (client view), ``less_us`` taken
    off every edge (what the model adds to the round trip itself)."""
    with_hist = [r for r in runs if r.ok_hist is not None]
    if not with_hist:
        return Measurements()
    run = min(with_hist, key=lambda r: max(rate for rate, _ in r.meta.steps))
    edges, counts = run.ok_hist  # type: ignore[misc]
    edges = np.maximum(edges - less_us / 1000.0, 0.0)
    k = int(np.argmax(edges[1:] > 0))  # the first bin whose upper edge the shift left above 0
    counts = np.concatenate([[counts[: k + 1].sum()], counts[k + 1 :]])  # the bins folded onto 0 in it
    edges = np.concatenate([[0.0], edges[k + 1 :]])
    note = f"OK sends of {run.name} (peak {max(rate for rate, _ in run.meta.steps):,.0f} msg/s)"
    if less_us:
        note += f", less the model's own CPU per send ({less_us:.3g} us)"
    return Measurements(
        binned=(Binned(run.name, View.CLIENT, tuple(edges[:-1]), tuple(edges[1:]), tuple(counts), note=note),)
    )


def saturation(run: MeasuredRun) -> Throughput | None:
    """The ramp's peak goodput, :func:`peak_step`'s OK completions per second; None when no step
    saturated."""
    k = peak_step(run)
    if k is None:
        return None
    done = run.step_completions[k]
    note = (
        f"{run.name}: step {k + 1} of {len(run.meta.steps)} ({run.meta.steps[k][0]:,.0f} msg/s) completed "
        f"{done:,.0f}/s, the most of the steps up to the last whose OK p50 grew {GROWTH:g}x"
    )
    return Throughput(run.name, done, saturated=True, note=note)


def peak_step(run: MeasuredRun) -> int | None:
    """The step of ``run`` with the most OK completions per second among those up to the last whose latency
    kept growing through it (saturated: the step's last second's OK p50 at least :data:`GROWTH` times its
    first's); None when no step saturated. Not the last step alone: a ramp taken past its knee collapses
    (its later steps complete fewer, the last often none), and a short step at the knee may end before
    its latency has grown that much."""
    saturated, start = -1, 0.0
    for k, (_, secs) in enumerate(run.meta.steps):
        p50 = _step_p50(run.per_second, start, start + secs)
        start += secs
        if p50.size >= 2 and np.isfinite(p50[[0, -1]]).all() and p50[-1] >= GROWTH * p50[0]:
            saturated = k
    done = [d if d > 0 else 0.0 for d in run.step_completions[: saturated + 1]]
    if not done or max(done) <= 0:
        return None
    return int(np.argmax(done))


def _step_p50(frame: pd.DataFrame, start: float, end: float) -> np.ndarray:
    """The per-second OK p50 of the seconds in [start, end) of the schedule."""
    return _step_rows(frame, start, end)["ok_latency_p50_ms"].to_numpy(float)


def _step_rows(frame: pd.DataFrame, start: float, end: float) -> pd.DataFrame:
    """The per-second rows of the seconds in [start, end) of the schedule."""
    return frame[(frame["second"] >= start) & (frame["second"] < end)]


def cpu_use(run: MeasuredRun) -> CpuUse | None:
    """The driver's and the broker's CPU seconds of ``run`` (``cpu.json``) on the host they shared."""
    cpu = run.cpu
    if "broker_cpu_s" not in cpu or "driver_cpu_s_in_window" not in cpu:
        return None
    nproc = int(cpu["nproc"]) if cpu.get("nproc") else None
    return CpuUse(run.name, cpu["driver_cpu_s_in_window"], cpu["broker_cpu_s"], nproc, note="cpu.json")


def measurements(runs: Sequence[MeasuredRun], request_bytes: float | None = None) -> Measurements:
    """Everything the calibration runs give: for a saturated run its completion rate (at
    ``request_bytes`` a send) and the CPU its client and broker spent, and the low-load latency less the
    CPU a send costs both at that rate (:func:`rocketsim.calibration.calibrate.host_part`)."""
    out = Measurements()
    for run in runs:
        sat = saturation(run)
        cpu = cpu_use(run) if sat is not None else None
        if sat is not None:
            out += Measurements(throughputs=(replace(sat, request_bytes=request_bytes),))
        if cpu is not None:
            out += Measurements(cpu=(cpu,))
    return out + latency_measurements(runs, cpu_per_send_us(out, request_bytes))


def cpu_per_send_us(ms: Measurements, request_bytes: float | None) -> float:
    """The CPU the host part puts on one send (the client's, the broker's read and append), 0 without it."""
    values = {e.key: e.value for e in host_part(ms, Options()).estimates}
    if not values:
        return 0.0
    append = values["brokers.default.store.append_us"] * (request_bytes or DEFAULT_REQUEST_BYTES) / KIB
    return values["producers.send_cpu_us"] + values["brokers.default.store.io_us"] + append


def calibrate_runs(runs: Sequence[MeasuredRun], request_bytes: float | None = None) -> Calibration:
    """:func:`rocketsim.calibration.calibrate.calibrate` over :func:`measurements`."""
    return calibrate(measurements(runs, request_bytes), Options())


def heap_values(runs: Sequence[MeasuredRun], heap_mb: float, pending_kib: float) -> dict[str, float]:
    """``producers.heap_*`` of a client JVM of ``heap_mb`` whose pending sends hold ``pending_kib`` each,
    from the young collections of ``runs`` (empty without two runs that recorded them):

    * ``heap_pause_us``: the lowest-rate run's collection time per collection (it had nothing to copy);
    * ``heap_alloc_kib``: the young generation at its largest (G1MaxNewSizePercent of the heap) over the
      sends between two collections of the run with the most sends;
    * ``heap_copy_us_per_kib``: that run's collection time beyond the fixed pauses, over the KiB its
      collections copied: per second, its collections (sends / sends per collection) times its pending
      sends (rate x OK latency p50, Little's law) times ``pending_kib``;
    * ``heap_full_us_per_kib``: that copy cost times a full collection's cost per live KiB over a young
      one's per copied KiB, as measured of G1 (``FULL_GC_PER_COPIED_KIB``): the runs had no full one;
    * ``heap_pause_goal_ms``: G1's default pause-time goal (``G1_PAUSE_GOAL_MS``), so the young
      generation is sized as the driver's G1 sized it (its ``-XX:+UseG1GC`` sets no goal)."""
    gc_runs = [r for r in runs if r.meta.young_gc is not None and r.meta.young_gc[0] > 0]
    if len(gc_runs) < 2:
        return {}
    low = min(gc_runs, key=lambda r: max(rate for rate, _ in r.meta.steps))
    big = max(gc_runs, key=lambda r: r.meta.n)
    count, ms = low.meta.young_gc  # type: ignore[misc]
    pause_us = ms * 1000.0 / count
    count, ms = big.meta.young_gc  # type: ignore[misc]
    per_collection = (big.meta.n + big.meta.warmup_ok) / count
    frame = big.per_second
    rate = frame["scheduled"].to_numpy(float)
    pending = rate * np.nan_to_num(frame["ok_latency_p50_ms"].to_numpy(float)) / 1000.0
    copied_kib = float((rate / per_collection * pending).sum()) * pending_kib
    copy = max(0.0, ms * 1000.0 - count * pause_us) / copied_kib if copied_kib > 0 else 0.0
    return {
        "producers.heap_mb": heap_mb,
        "producers.heap_pending_kib": pending_kib,
        "producers.heap_pause_us": pause_us,
        "producers.heap_alloc_kib": YOUNG_MAX_SHARE * heap_mb * KIB_PER_MB / per_collection,
        "producers.heap_copy_us_per_kib": copy,
        "producers.heap_full_us_per_kib": copy * FULL_GC_PER_COPIED_KIB,
        "producers.heap_pause_goal_ms": G1_PAUSE_GOAL_MS,
    }


CPU_KEYS = ("producers.send_cpu_us", "brokers.default.store.io_us", "brokers.default.store.append_us")
STEP_QUANTILES = ("ok_latency_p50_ms", "ok_latency_p90_ms", "ok_latency_p99_ms")


def step_latencies(run: MeasuredRun, saturation_per_s: float) -> list[StepLatency]:
    """Each step of ``run`` up to its :func:`peak_step` (the steps after it are the collapse past the knee,
    not a queue below it): its load relative to ``saturation_per_s`` and the median over its seconds of
    the OK latency p50, p90 and p99."""
    frame, at, out = run.per_second, 0.0, []
    peak = peak_step(run)
    for rate, secs in run.meta.steps[: None if peak is None else peak + 1]:
        rows = _step_rows(frame, at, at + secs)
        quantiles = tuple(float(np.nanmedian(rows[c].to_numpy(float))) for c in STEP_QUANTILES)
        out.append(StepLatency(rate / saturation_per_s, secs, quantiles))  # type: ignore[arg-type]
        at += secs
    return out


def stall_values(
    runs: Sequence[MeasuredRun], values: dict[str, float], shape: bool = False
) -> dict[str, float]:
    """``producers.host_stall_*`` fitted to the saturated run among ``runs`` (empty without one), and the
    CPU values of ``values`` times 1 - the stalls' share (so the saturation rate stays the measured one).
    ``shape`` (``--fit-stall-shape``): the lengths' gamma shape fitted too, against the per-second
    medians (:func:`rocketsim.calibration.stalls.fit_stall_shape`); else exponential lengths
    (:func:`~rocketsim.calibration.stalls.fit_stalls`)."""
    saturated = [(r, sat) for r in runs if (sat := saturation(r)) is not None]
    if not saturated or not all(k in values for k in CPU_KEYS):
        return {}
    run, sat = saturated[0]
    steps = step_latencies(run, sat.msgs_per_s)
    base_ms = values.get("brokers.default.latency.median_ms", 0.0)
    fit = fit_stall_shape(steps, base_ms) if shape else fit_stalls(steps, base_ms)
    out = {k: values[k] * (1.0 - fit.share) for k in CPU_KEYS}
    out["producers.host_stall_every"] = fit.every(sat.msgs_per_s)
    out["producers.host_stall_ms"] = fit.mean_ms
    if isinstance(fit, StallShapeFit):
        out["producers.host_stall_shape"] = fit.shape
    return out


def validation_values(runs: Sequence[MeasuredRun], stall_shape: bool = False) -> dict[str, float]:
    """What the validation sets from its calibration ``runs`` (``python -m rocketsim.validation``): the
    calibrated values and, where they found a CPU a send, the harness's client collections and the host's
    stalls, which take the host's cores (``stall_shape``: with their lengths' shape, :func:`stall_values`)."""
    values = calibrate_runs(runs, request_bytes(runs[0])).values()
    if values.get("producers.send_cpu_us", 0) > 0:
        values.update(heap_values(runs, DRIVER_HEAP_MB, pending_kib(runs[0])))
        values.update(stall_values(runs, values, stall_shape))
    return values
