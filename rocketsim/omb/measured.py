"""An OpenMessaging Benchmark result file read into a measured run that charts overlay on a simulated one.

Every field of ``TestResult`` is optional: files from OMB before 2020-08 lack the description counts,
before 2022-04 ``publishDelay*``, before 2022-09 ``publishErrorRate``, and forks add fields of their own
(ignored). What is there must have OMB's type: a per-window field is an array of numbers (``null`` and
Jackson's ``NaN`` read as NaN), an aggregated field a number, a quantile map an object whose keys are
percentiles written by ``Double.toString`` (``"8.280981931675837E-7"``, ``"100.0"``) and whose values are
numbers. Anything else is an :class:`OmbFormatError` naming the file, the field and what was expected.

A run made by :func:`rocketsim.omb.result.omb_result` reads back the same way, so a simulated run and a
measured one share one structure (:class:`OmbRun`) and one set of axes: per window (10 s) the publish
p99 and rates, and the quantile curve.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from rocketsim.errors import RocketSimError
from rocketsim.omb.result import (
    AGGREGATED_FIELDS,
    META_FIELDS,
    OMB_WINDOW_MS,
    QUANTILE_FIELDS,
    WINDOW_FIELDS,
)

_TEXT_FIELDS = ("workload", "driver")


class OmbFormatError(RocketSimError, ValueError):
    """A file that is not an OMB result: names the file, the field (or line) and what was expected."""


@dataclass(frozen=True)
class OmbRun:
    """One OMB result: its description, its per-window series (10 s each, the first from 0 s), its
    aggregated figures and its quantile curves (percentile -> value, ascending)."""

    source: str
    workload: str | None = None
    driver: str | None = None
    counts: dict[str, int] = field(default_factory=dict)  # messageSize, topics, partitions, ...
    series: dict[str, np.ndarray] = field(default_factory=dict)  # publishRate, publishLatency99pct, ...
    aggregated: dict[str, float] = field(default_factory=dict)
    quantiles: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    window_s: float = OMB_WINDOW_MS / 1000.0

    @property
    def label(self) -> str:
        """How charts name it: the driver, and the workload when there is one."""
        name = self.driver or self.source
        return f"{name} ({self.workload})" if self.workload else name

    def times_s(self, name: str) -> np.ndarray:
        """The start of each window of a series (``create_charts.py``: ``10 * index``)."""
        return np.arange(len(self.series.get(name, ())), dtype=np.float64) * self.window_s

    def has(self, name: str) -> bool:
        return name in self.series or name in self.quantiles or name in self.aggregated


def parse_result(text: str | bytes, source: str) -> OmbRun:
    """Read an OMB result file's text; :class:`OmbFormatError` for anything that is not one."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OmbFormatError(
            f"{source}: line {exc.lineno} column {exc.colno}: expected OMB's JSON result, got {exc.msg}"
        ) from None
    except UnicodeDecodeError as exc:
        raise OmbFormatError(
            f"{source}: expected UTF-8 JSON, got byte 0x{exc.object[exc.start]:02x}"
        ) from None
    if not isinstance(raw, Mapping):
        raise OmbFormatError(f"{source}: expected a JSON object (OMB's TestResult), got {type(raw).__name__}")
    return from_mapping(raw, source)


def from_mapping(raw: Mapping, source: str) -> OmbRun:
    """An :class:`OmbRun` of a parsed result (an exported one, or a file's)."""
    texts = {name: _text(raw, name, source) for name in _TEXT_FIELDS if name in raw}
    counts = {
        name: _number(raw[name], name, source, integer=True)
        for name in META_FIELDS
        if name in raw and name not in _TEXT_FIELDS
    }
    series = {name: _numbers(raw[name], name, source) for name in WINDOW_FIELDS if name in raw}
    aggregated = {name: _number(raw[name], name, source) for name in AGGREGATED_FIELDS if name in raw}
    quantiles = {name: _quantiles(raw[name], name, source) for name in QUANTILE_FIELDS if name in raw}
    return OmbRun(
        source=source,
        workload=texts.get("workload"),
        driver=texts.get("driver"),
        counts={k: int(v) for k, v in counts.items()},
        series=series,
        aggregated=aggregated,
        quantiles=quantiles,
    )


def _text(raw: Mapping, name: str, source: str) -> str:
    value = raw[name]
    if not isinstance(value, str):
        raise OmbFormatError(f"{source}: field {name}: expected a string, got {json.dumps(value)[:60]}")
    return value


def _number(value: object, name: str, source: str, integer: bool = False) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or (integer and not float(value).is_integer()):  # type: ignore[arg-type]
        kind = "an integer" if integer else "a number"
        raise OmbFormatError(f"{source}: field {name}: expected {kind}, got {json.dumps(value)[:60]}")
    return float(value)  # type: ignore[arg-type]


def _numbers(value: object, name: str, source: str) -> np.ndarray:
    if not isinstance(value, list):
        raise OmbFormatError(
            f"{source}: field {name}: expected an array of numbers (one per window), got "
            f"{json.dumps(value)[:60]}"
        )
    out = np.empty(len(value), np.float64)
    for i, v in enumerate(value):
        out[i] = math.nan if v is None else _number(v, f"{name}[{i}]", source)
    return out


def _quantiles(value: object, name: str, source: str) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(value, Mapping):
        raise OmbFormatError(
            f"{source}: field {name}: expected an object of percentile -> value, got {json.dumps(value)[:60]}"
        )
    pairs = []
    for key, v in value.items():
        try:
            p = float(key)
        except ValueError:
            p = math.nan
        if not 0.0 <= p <= 100.0:
            raise OmbFormatError(
                f"{source}: field {name}: key {key!r}: expected a percentile between 0 and 100 "
                '(Java\'s Double.toString, e.g. "99.9" or "8.28E-7")'
            )
        pairs.append((p, _number(v, f"{name}[{key!r}]", source)))
    pairs.sort()
    return np.array([p for p, _ in pairs], np.float64), np.array([v for _, v in pairs], np.float64)
