"""Latency-fault tolerance and queue selection of the RocketMQ producer, for each client line.

A line is a row of :data:`rocketsim.client.versions.REMOTING_LINES` (``ClientVersion.line``), given by
itself or its name (``'R4.3'`` ... ``'R5.3.3'``); what differs between lines is asked of its named
columns (``line.uses_queue_filters``, ``line.isolation_only_extends``, ...), never of its name. Upstream
classes:
``MQFaultStrategy``, ``LatencyFaultToleranceImpl`` (+ ``FaultItem``),
``TopicPublishInfo.selectOneMessageQueue`` and ``ThreadLocalIndex``. Read top to bottom:

1. :data:`FAULT_UPDATES`: the ``updateFaultItem(broker, latency, isolation[, reachable])`` call each
   outcome makes, per line and per call site (``sendDefaultImpl``, ``sendMessageAsync``, its callback).
2. Random sources: an injected :class:`IntSource` (``nextInt()`` / ``nextInt(bound)``); a replay source fed
   with recorded draws; the seeded one for simulation is :class:`rocketsim.rng.SplitMixIntSource`.
3. :class:`ThreadLocalIndex` per line.
4. :class:`FaultArrays` (latencyMax / notAvailableDuration) and ``computeNotAvailableDuration``.
5. :class:`FaultTable`: the fault items in ``ConcurrentHashMap`` iteration order, update / isAvailable /
   isReachable / remove, ``pickOneAtLeast`` and the 5.x ``detectByOneRound``.
6. :class:`FaultStrategy`: ``selectOneMessageQueue`` and ``updateFaultItem`` per line, and the 5.x detector
   ticks driven by the simulated clock.

Java int arithmetic is :mod:`rocketsim.javaint`. Nothing reads the wall clock: every time is an argument
(simulated ms). ``on_event`` hooks, when set, report what happened in the conformance vectors' event
format (for tests and debugging only).
"""

# Mirrored by engine/compiled.py (select_queue, fault_table_update, pick_one_at_least, the kernel's
# fault-table arrays); tests/test_engines.py compares them. FAULT_UPDATES is data both engines read.

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

from rocketsim.client.outcomes import Catch
from rocketsim.client.route import QueueSlot, TopicPublishInfo
from rocketsim.client.versions import IndexWrap, RemotingLine, ScanBroker, remoting_line
from rocketsim.errors import ConfigError, RocketSimError
from rocketsim.javaint import INT_MAX, POSITIVE_MASK, chm_spread, int32, java_abs, java_rem, java_string_hash

EventHook = Callable[[list], None] | None
ThreadKey = int | str  # a thread as ThreadLocalIndex keys it: a sender's number, a client thread's name


# ---- 1. the updateFaultItem rule ------------------------------------------------------------------
# Mirrored by engine/compiled.py (through engine/plan.py's FaultRules arrays); tests/test_engines.py
# runs both engines over every cell, tests/test_fault.py checks each cell against upstream's source.


class Site(IntEnum):
    """Where the client calls ``updateFaultItem``."""

    # DefaultMQProducerImpl.sendDefaultImpl: after sendKernelImpl returned (any mode: the ASYNC dispatch
    # update is this very call), and in each catch clause (SYNC and ONEWAY; ASYNC's MQClientException
    # from sendKernelImpl, e.g. an unknown broker address)
    SEND_DEFAULT_IMPL = 0
    # MQClientAPIImpl.sendMessageAsync: catch (Exception ex) around invokeAsync (thrown synchronously)
    SEND_MESSAGE_ASYNC_CATCH = 1
    # the InvokeCallback of sendMessageAsync: a response processed (RESULT), processSendResponse threw
    # (BROKER), or no response (send failed, timeout, 5.x connect failure, interrupt, refused permit)
    ASYNC_CALLBACK = 2


class Reachable(IntEnum):
    """The ``reachable`` argument of an ``updateFaultItem`` call."""

    NO = 0
    YES = 1
    UNLESS_DETECTOR = 2  # 5.x RemotingException: ``reachable = !mqFaultStrategy.isStartDetectorEnable()``
    NO_ARGUMENT = 3  # 4.9: ``updateFaultItem(brokerName, currentLatency, isolation)`` has none

    def value_for(self, start_detector_enable: bool) -> bool:
        """The boolean passed (4.9 has no such argument: its table ignores the value)."""
        if self is Reachable.UNLESS_DETECTOR:
            return not start_detector_enable
        return self is not Reachable.NO


