"""The commit log the stored copies make: every copy as its broker wrote it (:func:`log_records`), in
the brokers' write order with queue offsets, commit-log offsets and offset message ids
(:func:`with_offsets`, or a part at a time: :func:`numbered_chunks`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim.broker.store.copies import copy_rows, is_answered_outcome, stored_copies
from rocketsim.broker.store.hosts import offset_msg_ids, store_hosts
from rocketsim.broker.store.layout import (
    ATTEMPT_COLUMNS,
    MESSAGE_COLUMNS,
    NOT_STORED_STATUSES,
    RESULT_COLUMNS,
)
from rocketsim.broker.store.records import count_key_tokens, store_records, utf8_lengths
from rocketsim.scenario import Scenario
from rocketsim.tables.grouping import (
    Groups,
    bools,
    ints,
    keeping_codes,
    pack_keys,
    string_codes,
    take_rows,
    take_valid,
)
from rocketsim.tables.schemas import COMMIT_LOG, data_schema

# a log given whole, or as a function giving it (best a RowSource of rocketsim.stage.protocols)
LogSource = pa.Table | Callable[[], pa.Table]
# The brokers' write order: store time, then a fixed tie-break (a batch's elements stay together).
STORE_ORDER = ("store_ts_ms", "producer", "send_seq", "attempt", "seq")
OFFSET_NAMES = ("queue_offset", "commit_log_offset", "offset_msg_id")
# A commit-log record before its offsets (what the simulate stage nests per result row).
LOG_COLUMNS = pa.schema([f for f in data_schema(COMMIT_LOG) if f.name not in OFFSET_NAMES])
# what the log reads of a copy's strings through per-row numbers (_copies_at does not take them)
_NOT_TAKEN = ("tags", "keys", "outcome", "status", "uniq_msg_id")


def _copies_at(
    messages: pa.Table, attempts: pa.Table, results: pa.Table, rows: tuple[np.ndarray, ...]
) -> pa.Table:
    """The copies at :func:`copy_rows`' rows, with the columns :func:`store_records` and the log need
    but those of :data:`_NOT_TAKEN` (:func:`log_records` takes their numbers)."""
    msg, att, res = rows
    att_cols = [c for c in ATTEMPT_COLUMNS if c not in _NOT_TAKEN]
    taken = [
        take_valid(
            messages.select(["producer", "seq", *(c for c in MESSAGE_COLUMNS if c not in _NOT_TAKEN)]), msg
        ),
        take_valid(attempts.select(["seq", *att_cols]).rename_columns(["send_seq", *att_cols]), att),
        take_valid(results.select([c for c in RESULT_COLUMNS if c not in _NOT_TAKEN]), res),
    ]
    return pa.table({name: t.column(name) for t in taken for name in t.column_names})


def log_records(messages: pa.Table, attempts: pa.Table, results: pa.Table, sc: Scenario) -> pa.Table:
    """:data:`LOG_COLUMNS`: every stored copy as its broker wrote it, sorted by (producer, seq, attempt).

    ``is_result`` marks the copy ``send_results`` points at: of a message whose status is not
    FAILED/REJECTED, its last copy from an answered attempt (``ok``/``status:*``: a not-OK store that a
    retry lost is still returned), or a ONEWAY_SENT message's copy. Copies of requests the client gave up
    on (stored timeouts) are records too, pointed at by no result: duplicates when a retry stored again.
    """
    rows = copy_rows(messages, attempts, results)
    if rows is None:  # repeated keys: the joins, then a sort
        records = store_records(stored_copies(messages, attempts, results), sc)
        records = records.sort_by([(k, "ascending") for k in ("producer", "seq", "attempt")])
        answered, status = _answered_status(records, records)
    else:  # the strings of the copies' sources read once per source row, their numbers taken
        msg, att, res = rows
        uniq_len = utf8_lengths(results.column("uniq_msg_id"))[res]
        key_tokens = count_key_tokens(messages.column("keys"))[msg]
        records = store_records(_copies_at(messages, attempts, results, rows), sc, uniq_len, key_tokens)
        answered, status = _answered_status(attempts, results)
        answered, status = answered[att], {k: v[res] for k, v in status.items()}
    producer = np.asarray(records.column("producer").to_numpy(zero_copy_only=False))
    seq = np.asarray(records.column("seq").to_numpy(zero_copy_only=False))
    pointable = answered | status["oneway"]
    at = np.flatnonzero(pointable)  # the last pointable copy of each message
    last = np.ones(len(at), bool)
    last[:-1] = (producer[at[1:]] != producer[at[:-1]]) | (seq[at[1:]] != seq[at[:-1]])
    is_result = np.zeros(len(seq), bool)
    is_result[at[last]] = True
    records = records.append_column("is_result", pa.array(is_result & status["returned"]))
    renamed = {
        "start_ts_ms": "born_ts_ms",
        "delay_level": "requested_level",
        "delay_level_stored": "delay_level",
    }
    records = records.rename_columns([renamed.get(n, n) for n in records.column_names])
    return records.select(LOG_COLUMNS.names).cast(LOG_COLUMNS)


def _answered_status(attempts: pa.Table, results: pa.Table) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Per attempt row, whether its answer came (:func:`is_answered_outcome`); per result row, whether it
    is ONEWAY_SENT (``oneway``) and whether it points at a copy at all (``returned``: not
    :data:`NOT_STORED_STATUSES`)."""
    status = results.column("status")
    return bools(is_answered_outcome(attempts.column("outcome"))), {
        "oneway": bools(pc.equal(status, "ONEWAY_SENT")),
        "returned": ~bools(pc.is_in(status, value_set=pa.array(NOT_STORED_STATUSES))),
    }


