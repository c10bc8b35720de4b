"""The broker side of a run: ``broker_storage``, ``transactions`` and ``consumer_load``, from one broker's
numbered commit log at a time (:func:`rocketsim.broker.store.number_broker`) and small per-queue partials.

Who computes what (the run's one pass, :mod:`rocketsim.stage`):

More: docs/reference/modules.md, rocketsim/broker/side.py.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim.broker import rebalance, store, transactions
from rocketsim.scenario import Scenario
from rocketsim.tables import schemas
from rocketsim.tables.grouping import (
    Groups,
    bools,
    from_codes,
    ints,
    joint_codes,
    regroup,
    running_sum,
    sort_rows,
    spark_ceil_div,
    string_codes,
    window_index,
)

# the columns each function reads (a task reading committed files reads only these)
STORAGE_COLUMNS = ("broker", "store_topic", "store_queue_id", "store_ts_ms", "store_size", "index_entries")
# what the transactions of a broker's halves need of their messages' results (uniq_msg_id: the client's,
# set when it sent the half; the messages hold a placeholder)
HALF_RESULT_COLUMNS = ("producer", "seq", "uniq_msg_id", "status", "end_ts_ms")
UNSTORED_MESSAGE_COLUMNS = ("producer", "seq", "topic", "message_type")
UNSTORED_RESULT_COLUMNS = HALF_RESULT_COLUMNS
BROKER_STORAGE_DATA = schemas.data_schema(schemas.BROKER_STORAGE)
HALF_RESULTS = pa.schema([schemas.SEND_RESULTS.field(n) for n in HALF_RESULT_COLUMNS])


# what broker_storage sums per (broker, store topic, store queue, window): a part's partial sums add up
STORAGE_PARTIALS = pa.schema(
    [
        pa.field("broker", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("queue_id", pa.int64()),
        pa.field("window", pa.int64()),
        pa.field("messages", pa.int64()),
        pa.field("store_bytes", pa.int64()),
        pa.field("index_new", pa.int64()),
    ]
)


def broker_storage(log: pa.Table, window_ms: int) -> pa.Table:
    """``broker_storage`` rows of the brokers in ``log`` (every numbered commit-log record of each:
    ``commit_log`` columns; see :data:`STORAGE_COLUMNS`): per broker, store-time
    window and stored (topic, queue) with writes in it, the records and bytes written, the consume
    queue's entries and files so far, and the broker's commit-log bytes/files and index entries/files
    so far (cumulative over its windows). A broker's log given a part at a time:
    :func:`storage_partials` of each part, then :func:`storage_of_partials`."""
    return storage_of_partials([storage_partials(log, window_ms)], window_ms)


def storage_partials(log: pa.Table, window_ms: int) -> pa.Table:
    """Some records' sums per (broker, store topic, store queue, store-time window)
    (:data:`STORAGE_PARTIALS`): what :func:`broker_storage` adds up, a part of a log at a time."""
    if not log.num_rows:
        return STORAGE_PARTIALS.empty_table()
    b_code, b_names = string_codes(log.column("broker"))
    t_code, t_names = string_codes(log.column("store_topic"))
    queue = ints(log, "store_queue_id")
    window = window_index(ints(log, "store_ts_ms"), window_ms)
    g = Groups([b_code, t_code, queue, window])
    return pa.table(
        {
            "broker": from_codes(b_code[g.first], b_names, dictionary=False),
            "topic": from_codes(t_code[g.first], t_names, dictionary=False),
            "queue_id": queue[g.first],
            "window": window[g.first],
            "messages": g.count(),
            "store_bytes": g.sum(ints(log, "store_size")),
            "index_new": g.sum(ints(log, "index_entries")),
        },
        schema=STORAGE_PARTIALS,
    )


def storage_of_partials(partials: Sequence[pa.Table], window_ms: int) -> pa.Table:
    """``broker_storage`` rows from the :func:`storage_partials` of a log's parts (any split, any order:
    integer sums): per queue's windows in order, the running sums."""
    parts = pa.concat_tables([STORAGE_PARTIALS.empty_table(), *partials])
    if not parts.num_rows:
        return BROKER_STORAGE_DATA.empty_table()
    b_code, b_names = string_codes(parts.column("broker"))
    t_code, t_names = string_codes(parts.column("topic"))
    queue, window = ints(parts, "queue_id"), ints(parts, "window")
    g = Groups([b_code, t_code, queue, window])  # each queue's windows in order
    gb, gt, gq, gw = b_code[g.first], t_code[g.first], queue[g.first], window[g.first]
    messages = g.sum(ints(parts, "messages"))
    store_bytes = g.sum(ints(parts, "store_bytes"))
    index_new = g.sum(ints(parts, "index_new"))
    cq_entries = running_sum(Groups([gb, gt, gq]).index, messages)
    per_broker = Groups([gb, gw])  # each broker's windows in order
    bw_bytes = running_sum(Groups([gb[per_broker.first]]).index, per_broker.sum(store_bytes))
    bw_index = running_sum(Groups([gb[per_broker.first]]).index, per_broker.sum(index_new))
    commit_log_bytes, index_entries = bw_bytes[per_broker.index], bw_index[per_broker.index]
    out = pa.table(
        {
            "broker": from_codes(gb, b_names, dictionary=False),
            "window_start_ms": gw * np.int64(window_ms),
            "window_ms": np.full(g.n, window_ms, np.int64),
            "topic": from_codes(gt, t_names, dictionary=False),
            "queue_id": pa.array(gq.astype(np.int32)),
            "messages": messages,
            "store_bytes": store_bytes,
            "cq_entries": cq_entries,
            "cq_files": spark_ceil_div(cq_entries, store.CQ_ENTRIES_PER_FILE),
            "commit_log_bytes": commit_log_bytes,
            "commit_log_files": spark_ceil_div(commit_log_bytes, store.COMMIT_LOG_FILE_BYTES),
            "index_entries": index_entries,
            "index_files": np.maximum(spark_ceil_div(index_entries, store.INDEX_ENTRIES_PER_FILE), 1),
        },
        schema=BROKER_STORAGE_DATA,
    )
    return sort_rows(out, ("broker", "window_start_ms", "topic", "queue_id"))