FaultUpdateRule = tuple[bool, Reachable]  # (isolation, reachable)

_SEND_DEFAULT_IMPL_4_9: dict[Catch, FaultUpdateRule] = {
    Catch.RESULT: (False, Reachable.NO_ARGUMENT),
    Catch.REMOTING: (True, Reachable.NO_ARGUMENT),
    Catch.CLIENT: (True, Reachable.NO_ARGUMENT),
    Catch.BROKER: (True, Reachable.NO_ARGUMENT),
    Catch.INTERRUPTED: (False, Reachable.NO_ARGUMENT),
}
_ASYNC_4_9: dict[Site, dict[Catch, FaultUpdateRule]] = {
    # 4.9 invokeAsync throws connect failures, refused permits and interrupts itself
    Site.SEND_MESSAGE_ASYNC_CATCH: {
        Catch.REMOTING: (True, Reachable.NO_ARGUMENT),
        Catch.CLIENT: (True, Reachable.NO_ARGUMENT),
        Catch.INTERRUPTED: (True, Reachable.NO_ARGUMENT),
    },
    Site.ASYNC_CALLBACK: {
        Catch.RESULT: (False, Reachable.NO_ARGUMENT),
        Catch.REMOTING: (True, Reachable.NO_ARGUMENT),
        Catch.BROKER: (True, Reachable.NO_ARGUMENT),
    },
}


def _copy(sites: dict[Site, dict[Catch, FaultUpdateRule]]) -> dict[Site, dict[Catch, FaultUpdateRule]]:
    return {site: dict(cells) for site, cells in sites.items()}


# a set of calls (a line's ``fault_updates``: clients.md A.3.6's CS-1 / CS-2, with the async call sites of
# the same tags) -> call site -> what the outcome is caught as -> (isolation, reachable). Only the cells
# the simulation can reach are here (a missing cell is a KeyError, not a silent default). Upstream, at the
# tags rocketmq-all-4.9.7 and rocketmq-all-4.9.8 (CS-1) and rocketmq-all-5.3.3 (CS-2):
# DefaultMQProducerImpl.sendDefaultImpl and MQClientAPIImpl.sendMessageAsync (quoted in tests/test_fault.py).
FAULT_UPDATES: dict[str, dict[Site, dict[Catch, FaultUpdateRule]]] = {
    "CS-1": {Site.SEND_DEFAULT_IMPL: dict(_SEND_DEFAULT_IMPL_4_9), **_copy(_ASYNC_4_9)},
    "CS-2": {
        Site.SEND_DEFAULT_IMPL: {
            Catch.RESULT: (False, Reachable.YES),
            Catch.REMOTING: (True, Reachable.UNLESS_DETECTOR),
            Catch.CLIENT: (False, Reachable.YES),
            Catch.BROKER: (True, Reachable.NO),
            Catch.INTERRUPTED: (False, Reachable.YES),
        },
        # 5.x invokeAsync completes the future exceptionally instead of throwing, but for a client error
        Site.SEND_MESSAGE_ASYNC_CATCH: {Catch.CLIENT: (True, Reachable.NO)},
        Site.ASYNC_CALLBACK: {
            Catch.RESULT: (False, Reachable.YES),
            Catch.REMOTING: (True, Reachable.YES),
            Catch.BROKER: (True, Reachable.YES),
            Catch.INTERRUPTED: (True, Reachable.YES),
        },
    },
}


