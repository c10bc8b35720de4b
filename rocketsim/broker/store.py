"""What a broker stores: what a stored attempt becomes in the broker's store (pure, vectorised).

An attempt the broker wrote has ``stored`` set in ``send_attempts`` (:func:`is_stored_outcome`): ``ok``
and ``status:*`` answers, and requests the client gave up on that the broker processed anyway (a slow
answer past the timeout, a lost reply), written at ``stored_ts_ms``; a retry of such a request stores the
message again (:func:`stored_copy_counts`: duplicates, lost and failed-but-stored messages). This module
says what was written, following the broker's release (``Scenario.broker_version``: by default the one of
the client's line, a 4.9.x client talks to a 4.9.8 broker, a 5.x client to a 5.3.3 broker;
``SendMessageProcessor``, ``CommitLog``/``HookUtils``, ``TransactionalMessageBridge``,
``MessageExtEncoder``). The broker re-encodes every stored properties string with its own release's
``MessageDecoder`` (``string2messageProperties``, then ``messageProperties2String``): the stored string
ends with ``\\x02`` or not, and lists its entries in the HashMap order, of the broker's release
(``BrokerVersion.properties_trailing_separator`` / ``properties_map_capacity``), whatever the client sent:

* normal and ordered messages: the request's properties plus ``CLUSTER=DefaultCluster``; a 4.9.8 broker
  leaves ``WAIT=true`` out of the stored string (it saves 9 bytes), a 5.x broker keeps it;
* delay messages (transaction type NOT or COMMIT, level > 0):
:func:`rocketsim.format.message.broker_delay_transform`
  (level clamped to the table's maximum, 18), stored in ``SCHEDULE_TOPIC_XXXX`` queue level - 1 with
  ``REAL_TOPIC``/``REAL_QID``; the properties string is rebuilt from the whole map, so ``WAIT`` is back;
  delivery at store time + the level's delay;
* transactional half messages: ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with ``REAL_TOPIC``/``REAL_QID`` (5.x
  also ``__transactionId__`` = UNIQ_KEY), transaction bits reset to NOT_TYPE (``TRAN_MSG=true`` stays in
  the properties: that is what marks it prepared), string rebuilt (``WAIT`` back);
* batch elements (``encodeBatch``): one record per element, the element's own properties as the client
  encoded them, a ``\\x02`` when they do not end with one (a 4.9 client's), then the batch request's
  (``WAIT=true``, a 5.x client's ``UNIQ_KEY``, ``CLUSTER``) as the broker encodes them; the body is the
  element's (never compressed).

Record sizes come from :func:`rocketsim.format.codec.store_sizes` (the exact ``calMsgLength``), stored bodies
are
what the client sent (compressed where it compressed). Brokers get IPv4 store hosts ``10.1.0.N:10911`` by
their place in ``cluster.brokers``; the offset message id is ``createMessageId(store host, offset)``.

Approximations: the client's properties are the workload's (``WAIT``, ``TAGS``, ``KEYS``, ``UNIQ_KEY``,
``DELAY``, ``TRAN_MSG``, ``PGROUP``); commit-log offsets are a running sum of record sizes, without the
blank filler a broker writes at the end of each 1 GiB file; what a broker writes later (the scheduled
delivery of a delay message, a committed transaction's final message, op-half and check-back records)
is not in the commit log here.

The broker step of the stage (:func:`number_broker`): one broker's records, from every producer, numbered
in its write order (:func:`with_offsets`), and the ``send_results`` rows that point at them completed
with the record's columns (:func:`attach_store_columns`, :data:`RESULT_STORE_COLUMNS`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim.client.versions import BrokerVersion, ClientVersion
from rocketsim.format import codec
from rocketsim.format.codec import SocketAddress, StoredMessage
from rocketsim.format.message import MessageConst, MessageSysFlag, broker_delay_transform
from rocketsim.scenario import Scenario
from rocketsim.tables.grouping import bools, group_codes, ints, lookup, pack_keys, string_codes, take_rows
from rocketsim.tables.schemas import COMMIT_LOG, SEND_RESULTS, data_schema, is_broker_side

__all__ = [
    "PROPERTIES_LIMIT",
    "CLUSTER_NAME",
    "COPY_COLUMNS",
    "LOG_COLUMNS",
    "COMMIT_LOG_FILE_BYTES",
    "CQ_ENTRIES_PER_FILE",
    "CQ_ENTRY_BYTES",
    "HALF_TOPIC",
    "INDEX_ENTRIES_PER_FILE",
    "RESULT_STORE_COLUMNS",
    "SCHEDULE_TOPIC",
    "STORE_COLUMNS",
    "STORE_PORT",
    "attach_store_columns",
    "PointedRecords",
    "batch_properties",
    "broker_ordered",
    "batch_request_properties",
    "illegal_properties_parts",
    "properties_illegal",
    "client_properties",
    "commit_log_files",
    "consume_queue_files",
    "index_files",
    "is_stored_outcome",
    "broker_indexes",
    "log_records",
    "number_broker",
    "offset_msg_ids",
    "pointed_brokers",
    "store_hosts",
    "store_records",
    "with_null_store_columns",
    "with_offsets",
    "stored_copies",
    "stored_copy_counts",
    "delivery_counts",
    "delivery_flags",
    "result_copies",
    "result_copies_by_joins",
    "log_copies",
    "SENT_STATUSES",
    "STORED_COPIES",
    "is_answered_outcome",
    "stored_properties",
    "stored_record_size",
]

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"  # TopicValidator.RMQ_SYS_SCHEDULE_TOPIC
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"  # TransactionalMessageUtil.buildHalfTopic()
TRANSACTION_ID = "__transactionId__"  # TransactionalMessageUtil.TRANSACTION_ID (5.x half messages)
CLUSTER_NAME = "DefaultCluster"  # BrokerConfig.brokerClusterName
STORE_PORT = 10911  # NettyServerConfig.listenPort of a broker
COMMIT_LOG_FILE_BYTES = 1024 * 1024 * 1024  # MessageStoreConfig.mappedFileSizeCommitLog
CQ_ENTRY_BYTES = 20  # ConsumeQueue.CQ_STORE_UNIT_SIZE: offset (8), size (4), tags code (8)
CQ_ENTRIES_PER_FILE = 300_000  # mappedFileSizeConsumeQueue / CQ_STORE_UNIT_SIZE
INDEX_MAX_NUM = 5_000_000 * 4  # MessageStoreConfig.maxIndexNum
INDEX_ENTRIES_PER_FILE = INDEX_MAX_NUM - 1  # IndexHeader.indexCount starts at 1; full at maxIndexNum

# What a stored record is, for the properties the broker writes.
NORMAL, DELAYED, HALF, BATCH_ELEMENT = 0, 1, 2, 3

# One stored copy of a message, before store_records: the storing attempt, the message, its result.
COPY_COLUMNS = pa.schema(
    [
        pa.field("producer", pa.int32(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),  # the message (a batch: each member)
        pa.field("send_seq", pa.int64(), nullable=False),  # the send's leading message (attempt rows' seq)
        pa.field("attempt", pa.int32(), nullable=False),
        pa.field("start_ts_ms", pa.int64(), nullable=False),
        pa.field("latency_ms", pa.int64(), nullable=False),
        pa.field("broker", pa.string(), nullable=False),
        pa.field("queue_id", pa.int32(), nullable=False),
        pa.field("outcome", pa.string(), nullable=False),
        pa.field("stored_ts_ms", pa.int64(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("tags", pa.string()),
        pa.field("keys", pa.string()),
        pa.field("uniq_msg_id", pa.string(), nullable=False),
        pa.field("body_size", pa.int32(), nullable=False),
        pa.field("properties_size", pa.int32(), nullable=False),
        pa.field("message_type", pa.string(), nullable=False),
        pa.field("delay_level", pa.int32(), nullable=False),
        pa.field("batch_id", pa.int64()),
        pa.field("status", pa.string(), nullable=False),
        pa.field("wire_bytes", pa.int32(), nullable=False),
        pa.field("sys_flag", pa.int32(), nullable=False),
    ]
)
MESSAGE_COLUMNS = (
    "topic",
    "tags",
    "keys",
    "body_size",
    "properties_size",
    "message_type",
    "delay_level",
    "batch_id",
)
ATTEMPT_COLUMNS = ("attempt", "start_ts_ms", "latency_ms", "broker", "queue_id", "outcome", "stored_ts_ms")
# uniq_msg_id: the UNIQ_KEY the client set when it sent the message (send_results), not the workload's
RESULT_COLUMNS = ("status", "wire_bytes", "sys_flag", "uniq_msg_id")
NOT_STORED_STATUSES = ("FAILED", "REJECTED")  # results that point at no stored copy

# Columns store_records adds to its input.
STORE_COLUMNS = pa.schema(
    [
        pa.field("store_ts_ms", pa.int64(), nullable=False),
        pa.field("store_topic", pa.string(), nullable=False),
        pa.field("store_queue_id", pa.int32(), nullable=False),
        pa.field("store_sys_flag", pa.int32(), nullable=False),
        pa.field("store_body_size", pa.int32(), nullable=False),
        pa.field("store_props_size", pa.int32(), nullable=False),
        pa.field("store_size", pa.int32(), nullable=False),
        pa.field("delay_level_stored", pa.int32()),  # the clamped level of a delayed record
        pa.field("deliver_ts_ms", pa.int64()),
        pa.field("real_topic", pa.string()),  # REAL_TOPIC of delayed and half records
        pa.field("real_queue_id", pa.int32()),  # REAL_QID
        pa.field("index_entries", pa.int32(), nullable=False),  # IndexService keys of the record
    ]
)

_WAIT = MessageConst.PROPERTY_WAIT_STORE_MSG_OK
_UNIQ = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_TRAN_BITS = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE  # 0xC: the transaction type bits


# ---- hosts and ids ------------------------------------------------------------------------------


def store_hosts(brokers: Sequence[str]) -> tuple[SocketAddress, ...]:
    """Each broker's store host: ``10.1.x.y:10911`` with x.y = its 1-based place in ``brokers``."""
    if len(brokers) > 0xFFFF:
        raise ValueError(f"at most 65535 brokers get a store host, got {len(brokers)}")
    return tuple(
        SocketAddress(bytes([10, 1, (i + 1) >> 8, (i + 1) & 0xFF]), STORE_PORT) for i in range(len(brokers))
    )


