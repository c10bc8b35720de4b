"""The compiled fast path of :func:`rocketsim.simulate.simulate_producer` (numba), for the cases it covers.

It gives the very same two tables as the readable reference (same rows, values and order), only faster
(~100x; the send loop runs at >= 1M attempts/s per core, see ``python -m rocketsim.bench send``): the
per-producer event loop, queue selection, fault table, retry loop and broker model run in one numba
kernel over flat arrays that the caller allocates (:func:`run_prepared`); what is not per attempt
(validation, sizes, route versions, keys derived from strings, error texts) is done in numpy/Python around
it, with the reference's own helpers wherever a text or a rule is involved.

Covered (:func:`supports`): SYNC and ONEWAY sends, ordered (selector) sends, batches, transactional sends
(SYNC), rejected rows; the three fault lines with ``send_latency_fault_enable`` on and off; any number of
sender threads; route versions and the 4.9.7 route-mutation quirk; retry codes per version,
``retry_another_broker_when_not_store_ok``, the call-timeout budget and the 5.3.3+ per-request cap; every
fault kind and the error mix of the broker model. Left to the reference: ASYNC sends (other than ordered
ones, which are single sync calls that do not hold the thread) and the 5.x detector
(``start_detector_enable``).

How the reference is mirrored:

* Events: ``ProducerSimulation.run`` keeps a heap of ``(time, kind, counter)`` with call completions
  (DELIVER) before send starts (START) at equal times and the push counter as the last key; the kernel
  keeps the same heap with the same pushes in the same order, so the fault table sees the same updates in
  the same order. A ONEWAY call completes when its request is written (at once unless the write failed).
* Routes: one TopicPublishInfo "instance" per (topic, cache miss) with its own queue slots (mutable, for
  4.9.7) and per-thread ``ThreadLocalIndex`` state; a send keeps its instance for all its retries.
* Draws: SplitMix64 with uint64 wrap-around, keyed exactly as ``brokers.draw_key`` / ``fault.derive_key``;
  string parts (``sendWhichQueue:<topic>``, ``whichItemWorst``) are hashed in Python and passed in.
* The fault table is kept in ``ConcurrentHashMap`` iteration order (bins, insertion order, resizes).
* Rows: a batch's attempts are keyed by (and counted on) its first accepted member; rejected rows are
  found with the reference's own ``rejection`` (only rows that can fail a check are looked at).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from rocketsim import brokers as bm
from rocketsim import codec
from rocketsim import simulate as ref
from rocketsim.compression import CompressionType, compressed_sys_flag
from rocketsim.fault import (
    ISOLATION_LATENCY_MS,
    LINE_4_9_7,
    LINE_4_9_8,
    LINE_5,
    FaultArrays,
    _part_bits,
    chm_spread,
    derive_key,
    java_string_hash,
)
from rocketsim.message import MessageSysFlag
from rocketsim.route import TopicPublishInfo, build_queue_list, route_versions
from rocketsim.scenario import Scenario
from rocketsim.send import (
    MQBrokerError,
    RemotingTooMuchRequestError,
    SendConfig,
    SendInterruptedError,
    _broker_not_exist,
    _no_route,
    _remoting_exception,
    _send_failed,
    no_route_select,
)
from rocketsim.validate import MAX_PROPERTIES_SIZE

__all__ = ["KernelOut", "Plan", "plan_for", "prepare", "run_prepared", "simulate_producer", "supports"]

# ---- codes shared by the kernel and the Python around it --------------------------------------------

_LINE_CODE = {LINE_4_9_7: 0, LINE_4_9_8: 1, LINE_5: 2}
K_SYNC, K_ONEWAY, K_ORDERED, K_ORDERED_ASYNC = 0, 1, 2, 3
_EV_DELIVER, _EV_START = 0, 1  # completions first at equal times, as the reference
ST_FAILED, ST_ONEWAY = 4, 5  # statuses 0..3 are the broker model's OK / not-OK store statuses
(
    E_NONE,
    E_SEND_FAILED,
    E_BROKER,
    E_CALL_TIMEOUT,
    E_NO_ROUTE,
    E_REMOTING,
    E_SLEEP_INTERRUPTED,
    E_INTERRUPTED,
    E_ORDERED_OTHER,
    E_NO_ROUTE_SELECT,
) = range(10)
_MAX_SPIKE_EXPONENT = bm.MAX_SPIKE_EXPONENT
_MAX_LATENCY_MS = bm.MAX_LATENCY_MS
_NO_ISO = np.iinfo(np.int64).min  # "not isolated" in the fault_isolated_until_ms column
_STATUS_NAMES = (
    "SEND_OK",
    "FLUSH_DISK_TIMEOUT",
    "FLUSH_SLAVE_TIMEOUT",
    "SLAVE_NOT_AVAILABLE",
    ref.FAILED,
    ref.ONEWAY_SENT,
)

# ---- SplitMix64 and Java int arithmetic (uint64 wraps like the masked Python ints) ---------------------
# Every function of the event loop is compiled without the runtime's reference counting (``_nrt=False``):
# the loop allocates nothing (the caller passes every array in), and the atomic incref/decref pairs the
# runtime would put around each array argument cost more than the simulation itself.

_NO_RC = {"cache": True, "_nrt": False}
_G = np.uint64(0x9E3779B97F4A7C15)
_C1 = np.uint64(0xBF58476D1CE4E5B9)
_C2 = np.uint64(0x94D049BB133111EB)
_U2 = np.uint64(2)
_U3 = np.uint64(3)
_S11 = np.uint64(11)
_S27 = np.uint64(27)
_S30 = np.uint64(30)
_S31 = np.uint64(31)
_S32 = np.uint64(32)
_INT_MAX_U = np.uint64(0x7FFFFFFF)
_INV53 = 1.0 / (1 << 53)
_M64 = (1 << 64) - 1


@njit(**_NO_RC)
def _mix64(z):
    z = (z ^ (z >> _S30)) * _C1
    z = (z ^ (z >> _S27)) * _C2
    return z ^ (z >> _S31)


@njit(**_NO_RC)
def _uniform(key, stream):
    return np.float64(_mix64(key + np.uint64(stream + 1) * _G) >> _S11) * _INV53


@njit(**_NO_RC)
def _i32(x):
    return ((x + 0x80000000) & 0xFFFFFFFF) - 0x80000000


@njit(**_NO_RC)
def _java_abs(x):
    if x >= 0 or x == -2147483648:
        return x
    return -x


@njit(**_NO_RC)
def _java_rem(a, b):
    r = abs(a) % abs(b)
    return -r if a < 0 else r


@njit(**_NO_RC)
def _index_key(idx_base, thread, tbits, generation):
    """``derive_key(seed, producer, thread, "sendWhichQueue:<topic>", generation)`` from its first two."""
    k = _mix64((idx_base ^ np.uint64(thread)) + _G)
    k = _mix64((k ^ tbits) + _G)
    return _mix64((k ^ np.uint64(generation)) + _G)


@njit(**_NO_RC)
def _attempt_key(key_z2, seq, attempt):
    """``brokers.draw_key(seed, producer, seq, attempt)`` from the producer's part ``key_z2``."""
    z = _mix64(key_z2 + np.uint64(seq) * _G + _U2)
    return _mix64(z + np.uint64(attempt) * _G + _U3)


# ---- ThreadLocalIndex: ix = (is set, value, source counter, source key), each [instance, thread] -------


@njit(**_NO_RC)
def _inc(ix, i, t, line5):
    """``incrementAndGet`` (4.9: the start is ``Math.abs(nextInt())``, 5.x: ``nextInt()``)."""
    ix_set, ix_val, ix_ctr, ix_key = ix
    if ix_set[i, t]:
        index = ix_val[i, t]
    else:
        ix_ctr[i, t] += 1
        drawn = _i32(np.int64(_mix64(ix_key[i, t] + np.uint64(ix_ctr[i, t]) * _G) >> _S32))
        index = drawn if line5 else _java_abs(drawn)
    index = _i32(index + 1)
    ix_val[i, t] = index
    ix_set[i, t] = True
    return index & 0x7FFFFFFF