# 4.3-4.8: CS-1's calls, but sendMessageAsync catches nothing (clients.md AR-1/2): what invokeAsync throws
# leaves through sendDefaultImpl's catch (a first request) or onExceptionImpl's (a retry)
FAULT_UPDATES["CS-1/uncaught"] = {
    site: dict(cells)
    for site, cells in FAULT_UPDATES["CS-1"].items()
    if site != Site.SEND_MESSAGE_ASYNC_CATCH
}
# 5.1.4 and 5.2.0: CS-2's calls, with invokeAsync still throwing what fails synchronously (a connect
# failure, a refused permit, an interrupt): sendMessageAsync's catch (Exception ex) makes
# updateFaultItem(brokerName, cost, true, false) (5.2.0 MQClientAPIImpl.sendMessageAsync)
FAULT_UPDATES["CS-2/thrown"] = {
    **_copy(FAULT_UPDATES["CS-2"]),
    # an interrupt is thrown too, so it never reaches the callback
    Site.ASYNC_CALLBACK: {
        c: r for c, r in FAULT_UPDATES["CS-2"][Site.ASYNC_CALLBACK].items() if c != Catch.INTERRUPTED
    },
    Site.SEND_MESSAGE_ASYNC_CATCH: {
        Catch.REMOTING: (True, Reachable.NO),
        Catch.CLIENT: (True, Reachable.NO),
        Catch.INTERRUPTED: (True, Reachable.NO),
    },
}


def fault_updates(line: RemotingLine | str) -> dict[Site, dict[Catch, FaultUpdateRule]]:
    """The ``updateFaultItem`` calls of ``line`` (its cells of :data:`FAULT_UPDATES`)."""
    return FAULT_UPDATES[remoting_line(line).fault_updates]


def fault_update_rule(line: RemotingLine | str, site: Site, catch: Catch) -> FaultUpdateRule:
    """The (isolation, reachable) of the ``updateFaultItem`` call ``line`` makes at ``site`` for ``catch``."""
    return fault_updates(line)[site][catch]


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


# ---- 4. latencyMax / notAvailableDuration ---------------------------------------------------------


@dataclass(frozen=True)
class FaultArrays:
    """``latencyMax`` and ``notAvailableDuration`` (ms), index by index."""

    latency_max: tuple[int, ...]
    not_available_duration: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.latency_max) != len(self.not_available_duration):
            # upstream would index notAvailableDuration out of bounds
            raise ConfigError(
                "latency_max and not_available_duration must have the same length, got "
                f"{len(self.latency_max)} and {len(self.not_available_duration)}"
            )
        if not self.latency_max:
            raise ConfigError("latency_max must not be empty")

    @classmethod
    def default(cls, line: RemotingLine | str) -> FaultArrays:
        """The line's ``latencyMax`` and ``notAvailableDuration``."""
        row = remoting_line(line)
        return cls(row.latency_max, row.not_available_duration)

    def not_available_duration_for(self, latency_ms: int) -> int:
        """``computeNotAvailableDuration``: the duration of the last ``latencyMax[i] <= latency``, else 0."""
        for i in range(len(self.latency_max) - 1, -1, -1):
            if latency_ms >= self.latency_max[i]:
                return self.not_available_duration[i]
        return 0


class IndexOutOfBounds(RocketSimError):
    """``List.get`` of a negative index (4.8.0's ``whichItemWorst``, 5.1.0's latency scan): upstream's
    ``selectOneMessageQueue`` catches it and falls back to round robin."""


def shuffle(items: list, source: IntSource) -> None:
    """``Collections.shuffle``: ``for i = size..2: swap(i - 1, nextInt(i))`` (its own static Random)."""
    for i in range(len(items), 1, -1):
        j = source.next_int_bound(i)
        items[i - 1], items[j] = items[j], items[i - 1]


def queue_pos(index: int, n: int) -> int:
    """``Math.abs(index) % size``, a negative result read as 0 (``if (pos < 0) pos = 0``): the same as
    ``index % size`` for the non-negative indexes of 4.9+, 0 for 4.8.0's MIN_VALUE."""
    pos = java_rem(java_abs(index), n)
    return 0 if pos < 0 else pos


# ---- 5. the fault-item table (LatencyFaultToleranceImpl) --------------------------------------------


@dataclass(slots=True)
class FaultItem:
    """``FaultItem``: owned and mutated by its :class:`FaultTable` only."""

    name: str
    current_latency: int = 0
    start_timestamp: int = 0
    check_stamp: int = 0  # 5.x
    reachable: bool = False  # 5.x ``reachableFlag``; a new item is unreachable until its update sets it

    def is_available(self, now: int) -> bool:
        # 4.9: (now - start) >= 0; 5.x: now >= start -- the same for exact integers
        return now - self.start_timestamp >= 0


