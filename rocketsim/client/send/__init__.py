"""The producer's send loops as ``DefaultMQProducerImpl`` runs them: SYNC, ASYNC, ONEWAY and selector sends.

Each loop is a generator that yields a :class:`Call` per request and receives its :class:`Outcome`, and a
:class:`Step` where a driver may interleave other sends (the engine in simulated-time order, the
conformance replay in the real client's recorded order); :func:`run_steps` drives one alone. The parts:
:mod:`~rocketsim.client.send.records` (settings, outcomes, records), :mod:`~rocketsim.client.send.errors`
(the exceptions and their texts), :mod:`~rocketsim.client.send.steps` (threads and interleaving points),
:mod:`~rocketsim.client.send.sync`, :mod:`~rocketsim.client.send.async_send`,
:mod:`~rocketsim.client.send.oneway` and :mod:`~rocketsim.client.send.selector` (the loops).
"""

# Mirrored by engine/compiled.py (start_send, deliver_sync, deliver_oneway, send_default_impl_step: the
# SYNC and ONEWAY loops; async_event, async_call: ASYNC sends, plain and ordered; semaphore_*:
# AsyncSemaphore; scan_fired: ResponseScan); tests/test_engines.py compares them. The updateFaultItem
# calls are rocketsim.client.fault.FAULT_UPDATES, which both read.

from __future__ import annotations

from rocketsim.client.fault import ThreadKey
from rocketsim.client.send.async_send import (
    ASYNC_SEMAPHORE_PERMITS,
    RETRY_CONNECT_FAILURE_LATENCY_MS,
    WAITS,
    AsyncSemaphore,
    ResponseScan,
    async_send_steps,
    send_async,
)
from rocketsim.client.send.errors import (
    ClientError,
    Failure,
    MQBrokerError,
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
    SendError,
    SendFailedError,
    SendInterruptedError,
    async_call_timeout_error,
    broker_not_exist_error,
    error_label,
    executor_rejected_error,
    invoke_async_timeout_error,
    invoke_sync_timeout_error,
    invoke_too_fast_error,
    no_route_error,
    no_route_select,
    remoting_exception,
    semaphore_timeout_error,
    send_failed_error,
    wait_response_timeout_text,
)
from rocketsim.client.send.oneway import oneway_caller_sees, oneway_send_steps, send_oneway
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
    cap_to_timeout,
    retry_response_codes,
)
from rocketsim.client.send.selector import ordered_send_steps
from rocketsim.client.send.steps import (
    DEFAULT_POOL_THREADS,
    IO_THREAD,
    ON_EXCEPTION,
    Action,
    Pool,
    Resume,
    Step,
    Steps,
    callback_thread,
    executor_thread,
    run_steps,
)
from rocketsim.client.send.sync import send_sync, sync_send_steps
from rocketsim.format.validate import ResponseCode

__all__ = [
    "ASYNC_SEMAPHORE_PERMITS",
    "Action",
    "AsyncSemaphore",
    "WAITS",
    "AttemptHook",
    "AttemptRecord",
    "Call",
    "ClientError",
    "DEFAULT_POOL_THREADS",
    "Failure",
    "IO_THREAD",
    "ON_EXCEPTION",
    "MQBrokerError",
    "Outcome",
    "Pool",
    "RETRY_CONNECT_FAILURE_LATENCY_MS",
    "RealCost",
    "RemotingConnectError",
    "RemotingSendRequestError",
    "RemotingTimeoutError",
    "RemotingTooMuchRequestError",
    "ResponseCode",
    "ResponseScan",
    "Resume",
    "SendConfig",
    "SendError",
    "SendFailedError",
    "SendInterruptedError",
    "SendRecord",
    "SendResult",
    "Step",
    "Steps",
    "ThreadKey",
    "Transport",
    "async_call_timeout_error",
    "async_send_steps",
    "broker_not_exist_error",
    "callback_thread",
    "cap_to_timeout",
    "error_label",
    "executor_rejected_error",
    "executor_thread",
    "invoke_async_timeout_error",
    "invoke_sync_timeout_error",
    "invoke_too_fast_error",
    "no_route_error",
    "no_route_select",
    "oneway_caller_sees",
    "oneway_send_steps",
    "ordered_send_steps",
    "remoting_exception",
    "retry_response_codes",
    "run_steps",
    "semaphore_timeout_error",
    "send_async",
    "send_failed_error",
    "send_oneway",
    "send_sync",
    "sync_send_steps",
    "wait_response_timeout_text",
]
