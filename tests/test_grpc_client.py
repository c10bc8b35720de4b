"""The gRPC client family's send path: balancers, retries, isolation, exceptions.

Java statements cite apache/rocketmq-clients at tag java-5.2.1, ``JC/`` =
java/client/src/main/java/org/apache/rocketmq/client/java/ (read, not run: the Java client cannot be
obtained here). Python statements cite the rocketmq-python-client 5.1.2 wheel, ``PY/`` = rocketmq/v5/, and
are also checked against the real client by tests/data/conformance/grpc (test_conformance.py).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketsim.client.grpc_balance import GrpcQueue, JavaBalancer, PythonSelector, sha256_bucket, siphash24
from rocketsim.client.grpc_codes import DEADLINE_EXCEEDED, Code, Reply, exception_of
from rocketsim.client.grpc_send import (
    BACKOFF_FLOW,
    GrpcCall,
    GrpcSendRecord,
    GrpcSettings,
    ProducerState,
    failure_of,
    grpc_send_steps,
)
from rocketsim.client.grpc_versions import GRPC_CLIENTS, parse_grpc_version
from rocketsim.errors import ConfigError

JAVA = parse_grpc_version("java-5.2.1")
PYTHON = parse_grpc_version("python-5.1.2")


def route(brokers: int = 2, queues: int = 2, cluster: bool = False) -> list[GrpcQueue]:
    names = [f"broker-{chr(ord('a') + b)}" for b in range(brokers)]
    return [GrpcQueue(n, q, "proxy" if cluster else f"ep-{n[-1]}") for n in names for q in range(queues)]


def drive(steps, answer: Callable[[GrpcCall], Reply]) -> tuple[GrpcSendRecord, list[GrpcCall]]:
    calls: list[GrpcCall] = []
    try:
        call = next(steps)
        while True:
            calls.append(call)
            call = steps.send(answer(call))
    except StopIteration as stop:
        return stop.value, calls


def fail_then_ok(*codes: int) -> Callable[[GrpcCall], Reply]:
    seq = list(codes)

    def answer(call: GrpcCall) -> Reply:
        code = seq.pop(0) if seq else Code.OK
        return Reply.status(code, 3, "m", entries=1 if code == Code.OK else 0)

    return answer


def send(state: ProducerState, settings: GrpcSettings | None = None, **kw: object) -> tuple:
    steps = grpc_send_steps(state, kw.pop("r", route()), settings or GrpcSettings(), "T", 0, **kw)  # type: ignore[arg-type]
    return steps


# ---- versions --------------------------------------------------------------------------------------------


def test_versions_are_the_rocketmq_clients_tag_names() -> None:
    assert {c.name for c in GRPC_CLIENTS} == {"python-5.1.2", "java-5.2.1"}
    # java-5.2.0's producer path is java-5.2.1's (git diff java-5.2.0 java-5.2.1 -- JC/impl/producer: empty)
    assert parse_grpc_version("java-5.2.0") is JAVA
    with pytest.raises(ConfigError, match="client_version of the grpc family must be one of"):
        parse_grpc_version("5.3.3")


# ---- Java: PublishingLoadBalancer and ProducerImpl.send0 ---------------------------------------------------


def test_java_candidates_are_distinct_brokers_and_attempts_wrap() -> None:
    # JC/impl/producer/PublishingLoadBalancer.java takeMessageQueues(excluded, count): walk from
    # index.getAndIncrement(), keep the first queue of each broker; ProducerImpl.send0: attempt n uses
    # candidates.get(IntMath.mod(n - 1, candidates.size())): 2 brokers, 3 attempts -> a, b, a
    state = ProducerState(JAVA, lambda topic: 0)
    record, calls = drive(send(state), fail_then_ok(Code.INTERNAL_SERVER_ERROR, Code.INTERNAL_SERVER_ERROR))
    assert [(c.broker, c.queue_id) for c in calls] == [("broker-a", 0), ("broker-b", 0), ("broker-a", 0)]
    assert record.result is not None and record.result.from_attempt == 2
    # one tick per send, not per attempt: the next send starts its walk at index 1 (broker-a queue 1)
    state.isolated.clear()
    _, calls = drive(send(state), fail_then_ok())
    assert (calls[0].broker, calls[0].queue_id) == ("broker-a", 1)


def test_java_isolation_skips_endpoints_until_a_heartbeat_and_falls_back_when_all_are_isolated() -> None:
    # JC ProducerImpl.send0 onFailure: isolate(endpoints) on every failure; takeMessageQueues skips
    # excluded endpoints; "If all endpoints are isolated" it walks again ignoring isolation;
    # JC/impl/ClientImpl.java doHeartbeat: an OK heartbeat removes the endpoints from `isolated`
    state = ProducerState(JAVA, lambda topic: 0)
    drive(send(state), fail_then_ok(Code.INTERNAL_SERVER_ERROR))
    assert state.isolated == {"ep-a"}
    _, calls = drive(send(state), fail_then_ok())
    assert [c.endpoint for c in calls] == ["ep-b"]
    state.isolated.add("ep-b")
    _, calls = drive(send(state), fail_then_ok())
    assert len(calls) == 1  # every endpoint isolated: the fallback walk
    state.rejoin("ep-a")
    assert state.isolated == {"ep-b"}


def test_java_cluster_mode_one_endpoint_isolation_isolates_everything() -> None:
    # clients.md B.0: in cluster mode every queue carries the Proxy's endpoint, so one failure isolates
    # every queue and takeMessageQueues' fallback walk (isolation ignored) chooses
    state = ProducerState(JAVA, lambda topic: 0)
    r = route(cluster=True)
    drive(send(state, r=r), fail_then_ok(Code.INTERNAL_SERVER_ERROR))
    assert state.isolated == {"proxy"}
    _, calls = drive(send(state, r=r), fail_then_ok())
    assert calls and calls[0].endpoint == "proxy"


def test_java_balancer_index_wraps_at_integer_max_value() -> None:
    # AtomicInteger.getAndIncrement wraps to Integer.MIN_VALUE; IntMath.mod keeps the index non-negative
    b = JavaBalancer(route(brokers=3, queues=1), 2**31 - 1)
    start, picked = b.take_queues(frozenset(), 3)
    assert start == 2**31 - 1 and b.index == -(2**31)
    # 2147483647 mod 3 = 1, then -2147483648 mod 3 = 1 (IntMath.mod), then 2
    assert [q.broker for q in picked] == ["broker-b", "broker-c"]
    assert [q.broker for q in b.take_queues(frozenset(), 1)[1]] == ["broker-b"]


def test_java_throttled_attempts_wait_the_retry_policy_and_others_retry_at_once() -> None:
    # JC ProducerImpl.send0: not TooManyRequestsException -> send0(nextAttempt) at once; else schedule
    # after getRetryPolicy().getNextAttemptDelay(nextAttempt) (ExponentialBackoffRetryPolicy with the
    # Proxy's pushed 10 ms x2 <= 1 s: 20 ms before attempt 2, 40 ms before attempt 3)
    settings = GrpcSettings(max_attempts=3, backoff_ms=lambda a: min(10 * 2 ** (a - 1), 1000))
    state = ProducerState(JAVA, lambda topic: 0)
    record, calls = drive(send(state, settings), fail_then_ok(Code.TOO_MANY_REQUESTS, Code.TOO_MANY_REQUESTS))
    assert [c.start_ms for c in calls] == [0, 3 + 20, 3 + 20 + 3 + 40]
    assert [a.flow for a in record.attempts] == [BACKOFF_FLOW, BACKOFF_FLOW, "return"]
    state.isolated.clear()
    _, calls = drive(send(state, settings), fail_then_ok(Code.BAD_REQUEST))
    assert [c.start_ms for c in calls] == [0, 3]  # every error kind is retried, BadRequest included


def test_java_keeps_its_own_max_attempts_and_python_takes_the_proxys() -> None:
    # JC ExponentialBackoffRetryPolicy.inheritBackoff keeps maxAttempts; PY producer.py
    # Producer.reset_setting takes backoff_policy.max_attempts from an exponential policy
    assert not JAVA.max_attempts_from_server and PYTHON.max_attempts_from_server


def test_java_receipts_mismatch_is_not_retried_nor_isolated() -> None:
    # JC ProducerImpl.send0 onSuccess: sendReceipts.size() != messages.size() -> InternalErrorException("[Bug]
    # ..."), future0.setException: no isolate, no more attempts
    state = ProducerState(JAVA, lambda topic: 0)
    record, calls = drive(send(state), lambda call: Reply.status(Code.OK, 2, "OK", entries=0))
    assert len(calls) == 1 and not state.isolated
    assert record.error is not None and record.error.java_class == "InternalErrorException"


def test_java_fifo_is_one_queue_by_siphash_every_attempt() -> None:
    # JC PublishingLoadBalancer.takeMessageQueueByMessageGroup: LongMath.mod(sipHash24(group), size),
    # a single candidate, isolation ignored
    state = ProducerState(JAVA, lambda topic: 0)
    r = route(brokers=2, queues=4)
    _, calls = drive(
        send(state, r=r, group="g1"), fail_then_ok(Code.INTERNAL_SERVER_ERROR, Code.INTERNAL_SERVER_ERROR)
    )
    k = siphash24(b"g1") % 8
    assert {(c.broker, c.queue_id) for c in calls} == {(r[k].broker, r[k].queue_id)} and len(calls) == 3


def test_siphash24_is_the_reference_function() -> None:
    # the SipHash-2-4 reference vectors (key 00..0f = Guava's default k0/k1): the empty message gives the
    # bytes 31 0e 0e dd 47 db 6f 72, the paper's 15-byte message 00..0e gives a129ca6149be45e5
    assert siphash24(b"") & (2**64 - 1) == 0x726FDB47DD0E0E31
    assert siphash24(bytes(range(15))) & (2**64 - 1) == 0xA129CA6149BE45E5


# ---- Python: QueueSelector and Producer --------------------------------------------------------------------


def test_python_picks_anew_each_attempt_same_endpoint_allowed() -> None:
    # PY producer.py __handle_send_response_sync: on failure __select_send_queue again (next in the round
    # robin: possibly the same broker), no isolation (G05 of the real client's traces)
    state = ProducerState(PYTHON, lambda topic: 4)
    record, calls = drive(send(state), fail_then_ok(Code.INTERNAL_SERVER_ERROR, Code.INTERNAL_SERVER_ERROR))
    assert [(c.broker, c.queue_id) for c in calls] == [("broker-a", 0), ("broker-a", 1), ("broker-b", 0)]
    assert [p.index for p in record.picks] == [4, 5, 6] and not state.isolated


def test_python_does_not_retry_throttling_and_stops_at_max_attempts() -> None:
    # PY Producer.__check_send_retry_condition: attempt > max_attempts, or TooManyRequestsException, ends it
    state = ProducerState(PYTHON, lambda topic: 1)
    record, calls = drive(send(state), fail_then_ok(Code.INTERNAL_SERVER_ERROR, Code.TOO_MANY_REQUESTS))
    assert len(calls) == 2 and record.error is not None
    assert (record.error.java_class, record.error.text) == ("TooManyRequestsException", "42900, m")
    record, calls = drive(send(state, GrpcSettings(max_attempts=1)), fail_then_ok(Code.INTERNAL_SERVER_ERROR))
    assert len(calls) == 1 and record.error.java_class == "InternalErrorException"  # type: ignore[union-attr]


def test_each_attempt_has_the_whole_request_timeout() -> None:
    # no total budget: PY rpc_client.send_message_async(timeout=request_timeout) per attempt; JC
    # ClientManagerImpl.sendMessage(endpoints, request, requestTimeout) per attempt, handleClientFuture waits
    # with no timeout
    for client in (PYTHON, JAVA):
        state = ProducerState(client, lambda topic: 0)
        record, calls = drive(
            send(state, GrpcSettings(request_timeout_ms=1000)),
            lambda call: Reply.grpc_error(DEADLINE_EXCEEDED, call.timeout_ms),
        )
        assert [c.timeout_ms for c in calls] == [1000] * 3 and record.end_ms == 3000


def test_python_fifo_hash_is_sha256_mod_queues() -> None:
    # PY QueueSelector.select_queue_by_hash_key: int.from_bytes(sha256(key).digest(), 'big') % len
    sel = PythonSelector(route(brokers=2, queues=2), 7)
    k, q = sel.by_group("g1")
    assert k == sha256_bucket("g1", 4) == 0 and sel.index == 7  # G20: g1 -> broker-a.0, index unmoved


def test_message_type_check_refuses_before_any_rpc() -> None:
    r = [GrpcQueue("broker-a", 0, "ep-a", accept=("NORMAL",))]
    for client in (PYTHON, JAVA):
        record, calls = drive(
            send(ProducerState(client, lambda t: 0), r=r, message_type="FIFO"), fail_then_ok()
        )
        assert (
            not calls and record.error is not None and record.error.java_class == "IllegalArgumentException"
        )


# ---- what the clients make of a status ------------------------------------------------------------


def test_exception_tables_differ_only_where_the_checkers_differ() -> None:
    # JC exception/StatusChecker.check and PY util/messaging_result_checker.py MessagingResultChecker.check
    assert exception_of(Code.TOO_MANY_REQUESTS, "java") == exception_of(Code.TOO_MANY_REQUESTS, "python")
    assert exception_of(Code.HA_NOT_AVAILABLE, "python") == "InternalErrorException"
    assert exception_of(Code.MASTER_PERSISTENCE_TIMEOUT, "java") == "ProxyTimeoutException"
    # a send's MESSAGE_NOT_FOUND falls through to NotFoundException in Java; Python returns
    assert exception_of(Code.MESSAGE_NOT_FOUND, "java") == "NotFoundException"
    assert exception_of(Code.MESSAGE_NOT_FOUND, "python") is None
    # code 0: Python "response is illegal."; Java's default branch
    assert exception_of(0, "python") == "IllegalStateException"
    assert exception_of(0, "java") == exception_of(Code.NOT_IMPLEMENTED, "java") == "UnsupportedException"
    java = failure_of(Reply.status(Code.INTERNAL_SERVER_ERROR, 1, "boom"), "java")
    assert java is not None and java.text == "[response-code=50001] boom"


@given(st.text(min_size=1, max_size=20), st.integers(1, 64))
def test_buckets_are_in_range(group: str, n: int) -> None:
    assert 0 <= sha256_bucket(group, n) < n
    assert 0 <= siphash24(group.encode()) % n < n
