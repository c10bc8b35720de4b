"""The input formats by name, and how to tell them apart when the user names none.

Each parser takes the file's text and a source name (for errors and reports) and returns
:class:`~rocketsim.calibration.measurements.Measurements`; a bad input raises
:class:`rocketsim.errors.MeasurementError` with the line and what was expected there.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from rocketsim.calibration.measurements import Measurements, Throughput
from rocketsim.calibration.metrics import measurements_from_series
from rocketsim.calibration.parse_client import parse_benchmark, parse_histogram, parse_latency_csv
from rocketsim.calibration.parse_host import parse_cpu_json
from rocketsim.calibration.parse_logs import parse_store_log, parse_watermark_log
from rocketsim.calibration.parse_omb import parse_omb
from rocketsim.calibration.parse_prometheus import parse_exposition, parse_query_json
from rocketsim.calibration.reading import fail, shown


@dataclass(frozen=True)
class Format:
    name: str
    parse: Callable[[str, str], Measurements]
    what: str  # one line for --help and the docs


def parse_prometheus_text(text: str, source: str) -> Measurements:
    return measurements_from_series(parse_exposition(text, source), source)


def parse_prometheus_json(text: str, source: str) -> Measurements:
    return measurements_from_series(parse_query_json(text, source), source)


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("omb", parse_omb, "OpenMessaging Benchmark result JSON (client publish latency)"),
        Format("benchmark", parse_benchmark, "RocketMQ benchmark Producer output (mean and max RT)"),
        Format(
            "prometheus", parse_prometheus_text, "a Prometheus scrape (text format) of broker/client metrics"
        ),
        Format(
            "prometheus-json", parse_prometheus_json, "a Prometheus API answer (query_range or query JSON)"
        ),
        Format("csv", parse_latency_csv, "a CSV of send latencies, one per row"),
        Format("histogram", parse_histogram, 'a latency histogram JSON {"edges_ms": [...], "counts": [...]}'),
        Format("store-log", parse_store_log, "the broker's store.log ([PAGECACHERT], [STORETPS])"),
        Format("watermark-log", parse_watermark_log, "the broker's watermark.log ([WATERMARK] Send ...)"),
        Format(
            "cpu", parse_cpu_json, "the client's and broker's CPU seconds of a run (the harness's cpu.json)"
        ),
    )
}


def detect_format(text: str, source: str) -> str:
    """The format of ``text`` by its content (then its name); an input like none of them is an error."""
    head = text[:65536]
    stripped = head.lstrip()
    if stripped.startswith("{"):
        if '"broker_cpu_s"' in head:  # before omb: the harness's cpu.json has "driver_cpu_s..." keys too
            return "cpu"
        if re.search(r'"(aggregatedPublishLatency|publishLatency|publishRate|driver)\w*"\s*:', head):
            return "omb"
        if '"resultType"' in head or '"status"' in head:
            return "prometheus-json"
        if '"edges_ms"' in head:
            return "histogram"
    for tag, name in (
        ("[PAGECACHERT]", "store-log"),
        ("[STORETPS]", "store-log"),
        ("[WATERMARK]", "watermark-log"),
    ):
        if tag in head:
            return name
    if re.search(r"^(Current Time: |\[Complete\] Send Total: )", head, re.MULTILINE):
        return "benchmark"
    if re.search(r"^(# (TYPE|HELP) |rocketmq_\w+(\{| ))", head, re.MULTILINE):
        return "prometheus"
    if source.lower().endswith(".csv"):
        return "csv"
    first = stripped.splitlines()[0] if stripped else ""
    fail(
        source,
        1,
        f"expected one of the formats {', '.join(FORMATS)} (name it as FORMAT:PATH), got {shown(first)}",
    )


def parse_input(text: str, source: str, fmt: str | None = None) -> Measurements:
    """The measurements of one input in format ``fmt`` (None: detected)."""
    name = fmt or detect_format(text, source)
    if name not in FORMATS:
        fail(source, 0, f"expected a format among {', '.join(FORMATS)}, got {name!r}")
    return FORMATS[name].parse(text, source)


_SATURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][0-9]+)?)\s*(?:@\s*([0-9]+(?:\.[0-9]*)?)\s*)?$")


def parse_saturation(text: str, source: str = "--saturation") -> Throughput:
    """``RATE[@BYTES]``: the most messages per second the brokers sustain, at ``BYTES`` per message
    (body + properties, rocketsim's ``wire_bytes``; 1024 when not given)."""
    m = _SATURATION.match(text)
    if m is None or float(m[1]) <= 0 or (m[2] is not None and float(m[2]) <= 0):
        fail(
            source,
            0,
            f"expected RATE[@BYTES], e.g. 65000@1100 (messages/s > 0, bytes per message > 0), got {text!r}",
        )
    size = float(m[2]) if m[2] else None
    return Throughput(source, float(m[1]), True, size, note="the user's saturation figure")
