"""G1's start-up predictions (rocketsim.client.g1_predictions) and the young generation they size
(rocketsim.client.heap, ``g1_workers``): a JVM starts from its smallest young generation and grows it as
its predictions learn what a collection costs.

OpenJDK 17u: src/hotspot/share/gc/g1/g1Analytics.cpp (``cost_per_byte_ms_defaults``,
``constant_other_time_ms_defaults``, ``young_other_cost_per_region_ms_defaults`` by
min(ParallelGCThreads - 1, 7), seeded in ``G1Analytics::G1Analytics``), g1Predictions.hpp
(``G1Predictions::predict``, ``stddev_estimate``: sigma = G1ConfidencePercent / 100 = 0.5, the deviation at
least davg x (5 - samples) / 2 under five samples), utilities/numberSeq.cpp (``AbsSeq::add``, alpha 0.7),
g1SurvRateGroup.cpp (``reset``: 0.4). tests/data/realbroker-reruns/g1_backlog/hold_*.gclog: JDK 17's G1
on a 1 GiB heap ran its first seven young collections at 44-51 MiB, then grew its eden over ten more.
"""

from __future__ import annotations

from collections import deque

import pytest

from rocketsim.client.g1_predictions import DecayingSeq, G1Analytics, seeded
from rocketsim.client.heap import ClientHeap, HeapParams
from rocketsim.client.host import HostCores

GIB_KIB = 1024.0 * 1024.0
MIN_YOUNG_KIB = 0.05 * GIB_KIB  # G1NewSizePercent


def test_a_prediction_is_the_decaying_average_plus_half_a_deviation_twice_the_average_at_first() -> None:
    seq = seeded(10.0)
    assert seq.predict() == pytest.approx(20.0)  # one sample: deviation 2 x davg, + 0.5 of it
    seq.add(4.0)  # davg 0.3 x 4 + 0.7 x 10 = 8.2; the deviation at least 1.5 x davg with two samples
    assert seq.davg == pytest.approx(8.2)
    assert seq.dvariance == pytest.approx(0.3 * 4.2**2)
    assert seq.predict() == pytest.approx(8.2 + 0.5 * 1.5 * 8.2)
    for _ in range(60):  # from five samples on the decaying deviation alone: it fades with the past
        seq.add(4.0)
    assert seq.predict() == pytest.approx(4.0, rel=1e-4)
    assert DecayingSeq().predict() == 0.0


def test_g1_starts_from_its_defaults_for_its_stop_the_world_threads() -> None:
    costs = G1Analytics(2).predicted()  # index 1: 0.00003 ms a byte, 5 ms, 0.2 ms a region, 0.4 survive
    assert costs.copy_us_per_kib == pytest.approx(2 * 0.00003 * 1000 * 1024)
    assert costs.fixed_us == pytest.approx(2 * 5000.0)
    assert costs.per_region_us == pytest.approx(2 * 200.0)
    assert costs.survival == pytest.approx(0.8)  # 0.4 + 0.5 x 0.8, within [0, 1]
    assert G1Analytics(1).predicted().copy_us_per_kib == pytest.approx(2 * 0.00006 * 1000 * 1024)
    assert G1Analytics(20).predicted().copy_us_per_kib == pytest.approx(2 * 0.000009 * 1000 * 1024)


class StretchingHost(HostCores):
    """Two cores on which a client-only pause's wall is ``stretch`` times its threads' share (other
    processes' threads beside its collector threads)."""

    def __init__(self, stretch: float) -> None:
        super().__init__(2)
        self.stretch = stretch

    def stop_client(self, at_us: float, work_us: float, threads: int) -> tuple[float, float]:
        return at_us, at_us + work_us * self.stretch


def backlog_heap(
    workers: int, stretch: float | None = None, sends: int = 400_000
) -> tuple[ClientHeap, list[float]]:
    """1 GiB, 10 KiB allocated a send, each pending (2 KiB) until 20,000 later ones have come; the eden
    after each collection. ``stretch``: the pauses stop the client only, their walls that many times
    their threads' share."""
    params = HeapParams(GIB_KIB, 10.0, 2.0, 3000.0, 0.5, 0.6, pause_goal_us=200_000.0, g1_workers=workers)
    host = HostCores(2)
    if stretch is not None:
        params = HeapParams(**{**params.__dict__, "collector_threads": 2})
        host = StretchingHost(stretch)
    h = ClientHeap(params, host)
    held: deque[int] = deque()
    edens = []
    for i in range(sends):
        count = len(h.pauses)
        h.allocate(i * 10.0)
        if len(h.pauses) > count:
            edens.append(h.eden_kib)
        held.append(h.hold())
        if len(held) > 20_000:
            h.release(held.popleft())
    return h, edens


def test_g1_starts_at_its_smallest_young_generation_and_grows_it_as_it_learns() -> None:
    warm, edens = backlog_heap(workers=2)
    cold, cold_edens = backlog_heap(workers=0)
    # the first collection after the minimum young generation (the default predictions: 10 ms fixed,
    # 61 us a KiB of 80% of eden, far over 200 ms), where the calibrated costs allowed 490 MiB
    assert warm.pauses[0][0] / 10.0 == pytest.approx(MIN_YOUNG_KIB / 10.0, abs=1)
    assert cold.pauses[0][0] / 10.0 == pytest.approx(0.9 * GIB_KIB / (1 + 2.2 * 0.4) / 10.0, abs=1)
    # five collections at the minimum (less the survivors), then growing while the copy cost's
    # prediction falls from 61 to the calibrated 0.5 us a KiB
    small = [e for e in edens if e <= MIN_YOUNG_KIB]
    assert len(small) == 5 and edens[:5] == small
    assert all(b > a for a, b in zip(edens[4:12], edens[5:13], strict=True))
    # and, learnt, the eden the calibrated costs give
    assert edens[-1] == pytest.approx(cold_edens[-1], rel=0.02)
    assert len(warm.pauses) >= 2 * len(cold.pauses)
    assert warm.analytics is not None
    # its copy cost's average: the calibrated one and what is left of the default's 30.7 us a KiB after
    # a sample a collection, each with the weight 0.3
    assert warm.analytics.copy.davg == pytest.approx(0.5 + (30.72 - 0.5) * 0.7 ** len(warm.pauses))


def test_g1_learns_its_pauses_walls_so_stretched_pauses_keep_its_eden_smaller() -> None:
    quick, quick_edens = backlog_heap(workers=2, stretch=1.0)
    slow, slow_edens = backlog_heap(workers=2, stretch=6.0)
    # two threads, a wall of the work / 2: G1 measures 0.25 us a KiB; stretched 6 times, 1.5 (and what is
    # left of the default's 30.7)
    assert quick.analytics is not None and slow.analytics is not None
    assert quick.analytics.copy.davg == pytest.approx(0.25, abs=0.1)
    assert slow.analytics.copy.davg == pytest.approx(1.5, abs=0.1)
    assert slow_edens[15] < 0.75 * quick_edens[15]
    assert len(slow.pauses) > len(quick.pauses)