@dataclass(frozen=True)
class FaultItemView:
    """An immutable copy of a fault item (snapshots, the ``fault_isolated_until_ms`` column)."""

    name: str
    current_latency: int
    start_timestamp: int
    reachable: bool
    check_stamp: int

    def as_vector_row(self, line: RemotingLine) -> list:
        if line.tracks_reachability:
            return [self.name, self.current_latency, self.start_timestamp, self.reachable, self.check_stamp]
        return [self.name, self.current_latency, self.start_timestamp]


# LatencyFaultToleranceImpl.startDetector: detectByOneRound every 3 s from 3 s after the producer starts;
# each item is probed again detectInterval after its last probe, with detectTimeout per probe
DETECT_PERIOD_MS = 3000
DETECT_INTERVAL_MS = 2000
DETECT_TIMEOUT_MS = 200


_CHM_INITIAL_BINS = 32  # new ConcurrentHashMap(16): tableSizeFor(16 + 8 + 1) = 32


class FaultTable:
    """``LatencyFaultToleranceImpl``: fault items keyed by broker name, iterated like ``ConcurrentHashMap``.

    Iteration order matters (``pickOneAtLeast`` sorts stably, the detector probes in order, and the
    vectors print the table): bins are visited by index, ``bin = spread(name.hashCode()) & (n - 1)``, and
    entries inside a bin in insertion order. The table starts with 32 bins and doubles when the size
    reaches 3/4 of the bins, splitting each bin the way ``ConcurrentHashMap.transfer`` does.
    Treeification (8 colliding names in one bin) is not modelled.
    """

    def __init__(
        self,
        line: RemotingLine | str,
        which_item_worst: ThreadLocalIndex | None = None,
        detect_interval_ms: int = DETECT_INTERVAL_MS,
        detect_timeout_ms: int = DETECT_TIMEOUT_MS,
        on_event: EventHook = None,
        shuffle_source: IntSource | None = None,
    ) -> None:
        self.line = remoting_line(line)
        self.which_item_worst = which_item_worst
        self.detect_interval_ms = detect_interval_ms
        self.detect_timeout_ms = detect_timeout_ms
        self.on_event = on_event
        self.shuffle_source = shuffle_source
        self._items: dict[str, FaultItem] = {}
        self._bins: list[list[str]] = [[] for _ in range(_CHM_INITIAL_BINS)]
        self._size_ctl = _CHM_INITIAL_BINS - (_CHM_INITIAL_BINS >> 2)

    # -- ConcurrentHashMap layout --
    def names(self) -> list[str]:
        """Broker names in iteration order."""
        return [name for b in self._bins for name in b]

    def _insert(self, item: FaultItem) -> None:
        n = len(self._bins)
        self._bins[chm_spread(java_string_hash(item.name)) & (n - 1)].append(item.name)
        self._items[item.name] = item
        if len(self._items) >= self._size_ctl:
            self._resize()

    def _resize(self) -> None:
        n = len(self._bins)
        new_bins: list[list[str]] = [[] for _ in range(2 * n)]
        for i, names in enumerate(self._bins):
            if not names:
                continue
            hashes = [chm_spread(java_string_hash(x)) for x in names]
            # the trailing run whose (hash & n) bit does not change moves as is; nodes before it are
            # re-linked one by one in front of it (reversing them), as in ConcurrentHashMap.transfer
            run_bit, last_run = hashes[0] & n, 0
            for j in range(1, len(names)):
                if hashes[j] & n != run_bit:
                    run_bit, last_run = hashes[j] & n, j
            lo: list[str] = list(names[last_run:]) if run_bit == 0 else []
            hi: list[str] = list(names[last_run:]) if run_bit != 0 else []
            for j in range(last_run):
                (lo if hashes[j] & n == 0 else hi).insert(0, names[j])
            new_bins[i], new_bins[i + n] = lo, hi
        self._bins = new_bins
        self._size_ctl = 2 * n - (n >> 1)

    # -- LatencyFaultTolerance --
    def get(self, name: str) -> FaultItem | None:
        return self._items.get(name)

    def __len__(self) -> int:
        return len(self._items)

    def update_fault_item(
        self, name: str, current_latency: int, not_available_duration: int, now: int, reachable: bool = True
    ) -> None:
        """4.9: ``start = now + duration``, always overwritten (a fast success ends an isolation).

        5.x: the start only moves forward, and only for a duration > 0 (a new item keeps start 0);
        ``reachableFlag`` is set to ``reachable`` every time.
        """
        item = self._items.get(name)
        created = item is None
        if item is None:
            item = FaultItem(name)
        item.current_latency = current_latency
        if self.line.isolation_only_extends:
            if not_available_duration > 0 and now + not_available_duration > item.start_timestamp:
                item.start_timestamp = now + not_available_duration
        else:
            item.start_timestamp = now + not_available_duration
        if self.line.tracks_reachability:
            item.reachable = reachable
        if created:
            self._insert(item)

    def is_available(self, name: str, now: int) -> bool:
        """``isAvailable``: by time; 5.1.4's ``FaultItem.isAvailable`` also needs ``reachableFlag``."""
        item = self._items.get(name)
        if item is None:
            return True
        return item.is_available(now) and (item.reachable or not self.line.availability_needs_reachable)

    def is_reachable(self, name: str) -> bool:
        item = self._items.get(name)
        return True if item is None else item.reachable

    def remove(self, name: str) -> None:
        if self._items.pop(name, None) is not None:
            for b in self._bins:
                if name in b:
                    b.remove(name)
                    break
        if self.on_event is not None:
            self.on_event(["remove", name])

    def pick_one_at_least(self, now: int, thread: ThreadKey = 0) -> str | None:
        """4.9 ``pickOneAtLeast``: sort (available first, then latency, then start; stable) and pick
        ``whichItemWorst.incrementAndGet() % half`` among the better half (the first item if half is 0)."""
        items = [self._items[n] for n in self.names()]
        if self.line.shuffles_before_pick:  # 4.3-4.8: Collections.shuffle, then the stable sort
            shuffle(items, self._shuffle_source())
        if self.on_event is not None:
            self.on_event(["list_before_sort", [self._row(i, now) for i in items]])
        # Collections.sort is a stable merge sort and compareTo is a consistent order at a fixed `now`
        items.sort(key=lambda i: (not i.is_available(now), i.current_latency, i.start_timestamp))
        if self.on_event is not None:
            self.on_event(["list_after_sort", [self._row(i, now) for i in items]])
        if not items:
            return None
        half = len(items) // 2
        if half <= 0:
            picked = items[0].name
        else:
            if self.which_item_worst is None:
                raise ConfigError("pickOneAtLeast needs the whichItemWorst index")
            at = java_rem(self.which_item_worst.increment_and_get(thread), half)
            if at < 0:  # 4.8.0's index past Integer.MAX_VALUE: List.get throws
                raise IndexOutOfBounds(f"pickOneAtLeast: index {at}")
            picked = items[at].name
        if self.on_event is not None:
            self.on_event(["pickOneAtLeast", picked])
        return picked

    def _shuffle_source(self) -> IntSource:
        if self.shuffle_source is None:
            raise ConfigError(f"pickOneAtLeast of {self.line.name} shuffles: it needs a shuffle source")
        return self.shuffle_source

    def _row(self, item: FaultItem, now: int) -> list:
        return [*self.view(item).as_vector_row(self.line), item.is_available(now)]

    def detect_by_one_round(
        self, now: int, resolver: Callable[[str], str | None], probe: Callable[[str, int], bool] | None
    ) -> None:
        """5.x ``detectByOneRound``: for every item due (``now - checkStamp >= 0``) move its check stamp
        on by ``detectInterval``, drop it if its broker no longer resolves, and mark it reachable if the
        probe (``getMaxOffset`` with ``detectTimeout``) succeeds. Probes take no simulated time."""
        for name in self.names():  # removing the current entry does not disturb the rest of the walk
            item = self._items.get(name)
            if item is None or now - item.check_stamp < 0:
                continue
            item.check_stamp = now + self.detect_interval_ms
            addr = resolver(name)
            if addr is None:
                self._items.pop(name, None)
                for b in self._bins:
                    if name in b:
                        b.remove(name)
                        break
                continue
            if probe is None:
                continue
            if probe(addr, self.detect_timeout_ms) and not item.reachable:
                item.reachable = True

    # -- inspection --
    @staticmethod
    def view(item: FaultItem) -> FaultItemView:
        return FaultItemView(
            item.name, item.current_latency, item.start_timestamp, item.reachable, item.check_stamp
        )

    def snapshot(self) -> list[FaultItemView]:
        """Every item, in ``ConcurrentHashMap`` iteration order."""
        return [self.view(self._items[n]) for n in self.names()]

    def vector_rows(self) -> list[list]:
        return [v.as_vector_row(self.line) for v in self.snapshot()]

    def isolated_until(self, name: str, now: int) -> int | None:
        """The item's start timestamp if the broker is isolated at ``now``, else None."""
        item = self._items.get(name)
        if item is None or item.is_available(now):
            return None
        return item.start_timestamp


