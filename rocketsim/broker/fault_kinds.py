"""The fault kinds of the broker model, one table: what each does to a connect, an answer, the route, the
5.x detector's probe and the closed-loop store.

The table is :data:`FAULT_KINDS` (a row per kind, :class:`FaultKind`: a column per thing it acts on, the
unnamed columns left as they are when the broker is well). What the values mean:

More: docs/reference/modules.md, rocketsim/broker/fault_kinds.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Down(IntEnum):
    """When the broker's process is dead during a window."""

    NEVER = 0
    WHOLE_WINDOW = 1
    PERIODIC = 2  # the first ``down_s`` of every ``period_s`` from the window's start


class Connect(IntEnum):
    """A connect while the process lives."""

    ACCEPTED = 0
    TIMES_OUT = 1  # nothing answers: it waits CONNECT_TIMEOUT_MILLIS -> RemotingConnectException


class Answer(IntEnum):
    """What the broker does with a request it accepted."""

    NORMAL = 0  # the latency model and the error mix decide
    NEVER = 1  # the request times out (the whole remaining timeout); nothing stored
    SLOWER = 2  # latency x ``factor``
    ERROR_BURST = 3  # with probability ``rate``, the window's ``error``
    PAUSED = 4  # taken only at the window's end (a stopped process), then answered as ever


class RouteDrop(IntEnum):
    """What the name server does with the broker (the route producers poll)."""

    UNTOUCHED = 0
    AT_ONCE = 1  # over each interval its process is dead (its channel closes), back when it restarts
    AFTER_HEARTBEAT_TIMEOUT = 2  # it stops registering: dropped 120 s after its last registration


class Probe(IntEnum):
    """The 5.x detector's probe (``getMaxOffset``, ``detectTimeout`` 200 ms) while the process lives."""

    ANSWERS = 0
    FAILS = 1


class Store(IntEnum):
    """What the closed-loop store (:mod:`rocketsim.broker.queue`) does."""

    NORMAL = 0
    STALLS = 1  # the append in the lock makes no progress for ``down_s`` every ``period_s``
    DEFERS = 2  # requests that arrive during the window reach the send queue at its end (in order)


class Effect(IntEnum):
    """What one attempt meets in a window: the step of the decision chain it takes
    (:func:`rocketsim.broker.latency.answer`)."""

    NONE = 0  # no window, or one that changes nothing of an attempt
    PROCESS_DOWN = 1  # connection refused, fast
    CONNECT_TIMES_OUT = 2
    NO_ANSWER = 3
    SLOWER = 4
    ERROR_BURST = 5
    PAUSED = 6  # held until the window ends


@dataclass(frozen=True)
class FaultKind:
    """One row of :data:`FAULT_KINDS`; the columns but ``down`` and ``route`` say what happens while the
    process lives (while it is dead: see the module docstring)."""

    down: Down = Down.NEVER
    connect: Connect = Connect.ACCEPTED
    answer: Answer = Answer.NORMAL
    route: RouteDrop = RouteDrop.UNTOUCHED
    probe: Probe = Probe.ANSWERS
    store: Store = Store.NORMAL

    def __post_init__(self) -> None:
        if self.route == RouteDrop.AT_ONCE and self.down == Down.NEVER:
            raise ValueError("a fault kind the name server drops at once needs a process that dies (down)")

    @property
    def effect(self) -> Effect:
        """What an attempt meets while the process lives."""
        if self.connect == Connect.TIMES_OUT:
            return Effect.CONNECT_TIMES_OUT
        return _EFFECT_OF_ANSWER[self.answer]

    @property
    def periodic(self) -> bool:
        """The kind reads ``period_s`` and ``down_s`` (a flapping process, a stalling store)."""
        return self.down == Down.PERIODIC or self.store == Store.STALLS

    @property
    def open_model_sees(self) -> bool:
        """Anything of it reaches the open model (else it needs a closed-loop store)."""
        return (
            self.down != Down.NEVER
            or self.effect != Effect.NONE
            or self.route != RouteDrop.UNTOUCHED
            or self.probe != Probe.ANSWERS
        )


_EFFECT_OF_ANSWER = {
    Answer.NORMAL: Effect.NONE,
    Answer.NEVER: Effect.NO_ANSWER,
    Answer.SLOWER: Effect.SLOWER,
    Answer.ERROR_BURST: Effect.ERROR_BURST,
    Answer.PAUSED: Effect.PAUSED,
}

# WARNING: the compiled engine reads this table through engine/plan's window columns (W_EFFECT,
# W_CYCLE, W_CYCLE_DOWN, W_PROBE: resolved per fault window, so a new row needs no new kernel code) and
# compiles process_down itself (engine/compiled.py: broker_process_down); engine/reference.py reads it through
# rocketsim.broker.latency. tests/test_fault_kinds.py runs both engines over every row.
# name -> row, in the order of the scenario's documentation
FAULT_KINDS: dict[str, FaultKind] = {
    "outage": FaultKind(down=Down.WHOLE_WINDOW, route=RouteDrop.AT_ONCE),
    "hang": FaultKind(answer=Answer.NEVER, route=RouteDrop.AFTER_HEARTBEAT_TIMEOUT, probe=Probe.FAILS),
    "slowdown": FaultKind(answer=Answer.SLOWER),
    "flapping": FaultKind(down=Down.PERIODIC, route=RouteDrop.AT_ONCE),
    "error_burst": FaultKind(answer=Answer.ERROR_BURST),
    "partition": FaultKind(connect=Connect.TIMES_OUT, probe=Probe.FAILS),
    "store_stall": FaultKind(store=Store.STALLS),
    "paused": FaultKind(
        answer=Answer.PAUSED, route=RouteDrop.AFTER_HEARTBEAT_TIMEOUT, probe=Probe.FAILS, store=Store.DEFERS
    ),
}


def down_cycle(down: Down, start_ms: int, end_ms: int, period_ms: int, down_ms: int) -> tuple[int, int]:
    """A window's ``down`` pattern as ``(cycle, dead)``: the process is dead for the first ``dead`` ms of
    every ``cycle`` ms from the window's start (the whole window: one cycle, all dead; never: none)."""
    if down == Down.WHOLE_WINDOW:
        return end_ms - start_ms, end_ms - start_ms
    if down == Down.PERIODIC:
        return period_ms, down_ms
    return 1, 0


def process_down(start_ms: int, cycle_ms: int, dead_ms: int, t_ms: int) -> bool:
    """Whether the broker's process is dead at ``t_ms`` inside a window from ``start_ms`` whose pattern is
    :func:`down_cycle`'s. The one definition: the decision chain, the probe and the route's intervals
    (:func:`down_intervals`) follow it; the compiled engine compiles this very function."""
    return (t_ms - start_ms) % cycle_ms < dead_ms


def down_intervals(
    start_ms: int, end_ms: int, cycle_ms: int, dead_ms: int, until_ms: int
) -> list[tuple[int, int]]:
    """The ``[from, to)`` intervals of a window in which :func:`process_down` holds, up to ``until_ms``."""
    if dead_ms <= 0:
        return []
    return [(t, min(t + dead_ms, end_ms)) for t in range(start_ms, min(end_ms, until_ms), cycle_ms)]