@njit(**_NO_RC)
def _reset(ix, i, t):
    """5.x ``reset()``: ``Math.abs(nextInt(Integer.MAX_VALUE))``."""
    ix_set, ix_val, ix_ctr, ix_key = ix
    ix_ctr[i, t] += 1
    x = _mix64(ix_key[i, t] + np.uint64(ix_ctr[i, t]) * _G) >> _S32
    ix_val[i, t] = _java_abs(np.int64((x * _INT_MAX_U) >> _S32))
    ix_set[i, t] = True


@njit(**_NO_RC)
def _inc_worst(worst, t):
    """``whichItemWorst.incrementAndGet()``: a value per thread, one shared source (4.9 lines only)."""
    w_set, w_val, w_ctr, worst_key, _ = worst
    if w_set[t]:
        index = w_val[t]
    else:
        w_ctr[0] += 1
        index = _java_abs(_i32(np.int64(_mix64(worst_key + np.uint64(w_ctr[0]) * _G) >> _S32)))
    index = _i32(index + 1)
    w_val[t] = index
    w_set[t] = True
    return index & 0x7FFFFFFF


# ---- the fault table (LatencyFaultToleranceImpl) in ConcurrentHashMap iteration order ------------------
# ft = (exists, current latency, start timestamp, reachable, bins [nbins, B], bin lengths,
#       meta [size, nbins, sizeCtl], spread hash per broker, scratch: bins copy, lengths copy, lo, hi)


@njit(**_NO_RC)
def _ft_resize(ft):
    """``ConcurrentHashMap.transfer``: double the bins; a bin's trailing run keeps its order, the nodes
    before it are re-linked one by one in front of their new bin (reversed)."""
    _, _, _, _, bins, blen, meta, bhash, old, old_len, lo, hi = ft
    n = meta[1]
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
    meta[1] = 2 * n
    meta[2] = 2 * n - (n >> 1)


@njit(**_NO_RC)
def _ft_update(ft, b, latency, isolation, now, reachable, line5, iso_latency, lat_max, nad):
    """``updateFaultItem`` with latency fault tolerance on (4.9 overwrites the start, 5.x only extends it)."""
    exists, lat, start, reach, bins, blen, meta, bhash, _, _, _, _ = ft
    probe = iso_latency if isolation else latency
    duration = 0
    for k in range(lat_max.shape[0] - 1, -1, -1):
        if probe >= lat_max[k]:
            duration = nad[k]
            break
    created = not exists[b]
    if created:
        start[b] = 0
        reach[b] = False
    lat[b] = latency
    if line5:
        if duration > 0 and now + duration > start[b]:
            start[b] = now + duration
        reach[b] = reachable
    else:
        start[b] = now + duration
    if created:
        i = bhash[b] & (meta[1] - 1)
        bins[i, blen[i]] = b
        blen[i] += 1
        exists[b] = True
        meta[0] += 1
        if meta[0] >= meta[2]:
            _ft_resize(ft)


@njit(**_NO_RC)
def _ft_remove(ft, b):
    exists, _, _, _, bins, blen, meta, bhash, _, _, _, _ = ft
    if not exists[b]:
        return
    exists[b] = False
    meta[0] -= 1
    i = bhash[b] & (meta[1] - 1)
    m = blen[i]
    for j in range(m):
        if bins[i, j] == b:
            for k in range(j, m - 1):
                bins[i, k] = bins[i, k + 1]
            blen[i] = m - 1
            return


@njit(**_NO_RC)
def _available(ft, b, now):
    return (not ft[0][b]) or now - ft[2][b] >= 0


@njit(**_NO_RC)
def _iso_until(ft, b, now):
    if ft[0][b] and now - ft[2][b] < 0:
        return ft[2][b]
    return _NO_ISO


@njit(**_NO_RC)
def _pick_one_at_least(ft, worst, now, t):
    """4.9 ``pickOneAtLeast``: stable sort by (unavailable, latency, start), then the better half."""
    _, lat, start, _, bins, blen, meta, _, _, _, _, _ = ft
    items = worst[4]
    cnt = 0
    for i in range(meta[1]):
        for j in range(blen[i]):
            items[cnt] = bins[i, j]
            cnt += 1
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
        return -1
    half = cnt // 2
    if half <= 0:
        return items[0]
    return items[_inc_worst(worst, t) % half]


# ---- the broker model: brokers.attempt_outcome, then simulate.to_outcome ---------------------------
# model = (float params [B, 5]: median, sigma, spike p, spike scale, spike alpha; connect ms [B];
#          error cum [B, E]; error kind [B, E]; error code [B, E]; window offsets [B + 1];
#          window ints [W, 7]: kind, start, end, period, down, burst kind, burst code; window floats [W, 2])


@njit(**_NO_RC)
def _base_latency(mf, b, key):
    u1 = _uniform(key, 1)
    u2 = _uniform(key, 2)
    z = np.sqrt(-2.0 * np.log(1.0 - u1)) * np.cos(2.0 * np.pi * u2)
    latency = mf[b, 0] * np.exp(mf[b, 1] * z)
    if _uniform(key, 3) < mf[b, 2]:
        e = -np.log(1.0 - _uniform(key, 4)) / mf[b, 4]
        latency += mf[b, 3] * np.exp(min(e, _MAX_SPIKE_EXPONENT))
    return min(latency, _MAX_LATENCY_MS)


@njit(**_NO_RC)
def _outcome(model, b, key, start, timeout):
    """(kind, latency, code) of one attempt; a timeout costs ``timeout + TIMEOUT_OVERSHOOT_MS``."""
    mf, mconn, mcum, mkind, mcode, woff, wi, wf = model
    if timeout < 0:
        timeout = 0
    conn = min(mconn[b], timeout)
    factor = 1.0
    for j in range(woff[b], woff[b + 1]):
        if not (wi[j, 1] <= start < wi[j, 2]):
            continue
        kind = wi[j, 0]
        if kind == 0 or (kind == 3 and (start - wi[j, 1]) % wi[j, 3] < wi[j, 4]):  # outage, flap down
            return 4, conn, 0
        if kind == 1:  # hang
            return 5, timeout + 1, 0
        if kind == 2:
            factor *= wf[j, 0]
        elif kind == 4 and _uniform(key, 5) < wf[j, 1]:
            lat_b = min(np.rint(_base_latency(mf, b, key)), np.float64(timeout))
            if wi[j, 5] == 5:
                return 5, timeout + 1, 0
            if wi[j, 5] == 4:
                return 4, conn, 0
            return wi[j, 5], np.int64(lat_b), wi[j, 6]
    u = _uniform(key, 0)
    lat_r = np.rint(_base_latency(mf, b, key) * factor)  # compared as floats: exact, and never overflows
    for e in range(mcum.shape[1]):
        if u < mcum[b, e]:
            kind = mkind[b, e]
            if kind == 5:
                return 5, timeout + 1, 0
            if kind == 4:
                return 4, conn, 0
            return kind, np.int64(min(lat_r, np.float64(timeout))), mcode[b, e]
    if lat_r >= timeout:
        return 5, timeout + 1, 0
    return 0, np.int64(lat_r), 0


# ---- queue selection: MQFaultStrategy.selectOneMessageQueue of each line ----------------------------
# inst = (queue brokers [I, Q], queue ids [I, Q], queue count [I], route version [I], cached version per
#         topic, cached instance per topic): the TopicPublishInfo instances, whose slots 4.9.7 rewrites


