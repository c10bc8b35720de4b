"""The gRPC client family (apache/rocketmq-clients) as client versions: a row per release, a column per
behaviour that differs between them.

A gRPC ``client_version`` is the repository's tag name, ``<language>-<version>`` (``java-5.2.1``,
``python-5.1.2``): rocketmq-clients versions each language on its own (``java-5.2.1`` and
``python-5.1.2`` are unrelated releases), so the language is part of the name. Ask a row what it does
(``client.isolates_endpoints``), never its name.

Sources: ``PY/`` = ``rocketmq/v5/`` of the ``rocketmq-python-client`` 5.1.2 wheel (PyPI; the repository's
python tree is 5.1.1, the same send path); ``JC/`` = ``java/client/src/main/java/org/apache/rocketmq/
client/java/`` at tag ``java-5.2.1`` (its producer path is byte-identical to ``java-5.2.0``: ``git diff
java-5.2.0 java-5.2.1 -- JC/impl/producer`` is empty). The Python rows are checked against the real client
(``tests/data/conformance/grpc``); the Java rows are read from source only (the Java client cannot be run
here).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from rocketsim.errors import ConfigError

GRPC = "grpc"  # producers.client_family of these clients
PYTHON = "python"
JAVA = "java"
STOP = "stop"  # a throttled attempt ends the send
BACKOFF = "backoff"  # a throttled attempt is retried after the retry policy's delay


@dataclass(frozen=True)
class GrpcClient:
    """What one release of a gRPC client does on the send path (a row of :data:`GRPC_CLIENTS`)."""

    name: str
    language: str
    # each attempt picks anew from the topic's round robin (PY producer.py
    # Producer.__handle_send_response_sync -> __select_send_queue); False: the candidates are fixed when
    # the send starts (JC ProducerImpl.send -> takeMessageQueues, send0 takes candidates[(attempt - 1) %
    # size])
    picks_per_attempt: bool
    # the candidates are of distinct brokers, and isolated endpoints are skipped unless every one is
    # (JC PublishingLoadBalancer.takeMessageQueues)
    distinct_brokers: bool
    # a failed attempt isolates its endpoints until a heartbeat to them answers OK (JC ProducerImpl.send0
    # onFailure -> isolate; ClientImpl.doHeartbeat -> isolated.remove)
    isolates_endpoints: bool
    # TOO_MANY_REQUESTS: STOP (PY Producer.__check_send_retry_condition) or BACKOFF (JC ProducerImpl.send0:
    # getRetryPolicy().getNextAttemptDelay(nextAttempt)); every other failure is retried at once in both
    throttled: str
    # maxAttempts: the Proxy's pushed backoff_policy.max_attempts (PY Producer.reset_setting) or the
    # client's own (JC ExponentialBackoffRetryPolicy.inheritBackoff keeps maxAttempts)
    max_attempts_from_server: bool
    # the round robin's random start: [low, high] inclusive (PY QueueSelector.__init__
    # random.randint(1, 1000); JC PublishingLoadBalancer() RandomUtils.nextInt(0, Integer.MAX_VALUE), upper
    # bound exclusive)
    start_low: int
    start_high: int
    # a FIFO send's queue: "sha256" (PY QueueSelector.select_queue_by_hash_key: int(sha256(group)) % n) or
    # "siphash24" (JC PublishingLoadBalancer.takeMessageQueueByMessageGroup: LongMath.mod(sipHash24, n))
    fifo_hash: str
    # the message type is checked against the queue's accept types on every attempt (JC send0) or on the
    # first pick only (PY Producer.send)
    validates_every_attempt: bool
    # the request timeout must be whole seconds (PY ClientConfiguration: Settings.request_timeout.seconds
    # is an int; a float breaks the route callback, probe P02)
    whole_second_timeout: bool
    # heartbeats to every route endpoint: first, then every (JC ClientManagerImpl HEART_BEAT_INITIAL_DELAY
    # 1 s, HEART_BEAT_PERIOD 10 s; PY Client.__start_scheduler the same)
    heartbeat_first_ms: int = 1000
    heartbeat_period_ms: int = 10_000
    default_request_timeout_ms: int = 3000  # JC ClientConfigurationBuilder, PY ClientConfiguration: 3 s
    default_max_attempts: int = 3  # JC ProducerBuilderImpl.maxAttempts, PY Producer.DEFAULT_MAX_SEND_ATTEMPTS
    verified: bool = False  # checked against the real client's traces

    @property
    def family(self) -> str:
        return GRPC


GRPC_CLIENTS: tuple[GrpcClient, ...] = (
    GrpcClient(
        "python-5.1.2",
        PYTHON,
        picks_per_attempt=True,
        distinct_brokers=False,
        isolates_endpoints=False,
        throttled=STOP,
        max_attempts_from_server=True,
        start_low=1,
        start_high=1000,
        fifo_hash="sha256",
        validates_every_attempt=False,
        whole_second_timeout=True,
        verified=True,
    ),
    GrpcClient(
        "java-5.2.1",
        JAVA,
        picks_per_attempt=False,
        distinct_brokers=True,
        isolates_endpoints=True,
        throttled=BACKOFF,
        max_attempts_from_server=False,
        start_low=0,
        start_high=2_147_483_646,
        fifo_hash="siphash24",
        validates_every_attempt=True,
        whole_second_timeout=False,
    ),
)
# releases whose send path is a row's (read, not run): the repository's 5.1.1 python tree differs from
# the 5.1.2 wheel only in startup (it waits for Settings); java-5.2.0's producer path is java-5.2.1's
ALIASES = {"python-5.1.1": "python-5.1.2", "java-5.2.0": "java-5.2.1"}
GRPC_VERSIONS = tuple(sorted([c.name for c in GRPC_CLIENTS] + list(ALIASES)))


@cache
def parse_grpc_version(text: str) -> GrpcClient:
    """The row of a gRPC ``client_version`` (a ``ConfigError`` naming the ones modelled otherwise)."""
    name = ALIASES.get(text, text)
    for row in GRPC_CLIENTS:
        if row.name == name:
            return row
    raise ConfigError(
        f"client_version of the grpc family must be one of {', '.join(GRPC_VERSIONS)} (rocketmq-clients tag "
        f"names), got {text!r}"
    )