# uppercase hex digits as ASCII, first digit in the lowest byte: of each byte (2), of each uint16 (4)
_HEX_PAIRS = np.array([ord(f"{b:02X}"[0]) | ord(f"{b:02X}"[1]) << 8 for b in range(256)], "<u2")
_HEX_QUADS = (
    _HEX_PAIRS[np.arange(1 << 16) >> 8] | _HEX_PAIRS[np.arange(1 << 16) & 0xFF].astype("<u4") << 16
).astype("<u4")


def offset_msg_ids(broker_index: np.ndarray, offsets: np.ndarray, hosts: Sequence[SocketAddress]) -> pa.Array:
    """Vectorised :func:`rocketsim.format.codec.create_message_id` (``MessageDecoder.createMessageId``) of
    ``(host.ip, host.port, offset)`` for IPv4 store hosts: 32 uppercase hex digits a row, ip and port
    then the offset (tests/test_store.py holds the two equal)."""
    if any(len(h.ip) != 4 for h in hosts):
        raise ValueError("offset_msg_ids handles IPv4 store hosts only")
    head = np.array([list(h.ip) + list(h.port.to_bytes(4, "big")) for h in hosts], np.uint8).reshape(-1, 8)
    idx = np.asarray(broker_index, np.int64)
    offset_digits = _HEX_QUADS[np.asarray(offsets, ">i8").view(">u2").astype(np.intp)]
    chars = np.empty((len(idx), 2), "V16")  # 32 hex digits a row: host and port, offset
    chars[:, 0] = _HEX_PAIRS[head].view("V16").ravel()[idx]
    chars[:, 1] = offset_digits.view("V16").ravel()
    row_offsets = np.arange(0, len(idx) * 32 + 1, 32, dtype=np.int32)
    return pa.StringArray.from_buffers(len(idx), pa.py_buffer(row_offsets), pa.py_buffer(chars))