@njit(**_NO_RC)
def _select(inst, ix, v_wqn, ft, worst, i, t, last, now, reset, line, fault_on):
    """(slot, broker, queue id); slot -1 is a MessageQueue made on the spot (4.9.8's pickOneAtLeast)."""
    qb, qq, nqs, iv, _, _ = inst
    nq = nqs[i]
    line5 = line == 2  # a typed value, not a literal: _inc is compiled once
    if line5:
        if fault_on:
            if reset:
                _reset(ix, i, t)
            for _ in range(nq):
                p = _inc(ix, i, t, line5) % nq
                b = qb[i, p]
                if _available(ft, b, now) and b != last:
                    return p, b, qq[i, p]
            for _ in range(nq):
                p = _inc(ix, i, t, line5) % nq
                b = qb[i, p]
                if ((not ft[0][b]) or ft[3][b]) and b != last:
                    return p, b, qq[i, p]
        else:
            for _ in range(nq):
                p = _inc(ix, i, t, line5) % nq
                if qb[i, p] != last:
                    return p, qb[i, p], qq[i, p]
        p = _inc(ix, i, t, line5) % nq
        return p, qb[i, p], qq[i, p]
    if not fault_on:
        if last >= 0:
            for _ in range(nq):
                p = _inc(ix, i, t, line5) % nq
                if qb[i, p] != last:
                    return p, qb[i, p], qq[i, p]
        p = _inc(ix, i, t, line5) % nq
        return p, qb[i, p], qq[i, p]
    # one incrementAndGet, then a local `index++` (which may wrap) per probe; lastBrokerName is ignored
    index = _inc(ix, i, t, line5)
    for _ in range(nq):
        p = _java_rem(_java_abs(index), nq)
        index = _i32(index + 1)
        if p < 0:
            p = 0
        if _available(ft, qb[i, p], now):
            return p, qb[i, p], qq[i, p]
    not_best = _pick_one_at_least(ft, worst, now, t)
    wqn = v_wqn[iv[i], not_best] if not_best >= 0 else -1
    if wqn > 0:
        p = _inc(ix, i, t, line5) % nq
        if not_best < 0:
            return p, qb[i, p], qq[i, p]
        qid = _inc(ix, i, t, line5) % wqn
        if line == 0:  # 4.9.7: the cached MessageQueue is rewritten in place
            qb[i, p] = not_best
            qq[i, p] = qid
            return p, not_best, qid
        return -1, not_best, qid
    if not_best >= 0:
        _ft_remove(ft, not_best)
    p = _inc(ix, i, t, line5) % nq
    return p, qb[i, p], qq[i, p]


# ---- the event heap: rows (time, kind, counter, payload), smallest (time, kind, counter) first ---------


@njit(**_NO_RC)
def _h_less(h, a, b):
    if h[a, 0] != h[b, 0]:
        return h[a, 0] < h[b, 0]
    if h[a, 1] != h[b, 1]:
        return h[a, 1] < h[b, 1]
    return h[a, 2] < h[b, 2]


@njit(**_NO_RC)
def _h_push(h, n, t, kind, counter, payload):
    i = n
    h[i, 0] = t
    h[i, 1] = kind
    h[i, 2] = counter
    h[i, 3] = payload
    while i > 0:
        parent = (i - 1) >> 1
        if not _h_less(h, i, parent):
            break
        for c in range(4):
            h[i, c], h[parent, c] = h[parent, c], h[i, c]
        i = parent
    return n + 1


@njit(**_NO_RC)
def _h_pop(h, n):
    """Drop the root (read it first); returns the new size."""
    n -= 1
    if n == 0:
        return 0
    for c in range(4):
        h[0, c] = h[n, c]
    i = 0
    while True:
        m = 2 * i + 1
        if m >= n:
            break
        if m + 1 < n and _h_less(h, m + 1, m):
            m += 1
        if not _h_less(h, m, i):
            break
        for c in range(4):
            h[i, c], h[m, c] = h[m, c], h[i, c]
        i = m
    return n


# ---- the event loop ------------------------------------------------------------------------------
# st = [heap size, push counter, instances, attempts, started]; every other piece of state is an array too,
# so the loop can stop when a buffer is full (1: attempts, 2: instances) and go on after the caller grew it.


