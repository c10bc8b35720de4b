"""The client JVM's young collections (``producers.heap_mb``, rocketsim.client.heap): a backlog of pending
sends makes them more frequent and longer, so a client past its capacity does less and less useful work.

G1's sizing (JDK 17, src/hotspot/share/gc/g1/g1_globals.hpp and gc_globals.hpp): ``G1NewSizePercent`` 5,
``G1MaxNewSizePercent`` 60, ``G1ReservePercent`` 10, ``SurvivorRatio`` 8. The harness's driver ran with
``-Xmx1g -XX:+UseG1GC`` and recorded its collectors' counts and times (``meta.json``'s ``driver_gc``):
23 young collections (148 ms) for the 1.55 M sends of ``b_ramp_async_p1``, 283 (7,861 ms) for the
1.49 M of the overloaded ``c_overload_async_p2_72000``.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
import pytest

from rocketsim.client.heap import ClientHeap, HeapParams
from rocketsim.client.host import HostCores
from rocketsim.engine import reference
from rocketsim.scenario import ScenarioError, scenario_from_mapping
from rocketsim.scenario.workload import generate
from rocketsim.validation.calibrate import heap_values
from rocketsim.warehouse.measured_runs import read_run

RUNS = "tests/data/realbroker/"


def heap(heap_kib: float = 10_000.0) -> ClientHeap:
    return ClientHeap(HeapParams(heap_kib, 10.0, 2.0, 1000.0, 0.5), HostCores(2))


def collections_within(h: ClientHeap, sends: int) -> int:
    for i in range(sends):
        h.allocate(i * 100.0)
    return len(h.pauses)


def test_a_young_collection_comes_when_the_sends_have_allocated_the_young_generation() -> None:
    h = heap()  # young at most 60% of 10,000 KiB: 600 sends of 10 KiB
    assert collections_within(h, 1200) == 2
    start, pause = h.pauses[0]
    assert start == pytest.approx(59_900.0) and pause == 1000.0  # nothing pending: nothing to copy
    # the pause is on every core: work ready during it waits for its end
    assert h.cores.run(60_000.0, 10.0) == pytest.approx(start + pause + 10.0)
    assert h.cores.run(60_000.0, 10.0) == pytest.approx(start + pause + 10.0)


def test_pending_sends_shrink_the_young_generation_and_are_copied() -> None:
    idle, busy = heap(), heap()
    for _ in range(3000):  # 6,000 KiB held, in the young generation until the first collection
        busy.hold()
    assert collections_within(idle, 3000) == 5
    # the first after 600 sends, then the 3,000 promoted or surviving leave 9,000 - 6,000 = 3,000 KiB:
    # one every 300 sends, twice as often
    assert collections_within(busy, 3000) == 1 + 8
    # the first copies the 3,000 pending sends allocated since the start (6,000 KiB at 0.5 us)
    assert busy.pauses[0][1] == pytest.approx(1000.0 + 0.5 * 3000 * 2.0)
    # later ones only the survivor space (young / 8 = 750 KiB: 375 sends; the others were promoted)
    assert busy.pauses[1][1] == pytest.approx(1000.0 + 0.5 * 375 * 2.0)
    assert busy.promoted == 3000 - 187 and busy.survivors == 187  # the second's survivor space: 375 KiB


def test_a_released_send_is_no_longer_copied() -> None:
    h = heap()
    epochs = [h.hold() for _ in range(100)]
    for e in epochs[:60]:
        h.release(e)
    h.collect(0.0, h.params.young_kib(h.pending))
    assert h.pauses[0][1] == pytest.approx(1000.0 + 0.5 * 40 * 2.0)


def test_promoted_sends_that_end_stay_in_the_old_generation_until_a_full_collection() -> None:
    # G1 promotes what outlives the survivor space; once ended it is garbage in the old generation that
    # only a marking cycle or a full collection frees: a backlog fills the heap with it
    h = ClientHeap(HeapParams(10_000.0, 10.0, 2.0, 1000.0, 0.5, 0.6), HostCores(2))
    epochs = [h.hold() for _ in range(4000)]  # 8,000 KiB
    assert collections_within(h, 600) == 1  # survivor space 375 sends, 3,625 promoted
    for e in epochs[:3000]:  # the oldest end first: promoted ones, 6,000 KiB of garbage
        h.release(e)
    assert (h.promoted, h.survivors, h.old_dead_kib) == (625, 375, 6000.0)
    assert h.params.young_kib(h.held_kib()) == 1000.0  # 9,000 less the 2,000 live and the 6,000 dead
    for _ in range(1000):
        h.hold()
    collections_within(h, 100)  # 1,375 copied, 62 survive: the heap holds 10,000 KiB, more than 9,500
    assert h.full_collections == 1
    young, full = h.pauses[-2:]
    assert young[1] == pytest.approx(1000.0 + 0.5 * 1375 * 2.0)
    assert full == (pytest.approx(young[0] + young[1]), pytest.approx(0.6 * 2000 * 2.0))  # the live KiB
    assert h.held_kib() == 4000.0 and h.old_dead_kib == 0.0  # every live send compacted into the old


def test_sends_that_end_young_leave_no_garbage() -> None:
    h = heap()
    for _ in range(5):
        epochs = [h.hold() for _ in range(1000)]
        for e in epochs:
            h.release(e)
        collections_within(h, 600)
    assert h.old_dead_kib == 0.0 and h.full_collections == 0 and len(h.pauses) == 5


def overloaded(heap_mb: float) -> np.ndarray:
    """OK answers per 250 ms of a producer offered 24,000 async sends/s for 2 s where 2 processors at
    100 us a send do 20,000/s."""
    sc = scenario_from_mapping(
        {
            "name": "heap",
            "seed": 5,
            "cluster": {"brokers": ["broker-a"]},
            "producers": {
                "count": 1,
                "send_mode": {"async": 1},
                "processors": 2,
                "send_cpu_us": 100.0,
                "heap_mb": heap_mb,
                "heap_alloc_kib": 8.0,
                "heap_pending_kib": 2.0,
                "heap_pause_us": 3000.0,
                "heap_copy_us_per_kib": 0.5,
            },
            "workload": {"rate_steps": [[24_000.0, 2.0]], "arrival": "uniform", "tags": [], "keys": False},
            "brokers": {"default": {"latency": {"median_ms": 0.3, "sigma": 0.1, "spike_probability": 0.0}}},
        }
    )
    r = reference.simulate_producer(generate(sc), sc).results
    ok = np.asarray(r["status"]) == "SEND_OK"
    return np.bincount(np.asarray(r["end_ts_ms"])[ok] // 250, minlength=8)[:8]


def test_past_its_capacity_a_client_with_a_small_heap_does_less_and_less() -> None:
    plateau = overloaded(0.0)  # no collections: the host's 20,000/s, whatever the backlog
    assert plateau[1:] == pytest.approx(5000, abs=50)
    falling = overloaded(20.0)  # the backlog fills a 20 MB heap: collections take over the host
    assert falling[1] > 0.8 * plateau[1]
    assert falling[-1] < 0.75 * falling[1]
    assert np.all(np.diff(falling[1:]) <= 50)  # goodput only falls


def test_heap_needs_the_clients_cpu() -> None:
    raw: dict[str, Any] = {"name": "h", "producers": {"heap_mb": 64.0}}
    with pytest.raises(ScenarioError, match=r"producers.heap_mb needs producers.send_cpu_us > 0"):
        scenario_from_mapping(raw)


def test_calibration_reads_the_drivers_young_collections() -> None:
    runs = [read_run(RUNS + "a_low_async"), read_run(RUNS + "b_ramp_async_p1")]
    values = heap_values(runs, 1024.0, 2.0)
    assert values["producers.heap_pause_us"] == pytest.approx(3000.0)  # a_low: 2 collections, 6 ms
    # the ramp: 1,552,000 sends (with the warm-up) in 23 collections, 60% of 1 GiB between two
    assert values["producers.heap_alloc_kib"] == pytest.approx(0.6 * 1024 * 1024 / (1_552_000 / 23))
    assert 0.1 < values["producers.heap_copy_us_per_kib"] < 5.0
    assert values["producers.heap_pause_goal_ms"] == 200.0  # MaxGCPauseMillis's default: the driver set none
    assert heap_values(runs[:1], 1024.0, 2.0) == {}


def test_a_marking_cycle_frees_the_promoted_garbage_dead_at_its_start() -> None:
    # G1's concurrent marking (JDK 17): a cycle starts once the old generation holds
    # InitiatingHeapOccupancyPercent (45%) of the heap, marks from a snapshot at its start (SATB), and the
    # mixed collections after it free what was dead then; g1_backlog's cycles took 0.3-2.9 s
    h = ClientHeap(HeapParams(10_000.0, 10.0, 2.0, 1000.0, 0.5, 0.6, marking_us=1000.0), HostCores(2))
    epochs = [h.hold() for _ in range(4000)]
    assert collections_within(h, 600) == 1  # 375 survive, 3,625 promoted
    for e in epochs[:3000]:
        h.release(e)  # 6,000 KiB of garbage in the old generation: 8,000 KiB held, over 4,500
    h.allocate(100_000.0)
    assert (h.marking_end_us, h.marked_dead_kib) == (101_000.0, 6000.0)
    for e in epochs[3000:3500]:  # promoted sends that die during the cycle: live in its snapshot
        h.release(e)
    h.allocate(100_500.0)
    assert h.old_dead_kib == 7000.0 and h.markings == 0
    h.allocate(101_000.0)
    assert h.old_dead_kib == 1000.0 and h.markings == 1 and h.marking_end_us is None
    # the backlog that filled the heap without marking (the test above) now fits: no full collection
    for _ in range(1000):
        h.hold()
    for i in range(100):
        h.allocate(102_000.0 + i)
    assert h.full_collections == 0


def test_without_marking_only_a_full_collection_frees_the_old_generation() -> None:
    h = ClientHeap(HeapParams(10_000.0, 10.0, 2.0, 1000.0, 0.5, 0.6), HostCores(2))
    epochs = [h.hold() for _ in range(4000)]
    collections_within(h, 600)
    for e in epochs[:3000]:
        h.release(e)
    h.allocate(100_000.0)
    h.allocate(200_000.0)
    assert h.old_dead_kib == 6000.0 and h.marking_end_us is None and h.markings == 0


# G1's adaptive young sizing (producers.heap_pause_goal_ms; OpenJDK 17u, src/hotspot/share/gc/g1/g1Policy.cpp:
# young_list_target_lengths, calculate_young_list_target_length and G1YoungLengthPredictor::will_fit; the
# survival rate first predicted, 0.4, in g1SurvRateGroup.cpp's reset): after each collection the eden is the
# largest whose predicted copy, (100 / G1ConfidencePercent) x (100 + TargetPLABWastePct) / 100 = 2.2 times
# the predicted, fits the free regions outside the reserve beside it, and whose predicted pause fits
# MaxGCPauseMillis; g1_backlog's G1 kept its eden at about half the free heap outside the reserve
GIB_KIB = 1024.0 * 1024.0


def g1(goal_us: float = 200_000.0, **kw: float) -> HeapParams:
    return HeapParams(GIB_KIB, 10.0, 2.0, 3000.0, 0.5, 0.6, pause_goal_us=goal_us, **kw)


def test_g1_sizes_eden_so_that_its_copy_fits_the_free_heap_outside_the_reserve() -> None:
    p = g1()
    held = 0.4 * GIB_KIB  # free 60%, outside the 10% reserve 50%
    young, eden = p.g1_young_kib(held, 0.0, 0.5)
    assert eden == young == pytest.approx(0.5 * GIB_KIB / (1.0 + 2.2 * 0.5))  # 2.2 x 0.5 E <= 0.5 H - E
    assert p.young_kib(held) == pytest.approx(0.5 * GIB_KIB)  # the room left: twice as large
    # with nothing surviving it is the room (at most G1MaxNewSizePercent), as before
    assert p.g1_young_kib(0.0, 0.0, 0.0)[1] == pytest.approx(0.6 * GIB_KIB)
    # the pause goal: 3 ms fixed, 0.5 us a KiB of what is copied (the survivors and the eden's share)
    young, eden = g1(goal_us=23_000.0).g1_young_kib(held, 1000.0, 0.5)
    assert eden == pytest.approx((23_000.0 - 3000.0 - 0.5 * 1000.0) / (0.5 * 0.5))
    assert young == pytest.approx(eden + 1000.0)


def test_g1_keeps_its_minimum_young_generation_until_no_region_is_free() -> None:
    p = g1()
    young, eden = p.g1_young_kib(0.88 * GIB_KIB, 0.0, 0.3)  # nothing outside the reserve: G1NewSizePercent
    assert young == eden == pytest.approx(0.05 * GIB_KIB)
    young, eden = p.g1_young_kib(0.98 * GIB_KIB, 0.0, 0.3)  # less free than that: what is free
    assert young == eden == pytest.approx(0.02 * GIB_KIB)
    assert p.region_kib == 1024.0  # a 1 GiB heap's regions: 1 MiB
    assert not p.is_full(GIB_KIB - 1025.0) and p.is_full(GIB_KIB - 1023.0)  # full: no free region left
    assert not g1(goal_us=0.0).is_full(0.94 * GIB_KIB)  # without the sizing: full past 95%, as before


def test_near_the_reserve_g1_eats_into_it_by_at_most_its_smallest_young_generation() -> None:
    # JDK 17 G1Policy::calculate_young_target_length: the young generation (survivors included) as
    # sized while the free heap leaves the reserve (10%) beside it; else the free outside the reserve
    # and at most min(G1NewSizePercent, half the reserve) = 5% of the heap from within it; with no more
    # free than the reserve, at most what is free; the eden is what the survivors leave of it
    p = g1()
    survivors = 0.01 * GIB_KIB
    young, eden = p.g1_young_kib(0.7 * GIB_KIB, survivors, 0.3)  # 30% free: 20% outside the reserve
    assert young == pytest.approx(survivors + 0.2 * GIB_KIB / (1.0 + 2.2 * 0.3))  # as sized
    young, eden = p.g1_young_kib(0.88 * GIB_KIB, survivors, 0.3)  # 2% outside: the minimum, 5%
    assert young == pytest.approx(0.05 * GIB_KIB) and eden == pytest.approx(0.04 * GIB_KIB)
    young, eden = p.g1_young_kib(0.93 * GIB_KIB, survivors, 0.3)  # 7% free, inside the reserve
    assert young == pytest.approx(0.05 * GIB_KIB) and eden == pytest.approx(0.04 * GIB_KIB)
    young, eden = p.g1_young_kib(0.97 * GIB_KIB, survivors, 0.3)  # 3% free: the survivors leave 2%
    assert young == pytest.approx(0.03 * GIB_KIB) and eden == pytest.approx(0.02 * GIB_KIB)
    young, eden = p.g1_young_kib(0.99 * GIB_KIB - 512.0, 0.02 * GIB_KIB, 0.3)  # survivors over it
    assert eden == pytest.approx(p.region_kib)  # still one region while one is free


def fifo_backlog(goal_us: float) -> ClientHeap:
    """A heap of 1 GiB through 400,000 sends of 10 KiB allocated, each pending (2 KiB) until 100,000 later
    ones have come (a backlog of 200 MiB, the oldest ending first, as an executor's queue serves it)."""
    h = ClientHeap(g1(goal_us), HostCores(2))
    held: deque[int] = deque()
    for i in range(400_000):
        h.allocate(i * 10.0)
        held.append(h.hold())
        if len(held) > 100_000:
            h.release(held.popleft())
    return h


def test_a_backlog_makes_g1_collect_more_often_with_a_smaller_eden() -> None:
    room, sized = fifo_backlog(0.0), fifo_backlog(200_000.0)
    sends = [round(start / 10.0) for start, _ in sized.pauses]
    # the first eden: 90% of the heap over 1 + 2.2 x 0.4 (the survival rate G1 starts from), 490 MiB
    assert sends[0] == pytest.approx(0.9 * GIB_KIB / (1.0 + 2.2 * 0.4) / 10.0, abs=1)
    # it copied every send allocated (2 KiB of 10 still pending): survival 0.7 x 0.4 + 0.3 x 0.2 = 0.34;
    # the survivor space (young / 8) keeps 61 MiB, 37 MiB are promoted: the next eden is what is free
    # outside the reserve, (1 GiB - 98 MiB) - 102 MiB, over 1 + 2.2 x 0.34
    assert sized.survival == pytest.approx(0.2, abs=0.02)
    free_outside_reserve = 0.9 * GIB_KIB - sends[0] * 2.0
    assert sends[1] - sends[0] == pytest.approx(free_outside_reserve / (1.0 + 2.2 * 0.34) / 10.0, abs=2)
    # the room rule takes 60% of the heap until the promoted backlog leaves less: fewer, larger edens
    assert room.pauses[0][0] / 10.0 == pytest.approx(0.6 * GIB_KIB / 10.0, abs=1)
    assert len(sized.pauses) >= 1.5 * len(room.pauses)
