"""The summary tables of a run from small mergeable aggregates: ``isolation_intervals``, ``broker_windows``,
``queue_windows``, ``producer_windows``, ``run_summary`` (design §6, one pass; the broker-side tables:
:mod:`rocketsim.broker.side`).

* a producer task calls :func:`producer_aggregates` on its own attempts and results (whole producers):
  a :class:`SummaryAggregates` of small Arrow tables (counts, bytes, exact (value, count) latency and
  queue-wait histograms over integer ms, the producer's isolation intervals, its finished
  ``producer_windows`` rows), which travels to the driver as bytes (:meth:`SummaryAggregates.to_bytes`);
* the driver calls :func:`merge` (associative, any order gives the same value) and
  :func:`summary_tables`.

Exactness. The tables equal, bit for bit and nulls included, what Spark aggregations over the
committed attempts and results computed before (the tests keep those as an oracle and compare both ways
on the same runs): every float is computed with Spark's expression in Spark's order of operations:

* windows: ``floor(ts / window_ms) * window_ms`` divides as doubles
  (:func:`rocketsim.tables.grouping.spark_window`);
* percentiles: ``Percentile.getPercentile`` (``percentiles.scala``): position ``(n - 1) * p`` as a
  double, the values at ranks ``floor`` and ``ceil`` of it (first cumulative count > rank), and
  ``(higher - pos) * low + (pos - lower) * high`` unless the ranks or the values are equal
  (:func:`exact_percentiles`);
* ratios: ``num.cast(double) / den`` where ``den > 0``, else null; rates ``ok * 1000.0 / window_ms``;
  ``avg`` as the double sum over the count;
* queue skew and Gini: ranks by count, the sum of rank * count summed as a long then cast, idle queues
  shifting the ranks, from per-cell partials (:func:`queue_spread`).

Sums and counts are integers and so exact in any order; merged tables are sorted by their keys, so the
order of the aggregates does not matter. A comparison tags each producer's aggregates with its key
columns (``keys={"variant": name}``): every table is then computed per key and carries the key columns
first. ``run_id`` is the scheduler's.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim.broker import store
from rocketsim.tables import schemas
from rocketsim.tables.grouping import (
    Groups,
    all_found,
    bools,
    distinct_values,
    first_of_runs,
    from_codes,
    ints,
    joint_codes,
    joint_lookup,
    key_codes,
    lookup,
    regroup,
    sort_order,
    sort_rows,
    string_codes,
    window_index,
)

__all__ = [
    "AGGREGATE_TABLES",
    "ATTEMPT_COLUMNS",
    "OUTCOME_COLUMNS",
    "OUTCOME_KINDS",
    "PERCENTILES",
    "PERCENTILE_COLUMNS",
    "RESULT_COLUMNS",
    "SUMMARY_TABLES",
    "SummaryAggregates",
    "exact_percentiles",
    "isolation_intervals",
    "merge",
    "outcome_kind",
    "producer_aggregates",
    "queue_spread",
    "summary_tables",
]

PERCENTILES = (0.5, 0.75, 0.95, 0.99, 0.999, 0.9999)  # the columns: schemas.LATENCY_PERCENTILE_COLUMNS
PERCENTILE_COLUMNS = schemas.LATENCY_PERCENTILE_COLUMNS
QUEUE_WAIT_PERCENTILES = (0.5, 0.99)
QUEUE_WAIT_COLUMNS = ("queue_wait_p50_ms", "queue_wait_p99_ms")
# An attempt's outcome label -> the outcome column counting it: the first row that matches (its label
# equals the text, or starts with it), else failed_other (client, interrupted, other remoting kinds).
OUTCOME_KINDS = (
    ("ok", "equals", "ok"),
    ("failed_timeout", "equals", "remoting:timeout"),
    ("failed_connect", "equals", "remoting:connect"),
    ("failed_broker_error", "prefix", "broker:"),
    ("not_store_ok", "prefix", "status:"),
)
OUTCOME_COLUMNS = schemas.OUTCOME_COLUMNS  # the tables' columns, in this order
OK, FAILED_OTHER = 0, len(OUTCOME_COLUMNS) - 1  # indexes into OUTCOME_COLUMNS
assert tuple(c for c, _, _ in OUTCOME_KINDS) == OUTCOME_COLUMNS[:-1], "OUTCOME_KINDS follows OUTCOME_COLUMNS"
# the columns producer_aggregates reads (a task reading committed files reads only these)
MESSAGE_COLUMNS = ("producer", "seq", "batch_id")  # what producer_aggregates reads of the messages
ATTEMPT_COLUMNS = (
    "producer",
    "seq",
    "attempt",
    "start_ts_ms",
    "latency_ms",
    "broker",
    "queue_id",
    "outcome",
    "fault_isolated_until_ms",
    "wire_bytes",
    "stored",
    *schemas.STORE_ATTEMPT_COLUMNS,
)
RESULT_COLUMNS = (
    "producer",
    "seq",
    "status",
    "attempts",
    "retry_budget_exhausted",
    "born_ts_ms",
    "send_ts_ms",
    "latency_ms",
    "end_ts_ms",
    "queue_wait_ms",
    "wire_bytes",
    "broker",
)
SUMMARY_TABLES = tuple(t.name for t in schemas.written_by(schemas.SUMMARIZE))  # what summary_tables makes

NAME = pa.dictionary(pa.int32(), pa.string())  # broker and key columns of the aggregates
_I64 = pa.int64()

# ---- the aggregates ------------------------------------------------------------------------------

_COUNTS = [
    pa.field(n, _I64, nullable=False)
    for n in ("sends", *OUTCOME_COLUMNS, "retries", "bytes", *schemas.BUSY_COLUMNS)
]
BUSY_COLUMNS = schemas.BUSY_COLUMNS  # in the order of broker_store.BUSY_KINDS
# per cell, the closed-loop store's part: requests it saw, the sum and max of the queue depth they found
# (max -1: none), the writer's time of their appends (us)
_STORE_SUMS = ("store_requests", "queue_depth_sum", "store_service_us")
_STORE = [*[pa.field(n, _I64, nullable=False) for n in _STORE_SUMS], pa.field("queue_depth_max", _I64)]
# one table per field of SummaryAggregates (without the key columns, which come first)
AGGREGATE_TABLES: dict[str, pa.Schema] = {
    # per (broker, window of attempt start): attempt counts (broker_windows, run_summary's sends)
    "attempt_cells": pa.schema(
        [
            pa.field("broker", NAME, nullable=False),
            pa.field("window_start_ms", _I64, nullable=False),
            *_COUNTS,
            *_STORE,
        ]
    ),
    # the attempt latencies of those cells: (value, count) pairs
    "attempt_latency": pa.schema(
        [
            pa.field("broker", NAME, nullable=False),
            pa.field("window_start_ms", _I64, nullable=False),
            pa.field("latency_ms", _I64, nullable=False),
            pa.field("count", _I64, nullable=False),
        ]
    ),
    # per (broker, queue, window): attempts and ok attempts (queue_windows, every queue spread)
    "queue_cells": pa.schema(
        [
            pa.field("broker", NAME, nullable=False),
            pa.field("queue_id", pa.int32(), nullable=False),
            pa.field("window_start_ms", _I64, nullable=False),
            pa.field("sends", _I64, nullable=False),
            pa.field("ok", _I64, nullable=False),
        ]
    ),
    # per (result's broker, window of send start): the delivery outcomes of its messages (broker_windows),
    # cells with any only
    "delivery_cells": pa.schema(
        [
            pa.field("broker", NAME, nullable=False),
            pa.field("window_start_ms", _I64, nullable=False),
            *[pa.field(n, _I64, nullable=False) for n in schemas.DELIVERY_COLUMNS],
        ]
    ),
    # the finished producer_windows rows but their queue spread, and its partials (queue_spread)
    "producer_windows": pa.schema(
        [
            *[
                f
                for f in schemas.data_schema(schemas.PRODUCER_WINDOWS)
                if f.name not in ("queue_skew", "queue_gini")
            ],
            pa.field("queue_present", _I64),  # of the producer's attempts in the window: queues used
            pa.field("queue_total", _I64),  # attempts
            pa.field("queue_max", _I64),  # attempts of its busiest queue
            pa.field("queue_sum_ix", _I64),  # sum of rank * attempts, ranks by attempts ascending
        ]
    ),
    "intervals": schemas.data_schema(schemas.ISOLATION_INTERVALS),
    # per scope of run_summary's message columns: the broker of a stored result, null for the others
    "result_scopes": pa.schema(
        [
            pa.field("broker", NAME),
            *[pa.field(n, _I64, nullable=False) for n in ("messages", "ok", "failed", "rejected")],
            *[pa.field(n, _I64, nullable=False) for n in ("attempts", "retries", "retry_budget_exhausted")],
            *[pa.field(n, _I64, nullable=False) for n in schemas.DELIVERY_COLUMNS],
            pa.field("first_born_ms", _I64, nullable=False),
            pa.field("last_end_ms", _I64, nullable=False),
        ]
    ),
    "result_latency": pa.schema(
        [
            pa.field("broker", NAME),
            pa.field("latency_ms", _I64, nullable=False),
            pa.field("count", _I64, nullable=False),
        ]
    ),
    "result_queue_wait": pa.schema(
        [
            pa.field("broker", NAME),
            pa.field("queue_wait_ms", _I64, nullable=False),
            pa.field("count", _I64, nullable=False),
        ]
    ),
    # the producers an aggregate covers (merge refuses to count one twice)
    "producers": pa.schema([pa.field("producer", pa.int32(), nullable=False)]),
}
# how merge combines rows with equal keys: key columns, summed columns, min columns, max columns
_MERGE_RULES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "attempt_cells": (
        ("broker", "window_start_ms"),
        (*[f.name for f in _COUNTS], *_STORE_SUMS),
        (),
        ("queue_depth_max",),
    ),
    "attempt_latency": (("broker", "window_start_ms", "latency_ms"), ("count",), (), ()),
    "queue_cells": (("broker", "queue_id", "window_start_ms"), ("sends", "ok"), (), ()),
    "delivery_cells": (("broker", "window_start_ms"), schemas.DELIVERY_COLUMNS, (), ()),
    "result_scopes": (
        ("broker",),
        ("messages", "ok", "failed", "rejected", "attempts", "retries", "retry_budget_exhausted")
        + schemas.DELIVERY_COLUMNS,
        ("first_born_ms",),
        ("last_end_ms",),
    ),
    "result_latency": (("broker", "latency_ms"), ("count",), (), ()),
    "result_queue_wait": (("broker", "queue_wait_ms"), ("count",), (), ()),
}
# tables of whole producers: concatenated, sorted by these columns
_PRODUCER_ORDER = {
    "producer_windows": ("producer", "window_start_ms"),
    "intervals": ("producer", "broker", "start_ms"),
    "producers": ("producer",),
}


_LENGTH = struct.Struct("<Q")
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd" if pa.Codec.is_available("zstd") else None)
_META_TABLE, _META_WINDOW, _META_KEYS = b"rocketsim.table", b"rocketsim.window_ms", b"rocketsim.key_names"


@dataclass(frozen=True)
class SummaryAggregates:
    """What the summary tables need from some producers' attempts and results; see
    :data:`AGGREGATE_TABLES` for the columns. Every table starts with the key columns ``key_names``
    (dictionary-encoded strings). Small: counts per cell and (value, count) histograms, no message rows.
    """

    window_ms: int
    key_names: tuple[str, ...]
    attempt_cells: pa.Table
    attempt_latency: pa.Table
    queue_cells: pa.Table
    delivery_cells: pa.Table
    producer_windows: pa.Table
    intervals: pa.Table
    result_scopes: pa.Table
    result_latency: pa.Table
    result_queue_wait: pa.Table
    producers: pa.Table

    def tables(self) -> dict[str, pa.Table]:
        return {name: getattr(self, name) for name in AGGREGATE_TABLES}

    @property
    def nbytes(self) -> int:
        """Bytes of the Arrow buffers in memory."""
        return sum(t.nbytes for t in self.tables().values())

    def to_bytes(self) -> bytes:
        """The aggregates as bytes, for a task to hand them to the driver: per table an 8-byte
        little-endian length, then an Arrow IPC stream (zstd) whose schema metadata names the table,
        the window and the key columns."""
        meta = {_META_WINDOW: str(self.window_ms).encode(), _META_KEYS: json.dumps(self.key_names).encode()}
        out = []
        for name, table in self.tables().items():
            sink = pa.BufferOutputStream()
            schema = table.schema.with_metadata({**meta, _META_TABLE: name.encode()})
            with pa.ipc.new_stream(sink, schema, options=_IPC_OPTIONS) as writer:
                writer.write_table(table.replace_schema_metadata(schema.metadata))
            stream = sink.getvalue()
            out += [_LENGTH.pack(stream.size), stream.to_pybytes()]
        return b"".join(out)

    @staticmethod
    def from_bytes(data: bytes) -> SummaryAggregates:
        """The aggregates :meth:`to_bytes` wrote."""
        tables: dict[str, pa.Table] = {}
        meta: dict[bytes, bytes] = {}
        at = 0
        while at < len(data):
            (size,) = _LENGTH.unpack_from(data, at)
            table = pa.ipc.open_stream(
                pa.py_buffer(data[at + _LENGTH.size : at + _LENGTH.size + size])
            ).read_all()
            meta = dict(table.schema.metadata or {})
            tables[meta[_META_TABLE].decode()] = table.replace_schema_metadata(None)
            at += _LENGTH.size + size
        if set(tables) != set(AGGREGATE_TABLES):
            raise ValueError(f"not summary aggregates: tables {sorted(tables)}")
        window_ms = int(meta[_META_WINDOW])
        key_names = tuple(json.loads(meta[_META_KEYS]))
        return SummaryAggregates(window_ms, key_names, **tables)


def _table_fields() -> tuple[str, ...]:
    return tuple(f.name for f in fields(SummaryAggregates) if f.name not in ("window_ms", "key_names"))


assert _table_fields() == tuple(AGGREGATE_TABLES), "SummaryAggregates and AGGREGATE_TABLES must agree"


def _with_keys(schema: pa.Schema, key_names: Sequence[str], key_type: pa.DataType = NAME) -> pa.Schema:
    return pa.schema([*[pa.field(k, key_type, nullable=False) for k in key_names], *schema])


# ---- numpy helpers -------------------------------------------------------------------------------


def _histogram(
    group: np.ndarray, values: np.ndarray, n_groups: int, value_order: Callable[[], np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group, value, count) of every distinct pair, sorted by group then value: counted in place when
    the values span a small range, else sorted by value (``value_order()``: the stable order of the
    values, if the caller keeps one) and then, stably, by group."""
    if not len(values):
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    lo = int(values.min())
    span = int(values.max()) - lo + 1
    if n_groups * span <= max(4 * len(values), 1 << 20):
        counts = np.bincount(group * span + (values - lo), minlength=n_groups * span)
        at = np.flatnonzero(counts)
        return at // span, at % span + lo, counts[at].astype(np.int64)
    order = np.argsort(values, kind="stable") if value_order is None else value_order()
    if n_groups > 1:
        small = np.uint16 if n_groups <= 1 << 16 else np.int64  # radix sort
        order = order[np.argsort(group[order].astype(small), kind="stable")]
    g, v = group[order], values[order]
    start = np.ones(len(g), bool)
    start[1:] = (g[1:] != g[:-1]) | (v[1:] != v[:-1])
    at = np.flatnonzero(start)
    return g[at], v[at], np.diff(np.append(at, len(g))).astype(np.int64)


