"""The Java exceptions a send can end with, and the texts upstream gives them."""

from __future__ import annotations

from typing import ClassVar

from rocketsim.client.outcomes import OutcomeKind
from rocketsim.client.versions import ClientVersion, RemotingLine
from rocketsim.errors import MQClientError, RocketSimError
from rocketsim.format.validate import ClientErrorCode


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


def _brokers_text(brokers: list[str | None]) -> str:
    return "[" + ", ".join("null" if b is None else b for b in brokers) + "]"  # Arrays.toString


def no_route_error(topic: str, version: ClientVersion) -> ClientError:
    """``sendDefaultImpl``'s refusal when the topic has no route (or no writable queue)."""
    return ClientError(
        f"No route info of this topic: {topic}{_tip(version)}",
        version.faq_url,
        ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION,
    )


def no_route_select(topic: str, version: ClientVersion) -> ClientError:
    """``sendSelectImpl``'s refusal when the topic has no writable queue (selector sends)."""
    return ClientError(f"No route info for this topic, {topic}", version.faq_url)


def remoting_exception(kind: OutcomeKind, broker: str, timeout_ms: int) -> SendError:
    """The ``RemotingException`` of a remoting outcome ``kind``."""
    if kind == OutcomeKind.REMOTING_CONNECT:
        return RemotingConnectError(f"connect to {broker} failed")
    if kind == OutcomeKind.REMOTING_TIMEOUT:
        return RemotingTimeoutError(f"wait response on the channel <{broker}> timeout, {timeout_ms}(ms)")
    if kind == OutcomeKind.REMOTING_SEND_REQUEST:
        return RemotingSendRequestError(f"send request to <{broker}> failed")
    return invoke_too_fast_error()


def sync_remoting_exception(
    kind: OutcomeKind, broker: str, timeout_ms: int, line: RemotingLine, budget_check: bool
) -> SendError:
    """The ``RemotingException`` of a SYNC request's remoting outcome ``kind``: invokeSync's budget check's
    own (``budget_check``: refused before its write, :func:`invoke_sync_timeout_error`), else
    :func:`remoting_exception`."""
    if budget_check:
        return invoke_sync_timeout_error(broker, line)
    return remoting_exception(kind, broker, timeout_ms)


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
    names the address from 4.9.3 (the line's ``invoke_timeout_names_address``)."""
    if not line.invoke_timeout_names_address:
        return RemotingTooMuchRequestError("invokeAsync call timeout")
    return RemotingTooMuchRequestError(f"invokeAsync call the addr[{broker}] timeout")


def invoke_sync_timeout_error(broker: str, line: RemotingLine) -> RemotingTimeoutError:
    """``NettyRemotingClient.invokeSync``'s budget check after ``getAndCreateChannel`` (4.x ``timeoutMillis <
    costTime``, 5.1.4+ ``left <= 0``): the wait for the channel's connect used up the request's timeout,
    nothing was written. The text names the address from 4.9.3 (``invokeSync call the addr[..] timeout``;
    the line's ``invoke_timeout_names_address``); before: ``invokeSync call timeout``."""
    if not line.invoke_timeout_names_address:
        return RemotingTimeoutError("invokeSync call timeout")
    return RemotingTimeoutError(f"invokeSync call the addr[{broker}] timeout")