@njit(**_NO_RC)
def _loop(st, heap, sends, thr, cfg, fa, routes, keys, model, ft, worst, inst, ix, fl, res, att):
    """Process events until none is left (returns 0) or a buffer is full (returns 1 or 2)."""
    s_seq, s_born, s_thread, s_kind, s_topic, s_ohash = sends
    th_val, th_list, th_off, th_order, cursor = thr
    retry_codes, lat_max, nad = fa
    v_start, v_nq, v_qb, v_qq, v_wqn = routes
    key_z2, idx_base, topic_bits = keys
    qb, qq, nqs, iv, cache_v, cache_i = inst
    ix_set, ix_val, ix_ctr, ix_key = ix
    (
        f_inst,
        f_slot,
        f_broker,
        f_qid,
        f_times,
        f_begin,
        f_prev,
        f_last,
        f_okind,
        f_olat,
        f_ocode,
        f_res,
        f_rkind,
        f_rb,
        f_rq,
    ) = fl
    r_status, r_err, r_aux, r_cost, r_broker, r_qid, r_end, r_exh, r_nsent = res
    a_send, a_att, a_start, a_lat, a_b, a_q, a_kind, a_code, a_iso = att
    line = cfg[0]
    fault_on = cfg[1] != 0
    timeout = cfg[2]
    times_total = cfg[3]
    cap = cfg[4]
    retry_another = cfg[5] != 0
    iso_latency = cfg[6]
    line5 = line == 2
    n_t = th_val.shape[0]
    n_v = v_start.shape[0]
    cap_i = nqs.shape[0]
    cap_a = a_send.shape[0]
    hn, counter, n_inst, n_a = st[0], st[1], st[2], st[3]
    # typed values rather than literal constants, so each helper is compiled for one signature only
    YES = np.bool_(True)
    NO = np.bool_(False)
    NONE = np.int64(-1)
    EV_START = np.int64(_EV_START)
    EV_DELIVER = np.int64(_EV_DELIVER)

    if st[4] == 0:  # each thread's first send, in the order the threads first appear
        st[4] = 1
        for j in range(n_t):
            th = th_order[j]
            if cursor[th] < th_off[th + 1]:
                hn = _h_push(heap, hn, max(s_born[th_list[cursor[th]]], 0), EV_START, counter, th)
                counter += 1

    status = 0
    while hn > 0:
        if n_a >= cap_a:  # an event records at most one attempt and builds at most one instance
            status = 1
            break
        if n_inst >= cap_i:
            status = 2
            break
        t_ev = heap[0, 0]
        ev = heap[0, 1]
        payload = heap[0, 3]
        hn = _h_pop(heap, hn)
        step = False  # run the SYNC loop from its `times < timesTotal` test for send s at `now`
        sched = -1  # then start this thread's next send, free at `free_at`
        free_at = 0
        if ev == _EV_START:
            th = payload
            s = th_list[cursor[th]]
            cursor[th] += 1
            now = t_ev
            kind_s = s_kind[s]
            # publish_info(topic, now): the cached TopicPublishInfo, or a new one after a route change
            tp = s_topic[s]
            lo = 0
            hi = n_v
            while lo < hi:  # bisect_right(version starts, now) - 1
                mid = (lo + hi) >> 1
                if v_start[mid] <= now:
                    lo = mid + 1
                else:
                    hi = mid
            v = lo - 1
            if cache_v[tp] != v:
                i = n_inst
                n_inst += 1
                nqs[i] = v_nq[v]
                iv[i] = v
                for p in range(v_qb.shape[1]):
                    qb[i, p] = v_qb[v, p]
                    qq[i, p] = v_qq[v, p]
                for tt in range(n_t):
                    ix_set[i, tt] = False
                    ix_ctr[i, tt] = 0
                    ix_key[i, tt] = _index_key(idx_base, th_val[tt], topic_bits[tp], v)
                cache_v[tp] = v
                cache_i[tp] = i
            i = cache_i[tp]
            f_inst[s] = i
            f_begin[s] = now
            if kind_s == K_ORDERED_ASYNC and cursor[th] < th_off[th + 1]:  # the thread does not wait
                hn = _h_push(heap, hn, max(s_born[th_list[cursor[th]]], now), EV_START, counter, th)
                counter += 1
            if kind_s >= K_ORDERED and nqs[i] == 0:  # sendSelectImpl: "No route info for this topic, T"
                r_status[s] = ST_FAILED
                r_err[s] = E_NO_ROUTE_SELECT
                r_end[s] = now
                if kind_s == K_ORDERED:
                    sched = th
                    free_at = now
            elif kind_s >= K_ORDERED:  # SelectMessageQueueByHash: one attempt, no fault-table update
                p = _java_abs(_java_rem(s_ohash[s], nqs[i]))
                f_slot[s] = p
                f_broker[s] = qb[i, p]  # read once, when chosen: a later 4.9.7 rewrite does not move it
                f_qid[s] = qq[i, p]
                f_prev[s] = now
                kd, lat, code = _outcome(model, qb[i, p], _attempt_key(key_z2, s_seq[s], 0), now, timeout)
                f_okind[s] = kd
                f_olat[s] = lat
                f_ocode[s] = code
                hn = _h_push(heap, hn, now + lat, EV_DELIVER, counter, s)
                counter += 1
            elif nqs[i] == 0:  # "No route info of this topic"
                r_status[s] = ST_FAILED
                r_err[s] = E_NO_ROUTE
                r_end[s] = now
                sched = th
                free_at = now
            elif kind_s == K_ONEWAY:
                p, b, q = _select(inst, ix, v_wqn, ft, worst, i, th, NONE, now, NO, line, fault_on)
                f_slot[s] = p
                f_broker[s] = b
                f_qid[s] = q
                f_prev[s] = now
                kd, lat, code = _outcome(model, b, _attempt_key(key_z2, s_seq[s], 0), now, timeout)
                f_okind[s] = kd
                f_olat[s] = lat
                f_ocode[s] = code
                # the caller waits only for the write: over at once unless the write failed
                write_failed = kd == 8 or kd == 9 or kd == 4 or kd == 6
                hn = _h_push(heap, hn, now + (lat if write_failed else 0), EV_DELIVER, counter, s)
                counter += 1
            else:
                f_times[s] = 0
                f_last[s] = -1
                f_res[s] = False
                step = True
        else:  # a call completes: record the attempt, update the fault table, decide what comes next
            s = payload
            th = s_thread[s]
            kind_s = s_kind[s]
            i = f_inst[s]
            kd = f_okind[s]
            lat = f_olat[s]
            code = f_ocode[s]
            a_send[n_a] = s
            a_start[n_a] = f_prev[s]
            a_lat[n_a] = lat
            a_kind[n_a] = kd
            a_code[n_a] = code
            r_nsent[s] += 1
            if kind_s >= K_ORDERED:
                now = f_begin[s] + lat
                b = f_broker[s]
                q = f_qid[s]
                a_att[n_a] = 0
                a_b[n_a] = b
                a_q[n_a] = q
                a_iso[n_a] = _iso_until(ft, b, now)
                n_a += 1
                r_broker[s] = b
                r_qid[s] = q
                r_end[s] = now
                if kd <= 3:
                    r_status[s] = kd
                else:
                    r_status[s] = ST_FAILED
                    if kd <= 6:
                        r_err[s] = E_REMOTING
                        r_aux[s] = kd
                        r_cost[s] = timeout
                    elif kd == 7:
                        r_err[s] = E_BROKER
                        r_aux[s] = code
                    else:
                        r_err[s] = E_ORDERED_OTHER
                        r_aux[s] = kd
                if kind_s == K_ORDERED:
                    sched = th
                    free_at = now
            elif kind_s == K_ONEWAY:
                # only a failure to write the request costs time; anything else reads as sent
                begin = f_begin[s]
                failed = kd == 8 or kd == 9 or kd == 4 or kd == 6
                now = begin + (lat if failed else 0)
                latency = now - begin
                p = f_slot[s]
                target = qb[i, p] if p >= 0 else f_broker[s]
                b = f_broker[s]
                if not failed:
                    if fault_on:
                        _ft_update(ft, target, latency, NO, now, YES, line5, iso_latency, lat_max, nad)
                    r_status[s] = ST_ONEWAY
                else:
                    if fault_on:
                        iso = kd == 4 or kd == 6 or (kd == 8 and not line5)
                        _ft_update(ft, target, latency, iso, now, YES, line5, iso_latency, lat_max, nad)
                    r_status[s] = ST_FAILED
                    if kd == 9:
                        r_err[s] = E_INTERRUPTED
                    else:
                        r_err[s] = E_SEND_FAILED
                        r_aux[s] = 1
                        r_cost[s] = latency
                a_att[n_a] = 0
                a_lat[n_a] = latency  # what the caller waited: the write only
                a_b[n_a] = b
                a_q[n_a] = f_qid[s]
                a_iso[n_a] = _iso_until(ft, target, now)
                n_a += 1
                r_broker[s] = b
                r_qid[s] = f_qid[s]
                r_end[s] = now
                sched = th
                free_at = now
            else:  # SYNC: the outcome of attempt f_times[s]
                now = f_prev[s] + lat
                p = f_slot[s]
                target = qb[i, p] if p >= 0 else f_broker[s]  # mq.getBrokerName() is read again
                times = f_times[s]
                returned = False
                thrown = False
                if kd <= 3:  # SEND_OK or a non-OK store status
                    if fault_on:
                        _ft_update(ft, target, lat, NO, now, YES, line5, iso_latency, lat_max, nad)
                    f_res[s] = True
                    f_rkind[s] = kd
                    f_rb[s] = f_broker[s]
                    f_rq[s] = f_qid[s]
                    returned = kd == 0 or not retry_another
                elif kd == 7:  # MQBrokerException
                    if fault_on:
                        _ft_update(ft, target, lat, YES, now, NO, line5, iso_latency, lat_max, nad)
                    retry = False
                    for c in range(retry_codes.shape[0]):
                        if retry_codes[c] == code:
                            retry = True
                    if not retry:
                        if f_res[s]:
                            returned = True
                        else:
                            thrown = True
                            r_err[s] = E_BROKER
                            r_aux[s] = code
                elif kd == 9:  # interrupted
                    if fault_on:
                        _ft_update(ft, target, lat, NO, now, YES, line5, iso_latency, lat_max, nad)
                    thrown = True
                    r_err[s] = E_SLEEP_INTERRUPTED
                else:  # RemotingException (isolate), MQClientException (isolate in 4.9 only)
                    if fault_on:
                        iso = kd != 8 or not line5
                        _ft_update(ft, target, lat, iso, now, YES, line5, iso_latency, lat_max, nad)
                a_att[n_a] = times
                a_b[n_a] = f_broker[s]
                a_q[n_a] = f_qid[s]
                a_iso[n_a] = _iso_until(ft, target, now)
                n_a += 1
                r_broker[s] = f_broker[s]
                r_qid[s] = f_qid[s]
                if returned:
                    r_status[s] = f_rkind[s]
                    r_broker[s] = f_rb[s]
                    r_qid[s] = f_rq[s]
                    r_end[s] = now
                    sched = th
                    free_at = now
                elif thrown:
                    r_status[s] = ST_FAILED
                    r_end[s] = now
                    sched = th
                    free_at = now
                else:
                    f_times[s] = times + 1
                    f_last[s] = target
                    step = True

        if step:  # sendDefaultImpl's loop: select, check the call-timeout budget, make the call
            times = f_times[s]
            exhausted = False
            done = times >= times_total
            if not done:
                i = f_inst[s]
                p, b, q = _select(
                    inst,
                    ix,
                    v_wqn,
                    ft,
                    worst,
                    i,
                    s_thread[s],
                    f_last[s],
                    now,
                    line5 and times > 0,
                    line,
                    fault_on,
                )
                cost = now - f_begin[s]
                if timeout < cost:
                    exhausted = True
                    done = True
                else:
                    cur = timeout - cost
                    if cap > -1 and times + 1 < times_total and cur > cap:
                        cur = cap
                    f_slot[s] = p
                    f_broker[s] = b
                    f_qid[s] = q
                    f_prev[s] = now
                    kd, lat, code = _outcome(model, b, _attempt_key(key_z2, s_seq[s], times), now, cur)
                    f_okind[s] = kd
                    f_olat[s] = lat
                    f_ocode[s] = code
                    hn = _h_push(heap, hn, now + lat, EV_DELIVER, counter, s)
                    counter += 1
            if done:
                r_exh[s] = exhausted
                r_end[s] = now
                if f_res[s]:
                    r_status[s] = f_rkind[s]
                    r_broker[s] = f_rb[s]
                    r_qid[s] = f_rq[s]
                elif exhausted:
                    r_status[s] = ST_FAILED
                    r_err[s] = E_CALL_TIMEOUT
                else:
                    r_status[s] = ST_FAILED
                    r_err[s] = E_SEND_FAILED
                    r_aux[s] = times
                    r_cost[s] = now - f_begin[s]
                sched = s_thread[s]
                free_at = now

        if sched >= 0 and cursor[sched] < th_off[sched + 1]:
            hn = _h_push(heap, hn, max(s_born[th_list[cursor[sched]]], free_at), EV_START, counter, sched)
            counter += 1

    st[0] = hn
    st[1] = counter
    st[2] = n_inst
    st[3] = n_a
    return status


