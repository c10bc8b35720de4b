"""The vocabulary both engines share: the output schemas, statuses, events, send kinds, what a run and a
chunk give back, and the broker model's answer as the send loop's :class:`rocketsim.client.send.Outcome`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import pyarrow as pa

from rocketsim.broker import latency as bm
from rocketsim.client.outcomes import OutcomeKind
from rocketsim.client.send import Outcome
from rocketsim.client.send.records import TIMEOUT_OVERSHOOT_MS
from rocketsim.errors import RocketSimError
from rocketsim.tables.schemas import MESSAGES, SEND_ATTEMPTS, SEND_RESULTS, data_schema, without_run_id

ATTEMPTS_SCHEMA = without_run_id(SEND_ATTEMPTS)
RESULTS_SCHEMA = without_run_id(SEND_RESULTS)
MESSAGES_SCHEMA = data_schema(MESSAGES)

NO_ISOLATION = np.iinfo(np.int64).min  # "not isolated" in an attempt's isolated-until array (null)
NO_LATER_ATTEMPT = int(np.iinfo(np.int64).max)  # SimChunk.later_start_ms of a run's last chunk
BATCH_FAILED = "Failed to initiate the MessageBatch"  # DefaultMQProducer.batch() wraps any member's error
MODES = ("sync", "oneway", "async")  # the send_mode column's values, in :attr:`Prepared.s_mode` order
MESSAGE_TYPES = ("normal", "ordered", "delay", "transaction", "batch")


class Status(IntEnum):
    """The ``status`` column: a stored message's SendStatus (0..3, equal to its :class:`OutcomeKind`),
    ``FAILED`` (the send threw), ``ONEWAY_SENT`` (a oneway request was written), ``REJECTED``."""

    SEND_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3
    FAILED = 4
    ONEWAY_SENT = 5  # a oneway send has no SendResult: it was written, nothing more is known
    REJECTED = 6  # refused by the client's validators before any send


STATUS_NAMES = tuple(s.name for s in Status)
FAILED = Status.FAILED.name
ONEWAY_SENT = Status.ONEWAY_SENT.name
REJECTED = Status.REJECTED.name


class Event(IntEnum):
    """The event loops' heap order at equal times (both engines: a heap of ``(time, event, push counter)``):
    call completions and callbacks (DELIVER) before send starts (START), then the order of the pushes."""

    DELIVER = 0
    START = 1


class SendKind(IntEnum):
    """How a prepared send is made."""

    SYNC = 0  # sendDefaultImpl(SYNC): also transactional half messages and oneway batches
    ONEWAY = 1  # sendDefaultImpl(ONEWAY)
    ORDERED = 2  # send(msg, selector, key): SelectMessageQueueByHash, one attempt, the thread waits
    ORDERED_ASYNC = 3  # send(msg, selector, key, callback): retries to the same queue, the thread goes on
    ASYNC = 4  # send(msg, callback): sendDefaultImpl(ASYNC)
    ORDERED_ONEWAY = 5  # sendOneway(msg, selector, key): the thread waits for the write only


class SimulationError(RocketSimError):
    """The input cannot be simulated (e.g. rows of several producers, or a missing column)."""


@dataclass(frozen=True)
class SimOutput:
    """The two tables of a simulation: one row per attempt, one per message."""

    attempts: pa.Table
    results: pa.Table

    @classmethod
    def empty(cls) -> SimOutput:
        return cls(ATTEMPTS_SCHEMA.empty_table(), RESULTS_SCHEMA.empty_table())


@dataclass(frozen=True)
class SimChunk:
    """A part of one producer's simulation: consecutive messages in seq order (never part of a batch),
    their results (one row each, in the same order) and the attempts of their sends in (seq, attempt)
    order. The chunks of a run, concatenated, are the whole run's tables."""

    messages: pa.Table
    attempts: pa.Table
    results: pa.Table
    # no attempt of a later chunk starts before this (ms; NO_LATER_ATTEMPT: none comes)
    later_start_ms: int = NO_LATER_ATTEMPT
    # ``attempts`` and ``results`` with the string columns the engine made from its codes as dictionary
    # arrays (the same values; :func:`rocketsim.engine.plan.sim_chunk`), so that a reader of codes (the
    # summary fold, a Parquet writer) does not encode them again; None: not made
    coded: tuple[pa.Table, pa.Table] | None = None


# ---- the broker model's answer as the send loop's Outcome ----------------------------------------


def to_outcome(o: bm.AttemptOutcome) -> Outcome:
    """The broker model's answer as the send loop's :class:`rocketsim.client.send.Outcome` (the same kind;
    a timeout waits :data:`TIMEOUT_OVERSHOOT_MS` past it, a broker error carries its remark; the answer's
    microseconds, ``exact_us``, go with the answer: a timeout's to its late answer)."""
    late = None
    if o.late_ms >= 0:  # a timeout whose answer still comes
        code = o.late_code
        kind = OutcomeKind.OK if code == 0 else OutcomeKind.BROKER_ERROR
        remark = (o.remark or bm.broker_remark(code)) if code else ""
        late = Outcome(kind, o.late_ms, code, remark, latency_us=o.exact_us)
    if o.kind == OutcomeKind.REMOTING_TIMEOUT:
        latency, code, remark, exact = o.latency_ms + TIMEOUT_OVERSHOOT_MS, 0, "", -1
    elif o.kind == OutcomeKind.BROKER_ERROR:
        latency, code, exact = o.latency_ms, o.response_code, o.exact_us
        remark = o.remark or bm.broker_remark(code)
    else:
        latency, code, remark, exact = o.latency_ms, 0, "", o.exact_us
    store_ms = o.store_ms if o.stored else 0
    return Outcome(OutcomeKind(o.kind), latency, code, remark, o.stored, store_ms, late, exact)
