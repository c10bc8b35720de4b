"""Upstream's client-side checks: ``Validators`` and ``TopicValidator``, and the constants they use.

Every check raises :class:`~rocketsim.errors.MQClientError` with upstream's response code (-1 when the
Java code passes none, 13 = MESSAGE_ILLEGAL for body checks) and upstream's exact text; the FAQ URL of the
message is the one of the client version. Lengths are Java ``String.length()`` (UTF-16 code units).

Version differences modelled here:

* ``checkGroup``: 255 code units with the text "... longer than group max length 255." up to 5.3.3;
  ``develop`` (after 5.3.3) allows 120 and names the group in the text;
* ``checkMessage``: 5.x (5.1.2 and later) refuses an ``INNER_MULTI_DISPATCH`` property containing the
  platform file separator ("/");
* ``TopicValidator``: 5.x adds ``CHECKPOINT_TOPIC`` to the system topics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import ClassVar

from rocketsim.client.versions import API_4, API_5, V4_9_8, ClientVersion, before, in_5_line, since
from rocketsim.errors import EncodeError, MQClientError

ConstantValue = int | str


class _Constants:
    """Upper-case class attributes are upstream's ``public static final`` fields of one Java class.

    ``_AVAILABLE`` maps a field to the versions that declare it (absent: every modelled version);
    ``_INHERITED`` names fields Java inherits from a parent class (not declared by this one).
    """

    _AVAILABLE: ClassVar[dict[str, Callable[[ClientVersion], bool]]] = {}
    _INHERITED: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def declared(
        cls, version: ClientVersion = V4_9_8, *, include_inherited: bool = False
    ) -> dict[str, ConstantValue]:
        """The fields ``version``'s class declares, in upstream's order (as ``constants.json`` lists them)."""
        out: dict[str, ConstantValue] = {}
        for name, value in vars(cls).items():
            if not name.isupper() or name.startswith("_") or not isinstance(value, int | str):
                continue
            if name in cls._INHERITED and not include_inherited:
                continue
            if cls._AVAILABLE.get(name, lambda _v: True)(version):
                out[name] = value
        return out


class TopicValidator(_Constants):
    """``org.apache.rocketmq.common.topic.TopicValidator`` constants and sets."""

    AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
    RMQ_SYS_SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
    RMQ_SYS_BENCHMARK_TOPIC = "BenchmarkTest"
    RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
    RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
    RMQ_SYS_TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
    RMQ_SYS_SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
    RMQ_SYS_OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
    RMQ_SYS_ROCKSDB_OFFSET_TOPIC = "CHECKPOINT_TOPIC"
    SYSTEM_TOPIC_PREFIX = "rmq_sys_"
    SYNC_BROKER_MEMBER_GROUP_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"

    _AVAILABLE: ClassVar[dict[str, Callable[[ClientVersion], bool]]] = {
        "RMQ_SYS_ROCKSDB_OFFSET_TOPIC": in_5_line,
        "SYNC_BROKER_MEMBER_GROUP_PREFIX": in_5_line,
    }

    NOT_ALLOWED_SEND_TOPICS: ClassVar[frozenset[str]] = frozenset(
        {
            RMQ_SYS_SCHEDULE_TOPIC,
            RMQ_SYS_TRANS_HALF_TOPIC,
            RMQ_SYS_TRANS_OP_HALF_TOPIC,
            RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
            RMQ_SYS_SELF_TEST_TOPIC,
            RMQ_SYS_OFFSET_MOVED_EVENT,
        }
    )
    _SYSTEM_TOPICS_4: ClassVar[frozenset[str]] = NOT_ALLOWED_SEND_TOPICS | {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        RMQ_SYS_BENCHMARK_TOPIC,
        RMQ_SYS_TRACE_TOPIC,
    }
    _SYSTEM_TOPICS_5: ClassVar[frozenset[str]] = _SYSTEM_TOPICS_4 | {RMQ_SYS_ROCKSDB_OFFSET_TOPIC}

    @classmethod
    def system_topic_set(cls, version: ClientVersion = V4_9_8) -> frozenset[str]:
        """``getSystemTopicSet()`` as initialised (without topics added at run time)."""
        return {API_4: cls._SYSTEM_TOPICS_4, API_5: cls._SYSTEM_TOPICS_5}[version.api_line]

    @classmethod
    def not_allowed_send_topic_set(cls, version: ClientVersion = V4_9_8) -> frozenset[str]:
        """``getNotAllowedSendTopicSet()`` (the same in every modelled version)."""
        return cls.NOT_ALLOWED_SEND_TOPICS


class Validators(_Constants):
    """``org.apache.rocketmq.client.Validators`` constants."""

    CHARACTER_MAX_LENGTH = 255
    TOPIC_MAX_LENGTH = 127
    GROUP_MAX_LENGTH = 120

    _AVAILABLE: ClassVar[dict[str, Callable[[ClientVersion], bool]]] = {
        "GROUP_MAX_LENGTH": lambda v: v.group_max_length == 120,
    }


class ResponseCode(_Constants):
    """``ResponseCode`` (``common.protocol`` in 4.x, ``remoting.protocol`` in 5.x) with the codes it inherits
    from ``RemotingSysResponseCode``. Names that upstream gave one number twice across versions (209-211)
    are all present; :meth:`declared` gives one version's set."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    INVALID_PARAMETER = 29
    TRANSACTION_SHOULD_COMMIT = 200
    TRANSACTION_SHOULD_ROLLBACK = 201
    TRANSACTION_STATE_UNKNOW = 202
    TRANSACTION_STATE_GROUP_WRONG = 203
    NO_BUYER_ID = 204
    NOT_IN_CURRENT_UNIT = 205
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209
    DELETE_ACL_CONFIG_FAILED = 210
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211
    POLLING_FULL = 209
    POLLING_TIMEOUT = 210
    BROKER_NOT_EXIST = 211
    BROKER_DISPATCH_NOT_COMPLETE = 212
    BROADCAST_CONSUMPTION = 213
    FLOW_CONTROL = 215
    NOT_LEADER_FOR_QUEUE = 501
    ILLEGAL_OPERATION = 604
    RPC_UNKNOWN = -1000
    RPC_ADDR_IS_NULL = -1002
    RPC_SEND_TO_CHANNEL_FAILED = -1004
    RPC_TIME_OUT = -1006
    GO_AWAY = 1500
    CONTROLLER_FENCED_MASTER_EPOCH = 2000
    CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001
    CONTROLLER_INVALID_MASTER = 2002
    CONTROLLER_INVALID_REPLICAS = 2003
    CONTROLLER_MASTER_NOT_AVAILABLE = 2004
    CONTROLLER_INVALID_REQUEST = 2005
    CONTROLLER_BROKER_NOT_ALIVE = 2006
    CONTROLLER_NOT_LEADER = 2007
    CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008
    CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 2009
    CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 2010
    CONTROLLER_MASTER_STILL_EXIST = 2011
    CONTROLLER_ELECT_MASTER_FAILED = 2012
    CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 2013
    CONTROLLER_BROKER_ID_INVALID = 2014
    CONTROLLER_JRAFT_INTERNAL_ERROR = 2015
    CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS = 2016
    USER_NOT_EXIST = 3001
    POLICY_NOT_EXIST = 3002

    _INHERITED: ClassVar[frozenset[str]] = frozenset(
        {"SUCCESS", "SYSTEM_ERROR", "SYSTEM_BUSY", "REQUEST_CODE_NOT_SUPPORTED", "TRANSACTION_FAILED"}
    )
    _AVAILABLE: ClassVar[dict[str, Callable[[ClientVersion], bool]]] = {
        "INVALID_PARAMETER": since("5.3.2"),
        "UPDATE_AND_CREATE_ACL_CONFIG_FAILED": before("5.3.3"),
        "DELETE_ACL_CONFIG_FAILED": before("5.3.3"),
        "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED": before("5.3.3"),
        "FLOW_CONTROL": since("4.9.5"),
        "USER_NOT_EXIST": since("5.3.0"),
        "POLICY_NOT_EXIST": since("5.3.0"),
        # 5.x only (remoting.protocol.ResponseCode)
        **dict.fromkeys(
            (
                "POLLING_FULL",
                "POLLING_TIMEOUT",
                "BROKER_NOT_EXIST",
                "BROKER_DISPATCH_NOT_COMPLETE",
                "BROADCAST_CONSUMPTION",
                "NOT_LEADER_FOR_QUEUE",
                "ILLEGAL_OPERATION",
                "RPC_UNKNOWN",
                "RPC_ADDR_IS_NULL",
                "RPC_SEND_TO_CHANNEL_FAILED",
                "RPC_TIME_OUT",
                "GO_AWAY",
                "CONTROLLER_FENCED_MASTER_EPOCH",
                "CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH",
                "CONTROLLER_INVALID_MASTER",
                "CONTROLLER_INVALID_REPLICAS",
                "CONTROLLER_MASTER_NOT_AVAILABLE",
                "CONTROLLER_INVALID_REQUEST",
                "CONTROLLER_BROKER_NOT_ALIVE",
                "CONTROLLER_NOT_LEADER",
                "CONTROLLER_BROKER_METADATA_NOT_EXIST",
                "CONTROLLER_INVALID_CLEAN_BROKER_METADATA",
                "CONTROLLER_BROKER_NEED_TO_BE_REGISTERED",
                "CONTROLLER_MASTER_STILL_EXIST",
                "CONTROLLER_ELECT_MASTER_FAILED",
                "CONTROLLER_ALTER_SYNC_STATE_SET_FAILED",
                "CONTROLLER_BROKER_ID_INVALID",
                "CONTROLLER_JRAFT_INTERNAL_ERROR",
                "CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS",
            ),
            in_5_line,
        ),
    }


