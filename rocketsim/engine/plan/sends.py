"""The messages side: :func:`prepare` turns one producer's messages into sends in seq order (a batch is one
send led by its first accepted member), with sizes, flags and the rows the client refuses up front
(:func:`rejection`, :func:`batch_rejections`, with the client's own texts).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim.broker import store
from rocketsim.client import batching
from rocketsim.engine.plan.kinds import BATCH_FAILED, MESSAGE_TYPES, MODES, SendKind, SimulationError
from rocketsim.errors import MQClientError, RocketSimError
from rocketsim.format import codec
from rocketsim.format.compression import (
    CompressibilityModel,
    CompressionType,
    compressed_sys_flag,
    default_model,
)
from rocketsim.format.message import Message, MessageSysFlag
from rocketsim.format.validate import MAX_PROPERTIES_SIZE, check_message, check_properties_size
from rocketsim.javaint import java_string_hash
from rocketsim.scenario import Scenario
from rocketsim.tables.grouping import as_plain_strings

# ---- the messages side: rejections ----------------------------------------------------------------


def rejection(
    topic: str,
    body_size: int,
    properties_size: int,
    reserved: str | None,
    sc: Scenario,
    *,
    batch_member: bool = False,
) -> str | None:
    """The client's error text if this message is refused before any send, else None.

    Order as the client meets the checks: ``putUserProperty`` (at message construction), then
    ``Validators.checkMessage`` on send, then, for a batch member, the properties length when
    ``DefaultMQProducer.batch()`` encodes it (4.9.8 ``encodeMessage``'s RuntimeException; 5.3.3 overflows
    the short instead: either way the batch fails). No client checks a single message's properties
    (``Validators.checkMessage`` has no such check in any version): the broker does
    (``rocketsim.broker.store.properties_illegal``).
    """
    version = sc.producers.version
    if reserved is not None:
        try:
            Message(topic, b"x").put_user_property(reserved, "v", version=version)
        except RocketSimError as exc:
            return str(exc)
    try:
        check_message(topic, body_size, sc.producers.max_message_size, None, version)
        if batch_member:
            check_properties_size(properties_size)
    except (MQClientError, RocketSimError) as exc:
        return getattr(exc, "full_message", None) or str(exc)
    return None


def batch_rejections(
    reject: dict[int, str], batch_ids: list[int | None], reserved: list[str | None], sc: Scenario
) -> dict[int, str]:
    """Spread a member's rejection to its whole batch, as ``DefaultMQProducer.batch()`` does.

    ``batch()`` validates every member (and ``generateFromList`` their common topic) and wraps the first
    failure in ``MQClientException("Failed to initiate the MessageBatch", e)``: nothing of the batch is
    sent. A member whose ``putUserProperty`` failed was never made, so only it is rejected (with its own
    text) and the rest of its batch goes on.
    """
    broken = {batch_ids[r] for r in reject if batch_ids[r] is not None and reserved[r] is None}
    if not broken:
        return reject
    text = MQClientError(-1, BATCH_FAILED, sc.producers.version.faq_url).full_message
    out = dict(reject)
    for r, bid in enumerate(batch_ids):
        if bid in broken and (r not in out or reserved[r] is None):
            out[r] = text
    return out


def _rejections(
    messages: pa.Table, sc: Scenario, body: np.ndarray, props: np.ndarray, topic_idx: np.ndarray, topics: list
) -> dict[int, str]:
    """Rows the client refuses, with its text; only rows that can fail are checked one by one."""
    p = sc.producers
    bad_topic = np.array([rejection(t, 1, 0, None, sc) is not None for t in topics] + [True], bool)
    reserved = np.asarray(pc.is_valid(messages.column("reserved_property")))
    in_batch = np.asarray(pc.is_valid(messages.column("batch_id")))
    suspect = (
        reserved
        | bad_topic[topic_idx]
        | (body == 0)
        | (body > p.max_message_size)
        | ((props > MAX_PROPERTIES_SIZE) & in_batch)
    )
    rows = np.flatnonzero(suspect)
    if rows.size == 0:
        return {}
    topic = messages.column("topic").take(rows).to_pylist()
    res = messages.column("reserved_property").take(rows).to_pylist()
    out: dict[int, str] = {}
    for k, r in enumerate(rows.tolist()):
        why = rejection(topic[k], int(body[r]), int(props[r]), res[k], sc, batch_member=bool(in_batch[r]))
        if why is not None:
            out[r] = why
    if out and pc.any(pc.is_valid(messages.column("batch_id"))).as_py():
        out = batch_rejections(
            out, messages.column("batch_id").to_pylist(), messages.column("reserved_property").to_pylist(), sc
        )
    return out


# ---- the messages side: sends -----------------------------------------------------------------------


@cache
def compression_model(ctype: str, level: int) -> CompressibilityModel:
    """The seeded compressibility model of a compression type and level (built once)."""
    return default_model(CompressionType[ctype], level)


@dataclass
class Prepared:
    """One producer's messages as sends (arrays), plus what the result rows need."""

    messages: pa.Table  # sorted by seq, string columns as strings (as_strings)
    producer: int
    topics: list[str]  # topic id -> name
    # per row
    rejected: np.ndarray  # bool
    reject_text: dict[int, str]  # row -> the client's text
    send_of_row: np.ndarray  # send index, -1 if rejected
    row_wire: np.ndarray
    compressed: np.ndarray
    sys_flag: np.ndarray
    born: np.ndarray
    # per send
    s_row: np.ndarray  # the leading row
    s_seq: np.ndarray
    s_born: np.ndarray
    s_thread: np.ndarray  # the thread value of the leading row
    s_kind: np.ndarray  # SendKind
    s_mode: np.ndarray  # index into MODES
    s_topic: np.ndarray  # index into topics
    s_order_hash: np.ndarray  # String.hashCode of an ordered send's key
    s_wire: np.ndarray
    # what the broker checks of a single message's properties (store.illegal_properties_parts)
    s_props_base: np.ndarray
    s_props_qid: np.ndarray
    s_props_chars: np.ndarray
    # UNIQ_KEY: the run's seed (the producer's process identity) and whether a batch gets a key of its own
    seed: int = 0
    batch_uniq_key: bool = False
    # autoBatch: per row whether it joined a ProduceAccumulator batch (its UNIQ_KEY made as it was added)
    auto_member: np.ndarray | None = None
    # per send, the body length executeAsyncMessageSend's size semaphore takes (a batch's: its encoding)
    s_body: np.ndarray | None = None

    @property
    def n_sends(self) -> int:
        return int(self.s_seq.size)


