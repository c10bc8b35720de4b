"""Readable oracles for the OMB tests, written apart from ``rocketsim.omb``:

* OMB's figures from a run's ``send_results`` rows, by the plain definitions of ``WorkloadGenerator``,
  ``WorkerStats`` and HdrHistogram 2.1.12 (``AbstractHistogram.getValueAtPercentile``, ``getMean``,
  ``getMaxValue``, ``highestEquivalentValue``): one sorted list of microseconds per window;
* what ``bin/create_charts.py`` of openmessaging/benchmark reads of a result file and how it parses it
  (``create_chart``: ``x['driver']``, ``x[field]``, points ``(10 * i, y)``, range ``max(chain(...)) * 1.2``;
  ``create_quantile_chart``: ``float(key)``, kept if ``<= 99.999``, x ``log10(100 / (100 - x))``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from itertools import chain

import pyarrow as pa

PUBLISHED = ("SEND_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE", "ONEWAY_SENT")
PERCENTILES = (
    (50, "50pct"),
    (75, "75pct"),
    (95, "95pct"),
    (99, "99pct"),
    (99.9, "999pct"),
    (99.99, "9999pct"),
)


def bucket(v: int) -> tuple[int, int]:
    """(lowest value, width) of v's HdrHistogram bucket with 5 significant digits: width 1 below 2**18,
    then doubling with each bit."""
    width = 1 if v < 1 << 18 else 1 << (v.bit_length() - 18)
    return v // width * width, width


def highest(v: int) -> int:
    low, width = bucket(v)
    return low + width - 1


def value_at(sorted_us: list[int], p: float) -> int:
    n = len(sorted_us)
    if n == 0:
        return 0
    rank = max(1, math.ceil(min(max(math.nextafter(p, -math.inf), 0.0), 100.0) * n / 100.0))
    return highest(sorted_us[rank - 1])


def mean(sorted_us: list[int]) -> float:
    if not sorted_us:
        return 0.0
    per_bucket: dict[int, list[int]] = defaultdict(list)
    for v in sorted_us:
        per_bucket[bucket(v)[0]].append(v)
    total = 0.0
    for low in sorted(per_bucket):
        width = bucket(low)[1]
        total += (low + width // 2) * float(len(per_bucket[low]))
    return total / len(sorted_us)


def recorded(ms: int) -> int:
    return min(ms * 1000, 60_000_000)


def expected(results: pa.Table, skip: int = 0) -> dict:
    """OMB's per-window and aggregated publish fields of ``send_results`` rows (windows of 10 s by the
    send's end, from window ``skip``)."""
    rows = results.select(["status", "end_ts_ms", "latency_ms", "queue_wait_ms"]).to_pylist()
    ok, err = defaultdict(int), defaultdict(int)
    lat, delay = defaultdict(list), defaultdict(list)
    last = skip
    for r in rows:
        w = r["end_ts_ms"] // 10_000
        if w < skip:
            continue
        last = max(last, w)
        if r["status"] in PUBLISHED:
            ok[w] += 1
            lat[w].append(recorded(r["latency_ms"]))
            delay[w].append(recorded(r["queue_wait_ms"]))
        else:
            err[w] += 1
    windows = range(skip, last + 1)
    out: dict = {
        "publishRate": [ok[w] / 10.0 for w in windows],
        "publishErrorRate": [err[w] / 10.0 for w in windows],
    }
    for field, series, to_ms in (("publishLatency", lat, True), ("publishDelayLatency", delay, False)):
        scale = (lambda v: v / 1000.0) if to_ms else (lambda v: v)
        per = {w: sorted(series[w]) for w in windows}
        out[f"{field}Avg"] = [scale(mean(per[w])) for w in windows]
        for p, name in PERCENTILES:
            out[f"{field}{name}"] = [scale(value_at(per[w], p)) for w in windows]
        out[f"{field}Max"] = [scale(highest(per[w][-1]) if per[w] else 0) for w in windows]
        every = sorted(chain(*per.values()))
        agg = f"aggregated{field[0].upper()}{field[1:]}"
        out[f"{agg}Avg"] = scale(mean(every))
        for p, name in PERCENTILES:
            out[f"{agg}{name}"] = scale(value_at(every, p))
        out[f"{agg}Max"] = scale(highest(every[-1]) if every else 0)
        out[f"_{field}_all"] = every
    return out


def check_quantile_map(quantiles: dict, every_us: list[int], to_ms: bool) -> None:
    """Each key of an aggregated quantile map is the percentile a bucket boundary reaches (a whole
    count over n) and its value that bucket's highest equivalent value; keys ascend; the last is 100."""
    n = len(every_us)
    keys = [float(k) for k in quantiles]
    assert keys == sorted(keys) and keys[-1] == 100.0
    for key, value in quantiles.items():
        cumulative = round(float(key) * n / 100.0)
        assert abs(cumulative - float(key) * n / 100.0) < 1e-6, key
        top = highest(every_us[cumulative - 1])
        assert value == (top / 1000.0 if to_ms else top), key
        assert cumulative == n or bucket(every_us[cumulative])[0] != bucket(every_us[cumulative - 1])[0], key


# ---- bin/create_charts.py's reading --------------------------------------------------------------------

TIME_CHARTS = (
    "publishLatency99pct",
    "publishDelayLatency99pct",
    "publishRate",
    "publishErrorRate",
    "endToEndLatency95pct",
    "consumeRate",
    "endToEndLatencyAvg",
)
QUANTILE_CHARTS = (
    "aggregatedPublishLatencyQuantiles",
    "aggregatedPublishDelayLatencyQuantiles",
    "aggregatedEndToEndLatencyQuantiles",
)


def create_charts_reading(results: list[dict]) -> dict[tuple[str, str], object]:
    """What create_charts.py computes from the results before pygal draws: per (workload, chart) the
    (label, points) series and, for a time chart, its y range. Raises as the script would."""
    by_workload: dict[str, list[dict]] = {}
    for result in results:
        by_workload.setdefault(result["workload"], []).append(result)
    out: dict[tuple[str, str], object] = {}
    for workload, group in by_workload.items():
        name = workload.replace("/", "-")
        for field in TIME_CHARTS:
            series = [(x["driver"], x[field]) for x in group]
            points = [(label, [(10 * i, y) for i, y in enumerate(values)]) for label, values in series]
            top = max(chain(*[values for (_, values) in series])) * 1.20
            out[(name, field)] = (points, (0, top))
        for field in QUANTILE_CHARTS:
            curves = []
            for label, values in [(x["driver"], x[field]) for x in group]:
                pairs = sorted((float(x), y) for x, y in values.items())
                curves.append((label, [(math.log10(100 / (100 - x)), y) for x, y in pairs if x <= 99.999]))
            out[(name, field)] = curves
    return out
