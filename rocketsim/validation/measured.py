"""One run of the real-broker harness as rocketsim reads it: its settings, outcomes, latency, per-second
series and what the broker stored.

The harness's folder format (``meta.json``, ``outcomes.csv``, ``summary.json``, ``per_second.csv``,
``latency_hist.json``, ``cpu.json``, ``broker_runtime.csv``, ``broker_logs/``) is read file by file in
``rocketsim.warehouse.measured_runs``; the parsers here take each file's text and name the file in a
:class:`rocketsim.errors.MeasurementError` when it does not read.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from rocketsim.calibration.measurements import View
from rocketsim.calibration.parse_logs import parse_store_log
from rocketsim.calibration.reading import fail, load_json, number
from rocketsim.validation.classes import SEND_OK

MODES = ("sync", "async", "oneway")
# LoadDriver: --drain-ms's default (meta.json does not record the option; run_all.sh gives f_stop5s_* 12000)
DRIVER_DRAIN_MS = 8000
# LoadDriver: after the drain it sleeps min(--stats-ms, 1000) + 100 ms for the poller's last sample
# (run_load.sh always polls, at the default 1000) before it reads the statuses
DRIVER_LAST_SAMPLE_MS = 1100
PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p999", 99.9))


@dataclass(frozen=True)
class RunMeta:
    """The driver's settings (``meta.json``): what rocketsim needs to simulate the run's exact schedule."""

    mode: str
    steps: tuple[tuple[float, float], ...]  # (rate msg/s, seconds), in order
    producers: int
    threads: int  # the sync sender pool (async sends are submitted by one dispatcher thread)
    size: int  # body bytes
    timeout_ms: int
    retries: int
    n: int
    warmup_ok: int = 0
    young_gc: tuple[int, float] | None = None  # the driver JVM's young collections: (count, total ms)
    t0_epoch_ms: int | None = None  # when the schedule's 0 was (the wall clock, ms): fault.txt's origin
    dispatch_end_us: int | None = None  # when the dispatcher had handed over the last send (schedule's clock)
    drain_ms: int = DRIVER_DRAIN_MS  # --drain-ms: recorded as drain_ms if the driver writes it

    @property
    def duration_s(self) -> float:
        return sum(s for _, s in self.steps)

    @property
    def counted_at_ms(self) -> float:
        """When the driver read the sends' outcomes, on the schedule's clock (ms): it waits for them from the
        dispatch's end for ``drain_ms`` at most, then for the broker poller's last sample; a send with no
        outcome then is ``NOT_DONE`` (``LoadDriver.main``: the drain, ``poller.stopIt``, the records). The
        schedule's end stands for the dispatch's when meta.json lacks it."""
        end_ms = self.duration_s * 1000.0 if self.dispatch_end_us is None else self.dispatch_end_us / 1000.0
        return end_ms + self.drain_ms + DRIVER_LAST_SAMPLE_MS


@dataclass(frozen=True)
class StoredCopies:
    """What the broker stored for the run's sends (its ``[PAGECACHERT] TotalPut`` over the run's windows,
    less the warm-up's), or why that is not known (``copies`` None)."""

    copies: int | None
    note: str = ""


@dataclass(frozen=True)
class MeasuredRun:
    """A measured run: settings, outcome counts, OK latency, per-second series, host CPU, stored copies."""

    name: str
    meta: RunMeta
    outcomes: Mapping[str, int]
    ok_latency_ms: Mapping[str, float]  # p50, p90, p99, p999, max
    step_completions: tuple[float, ...]  # per step: OK completions per second within its window
    per_second: pd.DataFrame  # second, scheduled, ok, failed, ok_latency_p50_ms, ..., err_<class>
    ok_hist: tuple[np.ndarray, np.ndarray] | None = None  # (edges ms, counts) of OK sends
    cpu: Mapping[str, float] = field(default_factory=dict)
    stored: StoredCopies = StoredCopies(None, "no broker logs")
    fault: tuple[float, float] | None = None  # (stopped at s, continued at s) of a kill -STOP
    broker_series: pd.DataFrame | None = None  # t_s, queue, head_wait_ms (the broker's runtime polls)

    @property
    def ok(self) -> int:
        return int(self.outcomes.get(SEND_OK, 0))

    @property
    def ok_share(self) -> float:
        return self.ok / self.meta.n if self.meta.n else math.nan


