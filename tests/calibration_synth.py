"""Users' file formats written from latencies drawn from a known model: each generator records the
latencies as the real producer of that format does (HdrHistogram's 3 significant digits for OMB,
truncated whole ms for OTel histograms and StoreStatsService, ...), so a fit of the parsed text must
find the model again."""

from __future__ import annotations

import json
import math

import numpy as np

from rocketsim.calibration.metrics import PMDT_SUFFIXES
from rocketsim.calibration.parse_logs import STORE_BUCKETS

RPC_BUCKETS = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)  # RemotingMetricsManager.getMetricsView
SEND_COST_BUCKETS = (1, 5, 10, 20, 50, 200, 500)  # rocketmq-clients HistogramEnum.SEND_COST_TIME
BROKER_LABELS = (
    'otel_scope_name="broker-meter",cluster="DefaultCluster",is_long_polling="false",node_id="broker-a",'
    'node_type="broker",protocol_type="remoting",request_code="send_message_v2"'
)


def omb_json(latencies_ms: np.ndarray, windows: int = 6) -> str:
    """An OMB result: HdrHistogram-like buckets (values rounded up to 3 significant digits of µs), the
    percentile reached at each, keys as Java Double.toString-like text; 10 s windows of the rates."""
    us = np.ceil(latencies_ms * 1000.0)
    digits = np.floor(np.log10(np.maximum(us, 1.0))) - 2
    upper = np.ceil(us / 10**digits) * 10**digits
    values, counts = np.unique(upper, return_counts=True)
    pct = np.cumsum(counts) / len(us) * 100.0
    quantiles = {
        repr(float(p)) if p < 100 else "100.0": float(v) / 1000.0 for p, v in zip(pct, values, strict=True)
    }
    rate = len(us) / (10.0 * windows)
    per_window = np.array_split(latencies_ms, windows)
    doc = {
        "workload": "synthetic",
        "driver": "RocketMQ",
        "publishRate": [rate] * windows,
        "publishLatency50pct": [float(np.quantile(w, 0.5)) for w in per_window],
        "publishLatency99pct": [float(np.quantile(w, 0.99)) for w in per_window],
        "aggregatedPublishLatency50pct": float(np.quantile(latencies_ms, 0.5)),
        "aggregatedPublishLatencyQuantiles": quantiles,
    }
    return json.dumps(doc, indent=2).replace('": ', '" : ')


def _cumulative(floor_ms: np.ndarray, bounds: tuple[int, ...]) -> list[int]:
    return [int(np.sum(floor_ms <= b)) for b in bounds] + [len(floor_ms)]


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(float(bound))


def rpc_latency_text(latencies_ms: np.ndarray, busy: int = 0) -> str:
    """A 5.x broker scrape: rocketmq_rpc_latency_milliseconds of the send requests, floor(ms)."""
    lines = ["# TYPE rocketmq_rpc_latency histogram", "# HELP rocketmq_rpc_latency Rpc latency"]
    floor = np.floor(latencies_ms)
    for code, values in (("success", floor), ("system_busy", np.zeros(busy))):
        labels = f'{BROKER_LABELS},response_code="{code}",result="success"'
        lines.append(
            f"rocketmq_rpc_latency_milliseconds_count{{{labels}}} {float(len(values))} 1726000000000"
        )
        for b, c in zip((*RPC_BUCKETS, math.inf), _cumulative(values, RPC_BUCKETS), strict=True):
            lines.append(
                f'rocketmq_rpc_latency_milliseconds_bucket{{{labels},le="{_le(b)}"}} {float(c)} 1726000000000'
            )
    return "\n".join(lines) + "\n"


def send_cost_text(latencies_ms: np.ndarray) -> str:
    """A 5.x client histogram rocketmq_send_cost_time (floor ms: duration.toMillis())."""
    labels = 'client_id="c1",invocation_status="success",topic="T"'
    cum = _cumulative(np.floor(latencies_ms), SEND_COST_BUCKETS)
    return "".join(
        f'rocketmq_send_cost_time_milliseconds_bucket{{{labels},le="{_le(b)}"}} {float(c)}\n'
        for b, c in zip((*SEND_COST_BUCKETS, math.inf), cum, strict=True)
    )


