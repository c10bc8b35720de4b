"""The commit log the stored copies make: every copy as its broker wrote it (:func:`log_records`), in
the brokers' write order with queue offsets, commit-log offsets and offset message ids
(:func:`with_offsets`, or a part at a time: :func:`numbered_chunks`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

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
from rocketsim.tables.grouping import bools, group_codes, ints, pack_keys, take_rows
from rocketsim.tables.schemas import COMMIT_LOG, data_schema

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
    msg, att, res = (pa.array(r) for r in rows)
    att_cols = [c for c in ATTEMPT_COLUMNS if c not in _NOT_TAKEN]
    taken = [
        messages.select(["producer", "seq", *(c for c in MESSAGE_COLUMNS if c not in _NOT_TAKEN)]).take(msg),
        attempts.select(["seq", *att_cols]).rename_columns(["send_seq", *att_cols]).take(att),
        results.select([c for c in RESULT_COLUMNS if c not in _NOT_TAKEN]).take(res),
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


def _store_order(log: pa.Table) -> np.ndarray | None:
    """The stable row order of :data:`STORE_ORDER`; None when the rows are in it already."""
    if log.num_rows == 0:
        return None
    ts, producer, send_seq, attempt, seq = (ints(log, k) for k in STORE_ORDER)
    # (send_seq, seq) sorts as (send_seq, seq - send_seq), a batch member's place in its batch (small),
    # when the difference cannot overflow
    bound = max(abs(int(f(k))) for k in (send_seq, seq) for f in (np.min, np.max))
    packed = pack_keys([ts, producer, send_seq, attempt, seq - send_seq]) if bound < 1 << 62 else None
    if packed is None:
        return np.lexsort((seq, attempt, send_seq, producer, ts))
    if (packed[1:] >= packed[:-1]).all():
        return None
    return np.argsort(packed, kind="stable")  # the fastest here: a broker's log is runs in near order


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
    """Each row's place in ``brokers``; ValueError for a broker not there."""
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
    return parts[0] if parts else _numbered(log, None, sc)


def numbered_chunks(log: pa.Table | Callable[[], pa.Table], sc: Scenario, rows: int) -> Iterator[pa.Table]:
    """:func:`with_offsets` of ``log`` in parts of ``rows`` records in write order (concatenated: the
    whole): the order and the offsets are made once for every record from a few columns, each part's
    rows taken from ``log`` when it is made. ``log`` may be a function giving the same records each time
    it is called (a memory-mapped file opened anew): called once for the numbering, then each part's rows
    taken by its ``take(rows, columns)`` (a function without: from what one more call gives), what it
    gave dropped after, so what it maps is let go (each part's rows are copies)."""
    opened = log if isinstance(log, pa.Table) else log()
    total = opened.num_rows
    if not total:
        return
    numbering = _numbering(opened, sc)
    del opened
    for at in range(0, total, rows):
        yield _numbered(log, numbering, sc, slice(at, at + rows))


def _taken(log: pa.Table | Callable[[], pa.Table], rows: np.ndarray, columns: Sequence[str]) -> pa.Table:
    """Rows ``rows`` of ``log`` (a table, or a function giving one, :func:`numbered_chunks`), ``columns``."""
    take = getattr(log, "take", None) if not isinstance(log, pa.Table) else None
    if take is not None:
        return take(rows, columns)
    table = log if isinstance(log, pa.Table) else log()
    return take_rows(table.select(list(columns)), rows)


@dataclass(frozen=True)
class _Numbering:
    """The write order of a log (None: its own) and, in it, each record's broker and store-topic codes,
    queue offset and commit-log offset."""

    order: np.ndarray | None
    broker: np.ndarray
    topic: np.ndarray
    topics: pa.Array
    queue_offset: np.ndarray
    commit_log_offset: np.ndarray


def _numbering(log: pa.Table, sc: Scenario) -> _Numbering:
    index = broker_indexes(log.column("broker"), list(sc.cluster.brokers))
    topics = pc.dictionary_encode(log.column("store_topic").combine_chunks())
    topic = np.asarray(topics.indices, np.int64)
    size, queue = ints(log, "store_size"), ints(log, "store_queue_id")
    order = _store_order(log)
    if order is not None:
        index, topic, size, queue = index[order], topic[order], size[order], queue[order]
    return _Numbering(
        order,
        index,
        topic,
        topics.dictionary,
        _running_sums(group_codes([index, topic, queue])),
        _running_sums(index, size),
    )


def _numbered(
    log: pa.Table | Callable[[], pa.Table], n: _Numbering | None, sc: Scenario, rows: slice = slice(None)
) -> pa.Table:
    """Records ``rows`` (in write order) of ``log`` with their offsets (``n`` None: ``log`` is an empty
    table); a table in write order is sliced, otherwise the rows are taken (copies)."""
    schema = data_schema(COMMIT_LOG)
    if n is None:
        assert isinstance(log, pa.Table)
        empty = {name: pa.array([], schema.field(name).type) for name in OFFSET_NAMES}
        return (
            pa.table({**{c: log.column(c) for c in log.column_names}, **empty})
            .select(schema.names)
            .cast(schema)
        )
    brokers = list(sc.cluster.brokers)
    index = n.broker[rows]
    start = rows.start or 0
    if n.order is not None:  # broker and topic rebuilt from their codes: cheaper than taking the strings
        taken = [c for c in LOG_COLUMNS.names if c not in ("broker", "store_topic")]
        part = _taken(log, n.order[rows], taken)
        part = part.append_column("broker", pa.array(brokers, pa.string()).take(pa.array(index)))
        part = part.append_column("store_topic", n.topics.take(pa.array(n.topic[rows])))
    elif isinstance(log, pa.Table):
        part = log.slice(start, len(index))
    else:
        part = _taken(log, np.arange(start, start + len(index)), LOG_COLUMNS.names)
    commit_log_offset = n.commit_log_offset[rows]
    cols = {
        "queue_offset": pa.array(n.queue_offset[rows]),
        "commit_log_offset": pa.array(commit_log_offset),
        "offset_msg_id": offset_msg_ids(index, commit_log_offset, store_hosts(brokers)),
    }
    for name in OFFSET_NAMES:
        part = part.append_column(name, cols[name])
    return part.select(schema.names).cast(schema)
