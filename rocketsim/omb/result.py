"""A run's sends as an OpenMessaging Benchmark ``TestResult`` (the JSON file ``Benchmark.java`` writes).

OMB counts as its RocketMQ driver and ``WorkloadGenerator.printAndCollectStats`` do, and so does this:

More: docs/reference/modules.md, rocketsim/omb/result.py.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim.broker.store import SENT_STATUSES
from rocketsim.omb import hdr
from rocketsim.scenario import Scenario
from rocketsim.tables.grouping import bools, ints, window_index
from rocketsim.tables.summaries import (
    PERCENTILE_COLUMNS,
    PERCENTILES,
    QUEUE_WAIT_COLUMNS,
    QUEUE_WAIT_PERCENTILES,
    exact_percentiles,
)

OMB_WINDOW_MS = 10_000  # WorkloadGenerator: Thread.sleep(10000) between two getPeriodStats
# what the export reads of send_results
RESULT_COLUMNS = ("status", "end_ts_ms", "latency_ms", "queue_wait_ms")
# the percentiles of the per-window and aggregated fields, and their names' suffixes
OMB_PERCENTILES = ((50.0, "50pct"), (75.0, "75pct"), (95.0, "95pct"), (99.0, "99pct"), (99.9, "999pct"),
                   (99.99, "9999pct"))  # fmt: skip
STATS = ("Avg", *(name for _, name in OMB_PERCENTILES), "Max")  # publishLatencyAvg ... publishLatencyMax

# TestResult's fields (benchmark-framework/.../TestResult.java, in its order; Jackson writes them so), by kind
META_FIELDS = ("workload", "driver", "messageSize", "topics", "partitions", "producersPerTopic",
               "consumersPerTopic")  # fmt: skip
LATENCY_FIELDS = ("publishLatency", "publishDelayLatency", "endToEndLatency")  # + a STATS suffix
WINDOW_FIELDS = (
    "publishRate",
    "publishErrorRate",
    "consumeRate",
    "backlog",
    *(f"{f}{s}" for f in LATENCY_FIELDS for s in STATS),
)
AGGREGATED_FIELDS = tuple(f"aggregated{f[0].upper()}{f[1:]}{s}" for f in LATENCY_FIELDS for s in STATS)
QUANTILE_FIELDS = tuple(f"aggregated{f[0].upper()}{f[1:]}Quantiles" for f in LATENCY_FIELDS)
FIELD_ORDER = (
    *META_FIELDS,
    *WINDOW_FIELDS[:4],
    *(f"{f}{s}" for f in LATENCY_FIELDS[:2] for s in STATS),
    *AGGREGATED_FIELDS[: 2 * len(STATS)],
    *QUANTILE_FIELDS[:2],
    *(f"endToEndLatency{s}" for s in STATS),
    QUANTILE_FIELDS[2],
    *AGGREGATED_FIELDS[2 * len(STATS) :],
)
_US_PER_MS = 1000


@dataclass(frozen=True)
class OmbMeta:
    """The result's description fields (``TestResult.workload`` ... ``consumersPerTopic``)."""

    workload: str
    driver: str
    message_size: int
    topics: int
    partitions: int
    producers_per_topic: int
    consumers_per_topic: int = 0


def meta_of(sc: Scenario, driver: str, workload: str | None = None) -> OmbMeta:
    """OMB's description of a run of ``sc``: the scenario's name, the median body size, the topics, the
    topic's queues over the cluster (``partitions``: OMB's partitions per topic), the producers; no
    consumers."""
    return OmbMeta(
        workload=workload or sc.name,
        driver=driver,
        message_size=int(sc.workload.body_size.median),
        topics=len(sc.workload.topics),
        partitions=sc.cluster.write_queues * len(sc.cluster.brokers),
        producers_per_topic=sc.producers.count,
    )


