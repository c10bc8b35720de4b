"""SYNC: ``sendDefaultImpl`` with ``timesTotal = 1 + retryTimesWhenSendFailed`` attempts.

It transcribes the ``lastBrokerName`` passed to selection, the call-timeout budget (``costTime = now -
beginTimestampFirst; if (timeout < costTime) break``), the 5.3.3+ per-request cap
``sendMsgMaxTimeoutPerRequest``, the ``updateFaultItem`` call each outcome makes in each line, the retry
response codes of each version, ``retryAnotherBrokerWhenNotStoreOK`` and the final exceptions.
"""

# Mirrored by engine/compiled.py (see rocketsim/client/send/__init__.py); tests/test_engines.py compares them.

from __future__ import annotations

from rocketsim.client.fault import FaultStrategy, Site, ThreadKey
from rocketsim.client.outcomes import Catch, OutcomeKind
from rocketsim.client.route import QueueSlot, TopicPublishInfo
from rocketsim.client.send.errors import (
    Failure,
    MQBrokerError,
    RemotingTooMuchRequestError,
    SendInterruptedError,
    broker_not_exist_error,
    send_failed_error,
    sync_remoting_exception,
)
from rocketsim.client.send.records import (
    AttemptHook,
    AttemptRecord,
    Call,
    Outcome,
    RealCost,
    SendConfig,
    SendRecord,
    SendResult,
    Transport,
    no_route_record,
)
from rocketsim.client.send.steps import Steps, run_steps

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
    (``Site.SEND_DEFAULT_IMPL``, by the clause that catches it); :func:`attempt_flow` says what follows.
    """
    version = cfg.version
    timeout = cfg.send_msg_timeout_ms
    if tp is None or not tp.ok():
        return no_route_record("sync", topic, begin_ms, version)
    times_total = cfg.times_total
    cap = cfg.max_timeout_per_request
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
        cost = now - begin_ms
        if timeout < (cost if real_cost is None else real_cost(times, cost)):
            call_timeout = True
            flow = f"break:callTimeout(costTime={cost})"
            done(AttemptRecord(times, last, reset, now, broker, queue_id, None, None, None, flow, None, now))
            break
        cur_timeout = timeout - cost
        if cap > -1 and times + 1 < times_total and cur_timeout > cap:
            cur_timeout = cap  # leave time for another attempt
        call = Call(times, broker, queue_id, now, cur_timeout, "sync")
        outcome = yield call
        rec, send_result, thrown = settle_attempt(strategy, cfg, call, outcome, last, reset, mq, send_result)
        now, flow = rec.end_ms, rec.flow
        if thrown is not None:
            exception = thrown
        done(rec)
        if flow.startswith("return"):
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


def settle_attempt(
    strategy: FaultStrategy,
    cfg: SendConfig,
    call: Call,
    outcome: Outcome,
    last: str | None,
    reset: bool,
    mq: QueueSlot,
    send_result: SendResult | None,
) -> tuple[AttemptRecord, SendResult | None, Failure | None]:
    """What ``sendDefaultImpl(SYNC)`` makes of the answer to ``call``: its ``updateFaultItem``, then
    :func:`attempt_flow`; the attempt's record, the SendResult held and the exception kept (if new)."""
    now = call.start_ms + outcome.latency_ms
    strategy.advance_to(now)  # detector ticks that fell due during the call run first
    # upstream reads mq.getBrokerName() again here; a 4.9.7 slot may have been rewritten meanwhile
    target = mq.broker_name
    upd = strategy.record_outcome(Site.SEND_DEFAULT_IMPL, outcome.catch, target, now - call.start_ms, now)
    flow, send_result, thrown = attempt_flow(cfg, call, outcome, send_result)
    iso = strategy.isolated_until(target, now)
    rec = AttemptRecord(
        call.attempt,
        last,
        reset,
        call.start_ms,
        call.broker,
        call.queue_id,
        call.timeout_ms,
        outcome,
        upd,
        flow,
        iso,
        now,
    )
    return rec, send_result, thrown


def attempt_flow(
    cfg: SendConfig, call: Call, outcome: Outcome, send_result: SendResult | None
) -> tuple[str, SendResult | None, Failure | None]:
    """What ``sendDefaultImpl(SYNC)`` does after attempt ``call``: its flow (``return``, ``continue:...``,
    ``throw:...``, ``return_earlier_result:...``), the SendResult it holds now (``send_result``: the one
    it held), and the exception the catch clause keeps (None: it keeps the one it had)."""
    version, broker = cfg.version, call.broker
    catch = outcome.catch
    if catch == Catch.RESULT:
        result = SendResult(outcome.status, broker, call.queue_id, call.attempt)
        if outcome.kind != OutcomeKind.OK and cfg.retry_another_broker_when_not_store_ok:
            return "continue:not_SEND_OK", result, None
        return "return", result, None
    if catch == Catch.REMOTING:
        error: Failure = sync_remoting_exception(
            outcome.kind, broker, call.timeout_ms, version.line, outcome.budget_check
        )
        return "continue:RemotingException", send_result, error
    if catch == Catch.CLIENT:
        return "continue:MQClientException", send_result, broker_not_exist_error(broker, version)
    if catch == Catch.BROKER:
        error = MQBrokerError(outcome.response_code, outcome.remark, broker, version)
        if outcome.response_code in cfg.retry_codes:
            return "continue:MQBrokerException(retry code)", send_result, error
        if send_result is not None:
            return "return_earlier_result:MQBrokerException(non-retry code)", send_result, error
        return "throw:MQBrokerException(non-retry code)", send_result, error
    return "throw:InterruptedException", send_result, None  # interrupted


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
