"""The client JVM's heap and G1's collections (``producers.heap_mb``): why a client's capacity falls
under its own backlog instead of levelling off.

More: docs/reference/modules.md, rocketsim/client/heap.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rocketsim.client.g1_predictions import G1Analytics, PauseCosts
from rocketsim.client.host import G1_CONCURRENT, Host
from rocketsim.scenario import Scenario

KIB_PER_MB = 1024.0
YOUNG_MIN_SHARE = 0.05  # G1NewSizePercent
YOUNG_MAX_SHARE = 0.60  # G1MaxNewSizePercent
RESERVE_SHARE = 0.10  # G1ReservePercent
SURVIVOR_RATIO = 8  # SurvivorRatio: the survivor space is young / 8
IHOP_SHARE = 0.45  # InitiatingHeapOccupancyPercent: the old generation's share that starts a marking cycle
# G1's adaptive young sizing (producers.heap_pause_goal_ms; JDK 17, G1Policy and G1YoungLengthPredictor)
COPY_SAFETY = (100.0 / 50.0) * (100.0 + 10.0) / 100.0  # G1ConfidencePercent 50, TargetPLABWastePct 10
INITIAL_SURVIVAL = 0.4  # G1SurvRateGroup::reset: the survival rate predicted before any collection
SURVIVAL_ALPHA = 0.7  # AbsSeq's decaying average (DEFAULT_ALPHA_VALUE): the weight of the past
# G1's concurrent marking as its threads' CPU (producers.heap_marking_on_host): a cycle's CPU, all its
# ConcGCThreads together, is a part per cycle (clearing the next bitmap, scanning the root regions, the
# remembered sets' rebuild: the heap's, not the live set's) and a part per KiB live in the old generation.
# Measured of the harness's driver JVM (JDK 17, 1 GiB, 2 processors: 1 marking thread) holding a backlog of
# pending sends (tests/data/realbroker-reruns/g1_backlog, G1_Conc's CPU over the cycles of hold_*.gclog,
# least squares over the three holds: 0.53, 0.52, 1.41 s for 7, 5, 9 cycles at 129, 259, 560-598 MiB live;
# the fit gives 0.54, 0.50, 1.41)
MARKING_CYCLE_US = 55_000.0
MARKING_US_PER_KIB = 0.168
MARKING_PIECE_US = 1000.0  # the marking threads' CPU placed on the host one piece at a time (a yield point)


@dataclass(frozen=True)
class HeapParams:
    """One client JVM's heap in flat numbers (KiB, us)."""

    heap_kib: float
    alloc_kib: float  # allocated per send
    pending_kib: float  # held by a send until it ends
    pause_us: float  # a young collection's fixed part
    copy_us_per_kib: float  # per KiB a young collection copies
    full_us_per_kib: float = 0.0  # per KiB a full collection compacts (what is live)
    collector_threads: int = 0  # a pause's workers beside the other processes (0: it stops the host)
    marking_us: float = 0.0  # a concurrent marking cycle's length (0: none; only full collections free)
    pause_goal_us: float = 0.0  # G1's MaxGCPauseMillis: its adaptive young sizing (0: the room left)
    g1_workers: int = 0  # with the sizing, G1's ParallelGCThreads: its start-up predictions (0: none)
    marking_threads: int = 0  # G1's ConcGCThreads whose CPU a marking cycle is on the host (0: marking_us)

    @property
    def region_kib(self) -> float:
        """G1's region: the heap / 2048 rounded down to a power of two, 1-32 MiB
        (``HeapRegion::setup_heap_region_size``)."""
        target = self.heap_kib / 2048.0
        size = 2.0 ** math.floor(math.log2(target)) if target > 0 else 1.0
        return min(max(size, KIB_PER_MB), 32 * KIB_PER_MB)

    def young_kib(self, held_kib: float) -> float:
        """The young generation's size while the old generation and the survivors hold ``held_kib``."""
        room = self.heap_kib * (1.0 - RESERVE_SHARE) - held_kib
        return min(max(room, YOUNG_MIN_SHARE * self.heap_kib), YOUNG_MAX_SHARE * self.heap_kib)

    def g1_young_kib(
        self, held_kib: float, survivor_kib: float, survival: float, costs: PauseCosts | None = None
    ) -> tuple[float, float]:
        """G1's young generation (its target, its eden) after a collection that left ``held_kib`` in the
        old generation and the survivor space (``survivor_kib`` of it survivors), ``survival`` the share
        of eden a collection is predicted to copy, ``costs`` G1's predicted pause costs (None: the
        calibrated ones, nothing per region) (JDK 17 ``G1Policy::young_list_target_lengths`` and
        ``calculate_young_list_target_length``, ``G1YoungLengthPredictor::will_fit``): the largest eden
        whose predicted pause fits the goal and whose copy, ``COPY_SAFETY`` times the predicted, fits
        the free regions outside the reserve beside it; the young generation between G1NewSizePercent
        and G1MaxNewSizePercent of the heap, within what is free as :meth:`young_within_free` says."""
        free = self.heap_kib - held_kib
        base = max(free - RESERVE_SHARE * self.heap_kib, 0.0)
        eden = base / (1.0 + COPY_SAFETY * survival)
        if costs is None:
            costs = PauseCosts(self.pause_us, self.copy_us_per_kib, 0.0, survival)
        per_kib = costs.copy_us_per_kib * survival + costs.per_region_us / self.region_kib
        if per_kib > 0:
            room_us = self.pause_goal_us - costs.fixed_us - costs.copy_us_per_kib * survivor_kib
            eden = min(eden, max(room_us, 0.0) / per_kib)
        desired = min(eden + survivor_kib, YOUNG_MAX_SHARE * self.heap_kib)
        desired = max(desired, YOUNG_MIN_SHARE * self.heap_kib, survivor_kib + self.region_kib)
        young = self.young_within_free(desired, free)
        return young, max(young - survivor_kib, min(self.region_kib, free))

    def young_within_free(self, desired_kib: float, free_kib: float) -> float:
        """The young generation (survivors included) G1 targets of the ``desired_kib`` its sizing wants
        with ``free_kib`` free (JDK 17 ``G1Policy::calculate_young_target_length``): all of it while it
        leaves the reserve free; else the free outside the reserve and at most the smallest young
        generation or half the reserve from within it; with no more free than the reserve, at most the
        free heap. The eden is what the survivors leave of it (at least a region while one is free)."""
        reserve = RESERVE_SHARE * self.heap_kib
        into_reserve = min(YOUNG_MIN_SHARE * self.heap_kib, reserve / 2.0)
        if free_kib >= desired_kib + reserve:
            return desired_kib
        if free_kib > reserve:
            outside = free_kib - reserve
            return outside + min(desired_kib - outside, into_reserve)
        return min(free_kib, desired_kib, into_reserve)

    def is_full(self, held_kib: float) -> bool:
        """Whether the heap has no room left for even the smallest young generation (G1's to-space
        exhausted: a full collection follows); with the adaptive sizing, no free region left."""
        if self.pause_goal_us > 0:
            return held_kib > self.heap_kib - self.region_kib
        return held_kib > self.heap_kib * (1.0 - YOUNG_MIN_SHARE)