def query_range_json(latencies_ms: np.ndarray, points: int = 4) -> str:
    """The rpc_latency _bucket counters over time (a query_range matrix), with a broker restart between
    two points (the counters fall back and count on)."""
    parts = np.array_split(np.floor(latencies_ms), points - 1)
    labels = {
        "__name__": "rocketmq_rpc_latency_milliseconds_bucket",
        "node_id": "broker-a",
        "request_code": "send_message",
        "response_code": "success",
    }
    result = []
    for b in (*RPC_BUCKETS, math.inf):
        values, total = [[1726000000, "1000"]], 1000  # counted before the range: not in the increase
        for i, part in enumerate(parts):
            c = int(np.sum(part <= b))
            total = c if i == 1 else total + c  # the restart: the counter starts again
            values.append([1726000000 + 60 * (i + 1), str(total)])
        result.append({"metric": {**labels, "le": _le(b)}, "values": values})
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}})


def store_counts(latencies_ms: np.ndarray) -> list[int]:
    """StoreStatsService buckets of whole-ms put times."""
    floor = np.floor(latencies_ms)
    return [int(np.sum((floor >= lo) & (floor < hi))) for _, lo, hi in STORE_BUCKETS]


def pagecachert_log(latencies_ms: np.ndarray) -> str:
    """store.log with two one-minute PAGECACHERT windows and their STORETPS lines."""
    lines = []
    for minute, part in enumerate(np.array_split(latencies_ms, 2)):
        stamp = f"2026-11-27 15:2{minute}:16"
        counts = store_counts(part)
        dist = " ".join(f"[{name}]:{c}" for (name, _, _), c in zip(STORE_BUCKETS, counts, strict=True))
        lines.append(
            f"{stamp} INFO StoreStatsService - [STORETPS] put_tps {len(part) / 60} get_found_tps 0.0 "
            "get_miss_tps 0.0 get_transfered_tps 0.0"
        )
        lines.append(
            f"{stamp} INFO StoreStatsService - [PAGECACHERT] TotalPut {len(part)}, "
            f"PutMessageDistributeTime {dist} "
        )
    return "\n".join(lines) + "\n"


def pmdt_text(latencies_ms: np.ndarray) -> str:
    """The 4.x exporter's pmdt gauges (one minute's put counts)."""
    labels = (
        'brokerHost="h",brokerIP="10.0.0.1:10911",broker_version="393",boottime="1",cluster="C",des="V4_9_8"'
    )
    return "".join(
        f"rocketmq_brokeruntime_pmdt_{s}{{{labels},}} {float(c)}\n"
        for s, c in zip(PMDT_SUFFIXES, store_counts(latencies_ms), strict=True)
    )


def put_latency_text(p99_ms: float, p999_ms: float) -> str:
    labels = 'brokerIP="10.0.0.1:10911",cluster="C"'
    return (
        f"rocketmq_brokeruntime_put_latency_99{{{labels},}} {p99_ms}\n"
        f"rocketmq_brokeruntime_put_latency_999{{{labels},}} {p999_ms}\n"
    )


def latency_csv(latencies_ms: np.ndarray) -> str:
    return "latency_us\n" + "\n".join(f"{v * 1000:.1f}" for v in latencies_ms) + "\n"


def histogram_json(latencies_ms: np.ndarray) -> str:
    """As the real-broker harness writes it: 241 log bins from 0.01 ms to 60 s, first edge 0."""
    edges = np.concatenate([[0], np.logspace(-2, np.log10(60000), 241)])
    counts = np.histogram(latencies_ms, bins=edges)[0]
    return json.dumps({"edges_ms": [round(float(e), 4) for e in edges], "ok": counts.tolist()})


def benchmark_text(latencies_ms: np.ndarray, windows: int = 5, interval_s: float = 10.0) -> str:
    """The benchmark Producer's lines (5.x form with '|'): per window TPS and mean, running max."""
    lines = ["topic: BenchTopic threadCount: 64 messageSize: 1024 keyEnable: false"]
    running_max = 0
    for k, part in enumerate(np.array_split(latencies_ms, windows)):
        running_max = max(running_max, int(np.floor(part.max())))
        tps = int(len(part) / interval_s)
        lines.append(
            f"Current Time: 2026-11-27 07:29:{10 + k * 10:02d},403 | Send TPS: {tps} | Max RT(ms): "
            f"{running_max} | Average RT(ms): {part.mean():7.3f} | Send Failed: 0 | Response Failed: 0"
        )
    return "\n".join(lines) + "\n"
