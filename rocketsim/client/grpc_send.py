"""The gRPC client family's send: one loop, the clients' differences as the hooks of their row
(:class:`rocketsim.client.grpc_versions.GrpcClient`).

Per send (Java ``JC/impl/producer/ProducerImpl.send`` / ``send0``, java-5.2.1; Python
``PY/producer/producer.py`` ``Producer.send`` / ``__send`` / ``__handle_send_response_sync`` /
``__check_send_retry_condition``, 5.1.2):

More: docs/reference/modules.md, rocketsim/client/grpc_send.py.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field

from rocketsim.client.grpc_balance import GrpcQueue, JavaBalancer, PythonSelector
from rocketsim.client.grpc_codes import GRPC, THROTTLED, Code, Reply, exception_of
from rocketsim.client.grpc_versions import BACKOFF, JAVA, PYTHON, GrpcClient
from rocketsim.client.send import Call, SendResult
from rocketsim.errors import RocketSimError

NORMAL, FIFO, DELAY, TRANSACTION = "NORMAL", "FIFO", "DELAY", "TRANSACTION"
PYTHON_PRODUCER = "PRODUCER client_id:<client_id>"  # PY Producer.__str__, the client id masked


@dataclass(frozen=True)
class GrpcCall(Call):
    """One RPC: the queue the client picked (``broker``, ``queue_id``) and the ``endpoint`` it names."""

    endpoint: str = ""


@dataclass(frozen=True)
class GrpcSettings:
    """What a producer's send path reads: its request timeout, the effective ``maxAttempts``, the retry
    policy's delay before attempt n (Java's throttled retries), the pushed ``publishing`` settings."""

    request_timeout_ms: int = 3000
    max_attempts: int = 3
    backoff_ms: Callable[[int], int] = field(default=lambda attempt: 0)
    validate_message_type: bool = True
    max_body_size: int = 4 * 1024 * 1024


class GrpcFailure(RocketSimError):
    """The exception a gRPC send ends with: ``java_class`` its simple class name (the ``error`` column's
    prefix), the status ``code`` or the transport's ``grpc_code``, and its text."""

    def __init__(self, cls: str, text: str, code: int | None = None, grpc_code: str | None = None) -> None:
        super().__init__(text)
        self.java_class = cls
        self.text = text
        self.code = code
        self.grpc_code = grpc_code


def failure_of(reply: Reply, language: str) -> GrpcFailure | None:
    """The exception ``language``'s client makes of ``reply`` (None: the send succeeded).

    Python ``ClientException.__str__``: ``"<code>, <message>"``; a transport error is grpc's own
    ``AioRpcError``. Java ``ClientException(code, requestId, message)``: ``"[request-id=<id>,
    response-code=<code>] <message>"`` (the request id is a random id the model leaves out); a transport
    error is grpc-java's ``StatusRuntimeException``, thrown as is (``ClientImpl.handleClientFuture``)."""
    if reply.kind == GRPC:
        if language == PYTHON:
            return GrpcFailure("AioRpcError", f"StatusCode.{reply.grpc_code}", grpc_code=reply.grpc_code)
        return GrpcFailure("StatusRuntimeException", reply.grpc_code, grpc_code=reply.grpc_code)
    cls = exception_of(reply.code, language)
    if cls is None:
        if reply.entries == 1:
            return None
        if language == PYTHON:  # Producer.__handle_send_result: assert len(entries) == 1
            return GrpcFailure(  # ..., {self}: the producer's str, its client id masked as in the vectors
                "AssertionError",
                f"entries size error, the send response entries size is {reply.entries}, {PYTHON_PRODUCER}",
            )
        return GrpcFailure(  # ProducerImpl.send0 onSuccess: receipts != messages, no retry
            "InternalErrorException",
            "[Bug] due to an unknown reason from remote, received send receipt's quantity "
            f"{reply.entries} is not equal to sent message's quantity 1",
        )
    if cls == "IllegalStateException":
        return GrpcFailure(cls, "response is illegal.")
    text = (
        f"{reply.code}, {reply.message}"
        if language == PYTHON
        else f"[response-code={reply.code}] {reply.message}"
    )
    return GrpcFailure(cls, text, code=reply.code)


def no_route_failure(topic: str, language: str) -> GrpcFailure:
    """A topic the Proxy has no route for (TOPIC_NOT_FOUND at QueryRoute): Python's
    ``Exception('failed to fetch topic:<topic> route.')`` (G24); Java's ``NotFoundException`` from
    ``StatusChecker`` of the QueryRoute answer (read, not run)."""
    if language == PYTHON:
        return GrpcFailure("Exception", f"failed to fetch topic:{topic} route.")
    return GrpcFailure("NotFoundException", f"[response-code={int(Code.TOPIC_NOT_FOUND)}] topic not found")