class ClientHeap:
    """The heap of one client process: its pending sends (allocated since the last collection, in the
    survivor space, promoted to the old generation), the dead sends the old generation still holds, and
    the collections it runs on the host's cores."""

    def __init__(self, params: HeapParams, cores: Host) -> None:
        self.params = params
        self.cores = cores
        self.epoch = 0  # collections so far
        self.pending = 0  # sends held
        self.pending_young = 0  # of them, those allocated since the last collection
        self.survivors = 0  # of them, those in the survivor space
        self.old_dead_kib = 0.0  # promoted sends since ended: garbage a marking cycle or a full one frees
        self.marking_end_us: float | None = None  # when the marking cycle under way ends
        self.marked_dead_kib = 0.0  # the garbage it found (dead at its start: G1's snapshot)
        self.markings = 0
        self.marking_left_us: float | None = None  # marking_threads: the cycle under way's CPU not yet placed
        self.marking_free_us: list[float] = []  # and when each of its threads' last piece ends
        self.marking_cpu_us = 0.0  # the marking threads' CPU placed so far
        self.allocated_kib = 0.0  # since the last collection
        self.pauses: list[tuple[float, float]] = []  # (start, length) of each collection
        self.full_collections = 0
        self.copied_kib = 0.0  # what the young collections copied
        self.compacted_kib = 0.0  # what the full collections compacted (live)
        self.survival = INITIAL_SURVIVAL  # G1's predicted share of eden a collection copies
        self.analytics = G1Analytics(params.g1_workers) if params.g1_workers > 0 else None
        self.young_target_kib = 0.0  # with the adaptive sizing: the young generation, survivors included
        self.eden_kib = 0.0  # and its eden: a collection once the sends have allocated it
        self._size_young()

    @property
    def promoted(self) -> int:
        """Pending sends in the old generation."""
        return self.pending - self.pending_young - self.survivors

    def held_kib(self) -> float:
        """What the old generation (live and dead) and the survivor space hold."""
        return (self.pending - self.pending_young) * self.params.pending_kib + self.old_dead_kib

    def hold(self) -> int:
        """A send is handed to the client: it holds heap until :meth:`release`; its epoch."""
        self.pending += 1
        self.pending_young += 1
        return self.epoch

    def release(self, epoch: int) -> None:
        """The send held since collection ``epoch`` ended; the oldest sends end first, so one that
        outlived a collection is a promoted one while there are any (dead in the old generation)."""
        if epoch == self.epoch:
            self.pending_young -= 1
        elif self.promoted > 0:
            self.old_dead_kib += self.params.pending_kib
        else:
            self.survivors -= 1
        self.pending -= 1

    def allocate(self, ready_us: float) -> None:
        """A send's work, ready at ``ready_us``, allocates; a full young generation is collected first."""
        self.allocated_kib += self.params.alloc_kib
        if self.params.marking_threads > 0:
            self._mark_on_host(ready_us)
        elif self.params.marking_us > 0:
            self._mark(ready_us)
        if self.params.pause_goal_us > 0:
            if self.allocated_kib >= self.eden_kib:
                self.collect(ready_us, self.young_target_kib)
            return
        young = self.params.young_kib(self.held_kib())
        if self.allocated_kib >= young:
            self.collect(ready_us, young)

    def collect(self, at_us: float, young_kib: float) -> None:
        """A young collection at ``at_us``: copy what is live in the young generation (the sends allocated
        since the last one and the survivors), keep what fits the survivor space, promote the rest, pause
        every core; a full collection follows when the heap is full."""
        p = self.params
        cap = int(young_kib / SURVIVOR_RATIO / p.pending_kib) if p.pending_kib > 0 else 0
        copied = self.pending_young + self.survivors
        self.copied_kib += copied * p.pending_kib
        self._pause(at_us, p.pause_us + p.copy_us_per_kib * copied * p.pending_kib)
        if self.allocated_kib > 0:
            seen = min(self.pending_young * p.pending_kib / self.allocated_kib, 1.0)
            self.survival = SURVIVAL_ALPHA * self.survival + (1.0 - SURVIVAL_ALPHA) * seen
            if self.analytics is not None:
                self._report(copied * p.pending_kib, seen)
        self.survivors = min(copied, cap)
        self.pending_young = 0
        self.allocated_kib = 0.0
        self.epoch += 1
        if p.is_full(self.held_kib()):
            self.collect_full(at_us)
        else:
            self._size_young()

    def collect_full(self, at_us: float) -> None:
        """A full collection: compact every live send into the old generation, free the dead ones."""
        self.compacted_kib += self.pending * self.params.pending_kib
        self._pause(at_us, self.params.full_us_per_kib * self.pending * self.params.pending_kib)
        self.survivors = 0
        self.old_dead_kib = 0.0
        self.marking_end_us = None  # G1 aborts the marking under way
        self.marking_left_us = None
        self.full_collections += 1
        self._size_young()

    def _report(self, copied_kib: float, survival: float) -> None:
        """What the young collection just run cost, as G1 measures it: its wall (the last pause's length,
        longer than its CPU where its threads shared the cores) split as the calibrated costs split it;
        nothing per region (the calibrated fixed part holds it)."""
        p = self.params
        work = p.pause_us + p.copy_us_per_kib * copied_kib
        wall_per_work = self.pauses[-1][1] / work if work > 0 else 1.0
        copy = p.copy_us_per_kib * wall_per_work if copied_kib > 0 else None
        self.analytics.report(p.pause_us * wall_per_work, copy, 0.0, survival)  # type: ignore[union-attr]

    def _size_young(self) -> None:
        """With the adaptive sizing, the young generation and its eden until the next collection: from
        G1's predictions where it has them (``g1_workers``), else from the calibrated costs."""
        if self.params.pause_goal_us > 0:
            survivor_kib = self.survivors * self.params.pending_kib
            costs = self.analytics.predicted() if self.analytics is not None else None
            survival = costs.survival if costs is not None else self.survival
            self.young_target_kib, self.eden_kib = self.params.g1_young_kib(
                self.held_kib(), survivor_kib, survival, costs
            )

    def _mark(self, now_us: float) -> None:
        """G1's concurrent marking (``marking_us``): once the old generation holds ``IHOP_SHARE`` of the
        heap a cycle starts; it runs beside the application, and when it ends the mixed collections that
        follow free the garbage that was dead at its start (their copying is not counted)."""
        if self.marking_end_us is None:
            if self.held_kib() >= IHOP_SHARE * self.params.heap_kib:
                self.marking_end_us = now_us + self.params.marking_us
                self.marked_dead_kib = self.old_dead_kib
        elif now_us >= self.marking_end_us:
            self.old_dead_kib -= min(self.marked_dead_kib, self.old_dead_kib)
            self.marking_end_us = None
            self.markings += 1

    def _mark_on_host(self, now_us: float) -> None:
        """G1's concurrent marking as its threads' work (``marking_threads``; JDK 17 ``G1ConcurrentMark``,
        ``ConcGCThreads``): once the old generation holds ``IHOP_SHARE`` of the heap
        (``G1Policy::need_to_start_conc_mark``; the adaptive IHOP is not modelled) a cycle starts whose CPU
        is :data:`MARKING_CYCLE_US` and :data:`MARKING_US_PER_KIB` of the live sends outside the eden; its
        threads run it on the host in pieces of :data:`MARKING_PIECE_US`, each thread runnable beside the
        others until its part is done (a client thread: a pause stops it, as a safepoint suspends G1's
        concurrent threads); the cycle ends when the last piece has ended, and frees the garbage dead at
        its start (G1's snapshot; the mixed collections that follow, their copying not counted)."""
        p = self.params
        if self.marking_left_us is None:
            if self.held_kib() >= IHOP_SHARE * p.heap_kib:
                live_kib = (self.pending - self.pending_young) * p.pending_kib
                self.marking_left_us = MARKING_CYCLE_US + MARKING_US_PER_KIB * live_kib
                self.marking_free_us = [now_us] * p.marking_threads
                self.marked_dead_kib = self.old_dead_kib
            return
        for i, free in enumerate(self.marking_free_us):
            if free <= now_us and self.marking_left_us > 0:
                work = min(MARKING_PIECE_US, self.marking_left_us)
                self.marking_free_us[i] = self.cores.run(now_us, work, (G1_CONCURRENT, i))
                self.marking_left_us -= work
                self.marking_cpu_us += work
        if self.marking_left_us <= 0 and max(self.marking_free_us) <= now_us:
            self.old_dead_kib -= min(self.marked_dead_kib, self.old_dead_kib)
            self.marking_left_us = None
            self.markings += 1

    def _pause(self, at_us: float, pause_us: float) -> None:
        """A collection's pause of ``pause_us`` from ``at_us``: every core of the host stops for it, or
        (``collector_threads``) the client's threads stop while its collector threads share ``pause_us`` of
        CPU on the host beside the other processes' threads (G1's pause CPU per KiB copied, all its workers
        together, is about the calibrated pause length per KiB: the ramp's pauses had about one core)."""
        threads = self.params.collector_threads
        if threads <= 0:
            self.pauses.append((self.cores.stop_all(at_us, pause_us), pause_us))
            return
        start, end = self.cores.stop_client(at_us, pause_us / threads, threads)
        self.pauses.append((start, end - start))


