"""The fair host's books (:mod:`rocketsim.client.host_books`): the same answers as the plain sorted lists,
the scan over every piece and the walk over every gap they replace, whatever the order the times come in."""

from __future__ import annotations

import bisect

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketsim.client import host_books
from rocketsim.client.host_books import BusyIntervals, PieceLog, RunningPieces, SortedTimes

TIMES = st.floats(0.0, 1e4, allow_nan=False).map(lambda t: round(t, 1))  # ties among them
OPS = st.lists(st.tuples(st.sampled_from(["add", "add", "add", "drop", "ask"]), TIMES), max_size=400)


@settings(max_examples=200, deadline=None)
@given(OPS, st.sampled_from([2, 3, 512]))
def test_sorted_times_answer_as_a_sorted_list(ops: list[tuple[str, float]], chunk: int) -> None:
    old, host_books.CHUNK = host_books.CHUNK, chunk  # small chunks: many splits and whole chunks dropped
    try:
        times, plain = SortedTimes(), []
        for op, t in ops:
            if op == "add":
                times.add(t)
                bisect.insort(plain, t)
            elif op == "drop":
                k = bisect.bisect_right(plain, t)
                assert times.drop_first(k) == (plain[k - 1] if k else None)
                del plain[:k]
            k = bisect.bisect_right(plain, t)
            assert times.rank(t) == k
            assert times.last_by(t) == (plain[k - 1] if k else None)
            assert len(times) == len(plain) and list(times) == plain
    finally:
        host_books.CHUNK = old


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(TIMES, st.floats(0.1, 50.0)), max_size=200), TIMES, TIMES)
def test_running_pieces_count_as_the_lists_did(
    spans: list[tuple[float, float]], at: float, now: float
) -> None:
    running, starts, ends = RunningPieces(), [], []
    for start, length in spans:
        running.add(start, start + length)
        bisect.insort(starts, start)
        bisect.insort(ends, start + length)
    assert running.covering(at) == bisect.bisect_right(starts, at) - bisect.bisect_right(ends, at)
    k = bisect.bisect_right(ends, now)
    assert running.forget(now) == (ends[k - 1] if k else None)
    del starts[:k], ends[:k]
    assert running.covering(at) == bisect.bisect_right(starts, at) - bisect.bisect_right(ends, at)


def test_a_piece_log_finds_the_pieces_over_a_span_in_the_order_placed_and_forgets_the_ended() -> None:
    log = PieceLog()
    placed = [(5.0, 9.0, 0.5, True, (0, "worker")), (0.0, 2.0, 1.0, False, None), (1.0, 6.0, 0.25, True, "x")]
    for piece in placed:
        log.append(*piece)
    assert log.over(2.0, 5.5) == [placed[0], placed[2]]  # the one ended at 2.0 does not run over it
    assert log.over(9.0, 10.0) == []
    log.forget_ended(2.0)
    assert len(log) == 2 and log.over(0.0, 10.0) == [placed[0], placed[2]]
    log.append(*placed[1])  # the columns grow again after numpy read them
    assert log.over(0.0, 10.0) == [placed[0], placed[2], placed[1]]


def plain_room(starts: list[float], ends: list[float], ready: float, work: float) -> float:
    """BusyIntervals.room as a walk over every gap from ``ready`` (its answers before it kept stretches)."""
    i, at = bisect.bisect_right(ends, ready), ready
    while i < len(starts) and starts[i] < at + work:
        at = max(at, ends[i])
        i += 1
    return at


LENGTHS = st.one_of(st.sampled_from([0.5, 1.0, 2.5, 7.0]), st.floats(0.0, 20.0).map(lambda w: round(w, 2)))
BUSY_OPS = st.lists(
    st.tuples(st.sampled_from(["place", "place", "place", "book", "advance"]), TIMES, LENGTHS, LENGTHS),
    max_size=300,
)


@settings(max_examples=300, deadline=None)
@given(BUSY_OPS, st.sampled_from([1, 2, 16]))
def test_busy_intervals_find_the_room_the_walk_over_every_gap_finds(
    ops: list[tuple[str, float, float, float]], kept: int
) -> None:
    """As ClientThreads._on uses it: a piece ready at or after the clock asks the room for one length,
    and is placed there for another (longer on the host, or shorter); pieces are booked ahead anywhere;
    the clock moves on. Every answer is the walk's over the intervals a plain list keeps."""
    old, host_books.PASSED_KEPT = host_books.PASSED_KEPT, kept  # few lengths kept: many forgotten
    try:
        busy, starts, ends, now = BusyIntervals(), [], [], 0.0
        for op, t, asked, placed in ops:
            ready = now + t / 100.0  # within ~100 of the clock: pieces close, gaps of every size
            if op == "advance":
                now = ready
                busy.advance(now)
                k = bisect.bisect_right(ends, now)
                del starts[:k], ends[:k]
                continue
            at = busy.room(ready, asked) if op == "place" else ready + asked
            assert at == plain_room(starts, ends, ready, asked) or op == "book"
            end = at + placed
            reach = bisect.bisect_right(ends, at)
            assert busy.reached(at, end) == (
                ends[reach] if reach < len(starts) and starts[reach] < end else None
            )
            busy.add(at, end)
            plain = PlainIntervals(starts, ends)
            plain.add(at, end)
            assert busy.starts == starts and busy.ends == ends
    finally:
        host_books.PASSED_KEPT = old


class PlainIntervals:
    """BusyIntervals.add on the plain lists (one interval with those a piece touches)."""

    def __init__(self, starts: list[float], ends: list[float]) -> None:
        self.starts, self.ends = starts, ends

    def add(self, start: float, end: float) -> None:
        lo = bisect.bisect_left(self.ends, start)  # the first interval ending at or after the start
        hi = bisect.bisect_right(self.starts, end)  # past the last starting at or before the end
        if lo < hi:
            start, end = min(start, self.starts[lo]), max(end, self.ends[hi - 1])
        self.starts[lo:hi], self.ends[lo:hi] = [start], [end]


def test_busy_intervals_jump_only_over_the_stretches_walked() -> None:
    """Two walks for one length, apart: the gap between them is not jumped (a piece fits there)."""
    busy = BusyIntervals()
    for start in (0.0, 2.0, 10.0, 12.0, 20.0):
        busy.add(start, start + 1.0)  # gaps of 1 and of 7
    assert busy.room(0.0, 1.5) == 3.0  # past [0, 1] and [2, 3]: no gap of 1.5 before 3
    busy.add(3.0, 3.2)  # placed there, shorter than asked
    assert busy.room(10.0, 1.5) == 13.0
    assert busy.room(3.2, 1.5) == 3.2  # between the two walks: the room after the piece placed at 3
    assert busy.room(0.5, 2.0) == 3.2  # a longer length jumps to 3, then walks past the piece placed there
    assert busy.room(0.5, 1.0) == 1.0  # a shorter one walks: it fits the gap of 1 the longer one passed
