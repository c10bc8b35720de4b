"""The RocketMQ 5.x Proxy between the gRPC clients and the brokers (apache/rocketmq 5.3.3, ``PX/`` =
``proxy/src/main/java/org/apache/rocketmq/proxy/``).

What it adds to a gRPC client's attempt:

More: docs/reference/modules.md, rocketsim/broker/proxy.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rocketsim.broker import latency as bm
from rocketsim.broker.fault_kinds import Answer, Connect
from rocketsim.client.grpc_codes import DEADLINE_EXCEEDED, UNAVAILABLE, Code, Reply
from rocketsim.client.outcomes import OutcomeKind
from rocketsim.errors import ConfigError
from rocketsim.javaint import int32, java_string_hash
from rocketsim.rng import uniform
from rocketsim.scenario import PROXY_MODES, ProxyConfig

CLUSTER, LOCAL = PROXY_MODES
ACCESS_POINT = "proxy"  # the cluster-mode endpoint every queue carries
STREAM_PROXY_QUEUE = 16  # the attempt draw of the Proxy's queue choice (past the broker model's streams)

# gRPC channel reconnect backoff (grpc-core and grpc-java alike: 1 s initial, x1.6, 120 s max, 20% jitter,
# taken here without the jitter): while a channel is in TRANSIENT_FAILURE an RPC fails at once with
# UNAVAILABLE, and the channel tries to connect again only when its backoff ends (probe G15).
RECONNECT_INITIAL_MS = 1000
RECONNECT_MULTIPLIER = 1.6
RECONNECT_MAX_MS = 120_000
REFUSED_MS = 3  # an RPC on a channel that cannot connect fails this fast (G15: median 3 ms)


def backoff_ms(cfg: ProxyConfig, attempt: int) -> int:
    """``ExponentialBackoffRetryPolicy.getNextAttemptDelay(attempt)`` with the backoff the Proxy pushes:
    ``min(initial * multiplier^(attempt - 1), max)`` (the Java client's wait before ``attempt``)."""
    if attempt < 1:
        raise ConfigError(f"attempt must be positive, got {attempt}")
    delay = cfg.grpc_client_producer_backoff_initial_millis * float(
        cfg.grpc_client_producer_backoff_multiplier
    ) ** (attempt - 1)
    return int(min(delay, cfg.grpc_client_producer_backoff_max_millis))


def endpoint_of(broker: str, mode: str) -> str:
    """The endpoint a client's route gives ``broker``'s queues: the access point in cluster mode, the
    broker's own Proxy in local mode."""
    return ACCESS_POINT if mode == CLUSTER else broker


def consistent_hash(value: int, buckets: int) -> int:
    """Guava ``Hashing.consistentHash(long input, int buckets)`` (its LinearCongruentialGenerator)."""
    if buckets <= 0:
        raise ConfigError(f"buckets must be positive, got {buckets}")
    state = value & 0xFFFFFFFFFFFFFFFF
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        next_double = (int32(state >> 33) + 1) / 2147483648.0
        nxt = int((candidate + 1) / next_double)
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


def fifo_bucket(group: str, buckets: int) -> int:
    """The Proxy's queue of a FIFO message: ``consistentHash(group.hashCode(), writeQueues.size())``."""
    return consistent_hash(java_string_hash(group), buckets)


# ---- the broker's answer as the Proxy's reply ----------------------------------------------------------

_STORE_STATUS_CODES = {
    OutcomeKind.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    OutcomeKind.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    OutcomeKind.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
}
# ResponseBuilder.RESPONSE_CODE_MAPPING: the broker's ResponseCode -> Code (any other: INTERNAL_SERVER_ERROR)
BROKER_CODE_MAPPING = {
    bm.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
    16: Code.NOT_IMPLEMENTED,
    26: Code.CONSUMER_GROUP_NOT_FOUND,
}
TOPIC_NOT_EXIST = 17  # TopicRouteHelper.isTopicNotExistError -> TOPIC_NOT_FOUND


def proxy_status(answer: bm.AttemptOutcome, broker: str) -> tuple[int, str]:
    """The status (code, message) the Proxy answers for its broker's ``answer``."""
    kind = answer.kind
    if kind == OutcomeKind.OK:
        return Code.OK, Code.OK.name
    if kind in _STORE_STATUS_CODES:
        status = OutcomeKind(kind).name
        return _STORE_STATUS_CODES[kind], f"send message failed, sendStatus={status}"
    if kind == OutcomeKind.REMOTING_TIMEOUT:  # RemotingTimeoutException
        return Code.PROXY_TIMEOUT, f"wait response on the channel <{broker}> timeout"
    if kind == OutcomeKind.BROKER_ERROR:
        code = answer.response_code
        if code == TOPIC_NOT_EXIST:
            return Code.TOPIC_NOT_FOUND, answer.remark or bm.broker_remark(code)
        remark = answer.remark or bm.broker_remark(code)
        return BROKER_CODE_MAPPING.get(code, Code.INTERNAL_SERVER_ERROR), remark
    # a failed connect or send to the broker: ResponseBuilder's last branch
    return Code.INTERNAL_SERVER_ERROR, f"connect to {broker} failed"


def reconnect_ready_ms(refused_ms: int, back_ms: int) -> int:
    """When a gRPC channel whose connect was refused at ``refused_ms``, its endpoint listening again from
    ``back_ms``, can carry an RPC: its first reconnect attempt at or after ``back_ms`` (attempts at
    ``refused_ms + 1 s``, then backoffs x1.6 up to 120 s)."""
    t = float(refused_ms)
    backoff = float(RECONNECT_INITIAL_MS)
    while True:
        t += backoff
        if t >= back_ms:
            return int(t)
        backoff = min(backoff * RECONNECT_MULTIPLIER, RECONNECT_MAX_MS)


@dataclass(frozen=True)
class ProxyAttempt:
    """One attempt as the Proxy sees it: the client's endpoint, when, the client's deadline, the
    attempt's draw key, and the queues the Proxy may pick (its route's writable queues as (broker, id),
    sorted as ``MessageQueueSelector`` sorts them)."""

    endpoint: str
    start_ms: int
    deadline_ms: int  # the client's request timeout
    key: int
    queues: tuple[tuple[str, int], ...]
    group: str | None = None  # a FIFO message's group


def choose_queue(a: ProxyAttempt) -> tuple[str, int]:
    """The broker queue the Proxy sends ``a`` to."""
    if a.group:
        return a.queues[fifo_bucket(a.group, len(a.queues))]
    return a.queues[int(uniform(a.key, STREAM_PROXY_QUEUE) * len(a.queues))]


def proxy_reply(
    model: bm.BrokerModel,
    settings: ProxyConfig,
    a: ProxyAttempt,
    refine: Callable[[bm.AttemptOutcome, str, int], bm.AttemptOutcome] | None = None,
) -> Reply:
    """What the client sees of one attempt through the Proxy: the Proxy's queue choice, its broker's
    answer within ``broker_timeout_ms`` as a status, then the client's own deadline (past it:
    DEADLINE_EXCEEDED at the deadline, the broker's store standing: a retry can duplicate). ``refine``:
    what the broker does to this message on the chosen queue beyond the model's draw."""
    if not a.queues:  # ProducerProcessor: "no writable queue"
        return Reply.status(Code.FORBIDDEN, settings.hop_ms, "no writable queue")
    broker, queue_id = choose_queue(a)
    b = model.index(broker)
    hop = settings.hop_ms
    answer = bm.attempt_outcome(
        model.params[b], model.faults[b], a.key, a.start_ms + hop, settings.broker_timeout_ms
    )
    if refine is not None:  # what the broker makes of this message on this queue (e.g. its properties)
        answer = refine(answer, broker, queue_id)
    code, message = proxy_status(answer, broker)
    latency = hop + answer.latency_ms + (1 if answer.kind == OutcomeKind.REMOTING_TIMEOUT else 0)
    stored = {
        "stored": answer.stored,
        "store_ms": hop + answer.store_ms,
        "broker": broker,
        "queue_id": queue_id,
    }
    if latency >= a.deadline_ms:
        return Reply.grpc_error(DEADLINE_EXCEEDED, a.deadline_ms, **stored)
    return Reply.status(code, latency, message, **stored)


def local_endpoint_reply(
    model: bm.BrokerModel, broker: str, start_ms: int, deadline_ms: int, connectable: bool
) -> Reply | None:
    """What a local-mode Proxy's own process does to an attempt before it handles it (None: it handles
    it): not connectable (dead, or the client's channel still in its reconnect backoff) -> UNAVAILABLE at
    once; hung -> the client's deadline; cut off by a partition -> the client's deadline (the connect never
    completes)."""
    if not connectable:
        return Reply.grpc_error(UNAVAILABLE, REFUSED_MS, reached=False, broker=broker)
    for w in model.faults[model.index(broker)]:
        hung, cut_off = w.rule.answer == Answer.NEVER, w.rule.connect == Connect.TIMES_OUT
        if w.active(start_ms) and (hung or cut_off):
            return Reply.grpc_error(DEADLINE_EXCEEDED, deadline_ms, reached=hung, broker=broker)
    return None