def client_heap(sc: Scenario, cores: Host) -> ClientHeap | None:
    """The heap of a client process of ``sc`` on ``cores`` (None: ``producers.heap_mb`` is 0)."""
    p = sc.producers
    if p.heap_mb <= 0:
        return None
    params = HeapParams(
        p.heap_mb * KIB_PER_MB,
        p.heap_alloc_kib,
        p.heap_pending_kib,
        p.heap_pause_us,
        p.heap_copy_us_per_kib,
        p.heap_full_us_per_kib,
        parallel_gc_threads(p.processors) if p.heap_stops != "host" else 0,
        p.heap_marking_ms * 1000.0,
        p.heap_pause_goal_ms * 1000.0,
        parallel_gc_threads(p.processors),
        conc_gc_threads(p.processors) if p.heap_marking_on_host else 0,
    )
    return ClientHeap(params, cores)


def parallel_gc_threads(processors: int) -> int:
    """G1's stop-the-world workers on ``processors`` (HotSpot's ``ParallelGCThreads`` default,
    ``WorkerPolicy::calc_parallel_worker_threads``: every processor up to 8, then 5/8 of the rest)."""
    return processors if processors <= 8 else 8 + (processors - 8) * 5 // 8


def conc_gc_threads(processors: int) -> int:
    """G1's concurrent marking threads on ``processors`` (HotSpot's ``ConcGCThreads`` default,
    ``G1ConcurrentMark::G1ConcurrentMark``: ``scale_concurrent_worker_threads``, a quarter of
    ``ParallelGCThreads`` rounded, at least one: one on the harness's 2 processors)."""
    return max((parallel_gc_threads(processors) + 2) // 4, 1)
