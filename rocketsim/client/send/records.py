"""What the send loops read and write: the producer settings, an outcome, a call, a send's records."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from rocketsim.client.fault import FaultUpdate
from rocketsim.client.outcomes import (
    CATCH_OF_KIND,
    Catch,
    OutcomeKind,
    is_send_result,
    outcome_label,
    parse_outcome_label,
    send_status,
)
from rocketsim.client.send.errors import Failure, error_label, no_route_error
from rocketsim.client.versions import V4_9_8, ClientVersion
from rocketsim.errors import ConfigError
from rocketsim.format.validate import ResponseCode

# ---- constants ------------------------------------------------------------------------------------

TIMEOUT_OVERSHOOT_MS = 1  # a RemotingTimeoutException is raised once the wait has passed the timeout

_RETRY_CODES_4_9 = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    }
)


def retry_response_codes(version: ClientVersion) -> frozenset[int]:
    """``DefaultMQProducer.retryResponseCodes``: + SYSTEM_BUSY from 5.3.0, + GO_AWAY from 5.3.1."""
    codes = set(_RETRY_CODES_4_9)
    if version.retries_system_busy:
        codes.add(ResponseCode.SYSTEM_BUSY)
    if version.retries_go_away:
        codes.add(ResponseCode.GO_AWAY)
    return frozenset(codes)


# ---- inputs and records -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SendConfig:
    """The producer settings the send loops read (DefaultMQProducer names in snake_case)."""

    version: ClientVersion = V4_9_8
    send_msg_timeout_ms: int = 3000
    retry_times_when_send_failed: int = 2
    retry_times_when_send_async_failed: int = 2
    retry_another_broker_when_not_store_ok: bool = False
    send_msg_max_timeout_per_request_ms: int = -1  # 5.3.3+; -1 = off
    retry_response_codes: frozenset[int] | None = None  # None: the version's default set
    response_scan_offset_ms: int = 0  # the client's start before the schedule's 0 (ResponseScan.for_version)

    def __post_init__(self) -> None:
        if self.retry_times_when_send_failed < 0:
            raise ConfigError(
                f"retry_times_when_send_failed must be >= 0, got {self.retry_times_when_send_failed}"
            )
        if self.retry_times_when_send_async_failed < 0:
            raise ConfigError(
                "retry_times_when_send_async_failed must be >= 0, got "
                f"{self.retry_times_when_send_async_failed}"
            )

    @classmethod
    def from_settings(cls, settings: object) -> SendConfig:
        """From any object with the producer attributes (e.g. ``scenario.ProducerConfig``)."""
        return cls(
            version=settings.version,  # type: ignore[attr-defined]
            send_msg_timeout_ms=settings.send_msg_timeout_ms,  # type: ignore[attr-defined]
            retry_times_when_send_failed=settings.retry_times_when_send_failed,  # type: ignore[attr-defined]
            retry_times_when_send_async_failed=settings.retry_times_when_send_async_failed,  # type: ignore[attr-defined]
            retry_another_broker_when_not_store_ok=settings.retry_another_broker_when_not_store_ok,  # type: ignore[attr-defined]
            send_msg_max_timeout_per_request_ms=getattr(settings, "send_msg_max_timeout_per_request_ms", -1),
            response_scan_offset_ms=getattr(settings, "response_scan_offset_ms", 0),
        )

    @property
    def times_total(self) -> int:
        return 1 + self.retry_times_when_send_failed

    @property
    def retry_codes(self) -> frozenset[int]:
        if self.retry_response_codes is not None:
            return self.retry_response_codes
        return retry_response_codes(self.version)

    @property
    def max_timeout_per_request(self) -> int:
        """The effective cap (-1 = none): the setting exists from 5.3.3 on."""
        if not self.version.has_max_timeout_per_request:
            return -1
        return self.send_msg_max_timeout_per_request_ms


@dataclass(frozen=True)
class Outcome:
    """What one request to a broker came to, and how long the client waited for it.

    ``kind``: the shared :class:`rocketsim.client.outcomes.OutcomeKind` (what the compiled engine keeps as
    an int): SEND_OK, a not-OK store status (no exception), a ``RemotingException`` (connect, timeout,
    send request; ``TOO_MANY_REQUESTS`` is the client's own refusal), ``BROKER_ERROR`` (MQBrokerException
    with ``response_code``), ``CLIENT_ERROR`` (MQClientException, e.g. the broker address is unknown),
    ``INTERRUPTED``. For SYNC the transport decides the latency, including ``min(latency, timeout)`` for
    calls that time out (see :func:`cap_to_timeout`). ``stored``: the broker stored the request
    ``store_ms`` after the call started (a timed-out request may be stored too).
    """

    kind: OutcomeKind
    latency_ms: int
    response_code: int = 0
    remark: str = ""
    stored: bool = False  # the broker stored the request (whatever the client saw), store_ms after start
    store_ms: int = 0
    # a timeout whose answer still comes (its latency from the call's start): what an ASYNC callback gets
    # if it comes before the response-table scan (rocketsim.broker.latency.AttemptOutcome.late_ms)
    late: Outcome | None = None
    # the answer's latency in microseconds before the rounding to whole ms (-1: none, or whole ms): what
    # send_results.latency_us reports beside the whole-ms decisions
    latency_us: int = -1
    # a SYNC request invokeSync's budget check refused after the connect it waited for (nothing written):
    # its RemotingTimeoutException has its own text (errors.invoke_sync_timeout_error)
    budget_check: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", OutcomeKind(self.kind))
        if self.latency_ms < 0:
            raise ConfigError(f"Outcome.latency_ms must be >= 0, got {self.latency_ms}")

    @classmethod
    def ok(cls, latency_ms: int) -> Outcome:
        return cls(OutcomeKind.OK, latency_ms)

    @classmethod
    def not_ok(cls, status: str, latency_ms: int) -> Outcome:
        """A not-OK store status by its ``SendStatus`` name (``FLUSH_DISK_TIMEOUT``, ...)."""
        kind = OutcomeKind[status] if status in OutcomeKind.__members__ else None
        if kind is None or kind == OutcomeKind.OK or not is_send_result(kind):
            raise ConfigError(f"Outcome.not_ok takes a not-OK SendStatus, got {status!r}")
        return cls(kind, latency_ms)

    @classmethod
    def remoting_error(cls, what: str, latency_ms: int) -> Outcome:
        """A ``RemotingException`` by its label's tail (``connect``, ``timeout``, ``send_request``,
        ``too_many_requests``)."""
        return cls.from_label(f"remoting:{what}", latency_ms)

    @classmethod
    def broker_error(cls, response_code: int, latency_ms: int, remark: str = "") -> Outcome:
        return cls(OutcomeKind.BROKER_ERROR, latency_ms, response_code=response_code, remark=remark)

    @classmethod
    def client_error(cls, latency_ms: int) -> Outcome:
        return cls(OutcomeKind.CLIENT_ERROR, latency_ms)

    @classmethod
    def interrupted(cls, latency_ms: int) -> Outcome:
        return cls(OutcomeKind.INTERRUPTED, latency_ms)

    @classmethod
    def from_label(cls, label: str, latency_ms: int) -> Outcome:
        """Parse the vectors' labels: ``ok``, ``status:<SendStatus>``, ``remoting:timeout``, ``broker:2``."""
        try:
            kind, code = parse_outcome_label(label)
        except (KeyError, ValueError):
            raise ConfigError(f"unknown outcome label {label!r}") from None
        return cls(kind, latency_ms, response_code=code)

    @property
    def label(self) -> str:
        return outcome_label(self.kind, self.response_code)

    @property
    def catch(self) -> Catch:
        """The ``catch`` clause of ``sendDefaultImpl`` that sees it (``RESULT``: a SendResult came back)."""
        return CATCH_OF_KIND[self.kind]

    @property
    def is_result(self) -> bool:
        """SEND_OK or a not-OK store status: a SendResult."""
        return is_send_result(self.kind)

    @property
    def is_answer(self) -> bool:
        """The broker answered (a SendResult or a broker error): the client's Netty threads read it."""
        return self.is_result or self.kind == OutcomeKind.BROKER_ERROR

    def failed_by_scan(self, timeout_ms: int) -> Outcome:
        """This answer when the response-table scan failed its request before the client read it
        (``NettyRemotingAbstract.scanResponseTable``; the late read finds no future): :meth:`unread`."""
        return self.unread(timeout_ms)

    def unread(self, timeout_ms: int) -> Outcome:
        """This answer when the client gave its request up before reading it: a timeout after
        ``timeout_ms`` (as the engine makes one), the answer late, the message stored as it was."""
        if self.kind == OutcomeKind.REMOTING_TIMEOUT:
            return self
        wait = max(timeout_ms, 0) + TIMEOUT_OVERSHOOT_MS
        return Outcome(
            OutcomeKind.REMOTING_TIMEOUT, wait, stored=self.stored, store_ms=self.store_ms, late=self
        )

    def read_after(self, read_ms: int, end_ms: int, timeout_ms: int) -> Outcome:
        """This SYNC answer when the client's Netty threads read it ``read_ms`` after the call's start and
        its caller ends ``end_ms`` after it: a ``RemotingTimeoutException`` after ``timeout_ms`` if the read
        (``putResponse``, which counts down the caller's latch) came at or after it, the answer late and the
        message stored as it was (``NettyRemotingAbstract.invokeSyncImpl``: ``waitResponse(timeoutMillis)``
        gave up first); else the answer at ``end_ms``."""
        if read_ms >= max(timeout_ms, 0):
            return self.unread(timeout_ms)
        later_us = self.latency_us + (end_ms - self.latency_ms) * 1000 if self.latency_us >= 0 else -1
        return replace(self, latency_ms=end_ms, latency_us=later_us)

    @property
    def status(self) -> str:
        """The SendResult's ``SendStatus`` name (a result kind only)."""
        return send_status(self.kind)


