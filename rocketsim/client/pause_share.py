"""How long a pause of the client's process lasts on a fair host whose other processes run on
(:meth:`rocketsim.client.host.FairShareHost.stop_client`): its collector threads each do their part of the
pause's CPU beside the other processes' pieces over its length, whose tens of milliseconds span many of
those pieces of microseconds. ``producers.heap_stops = "client_over"``: processor sharing with the others
counted as threads as they end and start (:func:`shared_over`); ``"client_left"``: the cores the others'
pieces leave at the speeds they were placed at, at least that fair share (:func:`shared_left`).
docs/validation.md, "The client's pauses under the backlog" and "Threads, not pieces, beside the client's
pauses". Before the engine's clock (``now``), whose ended pieces the host forgets, both take the host as it
is at the clock.
"""

from __future__ import annotations

import heapq

from rocketsim.client.host_books import PieceLog, RunningPieces


def shared_over(
    others: RunningPieces, processors: int, now: float, start: float, work_us: float, threads: int
) -> float:
    """When ``threads`` collector threads from ``start`` have each done ``work_us``, sharing the cores with
    the other processes' pieces (``others``) as they end and start: ``processors`` over the threads, at
    most a core each."""
    left = work_us
    t, count = start, others.covering(max(start, now))
    if now > start:
        speed = min(1.0, processors / (count + threads))
        if left <= speed * (now - start):
            return start + left / speed
        t, left = now, left - speed * (now - start)
    for edge, change in others.changes_after(t):
        speed = min(1.0, processors / (count + threads))
        if left <= speed * (edge - t):
            break
        left -= speed * (edge - t)
        t, count = edge, max(count + change, 0)
    return t + left / min(1.0, processors / (count + threads))


def shared_left(
    others: RunningPieces,
    pieces: PieceLog,
    processors: int,
    now: float,
    start: float,
    work_us: float,
    threads: int,
) -> float:
    """When ``threads`` collector threads from ``start`` have each done ``work_us``, taking the cores the
    other processes' pieces (``others``; their speeds in ``pieces``) leave at the speeds they were placed
    at, at least their fair share beside them counted as threads (:func:`shared_over`'s), at most a core
    each. A piece's speed was fixed when it was placed, by the threads running then (the client's among
    them, before it stopped): it does no more than that in the pause, and the cores the stopped client's
    threads had are the collector's, as CFS gives a runnable thread the time the others do not take."""
    lo = max(start, now)
    rate, rate_changes = pieces.others_rate(lo)
    count = others.covering(lo)
    changes = heapq.merge(
        ((t, 0, d) for t, d in others.changes_after(lo)), ((t, 1, d) for t, d in rate_changes)
    )
    t, left = start, work_us
    for edge, which, change in changes:
        speed = collector_speed(processors, threads, count, rate)
        if edge > t:
            if left <= speed * (edge - t):
                break
            left -= speed * (edge - t)
            t = edge
        if which == 0:
            count = max(count + int(change), 0)
        else:
            rate = max(rate + change, 0.0)
    return t + left / collector_speed(processors, threads, count, rate)


def collector_speed(processors: int, threads: int, others: int, others_rate: float) -> float:
    """A collector thread's speed beside ``others`` threads taking ``others_rate`` cores: the cores they
    leave shared by the ``threads``, at least the fair share, at most a core."""
    fair = processors / (others + threads)
    return min(1.0, max(fair, (processors - others_rate) / threads))
