"""The client's threads, and the points where a driver interleaves sends.

The ASYNC and ONEWAY loops yield a :class:`Step` before each selection, fault update and result (and ASYNC
where it waits for a thread of the client's pools, :class:`Pool`): the driver answers with the time and
thread it runs on (:class:`Resume`). The engine runs them at once in simulated-time order; the conformance
replay of the real client's traces runs them in their recorded order. The clock is simulated ms: a loop
advances it by each outcome's latency and lets the strategy run the 5.x detector ticks that fall due.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

from rocketsim.client.fault import ThreadKey
from rocketsim.client.send.errors import Failure
from rocketsim.client.send.records import Call, Outcome, SendRecord, Transport

# ---- the client's threads, and the points where a driver interleaves sends ----------------------------


def executor_thread(n: int) -> str:
    """The n-th (1-based) thread of ``DefaultMQProducerImpl``'s async sender executor (its ThreadFactory
    names them ``AsyncSenderExecutor_<n>``)."""
    return f"AsyncSenderExecutor_{n}"


def callback_thread(n: int) -> str:
    """The n-th (1-based) thread of ``NettyRemotingClient``'s public (callback) executor."""
    return f"NettyClientPublicExecutor_{n}"


IO_THREAD = "NettyClientSelector_1"  # the client's one Netty event loop (5.x runs connect listeners on it)
# Step.source of the steps where MQClientAPIImpl.onExceptionImpl has just run for a failed ASYNC attempt:
# a retry's sendMessageAsync (its SEND) and the application's onException (its RESULT)
ON_EXCEPTION = "onExceptionImpl"


class Action(IntEnum):
    """What a send loop is about to do when it yields a :class:`Step`."""

    EXECUTE = 0  # wait for an async-sender executor thread (``executor.submit``)
    SELECT = 1  # selectOneMessageQueue
    UPDATE = 2  # updateFaultItem
    RESULT = 3  # the application learns the outcome (return, onSuccess, onException)
    CALLBACK = 4  # wait for the request's callback, due at ``at_ms``, on a thread of ``pool``
    SEND = 5  # MQClientAPIImpl.sendMessageAsync begins (its beginStartTime): then a Call, or a refusal
    PERMIT = 6  # wait up to ``wait_ms`` for a semaphoreAsync permit whose release the driver decides


class Pool(IntEnum):
    """The client's thread pools a send waits for (``Step.pool``)."""

    NONE = 0
    EXECUTOR = 1  # DefaultMQProducerImpl's async sender executor
    CALLBACK = 2  # NettyRemotingClient's public executor (InvokeCallback)
    IO = 3  # the Netty event loop (5.x: the connect future's listener)


@dataclass(frozen=True)
class Step:
    """A point where a send loop lets its driver interleave other sends (and, replaying a recording, set
    the clock): the loop is about to do ``action`` at ``at_ms`` on ``thread`` (for EXECUTE / CALLBACK: on
    a thread of ``pool`` the driver chooses). ``source`` names an update's call site (``dispatch``,
    ``callback``, ``sync_failure``, ``oneway``), or :data:`ON_EXCEPTION` after a failed ASYNC attempt.
    The driver answers with a :class:`Resume`."""

    action: Action
    at_ms: int
    thread: ThreadKey | None = None
    pool: Pool = Pool.NONE
    source: str = ""
    # CALLBACK with the broker's answer due at ``at_ms``: the response-table scan's tick that fails the
    # request if the client has not read the answer before it (-1: no answer to read)
    scan_ms: int = -1
    # CALLBACK: the request holds a semaphoreAsync permit that the driver releases once the callback has
    # run (AsyncSemaphore.callback_releases); PERMIT: how long the thread waits for one (tryAcquire)
    permit: bool = False
    wait_ms: int = 0


@dataclass(frozen=True)
class Resume:
    """The driver's answer to a :class:`Step`: the time the action runs at and the thread it runs on."""

    now_ms: int
    thread: ThreadKey | None = None
    rejected: bool = False  # EXECUTE: the executor's queue was full (no thread will run the send)
    refused: Failure | None = None  # EXECUTE: no backpressure permit in time (client/backpressure.py)
    scanned: bool = False  # CALLBACK: the scan (``Step.scan_ms``, now) failed the request before its read
    # PERMIT: ``rejected`` says no permit came within the wait (then ``now_ms`` is its end)


DEFAULT_POOL_THREADS = {
    Pool.EXECUTOR: executor_thread(1),
    Pool.CALLBACK: callback_thread(1),
    Pool.IO: IO_THREAD,
}


T = TypeVar("T")
StepsTo = Generator[Call | Step, Outcome | Resume, T]  # a part of a send loop that returns a T
Steps = StepsTo[SendRecord]  # a whole send loop


def run_steps(steps: Steps, transport: Transport) -> SendRecord:
    """Drive one send generator to its end alone: each call's outcome from ``transport``, each step at
    its own time, a waited-for pool thread the pool's first (:data:`DEFAULT_POOL_THREADS`)."""
    try:
        item = next(steps)
        while True:
            if isinstance(item, Call):
                item = steps.send(
                    transport(item.attempt, item.broker, item.queue_id, item.start_ms, item.timeout_ms)
                )
            else:
                thread = item.thread if item.pool == Pool.NONE else DEFAULT_POOL_THREADS[item.pool]
                item = steps.send(Resume(item.at_ms, thread))
    except StopIteration as stop:
        return stop.value
