"""The books a :class:`rocketsim.client.host.FairShareHost` keeps of the pieces it placed: which run at a
time (:class:`RunningPieces`, its sorted starts and ends in :class:`SortedTimes`) and each piece's span,
speed and thread for the stops placed after it (:class:`PieceLog`).

Both grow with the pieces booked ahead of the engine's clock (a thread's backlog: the client's Netty
worker, the host's other threads under an overload, hundreds of thousands of pieces), and the host asks
them for every piece it places, so each answer costs about the same whatever that backlog: a piece added
in the middle of a plain sorted list moves every later one (``bisect.insort``), and a scan of every piece
kept for each stop grows with them too. :class:`SortedTimes` is a sorted list in chunks, as
``sortedcontainers.SortedList`` is, written here rather than taken from it: that is not one of the
project's dependencies (a test tool's), and its positional index makes a rank several times a list's
``bisect`` where the host asks ~30 ranks a send, nearly all near the front (the engine's clock), which
the chunks' counts summed from the front answer in a few steps.
"""

from __future__ import annotations

import bisect
import heapq
from array import array
from collections.abc import Hashable, Iterator

import numpy as np

CHUNK = 512  # SortedTimes' chunk: split in two past twice this


class SortedTimes:
    """A sorted multiset of times: add one, how many are at or before a time (``bisect_right``'s rank),
    the latest at or before a time, forget the first ``k``; each in a few steps of a chunk's size."""

    def __init__(self) -> None:
        self._chunks: list[list[float]] = []  # sorted, one after another
        self._maxes: list[float] = []  # each chunk's last
        self._counts: list[int] = []  # each chunk's length
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def add(self, t: float) -> None:
        """Add ``t`` (after the equal ones)."""
        maxes = self._maxes
        self._len += 1
        if not maxes:
            self._chunks.append([t])
            maxes.append(t)
            self._counts.append(1)
            return
        i = bisect.bisect_right(maxes, t)
        if i == len(maxes):
            i -= 1
            self._chunks[i].append(t)
            maxes[i] = t
        else:
            bisect.insort(self._chunks[i], t)
        self._counts[i] += 1
        if self._counts[i] > 2 * CHUNK:
            chunk = self._chunks[i]
            self._chunks[i : i + 1] = [chunk[:CHUNK], chunk[CHUNK:]]
            maxes.insert(i, chunk[CHUNK - 1])
            self._counts[i : i + 1] = [CHUNK, len(chunk) - CHUNK]

    def rank(self, t: float) -> int:
        """How many are at or before ``t`` (a sorted list's ``bisect.bisect_right``)."""
        i = bisect.bisect_right(self._maxes, t)
        n = len(self._maxes)
        if i == n:
            return self._len
        within = bisect.bisect_right(self._chunks[i], t)
        if 2 * i <= n:  # the chunks before it counted from the front, or the ones from it from the back
            return sum(self._counts[:i]) + within
        return self._len - sum(self._counts[i:]) + within

    def last_by(self, t: float) -> float | None:
        """The latest at or before ``t`` (None: none is)."""
        i = bisect.bisect_right(self._maxes, t)
        if i < len(self._maxes):
            j = bisect.bisect_right(self._chunks[i], t)
            if j:
                return self._chunks[i][j - 1]
        return self._maxes[i - 1] if i else None

    def drop_first(self, k: int) -> float | None:
        """Forget the first ``k``; the last of them (None: ``k`` is 0)."""
        last = None
        chunks, counts = self._chunks, self._counts
        self._len -= k
        while k and counts[0] <= k:
            k -= counts[0]
            last = self._maxes[0]
            del chunks[0], self._maxes[0], counts[0]
        if k:
            last = chunks[0][k - 1]
            del chunks[0][:k]
            counts[0] -= k
        return last

    def __iter__(self):  # type: ignore[no-untyped-def]
        for chunk in self._chunks:
            yield from chunk

    def after(self, t: float) -> Iterator[float]:
        """The times after ``t``, in order."""
        i = bisect.bisect_right(self._maxes, t)
        if i < len(self._maxes):
            chunk = self._chunks[i]
            yield from chunk[bisect.bisect_right(chunk, t) :]
            for chunk in self._chunks[i + 1 :]:
                yield from chunk


