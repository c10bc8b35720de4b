"""Messages as the RocketMQ Java client builds them: ``Message``, ``MessageBatch`` and their constants.

``Message`` mirrors ``org.apache.rocketmq.common.message.Message`` but is immutable: every setter of the Java
class is a ``with_*`` method returning a new message. Properties keep insertion order (the wire order our
encoder writes); ``rocketsim.format.codec.java_hashmap_order`` gives the order a Java ``HashMap`` would
iterate.

Also here: ``MessageConst`` (property names and the reserved-name set per version), ``MessageSysFlag`` (the
sys-flag bits), the producer defaults of ``DefaultMQProducer`` per version, and the broker's delay-level
table and put-time delay transform (``ScheduleMessageService`` / ``CommitLog``), which give a delay level
its meaning.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from rocketsim.client.versions import API_4, API_5, V4_9_8, ClientVersion
from rocketsim.errors import RocketSimError
from rocketsim.javaint import INT_MAX, INT_MIN

__all__ = [
    "DEFAULT_MESSAGE_DELAY_LEVEL",
    "RETRY_GROUP_TOPIC_PREFIX",
    "SEND_STATUS_BY_RESPONSE_CODE",
    "DelayLevelTable",
    "DelayTransform",
    "Message",
    "MessageBatch",
    "MessageConst",
    "MessageError",
    "MessageSysFlag",
    "ProducerDefaults",
    "broker_delay_transform",
    "java_parse_int",
    "parse_delay_levels",
    "producer_defaults",
]

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"  # MixAll.RETRY_GROUP_TOPIC_PREFIX


class MessageError(RocketSimError, ValueError):
    """A rule of the Java message API broken; ``java_exception`` names the class upstream throws.

    The message text is upstream's own text where upstream has one.
    """

    def __init__(self, message: str, java_exception: str) -> None:
        super().__init__(message)
        self.java_exception = java_exception


# --------------------------------------------------------------------------------------------------
# MessageConst
# --------------------------------------------------------------------------------------------------


class MessageConst:
    """Property names (``org.apache.rocketmq.common.message.MessageConst``), union of 4.9.8 and 5.x.

    ``names(version)`` lists the constants that exist in a version; ``string_hash_set(version)`` is
    ``STRING_HASH_SET``, the names ``putUserProperty`` refuses.
    """

    PROPERTY_KEYS = "KEYS"
    PROPERTY_TAGS = "TAGS"
    PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
    PROPERTY_DELAY_TIME_LEVEL = "DELAY"
    PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
    PROPERTY_REAL_TOPIC = "REAL_TOPIC"
    PROPERTY_REAL_QUEUE_ID = "REAL_QID"
    PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
    PROPERTY_PRODUCER_GROUP = "PGROUP"
    PROPERTY_MIN_OFFSET = "MIN_OFFSET"
    PROPERTY_MAX_OFFSET = "MAX_OFFSET"
    PROPERTY_BUYER_ID = "BUYER_ID"
    PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    PROPERTY_TRANSFER_FLAG = "TRANSFER_FLAG"
    PROPERTY_CORRECTION_FLAG = "CORRECTION_FLAG"
    PROPERTY_MQ2_FLAG = "MQ2_FLAG"
    PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
    PROPERTY_MSG_REGION = "MSG_REGION"
    PROPERTY_TRACE_SWITCH = "TRACE_ON"
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
    PROPERTY_EXTEND_UNIQ_INFO = "EXTEND_UNIQ_INFO"
    PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    PROPERTY_CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
    PROPERTY_INNER_NUM = "INNER_NUM"
    PROPERTY_INNER_BASE = "INNER_BASE"
    DUP_INFO = "DUP_INFO"
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
    PROPERTY_TRANSACTION_ID = "__transactionId__"
    PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    PROPERTY_INSTANCE_ID = "INSTANCE_ID"
    PROPERTY_CORRELATION_ID = "CORRELATION_ID"
    PROPERTY_MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
    PROPERTY_MESSAGE_TTL = "TTL"
    PROPERTY_REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
    PROPERTY_PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
    PROPERTY_CLUSTER = "CLUSTER"
    PROPERTY_MESSAGE_TYPE = "MSG_TYPE"
    PROPERTY_POP_CK = "POP_CK"
    PROPERTY_POP_CK_OFFSET = "POP_CK_OFFSET"
    PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"
    PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
    PROPERTY_FORWARD_QUEUE_ID = "PROPERTY_FORWARD_QUEUE_ID"
    PROPERTY_REDIRECT = "REDIRECT"
    PROPERTY_INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
    PROPERTY_INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
    PROPERTY_TRACE_CONTEXT = "TRACE_CONTEXT"
    PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
    PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
    PROPERTY_BORN_HOST = "__BORNHOST"
    PROPERTY_BORN_TIMESTAMP = "BORN_TIMESTAMP"
    PROPERTY_TRANSIENT_PREFIX = "__RMQ.TRANSIENT."
    PROPERTY_TRANSIENT_TOPIC_CONFIG = "__RMQ.TRANSIENT.TOPIC_SYS_FLAG"
    PROPERTY_TRANSIENT_GROUP_CONFIG = "__RMQ.TRANSIENT.GROUP_SYS_FLAG"
    KEY_SEPARATOR = " "
    PROPERTY_TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
    PROPERTY_TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
    PROPERTY_TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
    PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
    PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
    PROPERTY_TIMER_DELAY_LEVEL = "TIMER_DELAY_LEVEL"
    PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
    PROPERTY_CRC32 = "__CRC32#"
    PROPERTY_DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
    PROPERTY_DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"

    # Constants that 4.9.8 does not have yet.
    _ONLY_IN_5 = frozenset(
        {
            "PROPERTY_EXTEND_UNIQ_INFO",
            "PROPERTY_INNER_NUM",
            "PROPERTY_INNER_BASE",
            "DUP_INFO",
            "PROPERTY_TRANSACTION_ID",
            "PROPERTY_POP_CK",
            "PROPERTY_POP_CK_OFFSET",
            "PROPERTY_FIRST_POP_TIME",
            "PROPERTY_SHARDING_KEY",
            "PROPERTY_FORWARD_QUEUE_ID",
            "PROPERTY_REDIRECT",
            "PROPERTY_TRACE_CONTEXT",
            "PROPERTY_TIMER_DELAY_SEC",
            "PROPERTY_TIMER_DELIVER_MS",
            "PROPERTY_BORN_HOST",
            "PROPERTY_BORN_TIMESTAMP",
            "PROPERTY_TRANSIENT_PREFIX",
            "PROPERTY_TRANSIENT_TOPIC_CONFIG",
            "PROPERTY_TRANSIENT_GROUP_CONFIG",
            "PROPERTY_TIMER_ENQUEUE_MS",
            "PROPERTY_TIMER_DEQUEUE_MS",
            "PROPERTY_TIMER_ROLL_TIMES",
            "PROPERTY_TIMER_OUT_MS",
            "PROPERTY_TIMER_DEL_UNIQKEY",
            "PROPERTY_TIMER_DELAY_LEVEL",
            "PROPERTY_TIMER_DELAY_MS",
            "PROPERTY_CRC32",
            "PROPERTY_DLQ_ORIGIN_TOPIC",
            "PROPERTY_DLQ_ORIGIN_MESSAGE_ID",
        }
    )
    _UNDECLARED = MappingProxyType({API_4: _ONLY_IN_5, API_5: frozenset()})  # per line: absent names

    @classmethod
    def names(cls, version: ClientVersion = V4_9_8) -> dict[str, str]:
        """Every public String constant of the class in ``version``, Java name -> value."""
        out = {}
        for name, value in vars(cls).items():
            if name.isupper() and isinstance(value, str) and name not in cls._UNDECLARED[version.api_line]:
                out[name] = value
        return out

    @classmethod
    def string_hash_set(cls, version: ClientVersion = V4_9_8) -> frozenset[str]:
        """``STRING_HASH_SET``: property names reserved for the system in ``version``."""
        return _HASH_SETS[version.api_line]


_HASH_SET_4_9 = frozenset(
    {
        MessageConst.PROPERTY_TRACE_SWITCH,
        MessageConst.PROPERTY_MSG_REGION,
        MessageConst.PROPERTY_KEYS,
        MessageConst.PROPERTY_TAGS,
        MessageConst.PROPERTY_WAIT_STORE_MSG_OK,
        MessageConst.PROPERTY_DELAY_TIME_LEVEL,
        MessageConst.PROPERTY_RETRY_TOPIC,
        MessageConst.PROPERTY_REAL_TOPIC,
        MessageConst.PROPERTY_REAL_QUEUE_ID,
        MessageConst.PROPERTY_TRANSACTION_PREPARED,
        MessageConst.PROPERTY_PRODUCER_GROUP,
        MessageConst.PROPERTY_MIN_OFFSET,
        MessageConst.PROPERTY_MAX_OFFSET,
        MessageConst.PROPERTY_BUYER_ID,
        MessageConst.PROPERTY_ORIGIN_MESSAGE_ID,
        MessageConst.PROPERTY_TRANSFER_FLAG,
        MessageConst.PROPERTY_CORRECTION_FLAG,
        MessageConst.PROPERTY_MQ2_FLAG,
        MessageConst.PROPERTY_RECONSUME_TIME,
        MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        MessageConst.PROPERTY_MAX_RECONSUME_TIMES,
        MessageConst.PROPERTY_CONSUME_START_TIMESTAMP,
        MessageConst.PROPERTY_INSTANCE_ID,
        MessageConst.PROPERTY_CORRELATION_ID,
        MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT,
        MessageConst.PROPERTY_MESSAGE_TTL,
        MessageConst.PROPERTY_REPLY_MESSAGE_ARRIVE_TIME,
        MessageConst.PROPERTY_PUSH_REPLY_TIME,
        MessageConst.PROPERTY_CLUSTER,
        MessageConst.PROPERTY_MESSAGE_TYPE,
        MessageConst.PROPERTY_INNER_MULTI_QUEUE_OFFSET,
    }
)
_HASH_SET_5 = _HASH_SET_4_9 | frozenset(
    {
        MessageConst.PROPERTY_POP_CK,
        MessageConst.PROPERTY_POP_CK_OFFSET,
        MessageConst.PROPERTY_FIRST_POP_TIME,
        MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
        MessageConst.DUP_INFO,
        MessageConst.PROPERTY_EXTEND_UNIQ_INFO,
        MessageConst.PROPERTY_TIMER_DELAY_MS,
        MessageConst.PROPERTY_TIMER_DELAY_SEC,
        MessageConst.PROPERTY_TIMER_DELIVER_MS,
        MessageConst.PROPERTY_TIMER_ENQUEUE_MS,
        MessageConst.PROPERTY_TIMER_DEQUEUE_MS,
        MessageConst.PROPERTY_TIMER_ROLL_TIMES,
        MessageConst.PROPERTY_TIMER_OUT_MS,
        MessageConst.PROPERTY_TIMER_DEL_UNIQKEY,
        MessageConst.PROPERTY_TIMER_DELAY_LEVEL,
        MessageConst.PROPERTY_BORN_HOST,
        MessageConst.PROPERTY_BORN_TIMESTAMP,
        MessageConst.PROPERTY_DLQ_ORIGIN_TOPIC,
        MessageConst.PROPERTY_DLQ_ORIGIN_MESSAGE_ID,
        MessageConst.PROPERTY_CRC32,
    }
)
_HASH_SETS = {API_4: _HASH_SET_4_9, API_5: _HASH_SET_5}


# --------------------------------------------------------------------------------------------------
# MessageSysFlag
# --------------------------------------------------------------------------------------------------


class MessageSysFlag:
    """Bits of the request/store ``sysFlag`` (``org.apache.rocketmq.common.sysflag.MessageSysFlag``).

    bit 0 COMPRESSED, bit 1 MULTI_TAGS, bits 2-3 transaction type, bit 4 BORNHOST_V6, bit 5 STOREHOST_V6,
    bit 6 NEED_UNWRAP, bit 7 INNER_BATCH, bits 8-10 compression type (0 and 3 mean ZLIB, 1 LZ4, 2 ZSTD).
    """

    COMPRESSED_FLAG = 0x1
    MULTI_TAGS_FLAG = 0x1 << 1
    TRANSACTION_NOT_TYPE = 0
    TRANSACTION_PREPARED_TYPE = 0x1 << 2
    TRANSACTION_COMMIT_TYPE = 0x2 << 2
    TRANSACTION_ROLLBACK_TYPE = 0x3 << 2
    BORNHOST_V6_FLAG = 0x1 << 4
    STOREHOSTADDRESS_V6_FLAG = 0x1 << 5
    NEED_UNWRAP_FLAG = 0x1 << 6
    INNER_BATCH_FLAG = 0x1 << 7
    COMPRESSION_LZ4_TYPE = 0x1 << 8
    COMPRESSION_ZSTD_TYPE = 0x2 << 8
    COMPRESSION_ZLIB_TYPE = 0x3 << 8
    COMPRESSION_TYPE_COMPARATOR = 0x7 << 8

    @classmethod
    def names(cls) -> dict[str, int]:
        """Every flag constant, Java name -> value (identical in 4.9.8 and 5.x)."""
        return {k: v for k, v in vars(cls).items() if k.isupper() and isinstance(v, int)}

    @staticmethod
    def get_transaction_value(flag: int) -> int:
        """The transaction type bits (``flag & TRANSACTION_ROLLBACK_TYPE``)."""
        return flag & MessageSysFlag.TRANSACTION_ROLLBACK_TYPE

    @staticmethod
    def reset_transaction_value(flag: int, transaction_type: int) -> int:
        """``flag`` with its transaction bits replaced by ``transaction_type``."""
        return (flag & ~MessageSysFlag.TRANSACTION_ROLLBACK_TYPE) | transaction_type

    @staticmethod
    def clear_compressed_flag(flag: int) -> int:
        return flag & ~MessageSysFlag.COMPRESSED_FLAG

    @staticmethod
    def compression_type_value(flag: int) -> int:
        """Bits 8-10 as a number 0..7 (``CompressionType.findByValue`` maps 0 and 3 to ZLIB, 4..7 throw)."""
        return (flag & MessageSysFlag.COMPRESSION_TYPE_COMPARATOR) >> 8

    @staticmethod
    def check(flag: int, expected: int) -> bool:
        """True when any bit of ``expected`` is set in ``flag``."""
        return (flag & expected) != 0


# --------------------------------------------------------------------------------------------------
# Java parsing helpers
# --------------------------------------------------------------------------------------------------


def java_parse_int(text: str | None) -> int:
    """``Integer.parseInt``: optional sign, then decimal digits (any Unicode Nd digit), int32 range.

    Raises ``MessageError`` (``java.lang.NumberFormatException``) with Java's text otherwise.
    """
    if text is None:
        raise MessageError("Cannot parse null string: null", "java.lang.NumberFormatException")
    digits = text[1:] if text[:1] in ("+", "-") else text
    if digits and all(c.isdecimal() for c in digits):
        value = int(text)
        if INT_MIN <= value <= INT_MAX:
            return value
    raise MessageError(f'For input string: "{text}"', "java.lang.NumberFormatException")


def _java_parse_long(text: str) -> int:
    digits = text[1:] if text[:1] in ("+", "-") else text
    if digits and all(c.isdecimal() for c in digits):
        value = int(text)
        if -(2**63) <= value < 2**63:
            return value
    raise MessageError(f'For input string: "{text}"', "java.lang.NumberFormatException")


def _java_trim_is_empty(text: str) -> bool:
    """``String.trim().isEmpty()``: trim drops every char <= U+0020 from both ends."""
    return all(c <= " " for c in text)


# --------------------------------------------------------------------------------------------------
# Message
# --------------------------------------------------------------------------------------------------

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Message:
    """A producer message: topic, body, flag, properties (insertion-ordered, read-only), transaction id.

    ``body`` may be None (Java's null body, which encoders and validators refuse). ``properties`` is
    copied into a read-only mapping; None means empty. Plain construction sets no property: use
    ``Message.create`` for what the Java constructors do (TAGS, KEYS, WAIT).
    """

    topic: str
    body: bytes | None
    flag: int = 0
    properties: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    transaction_id: str | None = None

    def __post_init__(self) -> None:
        props = self.properties
        if props is None or props is _EMPTY:
            object.__setattr__(self, "properties", _EMPTY)
        else:
            object.__setattr__(self, "properties", MappingProxyType(dict(props)))
        if self.body is not None and not isinstance(self.body, bytes):
            object.__setattr__(self, "body", bytes(self.body))

    def __hash__(self) -> int:
        return hash((self.topic, self.body, self.flag, tuple(self.properties.items()), self.transaction_id))

    # -- construction as the Java constructors do it ---------------------------------------------

    @classmethod
    def create(
        cls,
        topic: str,
        body: bytes | None,
        *,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        flag: int = 0,
        wait_store_msg_ok: bool = True,
    ) -> Message:
        """``new Message(topic, tags, keys, flag, body, waitStoreMsgOK)``: empty tags/keys are not set.

        Keys given as a collection are joined with ``KEY_SEPARATOR`` (a space), like ``setKeys(Collection)``.
        """
        props: dict[str, str] = {}
        if tags:
            props[MessageConst.PROPERTY_TAGS] = tags
        if keys is not None and not isinstance(keys, str):
            keys = MessageConst.KEY_SEPARATOR.join(keys)
        if keys:
            props[MessageConst.PROPERTY_KEYS] = keys
        props[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "true" if wait_store_msg_ok else "false"
        return cls(topic, body, flag, props)

    # -- reading -----------------------------------------------------------------------------------

    def get_property(self, name: str) -> str | None:
        return self.properties.get(name)

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageConst.PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(MessageConst.PROPERTY_KEYS)

    @property
    def uniq_key(self) -> str | None:
        """The client-side unique id (``UNIQ_KEY``), set by the producer before sending."""
        return self.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def delay_time_level(self) -> int:
        """``getDelayTimeLevel()``: 0 without the property; ``MessageError`` if it is not an int."""
        text = self.properties.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
        return 0 if text is None else java_parse_int(text)

    @property
    def wait_store_msg_ok(self) -> bool:
        """``isWaitStoreMsgOK()``: true without the property, else ``Boolean.parseBoolean``."""
        text = self.properties.get(MessageConst.PROPERTY_WAIT_STORE_MSG_OK)
        return True if text is None else text.lower() == "true"

    @property
    def is_transaction_prepared(self) -> bool:
        """The producer marks the request TRANSACTION_PREPARED when ``TRAN_MSG`` parses as true."""
        text = self.properties.get(MessageConst.PROPERTY_TRANSACTION_PREPARED)
        return text is not None and text.lower() == "true"

    # -- copies with a change (the Java setters) ---------------------------------------------------

    def with_property(self, name: str, value: str) -> Message:
        """``putProperty`` (package-private in Java): no reserved-name or blank check."""
        props = dict(self.properties)
        props[name] = value
        return replace(self, properties=props)

    def without_property(self, name: str) -> Message:
        """``clearProperty``."""
        if name not in self.properties:
            return self
        props = dict(self.properties)
        del props[name]
        return replace(self, properties=props)

    def with_properties(self, updates: Mapping[str, str]) -> Message:
        props = dict(self.properties)
        props.update(updates)
        return replace(self, properties=props)

    def put_user_property(
        self, name: str | None, value: str | None, *, version: ClientVersion = V4_9_8
    ) -> Message:
        """``putUserProperty``: refuses reserved names, then null/blank names or values, upstream's text."""
        if name is not None and name in MessageConst.string_hash_set(version):
            raise MessageError(
                f"The Property<{name}> is used by system, input another please", "java.lang.RuntimeException"
            )
        if value is None or _java_trim_is_empty(value) or name is None or _java_trim_is_empty(name):
            raise MessageError(
                "The name or value of property can not be null or blank string!",
                "java.lang.IllegalArgumentException",
            )
        return self.with_property(name, value)

    def with_tags(self, tags: str) -> Message:
        return self.with_property(MessageConst.PROPERTY_TAGS, tags)

    def with_keys(self, keys: str | Iterable[str]) -> Message:
        if not isinstance(keys, str):
            keys = MessageConst.KEY_SEPARATOR.join(keys)
        return self.with_property(MessageConst.PROPERTY_KEYS, keys)

    def with_delay_time_level(self, level: int) -> Message:
        return self.with_property(MessageConst.PROPERTY_DELAY_TIME_LEVEL, str(level))

    def with_wait_store_msg_ok(self, wait: bool) -> Message:
        return self.with_property(MessageConst.PROPERTY_WAIT_STORE_MSG_OK, "true" if wait else "false")

    def with_uniq_key(self, uniq_id: str) -> Message:
        return self.with_property(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, uniq_id)

    def with_uniq_key_if_absent(self, uniq_id: str) -> Message:
        """``MessageClientIDSetter.setUniqID``: only when the message has no ``UNIQ_KEY`` yet."""
        if self.uniq_key is not None:
            return self
        return self.with_uniq_key(uniq_id)

    def with_topic(self, topic: str) -> Message:
        return replace(self, topic=topic)

    def with_body(self, body: bytes | None) -> Message:
        return replace(self, body=body)

    def with_flag(self, flag: int) -> Message:
        return replace(self, flag=flag)


# --------------------------------------------------------------------------------------------------
# MessageBatch
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MessageBatch:
    """``MessageBatch``: several messages of one topic sent as one request.

    Build it with ``generate_from_list`` (upstream's rules). The batch as a message has the first message's
    topic and a ``WAIT`` property; its body is ``encode_messages`` of the elements
    (``rocketsim.format.codec``). A batch is never compressed.
    """

    messages: tuple[Message, ...]
    topic: str
    wait_store_msg_ok: bool = True

    @classmethod
    def generate_from_list(cls, messages: Iterable[Message]) -> MessageBatch:
        """``MessageBatch.generateFromList``: checks each message in order, upstream's texts on failure.

        Per message: delay level > 0, then a ``%RETRY%`` topic; against the first message: another topic,
        then another ``waitStoreMsgOK`` (``UnsupportedOperationException``). An empty list fails the way
        upstream does with assertions off (a ``NullPointerException`` on the missing first message).
        """
        items = tuple(messages)
        unsupported = "java.lang.UnsupportedOperationException"
        first: Message | None = None
        for message in items:
            if message.delay_time_level > 0:
                raise MessageError("TimeDelayLevel is not supported for batching", unsupported)
            if message.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                raise MessageError("Retry Group is not supported for batching", unsupported)
            if first is None:
                first = message
            else:
                if first.topic != message.topic:
                    raise MessageError(
                        "The topic of the messages in one batch should be the same", unsupported
                    )
                if first.wait_store_msg_ok != message.wait_store_msg_ok:
                    raise MessageError(
                        "The waitStoreMsgOK of the messages in one batch should the same", unsupported
                    )
        if first is None:
            raise MessageError("a MessageBatch needs at least one message", "java.lang.NullPointerException")
        return cls(items, first.topic, first.wait_store_msg_ok)

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages)

    def __len__(self) -> int:
        return len(self.messages)

    @property
    def properties(self) -> Mapping[str, str]:
        """The batch's own properties: only ``WAIT`` (5.x's producer adds a ``UNIQ_KEY`` on send)."""
        return MappingProxyType(
            {MessageConst.PROPERTY_WAIT_STORE_MSG_OK: "true" if self.wait_store_msg_ok else "false"}
        )

    def with_uniq_keys(self, ids: Iterator[str]) -> MessageBatch:
        """Give every element without ``UNIQ_KEY`` the next id, as ``DefaultMQProducer.batch`` does."""
        return replace(
            self,
            messages=tuple(
                m if m.uniq_key is not None else m.with_uniq_key(next(ids)) for m in self.messages
            ),
        )

    def to_message(self, body: bytes, *, batch_uniq_key: str | None = None) -> Message:
        """The request message: batch topic, encoded elements as body, ``WAIT`` (+ 5.x's ``UNIQ_KEY``)."""
        props = dict(self.properties)
        if batch_uniq_key is not None:
            props[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = batch_uniq_key
        return Message(self.topic, body, 0, props)


# --------------------------------------------------------------------------------------------------
# Producer defaults (DefaultMQProducer field initialisers and related client settings)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProducerDefaults:
    """Defaults of ``DefaultMQProducer`` (and the client settings it uses) in one client version.

    Fields that a version does not have are None. ``retry_response_codes`` is ``retryResponseCodes``.
    """

    default_topic_queue_nums: int = 4
    send_msg_timeout: int = 3000
    compress_msg_body_over_howmuch: int = 4096
    retry_times_when_send_failed: int = 2
    retry_times_when_send_async_failed: int = 2
    retry_another_broker_when_not_store_ok: bool = False
    max_message_size: int = 4 * 1024 * 1024
    create_topic_key: str = "TBW102"
    compress_level: int = 5
    compress_type: str = "ZLIB"
    compress_level_system_property: str = "rocketmq.message.compressLevel"
    compress_type_system_property: str = "rocketmq.message.compressType"
    send_latency_fault_enable: bool = False
    retry_response_codes: tuple[int, ...] = (17, 14, 1, 16, 204, 205)
    # 5.x only
    send_msg_max_timeout_per_request: int | None = None
    auto_batch: bool | None = None
    enable_backpressure_for_async_mode: bool | None = None
    back_pressure_for_async_send_num: int | None = None
    back_pressure_for_async_send_size: int | None = None
    batch_max_delay_ms: int | None = None
    batch_max_bytes: int | None = None
    total_batch_max_bytes: int | None = None
    start_detector_enable: bool | None = None
    detect_timeout: int | None = None
    detect_interval: int | None = None


_DEFAULTS_4_9 = ProducerDefaults()
_DEFAULTS_5 = ProducerDefaults(
    # SYSTEM_BUSY (2) since 5.3.0, GO_AWAY (1500) since 5.3.1
    retry_response_codes=(17, 14, 1, 2, 16, 204, 205, 1500),
    send_msg_max_timeout_per_request=-1,
    auto_batch=False,
    # enable_backpressure_for_async_mode, back_pressure_for_async_send_num/_size: per version, from
    # ClientVersion.async_backpressure_defaults (producer_defaults fills them in)
    batch_max_delay_ms=-1,
    batch_max_bytes=-1,
    total_batch_max_bytes=-1,
    start_detector_enable=False,
    detect_timeout=200,
    detect_interval=2000,
)


def producer_defaults(version: ClientVersion = V4_9_8) -> ProducerDefaults:
    """The producer defaults of ``version``'s line (and the fields that differ inside the 5.x line)."""
    defaults = _DEFAULTS[version.api_line]
    backpressure = version.async_backpressure_defaults
    if backpressure is None:
        return defaults
    return replace(
        defaults,
        enable_backpressure_for_async_mode=backpressure.enable_backpressure_for_async_mode,
        back_pressure_for_async_send_num=backpressure.back_pressure_for_async_send_num,
        back_pressure_for_async_send_size=backpressure.back_pressure_for_async_send_size,
    )


_DEFAULTS = {API_4: _DEFAULTS_4_9, API_5: _DEFAULTS_5}


# Broker response code -> SendStatus (any other code becomes an MQBrokerException with that code).
SEND_STATUS_BY_RESPONSE_CODE: Mapping[int, str] = MappingProxyType(
    {
        0: "SEND_OK",  # SUCCESS
        10: "FLUSH_DISK_TIMEOUT",
        12: "FLUSH_SLAVE_TIMEOUT",
        11: "SLAVE_NOT_AVAILABLE",
    }
)


# --------------------------------------------------------------------------------------------------
# Delay levels: the broker's table and its put-time transform
# --------------------------------------------------------------------------------------------------

DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_TIME_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"  # TopicValidator.RMQ_SYS_SCHEDULE_TOPIC


@dataclass(frozen=True)
class DelayLevelTable:
    """``ScheduleMessageService.delayLevelTable``: level (1-based) -> delay in ms, and ``maxDelayLevel``.

    ``parse_ok`` is false when parsing stopped at a malformed entry; the entries before it (and the
    level counter, which upstream bumps before parsing the number) are kept, as upstream keeps them.
    """

    parse_ok: bool
    max_level: int
    level_to_ms: Mapping[int, int]

    def deliver_timestamp(self, level: int, store_timestamp_ms: int) -> int:
        """``computeDeliverTimestamp``: store time + the level's delay (+1000 ms for an unknown level)."""
        delay = self.level_to_ms.get(level)
        return store_timestamp_ms + (1000 if delay is None else delay)


def _java_split_space(text: str) -> list[str]:
    """``String.split(" ")``: trailing empty strings dropped; no match returns the whole string."""
    if " " not in text:
        return [text]
    parts = text.split(" ")
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def parse_delay_levels(text: str = DEFAULT_MESSAGE_DELAY_LEVEL) -> DelayLevelTable:
    """``ScheduleMessageService.parseDelayLevel`` on a ``messageDelayLevel`` string (units s, m, h, d)."""
    table: dict[int, int] = {}
    max_level = 0
    for i, value in enumerate(_java_split_space(text)):
        if not value:  # substring(-1) throws before the level is counted
            return DelayLevelTable(False, max_level, MappingProxyType(table))
        unit = _TIME_UNIT_MS.get(value[-1])
        level = i + 1
        max_level = max(max_level, level)
        try:
            number = _java_parse_long(value[:-1])
        except MessageError:
            return DelayLevelTable(False, max_level, MappingProxyType(table))
        if unit is None:  # unboxing a null Long: NullPointerException
            return DelayLevelTable(False, max_level, MappingProxyType(table))
        table[level] = unit * number
    return DelayLevelTable(True, max_level, MappingProxyType(table))


@dataclass(frozen=True)
class DelayTransform:
    """What the broker stores for a put: the delayed message moves to ``SCHEDULE_TOPIC_XXXX``."""

    delayed: bool
    topic: str
    queue_id: int
    properties: Mapping[str, str]
    deliver_timestamp_ms: int | None = None

    @property
    def effective_level(self) -> int | None:
        text = self.properties.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
        return int(text) if self.delayed and text is not None else None


def broker_delay_transform(
    topic: str,
    queue_id: int,
    properties: Mapping[str, str],
    sys_flag: int,
    store_timestamp_ms: int,
    table: DelayLevelTable | None = None,
) -> DelayTransform:
    """The 4.9.8 ``CommitLog`` put path / 5.x ``HookUtils`` delay transform.

    Only NOT_TYPE and COMMIT messages with a level > 0 are delayed; a level above ``max_level`` is clamped
    and written back to ``DELAY``; ``REAL_TOPIC``/``REAL_QID`` keep the originals; queue = level - 1.
    """
    table = table if table is not None else _DEFAULT_TABLE
    props = dict(properties)
    tran = MessageSysFlag.get_transaction_value(sys_flag)
    text = props.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
    level = 0 if text is None else java_parse_int(text)
    if (
        tran not in (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)
        or level <= 0
    ):
        return DelayTransform(False, topic, queue_id, MappingProxyType(props))
    if level > table.max_level:
        level = table.max_level
        props[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(level)
    props[MessageConst.PROPERTY_REAL_TOPIC] = topic
    props[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(queue_id)
    return DelayTransform(
        True,
        _SCHEDULE_TOPIC,
        level - 1,
        MappingProxyType(props),
        table.deliver_timestamp(level, store_timestamp_ms),
    )


_DEFAULT_TABLE = parse_delay_levels(DEFAULT_MESSAGE_DELAY_LEVEL)
