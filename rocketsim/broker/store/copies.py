"""Every stored copy of a message: which attempts the broker wrote, the copies they make (a batch's:
one per member), how many each message has and the delivery outcomes they give (duplicates, lost,
failed but stored).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim.broker.store.layout import ATTEMPT_COLUMNS, COPY_COLUMNS, MESSAGE_COLUMNS, RESULT_COLUMNS
from rocketsim.tables.grouping import bools, ints, lookup, pack_keys


def is_stored_outcome(attempts: pa.Table) -> pa.ChunkedArray | pa.Array:
    """Attempts the broker wrote (``send_attempts.stored``, the broker model's answer): ``ok`` (SEND_OK)
    and ``status:*`` (flush/slave not OK), and requests the client gave up on that the broker processed
    anyway (a slow answer past the timeout, a lost reply): ``remoting:timeout`` rows with ``stored``."""
    return attempts.column("stored")


def is_answered_outcome(outcome: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Attempts whose answer the client got: ``ok`` or ``status:*`` (a SendResult)."""
    return pc.or_(pc.equal(outcome, "ok"), pc.starts_with(outcome, "status:"))


def stored_copies(messages: pa.Table, attempts: pa.Table, results: pa.Table) -> pa.Table:
    """Every stored copy (:data:`COPY_COLUMNS`): each stored attempt, once per member of its send.

    A batch's attempts are keyed by its leading member; every non-rejected member of the batch is a
    copy. Rows in no set order.
    """
    sent = messages.select(["producer", "seq", *MESSAGE_COLUMNS]).join(
        results.select(["producer", "seq", *RESULT_COLUMNS]), ["producer", "seq"], join_type="inner"
    )
    sent = sent.filter(pc.not_equal(sent.column("status"), "REJECTED"))
    att = attempts.filter(is_stored_outcome(attempts))
    att = att.select(["producer", "seq", *ATTEMPT_COLUMNS]).rename_columns(
        ["producer", "send_seq", *ATTEMPT_COLUMNS]
    )
    lead = att.join(
        sent.select(["producer", "seq", "batch_id"]), ["producer", "send_seq"], ["producer", "seq"], "inner"
    )
    single = lead.filter(pc.is_null(lead.column("batch_id"))).drop_columns(["batch_id"])
    single = single.join(sent, ["producer", "send_seq"], ["producer", "seq"], "inner")
    single = single.append_column("seq", single.column("send_seq"))
    grouped = lead.filter(pc.is_valid(lead.column("batch_id")))
    grouped = grouped.join(
        sent.filter(pc.is_valid(sent.column("batch_id"))), ["producer", "batch_id"], join_type="inner"
    )
    parts = [t.select(COPY_COLUMNS.names).cast(COPY_COLUMNS) for t in (single, grouped)]
    return pa.concat_tables(parts)


SENT_STATUSES = ("SEND_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE", "ONEWAY_SENT")
# What the message's result says: the client was told (or, ONEWAY, believes) it is stored.

STORED_COPIES = pa.schema(
    [
        pa.field("producer", pa.int32(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("copies", pa.int64(), nullable=False),
    ]
)


def stored_copy_counts(messages: pa.Table, attempts: pa.Table, results: pa.Table) -> pa.Table:
    """:data:`STORED_COPIES`: per message (a batch: per member), its result's status and how many copies
    of it the brokers stored (:func:`stored_copies`: every stored attempt, also those the client gave up
    on), in (producer, seq) order. The delivery outcomes over it (:func:`delivery_counts`):

    * duplicates = sum over messages of ``max(0, copies - 1)`` (a retry after a stored timeout stores
      the message again: same UNIQ_KEY, another offset);
    * lost = messages whose result says sent (:data:`SENT_STATUSES`: SEND_OK, a not-OK store status,
      ONEWAY_SENT) with no copy (e.g. a oneway request the broker never stored);
    * failed but stored = FAILED messages with at least one copy (the client gave up, the broker has it).
    """
    out = results.select(["producer", "seq", "status"])
    out = out.append_column("copies", pa.array(result_copies(messages, attempts, results), pa.int64()))
    out = out.sort_by([("producer", "ascending"), ("seq", "ascending")])
    return out.select(STORED_COPIES.names).cast(STORED_COPIES)


def delivery_counts(copies: pa.Table) -> dict[str, int]:
    """``duplicates``, ``lost`` and ``failed_but_stored`` over :func:`stored_copy_counts` rows (their
    definitions are there); sums of such rows' counts are the counts of their union."""
    flags = delivery_flags(copies.column("status"), ints(copies, "copies"))
    return {name: int(values.sum()) for name, values in flags.items()}


def delivery_flags(status: pa.ChunkedArray | pa.Array, copies: np.ndarray) -> dict[str, np.ndarray]:
    """Per message (its result's ``status``, its stored ``copies``): its ``duplicates`` (int64) and
    whether it is ``lost`` / ``failed_but_stored`` (0 or 1), as :func:`stored_copy_counts` defines them
    (``run_summary`` sums them per scope)."""
    n = np.asarray(copies, np.int64)
    sent = bools(pc.is_in(status, value_set=pa.array(SENT_STATUSES)))
    failed = bools(pc.equal(status, "FAILED"))
    return {
        "duplicates": np.maximum(n - 1, 0),
        "lost": (sent & (n == 0)).astype(np.int64),
        "failed_but_stored": (failed & (n > 0)).astype(np.int64),
    }


def result_copies(messages: pa.Table, attempts: pa.Table, results: pa.Table) -> np.ndarray:
    """Per ``results`` row, in its order, how many copies of its message the brokers stored: the stored
    attempts (:func:`is_stored_outcome`) of its send, as :func:`stored_copies` makes them (a message
    sent alone: its send's; a member of a batch: the batch's, every sent member a copy); 0 for a
    REJECTED message. Reads ``messages`` (producer, seq, batch_id), ``attempts`` (producer, seq, stored)
    and ``results`` (producer, seq, status); by index arithmetic (:func:`copy_rows`: one count per copy's
    result row) when ``attempts`` has ``attempt`` and no key repeats, else by joins."""
    rows = copy_rows(messages, attempts, results) if "attempt" in attempts.column_names else None
    if rows is not None:
        return np.bincount(rows[2], minlength=results.num_rows).astype(np.int64)
    return result_copies_by_joins(messages, attempts, results)


def log_copies(results: pa.Table, log: pa.Table) -> np.ndarray | None:
    """:func:`result_copies` counted from the records :func:`log_records` made of these results'
    messages (one per stored copy): per ``results`` row (in (producer, seq) order), its records; None
    when the results are not in that order or a record's message has no result here."""
    wanted, keys = result_keys(results), result_keys(log)
    if len(wanted) > 1 and not (wanted[1:] > wanted[:-1]).all():
        return None
    at = key_positions(wanted, keys)
    if len(at) and (at.max() >= len(wanted) or not (wanted[at] == keys).all()):
        return None
    return np.bincount(at, minlength=len(wanted)).astype(np.int64)


def result_copies_by_joins(messages: pa.Table, attempts: pa.Table, results: pa.Table) -> np.ndarray:
    """:func:`result_copies` by joins (any keys, repeats included)."""
    keys = ["producer", "seq"]
    stored = attempts.select([*keys, "stored"]).filter(is_stored_outcome(attempts))
    own = stored.group_by(keys).aggregate([([], "count_all")])
    rows = results.select([*keys, "status"]).append_column("row", pa.array(np.arange(results.num_rows)))
    sent = rows.filter(pc.not_equal(rows.column("status"), "REJECTED"))
    sent = sent.join(messages.select([*keys, "batch_id"]), keys, join_type="inner")
    sent = sent.join(own, keys, join_type="left outer")
    sent = sent.append_column("own", sent.column("count_all").fill_null(0)).drop_columns(["count_all"])
    in_batch = sent.filter(pc.is_valid(sent.column("batch_id")))
    totals = in_batch.group_by(["producer", "batch_id"]).aggregate([("own", "sum")])
    in_batch = in_batch.join(totals, ["producer", "batch_id"], join_type="inner")
    copies = np.zeros(results.num_rows, np.int64)
    alone = sent.filter(pc.is_null(sent.column("batch_id")))
    copies[ints(alone, "row")] = ints(alone, "own")
    copies[ints(in_batch, "row")] = ints(in_batch, "own_sum")
    return copies


def _sorted_unique(key: np.ndarray) -> np.ndarray | None:
    """The row order that sorts ``key``, or None when a key repeats."""
    if (key[1:] > key[:-1]).all():
        return np.arange(len(key))
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    return order if (ordered[1:] > ordered[:-1]).all() else None


def copy_rows(
    messages: pa.Table, attempts: pa.Table, results: pa.Table
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Row numbers (message, attempt, message's result) of every stored copy in (producer, seq, attempt)
    order: :func:`stored_copies` then the sort, by index arithmetic. None when a key repeats (the joins
    then decide the order of ties) or does not fit an int64."""
    key_columns = [(t, c) for t in (messages, results, attempts) for c in ("producer", "seq")]
    if any(t.column(c).null_count for t, c in [*key_columns, (attempts, "attempt")]):
        return None
    mp, ms, rp, rs, ap, as_ = (ints(t, c) for t, c in key_columns)
    keys = pack_keys([np.concatenate([mp, rp, ap]), np.concatenate([ms, rs, as_])])
    if keys is None:
        return None
    msg_key, res_key, att_key = np.split(keys, [len(mp), len(mp) + len(rp)])
    msg_order, res_order = _sorted_unique(msg_key), _sorted_unique(res_key)
    if msg_order is None or res_order is None:
        return None
    msg_key, res_key = msg_key[msg_order], res_key[res_order]

    # sent: messages with a result that is not REJECTED
    res = lookup(res_key, msg_key)
    sent = res >= 0
    res_row = res_order[res[sent]]
    not_rejected = bools(pc.not_equal(results.column("status"), "REJECTED"))[res_row]
    sent[sent] = not_rejected
    sent_key, sent_msg, sent_res = msg_key[sent], msg_order[sent], res_row[not_rejected]

    # the stored attempts of a sent message (a batch's: of its leading member)
    att = np.flatnonzero(bools(is_stored_outcome(attempts)))
    lead = lookup(sent_key, att_key[att])
    att, lead = att[lead >= 0], lead[lead >= 0]
    in_batch = bools(pc.is_valid(messages.column("batch_id")))[sent_msg]
    single = ~in_batch[lead]
    copy_att, copy_member = [att[single]], [lead[single]]
    if not single.all():  # one copy per sent member of the batch: (producer, batch_id) groups
        batch_id = np.asarray(messages.column("batch_id").fill_null(0).to_numpy(), np.int64)[sent_msg]
        members = np.flatnonzero(in_batch)
        group = pack_keys([mp[sent_msg[members]], batch_id[members]])
        if group is None:
            return None
        by_group = np.argsort(group, kind="stable")
        groups = group[by_group]
        leads = group[np.searchsorted(members, lead[~single])]  # the leading member's group
        start = np.searchsorted(groups, leads, "left")
        counts = np.searchsorted(groups, leads, "right") - start
        pick = np.repeat(np.arange(len(leads)), counts)
        within = np.arange(len(pick)) - np.repeat(np.cumsum(counts) - counts, counts)
        copy_att.append(att[~single][pick])
        copy_member.append(members[by_group[start[pick] + within]])
    c_att, c_member = np.concatenate(copy_att), np.concatenate(copy_member)

    # (producer, seq, attempt) order; a repeated key leaves the order of its copies to the joins
    c_key, c_no = sent_key[c_member], ints(attempts, "attempt")[c_att]

    def increasing() -> bool:
        same = c_key[1:] == c_key[:-1]
        return bool(((c_key[1:] > c_key[:-1]) | (same & (c_no[1:] > c_no[:-1]))).all())

    if not increasing():
        order = np.lexsort((c_no, c_key))
        c_att, c_member, c_key, c_no = c_att[order], c_member[order], c_key[order], c_no[order]
        if not increasing():
            return None
    return sent_msg[c_member], c_att, sent_res[c_member]


def result_keys(table: pa.Table) -> np.ndarray:
    """One int64 per (producer, seq): producer in the bits above 40."""
    return (ints(table, "producer") << 40) | ints(table, "seq")


def key_positions(wanted: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """``np.searchsorted(wanted, keys)`` for strictly increasing ``wanted`` (:func:`result_keys`); keys
    with no gap between them (a chunk of one producer's results: its seqs one after another) by
    subtraction, ~10x quicker than the binary searches."""
    n = len(wanted)
    if n and int(wanted[-1]) - int(wanted[0]) == n - 1:
        return np.clip(keys - wanted[0], 0, n)
    return np.searchsorted(wanted, keys)