_TXN_INPUT = pa.schema(
    [
        *transactions.INPUT_COLUMNS,
        *[
            f
            for f in schemas.TRANSACTIONS
            if f.name
            in (
                "uniq_msg_id",
                "topic",
                "broker",
                "queue_id",
                "half_queue_offset",
                "half_commit_log_offset",
                "half_store_size",
            )
        ],
    ]
)
TRANSACTIONS_DATA = schemas.data_schema(schemas.TRANSACTIONS)
TRANSACTIONS_ORDER = [("producer", "ascending"), ("seq", "ascending"), ("attempt", "ascending")]


def _resolved(rows: pa.Table, sc: Scenario) -> pa.Table:
    """``transactions`` rows: :func:`rocketsim.broker.transactions.resolve` of the input rows."""
    rows = rows.select(_TXN_INPUT.names).cast(_TXN_INPUT)
    if rows.num_rows:
        rows = transactions.resolve(rows, sc)
    else:
        for f in transactions.OUTPUT_COLUMNS:
            rows = rows.append_column(f, pa.nulls(0, f.type))
    out = rows.select(TRANSACTIONS_DATA.names).cast(TRANSACTIONS_DATA)
    return out.sort_by(TRANSACTIONS_ORDER)


def _stored_halves(log: pa.Table) -> pa.Table:
    """Every stored transactional half among commit-log records (the result's and any other)."""
    half = pc.and_(
        pc.equal(log.column("store_topic"), store.HALF_TOPIC),
        pc.equal(log.column("message_type"), "transaction"),
    )
    return log.filter(half)