def parse_steps(text: str, source: str) -> tuple[tuple[float, float], ...]:
    """The driver's ``--steps`` (``rate:seconds,...``)."""
    steps = []
    for part in text.split(","):
        rate, sep, secs = part.partition(":")
        try:
            r, s = float(rate), float(secs)
        except ValueError:
            r = s = math.nan
        if not sep or not (r > 0 and s > 0):
            fail(source, 0, f"expected steps as rate:seconds,... with both > 0, got {text!r}")
        steps.append((r, s))
    return tuple(steps)


def parse_meta(text: str, source: str) -> RunMeta:
    """``meta.json``: the mode, schedule, producers, threads, body size, timeout and retries."""
    raw = load_json(text, source, "the driver's meta.json object")
    if not isinstance(raw, dict):
        fail(source, 1, "expected a JSON object")
    for key in ("mode", "steps", "producers", "size", "timeout_ms", "retries", "n"):
        if key not in raw:
            fail(source, 0, f"expected the key {key!r}")
    if raw["mode"] not in MODES:
        fail(source, 0, f"expected mode one of {MODES}, got {raw['mode']!r}")

    def whole(key: str, minimum: int) -> int:
        return int(number(raw.get(key, minimum), source, 0, f"{key} >= {minimum}", minimum=minimum))

    return RunMeta(
        raw["mode"],
        parse_steps(str(raw["steps"]), source),
        whole("producers", 1),
        whole("threads", 1),
        whole("size", 1),
        whole("timeout_ms", 1),
        whole("retries", 0),
        whole("n", 1),
        whole("warmup_ok", 0),
        young_collections(raw.get("driver_gc")),
        whole("t0_epoch_ms", 0) if "t0_epoch_ms" in raw else None,
        whole("dispatch_end_us", 0) if "dispatch_end_us" in raw else None,
        whole("drain_ms", 0) if "drain_ms" in raw else DRIVER_DRAIN_MS,
    )


def parse_fault(text: str, source: str, t0_epoch_ms: int | None) -> tuple[float, float]:
    """``fault.txt`` (``run_load.sh``: ``STOP <epoch ms>`` when it sent SIGSTOP, ``CONT <epoch ms>`` when it
    sent SIGCONT) as (stopped at s, continued at s) after the schedule's 0, as ``analyze.py`` reads it."""
    if t0_epoch_ms is None:
        fail(source, 0, "expected meta.json's t0_epoch_ms to place the fault")
    times: dict[str, int] = {}
    for i, line in enumerate(text.splitlines(), 1):
        word, _, value = line.strip().partition(" ")
        if word in ("STOP", "CONT") and value.strip().isdigit():
            times[word] = int(value)
        elif line.strip():
            fail(source, i, f"expected 'STOP <epoch ms>' or 'CONT <epoch ms>', got {line.strip()[:60]!r}")
    if set(times) != {"STOP", "CONT"} or times["CONT"] < times["STOP"]:
        fail(source, 0, "expected a STOP line and a later CONT line")
    return ((times["STOP"] - t0_epoch_ms) / 1000.0, (times["CONT"] - t0_epoch_ms) / 1000.0)


def young_collections(gc: object) -> tuple[int, float] | None:
    """The ``count=N ms=M`` of the driver's young-generation collector (``driver_gc``), if recorded."""
    if not isinstance(gc, dict):
        return None
    text = next((str(v) for k, v in gc.items() if "Young" in str(k)), None)
    m = re.fullmatch(r"\s*count=(\d+)\s+ms=(\d+(?:\.\d+)?)\s*", text or "")
    return (int(m[1]), float(m[2])) if m else None


def parse_outcomes(text: str, source: str) -> dict[str, int]:
    """``outcomes.csv``: the count of each outcome class."""
    frame = _csv(text, source, ("klass", "count"))
    return {str(k): int(c) for k, c in zip(frame["klass"], frame["count"], strict=True)}


def parse_per_second(text: str, source: str) -> pd.DataFrame:
    """``per_second.csv``: per second of due time, sends scheduled, OK, failed by class, OK latency."""
    frame = _csv(text, source, ("second", "scheduled", "ok", "failed"))
    return frame.apply(pd.to_numeric, errors="coerce")


@dataclass(frozen=True)
class Summary:
    """What ``summary.json`` adds: the OK latency percentiles (ms), the fault window, the RPCs the sends
    made, and per step the OK completions per second within the step's window."""

    ok_latency_ms: Mapping[str, float]
    fault: tuple[float, float] | None
    rpcs: int
    step_completions: tuple[float, ...]