class RunningPieces:
    """Pieces running over [start, end): how many run at a time; their starts and ends each sorted."""

    def __init__(self) -> None:
        self.starts = SortedTimes()
        self.ends = SortedTimes()

    def add(self, start: float, end: float) -> None:
        self.starts.add(start)
        self.ends.add(end)

    def covering(self, at: float) -> int:
        """How many hold ``at`` (started at or before it, ended after it)."""
        return self.starts.rank(at) - self.ends.rank(at)

    def changes_after(self, at: float) -> Iterator[tuple[float, int]]:
        """After ``at``, in time order, each start (+1) and end (-1): how :meth:`covering` changes."""
        starts = ((t, 1) for t in self.starts.after(at))
        ends = ((t, -1) for t in self.ends.after(at))
        return heapq.merge(starts, ends)

    def forget(self, now: float) -> float | None:
        """Forget those ended at or before ``now`` and as many of the earliest starts (all at or before
        it); the latest end forgotten (None: none was)."""
        k = self.ends.rank(now)
        if not k:
            return None
        self.starts.drop_first(k)
        return self.ends.drop_first(k)

    def last_end_by(self, at: float) -> float | None:
        """The latest end at or before ``at`` (None: none)."""
        return self.ends.last_by(at)


class PieceLog:
    """The pieces a host placed, in the order placed: each one's start, end, speed (core-us of work a us
    it runs, the stops it was placed after left out), whether a client's thread runs it, and its thread.
    Columns (``array``: numpy reads them in place), so a stop finds the pieces it holds in one pass of
    numpy's over them, not a Python loop over every piece kept."""

    def __init__(self) -> None:
        self._starts = array("d")
        self._ends = array("d")
        self._rates = array("d")
        self._client = bytearray()
        self._threads: list[Hashable] = []

    def __len__(self) -> int:
        return len(self._threads)

    def append(self, start: float, end: float, rate: float, client: bool, thread: Hashable) -> None:
        self._starts.append(start)
        self._ends.append(end)
        self._rates.append(rate)
        self._client.append(client)
        self._threads.append(thread)

    def over(self, lo: float, hi: float) -> list[tuple[float, float, float, bool, Hashable]]:
        """The pieces that may run over [lo, hi) (end after ``lo``, start before ``hi``), in the order
        placed: (start, end, rate, client, thread)."""
        if not self._threads:
            return []
        starts = np.frombuffer(self._starts, np.float64)
        ends = np.frombuffer(self._ends, np.float64)
        found = np.flatnonzero((ends > lo) & (starts < hi)).tolist()
        del starts, ends  # the arrays' buffers released: they grow again
        s, e, r, c, th = self._starts, self._ends, self._rates, self._client, self._threads
        return [(s[i], e[i], r[i], bool(c[i]), th[i]) for i in found]

    def others_rate(self, at: float) -> tuple[float, list[tuple[float, float]]]:
        """The speeds (cores) of the pieces not of a client's thread: their sum at ``at`` (started at or
        before it, ended after it) and, after it in time order, each change (+speed, -speed)."""
        if not self._threads:
            return 0.0, []
        starts = np.frombuffer(self._starts, np.float64)
        ends = np.frombuffer(self._ends, np.float64)
        rates = np.frombuffer(self._rates, np.float64)
        others = (ends > at) & (np.frombuffer(self._client, np.uint8) == 0)
        s, e, r = starts[others], ends[others], rates[others]
        del starts, ends, rates  # the arrays' buffers released: they grow again
        now = float(r[s <= at].sum())
        later = s > at
        times = np.concatenate([s[later], e])
        deltas = np.concatenate([r[later], -r])
        order = np.argsort(times, kind="stable")
        return now, list(zip(times[order].tolist(), deltas[order].tolist(), strict=True))

    def forget_ended(self, now: float) -> None:
        """Forget the pieces ended at or before ``now``."""
        keep = np.flatnonzero(np.frombuffer(self._ends, np.float64) > now)
        for name in ("_starts", "_ends", "_rates"):
            column = np.frombuffer(getattr(self, name), np.float64)[keep]
            setattr(self, name, array("d", column.tobytes()))
        self._client = bytearray(np.frombuffer(self._client, np.uint8)[keep].tobytes())
        self._threads = [self._threads[i] for i in keep.tolist()]


