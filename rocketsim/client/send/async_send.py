"""ASYNC: ``send(msg, callback, timeout)`` -> ``sendDefaultImpl(ASYNC)`` (one selection) ->
``MQClientAPIImpl.sendMessageAsync`` / ``onExceptionImpl``, as :func:`async_send_steps` tells; with the
async semaphore (:class:`AsyncSemaphore`) and the response-table scan (:class:`ResponseScan`) it meets.
"""

# Mirrored by engine/compiled.py (see rocketsim/client/send/__init__.py); tests/test_engines.py compares them.

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Generator
from dataclasses import dataclass, replace

from rocketsim.client.fault import FaultStrategy, FaultUpdate, Site, ThreadKey
from rocketsim.client.outcomes import Catch, OutcomeKind
from rocketsim.client.route import QueueSlot, TopicPublishInfo
from rocketsim.client.send.errors import (
    ClientError,
    Failure,
    MQBrokerError,
    RemotingConnectError,
    RemotingTooMuchRequestError,
    SendInterruptedError,
    async_call_timeout_error,
    broker_not_exist_error,
    executor_rejected_error,
    invoke_async_timeout_error,
    invoke_too_fast_error,
    no_route_error,
    semaphore_timeout_error,
    send_failed_error,
    wait_response_timeout_text,
)
from rocketsim.client.send.records import (
    AttemptHook,
    AttemptRecord,
    Call,
    Outcome,
    SendConfig,
    SendRecord,
    SendResult,
    Transport,
)
from rocketsim.client.send.steps import (
    IO_THREAD,
    ON_EXCEPTION,
    Action,
    Pool,
    Resume,
    Step,
    Steps,
    StepsTo,
    run_steps,
)
from rocketsim.client.versions import ClientVersion
from rocketsim.errors import ConfigError

# ---- ASYNC --------------------------------------------------------------------------------------------

ASYNC_SEMAPHORE_PERMITS = 65535  # NettySystemConfig.CLIENT_ASYNC_SEMAPHORE_VALUE
# 4.3-4.8 onExceptionImpl: a retry that fails to connect isolates the previous broker with latency 3000
RETRY_CONNECT_FAILURE_LATENCY_MS = 3000


WAITS = -1  # AsyncSemaphore.try_acquire: the thread waits for a permit the driver grants (Action.PERMIT)


class AsyncSemaphore:
    """``NettyRemotingAbstract.semaphoreAsync`` (fair, 65535 permits) in simulated time.

    Each dispatched request holds a permit until its release; an acquisition waits up to the request's
    timeout for the earliest release. Acquisitions are served in the order they are asked for, which
    matches upstream's fairness when the driver asks in time order. Where 4.9.8 releases it
    (``SemaphoreReleaseOnlyOnce`` in the ``ResponseFuture``): an answer's after its callback ran
    (``executeInvokeCallback``: the callback task's ``finally``), a request the scan fails at the scan's
    tick before its callback (``scanResponseTable``), a failed write at once (``requestFail``). A callback
    that costs nothing runs at the answer's arrival, so the release is known when the request is
    dispatched (:meth:`hold_until`). With ``callback_releases`` the client's threads read the answer and
    run the callback later: the driver releases an answered request's permit when its callback has run
    (:meth:`hold_open`, :meth:`release_open`), and a thread that finds none free waits as the driver
    decides (``try_acquire`` answers :data:`WAITS`; :meth:`wait`, :meth:`next_granted`, :meth:`give_up`).
    """

    def __init__(self, permits: int = ASYNC_SEMAPHORE_PERMITS, *, callback_releases: bool = False) -> None:
        if permits < 1:
            raise ConfigError(f"async_semaphore_permits must be >= 1, got {permits}")
        self.permits = permits
        self.callback_releases = callback_releases
        self._releases: list[int] = []
        self.open = 0  # permits held by answered requests whose callback has not run yet
        self.waiters: deque[object] = deque()  # the threads waiting in tryAcquire, in the order they came

    def in_flight(self, now: int) -> int:
        while self._releases and self._releases[0] <= now:
            heapq.heappop(self._releases)
        return len(self._releases) + self.open

    def try_acquire(self, now: int, wait_ms: int) -> int | None:
        """The time a permit is granted (``now`` if one is free), None if none frees within ``wait_ms``,
        :data:`WAITS` if that depends on releases not yet known (the thread waits: :meth:`wait`)."""
        if not self.waiters and self.in_flight(now) < self.permits:
            return now
        if wait_ms <= 0:
            return None
        if self.open or self.waiters:
            return WAITS
        if self._releases[0] <= now + wait_ms:
            return heapq.heappop(self._releases)
        return None

    def hold_until(self, release_ms: int) -> None:
        heapq.heappush(self._releases, release_ms)

    def hold_open(self) -> None:
        """A request holds a permit until the driver says when (:meth:`release_open`)."""
        self.open += 1

    def release_open(self, at_ms: int) -> None:
        self.open -= 1
        heapq.heappush(self._releases, at_ms)

    def next_release(self) -> int | None:
        """The earliest known release (a waiter may be granted then)."""
        return self._releases[0] if self._releases else None

    def wait(self, waiter: object) -> None:
        self.waiters.append(waiter)

    def next_granted(self, now: int) -> object | None:
        """The first waiting thread, if a permit is free at ``now`` (it then holds it: its request's)."""
        if self.waiters and self.in_flight(now) < self.permits:
            return self.waiters.popleft()
        return None

    def give_up(self, waiter: object) -> bool:
        """``waiter``'s wait ended with no permit: False if it had one already."""
        try:
            self.waiters.remove(waiter)
        except ValueError:
            return False
        return True


