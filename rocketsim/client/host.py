"""The client host's processors: where the client's own CPU work runs (``producers.send_cpu_us``, on the
thread that sends), and, on a shared host (``producers.shared_host``), the co-located brokers' reads and
appends too.

A host of ``processors`` cores runs each piece of CPU work, from when it is ready, at the earliest time a
core has room for it (no preemption: the pieces are microseconds). Work is placed when it is decided,
which is not always in time order (a broker decides an append when the request arrives, for when a send
thread gets to it), so a core keeps its busy intervals and later work may take a gap before earlier
placed work. A producer's threads together thus do at most ``processors`` sends' work at once: its maximum
rate is ``processors / send_cpu_us`` whatever its threads, and past it its queues grow (the async sender
executor's 50,000, the sender threads' backlog). :class:`FairShareHost` shares the cores between the
threads instead (``producers.host_scheduler = "fair"``). Times are microseconds from the scenario's
start (floats: the work need not be whole microseconds).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Protocol

from rocketsim.client.host_books import BusyIntervals, PieceLog, RunningPieces
from rocketsim.client.pause_share import shared_left, shared_over
from rocketsim.client.stall_lengths import EXPONENTIAL, unit_lengths
from rocketsim.client.wakeups import WakeupLeg, wakeup_leg
from rocketsim.rng import derive_key, uniform
from rocketsim.scenario import Scenario


class Host(Protocol):
    """Where CPU work of a host runs: :class:`HostCores` (first come, first served) or
    :class:`FairShareHost` (``producers.host_scheduler``). ``free_us``: when each thread its callers share
    (one of the process, not of a producer: the application's dispatcher) is free."""

    free_us: dict[Hashable, float]

    def run(self, ready_us: float, work_us: float, thread: Hashable = None) -> float: ...

    def place(self, ready_us: float, work_us: float, thread: Hashable = None) -> tuple[float, float]: ...

    def span(self, ready_us: float, work_us: float, thread: Hashable = None) -> tuple[float, float]: ...

    def stop_all(self, at_us: float, length_us: float) -> float: ...

    def stop_client(self, at_us: float, work_us: float, threads: int) -> tuple[float, float]: ...

    def advance(self, now_us: float) -> None: ...


SUBMITTER = "submitter"  # the process's thread that calls send (Host.free_us, a FairShareHost's thread)
LOGGER = "logger"  # the client logger's one thread (ClientLogger's AsyncAppender dispatcher), Host.free_us
G1_CONCURRENT = "g1 concurrent"  # the client JVM's G1 marking threads, (G1_CONCURRENT, i): client.heap


def run_in_turn(host: Host, thread: Hashable, at_us: float, us: float) -> float:
    """``us`` of CPU on the process's shared ``thread`` (``Host.free_us``) from ``at_us`` or when its last
    piece ended, whichever is later: when it ends (kept as the thread's)."""
    done = host.free_us[thread] = host.run(max(at_us, host.free_us.get(thread, 0.0)), us, thread)
    return done


def is_client_thread(thread: Hashable) -> bool:
    """Whether ``thread`` is one of the client process's: a producer's (the callers name them ``(producer,
    ...)``), the process's one :data:`SUBMITTER` (the application's thread that calls send, a thread of
    the client's JVM: a collection's pause stops it too), its one :data:`LOGGER` or its G1 marking threads
    (``(G1_CONCURRENT, i)``); the brokers' are ``None``, ``("writer", i)``, ``("reput", i)``."""
    if thread in (SUBMITTER, LOGGER):
        return True
    if not (isinstance(thread, tuple) and thread):
        return False
    return isinstance(thread[0], int) or thread[0] == G1_CONCURRENT


class HostCores:
    """The cores of one host and the intervals each is busy."""

    def __init__(self, processors: int) -> None:
        if processors < 1:
            raise ValueError(f"a host needs at least one processor, got {processors}")
        self.processors = processors
        self.free_us: dict[Hashable, float] = {}  # the process's shared threads (Host.free_us)
        self._starts: list[list[float]] = [[] for _ in range(processors)]  # per core, sorted
        self._ends: list[list[float]] = [[] for _ in range(processors)]

    def run(self, ready_us: float, work_us: float, thread: Hashable = None) -> float:
        """Place ``work_us`` of CPU ready at ``ready_us`` on the core with room for it the earliest (ties:
        the lowest core), whichever ``thread`` it is of; when it ends."""
        return self.place(ready_us, work_us, thread)[1]

    def place(self, ready_us: float, work_us: float, thread: Hashable = None) -> tuple[float, float]:
        """:meth:`run`'s work's start and end."""
        if work_us <= 0:
            return ready_us, ready_us
        at, c, i = self._earliest(ready_us, work_us)
        self._place(c, i, at, at + work_us)
        return at, at + work_us

    def span(self, ready_us: float, work_us: float, thread: Hashable = None) -> tuple[float, float]:
        """Where :meth:`place` would put the work now (nothing placed): the earliest room on a core."""
        at = self._earliest(ready_us, work_us)[0]
        return at, at + work_us

    def stop_all(self, at_us: float, length_us: float) -> float:
        """Every core does something else for ``length_us`` from its first room at or after ``at_us`` (a
        stop-the-world pause, a stall of the host); when the first of them starts."""
        return min(self.run(at_us, length_us) for _ in range(self.processors)) - length_us

    def stop_client(self, at_us: float, work_us: float, threads: int) -> tuple[float, float]:
        """Refused: first come, first served places work on cores, not threads, so it cannot stop one
        process's threads and run the others' (the scenario's check refuses ``heap_stops = "client"``)."""
        raise ValueError('stopping the client\'s threads alone needs producers.host_scheduler = "fair"')

    def advance(self, now_us: float) -> None:
        """Nothing is ready before ``now_us`` any more: forget the intervals that ended by then."""
        for c in range(self.processors):
            k = bisect.bisect_right(self._ends[c], now_us)
            if k:
                del self._starts[c][:k], self._ends[c][:k]

    def _earliest(self, ready: float, work: float) -> tuple[float, int, int]:
        """The earliest start >= ``ready`` a core has room for ``work`` at (ties: the lowest core), the
        core, and the index its interval goes at there."""
        best, best_at, best_i = -1, 0.0, 0
        for c in range(self.processors):
            at, i = self._room(c, ready, work)
            if best < 0 or at < best_at:
                best, best_at, best_i = c, at, i
        return best_at, best, best_i

    def _room(self, c: int, ready: float, work: float) -> tuple[float, int]:
        """The earliest start >= ``ready`` where core ``c`` is free for ``work``, and the index its
        interval goes at."""
        starts, ends = self._starts[c], self._ends[c]
        i = bisect.bisect_right(ends, ready)
        at = ready
        while i < len(starts) and starts[i] < at + work:
            at = max(at, ends[i])
            i += 1
        return at, i

    def _place(self, c: int, i: int, start: float, end: float) -> None:
        starts, ends = self._starts[c], self._ends[c]
        if i > 0 and ends[i - 1] == start:  # back to back: one interval
            if i < len(starts) and starts[i] == end:
                ends[i - 1] = ends[i]
                del starts[i], ends[i]
            else:
                ends[i - 1] = end
        elif i < len(starts) and starts[i] == end:
            starts[i] = start
        else:
            starts.insert(i, start)
            ends.insert(i, end)


class FairShareHost:
    """``producers.host_scheduler = "fair"``: the host's cores shared as Linux's CFS shares them, evenly
    between the threads that want them, not first come, first served.

    Each piece of work runs from when it is ready (its thread is free: the callers keep each thread's
    pieces one after another, the client's executor threads, a connection's I/O thread, the commit-log
    writer) at a speed fixed when it starts: ``processors`` cores shared by the pieces running then, at
    most one core each (a piece's own thread's other pieces, when the caller names it, are not beside
    it). So a process whose work runs on one thread (the broker's appends, one at a time under
    ``putMessageLock``) has one share of the host, however much work waits for it, while a client with a
    backlog keeps all its executor threads running. A piece booked ahead (the broker decides an
    append when the request arrives, for when the writer is free) sees the host as it runs now as well,
    since what will run beside it is not decided yet. A stop of the host (:meth:`stop_all`: a collection's
    pause, a stall) holds every piece over it; a stop of the client's process (:meth:`stop_client`: a
    collection's pause run by its collector threads) holds its threads' pieces only. A piece placed before
    a stop over its time (booked ahead) has had its end returned: the stop holds it all the same, its
    remaining work running on the cores after the stop (:meth:`_hold`). A piece is not slowed
    by work placed after it starts (the pieces are microseconds). ``client_stops``: whether the client can
    stop alone (``producers.heap_stops`` not "host"): only then are the other processes' pieces kept apart,
    work every piece would pay for nothing otherwise. ``conserving`` (``host_scheduler =
    "fair_conserving"``): a piece's fair share is its least, and it takes the room the cores have beyond
    it (:class:`CapacityLedger`), so no core idles while a piece runs slower than one (the speed fixed at
    its start leaves cores idle once the pieces beside it end: docs/validation.md, "A work-conserving
    fair host"). ``pause_over`` (``heap_stops = "client_over"``): a client stop's collector threads share
    the cores with the others' pieces as they end and start over its length; ``pause_left`` (``heap_stops
    = "client_left"``): they take the cores the others' pieces leave at the speeds those were placed at, at
    least their fair share (:mod:`rocketsim.client.pause_share`).
    ``count_threads`` (``host_counts = "threads"``): the rest of a piece a stop held runs on its thread, so
    where it overlaps its thread's later pieces the thread counts once (:meth:`_hold`)."""

    def __init__(
        self,
        processors: int,
        client_stops: bool = False,
        conserving: bool = False,
        pause_over: bool = False,
        count_threads: bool = False,
        pause_left: bool = False,
    ) -> None:
        if processors < 1:
            raise ValueError(f"a host needs at least one processor, got {processors}")
        if conserving and client_stops:
            raise ValueError("a work-conserving fair host does not stop the client alone (client_stops)")
        if (pause_over or pause_left) and not client_stops:
            raise ValueError("a pause shared with the others over its length needs client_stops")
        self.processors = processors
        self.client_stops = client_stops
        self.pause_over = pause_over
        self.pause_left = pause_left
        self.count_threads = count_threads
        self.ledger = CapacityLedger(processors) if conserving else None
        self.free_us: dict[Hashable, float] = {}  # the process's shared threads (Host.free_us)
        self._now = 0.0
        self._running = RunningPieces()  # the pieces' starts and ends, each sorted
        self._threads: dict[Hashable, tuple[list[float], list[float]]] = {}  # the same per named thread
        self._stop_starts: list[float] = []  # the host's stops, one after another
        self._stop_ends: list[float] = []
        self._others_running = RunningPieces()  # the pieces of threads not the client's
        self._client_stops: tuple[list[float], list[float]] = ([], [])  # the client's stops (starts, ends)
        self._host_stops = (self._stop_starts, self._stop_ends)
        self._last_end = 0.0  # the latest end advance forgot
        self._pieces = PieceLog()  # the pieces placed, for the stops placed after them (_hold)
        self._pieces_kept = PIECES_KEPT  # advance forgets the ended pieces once there are more than this
        self._resumes: dict[Hashable, float] = {}  # when a named thread's rests a stop held end (_hold)

    def run(self, ready_us: float, work_us: float, thread: Hashable = None) -> float:
        """Run ``work_us`` of ``thread``'s CPU (None: a thread of its own) ready at ``ready_us``; when it
        ends."""
        return self.place(ready_us, work_us, thread)[1]

    def place(self, ready_us: float, work_us: float, thread: Hashable = None) -> tuple[float, float]:
        """:meth:`run`'s work's start and end."""
        if work_us <= 0:
            return ready_us, ready_us
        client, stops, own, start, beside = self._ready(ready_us, thread, keep=True)
        if self.ledger is not None:
            share = min(1.0, self.processors / (beside + 1))
            end = self.ledger.take(start, work_us, share, self._idle_before(start), self._host_stops)
        else:
            end = _fair_end(start, work_us, beside, self.processors, stops)
        self._book(start, end, own, client)
        taken = work_us if self.ledger is None else self.ledger.taken
        ran = end - start - _held(stops, start, end)
        self._pieces.append(start, end, min(1.0, taken / ran) if ran > 0 else 1.0, client, thread)
        return start, end

    def span(self, ready_us: float, work_us: float, thread: Hashable = None) -> tuple[float, float]:
        """Where :meth:`place` would put the work now (nothing placed): its start, and its end at the fair
        share it would run at (a work-conserving host's ledger ends it no later)."""
        if work_us <= 0:
            return ready_us, ready_us
        _, stops, _, start, beside = self._ready(ready_us, thread, keep=False)
        return start, _fair_end(start, work_us, beside, self.processors, stops)

    def _ready(
        self, ready_us: float, thread: Hashable, keep: bool
    ) -> tuple[bool, list[tuple[list[float], list[float]]], tuple[list[float], list[float]], float, int]:
        """A piece of ``thread`` ready at ``ready_us``, as :meth:`place` and :meth:`span` see it: whether
        its thread is the client's, the stops that hold it, its thread's pieces (``keep``: the thread's
        books made if new, as :meth:`place` books the piece in them; else left unmade, :meth:`span`
        placing nothing), its start and the threads beside it (:meth:`_start`)."""
        client = is_client_thread(thread)
        stops = self._stops_of(client)
        own: tuple[list[float], list[float]] = ([], [])
        if thread is not None:
            own = self._threads.setdefault(thread, own) if keep else self._threads.get(thread, own)
        start, beside = self._start(ready_us, own, client, stops)
        return client, stops, own, start, beside

    def _start(
        self,
        ready_us: float,
        own: tuple[list[float], list[float]],
        client: bool,
        stops: list[tuple[list[float], list[float]]],
    ) -> tuple[float, int]:
        """A piece ready at ``ready_us`` on the thread whose pieces are ``own``: its start (after the stops
        that hold it) and the threads beside it."""
        start = ready_us
        for stop in stops:
            start = _after(*stop, start)
        # while the client is stopped its threads wait: beside a piece of another process run the others'
        # (the thread's own pieces count once where they overlap, as _book counts them)
        counted = self._running
        if not client and _covering(*self._client_stops, start):
            counted = self._others_running
        beside = max(
            counted.covering(start) - min(1, _covering(*own, start)),
            counted.covering(self._now) - min(1, _covering(*own, self._now)),
        )
        return start, beside

    def _stops_of(self, client: bool) -> list[tuple[list[float], list[float]]]:
        """The stops that hold a piece of a client's thread (``client``) or of another process's."""
        return [(self._stop_starts, self._stop_ends)] + ([self._client_stops] if client else [])

    def _book(self, start: float, end: float, own: tuple[list[float], list[float]], client: bool) -> None:
        """Count a piece running over [start, end) on its thread ``own`` beside the later ones: one thread
        runs one piece at a time, so where the thread's pieces placed before already run (a Netty thread's
        piece placed in a gap before its next one, and longer on the host than the gap) it is not one more
        thread beside the others."""
        books = [self._running]
        if not client and self.client_stops:
            books.append(self._others_running)
        for lo, hi in _uncovered(*own, start, end):
            for running in books:
                running.add(lo, hi)
        bisect.insort(own[0], start)
        bisect.insort(own[1], end)

    def _hold(self, stop_start: float, stop_end: float, client_only: bool) -> None:
        """A stop of the host (of the client's threads only: ``client_only``) placed over [stop_start,
        stop_end) holds the pieces placed before it that run over it, as it holds those placed after: the
        work each would have done in it runs after the stop, at the piece's speed (the fair share it had;
        on a work-conserving host, the room the cores have, at least that), on the cores beside the later
        pieces. (The piece's end was returned when it was placed: its rest runs after the stop as a piece of
        its own, counted beside the others and beside its thread's later pieces; a thread's rests, one
        after another. With ``count_threads`` a named thread's rest is booked as its thread's, so beside its
        thread's later pieces it is the same runnable thread, not one more.)"""
        held = []
        for p_start, p_end, rate, client, thread in self._pieces.over(stop_start, stop_end):
            over = min(p_end, stop_end) - max(p_start, stop_start)
            if over > 0 and (client or not client_only):
                held.append((max(p_end, stop_end), over * rate, rate, client, thread))
        for ready, work, rate, client, thread in sorted(held, key=lambda h: h[0]):
            stops = self._stops_of(client)
            start = ready if thread is None else max(ready, self._resumes.get(thread, ready))
            for stop in stops:
                start = _after(*stop, start)
            if self.ledger is not None:
                end = self.ledger.take(start, work, rate, 0.0, self._host_stops, pays_debt=False)
            else:
                end = start + work / rate
                for stop in stops:
                    end = _over(*stop, start, end)
            self._book(start, end, self._own_rest(thread), client)
            self._pieces.append(start, end, rate, client, thread)
            if thread is not None:
                self._resumes[thread] = max(end, self._resumes.get(thread, end))

    def _own_rest(self, thread: Hashable) -> tuple[list[float], list[float]]:
        """The pieces a held rest of ``thread`` is booked with: its thread's (``count_threads``), or none."""
        if self.count_threads and thread is not None:
            return self._threads.setdefault(thread, ([], []))
        return [], []

    def stop_all(self, at_us: float, length_us: float) -> float:
        """Every thread of the host stops for ``length_us`` from ``at_us`` (after the stops before it);
        when it starts."""
        start = max(at_us, self._stop_ends[-1]) if self._stop_ends else at_us
        self._stop_starts.append(start)
        self._stop_ends.append(start + length_us)
        self._hold(start, start + length_us, client_only=False)
        return start

    def stop_client(self, at_us: float, work_us: float, threads: int) -> tuple[float, float]:
        """The client process stops from ``at_us`` (after its stops before it) while ``threads`` collector
        threads each do ``work_us`` beside the other processes' running threads (the client's wait); its
        start and end. The other processes' threads go on, sharing the cores with the collector's."""
        if not self.client_stops:
            raise ValueError("stop_client on a host made without client_stops (its other pieces not kept)")
        starts, ends = self._client_stops
        start = _after(self._stop_starts, self._stop_ends, max(at_us, ends[-1]) if ends else at_us)
        if self.pause_left:
            others, pieces, now = self._others_running, self._pieces, self._now
            end = shared_left(others, pieces, self.processors, now, start, work_us, threads)
        elif self.pause_over:
            end = shared_over(self._others_running, self.processors, self._now, start, work_us, threads)
        else:
            beside = max(self._others_running.covering(start), self._others_running.covering(self._now))
            end = start + work_us * max(1.0, (beside + threads) / self.processors)
        end = _over(self._stop_starts, self._stop_ends, start, end)
        for running in self._running, self._others_running:
            for _ in range(threads):  # the collector's threads: beside the others' pieces
                running.add(start, end)
        starts.append(start)
        ends.append(end)
        self._hold(start, end, client_only=True)
        return start, end

    def advance(self, now_us: float) -> None:
        """Nothing is ready before ``now_us`` any more: forget the pieces and stops that ended by then (as
        many of the earliest starts as ends: they are all at or before ``now_us``)."""
        self._now = max(self._now, now_us)
        if self.ledger is not None:
            self.ledger.advance(now_us)
        last = self._running.forget(now_us)
        if last is not None:
            self._last_end = max(self._last_end, last)
        self._others_running.forget(now_us)
        for starts, ends in (*self._threads.values(), self._host_stops, self._client_stops):
            k = bisect.bisect_right(ends, now_us)
            if k:
                del starts[:k], ends[:k]
        if len(self._pieces) > self._pieces_kept:
            self._pieces.forget_ended(self._now)
            self._pieces_kept = max(PIECES_KEPT, 2 * len(self._pieces))

    def _idle_before(self, at: float) -> float:
        """How long no piece has run just before ``at`` (0: one runs at ``at``), up to the end of the
        engine's current step (past it the host looks idle because nothing is placed there yet), the
        host's stops left out (stopped, its cores did not idle: they forgive no debt)."""
        if self._running.covering(at):
            return 0.0
        latest = self._running.last_end_by(at)
        last = max(self._last_end, latest if latest is not None else 0.0)
        until = min(at, self._now + ENGINE_STEP_US)
        return max(0.0, until - last - _held([self._host_stops], last, until))


class CapacityLedger:
    """The cores' capacity a time slot (``SLOT_US``) and what the placed pieces take of it: a fluid ledger
    that later pieces fill, for a work-conserving fair host (``producers.host_scheduler =
    "fair_conserving"``).

    Exact processor sharing gives each of the ``n`` runnable pieces ``min(1, processors / n)`` of a core
    and changes every piece's speed when one starts or ends; the engine places pieces as it decides them
    (mostly in the order of their ready times, some booked ahead) and their ends are returned, so a piece
    placed later cannot slow one placed before. Each piece thus takes, slot by slot, the room the pieces
    placed before it leave, up to a core (it speeds up when they end: no core idles while it waits), and
    at least its fair share (``share``, from the pieces running beside it when it starts, as processor
    sharing would give it). What that share takes beyond the room is capacity the cores did not have: a
    debt of the host, paid by the next piece placed before its own work (as the pieces it was taken from
    would have run longer); the host's idle time forgives it (``processors`` core-us a us). So the cores
    deliver what they have over a busy stretch. A stop of the host (``stops``: starts, ends) has no room:
    a piece over it is held, and a slot it cuts has the room of its part outside it."""

    def __init__(self, processors: int) -> None:
        self.processors = processors
        self.debt = 0.0  # core-us delivered beyond the cores' capacity, not yet paid back
        self.taken = 0.0  # what the last piece placed took (its work and the debt it paid)
        self._first = 0  # the slot self._used[0] is
        self._used: list[float] = []  # core-us of each slot from self._first the pieces placed take

    def take(
        self,
        start: float,
        work: float,
        share: float,
        idle_us: float,
        stops: tuple[list[float], list[float]],
        pays_debt: bool = True,
    ) -> float:
        """Place ``work`` core-us from ``start`` at at least ``share`` of a core, after the debt (less the
        ``idle_us`` the host was idle before ``start``; not with ``pays_debt`` False: the rest of a piece
        a stop held, which adds to it); when it ends."""
        left = work
        if pays_debt:
            left += max(0.0, self.debt - self.processors * idle_us)
            self.debt = 0.0
        self.taken = left  # the work the piece does on the cores, its part of the debt with it
        cap, t = self.processors * SLOT_US, start
        while True:
            t = _after(*stops, t)
            slot = int(t // SLOT_US)
            k = self._slot(slot)
            span = (slot + 1) * SLOT_US - t
            i = bisect.bisect_right(stops[0], t)
            if i < len(stops[0]) and stops[0][i] < t + span:
                span = stops[0][i] - t  # up to the stop that begins in this slot
            free = SLOT_US - _held([stops], slot * SLOT_US, (slot + 1) * SLOT_US)  # the slot's unstopped part
            room = max(0.0, cap * free / SLOT_US - self._used[k]) * span / free if free > 0 else 0.0
            rate = max(share * span, min(span, room))
            part = min(1.0, left / rate)
            self.debt += max(0.0, rate - room) * part
            self._used[k] += rate * part
            left -= rate * part
            if left <= 0.0 or part < 1.0:
                return t + span * part
            t += span

    def advance(self, now_us: float) -> None:
        """Nothing is ready before ``now_us``: forget the slots before it."""
        k = int(now_us // SLOT_US) - self._first
        if k > 0:
            del self._used[:k]
            self._first += k

    def _slot(self, slot: int) -> int:
        """``slot``'s index in the ledger (made if new)."""
        k = slot - self._first
        if k < 0:  # before what advance kept (not expected: nothing is ready then)
            self._used[:0] = [0.0] * -k
            self._first, k = slot, 0
        if k >= len(self._used):
            self._used.extend([0.0] * (k + 1 - len(self._used)))
        return k


SLOT_US = 1.0  # the capacity ledger's slot (the pieces are microseconds)
PIECES_KEPT = 4096  # FairShareHost keeps this many placed pieces' records before it forgets the ended
ENGINE_STEP_US = 1000.0  # the engine's clock: what is ready within its current ms is placed in that step


def _fair_end(
    start: float, work: float, beside: int, processors: int, stops: list[tuple[list[float], list[float]]]
) -> float:
    """The end of ``work`` from ``start`` at its fair share beside ``beside`` threads, held by ``stops``."""
    end = start + work * max(1.0, (beside + 1) / processors)
    for stop in stops:
        end = _over(*stop, start, end)
    return end


def _after(stop_starts: list[float], stop_ends: list[float], at: float) -> float:
    """``at``, or the end of the stop it falls in (``stop_starts``, ``stop_ends``: one after another)."""
    i = bisect.bisect_right(stop_starts, at) - 1
    return max(at, stop_ends[i]) if i >= 0 else at


def _over(stop_starts: list[float], stop_ends: list[float], start: float, end: float) -> float:
    """The end of the work from ``start`` to ``end``, held by every stop that begins before it ends."""
    i = bisect.bisect_right(stop_starts, start)
    while i < len(stop_starts) and stop_starts[i] < end:
        end += stop_ends[i] - stop_starts[i]
        i += 1
    return end


def _held(stops: list[tuple[list[float], list[float]]], start: float, end: float) -> float:
    """How long ``stops`` hold the span [start, end)."""
    total = 0.0
    for stop_starts, stop_ends in stops:
        i = max(0, bisect.bisect_right(stop_ends, start))
        while i < len(stop_starts) and stop_starts[i] < end:
            total += max(0.0, min(end, stop_ends[i]) - max(start, stop_starts[i]))
            i += 1
    return total


def _uncovered(starts: list[float], ends: list[float], lo: float, hi: float) -> list[tuple[float, float]]:
    """The parts of [lo, hi) that none of the intervals [start, end) (``starts``, ``ends`` each sorted)
    holds."""
    i, j = bisect.bisect_right(starts, lo), bisect.bisect_right(ends, lo)
    depth = i - j  # _covering(starts, ends, lo)
    if (i == len(starts) or starts[i] >= hi) and (j == len(ends) or ends[j] >= hi):
        return [(lo, hi)] if depth == 0 and hi > lo else []  # nothing starts or ends inside: the loop's
    parts, t = [], lo
    while t < hi:
        next_start = starts[i] if i < len(starts) else math.inf
        next_end = ends[j] if j < len(ends) else math.inf
        edge = min(next_start, next_end, hi)
        if depth == 0 and edge > t:
            parts.append((t, edge))
        if edge >= hi:
            break
        if next_start <= next_end:
            depth, i = depth + 1, i + 1
        else:
            depth, j = depth - 1, j + 1
        t = edge
    return parts


def _covering(starts: list[float], ends: list[float], at: float) -> int:
    """How many of the intervals [start, end) (``starts`` and ``ends`` each sorted) hold ``at``."""
    return bisect.bisect_right(starts, at) - bisect.bisect_right(ends, at)


def shared_host(sc: Scenario) -> Host:
    """The host of ``sc``'s producers and the brokers on it (``producers.shared_host``), its cores shared
    as ``producers.host_scheduler`` says."""
    p = sc.producers
    if p.host_scheduler == "fifo":
        return HostCores(p.processors)
    conserving = p.host_scheduler == "fair_conserving"
    client_stops = p.heap_stops != "host"
    over, left = p.heap_stops == "client_over", p.heap_stops == "client_left"
    return FairShareHost(
        p.processors,
        client_stops=client_stops,
        conserving=conserving,
        pause_over=over,
        count_threads=p.host_counts == "threads",
        pause_left=left,
    )


@dataclass(frozen=True)
class HostStalls:
    """``producers.host_stall_every`` and ``host_stall_ms``: after one send in ``every`` (on average; which
    ones is drawn from the seed and the send) the host stalls: every core does something else for a
    time of mean ``mean_us``, exponential or of a gamma ``shape`` (a JVM's collection, the scheduler's
    other threads; :mod:`rocketsim.client.stall_lengths`). Stalls tied
    to the work, not the clock: the more a host does, the more it stalls, so its latency grows with its load
    as a queue of variable service does (Pollaczek-Khinchine), fitted to a run's latency at rising rates
    (:mod:`rocketsim.calibration.stalls`)."""

    every: float
    mean_us: float
    key: int
    shape: float = EXPONENTIAL  # the lengths' gamma shape (``host_stall_shape``; 1: exponential)

    def after_send(self, cores: Host, seq: int, at_us: float) -> None:
        """Send ``seq``'s work ended at ``at_us``: the stall after it, if it has one."""
        k = derive_key(self.key, seq)
        if uniform(k, 0) * self.every < 1.0:
            cores.stop_all(at_us, self.mean_us * float(unit_lengths(uniform(k, 1), self.shape)))


def host_stalls(sc: Scenario, producer: int) -> HostStalls | None:
    """The stalls after ``producer``'s sends in ``sc`` (None: ``producers.host_stall_every`` is 0)."""
    p = sc.producers
    if p.host_stall_every <= 0 or p.host_stall_ms <= 0:
        return None
    key = derive_key(sc.seed, producer, "hostStall")
    return HostStalls(p.host_stall_every, p.host_stall_ms * 1000.0, key, p.host_stall_shape)


@dataclass
class HostOthers:
    """``producers.host_other_cpu_us`` on ``host_other_threads``: the shared host's threads the model has
    not otherwise, a host-wide load beside both processes' threads (measured per thread,
    tests/data/realbroker-reruns/threads: the driver's C1 and C2 compiler threads, its G1 threads running
    beside the others, its and the broker's other threads). Their CPU follows the sends (a compiler
    compiles the code the sends run, a collector's concurrent threads follow what they allocate), so each
    send's runs after its client work on one of the threads in turn, one piece after another; on a fair
    host each thread with work is one more beside every other piece, neither process's (a collection that
    stops the client does not stop them; a stop of the host does)."""

    us: float
    threads: int

    def after_send(self, cores: Host, seq: int, at_us: float) -> None:
        """Send ``seq``'s client work ended at ``at_us``: its share of the other threads' CPU."""
        run_in_turn(cores, (OTHER_THREAD, seq % self.threads), at_us, self.us)


OTHER_THREAD = "other"  # HostOthers' threads: (OTHER_THREAD, i), in Host.free_us


def host_others(sc: Scenario) -> HostOthers | None:
    """The other threads' load of ``sc``'s shared host (None: ``producers.host_other_cpu_us`` is 0)."""
    p = sc.producers
    return HostOthers(p.host_other_cpu_us, p.host_other_threads) if p.host_other_cpu_us > 0 else None


GAPS_TRIED = 8  # ClientThreads._on: the gaps between a thread's pieces tried before its last piece's end


@dataclass
class ClientThreads:
    """A send's client CPU on the threads that run it (``producers.netty_write_cpu_share``,
    ``netty_read_cpu_share``, ``callback_cpu_share``, ``submit_cpu_share``; the rest of ``send_cpu_us`` on
    its async sender executor thread, or a SYNC send's caller, which also does the callback's part once the
    worker has woken it): the submit on the application's thread that calls send (one of the
    process: ``Host.free_us``), then the executor's part, then the request's encoding and write on the
    producer's Netty worker, then its flush on the selector (``NettyRemotingClient``: one
    ``NettyClientSelector_`` event loop, the channel's ``NettyClientWorkerThread_`` of
    ``clientWorkerThreads``), before it reaches the broker; the answer's read on the selector, then its
    decoding on the worker (``processResponseCommand``), then the callback on a callback executor thread
    (``executeInvokeCallback``: the public executor of ``clientCallbackExecutorThreads``). Each thread
    takes its pieces one after another on the host's cores (a fair host counts it while it has work); the
    total per send stays ``send_cpu_us``, unless the worker or the selector is a leg of a cost a wakeup and a
    cost a piece (``legs``, ``producers.netty_*_wakeup_us``: :mod:`rocketsim.client.wakeups`), which then
    costs those instead of its shares."""

    host: Host
    producer: int
    executor_us: float  # on the async sender executor's thread
    write_us: tuple[float, float]  # the request's way out: on the worker, then on the selector
    read_us: tuple[float, float]  # the answer's way in: on the selector, then on the worker
    callback_us: float
    busy: dict[str, BusyIntervals]  # "worker", "selector" -> the thread's pieces placed
    submit_us: float = 0.0  # on the application's thread that calls send
    # "worker", "selector" -> the thread as a leg of a cost a wakeup and a cost a piece, which replace its
    # pieces' constant costs (producers.netty_*_wakeup_us: rocketsim.client.wakeups)
    legs: dict[str, WakeupLeg] = field(default_factory=dict)

    def submit(self, due_us: float) -> float:
        """The send due at ``due_us`` handed to the executor by the application's thread: when."""
        if self.submit_us <= 0:
            return due_us
        return run_in_turn(self.host, SUBMITTER, due_us, self.submit_us)

    def write(self, ready_us: float) -> float:
        """The request ready at ``ready_us`` (its executor thread done): when it is on the wire."""
        worker, selector = self.write_us
        return self._on("selector", self._on("worker", ready_us, worker), selector)

    def read(self, ready_us: float) -> float:
        """The answer arrived at ``ready_us``: when its callback is handed to the callback executor (read
        on the selector, then decoded on the worker)."""
        selector, worker = self.read_us
        return self._on("worker", self._on("selector", ready_us, selector), worker)

    def callback(self, handed_us: float, thread_free_us: float, thread: Hashable) -> float:
        """The callback handed over at ``handed_us``: when it has ended on ``thread`` (free from
        ``thread_free_us``)."""
        return self.host.run(max(handed_us, thread_free_us), self.callback_us, (self.producer, thread))

    def advance(self, now_us: float) -> None:
        """Nothing is ready before ``now_us`` any more: forget the pieces that ended by then."""
        for busy in self.busy.values():
            busy.advance(now_us)

    def _on(self, name: str, ready_us: float, work_us: float) -> float:
        """``work_us`` ready at ``ready_us`` on the Netty thread ``name``, in the order the pieces are
        ready, not the order they are placed in (a request's flush is placed when its executor thread
        is done, for when the worker hands it over, and an answer read before it does not wait for it)."""
        if work_us <= 0:
            return ready_us
        leg, joins = self.legs.get(name), False
        if leg is not None:  # a cost a wakeup and a cost a piece instead of the share's
            ready_us, work_us, joins = leg.piece(ready_us)
            if work_us <= 0:
                return ready_us
        busy = self.busy.setdefault(name, BusyIntervals())
        thread = (self.producer, name)
        # the first gap the piece fits as long as it runs on the host (its fair share stretches it): one
        # thread runs one piece at a time, so a piece never reaches the thread's next one
        start, end = self.host.span(ready_us, work_us, thread)
        at = busy.room(ready_us, end - start)
        for _ in range(GAPS_TRIED):  # (none fits: the last one tried, over the next piece booked ahead)
            after = busy.reached(*self.host.span(at, work_us, thread))
            if after is None:
                break
            at = busy.room(after, work_us)
        start, end = self.host.place(at, work_us, thread)
        busy.add(start, end)
        if leg is not None:
            leg.placed(start, end, joins)
        return end


def client_threads(sc: Scenario, host: Host, producer: int) -> ClientThreads | None:
    """How ``producer``'s sends' client CPU is split over its threads (None: all on the executor's or the
    caller's; a oneway send's stays on its caller)."""
    p = sc.producers
    shares = (p.netty_write_cpu_share, p.netty_read_cpu_share, p.callback_cpu_share, p.submit_cpu_share)
    if p.send_cpu_us <= 0 or not any(shares):
        return None
    write, read, callback, submit = (p.send_cpu_us * share for share in shares)
    executor = p.send_cpu_us - write - read - callback - submit
    on_worker, on_selector = write * p.netty_write_worker_share, read * p.netty_read_selector_share
    return ClientThreads(
        host,
        producer,
        executor,
        (on_worker, write - on_worker),
        (on_selector, read - on_selector),
        callback,
        {},
        submit,
        {
            name: leg
            for name in ("worker", "selector")
            if (
                leg := wakeup_leg(
                    getattr(p, f"netty_{name}_wakeup_us"), getattr(p, f"netty_{name}_request_us")
                )
            )
        },
    )
