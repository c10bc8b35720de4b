"""The producer's send loops: SYNC, ASYNC and ONEWAY, as ``DefaultMQProducerImpl`` runs them.

* SYNC transcribes ``sendDefaultImpl``: ``timesTotal = 1 + retryTimesWhenSendFailed`` attempts, the
  ``lastBrokerName`` passed to selection, the call-timeout budget (``costTime = now - beginTimestampFirst;
  if (timeout < costTime) break``), the 5.3.3+ per-request cap ``sendMsgMaxTimeoutPerRequest``, the
  ``updateFaultItem`` call each outcome makes in each line, the retry response codes of each version,
  ``retryAnotherBrokerWhenNotStoreOK`` and the final exceptions.
* ASYNC transcribes ``send(msg, callback, timeout)`` -> ``sendDefaultImpl(ASYNC)`` (one selection) ->
  ``MQClientAPIImpl.sendMessageAsync`` / ``onExceptionImpl``; see :func:`async_send_steps`.
* ONEWAY is ``sendDefaultImpl(ONEWAY)``: one attempt, no response, no retry; see :func:`oneway_send_steps`.

Each loop is a generator that yields a :class:`Call` per request and receives its :class:`Outcome`, so a
simulation can interleave several sender threads (or overlapping async sends) in simulated-time order;
:func:`run_steps` drives one with a transport callable. The clock is simulated ms; the loop advances it
by each outcome's latency and lets the strategy run the 5.x detector ticks that fall due meanwhile.
The ASYNC and ONEWAY loops also yield a :class:`Step` before each selection, fault update and result
(and ASYNC where it waits for a thread of the client's pools, :class:`Pool`): the driver answers with the
time and thread it runs on (:class:`Resume`). The engine runs them at once in simulated-time order; the
conformance replay of the real client's traces runs them in their recorded order.
"""

# Mirrored by engine/compiled.py (start_send, deliver_sync, deliver_oneway, send_default_impl_step: the
# SYNC and ONEWAY loops; async_event, async_call: ASYNC sends, plain and ordered; semaphore_*:
# AsyncSemaphore; scan_fired: ResponseScan); tests/test_engines.py compares them. The updateFaultItem
# calls are rocketsim.client.fault.FAULT_UPDATES, which both read.

from __future__ import annotations

import heapq
from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import ClassVar

from rocketsim.client.fault import FaultStrategy, FaultUpdate, Site, ThreadKey
from rocketsim.client.outcomes import (
    CATCH_OF_KIND,
    ONEWAY_SEES,
    Catch,
    OutcomeKind,
    is_send_result,
    outcome_label,
    parse_outcome_label,
    send_status,
)
from rocketsim.client.route import QueueSlot, TopicPublishInfo
from rocketsim.client.versions import V4_9_8, ClientVersion, RemotingLine
from rocketsim.errors import ConfigError, MQClientError, RocketSimError
from rocketsim.format.validate import ClientErrorCode, ResponseCode
from rocketsim.javaint import java_abs, java_rem

# ---- constants ------------------------------------------------------------------------------------


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


def _tip(version: ClientVersion) -> str:
    """``FAQUrl.suggestTodo(FAQUrl.SEND_MSG_FAILED)``."""
    return f"\nSee {version.faq_url} for further details."


# ---- errors (the Java exceptions a send can end with) ------------------------------------------------


class SendError(RocketSimError):
    """An exception a send ends with; ``java_class`` is upstream's simple class name."""

    java_class: ClassVar[str] = "Exception"
    response_code: int | None = None

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class RemotingConnectError(SendError):
    java_class = "RemotingConnectException"


class RemotingTimeoutError(SendError):
    java_class = "RemotingTimeoutException"


class RemotingSendRequestError(SendError):
    java_class = "RemotingSendRequestException"


class RemotingTooMuchRequestError(SendError):
    java_class = "RemotingTooMuchRequestException"


class SendInterruptedError(SendError):
    java_class = "InterruptedException"


class MQBrokerError(SendError):
    """``MQBrokerException``: the broker answered with an error response code.

    ``MQClientAPIImpl.processSendResponse`` (4.9.8 and 5.3.3) throws ``new MQBrokerException(code, remark,
    addr)``, whose message is ``FAQUrl.attachDefaultURL("CODE: " + code + "  DESC: " + remark + " BROKER: "
    + addr)``: the text, then "\nFor more information, please visit the url, " and the version's
    ``UNEXPECTED_EXCEPTION_URL``. The address here is the broker's name (as in every text of the model).
    """

    java_class = "MQBrokerException"

    def __init__(self, response_code: int, remark: str, broker: str, version: ClientVersion) -> None:
        # 4.3-4.7 processSendResponse: new MQBrokerException(code, remark), no " BROKER: " part
        where = f" BROKER: {broker}" if version.line.broker_error_names_address else ""
        super().__init__(
            f"CODE: {response_code}  DESC: {remark}{where}"
            f"\nFor more information, please visit the url, {version.faq_url}"
        )
        self.response_code = response_code
        self.remark = remark


class ClientError(MQClientError):
    """``new MQClientException(text, cause)``, optionally followed by ``setResponseCode(code)``.

    Upstream's ``FAQUrl.attachDefaultURL`` appends the "For more information" suffix only when the text has
    no "\\nSee <url> for further details." tip of its own, and a later ``setResponseCode`` leaves the
    message as it was (no "CODE: .. DESC:" prefix).
    """

    java_class: ClassVar[str] = "MQClientException"

    def __init__(self, error_message: str, faq_url: str, response_code: int = -1) -> None:
        super().__init__(-1, error_message, faq_url)
        if "\nSee " in error_message:
            self.full_message = error_message
            self.args = (error_message,)
        self.response_code = response_code


class SendFailedError(ClientError):
    """The final "Send [n] times, still failed, ..." exception of ``sendDefaultImpl``; ``cause`` is the simple
    class name of the last exception."""

    def __init__(self, response_code: int, error_message: str, faq_url: str, cause: str | None) -> None:
        super().__init__(error_message, faq_url, response_code)
        self.cause = cause


Failure = SendError | MQClientError


def error_label(err: BaseException) -> str:
    """``thrown:<class>[:<responseCode>]``, the vectors' ``result_counts`` key."""
    cls = getattr(err, "java_class", type(err).__name__)
    code = getattr(err, "response_code", None)
    return f"thrown:{cls}" if code is None else f"thrown:{cls}:{code}"


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

