"""Calibration: measurements in, scenario values out, with what backs each value.

:func:`calibrate` runs every :data:`PARTS` function over the measurements; each returns a :class:`Part`:
the scenario values it estimates (:class:`Estimate`, keyed by their dotted scenario path, so a new
parameter, e.g. a client's per-send CPU cost, is a new part and nothing else changes), its notes, its
tables (for the report) and its latency fits. Today's parts:

More: docs/reference/modules.md, rocketsim/calibration/calibrate.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import pandas as pd
from scipy import stats

from rocketsim.calibration.fit import SPECS, Estimate
from rocketsim.calibration.latency_fit import LatencyFit, Unresolved, fit_latency
from rocketsim.calibration.measurements import CpuUse, Measurements, Throughput, View
from rocketsim.scenario import BROKER_ERRORS, StoreConfig

KIB = 1024.0
DEFAULT_REQUEST_BYTES = 1024.0


@dataclass(frozen=True)
class Options:
    """What the user adds to the measurements: the broker section to write (``default`` or a name) and
    values to hold fixed (``latency.spike_alpha`` -> 1.5, as ``--fix`` gives them)."""

    target: str = "default"
    fixed: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key, value in self.fixed.items():
            section, _, name = key.partition(".")
            if section != "latency" or name not in SPECS:
                raise ValueError(f"--fix {key}: expected latency.<{'|'.join(SPECS)}>")
            spec = SPECS[name]
            if not spec.lower <= value <= spec.upper:
                raise ValueError(
                    f"--fix {key} must be between {spec.lower:g} and {spec.upper:g}, got {value:g}"
                )

    def fixed_in(self, section: str) -> dict[str, float]:
        prefix = section + "."
        return {k.removeprefix(prefix): v for k, v in self.fixed.items() if k.startswith(prefix)}


@dataclass(frozen=True)
class Part:
    estimates: tuple[Estimate, ...] = ()
    notes: tuple[str, ...] = ()
    tables: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    latency: tuple[LatencyFit, ...] = ()


@dataclass(frozen=True)
class Calibration:
    """Everything :func:`calibrate` found."""

    target: str
    estimates: tuple[Estimate, ...]
    notes: tuple[str, ...]
    tables: Mapping[str, pd.DataFrame]
    latency: tuple[LatencyFit, ...]  # the first is the one the estimates come from, if any

    def values(self) -> dict[str, float]:
        return {e.key: e.value for e in self.estimates}


def _sources(items: object) -> str:
    return ", ".join(dict.fromkeys(m.source for m in items))  # type: ignore[attr-defined]


def latency_part(ms: Measurements, opts: Options) -> Part:
    fits, notes = [], []
    for view in (View.CLIENT, View.BROKER, View.STORE):
        items = ms.latency(view)
        if not items:
            continue
        fixed = opts.fixed_in("latency") if view != View.STORE else {}
        try:
            fits.append(fit_latency(items, view, fixed, [w for w in ms.windows if w.view == view]))
        except Unresolved as exc:
            notes.append(str(exc))
    usable = [f for f in fits if f.view in (View.CLIENT, View.BROKER)]
    if not usable:
        return Part(
            notes=(*notes, "latency: no client or broker latency among the inputs; not calibrated"),
            latency=tuple(fits),
        )
    chosen = usable[0]
    if chosen.view == View.BROKER:
        notes.append(
            "latency from the broker's rpc_latency: it lacks the network round trip (the median is low by it)"
        )
    prefix = f"brokers.{opts.target}.latency."
    source = _sources(chosen.inputs)
    estimates = tuple(
        replace(p, key=prefix + p.key, source=source, value=_scenario_value(p.key, p.value))
        for p in chosen.params
    )
    ordered = (chosen, *(f for f in fits if f is not chosen))
    return Part(estimates, tuple(notes), latency=ordered)


def _scenario_value(name: str, value: float) -> float:
    """A latency value as the scenario writes it: no spike maximum (inf here) is ``spike_max_ms = 0``."""
    return 0.0 if name == "spike_max_ms" and not math.isfinite(value) else value


# ResponseCode names (lower case, as rocketmq_rpc_latency's response_code) of the model's error mix
ERROR_CODES = {name: name for name in BROKER_ERRORS if name not in ("remoting_timeout", "connect_refused")}


def errors_part(ms: Measurements, opts: Options) -> Part:
    if not ms.responses:
        return Part()
    counts: dict[str, float] = {}
    for r in ms.responses:
        for code, n in r.counts.items():
            counts[code] = counts.get(code, 0.0) + n
    total = sum(counts.values())
    if total <= 0:
        return Part(notes=("errors: the response counts are all zero",))
    rows, estimates = [], []
    for code, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        k = int(round(n))
        ci = stats.binomtest(k, int(round(total))).proportion_ci(confidence_level=0.95, method="wilson")
        modelled = code in ERROR_CODES
        rows.append(
            {
                "response_code": code,
                "count": n,
                "share": n / total,
                "ci_lo": ci.low,
                "ci_hi": ci.high,
                "in the model": "yes (errors." + code + ")"
                if modelled
                else ("SEND_OK" if code == "success" else "no"),
            }
        )
        if modelled and n > 0:
            key = f"brokers.{opts.target}.errors.{ERROR_CODES[code]}"
            estimates.append(
                Estimate(
                    key,
                    n / total,
                    False,
                    "share of send requests",
                    _sources(ms.responses),
                    None,
                    (ci.low, ci.high),
                )
            )
    notes = []
    if "system_busy" in counts:
        notes.append(
            "errors.system_busy: with brokers.coupling joint or iterative the store answers SYSTEM_BUSY "
            "itself (flow control); keep this share only if the measurements were taken at low load"
        )
    other = [c for c in counts if c != "success" and c not in ERROR_CODES]
    if other:
        notes.append("errors: response codes outside the model's error mix, not written: " + ", ".join(other))
    return Part(tuple(estimates), tuple(notes), {"errors": pd.DataFrame(rows)})


def store_part(ms: Measurements, opts: Options) -> Part:
    rows = [
        {
            "source": t.source,
            "msgs_per_s": t.msgs_per_s,
            "saturated": t.saturated,
            "request_bytes": t.request_bytes,
            "note": t.note,
        }
        for t in ms.throughputs
    ]
    tables = {"throughput": pd.DataFrame(rows)} if rows else {}
    saturated = [t for t in ms.throughputs if t.saturated]
    if _shared_host(ms) is not None:
        return Part(
            notes=("store.append_us: from the host part (the client and the broker shared it)",),
            tables=tables,
        )
    if not saturated:
        why = (
            "not calibrated: no saturation figure (--saturation RATE[@BYTES]); store times cannot resolve µs"
        )
        return Part(notes=(f"store.append_us: {why}",), tables=tables)
    t = max(saturated, key=lambda x: x.msgs_per_s)
    size = t.request_bytes or DEFAULT_REQUEST_BYTES
    append_us = 1e6 * KIB / (t.msgs_per_s * size)
    key = f"brokers.{opts.target}.store.append_us"
    why = f"1e6 / {t.msgs_per_s:,.0f} msg/s per KiB of a {size:,.0f}-byte request (one commit-log writer)"
    notes = (
        []
        if t.request_bytes
        else [
            f"store.append_us: bytes per request not given; {DEFAULT_REQUEST_BYTES:.0f} assumed (RATE@BYTES)"
        ]
    )
    limit = StoreConfig.__dataclass_fields__["append_us"].metadata
    if not limit["check"](append_us):
        notes.append(
            f"store.append_us = {append_us:g} is outside the scenario's range ({limit['rule']}); not written"
        )
        return Part(notes=tuple(notes), tables=tables)
    return Part((Estimate(key, append_us, False, why, t.source),), tuple(notes), tables)


BROKER_IO_SHARE = 0.5  # of the broker's CPU per request: its connection's I/O thread (decode, flow control)


def _shared_host(ms: Measurements) -> tuple[Throughput, CpuUse] | None:
    """The saturation figure and the CPU use of a run whose client and broker shared one host."""
    saturated = [t for t in ms.throughputs if t.saturated]
    shared = [c for c in ms.cpu if c.shared_processors]
    if not saturated or not shared:
        return None
    return max(saturated, key=lambda t: t.msgs_per_s), shared[0]


def host_part(ms: Measurements, opts: Options) -> Part:
    """The CPU a send costs the client and the broker on the host they share: ``processors / rate`` at
    the saturation figure, split by their CPU seconds; the broker's part split in halves
    (:data:`BROKER_IO_SHARE`) between its connection's I/O thread and the send thread's append."""
    found = _shared_host(ms)
    if found is None:
        return Part()
    t, cpu = found
    total_us = 1e6 * cpu.shared_processors / t.msgs_per_s  # type: ignore[operator]
    client_us = total_us * cpu.client_share
    broker_us = total_us - client_us
    size = t.request_bytes or DEFAULT_REQUEST_BYTES
    io_us = broker_us * BROKER_IO_SHARE
    append_us = (broker_us - io_us) * KIB / size
    where = (
        f"{cpu.shared_processors} processors / {t.msgs_per_s:,.0f} msg/s = {total_us:.3g} us a send, "
        f"{cpu.client_share:.1%} of it the client's ({cpu.source})"
    )
    source = f"{t.source}, {cpu.source}"
    estimates = (
        Estimate("producers.send_cpu_us", client_us, False, "the client's part: " + where, source),
        Estimate(f"brokers.{opts.target}.store.io_us", io_us, False, "half the broker's part", source),
        Estimate(
            f"brokers.{opts.target}.store.append_us",
            append_us,
            False,
            f"the other half, per KiB of a {size:,.0f}-byte request",
            source,
        ),
    )
    notes = [
        f"host: the client and the broker shared {cpu.shared_processors} processors: set "
        f"producers.processors = {cpu.shared_processors} and producers.shared_host, and "
        f"brokers.{opts.target}.store.on_producer_host = true"
    ]
    if not t.request_bytes:
        notes.append(f"host: bytes per request not given; {DEFAULT_REQUEST_BYTES:.0f} assumed (RATE@BYTES)")
    table = pd.DataFrame([{"key": e.key, "value": e.value, "why": e.why} for e in estimates])
    return Part(estimates, tuple(notes), {"host": table})


def queue_part(ms: Measurements, opts: Options) -> Part:
    if not ms.queues:
        return Part()
    store = StoreConfig()
    rows = []
    for q in ms.queues:
        waits = [w for w in q.head_wait_ms if w >= 0]
        rows.append(
            {
                "source": q.source,
                "samples": len(q.depth),
                "max_depth": max(q.depth),
                "seconds_queued": sum(d > 0 for d in q.depth),
                "max_head_wait_ms": max(waits) if waits else math.nan,
            }
        )
    worst = max(rows, key=lambda r: r["max_depth"])
    waited = worst["max_head_wait_ms"]  # nan when its input did not measure it (a Prometheus depth gauge)
    head = "head wait not measured" if math.isnan(waited) else f"head waited up to {waited:g} ms"
    notes = [
        f"send queue: up to {worst['max_depth']:,.0f} requests (store.send_queue_capacity default "
        f"{store.send_queue_capacity:,}); {head} "
        f"(store.wait_time_ms_in_send_queue default {store.wait_time_ms_in_send_queue} ms): compare with "
        "broker_windows.queue_depth_* of a closed-loop run"
    ]
    return Part(notes=tuple(notes), tables={"queues": pd.DataFrame(rows)})


PARTS: tuple[Callable[[Measurements, Options], Part], ...] = (
    latency_part,
    errors_part,
    store_part,
    host_part,
    queue_part,
)


def calibrate(ms: Measurements, opts: Options | None = None) -> Calibration:
    """Every part over ``ms``; raises ValueError when nothing at all could be estimated."""
    opts = opts or Options()
    parts = [part(ms, opts) for part in PARTS]
    estimates = tuple(e for p in parts for e in p.estimates)
    notes = tuple(n for p in parts for n in p.notes)
    tables = {k: v for p in parts for k, v in p.tables.items()}
    latency = tuple(f for p in parts for f in p.latency)
    if not estimates:
        raise ValueError(
            "nothing to calibrate: " + "; ".join(notes or ("the inputs hold no usable measurement",))
        )
    return Calibration(opts.target, estimates, notes, tables, latency)
