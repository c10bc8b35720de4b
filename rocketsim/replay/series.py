"""An incident's time series as SREs export them, read into one shape (:class:`Series`).

Two formats, told apart by their first character (``{``: JSON):

More: docs/reference/modules.md, rocketsim/replay/series.py.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from rocketsim.errors import RocketSimError
from rocketsim.replay.kinds import ERRORS, KINDS, LATENCY, UP

# the metric names each kind accepts (calibration.md 2.1-2.4: the 5.x broker's OpenTelemetry names with and
# without the unit suffix, the 5.x client's, the 4.x exporter's gauges); a series without a name is an
# expression over them
METRIC_NAMES = {
    LATENCY: re.compile(
        r"^(rocketmq_rpc_latency(_milliseconds)?_bucket|rocketmq_send_cost_time(_milliseconds)?_bucket"
        r"|rocketmq_brokeruntime_put_latency_99+)$"
    ),
    ERRORS: re.compile(r"^rocketmq_rpc_latency(_milliseconds)?_count$"),
    UP: re.compile(r"^up$"),
}
# labels that name a broker, the first present wins (5.x node_id, the exporter's broker/brokerIP, a scrape
# target's instance)
BROKER_LABELS = ("node_id", "broker", "brokerName", "broker_name", "brokerIP", "instance", "pod")
UNITS_MS = {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1000.0, "min": 60_000.0}
_VALUE_UNIT = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-zµ%/]*)\s*$")
_LABEL = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


class SeriesError(RocketSimError, ValueError):
    """An input that is not what its kind expects: names the file, the line or field, and what was
    expected."""


@dataclass(frozen=True)
class Series:
    """One series of one broker (its raw identity, mapped to a scenario broker later): what it measures,
    its times (unix seconds, ascending) and values (NaN: no value)."""

    source: str
    kind: str
    broker: str
    times_s: np.ndarray
    values: np.ndarray
    labels: Mapping[str, str] = field(default_factory=dict)
    counter: bool = False  # a raw counter (its increases are the data), not a rate or a level

    @property
    def le(self) -> float | None:
        """The bucket's upper bound (ms) of a histogram bucket series."""
        return float(self.labels["le"]) if "le" in self.labels else None

    @property
    def code(self) -> str | None:
        """The response code of a requests-by-code series."""
        return self.labels.get("response_code")


def read_series(text: str, source: str, kind: str) -> list[Series]:
    """Every series of one file: a Prometheus range query or a Grafana CSV (told by the first character).
    Latency is in ms (a Grafana cell with a unit of time is converted)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    body = text.lstrip("\ufeff").lstrip()
    if not body:
        raise SeriesError(
            f"{source}: expected a Prometheus query_range JSON or a Grafana CSV, got an empty file"
        )
    series = prometheus_series(body, source, kind) if body[0] == "{" else grafana_series(text, source, kind)
    if not series:
        raise SeriesError(f"{source}: expected at least one series, got none")
    return series


# ---- Prometheus --------------------------------------------------------------------------------------


def prometheus_series(text: str, source: str, kind: str) -> list[Series]:
    """The series of a ``query_range`` answer."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SeriesError(
            f"{source}: line {exc.lineno} column {exc.colno}: expected JSON, got {exc.msg}"
        ) from None
    data = raw.get("data") if isinstance(raw, Mapping) else None
    if not isinstance(data, Mapping) or raw.get("status") != "success":
        raise SeriesError(
            f'{source}: expected a Prometheus query_range answer ({{"status": "success", "data": ...}}), '
            f"got status {raw.get('status') if isinstance(raw, Mapping) else type(raw).__name__!r}"
        )
    if data.get("resultType") != "matrix":
        raise SeriesError(
            f'{source}: field data.resultType: expected "matrix" (a range query, /api/v1/query_range), '
            f"got {data.get('resultType')!r}"
        )
    results = data.get("result")
    if not isinstance(results, list):
        raise SeriesError(f"{source}: field data.result: expected an array of series")
    return [_prometheus_one(r, f"{source}: data.result[{i}]", source, kind) for i, r in enumerate(results)]


