"""Client-side latency files other than OMB's: RocketMQ's benchmark Producer output, a CSV of latencies,
and a latency histogram (JSON).

More: docs/reference/modules.md, rocketsim/calibration/parse_client.py.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import datetime

import numpy as np

from rocketsim.calibration.measurements import Binned, MeanMax, Measurements, Throughput, View
from rocketsim.calibration.reading import (
    fail,
    json_key_line,
    load_json,
    nonblank_lines,
    number,
    numbers,
    shown,
)

_SEP = r"\s*\|?\s*"
_STATS = re.compile(
    r"^(?:Current Time: (?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d{3})?)"
    + r"|\[Complete\] Send Total: (?P<total>\d+))"
    + _SEP
    + r"Send TPS: (?P<tps>\d+)"
    + _SEP
    + r"Max RT\(ms\): (?P<max>\d+)"
    + _SEP
    + r"Average RT\(ms\):\s*(?P<avg>[0-9.]+|NaN)"
    + _SEP
    + r"Send Failed: (?P<failed>\d+)(?:"
    + _SEP
    + r"Response Failed: (?P<rfailed>\d+))?\s*$"
)
_SIZE = re.compile(r"\bmessageSize: (\d+)")
BENCH_EXPECTED = (
    "expected 'Current Time: <date time> | Send TPS: n | Max RT(ms): n | Average RT(ms): x | Send Failed: n'"
)
REPORT_INTERVAL_S = 10.0  # Producer.java: reportInterval default 10000 ms


def parse_benchmark(text: str, source: str) -> Measurements:
    """The benchmark Producer's output: the pooled mean latency of its windows and its running max."""
    windows: list[tuple[float | None, float, float]] = []  # (time s, tps, average ms)
    max_ms, total, size = 0.0, None, None
    for i, line in nonblank_lines(text):
        if (m := _SIZE.search(line)) and size is None:
            size = float(m[1])
        if not (line.startswith("Current Time:") or line.startswith("[Complete]")):
            continue
        m = _STATS.match(line)
        if m is None:
            fail(source, i, f"{BENCH_EXPECTED}, got {shown(line)}")
        max_ms = max(max_ms, float(m["max"]))
        if m["total"] is not None:
            total = (float(m["total"]) - float(m["failed"]), float(m["tps"]))
            continue
        if m["avg"] != "NaN":
            windows.append((_seconds(m["time"]), float(m["tps"]), float(m["avg"])))
    if not windows:
        fail(source, 0, f"{BENCH_EXPECTED} lines, found none")
    n_each = _window_sends(windows)
    n = sum(n_each)
    mean = sum(k * avg for k, (_, _, avg) in zip(n_each, windows, strict=True)) / n
    note = f"{len(windows)} windows; mean of their Average RT weighted by TPS x interval; Max RT since start"
    out = Measurements(means=(MeanMax(source, View.CLIENT, n, mean, max_ms, 1.0, note=note),))
    if total is not None:
        why = "closed loop: TPS = threads / RT (Little's law), not the brokers' saturation"
        out += Measurements(throughputs=(Throughput(source, total[1], False, size, note=why),))
    return out


def _seconds(stamp: str) -> float:
    fmt = "%Y-%m-%d %H:%M:%S,%f" if "," in stamp else "%Y-%m-%d %H:%M:%S"
    return datetime.strptime(stamp, fmt).timestamp()


def _window_sends(windows: list[tuple[float | None, float, float]]) -> list[float]:
    """Sends of each window: TPS x the time since the previous line (the report interval for the first)."""
    times = [t for t, _, _ in windows]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False) if a is not None and b is not None]
    interval = float(np.median(gaps)) if gaps else REPORT_INTERVAL_S
    out = []
    for k, (t, tps, _) in enumerate(windows):
        prev = times[k - 1] if k > 0 else None
        span = t - prev if t is not None and prev is not None and t > prev else interval
        out.append(tps * span)
    return out


# ---- CSV of latencies ---------------------------------------------------------------------------

_COLUMN = re.compile(r"^(latency|rt|cost|elapsed|duration)", re.IGNORECASE)
_UNITS = (("_ns", 1e-6), ("_us", 1e-3), ("_micros", 1e-3), ("_ms", 1.0), ("_s", 1e3), ("_sec", 1e3))
_OK = {"send_ok", "ok", "success", "true", "1"}
LOG_BINS = 400  # fine enough that binning costs nothing measurable in the fit


