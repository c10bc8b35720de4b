"""Small helpers the parsers share: one-line errors with the line, JSON with positions, numbers."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from rocketsim.errors import MeasurementError


def fail(source: str, line: int, reason: str) -> NoReturn:
    raise MeasurementError(source, line, reason)


def shown(value: object, width: int = 60) -> str:
    """A value as a short repr for an error line."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def load_json(text: str, source: str, expected: str) -> Any:
    """The JSON document in ``text``; a syntax error names its line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        fail(source, exc.lineno, f"expected {expected}: {exc.msg} (column {exc.colno})")


def line_of(text: str, needle: str) -> int:
    """The 1-based line where ``needle`` first occurs (0: nowhere), to name where a JSON value sits."""
    at = text.find(needle)
    return 0 if at < 0 else text.count("\n", 0, at) + 1


def json_key_line(text: str, key: str) -> int:
    return line_of(text, f'"{key}"')


Line = int | Callable[[], int]  # a line number, or how to find it (only looked up for an error)


def number(value: object, source: str, line: Line, what: str, *, minimum: float = -math.inf) -> float:
    """``value`` as a finite float >= ``minimum`` (JSON numbers, or numeric text)."""
    try:
        out = math.nan if isinstance(value, bool) else float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        out = math.nan
    if not math.isfinite(out) or out < minimum:
        fail(source, line() if callable(line) else line, f"expected {what}, got {shown(value)}")
    return out


def numbers(values: object, source: str, line: int, what: str, *, minimum: float = -math.inf) -> list[float]:
    """A JSON array of numbers (``what`` names one element)."""
    if not isinstance(values, list):
        fail(source, line, f"expected an array of {what}, got {shown(values)}")
    return [number(v, source, line, what, minimum=minimum) for v in values]


def nonblank_lines(text: str) -> Iterable[tuple[int, str]]:
    """(1-based line number, line without its end) of every line that is not blank."""
    for i, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line:
            yield i, line
