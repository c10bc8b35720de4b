"""The closed-loop store, compiled (numba): what the compiled engine asks in ``iterative`` rounds.

Mirrors (here -> there; tests/test_engine_compiled_store.py runs both on the same inputs):

* :func:`decide` -> :func:`rocketsim.broker.queue.decide` (with :func:`sweep_tick_at_or_after`,
  :func:`stall_delay` -> ``Stall.delay``, :func:`service_us` -> ``StoreParams.service_us``);
* :func:`replay_broker` -> :meth:`rocketsim.engine.iterative.Trajectory.replay` (``BrokerStore.offer`` over
  a round's arrival work), which :func:`rocketsim.engine.iterative.trajectories` chooses between;
* :func:`trajectory_answer` -> :meth:`rocketsim.engine.iterative.Trajectory.answer` (``Trajectory.state``
  and the sweeper remark's ``size of queue``);
* :func:`closed_outcome` -> :func:`rocketsim.broker.queue.closed_outcome`.

More: docs/reference/modules.md, rocketsim/engine/compiled_store.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from numba import njit

from rocketsim.broker import latency as bm
from rocketsim.broker.queue import (
    BUSY_DIFF_LIMIT_MS,
    SWEEP_FIRST_MS,
    SWEEP_PERIOD_MS,
    Fate,
    StoreParams,
)
from rocketsim.client.outcomes import OutcomeKind
from rocketsim.engine import numba_cache
from rocketsim.engine import trajectory_layout as tl
from rocketsim.engine.trajectory_layout import (
    C_ADMITTED,
    C_QUEUED,
    C_THREAD,
    C_WRITER,
    H_BUSY,
    H_LEAVE,
    H_MID,
    H_N_BUSY,
    H_N_LEAVE,
    H_N_MID,
    H_N_SNAP,
    H_N_STALL,
    H_SNAP,
    H_STALL,
    M_DEPTH,
    M_THREAD,
    M_WRITER,
    N_HEAD,
    N_MID_COLUMNS,
    N_SNAP_COLUMNS,
)

numba_cache.install()  # before any njit(cache=True) below: one cache, found by content

__all__ = [
    "StoreTables",
    "closed_outcome",
    "decide",
    "no_store",
    "replay_broker",
    "store_tables",
    "trajectory_answer",
]

_JIT = {"cache": True}

# StoreTables.params columns (float64: append_us is fractional; the others are small integers)
SP_APPEND_US, SP_THREADS, SP_CAPACITY, SP_WAIT_MS, SP_BUSY_TIMEOUT_MS, SP_EXTRA_US, SP_PC_CODE = range(7)
N_PARAMS = 7

_SERVED = int(Fate.SERVED)
_REJECT = int(Fate.REJECT_REQUEST)
_OVERLOAD = int(Fate.OVERLOAD)
_PC_SYNC = int(Fate.PC_SYNCHRONIZED)
_PCBUSY = int(Fate.PCBUSY_CLEAN_QUEUE)
_TIMEOUT_CLEAN = int(Fate.TIMEOUT_CLEAN_QUEUE)
_SYSTEM_BUSY = bm.SYSTEM_BUSY
_FIRST = SWEEP_FIRST_MS
_PERIOD = SWEEP_PERIOD_MS
_DIFF_LIMIT = BUSY_DIFF_LIMIT_MS


class StoreTables(NamedTuple):
    """Every broker's store and trajectory as arrays (none: ``params`` has no rows, the open model).

    ``params[b]``: ``SP_*`` columns. ``head`` and ``data``: every broker's trajectory packed
    (:func:`rocketsim.engine.trajectory_layout.pack`: ``data`` int32, or int64 where a value needs it).
    ``wire``: the producer's requests' bytes."""

    params: np.ndarray
    head: np.ndarray
    data: np.ndarray
    wire: np.ndarray  # per send of the producer, its request's bytes (set by the compiled engine)


def no_store() -> StoreTables:
    """The open model's tables: no store."""
    z = np.zeros(0, np.int64)
    return StoreTables(np.zeros((0, N_PARAMS)), z, np.zeros(0, np.int32), z)


def _param_row(p: StoreParams) -> list[float]:
    return [p.append_us, p.send_threads, p.capacity, p.wait_ms, p.busy_timeout_ms, p.extra_us, p.pc_code]


def stall_array(p: StoreParams) -> np.ndarray:
    """The broker's ``store_stall`` faults, flat: (start, end, period, stall) us each."""
    return np.asarray([[s.start_us, s.end_us, s.period_us, s.stall_us] for s in p.stalls], np.int64).ravel()


def params_array(p: StoreParams) -> np.ndarray:
    return np.asarray(_param_row(p), np.float64)


