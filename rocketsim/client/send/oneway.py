"""ONEWAY: ``sendDefaultImpl(ONEWAY)``: one attempt, no response, no retry (:func:`oneway_send_steps`)."""

# Mirrored by engine/compiled.py (see rocketsim/client/send/__init__.py); tests/test_engines.py compares them.

from __future__ import annotations

from rocketsim.client.fault import FaultStrategy, Site, ThreadKey
from rocketsim.client.outcomes import ONEWAY_SEES, Catch, OutcomeKind
from rocketsim.client.route import TopicPublishInfo
from rocketsim.client.send.errors import (
    Failure,
    SendInterruptedError,
    broker_not_exist_error,
    remoting_exception,
    send_failed_error,
)
from rocketsim.client.send.records import (
    AttemptHook,
    AttemptRecord,
    Call,
    Outcome,
    SendConfig,
    SendRecord,
    Transport,
    no_route_record,
)
from rocketsim.client.send.steps import Action, Step, Steps, run_steps
from rocketsim.client.versions import ClientVersion


def oneway_caller_sees(outcome: Outcome, version: ClientVersion) -> bool:
    """Whether a ONEWAY caller sees ``outcome`` (an exception; :data:`rocketsim.client.outcomes.ONEWAY_SEES`):
    anything else reads as written, whatever the broker makes of it."""
    return outcome.kind in ONEWAY_SEES[version.oneway_connects_synchronously]


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
        return no_route_record("oneway", topic, begin_ms, version)
    now = (yield Step(Action.SELECT, begin_ms, thread)).now_ms
    mq = strategy.select_one_message_queue(tp, None, now, False, thread)
    if mq is None:
        error = send_failed_error(0, 0, topic, [None], None, version)
        return SendRecord("oneway", topic, now, now, (), None, error, (None,))
    broker, queue_id = mq.broker_name, mq.queue_id
    start = now  # beginTimestampPrev
    outcome = yield Call(0, broker, queue_id, start, cfg.send_msg_timeout_ms, "oneway")
    failed = oneway_caller_sees(outcome, version)
    go = yield Step(Action.UPDATE, start + (outcome.latency_ms if failed else 0), thread, source="oneway")
    now = go.now_ms
    strategy.advance_to(now)
    latency = now - start
    # a request that was written reads as sent, whatever the broker makes of it
    catch = outcome.catch if failed else Catch.RESULT
    upd = strategy.record_outcome(Site.SEND_DEFAULT_IMPL, catch, mq.broker_name, latency, now)
    error, flow = oneway_failure(outcome, cfg, topic, broker, latency) if failed else (None, "return")
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


def oneway_failure(
    outcome: Outcome, cfg: SendConfig, topic: str, broker: str, latency: int
) -> tuple[Failure, str]:
    """The error a ONEWAY caller gets for an ``outcome`` it sees, and the attempt's flow."""
    version = cfg.version
    if outcome.catch == Catch.REMOTING:
        exc: Failure = remoting_exception(outcome.kind, broker, cfg.send_msg_timeout_ms)
        return send_failed_error(1, latency, topic, [broker], exc, version), "continue:RemotingException"
    if outcome.kind == OutcomeKind.CLIENT_ERROR:
        exc = broker_not_exist_error(broker, version)
        return send_failed_error(1, latency, topic, [broker], exc, version), "continue:MQClientException"
    return SendInterruptedError("interrupted"), "throw:InterruptedException"


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