def type_mismatch(topic: str, message_type: str, queue: GrpcQueue, language: str) -> GrpcFailure:
    """The message type check's refusal (PY Producer.send; JC ProducerImpl.send0)."""
    if language == PYTHON:
        return GrpcFailure(
            "IllegalArgumentException",
            f"current message type not match with queue accept message types, topic:{topic}, message_type:"
            f"{message_type}, queue access type:{','.join(queue.accept)}",
        )
    return GrpcFailure(
        "IllegalArgumentException",
        f"Current message type not match with topic accept message types, topic={topic}, actualMessageType="
        f"{message_type}, acceptMessageTypes=[{', '.join(queue.accept)}]",
    )


def body_too_large(max_body_size: int, language: str) -> GrpcFailure:
    """The body check against the pushed ``max_body_size`` (PY Producer.__send_req, before each RPC; JC
    PublishingMessageImpl, before any pick: an IOException the send wraps)."""
    text = f"Message body size exceeds the threshold, max size={max_body_size} bytes"
    return GrpcFailure("IllegalArgumentException" if language == PYTHON else "IOException", text)


# ---- the producer's state and the records ---------------------------------------------------------------


class ProducerState:
    """One gRPC producer instance: its client row, a balancer per topic (created on the topic's first
    send from ``start_of(topic)``, the random start), and the Java client's isolated endpoints."""

    def __init__(
        self,
        client: GrpcClient,
        start_of: Callable[[str], int],
        rejoin_at: Callable[[str, int], int | None] | None = None,
    ) -> None:
        self.client = client
        self.start_of = start_of
        self.rejoin_at = rejoin_at  # when a heartbeat will find an endpoint answering (None: unknown)
        self.balancers: dict[str, PythonSelector | JavaBalancer] = {}
        self._routes: dict[str, Sequence[GrpcQueue]] = {}
        self.isolated: set[str] = set()

    def balancer(self, topic: str, route: Sequence[GrpcQueue]) -> PythonSelector | JavaBalancer:
        """The topic's balancer over ``route`` (a route update keeps its index)."""
        b = self.balancers.get(topic)
        if b is None:
            kind = JavaBalancer if self.client.language == JAVA else PythonSelector
            b = self.balancers[topic] = kind(route, self.start_of(topic))
        elif route is not self._routes[topic] and list(route) != list(self._routes[topic]):
            b.update(route)
        self._routes[topic] = route
        return b

    def on_failure(self, endpoint: str, now: int) -> int | None:
        """A failed attempt: the Java client isolates its endpoints (``ProducerImpl.isolate``). Returns
        until when, if ``rejoin_at`` knows (the ``fault_isolated_until_ms`` column)."""
        if not self.client.isolates_endpoints:
            return None
        self.isolated.add(endpoint)
        return None if self.rejoin_at is None else self.rejoin_at(endpoint, now)

    def rejoin(self, endpoint: str) -> None:
        """A heartbeat to ``endpoint`` answered OK (``ClientImpl.doHeartbeat``: ``isolated.remove``)."""
        self.isolated.discard(endpoint)


@dataclass(frozen=True)
class Pick:
    """One queue pick: ``rr`` (``index``: the round robin's value used) or ``hash`` (``index``: the bucket),
    or ``candidates`` (Java: the start index of ``takeMessageQueues``), and the queue."""

    by: str
    index: int
    queue: GrpcQueue


@dataclass(frozen=True)
class GrpcAttempt:
    """One RPC and what it came to (``outcome``: the reply); ``broker`` / ``queue_id``: where the message
    went (the Proxy's choice when it made one, else the client's pick)."""

    index: int
    start_ms: int
    end_ms: int
    endpoint: str
    pick: GrpcQueue
    outcome: Reply
    flow: str
    broker: str
    queue_id: int
    isolated_until_ms: int | None = None
    timeout_ms: int = 0


@dataclass(frozen=True)
class GrpcSendRecord:
    """A whole send: its picks, attempts and how it ended (``result`` or ``error``)."""

    mode: str
    topic: str
    begin_ms: int
    end_ms: int
    picks: tuple[Pick, ...]
    attempts: tuple[GrpcAttempt, ...]
    result: SendResult | None
    error: GrpcFailure | None
    exec_ms: int | None = None

    @property
    def endpoint(self) -> str | None:
        """The endpoint of the attempt that succeeded (where EndTransaction goes)."""
        return self.attempts[-1].endpoint if self.result is not None else None