# ---- the client's threads, and the points where a driver interleaves sends ----------------------------


def executor_thread(n: int) -> str:
    """The n-th (1-based) thread of ``DefaultMQProducerImpl``'s async sender executor (its ThreadFactory
    names them ``AsyncSenderExecutor_<n>``)."""
    return f"AsyncSenderExecutor_{n}"


def callback_thread(n: int) -> str:
    """The n-th (1-based) thread of ``NettyRemotingClient``'s public (callback) executor."""
    return f"NettyClientPublicExecutor_{n}"


IO_THREAD = "NettyClientSelector_1"  # the client's one Netty event loop (5.x runs connect listeners on it)


class Action(IntEnum):
    """What a send loop is about to do when it yields a :class:`Step`."""

    EXECUTE = 0  # wait for an async-sender executor thread (``executor.submit``)
    SELECT = 1  # selectOneMessageQueue
    UPDATE = 2  # updateFaultItem
    RESULT = 3  # the application learns the outcome (return, onSuccess, onException)
    CALLBACK = 4  # wait for the request's callback, due at ``at_ms``, on a thread of ``pool``
    SEND = 5  # MQClientAPIImpl.sendMessageAsync begins (its beginStartTime): then a Call, or a refusal


class Pool(IntEnum):
    """The client's thread pools a send waits for (``Step.pool``)."""

    NONE = 0
    EXECUTOR = 1  # DefaultMQProducerImpl's async sender executor
    CALLBACK = 2  # NettyRemotingClient's public executor (InvokeCallback)
    IO = 3  # the Netty event loop (5.x: the connect future's listener)


@dataclass(frozen=True)
class Step:
    """A point where a send loop lets its driver interleave other sends (and, replaying a recording, set
    the clock): the loop is about to do ``action`` at ``at_ms`` on ``thread`` (for EXECUTE / CALLBACK: on
    a thread of ``pool`` the driver chooses). ``source`` names an update's call site (``dispatch``,
    ``callback``, ``sync_failure``, ``oneway``). The driver answers with a :class:`Resume`."""

    action: Action
    at_ms: int
    thread: ThreadKey | None = None
    pool: Pool = Pool.NONE
    source: str = ""


@dataclass(frozen=True)
class Resume:
    """The driver's answer to a :class:`Step`: the time the action runs at and the thread it runs on."""

    now_ms: int
    thread: ThreadKey | None = None
    rejected: bool = False  # EXECUTE: the executor's queue was full (no thread will run the send)


DEFAULT_POOL_THREADS = {
    Pool.EXECUTOR: executor_thread(1),
    Pool.CALLBACK: callback_thread(1),
    Pool.IO: IO_THREAD,
}


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


Steps = Generator[Call | Step, Outcome | Resume, SendRecord]
AttemptHook = Callable[[AttemptRecord], None] | None
RealCost = Callable[[int, int], int] | None  # (attempt, the simulated costTime) -> the real client's


def run_steps(steps: Steps, transport: Transport) -> SendRecord:
    """Drive one send generator to its end alone: each call's outcome from ``transport``, each step at
    its own time, a waited-for pool thread the pool's first (:data:`DEFAULT_POOL_THREADS`)."""
    try:
        item = next(steps)
        while True:
            if isinstance(item, Call):
                item = steps.send(
                    transport(item.attempt, item.broker, item.queue_id, item.start_ms, item.timeout_ms)
                )
            else:
                thread = item.thread if item.pool == Pool.NONE else DEFAULT_POOL_THREADS[item.pool]
                item = steps.send(Resume(item.at_ms, thread))
    except StopIteration as stop:
        return stop.value


def _brokers_text(brokers: list[str | None]) -> str:
    return "[" + ", ".join("null" if b is None else b for b in brokers) + "]"  # Arrays.toString


def no_route_error(topic: str, version: ClientVersion) -> ClientError:
    """``sendDefaultImpl``'s refusal when the topic has no route (or no writable queue)."""
    return ClientError(
        f"No route info of this topic: {topic}{_tip(version)}",
        version.faq_url,
        ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION,
    )


def _no_route(mode: str, topic: str, now: int, version: ClientVersion) -> SendRecord:
    return SendRecord(mode, topic, now, now, (), None, no_route_error(topic, version), ())


def no_route_select(topic: str, version: ClientVersion) -> ClientError:
    """``sendSelectImpl``'s refusal when the topic has no writable queue (selector sends)."""
    return ClientError(f"No route info for this topic, {topic}", version.faq_url)


def oneway_caller_sees(outcome: Outcome, version: ClientVersion) -> bool:
    """Whether a ONEWAY caller sees ``outcome`` (an exception; :data:`rocketsim.client.outcomes.ONEWAY_SEES`):
    anything else reads as written, whatever the broker makes of it."""
    return outcome.kind in ONEWAY_SEES[version.oneway_connects_synchronously]


def remoting_exception(kind: OutcomeKind, broker: str, timeout_ms: int) -> SendError:
    """The ``RemotingException`` of a remoting outcome ``kind``."""
    if kind == OutcomeKind.REMOTING_CONNECT:
        return RemotingConnectError(f"connect to {broker} failed")
    if kind == OutcomeKind.REMOTING_TIMEOUT:
        return RemotingTimeoutError(f"wait response on the channel <{broker}> timeout, {timeout_ms}(ms)")
    if kind == OutcomeKind.REMOTING_SEND_REQUEST:
        return RemotingSendRequestError(f"send request to <{broker}> failed")
    return invoke_too_fast_error()


def _final_code(exc: Failure | None) -> int:
    """The response code ``sendDefaultImpl`` puts on its final MQClientException."""
    if isinstance(exc, MQBrokerError):
        return exc.response_code
    if isinstance(exc, RemotingConnectError):
        return ClientErrorCode.CONNECT_BROKER_EXCEPTION
    if isinstance(exc, RemotingTimeoutError):
        return ClientErrorCode.ACCESS_BROKER_TIMEOUT
    if isinstance(exc, MQClientError):
        return ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION
    return -1  # e.g. RemotingSendRequestException keeps the constructor's -1