@njit(cache=True)
def _sorted_attempts(att, n_a, n_s, label_keys):
    """The attempts in (send, attempt) order -- a counting sort by send, stable because a send's attempts
    are recorded in order -- in their output dtypes, with each (kind, code) as an index into
    ``label_keys``; and the offset of each send's first attempt."""
    a_send, a_att, a_start, a_lat, a_b, a_q, a_kind, a_code, a_iso = att
    off = np.zeros(n_s + 1, np.int64)
    for k in range(n_a):
        off[a_send[k] + 1] += 1
    for s in range(n_s):
        off[s + 1] += off[s]
    pos = off[:n_s].copy()
    send = np.empty(n_a, np.int64)
    attempt = np.empty(n_a, np.int32)
    start = np.empty(n_a, np.int64)
    lat = np.empty(n_a, np.int64)
    broker = np.empty(n_a, np.int64)
    qid = np.empty(n_a, np.int32)
    label = np.empty(n_a, np.int64)
    code = np.empty(n_a, np.int32)
    iso = np.empty(n_a, np.int64)
    for k in range(n_a):
        j = pos[a_send[k]]
        pos[a_send[k]] += 1
        send[j] = a_send[k]
        attempt[j] = a_att[k]
        start[j] = a_start[k]
        lat[j] = a_lat[k]
        broker[j] = a_b[k]
        qid[j] = a_q[k]
        code[j] = a_code[k]
        iso[j] = a_iso[k]
        key = a_kind[k] * 4294967296 + (a_code[k] if a_kind[k] == 7 else 0)
        label[j] = -1
        for m in range(label_keys.shape[0]):
            if label_keys[m] == key:
                label[j] = m
                break
    return send, attempt, start, lat, broker, qid, label, code, iso, off


# ---- the scenario side: routes, model and settings as arrays (once per scenario) ---------------------


@dataclass(frozen=True)
class Plan:
    """Everything the kernel needs that depends on the scenario only."""

    brokers: tuple[str, ...]
    cfg: np.ndarray
    retry_codes: np.ndarray
    lat_max: np.ndarray
    nad: np.ndarray
    v_start: np.ndarray
    v_nq: np.ndarray
    v_qb: np.ndarray
    v_qq: np.ndarray
    v_wqn: np.ndarray
    b_hash: np.ndarray
    nb_max: int
    model: tuple
    empty_route: bool  # some route version has no writable queue
    label_keys: np.ndarray  # kind << 32 | response code, of every outcome the model can give
    labels: list[str]  # their ``outcome`` column texts


_PLANS: dict[int, tuple[Scenario, Plan]] = {}


def plan_for(sc: Scenario) -> Plan:
    """The scenario's :class:`Plan`, cached per scenario object."""
    hit = _PLANS.get(id(sc))
    if hit is not None and hit[0] is sc:
        return hit[1]
    plan = _build_plan(sc)
    if len(_PLANS) > 32:
        _PLANS.clear()
    _PLANS[id(sc)] = (sc, plan)
    return plan


def _build_plan(sc: Scenario) -> Plan:
    p = sc.producers
    version = p.version
    line = version.fault_line
    cfg = SendConfig.from_settings(p)
    brokers = tuple(sc.cluster.brokers)
    bidx = {b: k for k, b in enumerate(brokers)}
    arrays = FaultArrays.default(line)
    cap = cfg.max_timeout_per_request if line == LINE_5 else -1
    settings = np.array(
        [
            _LINE_CODE[line],
            int(p.send_latency_fault_enable),
            cfg.send_msg_timeout_ms,
            cfg.times_total,
            cap,
            int(cfg.retry_another_broker_when_not_store_ok),
            ISOLATION_LATENCY_MS[line],
        ],
        np.int64,
    )

    versions = route_versions(ref.route_timeline(sc), ref._horizon_ms(sc))
    n_v = len(versions)
    lists = [build_queue_list("T", route) for _, route in versions]
    max_q = max(1, max(len(slots) for slots, _, _ in lists))
    v_qb = np.zeros((n_v, max_q), np.int64)
    v_qq = np.zeros((n_v, max_q), np.int64)
    v_wqn = np.full((n_v, len(brokers)), -1, np.int64)
    for v, (slots, order, sorted_route) in enumerate(lists):
        v_qb[v, : len(slots)] = [bidx[s.broker_name] for s in slots]
        v_qq[v, : len(slots)] = [s.queue_id for s in slots]
        tp = TopicPublishInfo("T", sorted_route, slots, None, order)  # type: ignore[arg-type]
        for b, k in bidx.items():
            v_wqn[v, k] = tp.write_queue_nums_by_broker(b, writable_only=line == LINE_4_9_8)

    nb_max, ctl = 32, 24  # ConcurrentHashMap bins the table can grow to with every broker in it
    while len(brokers) >= ctl:
        ctl = 2 * nb_max - (nb_max >> 1)
        nb_max *= 2

    bmod = bm.BrokerModel.from_scenario(sc)
    mf = np.array(
        [[q.median_ms, q.sigma, q.spike_probability, q.spike_scale_ms, q.spike_alpha] for q in bmod.params],
        np.float64,
    )
    mconn = np.array([int(round(q.connect_refused_ms)) for q in bmod.params], np.int64)
    mcum = np.array([q.error_cum for q in bmod.params], np.float64)
    mkind = np.array([q.error_kind for q in bmod.params], np.int64)
    mcode = np.array([q.error_code for q in bmod.params], np.int64)
    woff = np.zeros(len(brokers) + 1, np.int64)
    wi_rows: list[list[int]] = []
    wf_rows: list[list[float]] = []
    for k, windows in enumerate(bmod.faults):
        for w in windows:
            wi_rows.append([w.kind, w.start_ms, w.end_ms, w.period_ms, w.down_ms, w.burst_kind, w.burst_code])
            wf_rows.append([w.factor, w.rate])
        woff[k + 1] = len(wi_rows)
    wi = np.array(wi_rows, np.int64).reshape(-1, 7)
    wf = np.array(wf_rows, np.float64).reshape(-1, 2)
    model = (mf, mconn, mcum, mkind, mcode, woff, wi, wf)

    codes = {int(c) for c, k in zip(mcode.ravel(), mkind.ravel(), strict=True) if k == bm.BROKER_ERROR}
    codes |= {int(r[6]) for r in wi_rows if r[5] == bm.BROKER_ERROR}
    pairs = [(k, 0) for k in range(10) if k != bm.BROKER_ERROR] + [
        (bm.BROKER_ERROR, c) for c in sorted(codes)
    ]
    labels = [ref.to_outcome(bm.AttemptOutcome(k, 0, c)).label for k, c in pairs]
    return Plan(
        label_keys=np.array([(k << 32) + c for k, c in pairs], np.int64),
        labels=labels,
        brokers=brokers,
        cfg=settings,
        retry_codes=np.array(sorted(cfg.retry_codes), np.int64),
        lat_max=np.array(arrays.latency_max, np.int64),
        nad=np.array(arrays.not_available_duration, np.int64),
        v_start=np.array([t for t, _ in versions], np.int64),
        v_nq=np.array([len(slots) for slots, _, _ in lists], np.int64),
        v_qb=v_qb,
        v_qq=v_qq,
        v_wqn=v_wqn,
        b_hash=np.array([chm_spread(java_string_hash(b)) for b in brokers], np.int64),
        nb_max=nb_max,
        model=model,
        empty_route=any(len(slots) == 0 for slots, _, _ in lists),
    )