class PermName(_Constants):
    """``org.apache.rocketmq.common.constant.PermName``: queue/broker permission bits."""

    INDEX_PERM_PRIORITY = 3
    INDEX_PERM_READ = 2
    INDEX_PERM_WRITE = 1
    INDEX_PERM_INHERIT = 0
    PERM_PRIORITY = 0x1 << 3
    PERM_READ = 0x1 << 2
    PERM_WRITE = 0x1 << 1
    PERM_INHERIT = 0x1

    _AVAILABLE: ClassVar[dict[str, Callable[[ClientVersion], bool]]] = {
        name: in_5_line
        for name in ("INDEX_PERM_PRIORITY", "INDEX_PERM_READ", "INDEX_PERM_WRITE", "INDEX_PERM_INHERIT")
    }

    @staticmethod
    def is_readable(perm: int) -> bool:
        return perm & PermName.PERM_READ == PermName.PERM_READ

    @staticmethod
    def is_writeable(perm: int) -> bool:
        return perm & PermName.PERM_WRITE == PermName.PERM_WRITE

    @staticmethod
    def is_inherited(perm: int) -> bool:
        return perm & PermName.PERM_INHERIT == PermName.PERM_INHERIT

    @staticmethod
    def is_priority(perm: int) -> bool:
        return perm & PermName.PERM_PRIORITY == PermName.PERM_PRIORITY

    @staticmethod
    def is_valid(perm: int) -> bool:
        """5.x ``isValid``: 0 <= perm < PERM_PRIORITY."""
        return 0 <= perm < PermName.PERM_PRIORITY

    @staticmethod
    def perm2string(perm: int) -> str:
        """``perm2String``: "RWX" with "-" for each missing read/write/inherit bit."""
        return (
            ("R" if PermName.is_readable(perm) else "-")
            + ("W" if PermName.is_writeable(perm) else "-")
            + ("X" if PermName.is_inherited(perm) else "-")
        )