# ---- Spark's arithmetic ----------------------------------------------------------------------------


def exact_percentiles(
    group: np.ndarray, values: np.ndarray, counts: np.ndarray, n_groups: int, ps: Sequence[float]
) -> tuple[np.ndarray, np.ndarray]:
    """Spark's exact ``percentile`` of each group of a (value, count) histogram: a (groups x ps) array
    and whether the group has values (else Spark's null).

    ``Percentile.getPercentile``: with n values, position ``pos = (n - 1) * p`` (a double); ``lower``,
    ``higher`` its floor and ceiling; the values at 0-based ranks lower and higher (the first with a
    cumulative count > rank); the lower value alone when ``higher == lower`` or both values are equal,
    else ``(higher - pos) * low + (pos - lower) * high``. Values may repeat within a group.
    """
    out = np.zeros((n_groups, len(ps)), np.float64)
    if not len(values):
        return out, np.zeros(n_groups, bool)
    order = sort_order(group, values)
    g, v, c = group[order], np.asarray(values, np.int64)[order].astype(np.float64), counts[order]
    cum = np.cumsum(c)
    n = np.bincount(g, weights=c, minlength=n_groups).astype(np.int64)
    has = n > 0
    ends = np.zeros(n_groups, np.int64)
    last = np.flatnonzero(np.append(g[1:] != g[:-1], True))
    ends[g[last]] = cum[last]
    base = ends - n
    top = len(cum) - 1
    for j, p in enumerate(ps):
        pos = (n - 1).astype(np.float64) * float(p)
        lower, higher = np.floor(pos), np.ceil(pos)
        lo_i = np.minimum(np.searchsorted(cum, base + lower.astype(np.int64) + 1, "left"), top)
        hi_i = np.minimum(np.searchsorted(cum, base + higher.astype(np.int64) + 1, "left"), top)
        low, high = v[lo_i], v[hi_i]
        mixed = (higher - pos) * low + (pos - lower) * high
        out[:, j] = np.where((higher == lower) | (high == low), low, mixed)
    return out, has