def _prometheus_one(result: object, where: str, source: str, kind: str) -> Series:
    if not isinstance(result, Mapping) or not isinstance(result.get("metric"), Mapping):
        raise SeriesError(f"{where}: expected an object with metric labels and values")
    labels = {str(k): str(v) for k, v in result["metric"].items()}
    values = result.get("values")
    if not isinstance(values, list):
        raise SeriesError(f'{where}.values: expected an array of [unix seconds, "value"] pairs')
    times, numbers = np.empty(len(values)), np.empty(len(values))
    for j, point in enumerate(values):
        if not (isinstance(point, list) and len(point) == 2 and isinstance(point[0], int | float)):
            raise SeriesError(
                f'{where}.values[{j}]: expected [unix seconds, "value"], got {json.dumps(point)[:60]}'
            )
        times[j] = float(point[0])
        numbers[j] = _number(point[1], f"{where}.values[{j}]")
    name = labels.pop("__name__", None)
    _check_name(name, kind, where)
    # a raw histogram counter (its increases are the data), unless the exporter writes deltas
    counter = (name or "").endswith(("_bucket", "_count")) and labels.get("aggregation") != "delta"
    return Series(source, kind, _broker_of(labels, where), times, numbers, labels, counter)


def _number(text: object, where: str) -> float:
    try:
        return float(text)  # type: ignore[arg-type]  # Prometheus writes "NaN", "+Inf", "-Inf"
    except (TypeError, ValueError):
        raise SeriesError(f"{where}: expected a number as text, got {json.dumps(text)[:60]}") from None


def _check_name(name: str | None, kind: str, where: str) -> None:
    if name is not None and not METRIC_NAMES[kind].match(name):
        raise SeriesError(
            f"{where}: metric {name!r} is not a {kind} metric rocketsim reads (expected a name matching "
            f"{METRIC_NAMES[kind].pattern}, or an expression over one)"
        )


def _broker_of(labels: Mapping[str, str], where: str) -> str:
    for label in BROKER_LABELS:
        if labels.get(label):
            return labels[label]
    raise SeriesError(
        f"{where}: expected a label naming the broker (one of {', '.join(BROKER_LABELS)}), got {dict(labels)}"
    )


# ---- Grafana CSV ---------------------------------------------------------------------------------------


def grafana_series(text: str, source: str, kind: str) -> list[Series]:
    """The series of a Grafana CSV download (wide, one block per series, or ``Series,Time,Value``)."""
    lines = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    delimiter = None
    first = 0
    if lines and lines[0].startswith("sep="):
        delimiter, first = lines[0][4:5] or ",", 1
    out: list[Series] = []
    block: list[tuple[int, str]] = []
    for number, line in enumerate(lines[first:], start=first + 1):
        if line.strip():
            block.append((number, line))
        elif block:
            out += _csv_block(block, source, kind, delimiter)
            block = []
    if block:
        out += _csv_block(block, source, kind, delimiter)
    return out


def _delimiter(header: str) -> str:
    """The locale's list separator: the one of , ; tab that splits the header into most fields."""
    return max((",", ";", "\t"), key=lambda d: len(next(csv.reader([header], delimiter=d))))


