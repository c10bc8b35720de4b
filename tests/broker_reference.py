"""Plain references of the broker-side tables (``broker_storage``, ``transactions``, ``consumer_load``) of
one run, written from their definitions over its commit log, messages and results (plain Python over
Arrow rows; rows as dicts), what the tests hold :mod:`rocketsim.broker.side` to.

The transactions' resolution (local state, check-backs, who resolves and when) is
:func:`rocketsim.broker.transactions.resolve`'s, tested on its own; the consumers' queues are
:func:`rocketsim.broker.rebalance.allocation`'s. These references say which rows they get and what the
other columns hold.
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa

from rocketsim.broker import rebalance, store, transactions
from rocketsim.scenario import Scenario
from rocketsim.tables import schemas


def _ceil_div(n: int, size: int) -> int:
    return -(-n // size)


def broker_storage(log: pa.Table, window_ms: int) -> list[dict]:
    """Per broker, store-time window and stored (topic, queue) with writes in it: the records and bytes
    written; the queue's consume-queue entries through the window and their files (300,000 a file); the
    broker's commit-log bytes and index entries through the window and their files (1 GiB; 19,999,999
    entries, the first file made with the first record)."""
    w = window_ms
    columns = ["broker", "store_topic", "store_queue_id", "store_ts_ms", "store_size", "index_entries"]
    cells: dict[tuple, list[dict]] = {}  # (broker, window, topic, queue) -> its records
    for r in log.select(columns).to_pylist():
        cells.setdefault(
            (r["broker"], r["store_ts_ms"] // w * w, r["store_topic"], r["store_queue_id"]), []
        ).append(r)
    bytes_in, index_in = Counter(), Counter()  # (broker, window) -> written in it
    for (broker, start, _, _), written in cells.items():
        bytes_in[broker, start] += sum(r["store_size"] for r in written)
        index_in[broker, start] += sum(r["index_entries"] for r in written)

    def through(counts: Counter, broker: str, start: int) -> int:
        return sum(n for (b, s), n in counts.items() if b == broker and s <= start)

    rows = []
    for (broker, start, topic, queue), written in cells.items():
        entries = sum(
            len(rs)
            for (b, s, t, q), rs in cells.items()
            if (b, t, q) == (broker, topic, queue) and s <= start
        )
        log_bytes, index = through(bytes_in, broker, start), through(index_in, broker, start)
        rows.append(
            {
                "broker": broker,
                "window_start_ms": start,
                "window_ms": w,
                "topic": topic,
                "queue_id": queue,
                "messages": len(written),
                "store_bytes": sum(r["store_size"] for r in written),
                "cq_entries": entries,
                "cq_files": _ceil_div(entries, store.CQ_ENTRIES_PER_FILE),
                "commit_log_bytes": log_bytes,
                "commit_log_files": _ceil_div(log_bytes, store.COMMIT_LOG_FILE_BYTES),
                "index_entries": index,
                "index_files": max(1, _ceil_div(index, store.INDEX_ENTRIES_PER_FILE)),
            }
        )
    return rows


_HALF_COLUMNS = {  # transactions column <- the half's commit-log column
    "attempt": "attempt",
    "is_result": "is_result",
    "topic": "real_topic",
    "broker": "broker",
    "queue_id": "real_queue_id",
    "half_born_ts_ms": "born_ts_ms",
    "half_store_ts_ms": "store_ts_ms",
    "half_queue_offset": "queue_offset",
    "half_commit_log_offset": "commit_log_offset",
    "half_store_size": "store_size",
}


def transaction_rows(log: pa.Table, messages: pa.Table, results: pa.Table) -> list[dict]:
    """The ``transactions`` rows before their resolution: one per stored half (a half-topic record of a
    transactional message: the one its result points at and any other), its place, offsets and size its
    record's; one per transactional message whose result points at no half, those null; the client's
    UNIQ_KEY, the send's status and end its result's."""
    result_of = {
        (r["producer"], r["seq"]): r
        for r in results.select(["producer", "seq", "uniq_msg_id", "status", "end_ts_ms"]).to_pylist()
    }
    halves = [
        r
        for r in log.to_pylist()
        if r["store_topic"] == store.HALF_TOPIC and r["message_type"] == "transaction"
    ]
    rows = [
        {"producer": h["producer"], "seq": h["seq"], **{c: h[k] for c, k in _HALF_COLUMNS.items()}}
        for h in halves
    ]
    pointed = {(h["producer"], h["seq"]) for h in halves if h["is_result"]}
    for m in messages.select(["producer", "seq", "topic", "message_type"]).to_pylist():
        if m["message_type"] == "transaction" and (m["producer"], m["seq"]) not in pointed:
            row = {"producer": m["producer"], "seq": m["seq"], **dict.fromkeys(_HALF_COLUMNS)}
            rows.append(row | {"is_result": False, "topic": m["topic"]})
    for row in rows:
        r = result_of[row["producer"], row["seq"]]
        row |= {"uniq_msg_id": r["uniq_msg_id"], "send_status": r["status"], "end_ts_ms": r["end_ts_ms"]}
    return rows


def transactions_table(log: pa.Table, messages: pa.Table, results: pa.Table, sc: Scenario) -> list[dict]:
    """:func:`transaction_rows`, resolved."""
    passed = [f for f in schemas.TRANSACTIONS if f.name in (*_HALF_COLUMNS, "uniq_msg_id")]
    inputs = pa.schema(
        [*transactions.INPUT_COLUMNS, *(f for f in passed if f.name not in transactions.INPUT_COLUMNS.names)]
    )
    resolved = transactions.resolve(
        pa.Table.from_pylist(transaction_rows(log, messages, results), inputs), sc
    )
    return resolved.select(schemas.data_schema(schemas.TRANSACTIONS).names).to_pylist()


def consumer_load(log: pa.Table, txns: list[dict], sc: Scenario) -> list[dict]:
    """Every allocation row (consumer group, consumer, topic, broker, queue) with what consumers of its
    queue get: its records outside the half topic, where they were written or, delayed, in their real
    topic and queue; and its committed halves (``delivered``; a second committed half of a message is a
    second delivery), each sized as its half."""
    messages, size = Counter(), Counter()
    for r in log.to_pylist():
        if r["store_topic"] != store.HALF_TOPIC:
            queue = r["real_queue_id"] if r["real_queue_id"] is not None else r["store_queue_id"]
            key = (r["real_topic"] or r["store_topic"], r["broker"], queue)
            messages[key] += 1
            size[key] += r["store_size"]
    for t in txns:
        if t["delivered"]:
            key = (t["topic"], t["broker"], t["queue_id"])
            messages[key] += 1
            size[key] += t["half_store_size"]
    rows = []
    for a in rebalance.allocation(sc):
        key = (a["topic"], a["broker"], a["queue_id"])
        rows.append(a | {"messages": messages[key], "bytes": size[key]})
    return rows


def broker_side_tables(
    log: pa.Table, messages: pa.Table, results: pa.Table, sc: Scenario, window_ms: int
) -> dict[str, list[dict]]:
    """The three tables from a run's numbered commit log, messages and results."""
    txns = transactions_table(log, messages, results, sc)
    return {
        "broker_storage": broker_storage(log, window_ms),
        "transactions": txns,
        "consumer_load": consumer_load(log, txns, sc),
    }
