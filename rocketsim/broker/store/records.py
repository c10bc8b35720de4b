"""The vectorised path: every stored copy's record (:func:`store_records`: stored topic, queue, sys
flag, properties and record sizes, delay and half transforms) from column lengths, and the broker's
check of a single message's properties (:func:`illegal_properties_parts`).
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim.broker.store.layout import (
    BATCH_ELEMENT,
    CLUSTER_NAME,
    DELAYED,
    HALF,
    HALF_TOPIC,
    NORMAL,
    SCHEDULE_TOPIC,
    STORE_COLUMNS,
    TRANSACTION_BITS,
    TRANSACTION_ID,
    WAIT_PROPERTY,
)
from rocketsim.broker.store.properties import batch_properties
from rocketsim.client.versions import BrokerVersion, ClientVersion
from rocketsim.format import codec
from rocketsim.format.message import MessageConst, MessageSysFlag, broker_delay_transform
from rocketsim.scenario import Scenario


def _entry(name: str, value_len: np.ndarray | int) -> np.ndarray | int:
    """Bytes one ``name\\x01value\\x02`` entry adds to a properties string."""
    return len(name) + 2 + value_len


_TENS = 10 ** np.arange(1, 19, dtype=np.int64)  # 10 .. 10**18


def _digits(values: np.ndarray) -> np.ndarray:
    """Decimal digits of ``str(v)`` for ints (a minus sign counts)."""
    v = np.asarray(values, np.int64)
    return 1 + np.searchsorted(_TENS, np.abs(v), side="right") + (v < 0)


@cache
def _delay_lookup(levels: tuple[int, ...]) -> dict[int, tuple[int, int, int]]:
    """level -> (clamped level, schedule queue id, delay ms) by the broker's own transform."""
    out = {}
    for level in levels:
        t = broker_delay_transform("T", 0, {MessageConst.PROPERTY_DELAY_TIME_LEVEL: str(level)}, 0, 0)
        assert t.delayed and t.effective_level is not None and t.deliver_timestamp_ms is not None
        out[level] = (t.effective_level, t.queue_id, t.deliver_timestamp_ms)
    return out


def _chunks(column: pa.ChunkedArray | pa.Array) -> list[pa.Array]:
    """The arrays of a column, chunked or not."""
    return column.chunks if isinstance(column, pa.ChunkedArray) else [column]


def _np(table: pa.Table, name: str, dtype: type = np.int64) -> np.ndarray:
    return np.asarray(table.column(name).fill_null(0).to_numpy(zero_copy_only=False), dtype)


