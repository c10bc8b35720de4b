"""``producer_windows`` rows of whole producers: the parts that add up over any split of their rows
(:class:`WindowParts`), and the rows made from them (their queue spread as partials until the run's
queue count is known); the windows an isolation interval overlaps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa

from rocketsim.tables import schemas
from rocketsim.tables.grouping import Groups, ints, joint_lookup, lookup, string_codes, window_index
from rocketsim.tables.summaries.aggregates import (
    AGGREGATE_TABLES,
    BUSY_COLUMNS,
    I64,
    PERCENTILE_COLUMNS,
    PERCENTILES,
    QUEUE_WAIT_COLUMNS,
    QUEUE_WAIT_PERCENTILES,
    SPREAD_PARTIALS,
)
from rocketsim.tables.summaries.arithmetic import (
    arrow_column,
    histogram,
    percentile_columns,
    rate_per_s,
    spread_partials,
)
from rocketsim.tables.summaries.cells import QueueCells
from rocketsim.tables.summaries.columns import AttemptColumns, ResultColumns

_WINDOW_SUMS = (
    "sends",
    "ok",
    "failed",
    "rejected",
    "attempts",
    "retries",
    "retry_budget_exhausted",
    "bytes",
    *schemas.DELIVERY_COLUMNS,
    *BUSY_COLUMNS,
)


@dataclass(frozen=True)
class WindowParts:
    """``producer_windows`` of some producers before its rows are made: what adds up over any split of
    their rows, per (producer, window index) cell: the sums, the (value, count) histograms of the
    results' latency and queue wait, and the attempts per queue (``queues``: producer, window, broker
    code into ``brokers``, queue, count). :func:`merge_window_parts` adds parts up; :func:`finish_windows`
    makes the rows."""

    producer: np.ndarray
    window: np.ndarray
    sums: dict[str, np.ndarray]
    latency: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # (producer, window, value, count)
    queue_wait: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    queues: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # broker codes (-1: none)
    brokers: tuple[str, ...]  # the names of the queues' broker codes


def window_parts(a: AttemptColumns, r: ResultColumns, q: QueueCells) -> WindowParts:
    """The :class:`WindowParts` of some whole messages' results and their attempts (``q``: their queue
    cells)."""
    g = Groups([r.producer, r.window])
    sums = {
        "sends": g.count(),
        "ok": g.sum(r.ok),
        "failed": g.sum(r.failed),
        "rejected": g.sum(r.rejected),
        "attempts": g.sum(r.attempts),
        "retries": g.sum(np.maximum(r.attempts - 1, 0)),
        "retry_budget_exhausted": g.sum(r.exhausted),
        "bytes": g.sum(r.wire),
        **{name: g.sum(values) for name, values in r.delivery.items()},
    }
    busy = _busy_per_send(a, r)
    sums |= {name: g.sum(busy[:, j]) for j, name in enumerate(BUSY_COLUMNS)}
    cell_p, cell_w = r.producer[g.first], r.window[g.first]
    hists = []
    for attr in ("latency", "queue_wait"):
        group, value, n = histogram(g.index, getattr(r, attr), g.n, partial(r.value_order, attr))
        hists.append((cell_p[group], cell_w[group], value, n))
    queues = (q.producer, q.window, q.broker, q.queue, q.counts["sends"])
    return WindowParts(cell_p, cell_w, sums, hists[0], hists[1], queues, tuple(a.broker_names.to_pylist()))


def _busy_per_send(a: AttemptColumns, r: ResultColumns) -> np.ndarray:
    """Per result row, its attempts the closed-loop store rejected, one column per :data:`BUSY_COLUMNS`
    (the attempts are the results' sends', any order)."""
    out = np.zeros((r.n, len(BUSY_COLUMNS)), np.int64)
    hit = a.busy >= 0
    if not hit.any():
        return out
    order = np.lexsort((r.seq, r.producer))
    row = joint_lookup([r.producer[order], r.seq[order]], [a.producer[hit], a.seq[hit]])
    if (row < 0).any():
        raise ValueError("an attempt of a send whose result is not among the results")
    np.add.at(out, (order[row], a.busy[hit]), 1)
    return out


def merge_window_parts(parts: Sequence[WindowParts]) -> WindowParts:
    """Parts of disjoint rows (any split of the producers' rows) as one."""
    if len(parts) == 1:
        return parts[0]

    def cat(get: Callable[[WindowParts], np.ndarray]) -> np.ndarray:
        return np.concatenate([get(x) for x in parts])

    producer, window = cat(lambda x: x.producer), cat(lambda x: x.window)
    g = Groups([producer, window])
    sums = {name: g.sum(cat(lambda x, n=name: x.sums[n])) for name in _WINDOW_SUMS}
    hists = []
    for attr in ("latency", "queue_wait"):
        p, w, v, n = (cat(lambda x, i=i, a=attr: getattr(x, a)[i]) for i in range(4))
        h = Groups([p, w, v])
        hists.append((p[h.first], w[h.first], v[h.first], h.sum(n)))
    p, w, q, n = (cat(lambda x, i=i: x.queues[i]) for i in (0, 1, 3, 4))
    brokers = tuple(dict.fromkeys(name for x in parts for name in x.brokers))
    joint = {name: k for k, name in enumerate(brokers)}
    # each part's codes as codes into the names of every part (-1, no broker, stays -1: the lut's last)
    b = cat(lambda x: np.array([*(joint[name] for name in x.brokers), -1], np.int64)[x.queues[2]])
    per_queue = Groups([p, w, b, q])
    f = per_queue.first
    queues = (p[f], w[f], b[f], q[f], per_queue.sum(n))
    return WindowParts(producer[g.first], window[g.first], sums, hists[0], hists[1], queues, brokers)


def producer_window_rows(
    a: AttemptColumns, r: ResultColumns, q: QueueCells, intervals: pa.Table, window_ms: int
) -> pa.Table:
    """``producer_windows`` rows of whole producers, with the partials of their queue spread in place of
    it (the run's queue count is known only at the end)."""
    return finish_windows(window_parts(a, r, q), intervals, window_ms)


def finish_windows(parts: WindowParts, intervals: pa.Table, window_ms: int) -> pa.Table:
    """``producer_windows`` rows of whole producers from their :class:`WindowParts` (every row's)."""
    schema = AGGREGATE_TABLES["producer_windows"]
    if not len(parts.producer):
        return schema.empty_table()
    g = Groups([parts.producer, parts.window])  # the cells, in (producer, window) order
    cell_p, cell_w = parts.producer[g.first], parts.window[g.first]
    sums = {name: g.sum(values) for name, values in parts.sums.items()}
    sends = sums["sends"]
    cols: dict[str, object] = {
        "producer": pa.array(cell_p.astype(np.int32)),
        "window_start_ms": cell_w * np.int64(window_ms),
        "window_ms": np.full(g.n, window_ms, np.int64),
        **{name: sums[name] for name in ("sends", "ok", "failed", "rejected")},
    }
    cols["publish_rate_per_s"] = rate_per_s(cols["ok"], window_ms)
    cols["error_rate"] = (cols["failed"] + cols["rejected"]).astype(np.float64) / sends.astype(np.float64)
    for name in ("attempts", "retries", "retry_budget_exhausted", "bytes", *schemas.DELIVERY_COLUMNS):
        cols[name] = sums[name]
    for name in BUSY_COLUMNS:
        cols[name] = sums[name]
    for (p, w, value, n), names, ps, max_name in (
        (parts.latency, PERCENTILE_COLUMNS, PERCENTILES, "latency_max_ms"),
        (parts.queue_wait, QUEUE_WAIT_COLUMNS, QUEUE_WAIT_PERCENTILES, "queue_wait_max_ms"),
    ):
        group = joint_lookup([cell_p, cell_w], [p, w])
        cols.update(percentile_columns(group, value, n, g.n, ps, names, max_name))

    # queue spread partials: the producers' attempts per (window of attempt start, broker, queue)
    partials = [np.zeros(g.n, np.int64) for _ in SPREAD_PARTIALS]
    has_partials = np.zeros(g.n, bool)
    qp, qw, _, _, counts = parts.queues
    if len(qp):
        cell = Groups([qp, qw])
        at = joint_lookup([cell_p, cell_w], [qp[cell.first], qw[cell.first]])
        found = at >= 0
        for part, values in zip(partials, spread_partials(cell.index, counts, cell.n), strict=True):
            part[at[found]] = values[found]
        has_partials[at[found]] = True
    for name, values in zip(SPREAD_PARTIALS, partials, strict=True):
        cols[name] = arrow_column(values, I64, has_partials)

    cols["isolated_brokers"] = _isolated_brokers(intervals, cell_p, cell_w, window_ms)
    return pa.table({f.name: cols[f.name] for f in schema}).cast(schema)


def interval_windows(
    intervals: pa.Table, window_ms: int, lo: np.ndarray | None = None, hi: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(interval row, window index) for every window an interval overlaps (``interval_windows``:
    ``floor(start / w)`` to ``floor((end - 1) / w)``), clipped to ``[lo, hi]`` per interval."""
    first = window_index(ints(intervals, "start_ms"), window_ms)
    last = window_index(ints(intervals, "end_ms") - 1, window_ms)
    if lo is not None and hi is not None:
        first, last = np.maximum(first, lo), np.minimum(last, hi)
    n = np.maximum(last - first + 1, 0)
    row = np.repeat(np.arange(len(n)), n)
    within = np.arange(len(row)) - np.repeat(np.cumsum(n) - n, n)
    return row, first[row] + within


def _isolated_brokers(
    intervals: pa.Table, cell_producer: np.ndarray, cell_window: np.ndarray, window_ms: int
) -> np.ndarray:
    """``countDistinct(broker)`` of the intervals overlapping each (producer, window index) cell (the
    sorted unique cells of a producer_windows table)."""
    out = np.zeros(len(cell_producer), np.int64)
    if not intervals.num_rows or not len(cell_producer):
        return out
    producer = ints(intervals, "producer")
    per_producer = Groups([cell_producer])  # each producer's first and last window
    at = lookup(cell_producer[per_producer.first], producer)
    lo = np.where(at >= 0, per_producer.min(cell_window)[np.maximum(at, 0)], 1)
    hi = np.where(at >= 0, per_producer.max(cell_window)[np.maximum(at, 0)], 0)  # none: nothing
    row, window = interval_windows(intervals, window_ms, lo, hi)
    cell = joint_lookup([cell_producer, cell_window], [producer[row], window])
    hit = cell >= 0
    if hit.any():
        distinct = Groups([cell[hit], string_codes(intervals.column("broker"))[0][row][hit]])
        np.add.at(out, cell[hit][distinct.first], 1)
    return out