GrpcSteps = Generator[GrpcCall, Reply, GrpcSendRecord]


RECEIPTS_MISMATCH = "throw:receipts"  # Java: OK but not one receipt per message, no retry, no isolation
BACKOFF_FLOW = "retry:backoff"


def _flow_after(
    failure: GrpcFailure | None, reply: Reply, n: int, max_attempts: int, client: GrpcClient
) -> str:
    """What the send does after attempt ``n``: ``return``, ``throw:<why>``, ``retry`` (at once) or
    ``retry:backoff`` (a throttled Java attempt: after the retry policy's delay)."""
    if failure is None:
        return "return"
    if client.language == JAVA and reply.kind != GRPC and exception_of(reply.code, JAVA) is None:
        return RECEIPTS_MISMATCH
    if n >= max_attempts:
        return "throw:max_attempts"
    if failure.java_class == THROTTLED:
        return BACKOFF_FLOW if client.throttled == BACKOFF else "throw:TooManyRequests"
    return "retry"


def _queue_picker(
    state: ProducerState, balancer: PythonSelector | JavaBalancer, group: str | None, max_attempts: int
) -> Callable[[int], Pick]:
    """Attempt n (1-based) -> its pick: the row's selection hook."""
    if state.client.picks_per_attempt:
        assert isinstance(balancer, PythonSelector)

        def per_attempt(n: int) -> Pick:
            if group is not None:
                return Pick("hash", *balancer.by_group(group))
            return Pick("rr", *balancer.next_queue())

        return per_attempt
    assert isinstance(balancer, JavaBalancer)
    if group is not None:
        fixed = Pick("hash", *balancer.by_group(group))
        return lambda n: fixed
    start, candidates = balancer.take_queues(frozenset(state.isolated), max_attempts)
    picks = [Pick("candidates", start, q) for q in candidates]
    return lambda n: picks[(n - 1) % len(picks)]


def grpc_send_steps(
    state: ProducerState,
    route: Sequence[GrpcQueue] | None,
    settings: GrpcSettings,
    topic: str,
    begin_ms: int,
    *,
    message_type: str = NORMAL,
    group: str | None = None,
    body_size: int = 1,
    mode: str = "sync",
) -> GrpcSteps:
    """One send of ``state``'s client; see the module doc for the steps."""
    client, language = state.client, state.client.language
    picks: list[Pick] = []
    attempts: list[GrpcAttempt] = []
    now = begin_ms

    def end(result: SendResult | None, error: GrpcFailure | None) -> GrpcSendRecord:
        return GrpcSendRecord(mode, topic, begin_ms, now, tuple(picks), tuple(attempts), result, error)

    if not route:
        return end(None, no_route_failure(topic, language))
    if language == JAVA and body_size > settings.max_body_size:
        return end(None, body_too_large(settings.max_body_size, language))
    balancer = state.balancer(topic, route)
    pick_for = _queue_picker(state, balancer, group, settings.max_attempts)
    n = 1
    while True:
        pick = pick_for(n)
        picks.append(pick)
        q = pick.queue
        checks_type = settings.validate_message_type and (n == 1 or client.validates_every_attempt)
        if checks_type and message_type not in q.accept:
            return end(None, type_mismatch(topic, message_type, q, language))
        if language == PYTHON and body_size > settings.max_body_size:
            return end(None, body_too_large(settings.max_body_size, language))
        start = now
        reply = yield GrpcCall(
            n - 1, q.broker, q.queue_id, start, settings.request_timeout_ms, endpoint=q.endpoint
        )
        now = start + reply.latency_ms
        failure = failure_of(reply, language)
        broker = reply.broker if reply.broker is not None else q.broker
        queue_id = reply.queue_id if reply.broker is not None else q.queue_id

        flow = _flow_after(failure, reply, n, settings.max_attempts, client)
        isolated_until = None
        if failure is not None and flow != RECEIPTS_MISMATCH:
            isolated_until = state.on_failure(q.endpoint, now)
        attempts.append(
            GrpcAttempt(
                n - 1,
                start,
                now,
                q.endpoint,
                q,
                reply,
                flow,
                broker,
                queue_id,
                isolated_until,
                settings.request_timeout_ms,
            )
        )
        if failure is None:
            return end(SendResult("SEND_OK", broker, queue_id, n - 1), None)
        if flow.startswith("throw"):
            return end(None, failure)
        if flow == BACKOFF_FLOW:
            now += settings.backoff_ms(n + 1)
        n += 1
