"""OpenMessaging Benchmark result files (``TestResult`` JSON, every schema since 2020; every field optional).

What is read (field names of ``benchmark-framework/.../TestResult.java``; values in ms):

* ``aggregatedPublishLatencyQuantiles``: HdrHistogram's percentile walk, ``{"<percentile reached>": value
  iterated to}``. Consecutive keys ``(p_j-1, v_j-1) -> (p_j, v_j)`` say a fraction ``(p_j - p_j-1)/100``
  of the sends took ``(v_j-1, v_j]``: binned data of 5 significant digits (grouped MLE). The map is
  absent in some forks; then the scalar ``aggregatedPublishLatency50pct`` .. ``9999pct`` are quantiles.
* ``publishLatency{50,75,95,99}pct[i]``: per ≈10 s window, for the per-window scale (slowdown) fit.
* ``sent`` (newer forks) or ``publishRate`` x window: how many sends the aggregate holds. Without
  either, the first step of the quantile map is taken as one send (``100 / p_0``).
* ``publishRate``: the observed throughput (successes only, all workers summed).

More: docs/reference/modules.md, rocketsim/calibration/parse_omb.py.
"""

from __future__ import annotations

import math
from typing import Any

from rocketsim.calibration.measurements import (
    Binned,
    Measurements,
    Quantiles,
    Throughput,
    View,
    WindowQuantiles,
)
from rocketsim.calibration.reading import fail, json_key_line, load_json, number, numbers, shown

CLAMP_MS = 60_000.0  # WorkerStats: publish latency recorded up to TimeUnit.SECONDS.toMicros(60)
WINDOW_S = 10.0  # WorkloadGenerator.printAndCollectStats: one period per ~10 s
SCALARS = {
    0.5: "aggregatedPublishLatency50pct",
    0.75: "aggregatedPublishLatency75pct",
    0.95: "aggregatedPublishLatency95pct",
    0.99: "aggregatedPublishLatency99pct",
    0.999: "aggregatedPublishLatency999pct",
    0.9999: "aggregatedPublishLatency9999pct",
}
# the per-window levels the slowdown fit reads: the body's (higher levels are the tail's: spikes)
WINDOW_SERIES = {
    0.5: "publishLatency50pct",
    0.75: "publishLatency75pct",
    0.95: "publishLatency95pct",
    0.99: "publishLatency99pct",
}
QUANTILE_MAP = "aggregatedPublishLatencyQuantiles"


def parse_omb(text: str, source: str) -> Measurements:
    """The publish latency (client view) and throughput of one OMB result file."""
    doc = load_json(text, source, "an OpenMessaging Benchmark result (JSON)")
    if not isinstance(doc, dict):
        fail(source, 1, f"expected an OpenMessaging Benchmark result (a JSON object), got {shown(doc)}")
    labels = {k: str(doc[k]) for k in ("driver", "workload") if isinstance(doc.get(k), str)}
    n, how = _sends(doc, text, source)
    out = Measurements()
    if doc.get(QUANTILE_MAP):
        out += Measurements(binned=(_quantile_map(doc[QUANTILE_MAP], n, how, text, source, labels),))
    else:
        quantiles = _scalar_quantiles(doc, n, text, source, labels)
        out += Measurements(quantiles=(quantiles,) if quantiles else ())
    windows = _windows(doc, text, source, labels)
    if windows is not None:
        out += Measurements(windows=(windows,))
    rates = _array(doc, "publishRate", text, source, "a rate in msg/s")
    if rates:
        rate = Throughput(source, sum(rates) / len(rates), labels=labels, note="mean publishRate (successes)")
        out += Measurements(throughputs=(rate,))
    if not out.binned and not out.quantiles:
        fail(source, 0, f"expected publish latencies ({QUANTILE_MAP} or aggregatedPublishLatency50pct...)")
    return out


def _array(doc: dict[str, Any], key: str, text: str, source: str, what: str) -> list[float]:
    if key not in doc:
        return []
    return numbers(doc[key], source, json_key_line(text, key), what, minimum=0.0)