@dataclass(frozen=True)
class ResponseScan:
    """``NettyRemotingClient``'s ``scanResponseTable`` timer: first 3 s after start, then every second
    (the client starts at simulated 0, or ``producers.response_scan_offset_ms`` before it: the ticks that
    much earlier).

    An async request that gets no answer is failed by the scan once ``begin + timeout + 1000 <= now``,
    so its callback fires up to two seconds after the timeout (sync calls wait exactly the timeout). An
    answer the client reads before that (``processResponseCommand``, after its Netty threads' read and
    decoding: the driver's ``Step.scan_ms``) is taken as any other (no timeout check): a late success; one
    read after it finds no future: the scan's failure, the message stored.
    """

    first_ms: int = 3000
    period_ms: int = 1000

    @classmethod
    def for_version(cls, version: ClientVersion, offset_ms: int = 0) -> ResponseScan:
        """The scan timer of ``version``'s client (4.9.x every 1000 ms from 3000, 5.x every 1100 ms
        from 3100: :attr:`rocketsim.client.versions.ClientVersion.response_scan_first_ms`), the client
        started ``offset_ms`` before the schedule's 0. Both engines' ticks (the compiled engine's
        ``scan_first_ms``, ``scan_period_ms``)."""
        return cls(version.response_scan_first_ms - offset_ms, version.response_scan_period_ms)

    def timeout_fired_ms(self, begin_ms: int, timeout_ms: int) -> int:
        due = begin_ms + timeout_ms + 1000
        if due <= self.first_ms:
            return self.first_ms
        return self.first_ms + -(-(due - self.first_ms) // self.period_ms) * self.period_ms


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
    ``rejected``: ``send`` throws "executor rejected " and nothing is sent; 4.3.x submits it to the
    callback executor, unbounded: ``ClientVersion.async_sends_on_callback_executor``, the driver answers
    with a callback thread and never rejects). That thread checks ``timeout
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
      invokeAsync call the addr[..] timeout``), 5.x does not retry. An answer read after the timeout but
      before the scan is taken as any answer (``processResponseCommand`` has no timeout check):
      ``outcome.late``, e.g. a success after 3600 ms, ``updateFaultItem(b, 3600, false)``; an answer
      (late or not) read after the scan's tick is the scan's failure (the driver's ``Resume.scanned``).
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
    send = _AsyncSend(strategy, tp, cfg, topic, begin_ms, semaphore, scan, on_attempt, selected)
    return (yield from send.steps())


@dataclass
class _Request:
    """One request of an ASYNC send: when ``sendMessageAsync`` began, when the request went out (or was
    refused), its timeout, and what came of it (a late answer replaces a timeout: :class:`ResponseScan`)."""

    call_begin: int
    start: int
    call_timeout: int
    outcome: Outcome
    refused: Failure | None  # the client gave up before sending anything
    no_time_left: bool = False  # refused by invokeAsync's ``timeoutMillis < costTime``


@dataclass(frozen=True)
class _Failed:
    """What ``onExceptionImpl`` is handed: the error, whether it may retry, the update made, and when."""

    error: Failure
    need_retry: bool
    upd: FaultUpdate | None
    now: int


class _AsyncSend:
    """One ASYNC send in progress: the locals ``sendDefaultImpl``, the request chain of ``onExceptionImpl``
    and the callbacks share, and the parts of :func:`async_send_steps` as generators over them (each part
    yields its steps in upstream's order; ``now`` and ``thread`` are the clock and thread the send is at)."""

    def __init__(
        self,
        strategy: FaultStrategy,
        tp: TopicPublishInfo | None,
        cfg: SendConfig,
        topic: str,
        begin_ms: int,
        semaphore: AsyncSemaphore | None,
        scan: ResponseScan | None,
        on_attempt: AttemptHook,
        selected: QueueSlot | None,
    ) -> None:
        self.strategy, self.tp, self.cfg, self.topic, self.begin_ms = strategy, tp, cfg, topic, begin_ms
        self.semaphore, self.on_attempt, self.selected = semaphore, on_attempt, selected
        self.version = cfg.version
        self.line = strategy.line
        self.scan = scan or ResponseScan.for_version(self.version, cfg.response_scan_offset_ms)
        self.attempts: list[AttemptRecord] = []
        self.now = self.exec_ms = begin_ms
        self.thread: ThreadKey | None = None
        self.first: QueueSlot | None = None  # the first selection (sendDefaultImpl's mq)
        self.brokers_sent: tuple[str | None, ...] = ()
        self.select_ms = begin_ms  # sendDefaultImpl's beginTimestampPrev
        self.dispatch_update: FaultUpdate | None = None
        self.in_sync_part = False  # still inside sendDefaultImpl's sendKernelImpl call (none: no update)
        self.broker = ""
        self.queue_id = 0  # every retry reuses the request: its queue id too
        self.req_timeout = 0
        self.cur_times = 0  # onExceptionImpl's AtomicInteger
        self.attempt = 0
        self.last: str | None = None
        self.wait_timeout: tuple[int, int] | None = None  # (beginStartTime, timeout) of a scan-failed request
        # 5.3.0-5.3.1's double failure: the first onException's (time, error), the later ones' errors
        self.first_end: tuple[int, Failure] | None = None
        self.again: list[Failure] = []

    def steps(self) -> Steps:
        go = yield Step(Action.EXECUTE, self.begin_ms, pool=Pool.EXECUTOR)
        if go.rejected:  # send() threw it in the caller's thread: no task, no request, no callback
            error = executor_rejected_error(self.version)
            return SendRecord("async", self.topic, self.begin_ms, go.now_ms, (), None, error, ())
        if go.refused is not None:  # executeAsyncMessageSend: no backpressure permit, callback.onException
            return SendRecord("async", self.topic, self.begin_ms, go.now_ms, (), None, go.refused, ())
        self.now, self.thread = go.now_ms, go.thread
        self.exec_ms = self.now
        end = yield from self.begin()
        while end is None:
            end = yield from self.one_request()
        return end

    def record(
        self,
        end: int,
        result: SendResult | None,
        error: Failure | None,
        sent: tuple[str | None, ...],
        upd: FaultUpdate | None = None,
    ) -> SendRecord:
        attempts, again = tuple(self.attempts), ()
        if self.first_end is not None:  # onException ran more than once: the record is the first's
            (end, first), again = self.first_end, (*self.again, error)
            error = first
        return SendRecord(
            "async", self.topic, self.begin_ms, end, attempts, result, error, sent, upd, self.exec_ms, again
        )

    def done(self, req: _Request, upd: FaultUpdate | None, flow: str, t: int) -> None:
        """Record the attempt ``req`` as it ended at ``t`` (the broker's isolation as of then)."""
        iso = self.strategy.isolated_until(self.broker, t)
        rec = AttemptRecord(
            self.attempt,
            self.last,
            False,
            req.start,
            self.broker,
            self.queue_id,
            req.call_timeout,
            req.outcome,
            upd,
            flow,
            iso,
            t,
        )
        self.attempts.append(rec)
        if self.on_attempt is not None:
            self.on_attempt(rec)

    def begin(self) -> StepsTo[SendRecord | None]:
        """The executor task: its ``timeout > costTime`` check, the route, the first selection."""
        now, version = self.now, self.version
        # sendDefaultImpl(.., timeout - costTime)
        timeout = self.cfg.send_msg_timeout_ms - (now - self.begin_ms)
        if not timeout > 0:  # the executor task's `timeout > costTime` check
            now = (yield Step(Action.RESULT, now, self.thread)).now_ms
            return self.record(now, None, async_call_timeout_error(self.selected is not None), ())
        if self.selected is None and (self.tp is None or not self.tp.ok()):
            now = (yield Step(Action.RESULT, now, self.thread)).now_ms
            return self.record(now, None, no_route_error(self.topic, version), ())
        if self.selected is None:
            now = (yield Step(Action.SELECT, now, self.thread)).now_ms
            first = self.strategy.select_one_message_queue(self.tp, None, now, False, self.thread)  # type: ignore[arg-type]
        else:
            first = self.selected
        if first is None:  # unreachable with a non-empty queue list
            return self.record(now, None, send_failed_error(0, 0, self.topic, [None], None, version), (None,))
        self.first, self.brokers_sent = first, (first.broker_name,)
        self.now = self.select_ms = now
        self.in_sync_part = self.selected is None
        self.broker, self.queue_id = first.broker_name, first.queue_id
        self.req_timeout = timeout
        return None

    def one_request(self) -> StepsTo[SendRecord | None]:
        """A request and what it comes to: the send's record if it ends, None if it is retried."""
        req = yield from self.request()
        if req.no_time_left and self.version.fails_late_async_request_twice:
            return (yield from self.failed_twice(req))
        thrown = self.thrown_by_invoke(req)
        # a first request that fails synchronously leaves sendKernelImpl: the broker is unknown (every
        # line), or 4.3-4.8 [AR-1/2], whose sendMessageAsync has no catch
        if self.attempt == 0 and thrown is not None:
            unknown_broker = req.outcome.kind == OutcomeKind.CLIENT_ERROR and req.refused is None
            if unknown_broker or not self.line.async_catches_invoke_failure:
                return (yield from self.fail_first_request(req, thrown))
        if thrown is not None:
            failed = yield from self.invoke_failed(req, thrown)
        else:
            answered = yield from self.callback(req)
            if isinstance(answered, SendRecord):
                return answered
            failed = answered
        return (yield from self.on_exception(req, failed))

    def request(self) -> StepsTo[_Request]:
        """``sendMessageAsync`` -> ``invokeAsync``: no time left, no permit, or the request sent."""
        after = ON_EXCEPTION if self.attempt > 0 else ""  # a retry: onExceptionImpl ran just before
        begin = yield Step(Action.SEND, self.now, self.thread, source=after)
        now = call_begin = begin.now_ms  # its beginStartTime
        self.now = now
        self.wait_timeout = None
        refused: Failure | None = None
        # invokeAsync: timeoutMillis < costTime (every line; 5.3.0+ in its connect listener)
        if self.req_timeout < 0:
            refused = invoke_async_timeout_error(self.broker, self.line)
            outcome, start = Outcome.remoting_error("too_many_requests", 0), now
        else:
            grant = now if self.semaphore is None else self.semaphore.try_acquire(now, self.req_timeout)
            if grant == WAITS:  # tryAcquire blocks this thread until a permit or the timeout
                go = yield Step(Action.PERMIT, now, self.thread, wait_ms=self.req_timeout)
                grant = None if go.rejected else go.now_ms
            if grant is None and self.req_timeout <= 0:
                refused = invoke_too_fast_error()
                outcome, start = Outcome.remoting_error("too_many_requests", 0), now
            elif grant is None:
                refused = semaphore_timeout_error(self.req_timeout)
                outcome, start = Outcome.remoting_error("timeout", self.req_timeout), now
            else:
                start = grant
                timeout = self.req_timeout - (grant - now)
                outcome = yield Call(self.attempt, self.broker, self.queue_id, grant, timeout, "async")
        left = self.req_timeout - (start - call_begin)
        return _Request(call_begin, start, left, outcome, refused, self.req_timeout < 0)

    def thrown_by_invoke(self, req: _Request) -> Failure | None:
        """The failure thrown out of ``invokeAsync`` (caught by ``sendMessageAsync``'s catch), if any."""
        kind, line = req.outcome.kind, self.line
        if req.refused is not None:
            return None if line.remoting_completes_futures else req.refused
        if kind == OutcomeKind.CLIENT_ERROR:
            return broker_not_exist_error(self.broker, self.version)
        if not line.remoting_completes_futures and kind == OutcomeKind.REMOTING_CONNECT:
            return RemotingConnectError(f"connect to {self.broker} failed")
        if not line.remoting_completes_futures and kind == OutcomeKind.INTERRUPTED:
            return SendInterruptedError("interrupted")
        return None

    def fail_first_request(self, req: _Request, thrown: Failure) -> StepsTo[SendRecord]:
        """The first request's synchronous failure out of ``sendKernelImpl``: ``sendSelectImpl`` throws it
        to the runnable's onException (no update); ``sendDefaultImpl`` catches it, updates, and ends with
        "Send [1] times" to the runnable's onException."""
        first, failed_ms = self.first, req.start + req.outcome.latency_ms
        assert first is not None
        if self.selected is not None:
            now = (yield Step(Action.RESULT, failed_ms, self.thread)).now_ms
            self.done(req, None, "callback:onException", now)
            return self.record(now, None, thrown, self.brokers_sent)
        now = (yield Step(Action.UPDATE, failed_ms, self.thread, source="sync_failure")).now_ms
        self.strategy.advance_to(now)
        upd = self.strategy.record_outcome(
            Site.SEND_DEFAULT_IMPL, req.outcome.catch, first.broker_name, now - self.select_ms, now
        )
        self.done(req, upd, f"throw:{thrown.java_class}", now)
        err = send_failed_error(1, now - self.exec_ms, self.topic, [first.broker_name], thrown, self.version)
        now = (yield Step(Action.RESULT, now, self.thread)).now_ms
        return self.record(now, None, err, self.brokers_sent)

    def invoke_failed(self, req: _Request, thrown: Failure) -> StepsTo[_Failed]:
        """A later request's synchronous failure, caught inside ``sendMessageAsync`` (4.9+) or by
        ``onExceptionImpl``'s own catch around a retry (4.3-4.8)."""
        now = req.start + req.outcome.latency_ms
        if not self.line.async_catches_invoke_failure:
            # 4.3-4.8: a RemotingException (not "too much request") isolates the broker that failed
            # before (updateFaultItem(brokerName, 3000, true)) and retries; RemotingTooMuchRequestException
            # and InterruptedException end the send
            upd = None
            need_retry = not isinstance(
                thrown, RemotingTooMuchRequestError | SendInterruptedError | ClientError
            )
            if need_retry:
                now = (yield Step(Action.UPDATE, now, self.thread, source="sync_failure")).now_ms
                self.strategy.advance_to(now)
                upd = self.strategy.update_fault_item(self.last, RETRY_CONNECT_FAILURE_LATENCY_MS, True, now)  # type: ignore[arg-type]
            return _Failed(thrown, need_retry, upd, now)
        now = (yield Step(Action.UPDATE, now, self.thread, source="sync_failure")).now_ms
        self.strategy.advance_to(now)
        upd = self.strategy.record_outcome(
            Site.SEND_MESSAGE_ASYNC_CATCH, req.outcome.catch, self.broker, now - req.call_begin, now
        )
        return _Failed(thrown, True, upd, now)

    def end_sync_part(self, t: int) -> Generator[Step, Resume, None]:
        """sendDefaultImpl's updateFaultItem(mq.getBrokerName(), end - beginTimestampPrev, false[, true]),
        once the request is dispatched (or a chain that failed synchronously returns to it)."""
        if self.in_sync_part:
            assert self.first is not None
            self.in_sync_part = False
            t = (yield Step(Action.UPDATE, t, self.thread, source="dispatch")).now_ms
            self.strategy.advance_to(t)
            self.dispatch_update = self.strategy.record_outcome(
                Site.SEND_DEFAULT_IMPL, Catch.RESULT, self.first.broker_name, t - self.select_ms, t
            )

    def callback(self, req: _Request) -> StepsTo[SendRecord | _Failed]:
        """A dispatched request: sendKernelImpl returns, and the callback runs when its answer (or the
        response-table scan) comes: onSuccess ends the send, anything else goes to onExceptionImpl."""
        yield from self.end_sync_part(req.start)
        outcome, start = req.outcome, req.start
        scan_ms = self.scan.timeout_fired_ms(start, req.call_timeout) if req.refused is None else -1
        if req.refused is None and outcome.kind == OutcomeKind.REMOTING_TIMEOUT:
            fired = scan_ms
            late = outcome.late
            if late is not None and start + late.latency_ms < fired:  # answered before the scan
                req.outcome = replace(late, stored=outcome.stored, store_ms=outcome.store_ms)
                fired = start + late.latency_ms
        else:
            fired = start + outcome.latency_ms
        by_callback = self.hold_permit(req, fired)
        kind = req.outcome.kind
        connect_listener = self.line.remoting_completes_futures and kind == OutcomeKind.REMOTING_CONNECT
        pool = Pool.IO if connect_listener else Pool.CALLBACK
        read_by = scan_ms if req.outcome.is_answer else -1  # the answer is read before the scan's tick, or
        # the scan fails it (the driver)
        go = yield Step(Action.CALLBACK, fired, pool=pool, scan_ms=read_by, permit=by_callback)
        if go.scanned:  # the answer comes, the future is gone: "wait response timeout", the message stored
            req.outcome = outcome.failed_by_scan(req.call_timeout)
        now, self.thread = go.now_ms, go.thread
        self.strategy.advance_to(now)
        if req.outcome.is_result:
            end = (yield Step(Action.RESULT, now, self.thread)).now_ms  # onSuccess, then the update
            upd, _ = yield from self.callback_update(req, Catch.RESULT, end)
            self.done(req, upd, "return", end)
            result = SendResult(req.outcome.status, self.broker, self.queue_id, self.attempt)
            return self.record(end, result, None, self.brokers_sent, self.dispatch_update)
        upd, now = yield from self.callback_update(req, req.outcome.catch, now)
        error, need_retry = self.callback_error(req)
        return _Failed(error, need_retry, upd, now)

    def hold_permit(self, req: _Request, fired: int) -> bool:
        """The dispatched request's permit, held until its callback has run (an answer) or until ``fired``
        (the scan's tick, a failed write): True when the driver releases it (:class:`AsyncSemaphore`)."""
        if self.semaphore is None or req.refused is not None:
            return False
        if self.semaphore.callback_releases and req.outcome.is_answer:
            self.semaphore.hold_open()
            return True
        self.semaphore.hold_until(fired)
        return False

    def failed_twice(self, req: _Request) -> StepsTo[SendRecord | None]:
        """5.3.0-5.3.1, a request with no time left (:attr:`ClientVersion.fails_late_async_request_twice`),
        on the Netty event loop (``invokeAsync``'s connect listener; a retry sent from the loop runs it
        there at once): ``operationFail`` (an update, then ``onExceptionImpl`` without a retry: the
        application's onException), then ``invokeAsyncImpl``'s own failure of it (``CompletionException``:
        "unknown reason", retried): an update again, and a retry or onException again."""
        if self.thread != IO_THREAD:  # sent from a callback thread: the listener is a task of the loop
            go = yield Step(Action.CALLBACK, req.start, pool=Pool.IO)
            self.now, self.thread = go.now_ms, go.thread
        self.strategy.advance_to(self.now)
        _, now = yield from self.callback_update(req, req.outcome.catch, self.now)
        self.cur_times += 1  # onExceptionImpl(needRetry = false): RemotingTooMuchRequestException
        now = (yield Step(Action.RESULT, now, self.thread)).now_ms
        error = ClientError(self.line.unknown_reason_text, self.version.faq_url)
        if self.first_end is None:
            self.first_end = (now, error)
        else:
            self.again.append(error)
        upd, now = yield from self.callback_update(req, req.outcome.catch, now)
        return (yield from self.on_exception(req, _Failed(error, True, upd, now)))

    def callback_update(
        self, req: _Request, catch: Catch, now: int
    ) -> StepsTo[tuple[FaultUpdate | None, int]]:
        """The callback's updateFaultItem: 4.9 measures from the ResponseFuture (after the permit), 5.x
        from sendMessageAsync's start."""
        now = (yield Step(Action.UPDATE, now, self.thread, source="callback")).now_ms
        lat = now - (req.call_begin if self.line.async_latency_from_call_begin else req.start)
        return self.strategy.record_outcome(Site.ASYNC_CALLBACK, catch, self.broker, lat, now), now

    def callback_error(self, req: _Request) -> tuple[Failure, bool]:
        """The error a failed callback hands ``onExceptionImpl``, and whether it may retry."""
        kind, faq_url = req.outcome.kind, self.version.faq_url
        if kind == OutcomeKind.BROKER_ERROR:
            return MQBrokerError(
                req.outcome.response_code, req.outcome.remark, self.broker, self.version
            ), False
        if kind == OutcomeKind.REMOTING_SEND_REQUEST:
            return ClientError("send request failed", faq_url), True
        if kind == OutcomeKind.REMOTING_TIMEOUT:  # its text: at the result
            self.wait_timeout = (req.call_begin, req.call_timeout)
            return ClientError("wait response timeout", faq_url), True
        # 5.x connect failure, interrupt, "invoke too fast": operationFail's last branch
        error = ClientError(self.line.unknown_reason_text, faq_url)
        return error, not isinstance(req.refused, RemotingTooMuchRequestError)

    def on_exception(self, req: _Request, failed: _Failed) -> StepsTo[SendRecord | None]:
        """``onExceptionImpl``: retry (on a newly selected broker, a selector send on its own) while retries
        and (5.x) time are left, else the callback's onException; None when it retries."""
        self.cur_times += 1
        now = failed.now
        remaining = self.req_timeout - (now - req.call_begin)
        budget_ok = remaining > 0 or not self.line.async_retry_needs_budget
        if failed.need_retry and self.cur_times <= self.cfg.retry_times_when_send_async_failed and budget_ok:
            self.done(req, failed.upd, "retry", now)
            self.last = self.broker
            if self.selected is None:  # onExceptionImpl selects again (a selector send keeps its broker)
                now = (yield Step(Action.SELECT, now, self.thread)).now_ms
                again = self.strategy.select_one_message_queue(self.tp, self.broker, now, False, self.thread)  # type: ignore[arg-type]
                if again is not None:
                    self.broker = again.broker_name
            # 4.3-4.6 [AR-1]: the retry is sent with timeoutMillis 0 (reaped by the next response scan)
            self.req_timeout = remaining if self.line.async_retry_gets_budget else 0
            self.attempt += 1
            self.now = now
            return None
        self.done(req, failed.upd, "callback:onException", now)
        end = now = (yield Step(Action.RESULT, now, self.thread, source=ON_EXCEPTION)).now_ms
        error = failed.error
        if self.wait_timeout is not None:
            # "wait response timeout " + timeoutMillis + "ms" (4.9) / ", cost=" + (now - beginStartTime)
            text = wait_response_timeout_text(self.line, now - self.wait_timeout[0], self.wait_timeout[1])
            error = ClientError(text, self.version.faq_url)
        # a chain that failed synchronously returns to sendDefaultImpl only now
        yield from self.end_sync_part(now)
        return self.record(end, None, error, self.brokers_sent, self.dispatch_update)


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