class ClientErrorCode(_Constants):
    """``org.apache.rocketmq.client.common.ClientErrorCode``: codes of client-side MQClientExceptions."""

    CONNECT_BROKER_EXCEPTION = 10001
    ACCESS_BROKER_TIMEOUT = 10002
    BROKER_NOT_EXIST_EXCEPTION = 10003
    NO_NAME_SERVER_EXCEPTION = 10004
    NOT_FOUND_TOPIC_EXCEPTION = 10005
    REQUEST_TIMEOUT_EXCEPTION = 10006
    CREATE_REPLY_MESSAGE_EXCEPTION = 10007


class FAQUrl:
    """``org.apache.rocketmq.common.help.FAQUrl``: every URL field holds the version's one FAQ address."""

    FIELDS: ClassVar[tuple[str, ...]] = (
        "DEFAULT_FAQ_URL",
        "APPLY_TOPIC_URL",
        "NAME_SERVER_ADDR_NOT_EXIST_URL",
        "GROUP_NAME_DUPLICATE_URL",
        "CLIENT_PARAMETER_CHECK_URL",
        "SUBSCRIPTION_GROUP_NOT_EXIST",
        "CLIENT_SERVICE_NOT_OK",
        "NO_TOPIC_ROUTE_INFO",
        "LOAD_JSON_EXCEPTION",
        "SAME_GROUP_DIFFERENT_TOPIC",
        "MQLIST_NOT_EXIST",
        "UNEXPECTED_EXCEPTION_URL",
        "SEND_MSG_FAILED",
        "UNKNOWN_HOST_EXCEPTION",
    )
    MORE_INFORMATION = "For more information, please visit the url, "

    @classmethod
    def declared(cls, version: ClientVersion = V4_9_8) -> dict[str, str]:
        """The URL fields of ``version`` (``DEFAULT_FAQ_URL`` exists only after 5.3.3)."""
        names = cls.FIELDS if version.declares_default_faq_url else cls.FIELDS[1:]
        return dict.fromkeys(names, version.faq_url)

    @staticmethod
    def attach_default_url(error_message: str, version: ClientVersion = V4_9_8) -> str:
        """``attachDefaultURL``: the text MQClientException's message ends with."""
        return error_message + "\n" + FAQUrl.MORE_INFORMATION + version.faq_url