def _sends(doc: dict[str, Any], text: str, source: str) -> tuple[float | None, str]:
    """How many sends the aggregate holds, and how that is known."""
    sent = _array(doc, "sent", text, source, "a count of sends")
    if sent:
        return float(sum(sent)), "sum of sent"
    rates = _array(doc, "publishRate", text, source, "a rate in msg/s")
    if rates:
        window = WINDOW_S
        if "sampleRateMillis" in doc:
            line = json_key_line(text, "sampleRateMillis")
            window = number(doc["sampleRateMillis"], source, line, "milliseconds > 0", minimum=1) / 1000
        return sum(rates) * window, f"publishRate x {window:g} s windows"
    return None, ""


def _quantile_map(
    raw: object, n: float | None, how: str, text: str, source: str, labels: dict[str, str]
) -> Binned:
    line = json_key_line(text, QUANTILE_MAP)
    if not isinstance(raw, dict):
        fail(source, line, f"expected {QUANTILE_MAP} as an object of percentile -> ms, got {shown(raw)}")
    points = []
    for key, value in raw.items():
        where = lambda key=key: json_key_line(text, key) or line  # noqa: E731 - looked up on an error only
        pct = number(key, source, where, "a percentile key between 0 and 100", minimum=0)
        ms = number(value, source, where, "a latency in ms", minimum=0)
        if pct > 100:
            fail(source, where(), f"expected a percentile key <= 100, got {key!r}")
        points.append((pct, ms))
    points.sort()
    if n is None:  # the walk's first step is the smallest bucket: one send
        first = next((p for p, _ in points if p > 0), None)
        if first is None:
            fail(source, line, f"expected {QUANTILE_MAP} with a percentile above 0")
        n, how = round(100.0 / first), "first quantile step taken as one send"
    return _walk_to_bins(points, n, how, source, line, labels)


def _walk_to_bins(
    points: list[tuple[float, float]], n: float, how: str, source: str, line: int, labels: dict[str, str]
) -> Binned:
    """HdrHistogram's walk as counts per interval ``(v_j-1, v_j]`` (equal values merged)."""
    lo: list[float] = []
    hi: list[float] = []
    counts: list[float] = []
    prev_p, prev_v = 0.0, 0.0
    for pct, ms in points:
        if ms < prev_v:
            fail(
                source,
                line,
                f"expected latencies that grow with the percentile, got {ms} ms after {prev_v} ms",
            )
        share = (pct - prev_p) / 100.0 * n
        if ms > prev_v or not counts:
            lo.append(prev_v)
            hi.append(ms)
            counts.append(share)
        else:
            counts[-1] += share
        prev_p, prev_v = pct, ms
    if hi[-1] >= CLAMP_MS:  # the clamp: the last bucket is "60 s or more"
        hi[-1] = math.inf
    else:
        lo.append(hi[-1])
        hi.append(math.inf)
        counts.append(max(0.0, (100.0 - prev_p) / 100.0 * n))
    note = f"HdrHistogram percentile walk, {len(points)} points; {n:,.0f} sends ({how})"
    return Binned(source, View.CLIENT, tuple(lo), tuple(hi), tuple(counts), labels, note)


def _scalar_quantiles(
    doc: dict[str, Any], n: float | None, text: str, source: str, labels: dict[str, str]
) -> Quantiles | None:
    levels, values = [], []
    for level, key in SCALARS.items():
        if key in doc:
            ms = number(doc[key], source, json_key_line(text, key), "a latency in ms", minimum=0)
            if ms > 0:
                levels.append(level)
                values.append(ms)
    if not levels:
        return None
    note = "aggregatedPublishLatency*pct (no quantile map in the file)"
    return Quantiles(source, View.CLIENT, tuple(levels), tuple(values), n, labels, note)


def _windows(doc: dict[str, Any], text: str, source: str, labels: dict[str, str]) -> WindowQuantiles | None:
    series = {
        level: _array(doc, key, text, source, "a latency in ms")
        for level, key in WINDOW_SERIES.items()
        if key in doc
    }
    series = {level: values for level, values in series.items() if values}
    if not series:
        return None
    length = min(len(v) for v in series.values())
    levels = tuple(sorted(series))
    rows = tuple(tuple(series[level][w] for level in levels) for w in range(length))
    starts = tuple(WINDOW_S * w for w in range(length))
    return WindowQuantiles(source, View.CLIENT, levels, starts, rows, labels, "publishLatency*pct per window")
