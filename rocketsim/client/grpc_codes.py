"""The gRPC client family's vocabulary: the Proxy protocol's status codes, what a client makes of a reply,
and the exception each client raises for it.

* :class:`Code`: ``apache.rocketmq.v2.Code`` (rocketmq-apis ``definition.proto``, as shipped in the
  ``rocketmq-python-client`` 5.1.2 wheel's ``definition_pb2``): the status a Proxy answers a
  ``SendMessage`` with.
* :class:`Reply`: what one attempt comes to as the client sees it: a status from the Proxy, or a gRPC
  transport error (``DEADLINE_EXCEEDED`` when the per-attempt deadline passes, ``UNAVAILABLE`` when the
  connection is refused or reset), with its latency.
* :data:`EXCEPTION_OF_CODE`: the exception a client raises for a non-OK status, the same table in Java
  (``StatusChecker.check``, java-5.2.1) and Python (``MessagingResultChecker.check``, 5.1.2), except for
  the rows :data:`PYTHON_EXCEPTION_OVERRIDES` names.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from rocketsim.errors import ConfigError


class Code(IntEnum):
    """``apache.rocketmq.v2.Code`` (the values of ``definition.proto``)."""

    CODE_UNSPECIFIED = 0
    OK = 20000
    MULTIPLE_RESULTS = 30000
    BAD_REQUEST = 40000
    ILLEGAL_ACCESS_POINT = 40001
    ILLEGAL_TOPIC = 40002
    ILLEGAL_CONSUMER_GROUP = 40003
    ILLEGAL_MESSAGE_TAG = 40004
    ILLEGAL_MESSAGE_KEY = 40005
    ILLEGAL_MESSAGE_GROUP = 40006
    ILLEGAL_MESSAGE_PROPERTY_KEY = 40007
    INVALID_TRANSACTION_ID = 40008
    ILLEGAL_MESSAGE_ID = 40009
    ILLEGAL_FILTER_EXPRESSION = 40010
    ILLEGAL_INVISIBLE_TIME = 40011
    ILLEGAL_DELIVERY_TIME = 40012
    INVALID_RECEIPT_HANDLE = 40013
    MESSAGE_PROPERTY_CONFLICT_WITH_TYPE = 40014
    UNRECOGNIZED_CLIENT_TYPE = 40015
    MESSAGE_CORRUPTED = 40016
    CLIENT_ID_REQUIRED = 40017
    ILLEGAL_POLLING_TIME = 40018
    ILLEGAL_OFFSET = 40019
    ILLEGAL_LITE_TOPIC = 40020
    UNAUTHORIZED = 40100
    PAYMENT_REQUIRED = 40200
    FORBIDDEN = 40300
    NOT_FOUND = 40400
    MESSAGE_NOT_FOUND = 40401
    TOPIC_NOT_FOUND = 40402
    CONSUMER_GROUP_NOT_FOUND = 40403
    OFFSET_NOT_FOUND = 40404
    REQUEST_TIMEOUT = 40800
    PAYLOAD_TOO_LARGE = 41300
    MESSAGE_BODY_TOO_LARGE = 41301
    MESSAGE_BODY_EMPTY = 41302
    PRECONDITION_FAILED = 42800
    TOO_MANY_REQUESTS = 42900
    LITE_TOPIC_QUOTA_EXCEEDED = 42901
    LITE_SUBSCRIPTION_QUOTA_EXCEEDED = 42902
    REQUEST_HEADER_FIELDS_TOO_LARGE = 43100
    MESSAGE_PROPERTIES_TOO_LARGE = 43101
    INTERNAL_ERROR = 50000
    INTERNAL_SERVER_ERROR = 50001
    HA_NOT_AVAILABLE = 50002
    NOT_IMPLEMENTED = 50100
    PROXY_TIMEOUT = 50400
    MASTER_PERSISTENCE_TIMEOUT = 50401
    SLAVE_PERSISTENCE_TIMEOUT = 50402
    UNSUPPORTED = 50500
    VERSION_UNSUPPORTED = 50501
    VERIFY_FIFO_MESSAGE_UNSUPPORTED = 50502
    FAILED_TO_CONSUME_MESSAGE = 60000


def code_named(name: str) -> Code:
    """The :class:`Code` called ``name`` (a ``ConfigError`` naming it otherwise)."""
    try:
        return Code[name]
    except KeyError:
        raise ConfigError(f"unknown gRPC status code {name!r}") from None


_BAD_REQUEST = (
    "BAD_REQUEST ILLEGAL_ACCESS_POINT ILLEGAL_TOPIC ILLEGAL_CONSUMER_GROUP ILLEGAL_MESSAGE_TAG "
    "ILLEGAL_MESSAGE_KEY "
    "ILLEGAL_MESSAGE_GROUP ILLEGAL_LITE_TOPIC ILLEGAL_MESSAGE_PROPERTY_KEY INVALID_TRANSACTION_ID "
    "ILLEGAL_MESSAGE_ID ILLEGAL_FILTER_EXPRESSION ILLEGAL_INVISIBLE_TIME ILLEGAL_DELIVERY_TIME "
    "INVALID_RECEIPT_HANDLE MESSAGE_PROPERTY_CONFLICT_WITH_TYPE UNRECOGNIZED_CLIENT_TYPE MESSAGE_CORRUPTED "
    "CLIENT_ID_REQUIRED ILLEGAL_POLLING_TIME"
)
_GROUPS = {
    "BadRequestException": _BAD_REQUEST,
    "UnauthorizedException": "UNAUTHORIZED",
    "PaymentRequiredException": "PAYMENT_REQUIRED",
    "ForbiddenException": "FORBIDDEN",
    "NotFoundException": "MESSAGE_NOT_FOUND NOT_FOUND TOPIC_NOT_FOUND CONSUMER_GROUP_NOT_FOUND",
    "PayloadTooLargeException": "PAYLOAD_TOO_LARGE MESSAGE_BODY_TOO_LARGE",
    "PayloadEmptyException": "MESSAGE_BODY_EMPTY",
    "TooManyRequestsException": "TOO_MANY_REQUESTS",
    "LiteTopicQuotaExceededException": "LITE_TOPIC_QUOTA_EXCEEDED",
    "LiteSubscriptionQuotaExceededException": "LITE_SUBSCRIPTION_QUOTA_EXCEEDED",
    "RequestHeaderFieldsTooLargeException": "REQUEST_HEADER_FIELDS_TOO_LARGE MESSAGE_PROPERTIES_TOO_LARGE",
    "InternalErrorException": "INTERNAL_ERROR INTERNAL_SERVER_ERROR HA_NOT_AVAILABLE",
    "ProxyTimeoutException": "PROXY_TIMEOUT MASTER_PERSISTENCE_TIMEOUT SLAVE_PERSISTENCE_TIMEOUT",
    "UnsupportedException": "UNSUPPORTED VERSION_UNSUPPORTED VERIFY_FIFO_MESSAGE_UNSUPPORTED",
}
# code -> the exception's simple class name; OK and MULTIPLE_RESULTS are no exception, every code not
# listed is UnsupportedException (both checkers' default branch). Java java-5.2.1
# exception/StatusChecker.check: a send's MESSAGE_NOT_FOUND falls through to NotFoundException.
EXCEPTION_OF_CODE: dict[Code, str] = {
    Code[name]: exc for exc, names in _GROUPS.items() for name in names.split()
}
NOT_AN_ERROR = frozenset({Code.OK, Code.MULTIPLE_RESULTS})
# Python 5.1.2 rocketmq/v5/util/messaging_result_checker.py MessagingResultChecker.check: MESSAGE_NOT_FOUND
# returns (no exception; a send then reads its entries), and code 0 ("not status.code") raises
# IllegalStateException('response is illegal.').
PYTHON_NOT_AN_ERROR = NOT_AN_ERROR | {Code.MESSAGE_NOT_FOUND}
PYTHON_ILLEGAL_RESPONSE = "response is illegal."
THROTTLED = "TooManyRequestsException"


def exception_of(code: int, language: str) -> str | None:
    """The simple class name of the exception ``language``'s checker raises for a status ``code`` (None:
    not an error)."""
    ok = PYTHON_NOT_AN_ERROR if language == "python" else NOT_AN_ERROR
    if code in ok:
        return None
    if language == "python" and code == Code.CODE_UNSPECIFIED:
        return "IllegalStateException"
    try:
        return EXCEPTION_OF_CODE.get(Code(code), "UnsupportedException")
    except ValueError:  # a value the protocol does not declare
        return "UnsupportedException"


# ---- what one attempt comes to, as the client sees it -------------------------------------------------

STATUS = "status"  # the Proxy answered with a status (OK or an error code)
GRPC = "grpc"  # the RPC itself failed: a gRPC status (DEADLINE_EXCEEDED, UNAVAILABLE, ...)
DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
UNAVAILABLE = "UNAVAILABLE"


@dataclass(frozen=True)
class Reply:
    """One attempt's answer: ``kind`` ``status`` (``code``, ``message``, ``entries``: the SendResultEntry
    count) or ``grpc`` (``grpc_code``, ``reached``: whether the request got to the Proxy), after
    ``latency_ms``. ``stored`` / ``store_ms``: the broker behind the Proxy stored the message (whatever the
    client saw); ``broker`` / ``queue_id``: the queue the Proxy chose (not the client's pick)."""

    kind: str
    latency_ms: int
    code: int = Code.OK
    message: str = ""
    entries: int = 1
    grpc_code: str = ""
    reached: bool = True
    stored: bool = False
    store_ms: int = 0
    broker: str | None = None
    queue_id: int = -1
    # send_results.latency_us: -1, the whole ms (the Proxy hop is modelled in whole ms only)
    latency_us: int = -1

    @classmethod
    def status(cls, code: int, latency_ms: int, message: str = "", **kw: object) -> Reply:
        return cls(STATUS, latency_ms, code=code, message=message, **kw)  # type: ignore[arg-type]

    @classmethod
    def grpc_error(cls, grpc_code: str, latency_ms: int, *, reached: bool = True, **kw: object) -> Reply:
        return cls(GRPC, latency_ms, grpc_code=grpc_code, reached=reached, **kw)  # type: ignore[arg-type]

    @property
    def ok(self) -> bool:
        return self.kind == STATUS and self.code == Code.OK

    @property
    def code_name(self) -> str:
        """The status code's name (its number if the protocol does not declare it)."""
        try:
            return Code(self.code).name
        except ValueError:
            return str(self.code)

    @property
    def label(self) -> str:
        """The ``outcome`` column's spelling: ``ok`` for an OK status (a receipt: the outcome every table
        reads as answered and stored, as the remoting client's SEND_OK), ``proxy:<Code>`` for the Proxy's
        other statuses, ``grpc:<gRPC status>`` for the RPC's own failure (``grpc:DEADLINE_EXCEEDED``): two
        namespaces, as both have a NOT_FOUND. :data:`rocketsim.tables.summaries.OUTCOME_KINDS` counts
        them."""
        if self.kind != STATUS:
            return f"grpc:{self.grpc_code}"
        return "ok" if self.code == Code.OK else f"proxy:{self.code_name}"