# ---- the scalar reference: the property maps, as client and broker build them -------------------


def client_properties(row: Mapping[str, object], sc: Scenario) -> dict[str, str]:
    """The properties the client sent for one ``messages`` row (the workload's model of the client)."""
    props = {_WAIT: "true"}
    if row.get("tags"):
        props[MessageConst.PROPERTY_TAGS] = str(row["tags"])
    if row.get("keys"):
        props[MessageConst.PROPERTY_KEYS] = str(row["keys"])
    props[_UNIQ] = str(row["uniq_msg_id"])
    if row["message_type"] == "delay":
        props[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(row["delay_level"])
    if row["message_type"] == "transaction":
        props[MessageConst.PROPERTY_TRANSACTION_PREPARED] = "true"
        props[MessageConst.PROPERTY_PRODUCER_GROUP] = sc.producers.group
    return props


def batch_request_properties(version: ClientVersion) -> dict[str, str]:
    """The batch request's own properties as the client sends them: ``WAIT=true`` (``generateFromList``
    -> ``setWaitStoreMsgOK``); 5.x ``DefaultMQProducer.batch()`` also gives the batch a UNIQ_KEY (32 hex
    chars, IPv4); 4.9.8's never does (``sendKernelImpl`` skips a ``MessageBatch``)."""
    props = {_WAIT: "true"}
    if version.gives_batch_uniq_key:
        props[_UNIQ] = "0" * 32
    return props


def batch_properties(version: ClientVersion) -> dict[str, str]:
    """The batch request's own properties as the broker sees them (``version``: the client's): the
    client's, then CLUSTER. The broker encodes them (``encodeBatch``: ``messageProperties2String`` of the
    batch's map), so their bytes are the broker's encoding."""
    return {**batch_request_properties(version), MessageConst.PROPERTY_CLUSTER: CLUSTER_NAME}


def broker_ordered(props: Mapping[str, str], broker: BrokerVersion) -> dict[str, str]:
    """``props`` in the order the broker's ``HashMap`` iterates them (``string2messageProperties`` of its
    release, then its puts): the order its ``messageProperties2String`` writes them."""
    return {k: props[k] for k in codec.parsed_properties_java_order(props, version=broker)}


def stored_properties(
    row: Mapping[str, object], sc: Scenario
) -> tuple[str, int, dict[str, str] | list[tuple[str, str]], int | None]:
    """(stored topic, stored queue id, properties as written, delivery delay in ms or None) for one
    stored copy: ``row`` holds the ``messages`` columns plus the attempt's ``queue_id``. A batch element's
    properties are the element's items (as the client sent them) then the batch's; the others are in the
    order the broker (``sc.broker_version``) writes them."""
    broker = sc.broker_version
    topic, queue_id = str(row["topic"]), int(row["queue_id"])  # type: ignore[call-overload]
    props = client_properties(row, sc)
    if row.get("batch_id") is not None:
        batch = broker_ordered(batch_properties(sc.producers.version), broker)
        return topic, queue_id, [*props.items(), *batch.items()], None
    props[MessageConst.PROPERTY_CLUSTER] = CLUSTER_NAME
    if row["message_type"] == "transaction":  # TransactionalMessageBridge.parseHalfMessageInner
        if broker.stores_half_transaction_id:
            props[TRANSACTION_ID] = props[_UNIQ]
        props[MessageConst.PROPERTY_REAL_TOPIC] = topic
        props[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(queue_id)
        return HALF_TOPIC, 0, broker_ordered(props, broker), None
    sys_flag = int(row.get("sys_flag") or 0)  # type: ignore[call-overload]
    moved = broker_delay_transform(topic, queue_id, props, sys_flag, 0)
    if moved.delayed:
        return (
            moved.topic,
            moved.queue_id,
            broker_ordered(moved.properties, broker),
            moved.deliver_timestamp_ms,
        )
    if not broker.keeps_wait_in_store:
        props.pop(_WAIT, None)
    return topic, queue_id, broker_ordered(props, broker), None


def stored_record_size(row: Mapping[str, object], sc: Scenario, store_host: SocketAddress) -> int:
    """``codec.store_size`` of the record the broker writes for one stored copy (the scalar reference).

    ``row`` holds the ``messages`` columns, the attempt's ``queue_id`` and the result's ``wire_bytes``
    and ``sys_flag``. The broker (``sc.broker_version``) encodes the properties it writes. A batch element
    is sized as ``encodeBatch`` does (4.9.8 ``CommitLog.MessageExtBatchEncoder``, 5.3.3
    ``MessageExtEncoder``): the record without properties, plus the element's properties as the client
    encoded them, a separator when they do not end with one (``needAppendLastPropertySeparator``), and
    the batch's properties as the broker encodes them.
    """
    client, broker = sc.producers.version, sc.broker_version
    topic, queue_id, props, _ = stored_properties(row, sc)
    is_batch = row.get("batch_id") is not None
    body_len = int(row["body_size"] if is_batch else row["wire_bytes"] - row["properties_size"])  # type: ignore[operator]
    sys_flag = int(row.get("sys_flag") or 0)  # type: ignore[call-overload]
    if topic == HALF_TOPIC:
        sys_flag = MessageSysFlag.reset_transaction_value(sys_flag, MessageSysFlag.TRANSACTION_NOT_TYPE)
    producer = int(row.get("producer") or 0)  # type: ignore[call-overload]
    born = SocketAddress(((10 << 24) | (producer & 0xFFFFFF)).to_bytes(4, "big"), 0)
    msg = StoredMessage(
        topic=topic,
        body=bytes(body_len),
        born_host=born,
        store_host=store_host,
        properties={} if is_batch else props,  # type: ignore[arg-type]
        sys_flag=sys_flag,
        queue_id=queue_id,
    )
    size = codec.store_size(msg, version=broker)
    if is_batch:
        items = list(props)  # element items, then the batch's
        n_element = len(client_properties(row, sc))
        element = codec.properties_to_bytes(items[:n_element], version=client)
        batch = codec.properties_to_bytes(items[n_element:], version=broker)
        sep = 1 if element and batch and not element.endswith(b"\x02") else 0
        size += len(element) + sep + len(batch)
    return size


# ---- the vectorised path ------------------------------------------------------------------------


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


def _lengths(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """UTF-8 byte length per row (0 for null)."""
    return np.asarray(pc.binary_length(column).fill_null(0).to_numpy(zero_copy_only=False), np.int64)


def _key_tokens(keys: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Per row, how many non-empty keys ``keys.split(" ")`` gives (0 for null)."""
    keys = (keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys).cast(pa.string())
    if keys.null_count == len(keys):
        return np.zeros(len(keys), np.int64)
    if not pc.any(pc.match_substring(keys, " ")).as_py():  # no separator: a non-empty key is one token
        return np.asarray(pc.binary_length(keys).fill_null(0).to_numpy(zero_copy_only=False) > 0, np.int64)
    parts = pc.split_pattern(keys.fill_null(""), " ")
    nonempty = np.asarray(
        pc.greater(pc.binary_length(parts.flatten()), 0).to_numpy(zero_copy_only=False), np.int64
    )
    offsets = np.asarray(parts.offsets, np.int64)
    csum = np.concatenate([[0], np.cumsum(nonempty)])
    return csum[offsets[1:]] - csum[offsets[:-1]]


def _half_and_delayed(
    sys_flag: np.ndarray, level: np.ndarray, is_batch: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Which records are transactional halves, and which delay messages the broker moves."""
    tran = sys_flag & _TRAN_BITS
    half = (tran == MessageSysFlag.TRANSACTION_PREPARED_TYPE) & ~is_batch
    delayed = (level > 0) & ((tran == 0) | (tran == MessageSysFlag.TRANSACTION_COMMIT_TYPE)) & ~is_batch
    return half, delayed


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
    normal_props = reencoded + cluster - (0 if broker.keeps_wait_in_store else _entry(_WAIT, 4))

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
    half, delayed = _half_and_delayed(sys_flag, level, is_batch)
    kind = np.select([is_batch, half, delayed], [BATCH_ELEMENT, HALF, DELAYED], NORMAL)
    eff = np.zeros(len(level), np.int64)
    if delayed.any():
        lookup = _delay_lookup(tuple(sorted(set(level[delayed].tolist()))))
        for lv, (e, _, _) in lookup.items():
            eff[delayed & (level == lv)] = e
    topic_len = _lengths(messages.column("topic"))
    uniq_len = _lengths(messages.column("uniq_msg_id"))
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


def store_records(
    table: pa.Table, sc: Scenario, uniq_len: np.ndarray | None = None, key_tokens: np.ndarray | None = None
) -> pa.Table:
    """``table`` plus :data:`STORE_COLUMNS`: one input row per stored copy of a message.

    Input columns: ``topic``, ``keys``, ``uniq_msg_id``, ``body_size``, ``properties_size``,
    ``message_type``, ``delay_level``, ``batch_id`` (messages), ``wire_bytes``, ``sys_flag`` (the
    member's result), ``queue_id``, ``stored_ts_ms`` (the storing attempt); ``uniq_len`` and
    ``key_tokens`` given (per row: :func:`_lengths` of ``uniq_msg_id``, :func:`_key_tokens` of ``keys``),
    those two columns are not read. Row by row, so any batching of the rows gives the same output. The
    broker is ``sc.broker_version``.
    """
    client, broker = sc.producers.version, sc.broker_version
    n = table.num_rows
    topic = table.column("topic")
    topic_len = _lengths(topic)
    if uniq_len is None:
        uniq_len = _lengths(table.column("uniq_msg_id"))
    if key_tokens is None:
        key_tokens = _key_tokens(table.column("keys"))
    body = _np(table, "body_size")
    props = _np(table, "properties_size")
    wire = _np(table, "wire_bytes")
    sys_flag = _np(table, "sys_flag")
    level = _np(table, "delay_level")
    queue_id = _np(table, "queue_id")
    is_batch = np.asarray(pc.is_valid(table.column("batch_id")).to_numpy(zero_copy_only=False), bool)
    half, delayed = _half_and_delayed(sys_flag, level, is_batch)
    kind = np.select([is_batch, half, delayed], [BATCH_ELEMENT, HALF, DELAYED], NORMAL)

    # the delay transform, once per distinct level
    eff = np.zeros(n, np.int64)
    sched_q = np.zeros(n, np.int64)
    delay_ms = np.zeros(n, np.int64)
    if delayed.any():
        per_level = _delay_lookup(tuple(sorted(set(level[delayed].tolist()))))
        for lv, (e, q, d) in per_level.items():
            hit = delayed & (level == lv)
            eff[hit], sched_q[hit], delay_ms[hit] = e, q, d

    # the properties string the broker writes
    base, moved_props = _stored_props_without_queue_id(
        client, broker, props, topic_len, uniq_len, level, eff, kind
    )
    stored_props = base + np.where(moved_props, _digits(queue_id), 0)

    store_topic = pc.if_else(pa.array(delayed), SCHEDULE_TOPIC, pc.if_else(pa.array(half), HALF_TOPIC, topic))
    store_topic_len = np.where(delayed, len(SCHEDULE_TOPIC), np.where(half, len(HALF_TOPIC), topic_len))
    store_q = np.where(delayed, sched_q, np.where(half, 0, queue_id))
    store_flag = np.where(half, sys_flag & ~_TRAN_BITS, sys_flag)
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
        "real_topic": pc.if_else(pa.array(moved), topic, pa.scalar(None, pa.string())),
        "real_queue_id": pa.array(queue_id.astype(np.int32), mask=~moved),
        "index_entries": pa.array((1 + key_tokens).astype(np.int32)),
    }
    for f in STORE_COLUMNS:
        col = cols[f.name]  # chunks as they are: a list holding a ChunkedArray converts row by row
        table = table.append_column(f, pa.chunked_array(_chunks(col), f.type))
    return table


# ---- every stored copy, and the commit log it makes ----------------------------------------------

# The brokers' write order: store time, then a fixed tie-break (a batch's elements stay together).
STORE_ORDER = ("store_ts_ms", "producer", "send_seq", "attempt", "seq")
OFFSET_NAMES = ("queue_offset", "commit_log_offset", "offset_msg_id")
# A commit-log record before its offsets (what the simulate stage nests per result row).
LOG_COLUMNS = pa.schema([f for f in data_schema(COMMIT_LOG) if f.name not in OFFSET_NAMES])


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
    wanted, keys = _result_keys(results), _result_keys(log)
    if len(wanted) > 1 and not (wanted[1:] > wanted[:-1]).all():
        return None
    at = np.searchsorted(wanted, keys)
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
        uniq_len = _lengths(results.column("uniq_msg_id"))[res]
        key_tokens = _key_tokens(messages.column("keys"))[msg]
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


# ---- the broker step: one broker's numbering and the results pointing at it ----------------------

RESULTS_DATA = data_schema(SEND_RESULTS)
# the columns send_results gains from the commit-log record it points at
RESULT_STORE_COLUMNS = tuple(f.name for f in SEND_RESULTS if is_broker_side(f))
# how PointedRecords keeps them: strings as codes, numbers as such (with their nulls), the id made again
_POINTED_STRINGS = tuple(
    n for n in RESULT_STORE_COLUMNS if n != "offset_msg_id" and pa.types.is_string(RESULTS_DATA.field(n).type)
)
_POINTED_NUMBERS = tuple(n for n in RESULT_STORE_COLUMNS if n not in ("offset_msg_id", *_POINTED_STRINGS))
_POINTED_NULLABLE = tuple(n for n in _POINTED_NUMBERS if data_schema(COMMIT_LOG).field(n).nullable)


def pointed_brokers(
    results: pa.Table, log: pa.Table, brokers: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """For some producers' ``results`` (in (producer, seq) order) and their commit-log records
    (:func:`log_records`): (each record's place in ``brokers``, each result's broker: that of the record
    it points at (``is_result``), -1 when it points at none)."""
    key = _result_keys(results)
    if len(key) > 1 and not (key[1:] > key[:-1]).all():
        raise AssertionError("pointed_brokers needs results in increasing (producer, seq) order")
    log_broker = broker_indexes(log.column("broker"), brokers)
    is_result = bools(log.column("is_result"))
    pointed = _result_keys(log)[is_result]
    at = np.searchsorted(key, pointed)
    if len(at) and (at.max() >= len(key) or not (key[at] == pointed).all()):
        raise AssertionError("a commit-log record points at no result")
    result_broker = np.full(len(key), -1, np.int64)
    result_broker[at] = log_broker[is_result]
    return log_broker, result_broker


def with_null_store_columns(results: pa.Table) -> pa.Table:
    """``send_results`` rows that point at no stored copy: the broker-side columns are null."""
    for name in RESULT_STORE_COLUMNS:
        field = RESULTS_DATA.field(name)
        results = results.append_column(field, pa.nulls(results.num_rows, field.type))
    return results.select(RESULTS_DATA.names).cast(RESULTS_DATA)


def _result_keys(table: pa.Table) -> np.ndarray:
    """One int64 per (producer, seq): producer in the bits above 40."""
    return (ints(table, "producer") << 40) | ints(table, "seq")


def attach_store_columns(results: pa.Table, numbered: pa.Table, sc: Scenario) -> pa.Table:
    """``results`` (each pointing at one record of ``numbered``) with that record's broker-side columns."""
    pointed = PointedRecords(sc.cluster.brokers)
    pointed.add(numbered)
    if pointed.rows != results.num_rows:
        raise AssertionError("send_results rows and the commit-log records they point at do not pair up")
    return pointed.attach(results)


class PointedRecords:
    """The numbered commit-log records that ``send_results`` rows point at (``is_result``), gathered a
    part at a time (:meth:`add`, e.g. of :func:`numbered_chunks`) as what results take of them
    (:data:`RESULT_STORE_COLUMNS`: numbers, strings as codes; the offset message id made again from the
    broker and the offset when attached), sorted by (producer, seq) once, at the first :meth:`attach`;
    :meth:`attach` completes results a part at a time. Among records of one message (more pointed
    records than results allowed), the first added."""

    def __init__(self, brokers: Sequence[str]) -> None:
        self.brokers = list(brokers)
        self.rows = 0
        self._parts: list[dict[str, np.ndarray]] = []
        self._names: dict[str, dict[str, int]] = {n: {} for n in _POINTED_STRINGS}
        self._sorted: dict[str, np.ndarray] | None = None

    def add(self, numbered: pa.Table) -> None:
        """Keep the pointed records of ``numbered`` (``commit_log`` columns)."""
        if self._sorted is not None:
            raise ValueError("PointedRecords.add after attach")
        mask = bools(numbered.column("is_result"))
        if not mask.any():
            return
        part = {"key": _result_keys(numbered)[mask]}
        part["broker"] = broker_indexes(numbered.column("broker"), self.brokers)[mask].astype(np.int32)
        for name in _POINTED_STRINGS:
            codes, names = string_codes(numbered.column(name))
            known = self._names[name]
            remap = np.array([known.setdefault(v, len(known)) for v in names.to_pylist()], np.int32)
            part[name] = remap[codes[mask]]
        for name in _POINTED_NUMBERS:
            column = numbered.column(name)
            dtype = RESULTS_DATA.field(name).type.to_pandas_dtype()
            part[name] = np.asarray(column.fill_null(0).to_numpy(), dtype)[mask]
            if name in _POINTED_NULLABLE:
                part[f"{name}.valid"] = bools(column.is_valid())[mask]
        self._parts.append(part)
        self.rows += len(part["key"])

    def _columns(self) -> dict[str, np.ndarray]:
        """The kept columns, sorted by key (stable: the first added first); made once, parts let go."""
        if self._sorted is None:
            names = list(self._parts[0]) if self._parts else []
            cols = {n: np.concatenate([p.pop(n) for p in self._parts]) for n in names}
            self._parts = []
            order = np.argsort(cols["key"], kind="stable") if cols else None
            if order is not None and not (order[1:] > order[:-1]).all():
                cols = {n: c[order] for n, c in cols.items()}
            self._sorted = cols
        return self._sorted

    def attach(self, results: pa.Table) -> pa.Table:
        """``results`` (each pointing at one kept record) with the broker-side columns of its record."""
        cols, wanted = self._columns(), _result_keys(results)
        keys = cols.get("key", np.zeros(0, np.int64))
        at = np.searchsorted(keys, wanted)
        paired = not len(at) or (at.max() < len(keys) and (keys[at] == wanted).all())
        if not paired:
            raise AssertionError("send_results rows and the commit-log records they point at do not pair up")
        made: dict[str, pa.Array] = {}
        if len(at):
            for name in _POINTED_STRINGS:
                names = pa.array(list(self._names[name]), pa.string())
                made[name] = names.take(pa.array(cols[name][at]))
            for name in _POINTED_NUMBERS:
                valid = cols.get(f"{name}.valid")
                mask = None if valid is None else ~valid[at]
                made[name] = pa.array(cols[name][at], RESULTS_DATA.field(name).type, mask=mask)
            hosts = store_hosts(self.brokers)
            made["offset_msg_id"] = offset_msg_ids(cols["broker"][at], cols["commit_log_offset"][at], hosts)
        for name in RESULT_STORE_COLUMNS:
            field = RESULTS_DATA.field(name)
            results = results.append_column(field, made.get(name, pa.array([], field.type)))
        return results.select(RESULTS_DATA.names).cast(RESULTS_DATA)


def number_broker(log: pa.Table, results: pa.Table, sc: Scenario) -> tuple[pa.Table, pa.Table]:
    """The broker step: one broker's records from every producer (:data:`LOG_COLUMNS`) and the results
    that point at them -> (its ``commit_log`` rows, those results with their store columns)."""
    numbered = with_offsets(log, sc)
    return numbered, attach_store_columns(results, numbered, sc)


# ---- store files --------------------------------------------------------------------------------


def _ceil_div(values: np.ndarray | int, size: int) -> np.ndarray:
    return -(-np.asarray(values, np.int64) // size)


def commit_log_files(total_bytes: np.ndarray | int) -> np.ndarray:
    """1 GiB commit-log files holding ``total_bytes`` (end-of-file fillers not counted)."""
    return _ceil_div(total_bytes, COMMIT_LOG_FILE_BYTES)


def consume_queue_files(entries: np.ndarray | int) -> np.ndarray:
    """Files of one consume queue with ``entries`` entries (300,000 x 20 bytes per file)."""
    return _ceil_div(entries, CQ_ENTRIES_PER_FILE)


def index_files(entries: np.ndarray | int) -> np.ndarray:
    """Index files for ``entries`` index entries: the first is made with the first record."""
    return np.maximum(_ceil_div(entries, INDEX_ENTRIES_PER_FILE), 1)
