"""The send loops: retries, budgets, response codes per version, ASYNC and ONEWAY."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from rocketsim.client.fault import FaultStrategy, ThreadLocalIndex, new_strategy
from rocketsim.client.route import TopicPublishInfo, TopicRouteData, topic_publish_info
from rocketsim.client.send import (
    IO_THREAD,
    WAITS,
    Action,
    AsyncSemaphore,
    Call,
    ClientError,
    MQBrokerError,
    Outcome,
    RemotingTooMuchRequestError,
    ResponseCode,
    ResponseScan,
    Resume,
    SendConfig,
    SendFailedError,
    SendInterruptedError,
    SendRecord,
    Step,
    async_send_steps,
    callback_thread,
    cap_to_timeout,
    executor_thread,
    ordered_send_steps,
    retry_response_codes,
    run_steps,
    send_async,
    send_oneway,
    send_sync,
)
from rocketsim.client.versions import LINE_4_9_8, parse_version
from rocketsim.rng import SplitMixIntSource

Behaviour = Callable[[str, int, int], Outcome]  # (broker, start_ms, timeout_ms) -> Outcome


def _setup(
    version: str, queues: dict[str, int], fault: bool = False, seed: int = 1
) -> tuple[FaultStrategy, TopicPublishInfo, SendConfig]:
    v = parse_version(version)
    strategy = new_strategy(
        v.fault_line, send_latency_fault_enable=fault, which_item_worst_source=SplitMixIntSource(seed)
    )
    index = ThreadLocalIndex(
        v.fault_line, lambda t: SplitMixIntSource.for_index(seed, 0, t, "sendWhichQueue")
    )
    tp = topic_publish_info("TopicTest", TopicRouteData.simple(queues), index)
    return strategy, tp, SendConfig(version=v)


def _transport(by_broker: dict[str, Behaviour]):
    calls: list[tuple[int, str, int, int]] = []

    def transport(attempt: int, broker: str, queue_id: int, start_ms: int, timeout_ms: int) -> Outcome:
        calls.append((attempt, broker, start_ms, timeout_ms))
        return by_broker[broker](broker, start_ms, timeout_ms)

    transport.calls = calls  # type: ignore[attr-defined]
    return transport


def _ok(latency: int = 5) -> Behaviour:
    return lambda b, s, t: Outcome.ok(latency)


def _connect_refused(latency: int = 3) -> Behaviour:
    return lambda b, s, t: Outcome.remoting_error("connect", latency)


def _hang(extra: int = 0) -> Behaviour:
    return lambda b, s, t: Outcome.remoting_error("timeout", t + extra)


def _code(code: int) -> Behaviour:
    return lambda b, s, t: Outcome.broker_error(code, 7)


@pytest.mark.parametrize("version", ["4.9.7", "4.9.8", "5.3.3"])
def test_fault_off_retries_onto_the_other_broker(version: str) -> None:
    strategy, tp, cfg = _setup(version, {"broker-a": 4, "broker-b": 4})
    transport = _transport({"broker-a": _connect_refused(), "broker-b": _ok()})
    now, seen_retry = 0, 0
    for _ in range(40):
        rec = send_sync(strategy, tp, cfg, "TopicTest", now, transport)
        assert rec.result is not None and rec.result.status == "SEND_OK"
        assert rec.attempts[-1].broker == "broker-b"
        if len(rec.attempts) == 2:
            seen_retry += 1
            assert rec.attempts[0].broker == "broker-a"
            assert rec.attempts[0].flow == "continue:RemotingException"
            assert rec.attempts[0].fault_update is not None and rec.attempts[0].fault_update.duration is None
            assert rec.attempts[1].last_broker == "broker-a"
        now = rec.end_ms + 10
    assert seen_retry >= 5
    assert len(strategy.table) == 0  # fault tolerance off: nothing recorded


@pytest.mark.parametrize(
    ("version", "url"),
    [
        ("4.9.8", "http://rocketmq.apache.org/docs/faq/"),
        ("5.3.3", "https://rocketmq.apache.org/docs/bestPractice/06FAQ"),
    ],
)
def test_final_exception_matches_upstream_text(version: str, url: str) -> None:
    strategy, tp, cfg = _setup(version, {"broker-b": 4})
    rec = send_sync(strategy, tp, cfg, "TopicTest", 1_000, _transport({"broker-b": _connect_refused(3)}))
    err = rec.error
    assert isinstance(err, SendFailedError)
    assert err.response_code == 10001 and err.cause == "RemotingConnectException"
    assert err.error_message == (
        "Send [3] times, still failed, cost [9]ms, Topic: TopicTest, "
        f"BrokersSent: [broker-b, broker-b, broker-b]\nSee {url} for further details."
    )
    assert str(err) == err.error_message  # the tip is already there: getMessage() adds nothing
    assert rec.label == "thrown:MQClientException:10001"
    with pytest.raises(SendFailedError):
        rec.result_or_raise()


def test_a_hung_broker_eats_the_3s_budget_so_no_retry_happens() -> None:
    strategy, tp, cfg = _setup("4.9.8", {"broker-a": 2})
    rec = send_sync(strategy, tp, cfg, "TopicTest", 0, _transport({"broker-a": _hang(extra=1)}))
    assert [a.sent for a in rec.attempts] == [True, False]
    assert rec.attempts[1].flow == "break:callTimeout(costTime=3001)"
    assert isinstance(rec.error, RemotingTooMuchRequestError)
    assert rec.error.message == "sendDefaultImpl call timeout"
    # a timeout of exactly the budget leaves costTime == timeout: the retries still go, with 0 ms each
    rec = send_sync(strategy, tp, cfg, "TopicTest", 10_000, _transport({"broker-a": _hang()}))
    assert [a.timeout_ms for a in rec.attempts] == [3000, 0, 0]
    assert isinstance(rec.error, SendFailedError) and rec.error.response_code == 10002


def test_retry_response_codes_by_version() -> None:
    busy, go_away = ResponseCode.SYSTEM_BUSY, ResponseCode.GO_AWAY
    assert busy not in retry_response_codes(parse_version("4.9.8"))
    assert busy not in retry_response_codes(parse_version("5.2.0"))
    assert busy in retry_response_codes(parse_version("5.3.0"))
    assert go_away not in retry_response_codes(parse_version("5.3.0"))
    assert {busy, go_away} <= retry_response_codes(parse_version("5.3.1"))
    assert {busy, go_away} <= retry_response_codes(parse_version("5.x"))


@pytest.mark.parametrize(("version", "attempts"), [("4.9.8", 1), ("5.2.0", 1), ("5.3.0", 3)])
def test_sync_system_busy_retries_only_where_upstream_does(version: str, attempts: int) -> None:
    strategy, tp, cfg = _setup(version, {"broker-a": 2, "broker-b": 2})
    rec = send_sync(
        strategy, tp, cfg, "TopicTest", 0, _transport({b: _code(2) for b in ("broker-a", "broker-b")})
    )
    assert len(rec.attempts) == attempts
    if attempts == 1:
        assert isinstance(rec.error, MQBrokerError) and rec.error.response_code == 2
        assert rec.attempts[0].flow == "throw:MQBrokerException(non-retry code)"
    else:
        assert isinstance(rec.error, SendFailedError) and rec.error.response_code == 2


def test_5x_broker_error_marks_unreachable_and_remoting_error_isolates() -> None:
    strategy, tp, cfg = _setup("5.3.3", {"broker-a": 1}, fault=True)
    rec = send_sync(strategy, tp, cfg, "TopicTest", 0, _transport({"broker-a": _code(1)}))
    assert [a.fault_update.as_vector() for a in rec.attempts] == [["broker-a", 7, True, False, 10_000]] * 3
    assert not strategy.table.is_reachable("broker-a")
    assert rec.attempts[0].isolated_until_ms == 10_007


def test_not_store_ok_retries_another_broker_only_when_asked() -> None:
    flush = {"broker-a": lambda b, s, t: Outcome.not_ok("FLUSH_DISK_TIMEOUT", 4), "broker-b": _ok()}
    for retry_another, expected in ((False, "FLUSH_DISK_TIMEOUT"), (True, "SEND_OK")):
        strategy, tp, cfg = _setup("4.9.8", {"broker-a": 1, "broker-b": 1})
        cfg = SendConfig(version=cfg.version, retry_another_broker_when_not_store_ok=retry_another)
        results = []
        for start in range(0, 40, 10):
            rec = send_sync(strategy, tp, cfg, "TopicTest", start, _transport(flush))
            results.append(rec.result.status)
        assert expected in results and (retry_another or "SEND_OK" in results)
        assert all(r == "SEND_OK" for r in results) == retry_another


def test_interrupt_is_thrown_without_isolation() -> None:
    strategy, tp, cfg = _setup("4.9.8", {"broker-a": 1}, fault=True)
    rec = send_sync(
        strategy, tp, cfg, "TopicTest", 0, _transport({"broker-a": lambda b, s, t: Outcome.interrupted(2)})
    )
    assert isinstance(rec.error, SendInterruptedError) and len(rec.attempts) == 1
    assert rec.attempts[0].fault_update.as_vector() == ["broker-a", 2, False, 0]


def test_5x_per_request_cap_exists_from_5_3_3() -> None:
    for version, expected in (("5.3.3", [1000, 1000, 1000]), ("5.3.2", [3000, 0, 0])):
        strategy, tp, _ = _setup(version, {"broker-a": 1, "broker-b": 1})
        cfg = SendConfig(version=parse_version(version), send_msg_max_timeout_per_request_ms=1000)
        rec = send_sync(
            strategy, tp, cfg, "TopicTest", 0, _transport({"broker-a": _hang(), "broker-b": _hang()})
        )
        assert [a.timeout_ms for a in rec.attempts] == expected


def test_sender_threads_keep_their_own_index() -> None:
    strategy, tp, cfg = _setup("4.9.8", {"broker-a": 8})
    transport = _transport({"broker-a": _ok()})
    q0 = [send_sync(strategy, tp, cfg, "T", 0, transport, thread=0).result.queue_id for _ in range(3)]
    q1 = [send_sync(strategy, tp, cfg, "T", 0, transport, thread=1).result.queue_id for _ in range(3)]
    assert q0 != q1
    assert [(q - q0[0]) % 8 for q in q0] == [0, 1, 2] and [(q - q1[0]) % 8 for q in q1] == [0, 1, 2]


def test_cap_to_timeout() -> None:
    assert cap_to_timeout(Outcome.ok(3500), 3000) == Outcome.remoting_error("timeout", 3000)
    assert cap_to_timeout(Outcome.ok(20), 3000) == Outcome.ok(20)


# ---- ASYNC ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_async_does_not_retry_a_broker_error_even_system_busy(version: str) -> None:
    strategy, tp, cfg = _setup(version, {"broker-a": 2, "broker-b": 2})
    transport = _transport({"broker-a": _code(2), "broker-b": _code(2)})
    rec = send_async(strategy, tp, cfg, "TopicTest", 0, transport)
    assert len(rec.attempts) == 1 and rec.attempts[0].flow == "callback:onException"
    assert isinstance(rec.error, MQBrokerError) and rec.error.response_code == 2


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_async_retries_network_failures_up_to_the_async_limit(version: str) -> None:
    send_failed: Behaviour = lambda b, s, t: Outcome.remoting_error("send_request", 4)  # noqa: E731
    strategy, tp, cfg = _setup(version, {"broker-a": 2, "broker-b": 2})
    rec = send_async(
        strategy, tp, cfg, "TopicTest", 0, _transport({"broker-a": send_failed, "broker-b": send_failed})
    )
    assert [a.flow for a in rec.attempts] == ["retry", "retry", "callback:onException"]
    assert [a.start_ms for a in rec.attempts] == [0, 4, 8]
    # every retry avoids the broker that just failed
    assert all(a.broker != a.last_broker for a in rec.attempts[1:])
    assert isinstance(rec.error, ClientError) and rec.error.error_message == "send request failed"
    strategy, tp, cfg = _setup(version, {"broker-a": 2, "broker-b": 2})
    ok_after = send_async(
        strategy, tp, cfg, "TopicTest", 0, _transport({"broker-a": send_failed, "broker-b": _ok()})
    )
    assert ok_after.result is not None and ok_after.attempts[-1].broker == "broker-b"


def test_async_timeout_fires_at_the_response_scan_and_has_no_budget_left() -> None:
    for version in ("4.9.8", "5.3.3"):
        strategy, tp, cfg = _setup(version, {"broker-a": 2}, fault=True)
        transport = _transport({"broker-a": _hang()})
        rec = send_async(strategy, tp, cfg, "TopicTest", 500, transport, scan=ResponseScan(3_000, 1_000))
        assert rec.attempts[0].end_ms == 5_000  # 500 + 3000 + 1000 -> next scan tick
        assert len(transport.calls) == 1  # no request is sent after the budget is gone
        if version == "4.9.8":  # 4.9 still runs its retries, each refused at once
            assert [a.outcome.label for a in rec.attempts[1:]] == ["remoting:too_many_requests"] * 2
            assert isinstance(rec.error, RemotingTooMuchRequestError)
            assert rec.error.message == "invokeAsync call the addr[broker-a] timeout"
        else:
            assert len(rec.attempts) == 1
            assert rec.error.error_message == "wait response timeout, cost=4500"


def test_4_9_async_dispatch_update_overwrites_isolation_but_5x_does_not() -> None:
    for version, isolated_after in (("4.9.8", False), ("5.3.3", True)):
        strategy, tp, cfg = _setup(version, {"broker-a": 1}, fault=True)
        strategy.update_fault_item("broker-a", 5, isolation=True, now=0)
        rec = send_async(strategy, tp, cfg, "TopicTest", 100, _transport({"broker-a": _ok(3)}))
        assert rec.dispatch_update is not None and rec.dispatch_update.latency == 0
        assert (not strategy.table.is_available("broker-a", 103)) == isolated_after


def _next_call(steps, value=None):  # noqa: ANN001, ANN202 - a send generator and what it was asked for
    """Drive ``steps`` (each step at its own time, on a pool's first thread) to its next Call."""
    item = next(steps) if value is None else steps.send(value)
    while not isinstance(item, Call):
        item = steps.send(Resume(item.at_ms, item.thread or "t"))
    return item


def _finish(steps, outcome: Outcome) -> None:  # noqa: ANN001
    with pytest.raises(StopIteration):
        _next_call(steps, outcome)


def test_async_semaphore_bounds_requests_in_flight() -> None:
    strategy, tp, cfg = _setup("5.3.3", {"broker-a": 4})
    sem = AsyncSemaphore(permits=1)
    first = async_send_steps(strategy, tp, cfg, "T", 0, semaphore=sem)
    call1 = _next_call(first)
    assert isinstance(call1, Call) and call1.start_ms == 0
    _finish(first, Outcome.ok(500))  # holds the only permit until 500
    second = async_send_steps(strategy, tp, cfg, "T", 100, semaphore=sem)
    call2 = _next_call(second)
    assert (call2.start_ms, call2.timeout_ms) == (500, 2600)  # waited 400 ms for the permit
    _finish(second, Outcome.ok(3_000))
    # the permit is busy until 3500: a send with a 1 s budget at 600 gives up waiting at 1600
    transport = _transport({"broker-a": _ok()})
    third = send_async(
        strategy,
        tp,
        SendConfig(version=cfg.version, send_msg_timeout_ms=1_000),
        "T",
        600,
        transport,
        semaphore=sem,
    )
    assert transport.calls == [] and len(third.attempts) == 1
    assert third.attempts[0].outcome == Outcome.remoting_error("timeout", 1_000)
    assert (
        isinstance(third.error, ClientError)
        and third.error.error_message == "wait response timeout, cost=1000"
    )


def test_async_semaphore_permit_released_by_the_callback_is_waited_for_as_the_driver_says() -> None:
    # rocketmq-all-4.9.8 NettyRemotingAbstract.executeInvokeCallback: an answer's permit is released in the
    # callback task's finally (ResponseFuture.release); scanResponseTable releases before the callback;
    # invokeAsyncImpl's tryAcquire(timeoutMillis) blocks the calling thread (a fair semaphore: in order)
    strategy, tp, cfg = _setup("4.9.8", {"broker-a": 4})
    sem = AsyncSemaphore(permits=1, callback_releases=True)
    first = async_send_steps(strategy, tp, cfg, "T", 0, semaphore=sem)
    assert isinstance(_next_call(first), Call)
    step = first.send(Outcome.ok(500))
    while step.action != Action.CALLBACK:
        step = first.send(Resume(step.at_ms, "t"))
    assert step.permit and sem.in_flight(10_000) == 1  # held past the answer: the driver releases it
    second = async_send_steps(strategy, tp, cfg, "T", 100, semaphore=sem)
    wait = next(second)
    while wait.action != Action.PERMIT:
        wait = second.send(Resume(wait.at_ms, "t"))
    assert isinstance(wait, Step) and (wait.action, wait.wait_ms) == (Action.PERMIT, 3000)
    sem.wait("second")
    assert sem.try_acquire(150, 3000) == WAITS  # one waits already: the next waits behind it
    assert sem.next_granted(600) is None
    sem.release_open(700)  # the first's callback ran until 700
    assert sem.next_granted(650) is None and sem.next_granted(700) == "second"
    call = second.send(Resume(700))
    assert isinstance(call, Call) and (call.start_ms, call.timeout_ms) == (700, 2400)
    sem.wait("third")
    assert sem.give_up("third") and not sem.give_up("third")  # its timeout: refused once
    without = AsyncSemaphore(permits=1)  # a callback that costs nothing: released at the answer
    without.hold_until(500)
    assert without.try_acquire(100, 3000) == 500


# ---- ONEWAY -----------------------------------------------------------------------------------


def test_oneway_makes_one_attempt_and_never_retries() -> None:
    # 4.9.8 NettyRemotingClient.invokeOneway: getAndCreateChannel connects in the caller's thread and
    # throws RemotingConnectException; sendDefaultImpl catches it (updateFaultItem(b, elapsed, true)), ONEWAY
    # has timesTotal = 1: "Send [1] times, still failed", CONNECT_BROKER_EXCEPTION (10001).
    strategy, tp, cfg = _setup("4.9.8", {"broker-a": 2, "broker-b": 2}, fault=True)
    transport = _transport({"broker-a": _connect_refused(), "broker-b": _connect_refused()})
    rec = send_oneway(strategy, tp, cfg, "TopicTest", 0, transport)
    assert len(rec.attempts) == 1 and len(transport.calls) == 1
    assert isinstance(rec.error, SendFailedError) and rec.error.response_code == 10001
    assert rec.error.error_message.startswith("Send [1] times, still failed, cost [3]ms")
    upd = rec.attempts[0].fault_update
    assert upd is not None and (upd.latency, upd.isolation) == (3, True)
    silent = send_oneway(
        strategy, tp, cfg, "TopicTest", 10, _transport({"broker-a": _code(2), "broker-b": _code(2)})
    )
    assert silent.error is None and silent.result is None  # no response, no result: the error is unseen
    assert silent.end_ms == 10
    # invokeOnewayImpl's writeAndFlush listener only logs a failed write: unseen in 4.9.8 too
    unwritten = send_oneway(
        strategy,
        tp,
        cfg,
        "TopicTest",
        20,
        _transport(
            {b: lambda b, s, t: Outcome.remoting_error("send_request", 4) for b in ("broker-a", "broker-b")}
        ),
    )
    assert unwritten.error is None and unwritten.end_ms == 20


def test_5_3_3_oneway_to_a_dead_broker_is_silent() -> None:
    # 5.3.3 NettyRemotingClient.invokeOneway: getAndCreateChannelAsync returns at once; the connect future's
    # listener writes when connected and has no else branch: a failed connect drops the request silently.
    # sendDefaultImpl then sees sendKernelImpl return null: updateFaultItem(b, end - beginTimestampPrev (~0),
    # false, true) and `case ONEWAY: return null`.
    strategy, tp, cfg = _setup("5.3.3", {"broker-a": 2}, fault=True)
    strategy.update_fault_item("broker-a", 3000, True, 0, False)  # isolated 10 s, unreachable
    rec = send_oneway(strategy, tp, cfg, "TopicTest", 1000, _transport({"broker-a": _connect_refused()}))
    assert rec.error is None and rec.result is None and rec.end_ms == 1000
    (att,) = rec.attempts
    assert att.outcome is not None and att.outcome.label == "remoting:connect"  # the row keeps what happened
    upd = att.fault_update
    assert upd is not None and (upd.broker, upd.latency, upd.isolation, upd.reachable) == (
        "broker-a",
        0,
        False,
        True,
    )
    item = strategy.table.get("broker-a")
    assert item is not None and item.reachable and not strategy.table.is_available("broker-a", 1000)


@pytest.mark.parametrize("mode", [send_sync, send_oneway])
def test_no_writable_queue_is_no_route_info(mode: Callable[..., object]) -> None:
    strategy, _, cfg = _setup("4.9.8", {"broker-a": 1})
    index = ThreadLocalIndex.shared(LINE_4_9_8, SplitMixIntSource(3))
    read_only = topic_publish_info("T", TopicRouteData.simple({"broker-a": 4}, perm=4), index)
    rec = mode(strategy, read_only, cfg, "T", 0, _transport({}))
    assert rec.label == "thrown:MQClientException:10005" and rec.attempts == ()
    assert (
        str(rec.error)
        == "No route info of this topic: T\nSee http://rocketmq.apache.org/docs/faq/ for further details."
    )


# ---- selector (ordered) sends ------------------------------------------------------------------------


def _sequence(*outcomes: Outcome):
    """A transport answering with ``outcomes`` in order, recording (attempt, broker, queue, start)."""
    calls: list[tuple[int, str, int, int]] = []
    left = list(outcomes)

    def transport(attempt: int, broker: str, queue_id: int, start_ms: int, timeout_ms: int) -> Outcome:
        calls.append((attempt, broker, queue_id, start_ms))
        return left.pop(0)

    transport.calls = calls  # type: ignore[attr-defined]
    return transport


def test_ordered_async_retries_the_same_queue() -> None:
    # Upstream 4.9.8 DefaultMQProducerImpl.sendSelectImpl calls sendKernelImpl with topicPublishInfo = null
    # and never updateFaultItem; MQClientAPIImpl.sendMessageAsync's callback updates the fault table
    # (send failed: isolation true; success: false) and onExceptionImpl keeps `retryBrokerName =
    # brokerName` when topicPublishInfo is null and reuses the request (same queue id), up to
    # retryTimesWhenSendAsyncFailed.
    failed = Outcome.remoting_error("send_request", 5)
    for retries, outcomes in ((2, (failed, failed, Outcome.ok(5))), (1, (failed, failed))):
        strategy, tp, cfg = _setup("4.9.8", {"broker-a": 4, "broker-b": 4}, fault=True)
        cfg = SendConfig(version=cfg.version, retry_times_when_send_async_failed=retries)
        transport = _sequence(*outcomes)
        rec = run_steps(ordered_send_steps(strategy, tp, cfg, "TopicTest", 0, 2, "async"), transport)
        assert [(b, q) for _, b, q, _ in transport.calls] == [("broker-a", 2)] * len(outcomes)
        updates = [(u.broker, u.latency, u.isolation) for a in rec.attempts if (u := a.fault_update)]
        assert rec.dispatch_update is None
        if retries == 2:
            assert updates == [("broker-a", 5, True), ("broker-a", 5, True), ("broker-a", 5, False)]
            assert rec.result is not None and (rec.result.broker, rec.result.queue_id) == ("broker-a", 2)
            assert rec.result.status == "SEND_OK" and rec.end_ms == 15
        else:
            assert updates == [("broker-a", 5, True), ("broker-a", 5, True)]
            assert isinstance(rec.error, ClientError) and rec.error.error_message == "send request failed"


def test_ordered_oneway_returns_after_the_write() -> None:
    # Upstream sendOneway(msg, selector, arg) -> sendSelectImpl(.., ONEWAY, ..) -> sendKernelImpl ->
    # invokeOneway; `return null`: no result, no fault update, the broker's time is not waited for.
    strategy, tp, cfg = _setup("4.9.8", {"broker-a": 4, "broker-b": 4}, fault=True)
    rec = run_steps(
        ordered_send_steps(strategy, tp, cfg, "TopicTest", 100, 2, "oneway"), _sequence(Outcome.ok(700))
    )
    (att,) = rec.attempts
    assert rec.mode == "oneway" and rec.result is None and rec.error is None
    assert rec.end_ms == att.end_ms == 100 and att.fault_update is None
    assert len(strategy.table) == 0
    # 4.9.8's synchronous connect failure is thrown raw (sendSelectImpl does not wrap it)
    refused = run_steps(
        ordered_send_steps(strategy, tp, cfg, "TopicTest", 200, 2, "oneway"),
        _sequence(Outcome.remoting_error("connect", 1)),
    )
    assert refused.end_ms == 201 and str(refused.error) == "connect to broker-a failed"


# ---- ASYNC: late answers, the client's threads, the retried request -----------------------------------


def _slow(latency: int) -> Behaviour:
    """A broker that answers SEND_OK after ``latency`` ms: past the timeout, a SYNC call has given up."""
    return lambda b, s, t: (
        replace(Outcome.remoting_error("timeout", t + 1), late=Outcome.ok(latency))
        if latency >= t
        else Outcome.ok(latency)
    )


def test_late_async_response_before_the_scan_is_a_success() -> None:
    # NettyRemotingAbstract.processResponseCommand (4.9.8 and 5.3.3) has no timeout check: an answer whose
    # ResponseFuture is still in responseTable runs the callback as any answer (onSuccess, then
    # updateFaultItem(b, now - begin, false)); scanResponseTable removes a future only once
    # `begin + timeoutMillis + 1000 <= now` (4.9.8 NettyRemotingClient.start: a Timer, first run 3000 ms
    # after start, then every 1000 ms). Send at 500, timeout 3000: the scan would fail it at 5000.
    strategy, tp, cfg = _setup("4.9.8", {"broker-a": 2}, fault=True)
    rec = send_async(strategy, tp, cfg, "TopicTest", 500, _transport({"broker-a": _slow(3600)}))
    assert rec.result is not None and rec.result.status == "SEND_OK" and rec.end_ms == 4100
    (att,) = rec.attempts
    assert att.outcome == Outcome.ok(3600) and att.flow == "return"
    upd = att.fault_update
    # 3600 ms is in 4.9's [3000, 15000) band: not available for 180 s
    assert upd is not None and (upd.broker, upd.latency, upd.isolation, upd.duration) == (
        "broker-a",
        3600,
        False,
        180_000,
    )
    # an answer after 4600 ms comes after the scan (5000): the timeout; 4.9 then retries with no budget
    strategy, tp, cfg = _setup("4.9.8", {"broker-a": 2}, fault=True)
    late = send_async(strategy, tp, cfg, "TopicTest", 500, _transport({"broker-a": _slow(4600)}))
    assert late.attempts[0].end_ms == 5000 and late.attempts[0].outcome.label == "remoting:timeout"
    assert isinstance(late.error, RemotingTooMuchRequestError)
    assert late.error.message == "invokeAsync call the addr[broker-a] timeout"


def _read_at(steps, read_ms: int, ticks: list[int]):  # noqa: ANN001, ANN202 - a send generator, and one
    """``steps`` with its answer read by the client at ``read_ms`` (its Netty threads behind): the scan's
    tick (``Step.scan_ms``, kept in ``ticks``) fails it if the read is not before it."""
    item = next(steps)
    while True:
        if isinstance(item, Step) and item.scan_ms >= 0:
            ticks.append(item.scan_ms)
            scanned = read_ms >= item.scan_ms
            value = Resume(item.scan_ms if scanned else read_ms, "cb", scanned=scanned)
        else:
            value = yield item
        try:
            item = steps.send(value)
        except StopIteration as stop:
            return stop.value


def test_an_answer_the_client_reads_after_the_scan_is_the_scans_failure_and_stored() -> None:
    # 4.9.8: only NettyRemotingAbstract.processResponseCommand (on the channel's worker, after the
    # selector's read and the decoding) takes the ResponseFuture out of responseTable; scanResponseTable
    # (NettyRemotingClient.start: from 3 s, every 1 s) removes one once begin + timeoutMillis + 1000 <= now
    # and runs its callback: MQClientAPIImpl.sendMessageAsync's operationComplete, no response, isTimeout:
    # "wait response timeout", onExceptionImpl's retry with timeoutMillis - cost < 0, and
    # NettyRemotingClient.invokeAsync throws RemotingTooMuchRequestException("invokeAsync call the addr[..]
    # timeout"). The broker answered (and stored) at 200 ms; the scan's tick for a send at 500 is 5000.
    stored = replace(Outcome.ok(200), stored=True, store_ms=150)
    late = replace(Outcome.remoting_error("timeout", 3001), stored=True, store_ms=3500, late=Outcome.ok(3600))

    def send(answer: Outcome, read_ms: int) -> tuple[SendRecord, list[int], list]:
        strategy, tp, cfg = _setup("4.9.8", {"broker-a": 2})
        transport, ticks = _transport({"broker-a": lambda b, s, t: answer}), []
        steps = _read_at(async_send_steps(strategy, tp, cfg, "TopicTest", 500), read_ms, ticks)
        return run_steps(steps, transport), ticks, transport.calls

    for read_ms, ok in ((4999, True), (5000, False), (7400, False)):
        rec, ticks, calls = send(stored, read_ms)
        assert ticks == [5000] and len(calls) == 1
        first = rec.attempts[0]
        assert first.outcome.stored and first.start_ms + first.outcome.store_ms == 650
        if ok:  # read in time: as today, a success (at its read)
            assert rec.result is not None and rec.end_ms == 4999 and first.outcome == stored
            continue
        assert first.end_ms == 5000 and first.outcome.label == "remoting:timeout"
        assert first.outcome.latency_ms == 3001 and first.outcome.late == stored
        assert [a.outcome.label for a in rec.attempts[1:]] == ["remoting:too_many_requests"] * 2
        assert isinstance(rec.error, RemotingTooMuchRequestError)
        assert rec.error.message == "invokeAsync call the addr[broker-a] timeout"
    # a late answer (past the timeout, before the scan) read in time is a late success; after the tick, the
    # scan's failure too
    rec, ticks, _ = send(late, 4800)
    assert ticks == [5000] and rec.result is not None and rec.end_ms == 4800
    rec, ticks, _ = send(late, 5200)
    assert ticks == [5000] and rec.attempts[0].outcome == late and rec.result is None
    # no answer (the scan's own failure): nothing to read, no tick handed over
    rec, ticks, _ = send(Outcome.remoting_error("timeout", 3001), 0)
    assert ticks == [] and rec.attempts[0].end_ms == 5000


def test_late_sync_response_is_a_timeout() -> None:
    # 4.9.8 NettyRemotingAbstract.invokeSyncImpl: waitResponse(timeoutMillis), then `finally
    # responseTable.remove(opaque)`: the late answer matches no request and is dropped (logged); the caller
    # already has its RemotingTimeoutException.
    strategy, tp, cfg = _setup("4.9.8", {"broker-a": 2})
    rec = send_sync(strategy, tp, cfg, "TopicTest", 500, _transport({"broker-a": _slow(3600)}))
    assert [a.outcome.label for a in rec.attempts if a.sent] == ["remoting:timeout"]
    assert rec.attempts[0].outcome.latency_ms == 3001
    assert isinstance(rec.error, RemotingTooMuchRequestError)  # no budget left for a second attempt


def test_response_scan_timer_per_version() -> None:
    # 4.9.8 NettyRemotingClient.start: timer.scheduleAtFixedRate(scanResponseTable, 1000 * 3, 1000).
    # 5.3.3: a HashedWheelTimer (100 ms ticks): newTimeout(task, 1000 * 3) runs at the end of the tick
    # holding 3000 (3100), and the task re-arms itself with newTimeout(this, 1000) after each run: 4200,
    # 5300, ... A request sent at 500 with 3000 ms is due at 4500.
    assert ResponseScan.for_version(parse_version("4.9.8")).timeout_fired_ms(500, 3000) == 5000
    assert ResponseScan.for_version(parse_version("5.3.3")).timeout_fired_ms(500, 3000) == 5300
    strategy, tp, cfg = _setup("5.3.3", {"broker-a": 2})
    rec = send_async(strategy, tp, cfg, "TopicTest", 500, _transport({"broker-a": _hang()}))
    assert rec.end_ms == 5300 and rec.error.error_message == "wait response timeout, cost=4800"
    # the client started 400 ms before the schedule's 0 (producers.response_scan_offset_ms): the 4.9.8
    # timer's ticks at 2600, 3600, 4600, ...; the 5.3.3 wheel's at 2700, 3800, 4900, ... on the schedule's
    # clock
    assert ResponseScan.for_version(parse_version("4.9.8"), 400).timeout_fired_ms(500, 3000) == 4600
    assert ResponseScan.for_version(parse_version("5.3.3"), 400).timeout_fired_ms(500, 3000) == 4900


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_async_selects_on_the_executor_thread_and_retries_on_the_callback_thread(version: str) -> None:
    # DefaultMQProducerImpl.send(msg, callback, timeout) submits sendDefaultImpl to the async sender
    # executor: the first selectOneMessageQueue runs on an AsyncSenderExecutor thread, with that thread's
    # ThreadLocalIndex. MQClientAPIImpl.onExceptionImpl selects the retry's queue on the thread that runs
    # the failed request's callback (NettyClientPublicExecutor_N): its own index, which starts at its own
    # random value. The application thread's index is never used (real-client traces R22, R24).
    strategy, tp, cfg = _setup(version, {"broker-a": 4, "broker-b": 4})
    failed: Behaviour = lambda b, s, t: Outcome.remoting_error("send_request", 4)  # noqa: E731
    index = tp.send_which_queue
    for k in range(8):
        rec = send_async(
            strategy, tp, cfg, "TopicTest", 10 * k, _transport({"broker-a": failed, "broker-b": _ok()})
        )
        assert rec.result is not None
    assert index.value(0) is None  # the application thread never selects for an ASYNC send
    executor, callback = index.value(executor_thread(1)), index.value(callback_thread(1))
    assert executor is not None and callback is not None
    # eight first selections moved the executor's index by eight (round robin, fault tolerance off)
    strategy2, tp2, _ = _setup(version, {"broker-a": 4, "broker-b": 4})
    first = tp2.send_which_queue.increment_and_get(executor_thread(1))
    assert executor & 0x7FFFFFFF == (first + 7) & 0x7FFFFFFF


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_async_retry_keeps_the_first_queue_id(version: str) -> None:
    # MQClientAPIImpl.onExceptionImpl (4.9.8 and 5.3.3): the retry selects a queue only for its broker
    # (retryBrokerName = mqChosen.getBrokerName()), then reuses the request (`request.setOpaque(
    # RemotingCommand.createNewRequestId())`): its header keeps the first selection's queueId. 5.3.3 trace
    # R24: the retry to broker-a carried queue id 0, broker-b/0's.
    strategy, tp, cfg = _setup(version, {"broker-a": 4, "broker-b": 4})
    retried = 0
    for k in range(16):
        transport = _sequence(Outcome.remoting_error("send_request", 4), Outcome.ok(5))
        rec = send_async(strategy, tp, cfg, "TopicTest", 20 * k, transport)
        (b0, q0), (b1, q1) = [(b, q) for _, b, q, _ in transport.calls]
        assert b1 != b0 and q1 == q0  # another broker (fault off: not the last one), the same queue id
        assert rec.result is not None and (rec.result.broker, rec.result.queue_id) == (b1, q0)
        assert [a.queue_id for a in rec.attempts] == [q0, q0]
        retried += 1
    assert retried == 16


@pytest.mark.parametrize(
    ("version", "retries", "requests", "callbacks"),
    [("5.3.0", 2, 2, 2), ("5.3.1", 5, 4, 4), ("5.3.2", 2, 1, 1), ("5.2.0", 2, 3, 1)],
)
def test_a_retry_with_no_time_left_fails_twice_on_5_3_0_and_5_3_1(
    version: str, retries: int, requests: int, callbacks: int
) -> None:
    # The first request gets no answer: the response-table scan fails it after the budget is gone.
    # 5.3.0/5.3.1 MQClientAPIImpl.onExceptionImpl still retries (no `timeoutMillis > 0` guard: 5.3.2 adds
    # it), and NettyRemotingClient.invokeAsync's connect listener fails that retry twice, on the event
    # loop: operationFail(RemotingTooMuchRequestException) (updateFaultItem, onExceptionImpl: no retry, the
    # application's onException) and, with no `return` after it, invokeAsyncImpl ->
    # NettyRemotingAbstract.invoke0's failed future -> operationFail(CompletionException) ("unknown
    # reason": updateFaultItem again, onExceptionImpl retries while tries are left). 5.2.0's invokeAsync
    # throws instead: sendMessageAsync's catch retries it, one onException at the end.
    strategy, tp, cfg = _setup(version, {"broker-a": 2}, fault=True)
    cfg = replace(cfg, retry_times_when_send_async_failed=retries)
    updates: list[tuple[str, int, bool]] = []
    update = strategy.update_fault_item

    def recording(broker: str, latency: int, isolation: bool, now: int, reachable: bool = True):  # noqa: ANN202
        updates.append((broker, latency, isolation))
        return update(broker, latency, isolation, now, reachable)

    strategy.update_fault_item = recording  # type: ignore[method-assign]
    transport = _transport({"broker-a": _hang()})
    rec = send_async(strategy, tp, cfg, "TopicTest", 500, transport, scan=ResponseScan(3_000, 1_000))
    assert len(transport.calls) == 1 and len(rec.attempts) == requests
    refused = rec.attempts[1:]
    assert all(a.outcome.label == "remoting:too_many_requests" for a in refused)
    assert 1 + len(rec.again) == callbacks
    twice = parse_version(version).fails_late_async_request_twice and requests > 1
    if twice:  # the send's row is the first onException's, at the scan
        assert rec.end_ms == 5_000 and rec.error.error_message == "unknown reason"
        assert all(e.error_message == "unknown reason" for e in rec.again)
        # the dispatch, the scan's failure, then two isolating updates per refused request
        assert updates[2:] == [("broker-a", 0, True)] * (2 * len(refused))
        # a retry the second failure makes selects on the event loop, with the loop's own index
        assert (tp.send_which_queue.value(IO_THREAD) is not None) == (len(refused) > 1)
    else:
        assert len(updates) == 2 + len(refused)