# ---- the messages side: the reference's _prepare, vectorised ---------------------------------------


@dataclass
class Prepared:
    """One producer's messages as sends (arrays), plus what the result rows need."""

    messages: pa.Table  # sorted by seq
    producer: int
    topics: list[str]  # topic id -> name
    # per row
    rejected: np.ndarray  # bool
    reject_text: dict[int, str]  # row -> the client's text
    send_of_row: np.ndarray  # send index, -1 if rejected
    row_wire: np.ndarray
    compressed: np.ndarray
    sys_flag: np.ndarray
    born: np.ndarray
    # per send
    s_row: np.ndarray  # the leading row
    s_seq: np.ndarray
    s_born: np.ndarray
    s_thread: np.ndarray  # the thread value of the leading row
    s_kind: np.ndarray
    s_mode: np.ndarray  # 0 sync, 1 oneway, 2 async (the reference's _Send.mode)
    s_topic: np.ndarray
    s_ohash: np.ndarray
    s_wire: np.ndarray


_MODES = ("sync", "oneway", "async")


def _codes(col: pa.ChunkedArray | pa.Array, names: tuple[str, ...] | None = None) -> tuple[np.ndarray, list]:
    """Dictionary codes of a string column (-1 for null) and the dictionary (or codes into ``names``)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()  # one dictionary for every row
    enc = pc.dictionary_encode(col)
    dictionary = enc.dictionary.to_pylist()
    idx = np.asarray(enc.indices.fill_null(-1), np.int64)
    if names is None:
        return idx, dictionary
    remap = np.array([names.index(d) if d in names else -2 for d in dictionary] + [-1], np.int64)
    return remap[idx], list(names)


def _rejections(
    messages: pa.Table, sc: Scenario, body: np.ndarray, props: np.ndarray, topic_idx: np.ndarray, topics: list
) -> dict[int, str]:
    """Rows the client refuses, with its text; only rows that can fail are checked one by one."""
    p = sc.producers
    bad_topic = np.array([ref.rejection(t, 1, 0, None, sc) is not None for t in topics] + [True], bool)
    reserved = np.asarray(pc.is_valid(messages.column("reserved_property")))
    suspect = (
        reserved
        | bad_topic[topic_idx]
        | (body == 0)
        | (body > p.max_message_size)
        | (props > MAX_PROPERTIES_SIZE)
    )
    rows = np.flatnonzero(suspect)
    if rows.size == 0:
        return {}
    topic = messages.column("topic").take(rows).to_pylist()
    res = messages.column("reserved_property").take(rows).to_pylist()
    out: dict[int, str] = {}
    for k, r in enumerate(rows.tolist()):
        why = ref.rejection(topic[k], int(body[r]), int(props[r]), res[k], sc)
        if why is not None:
            out[r] = why
    if out and pc.any(pc.is_valid(messages.column("batch_id"))).as_py():
        out = ref.batch_rejections(
            out, messages.column("batch_id").to_pylist(), messages.column("reserved_property").to_pylist(), sc
        )
    return out


def prepare(messages: pa.Table, sc: Scenario) -> Prepared:
    """``simulate._prepare`` over arrays: the sends in seq order, rejected rows, sizes and flags."""
    p = sc.producers
    seq_col = np.asarray(messages.column("seq"), np.int64)
    if seq_col.size > 1 and not bool(np.all(seq_col[1:] > seq_col[:-1])):
        messages = messages.sort_by([("seq", "ascending")])
        seq_col = np.asarray(messages.column("seq"), np.int64)
    n = messages.num_rows
    producer = int(messages.column("producer")[0].as_py())
    body = np.asarray(messages.column("body_size"), np.int64)
    comp = np.asarray(messages.column("compressibility"), np.float64)
    props = np.asarray(messages.column("properties_size"), np.int64)
    born = np.asarray(messages.column("born_ts_ms"), np.int64)
    thread = np.asarray(messages.column("thread"), np.int64)
    is_batch = np.asarray(pc.is_valid(messages.column("batch_id")))
    batch_id = np.asarray(messages.column("batch_id").fill_null(0), np.int64)
    mtype, _ = _codes(messages.column("message_type"), ("normal", "ordered", "delay", "transaction", "batch"))
    mode, _ = _codes(messages.column("send_mode"), _MODES)

    # sizes and flags exactly as _prepare computes them
    compress = (body >= p.compress_msg_body_over_howmuch) & ~is_batch
    sent_body = body.copy()
    if compress.any():
        model = ref._compression_model(p.compress_type, p.compress_level)
        sent_body[compress] = model.predict_sizes(body[compress], comp[compress])
    zflag = compressed_sys_flag(CompressionType[p.compress_type], version=p.version)
    txn = mtype == 3
    sys_flag = np.where(compress, zflag, 0) | np.where(txn, MessageSysFlag.TRANSACTION_PREPARED_TYPE, 0)
    element = codec.encoded_message_sizes(body, props, version=p.version)
    batch_props = 4 + 2 + 4 + 8 + 2 + 32 + (0 if p.version.properties_trailing_separator else -1)

    topic_idx, topics = _codes(messages.column("topic"))
    reject_text = _rejections(messages, sc, body, props, topic_idx, topics)
    rejected = np.zeros(n, bool)
    if reject_text:
        rejected[np.fromiter(reject_text, np.int64, len(reject_text))] = True
    ok = ~rejected
    eff_mode = np.where(txn | ((mode == 1) & is_batch), 0, mode)

    # sends: every accepted non-batch row, and each batch at its first accepted member
    batch_rows = np.flatnonzero(ok & is_batch)
    _, first, inverse = np.unique(batch_id[batch_rows], return_index=True, return_inverse=True)
    leaders = batch_rows[first]
    s_row = np.sort(np.concatenate([np.flatnonzero(ok & ~is_batch), leaders]))
    n_s = s_row.size
    send_of_row = np.full(n, -1, np.int64)
    send_of_row[s_row] = np.arange(n_s)
    send_of_row[batch_rows] = send_of_row[leaders][inverse.reshape(-1)]
    s_born = born[s_row].copy()
    s_wire = (sent_body + props)[s_row]
    if batch_rows.size:
        sb = send_of_row[batch_rows]
        np.maximum.at(s_born, sb, born[batch_rows])
        batch_wire = np.zeros(n_s, np.int64)
        np.add.at(batch_wire, sb, element[batch_rows])
        s_wire = np.where(is_batch[s_row], batch_props + batch_wire, s_wire)
    row_wire = np.where(rejected, 0, np.where(is_batch, element, sent_body + props))

    # ordered sends: SelectMessageQueueByHash over String.hashCode of the key
    okey_idx, okeys = _codes(messages.column("order_key"))
    ohash = np.array([java_string_hash(k) for k in okeys] + [0], np.int64)[okey_idx]
    ordered = (mtype == 1) & (okey_idx >= 0)
    s_mode = eff_mode[s_row]
    s_ordered = ordered[s_row] & ~is_batch[s_row]
    s_kind = np.where(
        s_ordered, np.where(s_mode == 2, K_ORDERED_ASYNC, K_ORDERED), np.where(s_mode == 1, K_ONEWAY, K_SYNC)
    ).astype(np.int64)
    return Prepared(
        messages=messages,
        producer=producer,
        topics=topics,
        rejected=rejected,
        reject_text=reject_text,
        send_of_row=send_of_row,
        row_wire=row_wire,
        compressed=compress,
        sys_flag=sys_flag,
        born=born,
        s_row=s_row,
        s_seq=seq_col[s_row],
        s_born=s_born,
        s_thread=thread[s_row],
        s_kind=s_kind,
        s_mode=s_mode,
        s_topic=topic_idx[s_row],
        s_ohash=ohash[s_row],
        s_wire=s_wire,
    )


# ---- the public entry points -----------------------------------------------------------------------


def supports(sc: Scenario, messages: pa.Table) -> bool:
    """Whether :func:`simulate_producer` gives the reference's tables for these messages.

    Not supported (the reference runs instead): empty input or several producers (the reference's own
    answers), repeated ``seq`` values, the 5.x detector, and ASYNC sends other than ordered ones.
    """
    if messages.num_rows == 0:
        return False
    p = sc.producers
    if p.start_detector_enable and p.version.fault_line == LINE_5:
        return False
    if pc.count_distinct(messages.column("producer")).as_py() != 1:
        return False
    if pc.count_distinct(messages.column("seq")).as_py() != messages.num_rows:
        return False  # the reference's (seq, attempt) sort would interleave sends sharing a seq
    mode = messages.column("send_mode")
    mtype = messages.column("message_type")
    ordered = pc.and_(pc.equal(mtype, "ordered"), pc.is_valid(messages.column("order_key")))
    ordered = pc.and_(ordered, pc.is_null(messages.column("batch_id")))
    async_unsupported = pc.and_(
        pc.equal(mode, "async"), pc.invert(pc.or_(pc.equal(mtype, "transaction"), ordered))
    )
    return not pc.any(async_unsupported).as_py()


@dataclass
class KernelOut:
    """The kernel's answer: attempts in (send, attempt) order, and one result per send."""

    a_send: np.ndarray
    a_attempt: np.ndarray
    a_start: np.ndarray
    a_latency: np.ndarray
    a_broker: np.ndarray  # index into Plan.brokers
    a_qid: np.ndarray
    a_label: np.ndarray  # index into Plan.labels
    a_code: np.ndarray
    a_iso: np.ndarray  # _NO_ISO: not isolated
    att_off: np.ndarray  # send s has attempts att_off[s]:att_off[s + 1]
    status: np.ndarray  # 0..3: SEND_OK and the not-OK store statuses, ST_FAILED, ST_ONEWAY
    err: np.ndarray  # E_*
    aux: np.ndarray  # E_SEND_FAILED: times; E_BROKER: code; E_REMOTING / E_ORDERED_OTHER: outcome kind
    cost: np.ndarray  # E_SEND_FAILED: cost ms; E_REMOTING: timeout ms
    broker: np.ndarray  # the result's broker, else the last attempt's, else -1
    qid: np.ndarray
    begin: np.ndarray
    end: np.ndarray
    exhausted: np.ndarray
    n_sent: np.ndarray


