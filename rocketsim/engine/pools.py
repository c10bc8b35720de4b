"""The client's thread pools and the application's sender threads of the readable engine
(:mod:`rocketsim.engine.reference`): which thread runs which send, and when it is free again.

Mirrored by :mod:`rocketsim.engine.compiled` (``ClientPools``, its sender-pool steps).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from rocketsim.client.send import Pool, ThreadKey

if TYPE_CHECKING:
    from rocketsim.engine.reference import Send


class ClientPool:
    """One of the client's thread pools (the async sender executor, the callback executor), handing out
    tasks as ``ThreadPoolExecutor`` does: a new worker per task up to the core size, then idle workers
    take tasks in the order they became idle. A task goes to the idle thread that became idle earliest
    (ties: the lowest number; at first threads 1..n in order), else waits (FIFO) for the first thread to
    become free; with every thread busy and ``capacity`` tasks waiting it is refused (the async sender
    executor's ``LinkedBlockingQueue(50000)``; 4.3.x runs its sends on the callback executor, unbounded).
    A send holds its thread from when it runs until it waits for a callback or ends: a 4.9 connect
    failure, thrown synchronously, keeps it busy. Approximation of the JVM's scheduling: with short tasks
    this is the round robin every recorded trace shows."""

    def __init__(self, names: list[ThreadKey], capacity: int | None = None) -> None:
        self.names = names
        self.capacity = capacity  # the queue's (LinkedBlockingQueue) bound; None: unbounded
        self.free_us = [0.0] * len(names)  # when each thread's CPU work (the client's send_cpu_us) ends
        self._idle = [(-1, j) for j in range(len(names))]  # a heap of (idle since, thread)
        self._waiting: deque[tuple[Send, Generator, Pool]] = deque()  # (send, its loop, its task)

    def full(self) -> bool:
        """No thread idle and the queue at its bound: ``execute`` throws RejectedExecutionException."""
        return not self._idle and self.capacity is not None and len(self._waiting) >= self.capacity

    def take(self, task: tuple[Send, Generator, Pool]) -> int | None:
        """The thread that runs ``task`` now, or None: it waits for one."""
        if self._idle:
            return heapq.heappop(self._idle)[1]
        self._waiting.append(task)
        return None

    def release(self, j: int, now: int) -> tuple[Send, Generator, Pool] | None:
        """Thread ``j`` is free at ``now``: the task that waited longest, which it runs now, or None."""
        if self._waiting:
            return self._waiting.popleft()
        heapq.heappush(self._idle, (now, j))
        return None


class SenderThreads(Protocol):
    """How the application's sender threads take the producer's sends (``producers.sender_model``).

    Upstream has no sender pool: ``DefaultMQProducer.send`` runs in the caller's thread (SYNC for the whole
    retry loop, ONEWAY until the request is written, ASYNC only to submit it), so which thread sends what
    is the application's choice; each thread has its own ``sendWhichQueue`` / ``whichItemWorst``
    (``ThreadLocalIndex``), so the choice changes the queues chosen.
    """

    def begin(self) -> None:
        """Push the first START event(s)."""

    def take(self, payload: object, now: int) -> Send:
        """At a START event: the send that starts now, with the thread that takes it."""
        ...

    def free(self, s: Send, at: int) -> None:
        """``s``'s thread is free again at ``at`` (its send ended, or it only submitted an async one)."""

    def taken(self, now: int) -> None:
        """After a START event was handled."""


class PartitionedSenders:
    """``sender_model = "partitioned"``: message ``seq`` goes to thread ``seq % threads`` (the workload's
    ``thread`` column); each thread takes its own sends in seq order, each at ``max(born, thread free)``.
    One slow send delays every send queued behind it on its thread, even while other threads are idle."""

    def __init__(self, sends: list[Send], push: Callable[[int, object], None]) -> None:
        self._push = push
        self._per_thread: dict[int, list[Send]] = {}
        for s in sends:  # already in seq order
            self._per_thread.setdefault(s.thread, []).append(s)
        self._cursor = dict.fromkeys(self._per_thread, 0)

    def _schedule(self, th: int, free_at: int) -> None:
        i = self._cursor[th]
        if i < len(self._per_thread[th]):
            self._push(max(self._per_thread[th][i].born_ms, free_at), th)

    def begin(self) -> None:
        for th in self._per_thread:
            self._schedule(th, 0)

    def take(self, payload: object, now: int) -> Send:
        th = payload  # type: ignore[assignment]
        s = self._per_thread[th][self._cursor[th]]  # type: ignore[index]
        self._cursor[th] += 1  # type: ignore[index]
        return s

    def free(self, s: Send, at: int) -> None:
        self._schedule(s.thread, at)

    def taken(self, now: int) -> None:
        pass


class PoolSenders:
    """``sender_model = "pool"`` (default): ``threads`` threads share one queue of sends, as an application
    feeding a ``ThreadPoolExecutor`` does (a new worker per task up to the core size, then idle workers
    take tasks FIFO): the next send (by born time, then seq) goes to the idle thread that became idle
    earliest (ties: the lowest id; a thread that never ran first), at ``max(born, now)``; with no thread
    idle it waits for the first to become free."""

    def __init__(self, sends: list[Send], threads: int, push: Callable[[int, object], None]) -> None:
        self._push = push
        self._order = sorted(sends, key=lambda s: (s.born_ms, s.seq))
        self._next = 0
        self._idle = [(-1, th) for th in range(threads)]  # (idle since, id), a heap
        self._pending = False  # a START for the next send is on the heap

    def _dispatch(self, now: int) -> None:
        if self._pending or self._next >= len(self._order) or not self._idle:
            return
        self._push(max(self._order[self._next].born_ms, now), None)
        self._pending = True

    def begin(self) -> None:
        self._dispatch(0)

    def take(self, payload: object, now: int) -> Send:
        self._pending = False
        _, th = heapq.heappop(self._idle)
        s = replace(self._order[self._next], thread=th)
        self._next += 1
        return s

    def free(self, s: Send, at: int) -> None:
        heapq.heappush(self._idle, (at, s.thread))
        self._dispatch(at)

    def taken(self, now: int) -> None:
        self._dispatch(now)