def _csv_block(block: list[tuple[int, str]], source: str, kind: str, delimiter: str | None) -> list[Series]:
    header_line, header_text = block[0]
    sep = delimiter or _delimiter(header_text)
    rows = list(csv.reader(io.StringIO("\n".join(t for _, t in block)), delimiter=sep))
    header = [h.strip() for h in rows[0]]
    lower = [h.lower() for h in header]
    if "time" not in lower:
        raise SeriesError(
            f"{source}: line {header_line}: expected a header with a Time column and one column per broker "
            f"(Grafana: Inspect -> Data -> Download CSV), got {header}"
        )
    at_time = lower.index("time")
    body = rows[1:]
    for i, row in enumerate(body):
        if len(row) != len(header):
            raise SeriesError(
                f"{source}: line {block[i + 1][0]}: expected {len(header)} cells as in the header, "
                f"got {len(row)}"
            )
    times = _times([r[at_time] for r in body], source, [n for n, _ in block[1:]])
    if lower == ["series", "time", "value"] or (set(lower) >= {"series", "value"} and len(lower) == 3):
        return _long_block(header, body, times, source, kind, [n for n, _ in block[1:]])
    out = []
    for j, name in enumerate(header):
        if j == at_time:
            continue
        values = _cells([r[j] for r in body], source, [n for n, _ in block[1:]], name, kind)
        out.append(_csv_series(name, times, values, source, kind, f"{source}: line {header_line}"))
    return out


def _long_block(
    header: list[str], body: list[list[str]], times: np.ndarray, source: str, kind: str, numbers: list[int]
) -> list[Series]:
    lower = [h.lower() for h in header]
    s_at, v_at = lower.index("series"), lower.index("value")
    names = [r[s_at] for r in body]
    values = _cells([r[v_at] for r in body], source, numbers, "Value", kind)
    out = []
    for name in dict.fromkeys(names):
        rows = np.array([n == name for n in names])
        out.append(_csv_series(name, times[rows], values[rows], source, kind, f"{source}: series {name!r}"))
    return out


def _csv_series(
    name: str, times: np.ndarray, values: np.ndarray, source: str, kind: str, where: str
) -> Series:
    labels = dict(_LABEL.findall(name)) if "=" in name else {}
    metric = name.split("{", 1)[0].strip() if "{" in name else None
    _check_name(metric or None, kind, where)
    broker = _broker_of(labels, where) if labels else name
    order = np.argsort(times, kind="stable")
    return Series(source, kind, broker, times[order], values[order], labels, counter=False)


def _times(cells: Sequence[str], source: str, numbers: list[int]) -> np.ndarray:
    """Epoch ms or s as numbers, else dates as Grafana formats them (their zone does not matter: only
    differences are used)."""
    out = np.empty(len(cells))
    for i, cell in enumerate(cells):
        text = cell.strip()
        try:
            number = float(text)
            out[i] = number / 1000.0 if number > 1e11 else number
            continue
        except ValueError:
            pass
        try:
            out[i] = pd.Timestamp(text).timestamp()
        except (ValueError, TypeError):
            raise SeriesError(
                f"{source}: line {numbers[i]}: Time: expected epoch milliseconds or a date, got {cell!r}"
            ) from None
    return out


def _cells(cells: Sequence[str], source: str, numbers: list[int], column: str, kind: str) -> np.ndarray:
    """Cell values: empty -> NaN; a number with a unit (time units to ms, % to a fraction)."""
    out = np.empty(len(cells))
    for i, cell in enumerate(cells):
        text = cell.strip()
        if not text or text.lower() in ("null", "nan", "none", "-"):
            out[i] = math.nan
            continue
        # "1,234.5": thousands; "12,3": a decimal comma (a locale whose list separator is ";")
        m = _VALUE_UNIT.match(text.replace(",", "") if "." in text else text.replace(",", "."))
        unit = m.group(2) if m else None
        if m is None or (unit and unit not in UNITS_MS and unit not in ("%", "req/s", "ops/s", "/s", "rps")):
            raise SeriesError(
                f"{source}: line {numbers[i]}: column {column!r}: expected a number (with a unit such as ms, "
                f"s or %), got {cell!r}"
            )
        value = float(m.group(1))
        if unit == "%":
            value /= 100.0
        elif unit in UNITS_MS and kind == LATENCY:
            value *= UNITS_MS[unit]
        out[i] = value
    return out