# ---------------------------------------------------------------- character rules

# the characters TopicValidator.VALID_CHAR_BIT_MAP (boolean[128]) marks true: ^[%|a-zA-Z0-9_-]+$
VALID_CHARS = "%-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz|"
VALID_CHAR_TABLE: tuple[bool, ...] = tuple(chr(i) in VALID_CHARS for i in range(128))

# Java Character.isWhitespace: Unicode space/line/paragraph separators except the no-break spaces
# (U+00A0, U+2007, U+202F), plus U+0009..U+000D and U+001C..U+001F.
_JAVA_WHITESPACE = frozenset(
    [*range(0x09, 0x0E), *range(0x1C, 0x20), 0x20, 0x1680, *range(0x2000, 0x2007), *range(0x2008, 0x200B)]
    + [0x2028, 0x2029, 0x205F, 0x3000]
)


def java_length(s: str) -> int:
    """Java ``String.length()``: UTF-16 code units (a character above U+FFFF counts twice)."""
    return len(s) + sum(1 for ch in s if ord(ch) > 0xFFFF)


def is_java_whitespace(ch: str) -> bool:
    """Java ``Character.isWhitespace`` for one character."""
    return ord(ch) in _JAVA_WHITESPACE


def is_blank(s: str | None) -> bool:
    """``UtilAll.isBlank``: null, empty, or only Java whitespace."""
    return s is None or all(ord(ch) in _JAVA_WHITESPACE for ch in s)


def is_topic_or_group_illegal(s: str) -> bool:
    """``TopicValidator.isTopicOrGroupIllegal``: a character outside ``[%|a-zA-Z0-9_-]`` ("" is legal)."""
    table = VALID_CHAR_TABLE
    return any(ord(ch) >= 128 or not table[ord(ch)] for ch in s)


def is_system_topic(topic: str, version: ClientVersion = V4_9_8) -> bool:
    """``TopicValidator.isSystemTopic``: a built-in system topic or the ``rmq_sys_`` prefix."""
    return topic in TopicValidator.system_topic_set(version) or topic.startswith(
        TopicValidator.SYSTEM_TOPIC_PREFIX
    )


def is_not_allowed_send_topic(topic: str) -> bool:
    """``TopicValidator.isNotAllowedSendTopic``: the six topics a client may not send to."""
    return topic in TopicValidator.NOT_ALLOWED_SEND_TOPICS


# ---------------------------------------------------------------- Validators

ALLOWED_PATTERN = "^[%|a-zA-Z0-9_-]+$"
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024  # DefaultMQProducer.maxMessageSize
FILE_SEPARATOR = "/"  # java.io.File.separator on the platforms modelled


def _fail(text: str, version: ClientVersion, code: int = -1) -> MQClientError:
    return MQClientError(code, text, version.faq_url)