def file_name(meta: OmbMeta, started_at: datetime) -> str:
    """``Benchmark.java``'s name: ``<workload>-<driver>-yyyy-MM-dd-HH-mm-ss.json`` (a '/' in a name,
    which OMB would take for a folder, becomes '-', as ``create_charts.py`` does for its charts)."""
    stamp = started_at.strftime("%Y-%m-%d-%H-%M-%S")
    return f"{meta.workload}-{meta.driver}-{stamp}.json".replace("/", "-").replace("\\", "-")


# ---- the sends, folded into exact histograms ----------------------------------------------------------


def _counted(keys: np.ndarray, counts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys (sorted) and the sum of their counts (1 each without ``counts``)."""
    if counts is None:
        return np.unique(keys, return_counts=True)
    distinct, at = np.unique(keys, return_inverse=True)
    return distinct, np.bincount(at, weights=counts, minlength=len(distinct)).astype(np.int64)


_VALUE_BITS = 32  # a (window, value) key: window << 32 | value (values: whole ms below a day)


@dataclass
class PublishFold:
    """Exact histograms of a run's sends, fed a part of ``send_results`` at a time (any order, any
    split: the histograms are sums): per OMB window, the latency and the delay (whole ms) of the
    published sends and the number of errors; and, for checking the export against the run's
    ``run_summary``, every message's status, latency and queue wait."""

    window_ms: int = OMB_WINDOW_MS
    _parts: dict[str, list[tuple[np.ndarray, np.ndarray]]] = field(
        default_factory=lambda: {n: [] for n in ("latency", "delay", "errors", "all_latency", "all_wait")}
    )
    statuses: dict[str, int] = field(default_factory=dict)

    def add(self, results: pa.Table | pa.RecordBatch) -> None:
        """Fold rows with the columns :data:`RESULT_COLUMNS`."""
        t = pa.table(results) if isinstance(results, pa.RecordBatch) else results
        status = t.column("status")
        published = bools(pc.is_in(status, pa.array(SENT_STATUSES)))
        window = window_index(ints(t, "end_ts_ms"), self.window_ms)
        latency, wait = ints(t, "latency_ms"), ints(t, "queue_wait_ms")
        at = window[published] << _VALUE_BITS
        self._parts["latency"].append(_counted(at | latency[published]))
        self._parts["delay"].append(_counted(at | wait[published]))
        self._parts["errors"].append(_counted(window[~published]))
        self._parts["all_latency"].append(_counted(latency))
        self._parts["all_wait"].append(_counted(wait))
        for item in pc.value_counts(status).to_pylist():
            self.statuses[item["values"]] = self.statuses.get(item["values"], 0) + item["counts"]

    def histogram(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(keys, counts) of one histogram, merged."""
        parts = self._parts[name]
        if not parts:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        merged = _counted(np.concatenate([k for k, _ in parts]), np.concatenate([c for _, c in parts]))
        self._parts[name] = [merged]
        return merged

    def windowed(self, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(window, value ms, count) of the latency or delay histogram."""
        keys, counts = self.histogram(name)
        return keys >> _VALUE_BITS, keys & ((1 << _VALUE_BITS) - 1), counts

    def summary(self) -> dict[str, float | int | None]:
        """The run_summary columns of scope "all" these sends give (messages, ok, failed, rejected, the
        exact send-latency and queue-wait percentiles and maxima), to check an export against its run."""
        out: dict[str, float | int | None] = {
            "messages": sum(self.statuses.values()),
            "ok": self.statuses.get("SEND_OK", 0),
            "failed": self.statuses.get("FAILED", 0),
            "rejected": self.statuses.get("REJECTED", 0),
        }
        for name, columns, ps, top in (
            ("all_latency", PERCENTILE_COLUMNS, PERCENTILES, "latency_max_ms"),
            ("all_wait", QUEUE_WAIT_COLUMNS, QUEUE_WAIT_PERCENTILES, "queue_wait_max_ms"),
        ):
            values, counts = self.histogram(name)
            pct, has = exact_percentiles(np.zeros(len(values), np.int64), values, counts, 1, ps)
            for j, column in enumerate(columns):
                out[column] = float(pct[0, j]) if has[0] else None
            out[top] = int(values[-1]) if len(values) else None
        return out


# ---- the TestResult -------------------------------------------------------------------------------


def _recorded_us(values_ms: np.ndarray) -> np.ndarray:
    """What OMB records of a time in ms: microseconds, clamped to 60 s (``Math.min(highestTrackableValue,
    ...)``)."""
    return np.minimum(np.asarray(values_ms, np.int64) * _US_PER_MS, hdr.HIGHEST_TRACKABLE_US)


@dataclass(frozen=True)
class _Histogram:
    """One HdrHistogram: bucket keys ascending and their counts."""

    keys: np.ndarray
    counts: np.ndarray

    @staticmethod
    def of(values_ms: np.ndarray, counts: np.ndarray) -> _Histogram:
        return _Histogram(*hdr.bucketed(_recorded_us(values_ms), counts))

    def stats(self) -> tuple[float, list[int], int]:
        """(getMean, getValueAtPercentile of each OMB percentile, getMaxValue), in microseconds."""
        ps = [p for p, _ in OMB_PERCENTILES]
        return (
            hdr.mean(self.keys, self.counts),
            hdr.percentiles(self.keys, self.counts, ps),
            hdr.max_value(self.keys),
        )


def _per_window(
    window: np.ndarray, values: np.ndarray, counts: np.ndarray, windows: Sequence[int]
) -> list[_Histogram]:
    return [_Histogram.of(values[window == w], counts[window == w]) for w in windows]


def _series(hists: Sequence[_Histogram], millis: bool) -> dict[str, list]:
    """The ``Avg``, percentile and ``Max`` arrays of a field, one value per window: latency in ms
    (``microsToMillis``: us / 1000.0, doubles), delay in us (the mean a double, the rest longs)."""
    out: dict[str, list] = {name: [] for name in STATS}
    for h in hists:
        avg, pcts, top = h.stats()
        out["Avg"].append(avg / 1000.0 if millis else avg)
        for (_, name), v in zip(OMB_PERCENTILES, pcts, strict=True):
            out[name].append(v / 1000.0 if millis else v)
        out["Max"].append(top / 1000.0 if millis else top)
    return out


def _aggregated(h: _Histogram, millis: bool) -> dict[str, float | int]:
    return {name: values[0] for name, values in _series([h], millis).items()}


def omb_result(fold: PublishFold, meta: OmbMeta, skip_windows: int = 0) -> dict:
    """The ``TestResult`` of the folded sends, as a JSON object with OMB's fields in ``TestResult``'s
    order (Jackson writes them so): one element per 10 s window from window ``skip_windows`` (a warm-up
    left out, as OMB discards its warm-up run) to the last window in which a send ended, and the
    aggregated fields over those windows."""
    lw, lv, lc = fold.windowed("latency")
    dw, dv, dc = fold.windowed("delay")
    ew, ec = fold.histogram("errors")
    last = max([int(a.max()) for a in (lw, ew) if len(a)], default=skip_windows)
    windows = list(range(skip_windows, max(last, skip_windows) + 1))
    seconds = fold.window_ms / 1000.0
    ok_counts = [int(lc[lw == w].sum()) for w in windows]
    err_counts = [int(ec[ew == w].sum()) for w in windows]
    latency = _series(_per_window(lw, lv, lc, windows), millis=True)
    delay = _series(_per_window(dw, dv, dc, windows), millis=False)
    kept_l, kept_d = lw >= skip_windows, dw >= skip_windows
    agg_latency = _Histogram.of(lv[kept_l], lc[kept_l])
    agg_delay = _Histogram.of(dv[kept_d], dc[kept_d])
    zeros = [0.0] * len(windows)
    out: dict = {
        "workload": meta.workload,
        "driver": meta.driver,
        "messageSize": meta.message_size,
        "topics": meta.topics,
        "partitions": meta.partitions,
        "producersPerTopic": meta.producers_per_topic,
        "consumersPerTopic": meta.consumers_per_topic,
        "publishRate": [n / seconds for n in ok_counts],
        "publishErrorRate": [n / seconds for n in err_counts],
        "consumeRate": list(zeros),
        "backlog": [0] * len(windows),
        **{f"publishLatency{name}": latency[name] for name in STATS},
        **{f"publishDelayLatency{name}": delay[name] for name in STATS},
        **{f"aggregatedPublishLatency{k}": v for k, v in _aggregated(agg_latency, True).items()},
        **{f"aggregatedPublishDelayLatency{k}": v for k, v in _aggregated(agg_delay, False).items()},
        "aggregatedPublishLatencyQuantiles": hdr.quantile_map(agg_latency.keys, agg_latency.counts, 1000.0),
        "aggregatedPublishDelayLatencyQuantiles": hdr.quantile_map(agg_delay.keys, agg_delay.counts),
        **{f"endToEndLatency{name}": list(zeros) for name in STATS},
        "aggregatedEndToEndLatencyQuantiles": {},
        **{f"aggregatedEndToEndLatency{name}": 0.0 for name in STATS},
    }
    return {name: out[name] for name in FIELD_ORDER}


# ---- the JSON text ------------------------------------------------------------------------------------


def java_double(x: float) -> str:
    """``Double.toString(x)`` (how Jackson writes a ``Map<Double, ...>`` key): the shortest digits that
    read back as ``x``, plain between 1e-3 and 1e7 (at least one decimal), else ``d.dddE<exp>``."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0.0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    digits, exponent = _shortest_digits(abs(x))
    point = exponent + 1  # digits before the decimal point
    if 1e-3 <= abs(x) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        whole, frac = (digits + "0" * point)[:point], digits[point:]
        return f"{sign}{whole}.{frac or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def _shortest_digits(x: float) -> tuple[str, int]:
    """The shortest digits that read back as ``x`` > 0 (Python's ``repr``, the same digits Java 19+
    prints), without trailing zeros, and the decimal exponent of the first one."""
    _, digits, exp = Decimal(repr(x)).normalize().as_tuple()
    text = "".join(map(str, digits))
    return text, int(exp) + len(text) - 1


def _json_value(value: object, indent: str) -> str:
    """One value as Jackson's default pretty printer writes it: doubles by ``Double.toString``, arrays
    on one line (``[ 1.0, 2.0 ]``), objects one key a line."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"an OMB result holds finite numbers only, got {value}")
        return java_double(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Mapping):
        if not value:
            return "{ }"
        inner = indent + "  "
        keys = [java_double(k) if isinstance(k, float) else str(k) for k in value]
        pairs = zip(keys, value.values(), strict=True)
        items = [f"{inner}{json.dumps(k)} : {_json_value(v, inner)}" for k, v in pairs]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    if isinstance(value, list | tuple):
        return "[ " + ", ".join(_json_value(v, indent) for v in value) + " ]" if value else "[ ]"
    raise TypeError(f"an OMB result holds no {type(value).__name__}")


def result_json(result: Mapping) -> str:
    """The result as ``Benchmark.java`` writes it (Jackson's pretty printer: ``"key" : value``; doubles
    and the keys of a ``Map<Double, ...>`` by ``Double.toString``)."""
    return _json_value(result, "") + "\n"


def fold_results(parts: Iterable[pa.Table | pa.RecordBatch], window_ms: int = OMB_WINDOW_MS) -> PublishFold:
    """:class:`PublishFold` of every part."""
    fold = PublishFold(window_ms)
    for part in parts:
        fold.add(part)
    return fold