def pointed_halves(log: pa.Table) -> pa.Table:
    """(producer, seq) of the transactional messages whose result points at a stored half, from their
    commit-log records (:func:`rocketsim.broker.store.log_records`, numbered or not)."""
    halves = _stored_halves(log)
    return halves.filter(halves.column("is_result")).select(["producer", "seq"])


def result_halves(results: pa.Table) -> pa.Table:
    """(producer, seq) of the results that point at a record in the half topic, from complete
    ``send_results`` rows (their ``store_topic``): the same rows as :func:`pointed_halves`."""
    return results.filter(pc.equal(results.column("store_topic"), store.HALF_TOPIC)).select(
        ["producer", "seq"]
    )


def other_half_results(
    log: pa.Table, log_broker: np.ndarray, results: pa.Table
) -> tuple[pa.Table, np.ndarray]:
    """For one producer's commit-log records (:func:`rocketsim.broker.store.log_records`, each record's broker
    in ``log_broker``) and its results: the results (:data:`HALF_RESULT_COLUMNS`) of the transactional
    messages with a stored half their result does not point at, once per broker holding such a half, and
    that broker. A broker task needs them beside the results pointing at it to make those halves'
    rows (:func:`stored_transactions`)."""
    half = pc.and_(
        pc.and_(pc.equal(log.column("store_topic"), store.HALF_TOPIC), pc.invert(log.column("is_result"))),
        pc.equal(log.column("message_type"), "transaction"),
    )
    mask = np.asarray(half.to_numpy(zero_copy_only=False), bool)
    keys = pa.table(
        {
            "producer": log.column("producer").filter(half),
            "seq": log.column("seq").filter(half),
            "_broker": pa.array(np.asarray(log_broker)[mask].astype(np.int64)),
        }
    )
    keys = keys.group_by(["producer", "seq", "_broker"], use_threads=False).aggregate([])
    res = results.select(list(HALF_RESULT_COLUMNS))
    if not keys.num_rows:  # no such half (no transaction): no result to hash
        res = res.slice(0, 0)
    rows = keys.join(res, ["producer", "seq"], join_type="inner")
    if rows.num_rows != keys.num_rows:
        raise ValueError(f"other_half_results: {keys.num_rows - rows.num_rows} halves have no result")
    rows = rows.sort_by([("_broker", "ascending"), ("producer", "ascending"), ("seq", "ascending")])
    return rows.select(list(HALF_RESULT_COLUMNS)).cast(HALF_RESULTS), ints(rows, "_broker")


def _one_result_each(results: pa.Table) -> pa.Table:
    """:data:`HALF_RESULT_COLUMNS` of ``results``, one row per (producer, seq) (they may repeat when a
    broker holds both the half a result points at and another half of the message)."""
    res = results.select(list(HALF_RESULT_COLUMNS)).cast(HALF_RESULTS)
    if res.num_rows < 2:
        return res
    key = _key_array(res).to_numpy()
    _, first = np.unique(key, return_index=True)
    return res if len(first) == res.num_rows else res.take(pa.array(np.sort(first)))


def stored_transactions(log: pa.Table, results: pa.Table, sc: Scenario) -> pa.Table:
    """``transactions`` rows of the halves stored on a broker, each one's own (the one its result points
    at and any other: :mod:`rocketsim.broker.transactions`): ``log`` holds that broker's numbered records
    (``commit_log`` columns), ``results`` at least the results of the messages whose halves it holds
    (:data:`HALF_RESULT_COLUMNS` of ``send_results``: those that point at its halves, and those of
    :func:`other_half_results`; repeats allowed). The half's broker, real queue, offsets and size are
    its record's; uniq_msg_id, status and end the message's result's."""
    halves = _stored_halves(log)
    rows = halves.select(
        [
            "producer",
            "seq",
            "attempt",
            "is_result",
            "broker",
            "real_topic",
            "real_queue_id",
            "born_ts_ms",
            "store_ts_ms",
            "queue_offset",
            "commit_log_offset",
            "store_size",
        ]
    ).join(_one_result_each(results), ["producer", "seq"], join_type="inner")
    if rows.num_rows != halves.num_rows:
        raise ValueError(f"stored_transactions: {halves.num_rows - rows.num_rows} halves have no result")
    renamed = {
        "real_topic": "topic",
        "real_queue_id": "queue_id",
        "status": "send_status",
        "born_ts_ms": "half_born_ts_ms",
        "store_ts_ms": "half_store_ts_ms",
        "queue_offset": "half_queue_offset",
        "commit_log_offset": "half_commit_log_offset",
        "store_size": "half_store_size",
    }
    return _resolved(rows.rename_columns([renamed.get(n, n) for n in rows.column_names]), sc)