def _histogram_max(group: np.ndarray, values: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """max of the values of each group (and whether it has any)."""
    out = np.full(n_groups, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(out, group, values)
    return out, out != np.iinfo(np.int64).min


def queue_spread(
    present: np.ndarray, total: np.ndarray, busiest: np.ndarray, sum_ix: np.ndarray, n_queues: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(skew, gini, valid) of per-queue counts from their partials (Spark's ``queue_stats`` before).

    ``present`` queues with attempts, ``total`` attempts, ``busiest`` the largest count, ``sum_ix`` the
    sum of rank * count over the present queues ranked by count ascending (a long), ``n_queues`` the
    queues of the group in all (the idle ones sort first: ranks shift by n_queues - present)::

        sum_ix' = double(sum_ix) + double(q - present) * double(total)
        skew = busiest / (total / q)
        gini = (2 * sum_ix' - (q + 1) * total) / (q * total)      all in doubles, null without attempts
    """
    q = np.asarray(n_queues, np.int64)
    total_d = np.asarray(total, np.int64).astype(np.float64)
    shifted = np.asarray(sum_ix, np.int64).astype(np.float64) + (q - present).astype(np.float64) * total_d
    valid = total_d > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        skew = np.asarray(busiest, np.int64).astype(np.float64) / (total_d / q.astype(np.float64))
        gini = (2.0 * shifted - (q + 1).astype(np.float64) * total_d) / (q.astype(np.float64) * total_d)
    return skew, gini, valid


def _spread_partials(cell: np.ndarray, n: np.ndarray, n_cells: int) -> tuple[np.ndarray, ...]:
    """(present, total, busiest, sum_ix) per cell of per-queue counts ``n`` (> 0): ``queue_stats``'s
    aggregation over ``row_number() over (partition by cell order by n)`` (ties give the same sums)."""
    present, total, busiest, sum_ix = (np.zeros(n_cells, np.int64) for _ in range(4))
    if not len(cell):
        return present, total, busiest, sum_ix
    order = sort_order(cell, n)
    c, v = cell[order], np.asarray(n, np.int64)[order]
    starts = np.flatnonzero(first_of_runs(c))
    sizes = np.diff(np.append(starts, len(c)))
    rank = np.arange(len(c)) - np.repeat(starts, sizes) + 1
    cells = c[starts]
    present[cells] = sizes
    total[cells] = np.add.reduceat(v, starts)
    sum_ix[cells] = np.add.reduceat(rank * v, starts)
    busiest[cells] = v[starts + sizes - 1]  # sorted ascending within the cell
    return present, total, busiest, sum_ix


def _ratio(num: np.ndarray, den: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``when(den > 0, num.cast(double) / den)``: values and validity."""
    num_d = np.asarray(num).astype(np.float64)
    den_d = np.asarray(den).astype(np.float64)
    valid = den_d > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        return num_d / np.where(valid, den_d, 1.0), valid


def _rate_per_s(ok: np.ndarray, window_ms: int | np.ndarray) -> np.ndarray:
    """``ok * 1000.0 / window_ms`` (multiply first, in doubles)."""
    return np.asarray(ok, np.int64).astype(np.float64) * 1000.0 / np.asarray(window_ms).astype(np.float64)


def _column(values: np.ndarray, type_: pa.DataType, valid: np.ndarray | None = None) -> pa.Array:
    mask = None if valid is None or valid.all() else ~valid
    return pa.array(values, type_, mask=mask)


# ---- outcome kinds ---------------------------------------------------------------------------------


def outcome_kind(label: str) -> int:
    """The outcome column of an attempt's outcome label (:data:`OUTCOME_KINDS`), as an index into
    :data:`OUTCOME_COLUMNS`."""
    for kind, (_, how, text) in enumerate(OUTCOME_KINDS):
        if label == text if how == "equals" else label.startswith(text):
            return kind
    return FAILED_OTHER


def _outcome_kinds(outcome: pa.ChunkedArray) -> np.ndarray:
    codes, names = string_codes(outcome)
    lut = np.array([outcome_kind(s) for s in names.to_pylist()] or [FAILED_OTHER], np.int64)
    return lut[codes]


# ---- the columns the aggregates read -------------------------------------------------------------------


class _Attempts:
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
        self.busy = np.full(self.n, -1, np.int64)  # index into BUSY_COLUMNS, -1: not rejected
        for j, name in enumerate(BUSY_COLUMNS):
            self.busy[bools(pc.equal(busy, name.removeprefix("busy_").upper()).fill_null(False))] = j
        depth = t.column("store_queue_depth") if "store_queue_depth" in names else pa.nulls(self.n, _I64)
        self.seen = bools(depth.is_valid())
        self.depth = np.asarray(depth.fill_null(0).to_numpy(), np.int64)
        service = t.column("store_service_us") if "store_service_us" in names else pa.nulls(self.n, _I64)
        self.service = np.asarray(service.fill_null(0).to_numpy(), np.int64)


class _Results:
    """Result columns as numpy, read once."""

    def __init__(self, t: pa.Table, window_ms: int, copies: np.ndarray) -> None:
        self.n = t.num_rows
        if len(copies) != self.n:
            raise ValueError(f"copies has {len(copies)} values for {self.n} results")
        self.delivery = store.delivery_flags(t.column("status"), copies)
        self.producer = ints(t, "producer")
        self.seq = ints(t, "seq")
        self.window = window_index(ints(t, "send_ts_ms"), window_ms)
        self.ok, self.failed, self.rejected = _statuses(t)
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


def _statuses(results: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(SEND_OK, FAILED, REJECTED) masks of the results."""
    status = results.column("status")
    ok, failed, rejected = (bools(pc.equal(status, s)) for s in ("SEND_OK", "FAILED", "REJECTED"))
    return ok, failed, rejected


# ---- isolation intervals -------------------------------------------------------------------------


def isolation_intervals(attempts: pa.Table) -> pa.Table:
    """``isolation_intervals`` rows (producer, broker, start_ms, end_ms) of some producers' attempts
    (readable reference: :func:`tests.analysis.isolation_intervals`).

    Per (producer, broker), attempts in order of (end, start, seq, attempt): an attempt whose
    ``fault_isolated_until_ms`` is after its end ``e`` gives the piece ``[e, min(until, next end))``
    (the next attempt's end, if any); non-empty pieces that touch (previous end >= start) are merged.
    """
    return _intervals(_Attempts(attempts, 1))


def _intervals(a: _Attempts) -> pa.Table:
    fold = IntervalFold()
    fold.add(a, _NO_MORE)
    return fold.result()


_NO_MORE = np.iinfo(np.int64).max  # a watermark past every attempt: no attempt is still to come
_I = np.int64


class IntervalFold:
    """The isolation intervals of attempts given a part at a time (:func:`isolation_intervals`' rule).

    Per (producer, broker), attempts in order of (end, start, seq, attempt): an attempt whose
    ``fault_isolated_until_ms`` is after its end ``e`` gives the piece ``[e, min(until, next end))``;
    pieces that touch (the previous piece's end >= start) make one interval. With each part, the caller
    gives a watermark: no attempt still to come starts before it (the engine knows it:
    :attr:`rocketsim.engine.plan.SimChunk.later_start_ms`). An attempt that ends before it and whose
    piece is known (none, or one that stops before the watermark, or a next attempt that ends before it)
    is settled: its piece joins the pair's open interval; only the others are kept."""

    def __init__(self) -> None:
        self.brokers: list[str] = []
        self._code: dict[str, int] = {}
        self.watermark = np.iinfo(np.int64).min
        names = ("producer", "broker", "end", "start", "seq", "attempt", "until")
        self._rows: dict[str, np.ndarray] = {k: np.zeros(0, _I) for k in names}
        self._rows["candidate"] = np.zeros(0, bool)
        self._open: dict[str, np.ndarray] = {
            k: np.zeros(0, _I) for k in ("producer", "broker", "start", "top", "last")
        }
        self._closed: list[dict[str, np.ndarray]] = []

    def add(self, a: _Attempts, watermark: int) -> None:
        """A part's attempts (no attempt of it starts before the last watermark), and the new one."""
        if a.n and int(a.start.min()) < self.watermark:
            raise ValueError(
                f"isolation intervals: an attempt starts at {int(a.start.min())}, before the watermark "
                f"{self.watermark} an earlier part gave"
            )
        names = a.broker_names.to_pylist()
        for name in names:
            if name not in self._code:
                self._code[name] = len(self.brokers)
                self.brokers.append(name)
        remap = np.array([self._code[x] for x in names] + [-1], _I)
        part = {
            "producer": a.producer,
            "broker": remap[a.broker],
            "end": a.end,
            "start": a.start,
            "seq": a.seq,
            "attempt": a.attempt,
            "until": a.until,
            "candidate": a.has_until & (a.until > a.end),
        }
        self._rows = {k: np.concatenate([v, np.asarray(part[k], v.dtype)]) for k, v in self._rows.items()}
        self._settle(watermark)

    @property
    def kept(self) -> int:
        """Attempts kept (not settled yet)."""
        return len(self._rows["end"])

    def _settle(self, w: int) -> None:
        r = self._rows
        if not len(r["end"]):
            self.watermark = max(self.watermark, w)
            return
        pair = Groups([r["producer"], r["broker"]]).index
        order = _order_by_end(pair, r["end"], r["start"], r["seq"], r["attempt"])
        r = {k: v[order] for k, v in r.items()}
        pair = pair[order]
        end, until, candidate = r["end"], r["until"], r["candidate"]
        has_next = np.append(pair[1:] == pair[:-1], False)
        next_end = np.append(end[1:], 0)
        stop = np.where(has_next, np.minimum(until, next_end), until)
        settled = (end < w) & (~candidate | (until <= w) | (has_next & (next_end < w)))
        piece = settled & candidate & (stop > end)
        self._join(r["producer"][piece], r["broker"][piece], end[piece], stop[piece], w == _NO_MORE)
        self._rows = {k: v[~settled] for k, v in r.items()}
        self.watermark = max(self.watermark, w)

    def _join(
        self, producer: np.ndarray, broker: np.ndarray, start: np.ndarray, stop: np.ndarray, last: bool
    ) -> None:
        """Settled pieces (in order within each pair) joined to the open intervals."""
        o = self._open
        p = np.concatenate([o["producer"], producer])
        b = np.concatenate([o["broker"], broker])
        s = np.concatenate([o["start"], start])
        top = np.concatenate([o["top"], stop])  # an open interval: its end so far
        end = np.concatenate([o["last"], stop])  # and its last piece's end
        order = np.lexsort((end, s, b, p))
        p, b, s, top, end = p[order], b[order], s[order], top[order], end[order]
        if not len(p):
            return
        new = np.ones(len(p), bool)
        new[1:] = (p[1:] != p[:-1]) | (b[1:] != b[:-1]) | (end[:-1] < s[1:])
        first = np.flatnonzero(new)
        ends = np.maximum.reduceat(top, first)
        lasts = end[np.append(first[1:], len(p)) - 1]
        ip, ib, istart = p[first], b[first], s[first]
        still = np.zeros(len(first), bool)  # each pair's last interval stays open until no more come
        if not last:
            still = np.append((ip[1:] != ip[:-1]) | (ib[1:] != ib[:-1]), True)
        self._closed.append(
            {"producer": ip[~still], "broker": ib[~still], "start": istart[~still], "end": ends[~still]}
        )
        self._open = {
            "producer": ip[still],
            "broker": ib[still],
            "start": istart[still],
            "top": ends[still],
            "last": lasts[still],
        }

    def result(self) -> pa.Table:
        """The intervals of every attempt added (each pair's in start order, pairs by producer and broker
        name)."""
        if len(self._rows["end"]) or len(self._open["producer"]):
            self._settle(_NO_MORE)
        out_schema = AGGREGATE_TABLES["intervals"]
        if not self._closed:
            return out_schema.empty_table()
        c = {k: np.concatenate([x[k] for x in self._closed]) for k in ("producer", "broker", "start", "end")}
        if not len(c["producer"]):
            return out_schema.empty_table()
        rank = np.argsort(np.argsort(np.array(self.brokers, object)))  # fold code -> rank of its name
        order = np.lexsort((c["start"], rank[c["broker"]], c["producer"]))
        names = pa.array(self.brokers, pa.string())
        return pa.table(
            {
                "producer": pa.array(c["producer"][order].astype(np.int32)),
                "broker": names.take(pa.array(c["broker"][order])),
                "start_ms": pa.array(c["start"][order], _I64),
                "end_ms": pa.array(c["end"][order], _I64),
            },
            schema=out_schema,
        )


def _order_by_end(
    pair: np.ndarray, end: np.ndarray, start: np.ndarray, seq: np.ndarray, attempt: np.ndarray
) -> np.ndarray:
    """The row order of (pair, end, start, seq, attempt): one sort on (pair, end), then the few rows
    whose (pair, end) repeats ordered by the rest."""
    order = sort_order(pair, end)
    key_pair, key_end = pair[order], end[order]
    tie = np.zeros(len(order), bool)
    same = (key_pair[1:] == key_pair[:-1]) & (key_end[1:] == key_end[:-1])
    tie[1:] |= same
    tie[:-1] |= same
    if tie.any():
        at = np.flatnonzero(tie)  # whole runs of ties, in (pair, end) order
        rows = order[at]
        order[at] = rows[np.lexsort((attempt[rows], seq[rows], start[rows], end[rows], pair[rows]))]
    return order


# ---- one producer's aggregates ----------------------------------------------------------------------

_PARTIALS = ("queue_present", "queue_total", "queue_max", "queue_sum_ix")


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
) -> SummaryAggregates:
    """The summary aggregates of whole producers' attempts and results (``send_attempts`` /
    ``send_results`` columns as the simulator returns them; ``run_id`` and store columns are ignored).

    ``messages``: the same producers' messages (:data:`MESSAGE_COLUMNS`), for ``run_summary``'s delivery
    columns (the copies the brokers stored of each message, :func:`rocketsim.broker.store.result_copies`).

    ``keys``: constant key columns of these rows, e.g. ``{"variant": "fault_on"}`` in a comparison.
    The producer-level parts (``producer_windows``, ``intervals``) are finished here, so merging needs
    every row of a producer in one aggregate.
    """
    keys = dict(keys or {})
    if window_ms <= 0:
        raise ValueError(f"window_ms must be > 0, got {window_ms}")
    copies = store.result_copies(messages, attempts, results)
    a, r = _Attempts(attempts, window_ms), _Results(results, window_ms, copies)
    intervals = _intervals(a)
    tables = {
        **_attempt_parts(a, window_ms),
        **_result_parts(r),
        "delivery_cells": _delivery_cells(r, window_ms),
        "producer_windows": _producer_windows(a, r, intervals, window_ms),
        "intervals": intervals,
        "producers": pa.table(
            {"producer": pa.array(distinct_values(a.producer, r.producer).astype(np.int32))}
        ),
    }
    tables = {
        name: _keyed(t.cast(AGGREGATE_TABLES[name]), keys).cast(_with_keys(AGGREGATE_TABLES[name], keys))
        for name, t in tables.items()
    }
    return SummaryAggregates(window_ms, tuple(keys), **tables)


class ProducerFold:
    """:func:`producer_aggregates` of whole producers given a part of their rows at a time (a producer
    task's chunks: rows of whole messages in seq order, :func:`rocketsim.stage.tables.producer_chunks`): the
    tables that add up are made per part and merged, ``producer_windows`` from its :class:`WindowParts`,
    and the ``intervals`` by an :class:`IntervalFold` (an attempt's piece ends at the next attempt's
    end, maybe in a later part: it keeps only the attempts not yet settled)."""

    def __init__(self, window_ms: int, keys: Mapping[str, str] | None = None) -> None:
        if window_ms <= 0:
            raise ValueError(f"window_ms must be > 0, got {window_ms}")
        self.window_ms, self.keys = window_ms, dict(keys or {})
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
        a, r = _Attempts(attempts, self.window_ms), _Results(results, self.window_ms, copies)
        self._tables.append(
            {
                **_attempt_parts(a, self.window_ms),
                **_result_parts(r),
                "delivery_cells": _delivery_cells(r, self.window_ms),
            }
        )
        self._windows.append(_window_parts(a, r))
        self._producers = np.union1d(self._producers, a.producer)
        self._intervals.add(a, self._intervals.watermark if later_start_ms is None else later_start_ms)

    def result(self) -> SummaryAggregates:
        """The aggregates of every part added (as :func:`producer_aggregates` of all their rows)."""
        merged: dict[str, pa.Table] = {}
        for name in _MERGE_RULES:
            both = pa.concat_tables([t[name].cast(AGGREGATE_TABLES[name]) for t in self._tables])
            keys, sums, mins, maxs = _MERGE_RULES[name]
            merged[name] = regroup(both, keys, sums, mins, maxs)
        intervals = self._intervals.result()
        windows = merge_window_parts(self._windows) if self._windows else None
        producers = np.unique(np.concatenate([w.producer for w in self._windows] + [np.zeros(0, np.int64)]))
        producers = np.union1d(producers, self._producers)
        tables = {
            **merged,
            "producer_windows": (
                _finish_windows(windows, intervals, self.window_ms)
                if windows is not None
                else AGGREGATE_TABLES["producer_windows"].empty_table()
            ),
            "intervals": intervals,
            "producers": pa.table({"producer": pa.array(producers.astype(np.int32))}),
        }
        keys = self.keys
        tables = {
            name: _keyed(t.cast(AGGREGATE_TABLES[name]), keys).cast(_with_keys(AGGREGATE_TABLES[name], keys))
            for name, t in tables.items()
        }
        return merge([SummaryAggregates(self.window_ms, tuple(keys), **tables)])


def _attempt_parts(a: _Attempts, window_ms: int) -> dict[str, pa.Table]:
    """attempt_cells, attempt_latency, queue_cells."""
    if not a.n:
        return {
            n: AGGREGATE_TABLES[n].empty_table() for n in ("attempt_cells", "attempt_latency", "queue_cells")
        }
    cells = Groups([a.broker, a.window])
    counts = {
        "sends": cells.count(),
        **{name: cells.sum(a.kind == k) for k, name in enumerate(OUTCOME_COLUMNS)},
        "retries": cells.sum(a.attempt > 0),
        "bytes": cells.sum(a.wire),
        **{name: cells.sum(a.busy == j) for j, name in enumerate(BUSY_COLUMNS)},
        "store_requests": cells.sum(a.seen),
        "queue_depth_sum": cells.sum(a.depth),
        "store_service_us": cells.sum(a.service),
    }
    depth_max = np.full(cells.n, -1, np.int64)
    np.maximum.at(depth_max, cells.index, np.where(a.seen, a.depth, -1))
    attempt_cells = pa.table(
        {
            "broker": from_codes(a.broker[cells.first], a.broker_names),
            "window_start_ms": a.window[cells.first] * np.int64(window_ms),
            **counts,
            "queue_depth_max": depth_max,
        }
    )
    cell, latency, n = _histogram(cells.index, a.latency, cells.n)
    row = cells.first[cell]
    attempt_latency = pa.table(
        {
            "broker": from_codes(a.broker[row], a.broker_names),
            "window_start_ms": a.window[row] * np.int64(window_ms),
            "latency_ms": latency,
            "count": n,
        }
    )
    qc = Groups([a.broker, a.queue, a.window])
    queue_cells = pa.table(
        {
            "broker": from_codes(a.broker[qc.first], a.broker_names),
            "queue_id": pa.array(a.queue[qc.first].astype(np.int32)),
            "window_start_ms": a.window[qc.first] * np.int64(window_ms),
            "sends": qc.count(),
            "ok": qc.sum(a.kind == OK),
        }
    )
    return {"attempt_cells": attempt_cells, "attempt_latency": attempt_latency, "queue_cells": queue_cells}


def _result_parts(r: _Results) -> dict[str, pa.Table]:
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
            "ok": g.sum(r.ok),
            "failed": g.sum(r.failed),
            "rejected": g.sum(r.rejected),
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
        group, value, n = _histogram(g.index, getattr(r, attr), g.n, partial(r.value_order, attr))
        out[name] = pa.table(
            {"broker": from_codes(r.scope[g.first[group]], r.broker_names), column: value, "count": n}
        )
    return out


def _delivery_cells(r: _Results, window_ms: int) -> pa.Table:
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
    name, queue, count). :func:`merge_window_parts` adds parts up; :func:`_finish_windows` makes the
    rows."""

    producer: np.ndarray
    window: np.ndarray
    sums: dict[str, np.ndarray]
    latency: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # (producer, window, value, count)
    queue_wait: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    queues: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # broker names as objects


def _window_parts(a: _Attempts, r: _Results) -> WindowParts:
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
        group, value, n = _histogram(g.index, getattr(r, attr), g.n, partial(r.value_order, attr))
        hists.append((cell_p[group], cell_w[group], value, n))
    per_queue = Groups([a.producer, a.window, a.broker, a.queue])
    names = np.array([*a.broker_names.to_pylist(), None], object)  # code -1: no broker
    q = per_queue.first
    queues = (a.producer[q], a.window[q], names[a.broker[q]], a.queue[q], per_queue.count())
    return WindowParts(cell_p, cell_w, sums, hists[0], hists[1], queues)


def _busy_per_send(a: _Attempts, r: _Results) -> np.ndarray:
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
    p, w, b, q, n = (cat(lambda x, i=i: x.queues[i]) for i in range(5))
    names = {name: k for k, name in enumerate(dict.fromkeys(b.tolist()))}
    code = np.fromiter((names[x] for x in b.tolist()), np.int64, len(b))
    per_queue = Groups([p, w, code, q])
    f = per_queue.first
    queues = (p[f], w[f], b[f], q[f], per_queue.sum(n))
    return WindowParts(producer[g.first], window[g.first], sums, hists[0], hists[1], queues)


def _producer_windows(a: _Attempts, r: _Results, intervals: pa.Table, window_ms: int) -> pa.Table:
    """``producer_windows`` rows of whole producers, with the partials of their queue spread in place of
    it (the run's queue count is known only at the end)."""
    return _finish_windows(_window_parts(a, r), intervals, window_ms)


def _finish_windows(parts: WindowParts, intervals: pa.Table, window_ms: int) -> pa.Table:
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
    cols["publish_rate_per_s"] = _rate_per_s(cols["ok"], window_ms)
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
        values, has = exact_percentiles(group, value, n, g.n, ps)
        for j, name in enumerate(names):
            cols[name] = _column(values[:, j], pa.float64(), has)
        top, has_top = _histogram_max(group, value, g.n)
        cols[max_name] = _column(top, _I64, has_top)

    # queue spread partials: the producers' attempts per (window of attempt start, broker, queue)
    partials = [np.zeros(g.n, np.int64) for _ in _PARTIALS]
    has_partials = np.zeros(g.n, bool)
    qp, qw, _, _, counts = parts.queues
    if len(qp):
        cell = Groups([qp, qw])
        at = joint_lookup([cell_p, cell_w], [qp[cell.first], qw[cell.first]])
        found = at >= 0
        for part, values in zip(partials, _spread_partials(cell.index, counts, cell.n), strict=True):
            part[at[found]] = values[found]
        has_partials[at[found]] = True
    for name, values in zip(_PARTIALS, partials, strict=True):
        cols[name] = _column(values, _I64, has_partials)

    cols["isolated_brokers"] = _isolated_brokers(intervals, cell_p, cell_w, window_ms)
    return pa.table({f.name: cols[f.name] for f in schema}).cast(schema)


def _interval_windows(
    intervals: pa.Table, window_ms: int, lo: np.ndarray | None = None, hi: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(interval row, window index) for every window an interval overlaps (``_interval_windows``:
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
    row, window = _interval_windows(intervals, window_ms, lo, hi)
    cell = joint_lookup([cell_producer, cell_window], [producer[row], window])
    hit = cell >= 0
    if hit.any():
        distinct = Groups([cell[hit], string_codes(intervals.column("broker"))[0][row][hit]])
        np.add.at(out, cell[hit][distinct.first], 1)
    return out


# ---- merge ---------------------------------------------------------------------------------------------


def merge(aggregates: Iterable[SummaryAggregates]) -> SummaryAggregates:
    """One aggregate of several (of disjoint producers): counts and histograms added, rows of whole
    producers kept; every table sorted by its keys, so the result does not depend on the order."""
    aggs = list(aggregates)
    if not aggs:
        raise ValueError("merge needs at least one aggregate")
    window_ms, key_names = aggs[0].window_ms, aggs[0].key_names
    for agg in aggs[1:]:
        if agg.window_ms != window_ms or agg.key_names != key_names:
            raise ValueError(
                f"merge: aggregates of window {agg.window_ms} ms keyed {agg.key_names} and of window "
                f"{window_ms} ms keyed {key_names} cannot be merged"
            )
    tables: dict[str, pa.Table] = {}
    for name in AGGREGATE_TABLES:
        both = pa.concat_tables([getattr(agg, name) for agg in aggs])
        if name in _MERGE_RULES:
            keys, sums, mins, maxs = _MERGE_RULES[name]
            tables[name] = regroup(both, (*key_names, *keys), sums, mins, maxs)
        else:
            tables[name] = sort_rows(both, (*key_names, *_PRODUCER_ORDER[name]))
    producers = tables["producers"]
    if producers.num_rows:
        g = Groups([c for c, _ in key_codes(producers, (*key_names, "producer"))])
        if g.n != producers.num_rows:
            dup = producers.take(pa.array(g.first[np.flatnonzero(g.count() > 1)[:1]])).to_pylist()
            raise ValueError(f"merge: producer {dup} is in more than one aggregate (merge whole producers)")
    return SummaryAggregates(window_ms, key_names, **tables)


# ---- the summary tables ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Runs:
    """The runs (key tuples) and brokers of merged aggregates, as codes."""

    run: dict[str, np.ndarray]  # per aggregate table: each row's run
    broker: dict[str, np.ndarray]  # per aggregate table with a broker column: each row's broker (-1 null)
    key_values: list[pa.Array]  # per key column: its value per run
    brokers: pa.Array  # broker names, sorted
    n_runs: int


def _runs(merged: SummaryAggregates) -> _Runs:
    tables = merged.tables()
    names = list(tables)
    per_key = []
    key_values = []
    for key in merged.key_names:
        codes, values = joint_codes([tables[n].column(key) for n in names])
        per_key.append(codes)
        key_values.append(values)
    lengths = [tables[n].num_rows for n in names]
    if per_key:
        stacked = [np.concatenate(c) for c in per_key]
        g = Groups(stacked) if len(stacked[0]) else None
        run_all = g.index if g is not None else np.zeros(0, np.int64)
        n_runs = g.n if g is not None else 0
        run_keys = [
            values.take(pa.array(s[g.first] if g is not None else np.zeros(0, np.int64)))
            for s, values in zip(stacked, key_values, strict=True)
        ]
    else:
        run_all = np.zeros(sum(lengths), np.int64)
        n_runs = 1
        run_keys = []
    run = dict(zip(names, np.split(run_all, np.cumsum(lengths)[:-1]), strict=True))
    with_broker = [n for n in names if "broker" in tables[n].column_names]
    codes, brokers = joint_codes([tables[n].column("broker") for n in with_broker])
    return _Runs(run, dict(zip(with_broker, codes, strict=True)), run_keys, brokers, n_runs)


def _key_columns(runs: _Runs, key_names: Sequence[str], run: np.ndarray) -> dict[str, pa.Array]:
    return {k: runs.key_values[i].take(pa.array(run)) for i, k in enumerate(key_names)}


def _output(schema_name: str, key_names: Sequence[str], cols: Mapping[str, object]) -> pa.Table:
    schema = _with_keys(schemas.data_schema(schemas.TABLES[schema_name].schema), key_names, pa.string())
    return pa.table({f.name: cols[f.name] for f in schema}, schema=schema)


def summary_tables(merged: SummaryAggregates) -> dict[str, pa.Table]:
    """Every summary table of the merged aggregates, with the schemas of :mod:`rocketsim.tables.schemas`
    (without ``run_id``; the key columns first): ``isolation_intervals``, ``broker_windows``,
    ``queue_windows``, ``producer_windows``, ``run_summary`` (see their functions below)."""
    runs = _runs(merged)
    grid = _Grid.of(merged, runs)
    return {
        "isolation_intervals": _isolation_table(merged, runs),
        "broker_windows": _broker_windows(merged, runs, grid),
        "queue_windows": _queue_windows(merged, runs, grid),
        "producer_windows": _producer_window_table(merged, runs, grid),
        "run_summary": _run_summary(merged, runs, grid),
    }


@dataclass(frozen=True)
class _Grid:
    """Each run's windows (first to last window of attempt start) and queues (with any attempt)."""

    lo: np.ndarray  # per run: first window index (no attempts: lo > hi)
    hi: np.ndarray
    queue_run: np.ndarray  # the run's (broker, queue) pairs, sorted
    queue_broker: np.ndarray
    queue_id: np.ndarray

    @staticmethod
    def of(merged: SummaryAggregates, runs: _Runs) -> _Grid:
        w = merged.window_ms
        # the windows of attempt starts (and of the send starts of delivery outcomes: a send begins
        # before its first attempt, in an earlier window only if an executor held it across the edge)
        run = np.concatenate([runs.run["attempt_cells"], runs.run["delivery_cells"]])
        index = np.concatenate(
            [ints(t, "window_start_ms") // w for t in (merged.attempt_cells, merged.delivery_cells)]
        )
        lo = np.full(runs.n_runs, 1, np.int64)
        hi = np.zeros(runs.n_runs, np.int64)
        if len(run):
            g = Groups([run])
            has = run[g.first]
            lo[has], hi[has] = g.min(index), g.max(index)
        q = merged.queue_cells
        q_run, q_broker, q_id = runs.run["queue_cells"], runs.broker["queue_cells"], ints(q, "queue_id")
        if q.num_rows:
            g = Groups([q_run, q_broker, q_id])
            q_run, q_broker, q_id = q_run[g.first], q_broker[g.first], q_id[g.first]
        return _Grid(lo, hi, q_run, q_broker, q_id)

    def windows(self, run: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row of ``run``, window index): each row of ``run`` crossed with its run's windows."""
        n = np.maximum(self.hi[run] - self.lo[run] + 1, 0)
        row = np.repeat(np.arange(len(run)), n)
        within = np.arange(len(row)) - np.repeat(np.cumsum(n) - n, n)
        return row, self.lo[run[row]] + within

    def queues_per(self, run: np.ndarray, broker_code: np.ndarray | None) -> np.ndarray:
        """How many of the run's queues each (run, broker) has (broker None: the run's in all)."""
        if broker_code is None:
            counts = np.bincount(self.queue_run, minlength=max(len(self.lo), 1))
            return counts[run].astype(np.int64)
        pairs = Groups([self.queue_run, self.queue_broker]) if len(self.queue_run) else None
        if pairs is None:
            return np.zeros(len(run), np.int64)
        at = joint_lookup([self.queue_run[pairs.first], self.queue_broker[pairs.first]], [run, broker_code])
        return np.where(at >= 0, pairs.count()[np.maximum(at, 0)], 0)


def _isolation_table(merged: SummaryAggregates, runs: _Runs) -> pa.Table:
    """``isolation_intervals``: the producers' intervals."""
    t = merged.intervals
    run = runs.run["intervals"]
    cols = {
        **_key_columns(runs, merged.key_names, run),
        **{n: t.column(n) for n in t.column_names if n not in merged.key_names},
    }
    return _output("isolation_intervals", merged.key_names, cols)


def _broker_windows(merged: SummaryAggregates, runs: _Runs, grid: _Grid) -> pa.Table:
    """``broker_windows``: every broker of a run that got an
    attempt x every window of the run, zeros included; counts, rates, exact attempt-latency
    percentiles, producers isolating the broker, queue skew/Gini over the broker's queues."""
    w = merged.window_ms
    cells = merged.attempt_cells
    c_run, c_broker = runs.run["attempt_cells"], runs.broker["attempt_cells"]
    c_window = ints(cells, "window_start_ms") // w
    if cells.num_rows:
        pairs = Groups([c_run, c_broker])
        p_run, p_broker = c_run[pairs.first], c_broker[pairs.first]
    else:
        p_run = p_broker = np.zeros(0, np.int64)
    row, window = grid.windows(p_run)
    g_run, g_broker = p_run[row], p_broker[row]  # the grid, sorted by (run, broker, window)
    n = len(row)

    def at(run: np.ndarray, broker_code: np.ndarray, window_idx: np.ndarray) -> np.ndarray:
        return all_found(joint_lookup([g_run, g_broker, window], [run, broker_code, window_idx]))

    cols: dict[str, object] = {}
    pos = at(c_run, c_broker, c_window)
    for f in _COUNTS:
        values = np.zeros(n, np.int64)
        values[pos] = ints(cells, f.name)
        cols[f.name] = values
    rate, valid = _ratio(cols["sends"] - cols["ok"], cols["sends"])
    cols["error_rate"] = _column(rate, pa.float64(), valid)
    cols["publish_rate_per_s"] = _rate_per_s(cols["ok"], w)
    cols.update(_store_columns(cells, pos, n, w))

    lat = merged.attempt_latency
    l_pos = at(runs.run["attempt_latency"], runs.broker["attempt_latency"], ints(lat, "window_start_ms") // w)
    values, counts = ints(lat, "latency_ms"), ints(lat, "count")
    pct, has = exact_percentiles(l_pos, values, counts, n, PERCENTILES)
    for j, name in enumerate(PERCENTILE_COLUMNS):
        cols[name] = _column(pct[:, j], pa.float64(), has)
    top, has_top = _histogram_max(l_pos, values, n)
    cols["latency_max_ms"] = _column(top, _I64, has_top)

    q = merged.queue_cells
    q_pos = at(runs.run["queue_cells"], runs.broker["queue_cells"], ints(q, "window_start_ms") // w)
    present, total, busiest, sum_ix = _spread_partials(q_pos, ints(q, "sends"), n)
    skew, gini, valid = queue_spread(present, total, busiest, sum_ix, grid.queues_per(g_run, g_broker))
    cols["queue_skew"] = _column(skew, pa.float64(), valid)
    cols["queue_gini"] = _column(gini, pa.float64(), valid)

    d = merged.delivery_cells
    d_pos = at(runs.run["delivery_cells"], runs.broker["delivery_cells"], ints(d, "window_start_ms") // w)
    for name in schemas.DELIVERY_COLUMNS:
        values = np.zeros(n, np.int64)
        values[d_pos] = ints(d, name)
        cols[name] = values

    cols["isolated_producers"] = _isolated_producers(merged, runs, grid, (g_run, g_broker, window))
    cols.update(_key_columns(runs, merged.key_names, g_run))
    cols["broker"] = from_codes(g_broker, runs.brokers, dictionary=False)
    cols["window_start_ms"] = window * np.int64(w)
    cols["window_ms"] = np.full(n, w, np.int64)
    return _output("broker_windows", merged.key_names, cols)


def _store_columns(cells: pa.Table, pos: np.ndarray, n: int, window_ms: int) -> dict[str, pa.Array]:
    """broker_windows' closed-loop store columns from the attempt cells at grid rows ``pos``."""
    sums = {}
    for name in (*_STORE_SUMS, "queue_depth_max"):
        values = np.zeros(n, np.int64) if name != "queue_depth_max" else np.full(n, -1, np.int64)
        values[pos] = ints(cells, name)
        sums[name] = values
    seen = sums["store_requests"] > 0
    mean, _ = _ratio(sums["queue_depth_sum"].astype(np.float64), sums["store_requests"])
    util = sums["store_service_us"].astype(np.float64) / (window_ms * 1000.0)
    return {
        "queue_depth_mean": _column(mean, pa.float64(), seen),
        "queue_depth_max": _column(sums["queue_depth_max"], _I64, seen),
        "utilisation": _column(util, pa.float64(), seen),
    }


def _isolated_producers(
    merged: SummaryAggregates, runs: _Runs, grid: _Grid, cells: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> np.ndarray:
    """``countDistinct(producer)`` of the intervals overlapping each (run, broker, window) cell."""
    g_run, g_broker, g_window = cells
    out = np.zeros(len(g_run), np.int64)
    t = merged.intervals
    if not t.num_rows or not len(g_run):
        return out
    i_run = runs.run["intervals"]
    row, window = _interval_windows(t, merged.window_ms, grid.lo[i_run], grid.hi[i_run])
    at = joint_lookup([g_run, g_broker, g_window], [i_run[row], runs.broker["intervals"][row], window])
    hit = at >= 0
    distinct = Groups([at[hit], ints(t, "producer")[row][hit]]) if hit.any() else None
    if distinct is not None:
        np.add.at(out, at[hit][distinct.first], 1)
    return out


def _queue_windows(merged: SummaryAggregates, runs: _Runs, grid: _Grid) -> pa.Table:
    """``queue_windows``: every queue of a run (a (broker, queue)
    that got an attempt) x every window of the run: attempts, ok attempts, and skew: attempts over
    the mean of the broker's queues in that window (null when that mean is 0)."""
    w = merged.window_ms
    row, window = grid.windows(grid.queue_run)
    g_run, g_broker, g_queue = grid.queue_run[row], grid.queue_broker[row], grid.queue_id[row]
    n = len(row)
    q = merged.queue_cells
    pos = all_found(
        joint_lookup(
            [g_run, g_broker, g_queue, window],
            [
                runs.run["queue_cells"],
                runs.broker["queue_cells"],
                ints(q, "queue_id"),
                ints(q, "window_start_ms") // w,
            ],
        )
    )
    sends, ok = np.zeros(n, np.int64), np.zeros(n, np.int64)
    sends[pos], ok[pos] = ints(q, "sends"), ints(q, "ok")
    skew = np.zeros(n, np.float64)
    valid = np.zeros(n, bool)
    if n:
        cell = Groups([g_run, g_broker, window])
        mean = cell.sum(sends).astype(np.float64) / cell.count().astype(np.float64)  # avg over the window
        m = mean[cell.index]
        valid = m > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            skew = sends.astype(np.float64) / np.where(valid, m, 1.0)
    cols = {
        **_key_columns(runs, merged.key_names, g_run),
        "broker": from_codes(g_broker, runs.brokers, dictionary=False),
        "queue_id": pa.array(g_queue.astype(np.int32)),
        "window_start_ms": window * np.int64(w),
        "window_ms": np.full(n, w, np.int64),
        "sends": sends,
        "ok": ok,
        "skew": _column(skew, pa.float64(), valid),
    }
    return _output("queue_windows", merged.key_names, cols)


def _producer_window_table(merged: SummaryAggregates, runs: _Runs, grid: _Grid) -> pa.Table:
    """``producer_windows``: the producers' rows, with queue
    skew/Gini over every queue of the run."""
    t = merged.producer_windows
    run = runs.run["producer_windows"]
    present, total, busiest, sum_ix = (
        np.asarray(t.column(n).fill_null(0).to_numpy(), np.int64) for n in _PARTIALS
    )
    has = bools(t.column("queue_total").is_valid())
    skew, gini, valid = queue_spread(present, total, busiest, sum_ix, grid.queues_per(run, None))
    valid &= has
    cols = {
        **_key_columns(runs, merged.key_names, run),
        **{n: t.column(n) for n in t.column_names if n not in merged.key_names},
        "queue_skew": _column(skew, pa.float64(), valid),
        "queue_gini": _column(gini, pa.float64(), valid),
    }
    return _output("producer_windows", merged.key_names, cols)


def _run_summary(merged: SummaryAggregates, runs: _Runs, grid: _Grid) -> pa.Table:
    """``run_summary``: per run a row "all" and one per broker that
    stored a result or got an attempt. Message columns count the results stored on the broker (all
    results for "all"), attempt columns the attempts sent to it, isolation columns its intervals
    (``isolated_ms`` clipped at the run's last send end); rates per second of the run's span."""
    rs = merged.result_scopes
    s_run, s_broker = runs.run["result_scopes"], runs.broker["result_scopes"]
    cells = merged.attempt_cells
    c_run, c_broker = runs.run["attempt_cells"], runs.broker["attempt_cells"]
    # the scopes: (run, -1) for "all" of every run with results or attempts, (run, broker) for the brokers
    s_all = np.concatenate([s_run, c_run])
    s_b = np.concatenate([np.where(s_broker >= 0, s_broker, -2), c_broker])
    keep = s_b >= 0
    scope_run = np.concatenate([s_all, s_all[keep]])
    scope_broker = np.concatenate([np.full(len(s_all), -1), s_b[keep]])
    if len(scope_run):
        sg = Groups([scope_run, scope_broker])
        scope_run, scope_broker = scope_run[sg.first], scope_broker[sg.first]
    n = len(scope_run)
    is_all = scope_broker < 0

    def scope_of(run: np.ndarray, broker_code: np.ndarray) -> np.ndarray:
        return joint_lookup([scope_run, scope_broker], [run, broker_code])

    def add_all_and_broker(run: np.ndarray, broker_code: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows mapped to their run's "all" scope and to their broker's (if any): (source row, scope)."""
        rows = np.arange(len(run))
        to_all = scope_of(run, np.full(len(run), -1))
        has_b = broker_code >= 0
        to_b = scope_of(run[has_b], broker_code[has_b])
        return np.concatenate([rows, rows[has_b]]), np.concatenate([to_all, to_b])

    cols: dict[str, object] = {}
    src, scope = add_all_and_broker(s_run, s_broker)
    for name in (
        "messages",
        "ok",
        "failed",
        "rejected",
        "attempts",
        "retries",
        "retry_budget_exhausted",
        *schemas.DELIVERY_COLUMNS,
    ):
        values = np.zeros(n, np.int64)
        np.add.at(values, scope, ints(rs, name)[src])
        cols[name] = values
    first_born = np.full(n, np.iinfo(np.int64).max, np.int64)
    last_end = np.full(n, np.iinfo(np.int64).min, np.int64)
    np.minimum.at(first_born, scope, ints(rs, "first_born_ms")[src])
    np.maximum.at(last_end, scope, ints(rs, "last_end_ms")[src])

    for table, column, names, ps, max_name in (
        ("result_latency", "latency_ms", PERCENTILE_COLUMNS, PERCENTILES, "latency_max_ms"),
        (
            "result_queue_wait",
            "queue_wait_ms",
            QUEUE_WAIT_COLUMNS,
            QUEUE_WAIT_PERCENTILES,
            "queue_wait_max_ms",
        ),
    ):
        h = getattr(merged, table)
        src, scope = add_all_and_broker(runs.run[table], runs.broker[table])
        values, counts = ints(h, column)[src], ints(h, "count")[src]
        pct, has = exact_percentiles(scope, values, counts, n, ps)
        for j, name in enumerate(names):
            cols[name] = _column(pct[:, j], pa.float64(), has)
        top, has_top = _histogram_max(scope, values, n)
        cols[max_name] = _column(top, _I64, has_top)

    src, scope = add_all_and_broker(c_run, c_broker)
    for name in ("sends", *OUTCOME_COLUMNS, "bytes", *BUSY_COLUMNS):
        values = np.zeros(n, np.int64)
        np.add.at(values, scope, ints(cells, name)[src])
        cols[name if name != "ok" else "_attempts_ok"] = values

    # queue skew and Gini over the run's queues (all) or the broker's
    q = merged.queue_cells
    q_run, q_broker, q_id = runs.run["queue_cells"], runs.broker["queue_cells"], ints(q, "queue_id")
    if q.num_rows:
        per_queue = Groups([q_run, q_broker, q_id])
        n_q = per_queue.sum(ints(q, "sends"))
        pq_run, pq_broker = q_run[per_queue.first], q_broker[per_queue.first]
        src, scope = add_all_and_broker(pq_run, pq_broker)
        parts = _spread_partials(scope, n_q[src], n)
    else:
        parts = tuple(np.zeros(n, np.int64) for _ in range(4))
    n_queues = np.where(is_all, grid.queues_per(scope_run, None), grid.queues_per(scope_run, scope_broker))
    skew, gini, valid = queue_spread(*parts, n_queues)
    cols["queue_skew"] = _column(skew, pa.float64(), valid)
    cols["queue_gini"] = _column(gini, pa.float64(), valid)

    # the run: its span and its last send end (isolated_ms is clipped there)
    all_row = scope_of(np.arange(runs.n_runs), np.full(runs.n_runs, -1))
    run_has_results = np.zeros(runs.n_runs, bool)
    run_has_results[s_run] = True
    run_last_end = np.where(all_row >= 0, last_end[np.maximum(all_row, 0)], 0)
    run_first_born = np.where(all_row >= 0, first_born[np.maximum(all_row, 0)], 0)
    duration = (run_last_end - run_first_born)[scope_run]
    cols["duration_ms"] = duration

    t = merged.intervals
    isolations, isolated_ms = np.zeros(n, np.int64), np.zeros(n, np.int64)
    if t.num_rows:
        i_run = runs.run["intervals"]
        keep_i = run_has_results[i_run]  # Spark joins the intervals with the run's last result end
        i_broker = runs.broker["intervals"]
        clipped = np.maximum(np.minimum(ints(t, "end_ms"), run_last_end[i_run]) - ints(t, "start_ms"), 0)
        src, scope = add_all_and_broker(i_run[keep_i], i_broker[keep_i])
        found = scope >= 0  # an interval's broker always has a scope (it got the attempt)
        np.add.at(isolations, scope[found], 1)
        np.add.at(isolated_ms, scope[found], clipped[keep_i][src][found])
    cols["isolations"], cols["isolated_ms"] = isolations, isolated_ms

    stored = np.zeros(runs.n_runs, np.int64)
    has_stored = np.zeros(runs.n_runs, bool)
    np.add.at(stored, scope_run[~is_all], cols["messages"][~is_all])
    has_stored[scope_run[~is_all]] = True
    run_stored = stored[scope_run]
    share_valid = has_stored[scope_run] & (run_stored > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(
            is_all,
            1.0,
            np.where(
                share_valid,
                cols["messages"].astype(np.float64) / np.where(share_valid, run_stored, 1).astype(np.float64),
                0.0,
            ),
        )
    cols["share"] = share
    num = cols["ok"].astype(np.float64) * 1000.0
    rate, valid = _ratio(num, duration)
    cols["publish_rate_per_s"] = _column(rate, pa.float64(), valid)
    rate, valid = _ratio(cols["failed"] + cols["rejected"], cols["messages"])
    cols["error_rate"] = _column(rate, pa.float64(), valid)
    rate, valid = _ratio(cols["sends"] - cols["_attempts_ok"], cols["sends"])
    cols["attempt_error_rate"] = _column(rate, pa.float64(), valid)
    cols.update(_key_columns(runs, merged.key_names, scope_run))
    cols["scope"] = (
        pc.if_else(
            pa.array(is_all),
            pa.scalar("all"),
            from_codes(np.maximum(scope_broker, 0), runs.brokers, dictionary=False),
        )
        if n
        else pa.array([], pa.string())
    )
    return _output("run_summary", merged.key_names, cols)