def send_failed_error(
    times: int, cost: int, topic: str, brokers: list[str | None], exc: Failure | None, version: ClientVersion
) -> SendFailedError:
    info = (
        f"Send [{times}] times, still failed, cost [{cost}]ms, Topic: {topic}, "
        f"BrokersSent: {_brokers_text(brokers)}"
    ) + _tip(version)
    cause = None if exc is None else getattr(exc, "java_class", type(exc).__name__)
    return SendFailedError(_final_code(exc), info, version.faq_url, cause)


def broker_not_exist_error(broker: str, version: ClientVersion) -> ClientError:
    return ClientError(f"The broker[{broker}] not exist", version.faq_url)


# ---- SYNC ---------------------------------------------------------------------------------------------


def sync_send_steps(
    strategy: FaultStrategy,
    tp: TopicPublishInfo | None,
    cfg: SendConfig,
    topic: str,
    begin_ms: int,
    *,
    thread: ThreadKey = 0,
    on_attempt: AttemptHook = None,
    real_cost: RealCost = None,
) -> Steps:
    """``sendDefaultImpl(SYNC)`` for the strategy's line. ``on_attempt`` sees each attempt as soon as its
    flow is decided, before the next selection (the vectors' ``table`` is taken there). ``real_cost``
    (replay only) gives the ``costTime`` the real client measured before an attempt where its recording
    notes one (its clock also ran while it selected; the simulated client takes no time).

    Each outcome makes the ``updateFaultItem`` call of :data:`rocketsim.client.fault.FAULT_UPDATES`
    (``Site.SEND_DEFAULT_IMPL``, by the clause that catches it).
    """
    version = cfg.version
    timeout = cfg.send_msg_timeout_ms
    if tp is None or not tp.ok():
        return _no_route("sync", topic, begin_ms, version)
    times_total = cfg.times_total
    cap = cfg.max_timeout_per_request
    retry_codes = cfg.retry_codes
    brokers_sent: list[str | None] = [None] * times_total
    attempts: list[AttemptRecord] = []
    mq = None
    exception: Failure | None = None
    send_result: SendResult | None = None
    call_timeout = False
    now = begin_ms

    def done(rec: AttemptRecord) -> None:
        attempts.append(rec)
        if on_attempt is not None:
            on_attempt(rec)

    def record(result: SendResult | None, error: Failure | None) -> SendRecord:
        return SendRecord("sync", topic, begin_ms, now, tuple(attempts), result, error, tuple(brokers_sent))

    times = 0
    while times < times_total:
        last = None if mq is None else mq.broker_name
        reset = strategy.line.resets_index_on_retry and times > 0
        selected = strategy.select_one_message_queue(tp, last, now, reset, thread)
        if selected is None:
            break
        mq = selected
        broker, queue_id = mq.broker_name, mq.queue_id
        brokers_sent[times] = broker
        begin_prev = now
        cost = begin_prev - begin_ms
        if timeout < (cost if real_cost is None else real_cost(times, cost)):
            call_timeout = True
            done(
                AttemptRecord(
                    times,
                    last,
                    reset,
                    begin_prev,
                    broker,
                    queue_id,
                    None,
                    None,
                    None,
                    f"break:callTimeout(costTime={cost})",
                    None,
                    begin_prev,
                )
            )
            break
        cur_timeout = timeout - cost
        if cap > -1 and times + 1 < times_total and cur_timeout > cap:
            cur_timeout = cap  # leave time for another attempt
        outcome = yield Call(times, broker, queue_id, begin_prev, cur_timeout, "sync")
        now = begin_prev + outcome.latency_ms
        strategy.advance_to(now)  # detector ticks that fell due during the call run first
        latency = now - begin_prev
        # upstream reads mq.getBrokerName() again here; a 4.9.7 slot may have been rewritten meanwhile
        target = mq.broker_name
        catch = outcome.catch
        returned = False
        upd = strategy.record_outcome(Site.SEND_DEFAULT_IMPL, catch, target, latency, now)
        if catch == Catch.RESULT:
            send_result = SendResult(outcome.status, broker, queue_id, times)
            if outcome.kind != OutcomeKind.OK and cfg.retry_another_broker_when_not_store_ok:
                flow = "continue:not_SEND_OK"
            else:
                flow, returned = "return", True
        elif catch == Catch.REMOTING:
            exception = remoting_exception(outcome.kind, broker, cur_timeout)
            flow = "continue:RemotingException"
        elif catch == Catch.CLIENT:
            exception = broker_not_exist_error(broker, version)
            flow = "continue:MQClientException"
        elif catch == Catch.BROKER:
            exception = MQBrokerError(outcome.response_code, outcome.remark, broker, version)
            if outcome.response_code in retry_codes:
                flow = "continue:MQBrokerException(retry code)"
            elif send_result is not None:
                flow, returned = "return_earlier_result:MQBrokerException(non-retry code)", True
            else:
                flow = "throw:MQBrokerException(non-retry code)"
        else:  # interrupted
            flow = "throw:InterruptedException"
        done(
            AttemptRecord(
                times,
                last,
                reset,
                begin_prev,
                broker,
                queue_id,
                cur_timeout,
                outcome,
                upd,
                flow,
                strategy.isolated_until(target, now),
                now,
            )
        )
        if returned:
            return record(send_result, None)
        if flow.startswith("throw:MQBroker"):
            return record(None, exception)
        if flow == "throw:InterruptedException":
            return record(None, SendInterruptedError("sleep interrupted"))
        times += 1

    if send_result is not None:
        return record(send_result, None)
    if call_timeout:
        return record(None, RemotingTooMuchRequestError("sendDefaultImpl call timeout"))
    return record(None, send_failed_error(times, now - begin_ms, topic, brokers_sent, exception, version))


def send_sync(
    strategy: FaultStrategy,
    tp: TopicPublishInfo | None,
    cfg: SendConfig,
    topic: str,
    begin_ms: int,
    transport: Transport,
    *,
    thread: ThreadKey = 0,
    on_attempt: AttemptHook = None,
    real_cost: RealCost = None,
) -> SendRecord:
    """One SYNC send, start to end."""
    steps = sync_send_steps(
        strategy, tp, cfg, topic, begin_ms, thread=thread, on_attempt=on_attempt, real_cost=real_cost
    )
    return run_steps(steps, transport)


# ---- ASYNC --------------------------------------------------------------------------------------------