def unstored_transactions(messages: pa.Table, results: pa.Table, halves: pa.Table, sc: Scenario) -> pa.Table:
    """``transactions`` rows of some producers' transactional messages whose result points at no stored
    half (``halves``: (producer, seq) of those that do, :func:`pointed_halves` or
    :func:`result_halves`): half columns null, resolved ``not_stored`` (halves a broker stored of a send
    that failed are rows of :func:`stored_transactions`). ``messages`` and ``results`` need
    :data:`UNSTORED_MESSAGE_COLUMNS` and :data:`UNSTORED_RESULT_COLUMNS`. With
    :func:`stored_transactions` of every broker: the whole table."""
    txn = messages.filter(pc.equal(messages.column("message_type"), "transaction"))
    txn = txn.select(["producer", "seq", "topic"])
    stored = (
        pc.is_in(_key_array(txn), value_set=_key_array(halves))
        if halves.num_rows
        else pa.array(np.zeros(txn.num_rows, bool))
    )
    txn = txn.filter(pc.invert(stored))
    res = results.select(list(UNSTORED_RESULT_COLUMNS))
    if not txn.num_rows:  # no transactional message: no result to hash
        res = res.slice(0, 0)
    rows = txn.join(res, ["producer", "seq"], join_type="inner")
    rows = rows.rename_columns(["send_status" if n == "status" else n for n in rows.column_names])
    rows = rows.append_column("is_result", pa.array(np.zeros(rows.num_rows, bool)))
    for name in (
        "attempt",
        "broker",
        "queue_id",
        "half_born_ts_ms",
        "half_store_ts_ms",
        "half_queue_offset",
        "half_commit_log_offset",
        "half_store_size",
    ):
        rows = rows.append_column(name, pa.nulls(rows.num_rows, _TXN_INPUT.field(name).type))
    return _resolved(rows, sc)


def _key_array(table: pa.Table) -> pa.Array:
    return pa.array((ints(table, "producer") << 40) | ints(table, "seq"))


DELIVERIES = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("broker", pa.string(), nullable=False),
        pa.field("queue_id", pa.int32(), nullable=False),
        pa.field("messages", pa.int64(), nullable=False),
        pa.field("bytes", pa.int64(), nullable=False),
    ]
)


_DELIVERY_PARTS = pa.schema([f.with_nullable(True) for f in DELIVERIES])


# records of a log :func:`queue_deliveries` takes at a time (its memory: a part's, not the whole log's)
DELIVERY_PART_ROWS = 1 << 18


def queue_deliveries(log: pa.Table, txns: pa.Table) -> pa.Table:
    """What consumers of each (topic, broker, queue) get from a broker (:data:`DELIVERIES`): its
    records not in the half topic, in their real topic and queue (delay records too), plus its
    committed halves (``txns``: the broker's :func:`stored_transactions`; a message's second committed
    half is delivered again), sized as their half. The records are counted :data:`DELIVERY_PART_ROWS`
    at a time, the parts' sums summed."""
    parts = [
        record_deliveries(log.slice(at, DELIVERY_PART_ROWS))
        for at in range(0, log.num_rows, DELIVERY_PART_ROWS)
    ]
    return deliveries_of_parts(parts, txns)