# ---- 6. MQFaultStrategy -------------------------------------------------------------------------


@dataclass(frozen=True)
class FaultUpdate:
    """One ``updateFaultItem`` call made by the send loop.

    ``duration`` is what reached the table (None when ``sendLatencyFaultEnable`` is off and the strategy
    did nothing); ``reachable`` is None in the 4.9 lines, which have no such argument.
    """

    broker: str
    latency: int
    isolation: bool
    reachable: bool | None
    duration: int | None

    def as_vector(self) -> list:
        if self.reachable is None:
            return [self.broker, self.latency, self.isolation, self.duration]
        return [self.broker, self.latency, self.isolation, self.reachable, self.duration]


@dataclass
class Detector:
    """The 5.x ``LatencyFaultToleranceImpl`` detector: ``detectByOneRound`` every ``period_ms`` from
    ``first_tick_ms``, doing nothing unless ``startDetectorEnable``. The resolver maps a broker name to its
    master address (None when gone from the route); the probe answers ``detect(addr, timeoutMs)``."""

    first_tick_ms: int
    resolver: Callable[[str], str | None]
    probe: Callable[[str, int], bool] | None
    period_ms: int = DETECT_PERIOD_MS
    on_tick: Callable[[int], None] | None = None
    on_tick_done: Callable[[int], None] | None = None

    def __post_init__(self) -> None:
        self.next_tick_ms = self.first_tick_ms