def parse_summary(text: str, source: str) -> Summary:
    """``summary.json``."""
    raw = load_json(text, source, "the harness's summary.json object")
    lat = raw.get("latency_ok_ms") if isinstance(raw, dict) else None
    if not isinstance(lat, dict):
        fail(source, 0, "expected latency_ok_ms")
    keys = {"p50": "p50", "p90": "p90", "p99": "p99", "p999": "p99.9", "max": "max"}
    ok = {k: number(lat.get(src, math.nan), source, 0, f"latency_ok_ms.{src}") for k, src in keys.items()}
    fault = raw.get("fault")
    window = (float(fault["stop_at_s"]), float(fault["cont_at_s"])) if isinstance(fault, dict) else None
    rpcs = sum(int(k) * int(v) for k, v in (raw.get("rpc_attempts") or {}).items())
    steps = tuple(float(s.get("ok_completions_per_s_in_window", math.nan)) for s in raw.get("per_step") or ())
    return Summary(ok, window, rpcs, steps)


def parse_histogram(text: str, source: str) -> tuple[np.ndarray, np.ndarray]:
    """``latency_hist.json``: the OK sends' latency histogram (edges in ms, counts)."""
    raw = load_json(text, source, '{"edges_ms": [...], "ok": [...]}')
    if not isinstance(raw, dict) or "edges_ms" not in raw or "ok" not in raw:
        fail(source, 1, 'expected {"edges_ms": [...], "ok": [...]}')
    edges, counts = np.asarray(raw["edges_ms"], float), np.asarray(raw["ok"], float)
    if edges.size != counts.size + 1:
        fail(source, 1, f"expected one more edge than counts, got {edges.size} and {counts.size}")
    return edges, counts


def parse_cpu(text: str, source: str) -> dict[str, float]:
    """``cpu.json``: the numbers (CPU seconds of the broker and the driver, ``nproc``, ``wall_s``, ...)."""
    raw = load_json(text, source, "the harness's cpu.json object")
    if not isinstance(raw, dict):
        fail(source, 1, "expected a JSON object")
    return {k: float(v) for k, v in raw.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def parse_broker_series(text: str, source: str) -> pd.DataFrame:
    """``broker_runtime.csv``: the broker's send queue and its head's wait, polled each second."""
    frame = _csv(text, source, ("rel_us", "sendThreadPoolQueueSize", "sendThreadPoolQueueHeadWaitTimeMills"))
    frame = frame.dropna(subset=["rel_us"])
    return pd.DataFrame(
        {
            "t_s": frame["rel_us"].astype(float) / 1e6,
            "queue": frame["sendThreadPoolQueueSize"].astype(float),
            "head_wait_ms": frame["sendThreadPoolQueueHeadWaitTimeMills"].astype(float),
        }
    )


def stored_copies(store_log: str, source: str, meta: RunMeta, ok: int, rpcs: int) -> StoredCopies:
    """The copies the broker stored for the run's sends: every put of the ``[PAGECACHERT]`` windows of the
    run's ``store.log`` (the harness waits for the window holding the run's end to close, and a run starts
    in a window no other run's puts reach) less the warm-up's sends. Refused when the count cannot be the
    run's alone: fewer copies than OK sends, or more than the RPCs the sends made. A log with no such
    window (a run that ended before its minute closed: the harness's ``WAIT_PAGECACHERT=0``) has no count."""
    if "[PAGECACHERT]" not in store_log:
        return StoredCopies(None, f"{source}: no [PAGECACHERT] line")
    bins = parse_store_log(store_log, source).latency(View.STORE)
    copies = int(round(sum(sum(b.counts) for b in bins))) - meta.warmup_ok  # type: ignore[attr-defined]
    if copies < ok or copies > rpcs:
        return StoredCopies(
            None,
            f"{source}: {copies:,} puts beside the warm-up, outside [OK sends {ok:,}, RPCs {rpcs:,}]: "
            "the log's windows hold puts from outside the run",
        )
    return StoredCopies(copies, f"[PAGECACHERT] TotalPut less {meta.warmup_ok:,} warm-up sends")


def _csv(text: str, source: str, required: tuple[str, ...]) -> pd.DataFrame:
    try:
        frame = pd.read_csv(io.StringIO(text))
    except (ValueError, pd.errors.ParserError) as exc:
        fail(source, 0, f"expected CSV: {exc}")
    missing = [c for c in required if c not in frame.columns]
    if missing:
        fail(source, 1, f"expected the column(s) {', '.join(missing)}")
    return frame
