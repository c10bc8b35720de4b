"""The fair host's books (:mod:`rocketsim.client.host_books`): the same answers as the plain sorted lists
and the scan over every piece they replace, whatever the order the times come in."""

from __future__ import annotations

import bisect

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketsim.client import host_books
from rocketsim.client.host_books import PieceLog, RunningPieces, SortedTimes

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
