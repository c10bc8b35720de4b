"""One producer task's summary aggregates: of whole producers' attempts and results at once
(:func:`producer_aggregates`) or a part of their rows at a time (:class:`ProducerFold`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial

import numpy as np
import pyarrow as pa

from rocketsim.broker import store
from rocketsim.tables.grouping import Groups, distinct_values, from_codes, regroup
from rocketsim.tables.summaries.aggregates import (
    AGGREGATE_TABLES,
    MERGE_RULES,
    NAME,
    OK,
    OUTCOME_COLUMNS,
    SummaryAggregates,
    merge,
    with_keys,
)
from rocketsim.tables.summaries.arithmetic import histogram
from rocketsim.tables.summaries.cells import QueueCells
from rocketsim.tables.summaries.columns import AttemptColumns, ResultColumns
from rocketsim.tables.summaries.faults import FaultSpan, fault_parts
from rocketsim.tables.summaries.intervals import IntervalFold, attempt_intervals
from rocketsim.tables.summaries.windows import (
    WindowParts,
    finish_windows,
    merge_window_parts,
    producer_window_rows,
    window_parts,
)


def _keyed(table: pa.Table, keys: Mapping[str, str]) -> pa.Table:
    """``table`` with the constant key columns first."""
    for i, (name, value) in enumerate(keys.items()):
        codes = np.zeros(table.num_rows, np.int64)
        table = table.add_column(
            i, pa.field(name, NAME, nullable=False), from_codes(codes, pa.array([value]))
        )
    return table


def producer_aggregates(
    attempts: pa.Table,
    results: pa.Table,
    window_ms: int,
    keys: Mapping[str, str] | None = None,
    *,
    messages: pa.Table,
    faults: Sequence[FaultSpan] = (),
) -> SummaryAggregates:
    """The summary aggregates of whole producers' attempts and results (``send_attempts`` /
    ``send_results`` columns as the simulator returns them; ``run_id`` and store columns are ignored).

    ``messages``: the same producers' messages (:data:`MESSAGE_COLUMNS`), for ``run_summary``'s delivery
    columns (the copies the brokers stored of each message, :func:`rocketsim.broker.store.result_copies`).

    ``keys``: constant key columns of these rows, e.g. ``{"variant": "fault_on"}`` in a comparison.
    ``faults``: the scenario's faults (:func:`rocketsim.tables.summaries.fault_spans`), for
    ``fault_windows``.
    The producer-level parts (``producer_windows``, ``intervals``) are finished here, so merging needs
    every row of a producer in one aggregate.
    """
    keys = dict(keys or {})
    if window_ms <= 0:
        raise ValueError(f"window_ms must be > 0, got {window_ms}")
    copies = store.result_copies(messages, attempts, results)
    a, r = AttemptColumns(attempts, window_ms), ResultColumns(results, window_ms, copies)
    q = QueueCells.of(a)
    intervals = attempt_intervals(a)
    tables = {
        **_attempt_parts(a, q, window_ms),
        **_result_parts(r),
        "delivery_cells": _delivery_cells(r, window_ms),
        **fault_parts(a, q, r, faults),
        "producer_windows": producer_window_rows(a, r, q, intervals, window_ms),
        "intervals": intervals,
        "producers": pa.table(
            {"producer": pa.array(distinct_values(a.producer, r.producer).astype(np.int32))}
        ),
    }
    tables = {
        name: _keyed(t.cast(AGGREGATE_TABLES[name]), keys).cast(with_keys(AGGREGATE_TABLES[name], keys))
        for name, t in tables.items()
    }
    return SummaryAggregates(window_ms, tuple(keys), **tables)


class ProducerFold:
    """:func:`producer_aggregates` of whole producers given a part of their rows at a time (a producer
    task's chunks: rows of whole messages in seq order, :func:`rocketsim.stage.tables.producer_chunks`): the
    tables that add up are made per part and merged, ``producer_windows`` from its :class:`WindowParts`,
    and the ``intervals`` by an :class:`IntervalFold` (an attempt's piece ends at the next attempt's
    end, maybe in a later part: it keeps only the attempts not yet settled)."""

    def __init__(
        self, window_ms: int, keys: Mapping[str, str] | None = None, faults: Sequence[FaultSpan] = ()
    ) -> None:
        if window_ms <= 0:
            raise ValueError(f"window_ms must be > 0, got {window_ms}")
        self.window_ms, self.keys, self.faults = window_ms, dict(keys or {}), tuple(faults)
        self._tables: list[dict[str, pa.Table]] = []
        self._windows: list[WindowParts] = []
        self._intervals = IntervalFold()
        self._producers = np.zeros(0, np.int64)

    def add(
        self,
        attempts: pa.Table,
        results: pa.Table,
        messages: pa.Table,
        later_start_ms: int | None = None,
        copies: np.ndarray | None = None,
    ) -> None:
        """One part: the results of some whole messages, their sends' attempts, those messages; no attempt
        of a later part starts before ``later_start_ms`` (None: not known, nothing settles before the
        end); ``copies``: their :func:`rocketsim.broker.store.result_copies` when known."""
        if copies is None:
            copies = store.result_copies(messages, attempts, results)
        a, r = AttemptColumns(attempts, self.window_ms), ResultColumns(results, self.window_ms, copies)
        q = QueueCells.of(a)
        self._tables.append(
            {
                **_attempt_parts(a, q, self.window_ms),
                **_result_parts(r),
                "delivery_cells": _delivery_cells(r, self.window_ms),
                **fault_parts(a, q, r, self.faults),
            }
        )
        self._windows.append(window_parts(a, r, q))
        self._producers = np.union1d(self._producers, q.producer)  # every attempt's producer has a cell
        self._intervals.add(a, self._intervals.watermark if later_start_ms is None else later_start_ms)

    def result(self) -> SummaryAggregates:
        """The aggregates of every part added (as :func:`producer_aggregates` of all their rows)."""
        merged: dict[str, pa.Table] = {}
        for name in MERGE_RULES:
            both = pa.concat_tables([t[name].cast(AGGREGATE_TABLES[name]) for t in self._tables])
            keys, sums, mins, maxs = MERGE_RULES[name]
            merged[name] = regroup(both, keys, sums, mins, maxs)
        intervals = self._intervals.result()
        windows = merge_window_parts(self._windows) if self._windows else None
        producers = np.unique(np.concatenate([w.producer for w in self._windows] + [np.zeros(0, np.int64)]))
        producers = np.union1d(producers, self._producers)
        tables = {
            **merged,
            "producer_windows": (
                finish_windows(windows, intervals, self.window_ms)
                if windows is not None
                else AGGREGATE_TABLES["producer_windows"].empty_table()
            ),
            "intervals": intervals,
            "producers": pa.table({"producer": pa.array(producers.astype(np.int32))}),
        }
        keys = self.keys
        tables = {
            name: _keyed(t.cast(AGGREGATE_TABLES[name]), keys).cast(with_keys(AGGREGATE_TABLES[name], keys))
            for name, t in tables.items()
        }
        return merge([SummaryAggregates(self.window_ms, tuple(keys), **tables)])


def _attempt_parts(a: AttemptColumns, q: QueueCells, window_ms: int) -> dict[str, pa.Table]:
    """attempt_cells, attempt_latency, queue_cells (from the attempts' queue cells ``q``)."""
    if not a.n:
        return {
            n: AGGREGATE_TABLES[n].empty_table() for n in ("attempt_cells", "attempt_latency", "queue_cells")
        }
    cells = Groups([q.broker, q.window])  # of the queue cells
    f = cells.first
    attempt_cells = pa.table(
        {
            "broker": from_codes(q.broker[f], a.broker_names),
            "window_start_ms": q.window[f] * np.int64(window_ms),
            **q.sums(cells),
        }
    )
    cell, latency, n = histogram(cells.index[q.rows.index], a.latency, cells.n)
    at = f[cell]
    attempt_latency = pa.table(
        {
            "broker": from_codes(q.broker[at], a.broker_names),
            "window_start_ms": q.window[at] * np.int64(window_ms),
            "latency_ms": latency,
            "count": n,
        }
    )
    qc = Groups([q.broker, q.queue, q.window])
    f = qc.first
    queue_cells = pa.table(
        {
            "broker": from_codes(q.broker[f], a.broker_names),
            "queue_id": pa.array(q.queue[f].astype(np.int32)),
            "window_start_ms": q.window[f] * np.int64(window_ms),
            "sends": qc.sum(q.counts["sends"]),
            "ok": qc.sum(q.counts[OUTCOME_COLUMNS[OK]]),
        }
    )
    return {"attempt_cells": attempt_cells, "attempt_latency": attempt_latency, "queue_cells": queue_cells}


def _result_parts(r: ResultColumns) -> dict[str, pa.Table]:
    """result_scopes, result_latency, result_queue_wait: run_summary's message columns per scope (the
    broker of a stored result; null for results not stored: FAILED, REJECTED or no broker)."""
    names = ("result_scopes", "result_latency", "result_queue_wait")
    if not r.n:
        return {n: AGGREGATE_TABLES[n].empty_table() for n in names}
    g = Groups([r.scope])
    scopes = pa.table(
        {
            "broker": from_codes(r.scope[g.first], r.broker_names),
            "messages": g.count(),
            **{name: g.sum(mask) for name, mask in r.status.items()},
            "attempts": g.sum(r.attempts),
            "retries": g.sum(np.maximum(r.attempts - 1, 0)),
            "retry_budget_exhausted": g.sum(r.exhausted),
            **{name: g.sum(values) for name, values in r.delivery.items()},
            "first_born_ms": g.min(r.born),
            "last_end_ms": g.max(r.end),
        }
    )
    out = {"result_scopes": scopes}
    for name, column, attr in (
        ("result_latency", "latency_ms", "latency"),
        ("result_queue_wait", "queue_wait_ms", "queue_wait"),
    ):
        group, value, n = histogram(g.index, getattr(r, attr), g.n, partial(r.value_order, attr))
        out[name] = pa.table(
            {"broker": from_codes(r.scope[g.first[group]], r.broker_names), column: value, "count": n}
        )
    return out


def _delivery_cells(r: ResultColumns, window_ms: int) -> pa.Table:
    """delivery_cells: the delivery outcomes of the messages per (the result's broker, window of the
    send's start), cells with any only. A message with an outcome always had an attempt, so a broker."""
    flagged = np.zeros(r.n, bool)
    for values in r.delivery.values():
        flagged |= values > 0
    rows = np.flatnonzero(flagged)
    if not len(rows):
        return AGGREGATE_TABLES["delivery_cells"].empty_table()
    if int(r.broker[rows].min()) < 0:
        raise AssertionError("a message with a delivery outcome has no broker")
    g = Groups([r.broker[rows], r.window[rows]])
    return pa.table(
        {
            "broker": from_codes(r.broker[rows][g.first], r.broker_names),
            "window_start_ms": r.window[rows][g.first] * np.int64(window_ms),
            **{name: g.sum(values[rows]) for name, values in r.delivery.items()},
        }
    )