def cap_to_timeout(outcome: Outcome, timeout_ms: int) -> Outcome:
    """A reply slower than the call's timeout is a ``RemotingTimeoutException`` after exactly the timeout."""
    if outcome.latency_ms > max(timeout_ms, 0):
        return Outcome.remoting_error("timeout", max(timeout_ms, 0))
    return outcome


@dataclass(frozen=True)
class Call:
    """One request the loop wants to make: the transport answers it with an :class:`Outcome`."""

    attempt: int
    broker: str
    queue_id: int
    start_ms: int
    timeout_ms: int
    mode: str = "sync"


Transport = Callable[[int, str, int, int, int], Outcome]  # (attempt, broker, queue_id, start_ms, timeout_ms)


@dataclass(frozen=True)
class AttemptRecord:
    """One attempt: what was selected, sent, answered, and what the fault table was told.

    ``outcome`` is None when nothing was sent (SYNC ``break:callTimeout``); ``end_ms`` is when the loop
    learnt the outcome; ``isolated_until_ms`` is the broker's fault-item start after the update if that
    broker is isolated then (the ``fault_isolated_until_ms`` column).
    """

    index: int
    last_broker: str | None
    reset_index: bool
    start_ms: int
    broker: str
    queue_id: int
    timeout_ms: int | None
    outcome: Outcome | None
    fault_update: FaultUpdate | None
    flow: str
    isolated_until_ms: int | None
    end_ms: int

    @property
    def sent(self) -> bool:
        return self.outcome is not None