def _grown(arrays: tuple, n: int) -> tuple:
    """Copies of ``arrays`` with ``n`` rows (the rows they had first, zeros after)."""
    out = []
    for a in arrays:
        b = np.zeros((n, *a.shape[1:]), a.dtype)
        b[: a.shape[0]] = a
        out.append(b)
    return tuple(out)


def run_prepared(prep: Prepared, sc: Scenario) -> KernelOut:
    """Run the kernel over prepared sends; returns its raw arrays (for benchmarks and tests).

    Attempts come back in (send, attempt) order with per-send offsets; results come per send.
    """
    plan = plan_for(sc)
    n_s = prep.s_seq.size
    threads, t_dense = np.unique(prep.s_thread, return_inverse=True)
    t_dense = t_dense.reshape(-1).astype(np.int64)
    n_t = threads.size
    th_list = np.argsort(t_dense, kind="stable").astype(np.int64)
    th_off = np.zeros(n_t + 1, np.int64)
    np.cumsum(np.bincount(t_dense, minlength=n_t), out=th_off[1:])
    _, first = np.unique(t_dense, return_index=True)
    th_order = t_dense[np.sort(first)].astype(np.int64)  # threads by first send (the reference's dict order)
    seed, producer = sc.seed, prep.producer
    z = bm._mix((seed * bm._GOLDEN + 0x632BE59BD9B4E019) & _M64)
    key_z2 = np.uint64(bm._mix((z + producer * bm._GOLDEN + 1) & _M64))
    idx_base = np.uint64(derive_key(seed, producer))
    topic_bits = np.array([_part_bits(f"sendWhichQueue:{t}") for t in prep.topics], np.uint64)
    worst_key = np.uint64(derive_key(seed, producer, "whichItemWorst"))
    n_b = len(plan.brokers)
    nb = plan.nb_max

    sends = (prep.s_seq, prep.s_born, t_dense, prep.s_kind, prep.s_topic.astype(np.int64), prep.s_ohash)
    thr = (threads.astype(np.int64), th_list, th_off, th_order, th_off[:n_t].copy())
    fa = (plan.retry_codes, plan.lat_max, plan.nad)
    routes = (plan.v_start, plan.v_nq, plan.v_qb, plan.v_qq, plan.v_wqn)
    keys = (key_z2, idx_base, topic_bits)
    ft = (
        np.zeros(n_b, np.bool_),
        np.zeros(n_b, np.int64),
        np.zeros(n_b, np.int64),
        np.zeros(n_b, np.bool_),
        np.zeros((nb, n_b), np.int64),
        np.zeros(nb, np.int64),
        np.array([0, 32, 24], np.int64),
        plan.b_hash,
        np.zeros((nb, n_b), np.int64),
        np.zeros(nb, np.int64),
        np.zeros(n_b, np.int64),
        np.zeros(n_b, np.int64),
    )
    worst = (
        np.zeros(n_t, np.bool_),
        np.zeros(n_t, np.int64),
        np.zeros(1, np.int64),
        worst_key,
        np.zeros(n_b, np.int64),
    )
    cap_i = len(prep.topics) * plan.v_start.size + 4
    max_q = plan.v_qb.shape[1]
    inst_rows = (
        np.zeros((cap_i, max_q), np.int64),
        np.zeros((cap_i, max_q), np.int64),
        np.zeros(cap_i, np.int64),
        np.zeros(cap_i, np.int64),
    )
    cache = (np.full(len(prep.topics), -1, np.int64), np.zeros(len(prep.topics), np.int64))
    ix = (
        np.zeros((cap_i, n_t), np.bool_),
        np.zeros((cap_i, n_t), np.int64),
        np.zeros((cap_i, n_t), np.int64),
        np.zeros((cap_i, n_t), np.uint64),
    )
    fl = tuple(np.zeros(n_s, np.bool_ if k == 11 else np.int64) for k in range(15))
    res = (
        np.zeros(n_s, np.int8),
        np.zeros(n_s, np.int8),
        np.zeros(n_s, np.int64),
        np.zeros(n_s, np.int64),
        np.full(n_s, -1, np.int64),
        np.full(n_s, -1, np.int64),
        np.zeros(n_s, np.int64),
        np.zeros(n_s, np.bool_),
        np.zeros(n_s, np.int64),
    )
    cap_a = n_s + n_s // 4 + 16
    att = tuple(np.zeros(cap_a, np.int64) for _ in range(9))
    n_async = int(np.count_nonzero(prep.s_kind == K_ORDERED_ASYNC))
    heap = np.zeros((2 * n_t + n_async + 2, 4), np.int64)
    st = np.zeros(5, np.int64)
    while True:
        status = _loop(
            st,
            heap,
            sends,
            thr,
            plan.cfg,
            fa,
            routes,
            keys,
            plan.model,
            ft,
            worst,
            inst_rows + cache,
            ix,
            fl,
            res,
            att,
        )
        if status == 0:
            break
        if status == 1:
            att = _grown(att, 2 * att[0].shape[0])
        else:
            n = 2 * inst_rows[0].shape[0]
            inst_rows, ix = _grown(inst_rows, n), _grown(ix, n)
    n_a = int(st[3])
    a_send, a_att, a_start, a_lat, a_b, a_q, a_label, a_code, a_iso, att_off = _sorted_attempts(
        att, n_a, n_s, plan.label_keys
    )
    r_status, r_err, r_aux, r_cost, r_broker, r_qid, r_end, r_exh, r_nsent = res
    return KernelOut(
        a_send,
        a_att,
        a_start,
        a_lat,
        a_b,
        a_q,
        a_label,
        a_code,
        a_iso,
        att_off,
        r_status,
        r_err,
        r_aux,
        r_cost,
        r_broker,
        r_qid,
        fl[5],
        r_end,
        r_exh,
        r_nsent,
    )


