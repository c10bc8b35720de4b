"""Async backpressure (5.x ``enableBackpressureForAsyncMode``): the two fair semaphores an async send takes
before it is queued, held until its callback, in simulated time.

More: docs/reference/modules.md, rocketsim/client/backpressure.py.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from rocketsim.client.send import RemotingTooMuchRequestError
from rocketsim.client.versions import (
    BACK_PRESSURE_MIN_SEND_NUM,
    BACK_PRESSURE_MIN_SEND_SIZE,
    AsyncBackpressure,
)

# Mirrored by engine/compiled.py (``Permits`` and the ``permit_*`` functions: the same semaphores over
# arrays); both take the permit counts from :func:`permits` and the texts from here.

__all__ = [
    "NUM_TIMEOUT",
    "SIZE_TIMEOUT",
    "TIMEOUT_TEXTS",
    "Backpressure",
    "FairSemaphore",
    "PermitGate",
    "permits",
]

NUM_TIMEOUT = "send message tryAcquire semaphoreAsyncNum timeout"
SIZE_TIMEOUT = "send message tryAcquire semaphoreAsyncSize timeout"
TIMEOUT_TEXTS = (NUM_TIMEOUT, SIZE_TIMEOUT)  # by the semaphore a send waited for: 0 the count, 1 the bytes


def permits(settings: AsyncBackpressure) -> tuple[int, int]:
    """The two semaphores' permits (``DefaultMQProducerImpl`` 5.x: ``Math.max`` with the floors): (count,
    bytes)."""
    return (
        max(settings.back_pressure_for_async_send_num, BACK_PRESSURE_MIN_SEND_NUM),
        max(settings.back_pressure_for_async_send_size, BACK_PRESSURE_MIN_SEND_SIZE),
    )


@dataclass
class FairSemaphore:
    """``new Semaphore(permits, true)``: ``try_acquire`` takes ``n`` permits now if none waits before it
    and they are free, else queues the caller until ``release`` grants them or its deadline passes."""

    available: int
    waiting: deque[tuple[int, int, int]] = field(default_factory=deque)  # (key, n, deadline) FIFO

    def try_acquire(self, key: int, n: int, now: int, deadline: int) -> bool | None:
        """True: taken now; False: refused now (no time left to wait); None: queued (see ``release``)."""
        if not self.waiting and self.available >= n:
            self.available -= n
            return True
        if deadline <= now:
            return False
        self.waiting.append((key, n, deadline))
        return None

    def release(self, n: int, now: int) -> list[int]:
        """Give ``n`` permits back at ``now``: the keys of the waiters now granted, in their order."""
        self.available += n
        granted: list[int] = []
        while self.waiting:
            key, need, deadline = self.waiting[0]
            if deadline <= now:  # timed out (its expiry comes at that ms): no longer waiting
                self.waiting.popleft()
                continue
            if need > self.available:
                break
            self.waiting.popleft()
            self.available -= need
            granted.append(key)
        return granted

    def expire(self, key: int) -> bool:
        """The deadline of ``key`` passed: True if it was still waiting (it is refused)."""
        for k, item in enumerate(self.waiting):
            if item[0] == key:
                del self.waiting[k]
                return True
        return False


class Backpressure:
    """The producer's two semaphores and what each send holds of them (keyed by the send's index)."""

    def __init__(self, settings: AsyncBackpressure) -> None:
        num, size = permits(settings)
        self.num = FairSemaphore(num)
        self.size = FairSemaphore(size)
        self.held: dict[int, tuple[bool, int]] = {}  # send -> (holds a num permit, size permits held)

    def acquire_num(self, key: int, now: int, deadline: int) -> bool | None:
        got = self.num.try_acquire(key, 1, now, deadline)
        if got:
            self.held[key] = (True, 0)
        return got

    def acquire_size(self, key: int, n: int, now: int, deadline: int) -> bool | None:
        got = self.size.try_acquire(key, n, now, deadline)
        if got:
            self.held[key] = (True, n)
        return got

    def granted_num(self, key: int) -> None:
        self.held[key] = (True, 0)

    def granted_size(self, key: int, n: int) -> None:
        self.held[key] = (True, n)

    def release(self, key: int, now: int) -> tuple[list[int], list[int]]:
        """``semaphoreProcessor``: give back what ``key`` holds; the waiters granted (size, num), in order."""
        has_num, size = self.held.pop(key, (False, 0))
        size_granted = self.size.release(size, now) if size else []
        num_granted = self.num.release(1, now) if has_num else []
        return size_granted, num_granted


class PermitGate:
    """What a send engine asks of the backpressure: an async send's permits at its EXECUTE step, in two
    stages (the count, then the body's bytes), each waited for until ``beginStartTime + timeout``; the sends
    waiting (opaque payloads the engine resumes) and the ones a release grants."""

    def __init__(self, backpressure: Backpressure, timeout_ms: int) -> None:
        self.bp = backpressure
        self.timeout_ms = timeout_ms
        self._begin: dict[int, int] = {}  # send -> beginStartTime
        self._stage: dict[int, int] = {}  # send -> 0: wants a count permit, 1: its bytes, 2: holds both
        self._parked: dict[int, tuple] = {}  # send -> (send, payload) while it waits
        self._expired: set[int] = set()

    def begin(self, s: Any, now: int) -> None:
        """``send(msg, callback)`` is called at ``now`` (its ``beginStartTime``)."""
        self._begin[s.index] = now
        self._stage[s.index] = 0

    def deadline(self, s: Any) -> int:
        return self._begin[s.index] + self.timeout_ms

    def acquire(self, s: Any, payload: object, now: int) -> bool | RemotingTooMuchRequestError | None:
        """True: both permits held; an error: refused (``onException``); None: waiting (parked)."""
        key, deadline = s.index, self.deadline(s)
        stage = self._stage[key]
        if key in self._expired:
            self._expired.discard(key)
            return RemotingTooMuchRequestError(TIMEOUT_TEXTS[stage])
        if stage == 2:  # granted both while it waited
            return True
        if stage == 0:
            got = self.bp.acquire_num(key, now, deadline)
            if got is None:
                self._parked[key] = (s, payload)
                return None
            if not got:
                return RemotingTooMuchRequestError(NUM_TIMEOUT)
            stage = self._stage[key] = 1
        got = self.bp.acquire_size(key, s.body, now, deadline)
        if got is None:
            self._parked[key] = (s, payload)
            return None
        if not got:
            return RemotingTooMuchRequestError(SIZE_TIMEOUT)
        self._stage[key] = 2
        return True

    def waiting(self, s: Any, expired: bool) -> bool:
        """A wait of ``s`` ended (its deadline, or a permit granted): whether the engine resumes it
        (a deadline that came after its grant is nothing). At its deadline a send still waiting is refused,
        also when a release at that ms passed over it (``FairSemaphore.release``)."""
        key = s.index
        if not expired:
            return True
        if key not in self._parked:
            return False
        semaphore = self.bp.num if self._stage[key] == 0 else self.bp.size
        semaphore.expire(key)
        del self._parked[key]
        self._expired.add(key)
        return True

    def release(self, key: int, now: int) -> list[tuple]:
        """Send ``key`` ended at ``now``: its permits back; the waiters granted ((send, payload) each)."""
        self._begin.pop(key, None)
        self._stage.pop(key, None)
        size_granted, num_granted = self.bp.release(key, now)
        out = []
        for k in size_granted:
            self.bp.granted_size(k, self._parked[k][0].body)
            self._stage[k] = 2
            out.append(self._parked.pop(k))
        for k in num_granted:
            self.bp.granted_num(k)
            self._stage[k] = 1
            out.append(self._parked.pop(k))
        return out
