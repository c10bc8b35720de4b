"""The summary aggregates: what a producer task hands the driver for the summary tables.

The columns the tables read and count (:data:`OUTCOME_KINDS`, :data:`ATTEMPT_COLUMNS`, ...), one small Arrow
table per :class:`SummaryAggregates` field (:data:`AGGREGATE_TABLES`: counts per cell, exact (value, count)
histograms, whole producers' rows), their bytes (Arrow IPC) and :func:`merge`, which adds aggregates of
disjoint producers up in any order (every table sorted by its keys).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields

import numpy as np
import pyarrow as pa

from rocketsim.tables import schemas
from rocketsim.tables.grouping import Groups, key_codes, regroup, sort_rows

PERCENTILES = (0.5, 0.75, 0.95, 0.99, 0.999, 0.9999)  # the columns: schemas.LATENCY_PERCENTILE_COLUMNS
PERCENTILE_COLUMNS = schemas.LATENCY_PERCENTILE_COLUMNS
QUEUE_WAIT_PERCENTILES = (0.5, 0.99)
QUEUE_WAIT_COLUMNS = ("queue_wait_p50_ms", "queue_wait_p99_ms")
# An attempt's outcome label -> the outcome column counting it: the first row that matches (its label
# equals the text, or starts with it), else failed_other (client, interrupted, other remoting kinds, other
# gRPC transport failures).
OUTCOME_KINDS = (
    ("ok", "equals", "ok"),
    ("failed_timeout", "equals", "remoting:timeout"),
    ("failed_connect", "equals", "remoting:connect"),
    ("failed_broker_error", "prefix", "broker:"),
    ("not_store_ok", "prefix", "status:"),
    # the gRPC family (rocketsim.client.grpc_codes.Reply.label; its OK is "ok"): the Proxy's status, the
    # RPC's own failure
    ("failed_timeout", "equals", "grpc:DEADLINE_EXCEEDED"),
    ("failed_timeout", "equals", "proxy:PROXY_TIMEOUT"),
    ("failed_connect", "equals", "grpc:UNAVAILABLE"),
    ("not_store_ok", "equals", "proxy:MASTER_PERSISTENCE_TIMEOUT"),  # stored: SendStatus FLUSH_DISK_TIMEOUT
    ("not_store_ok", "equals", "proxy:SLAVE_PERSISTENCE_TIMEOUT"),  # FLUSH_SLAVE_TIMEOUT
    ("not_store_ok", "equals", "proxy:HA_NOT_AVAILABLE"),  # SLAVE_NOT_AVAILABLE
    ("failed_broker_error", "prefix", "proxy:"),
)
OUTCOME_COLUMNS = schemas.OUTCOME_COLUMNS  # the tables' columns, in this order
OK, FAILED_OTHER = 0, len(OUTCOME_COLUMNS) - 1  # indexes into OUTCOME_COLUMNS
assert {c for c, _, _ in OUTCOME_KINDS} == set(OUTCOME_COLUMNS[:-1]), "OUTCOME_KINDS names every column"
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
SUMMARY_TABLES = (
    "isolation_intervals",
    "broker_windows",
    "queue_windows",
    "producer_windows",
    "run_summary",
    "fault_windows",
)
# a result's counts by how its send ended (run_summary's and fault_windows' message columns)
STATUS_COLUMNS = ("ok", "failed", "rejected", *schemas.MESSAGE_STATUS_COLUMNS)

NAME = pa.dictionary(pa.int32(), pa.string())  # broker and key columns of the aggregates
I64 = pa.int64()

COUNT_FIELDS = [
    pa.field(n, I64, nullable=False)
    for n in ("sends", *OUTCOME_COLUMNS, "retries", "bytes", *schemas.BUSY_COLUMNS)
]
BUSY_COLUMNS = schemas.BUSY_COLUMNS  # in the order of broker_store.BUSY_KINDS
# per cell, the closed-loop store's part: requests it saw, the sum and max of the queue depth they found
# (max -1: none), the writer's time of their appends (us)
STORE_SUMS = ("store_requests", "queue_depth_sum", "store_service_us")
_STORE = [*[pa.field(n, I64, nullable=False) for n in STORE_SUMS], pa.field("queue_depth_max", I64)]
# the cell of a fault-window aggregate: the fault (its place in [[faults]]) and the period (1: during)
_FAULT_CELL = [pa.field("fault", pa.int32(), nullable=False), pa.field("during", pa.int8(), nullable=False)]
# one table per field of SummaryAggregates (without the key columns, which come first)
AGGREGATE_TABLES: dict[str, pa.Schema] = {
    # per (broker, window of attempt start): attempt counts (broker_windows, run_summary's sends)
    "attempt_cells": pa.schema(
        [
            pa.field("broker", NAME, nullable=False),
            pa.field("window_start_ms", I64, nullable=False),
            *COUNT_FIELDS,
            *_STORE,
        ]
    ),
    # the attempt latencies of those cells: (value, count) pairs
    "attempt_latency": pa.schema(
        [
            pa.field("broker", NAME, nullable=False),
            pa.field("window_start_ms", I64, nullable=False),
            pa.field("latency_ms", I64, nullable=False),
            pa.field("count", I64, nullable=False),
        ]
    ),
    # per (broker, queue, window): attempts and ok attempts (queue_windows, every queue spread)
    "queue_cells": pa.schema(
        [
            pa.field("broker", NAME, nullable=False),
            pa.field("queue_id", pa.int32(), nullable=False),
            pa.field("window_start_ms", I64, nullable=False),
            pa.field("sends", I64, nullable=False),
            pa.field("ok", I64, nullable=False),
        ]
    ),
    # per (result's broker, window of send start): the delivery outcomes of its messages (broker_windows),
    # cells with any only
    "delivery_cells": pa.schema(
        [
            pa.field("broker", NAME, nullable=False),
            pa.field("window_start_ms", I64, nullable=False),
            *[pa.field(n, I64, nullable=False) for n in schemas.DELIVERY_COLUMNS],
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
            pa.field("queue_present", I64),  # of the producer's attempts in the window: queues used
            pa.field("queue_total", I64),  # attempts
            pa.field("queue_max", I64),  # attempts of its busiest queue
            pa.field("queue_sum_ix", I64),  # sum of rank * attempts, ranks by attempts ascending
        ]
    ),
    "intervals": schemas.data_schema(schemas.ISOLATION_INTERVALS),
    # per scope of run_summary's message columns: the broker of a stored result, null for the others
    "result_scopes": pa.schema(
        [
            pa.field("broker", NAME),
            *[pa.field(n, I64, nullable=False) for n in ("messages", *STATUS_COLUMNS)],
            *[pa.field(n, I64, nullable=False) for n in ("attempts", "retries", "retry_budget_exhausted")],
            *[pa.field(n, I64, nullable=False) for n in schemas.DELIVERY_COLUMNS],
            pa.field("first_born_ms", I64, nullable=False),
            pa.field("last_end_ms", I64, nullable=False),
        ]
    ),
    "result_latency": pa.schema(
        [
            pa.field("broker", NAME),
            pa.field("latency_ms", I64, nullable=False),
            pa.field("count", I64, nullable=False),
        ]
    ),
    "result_queue_wait": pa.schema(
        [
            pa.field("broker", NAME),
            pa.field("queue_wait_ms", I64, nullable=False),
            pa.field("count", I64, nullable=False),
        ]
    ),
    # the scenario's faults (fault_windows): the same rows in every producer's aggregate
    "fault_spans": pa.schema(
        [
            pa.field("fault", pa.int32(), nullable=False),
            pa.field("fault_broker", NAME, nullable=False),
            pa.field("fault_kind", NAME, nullable=False),
            pa.field("fault_start_ms", I64, nullable=False),
            pa.field("fault_end_ms", I64, nullable=False),
        ]
    ),
    # per (fault, period: 1 during its window, 0 outside, broker): the counts of the attempts that
    # started in the period
    "fault_attempt_cells": pa.schema([*_FAULT_CELL, pa.field("broker", NAME, nullable=False), *COUNT_FIELDS]),
    # their latencies: (value, count) pairs
    "fault_attempt_latency": pa.schema(
        [
            *_FAULT_CELL,
            pa.field("broker", NAME, nullable=False),
            pa.field("latency_ms", I64, nullable=False),
            pa.field("count", I64, nullable=False),
        ]
    ),
    # per (fault, period, the result's broker: its last attempt's, null without one) the messages whose send
    # began in the period: how their sends ended, their delivery outcomes
    "fault_results": pa.schema(
        [
            *_FAULT_CELL,
            pa.field("broker", NAME),
            *[pa.field(n, I64, nullable=False) for n in ("messages", *STATUS_COLUMNS)],
            *[pa.field(n, I64, nullable=False) for n in schemas.DELIVERY_COLUMNS],
        ]
    ),
    # their send latencies per (fault, period): (value, count) pairs
    "fault_result_latency": pa.schema(
        [*_FAULT_CELL, pa.field("latency_ms", I64, nullable=False), pa.field("count", I64, nullable=False)]
    ),
    # the producers an aggregate covers (merge refuses to count one twice)
    "producers": pa.schema([pa.field("producer", pa.int32(), nullable=False)]),
}
# the partials of a queue spread (queue_spread) in the producer_windows aggregate
SPREAD_PARTIALS = ("queue_present", "queue_total", "queue_max", "queue_sum_ix")
# how merge combines rows with equal keys: key columns, summed columns, min columns, max columns
MERGE_RULES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "attempt_cells": (
        ("broker", "window_start_ms"),
        (*[f.name for f in COUNT_FIELDS], *STORE_SUMS),
        (),
        ("queue_depth_max",),
    ),
    "attempt_latency": (("broker", "window_start_ms", "latency_ms"), ("count",), (), ()),
    "queue_cells": (("broker", "queue_id", "window_start_ms"), ("sends", "ok"), (), ()),
    "delivery_cells": (("broker", "window_start_ms"), schemas.DELIVERY_COLUMNS, (), ()),
    "result_scopes": (
        ("broker",),
        ("messages", *STATUS_COLUMNS, "attempts", "retries", "retry_budget_exhausted")
        + schemas.DELIVERY_COLUMNS,
        ("first_born_ms",),
        ("last_end_ms",),
    ),
    "result_latency": (("broker", "latency_ms"), ("count",), (), ()),
    "result_queue_wait": (("broker", "queue_wait_ms"), ("count",), (), ()),
    "fault_spans": (("fault", "fault_broker", "fault_kind", "fault_start_ms", "fault_end_ms"), (), (), ()),
    "fault_attempt_cells": (("fault", "during", "broker"), tuple(f.name for f in COUNT_FIELDS), (), ()),
    "fault_attempt_latency": (("fault", "during", "broker", "latency_ms"), ("count",), (), ()),
    "fault_results": (
        ("fault", "during", "broker"),
        ("messages", *STATUS_COLUMNS, *schemas.DELIVERY_COLUMNS),
        (),
        (),
    ),
    "fault_result_latency": (("fault", "during", "latency_ms"), ("count",), (), ()),
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
    fault_spans: pa.Table
    fault_attempt_cells: pa.Table
    fault_attempt_latency: pa.Table
    fault_results: pa.Table
    fault_result_latency: pa.Table
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


def with_keys(schema: pa.Schema, key_names: Sequence[str], key_type: pa.DataType = NAME) -> pa.Schema:
    """``schema`` with the key columns ``key_names`` first."""
    return pa.schema([*[pa.field(k, key_type, nullable=False) for k in key_names], *schema])


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
        if name in MERGE_RULES:
            keys, sums, mins, maxs = MERGE_RULES[name]
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