PASSED_KEPT = 16  # BusyIntervals: the piece lengths whose walks it remembers (the shortest kept)


class BusyIntervals:
    """When one thread is busy with the pieces it has been given (sorted intervals, apart).

    :meth:`room` walks the gaps from a ready time to the first one a piece fits; under a backlog they are
    many and small (a worker's pieces booked between its flushes placed ahead), and each piece walked them
    again: most of a ``--thread-split`` run's time. What a walk found stays true while pieces are only
    added (a gap only shrinks) and those ended before the clock forgotten: from its ready time up to its
    answer there is no start a piece of its length, or a longer one, fits. ``_passed`` keeps those
    stretches by length and a later walk jumps over them, so the answers are the plain walk's."""

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []
        self._passed: dict[float, tuple[float, float]] = {}  # a length -> [lo, hi): no start fits it

    def room(self, ready_us: float, work_us: float) -> float:
        """The earliest start >= ``ready_us`` with ``work_us`` free before the next piece (its length on
        the host may be longer: :meth:`reached` says whether it then reaches that piece): a flush placed
        ahead for when the worker hands it over does not hold an answer's read that fits before it. A
        start is ``ready_us`` or the end of a piece: the first of those with room."""
        at = self._past_passed(ready_us, work_us) if work_us > 0 else ready_us
        i = bisect.bisect_right(self.ends, at)
        while i < len(self.starts) and self.starts[i] < at + work_us:
            at = max(at, self.ends[i])
            i += 1
        if at > ready_us and work_us > 0:
            self._remember(work_us, ready_us, at)
        return at

    def reached(self, start_us: float, end_us: float) -> float | None:
        """The end of the thread's busy time that a piece over [start, end) would reach (None: it fits
        before the next one; ``start`` is free, as :meth:`room` finds it)."""
        i = bisect.bisect_right(self.ends, start_us)
        if i < len(self.starts) and self.starts[i] < end_us:
            return self.ends[i]
        return None

    def add(self, start_us: float, end_us: float) -> None:
        """A piece placed over [start, end): one interval with those it touches (a backlog is one)."""
        i = bisect.bisect_right(self.starts, start_us)
        if i > 0 and self.ends[i - 1] >= start_us:
            i -= 1
            start_us, end_us = self.starts[i], max(end_us, self.ends[i])
            del self.starts[i], self.ends[i]
        while i < len(self.starts) and self.starts[i] <= end_us:
            end_us = max(end_us, self.ends[i])
            del self.starts[i], self.ends[i]
        self.starts.insert(i, start_us)
        self.ends.insert(i, end_us)

    def advance(self, now_us: float) -> None:
        """Nothing is ready before ``now_us`` any more: forget the pieces that ended by then (the gaps they
        bound before it are no start for a later piece) and the stretches passed before it."""
        k = bisect.bisect_right(self.ends, now_us)
        if k:
            del self.starts[:k], self.ends[:k]
        self._passed = {w: span for w, span in self._passed.items() if span[1] > now_us}

    def _past_passed(self, at: float, work_us: float) -> float:
        """``at`` moved past the stretches walked before for a length at most ``work_us``: none of their
        starts fits a piece of it (every gap in them was shorter, and has only shrunk since), so the first
        start with room is at or after their end. (A stretch ends at a piece's end, or inside a piece it
        was merged into: a start the walk from ``at`` would reach, or pass.)"""
        moved = True
        while moved:
            moved = False
            for length, (lo, hi) in self._passed.items():
                if length <= work_us and lo <= at < hi:
                    at, moved = hi, True
        return at

    def _remember(self, work_us: float, lo: float, hi: float) -> None:
        """No start in [lo, hi) fits ``work_us``: kept with what was known of that length (one stretch
        where they overlap, else the later), the shortest lengths kept (they serve every longer one)."""
        old = self._passed.get(work_us)
        if old is not None and lo <= old[1] and hi >= old[0]:
            lo, hi = min(lo, old[0]), max(hi, old[1])
        elif old is not None and hi < old[1]:
            return
        self._passed[work_us] = (lo, hi)
        if len(self._passed) > PASSED_KEPT:
            del self._passed[max(self._passed)]