def as_strings(messages: pa.Table) -> pa.Table:
    """``messages`` with its string columns given as dictionary arrays (the generator's codes,
    :func:`rocketsim.scenario.workload.generate_producer`'s ``coded``) as strings: the table every reader
    of a prepared run's messages takes."""
    schema = messages.schema
    if not any(pa.types.is_dictionary(f.type) for f in schema):
        return messages
    plain = [f.with_type(f.type.value_type) if pa.types.is_dictionary(f.type) else f for f in schema]
    return as_plain_strings(messages, pa.schema(plain, metadata=schema.metadata))


def _codes(col: pa.ChunkedArray | pa.Array, names: tuple[str, ...] | None = None) -> tuple[np.ndarray, list]:
    """Dictionary codes of a string column (-1 for null) and the dictionary (or codes into ``names``); a
    dictionary array's codes are read from it, numbered as its strings would be."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()  # one dictionary for every row
    if pa.types.is_dictionary(col.type):
        idx, dictionary = _first_seen_codes(col)
    else:
        enc = pc.dictionary_encode(col)
        dictionary = enc.dictionary.to_pylist()
        idx = np.asarray(enc.indices.fill_null(-1), np.int64)
    if names is None:
        return idx, dictionary
    remap = np.array([names.index(d) if d in names else -2 for d in dictionary] + [-1], np.int64)
    return remap[idx], list(names)


def _first_seen_codes(col: pa.DictionaryArray) -> tuple[np.ndarray, list]:
    """A dictionary array's codes (-1 for null) renumbered as ``pc.dictionary_encode`` of its strings numbers
    them (each value by its first row; a value the dictionary holds twice, once), and those values: its
    rows' strings are never hashed."""
    raw = np.asarray(col.indices.fill_null(-1), np.int64)
    values = col.dictionary.to_pylist()
    present = np.flatnonzero(np.bincount(raw + 1, minlength=len(values) + 1)[1:])
    first = np.array([int(np.argmax(raw == k)) for k in present.tolist()], np.int64)
    remap = np.full(len(values) + 1, -1, np.int64)  # the last: a null row's (raw -1)
    at: dict[str, int] = {}
    for k in present[np.argsort(first, kind="stable")].tolist():
        if values[k] is not None:
            remap[k] = at.setdefault(values[k], len(at))
    return remap[raw], list(at)