class FaultStrategy:
    """``MQFaultStrategy`` of one producer: its fault table and its line's selection and update rules."""

    def __init__(
        self,
        line: RemotingLine | str,
        table: FaultTable | None = None,
        *,
        send_latency_fault_enable: bool = False,
        arrays: FaultArrays | None = None,
        start_detector_enable: bool = False,
        detector: Detector | None = None,
    ) -> None:
        self.line = remoting_line(line)
        if start_detector_enable and not self.line.has_fault_detector:
            raise ConfigError(f"start_detector_enable exists only in the 5.x lines, not in {self.line.name}")
        self.table = table if table is not None else FaultTable(self.line)
        self.send_latency_fault_enable = send_latency_fault_enable
        self.arrays = arrays if arrays is not None else FaultArrays.default(self.line)
        self.start_detector_enable = start_detector_enable
        self.detector = detector

    # -- clock --
    def advance_to(self, now: int) -> None:
        """Run the detector ticks due at or before ``now``, each at its own tick time (5.x)."""
        d = self.detector
        if d is None:
            return
        while d.next_tick_ms <= now:
            tick = d.next_tick_ms
            d.next_tick_ms += d.period_ms
            if not self.start_detector_enable:
                continue
            if d.on_tick is not None:
                d.on_tick(tick)
            self.table.detect_by_one_round(tick, d.resolver, d.probe)
            if d.on_tick_done is not None:
                d.on_tick_done(tick)

    # -- updateFaultItem --
    def update_fault_item(
        self, broker: str, latency: int, isolation: bool, now: int, reachable: bool = True
    ) -> FaultUpdate:
        """The loop's call; the table changes only when latency fault tolerance is on."""
        reach = reachable if self.line.tracks_reachability else None
        if not self.send_latency_fault_enable:
            return FaultUpdate(broker, latency, isolation, reach, None)
        duration = self.arrays.not_available_duration_for(
            self.line.isolation_latency_ms if isolation else latency
        )
        self.table.update_fault_item(broker, latency, duration, now, reachable)
        return FaultUpdate(broker, latency, isolation, reach, duration)

    def record_outcome(self, site: Site, catch: Catch, broker: str, latency: int, now: int) -> FaultUpdate:
        """The ``updateFaultItem`` call the client makes at ``site`` for an outcome caught as ``catch``:
        its (isolation, reachable) come from :data:`FAULT_UPDATES`."""
        isolation, reachable = fault_update_rule(self.line, site, catch)
        return self.update_fault_item(
            broker, latency, isolation, now, reachable.value_for(self.start_detector_enable)
        )

    def isolated_until(self, broker: str, now: int) -> int | None:
        return self.table.isolated_until(broker, now)

    # -- selectOneMessageQueue --
    def select_one_message_queue(
        self,
        tp: TopicPublishInfo,
        last_broker_name: str | None,
        now: int,
        reset_index: bool = False,
        thread: ThreadKey = 0,
    ) -> QueueSlot | None:
        """The queue for the next attempt. ``reset_index`` is 5.x's flag (true on retries)."""
        if self.line.uses_queue_filters:
            return self._select_by_filters(tp, last_broker_name, now, reset_index, thread)
        return self._select_available(tp, last_broker_name, now, thread)

    def _select_available(
        self, tp: TopicPublishInfo, last: str | None, now: int, thread: ThreadKey
    ) -> QueueSlot:
        if not self.send_latency_fault_enable:
            if not self.line.ticks_per_candidate:
                return select_avoiding_broker_one_tick(tp, last, thread)
            return select_avoiding_broker_4_9(tp, last, thread)
        try:
            return self._scan_then_pick(tp, last, now, thread)
        except IndexOutOfBounds:  # upstream's catch (Exception e): log, then round robin
            return select_plain(tp, thread)

    def _accepts(self, broker: str, last: str | None, now: int) -> bool:
        """The latency scan's test: available, and the line's clause about the last broker."""
        rule = self.line.latency_scan_broker
        if rule == ScanBroker.SAME_AS_LAST and last is not None and broker != last:
            return False
        if rule == ScanBroker.NOT_LAST and broker == last:
            return False
        return self.table.is_available(broker, now)

    def _scan_then_pick(
        self, tp: TopicPublishInfo, last: str | None, now: int, thread: ThreadKey
    ) -> QueueSlot:
        queues = tp.message_queue_list
        n = len(queues)
        # one incrementAndGet, then a local `index++` (which may wrap) per probe
        index = tp.send_which_queue.increment_and_get(thread)
        for _ in range(n):
            if self.line.latency_scan_keeps_sign:  # 5.1.0+: `index++ % size`, no Math.abs
                pos = java_rem(index, n)
                if pos < 0:
                    raise IndexOutOfBounds(f"selectOneMessageQueue: position {pos}")
            else:
                pos = queue_pos(index, n)
            index = int32(index + 1)
            mq = queues[pos]
            if self._accepts(mq.broker_name, last, now):
                return mq
        not_best = self.table.pick_one_at_least(now, thread)
        write_queue_nums = tp.write_queue_nums_by_broker(
            not_best, writable_only=self.line.counts_writable_queues_only
        )
        if write_queue_nums > 0:
            mq = select_plain(tp, thread)
            if not_best is None:
                return mq
            queue_id = java_rem(tp.send_which_queue.increment_and_get(thread), write_queue_nums)
            if self.line.rewrites_cached_queue:
                # the quirk: the cached MessageQueue of the route is rewritten in place, so this queue
                # slot points at `not_best` for every later send until the route changes
                mq.broker_name = not_best
                mq.queue_id = queue_id
                return mq
            return QueueSlot(mq.topic, not_best, queue_id)
        if not_best is not None:  # remove(null) throws inside upstream's try; it ends up below as well
            self.table.remove(not_best)
        return select_plain(tp, thread)

    def _select_by_filters(
        self, tp: TopicPublishInfo, last: str | None, now: int, reset_index: bool, thread: int
    ) -> QueueSlot | None:
        def not_last(mq: QueueSlot) -> bool:  # BrokerFilter
            return last is None or mq.broker_name != last

        if self.send_latency_fault_enable:
            if reset_index:
                tp.send_which_queue.reset(thread)
            table = self.table
            mq = select_filtered(tp, thread, lambda q: table.is_available(q.broker_name, now) and not_last(q))
            if mq is not None:
                return mq
            mq = select_filtered(tp, thread, lambda q: table.is_reachable(q.broker_name) and not_last(q))
            if mq is not None:
                return mq
            return select_plain(tp, thread)
        mq = select_filtered(tp, thread, not_last)
        return mq if mq is not None else select_plain(tp, thread)


