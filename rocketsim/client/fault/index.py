"""Random sources and ``ThreadLocalIndex``: an injected :class:`IntSource` (``nextInt()`` /
``nextInt(bound)``), a replay source fed with recorded draws (the seeded one for simulation is
:class:`rocketsim.rng.SplitMixIntSource`), and :class:`ThreadLocalIndex` per line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from rocketsim.client.versions import IndexWrap, RemotingLine, remoting_line
from rocketsim.errors import ConfigError, RocketSimError
from rocketsim.javaint import INT_MAX, POSITIVE_MASK, int32, java_abs

EventHook = Callable[[list], None] | None
ThreadKey = int | str  # a thread as ThreadLocalIndex keys it: a sender's number, a client thread's name


# ---- 2. random sources --------------------------------------------------------------------------


class IntSource(Protocol):
    """What ``ThreadLocalIndex`` draws from ``java.util.Random``."""

    def next_int(self) -> int:
        """``nextInt()``: any Java int."""
        ...

    def next_int_bound(self, bound: int) -> int:
        """``nextInt(bound)``: ``0 <= v < bound``."""
        ...


class ReplayExhaustedError(RocketSimError):
    """A replay source was asked for more draws than were recorded, or for another kind of draw."""


NEXT_INT = "nextInt()"
NEXT_INT_MAX = f"nextInt({INT_MAX})"


class ReplayIntSource:
    """Feeds recorded draws back in order: ``[(call, value)]``, call ``"nextInt()"`` or ``"nextInt(N)"``."""

    def __init__(self, draws: list[tuple[str, int]], name: str = "") -> None:
        self._draws = list(draws)
        self._pos = 0
        self.name = name

    @property
    def remaining(self) -> int:
        return len(self._draws) - self._pos

    def _take(self, call: str) -> int:
        if self._pos >= len(self._draws):
            raise ReplayExhaustedError(f"{self.name}: no recorded draw left for {call}")
        recorded_call, value = self._draws[self._pos]
        if recorded_call != call:
            raise ReplayExhaustedError(f"{self.name}: draw {self._pos} was {recorded_call}, asked for {call}")
        self._pos += 1
        return value

    def next_int(self) -> int:
        return self._take(NEXT_INT)

    def next_int_bound(self, bound: int) -> int:
        return self._take(f"nextInt({bound})")


# ---- 3. ThreadLocalIndex ------------------------------------------------------------------------


class ThreadLocalIndex:
    """``ThreadLocalIndex``: a per-thread counter with a random start.

    4.3-4.7 (``getAndIncrement``): ``Math.abs(index + 1)``, a negative value stored as 0 (wraps to 0);
    4.8.0 drops that guard, so past ``Integer.MAX_VALUE`` it returns MIN_VALUE, MAX_VALUE, ... (the line's
    ``index_wrap``).
    4.9: the start is ``Math.abs(nextInt())`` and is stored before the first increment; ``incrementAndGet``
    returns ``Math.abs(++i & 0x7FFFFFFF)``. 5.x: the start is ``nextInt()`` (may be negative), returns
    ``++i & 0x7FFFFFFF``, and ``reset()`` stores ``Math.abs(nextInt(Integer.MAX_VALUE))``. ``++i`` wraps as a
    Java int. Upstream shares one ``Random`` between threads; here ``source_for(thread)`` gives the source
    of a thread, so a simulation can key draws by thread (replay passes one source for all).
    """

    def __init__(
        self,
        line: RemotingLine | str,
        source_for: Callable[[ThreadKey], IntSource],
        name: str = "",
        on_event: EventHook = None,
    ) -> None:
        self.line = remoting_line(line)
        self.name = name
        self.on_event = on_event
        self._source_for = source_for
        self._sources: dict[ThreadKey, IntSource] = {}
        self._values: dict[ThreadKey, int] = {}

    @classmethod
    def shared(
        cls, line: RemotingLine | str, source: IntSource, name: str = "", on_event: EventHook = None
    ) -> ThreadLocalIndex:
        """One source for every thread, as upstream's single ``Random``."""
        return cls(line, lambda _thread: source, name, on_event)

    def _source(self, thread: ThreadKey) -> IntSource:
        src = self._sources.get(thread)
        if src is None:
            src = self._sources[thread] = self._source_for(thread)
        return src

    def value(self, thread: ThreadKey = 0) -> int | None:
        """The stored value (None before the first use), for inspection."""
        return self._values.get(thread)

    def preset(self, thread: ThreadKey, value: int) -> None:
        """Store ``value`` for ``thread`` as if drawn (a recorded run that seeded a thread's index)."""
        self._values[thread] = value

    def _emit(self, event: list) -> None:
        if self.on_event is not None:
            self.on_event(event)

    def increment_and_get(self, thread: ThreadKey = 0) -> int:
        wrap = self.line.index_wrap
        index = self._values.get(thread)
        if index is None:
            drawn = self._source(thread).next_int()
            self._emit(["rand", self.name, NEXT_INT, drawn])
            if self.line.index_start_signed:
                index = drawn
            else:
                index = java_abs(drawn)
                if wrap == IndexWrap.ABS_GUARDED and index < 0:
                    index = 0
                self._values[thread] = index
                self._emit(["set", self.name, index])
        if wrap == IndexWrap.MASK:
            index = int32(index + 1)
            result = index & POSITIVE_MASK  # Math.abs of a masked value changes nothing
        else:  # 4.3-4.8: Math.abs(index + 1), 4.8.0 without the guard (MIN_VALUE stays negative)
            index = java_abs(int32(index + 1))
            if wrap == IndexWrap.ABS_GUARDED and index < 0:
                index = 0
            result = index
        self._values[thread] = index
        self._emit(["inc", self.name, result])
        return result

    def reset(self, thread: ThreadKey = 0) -> None:
        """5.x ``reset()``: a random new position (``resetIndex`` on every retry with fault tolerance on)."""
        if not self.line.resets_index_on_retry:
            raise ConfigError(f"ThreadLocalIndex.reset exists only in the 5.x lines, not in {self.line.name}")
        drawn = self._source(thread).next_int_bound(INT_MAX)
        self._emit(["rand", self.name, NEXT_INT_MAX, drawn])
        index = java_abs(drawn)
        self._values[thread] = index
        self._emit(["set", self.name, index])