def _running_sums(groups: np.ndarray, values: np.ndarray | None = None) -> np.ndarray:
    """Per row, the sum of ``values`` (None: 1 a row) over the earlier rows of its group (int codes)."""
    n = len(groups)
    if n == 0 or groups.min() == groups.max():
        return np.arange(n) if values is None else np.cumsum(values) - values
    codes = groups - groups.min()
    order = np.argsort(codes.astype(np.uint16) if codes.max() < 1 << 16 else codes, kind="stable")
    if values is None:
        before = np.arange(n)  # group by group, each in row order
    else:
        before = np.cumsum(values[order])
        before -= values[order]
    g = codes[order]
    first = np.flatnonzero(np.concatenate([[True], g[1:] != g[:-1]]))
    out = np.empty(n, np.int64)
    out[order] = before - np.repeat(before[first], np.diff(np.append(first, n)))
    return out


def broker_indexes(column: pa.ChunkedArray | pa.Array, brokers: Sequence[str]) -> np.ndarray:
    """Each row's place in ``brokers`` (a dictionary column: its few values looked up); ValueError for a
    broker not there."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    if chunks and all(pa.types.is_dictionary(c.type) for c in chunks):
        places = [np.zeros(0, np.int64)]
        for c in chunks:
            idx = np.asarray(c.indices.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
            place = broker_indexes(c.dictionary.cast(pa.string()), brokers)
            if c.null_count:
                broker_indexes(c.cast(pa.string()), brokers)  # a null: the error below
            places.append(place[idx] if len(place) else idx)
        return np.concatenate(places)
    index = pc.index_in(column, value_set=pa.array(brokers, pa.string()))
    if index.null_count:
        missing = column.filter(pc.is_null(index))[0].as_py()
        raise ValueError(f"{missing!r} is not in the cluster's brokers {list(brokers)}")
    return np.asarray(index.to_numpy(), np.int64)


def with_offsets(log: pa.Table, sc: Scenario) -> pa.Table:
    """``log`` (:data:`LOG_COLUMNS`) as the commit log (``COMMIT_LOG`` columns) in the brokers' write
    order: queue offsets per (broker, store topic, store queue), commit-log offsets as the running sum
    of record sizes per broker, offset message ids.

    Any row order in, any mix of producers and brokers (vectorised: one sort, then running sums)."""
    parts = list(numbered_chunks(log, sc, max(log.num_rows, 1)))
    return parts[0] if parts else _with_offset_columns(log, {})


def numbered_chunks(log: LogSource, sc: Scenario, rows: int) -> Iterator[pa.Table]:
    """:func:`numbered_parts` without the rows of ``log`` each part is."""
    for part, _ in numbered_parts(log, sc, rows):
        yield part


def numbered_parts(log: LogSource, sc: Scenario, rows: int) -> Iterator[tuple[pa.Table, np.ndarray]]:
    """:func:`with_offsets` of ``log`` in parts of ``rows`` records in write order (concatenated: the
    whole), each with the rows of ``log`` it is. What it keeps across the parts is the write order (an
    int per record, made from the sort keys read ``rows`` at a time) and each queue's and broker's next
    offset: each part's rows are taken from ``log`` when it is made and numbered on from where the last
    part ended. ``log`` may be a function giving the same records each time it is called, best a
    :class:`rocketsim.stage.protocols.RowSource` (a memory-mapped file opened anew: only the rows asked
    for are read, let go after each part)."""
    keyed = log if isinstance(log, pa.Table) or hasattr(log, "slice") else log()  # read a piece at a time
    total = keyed.num_rows
    if not total:
        return
    order = _write_order(keyed, total, rows)
    del keyed
    offsets = _NextOffsets(list(sc.cluster.brokers))
    for at in range(0, total, rows):
        taken = np.arange(at, min(at + rows, total)) if order is None else order[at : at + rows]
        if order is None and isinstance(log, pa.Table):
            part = log.slice(at, rows)
        else:  # copies: what a function gave is let go
            part = log_rows(log, taken, LOG_COLUMNS.names)
        yield offsets.numbered(part), taken


def _range(log: pa.Table | Any, start: int, length: int, columns: Sequence[str]) -> pa.Table:
    """Rows ``start`` to ``start + length`` of ``log`` (a table or a RowSource: mapped, not copied),
    ``columns``."""
    return log.slice(start, length).select(list(columns))


def log_rows(log: LogSource, rows: np.ndarray, columns: Sequence[str]) -> pa.Table:
    """Rows ``rows`` of ``log`` (:func:`numbered_parts`), ``columns``: copies."""
    take = getattr(log, "take", None) if not isinstance(log, pa.Table) else None
    if take is not None:
        return take(rows, columns)
    table = log if isinstance(log, pa.Table) else log()
    return take_rows(table.select(list(columns)), rows)


def _sort_keys(piece: pa.Table) -> list[np.ndarray]:
    """The write order's keys of some records (:data:`STORE_ORDER`), (send_seq, seq) as (send_seq, seq -
    send_seq), a batch member's place in its batch (small), so that they pack; the last, ``seq``, to
    bound that difference."""
    ts, producer, send_seq, attempt, seq = (ints(piece, k) for k in STORE_ORDER)
    return [ts, producer, send_seq, attempt, seq - send_seq, seq]


def _write_order(log: pa.Table | Any, total: int, piece: int) -> np.ndarray | None:
    """The stable row order of :data:`STORE_ORDER` (int32 when it fits); None when the rows are in it
    already. The keys are read ``piece`` records at a time, twice (their ranges, then one
    packed int64 per record), so a whole log's keys are never held at once."""
    starts = range(0, total, piece)
    ranges = []
    for at in starts:
        keys = _sort_keys(_range(log, at, min(piece, total - at), STORE_ORDER))
        ranges.append([(int(k.min()), int(k.max())) for k in keys])
    low = [min(r[i][0] for r in ranges) for i in range(6)]
    high = [max(r[i][1] for r in ranges) for i in range(6)]
    spans = [h - lo + 1 for lo, h in zip(low[:5], high[:5], strict=True)]
    # (send_seq, seq - send_seq) stands for (send_seq, seq) while the difference cannot overflow
    if math.prod(spans) >= 1 << 63 or max(abs(v) for v in (low[2], high[2], low[5], high[5])) >= 1 << 62:
        whole = _range(log, 0, total, STORE_ORDER)
        ts, producer, send_seq, attempt, seq = (ints(whole, k) for k in STORE_ORDER)
        return _compact(np.lexsort((seq, attempt, send_seq, producer, ts)))
    packed = np.empty(total, np.int64)
    for at in starts:
        keys = _sort_keys(_range(log, at, min(piece, total - at), STORE_ORDER))[:5]
        packed[at : at + len(keys[0])] = pack_keys(keys, list(zip(low[:5], spans, strict=True)))
    if (packed[1:] >= packed[:-1]).all():
        return None
    # a stable argsort, the fastest here: a broker's log is runs in near order
    return _compact(np.argsort(packed, kind="stable"))