ASYNC_SEMAPHORE_PERMITS = 65535  # NettySystemConfig.CLIENT_ASYNC_SEMAPHORE_VALUE
# 4.3-4.8 onExceptionImpl: a retry that fails to connect isolates the previous broker with latency 3000
RETRY_CONNECT_FAILURE_LATENCY_MS = 3000


class AsyncSemaphore:
    """``NettyRemotingAbstract.semaphoreAsync`` (fair, 65535 permits) in simulated time.

    Each dispatched request holds a permit until its response (or its timeout scan); an acquisition waits
    up to the request's timeout for the earliest release. Acquisitions are served in the order they are
    asked for, which matches upstream's fairness when the driver asks in time order.
    """

    def __init__(self, permits: int = ASYNC_SEMAPHORE_PERMITS) -> None:
        if permits < 1:
            raise ConfigError(f"async_semaphore_permits must be >= 1, got {permits}")
        self.permits = permits
        self._releases: list[int] = []

    def in_flight(self, now: int) -> int:
        while self._releases and self._releases[0] <= now:
            heapq.heappop(self._releases)
        return len(self._releases)

    def try_acquire(self, now: int, wait_ms: int) -> int | None:
        """The time a permit is granted (``now`` if one is free), None if none frees within ``wait_ms``."""
        if self.in_flight(now) < self.permits:
            return now
        if wait_ms > 0 and self._releases[0] <= now + wait_ms:
            return heapq.heappop(self._releases)
        return None

    def hold_until(self, release_ms: int) -> None:
        heapq.heappush(self._releases, release_ms)