def _table(schema: pa.Schema, n: int, columns: dict[str, pa.Array | pa.ChunkedArray]) -> pa.Table:
    """A table of ``schema``; a column the simulation does not fill is all nulls, as in the reference."""
    return pa.Table.from_arrays([columns.get(f.name, pa.nulls(n, f.type)) for f in schema], schema=schema)


def _take_str(names: list[str], idx: np.ndarray) -> pa.Array:
    """``names[idx]`` as a string array, null where ``idx < 0``."""
    return pc.take(pa.array(names, pa.string()), pa.array(idx, pa.int64(), mask=idx < 0))


def simulate_producer(messages: pa.Table, sc: Scenario) -> ref.SimOutput:
    """The fast path of :func:`rocketsim.simulate.simulate_producer` (check :func:`supports` first)."""
    prep = prepare(messages, sc)
    if prep.s_seq.size == 0:  # every message rejected before sending: nothing for the kernel to run
        return ref.simulate_producer(messages, sc, fast=False)
    plan = plan_for(sc)
    ko = run_prepared(prep, sc)
    brokers = list(plan.brokers)
    producer = prep.producer
    n_a = ko.a_send.size
    attempts = _table(
        ref.ATTEMPTS_SCHEMA,
        n_a,
        {
            "producer": pa.array(np.full(n_a, producer, np.int32)),
            "seq": pa.array(prep.s_seq[ko.a_send]),
            "attempt": pa.array(ko.a_attempt),
            "start_ts_ms": pa.array(ko.a_start),
            "latency_ms": pa.array(ko.a_latency),
            "broker": _take_str(brokers, ko.a_broker),
            "queue_id": pa.array(ko.a_qid),
            "outcome": _take_str(plan.labels, ko.a_label),
            "response_code": pa.array(
                ko.a_code, mask=np.asarray(plan.label_keys)[ko.a_label] >> 32 != bm.BROKER_ERROR
            ),
            "fault_isolated_until_ms": pa.array(ko.a_iso, mask=ko.a_iso == _NO_ISO),
            "wire_bytes": pa.array(prep.s_wire[ko.a_send].astype(np.int32)),
        },
    )

    # ---- error texts, built by the reference's own helpers (one per distinct text)
    texts: list[str] = []
    text_id: dict[object, int] = {}
    s_text = np.full(prep.s_seq.size, -1, np.int64)
    for s in np.flatnonzero(ko.err != E_NONE).tolist():
        e = int(ko.err[s])
        topic = prep.topics[int(prep.s_topic[s])]
        if e == E_SEND_FAILED:
            sent = [brokers[b] for b in ko.a_broker[ko.att_off[s] : ko.att_off[s + 1]].tolist()]
            times = int(ko.aux[s])
            total = 1 if prep.s_kind[s] == K_ONEWAY else int(plan.cfg[3])
            key: object = (e, times, int(ko.cost[s]), topic, tuple(sent), total)
        elif e in (E_NO_ROUTE, E_NO_ROUTE_SELECT):
            key = (e, topic, int(prep.s_mode[s]))
        elif e in (E_REMOTING, E_ORDERED_OTHER):
            key = (e, int(ko.aux[s]), int(ko.broker[s]), int(ko.cost[s]))
        else:
            key = (e, int(ko.aux[s]))
        k = text_id.get(key)
        if k is None:
            k = text_id[key] = len(texts)
            texts.append(_error_text(key, brokers, sc.producers.version))
        s_text[s] = k

    # ---- results, per row
    rows = prep.send_of_row
    sent_ok = rows >= 0
    srow = np.where(sent_ok, rows, 0)
    status_names = list(_STATUS_NAMES) + [ref.REJECTED]
    status = np.where(sent_ok, ko.status[srow], len(_STATUS_NAMES))
    n = rows.size
    err_idx = np.where(sent_ok, s_text[srow], -1)
    reject_rows = np.flatnonzero(prep.rejected)
    for r in reject_rows.tolist():
        err_idx[r] = len(texts)
        texts.append(prep.reject_text[r])
    # a batch's attempts are counted (and its brokers listed) on its first member only, as the reference
    lead = sent_ok & (prep.s_row[srow] == np.arange(n))
    counts = np.where(lead, ko.n_sent[srow], 0)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    value_pos = np.repeat(ko.att_off[srow] - offsets[:-1], counts) + np.arange(offsets[-1])
    brokers_sent = pa.ListArray.from_arrays(
        pa.array(offsets.astype(np.int32)), _take_str(brokers, ko.a_broker[value_pos])
    )
    begin = np.where(sent_ok, ko.begin[srow], prep.born)
    end = np.where(sent_ok, ko.end[srow], prep.born)
    broker = np.where(sent_ok, ko.broker[srow], -1)
    qid = np.where(sent_ok, ko.qid[srow], -1)
    m = prep.messages
    results = _table(
        ref.RESULTS_SCHEMA,
        n,
        {
            "producer": pa.array(np.full(n, producer, np.int32)),
            "seq": m.column("seq"),
            "uniq_msg_id": m.column("uniq_msg_id"),
            "send_mode": m.column("send_mode"),
            "status": _take_str(status_names, status),
            "error": _take_str(texts, err_idx),
            "attempts": pa.array(counts.astype(np.int32)),
            "brokers_sent": brokers_sent,
            "broker": _take_str(brokers, broker),
            "queue_id": pa.array(qid.astype(np.int32), mask=qid < 0),
            "born_ts_ms": m.column("born_ts_ms"),
            "send_ts_ms": pa.array(begin),
            "end_ts_ms": pa.array(end),
            "queue_wait_ms": pa.array(begin - prep.born),
            "latency_ms": pa.array(end - begin),
            "wire_bytes": pa.array(prep.row_wire.astype(np.int32)),
            "compressed": pa.array(prep.compressed),
            "sys_flag": pa.array(prep.sys_flag.astype(np.int32)),
            "retry_budget_exhausted": pa.array(np.where(sent_ok, ko.exhausted[srow], False)),
        },
    )
    return ref.SimOutput(attempts, results)


def _error_text(key: tuple, brokers: list[str], version: object) -> str:
    """The reference's error text of one failure kind (see the ``E_*`` codes)."""
    e = key[0]
    if e == E_SEND_FAILED:
        _, times, cost, topic, sent, total = key
        listed: list[str | None] = list(sent) + [None] * (total - len(sent))
        err: BaseException = _send_failed(times, cost, topic, listed, None, version)  # type: ignore[arg-type]
    elif e == E_BROKER:
        err = MQBrokerError(key[1], "")
    elif e == E_CALL_TIMEOUT:
        err = RemotingTooMuchRequestError("sendDefaultImpl call timeout")
    elif e == E_NO_ROUTE:
        err = _no_route(_MODES[key[2]], key[1], 0, version).error  # type: ignore[arg-type, assignment]
    elif e == E_NO_ROUTE_SELECT:
        err = no_route_select(key[1], version)  # type: ignore[arg-type]
    elif e == E_REMOTING:
        what = {
            bm.REMOTING_CONNECT: "connect",
            bm.REMOTING_TIMEOUT: "timeout",
            bm.REMOTING_SEND_REQUEST: "send_request",
        }[key[1]]
        err = _remoting_exception(what, brokers[key[2]], key[3])
    elif e == E_SLEEP_INTERRUPTED:
        err = SendInterruptedError("sleep interrupted")
    elif e == E_INTERRUPTED:
        err = SendInterruptedError("interrupted")
    elif key[1] == bm.CLIENT_ERROR:  # an ordered send's client error
        err = _broker_not_exist(brokers[key[2]], version)  # type: ignore[arg-type]
    else:  # an ordered send's interrupt
        err = SendInterruptedError("interrupted")
    return ref._error_text(err)