def _compact(order: np.ndarray) -> np.ndarray:
    """``order`` as int32 when its rows fit (half the memory it keeps)."""
    return order.astype(np.int32) if len(order) < 1 << 31 else order


class _NextOffsets:
    """Where numbering goes on: the next queue offset of each (broker, store topic, store queue) and the
    next commit-log offset of each broker; :meth:`numbered` numbers the next part of the write order."""

    def __init__(self, brokers: Sequence[str]) -> None:
        self.brokers = list(brokers)
        self.queue: dict[tuple[int, str, int], int] = {}
        self.log = np.zeros(len(self.brokers), np.int64)

    def numbered(self, part: pa.Table) -> pa.Table:
        """``part`` (the next records in write order, :data:`LOG_COLUMNS`) with its offsets."""
        index = broker_indexes(part.column("broker"), self.brokers)
        topic, topics = string_codes(part.column("store_topic"))
        queue, size = ints(part, "store_queue_id"), ints(part, "store_size")
        g = Groups([index, topic, queue])
        names = topics.to_pylist()
        keys = [(int(index[f]), names[topic[f]], int(queue[f])) for f in g.first.tolist()]
        base = np.array([self.queue.get(k, 0) for k in keys], np.int64)
        for k, b, c in zip(keys, base.tolist(), g.count().tolist(), strict=True):
            self.queue[k] = b + c
        commit_log_offset = _running_sums(index, size) + self.log[index]
        np.add.at(self.log, index, size)
        hosts = store_hosts(self.brokers)
        return _with_offset_columns(
            part,
            {
                "queue_offset": pa.array(_running_sums(g.index) + base[g.index]),
                "commit_log_offset": pa.array(commit_log_offset),
                "offset_msg_id": offset_msg_ids(index, commit_log_offset, hosts),
            },
        )


def _with_offset_columns(part: pa.Table, columns: dict[str, pa.Array]) -> pa.Table:
    """``part`` (:data:`LOG_COLUMNS`) with :data:`OFFSET_NAMES` (none given: empty, ``part`` empty) as
    ``commit_log`` rows."""
    schema = data_schema(COMMIT_LOG)
    for name in OFFSET_NAMES:
        part = part.append_column(name, columns.get(name, pa.array([], schema.field(name).type)))
    return keeping_codes(part, schema)