def utf8_lengths(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """UTF-8 byte length per row (0 for null)."""
    return np.asarray(pc.binary_length(column).fill_null(0).to_numpy(zero_copy_only=False), np.int64)


def _holds_byte(strings: pa.StringArray, byte: int) -> bool:
    """Whether ``byte`` is in the characters of ``strings`` (a null row's, if it holds any, count too: a
    ``True`` too many only costs the caller the slower path), found in its data buffer at once."""
    if not len(strings) or strings.buffers()[2] is None:
        return False
    offsets = np.frombuffer(strings.buffers()[1], np.int32, len(strings) + 1, strings.offset * 4)
    return bool((np.frombuffer(strings.buffers()[2], np.uint8)[offsets[0] : offsets[-1]] == byte).any())


def count_key_tokens(keys: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Per row, how many non-empty keys ``keys.split(" ")`` gives (0 for null)."""
    keys = (keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys).cast(pa.string())
    if keys.null_count == len(keys):
        return np.zeros(len(keys), np.int64)
    if not _holds_byte(keys, ord(" ")):  # no separator: a non-empty key is one token
        return np.asarray(pc.binary_length(keys).fill_null(0).to_numpy(zero_copy_only=False) > 0, np.int64)
    parts = pc.split_pattern(keys.fill_null(""), " ")
    nonempty = np.asarray(
        pc.greater(pc.binary_length(parts.flatten()), 0).to_numpy(zero_copy_only=False), np.int64
    )
    offsets = np.asarray(parts.offsets, np.int64)
    csum = np.concatenate([[0], np.cumsum(nonempty)])
    return csum[offsets[1:]] - csum[offsets[:-1]]


def _record_kinds(
    sys_flag: np.ndarray, level: np.ndarray, is_batch: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which records are transactional halves, which delay messages the broker moves, and each record's
    kind (NORMAL, DELAYED, HALF, BATCH_ELEMENT)."""
    tran = sys_flag & TRANSACTION_BITS
    half = (tran == MessageSysFlag.TRANSACTION_PREPARED_TYPE) & ~is_batch
    delayed = (level > 0) & ((tran == 0) | (tran == MessageSysFlag.TRANSACTION_COMMIT_TYPE)) & ~is_batch
    kind = np.select([is_batch, half, delayed], [BATCH_ELEMENT, HALF, DELAYED], NORMAL)
    return half, delayed, kind


def _delay_transform(level: np.ndarray, delayed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row, the broker's delay transform of a delayed record, made once per distinct level: (clamped
    level, schedule queue id, delay ms); 0 for the others."""
    n = len(level)
    eff, sched_q, delay_ms = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    if delayed.any():
        per_level = _delay_lookup(tuple(sorted(set(level[delayed].tolist()))))
        for lv, (e, q, d) in per_level.items():
            hit = delayed & (level == lv)
            eff[hit], sched_q[hit], delay_ms[hit] = e, q, d
    return eff, sched_q, delay_ms


def _stored_props_without_queue_id(
    client: ClientVersion,
    broker: BrokerVersion,
    props: np.ndarray,
    topic_len: np.ndarray,
    uniq_len: np.ndarray,
    level: np.ndarray,
    eff: np.ndarray,
    kind: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(UTF-8 bytes of the properties the broker writes, without the value of ``REAL_QID``; whether it
    has a ``REAL_QID`` whose value, the digits of the client's queue id, comes on top): per record
    ``kind`` (NORMAL, DELAYED, HALF, BATCH_ELEMENT), from the client's properties size ``props``.

    A single message's string is re-encoded by the broker (``SendMessageProcessor``:
    ``messageProperties2String`` of its own release): the client's final ``\\x02`` (5.x) goes, the
    broker's (5.x) comes. A batch element keeps the client's bytes, then ``encodeBatch`` appends a
    separator when they do not end with one, then the batch's properties in the broker's encoding."""
    cluster = _entry(MessageConst.PROPERTY_CLUSTER, len(CLUSTER_NAME))

    def real() -> np.ndarray:
        queue_id = _entry(MessageConst.PROPERTY_REAL_QUEUE_ID, 0)
        return _entry(MessageConst.PROPERTY_REAL_TOPIC, topic_len) + queue_id

    # the client's properties (never empty: WAIT and UNIQ_KEY) as the broker writes them
    reencoded = props + int(broker.properties_trailing_separator) - int(client.properties_trailing_separator)
    normal_props = reencoded + cluster - (0 if broker.keeps_wait_in_store else _entry(WAIT_PROPERTY, 4))

    def delayed_props() -> np.ndarray:
        return reencoded + cluster + real() + _digits(eff) - _digits(level)

    def half_props() -> np.ndarray:
        transaction_id = _entry(TRANSACTION_ID, uniq_len) if broker.stores_half_transaction_id else 0
        return reencoded + cluster + real() + transaction_id

    def batch_props() -> np.ndarray:
        separator = 0 if client.properties_trailing_separator else 1  # a 5.x client's elements end with \x02
        return props + separator + codec.properties_size(batch_properties(client), version=broker)

    # np.choose of the four kinds, each made only when a row is of that kind
    base = np.array(np.broadcast_to(normal_props, np.shape(kind)), np.int64)
    for k, made in ((DELAYED, delayed_props), (HALF, half_props), (BATCH_ELEMENT, batch_props)):
        hit = kind == k
        if hit.any():
            base[hit] = np.broadcast_to(made(), np.shape(kind))[hit]
    return base, (kind == DELAYED) | (kind == HALF)


PROPERTIES_LIMIT = 32767  # Short.MAX_VALUE: what a broker stores of a message's properties


def illegal_properties_parts(
    messages: pa.Table, client: ClientVersion, broker: BrokerVersion
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What a broker checks of each single (not batched) message's properties before storing it: the
    parts of :func:`properties_illegal`, per ``messages`` row (``properties_size`` and the client's other
    columns), sent by ``client`` to ``broker``.

    4.9.8 (``DefaultMessageStore.checkMessage``): ``getPropertiesString().length() > Short.MAX_VALUE``
    (UTF-16 units; the string SendMessageProcessor made: the client's properties without ``WAIT``, plus
    ``CLUSTER``) -> MESSAGE_ILLEGAL; then the CommitLog encoder (after the delay or half transform):
    ``propertiesLength > Short.MAX_VALUE`` (UTF-8 bytes) -> PROPERTIES_SIZE_EXCEEDED. 5.3.3: only the
    encoder (``MessageExtEncoder.encode``, ``crc32ReservedLength`` 0). Returns (bytes without ``REAL_QID``'s
    value, whether that value counts, 4.9.8's checked string length or 0); the workload's properties
    are ASCII, so UTF-16 units are bytes.
    """
    props = _np(messages, "properties_size")
    sys_flag = np.where(
        pc.equal(messages.column("message_type"), "transaction").to_numpy(zero_copy_only=False),
        MessageSysFlag.TRANSACTION_PREPARED_TYPE,
        0,
    )
    level = _np(messages, "delay_level")
    is_batch = np.asarray(pc.is_valid(messages.column("batch_id")).to_numpy(zero_copy_only=False), bool)
    half, delayed, kind = _record_kinds(sys_flag, level, is_batch)
    eff, _, _ = _delay_transform(level, delayed)
    topic_len = utf8_lengths(messages.column("topic"))
    uniq_len = utf8_lengths(messages.column("uniq_msg_id"))
    base, with_qid = _stored_props_without_queue_id(
        client, broker, props, topic_len, uniq_len, level, eff, kind
    )
    chars = np.zeros(len(props), np.int64)
    if broker.checks_properties_string_length:  # the 4.9.8 broker's checkMessage
        # the string SendMessageProcessor made: what it stores of a message it does not move
        normal = np.full(len(props), NORMAL)
        made, _ = _stored_props_without_queue_id(
            client, broker, props, topic_len, uniq_len, level, eff, normal
        )
        chars = np.where(kind == BATCH_ELEMENT, 0, made)
    return np.where(is_batch, 0, base), with_qid & ~is_batch, chars


def properties_illegal(base: int, with_qid: bool, chars: int, queue_id: int) -> bool:
    """Whether a broker refuses a single message's properties (MESSAGE_ILLEGAL) when it goes to
    ``queue_id``: :func:`illegal_properties_parts` of the message and the queue it was sent to."""
    digits = len(str(queue_id)) if with_qid else 0
    return chars > PROPERTIES_LIMIT or base + digits > PROPERTIES_LIMIT


def _moved_topics(
    topic: pa.ChunkedArray, delayed: np.ndarray, half: np.ndarray
) -> pa.ChunkedArray | pa.Array:
    """The topic each record is stored under: the schedule topic for delayed ones, the half topic for
    halves, else its own (no copy of the strings when no record moves)."""
    if not (delayed.any() or half.any()):
        return topic
    return pc.if_else(pa.array(delayed), SCHEDULE_TOPIC, pc.if_else(pa.array(half), HALF_TOPIC, topic))


def _real_topics(topic: pa.ChunkedArray, moved: np.ndarray) -> pa.ChunkedArray | pa.Array:
    """The topic a moved record (delayed, half) was sent to; null for the others."""
    if not moved.any():
        return pa.nulls(len(topic), pa.string())
    return pc.if_else(pa.array(moved), topic, pa.scalar(None, pa.string()))


def store_records(
    table: pa.Table, sc: Scenario, uniq_len: np.ndarray | None = None, key_tokens: np.ndarray | None = None
) -> pa.Table:
    """``table`` plus :data:`STORE_COLUMNS`: one input row per stored copy of a message.

    Input columns: ``topic``, ``keys``, ``uniq_msg_id``, ``body_size``, ``properties_size``,
    ``message_type``, ``delay_level``, ``batch_id`` (messages), ``wire_bytes``, ``sys_flag`` (the
    member's result), ``queue_id``, ``stored_ts_ms`` (the storing attempt); ``uniq_len`` and
    ``key_tokens`` given (per row: :func:`utf8_lengths` of ``uniq_msg_id``, :func:`count_key_tokens` of
    ``keys``), those two columns are not read. Row by row, so any batching of the rows gives the same
    output. The broker is ``sc.broker_version``.
    """
    client, broker = sc.producers.version, sc.broker_version
    topic = table.column("topic")
    topic_len = utf8_lengths(topic)
    if uniq_len is None:
        uniq_len = utf8_lengths(table.column("uniq_msg_id"))
    if key_tokens is None:
        key_tokens = count_key_tokens(table.column("keys"))
    body = _np(table, "body_size")
    props = _np(table, "properties_size")
    wire = _np(table, "wire_bytes")
    sys_flag = _np(table, "sys_flag")
    level = _np(table, "delay_level")
    queue_id = _np(table, "queue_id")
    is_batch = np.asarray(pc.is_valid(table.column("batch_id")).to_numpy(zero_copy_only=False), bool)
    half, delayed, kind = _record_kinds(sys_flag, level, is_batch)
    eff, sched_q, delay_ms = _delay_transform(level, delayed)
    # the properties string the broker writes
    base, moved_props = _stored_props_without_queue_id(
        client, broker, props, topic_len, uniq_len, level, eff, kind
    )
    stored_props = base + np.where(moved_props, _digits(queue_id), 0)

    store_topic = _moved_topics(topic, delayed, half)
    store_topic_len = np.where(delayed, len(SCHEDULE_TOPIC), np.where(half, len(HALF_TOPIC), topic_len))
    store_q = np.where(delayed, sched_q, np.where(half, 0, queue_id))
    store_flag = np.where(half, sys_flag & ~TRANSACTION_BITS, sys_flag)
    store_body = np.where(is_batch, body, wire - props)
    sizes = codec.store_sizes(store_body, store_topic_len, stored_props, store_flag)
    store_ts = _np(table, "stored_ts_ms")
    moved = delayed | half
    cols = {
        "store_ts_ms": pa.array(store_ts),
        "store_topic": store_topic,
        "store_queue_id": pa.array(store_q.astype(np.int32)),
        "store_sys_flag": pa.array(store_flag.astype(np.int32)),
        "store_body_size": pa.array(store_body.astype(np.int32)),
        "store_props_size": pa.array(stored_props.astype(np.int32)),
        "store_size": pa.array(sizes.astype(np.int32)),
        "delay_level_stored": pa.array(eff.astype(np.int32), mask=~delayed),
        "deliver_ts_ms": pa.array(store_ts + delay_ms, mask=~delayed),
        "real_topic": _real_topics(topic, moved),
        "real_queue_id": pa.array(queue_id.astype(np.int32), mask=~moved),
        "index_entries": pa.array((1 + key_tokens).astype(np.int32)),
    }
    for f in STORE_COLUMNS:
        col = cols[f.name]  # chunks as they are: a list holding a ChunkedArray converts row by row
        table = table.append_column(f, pa.chunked_array(_chunks(col), f.type))
    return table