def check_topic(topic: str | None, version: ClientVersion = V4_9_8) -> str:
    """``Validators.checkTopic``: blank, then longer than 127, then illegal characters; returns the topic."""
    if topic is None or is_blank(topic):
        raise _fail("The specified topic is blank", version)
    if java_length(topic) > Validators.TOPIC_MAX_LENGTH:
        raise _fail(
            f"The specified topic is longer than topic max length {Validators.TOPIC_MAX_LENGTH}.", version
        )
    if is_topic_or_group_illegal(topic):
        raise _fail(
            f"The specified topic[{topic}] contains illegal characters, allowing only {ALLOWED_PATTERN}",
            version,
        )
    return topic


def check_group(group: str | None, version: ClientVersion = V4_9_8) -> str:
    """``Validators.checkGroup``: blank, too long (255; 120 after 5.3.3), illegal characters; returns it."""
    if group is None or is_blank(group):
        raise _fail("the specified group is blank", version)
    limit = version.group_max_length
    if java_length(group) > limit:
        if limit == Validators.GROUP_MAX_LENGTH:
            text = f"the specified group[{group}] is longer than group max length: {limit}."
        else:
            text = f"the specified group is longer than group max length {limit}."
        raise _fail(text, version)
    if is_topic_or_group_illegal(group):
        raise _fail(
            f"the specified group[{group}] contains illegal characters, allowing only {ALLOWED_PATTERN}",
            version,
        )
    return group


def check_send_topic_allowed(topic: str, version: ClientVersion = V4_9_8) -> None:
    """``Validators.isNotAllowedSendTopic``: refuse the topics clients may not send to."""
    if is_not_allowed_send_topic(topic):
        raise _fail(f"Sending message to topic[{topic}] is forbidden.", version)


def check_message(
    topic: str | None,
    body: bytes | bytearray | memoryview | int | None,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    properties: Mapping[str, str] | None = None,
    version: ClientVersion = V4_9_8,
    *,
    message_is_null: bool = False,
) -> None:
    """``Validators.checkMessage`` in upstream's order.

    ``body`` is the body bytes, its length, or None for a null body. Order: null message (13), topic
    (-1), not-allowed topic (-1), null body (13), empty body (13), body longer than ``max_message_size``
    (13; equal is accepted), and in 5.x an ``INNER_MULTI_DISPATCH`` property containing "/" (13).
    """
    illegal = ResponseCode.MESSAGE_ILLEGAL
    if message_is_null:
        raise _fail("the message is null", version, illegal)
    check_send_topic_allowed(check_topic(topic, version), version)
    if body is None:
        raise _fail("the message body is null", version, illegal)
    body_len = body if isinstance(body, int) else len(body)
    if body_len == 0:
        raise _fail("the message body length is zero", version, illegal)
    if body_len > max_message_size:
        raise _fail(f"the message body size over max value, MAX: {max_message_size}", version, illegal)
    if version.checks_inner_multi_dispatch and properties:
        lmq_path = properties.get("INNER_MULTI_DISPATCH")
        if lmq_path is not None and FILE_SEPARATOR in lmq_path:
            raise _fail(
                f"INNER_MULTI_DISPATCH {lmq_path} can not contains {FILE_SEPARATOR} character",
                version,
                illegal,
            )


# ---------------------------------------------------------------- properties size

MAX_PROPERTIES_SIZE = 32767  # Short.MAX_VALUE: the wire length field of the properties is a short


class PropertiesSizeError(EncodeError):
    """4.9's ``RuntimeException`` for properties over 32767 bytes; its text keeps the literal ``{}``s
    (upstream passes SLF4J placeholders to ``String.format``)."""

    TEXT = "Properties size of message exceeded, properties size: {}, maxSize: {}."

    def __init__(self, properties_size: int, max_size: int = MAX_PROPERTIES_SIZE) -> None:
        self.properties_size = properties_size
        self.max_size = max_size
        super().__init__(self.TEXT)


def check_properties_size(properties_size: int, max_size: int = MAX_PROPERTIES_SIZE) -> None:
    """Refuse properties whose encoded UTF-8 length exceeds ``max_size`` (exactly 32767 is accepted).

    4.9's ``encodeMessage`` throws this; 5.x has no client check (the short overflows), and the broker
    refuses such properties; the pipeline rejects them with the 4.9 text in every version.
    """
    if properties_size > max_size:
        raise PropertiesSizeError(properties_size, max_size)