@dataclass(frozen=True)
class SendResult:
    """The ``SendResult`` the application gets (SYNC return value, ASYNC ``onSuccess``)."""

    status: str
    broker: str
    queue_id: int
    from_attempt: int


@dataclass(frozen=True)
class SendRecord:
    """A whole send: its attempts and how it ended (``result`` or ``error``; ONEWAY success has neither)."""

    mode: str
    topic: str
    begin_ms: int
    end_ms: int
    attempts: tuple[AttemptRecord, ...]
    result: SendResult | None
    error: Failure | None
    brokers_sent: tuple[str | None, ...]
    dispatch_update: FaultUpdate | None = None  # ASYNC: sendDefaultImpl's own update after dispatching
    exec_ms: int | None = None  # ASYNC: when an async-sender executor thread ran the send
    # ASYNC: the errors of the application's later onException calls (the record's error is the first's):
    # 5.3.0-5.3.1 fail a retry with no time left twice (ClientVersion.fails_late_async_request_twice)
    again: tuple[Failure, ...] = ()

    @property
    def label(self) -> str:
        if self.error is not None:
            return error_label(self.error)
        if self.result is not None:
            return f"returned:{self.result.status}"
        return "returned:none"

    def result_or_raise(self) -> SendResult | None:
        if self.error is not None:
            raise self.error
        return self.result


AttemptHook = Callable[[AttemptRecord], None] | None
RealCost = Callable[[int, int], int] | None  # (attempt, the simulated costTime) -> the real client's


def no_route_record(mode: str, topic: str, now: int, version: ClientVersion) -> SendRecord:
    return SendRecord(mode, topic, now, now, (), None, no_route_error(topic, version), ())
