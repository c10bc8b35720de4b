"""A client collection's pause sharing the host's cores with the other processes' threads over its length
(``producers.heap_stops = "client_over"``, ``FairShareHost.pause_over``): docs/validation.md, "The
client's pauses under the backlog: the collector's share of the cores"."""

from __future__ import annotations

from typing import Any

import pytest

from rocketsim.client.heap import client_heap
from rocketsim.client.host import FairShareHost, shared_host
from rocketsim.client.host_books import RunningPieces
from rocketsim.scenario import ScenarioError, scenario_from_mapping


def _host_with_others(pause_over: bool) -> FairShareHost:
    """A 2-core host whose broker runs four pieces from 0: two of 1,000 us (each alone on a core at its
    start: they end at 1,000) and two of 10,000 us placed beside them (at 2/3 and 1/2 of a core)."""
    h = FairShareHost(2, client_stops=True, pause_over=pause_over)
    for work in (1000.0, 1000.0, 10_000.0, 10_000.0):
        h.place(0.0, work)
    return h


def test_the_share_at_the_start_holds_for_the_whole_pause() -> None:
    # heap_stops = "client": two collector threads of 3,000 us each beside the four pieces at its start,
    # 2 cores over 6 threads all the way: 9,000 us
    assert _host_with_others(False).stop_client(0.0, 3000.0, 2) == (0.0, 9000.0)


def test_over_the_pause_the_collector_takes_the_cores_the_others_leave_as_they_end() -> None:
    # "client_over": a third of a core each until two pieces end at 1,000 (333 us done), then half a
    # core each beside the two left: the other 2,667 us take 5,333 -> 6,333
    start, end = _host_with_others(True).stop_client(0.0, 3000.0, 2)
    assert start == 0.0 and end == pytest.approx(6333.33, abs=0.01)


def test_over_the_pause_pieces_booked_to_start_in_it_slow_it() -> None:
    h = FairShareHost(2, client_stops=True, pause_over=True)
    for _ in range(4):  # four of the broker's pieces booked ahead, running from 2,000 to 4,000
        h._others_running.add(2000.0, 4000.0)
    # a core each until 2,000 (2,000 us done), a third each while the four run (667 us by 4,000), then a
    # core each again: 4,333
    assert h.stop_client(0.0, 3000.0, 2) == pytest.approx((0.0, 4333.33), abs=0.01)
    alone = FairShareHost(2, client_stops=True)
    for _ in range(4):
        alone._others_running.add(2000.0, 4000.0)
    assert alone.stop_client(0.0, 3000.0, 2) == (0.0, 3000.0)  # the start's share: none beside it yet


def test_before_the_engines_clock_the_share_is_the_clocks() -> None:
    h = _host_with_others(True)
    h.advance(2000.0)  # the two short pieces forgotten; two left beside the pause
    # placed at 0 behind the clock: half a core each from 0 (the count at the clock), 3,000 us by 6,000
    assert h.stop_client(0.0, 3000.0, 2) == pytest.approx((0.0, 6000.0))


def test_the_books_changes_after_a_time_in_order() -> None:
    books = RunningPieces()
    for lo, hi in (0.0, 5.0), (2.0, 3.0), (4.0, 9.0):
        books.add(lo, hi)
    assert list(books.changes_after(2.0)) == [(3.0, -1), (4.0, 1), (5.0, -1), (9.0, -1)]
    assert list(books.changes_after(9.0)) == []


def _scenario(stops: str, scheduler: str = "fair") -> Any:
    return scenario_from_mapping(
        {
            "producers": {
                "processors": 2,
                "send_cpu_us": 10.0,
                "shared_host": True,
                "host_scheduler": scheduler,
                "heap_mb": 64.0,
                "heap_stops": stops,
            },
            "brokers": {"coupling": "joint"},
        }
    )


def test_the_key_makes_the_client_stop_alone_and_share_over_the_pause() -> None:
    for stops, alone, over in ("host", False, False), ("client", True, False), ("client_over", True, True):
        sc = _scenario(stops)
        host = shared_host(sc)
        assert isinstance(host, FairShareHost)
        assert (host.client_stops, host.pause_over) == (alone, over)
        jvm = client_heap(sc, host)
        assert jvm is not None and jvm.params.collector_threads == (2 if alone else 0)
    with pytest.raises(ScenarioError, match="producers.heap_stops needs producers.host_scheduler"):
        _scenario("client_over", "fair_conserving")
    with pytest.raises(ValueError, match="needs client_stops"):
        FairShareHost(2, pause_over=True)
