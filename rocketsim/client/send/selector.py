"""Selector sends: ``send(msg, selector, arg[, callback])`` and ``sendOneway(msg, selector, arg)`` with
``SelectMessageQueueByHash``, as ``sendSelectImpl`` runs them (:func:`ordered_send_steps`)."""

from __future__ import annotations

from rocketsim.client.fault import FaultStrategy
from rocketsim.client.outcomes import Catch
from rocketsim.client.route import QueueSlot, TopicPublishInfo
from rocketsim.client.send.async_send import ResponseScan, async_send_steps
from rocketsim.client.send.errors import (
    Failure,
    MQBrokerError,
    SendInterruptedError,
    broker_not_exist_error,
    no_route_select,
    sync_remoting_exception,
)
from rocketsim.client.send.oneway import oneway_caller_sees
from rocketsim.client.send.records import (
    AttemptHook,
    AttemptRecord,
    Call,
    Outcome,
    SendConfig,
    SendRecord,
    SendResult,
)
from rocketsim.client.send.steps import Steps
from rocketsim.client.versions import ClientVersion
from rocketsim.javaint import java_abs, java_rem

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
    result, error = selector_answer(outcome, broker, queue_id, timeout, version) if visible else (None, None)
    return SendRecord(mode, topic, begin_ms, end, (rec,), result, error, (broker,))


def selector_answer(
    outcome: Outcome, broker: str, queue_id: int, timeout: int, version: ClientVersion
) -> tuple[SendResult | None, Failure | None]:
    """What a SYNC selector send returns or throws for ``outcome`` (a ONEWAY one, for what it sees): the
    result, or the exception as it is, not wrapped."""
    if outcome.catch == Catch.RESULT:
        return SendResult(outcome.status, broker, queue_id, 0), None
    if outcome.catch == Catch.REMOTING:
        error = sync_remoting_exception(outcome.kind, broker, timeout, version.line, outcome.budget_check)
        return None, error
    if outcome.catch == Catch.BROKER:
        return None, MQBrokerError(outcome.response_code, outcome.remark, broker, version)
    if outcome.catch == Catch.CLIENT:
        return None, broker_not_exist_error(broker, version)
    return None, SendInterruptedError("interrupted")
