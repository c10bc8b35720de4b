"""``LatencyFaultToleranceImpl``: :class:`FaultArrays` (latencyMax / notAvailableDuration) and
``computeNotAvailableDuration``; :class:`FaultTable`, the fault items in ``ConcurrentHashMap`` iteration
order: update / isAvailable / isReachable / remove, ``pickOneAtLeast`` and the 5.x ``detectByOneRound``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rocketsim.client.fault.index import EventHook, IntSource, ThreadKey, ThreadLocalIndex
from rocketsim.client.versions import RemotingLine, remoting_line
from rocketsim.errors import ConfigError, RocketSimError
from rocketsim.javaint import chm_spread, java_abs, java_rem, java_string_hash

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