def _growing_codes(col: pa.ChunkedArray | pa.Array, names: list[str]) -> np.ndarray:
    """Codes of a string column (-1 for null) into ``names``, which gains the values it lacks."""
    idx, dictionary = _codes(col)
    at = {name: k for k, name in enumerate(names)}
    for name in dictionary:
        if name not in at:
            at[name] = len(names)
            names.append(name)
    remap = np.array([at[d] for d in dictionary] + [-1], np.int64)
    return remap[idx]


def _batch_request_properties_size(sc: Scenario) -> int:
    """The batch request's own properties on the wire
    (:func:`rocketsim.broker.store.batch_request_properties`):
    4.9 ``WAIT\x01true`` (9 bytes), 5.x also its ``UNIQ_KEY`` and the trailing separator (52)."""
    version = sc.producers.version
    return codec.properties_size(store.batch_request_properties(version), version=version)


def _oversize_batches(
    messages: pa.Table, sc: Scenario, ok: np.ndarray, is_batch: np.ndarray, element: np.ndarray
) -> dict[int, str]:
    """Members of batches whose encoded body is over ``max_message_size``, with the client's text.

    ``DefaultMQProducerImpl.sendDefaultImpl`` runs ``Validators.checkMessage`` on the ``MessageBatch``
    that ``DefaultMQProducer.batch()`` made: its body is the encoded members (``MessageBatch.encode``:
    22 bytes + body + properties each), refused when longer than ``maxMessageSize`` (equal is accepted),
    after every member passed its own checks, before any selection.
    """
    rows = np.flatnonzero(ok & is_batch)
    if rows.size == 0:
        return {}
    batch_id = np.asarray(messages.column("batch_id").fill_null(0), np.int64)[rows]
    _, first, inverse = np.unique(batch_id, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    encoded = np.bincount(inverse, weights=element[rows]).astype(np.int64)
    too_big = encoded > sc.producers.max_message_size
    if not too_big.any():
        return {}
    topics = messages.column("topic").take(pa.array(rows[first])).to_pylist()
    texts = {g: rejection(topics[g], int(encoded[g]), 0, None, sc) for g in np.flatnonzero(too_big).tolist()}
    return {int(r): texts[g] for r, g in zip(rows.tolist(), inverse.tolist(), strict=True) if g in texts}


def prepare(messages: pa.Table, sc: Scenario, topics: list[str] | None = None) -> Prepared:
    """One producer's messages (any row order) as sends in seq order, rejected rows, sizes and flags.

    A send is an accepted message, or a batch (one send of a ``MessageBatch``, never compressed, sent once
    its last member is made, keyed by its first accepted member); transactional half messages and oneway
    batches are synchronous calls; ordered messages with a key go through the selector.

    ``topics``: the topic ids of a run prepared a chunk at a time (whole batches, :func:`batch_aligned`):
    its chunks' topics in the order first seen, extended with this chunk's new ones (the sends' topic ids
    index it); None: this table's own. String columns may be given as dictionary arrays (the generator's
    codes): their codes are read, not encoded again, and :attr:`Prepared.messages` has them as strings.
    """
    if messages.num_rows == 0:
        raise SimulationError("prepare needs at least one message")
    p = sc.producers
    seq_col = np.asarray(messages.column("seq"), np.int64)
    if seq_col.size > 1 and not bool(np.all(seq_col[1:] > seq_col[:-1])):
        messages = messages.sort_by([("seq", "ascending")])
        seq_col = np.asarray(messages.column("seq"), np.int64)
    body = np.asarray(messages.column("body_size"), np.int64)
    props = np.asarray(messages.column("properties_size"), np.int64)
    born = np.asarray(messages.column("born_ts_ms"), np.int64)
    is_batch = np.asarray(pc.is_valid(messages.column("batch_id")))
    mtype, _ = _codes(messages.column("message_type"), MESSAGE_TYPES)
    mode, _ = _codes(messages.column("send_mode"), MODES)
    if topics is None:
        topic_idx, topics = _codes(messages.column("topic"))
    else:
        topic_idx = _growing_codes(messages.column("topic"), topics)
    messages = as_strings(messages)  # the codes read: the rest reads (and hands on) the strings
    txn = mtype == MESSAGE_TYPES.index("transaction")
    compress, sent_body, sys_flag = _sent_bodies(messages, sc, body, is_batch, txn)
    element = codec.encoded_message_sizes(body, props, version=p.version)

    reject_text = _rejections(messages, sc, body, props, topic_idx, topics)
    rejected = _mask(reject_text, messages.num_rows)
    auto = _auto_batches(messages, sc, rejected, is_batch, mtype, mode, topic_idx, body)
    if auto is not None:  # the accumulator's batches become batch sends (ids past the workload's)
        messages, is_batch, compress, sent_body, sys_flag = _join_auto_batches(
            messages, auto, is_batch, compress, sent_body, sys_flag, body
        )
    reject_text, rejected = _refuse_oversize(messages, sc, reject_text, rejected, is_batch, element)
    oneway = MODES.index("oneway")
    eff_mode = np.where(txn | ((mode == oneway) & is_batch), MODES.index("sync"), mode)
    rows = _send_rows(messages, sc, rejected, is_batch, born, sent_body + props, element, body, auto)
    s_row = rows.s_row
    s_mode = eff_mode[s_row]
    s_kind, ohash = _send_kinds(messages, mtype, s_mode, is_batch[s_row], s_row)
    props_base, props_qid, props_chars = store.illegal_properties_parts(
        messages, p.version, sc.broker_version
    )
    return Prepared(
        messages=messages,
        producer=int(messages.column("producer")[0].as_py()),
        topics=topics,
        rejected=rejected,
        reject_text=reject_text,
        send_of_row=rows.send_of_row,
        row_wire=rows.row_wire,
        compressed=compress,
        sys_flag=sys_flag,
        born=born,
        s_row=s_row,
        s_seq=seq_col[s_row],
        s_born=rows.s_born,
        s_thread=np.asarray(messages.column("thread"), np.int64)[s_row],
        s_kind=s_kind,
        s_mode=s_mode,
        s_topic=topic_idx[s_row],
        s_order_hash=ohash[s_row],
        s_wire=rows.s_wire,
        s_props_base=props_base[s_row],
        s_props_qid=props_qid[s_row],
        s_props_chars=props_chars[s_row],
        seed=sc.seed,
        batch_uniq_key=p.version.gives_batch_uniq_key,
        auto_member=None if auto is None else auto.batch >= 0,
        s_body=rows.s_body,
    )


def _sent_bodies(
    messages: pa.Table, sc: Scenario, body: np.ndarray, is_batch: np.ndarray, txn: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which bodies the client compresses (a batch element's never; gRPC: as sent), the body sizes it
    sends, and each message's sys flag (compression type bits, transaction prepared)."""
    p = sc.producers
    comp = np.asarray(messages.column("compressibility"), np.float64)
    compress = (body >= p.compress_msg_body_over_howmuch) & ~is_batch & p.compresses_bodies
    sent_body = body.copy()
    if compress.any():
        model = compression_model(p.compress_type, p.compress_level)
        sent_body[compress] = model.predict_sizes(body[compress], comp[compress])
    zflag = compressed_sys_flag(CompressionType[p.compress_type], version=p.version)
    sys_flag = np.where(compress, zflag, 0) | np.where(txn, MessageSysFlag.TRANSACTION_PREPARED_TYPE, 0)
    return compress, sent_body, sys_flag


def _mask(rows: dict[int, str], n: int) -> np.ndarray:
    """The rows of ``rows`` as a mask of ``n`` rows."""
    mask = np.zeros(n, bool)
    if rows:
        mask[np.fromiter(rows, np.int64, len(rows))] = True
    return mask


def _refuse_oversize(
    messages: pa.Table,
    sc: Scenario,
    reject_text: dict[int, str],
    rejected: np.ndarray,
    is_batch: np.ndarray,
    element: np.ndarray,
) -> tuple[dict[int, str], np.ndarray]:
    """The rows the client refuses before sending (row -> its text), and as a mask: each message's own
    checks (given), then batches whose encoded body is too big."""
    oversize = _oversize_batches(messages, sc, ~rejected, is_batch, element)
    if oversize:
        reject_text = {**reject_text, **oversize}
        rejected = rejected | _mask(oversize, messages.num_rows)
    return reject_text, rejected


AUTO_BATCH_ID0 = 1 << 48  # batch ids of the accumulator's batches: past any workload batch id (a seq)


def _auto_batches(
    messages: pa.Table,
    sc: Scenario,
    rejected: np.ndarray,
    is_batch: np.ndarray,
    mtype: np.ndarray,
    mode: np.ndarray,
    topic_idx: np.ndarray,
    body: np.ndarray,
) -> batching.AutoBatches | None:
    """The ``ProduceAccumulator``'s batches of this producer (:mod:`rocketsim.client.batching`), None with
    autoBatch off: plain ``send(msg[, callback])`` calls (normal and delay messages, sync or async) go
    through it; accepted normal messages are batched, sync and async ones apart (``syncSendBatchs``,
    ``asyncSendBatchs``): a sync batch is one SYNC send, whose end every member's caller waits for."""
    settings = sc.producers.auto_batching
    if settings is None or not settings.auto_batch:
        return None
    plain = (mtype == MESSAGE_TYPES.index("normal")) | (mtype == MESSAGE_TYPES.index("delay"))
    through = plain & ~is_batch & (mode != MODES.index("oneway"))
    batchable = through & ~rejected & (mtype == MESSAGE_TYPES.index("normal"))
    tag_idx, _ = _codes(messages.column("tags"))
    topic_tag = topic_idx * (int(tag_idx.max(initial=-1)) + 2) + tag_idx + 1
    key = 2 * topic_tag + (mode == MODES.index("sync"))
    return batching.accumulate(
        np.asarray(messages.column("born_ts_ms"), np.int64), key, body, through, batchable, settings
    )


def _join_auto_batches(
    messages: pa.Table,
    auto: batching.AutoBatches,
    is_batch: np.ndarray,
    compress: np.ndarray,
    sent_body: np.ndarray,
    sys_flag: np.ndarray,
    body: np.ndarray,
) -> tuple[pa.Table, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The accumulator's members as batch rows: their batch ids (past the workload's), never compressed,
    no sys flag."""
    member = auto.batch >= 0
    batch_id = np.asarray(messages.column("batch_id").fill_null(0), np.int64)
    batch_id = np.where(member, AUTO_BATCH_ID0 + auto.batch, batch_id)
    messages = messages.set_column(
        messages.schema.get_field_index("batch_id"),
        "batch_id",
        pa.array(batch_id, mask=~(is_batch | member)),
    )
    return (
        messages,
        is_batch | member,
        compress & ~member,
        np.where(member, body, sent_body),
        np.where(member, 0, sys_flag),
    )


def _auto_batch_sends(
    messages: pa.Table,
    sc: Scenario,
    auto: batching.AutoBatches,
    send_of_row: np.ndarray,
    s_born: np.ndarray,
    s_wire: np.ndarray,
    batch_wire: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The accumulator's batch sends: each starts when the accumulator sends it, its request carries the
    batch's own properties (:func:`rocketsim.client.batching.request_properties_sizes`)."""
    rows = np.flatnonzero(auto.batch >= 0)
    if rows.size == 0:
        return s_born, s_wire
    member_batch = auto.batch[rows]
    send_of_batch = np.full(auto.count, -1, np.int64)
    send_of_batch[member_batch] = send_of_row[rows]
    live = send_of_batch >= 0  # a batch refused whole (too large) is no send
    tags = messages.column("tags").take(pa.array(rows))
    tag_len = np.full(auto.count, -1, np.int64)
    tag_len[member_batch] = np.asarray(pc.binary_length(tags).fill_null(-1), np.int64)
    props = batching.request_properties_sizes(
        member_batch, messages.column("keys").take(pa.array(rows)), tag_len, auto.count, sc.producers.version
    )
    s_born = s_born.copy()
    s_wire = s_wire.copy()
    sends = send_of_batch[live]
    s_born[sends] = auto.sent_ms[live]
    s_wire[sends] = props[live] + batch_wire[sends]
    return s_born, s_wire


class _SendRows(NamedTuple):
    s_row: np.ndarray  # each send's leading row
    send_of_row: np.ndarray  # each row's send, -1 if rejected
    s_born: np.ndarray  # when the send is made (a batch: when its last member is)
    s_wire: np.ndarray  # the request's bytes
    row_wire: np.ndarray  # each row's bytes on the wire (0 if rejected)
    s_body: np.ndarray  # the body length the size semaphore takes (a batch's: its encoding)


def _send_rows(
    messages: pa.Table,
    sc: Scenario,
    rejected: np.ndarray,
    is_batch: np.ndarray,
    born: np.ndarray,
    single_wire: np.ndarray,
    element: np.ndarray,
    body: np.ndarray,
    auto: batching.AutoBatches | None = None,
) -> _SendRows:
    """The sends: every accepted non-batch row, and each batch at its first accepted member
    (``single_wire``: a single message's bytes, ``element``: a batch member's; an autoBatch batch starts
    when the accumulator sends it)."""
    n = messages.num_rows
    ok = ~rejected
    batch_id = np.asarray(messages.column("batch_id").fill_null(0), np.int64)
    batch_rows = np.flatnonzero(ok & is_batch)
    _, first, inverse = np.unique(batch_id[batch_rows], return_index=True, return_inverse=True)
    leaders = batch_rows[first]
    # two runs in order: a stable sort merges them (the quicksort took ~5 ms a chunk of 131,072 rows)
    s_row = np.sort(np.concatenate([np.flatnonzero(ok & ~is_batch), leaders]), kind="stable")
    n_s = s_row.size
    send_of_row = np.full(n, -1, np.int64)
    send_of_row[s_row] = np.arange(n_s)
    send_of_row[batch_rows] = send_of_row[leaders][inverse.reshape(-1)]
    s_born = born[s_row].copy()
    s_wire = single_wire[s_row]
    s_body = body[s_row].copy()
    if batch_rows.size:
        sb = send_of_row[batch_rows]
        np.maximum.at(s_born, sb, born[batch_rows])
        batch_wire = np.zeros(n_s, np.int64)
        np.add.at(batch_wire, sb, element[batch_rows])
        s_wire = np.where(is_batch[s_row], _batch_request_properties_size(sc) + batch_wire, s_wire)
        s_body = np.where(is_batch[s_row], batch_wire, s_body)
        if auto is not None:
            s_born, s_wire = _auto_batch_sends(messages, sc, auto, send_of_row, s_born, s_wire, batch_wire)
    row_wire = np.where(rejected, 0, np.where(is_batch, element, single_wire))
    return _SendRows(s_row, send_of_row, s_born, s_wire, row_wire, s_body)


def _send_kinds(
    messages: pa.Table, mtype: np.ndarray, s_mode: np.ndarray, s_batch: np.ndarray, s_row: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each send's :class:`SendKind`, and each row's order hash: ordered messages with a key (not in a
    batch) go through SelectMessageQueueByHash over the key's String.hashCode."""
    okey_idx, okeys = _codes(messages.column("order_key"))
    ohash = np.array([java_string_hash(k) for k in okeys] + [0], np.int64)[okey_idx]
    ordered = (mtype == MESSAGE_TYPES.index("ordered")) & (okey_idx >= 0)
    s_ordered = ordered[s_row] & ~s_batch
    is_async = s_mode == MODES.index("async")
    oneway = s_mode == MODES.index("oneway")
    s_kind = np.select(
        [s_ordered & is_async, s_ordered & oneway, s_ordered, is_async, oneway],
        [SendKind.ORDERED_ASYNC, SendKind.ORDERED_ONEWAY, SendKind.ORDERED, SendKind.ASYNC, SendKind.ONEWAY],
        SendKind.SYNC,
    ).astype(np.int64)
    return s_kind, ohash


def one_producer(messages: pa.Table) -> int:
    """The producer of ``messages``; :class:`SimulationError` if the rows are of several producers."""
    producers = pc.unique(messages.column("producer")).to_pylist()
    if len(producers) != 1:
        raise SimulationError(f"simulate_producer takes one producer's messages, got producers {producers}")
    return int(producers[0])
