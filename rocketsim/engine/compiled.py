"""The compiled send engine (numba): the reference engine's tables, ~100x faster, for the inputs it covers.

It covers every input of one producer with unique seqs (:func:`supports`; ``rocketsim.engine`` runs the
reference otherwise): SYNC, ONEWAY and ASYNC sends (``send(msg, callback)``: ``sendDefaultImpl`` on the async
sender executor, ``sendMessageAsync`` / ``onExceptionImpl`` retries on the callbacks, the async semaphore, the
response-table scan and late answers before it, the client's executor and callback pools, ``ClientPools``),
ordered (selector) sends in every mode, batches, transactional sends, rejected rows; the three fault lines
with ``send_latency_fault_enable`` on and off and the 5.x detector (``startDetectorEnable``: its rounds run
when an event is taken, as the reference's ``advance_to``, against the route last looked up); any number of
sender threads; route versions and the 4.9.7 route-mutation quirk; retry codes per version,
``retry_another_broker_when_not_store_ok``, the call-timeout budget and the 5.3.3+ per-request cap; every
fault kind and the broker model's error mix; a SYNC channel's close and a new one's connect.

More: docs/reference/modules.md (compiled.py), docs/benchmarks.md ("The compiled engine's loop").
"""

# Mirrored by engine/reference.py (the readable event loop over rocketsim.client.send /
# rocketsim.client.fault, which
# covers every input); tests/test_engines.py runs both on the same inputs and compares every table.
# What mirrors what, here -> there:
#   run_loop, start_send, deliver_*, send_default_impl_step -> reference.EventLoop (of .run) and the
#       send.sync_send_steps / oneway_send_steps / ordered_send_steps / async_send_steps generators
#       (async_event, async_call: async_send_steps, with ``selected`` for a selector send;
#       semaphore_*: send.AsyncSemaphore; scan_fired: send.ResponseScan; client_pool_*:
#       pools.ClientPool; detector_advance, detect_by_one_round: fault.FaultStrategy.advance_to /
#       FaultTable.detect_by_one_round);
#   select_queue, fault_table_update, fault_table_remove, pick_one_at_least, increment_and_get,
#       reset_index -> fault.FaultStrategy / FaultTable / ThreadLocalIndex;
#   attempt_outcome, base_latency, answers_probe -> latency.attempt_outcome / base_latency_ms /
#       BrokerModel.answers_probe (the window's kind read as plan.Model's resolved columns);
#   oneway_caller_sees -> send.oneway_caller_sees (both read outcomes.ONEWAY_SEES);
#   make_call / write_call, conn_answered, conn_close, conn_wait, conn_ended -> reference.EventLoop's
#       write_sync, answered, fail_fast, waits_for_channel, connect_ended over client.connection.Connections
#       (the rules both run: close_rule, budget_refuses, budget_close_rule, waiter_fate, unwritten_kind);
#   properties_illegal, refused_as_illegal (make_call, async_call) -> store.properties_illegal +
#       latency.refused_as_illegal;
#   through_store, store_none (closed-loop brokers, iterative rounds) -> reference.ProducerSimulation
#       .transport_for with iterative's _TrajectoryStore (the store's rules: engine/compiled_store.py);
#   mix64, uniform, attempt_key, index_key -> rng.mix64 / uniform / draw_key / derive_key;
#   int32, java_abs, java_rem -> javaint (tests/test_rng.py and tests/test_javaint.py compare them).
# The rules both read as data: fault.FAULT_UPDATES (through plan.FaultRules), the client line's behaviours
# (versions.REMOTING_LINES, as plan.Config's named fields), the broker model and its fault kinds
# (fault_kinds.FAULT_KINDS, as plan.Model's window columns), the retry codes. The rules both run as one
# function, compiled here as they are: broker_answer (latency.answer, the decision chain of the open
# model), broker_process_down (fault_kinds.process_down), is_result_kind (outcomes.is_send_result).

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from rocketsim import rng
from rocketsim.broker import latency as bm
from rocketsim.broker import store
from rocketsim.broker.fault_kinds import Effect, Probe, process_down
from rocketsim.broker.queue import REMARKS, Fate, sweep_remark
from rocketsim.client import backpressure
from rocketsim.client.connection import (
    STREAM_CONNECT_ORDER,
    STREAM_CONNECT_RACE,
    TOOK_CHANNEL_BELOW,
    budget_close_rule,
    budget_refuses,
    close_rule,
    unwritten_kind,
    waiter_fate,
)
from rocketsim.client.connection import Fate as WaiterFate
from rocketsim.client.fault import Site
from rocketsim.client.outcomes import Catch, OutcomeKind, is_send_result
from rocketsim.client.send import (
    IO_THREAD,
    RETRY_CONNECT_FAILURE_LATENCY_MS,
    ClientError,
    MQBrokerError,
    RemotingTooMuchRequestError,
    SendInterruptedError,
    async_call_timeout_error,
    broker_not_exist_error,
    callback_thread,
    executor_rejected_error,
    executor_thread,
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
from rocketsim.client.versions import ClientVersion, IndexWrap, ScanBroker
from rocketsim.engine import numba_cache
from rocketsim.engine.compiled_store import (
    SP_PC_CODE,
    StoreTables,
    closed_outcome,
    no_store,
    trajectory_answer,
)
from rocketsim.engine.plan import (
    NO_ISOLATION,
    NO_LATER_ATTEMPT,
    P_MEDIAN,
    P_SIGMA,
    P_SPIKE_ALPHA,
    P_SPIKE_MAX,
    P_SPIKE_PROBABILITY,
    P_SPIKE_SCALE,
    TIMEOUT_OVERSHOOT_MS,
    W_BURST_CODE,
    W_BURST_KIND,
    W_CYCLE,
    W_CYCLE_DOWN,
    W_EFFECT,
    W_END,
    W_PROBE,
    W_START,
    WF_FACTOR,
    WF_RATE,
    Config,
    EngineOutput,
    Event,
    FaultRules,
    Model,
    Plan,
    Prepared,
    Routes,
    SendKind,
    SimChunk,
    SimOutput,
    SimulationError,
    Status,
    StoreColumns,
    UniqCalls,
    batch_aligned,
    build_tables,
    error_text,
    plan_for,
    prepare,
    sim_chunk,
    uniq_column,
)
from rocketsim.scenario import Scenario

numba_cache.install()  # before any njit(cache=True) below: one cache, found by content

__all__ = [
    "KernelOut",
    "round_requests",
    "run_prepared",
    "simulate_chunks",
    "simulate_covered",
    "simulate_producer",
    "simulate_round",
    "supports",
    "unsupported",
]


class Failure(IntEnum):
    """How a send failed, for its error text (made in Python by :func:`_error_text`)."""

    NONE = 0
    SEND_FAILED = 1  # "Send [n] times, still failed": aux = times, cost = ms
    BROKER = 2  # MQBrokerException: aux = response code
    CALL_TIMEOUT = 3  # "sendDefaultImpl call timeout"
    NO_ROUTE = 4  # "No route info of this topic"
    REMOTING = 5  # an ordered send's RemotingException: aux = OutcomeKind, cost = timeout ms
    SLEEP_INTERRUPTED = 6  # sendDefaultImpl's InterruptedException
    INTERRUPTED = 7  # a oneway send's InterruptedException
    ORDERED_OTHER = 8  # an ordered send's client error or interrupt: aux = OutcomeKind
    NO_ROUTE_SELECT = 9  # sendSelectImpl: "No route info for this topic"
    ASYNC_SEND_REQUEST = 10  # an ASYNC callback's "send request failed"
    ASYNC_WAIT_TIMEOUT = 11  # an ASYNC callback's "wait response timeout": aux = the ms in the text
    ASYNC_UNKNOWN = 12  # an ASYNC callback's "unknown reason" (4.9: "unknow reseaon")
    ASYNC_TOO_MANY = 13  # 4.9 invokeAsync with no time left: "invokeAsync call the addr[..] timeout"
    ASYNC_CALL_TIMEOUT = 14  # the executor took the send too late: aux 0 a selector send's text, 1 the other
    ASYNC_TOO_FAST = 15  # invokeAsyncImpl refused a permit with no time to wait: "invoke too fast"
    ASYNC_SEMAPHORE = 16  # no permit of the async semaphore in time: aux = the timeout in the text
    ASYNC_SEND_FAILED = 17  # a plain ASYNC send's first request: "Send [1] times", aux = broker, cost = ms
    EXECUTOR_REJECTED = 18  # executor.submit refused the send: its queue was full ("executor rejected ")
    BACKPRESSURE = 19  # no backpressure permit in time: aux = the semaphore (backpressure.TIMEOUT_TEXTS)
    INVOKE_SYNC_TIMEOUT = 20  # an ordered send's invokeSync budget check after a connect: aux = broker


# the loop's counters, kept in one array so the loop can stop when a buffer is full and go on after
ST_HEAP_SIZE, ST_COUNTER, ST_INSTANCES, ST_ATTEMPTS, ST_STARTED, ST_POOL_NEXT, ST_POOL_PENDING = range(7)
ST_NEXT_TICK, ST_ROUTE_NOW = range(7, 9)  # the detector's next tick; the route version last looked up
ST_SEM_SIZE = 9  # release times held in the async semaphore's heap
# the sends given so far (the ring holds sends ST_GIVEN - capacity .. ST_GIVEN - 1), whether they are all
# of them, the latest born time among them, the time of the event last taken, the threads seen so far
ST_GIVEN, ST_FINAL, ST_BORN_MAX, ST_NOW, ST_SEEN = range(10, 15)
# the pool's next START when its send is not given yet: waiting, since when, its push counter
ST_POOL_DEFER, ST_POOL_DEF_TIME, ST_POOL_DEF_COUNTER = range(15, 18)
N_COUNTERS = 18
LOOP_DONE, LOOP_ATTEMPTS_FULL, LOOP_INSTANCES_FULL, LOOP_NEED_INPUT = range(4)
# the push counter of the loop's own pushes starts here: below it, a thread's first START, numbered in the
# order the threads first appear (what the whole run pushes first), whenever its first send is given
COUNTER_BASE = 1 << 40
NOT_BEGUN = np.iinfo(np.int64).max  # FL_BEGIN of a send not begun yet
# the fault table's ConcurrentHashMap counters
META_SIZE, META_BINS, META_SIZE_CTL = range(3)
# what runs after a step of the loop (start_send, deliver_sync)
STEP_NONE, STEP_SEND = range(2)  # nothing; sendDefaultImpl's next try
# a heap row: (time, event, counter, payload)
H_TIME, H_EVENT, H_COUNTER, H_PAYLOAD = range(4)

NO_BROKER = -1  # no broker / no lastBrokerName / a MessageQueue made on the spot (slot)
PICK_FAILED = -2  # pickOneAtLeast threw (List.get of a negative index): selectOneMessageQueue's catch
# the line's IndexWrap and ScanBroker columns (versions.py) as the kernel's ints
_WRAP_MASK = int(IndexWrap.MASK)
_WRAP_ABS_GUARDED = int(IndexWrap.ABS_GUARDED)
_SCAN_SAME_AS_LAST = int(ScanBroker.SAME_AS_LAST)
_SCAN_NOT_LAST = int(ScanBroker.NOT_LAST)
INT_MIN = -2147483648
_NO_RC = {"cache": True, "_nrt": False}
_G = np.uint64(rng.GAMMA)
_C1 = np.uint64(rng.MIX_C1)
_C2 = np.uint64(rng.MIX_C2)
_U2 = np.uint64(2)
_U3 = np.uint64(3)
_S11 = np.uint64(11)
_S27 = np.uint64(27)
_S30 = np.uint64(30)
_S31 = np.uint64(31)
_S32 = np.uint64(32)
_INT_MAX_U = np.uint64(0x7FFFFFFF)
_INV53 = rng.INV_2_53
_MAX_SPIKE_EXPONENT = bm.MAX_SPIKE_EXPONENT
_MAX_LATENCY_MS = bm.MAX_LATENCY_MS
_PROPERTIES_LIMIT = store.PROPERTIES_LIMIT
# the client's pools an ASYNC send runs on (pools.ClientPool), as rows of ClientPools
POOL_EXECUTOR, POOL_CALLBACK = range(2)
# what an ASYNC send's pending DELIVER means (FL_PHASE)
PH_EXEC = 0  # an executor thread takes it
PH_SYNC_FAIL = 1  # a failure thrown inside sendMessageAsync, after its latency, on the same thread
PH_CALLBACK = 2  # its callback is due: a callback thread (5.x connect failure: the event loop) runs it
PH_CB_RUN = 3  # a callback thread that was busy takes it
PH_DISPATCH = 4  # a plain send's permit is granted: sendDefaultImpl's own update, then the callback waits
PH_START = 5  # (not pending) the caller submits it to the async sender executor
PH_PERMIT_WAIT = 6  # async backpressure: it waits for a permit; its DELIVER is the wait's deadline
PH_PERMIT = 7  # a release granted it the permit it waited for (not pending: it asks for the next one)
# why the client sent nothing (FL_REFUSED)
REF_NONE = 0
REF_NO_BUDGET = 1  # 4.9 invokeAsync: no time left ("invokeAsync call the addr[..] timeout")
REF_TOO_FAST = 2  # no permit and no time to wait for one ("invokeAsyncImpl invoke too fast")
REF_SEMAPHORE = 3  # no permit within the timeout ("invokeAsyncImpl tryAcquire semaphore timeout")


# InFlight, per send: where it is in its loop, its current call, and the SendResult kept so far. One int64
# matrix, a row per send and a column (FL_*) per field: a call passes every array of its arguments, and
# one array costs what one of these fields alone would.
FL_INSTANCE = 0
FL_SLOT = 1  # queue slot of the call (-1: a MessageQueue made on the spot)
FL_BROKER = 2
FL_QUEUE_ID = 3
FL_TIMES = 4  # sendDefaultImpl's ``times``
FL_BEGIN = 5  # beginTimestampFirst
FL_CALL_START = 6  # beginTimestampPrev
FL_LAST_BROKER = 7  # lastBrokerName
FL_KIND = 8  # the call's OutcomeKind
FL_LATENCY = 9
FL_CODE = 10
FL_HAS_RESULT = 11  # a SendResult was kept (retryAnotherBrokerWhenNotStoreOK)
FL_RESULT_STATUS = 12
FL_RESULT_BROKER = 13
FL_RESULT_QUEUE_ID = 14
FL_CUR_TIMES = 15  # ASYNC: onExceptionImpl's curTimes
FL_REQ_TIMEOUT = 16  # ASYNC: the time left when the current request began (sendMessageAsync)
FL_CALL_BEGIN = 17  # ASYNC: when it began (beginStartTime; call_start: when the permit came)
FL_REFUSED = 18  # ASYNC: REF_* (the client sent nothing)
FL_FIRE = 19  # ASYNC: when its callback is due
FL_IN_SYNC = 20  # plain ASYNC: still inside sendDefaultImpl (its own update not made yet)
FL_SELECT_MS = 21  # plain ASYNC: the first selection's time (sendDefaultImpl's beginTimestampPrev)
FL_FIRST_BROKER = 22  # plain ASYNC: the first selection's broker (retries change ``broker``)
FL_PHASE = 23  # ASYNC: what its pending DELIVER means (PH_*)
FL_POOL = 24  # ASYNC: the client pool whose thread it runs on (-1: none)
FL_POOL_THREAD = 25  # and which thread of it
FL_STORED = 26  # the broker stored the call's request
FL_STORE_MS = 27  # when, after the call's start
# the closed-loop store's answer to the call (iterative rounds; reference.ProducerSimulation.store_answers)
FL_ST_BUSY = 28  # the rejection's broker_store.Fate (-1: none)
FL_ST_DEPTH = 29  # the send-queue depth it found (-1: the store did not see it)
FL_ST_SERVICE = 30  # its append's writer time, us (-1: not stored)
FL_ST_PERIOD = 31  # the sweeper remark's period in queue (ms) (the remark is FL_ST_BUSY's)
FL_ST_SIZE = 32  # and its size of queue
FL_EXACT_US = 33  # the call's answer's unrounded latency, us (-1: none, or whole ms)
FL_CALL_START_US = 34  # the call's start in us (FL_CALL_START x 1000 but for the client's CPU)
FL_CHANNEL = 35  # SYNC: the broker's channel (its n-th, State.channels) the pending request went out on
FL_DONE = 36  # SYNC: when its answer is due (its DELIVER's time)
FL_CALL_TIMEOUT = 37  # SYNC: the timeout the request was given
FL_BP_HELD = 38  # ASYNC with backpressure: the permits it holds (0 none, 1 a count, 2 and its bytes)
FL_BP_COUNTER = 39  # and the push counter of its wait's deadline (the reference's first push; 0: none)
FL_CONNECT = 40  # SYNC: CN_*, its call and its broker's channel's connect (producers.connect_ms)
FL_NEXT_WAITER = 41  # SYNC, waiting for a connect: the next waiter in wake order (its number; -1: none)
FL_CALL_ATTEMPT = 42  # SYNC, waiting for a connect: the call's attempt (what its draws are keyed by)
N_IN_FLIGHT = 43
# FL_CONNECT: the call was written (or needed no connect); it waits for its broker's channel to connect
# and started that connect (its DELIVER is the connect's end); it waits; the budget check after the
# connect refused it (nothing written: invokeSync's own text)
CN_NONE, CN_STARTS, CN_WAITS, CN_BUDGET = range(4)
# State.channels, per broker b at b * N_CH + CH_*: its current channel's number, whether that is connected,
# the first waiter of its connect (a send's number; -1: no connect under way), the producer's connect_ms.
# One flat array, as before the connect: one more kernel argument can halve the loop (docs/benchmarks.md)
CH_NUMBER, CH_CONNECTED, CH_WAITERS, CH_CONNECT_MS = range(4)
N_CH = 4


# ---- the kernel's arguments -------------------------------------------------------------------------


class Sends(NamedTuple):
    """The sends given so far, in a ring: send ``g`` (seq order) at slot ``g % capacity`` while it is
    live (given, its rows not yet taken out). Inside the loop a send is its slot."""

    gid: np.ndarray  # the send's number (seq order)
    next_same: np.ndarray  # the number of its thread's next send (-1: not given yet) (partitioned)
    seq: np.ndarray
    born: np.ndarray
    thread: np.ndarray  # dense thread index (pool: -1; State.send_thread says which thread took it)
    kind: np.ndarray  # SendKind
    topic: np.ndarray
    order_hash: np.ndarray
    props_base: np.ndarray  # what the broker checks of the properties (store.illegal_properties_parts)
    props_qid: np.ndarray
    props_chars: np.ndarray
    body: np.ndarray  # the bytes the backpressure's size semaphore takes (Prepared.s_body)


class Threads(NamedTuple):
    """Sender threads (dense indexes in the order they first appear). Partitioned: each thread's next
    send and last given send, and its START waiting for a send not given yet; pool: the sends in the
    order the pool takes them, and which threads are idle since when."""

    value: np.ndarray  # the sender thread's number
    bits: np.ndarray  # rng.part_bits of every thread (keys its index draws): the sender threads, then the
    # client's (async sender executor, callback executor, event loop: send.executor_thread, ...)
    cursor: np.ndarray  # the number of each thread's next send to begin (-1: none given) (partitioned)
    tail: np.ndarray  # the number of its last send given (-1: none) (partitioned)
    deferred: np.ndarray  # its next START waits for its send to be given (partitioned)
    def_time: np.ndarray  # not before (the time the thread was free)
    def_counter: np.ndarray  # with this push counter
    fifo: np.ndarray  # ring: position k holds the number of the pool's k-th send, by (born, seq) (pool)
    idle: np.ndarray  # the thread is idle (pool)
    idle_since: np.ndarray  # since when (-1: never ran) (pool)


class Keys(NamedTuple):
    """Draw keys of the producer (string parts hashed in Python)."""

    producer: np.uint64  # rng.producer_key(seed, producer)
    index_base: np.uint64  # rng.derive_key(seed, producer)
    topic_bits: np.ndarray  # rng.part_bits("sendWhichQueue:<topic>") per topic
    worst: np.uint64  # rng.derive_key(seed, producer, "whichItemWorst")


class FaultTable(NamedTuple):
    """``LatencyFaultToleranceImpl``'s items by broker index, in ConcurrentHashMap iteration order."""

    exists: np.ndarray
    latency: np.ndarray
    start: np.ndarray
    reachable: np.ndarray
    bins: np.ndarray  # [bins, B] broker indexes in insertion order
    bin_len: np.ndarray
    meta: np.ndarray  # META_* counters
    broker_hash: np.ndarray  # spread(name.hashCode()) per broker
    old_bins: np.ndarray  # scratch for resizes
    old_len: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    check_stamp: np.ndarray  # 5.x: the detector probes the item again from then
    walk: np.ndarray  # scratch: the items in iteration order, for the detector's round


class Worst(NamedTuple):
    """``whichItemWorst``: a value per thread, one shared source (4.9 lines), and a sort buffer."""

    is_set: np.ndarray
    value: np.ndarray
    counter: np.ndarray  # [2]: whichItemWorst's draws, the shuffle's draws
    key: np.uint64
    items: np.ndarray  # scratch for pickOneAtLeast's sort
    shuffle_key: np.uint64  # rng.derive_key(seed, producer, "shuffle"): Collections.shuffle (4.3-4.8)


class Instances(NamedTuple):
    """TopicPublishInfo instances: their queue slots (which 4.9.7 rewrites) and route version."""

    queue_broker: np.ndarray  # [I, Q]
    queue_id: np.ndarray  # [I, Q]
    n_queues: np.ndarray  # [I]
    route_version: np.ndarray  # [I]


class TopicCache(NamedTuple):
    """The producer's cached TopicPublishInfo per topic."""

    version: np.ndarray  # route version it was built from, -1: none
    instance: np.ndarray


class Indexes(NamedTuple):
    """``sendWhichQueue`` (ThreadLocalIndex) of each instance and thread: [instance, thread]."""

    is_set: np.ndarray
    value: np.ndarray
    counter: np.ndarray  # draws taken from the source
    key: np.ndarray  # the source's key


class SendOutcomes(NamedTuple):
    """Per send: how it ended."""

    status: np.ndarray  # Status
    error: np.ndarray  # Failure
    aux: np.ndarray  # see Failure
    cost: np.ndarray  # see Failure
    broker: np.ndarray  # the result's broker, else the last attempt's, else -1
    queue_id: np.ndarray
    end: np.ndarray
    exhausted: np.ndarray
    n_sent: np.ndarray
    kernel_start: np.ndarray  # when sendKernelImpl first ran (an ASYNC send: on the executor)


class AttemptRows(NamedTuple):
    """Attempts in the order they completed."""

    send: np.ndarray
    attempt: np.ndarray
    start: np.ndarray
    latency: np.ndarray
    broker: np.ndarray
    queue_id: np.ndarray
    kind: np.ndarray
    code: np.ndarray
    isolated_until: np.ndarray
    stored: np.ndarray
    stored_ts: np.ndarray
    st_busy: np.ndarray  # FL_ST_* of the call (closed-loop store)
    st_depth: np.ndarray
    st_service: np.ndarray
    st_period: np.ndarray
    st_size: np.ndarray
    start_us: np.ndarray  # FL_CALL_START_US of the call
    latency_us: np.ndarray  # FL_EXACT_US of the call (-1 for a oneway call: the caller saw the write only)


class Inputs(NamedTuple):
    """What the kernel reads: the sends, their threads, and the scenario's arrays (engine/plan/)."""

    sends: Sends
    threads: Threads
    config: Config
    rules: FaultRules
    routes: Routes
    keys: Keys
    model: Model
    store: StoreTables  # the closed-loop brokers' trajectories (iterative rounds; none: the open model)


class ClientPools(NamedTuple):
    """The client's async sender executor (row POOL_EXECUTOR) and callback executor (row POOL_CALLBACK)
    of ASYNC sends (``pools.ClientPool``): idle threads since when, and the sends waiting for
    a thread (a ring, FIFO)."""

    idle: np.ndarray  # [2, N]
    idle_since: np.ndarray  # [2, N] (-1: never ran)
    size: np.ndarray  # [2] threads of each pool
    fifo: np.ndarray  # [2, n_sends + 1]
    head: np.ndarray  # [2]
    tail: np.ndarray  # [2]


class Permits(NamedTuple):
    """Async backpressure's two fair semaphores (``client.backpressure.Backpressure``; row 0 the count,
    row 1 the bytes): the permits free, and the sends waiting (a ring per row, FIFO; a waiting send holds
    its sender thread, so there are fewer than the ring's size)."""

    available: np.ndarray  # [2]
    fifo: np.ndarray  # [2, sender threads + 1]
    head: np.ndarray  # [2]
    tail: np.ndarray  # [2]


class State(NamedTuple):
    """What the kernel writes: the producer's state and the output buffers."""

    counters: np.ndarray  # ST_* counters
    heap: np.ndarray  # [N, 4] heap rows (H_* columns)
    send_thread: np.ndarray  # per send, the (dense) thread that takes it
    fault_table: FaultTable
    worst: Worst
    instances: Instances
    topics: TopicCache
    indexes: Indexes
    in_flight: np.ndarray  # [send, FL_*]
    outcomes: SendOutcomes
    attempts: AttemptRows
    client_pools: ClientPools
    semaphore: np.ndarray  # the async semaphore's permits held: a heap of release times (ST_SEM_SIZE)
    channels: np.ndarray  # per broker (CH_*): its channel and its connect (client.connection.Connections)
    permits: Permits  # async backpressure's semaphores (Config.backpressure)


# ---- SplitMix64 and Java int arithmetic: compiled twins of rocketsim.rng and rocketsim.javaint ----------


@njit(**_NO_RC)
def mix64(z):
    """``rng.mix64`` (uint64 wraps like the masked Python ints)."""
    z = (z ^ (z >> _S30)) * _C1
    z = (z ^ (z >> _S27)) * _C2
    return z ^ (z >> _S31)


@njit(**_NO_RC)
def uniform(key, stream):
    """``rng.uniform``."""
    return np.float64(mix64(key + np.uint64(stream + 1) * _G) >> _S11) * _INV53


@njit(**_NO_RC)
def int32(x):
    """``javaint.int32``."""
    return ((x + 0x80000000) & 0xFFFFFFFF) - 0x80000000


@njit(**_NO_RC)
def java_abs(x):
    """``javaint.java_abs``."""
    if x >= 0 or x == INT_MIN:
        return x
    return -x


@njit(**_NO_RC)
def java_rem(a, b):
    """``javaint.java_rem``."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


@njit(**_NO_RC)
def index_key(index_base, thread, topic_bits, generation):
    """``rng.derive_key(seed, producer, thread, "sendWhichQueue:<topic>", generation)`` from its first two."""
    k = mix64((index_base ^ np.uint64(thread)) + _G)
    k = mix64((k ^ topic_bits) + _G)
    return mix64((k ^ np.uint64(generation)) + _G)


@njit(**_NO_RC)
def attempt_key(producer_key, seq, attempt):
    """``rng.attempt_key``: ``rng.draw_key(seed, producer, seq, attempt)`` from ``rng.producer_key``."""
    z = mix64(producer_key + np.uint64(seq) * _G + _U2)
    return mix64(z + np.uint64(attempt) * _G + _U3)


# ---- ThreadLocalIndex ----------------------------------------------------------------------------------


@njit(**_NO_RC)
def _next_index(index, wrap):
    """(stored, returned) after one step of ``ThreadLocalIndex`` (``fault.ThreadLocalIndex``): ``++i &
    mask`` (IndexWrap.MASK) or ``Math.abs(i + 1)``, a negative value stored as 0 only when guarded."""
    if wrap == _WRAP_MASK:
        index = int32(index + 1)
        return index, index & 0x7FFFFFFF
    index = java_abs(int32(index + 1))
    if wrap == _WRAP_ABS_GUARDED and index < 0:
        index = 0
    return index, index


@njit(**_NO_RC)
def _start_index(drawn, signed_start, wrap):
    """The first stored value: ``nextInt()`` (5.x) or ``Math.abs(nextInt())`` (4.3-4.7: negative -> 0)."""
    if signed_start:
        return drawn
    index = java_abs(drawn)
    if wrap == _WRAP_ABS_GUARDED and index < 0:
        index = 0
    return index


@njit(**_NO_RC)
def increment_and_get(ix, i, t, cfg):
    """``ThreadLocalIndex``'s next value for the line's ``index_start_signed`` and ``index_wrap``."""
    if ix.is_set[i, t]:
        index = ix.value[i, t]
    else:
        ix.counter[i, t] += 1
        drawn = int32(np.int64(mix64(ix.key[i, t] + np.uint64(ix.counter[i, t]) * _G) >> _S32))
        index = _start_index(drawn, cfg.index_start_signed, cfg.index_wrap)
    stored, result = _next_index(index, cfg.index_wrap)
    ix.value[i, t] = stored
    ix.is_set[i, t] = True
    return result


# inlined at numba's level: LLVM left it a call, once a probe of the 4.x latency scan (docs/benchmarks.md)
@njit(inline="always", **_NO_RC)
def queue_pos(index, n):
    """``fault.queue_pos``: ``Math.abs(index) % size``, a negative result read as 0."""
    pos = java_rem(java_abs(index), n)
    return 0 if pos < 0 else pos


@njit(**_NO_RC)
def reset_index(ix, i, t):
    """5.x ``reset()``: ``Math.abs(nextInt(Integer.MAX_VALUE))``."""
    ix.counter[i, t] += 1
    x = mix64(ix.key[i, t] + np.uint64(ix.counter[i, t]) * _G) >> _S32
    ix.value[i, t] = java_abs(np.int64((x * _INT_MAX_U) >> _S32))
    ix.is_set[i, t] = True


@njit(**_NO_RC)
def worst_increment_and_get(worst, t, cfg):
    """``whichItemWorst.incrementAndGet()`` (one shared source, the line's start and wrap)."""
    if worst.is_set[t]:
        index = worst.value[t]
    else:
        worst.counter[0] += 1
        drawn = int32(np.int64(mix64(worst.key + np.uint64(worst.counter[0]) * _G) >> _S32))
        index = _start_index(drawn, cfg.index_start_signed, cfg.index_wrap)
    stored, result = _next_index(index, cfg.index_wrap)
    worst.value[t] = stored
    worst.is_set[t] = True
    return result


@njit(**_NO_RC)
def shuffle_items(worst, items, cnt):
    """``fault.shuffle`` (``Collections.shuffle``): ``nextInt(i)`` draws of the producer's shuffle stream."""
    for i in range(cnt, 1, -1):
        worst.counter[1] += 1
        x = mix64(worst.shuffle_key + np.uint64(worst.counter[1]) * _G) >> _S32
        j = np.int64((x * np.uint64(i)) >> _S32)
        items[i - 1], items[j] = items[j], items[i - 1]


# ---- the fault table (LatencyFaultToleranceImpl) in ConcurrentHashMap iteration order ------------------


@njit(**_NO_RC)
def fault_table_resize(ft):
    """``ConcurrentHashMap.transfer``: double the bins; a bin's trailing run keeps its order, the nodes
    before it are re-linked one by one in front of their new bin (reversed)."""
    n = ft.meta[META_BINS]
    bins, blen, bhash, old, old_len, lo, hi = (
        ft.bins,
        ft.bin_len,
        ft.broker_hash,
        ft.old_bins,
        ft.old_len,
        ft.lo,
        ft.hi,
    )
    for i in range(n):
        old_len[i] = blen[i]
        for j in range(blen[i]):
            old[i, j] = bins[i, j]
    for i in range(n):
        m = old_len[i]
        blen[i] = 0
        blen[i + n] = 0
        if m == 0:
            continue
        run_bit = bhash[old[i, 0]] & n
        last_run = 0
        for j in range(1, m):
            if bhash[old[i, j]] & n != run_bit:
                run_bit = bhash[old[i, j]] & n
                last_run = j
        nlo = 0
        nhi = 0
        for j in range(last_run - 1, -1, -1):
            b = old[i, j]
            if bhash[b] & n == 0:
                lo[nlo] = b
                nlo += 1
            else:
                hi[nhi] = b
                nhi += 1
        for j in range(last_run, m):
            if run_bit == 0:
                lo[nlo] = old[i, j]
                nlo += 1
            else:
                hi[nhi] = old[i, j]
                nhi += 1
        for j in range(nlo):
            bins[i, j] = lo[j]
        blen[i] = nlo
        for j in range(nhi):
            bins[i + n, j] = hi[j]
        blen[i + n] = nhi
    ft.meta[META_BINS] = 2 * n
    ft.meta[META_SIZE_CTL] = 2 * n - (n >> 1)


@njit(**_NO_RC)
def fault_table_update(ft, b, latency, isolation, now, reachable, cfg, rules):
    """``updateFaultItem`` with latency fault tolerance on (4.9 overwrites the start, 5.x only extends it)."""
    probe = cfg.isolation_latency_ms if isolation else latency
    duration = 0
    for k in range(rules.latency_max.shape[0] - 1, -1, -1):
        if probe >= rules.latency_max[k]:
            duration = rules.not_available_duration[k]
            break
    created = not ft.exists[b]
    if created:
        ft.start[b] = 0
        ft.reachable[b] = False
        ft.check_stamp[b] = 0
    ft.latency[b] = latency
    if cfg.isolation_only_extends:
        if duration > 0 and now + duration > ft.start[b]:
            ft.start[b] = now + duration
    else:
        ft.start[b] = now + duration
    if cfg.tracks_reachability:
        ft.reachable[b] = reachable
    if created:
        i = ft.broker_hash[b] & (ft.meta[META_BINS] - 1)
        ft.bins[i, ft.bin_len[i]] = b
        ft.bin_len[i] += 1
        ft.exists[b] = True
        ft.meta[META_SIZE] += 1
        if ft.meta[META_SIZE] >= ft.meta[META_SIZE_CTL]:
            fault_table_resize(ft)


@njit(**_NO_RC)
def record_outcome(ft, site, catch, b, latency, now, cfg, rules):
    """The ``updateFaultItem`` call the client makes at ``site`` for an outcome caught as ``catch``
    (``fault.FAULT_UPDATES``); the table changes only with latency fault tolerance on."""
    if cfg.fault_on:
        iso, reach = rules.isolation[site, catch], rules.reachable[site, catch]
        fault_table_update(ft, b, latency, iso, now, reach, cfg, rules)


@njit(**_NO_RC)
def fault_table_remove(ft, b):
    if not ft.exists[b]:
        return
    ft.exists[b] = False
    ft.meta[META_SIZE] -= 1
    i = ft.broker_hash[b] & (ft.meta[META_BINS] - 1)
    m = ft.bin_len[i]
    for j in range(m):
        if ft.bins[i, j] == b:
            for k in range(j, m - 1):
                ft.bins[i, k] = ft.bins[i, k + 1]
            ft.bin_len[i] = m - 1
            return


@njit(**_NO_RC)
def answers_probe(model, b, t):
    """``latency.BrokerModel.answers_probe``: a detector probe fails while the broker's process is dead
    (:func:`broker_process_down`) or its window's kind fails probes (``fault_kinds.Probe``: hung, cut off)."""
    wi = model.window_ints
    for j in range(model.window_offsets[b], model.window_offsets[b + 1]):
        if not (wi[j, W_START] <= t < wi[j, W_END]):
            continue
        if wi[j, W_PROBE] == Probe.FAILS or broker_process_down(
            wi[j, W_START], wi[j, W_CYCLE], wi[j, W_CYCLE_DOWN], t
        ):
            return False
    return True


@njit(**_NO_RC)
def detect_by_one_round(inp, state, tick):
    """``FaultTable.detect_by_one_round``: each item due is probed again ``detect_interval_ms`` later, removed
    when its broker no longer resolves in the route last looked up, marked reachable when its probe
    answers."""
    ft, cfg = state.fault_table, inp.config
    route_now = state.counters[ST_ROUTE_NOW]
    cnt = 0
    for i in range(ft.meta[META_BINS]):
        for j in range(ft.bin_len[i]):
            ft.walk[cnt] = ft.bins[i, j]
            cnt += 1
    for k in range(cnt):
        b = ft.walk[k]
        if not ft.exists[b] or tick - ft.check_stamp[b] < 0:
            continue
        ft.check_stamp[b] = tick + cfg.detect_interval_ms
        if not inp.routes.resolves[route_now, b]:
            fault_table_remove(ft, b)
            continue
        if answers_probe(inp.model, b, tick):
            ft.reachable[b] = True


@njit(**_NO_RC)
def detector_advance(inp, state, now):
    """``FaultStrategy.advance_to``: the detector's rounds due at or before ``now``, each at its tick."""
    st = state.counters
    while st[ST_NEXT_TICK] <= now:
        tick = st[ST_NEXT_TICK]
        st[ST_NEXT_TICK] = tick + inp.config.detect_period_ms
        detect_by_one_round(inp, state, tick)


@njit(**_NO_RC)
def is_available(ft, b, now, needs_reachable):
    """``FaultTable.is_available``: by time; 5.1.4 also needs the item's reachable flag."""
    if not ft.exists[b]:
        return True
    return now - ft.start[b] >= 0 and (ft.reachable[b] or not needs_reachable)


@njit(**_NO_RC)
def isolated_until(ft, b, now):
    """The item's start if ``b`` is isolated at ``now``, else NO_ISOLATION."""
    if ft.exists[b] and now - ft.start[b] < 0:
        return ft.start[b]
    return NO_ISOLATION


@njit(**_NO_RC)
def pick_one_at_least(ft, worst, now, t, cfg):
    """4.x ``pickOneAtLeast``: (4.3-4.8: shuffle,) stable sort by (unavailable, latency, start), then the
    better half; PICK_FAILED where upstream's ``List.get`` throws (4.8.0's negative index)."""
    lat, start, items = ft.latency, ft.start, worst.items
    cnt = 0
    for i in range(ft.meta[META_BINS]):
        for j in range(ft.bin_len[i]):
            items[cnt] = ft.bins[i, j]
            cnt += 1
    if cfg.shuffles_before_pick:
        shuffle_items(worst, items, cnt)
    for i in range(1, cnt):  # insertion sort: stable like Collections.sort
        x = items[i]
        xa = 0 if now - start[x] >= 0 else 1
        j = i - 1
        while j >= 0:
            y = items[j]
            ya = 0 if now - start[y] >= 0 else 1
            if ya > xa or (ya == xa and (lat[y] > lat[x] or (lat[y] == lat[x] and start[y] > start[x]))):
                items[j + 1] = y
                j -= 1
            else:
                break
        items[j + 1] = x
    if cnt == 0:
        return NO_BROKER
    half = cnt // 2
    if half <= 0:
        return items[0]
    at = java_rem(worst_increment_and_get(worst, t, cfg), half)
    return PICK_FAILED if at < 0 else items[at]


# ---- the broker model: latency.attempt_outcome ---------------------------------------------------------

# the rules other modules define once, compiled here as they are (one definition for both engines)
broker_answer = njit(**_NO_RC)(bm.answer)  # the decision chain of the open model
broker_spike = njit(**_NO_RC)(bm.spike_ms)  # a spike's size at a level
broker_process_down = njit(**_NO_RC)(process_down)  # fault_kinds: is the broker's process dead
is_result_kind = njit(**_NO_RC)(is_send_result)  # outcomes: SEND_OK or a not-OK store status
channel_close_rule = njit(**_NO_RC)(close_rule)  # connection: does a SYNC timeout close the channel
conn_budget_refuses = njit(**_NO_RC)(budget_refuses)  # connection: the budget check after a connect
conn_budget_closes = njit(**_NO_RC)(budget_close_rule)  # connection: does that check close the channel
conn_waiter_fate = njit(**_NO_RC)(waiter_fate)  # connection: a waiter's fate at the connect's end
conn_unwritten_kind = njit(**_NO_RC)(unwritten_kind)  # connection: what an unwritten waiter comes to


@njit(**_NO_RC)
def base_latency(model, b, key):
    """``latency.base_latency_ms``: a lognormal body (Box-Muller) plus a Pareto spike."""
    par = model.params
    u1 = uniform(key, bm.STREAM_LATENCY_A)
    u2 = uniform(key, bm.STREAM_LATENCY_B)
    z = np.sqrt(-2.0 * np.log(1.0 - u1)) * np.cos(2.0 * np.pi * u2)
    latency = par[b, P_MEDIAN] * np.exp(par[b, P_SIGMA] * z)
    if uniform(key, bm.STREAM_SPIKE) < par[b, P_SPIKE_PROBABILITY]:
        u = uniform(key, bm.STREAM_SPIKE_SIZE)
        latency += broker_spike(u, par[b, P_SPIKE_SCALE], par[b, P_SPIKE_ALPHA], par[b, P_SPIKE_MAX])
    return min(latency, _MAX_LATENCY_MS)


# inlined at numba's level (as publish_info, thread_free, select_queue): a call passes every array of its
# arguments flattened on the stack, ~80 words here, ~220 for publish_info, ~290 for select_queue
@njit(inline="always", **_NO_RC)
def attempt_outcome(model, b, key, start, timeout):
    """``latency.attempt_outcome``: (OutcomeKind, latency, response code, stored, store ms, late ms, late
    code, exact us) of one attempt (late ms -1: no late answer; exact us: the answer's unrounded latency),
    decided by the decision chain both engines run, :func:`broker_answer` (``latency.answer`` compiled),
    from the window active at ``start`` (its kind's row resolved: ``W_EFFECT``; the process down:
    :func:`broker_process_down`; a paused one holds the request until ``W_END``). The reference adds
    TIMEOUT_OVERSHOOT_MS to a timeout's latency when it makes the Outcome: so does this, a timeout costs
    ``timeout + 1`` here."""
    wi, wf = model.window_ints, model.window_floats
    effect, factor, rate, burst_kind, burst_code, held = Effect.NONE, 1.0, 0.0, 0, 0, 0
    for j in range(model.window_offsets[b], model.window_offsets[b + 1]):
        if wi[j, W_START] <= start < wi[j, W_END]:
            if broker_process_down(wi[j, W_START], wi[j, W_CYCLE], wi[j, W_CYCLE_DOWN], start):
                effect = Effect.PROCESS_DOWN
            else:
                effect = wi[j, W_EFFECT]
                if effect == Effect.PAUSED:
                    held = wi[j, W_END] - start
            factor, rate = wf[j, WF_FACTOR], wf[j, WF_RATE]
            burst_kind, burst_code = wi[j, W_BURST_KIND], wi[j, W_BURST_CODE]
            break
    burst_draw = uniform(key, bm.STREAM_BURST) if effect == Effect.ERROR_BURST else 1.0
    kind, lat, code, stored, store_ms, late_ms, late_code, exact_us = broker_answer(
        effect,
        factor,
        rate,
        burst_kind,
        burst_code,
        burst_draw,
        uniform(key, bm.STREAM_ERROR),
        base_latency(model, b, key),
        model.error_cum[b],
        model.error_kind[b],
        model.error_code[b],
        model.connect_ms[b],
        model.connect_timeout_ms[b],
        timeout,
        held,
    )
    if kind == OutcomeKind.REMOTING_TIMEOUT:
        lat += TIMEOUT_OVERSHOOT_MS
    return kind, lat, code, stored, store_ms, late_ms, late_code, exact_us


@njit(**_NO_RC)
def store_none(fl, s):
    """The call did not reach a closed-loop store (yet)."""
    fl[s, FL_ST_BUSY] = -1
    fl[s, FL_ST_DEPTH] = -1
    fl[s, FL_ST_SERVICE] = -1


@njit(**_NO_RC)
def through_store(
    tables, fl, s, b, start, timeout, kind, lat, code, stored, store_ms, late_ms, late_code, exact_us
):
    """The closed-loop store's part of a call the broker model answered (``reference.ProducerSimulation
    .transport_for``): an answer with a latency (``broker_store.carries_load``) goes through broker ``b``'s
    trajectory (:func:`rocketsim.engine.compiled_store.trajectory_answer`) and becomes
    :func:`rocketsim.engine.compiled_store.closed_outcome`; its store columns go to ``fl`` (a rejection's
    remark is its Fate's, ``FL_ST_BUSY``, whatever the message's properties: :func:`refused_as_illegal`
    leaves it alone). Returns the call's (kind, latency, code, stored, store ms, late ms, late code, exact
    us: ``queue.closed_outcome``'s, the network's unrounded time plus the store's)."""
    store_none(fl, s)
    if not (kind == OutcomeKind.OK or (kind == OutcomeKind.REMOTING_TIMEOUT and late_ms >= 0)):
        return kind, lat, code, stored, store_ms, late_ms, late_code, exact_us
    answer = trajectory_answer(tables, b, start, tables.wire[s])
    fate, answer_us, stored_us, depth, service, period, size = answer
    pc_code = np.int64(tables.params[b, SP_PC_CODE])
    exact_us = (exact_us if exact_us >= 0 else store_ms * 1000) + answer_us - start * 1000
    kind, lat, code, stored, store_ms, late_ms, late_code = closed_outcome(
        store_ms, start, timeout, fate, answer_us, stored_us, pc_code
    )
    fl[s, FL_ST_DEPTH] = depth
    if stored:
        fl[s, FL_ST_SERVICE] = service
    else:
        fl[s, FL_ST_BUSY] = fate
        fl[s, FL_ST_PERIOD] = period
        fl[s, FL_ST_SIZE] = size
    return kind, lat, code, stored, store_ms, late_ms, late_code, exact_us


@njit(**_NO_RC)
def refused_as_illegal(kind, code, stored, late_ms, late_code):
    """``latency.refused_as_illegal`` of a call to a broker that refuses the message's properties: only
    what the broker would store reaches the check; that is stored nothing, a SendResult becomes
    MESSAGE_ILLEGAL and a late answer the refusal. Everything else (a flow-control rejection included)
    stands. Returns the call's (kind, code, stored, late code)."""
    if not stored:
        return kind, code, stored, late_code
    if is_result_kind(kind):
        return OutcomeKind.BROKER_ERROR, np.int64(bm.MESSAGE_ILLEGAL), False, late_code
    if late_ms >= 0:
        return kind, code, False, np.int64(bm.MESSAGE_ILLEGAL)
    return kind, code, False, late_code


@njit(**_NO_RC)
def properties_illegal(sends, s, q):
    """``store.properties_illegal`` of send ``s`` going to queue ``q``."""
    size = sends.props_base[s]
    if sends.props_qid[s]:
        size += 1
        while q >= 10:
            q //= 10
            size += 1
    return sends.props_chars[s] > _PROPERTIES_LIMIT or size > _PROPERTIES_LIMIT


@njit(**_NO_RC)
def oneway_caller_sees(rules, kind):
    """``send.oneway_caller_sees``: the outcomes a oneway caller sees (outcomes.ONEWAY_SEES)."""
    return rules.oneway_sees[kind]


# ---- queue selection: MQFaultStrategy.selectOneMessageQueue of each line ----------------------------


@njit(inline="always", **_NO_RC)
def _select_by_filters(inst, ix, ft, i, t, last, now, reset, cfg):
    """5.x: the available-and-not-last filter, then the reachable-and-not-last one, then round robin."""
    qb, qq, nq = inst.queue_broker, inst.queue_id, inst.n_queues[i]
    if cfg.fault_on:
        if reset:
            reset_index(ix, i, t)
        for _ in range(nq):
            p = increment_and_get(ix, i, t, cfg) % nq
            b = qb[i, p]
            if is_available(ft, b, now, cfg.availability_needs_reachable) and b != last:
                return p, b, qq[i, p]
        for _ in range(nq):
            p = increment_and_get(ix, i, t, cfg) % nq
            b = qb[i, p]
            if ((not ft.exists[b]) or ft.reachable[b]) and b != last:
                return p, b, qq[i, p]
    else:
        for _ in range(nq):
            p = increment_and_get(ix, i, t, cfg) % nq
            if qb[i, p] != last:
                return p, qb[i, p], qq[i, p]
    p = increment_and_get(ix, i, t, cfg) % nq
    return p, qb[i, p], qq[i, p]


@njit(**_NO_RC)
def _select_plain(inst, ix, i, t, cfg):
    """``fault.select_plain``: round robin."""
    p = queue_pos(increment_and_get(ix, i, t, cfg), inst.n_queues[i])
    return p, inst.queue_broker[i, p], inst.queue_id[i, p]


@njit(**_NO_RC)
def _select_avoiding(inst, ix, i, t, last, cfg):
    """``selectOneMessageQueue(lastBrokerName)``: a tick per candidate (4.8+), or one tick and a local
    ``index++`` scan (4.3-4.7, ``fault.select_avoiding_broker_one_tick``); else round robin."""
    qb, qq, nq = inst.queue_broker, inst.queue_id, inst.n_queues[i]
    if last >= 0:
        index = 0 if cfg.ticks_per_candidate else increment_and_get(ix, i, t, cfg)
        for _ in range(nq):
            if cfg.ticks_per_candidate:
                index = increment_and_get(ix, i, t, cfg)
            p = queue_pos(index, nq)
            index = int32(index + 1)
            if qb[i, p] != last:
                return p, qb[i, p], qq[i, p]
    return _select_plain(inst, ix, i, t, cfg)


@njit(**_NO_RC)
def _scan_accepts(ft, b, last, now, cfg):
    """``FaultStrategy._accepts``: available, and the line's clause about the last broker."""
    if cfg.latency_scan_broker == _SCAN_SAME_AS_LAST and last >= 0 and b != last:
        return False
    if cfg.latency_scan_broker == _SCAN_NOT_LAST and b == last:
        return False
    return is_available(ft, b, now, cfg.availability_needs_reachable)


@njit(inline="always", **_NO_RC)
def _select_available(inst, ix, routes, ft, worst, i, t, last, now, cfg):
    """4.x: round robin over available brokers, else ``pickOneAtLeast`` (4.3-4.9.7, 5.0-5.1.3 rewrite the
    slot); an index upstream's ``List.get`` refuses falls back to round robin (its catch)."""
    qb, qq, nq = inst.queue_broker, inst.queue_id, inst.n_queues[i]
    if not cfg.fault_on:
        return _select_avoiding(inst, ix, i, t, last, cfg)
    # one incrementAndGet, then a local `index++` (which may wrap) per probe
    index = increment_and_get(ix, i, t, cfg)
    for _ in range(nq):
        if cfg.latency_scan_keeps_sign:  # 5.1.0+: `index++ % size`
            p = java_rem(index, nq)
            if p < 0:
                return _select_plain(inst, ix, i, t, cfg)
        else:
            p = queue_pos(index, nq)
        index = int32(index + 1)
        if _scan_accepts(ft, qb[i, p], last, now, cfg):
            return p, qb[i, p], qq[i, p]
    not_best = pick_one_at_least(ft, worst, now, t, cfg)
    if not_best == PICK_FAILED:
        return _select_plain(inst, ix, i, t, cfg)
    wqn = routes.write_queue_nums[inst.route_version[i], not_best] if not_best >= 0 else -1
    if wqn > 0:
        p = queue_pos(increment_and_get(ix, i, t, cfg), nq)
        if not_best < 0:
            return p, qb[i, p], qq[i, p]
        qid = java_rem(increment_and_get(ix, i, t, cfg), wqn)
        if cfg.rewrites_cached_queue:  # the cached MessageQueue is rewritten in place
            qb[i, p] = not_best
            qq[i, p] = qid
            return p, not_best, qid
        return NO_BROKER, not_best, qid
    if not_best >= 0:
        fault_table_remove(ft, not_best)
    return _select_plain(inst, ix, i, t, cfg)


@njit(inline="always", **_NO_RC)
def select_queue(cfg, routes, inst, ix, ft, worst, i, t, last, now, reset):
    """(slot, broker, queue id) for instance ``i`` on thread ``t``; slot -1 is a MessageQueue made on the
    spot (4.9.8's pickOneAtLeast). Inlined at numba's level, with the two selections it chooses between:
    a call passes its ~290 flattened arguments on the stack, twice an attempt (see the module's notes)."""
    if cfg.uses_queue_filters:
        return _select_by_filters(inst, ix, ft, i, t, last, now, reset, cfg)
    return _select_available(inst, ix, routes, ft, worst, i, t, last, now, cfg)


# ---- the event heap: rows (time, event, counter, payload), smallest (time, event, counter) first -------


@njit(**_NO_RC)
def _heap_less(h, a, b):
    if h[a, H_TIME] != h[b, H_TIME]:
        return h[a, H_TIME] < h[b, H_TIME]
    if h[a, H_EVENT] != h[b, H_EVENT]:
        return h[a, H_EVENT] < h[b, H_EVENT]
    return h[a, H_COUNTER] < h[b, H_COUNTER]


@njit(inline="always", **_NO_RC)
def _sift_up(h, i):
    """Move heap row ``i`` up to its place; returns where it ends."""
    while i > 0:
        parent = (i - 1) >> 1
        if not _heap_less(h, i, parent):
            break
        for c in range(4):
            h[i, c], h[parent, c] = h[parent, c], h[i, c]
        i = parent
    return i


@njit(inline="always", **_NO_RC)
def _sift_down(h, i, n):
    """Move heap row ``i`` down to its place in a heap of ``n`` rows."""
    while True:
        m = 2 * i + 1
        if m >= n:
            break
        if m + 1 < n and _heap_less(h, m + 1, m):
            m += 1
        if not _heap_less(h, m, i):
            break
        for c in range(4):
            h[i, c], h[m, c] = h[m, c], h[i, c]
        i = m


@njit(**_NO_RC)
def heap_push(h, st, t, event, payload):
    """Push an event; the push counter (the last key) is ``st[ST_COUNTER]``."""
    i = st[ST_HEAP_SIZE]
    h[i, H_TIME] = t
    h[i, H_EVENT] = event
    h[i, H_COUNTER] = st[ST_COUNTER]
    h[i, H_PAYLOAD] = payload
    st[ST_HEAP_SIZE] = i + 1
    st[ST_COUNTER] += 1
    _sift_up(h, i)


@njit(**_NO_RC)
def heap_push_counted(h, st, t, event, payload, counter):
    """:func:`heap_push` with the push counter ``counter`` (taken when the push was due, see
    :func:`resolve_deferred`)."""
    i = st[ST_HEAP_SIZE]
    h[i, H_TIME] = t
    h[i, H_EVENT] = event
    h[i, H_COUNTER] = counter
    h[i, H_PAYLOAD] = payload
    st[ST_HEAP_SIZE] = i + 1
    _sift_up(h, i)


@njit(**_NO_RC)
def heap_pop(h, st):
    """Drop the root (read it first)."""
    n = st[ST_HEAP_SIZE] - 1
    st[ST_HEAP_SIZE] = n
    if n == 0:
        return
    for c in range(4):
        h[0, c] = h[n, c]
    _sift_down(h, 0, n)


@njit(**_NO_RC)
def heap_remove(h, st, i):
    """Take row ``i`` out of the heap (the last row takes its place and moves up or down)."""
    n = st[ST_HEAP_SIZE] - 1
    st[ST_HEAP_SIZE] = n
    if i == n:
        return
    for c in range(4):
        h[i, c] = h[n, c]
    if _sift_up(h, i) == i:
        _sift_down(h, i, n)


@njit(**_NO_RC)
def pool_dispatch(threads, born_ms, heap, st, now):
    """``pools.PoolSenders._dispatch``: push the START of the pool's next send if a thread is idle
    (its send not given yet: the push waits, :func:`resolve_deferred`)."""
    k = st[ST_POOL_NEXT]
    if st[ST_POOL_PENDING] == 1 or (k >= st[ST_GIVEN] and st[ST_FINAL] == 1):
        return
    cap = born_ms.shape[0]
    for t in range(threads.idle.shape[0]):
        if threads.idle[t]:
            st[ST_POOL_PENDING] = 1
            if k >= st[ST_GIVEN]:
                st[ST_POOL_DEFER] = 1
                st[ST_POOL_DEF_TIME] = now
                st[ST_POOL_DEF_COUNTER] = st[ST_COUNTER]
                st[ST_COUNTER] += 1
                return
            born = born_ms[threads.fifo[k % cap] % cap]
            heap_push(heap, st, max(born, now), Event.START, -1)
            return


# inlined at numba's level into run_loop, its only caller: LLVM left it a call copying Threads' ten arrays
@njit(inline="always", **_NO_RC)
def pool_take(threads, st, send_thread):
    """``pools.PoolSenders.take``: the next send, taken by the idle thread idle the longest (ties:
    the lowest id). Returns (send, thread)."""
    st[ST_POOL_PENDING] = 0
    best = -1
    for t in range(threads.idle.shape[0]):
        if threads.idle[t] and (best < 0 or threads.idle_since[t] < threads.idle_since[best]):
            best = t
    threads.idle[best] = False
    cap = send_thread.shape[0]
    s = threads.fifo[st[ST_POOL_NEXT] % cap] % cap
    st[ST_POOL_NEXT] += 1
    send_thread[s] = best
    return s, best


@njit(inline="always", **_NO_RC)
def thread_free(pool, threads, born_ms, heap, st, th, free_at):
    """Thread ``th`` is free again at ``free_at``: its next send (partitioned), or the pool's."""
    if pool:
        threads.idle[th] = True
        threads.idle_since[th] = free_at
        pool_dispatch(threads, born_ms, heap, st, free_at)
    else:
        schedule_next_send(threads, born_ms, heap, st, th, free_at)


@njit(**_NO_RC)
def schedule_next_send(threads, born_ms, heap, st, th, free_at):
    """Push the START of thread ``th``'s next send, at ``max(its born time, free_at)`` (its send not given
    yet: the push waits, :func:`resolve_deferred`)."""
    g = threads.cursor[th]
    if g >= 0:
        heap_push(heap, st, max(born_ms[g % born_ms.shape[0]], free_at), Event.START, th)
    elif st[ST_FINAL] == 0:
        threads.deferred[th] = True
        threads.def_time[th] = free_at
        threads.def_counter[th] = st[ST_COUNTER]
        st[ST_COUNTER] += 1


@njit(**_NO_RC)
def resolve_deferred(threads, born_ms, heap, st):
    """The STARTs that waited for their sends, pushed now that they are given (the time and push counter
    they would have had), or dropped when every send is given and the thread (the pool) has none left."""
    cap = born_ms.shape[0]
    final = st[ST_FINAL] == 1
    for th in range(threads.deferred.shape[0]):
        if not threads.deferred[th]:
            continue
        g = threads.cursor[th]
        if g >= 0:
            t = max(born_ms[g % cap], threads.def_time[th])
            heap_push_counted(heap, st, t, Event.START, th, threads.def_counter[th])
            threads.deferred[th] = False
        elif final:
            threads.deferred[th] = False
    if st[ST_POOL_DEFER] == 1:
        k = st[ST_POOL_NEXT]
        if k < st[ST_GIVEN]:
            t = max(born_ms[threads.fifo[k % cap] % cap], st[ST_POOL_DEF_TIME])
            heap_push_counted(heap, st, t, Event.START, -1, st[ST_POOL_DEF_COUNTER])
            st[ST_POOL_DEFER] = 0
        elif final:
            st[ST_POOL_DEFER] = 0
            st[ST_POOL_PENDING] = 0


@njit(**_NO_RC)
def give_sends(
    sends,
    threads,
    state_fl,
    res,
    send_thread,
    st,
    g0,
    gid_seq,
    born,
    dense,
    kind,
    topic,
    ohash,
    p_base,
    p_qid,
    p_chars,
    pool_order,
):
    """Sends ``g0..`` (their arrays, seq order) into the ring's slots: their state reset, each linked after
    its thread's last send (a thread seen for the first time waits for its first START with the next
    first-appearance number as its push counter)."""
    cap = sends.seq.shape[0]
    partitioned = threads.cursor.shape[0] > 0
    for k in range(gid_seq.shape[0]):
        g = g0 + k
        s = g % cap
        sends.gid[s] = g
        sends.next_same[s] = -1
        sends.seq[s] = gid_seq[k]
        sends.born[s] = born[k]
        sends.thread[s] = dense[k]
        sends.kind[s] = kind[k]
        sends.topic[s] = topic[k]
        sends.order_hash[s] = ohash[k]
        sends.props_base[s] = p_base[k]
        sends.props_qid[s] = p_qid[k]
        sends.props_chars[s] = p_chars[k]
        send_thread[s] = dense[k]
        for c in range(state_fl.shape[1]):
            state_fl[s, c] = 0
        state_fl[s, FL_POOL] = -1
        state_fl[s, FL_BEGIN] = NOT_BEGUN
        res.status[s] = 0
        res.error[s] = 0
        res.aux[s] = 0
        res.cost[s] = 0
        res.broker[s] = NO_BROKER
        res.queue_id[s] = -1
        res.end[s] = -1
        res.exhausted[s] = False
        res.n_sent[s] = 0
        res.kernel_start[s] = 0
        if born[k] > st[ST_BORN_MAX]:
            st[ST_BORN_MAX] = born[k]
        if partitioned:
            th = dense[k]
            if threads.tail[th] < 0:  # first seen: its first START, numbered by first appearance
                threads.deferred[th] = True
                threads.def_time[th] = 0
                threads.def_counter[th] = st[ST_SEEN]
                st[ST_SEEN] += 1
            if threads.cursor[th] < 0:
                threads.cursor[th] = g
            else:
                sends.next_same[threads.tail[th] % cap] = g
            threads.tail[th] = g
        else:
            threads.fifo[g % cap] = pool_order[k]
    st[ST_GIVEN] = g0 + gid_seq.shape[0]


# ---- the steps of the event loop ----------------------------------------------------------------------


@njit(inline="always", **_NO_RC)
def publish_info(routes, keys, threads, inst, cache, ix, st, topic, now):
    """The producer's TopicPublishInfo instance of ``topic`` at ``now``: the cached one, or a new one after
    a route change (new slots, new per-thread indexes)."""
    lo = 0
    hi = routes.start.shape[0]
    while lo < hi:  # bisect_right(version starts, now) - 1
        mid = (lo + hi) >> 1
        if routes.start[mid] <= now:
            lo = mid + 1
        else:
            hi = mid
    v = lo - 1
    st[ST_ROUTE_NOW] = v  # what the detector resolves brokers against
    if cache.version[topic] != v:
        i = st[ST_INSTANCES]
        st[ST_INSTANCES] = i + 1
        inst.n_queues[i] = routes.n_queues[v]
        inst.route_version[i] = v
        for p in range(routes.queue_broker.shape[1]):
            inst.queue_broker[i, p] = routes.queue_broker[v, p]
            inst.queue_id[i, p] = routes.queue_id[v, p]
        for tt in range(threads.bits.shape[0]):
            ix.is_set[i, tt] = False
            ix.counter[i, tt] = 0
            ix.key[i, tt] = index_key(keys.index_base, threads.bits[tt], keys.topic_bits[topic], v)
        cache.version[topic] = v
        cache.instance[topic] = i
    return cache.instance[topic]


@njit(**_NO_RC)
def make_call(inp, state, s, attempt, slot, b, q, now, timeout, waited_for_write):
    """Ask the broker model for the call's outcome and push its completion (a oneway caller waits only
    for the write: at once unless the write failed); a SYNC request to a broker whose channel is not
    connected waits for its connect first (:func:`conn_wait`)."""
    fl = state.in_flight
    fl[s, FL_SLOT] = slot
    fl[s, FL_BROKER] = b
    fl[s, FL_QUEUE_ID] = q
    fl[s, FL_CALL_START] = now
    fl[s, FL_CONNECT] = CN_NONE
    ch = state.channels
    if not waited_for_write and ch[b * N_CH + CH_CONNECT_MS] > 0 and ch[b * N_CH + CH_CONNECTED] == 0:
        conn_wait(inp.keys, inp.sends, fl, ch, state.heap, state.counters, s, attempt, b, now, timeout)
        return
    write_call(inp, state, s, attempt, b, q, now, timeout, waited_for_write, 0)


# inlined at numba's level into make_call and conn_ended (a call of it would copy inp and state)
@njit(inline="always", **_NO_RC)
def write_call(inp, state, s, attempt, b, q, at, timeout, waited_for_write, wait):
    """The call's request written at ``at``: its start, or ``wait`` ms after it, the end of the connect it
    waited for, which its ``timeout`` (what is left) already paid for. The broker model answers it from
    ``at``; its latency and store time count from the call's start (``sync_answers.after_connect``); a SYNC
    request is pending on the broker's channel until its answer (``reference.EventLoop.write_sync``)."""
    key = attempt_key(inp.keys.producer, inp.sends.seq[s], attempt)
    answer = attempt_outcome(inp.model, b, key, at, timeout)
    kind, lat, code, stored, store_ms, late_ms, late_code, exact_us = answer
    if inp.store.params.shape[0] > 0:
        kind, lat, code, stored, store_ms, late_ms, late_code, exact_us = through_store(
            inp.store,
            state.in_flight,
            s,
            b,
            at,
            timeout,
            kind,
            lat,
            code,
            stored,
            store_ms,
            late_ms,
            late_code,
            exact_us,
        )
    if stored and properties_illegal(inp.sends, s, q):
        kind, code, stored, _ = refused_as_illegal(kind, code, stored, late_ms, late_code)
        exact_us = -1
    fl = state.in_flight
    if kind == OutcomeKind.REMOTING_TIMEOUT:
        exact_us = -1
    elif exact_us >= 0:
        exact_us += wait * 1000
    fl[s, FL_EXACT_US] = exact_us
    fl[s, FL_KIND] = kind
    fl[s, FL_LATENCY] = lat + wait
    fl[s, FL_CODE] = code
    fl[s, FL_STORED] = stored
    fl[s, FL_STORE_MS] = store_ms + wait if stored else store_ms
    done_at = at + lat
    if waited_for_write and not oneway_caller_sees(inp.rules, kind):
        done_at = at
    if not waited_for_write:  # a SYNC request, pending on the broker's channel until done_at
        fl[s, FL_CHANNEL] = state.channels[b * N_CH + CH_NUMBER]
        fl[s, FL_DONE] = done_at
        fl[s, FL_CALL_TIMEOUT] = timeout
    heap_push(state.heap, state.counters, done_at, Event.DELIVER, s)


@njit(**_NO_RC)
def conn_answered(inp, state, s, now):
    """``reference.ProducerSimulation``'s ``answered`` (:class:`rocketsim.client.connection.Connections`):
    SYNC send ``s``'s request came to its answer at ``now``; a timeout that closes its channel (still the
    broker's): :func:`conn_close`."""
    fl, cfg, ch = state.in_flight, inp.config, state.channels
    b = fl[s, FL_BROKER]
    if fl[s, FL_KIND] != OutcomeKind.REMOTING_TIMEOUT or fl[s, FL_CHANNEL] != ch[b * N_CH + CH_NUMBER]:
        return
    if not channel_close_rule(cfg.closes_on_sync_timeout, cfg.close_needs_time_left, fl[s, FL_CALL_TIMEOUT]):
        return
    conn_close(inp.sends.kind, fl, ch, state.heap, state.counters, b, now)


@njit(**_NO_RC)
def conn_close(kinds, fl, ch, h, st, b, now):
    """``Connections.close``: the client closes broker ``b``'s channel at ``now`` (the next SYNC request
    connects a new one) and fails every SYNC request pending on it whose answer is due later, now: their
    DELIVERs are taken out of the heap and pushed again at ``now`` (in their push order) as send-request
    failures (``reference.EventLoop.fail_fast``)."""
    current = ch[b * N_CH + CH_NUMBER]
    ch[b * N_CH + CH_NUMBER] = current + 1
    ch[b * N_CH + CH_CONNECTED] = 0
    while True:  # the pending request pushed first, until none is left
        at = -1
        for i in range(st[ST_HEAP_SIZE]):
            if h[i, H_EVENT] != Event.DELIVER or h[i, H_TIME] <= now:
                continue
            o = h[i, H_PAYLOAD]
            k = kinds[o]
            mine = (k == SendKind.SYNC or k == SendKind.ORDERED) and fl[o, FL_BROKER] == b
            if mine and fl[o, FL_CHANNEL] == current and (at < 0 or h[i, H_COUNTER] < h[at, H_COUNTER]):
                at = i
        if at < 0:
            return
        o = h[at, H_PAYLOAD]
        heap_remove(h, st, at)
        fl[o, FL_KIND] = OutcomeKind.REMOTING_SEND_REQUEST  # the broker still stores what it was written
        fl[o, FL_LATENCY] = now - fl[o, FL_CALL_START]
        fl[o, FL_CODE] = 0
        fl[o, FL_EXACT_US] = -1
        fl[o, FL_DONE] = now
        heap_push(h, st, now, Event.DELIVER, o)


@njit(**_NO_RC)
def connect_order(keys, sends, fl, g):
    """Where waiter ``g`` (a send's number) wakes at its connect's end (:func:`client.connection.race_draws`'s
    first draw, from its call's attempt key)."""
    o = g % sends.seq.shape[0]
    return uniform(attempt_key(keys.producer, sends.seq[o], fl[o, FL_CALL_ATTEMPT]), STREAM_CONNECT_ORDER)


@njit(**_NO_RC)
def conn_wait(keys, sends, fl, ch, heap, st, s, attempt, b, now, timeout):
    """``reference.EventLoop.waits_for_channel``: SYNC send ``s``'s request waits for broker ``b``'s channel
    to connect (``getAndCreateChannel``): the first starts the connect (its DELIVER at the connect's end,
    ``connect_ms`` later), every one until then waits for it, in the list of waiters in wake order
    (``Connections.connect_ended`` sorts them by (order, send)). Nothing is written yet, nothing pending."""
    fl[s, FL_CALL_TIMEOUT] = timeout
    fl[s, FL_CALL_ATTEMPT] = attempt
    fl[s, FL_CHANNEL] = -1
    gid = sends.gid[s]
    mine = connect_order(keys, sends, fl, gid)
    head = b * N_CH + CH_WAITERS
    starts = ch[head] < 0
    prev, w = -1, ch[head]
    while w >= 0:
        theirs = connect_order(keys, sends, fl, w)
        if theirs > mine or (theirs == mine and w > gid):
            break
        prev, w = w, fl[w % sends.seq.shape[0], FL_NEXT_WAITER]
    fl[s, FL_NEXT_WAITER] = w
    if prev < 0:
        ch[head] = gid
    else:
        fl[prev % sends.seq.shape[0], FL_NEXT_WAITER] = gid
    if starts:
        fl[s, FL_CONNECT] = CN_STARTS
        heap_push(heap, st, now + ch[b * N_CH + CH_CONNECT_MS], Event.DELIVER, s)
    else:
        fl[s, FL_CONNECT] = CN_WAITS


@njit(**_NO_RC)
def conn_ended(inp, state, b, now):
    """``reference.EventLoop.connect_ended``: broker ``b``'s new channel connected at ``now``; each waiter,
    in wake order, is written (the broker model from ``now``) or fails unwritten at ``now``
    (:func:`client.connection.waiter_fate`, the race drawn from its attempt key); a budget check that
    closes the channel fails the requests written on it first (NettyRemotingClient.invokeSync at 4.9.8)."""
    fl, ch, cfg, sends = state.in_flight, state.channels, inp.config, inp.sends
    cap = sends.seq.shape[0]
    ch[b * N_CH + CH_CONNECTED] = 1
    g = ch[b * N_CH + CH_WAITERS]
    ch[b * N_CH + CH_WAITERS] = -1
    closes = conn_budget_closes(cfg.closes_on_sync_timeout, cfg.close_needs_time_left)
    closed = False
    while g >= 0:
        w = g % cap
        g = fl[w, FL_NEXT_WAITER]
        wait = now - fl[w, FL_CALL_START]
        timeout, attempt = fl[w, FL_CALL_TIMEOUT], fl[w, FL_CALL_ATTEMPT]
        key = attempt_key(inp.keys.producer, sends.seq[w], attempt)
        took = uniform(key, STREAM_CONNECT_RACE) < TOOK_CHANNEL_BELOW
        fate = conn_waiter_fate(closed, took, conn_budget_refuses(wait, timeout, cfg.close_needs_time_left))
        fl[w, FL_CONNECT] = CN_NONE
        if fate == WaiterFate.WRITE:
            write_call(inp, state, w, attempt, b, fl[w, FL_QUEUE_ID], now, timeout - wait, False, wait)
            continue
        if fate == WaiterFate.BUDGET:
            fl[w, FL_CONNECT] = CN_BUDGET
            closed = closed or closes
        fl[w, FL_KIND] = conn_unwritten_kind(fate)
        fl[w, FL_LATENCY] = wait
        fl[w, FL_CODE] = 0
        fl[w, FL_STORED] = False
        fl[w, FL_STORE_MS] = 0
        fl[w, FL_EXACT_US] = -1
        fl[w, FL_DONE] = now
        store_none(fl, w)
        heap_push(state.heap, state.counters, now, Event.DELIVER, w)
    if closed:
        conn_close(sends.kind, fl, ch, state.heap, state.counters, b, now)


@njit(**_NO_RC)
def fail(res, s, failure, now):
    res.status[s] = Status.FAILED
    res.error[s] = failure
    res.end[s] = now


@njit(inline="always", **_NO_RC)
def start_send(inp, state, s, th, i, now):
    """A SYNC or ONEWAY send starts (with TopicPublishInfo instance ``i``): an ordered send makes its one
    call, a oneway send its one call, a SYNC send enters sendDefaultImpl's loop. Returns (what runs next:
    STEP_*, thread free at). Inlined into :func:`run_loop` (numba's ``inline="always"``; see the module's
    notes)."""
    sends, cfg, fl, res, inst = inp.sends, inp.config, state.in_flight, state.outcomes, state.instances
    kind = sends.kind[s]
    ordered = kind == SendKind.ORDERED or kind == SendKind.ORDERED_ONEWAY
    nq = inst.n_queues[i]
    if ordered and nq == 0:  # sendSelectImpl: "No route info for this topic, T"
        fail(res, s, Failure.NO_ROUTE_SELECT, now)
        return STEP_NONE, now
    if ordered:  # SelectMessageQueueByHash: no fault-table update of sendSelectImpl's own
        p = java_abs(java_rem(sends.order_hash[s], nq))
        # the queue is read once, when chosen: a later 4.9.7 rewrite of the slot does not move it
        b, q = inst.queue_broker[i, p], inst.queue_id[i, p]
        make_call(inp, state, s, 0, p, b, q, now, cfg.timeout_ms, kind == SendKind.ORDERED_ONEWAY)
        return STEP_NONE, -1
    if nq == 0:  # "No route info of this topic"
        fail(res, s, Failure.NO_ROUTE, now)
        return STEP_NONE, now
    if kind == SendKind.ONEWAY:
        ix, ft, worst = state.indexes, state.fault_table, state.worst
        p, b, q = select_queue(cfg, inp.routes, inst, ix, ft, worst, i, th, np.int64(NO_BROKER), now, False)
        make_call(inp, state, s, 0, p, b, q, now, cfg.timeout_ms, True)
        return STEP_NONE, -1
    fl[s, FL_TIMES] = 0
    fl[s, FL_LAST_BROKER] = NO_BROKER
    fl[s, FL_HAS_RESULT] = False
    return STEP_SEND, -1


@njit(**_NO_RC)
def record_attempt(fl, att, st, ft, res, s, attempt, latency, target, now):
    """The attempt row of send ``s``'s call that just completed (isolation as of ``target`` at ``now``).
    Small steps take the arrays they use, not ``state``: a call passes every array of its arguments."""
    n = st[ST_ATTEMPTS]
    att.send[n] = s
    att.attempt[n] = attempt
    att.start[n] = fl[s, FL_CALL_START]
    att.latency[n] = latency
    att.broker[n] = fl[s, FL_BROKER]
    att.queue_id[n] = fl[s, FL_QUEUE_ID]
    att.kind[n] = fl[s, FL_KIND]
    att.code[n] = fl[s, FL_CODE]
    att.isolated_until[n] = isolated_until(ft, target, now)
    att.stored[n] = fl[s, FL_STORED]
    att.stored_ts[n] = fl[s, FL_CALL_START] + fl[s, FL_STORE_MS] if fl[s, FL_STORED] else 0
    att.st_busy[n] = fl[s, FL_ST_BUSY]
    att.st_depth[n] = fl[s, FL_ST_DEPTH]
    att.st_service[n] = fl[s, FL_ST_SERVICE]
    att.st_period[n] = fl[s, FL_ST_PERIOD]
    att.st_size[n] = fl[s, FL_ST_SIZE]
    att.start_us[n] = fl[s, FL_CALL_START] * 1000
    att.latency_us[n] = fl[s, FL_EXACT_US]
    st[ST_ATTEMPTS] = n + 1
    res.n_sent[s] += 1
    res.broker[s] = fl[s, FL_BROKER]
    res.queue_id[s] = fl[s, FL_QUEUE_ID]


@njit(**_NO_RC)
def deliver_ordered(inp, state, s, now):
    """An ordered SYNC send's call completed: its one attempt decides the result, errors thrown raw.
    Returns the thread's free time."""
    fl, res = state.in_flight, state.outcomes
    kind, code = fl[s, FL_KIND], fl[s, FL_CODE]
    record_attempt(
        state.in_flight,
        state.attempts,
        state.counters,
        state.fault_table,
        state.outcomes,
        s,
        0,
        fl[s, FL_LATENCY],
        fl[s, FL_BROKER],
        now,
    )
    res.end[s] = now
    if is_result_kind(kind):
        res.status[s] = kind
    elif fl[s, FL_CONNECT] == CN_BUDGET:  # invokeSync's budget check after a connect: its own text
        fail(res, s, Failure.INVOKE_SYNC_TIMEOUT, now)
        res.aux[s] = fl[s, FL_BROKER]
    else:
        fail_raw(inp, res, s, kind, code, now)
    return now


@njit(**_NO_RC)
def fail_raw(inp, res, s, kind, code, now):
    """An ordered SYNC or ONEWAY send's failure, thrown as it is: an ``MQBrokerException``, the client's
    error or interrupt, or a ``RemotingException``."""
    if kind == OutcomeKind.BROKER_ERROR:
        fail(res, s, Failure.BROKER, now)
        res.aux[s] = code
    elif kind == OutcomeKind.CLIENT_ERROR or kind == OutcomeKind.INTERRUPTED:
        fail(res, s, Failure.ORDERED_OTHER, now)
        res.aux[s] = kind
    else:  # a RemotingException
        fail(res, s, Failure.REMOTING, now)
        res.aux[s] = kind
        res.cost[s] = inp.config.timeout_ms


@njit(**_NO_RC)
def deliver_ordered_oneway(inp, state, s, now):
    """An ordered ONEWAY send's request was written (or what the caller sees failed): no fault update,
    no retry; a failure it sees is thrown raw. Returns the thread's free time."""
    fl, res = state.in_flight, state.outcomes
    kind = fl[s, FL_KIND]
    fl[s, FL_EXACT_US] = -1  # the caller saw the write only
    record_attempt(
        state.in_flight,
        state.attempts,
        state.counters,
        state.fault_table,
        state.outcomes,
        s,
        0,
        now - fl[s, FL_BEGIN],
        fl[s, FL_BROKER],
        now,
    )  # the wait for the write only
    res.end[s] = now
    if not oneway_caller_sees(inp.rules, kind):
        res.status[s] = Status.ONEWAY_SENT
    else:  # never a broker error: the caller sees only the write
        fail_raw(inp, res, s, kind, fl[s, FL_CODE], now)
    return now


@njit(**_NO_RC)
def scan_fired(cfg, start, timeout):
    """``send.ResponseScan.timeout_fired_ms``: the response-table scan run that fails a request."""
    first, period = cfg.scan_first_ms, cfg.scan_period_ms
    due = start + timeout + 1000
    if due <= first:
        return first
    return first + (due - first + period - 1) // period * period


@njit(inline="always", **_NO_RC)
def client_pool_take(cp, fl, pool, s):
    """``pools.ClientPool.take``: the idle thread of ``pool`` idle the longest (ties: the lowest) runs
    send ``s`` now; none idle: ``s`` waits (FIFO) and -1."""
    best = -1
    for j in range(cp.size[pool]):
        if cp.idle[pool, j] and (best < 0 or cp.idle_since[pool, j] < cp.idle_since[pool, best]):
            best = j
    if best < 0:
        cp.fifo[pool, cp.tail[pool]] = s
        cp.tail[pool] = (cp.tail[pool] + 1) % cp.fifo.shape[1]
        return -1
    cp.idle[pool, best] = False
    fl[s, FL_POOL] = pool
    fl[s, FL_POOL_THREAD] = best
    return best


@njit(**_NO_RC)
def client_pool_full(cp, pool, capacity):
    """``pools.ClientPool.full``: no thread of ``pool`` idle and ``capacity`` sends waiting."""
    for j in range(cp.size[pool]):
        if cp.idle[pool, j]:
            return False
    waiting = (cp.tail[pool] - cp.head[pool]) % cp.fifo.shape[1]
    return waiting >= capacity


@njit(**_NO_RC)
def client_pool_release(cp, fl, heap, st, s, now):
    """``reference.EventLoop.release``: send ``s`` stops running on its pool thread,
    which takes the send that waited longest (a DELIVER now) or idles."""
    pool = fl[s, FL_POOL]
    if pool < 0:
        return
    j = fl[s, FL_POOL_THREAD]
    fl[s, FL_POOL] = -1
    if cp.head[pool] != cp.tail[pool]:
        w = cp.fifo[pool, cp.head[pool]]
        cp.head[pool] = (cp.head[pool] + 1) % cp.fifo.shape[1]
        fl[w, FL_POOL] = pool
        fl[w, FL_POOL_THREAD] = j
        fl[w, FL_PHASE] = PH_EXEC if fl[w, FL_PHASE] == PH_EXEC else PH_CB_RUN  # a send, or a callback
        heap_push(heap, st, now, Event.DELIVER, w)
    else:
        cp.idle[pool, j] = True
        cp.idle_since[pool, j] = now


@njit(**_NO_RC)
def is_thrown(cfg, kind, refused):
    """An outcome ``invokeAsync`` throws (caught in ``sendMessageAsync``, on the calling thread) rather than
    hands to a callback: 4.9 connect failures, interrupts and refusals, client errors (5.x completes a
    refusal's future exceptionally: a callback)."""
    if refused != REF_NONE:
        return not cfg.remoting_completes_futures
    return kind == OutcomeKind.CLIENT_ERROR or (
        not cfg.remoting_completes_futures
        and (kind == OutcomeKind.REMOTING_CONNECT or kind == OutcomeKind.INTERRUPTED)
    )


@njit(**_NO_RC)
def client_thread(cfg, fl, base, s):
    """The (dense) thread ASYNC send ``s`` runs on: its pool thread, else the event loop (its ThreadLocalIndex
    and whichItemWorst: after the ``base`` sender threads come the executor's, the callback executor's,
    the loop)."""
    if fl[s, FL_POOL] == POOL_EXECUTOR:
        return base + fl[s, FL_POOL_THREAD]
    if fl[s, FL_POOL] == POOL_CALLBACK:
        return base + cfg.executor_threads + fl[s, FL_POOL_THREAD]
    return base + cfg.executor_threads + cfg.callback_threads


@njit(**_NO_RC)
def semaphore_pop(h, st):
    """Drop the smallest release time of the async semaphore's heap (read it first)."""
    n = st[ST_SEM_SIZE] - 1
    st[ST_SEM_SIZE] = n
    h[0] = h[n]
    i = 0
    while True:
        m = 2 * i + 1
        if m >= n:
            break
        if m + 1 < n and h[m + 1] < h[m]:
            m += 1
        if h[m] >= h[i]:
            break
        h[i], h[m] = h[m], h[i]
        i = m


@njit(**_NO_RC)
def semaphore_try_acquire(h, st, permits, now, wait_ms):
    """``send.AsyncSemaphore.try_acquire``: when a permit is granted (``now`` if one is free, else the
    earliest release within ``wait_ms``), -1 if none."""
    while st[ST_SEM_SIZE] > 0 and h[0] <= now:
        semaphore_pop(h, st)
    if st[ST_SEM_SIZE] < permits:
        return now
    if wait_ms > 0 and h[0] <= now + wait_ms:
        grant = h[0]
        semaphore_pop(h, st)
        return grant
    return -1


@njit(**_NO_RC)
def semaphore_hold_until(h, st, release):
    """``send.AsyncSemaphore.hold_until``: a dispatched request holds a permit until its callback."""
    i = st[ST_SEM_SIZE]
    h[i] = release
    st[ST_SEM_SIZE] = i + 1
    while i > 0:
        parent = (i - 1) >> 1
        if h[parent] <= h[i]:
            break
        h[i], h[parent] = h[parent], h[i]
        i = parent


# ---- async backpressure: client/backpressure.py's PermitGate over arrays (Permits) ---------------------


@njit(**_NO_RC)
def permit_need(sends, s, row):
    """What send ``s`` takes of semaphore ``row``: one permit of the count, its body's bytes."""
    return 1 if row == 0 else sends.body[s]


@njit(**_NO_RC)
def permit_unqueue(pm, row, s):
    """``FairSemaphore.expire``: take ``s`` out of ``row``'s waiters, if it is there."""
    m = pm.fifo.shape[1]
    k = pm.head[row]
    while k != pm.tail[row]:
        if pm.fifo[row, k] == s:
            while (k + 1) % m != pm.tail[row]:
                pm.fifo[row, k] = pm.fifo[row, (k + 1) % m]
                k = (k + 1) % m
            pm.tail[row] = k
            return
        k = (k + 1) % m


@njit(**_NO_RC)
def permit_gate(sends, fl, pm, heap, st, timeout_ms, s, now, expired):
    """``PermitGate.acquire`` in ``executeAsyncMessageSend``: the count, then the body's bytes, each waited
    for until ``beginStartTime + sendMsgTimeout`` (``expired``: that deadline came). Returns 1: both held;
    0: it waits (its deadline is a DELIVER); -1: refused (FL_BP_HELD is the semaphore it waited for)."""
    row = fl[s, FL_BP_HELD]
    if expired:
        permit_unqueue(pm, row, s)
        return -1
    deadline = fl[s, FL_BEGIN] + timeout_ms
    while row < 2:
        n = permit_need(sends, s, row)
        if pm.head[row] == pm.tail[row] and pm.available[row] >= n:
            pm.available[row] -= n
            row += 1
            fl[s, FL_BP_HELD] = row
            continue
        if deadline <= now:
            return -1
        pm.fifo[row, pm.tail[row]] = s
        pm.tail[row] = (pm.tail[row] + 1) % pm.fifo.shape[1]
        fl[s, FL_PHASE] = PH_PERMIT_WAIT
        if fl[s, FL_BP_COUNTER] == 0:
            fl[s, FL_BP_COUNTER] = st[ST_COUNTER]
            heap_push(heap, st, deadline, Event.DELIVER, s)
        else:  # waits again after a grant: the reference's first deadline push still governs
            heap_push_counted(heap, st, deadline, Event.DELIVER, s, fl[s, FL_BP_COUNTER])
            st[ST_COUNTER] += 1
        return 0
    return 1


@njit(**_NO_RC)
def permit_give(sends, fl, pm, heap, st, timeout_ms, row, n, now):
    """``FairSemaphore.release`` of ``n`` permits of ``row`` at ``now``: the waiters it grants, in order,
    hold them and go on at a DELIVER now (their deadline's DELIVER taken out of the heap); a waiter whose
    deadline is ``now`` is passed over (its deadline refuses it)."""
    pm.available[row] += n
    m = pm.fifo.shape[1]
    while pm.head[row] != pm.tail[row]:
        w = pm.fifo[row, pm.head[row]]
        if fl[w, FL_BEGIN] + timeout_ms <= now:
            pm.head[row] = (pm.head[row] + 1) % m
            continue
        need = permit_need(sends, w, row)
        if need > pm.available[row]:
            break
        pm.head[row] = (pm.head[row] + 1) % m
        pm.available[row] -= need
        fl[w, FL_BP_HELD] = row + 1
        for i in range(st[ST_HEAP_SIZE]):  # its one pending DELIVER: the deadline
            if heap[i, H_EVENT] == Event.DELIVER and heap[i, H_PAYLOAD] == w:
                heap_remove(heap, st, i)
                break
        fl[w, FL_PHASE] = PH_PERMIT
        heap_push(heap, st, now, Event.DELIVER, w)


@njit(**_NO_RC)
def permit_release(sends, fl, pm, heap, st, timeout_ms, s, now):
    """``BackpressureSendCallBack.semaphoreProcessor``: send ``s`` ended at ``now``: its bytes, then its
    count, back (``PermitGate.release``)."""
    held = fl[s, FL_BP_HELD]
    fl[s, FL_BP_HELD] = 0
    if held == 2:
        permit_give(sends, fl, pm, heap, st, timeout_ms, 1, sends.body[s], now)
    if held >= 1:
        permit_give(sends, fl, pm, heap, st, timeout_ms, 0, 1, now)


@njit(**_NO_RC)
def async_call(inp, state, s, attempt, now, req_timeout):
    """ASYNC send ``s``'s request ``attempt`` from ``sendMessageAsync`` at ``now`` with ``req_timeout``
    left (``send.async_send_steps``' loop): 4.9 refuses it with no time left, a plain send takes a permit
    of the semaphore (waiting for one up to the timeout, else refused), then the broker model answers. A
    failure thrown synchronously comes after its latency on the same thread (returns True when that is
    now: the caller handles it at once); a dispatched request ends the sync part (``sendDefaultImpl``'s
    own update, when the permit is granted), frees the thread, and its callback is due at its answer, or,
    unanswered, at the response-table scan (an answer after the timeout but before the scan is taken: a
    late answer)."""
    cfg, fl = inp.config, state.in_flight
    b, q = fl[s, FL_BROKER], fl[s, FL_QUEUE_ID]
    fl[s, FL_TIMES] = attempt
    fl[s, FL_REQ_TIMEOUT] = req_timeout
    fl[s, FL_CALL_BEGIN] = now
    refused = REF_NONE
    start = now
    code = 0
    stored = False
    store_ms = 0
    late_ms = -1
    late_code = 0
    exact_us = -1
    if inp.store.params.shape[0] > 0:
        store_none(fl, s)
    if req_timeout < 0:  # invokeAsync: timeoutMillis < costTime (every line; 5.3.0+ through the future)
        refused, kind, lat = REF_NO_BUDGET, OutcomeKind.TOO_MANY_REQUESTS, 0
    else:
        grant = now
        if inp.sends.kind[s] == SendKind.ASYNC:  # a selector send takes no permit (send.ordered_send_steps)
            grant = semaphore_try_acquire(
                state.semaphore, state.counters, cfg.async_permits, now, req_timeout
            )
        if grant < 0 and req_timeout <= 0:
            refused, kind, lat = REF_TOO_FAST, OutcomeKind.TOO_MANY_REQUESTS, 0
        elif grant < 0:
            refused, kind, lat = REF_SEMAPHORE, OutcomeKind.REMOTING_TIMEOUT, req_timeout
        else:
            start = grant
            key = attempt_key(inp.keys.producer, inp.sends.seq[s], attempt)
            timeout = req_timeout - (grant - now)
            answer = attempt_outcome(inp.model, b, key, grant, timeout)
            kind, lat, code, stored, store_ms, late_ms, late_code, exact_us = answer
            if inp.store.params.shape[0] > 0:
                kind, lat, code, stored, store_ms, late_ms, late_code, exact_us = through_store(
                    inp.store,
                    fl,
                    s,
                    b,
                    grant,
                    timeout,
                    kind,
                    lat,
                    code,
                    stored,
                    store_ms,
                    late_ms,
                    late_code,
                    exact_us,
                )
            if stored and properties_illegal(inp.sends, s, q):
                kind, code, stored, late_code = refused_as_illegal(kind, code, stored, late_ms, late_code)
                exact_us = -1
    fl[s, FL_REFUSED] = refused
    fl[s, FL_CALL_START] = start
    fl[s, FL_STORED] = stored
    fl[s, FL_STORE_MS] = store_ms
    fl[s, FL_EXACT_US] = -1
    if is_thrown(cfg, kind, refused):
        fl[s, FL_KIND], fl[s, FL_LATENCY], fl[s, FL_CODE] = kind, lat, code
        if start + lat <= now:
            return True
        fl[s, FL_PHASE] = PH_SYNC_FAIL
        heap_push(state.heap, state.counters, start + lat, Event.DELIVER, s)
        return False
    if refused == REF_NO_BUDGET and cfg.fails_late_async_request_twice and fl[s, FL_POOL] < 0:
        # sent from the event loop: invokeAsync's listener fails it there at once (send.failed_twice)
        fl[s, FL_KIND], fl[s, FL_LATENCY], fl[s, FL_CODE] = kind, lat, code
        return True
    fire = start + lat
    if refused == REF_NONE and kind == OutcomeKind.REMOTING_TIMEOUT:
        fire = scan_fired(cfg, start, req_timeout - (start - now))
        if late_ms >= 0 and start + late_ms < fire:  # answered before the scan removed the request
            fire = start + late_ms
            lat = late_ms
            code = late_code
            kind = OutcomeKind.OK if late_code == 0 else OutcomeKind.BROKER_ERROR
    fl[s, FL_KIND], fl[s, FL_LATENCY], fl[s, FL_CODE] = kind, lat, code
    fl[s, FL_EXACT_US] = exact_us if kind != OutcomeKind.REMOTING_TIMEOUT else -1
    fl[s, FL_FIRE] = fire
    if fl[s, FL_IN_SYNC]:
        if start > now:  # sendDefaultImpl's update comes when the permit is granted
            fl[s, FL_PHASE] = PH_DISPATCH
            heap_push(state.heap, state.counters, start, Event.DELIVER, s)
            return False
        dispatch_update(cfg, inp.rules, state.fault_table, fl, state.instances, s, now)
    async_dispatched(
        inp.sends.kind[s] == SendKind.ASYNC,
        fl,
        state.client_pools,
        state.semaphore,
        state.heap,
        state.counters,
        s,
        now,
    )
    return False


@njit(**_NO_RC)
def dispatch_update(cfg, rules, ft, fl, inst, s, now):
    """A plain ASYNC send leaves ``sendDefaultImpl``: its ``updateFaultItem(mq.getBrokerName(), elapsed,
    false)`` on the first selection's queue (read again: a 4.9.7 rewrite moves it)."""
    fl[s, FL_IN_SYNC] = False
    target = first_target(fl, inst, s)
    record_outcome(
        ft, Site.SEND_DEFAULT_IMPL, Catch.RESULT, target, now - fl[s, FL_SELECT_MS], now, cfg, rules
    )


@njit(**_NO_RC)
def async_dispatched(plain, fl, cp, sem, heap, st, s, now):
    """A request is out: it holds a permit until its callback (a plain send's, unless refused), the thread
    is free, the callback is due at its FL_FIRE."""
    if plain and fl[s, FL_REFUSED] == REF_NONE:
        semaphore_hold_until(sem, st, fl[s, FL_FIRE])
    client_pool_release(cp, fl, heap, st, s, now)
    fl[s, FL_PHASE] = PH_CALLBACK
    heap_push(heap, st, fl[s, FL_FIRE], Event.DELIVER, s)


@njit(**_NO_RC)
def async_thrown_failure(kind, refused):
    """The exception a failure thrown inside ``sendMessageAsync`` ends the send with: (Failure, aux)."""
    if refused == REF_NO_BUDGET:
        return Failure.ASYNC_TOO_MANY, 0
    if refused == REF_TOO_FAST:
        return Failure.ASYNC_TOO_FAST, 0
    if refused == REF_SEMAPHORE:
        return Failure.ASYNC_SEMAPHORE, 0
    if kind == OutcomeKind.REMOTING_CONNECT:
        return Failure.REMOTING, np.int64(kind)
    return Failure.ORDERED_OTHER, np.int64(kind)


@njit(inline="always", **_NO_RC)
def async_event(inp, state, s, now, phase):
    """ASYNC send ``s`` at ``now``, its ``phase`` (PH_*): submitted (PH_START: an executor thread runs it,
    or it waits for one), taken by an executor thread, its permit granted, a failure thrown synchronously,
    or its callback (on a callback thread, waiting for one if all are busy; a 5.x connect failure on the
    event loop). The one entry of the loop's ASYNC steps, inlined into :func:`run_loop` (numba's
    ``inline="always"``): a call would pass every array of ``inp`` and ``state``, so the steps run here
    in turn rather than calling one another.

    On an executor thread: the runnable's ``timeout > costTime`` check ("call timeout"), then
    ``sendSelectImpl`` (the selector's queue) or ``sendDefaultImpl`` (no route, or the first selection,
    on this thread) -> its first request. At an outcome, on the thread that runs it: the callback's (or,
    4.9, ``sendMessageAsync``'s catch's) fault update, then ``onExceptionImpl``'s retry (a plain send
    selects again, avoiding the broker; a selector send keeps its queue), or the callback's end."""
    cfg, fl, res, rules, ft = inp.config, state.in_flight, state.outcomes, inp.rules, state.fault_table
    att, st, heap, cp, inst = state.attempts, state.counters, state.heap, state.client_pools, state.instances
    plain = inp.sends.kind[s] == SendKind.ASYNC
    n_t = inp.threads.value.shape[0]
    if phase == PH_START:  # executor.submit
        if not plain:  # sendSelectImpl's SelectMessageQueueByHash, on the caller's thread
            i = fl[s, FL_INSTANCE]
            nq = inst.n_queues[i]
            if nq == 0:  # "No route info for this topic, T"
                fail(res, s, Failure.NO_ROUTE_SELECT, now)
                if cfg.backpressure:  # its caller's thread never reached the permits
                    thread_free(cfg.pool, inp.threads, inp.sends.born, heap, st, state.send_thread[s], now)
                return
            p = java_abs(java_rem(inp.sends.order_hash[s], nq))
            # the request keeps the queue for every retry (read once: a 4.9.7 rewrite does not move it)
            fl[s, FL_BROKER] = inst.queue_broker[i, p]
            fl[s, FL_QUEUE_ID] = inst.queue_id[i, p]
        if cfg.backpressure:
            phase = PH_PERMIT
    if phase == PH_PERMIT or phase == PH_PERMIT_WAIT:  # noqa: SIM109 - numba; the caller's thread waits
        got = permit_gate(
            inp.sends, fl, state.permits, heap, st, cfg.timeout_ms, s, now, phase == PH_PERMIT_WAIT
        )
        if got == 0:
            return
        thread_free(cfg.pool, inp.threads, inp.sends.born, heap, st, state.send_thread[s], now)
        if got < 0:  # RemotingTooMuchRequestException to onException (run_loop gives back what it holds)
            fail(res, s, Failure.BACKPRESSURE, now)
            res.aux[s] = fl[s, FL_BP_HELD]
            return
    if phase == PH_START or phase == PH_PERMIT:  # noqa: SIM109 - numba
        # 4.3.x: getCallbackExecutor() runs the send (reference.EventLoop's pools)
        exec_pool = POOL_CALLBACK if cfg.async_sends_on_callback_executor else POOL_EXECUTOR
        if client_pool_full(cp, exec_pool, cfg.executor_queue):  # executor.submit throws
            fail(res, s, Failure.EXECUTOR_REJECTED, now)
            return
        if client_pool_take(cp, fl, exec_pool, s) < 0:
            fl[s, FL_PHASE] = PH_EXEC  # waits for an executor thread
            return
        phase = PH_EXEC
    if phase == PH_DISPATCH:
        dispatch_update(cfg, rules, ft, fl, inst, s, now)
        async_dispatched(plain, fl, cp, state.semaphore, heap, st, s, now)
        return
    on_event_loop = cfg.remoting_completes_futures and fl[s, FL_KIND] == OutcomeKind.REMOTING_CONNECT
    # 5.3.0-5.3.1: a request with no time left fails in invokeAsync's listener, on the loop too
    on_event_loop |= cfg.fails_late_async_request_twice and fl[s, FL_REFUSED] == REF_NO_BUDGET
    if phase == PH_CALLBACK and not on_event_loop and client_pool_take(cp, fl, POOL_CALLBACK, s) < 0:
        return  # waits for a callback thread
    # one call site of async_call: LLVM then inlines it, sparing the copy of every array of ``inp`` and
    # ``state`` a call makes
    call, call_attempt, call_timeout = False, 0, 0
    if phase == PH_EXEC:
        res.kernel_start[s] = now
        timeout = cfg.timeout_ms - (now - fl[s, FL_BEGIN])
        if not timeout > 0:
            fail(res, s, Failure.ASYNC_CALL_TIMEOUT, now)
            res.aux[s] = 1 if plain else 0
            client_pool_release(cp, fl, heap, st, s, now)
            return
        if plain:
            i = fl[s, FL_INSTANCE]
            if inst.n_queues[i] == 0:  # "No route info of this topic"
                fail(res, s, Failure.NO_ROUTE, now)
                client_pool_release(cp, fl, heap, st, s, now)
                return
            th = client_thread(cfg, fl, n_t, s)
            p, b, q = select_queue(
                cfg, inp.routes, inst, state.indexes, ft, state.worst, i, th, np.int64(NO_BROKER), now, False
            )
            fl[s, FL_SLOT] = p
            fl[s, FL_BROKER] = b
            fl[s, FL_FIRST_BROKER] = b
            fl[s, FL_QUEUE_ID] = q  # every retry reuses the request: its queue id too
            fl[s, FL_SELECT_MS] = now
            fl[s, FL_IN_SYNC] = True
        fl[s, FL_CUR_TIMES] = 0
        call, call_timeout = True, timeout
    t = now
    while True:  # the request's outcome, and the retries that fail at once
        if call and not async_call(inp, state, s, call_attempt, t, call_timeout):
            return
        call = True
        kind, lat, code = fl[s, FL_KIND], fl[s, FL_LATENCY], fl[s, FL_CODE]
        b = fl[s, FL_BROKER]
        start, call_begin = fl[s, FL_CALL_START], fl[s, FL_CALL_BEGIN]
        req_timeout, refused = fl[s, FL_REQ_TIMEOUT], fl[s, FL_REFUSED]
        attempt = fl[s, FL_TIMES]
        if kind == OutcomeKind.CLIENT_ERROR and attempt == 0:
            # sendKernelImpl's "The broker[..] not exist": out of sendSelectImpl, onException and no update;
            # out of sendDefaultImpl, its catch's update and "Send [1] times"
            if plain:
                target = first_target(fl, inst, s)
                elapsed = t - fl[s, FL_SELECT_MS]
                record_outcome(ft, Site.SEND_DEFAULT_IMPL, Catch.CLIENT, target, elapsed, t, cfg, rules)
                record_attempt(fl, att, st, ft, res, s, attempt, lat, b, t)
                fail(res, s, Failure.ASYNC_SEND_FAILED, t)
                res.aux[s] = target
                res.cost[s] = t - res.kernel_start[s]
            else:
                record_attempt(fl, att, st, ft, res, s, attempt, lat, b, t)
                fail(res, s, Failure.ORDERED_OTHER, t)
                res.aux[s] = kind
            client_pool_release(cp, fl, heap, st, s, t)
            return
        catch = rules.catch_of_kind[kind]
        elapsed = 0
        need_retry = True
        failure = Failure.ASYNC_UNKNOWN
        aux = 0
        thrown = is_thrown(cfg, kind, refused)
        if thrown and not cfg.async_catches_invoke_failure and attempt == 0:
            # 4.3-4.8 (send.async_send_steps): out of sendKernelImpl: sendSelectImpl throws it to the
            # runnable's onException; sendDefaultImpl's catch updates, then "Send [1] times"
            if plain:
                target = first_target(fl, inst, s)
                elapsed = t - fl[s, FL_SELECT_MS]
                record_outcome(ft, Site.SEND_DEFAULT_IMPL, catch, target, elapsed, t, cfg, rules)
            record_attempt(fl, att, st, ft, res, s, attempt, lat, b, t)
            if plain:
                fail(res, s, Failure.ASYNC_SEND_FAILED, t)
                res.aux[s] = target
                res.cost[s] = t - res.kernel_start[s]
            else:
                failure, aux = async_thrown_failure(kind, refused)
                fail(res, s, failure, t)
                res.aux[s] = req_timeout if refused == REF_SEMAPHORE else aux
            client_pool_release(cp, fl, heap, st, s, t)
            return
        if thrown and not cfg.async_catches_invoke_failure:
            # 4.3-4.8 onExceptionImpl's catch around a retry: a RemotingException isolates the broker that
            # failed before (3000 ms) and retries; "too much request" and an interrupt end the send
            failure, aux = async_thrown_failure(kind, refused)
            if refused == REF_SEMAPHORE:
                aux = req_timeout
            too_much = refused == REF_NO_BUDGET or refused == REF_TOO_FAST  # noqa: SIM109 - numba
            need_retry = not (too_much or kind == OutcomeKind.INTERRUPTED or kind == OutcomeKind.CLIENT_ERROR)
            if need_retry and cfg.fault_on:
                fault_table_update(
                    ft, fl[s, FL_LAST_BROKER], RETRY_CONNECT_FAILURE_LATENCY_MS, True, t, True, cfg, rules
                )
        elif thrown:  # out of invokeAsync, caught by sendMessageAsync
            record_outcome(ft, Site.SEND_MESSAGE_ASYNC_CATCH, catch, b, t - call_begin, t, cfg, rules)
            failure, aux = async_thrown_failure(kind, refused)
            if refused == REF_SEMAPHORE:
                aux = req_timeout
        else:  # the callback: a response, the response-table scan, or a failed request
            # 4.9 measures from the ResponseFuture (after the permit), 5.x from sendMessageAsync's start
            elapsed = t - (call_begin if cfg.async_latency_from_call_begin else start)
            if is_result_kind(kind):
                record_outcome(ft, Site.ASYNC_CALLBACK, Catch.RESULT, b, elapsed, t, cfg, rules)
                record_attempt(fl, att, st, ft, res, s, attempt, lat, b, t)
                res.status[s] = kind
                res.end[s] = t
                client_pool_release(cp, fl, heap, st, s, t)
                return
            record_outcome(ft, Site.ASYNC_CALLBACK, catch, b, elapsed, t, cfg, rules)
            if kind == OutcomeKind.BROKER_ERROR:
                failure, aux, need_retry = Failure.BROKER, code, False
            elif kind == OutcomeKind.REMOTING_SEND_REQUEST:
                failure = Failure.ASYNC_SEND_REQUEST
            elif kind == OutcomeKind.REMOTING_TIMEOUT:  # the text: the cost (5.x), the call's timeout (4.9)
                failure = Failure.ASYNC_WAIT_TIMEOUT
                aux = (
                    (t - call_begin) if cfg.wait_timeout_reports_cost else req_timeout - (start - call_begin)
                )
            else:  # operationFail's last branch; a RemotingTooMuchRequestException is not retried
                need_retry = refused != REF_TOO_FAST and refused != REF_NO_BUDGET
        record_attempt(fl, att, st, ft, res, s, attempt, lat, b, t)
        cur_times = fl[s, FL_CUR_TIMES] + 1
        fl[s, FL_CUR_TIMES] = cur_times
        remaining = req_timeout - (t - call_begin)
        budget_ok = remaining > 0 or not cfg.async_retry_needs_budget
        if refused == REF_NO_BUDGET and cfg.fails_late_async_request_twice and not thrown:
            # send.failed_twice: onException (the send's result: the first), then invokeAsyncImpl fails
            # the request again ("unknown reason"): an update, and a retry or onException again
            if res.end[s] < 0:
                fail(res, s, failure, t)
                res.aux[s] = aux
            record_outcome(ft, Site.ASYNC_CALLBACK, catch, b, elapsed, t, cfg, rules)
            cur_times += 1
            fl[s, FL_CUR_TIMES] = cur_times
            need_retry = True
        if not (need_retry and cur_times <= cfg.async_retries and budget_ok):
            if res.end[s] < 0:  # onException (a send failed twice keeps its first)
                fail(res, s, failure, t)
                res.aux[s] = aux
            if fl[s, FL_IN_SYNC]:  # a chain that failed synchronously returns to sendDefaultImpl only now
                dispatch_update(cfg, rules, ft, fl, inst, s, t)
            client_pool_release(cp, fl, heap, st, s, t)
            return
        if plain:  # onExceptionImpl: selectOneMessageQueue(tpInfo, failedBroker), on this thread
            th = client_thread(cfg, fl, n_t, s)
            _, nb, _ = select_queue(
                cfg, inp.routes, inst, state.indexes, ft, state.worst, fl[s, FL_INSTANCE], th, b, t, False
            )
            fl[s, FL_LAST_BROKER] = b
            fl[s, FL_BROKER] = nb
        else:
            fl[s, FL_LAST_BROKER] = b
        # 4.3-4.6: the retry goes out with timeoutMillis 0
        call_attempt, call_timeout = attempt + 1, remaining if cfg.async_retry_gets_budget else 0


@njit(**_NO_RC)
def call_target(state, s):
    """``mq.getBrokerName()`` read again after the call: a 4.9.7 slot may have been rewritten meanwhile."""
    fl = state.in_flight
    p = fl[s, FL_SLOT]
    return state.instances.queue_broker[fl[s, FL_INSTANCE], p] if p >= 0 else fl[s, FL_BROKER]


@njit(**_NO_RC)
def first_target(fl, inst, s):
    """A plain ASYNC send's first selection's ``mq.getBrokerName()``, read again (a 4.9.7 rewrite moves
    it; a MessageQueue made on the spot keeps its broker)."""
    p = fl[s, FL_SLOT]
    return inst.queue_broker[fl[s, FL_INSTANCE], p] if p >= 0 else fl[s, FL_FIRST_BROKER]


@njit(**_NO_RC)
def deliver_oneway(inp, state, s, now):
    """A oneway call completed (written, or failed to be written): one attempt, no retry."""
    fl, res = state.in_flight, state.outcomes
    kind = fl[s, FL_KIND]
    fl[s, FL_EXACT_US] = -1  # the caller saw the write only
    failed = oneway_caller_sees(inp.rules, kind)
    latency = now - fl[s, FL_BEGIN]
    target = call_target(state, s)
    # a request that was written reads as sent, whatever the broker makes of it
    catch = inp.rules.catch_of_kind[kind] if failed else Catch.RESULT
    record_outcome(
        state.fault_table, Site.SEND_DEFAULT_IMPL, catch, target, latency, now, inp.config, inp.rules
    )
    if not failed:
        res.status[s] = Status.ONEWAY_SENT
    elif kind == OutcomeKind.INTERRUPTED:
        fail(res, s, Failure.INTERRUPTED, now)
    else:
        fail(res, s, Failure.SEND_FAILED, now)
        res.aux[s] = 1
        res.cost[s] = latency
    record_attempt(
        state.in_flight,
        state.attempts,
        state.counters,
        state.fault_table,
        state.outcomes,
        s,
        0,
        latency,
        target,
        now,
    )  # the latency the caller waited: the write only
    res.end[s] = now
    return now


@njit(**_NO_RC)
def is_retry_code(rules, code):
    """``getRetryResponseCodes().contains(code)``."""
    for c in range(rules.retry_codes.shape[0]):  # noqa: SIM110 - numba compiles no generator here
        if rules.retry_codes[c] == code:
            return True
    return False


# deliver_sync and send_default_impl_step (each takes inp and state) and client_pool_take: inlined at numba's
# level; left to LLVM, SYNC ran at half speed whenever run_loop grew (docs/benchmarks.md)
@njit(inline="always", **_NO_RC)
def deliver_sync(inp, state, s, now):
    """A SYNC call completed: sendDefaultImpl's catch clauses. Returns (run the loop step, thread free at)."""
    cfg, fl, res = inp.config, state.in_flight, state.outcomes
    kind, code = fl[s, FL_KIND], fl[s, FL_CODE]
    target = call_target(state, s)
    times = fl[s, FL_TIMES]
    catch = inp.rules.catch_of_kind[kind]
    record_outcome(
        state.fault_table, Site.SEND_DEFAULT_IMPL, catch, target, fl[s, FL_LATENCY], now, cfg, inp.rules
    )
    returned = False
    thrown = False
    if catch == Catch.RESULT:  # SEND_OK or a non-OK store status
        fl[s, FL_HAS_RESULT] = True
        fl[s, FL_RESULT_STATUS] = kind
        fl[s, FL_RESULT_BROKER] = fl[s, FL_BROKER]
        fl[s, FL_RESULT_QUEUE_ID] = fl[s, FL_QUEUE_ID]
        returned = kind == OutcomeKind.OK or not cfg.retry_another_broker
    elif catch == Catch.BROKER and not is_retry_code(inp.rules, code):
        if fl[s, FL_HAS_RESULT]:
            returned = True
        else:
            thrown = True
            res.error[s] = Failure.BROKER
            res.aux[s] = code
    elif catch == Catch.INTERRUPTED:
        thrown = True
        res.error[s] = Failure.SLEEP_INTERRUPTED
    # RemotingException, MQClientException, a retried MQBrokerException: the loop goes on
    record_attempt(
        state.in_flight,
        state.attempts,
        state.counters,
        state.fault_table,
        state.outcomes,
        s,
        times,
        fl[s, FL_LATENCY],
        target,
        now,
    )
    if returned:
        res.status[s] = fl[s, FL_RESULT_STATUS]
        res.broker[s] = fl[s, FL_RESULT_BROKER]
        res.queue_id[s] = fl[s, FL_RESULT_QUEUE_ID]
        res.end[s] = now
        return STEP_NONE, now
    if thrown:
        res.status[s] = Status.FAILED
        res.end[s] = now
        return STEP_NONE, now
    fl[s, FL_TIMES] = times + 1
    fl[s, FL_LAST_BROKER] = target
    return STEP_SEND, -1


@njit(inline="always", **_NO_RC)
def send_default_impl_step(inp, state, s, now):
    """sendDefaultImpl's loop from its ``times < timesTotal`` test: select, check the call-timeout budget,
    make the call. Returns the thread's free time when the send ended (-1: a call is under way)."""
    cfg, fl, res = inp.config, state.in_flight, state.outcomes
    times = fl[s, FL_TIMES]
    exhausted = False
    done = times >= cfg.times_total
    if not done:
        reset = cfg.resets_index_on_retry and times > 0
        inst, ix, ft, worst = state.instances, state.indexes, state.fault_table, state.worst
        th, last = state.send_thread[s], fl[s, FL_LAST_BROKER]
        p, b, q = select_queue(cfg, inp.routes, inst, ix, ft, worst, fl[s, FL_INSTANCE], th, last, now, reset)
        cost = now - fl[s, FL_BEGIN]
        if cfg.timeout_ms < cost:
            exhausted = True
            done = True
        else:
            cur = cfg.timeout_ms - cost
            cap = cfg.max_timeout_per_request_ms
            if cap > -1 and times + 1 < cfg.times_total and cur > cap:
                cur = cap  # leave time for another attempt
            make_call(inp, state, s, times, p, b, q, now, cur, False)
    if not done:
        return -1
    res.exhausted[s] = exhausted
    res.end[s] = now
    if fl[s, FL_HAS_RESULT]:
        res.status[s] = fl[s, FL_RESULT_STATUS]
        res.broker[s] = fl[s, FL_RESULT_BROKER]
        res.queue_id[s] = fl[s, FL_RESULT_QUEUE_ID]
    elif exhausted:
        fail(res, s, Failure.CALL_TIMEOUT, now)
    else:
        fail(res, s, Failure.SEND_FAILED, now)
        res.aux[s] = times
        res.cost[s] = now - fl[s, FL_BEGIN]
    return now


@njit(**_NO_RC)
def run_loop(inp, state):
    """Process events until none is left (LOOP_DONE) or a buffer is full (the caller grows it, then calls
    again)."""
    st, heap, threads, sends = state.counters, state.heap, inp.threads, inp.sends
    fl, inst = state.in_flight, state.instances
    pool, detector = inp.config.pool, inp.config.detector
    if st[ST_STARTED] == 0:  # the pool's first send (each thread's first: give_sends)
        st[ST_STARTED] = 1
        if pool:
            pool_dispatch(threads, sends.born, heap, st, 0)
    resolve_deferred(threads, sends.born, heap, st)
    cap_s = sends.seq.shape[0]
    cap_i = state.instances.n_queues.shape[0]
    # an event builds at most one instance and records at most one attempt, or an ASYNC send's failures
    # thrown at once and retried at once: one per try (1 + retryTimesWhenSendAsyncFailed)
    cap_a = state.attempts.send.shape[0] - inp.config.async_retries - 1
    while True:
        # a START waiting for a send not given yet comes at its born time at the earliest, which is at
        # or after the latest given (born times do not decrease in seq order)
        if st[ST_FINAL] == 0 and (st[ST_HEAP_SIZE] == 0 or heap[0, H_TIME] >= st[ST_BORN_MAX]):
            return LOOP_NEED_INPUT
        if st[ST_HEAP_SIZE] == 0:
            break
        if st[ST_ATTEMPTS] >= cap_a:
            return LOOP_ATTEMPTS_FULL
        if st[ST_INSTANCES] >= cap_i:
            return LOOP_INSTANCES_FULL
        now = heap[0, H_TIME]
        event = heap[0, H_EVENT]
        payload = heap[0, H_PAYLOAD]
        heap_pop(heap, st)
        st[ST_NOW] = now
        if detector:
            detector_advance(inp, state, now)
        phase = -1  # an ASYNC send's step to run (async_event)
        if event == Event.START:
            if pool:
                s, th = pool_take(threads, st, state.send_thread)
            else:
                th = payload
                s = threads.cursor[th] % cap_s
                threads.cursor[th] = sends.next_same[s]
            kind = sends.kind[s]  # its TopicPublishInfo first (the reference's ``steps``)
            i = publish_info(
                inp.routes, inp.keys, threads, inst, state.topics, state.indexes, st, sends.topic[s], now
            )
            fl[s, FL_INSTANCE] = i
            fl[s, FL_BEGIN] = now
            state.outcomes.kernel_start[s] = now
            step, free_at = STEP_NONE, -1
            if kind == SendKind.ASYNC or kind == SendKind.ORDERED_ASYNC:
                if not inp.config.backpressure:  # the caller's thread goes on (else: at the permits)
                    thread_free(pool, threads, sends.born, heap, st, th, now)
                phase = PH_START
            else:
                step, free_at = start_send(inp, state, s, th, i, now)
        else:
            s = payload
            kind = sends.kind[s]
            step = STEP_NONE
            if kind == SendKind.ORDERED_ASYNC or kind == SendKind.ASYNC:  # the caller never waits
                phase = fl[s, FL_PHASE]
                free_at = -1
            elif fl[s, FL_CONNECT] == CN_STARTS:  # a SYNC request's wait: its broker's channel connected
                conn_ended(inp, state, fl[s, FL_BROKER], now)
                free_at = -1
            elif kind == SendKind.ORDERED:
                conn_answered(inp, state, s, now)
                free_at = deliver_ordered(inp, state, s, now)
            elif kind == SendKind.ORDERED_ONEWAY:
                free_at = deliver_ordered_oneway(inp, state, s, now)
            elif kind == SendKind.ONEWAY:
                free_at = deliver_oneway(inp, state, s, now)
            else:
                conn_answered(inp, state, s, now)
                step, free_at = deliver_sync(inp, state, s, now)
        if step == STEP_SEND:
            free_at = send_default_impl_step(inp, state, s, now)
        if phase >= 0:
            async_event(inp, state, s, now, phase)
            if fl[s, FL_BP_HELD] > 0 and state.outcomes.end[s] >= 0:  # it ended: its permits back
                end = state.outcomes.end[s]
                permit_release(sends, fl, state.permits, heap, st, inp.config.timeout_ms, s, end)
        if free_at >= 0:
            thread_free(pool, threads, sends.born, heap, st, state.send_thread[s], free_at)
        if pool and event == Event.START:
            pool_dispatch(threads, sends.born, heap, st, now)
    return LOOP_DONE


@njit(**_NO_RC)
def take_attempts(att, n_a, gid, lo, hi, label_keys, out, label, off):
    """The attempts of sends ``lo..hi - 1`` (numbers) out of the buffer into ``out`` in (send, attempt)
    order -- a counting sort by send, stable because a send's attempts are recorded in order -- sends
    numbered from ``lo``, each (kind, code) as an index into ``label_keys``, and ``off[s]`` the position of
    send s's first attempt (``off`` is zero on entry); the others stay, in order, at the front of the
    buffer. Returns how many stay (-1, nothing moved: ``out`` is not the size of the rows taken)."""
    n_s = hi - lo
    for k in range(n_a):
        g = gid[att.send[k]]
        if lo <= g < hi:
            off[g - lo + 1] += 1
    for s in range(n_s):
        off[s + 1] += off[s]
    if off[n_s] != out.send.shape[0]:
        return -1
    kept = 0
    for k in range(n_a):
        g = gid[att.send[k]]
        if lo <= g < hi:
            j = off[g - lo]
            off[g - lo] += 1
            out.send[j] = g - lo
            out.attempt[j] = att.attempt[k]
            out.start[j] = att.start[k]
            out.latency[j] = att.latency[k]
            out.broker[j] = att.broker[k]
            out.queue_id[j] = att.queue_id[k]
            out.kind[j] = att.kind[k]
            out.code[j] = att.code[k]
            out.isolated_until[j] = att.isolated_until[k]
            out.stored[j] = att.stored[k]
            out.stored_ts[j] = att.stored_ts[k]
            out.st_busy[j] = att.st_busy[k]
            out.st_depth[j] = att.st_depth[k]
            out.st_service[j] = att.st_service[k]
            out.st_period[j] = att.st_period[k]
            out.st_size[j] = att.st_size[k]
            out.start_us[j] = att.start_us[k]
            out.latency_us[j] = att.latency_us[k]
            kind = att.kind[k]
            key = kind * 4294967296 + (att.code[k] if kind == OutcomeKind.BROKER_ERROR else 0)
            label[j] = -1
            for m in range(label_keys.shape[0]):
                if label_keys[m] == key:
                    label[j] = m
                    break
        else:
            att.send[kept] = att.send[k]
            att.attempt[kept] = att.attempt[k]
            att.start[kept] = att.start[k]
            att.latency[kept] = att.latency[k]
            att.broker[kept] = att.broker[k]
            att.queue_id[kept] = att.queue_id[k]
            att.kind[kept] = att.kind[k]
            att.code[kept] = att.code[k]
            att.isolated_until[kept] = att.isolated_until[k]
            att.stored[kept] = att.stored[k]
            att.stored_ts[kept] = att.stored_ts[k]
            att.st_busy[kept] = att.st_busy[k]
            att.st_depth[kept] = att.st_depth[k]
            att.st_service[kept] = att.st_service[k]
            att.st_period[kept] = att.st_period[k]
            att.st_size[kept] = att.st_size[k]
            att.start_us[kept] = att.start_us[k]
            att.latency_us[kept] = att.latency_us[k]
            kept += 1
    for s in range(n_s, 0, -1):
        off[s] = off[s - 1]
    off[0] = 0
    return kept


# ---- the Python around the kernel ---------------------------------------------------------------------


def unsupported(sc: Scenario, messages: pa.Table) -> str | None:
    """Why this engine does not give the reference's tables for these messages (None: it does)."""
    if messages.num_rows == 0:
        return None
    producers = pc.min_max(messages.column("producer")).as_py()
    if producers["min"] != producers["max"]:
        return "messages of several producers"
    if sc.producers.send_cpu_us > 0:
        return "the client's CPU per send (producers.send_cpu_us): the readable engine's host model"
    p = sc.producers
    if max(p.failure_cpu_us, p.failure_log_cpu_us, p.async_failure_cpu_us, p.async_failure_log_cpu_us) > 0:
        return "the client's CPU per failure (producers.*failure_*cpu_us): the readable engine's host model"
    seq = np.asarray(messages.column("seq"), np.int64)
    if not np.all(seq[1:] > seq[:-1]):
        seq = np.sort(seq)
        if np.any(seq[1:] == seq[:-1]):
            return "repeated seq values"  # the reference's (seq, attempt) order interleaves their attempts
    return None


def supports(sc: Scenario, messages: pa.Table) -> bool:
    """Whether :func:`simulate_producer` gives the reference's tables for these messages."""
    return unsupported(sc, messages) is None


@dataclass
class KernelOut:
    """The kernel's answer: attempts in (send, attempt) order, and per send how it ended."""

    attempts: AttemptRows
    label: np.ndarray  # index into Plan.labels
    att_off: np.ndarray  # send s has attempts att_off[s]:att_off[s + 1]
    sends: SendOutcomes
    begin: np.ndarray
    thread: np.ndarray  # the thread number that took each send
    closed: bool = False  # answered by closed-loop stores (the attempts' st_* columns hold their answers)

    @property
    def n_attempts(self) -> int:
        return int(self.attempts.send.size)


def _grown(arrays: NamedTuple, n: int) -> NamedTuple:
    """A copy of ``arrays`` with ``n`` rows (the rows they had first, zeros after)."""
    out = []
    for a in arrays:
        b = np.zeros((n, *a.shape[1:]), a.dtype)
        b[: a.shape[0]] = a
        out.append(b)
    return type(arrays)(*out)


def _client_thread_bits(sc: Scenario) -> list[int]:
    """``rng.part_bits`` of the client's own threads, in :func:`client_thread`'s order."""
    p = sc.producers
    names = [executor_thread(j + 1) for j in range(p.executor_threads)]
    names += [callback_thread(j + 1) for j in range(p.callback_threads)]
    return [rng.part_bits(name) for name in [*names, IO_THREAD]]


def _fault_table(plan: Plan) -> FaultTable:
    n_b, nb = len(plan.brokers), plan.max_bins
    meta = np.zeros(3, np.int64)
    meta[META_BINS], meta[META_SIZE_CTL] = 32, 24  # new ConcurrentHashMap(16): 32 bins, resize at 24
    return FaultTable(
        exists=np.zeros(n_b, np.bool_),
        latency=np.zeros(n_b, np.int64),
        start=np.zeros(n_b, np.int64),
        reachable=np.zeros(n_b, np.bool_),
        bins=np.zeros((nb, n_b), np.int64),
        bin_len=np.zeros(nb, np.int64),
        meta=meta,
        broker_hash=plan.broker_hash,
        old_bins=np.zeros((nb, n_b), np.int64),
        old_len=np.zeros(nb, np.int64),
        lo=np.zeros(n_b, np.int64),
        hi=np.zeros(n_b, np.int64),
        check_stamp=np.zeros(n_b, np.int64),
        walk=np.zeros(n_b, np.int64),
    )


def _zeros(cls: type, n: int, dtypes: dict[str, type] | None = None) -> NamedTuple:
    """A NamedTuple of zero arrays of length ``n`` (int64 unless ``dtypes`` says otherwise)."""
    dtypes = dtypes or {}
    return cls(*(np.zeros(n, dtypes.get(f, np.int64)) for f in cls._fields))


def _empty(cls: type, n: int, dtypes: dict[str, type] | None = None) -> NamedTuple:
    """:func:`_zeros`, not zeroed: for arrays whose every row is written before it is read."""
    dtypes = dtypes or {}
    return cls(*(np.empty(n, dtypes.get(f, np.int64)) for f in cls._fields))


def _int64s(a: np.ndarray) -> np.ndarray:
    """``a`` as contiguous int64, copied only when it is not."""
    return np.ascontiguousarray(a, np.int64)


def _ring_slices(lo: int, hi: int, capacity: int) -> tuple[slice, slice]:
    """The slots of sends ``lo..hi - 1`` in a ring of ``capacity`` slots (``hi - lo <= capacity``), as two
    slices in send order (the second empty unless they wrap)."""
    start, n = lo % capacity, hi - lo
    if start + n <= capacity:
        return slice(start, start + n), slice(0, 0)
    return slice(start, capacity), slice(0, start + n - capacity)


def _ring_read(a: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """A copy of ring array ``a``'s values of sends ``lo..hi - 1`` in send order (two slices, no gather)."""
    first, second = _ring_slices(lo, hi, a.shape[0])
    return np.concatenate((a[first], a[second]))


def _ring_write(a: np.ndarray, lo: int, values: np.ndarray) -> None:
    """``values`` into ring array ``a`` at the slots of sends ``lo..``."""
    first, second = _ring_slices(lo, lo + values.shape[0], a.shape[0])
    k = first.stop - first.start
    a[first] = values[:k]
    a[second] = values[k:]


_SEND_DTYPES = {"props_qid": np.bool_}
_OUTCOME_DTYPES = {"status": np.int8, "error": np.int8, "exhausted": np.bool_}
_ATTEMPT_DTYPES = {"stored": np.bool_}
_OUT_ATTEMPT_DTYPES = {"attempt": np.int32, "queue_id": np.int32, "code": np.int32, "stored": np.bool_}


def _heap_rows(n_threads: int, capacity: int) -> int:
    """Heap rows: one START per thread (and the pool's), a DELIVER per live send."""
    return 2 * n_threads + capacity + 2


class _Kernel:
    """The kernel's arrays across its calls, for one producer: the sends are given a prepared part at a
    time (:meth:`give`) into a ring of ``capacity`` slots (grown when the live sends need more), the loop
    runs until it needs a send not given yet or is done (:meth:`run`), and the rows of sends that ended
    are taken out (:meth:`take`), freeing their slots."""

    def __init__(
        self, sc: Scenario, producer: int, capacity: int, n_threads: int, tables: StoreTables | None = None
    ) -> None:
        self.sc, self.plan = sc, plan_for(sc)
        cfg = self.plan.config
        self.pool = sc.producers.sender_model == "pool"
        n_t = sc.producers.threads if self.pool else max(n_threads, 1)
        client = _client_thread_bits(sc)
        part = 0 if self.pool else n_t
        bits = np.zeros(n_t + len(client), np.uint64)
        bits[n_t:] = client
        if self.pool:
            bits[:n_t] = [rng.part_bits(t) for t in range(n_t)]
        threads = Threads(
            value=np.arange(n_t, dtype=np.int64) if self.pool else np.zeros(n_t, np.int64),
            bits=bits,
            cursor=np.full(part, -1, np.int64),
            tail=np.full(part, -1, np.int64),
            deferred=np.zeros(part, np.bool_),
            def_time=np.zeros(part, np.int64),
            def_counter=np.zeros(part, np.int64),
            fifo=np.zeros(capacity if self.pool else 0, np.int64),
            idle=np.ones(n_t if self.pool else 0, np.bool_),
            idle_since=np.full(n_t if self.pool else 0, -1, np.int64),
        )
        seed = sc.seed
        keys = Keys(
            producer=np.uint64(rng.producer_key(seed, producer)),
            index_base=np.uint64(rng.derive_key(seed, producer)),
            topic_bits=np.zeros(0, np.uint64),
            worst=np.uint64(rng.derive_key(seed, producer, "whichItemWorst")),
        )
        sends = _zeros(Sends, capacity, _SEND_DTYPES)
        # the closed-loop store (iterative rounds): its requests' bytes per slot
        store = no_store() if tables is None else tables._replace(wire=np.zeros(capacity, np.int64))
        self.inp = Inputs(
            sends, threads, cfg, self.plan.rules, self.plan.routes, keys, self.plan.model, store
        )
        n_b, n_all = len(self.plan.brokers), bits.size
        cap_i = self.plan.routes.start.size + 4  # instances: grown when full
        max_q = self.plan.routes.queue_broker.shape[1]
        counters = np.zeros(N_COUNTERS, np.int64)
        counters[ST_NEXT_TICK] = cfg.detect_period_ms
        counters[ST_COUNTER] = COUNTER_BASE
        counters[ST_BORN_MAX] = np.iinfo(np.int64).min
        in_flight = np.zeros((capacity, N_IN_FLIGHT), np.int64)
        self.state = State(
            counters=counters,
            heap=np.zeros((_heap_rows(n_t, capacity), 4), np.int64),
            send_thread=np.zeros(capacity, np.int64),
            fault_table=_fault_table(self.plan),
            worst=Worst(
                np.zeros(n_all, np.bool_),
                np.zeros(n_all, np.int64),
                np.zeros(2, np.int64),
                keys.worst,
                np.zeros(n_b, np.int64),
                np.uint64(rng.derive_key(seed, producer, "shuffle")),
            ),
            instances=Instances(
                np.zeros((cap_i, max_q), np.int64),
                np.zeros((cap_i, max_q), np.int64),
                np.zeros(cap_i, np.int64),
                np.zeros(cap_i, np.int64),
            ),
            topics=TopicCache(np.zeros(0, np.int64), np.zeros(0, np.int64)),
            indexes=Indexes(
                np.zeros((cap_i, n_all), np.bool_),
                np.zeros((cap_i, n_all), np.int64),
                np.zeros((cap_i, n_all), np.int64),
                np.zeros((cap_i, n_all), np.uint64),
            ),
            in_flight=in_flight,
            outcomes=_zeros(SendOutcomes, capacity, _OUTCOME_DTYPES),
            attempts=_zeros(AttemptRows, capacity + capacity // 4 + 16, _ATTEMPT_DTYPES),  # grown when full
            client_pools=_client_pools(self.plan, capacity),
            semaphore=np.zeros(capacity + 2, np.int64),  # a plain send holds at most one permit at a time
            channels=_channels(n_b, sc.producers.connect_ms),
            permits=_permits(sc, n_t),
        )
        self.dense_of: dict[int, int] = {}  # thread value -> dense index, in the order first seen
        self.n_given = 0  # sends given
        self.taken = 0  # sends whose rows are taken out (their slots free)

    @property
    def capacity(self) -> int:
        return int(self.inp.sends.seq.shape[0])

    @property
    def closed(self) -> bool:
        """Whether closed-loop stores answer (an iterative round)."""
        return self.inp.store.params.shape[0] > 0

    def give(self, prep: Prepared, final: bool, pool_order: np.ndarray | None = None) -> None:
        """The sends of ``prep`` (the next ones in seq order, topic ids into the run's list) into the ring;
        ``final``: no more will come. ``pool_order``: the order the pool takes them (send numbers),
        default seq order."""
        n = prep.n_sends
        g0 = self.n_given
        if self.n_given + n - self.taken > self.capacity:
            self._grow(max(2 * self.capacity, self.n_given + n - self.taken))
        self._topics(prep.topics)
        dense = np.full(n, -1, np.int64)
        if not self.pool and n:
            dense = self._dense(prep.s_thread)
        if pool_order is None:
            pool_order = np.arange(g0, g0 + n, dtype=np.int64)
        sends, st = self.inp.sends, self.state
        give_sends(
            sends,
            self.inp.threads,
            st.in_flight,
            st.outcomes,
            st.send_thread,
            st.counters,
            g0,
            _int64s(prep.s_seq),
            _int64s(prep.s_born),
            dense,
            _int64s(prep.s_kind),
            _int64s(prep.s_topic),
            _int64s(prep.s_order_hash),
            _int64s(prep.s_props_base),
            np.ascontiguousarray(prep.s_props_qid, np.bool_),
            _int64s(prep.s_props_chars),
            pool_order,
        )
        if self.closed:
            _ring_write(self.inp.store.wire, g0, prep.s_wire)
        _ring_write(sends.body, g0, prep.s_body if prep.s_body is not None else prep.s_wire)
        self.n_given = g0 + n
        if final:
            st.counters[ST_FINAL] = 1

    def _dense(self, values: np.ndarray) -> np.ndarray:
        """Dense indexes of thread values, new ones numbered in the order they first appear."""
        uniq, first = np.unique(values, return_index=True)
        threads = self.inp.threads
        for v in uniq[np.argsort(first)].tolist():
            if v not in self.dense_of:
                d = len(self.dense_of)
                if d >= threads.value.size:
                    raise SimulationError(f"more sender threads than the {threads.value.size} expected")
                self.dense_of[v] = d
                threads.value[d] = v
                threads.bits[d] = rng.part_bits(int(v))
                self._new_thread_indexes(d)
        keys = np.array(sorted(self.dense_of), np.int64)
        vals = np.array([self.dense_of[k] for k in keys.tolist()], np.int64)
        return vals[np.searchsorted(keys, values)]

    def _new_thread_indexes(self, d: int) -> None:
        """A thread seen for the first time: its ``sendWhichQueue`` keys in the cached TopicPublishInfo
        instances, made before it was known (:func:`publish_info` keys every thread of a new instance)."""
        keys, cache, ix = self.inp.keys, self.state.topics, self.state.indexes
        for topic in np.flatnonzero(cache.version >= 0).tolist():
            i, v = int(cache.instance[topic]), int(cache.version[topic])
            bits = self.inp.threads.bits[d]
            ix.key[i, d] = index_key(keys.index_base, bits, keys.topic_bits[topic], np.int64(v))

    def _topics(self, topics: list[str]) -> None:
        """The per-topic arrays extended to the run's topics so far."""
        keys, cache = self.inp.keys, self.state.topics
        n0, n = keys.topic_bits.size, len(topics)
        if n == n0:
            return
        bits = np.array([rng.part_bits(f"sendWhichQueue:{t}") for t in topics[n0:]], np.uint64)
        self.inp = self.inp._replace(keys=keys._replace(topic_bits=np.concatenate([keys.topic_bits, bits])))
        self.state = self.state._replace(
            topics=TopicCache(
                np.concatenate([cache.version, np.full(n - n0, -1, np.int64)]),
                np.concatenate([cache.instance, np.zeros(n - n0, np.int64)]),
            )
        )

    def run(self) -> int:
        """Run the loop until it is done (LOOP_DONE) or needs sends not given yet (LOOP_NEED_INPUT)."""
        while True:
            status = run_loop(self.inp, self.state)
            if status in (LOOP_DONE, LOOP_NEED_INPUT):
                return status
            state = self.state
            if status == LOOP_ATTEMPTS_FULL:
                self.state = state._replace(attempts=_grown(state.attempts, 2 * state.attempts.send.shape[0]))
            else:
                n = 2 * state.instances.n_queues.shape[0]
                self.state = state._replace(
                    instances=_grown(state.instances, n), indexes=_grown(state.indexes, n)
                )

    def ended_below(self, low: int) -> int:
        """The first send from ``low`` on that has not ended (or the number given)."""
        if low >= self.n_given:
            return low
        end = _ring_read(self.state.outcomes.end, low, self.n_given)
        open_ = np.flatnonzero(end < 0)
        return low + int(open_[0]) if open_.size else self.n_given

    def earliest_to_come(self, low: int) -> int:
        """No send from ``low`` on (its calls, its attempts) begins before this: the begun ones began then,
        the others begin at an event still to come."""
        st = self.state.counters
        if st[ST_FINAL] == 1 and st[ST_HEAP_SIZE] == 0 and low >= self.n_given:
            return NO_LATER_ATTEMPT
        now = int(st[ST_NOW])
        if low >= self.n_given:
            return now
        begin = _ring_read(self.state.in_flight[:, FL_BEGIN], low, self.n_given)
        return min(now, int(begin.min()))

    def take(self, lo: int, hi: int) -> KernelOut:
        """The rows of sends ``lo..hi - 1`` (ended; the first not taken yet) as a :class:`KernelOut`
        numbered from ``lo``; their slots are free after."""
        if lo != self.taken:
            raise ValueError(f"sends are taken in order: {self.taken} next, not {lo}")
        st, att = self.state.counters, self.state.attempts
        n_s = hi - lo
        n_a_all = int(st[ST_ATTEMPTS])
        # a send's attempt rows are its n_sent (record_attempt counts each)
        sends = SendOutcomes(*(_ring_read(a, lo, hi) for a in self.state.outcomes))
        n_a = int(sends.n_sent.sum())
        attempts = _empty(AttemptRows, n_a, _OUT_ATTEMPT_DTYPES)  # take_attempts writes every row
        label = np.empty(n_a, np.int64)
        att_off = np.zeros(n_s + 1, np.int64)
        keys, gid = self.plan.label_keys, self.inp.sends.gid
        kept = take_attempts(att, n_a_all, gid, lo, hi, keys, attempts, label, att_off)
        if kept < 0:
            raise SimulationError(f"sends {lo}..{hi - 1}: their attempt rows are not the {n_a} n_sent counts")
        st[ST_ATTEMPTS] = kept
        begin = _ring_read(self.state.in_flight[:, FL_BEGIN], lo, hi)
        thread = self.inp.threads.value[_ring_read(self.state.send_thread, lo, hi)]
        self.taken = hi
        return KernelOut(attempts, label, att_off, sends, begin, thread, self.closed)

    def _grow(self, n: int) -> None:
        """The ring to ``n`` slots: the live sends moved to their new slots, with what points at them."""
        old = self.capacity
        live = np.arange(self.taken, self.n_given)
        src, dst = live % old, live % n
        slot_map = np.zeros(old, np.int64)  # old slot -> new slot
        slot_map[src] = dst

        def moved(a: np.ndarray) -> np.ndarray:
            b = np.zeros((n, *a.shape[1:]), a.dtype)
            b[dst] = a[src]
            return b

        inp, state, st = self.inp, self.state, self.state.counters
        threads = inp.threads
        if self.pool:
            fifo = np.zeros(n, np.int64)
            pos = np.arange(int(st[ST_POOL_NEXT]), self.n_given)
            fifo[pos % n] = threads.fifo[pos % old]
            threads = threads._replace(fifo=fifo)
        store = inp.store._replace(wire=moved(inp.store.wire)) if self.closed else inp.store
        self.inp = inp._replace(sends=Sends(*(moved(a) for a in inp.sends)), threads=threads, store=store)
        heap = np.zeros((_heap_rows(threads.value.size, n), 4), np.int64)
        h = int(st[ST_HEAP_SIZE])
        heap[:h] = state.heap[:h]
        deliver = heap[:h, H_EVENT] == Event.DELIVER
        payload = heap[:h, H_PAYLOAD]
        heap[:h, H_PAYLOAD] = np.where(deliver, slot_map[np.where(deliver, payload, 0)], payload)
        cp = state.client_pools
        fifo = np.zeros((2, n + 1), np.int64)
        head, tail = np.zeros(2, np.int64), np.zeros(2, np.int64)
        for pool in range(2):
            k, m = int(cp.head[pool]), cp.fifo.shape[1]
            while k != cp.tail[pool]:
                fifo[pool, tail[pool]] = slot_map[cp.fifo[pool, k]]
                tail[pool] += 1
                k = (k + 1) % m
        n_a = int(st[ST_ATTEMPTS])
        attempts = state.attempts
        attempts.send[:n_a] = slot_map[attempts.send[:n_a]]
        semaphore = np.zeros(n + 2, np.int64)
        semaphore[: state.semaphore.size] = state.semaphore
        pm = state.permits
        self.state = state._replace(
            heap=heap,
            send_thread=moved(state.send_thread),
            in_flight=moved(state.in_flight),
            outcomes=SendOutcomes(*(moved(a) for a in state.outcomes)),
            client_pools=cp._replace(fifo=fifo, head=head, tail=tail),
            semaphore=semaphore,
            permits=pm._replace(fifo=slot_map[pm.fifo]),  # the waiting sends' slots (stale ones unread)
        )


def _channels(n_b: int, connect_ms: int) -> np.ndarray:
    """Every broker's channel (``State.channels``): the first, not connected, no connect under way."""
    ch = np.zeros(n_b * N_CH, np.int64)
    ch[CH_WAITERS::N_CH] = -1
    ch[CH_CONNECT_MS::N_CH] = connect_ms
    return ch


def _permits(sc: Scenario, n_threads: int) -> Permits:
    """Async backpressure's semaphores, all permits free (none, backpressure off)."""
    settings = sc.producers.async_backpressure
    on = settings is not None and settings.enable_backpressure_for_async_mode
    return Permits(
        available=np.array(backpressure.permits(settings) if on else (0, 0), np.int64),  # type: ignore[arg-type]
        fifo=np.zeros((2, n_threads + 1), np.int64),
        head=np.zeros(2, np.int64),
        tail=np.zeros(2, np.int64),
    )


def _client_pools(plan: Plan, capacity: int) -> ClientPools:
    cfg = plan.config
    size = np.array([cfg.executor_threads, cfg.callback_threads], np.int64)
    n = int(size.max())
    idle = np.zeros((2, n), np.bool_)
    for pool, k in enumerate(size.tolist()):
        idle[pool, :k] = True
    return ClientPools(
        idle=idle,
        idle_since=np.full((2, n), -1, np.int64),
        size=size,
        fifo=np.zeros((2, capacity + 1), np.int64),
        head=np.zeros(2, np.int64),
        tail=np.zeros(2, np.int64),
    )


def run_prepared(prep: Prepared, sc: Scenario, tables: StoreTables | None = None) -> KernelOut:
    """Run the kernel over prepared sends, all given at once (``tables``: the closed-loop brokers'
    trajectories of an iterative round); returns its raw arrays (for benchmarks and tests)."""
    n_threads = int(np.unique(prep.s_thread).size) if prep.n_sends else 1
    kernel = _Kernel(sc, prep.producer, max(prep.n_sends, 1), n_threads, tables)
    pool_order = np.lexsort((prep.s_seq, prep.s_born)).astype(np.int64)  # by (born, seq)
    kernel.give(prep, final=True, pool_order=pool_order)
    kernel.run()
    return kernel.take(0, prep.n_sends)


def run_prepared_chunks(parts: list[Prepared], sc: Scenario) -> int:
    """The kernel as :func:`simulate_chunks` drives it, over chunks prepared beforehand (one producer,
    seq order, topic ids into one list): each given to the ring, run, and the sends that ended taken
    out, without making their tables; returns the attempts made (for benchmarks)."""
    if not parts:
        return 0
    first = parts[0]
    n_threads = max(sc.producers.threads, int(np.unique(first.s_thread).size))
    kernel = _Kernel(sc, first.producer, max(2 * first.n_sends + RING_SPARE, RING_MIN), n_threads)
    attempts = 0
    for k, prep in enumerate(parts):
        kernel.give(prep, final=k == len(parts) - 1)
        kernel.run()
        ended = kernel.ended_below(kernel.taken)
        if ended > kernel.taken:
            attempts += kernel.take(kernel.taken, ended).n_attempts
    return attempts


def _error_text(key: tuple, brokers: tuple[str, ...], version: ClientVersion) -> str:
    """The reference's error text of one failure (see :class:`Failure`), made by rocketsim.client.send."""
    failure = key[0]
    err: BaseException
    if failure == Failure.SEND_FAILED:
        _, times, cost, topic, sent, total = key
        listed: list[str | None] = list(sent) + [None] * (total - len(sent))
        err = send_failed_error(times, cost, topic, listed, None, version)
    elif failure == Failure.BROKER:  # key[3:]: the closed-loop store's remark (fate, period, size) or -1
        _, code, broker, fate, period, size = key
        if fate < 0:
            remark = bm.broker_remark(code)
        elif fate in (Fate.PCBUSY_CLEAN_QUEUE, Fate.TIMEOUT_CLEAN_QUEUE):
            remark = sweep_remark(Fate(fate), period, str(size))
        else:
            remark = REMARKS[Fate(fate)]
        err = MQBrokerError(code, remark, brokers[broker], version)
    elif failure == Failure.CALL_TIMEOUT:
        err = RemotingTooMuchRequestError("sendDefaultImpl call timeout")
    elif failure == Failure.NO_ROUTE:
        err = no_route_error(key[1], version)
    elif failure == Failure.NO_ROUTE_SELECT:
        err = no_route_select(key[1], version)
    elif failure == Failure.REMOTING:
        err = remoting_exception(OutcomeKind(key[1]), brokers[key[2]], key[3])
    elif failure == Failure.ASYNC_SEND_REQUEST:
        err = ClientError("send request failed", version.faq_url)
    elif failure == Failure.ASYNC_WAIT_TIMEOUT:  # key[1]: the cost (5.x) or the timeout (4.9)
        err = ClientError(wait_response_timeout_text(version.line, key[1], key[1]), version.faq_url)
    elif failure == Failure.ASYNC_UNKNOWN:
        err = ClientError(version.line.unknown_reason_text, version.faq_url)
    elif failure == Failure.ASYNC_TOO_MANY:
        err = invoke_async_timeout_error(brokers[key[1]], version.line)
    elif failure == Failure.INVOKE_SYNC_TIMEOUT:
        err = invoke_sync_timeout_error(brokers[key[1]], version.line)
    elif failure == Failure.ASYNC_CALL_TIMEOUT:
        err = async_call_timeout_error(selector=key[1] == 0)
    elif failure == Failure.EXECUTOR_REJECTED:
        err = executor_rejected_error(version)
    elif failure == Failure.BACKPRESSURE:
        err = RemotingTooMuchRequestError(backpressure.TIMEOUT_TEXTS[key[1]])
    elif failure == Failure.ASYNC_TOO_FAST:
        err = invoke_too_fast_error()
    elif failure == Failure.ASYNC_SEMAPHORE:
        err = semaphore_timeout_error(key[1])
    elif failure == Failure.ASYNC_SEND_FAILED:
        _, broker, cost, topic = key
        err = send_failed_error(1, cost, topic, [brokers[broker]], None, version)
    elif failure == Failure.SLEEP_INTERRUPTED:
        err = SendInterruptedError("sleep interrupted")
    elif failure == Failure.INTERRUPTED:
        err = SendInterruptedError("interrupted")
    elif key[1] == OutcomeKind.CLIENT_ERROR:  # an ordered send's client error
        err = broker_not_exist_error(brokers[key[2]], version)
    else:  # an ordered send's interrupt
        err = SendInterruptedError("interrupted")
    return error_text(err)


def _error_texts(prep: Prepared, plan: Plan, ko: KernelOut, sc: Scenario) -> tuple[np.ndarray, list[str]]:
    """Each failed send's error text, as an index into a list of distinct texts."""
    res, brokers = ko.sends, plan.brokers
    texts: list[str] = []
    text_id: dict[tuple, int] = {}
    s_text = np.full(prep.n_sends, -1, np.int64)
    for s in np.flatnonzero(res.error != Failure.NONE).tolist():
        failure = int(res.error[s])
        topic = prep.topics[int(prep.s_topic[s])]
        if failure == Failure.SEND_FAILED:
            sent = tuple(brokers[b] for b in ko.attempts.broker[ko.att_off[s] : ko.att_off[s + 1]].tolist())
            total = 1 if prep.s_kind[s] == SendKind.ONEWAY else plan.config.times_total
            key: tuple = (failure, int(res.aux[s]), int(res.cost[s]), topic, sent, total)
        elif failure in (Failure.NO_ROUTE, Failure.NO_ROUTE_SELECT):
            key = (failure, topic)
        elif failure == Failure.ASYNC_SEND_FAILED:
            key = (failure, int(res.aux[s]), int(res.cost[s]), topic)
        elif failure in (Failure.REMOTING, Failure.ORDERED_OTHER):
            key = (failure, int(res.aux[s]), int(res.broker[s]), int(res.cost[s]))
        elif failure == Failure.ASYNC_TOO_MANY:
            key = (failure, int(res.broker[s]))
        elif failure == Failure.BROKER:  # the remark of the send's last call: the one that threw
            last = ko.att_off[s + 1] - 1
            a = ko.attempts
            remark = int(a.st_busy[last]) if ko.closed and last >= ko.att_off[s] else -1
            said = (remark, int(a.st_period[last]), int(a.st_size[last])) if remark >= 0 else (-1, 0, 0)
            key = (failure, int(res.aux[s]), int(res.broker[s]), *said)
        else:
            key = (failure, int(res.aux[s]))
        k = text_id.get(key)
        if k is None:
            k = text_id[key] = len(texts)
            texts.append(_error_text(key, brokers, sc.producers.version))
        s_text[s] = k
    return s_text, texts


def engine_output(prep: Prepared, plan: Plan, ko: KernelOut, sc: Scenario) -> EngineOutput:
    """The kernel's arrays as an :class:`rocketsim.engine.plan.EngineOutput`."""
    s_text, texts = _error_texts(prep, plan, ko, sc)
    a = ko.attempts
    out = EngineOutput(
        brokers=list(plan.brokers),
        labels=plan.labels,
        texts=texts,
        a_send=a.send,
        a_attempt=a.attempt,
        a_start=a.start,
        a_latency=a.latency,
        a_broker=a.broker,
        a_queue_id=a.queue_id,
        a_label=ko.label,
        a_code=a.code,
        a_has_code=a.kind == OutcomeKind.BROKER_ERROR,
        a_isolated_until=a.isolated_until,
        a_stored=a.stored,
        a_stored_ts=a.stored_ts,
        a_start_us=a.start_us,
        a_latency_us=a.latency_us,
        att_off=ko.att_off,
        status=ko.sends.status,
        error=s_text,
        broker=ko.sends.broker,
        queue_id=ko.sends.queue_id,
        begin=ko.begin,
        end=ko.sends.end,
        exhausted=ko.sends.exhausted,
        n_sent=ko.sends.n_sent,
        thread=ko.thread,
        kernel_start=ko.sends.kernel_start,
    )
    if ko.closed:
        out.a_store = StoreColumns(a.st_busy.copy(), a.st_depth.copy(), a.st_service.copy())
    return out


def simulate_covered(messages: pa.Table, sc: Scenario) -> SimOutput:
    """:func:`simulate_producer` for messages :func:`supports` accepts (not checked again)."""
    if messages.num_rows == 0:
        return SimOutput.empty()
    prep = prepare(messages, sc)
    plan = plan_for(sc)
    return build_tables(prep, engine_output(prep, plan, run_prepared(prep, sc), sc))


def simulate_round(messages: pa.Table, sc: Scenario, tables: StoreTables) -> tuple[SimOutput, np.ndarray]:
    """One producer's tables in an ``iterative`` round against the brokers' trajectories ``tables``
    (:func:`rocketsim.engine.iterative.simulate_round_reference`, compiled; for messages :func:`supports`
    accepts, not checked again), and its requests that reached a store: rows (broker, arrival ms, bytes)
    (the round's arrival work, summed by :class:`rocketsim.engine.iterative.ArrivalWork`)."""
    if messages.num_rows == 0:
        return SimOutput.empty(), np.zeros((0, 3), np.int64)
    prep = prepare(messages, sc)
    plan = plan_for(sc)
    ko = run_prepared(prep, sc, tables)
    return build_tables(prep, engine_output(prep, plan, ko, sc)), _store_requests(prep, ko)


def simulate_producer(messages: pa.Table, sc: Scenario) -> SimOutput:
    """:func:`rocketsim.engine.reference.simulate_producer`, compiled; :class:`SimulationError` for input
    :func:`supports` refuses."""
    why = unsupported(sc, messages)
    if why is not None:
        raise SimulationError(f"the compiled engine does not cover {why}; use ROCKETSIM_ENGINE=reference")
    return simulate_covered(messages, sc)


# a streamed run's first ring: room for twice its first chunk's sends and these (it grows when the sends
# in flight and a chunk need more)
RING_SPARE = 64
RING_MIN = 1024


@dataclass
class _Part:
    """A prepared chunk of a streamed run: given to the kernel, then ended (its rows made but for the
    UNIQ_KEY counters of its calls, which wait for every earlier call to be known)."""

    prep: Prepared
    s0: int  # the number of its first send
    r0: int  # and of its first row
    out: EngineOutput | None = None
    made: np.ndarray | None = None  # per row: it made a createUniqID call, when
    time: np.ndarray | None = None
    counter: np.ndarray | None = None
    calls: int = 0  # calls not counted yet
    first_start: int = NO_LATER_ATTEMPT  # the earliest start of its attempts

    @property
    def s1(self) -> int:
        return self.s0 + self.prep.n_sends


class _Stream:
    """One producer's run streamed through the kernel a prepared chunk at a time (:func:`simulate_chunks`)."""

    def __init__(
        self, sc: Scenario, tables: StoreTables | None = None, requests: list[np.ndarray] | None = None
    ) -> None:
        self.sc, self.tables, self.requests = sc, tables, requests
        self.kernel: _Kernel | None = None
        self.topics: list[str] = []
        self.given: deque[_Part] = deque()
        self.ended: deque[_Part] = deque()
        self.uniq: UniqCalls | None = None
        self.rows = 0
        self.last_seq: int | None = None
        self.producer: int | None = None

    def add(self, table: pa.Table) -> Iterator[SimChunk]:
        """The next chunk of messages (whole batches, seq order): given, run, the chunks that ended out."""
        self.give(table)
        yield from self._out()

    def give(self, table: pa.Table) -> None:
        """The next chunk of messages (whole batches, seq order): checked, prepared, given and run."""
        why = unsupported(self.sc, table)
        seq = np.asarray(table.column("seq"), np.int64)
        producer = int(table.column("producer")[0].as_py())
        if why is None and not bool(np.all(seq[1:] > seq[:-1])):
            why = "seq values out of order"
        if why is None and self.last_seq is not None:
            if producer != self.producer:
                why = "messages of several producers"
            elif seq[0] <= self.last_seq:
                why = "seq values out of order"
        if why is not None:
            raise SimulationError(f"the compiled engine does not cover {why}; use ROCKETSIM_ENGINE=reference")
        self.last_seq, self.producer = int(seq[-1]), producer
        prep = prepare(table, self.sc, self.topics)
        if self.kernel is None:
            n_threads = max(self.sc.producers.threads, int(np.unique(prep.s_thread).size))
            capacity = max(2 * prep.n_sends + RING_SPARE, RING_MIN)
            self.kernel = _Kernel(self.sc, producer, capacity, n_threads, self.tables)
            self.uniq = UniqCalls(prep.batch_uniq_key)
        born = prep.s_born
        latest = int(self.kernel.state.counters[ST_BORN_MAX])
        if born.size and (not bool(np.all(born[1:] >= born[:-1])) or int(born[0]) < latest):
            raise SimulationError("a streamed run needs born times that do not decrease in seq order")
        part = _Part(prep, self.kernel.n_given, self.rows)
        self.rows += table.num_rows
        self.kernel.give(prep, final=False)
        self.given.append(part)
        self.kernel.run()

    def finish(self) -> Iterator[SimChunk]:
        """Every send given: the run to its end, the rest of its chunks out."""
        if self.run_out():
            yield from self._out()

    def run_out(self) -> bool:
        """Every send given: the run to its end (False: nothing was given)."""
        if self.kernel is None:
            return False
        self.kernel.state.counters[ST_FINAL] = 1
        self.kernel.run()
        return True

    def taken_parts(self) -> Iterator[tuple[_Part, KernelOut]]:
        """The given chunks whose sends have all ended, in order, each with its kernel rows (taken out)."""
        kernel = self.kernel
        assert kernel is not None
        low = kernel.ended_below(kernel.taken)
        while self.given and self.given[0].s1 <= low:
            p = self.given.popleft()
            yield p, kernel.take(p.s0, p.s1)

    def _out(self) -> Iterator[SimChunk]:
        kernel, uniq = self.kernel, self.uniq
        assert kernel is not None and uniq is not None
        for p, ko in self.taken_parts():
            if self.requests is not None:
                self.requests.append(_store_requests(p.prep, ko))
            p.out = engine_output(p.prep, kernel.plan, ko, self.sc)
            p.made, p.time = uniq.add_sends(p.prep, p.out, np.arange(p.prep.n_sends), p.r0)
            p.counter = np.zeros(p.made.size, np.int64)
            p.calls = int(np.count_nonzero(p.made))
            if ko.n_attempts:
                p.first_start = int(ko.attempts.start.min())
            self.ended.append(p)
        before = kernel.earliest_to_come(kernel.taken)
        rows, counters = uniq.assign(before)
        for p in self.ended:
            mine = (rows >= p.r0) & (rows < p.r0 + p.made.size)
            if mine.any():
                p.counter[rows[mine] - p.r0] = counters[mine]
                p.calls -= int(np.count_nonzero(mine))
        while self.ended and self.ended[0].calls == 0:
            p = self.ended.popleft()
            later = min([q.first_start for q in self.ended] + [before])
            uniq_ids = uniq_column(p.prep, p.made, p.time, p.counter)
            yield sim_chunk(p.prep, p.out, uniq_ids, later)


def simulate_chunks(
    chunks: Iterable[pa.Table | pa.RecordBatch],
    sc: Scenario,
    tables: StoreTables | None = None,
    requests: list[np.ndarray] | None = None,
) -> Iterator[SimChunk]:
    """:func:`rocketsim.engine.reference.simulate_chunks`, compiled and streamed: the chunks (whole
    batches, :func:`rocketsim.engine.plan.batch_aligned`) are prepared and given to the kernel one at a
    time, and the rows of each come out once its sends have ended and every UNIQ_KEY call before theirs is
    known, so a producer's memory is its chunks in flight, whatever its size. :class:`SimulationError` for
    input :func:`supports` refuses (several producers, seqs out of order or repeated) or born times that
    go back in seq order. ``requests``: a list the requests that reached a store are added to as
    :func:`round_requests` gives them (an ``iterative`` round that makes its rows)."""
    stream = _Stream(sc, tables, requests)
    for table in batch_aligned(chunks):
        yield from stream.add(table)
    yield from stream.finish()


def round_requests(
    chunks: Iterable[pa.Table | pa.RecordBatch], sc: Scenario, tables: StoreTables
) -> np.ndarray:
    """One producer's requests that reached a store in an ``iterative`` round against the trajectories
    ``tables``: :func:`simulate_round`'s second half alone, streamed as :func:`simulate_chunks` streams
    (the same sends, so the same requests), and no table made (a round hands on only its arrival work).
    Rows (broker, arrival ms, bytes), in the order the chunks end."""
    stream = _Stream(sc, tables)
    parts: list[np.ndarray] = []
    for table in batch_aligned(chunks):
        stream.give(table)
        parts += [_store_requests(p.prep, ko) for p, ko in stream.taken_parts()]
    if stream.run_out():
        parts += [_store_requests(p.prep, ko) for p, ko in stream.taken_parts()]
    return np.concatenate([np.zeros((0, 3), np.int64), *parts])


def _store_requests(prep: Prepared, ko: KernelOut) -> np.ndarray:
    """The requests of ``ko``'s attempts (numbered from ``prep``'s first send) that reached a store:
    rows (broker, arrival ms, bytes)."""
    a = ko.attempts
    seen = a.st_depth >= 0
    wire = np.asarray(prep.s_wire, np.int64)[a.send[seen]]
    return np.stack([a.broker[seen], a.start[seen], wire], axis=1).astype(np.int64)