def parse_latency_csv(text: str, source: str) -> Measurements:
    """Latencies, one per row, as binned counts (whole ms kept as their ms)."""
    rows = [(i, [c.strip() for c in row]) for i, row in enumerate(csv.reader(io.StringIO(text)), start=1)]
    rows = [(i, row) for i, row in rows if any(row)]
    if not rows:
        fail(source, 0, "expected a CSV of latencies, got an empty file")
    column, scale, status, name = _csv_columns(*rows[0], source)
    values: list[float] = []
    for i, row in rows if name == "latency_ms (no header)" else rows[1:]:
        if status is not None and (len(row) <= status or row[status].lower() not in _OK):
            continue
        if len(row) <= column:
            fail(source, i, f"expected a value in column {column + 1} ({name}), got {shown(','.join(row))}")
        values.append(number(row[column], source, i, f"a latency ({name}) >= 0", minimum=0) * scale)
    if not values:
        fail(source, 0, "expected at least one latency row")
    note = f"{len(values):,} rows of {name}"
    return Measurements(binned=(samples_to_bins(np.asarray(values), source, note),))


def _csv_columns(line: int, row: list[str], source: str) -> tuple[int, float, int | None, str]:
    """(latency column, unit scale to ms, status column or None, column name) from the first row."""
    try:
        float(row[0])
    except ValueError:
        pass
    else:
        if len(row) == 1:  # one column of values, no header: ms
            return 0, 1.0, None, "latency_ms (no header)"
        fail(source, line, f"expected a header naming the latency column (latency_ms, ...), got {shown(row)}")
    names = [c.lower() for c in row]
    picks = [k for k, c in enumerate(names) if _COLUMN.match(c)]
    if not picks:
        fail(source, line, f"expected a column named latency_ms (or latency*, rt*, cost*), got {shown(row)}")
    column = picks[0]
    scale = next((s for suffix, s in _UNITS if names[column].endswith(suffix)), 1.0)
    status = names.index("status") if "status" in names else None
    return column, scale, status, row[column]


def samples_to_bins(values: np.ndarray, source: str, note: str) -> Binned:
    """Raw latencies as grouped data over all of ``[0, inf)``: whole ms as ``[v, v+1)``, else ``LOG_BINS``
    log-spaced bins. The bins no sample fell in are kept, with count 0: the samples are every send, so
    the fit must see where none fell (without them it fitted the occupied bins alone, and 10 samples of
    1-15 ms gave sigma 10)."""
    whole = bool(np.all(values == np.floor(values)) and values.max() < 1e7)
    if whole:
        ms = np.unique(values)
        edges = np.unique(np.concatenate([[0.0], ms, ms + 1.0, [np.inf]]))
        note += ", whole ms"
    else:
        positive = values[values > 0]
        lo_edge = positive.min() if positive.size else 1e-6
        inner = np.geomspace(lo_edge * 0.999, values.max() * 1.001, LOG_BINS)
        edges = np.concatenate([[0.0], inner, [np.inf]])
    counts = np.bincount(np.searchsorted(edges, values, side="right") - 1, minlength=len(edges) - 1)
    return Binned(
        source, View.CLIENT, tuple(edges[:-1]), tuple(edges[1:]), tuple(map(float, counts)), note=note
    )


# ---- histogram JSON -----------------------------------------------------------------------------


def parse_histogram(text: str, source: str) -> Measurements:
    """A latency histogram: ``edges_ms`` and the counts of ``[e_i, e_i+1)``."""
    doc = load_json(text, source, 'a latency histogram (JSON {"edges_ms": [...], "counts": [...]})')
    if not isinstance(doc, dict) or "edges_ms" not in doc:
        fail(source, 1, 'expected a JSON object with "edges_ms" and "counts" (or "ok")')
    key = "counts" if "counts" in doc else "ok" if "ok" in doc else None
    if key is None:
        fail(source, json_key_line(text, "edges_ms"), 'expected "counts" (or "ok") beside "edges_ms"')
    edges = numbers(doc["edges_ms"], source, json_key_line(text, "edges_ms"), "an edge in ms", minimum=0)
    counts = numbers(doc[key], source, json_key_line(text, key), "a count >= 0", minimum=0)
    if len(edges) != len(counts) + 1:
        fail(
            source,
            json_key_line(text, key),
            f"expected {len(edges) - 1} counts for {len(edges)} edges, got {len(counts)}",
        )
    if any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
        fail(source, json_key_line(text, "edges_ms"), "expected edges_ms in increasing order")
    if sum(counts) <= 0:
        fail(source, json_key_line(text, key), "expected at least one count above 0")
    note = f'"{key}" of {len(counts)} bins; values past the last edge ({edges[-1]:g} ms) not counted'
    return Measurements(
        binned=(Binned(source, View.CLIENT, tuple(edges[:-1]), tuple(edges[1:]), tuple(counts), note=note),)
    )
