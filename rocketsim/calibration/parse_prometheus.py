"""Prometheus data: the text exposition format (a scrape of ``/metrics``) and the HTTP API's JSON
(``/api/v1/query_range`` matrices, ``/api/v1/query`` vectors), read into series of (time, value) points.

The text format is read line by line here (``prometheus_client``'s parser gives no line numbers, and a
bad line must be named): ``name{label="value",...} value [timestamp_ms]``, label values with the escapes
``\\\\``, ``\\"`` and ``\\n``, values as Go floats (``+Inf``, ``NaN``). ``#`` lines are comments (``# TYPE``,
``# HELP``, OpenMetrics' ``# EOF``). What the series mean is :mod:`rocketsim.calibration.metrics`'s.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from rocketsim.calibration.reading import fail, json_key_line, line_of, load_json, nonblank_lines, shown

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*\"")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}
SAMPLE_EXPECTED = "expected a sample 'name{label=\"value\",...} value [timestamp]'"


@dataclass
class Series:
    """One series: its metric name (``""`` when a query dropped it), labels, and points in time order
    (seconds; 0 for a scrape line without a timestamp)."""

    name: str
    labels: dict[str, str]
    points: list[tuple[float, float]] = field(default_factory=list)
    line: int = 0  # where it first appears in the input

    @property
    def key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return self.name, tuple(sorted(self.labels.items()))


def go_float(text: str) -> float:
    """A Prometheus value (Go's ParseFloat: ``+Inf``, ``-Inf``, ``NaN`` too)."""
    lowered = text.strip().lower()
    if lowered in ("+inf", "inf"):
        return math.inf
    if lowered == "-inf":
        return -math.inf
    return float(text)


def _labels(text: str, at: int, source: str, line: int) -> tuple[dict[str, str], int]:
    """The ``{...}`` label set starting at ``text[at] == "{"``, and the index after its ``}``."""
    labels: dict[str, str] = {}
    i = at + 1
    while True:
        while i < len(text) and text[i] in " ,":
            i += 1
        if i < len(text) and text[i] == "}":
            return labels, i + 1
        m = _LABEL.match(text, i)
        if m is None:
            fail(
                source,
                line,
                f'expected a label name="value" at column {i + 1}, got {shown(text[i : i + 30])}',
            )
        i = m.end()
        value = []
        while i < len(text) and text[i] != '"':
            if text[i] == "\\" and i + 1 < len(text):
                value.append(_ESCAPES.get(text[i + 1], "\\" + text[i + 1]))
                i += 2
            else:
                value.append(text[i])
                i += 1
        if i >= len(text):
            fail(source, line, f"expected a closing quote for label {m[1]}")
        labels[m[1]] = "".join(value)
        i += 1


def parse_exposition(text: str, source: str) -> list[Series]:
    """Every sample of a text exposition, grouped into series (a series' points in input order)."""
    series: dict[tuple[str, tuple[tuple[str, str], ...]], Series] = {}
    for i, line in nonblank_lines(text):
        if line.startswith("#"):
            continue
        m = _NAME.match(line)
        if m is None:
            fail(source, i, f"{SAMPLE_EXPECTED}, got {shown(line)}")
        labels, rest = ({}, m.end())
        if line[m.end() : m.end() + 1] == "{":
            labels, rest = _labels(line, m.end(), source, i)
        parts = line[rest:].split()
        if len(parts) not in (1, 2):
            fail(source, i, f"{SAMPLE_EXPECTED}, got {shown(line)}")
        try:
            value = go_float(parts[0])
            t = float(parts[1]) / 1000.0 if len(parts) == 2 else 0.0
        except ValueError:
            fail(source, i, f"{SAMPLE_EXPECTED} (a number after the labels), got {shown(line)}")
        s = Series(m[0], labels, line=i)
        series.setdefault(s.key, s).points.append((t, value))
    if not series:
        fail(source, 0, f"{SAMPLE_EXPECTED}: found no samples")
    return list(series.values())


def parse_query_json(text: str, source: str) -> list[Series]:
    """The series of a ``query_range`` (``matrix``) or ``query`` (``vector``) answer."""
    doc = load_json(text, source, "a Prometheus API answer (JSON)")
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, dict) or data.get("resultType") not in ("matrix", "vector"):
        if isinstance(doc, dict) and doc.get("status") == "error":
            fail(source, 1, f"expected a successful answer, got error {shown(doc.get('error'))}")
        fail(source, 1, 'expected {"status": "success", "data": {"resultType": "matrix" or "vector", ...}}')
    results = data.get("result")
    if not isinstance(results, list):
        fail(source, json_key_line(text, "result"), 'expected "result" as an array of series')
    out = []
    for k, item in enumerate(results):
        where = line_of(text, '"metric"') if k == 0 else json_key_line(text, "result")
        if not isinstance(item, dict) or not isinstance(item.get("metric"), dict):
            fail(source, where, f'expected result[{k}] as {{"metric": {{...}}, "values": [...]}}')
        labels = {str(a): str(b) for a, b in item["metric"].items()}
        name = labels.pop("__name__", "")
        raw = item.get("values") if data["resultType"] == "matrix" else [item.get("value")]
        s = Series(name, labels, _points(raw, source, where, k), line=where)
        out.append(s)
    if not out:
        fail(source, json_key_line(text, "result"), "expected at least one series in result")
    return out


def _points(raw: object, source: str, line: int, k: int) -> list[tuple[float, float]]:
    if not isinstance(raw, list):
        fail(source, line, f'expected result[{k}] to hold [timestamp, "value"] pairs, got {shown(raw)}')
    points = []
    for pair in raw:
        try:
            t, v = pair
            points.append((float(t), go_float(str(v))))
        except (TypeError, ValueError):
            fail(source, line, f'expected [timestamp, "value"] in result[{k}], got {shown(pair)}')
    return sorted(points)