def select_plain(tp: TopicPublishInfo, thread: ThreadKey = 0) -> QueueSlot:
    """``TopicPublishInfo.selectOneMessageQueue()``: round robin (``Math.abs(index) % size``, pos < 0: 0)."""
    queues = tp.message_queue_list
    return queues[queue_pos(tp.send_which_queue.increment_and_get(thread), len(queues))]


def select_avoiding_broker_one_tick(
    tp: TopicPublishInfo, last: str | None, thread: ThreadKey = 0
) -> QueueSlot:
    """4.3-4.7 ``selectOneMessageQueue(lastBrokerName)``: one tick, then a local ``index++`` scan of up to
    ``size`` queues avoiding ``last``; else round robin (one more tick) [clients.md TPI-1]."""
    if last is None:
        return select_plain(tp, thread)
    queues = tp.message_queue_list
    index = tp.send_which_queue.increment_and_get(thread)
    for _ in range(len(queues)):
        mq = queues[queue_pos(index, len(queues))]
        index = int32(index + 1)
        if mq.broker_name != last:
            return mq
    return select_plain(tp, thread)


def select_avoiding_broker_4_9(tp: TopicPublishInfo, last: str | None, thread: ThreadKey = 0) -> QueueSlot:
    """4.9 ``selectOneMessageQueue(lastBrokerName)``: up to ``size`` round-robin steps avoiding ``last``."""
    if last is None:
        return select_plain(tp, thread)
    queues = tp.message_queue_list
    for _ in range(len(queues)):
        mq = queues[queue_pos(tp.send_which_queue.increment_and_get(thread), len(queues))]
        if mq.broker_name != last:
            return mq
    return select_plain(tp, thread)


