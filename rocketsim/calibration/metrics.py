"""What RocketMQ's Prometheus series mean: series (:mod:`rocketsim.calibration.parse_prometheus`) ->
measurements.

More: docs/reference/modules.md, rocketsim/calibration/metrics.py.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict

from rocketsim.calibration.measurements import (
    Binned,
    Measurements,
    Quantiles,
    QueueSeries,
    ResponseCounts,
    View,
)
from rocketsim.calibration.parse_logs import STORE_BUCKETS, store_bins
from rocketsim.calibration.parse_prometheus import Series
from rocketsim.calibration.reading import fail

RPC = re.compile(r"^rocketmq_rpc_latency(?:_milliseconds)?_(bucket|count|sum)$")
SEND_COST = re.compile(r"^rocketmq_send_cost_time(?:_milliseconds|_ms)?_(bucket|count|sum)$")
# the exporter's pmdt gauge suffixes, in StoreStatsService's bucket order (parse_logs.STORE_BUCKETS)
PMDT_SUFFIXES = (
    "0ms", "0to10ms", "10to50ms", "50to100ms", "100to200ms", "200to500ms", "500to1s", "1to2s", "2to3s",
    "3to4s", "4to5s", "5to10s", "10stomore",
)  # fmt: skip
PMDT = {f"rocketmq_brokeruntime_pmdt_{suffix}": k for k, suffix in enumerate(PMDT_SUFFIXES)}
PUT_LATENCY = {"rocketmq_brokeruntime_put_latency_99": 0.99, "rocketmq_brokeruntime_put_latency_999": 0.999}
QUEUE_GAUGES = {
    "rocketmq_processor_watermark": ("processor", "send"),
    "rocketmq_thread_pool_wartermark": ("name", "send"),  # the docs' name (rocketmq-site "Metrics")
    "rocketmq_brokeruntime_send_threadpool_queue_size": (None, None),
}
SEND_CODES = frozenset(
    {
        "send_message",
        "send_message_v2",
        "send_batch_message",
        "send_reply_message",
        "send_reply_message_v2",
        "10",
        "310",
        "320",
        "324",
        "325",
    }
)
# labels that split one request stream into parts, not brokers: pooled away in the response mix
_PARTS = {
    "le",
    "response_code",
    "request_code",
    "result",
    "is_long_polling",
    "protocol_type",
    "otel_scope_name",
}


def _kind(s: Series, source: str) -> tuple[str, str]:
    """(``rpc`` / ``send_cost`` / ``pmdt`` / ``put_latency`` / ``queue`` / ``""``, histogram part)."""
    if s.name:
        for family, pattern in (("rpc", RPC), ("send_cost", SEND_COST)):
            if m := pattern.match(s.name):
                return family, m[1]
        if s.name in PMDT:
            return "pmdt", ""
        if s.name in PUT_LATENCY:
            return "put_latency", ""
        if s.name in QUEUE_GAUGES:
            label, value = QUEUE_GAUGES[s.name]
            return ("queue", "") if label is None or s.labels.get(label) == value else ("", "")
        return "", ""
    if len(s.points) > 1:
        fail(
            source,
            s.line,
            "expected raw counters with __name__ (query the _bucket series themselves, "
            "not rate() or increase()) or an instant query of increase(...)",
        )
    part = "bucket" if "le" in s.labels else "count"
    if "response_code" in s.labels:
        return "rpc", part
    if "invocation_status" in s.labels:
        return "send_cost", part
    return "", ""


def over_period(s: Series) -> float:
    """A counter's count over the points: the increase (a drop is a restart), or the sum of deltas."""
    values = [v for _, v in s.points if not math.isnan(v)]
    if not values:
        return 0.0
    if s.labels.get("aggregation") == "delta":
        return sum(values)
    total = values[0] if len(values) == 1 else 0.0
    for a, b in zip(values, values[1:], strict=False):
        total += b - a if b >= a else b
    return total


def _histograms(
    series: list[Series], family: str, source: str, view: View, ok: tuple[str, str]
) -> list[Binned]:
    """The success buckets of ``family``, one histogram per label set (``le`` aside)."""
    groups: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = defaultdict(list)
    lines: dict[tuple[tuple[str, str], ...], int] = {}
    for s in series:
        if s.labels.get(ok[0], ok[1]) != ok[1] or "le" not in s.labels:
            continue
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        groups[key].append((float(s.labels["le"].replace("Inf", "inf")), over_period(s)))
        lines.setdefault(key, s.line)
    out = []
    for key, buckets in groups.items():
        buckets.sort()
        edges = [le for le, _ in buckets]
        cumulative = [c for _, c in buckets]
        counts = [b - a for a, b in zip([0.0, *cumulative], cumulative, strict=False)]
        if any(c < 0 for c in counts):
            fail(
                source,
                lines[key],
                f"expected {family} bucket counts that do not fall as le grows, got {cumulative}",
            )
        lo = [0.0, *(e + 1.0 for e in edges[:-1])]
        hi = [e + 1.0 for e in edges]
        note = f"{family}: whole ms truncated, bucket le=b is a time < b+1 ms"
        out.append(Binned(source, view, tuple(lo), tuple(hi), tuple(counts), dict(key), note))
    return out