def params_rows(params: Sequence[StoreParams]) -> np.ndarray:
    """``StoreTables.params`` of the brokers."""
    return np.asarray([_param_row(p) for p in params], np.float64).reshape(-1, N_PARAMS)


def store_tables(params: Sequence[StoreParams], trajectories: Sequence[dict[str, np.ndarray]]) -> StoreTables:
    """:class:`StoreTables` of every broker: its parameters and its trajectory's columns
    (``Trajectory.arrays``: the layout's snap, leave, busy), packed."""
    head, data = tl.pack(trajectories, [stall_array(p) for p in params])
    return StoreTables(params_rows(params), head, data, np.zeros(0, np.int64))


# ---- broker_store's rules ----------------------------------------------------------------------------


@njit(**_JIT)
def sweep_tick_at_or_after(ms):
    """:func:`rocketsim.broker.queue.sweep_tick_at_or_after`."""
    if ms <= _FIRST:
        return np.int64(_FIRST)
    return _FIRST + -(-(ms - _FIRST) // _PERIOD) * _PERIOD


@njit(**_JIT)
def stall_delay(stalls, begin, service):
    """The sum of ``Stall.delay`` over the broker's stalls (flat quads)."""
    total = 0
    for j in range(stalls.size // 4):
        start, end, period, stall = stalls[4 * j], stalls[4 * j + 1], stalls[4 * j + 2], stalls[4 * j + 3]
        k = max(0, (begin - start - stall) // period + 1)
        t0 = start + k * period
        if t0 >= end or t0 >= begin + service or t0 + stall <= begin:
            continue
        total += t0 + stall - max(begin, t0)
    return total


@njit(**_JIT)
def service_us(append_us, wire):
    """``StoreParams.service_us``: ``append_us`` per KiB, at least 1 us (round half to even, as Python)."""
    return max(np.int64(1), np.int64(np.rint(append_us * wire / 1024)))


@njit(**_JIT)
def busy_at(busy, n_busy, t_ms):
    for j in range(n_busy):  # noqa: SIM110 (numba: a plain loop)
        if busy[2 * j] <= t_ms < busy[2 * j + 1]:
            return True
    return False


@njit(**_JIT)
def first_busy_tick(busy, n_busy, from_ms, before_us):
    for j in range(n_busy):
        lo, hi = busy[2 * j], busy[2 * j + 1]
        t = sweep_tick_at_or_after(max(from_ms, lo))
        if t < hi and t * 1000 < before_us:
            return t
    return np.int64(-1)


@njit(**_JIT)
def decide(par, stalls, busy, n_busy, a, wire, depth, thread_free, writer_free):
    """:func:`rocketsim.broker.queue.decide`: (fate, answer us, sweep tick or -1, taken, begin, end)."""
    a_ms = a // 1000
    z = np.int64(0)
    if busy_at(busy, n_busy, a_ms):
        return _REJECT, a, np.int64(-1), z, z, z
    if depth >= np.int64(par[SP_CAPACITY]):
        return _OVERLOAD, a, np.int64(-1), z, z, z
    taken = max(a, thread_free)
    if taken > a:  # it waits in the queue: the sweeper may answer it first
        t_pc = first_busy_tick(busy, n_busy, a_ms, taken)
        t_to = sweep_tick_at_or_after(a_ms + np.int64(par[SP_WAIT_MS]))
        if t_pc >= 0 and (t_pc <= t_to or t_to * 1000 >= taken):
            return _PCBUSY, t_pc * 1000, t_pc, z, z, z
        if t_to * 1000 < taken:
            return _TIMEOUT_CLEAN, t_to * 1000, t_to, z, z, z
    if busy_at(busy, n_busy, taken // 1000):
        return _PC_SYNC, taken, np.int64(-1), taken, z, z
    begin = max(taken, writer_free)
    service = service_us(par[SP_APPEND_US], wire)
    end = begin + service + stall_delay(stalls, begin, service)
    return _SERVED, end + np.int64(par[SP_EXTRA_US]), np.int64(-1), taken, begin, end


# ---- the trajectory: BrokerStore.offer replayed, and answered from ------------------------------------


@njit(**_JIT)
def _heap_push(h, n, x):
    h[n] = x
    i = n
    while i > 0:
        parent = (i - 1) // 2
        if h[parent] <= h[i]:
            break
        h[i], h[parent] = h[parent], h[i]
        i = parent
    return n + 1


@njit(**_JIT)
def _heap_pop(h, n):
    n -= 1
    h[0] = h[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and h[c + 1] < h[c]:
            c += 1
        if h[i] <= h[c]:
            break
        h[i], h[c] = h[c], h[i]
        i = c
    return n


@njit(**_JIT)
def replay_broker(par, stalls, ms, count, size, snap, mid, leaves, busy):
    """:meth:`rocketsim.engine.iterative.Trajectory.replay`: ``BrokerStore.offer`` over one broker's
    arrival work (``ms`` ascending, ``count`` and ``size`` bytes each). Writes ``snap`` (the layout's
    ``N_SNAP_COLUMNS`` rows of ``n``, flat), ``mid`` (its ``N_MID_COLUMNS`` per ms of 3 or more
    requests, in ms order: (ms, thread, writer, depth)), the leave times of the requests that were queued
    (unsorted) and the busy spans; returns how many of the last three."""
    n = ms.size
    n_threads = np.int64(par[SP_THREADS])
    threads = np.zeros(n_threads, np.int64)
    writer = np.int64(0)
    queued = np.empty(max(leaves.size, 1), np.int64)
    n_q = 0
    n_mid = 0
    n_adm = 0
    n_queued = 0
    n_busy = 0
    first_busy = 0
    last_us = np.int64(0)
    timeout_ms = np.int64(par[SP_BUSY_TIMEOUT_MS])
    for w in range(n):
        m = ms[w]
        base = m * 1000
        c = count[w]
        k = (c - 1) // 2
        for i in range(c):
            if i == k and k > 0:  # the middle request has others of its ms before it
                while n_q > 0 and queued[0] <= base:
                    n_q = _heap_pop(queued, n_q)
                mid[N_MID_COLUMNS * n_mid] = m
                mid[N_MID_COLUMNS * n_mid + M_THREAD] = max(0, threads.min() - base)
                mid[N_MID_COLUMNS * n_mid + M_WRITER] = max(0, writer - base)
                mid[N_MID_COLUMNS * n_mid + M_DEPTH] = n_q
                n_mid += 1
            wire = size[w] // c + (1 if i < size[w] % c else 0)
            a = max(base, last_us)
            last_us = a
            a_ms = a // 1000
            while first_busy < n_busy and busy[2 * first_busy + 1] <= a_ms:
                first_busy += 1
            while n_q > 0 and queued[0] <= a:
                n_q = _heap_pop(queued, n_q)
            t_i = np.argmin(threads)
            live = busy[2 * first_busy : 2 * n_busy]
            fate, _, tick, taken, begin, end = decide(
                par, stalls, live, n_busy - first_busy, a, wire, n_q, threads[t_i], writer
            )
            if fate == _REJECT or fate == _OVERLOAD:  # noqa: SIM109 (numba: no tuple membership)
                continue
            n_adm += 1
            leave = tick * 1000 if tick >= 0 else taken
            if leave > a:
                leaves[n_queued] = leave
                n_queued += 1
            if tick >= 0:  # swept from the queue
                n_q = _heap_push(queued, n_q, tick * 1000)
                continue
            if taken > a:
                n_q = _heap_push(queued, n_q, taken)
            if fate == _PC_SYNC:
                threads[t_i] = taken
                continue
            writer = end
            threads[t_i] = end
            if end - begin > timeout_ms * 1000:  # BrokerStore._hold_lock
                lo = begin // 1000 + timeout_ms + 1
                hi = min(-(-end // 1000), begin // 1000 + _DIFF_LIMIT)
                if lo < hi:
                    busy[2 * n_busy] = lo
                    busy[2 * n_busy + 1] = hi
                    n_busy += 1
        snap[w] = m
        snap[C_THREAD * n + w] = max(0, threads.min() - base)
        snap[C_WRITER * n + w] = max(0, writer - base)
        snap[C_ADMITTED * n + w] = n_adm
        snap[C_QUEUED * n + w] = n_queued
    return n_mid, n_queued, n_busy


@njit(**_JIT)
def _admitted_by(data, o, n, snap_ms, ms):
    """Requests the queue took at or before ``ms`` (the snapshot's cumulative count)."""
    i = np.searchsorted(snap_ms, ms, side="right") - 1
    return np.int64(data[o + C_ADMITTED * n + i]) if i >= 0 else np.int64(0)


@njit(**_JIT)
def trajectory_answer(tables, b, ms, wire):
    """:meth:`rocketsim.engine.iterative.Trajectory.answer` of broker ``b`` to a request of ``wire`` bytes
    arriving at ``ms``: (fate, answer us, stored us (-1: not stored), queue depth, writer us (0: none),
    period in queue ms (-1: no sweeper remark), size of queue)."""
    par, head, data = tables.params[b], tables.head, tables.data
    h = b * N_HEAD
    o, n = head[h + H_SNAP], head[h + H_N_SNAP]
    snap_ms = data[o : o + n]
    busy = head[head[h + H_BUSY] : head[h + H_BUSY] + 2 * head[h + H_N_BUSY]]
    stalls = head[head[h + H_STALL] : head[h + H_STALL] + 4 * head[h + H_N_STALL]]
    thread, writer, depth = np.int64(0), np.int64(0), np.int64(-1)
    i = np.searchsorted(snap_ms, ms, side="right") - 1
    if i >= 0 and snap_ms[i] == ms:  # Trajectory.state: the ms's middle request
        mo, mn = head[h + H_MID], head[h + H_N_MID]
        j = np.searchsorted(data[mo : mo + mn], ms, side="left")
        if j < mn and data[mo + j] == ms:
            thread = ms * 1000 + np.int64(data[mo + M_THREAD * mn + j])
            writer = ms * 1000 + np.int64(data[mo + M_WRITER * mn + j])
            depth = np.int64(data[mo + M_DEPTH * mn + j])
        else:  # the first of its ms: the state after the ms before
            i -= 1
    if depth < 0 and i >= 0:
        base = np.int64(snap_ms[i]) * 1000
        thread = base + np.int64(data[o + C_THREAD * n + i])
        writer = base + np.int64(data[o + C_WRITER * n + i])
        lo, m = head[h + H_LEAVE], head[h + H_N_LEAVE]
        j = np.searchsorted(data[lo : lo + m], ms, side="right") - 1
        left = np.int64(data[lo + m + j]) if j >= 0 else np.int64(0)
        depth = max(np.int64(0), np.int64(data[o + C_QUEUED * n + i]) - left)
    depth = max(depth, np.int64(0))
    a = ms * 1000
    d = decide(par, stalls, busy, head[h + H_N_BUSY], a, wire, depth, thread, writer)
    fate, answer_us, tick, _, begin, end = d
    if fate == _SERVED:
        return fate, answer_us, end, depth, end - begin, np.int64(-1), np.int64(0)
    if tick >= 0:
        size = _admitted_by(data, o, n, snap_ms, tick) - _admitted_by(data, o, n, snap_ms, ms)
        return fate, answer_us, np.int64(-1), depth, np.int64(0), tick - ms, max(np.int64(0), size)
    return fate, answer_us, np.int64(-1), depth, np.int64(0), np.int64(-1), np.int64(0)


@njit(**_JIT)
def closed_outcome(network, start_ms, timeout, fate, answer_us, stored_us, pc_code):
    """:func:`rocketsim.broker.queue.closed_outcome` in the compiled engine's terms: (OutcomeKind,
    latency (a timeout: ``timeout + 1``, as ``compiled.attempt_outcome``), code, stored, store ms, late ms
    (-1: none), late code); a refusal's code as :func:`rocketsim.broker.queue.answer_code` (``pc_code``:
    the broker's ``[PC_SYNCHRONIZED]`` code)."""
    timeout = max(timeout, 0)
    delay = (answer_us - start_ms * 1000 + 500) // 1000
    total = network + delay
    if fate == _SERVED:
        store_ms = (stored_us - start_ms * 1000 + 500) // 1000
        if total >= timeout:
            return OutcomeKind.REMOTING_TIMEOUT, timeout + 1, 0, True, store_ms, total, 0
        return OutcomeKind.OK, total, 0, True, store_ms, np.int64(-1), 0
    code = pc_code if fate == _PC_SYNC else _SYSTEM_BUSY
    if total >= timeout:
        return OutcomeKind.REMOTING_TIMEOUT, timeout + 1, 0, False, np.int64(0), total, code
    return OutcomeKind.BROKER_ERROR, total, code, False, np.int64(0), np.int64(-1), 0


def replay(p: StoreParams, ms: np.ndarray, count: np.ndarray, size: np.ndarray) -> dict[str, np.ndarray]:
    """One broker's trajectory columns (``Trajectory.arrays``, the layout's) from its arrival work,
    compiled."""
    n, total = ms.size, int(count.sum()) if count.size else 0
    snap = np.zeros(N_SNAP_COLUMNS * n, np.int64)
    mid = np.zeros(N_MID_COLUMNS * n, np.int64)
    leaves = np.zeros(total, np.int64)
    busy = np.zeros(2 * total, np.int64)
    n_mid, n_leave, n_busy = replay_broker(
        params_array(p),
        stall_array(p),
        np.ascontiguousarray(ms, np.int64),
        np.ascontiguousarray(count, np.int64),
        np.ascontiguousarray(size, np.int64),
        snap,
        mid,
        leaves,
        busy,
    )
    return {
        "snap": snap.reshape(N_SNAP_COLUMNS, n),
        "mid": np.ascontiguousarray(mid[: N_MID_COLUMNS * n_mid].reshape(n_mid, N_MID_COLUMNS).T),
        "leave": tl.leave_rows(leaves[:n_leave]),
        "busy": busy[: 2 * n_busy].reshape(-1, 2),
    }
