"""The rules a scenario key's value must meet, as its field's metadata (the rule's text and its check,
read by :mod:`rocketsim.scenario.validation` and shown on the reference page), and the limits that keep a
run's times and sizes in range (checked there too)."""

from __future__ import annotations

import typing
from typing import Any

from rocketsim.javaint import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN


def rule(text: str, check: typing.Callable[[Any], bool]) -> dict[str, Any]:
    """A field's metadata: the rule ``text`` its value must meet and the ``check`` that tells."""
    return {"rule": text, "check": check}


def ge(lo: float) -> dict[str, Any]:
    return rule(f"must be >= {lo}", lambda v: v >= lo)


def gt(lo: float) -> dict[str, Any]:
    return rule(f"must be > {lo}", lambda v: v > lo)


def between(lo: float, hi: float) -> dict[str, Any]:
    return rule(f"must be between {lo} and {hi}", lambda v: lo <= v <= hi)


def gt_le(lo: float, hi: float) -> dict[str, Any]:
    return rule(f"must be > {lo} and <= {hi}", lambda v: lo < v <= hi)


def one_of(options: tuple[str, ...]) -> dict[str, Any]:
    return rule(f"must be one of {', '.join(options)}", lambda v: v in options)


# Upper limits that keep every time in int64 milliseconds and every latency finite (beyond them a
# validated scenario used to overflow, divide by zero or loop forever inside the simulate stage).
JAVA_INT_MIN, JAVA_INT_MAX = INT_MIN, INT_MAX
JAVA_LONG_MIN, JAVA_LONG_MAX = LONG_MIN, LONG_MAX
MAX_SCENARIO_S = 31_536_000  # one year: the longest workload span or fault time
MAX_LATENCY_MS = 86_400_000  # one day: the largest latency parameter
MAX_FLAP_CYCLES = 100_000
# The largest producers.max_message_size: a commit-log file (MappedFileSize of the commit log, 1 GiB),
# which a stored record cannot exceed. The sizes that derive from it are Java ints and int32 columns:
# an oversize body (max + 1), a message's wire bytes and its store record (body + headers and
# properties); at 2147483647 they wrapped to negative sizes and offsets that still reconciled.
MAX_MESSAGE_SIZE = 1 << 30
# Bounds of a run's summary windows (the --window-ms of the jobs): queue_windows has a row per queue and
# window from the first to the last attempt, broker_windows one per broker and window.
MAX_WINDOW_MS = MAX_SCENARIO_S * 1000
MAX_WINDOWS = 1_000_000
MAX_QUEUE_WINDOW_ROWS = 20_000_000
MAX_SCENARIO_BYTES = 16 << 20  # a scenario file is a few KiB; more is a mistake (or /dev/zero)