def select_filtered(
    tp: TopicPublishInfo, thread: ThreadKey, accept: Callable[[QueueSlot], bool]
) -> QueueSlot | None:
    """5.x ``selectOneMessageQueue(QueueFilter...)``: up to ``size`` round-robin steps, else None."""
    queues = tp.message_queue_list
    n = len(queues)
    for _ in range(n):
        mq = queues[java_abs(java_rem(tp.send_which_queue.increment_and_get(thread), n))]
        if accept(mq):
            return mq
    return None


def new_strategy(
    line: RemotingLine | str,
    *,
    send_latency_fault_enable: bool,
    which_item_worst_source: IntSource,
    arrays: FaultArrays | None = None,
    start_detector_enable: bool = False,
    detector: Detector | None = None,
    detect_interval_ms: int = DETECT_INTERVAL_MS,
    detect_timeout_ms: int = DETECT_TIMEOUT_MS,
    on_event: EventHook = None,
    shuffle_source: IntSource | None = None,
) -> FaultStrategy:
    """A producer's strategy with a fresh table and ``whichItemWorst`` index (``shuffle_source``: the
    draws of ``pickOneAtLeast``'s ``Collections.shuffle``, in the lines that shuffle)."""
    worst = ThreadLocalIndex.shared(line, which_item_worst_source, "whichItemWorst", on_event)
    table = FaultTable(line, worst, detect_interval_ms, detect_timeout_ms, on_event, shuffle_source)
    return FaultStrategy(
        line,
        table,
        send_latency_fault_enable=send_latency_fault_enable,
        arrays=arrays,
        start_detector_enable=start_detector_enable,
        detector=detector,
    )