def _response_mix(series: list[Series], source: str) -> list[ResponseCounts]:
    """Send requests per response code, per broker (``_count`` series, else the ``+Inf`` buckets)."""
    counted = [s for s in series if _kind(s, source) == ("rpc", "count")]
    if not counted:
        counted = [
            s for s in series if _kind(s, source)[0] == "rpc" and s.labels.get("le") in ("+Inf", "inf")
        ]
    mix: dict[tuple[tuple[str, str], ...], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for s in counted:
        who = tuple(sorted((k, v) for k, v in s.labels.items() if k not in _PARTS))
        mix[who][s.labels.get("response_code", "unknown")] += over_period(s)
    return [
        ResponseCounts(source, dict(counts), dict(who), "rocketmq_rpc_latency counts, send requests")
        for who, counts in mix.items()
    ]


def _store(series: list[Series], source: str) -> Measurements:
    """The exporter's per-minute put counts and p99 / p99.9, per broker label set."""
    buckets: dict[tuple[tuple[str, str], ...], list[float]] = defaultdict(lambda: [0.0] * len(STORE_BUCKETS))
    px: dict[tuple[tuple[str, str], ...], dict[float, float]] = defaultdict(dict)
    for s in series:
        who = tuple(sorted(s.labels.items()))
        values = [v for _, v in s.points if math.isfinite(v)]
        if s.name in PMDT:
            buckets[who][PMDT[s.name]] += sum(values)
        elif s.name in PUT_LATENCY and values and statistics.median(values) > 0:
            px[who][PUT_LATENCY[s.name]] = statistics.median(values)
    out = Measurements()
    for who, counts in buckets.items():
        note = "exporter pmdt gauges (one minute per point, summed)"
        out += Measurements(binned=(store_bins(counts, source, View.STORE, dict(who), note),))
    for who, levels in px.items():
        n = sum(buckets[who]) if who in buckets else None
        lv = tuple(sorted(levels))
        note = "exporter put_latency_99/999 (median over points)"
        out += Measurements(
            quantiles=(
                Quantiles(source, View.STORE, lv, tuple(levels[x] for x in lv), n or None, dict(who), note),
            )
        )
    return out


def _queues(series: list[Series], source: str) -> list[QueueSeries]:
    """The send queue's depth over the points of each gauge series (head wait unknown: -1)."""
    out = []
    for s in series:
        if s.name in QUEUE_GAUGES and _kind(s, source)[0] == "queue":
            t0 = s.points[0][0]
            out.append(
                QueueSeries(
                    source,
                    tuple(t - t0 for t, _ in s.points),
                    tuple(v for _, v in s.points),
                    tuple(-1.0 for _ in s.points),
                    s.labels,
                    s.name,
                )
            )
    return out


def measurements_from_series(series: list[Series], source: str) -> Measurements:
    """Every RocketMQ measurement in ``series``; an input without any is an error."""
    rpc = [
        s
        for s in series
        if _kind(s, source)[0] == "rpc" and s.labels.get("request_code", "send_message") in SEND_CODES
    ]
    cost = [s for s in series if _kind(s, source)[0] == "send_cost"]
    out = Measurements(
        binned=(
            *_histograms(rpc, "rocketmq_rpc_latency", source, View.BROKER, ("response_code", "success")),
            *_histograms(
                cost, "rocketmq_send_cost_time", source, View.CLIENT, ("invocation_status", "success")
            ),
        ),
        responses=tuple(_response_mix(rpc, source)),
        queues=tuple(_queues(series, source)),
    )
    out += _store([s for s in series if s.name in PMDT or s.name in PUT_LATENCY], source)
    if not out:
        fail(
            source,
            0,
            "expected RocketMQ series (rocketmq_rpc_latency*_bucket, rocketmq_send_cost_time*_bucket, "
            "rocketmq_brokeruntime_pmdt_*, rocketmq_brokeruntime_put_latency_99/999), found none",
        )
    return out
