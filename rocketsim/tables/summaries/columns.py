"""The attempt and result columns the summary aggregates read, as numpy arrays read once (brokers
and outcome labels as codes), and the outcome column an attempt's outcome label counts in.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from rocketsim.broker import store
from rocketsim.client.outcomes import NOT_OK_STATUSES
from rocketsim.engine.plan import ONEWAY_SENT
from rocketsim.tables.grouping import Groups, bools, ints, string_codes, window_index
from rocketsim.tables.summaries.aggregates import (
    BUSY_COLUMNS,
    FAILED_OTHER,
    I64,
    OUTCOME_COLUMNS,
    OUTCOME_KINDS,
)


def outcome_kind(label: str) -> int:
    """The outcome column of an attempt's outcome label (:data:`OUTCOME_KINDS`), as an index into
    :data:`OUTCOME_COLUMNS`."""
    for column, how, text in OUTCOME_KINDS:
        if label == text if how == "equals" else label.startswith(text):
            return OUTCOME_COLUMNS.index(column)
    return FAILED_OTHER


def _outcome_kinds(outcome: pa.ChunkedArray) -> np.ndarray:
    codes, names = string_codes(outcome)
    lut = np.array([outcome_kind(s) for s in names.to_pylist()] or [FAILED_OTHER], np.int64)
    return lut[codes]


class AttemptColumns:
    """Attempt columns as numpy, read once (brokers and outcomes as codes)."""

    def __init__(self, t: pa.Table, window_ms: int) -> None:
        self.n = t.num_rows
        self.producer = ints(t, "producer")
        self.seq = ints(t, "seq")
        self.attempt = ints(t, "attempt")
        self.start = ints(t, "start_ts_ms")
        self.latency = ints(t, "latency_ms")
        self.end = self.start + self.latency
        self.broker, self.broker_names = string_codes(t.column("broker"))
        self.queue = ints(t, "queue_id")
        self.kind = _outcome_kinds(t.column("outcome"))
        self.wire = ints(t, "wire_bytes")
        until = t.column("fault_isolated_until_ms")
        self.has_until = bools(until.is_valid())
        self.until = np.asarray(until.fill_null(0).to_numpy(), np.int64)
        self.window = window_index(self.start, window_ms)
        # the closed-loop store's columns (absent in tables written before them: as with coupling open)
        names = t.column_names
        busy = t.column("busy_kind") if "busy_kind" in names else pa.nulls(self.n, pa.string())
        labels = [name.removeprefix("busy_").upper() for name in BUSY_COLUMNS]
        # index into BUSY_COLUMNS, -1: not rejected
        self.busy = _code_lookup(busy, lambda value: labels.index(value) if value in labels else -1)
        depth = t.column("store_queue_depth") if "store_queue_depth" in names else pa.nulls(self.n, I64)
        self.seen = bools(depth.is_valid())
        self.depth = np.asarray(depth.fill_null(0).to_numpy(), np.int64)
        service = t.column("store_service_us") if "store_service_us" in names else pa.nulls(self.n, I64)
        self.service = np.asarray(service.fill_null(0).to_numpy(), np.int64)

    def counts(self, cells: Groups) -> dict[str, np.ndarray]:
        """The attempt counts (``COUNT_FIELDS``: attempts, by outcome, retries, bytes, by busy kind) per
        group of ``cells``, which groups every attempt, in order."""
        by_kind = cells.code_counts(self.kind, len(OUTCOME_COLUMNS))
        by_busy = cells.code_counts(self.busy, len(BUSY_COLUMNS))
        return {
            "sends": cells.count(),
            **{name: by_kind[:, k] for k, name in enumerate(OUTCOME_COLUMNS)},
            "retries": cells.sum(self.attempt > 0),
            "bytes": cells.sum(self.wire),
            **{name: by_busy[:, j] for j, name in enumerate(BUSY_COLUMNS)},
        }


class ResultColumns:
    """Result columns as numpy, read once."""

    def __init__(self, t: pa.Table, window_ms: int, copies: np.ndarray) -> None:
        self.n = t.num_rows
        if len(copies) != self.n:
            raise ValueError(f"copies has {len(copies)} values for {self.n} results")
        self.delivery = store.delivery_flags(t.column("status"), copies)
        self.producer = ints(t, "producer")
        self.seq = ints(t, "seq")
        self.send = ints(t, "send_ts_ms")
        self.window = window_index(self.send, window_ms)
        self.status = _statuses(t)  # STATUS_COLUMNS -> mask
        self.ok, self.failed, self.rejected = (self.status[n] for n in ("ok", "failed", "rejected"))
        self.attempts = ints(t, "attempts")
        self.exhausted = bools(t.column("retry_budget_exhausted"))
        self.wire = ints(t, "wire_bytes")
        self.latency = ints(t, "latency_ms")
        self.queue_wait = ints(t, "queue_wait_ms")
        self.born = ints(t, "born_ts_ms")
        self.end = ints(t, "end_ts_ms")
        self.broker, self.broker_names = string_codes(t.column("broker"))  # -1: none
        # run_summary's scope of a message: the broker of a stored result; -1: not stored
        self.scope = np.where((self.broker >= 0) & ~self.failed & ~self.rejected, self.broker, -1)
        self._orders: dict[str, np.ndarray] = {}

    def value_order(self, name: str) -> np.ndarray:
        """The stable row order of a column's values (shared by the histograms of that column)."""
        if name not in self._orders:
            self._orders[name] = np.argsort(getattr(self, name), kind="stable")
        return self._orders[name]


def _code_lookup(column: pa.ChunkedArray, value_of: Callable[[str], object]) -> np.ndarray:
    """``value_of`` each row's string (a null: ``value_of(None)``), computed once per distinct string:
    one encoding pass over the rows, then a lookup."""
    codes, names = string_codes(column)
    lut = np.array([*(value_of(s) for s in names.to_pylist()), value_of(None)])  # code -1: the last
    return lut[codes]


def _statuses(results: pa.Table) -> dict[str, np.ndarray]:
    """Per :data:`STATUS_COLUMNS` name, the mask of the results it counts (by ``status``; null: none)."""
    codes, names = string_codes(results.column("status"))
    values = names.to_pylist()
    return {
        name: np.array([*(v in statuses for v in values), False])[codes]
        for name, statuses in (
            ("ok", ["SEND_OK"]),
            ("failed", ["FAILED"]),
            ("rejected", ["REJECTED"]),
            ("not_ok_status", list(NOT_OK_STATUSES)),
            ("oneway", [ONEWAY_SENT]),
        )
    }