def deliveries_of_parts(parts: Sequence[pa.Table], txns: pa.Table) -> pa.Table:
    """:func:`queue_deliveries` from the :func:`record_deliveries` of a log's parts and its broker's
    :func:`stored_transactions`."""
    committed = txns.filter(txns.column("delivered"))
    parts = list(parts)
    parts.append(
        _regrouped_deliveries(
            pa.table(
                {
                    "topic": committed.column("topic"),
                    "broker": committed.column("broker"),
                    "queue_id": committed.column("queue_id"),
                    "messages": pa.array(np.ones(committed.num_rows, np.int64)),
                    "bytes": committed.column("half_store_size").cast(pa.int64()),
                }
            )
        )
    )
    return _regrouped_deliveries(pa.concat_tables([DELIVERIES.empty_table(), *parts]))


def record_deliveries(log: pa.Table) -> pa.Table:
    """:func:`queue_deliveries` of records ``log`` (no committed half): grouped by codes (the topic,
    real or stored, and the broker as codes of their sorted names), the strings made once per queue."""
    (real, stored), topics = joint_codes([log.column("real_topic"), log.column("store_topic")])
    half = topics.index(store.HALF_TOPIC).as_py()
    visible = stored != half if half >= 0 else np.ones(len(stored), bool)
    topic = np.where(real >= 0, real, stored)[visible]
    broker, brokers = string_codes(log.column("broker"))
    real_queue = log.column("real_queue_id")
    queue = np.where(
        bools(real_queue.is_valid()),
        np.asarray(real_queue.fill_null(0).to_numpy(), np.int64),
        ints(log, "store_queue_id"),
    )[visible]
    g = Groups([topic, broker[visible], queue])
    return pa.table(
        {
            "topic": from_codes(topic[g.first], topics, dictionary=False),
            "broker": from_codes(broker[visible][g.first], brokers, dictionary=False),
            "queue_id": pa.array(queue[g.first].astype(np.int32)),
            "messages": g.count(),
            "bytes": g.sum(ints(log, "store_size")[visible]),
        },
        schema=DELIVERIES,
    )


def _regrouped_deliveries(rows: pa.Table) -> pa.Table:
    """Delivery rows (of nullable keys) of one queue summed; rows with no broker or queue dropped."""
    rows = rows.cast(_DELIVERY_PARTS)
    rows = rows.filter(pc.and_(pc.is_valid(rows.column("broker")), pc.is_valid(rows.column("queue_id"))))
    return regroup(rows.cast(DELIVERIES), ("topic", "broker", "queue_id"), ("messages", "bytes"), (), ())


def consumer_load(deliveries: Sequence[pa.Table] | pa.Table, sc: Scenario) -> pa.Table:
    """``consumer_load``: every row of
    :func:`rocketsim.broker.rebalance.allocation` with the messages and bytes its queue delivers (0 if none),
    from the brokers' :func:`queue_deliveries`."""
    parts = [deliveries] if isinstance(deliveries, pa.Table) else list(deliveries)
    per_queue = regroup(
        pa.concat_tables([p.cast(DELIVERIES) for p in parts]) if parts else DELIVERIES.empty_table(),
        ("topic", "broker", "queue_id"),
        ("messages", "bytes"),
        (),
        (),
    )
    schema = schemas.data_schema(schemas.CONSUMER_LOAD)
    alloc = pa.Table.from_pylist(
        rebalance.allocation(sc),
        pa.schema([schema.field(n) for n in ("consumer_group", "consumer", "topic", "broker", "queue_id")]),
    )
    joined = alloc.join(per_queue, ["topic", "broker", "queue_id"], join_type="left outer")
    out = joined.select(schema.names)
    out = out.set_column(5, "messages", pc.fill_null(out.column("messages"), 0))
    out = out.set_column(6, "bytes", pc.fill_null(out.column("bytes"), 0))
    return out.cast(schema)