@dataclass(frozen=True)
class ResponseScan:
    """``NettyRemotingClient``'s ``scanResponseTable`` timer: first 3 s after start, then every second
    (the client starts at simulated 0).

    An async request that gets no answer is failed by the scan once ``begin + timeout + 1000 <= now``,
    so its callback fires up to two seconds after the timeout (sync calls wait exactly the timeout). An
    answer that arrives before that is taken as any other (``processResponseCommand`` has no timeout
    check): a late success.
    """

    first_ms: int = 3000
    period_ms: int = 1000

    @classmethod
    def for_version(cls, version: ClientVersion) -> ResponseScan:
        """The scan timer of ``version``'s client (4.9.x every 1000 ms from 3000, 5.x every 1100 ms
        from 3100: :attr:`rocketsim.client.versions.ClientVersion.response_scan_first_ms`)."""
        return cls(version.response_scan_first_ms, version.response_scan_period_ms)

    def timeout_fired_ms(self, begin_ms: int, timeout_ms: int) -> int:
        due = begin_ms + timeout_ms + 1000
        if due <= self.first_ms:
            return self.first_ms
        return self.first_ms + -(-(due - self.first_ms) // self.period_ms) * self.period_ms


def wait_response_timeout_text(line: RemotingLine, cost_ms: int, timeout_ms: int) -> str:
    """An ASYNC callback's text when the response-table scan failed its request: 4.9.8
    ``"wait response timeout " + timeoutMillis + "ms"``, 5.3.3 ``"wait response timeout, cost=" + cost``
    (``line.wait_timeout_reports_cost``)."""
    if line.wait_timeout_reports_cost:
        return f"wait response timeout, cost={cost_ms}"
    return f"wait response timeout {timeout_ms}ms"


def executor_rejected_error(version: ClientVersion) -> ClientError:
    """``DefaultMQProducerImpl.send(msg, callback, timeout)`` (and the selector's; rocketmq-all-4.9.8 and
    5.3.3): ``executor.submit`` threw ``RejectedExecutionException`` (its queue, 50,000, full) ->
    ``new MQClientException("executor rejected ", e)``, thrown to the caller: nothing was sent."""
    return ClientError("executor rejected ", version.faq_url)


def async_call_timeout_error(selector: bool) -> RemotingTooMuchRequestError:
    """The async-sender executor's task found no time left (``timeout > costTime`` failed): a selector
    send's ``"call timeout"``, ``sendDefaultImpl``'s ``"DEFAULT ASYNC send call timeout"``."""
    return RemotingTooMuchRequestError("call timeout" if selector else "DEFAULT ASYNC send call timeout")


def invoke_too_fast_error() -> RemotingTooMuchRequestError:
    """``invokeAsyncImpl`` refused a permit with no time to wait for one (``timeoutMillis <= 0``)."""
    return RemotingTooMuchRequestError("invokeAsyncImpl invoke too fast")


def semaphore_timeout_error(timeout_ms: int) -> RemotingTimeoutError:
    """``invokeAsyncImpl``: no permit of the async semaphore came within ``timeout_ms``."""
    return RemotingTimeoutError(
        f"invokeAsyncImpl tryAcquire semaphore timeout, {timeout_ms}ms, "
        "waiting thread nums: 0 semaphoreAsyncValue: 0"
    )


def invoke_async_timeout_error(broker: str, line: RemotingLine) -> RemotingTooMuchRequestError:
    """4.x ``NettyRemotingClient.invokeAsync`` with no time left (``timeoutMillis < costTime``); the text
    names the address from 4.9.3 (the line's ``invoke_async_timeout_names_address``)."""
    if not line.invoke_async_timeout_names_address:
        return RemotingTooMuchRequestError("invokeAsync call timeout")
    return RemotingTooMuchRequestError(f"invokeAsync call the addr[{broker}] timeout")


def async_send_steps(
    strategy: FaultStrategy,
    tp: TopicPublishInfo | None,
    cfg: SendConfig,
    topic: str,
    begin_ms: int,
    *,
    semaphore: AsyncSemaphore | None = None,
    scan: ResponseScan | None = None,
    on_attempt: AttemptHook = None,
    selected: QueueSlot | None = None,
) -> Steps:
    """One ASYNC send from the application's ``send(msg, callback)`` call at ``begin_ms``: the callback's
    outcome and every request made for it.

    Threads (every selection uses the ``ThreadLocalIndex`` of the thread it runs on): the caller only
    submits the send to the async-sender executor (``DefaultMQProducerImpl.send(msg, callback, timeout)``:
    ``executor.submit``; the loop yields ``Step(EXECUTE)`` and the driver answers with the executor thread
    and the time it takes the send, once the thread has done the send's CPU work; or, its queue full,
    ``rejected``: ``send`` throws "executor rejected " and nothing is sent). That thread checks ``timeout
    > costTime`` (else ``RemotingTooMuchRequestException("DEFAULT ASYNC send call timeout")``, a selector
    send's ``"call timeout"``) and runs ``sendDefaultImpl(ASYNC, timeout - costTime)``: the first
    selection, the request, and whatever fails synchronously inside ``sendMessageAsync`` (4.9: a connect
    failure, a refused permit, no budget left), retried at once on the same thread. Callbacks run on the
    callback executor (``Step(CALLBACK)``; 5.x connect failures on the Netty event loop,
    :data:`IO_THREAD`), and a retry's selection runs on the thread that delivered the failure.

    ``selected``: a selector send (``sendSelectImpl(.., ASYNC, ..)``, see :func:`ordered_send_steps`): the
    queue is the selector's, nothing is selected, ``sendSelectImpl`` makes no ``updateFaultItem`` of its own
    (no dispatch update) and ``onExceptionImpl`` gets ``topicPublishInfo = null``: every retry goes to the
    same broker and queue (``retryBrokerName = brokerName``, the request reused).

    Upstream (4.9.8 and 5.3.3 ``MQClientAPIImpl.sendMessageAsync`` / ``onExceptionImpl``):

    * ``sendDefaultImpl(ASYNC)`` selects once (``timesTotal = 1``); after the request is dispatched it calls
      ``updateFaultItem(broker, dispatch time, false[, true])`` -- in 4.9 that overwrites (ends) an
      isolation of that broker; in 5.x it only marks it reachable.
    * A response: ``onSuccess`` then ``updateFaultItem(.., false[, true])``. A broker error response:
      ``updateFaultItem(.., true[, true])`` and **no retry** (``needRetry=false``); the callback gets the
      ``MQBrokerException``. A non-OK store status goes to ``onSuccess``.
    * No response (send failed, timeout, connect failure in 5.x, anything else): ``updateFaultItem(.., true
      [, true])`` and a retry on ``selectOneMessageQueue(tpInfo, failedBroker[, resetIndex=false])`` while
      ``curTimes.incrementAndGet() <= retryTimesWhenSendAsyncFailed`` (5.x also needs time left, and does
      not retry ``RemotingTooMuchRequestException``). The retry's timeout is what is left of the previous.
      It reuses the request (``request.setOpaque(createNewRequestId())``): only the broker changes, the
      queue id stays the first selection's (``mqChosen.getQueueId()`` is not read).
    * 4.9 throws connect failures and semaphore refusals synchronously from ``invokeAsync``; they are caught
      in ``sendMessageAsync`` (``updateFaultItem(.., true)``) and retried at once, still inside
      ``sendDefaultImpl``, whose own ``updateFaultItem(first broker, elapsed, false)`` follows them.
    * A request that gets no answer is failed by the response-table scan (see :class:`ResponseScan`), so a
      retry after it has no budget left: 4.9 still tries and fails at once (``RemotingTooMuchRequestException:
      invokeAsync call the addr[..] timeout``), 5.x does not retry. An answer that comes after the
      timeout but before the scan is taken as any answer (``processResponseCommand`` has no timeout
      check): ``outcome.late``, e.g. a success after 3600 ms, ``updateFaultItem(b, 3600, false)``.
    * The semaphore (65535 permits): ``tryAcquire(timeout)``; refused with ``RemotingTimeoutException
      ("invokeAsyncImpl tryAcquire semaphore timeout, <t>ms, waiting thread nums: <n>
      semaphoreAsyncValue: <p>")``, or ``RemotingTooMuchRequestException("invokeAsyncImpl invoke too
      fast")`` when the timeout is <= 0. Simplification: the permit is taken before the connection check.
    * A ``client`` outcome on the first request is ``sendKernelImpl``'s "broker not exist" (the final
      "Send [1] times" exception, no retry); on a retry it is treated as a synchronous failure. The
      encoding costs no simulated time; the broker address in texts is the broker name.

    Each selection, update and result is announced by a :class:`Step` (the driver answers with the time
    it runs at), so a driver can interleave other sends between them as the real threads do.
    Flows: ``return`` (onSuccess), ``retry``, ``callback:onException``, ``throw:MQClientException``.
    """
    version = cfg.version
    line = strategy.line
    scan = scan if scan is not None else ResponseScan.for_version(version)
    go = yield Step(Action.EXECUTE, begin_ms, pool=Pool.EXECUTOR)
    if go.rejected:  # send() threw it in the caller's thread: no task, no request, no callback
        return SendRecord("async", topic, begin_ms, go.now_ms, (), None, executor_rejected_error(version), ())
    now, thread = go.now_ms, go.thread
    exec_ms = now
    attempts: list[AttemptRecord] = []

    def record(
        end: int,
        result: SendResult | None,
        error: Failure | None,
        sent: tuple[str | None, ...],
        upd: FaultUpdate | None = None,
    ) -> SendRecord:
        return SendRecord("async", topic, begin_ms, end, tuple(attempts), result, error, sent, upd, exec_ms)

    timeout = cfg.send_msg_timeout_ms - (now - begin_ms)  # sendDefaultImpl(.., timeout - costTime)
    if not timeout > 0:  # the executor task's `timeout > costTime` check
        now = (yield Step(Action.RESULT, now, thread)).now_ms
        return record(now, None, async_call_timeout_error(selected is not None), ())
    if selected is None and (tp is None or not tp.ok()):
        now = (yield Step(Action.RESULT, now, thread)).now_ms
        return record(now, None, no_route_error(topic, version), ())
    if selected is None:
        now = (yield Step(Action.SELECT, now, thread)).now_ms
        first = strategy.select_one_message_queue(tp, None, now, False, thread)  # type: ignore[arg-type]
    else:
        first = selected
    if first is None:  # unreachable with a non-empty queue list
        return record(now, None, send_failed_error(0, 0, topic, [None], None, version), (None,))
    brokers_sent: tuple[str | None, ...] = (first.broker_name,)
    select_ms = now  # sendDefaultImpl's beginTimestampPrev
    dispatch_update: FaultUpdate | None = None
    in_sync_part = selected is None  # still inside sendDefaultImpl's sendKernelImpl call (none: no update)
    broker = first.broker_name
    queue_id = first.queue_id  # every retry reuses the request: its queue id too
    req_timeout = timeout
    cur_times = 0  # onExceptionImpl's AtomicInteger
    attempt = 0
    last: str | None = None
    wait_timeout: tuple[int, int] | None = None  # (beginStartTime, timeout) of a scan-failed request

    def done(rec: AttemptRecord) -> None:
        attempts.append(rec)
        if on_attempt is not None:
            on_attempt(rec)

    def attempt_record(
        start: int, call_timeout: int, outcome: Outcome, upd: FaultUpdate | None, flow: str, t: int
    ) -> AttemptRecord:
        iso = strategy.isolated_until(broker, t)
        return AttemptRecord(
            attempt, last, False, start, broker, queue_id, call_timeout, outcome, upd, flow, iso, t
        )

    def end_sync_part(t: int) -> Generator[Step, Resume, None]:
        # sendDefaultImpl's updateFaultItem(mq.getBrokerName(), end - beginTimestampPrev, false[, true])
        nonlocal in_sync_part, dispatch_update
        if in_sync_part:
            in_sync_part = False
            t = (yield Step(Action.UPDATE, t, thread, source="dispatch")).now_ms
            strategy.advance_to(t)
            dispatch_update = strategy.record_outcome(
                Site.SEND_DEFAULT_IMPL, Catch.RESULT, first.broker_name, t - select_ms, t
            )

    while True:
        now = call_begin = (yield Step(Action.SEND, now, thread)).now_ms  # sendMessageAsync's beginStartTime
        refused: Failure | None = None  # the client gave up before sending anything
        wait_timeout = None
        if req_timeout < 0:  # invokeAsync: timeoutMillis < costTime (every line; 5.3.0+ through the future)
            refused = invoke_async_timeout_error(broker, line)
            outcome, start = Outcome.remoting_error("too_many_requests", 0), now
        else:
            grant = now if semaphore is None else semaphore.try_acquire(now, req_timeout)
            if grant is None and req_timeout <= 0:
                refused = invoke_too_fast_error()
                outcome, start = Outcome.remoting_error("too_many_requests", 0), now
            elif grant is None:
                refused = semaphore_timeout_error(req_timeout)
                outcome, start = Outcome.remoting_error("timeout", req_timeout), now
            else:
                start = grant
                outcome = yield Call(attempt, broker, queue_id, grant, req_timeout - (grant - now), "async")
        call_timeout = req_timeout - (start - call_begin)
        kind = outcome.kind

        if kind == OutcomeKind.CLIENT_ERROR and attempt == 0 and refused is None and selected is not None:
            # sendKernelImpl's "The broker[..] not exist" out of sendSelectImpl: onException, no update
            now = (yield Step(Action.RESULT, start + outcome.latency_ms, thread)).now_ms
            done(attempt_record(start, call_timeout, outcome, None, "callback:onException", now))
            return record(now, None, broker_not_exist_error(broker, version), brokers_sent)
        if kind == OutcomeKind.CLIENT_ERROR and attempt == 0 and refused is None:
            # sendKernelImpl: broker address unknown -> MQClientException caught by sendDefaultImpl
            go = yield Step(Action.UPDATE, start + outcome.latency_ms, thread, source="sync_failure")
            now = go.now_ms
            strategy.advance_to(now)
            upd = strategy.record_outcome(
                Site.SEND_DEFAULT_IMPL, Catch.CLIENT, first.broker_name, now - select_ms, now
            )
            done(attempt_record(start, call_timeout, outcome, upd, "throw:MQClientException", now))
            err = send_failed_error(
                1, now - exec_ms, topic, [first.broker_name], broker_not_exist_error(broker, version), version
            )
            now = (yield Step(Action.RESULT, now, thread)).now_ms
            return record(now, None, err, brokers_sent)

        # failures thrown out of invokeAsync, caught by sendMessageAsync's catch block
        thrown: Failure | None = None
        if refused is not None:
            thrown = None if line.remoting_completes_futures else refused
        elif kind == OutcomeKind.CLIENT_ERROR:
            thrown = broker_not_exist_error(broker, version)
        elif not line.remoting_completes_futures and kind == OutcomeKind.REMOTING_CONNECT:
            thrown = RemotingConnectError(f"connect to {broker} failed")
        elif not line.remoting_completes_futures and kind == OutcomeKind.INTERRUPTED:
            thrown = SendInterruptedError("interrupted")

        if thrown is not None and not line.async_catches_invoke_failure and attempt == 0:
            # 4.3-4.8 [AR-1/2]: sendMessageAsync has no catch; the failure leaves sendKernelImpl
            if selected is not None:  # sendSelectImpl throws it: the runnable's onException, no update
                now = (yield Step(Action.RESULT, start + outcome.latency_ms, thread)).now_ms
                done(attempt_record(start, call_timeout, outcome, None, "callback:onException", now))
                return record(now, None, thrown, brokers_sent)
            # sendDefaultImpl's catch: its update, then "Send [1] times" to the runnable's onException
            go = yield Step(Action.UPDATE, start + outcome.latency_ms, thread, source="sync_failure")
            now = go.now_ms
            strategy.advance_to(now)
            upd = strategy.record_outcome(
                Site.SEND_DEFAULT_IMPL, outcome.catch, first.broker_name, now - select_ms, now
            )
            done(attempt_record(start, call_timeout, outcome, upd, f"throw:{thrown.java_class}", now))
            err = send_failed_error(1, now - exec_ms, topic, [first.broker_name], thrown, version)
            now = (yield Step(Action.RESULT, now, thread)).now_ms
            return record(now, None, err, brokers_sent)
        if thrown is not None and not line.async_catches_invoke_failure:
            # 4.3-4.8 onExceptionImpl's own catch around a retry: a RemotingException (not "too much
            # request") isolates the broker that failed before (updateFaultItem(brokerName, 3000, true))
            # and retries; RemotingTooMuchRequestException and InterruptedException end the send
            now = start + outcome.latency_ms
            upd, error = None, thrown
            need_retry = not isinstance(
                thrown, RemotingTooMuchRequestError | SendInterruptedError | ClientError
            )
            if need_retry:
                now = (yield Step(Action.UPDATE, now, thread, source="sync_failure")).now_ms
                strategy.advance_to(now)
                upd = strategy.update_fault_item(last, RETRY_CONNECT_FAILURE_LATENCY_MS, True, now)  # type: ignore[arg-type]
        elif thrown is not None:
            go = yield Step(Action.UPDATE, start + outcome.latency_ms, thread, source="sync_failure")
            now = go.now_ms
            strategy.advance_to(now)
            upd = strategy.record_outcome(
                Site.SEND_MESSAGE_ASYNC_CATCH, outcome.catch, broker, now - call_begin, now
            )
            error, need_retry = thrown, True
        else:
            yield from end_sync_part(start)  # dispatched: sendKernelImpl returned; the rest is a callback
            if refused is None and kind == OutcomeKind.REMOTING_TIMEOUT:
                fired = scan.timeout_fired_ms(start, call_timeout)
                late = outcome.late
                if late is not None and start + late.latency_ms < fired:  # answered before the scan
                    outcome = replace(late, stored=outcome.stored, store_ms=outcome.store_ms)
                    kind = outcome.kind
                    fired = start + late.latency_ms
            else:
                fired = start + outcome.latency_ms
            if semaphore is not None and refused is None:
                semaphore.hold_until(fired)
            connect_listener = line.remoting_completes_futures and kind == OutcomeKind.REMOTING_CONNECT
            go = yield Step(Action.CALLBACK, fired, pool=Pool.IO if connect_listener else Pool.CALLBACK)
            now, thread = go.now_ms, go.thread
            strategy.advance_to(now)
            if outcome.is_result:
                now = (yield Step(Action.RESULT, now, thread)).now_ms  # onSuccess, then the update
                end = now
                now = (yield Step(Action.UPDATE, now, thread, source="callback")).now_ms
                # 4.9 measures from the ResponseFuture (after the permit), 5.x from sendMessageAsync's start
                lat = now - (call_begin if line.async_latency_from_call_begin else start)
                upd = strategy.record_outcome(Site.ASYNC_CALLBACK, Catch.RESULT, broker, lat, now)
                done(attempt_record(start, call_timeout, outcome, upd, "return", end))
                result = SendResult(outcome.status, broker, queue_id, attempt)
                return record(end, result, None, brokers_sent, dispatch_update)
            now = (yield Step(Action.UPDATE, now, thread, source="callback")).now_ms
            lat = now - (call_begin if line.async_latency_from_call_begin else start)
            upd = strategy.record_outcome(Site.ASYNC_CALLBACK, outcome.catch, broker, lat, now)
            if kind == OutcomeKind.BROKER_ERROR:
                error = MQBrokerError(outcome.response_code, outcome.remark, broker, version)
                need_retry = False
            elif kind == OutcomeKind.REMOTING_SEND_REQUEST:
                error, need_retry = ClientError("send request failed", version.faq_url), True
            elif kind == OutcomeKind.REMOTING_TIMEOUT:  # its text: at the result
                error, need_retry = ClientError("wait response timeout", version.faq_url), True
                wait_timeout = (call_begin, call_timeout)
            else:  # 5.x connect failure, interrupt, "invoke too fast": operationFail's last branch
                error = ClientError(line.unknown_reason_text, version.faq_url)
                need_retry = not isinstance(refused, RemotingTooMuchRequestError)

        # onExceptionImpl
        cur_times += 1
        remaining = req_timeout - (now - call_begin)
        budget_ok = remaining > 0 or not line.async_retry_needs_budget
        if need_retry and cur_times <= cfg.retry_times_when_send_async_failed and budget_ok:
            done(attempt_record(start, call_timeout, outcome, upd, "retry", now))
            last = broker
            if selected is None:  # onExceptionImpl selects again (a selector send keeps its broker)
                now = (yield Step(Action.SELECT, now, thread)).now_ms
                again = strategy.select_one_message_queue(tp, broker, now, False, thread)  # type: ignore[arg-type]
                if again is not None:
                    broker = again.broker_name
            # 4.3-4.6 [AR-1]: the retry is sent with timeoutMillis 0 (reaped by the next response scan)
            req_timeout = remaining if line.async_retry_gets_budget else 0
            attempt += 1
            continue
        done(attempt_record(start, call_timeout, outcome, upd, "callback:onException", now))
        end = now = (yield Step(Action.RESULT, now, thread)).now_ms
        if wait_timeout is not None:
            # "wait response timeout " + timeoutMillis + "ms" (4.9) / ", cost=" + (now - beginStartTime)
            text = wait_response_timeout_text(line, now - wait_timeout[0], wait_timeout[1])
            error = ClientError(text, version.faq_url)
        # a chain that failed synchronously returns to sendDefaultImpl only now
        yield from end_sync_part(now)
        return record(end, None, error, brokers_sent, dispatch_update)


def send_async(
    strategy: FaultStrategy,
    tp: TopicPublishInfo | None,
    cfg: SendConfig,
    topic: str,
    begin_ms: int,
    transport: Transport,
    *,
    semaphore: AsyncSemaphore | None = None,
    scan: ResponseScan | None = None,
    on_attempt: AttemptHook = None,
) -> SendRecord:
    """One ASYNC send, its retries run as its responses arrive, on the pools' first threads."""
    return run_steps(
        async_send_steps(
            strategy, tp, cfg, topic, begin_ms, semaphore=semaphore, scan=scan, on_attempt=on_attempt
        ),
        transport,
    )


# ---- selector sends -------------------------------------------------------------------------------------


def ordered_send_steps(
    strategy: FaultStrategy,
    tp: TopicPublishInfo | None,
    cfg: SendConfig,
    topic: str,
    begin_ms: int,
    order_hash: int,
    mode: str,
    *,
    scan: ResponseScan | None = None,
    on_attempt: AttemptHook = None,
) -> Steps:
    """``send(msg, selector, arg[, callback])`` / ``sendOneway(msg, selector, arg)`` with
    ``SelectMessageQueueByHash`` (``Math.abs(arg.hashCode() % mqs.size())``) over the cached queue list.

    ``DefaultMQProducerImpl.sendSelectImpl`` (4.9.8 and 5.3.3) selects once and calls ``sendKernelImpl``
    with ``topicPublishInfo = null``; it never calls ``updateFaultItem``. The queue is read once, when it is
    chosen (``sendKernelImpl`` takes its broker and id before the call), so a concurrent 4.9.7 rewrite of
    the slot does not move this send. Per mode:

    * ``sync``: one attempt, no fault update; an error is thrown as it is (``RemotingException``,
      ``MQBrokerException``, ``MQClientException("The broker[..] not exist")``), not wrapped;
    * ``async``: ``sendMessageAsync`` with ``retryTimesWhenSendAsyncFailed``: every callback updates the
      fault table as for any ASYNC send, and ``onExceptionImpl`` retries the same broker and queue
      (:func:`async_send_steps` with ``selected``); no async semaphore here (an approximation: the send
      takes no permit);
    * ``oneway``: ``invokeOneway``: the caller returns once the request is written (status ONEWAY_SENT, no
      fault update); it sees only what :func:`oneway_caller_sees` says, thrown raw (4.9.x: the connect
      failure, after the connect's latency).

    No writable queue: ``MQClientException("No route info for this topic, <t>")``.
    """
    version = cfg.version
    queues = tp.message_queue_list if tp is not None else []
    if not queues:
        return SendRecord(mode, topic, begin_ms, begin_ms, (), None, no_route_select(topic, version), ())
    slot = queues[java_abs(java_rem(order_hash, len(queues)))]
    broker, queue_id = slot.broker_name, slot.queue_id
    if mode == "async":
        chosen = QueueSlot(slot.topic, broker, queue_id)  # the request keeps it: a rewrite does not move it
        return (
            yield from async_send_steps(
                strategy, tp, cfg, topic, begin_ms, scan=scan, on_attempt=on_attempt, selected=chosen
            )
        )
    timeout = cfg.send_msg_timeout_ms
    outcome = yield Call(0, broker, queue_id, begin_ms, timeout, mode)
    visible = mode != "oneway" or oneway_caller_sees(outcome, version)
    end = begin_ms + (outcome.latency_ms if visible else 0)
    strategy.advance_to(end)
    rec = AttemptRecord(
        0,
        None,
        False,
        begin_ms,
        broker,
        queue_id,
        timeout,
        outcome,
        None,
        "return",
        strategy.isolated_until(broker, end),
        end,
    )
    if on_attempt is not None:
        on_attempt(rec)
    error: Failure | None = None
    result = None
    if not visible:
        pass  # written: no result, nothing more is known
    elif outcome.catch == Catch.RESULT:
        result = SendResult(outcome.status, broker, queue_id, 0)
    elif outcome.catch == Catch.REMOTING:
        error = remoting_exception(outcome.kind, broker, timeout)
    elif outcome.catch == Catch.BROKER:
        error = MQBrokerError(outcome.response_code, outcome.remark, broker, version)
    elif outcome.catch == Catch.CLIENT:
        error = broker_not_exist_error(broker, version)
    else:
        error = SendInterruptedError("interrupted")
    return SendRecord(mode, topic, begin_ms, end, (rec,), result, error, (broker,))


# ---- ONEWAY -------------------------------------------------------------------------------------------


def oneway_send_steps(
    strategy: FaultStrategy,
    tp: TopicPublishInfo | None,
    cfg: SendConfig,
    topic: str,
    begin_ms: int,
    *,
    thread: ThreadKey = 0,
    on_attempt: AttemptHook = None,
) -> Steps:
    """``sendDefaultImpl(ONEWAY)``: one attempt, no retry, no result.

    The client waits only for the request to be written, so whatever the broker does (store, error,
    hang) it costs no simulated time and reads as success (``updateFaultItem(broker, 0, false[, true])``).
    What the caller sees is :func:`oneway_caller_sees`: 4.9.x connects in the caller's thread (a connect
    failure after its latency, then "Send [1] times, still failed", updates as in SYNC), a client error
    ("Send [1] times" too) and an interrupt (``InterruptedException``); 5.x only the client error: its
    ``invokeOneway`` connects and writes in a listener that drops a failed request silently, so a dead
    broker reads as a request written at once, ``updateFaultItem(broker, 0, false, true)``.
    """
    version = cfg.version
    if tp is None or not tp.ok():
        return _no_route("oneway", topic, begin_ms, version)
    now = (yield Step(Action.SELECT, begin_ms, thread)).now_ms
    mq = strategy.select_one_message_queue(tp, None, now, False, thread)
    if mq is None:
        return SendRecord(
            "oneway",
            topic,
            now,
            now,
            (),
            None,
            send_failed_error(0, 0, topic, [None], None, version),
            (None,),
        )
    broker, queue_id = mq.broker_name, mq.queue_id
    start = now  # beginTimestampPrev
    outcome = yield Call(0, broker, queue_id, start, cfg.send_msg_timeout_ms, "oneway")
    kind = outcome.kind
    failed = oneway_caller_sees(outcome, version)
    go = yield Step(Action.UPDATE, start + (outcome.latency_ms if failed else 0), thread, source="oneway")
    now = go.now_ms
    strategy.advance_to(now)
    latency = now - start
    error: Failure | None = None
    # a request that was written reads as sent, whatever the broker makes of it
    catch = outcome.catch if failed else Catch.RESULT
    upd = strategy.record_outcome(Site.SEND_DEFAULT_IMPL, catch, mq.broker_name, latency, now)
    if not failed:
        flow = "return"
    elif outcome.catch == Catch.REMOTING:
        exc: Failure = remoting_exception(kind, broker, cfg.send_msg_timeout_ms)
        error, flow = (
            send_failed_error(1, latency, topic, [broker], exc, version),
            "continue:RemotingException",
        )
    elif kind == OutcomeKind.CLIENT_ERROR:
        exc = broker_not_exist_error(broker, version)
        error, flow = (
            send_failed_error(1, latency, topic, [broker], exc, version),
            "continue:MQClientException",
        )
    else:
        error, flow = SendInterruptedError("interrupted"), "throw:InterruptedException"
    rec = AttemptRecord(
        0,
        None,
        False,
        start,
        broker,
        queue_id,
        cfg.send_msg_timeout_ms,
        outcome,
        upd,
        flow,
        strategy.isolated_until(mq.broker_name, now),  # the broker the update went to (re-read, as upstream)
        now,
    )
    if on_attempt is not None:
        on_attempt(rec)
    now = (yield Step(Action.RESULT, now, thread)).now_ms
    return SendRecord("oneway", topic, begin_ms, now, (rec,), None, error, (broker,))


def send_oneway(
    strategy: FaultStrategy,
    tp: TopicPublishInfo | None,
    cfg: SendConfig,
    topic: str,
    begin_ms: int,
    transport: Transport,
    *,
    thread: ThreadKey = 0,
    on_attempt: AttemptHook = None,
) -> SendRecord:
    """One ONEWAY send."""
    return run_steps(
        oneway_send_steps(strategy, tp, cfg, topic, begin_ms, thread=thread, on_attempt=on_attempt), transport
    )
