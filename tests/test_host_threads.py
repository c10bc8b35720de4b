"""A fair host counting threads, not pieces, beside a piece (``producers.host_counts = "threads"``): the
broker's pieces on the threads that run them, a held rest on its own thread. docs/validation.md, "Threads,
not pieces, beside the client's pauses"."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import pytest

from rocketsim.broker.queue import BrokerStore, StoreCluster, StoreParams
from rocketsim.calibration.thread_split import ThreadSplit, split_values
from rocketsim.client.host import FairShareHost, shared_host
from rocketsim.scenario import ScenarioError, scenario_from_mapping

WRITER = ("writer", 0)


def _held_writer(count_threads: bool) -> FairShareHost:
    """A 2-core host whose writer runs two pieces of 1,000 us back to back from 0, and a stall of the host
    over [500, 1,500) placed after them: the first piece's 500 us in it run from 1,500 as its rest, over
    its thread's second piece (booked over [1,000, 2,000) before the stall)."""
    h = FairShareHost(2, count_threads=count_threads)
    assert h.place(0.0, 1000.0, WRITER) == (0.0, 1000.0)
    assert h.place(1000.0, 1000.0, WRITER) == (1000.0, 2000.0)
    h.stop_all(500.0, 1000.0)
    return h


def test_a_held_rest_beside_its_threads_next_piece_is_one_runnable_thread() -> None:
    # at 1,600 the writer runs its second piece and its first piece's rest: one thread (CFS counts the
    # thread with work once), so another piece then has a core of its own (2 cores, 2 threads)
    assert _held_writer(True).place(1600.0, 1000.0, ("other", 0)) == (1600.0, 2600.0)
    # counted as pieces, the rest is one more thread beside it: 2/3 of a core
    assert _held_writer(False).place(1600.0, 1000.0, ("other", 0)) == pytest.approx((1600.0, 3100.0))


def test_an_unnamed_piece_is_still_a_thread_of_its_own() -> None:
    # a piece placed without its thread: its rest cannot be told from another thread's, so it counts
    h = FairShareHost(2, count_threads=True)
    h.place(0.0, 1000.0)
    h.place(1000.0, 1000.0)
    h.stop_all(500.0, 1000.0)
    assert h.place(1600.0, 1000.0, ("other", 0)) == pytest.approx((1600.0, 3100.0))


class _Recorder:
    """A host that runs each piece at once on a core of its own and records its thread."""

    def __init__(self) -> None:
        self.free_us: dict[Hashable, float] = {}
        self.threads: list[Hashable] = []

    def place(self, ready_us: float, work_us: float, thread: Hashable = None) -> tuple[float, float]:
        self.threads.append(thread)
        return ready_us, ready_us + work_us

    def run(self, ready_us: float, work_us: float, thread: Hashable = None) -> float:
        return self.place(ready_us, work_us, thread)[1]


def _params(**kw: Any) -> StoreParams:
    base: dict[str, Any] = dict(
        append_us=1000.0, send_threads=2, capacity=100, wait_ms=200, busy_timeout_ms=1000, extra_us=0
    )
    base.update(pc_code=1, io_us=6.0, reply_us=1.0, codec_share=0.5, unlocked_share=0.5, reput_share=0.1)
    base.update(kw)
    return StoreParams(**base)


@pytest.mark.parametrize("named", [False, True])
def test_the_brokers_pieces_run_on_their_connection_and_send_threads(named: bool) -> None:
    # rocketmq-all-4.9.8 NettyServerConfig: a channel on one of serverSelectorThreads (3) and one codec
    # thread of serverWorkerThreads (8); BrokerConfig.sendMessageThreadPoolNums min(processors, 4): the
    # request taken by the send thread free the earliest
    host = _Recorder()
    store = BrokerStore(_params(), 0, cores=host, named_threads=named)  # type: ignore[arg-type]
    first, second = store.connection(), store.connection()
    store.read_request(first, 0.0)
    store.read_request(second, 0.0)
    for arrival in (10, 20, 30):  # 1 KiB requests taken at once by the two send threads in turn
        store.offer_us(arrival, 1024)
    if not named:
        assert set(host.threads) == {None, WRITER, ("reput", 0)}
        return
    reads = [("broker selector", 0, 0), ("broker codec", 0, 0), ("broker codec", 0, 0)]
    reads += [("broker selector", 0, 1), ("broker codec", 0, 1), ("broker codec", 0, 1)]
    assert host.threads[:6] == reads  # read, decode, the answer's write on the codec thread
    sends = [t for t in host.threads[6:] if t[0] == "broker send"]
    assert sends == [("broker send", 0, 0), ("broker send", 0, 1), ("broker send", 0, 0)]
    assert None not in host.threads


def _scenario(counts: str, scheduler: str = "fair") -> Any:
    return scenario_from_mapping(
        {
            "producers": {
                "processors": 2,
                "send_cpu_us": 10.0,
                "shared_host": True,
                "host_scheduler": scheduler,
                "host_counts": counts,
            },
            "brokers": {"coupling": "joint", "default": {"store": {"on_producer_host": True, "io_us": 5.0}}},
        }
    )


def test_the_key_reaches_the_host_and_the_stores() -> None:
    for counts in ("pieces", "threads"):
        sc = _scenario(counts)
        host = shared_host(sc)
        assert isinstance(host, FairShareHost) and host.count_threads == (counts == "threads")
        stores = StoreCluster.from_scenario(sc, host).stores
        assert [s.named_threads for s in stores] == [counts == "threads"] * len(stores)
    with pytest.raises(ScenarioError, match="producers.host_counts"):
        _scenario("threads", "fifo")
    assert scenario_from_mapping({}).producers.host_counts == "pieces"  # every shipped table as it was


def test_the_thread_split_counts_threads() -> None:
    split = ThreadSplit({}, 0.5, {}, 0.2, 2)
    values = {"producers.send_cpu_us": 10.0, "brokers.default.store.io_us": 4.0}
    values["brokers.default.store.append_us"] = 2.0
    assert split_values(values, split, 2048.0)["producers.host_counts"] == "threads"


def _host_with_slow_others(**kw: Any) -> FairShareHost:
    """A 2-core host with four of the broker's pieces over [0, 10,000) at a quarter of a core each (placed
    while the client's threads ran beside them): one core of the two."""
    h = FairShareHost(2, client_stops=True, **kw)
    for _ in range(4):
        h._others_running.add(0.0, 10_000.0)
        h._pieces.append(0.0, 10_000.0, 0.25, False, ("broker send", 0, 0))
    return h


def test_the_collector_takes_the_cores_the_others_pieces_leave() -> None:
    # "client_left": the four take the one core they were placed at; the other is the two collector threads'
    # (half a core each): 3,000 us each by 6,000
    assert _host_with_slow_others(pause_left=True).stop_client(0.0, 3000.0, 2) == (0.0, 6000.0)
    # "client_over": a third of a core each beside the four counted as threads: 9,000
    assert _host_with_slow_others(pause_over=True).stop_client(0.0, 3000.0, 2) == (0.0, 9000.0)


def test_the_collector_keeps_at_least_its_fair_share_and_speeds_up_as_the_others_end() -> None:
    h = FairShareHost(2, client_stops=True, pause_left=True)
    for end in (1000.0, 20_000.0):  # two pieces at a core each: none left, the fair share (half a core)
        h._others_running.add(0.0, end)
        h._pieces.append(0.0, end, 1.0, False, ("other", 0))
    # half a core each until 1,000 (500 done), then beside one piece at a core: (2 - 1) / 2 = half, at
    # least 2/3 (the fair share beside one): 2,500 more take 3,750 -> 4,750
    assert h.stop_client(0.0, 3000.0, 2) == pytest.approx((0.0, 4750.0))


def test_the_client_left_pause_reaches_the_host() -> None:
    mapping = {
        "producers": {
            "processors": 2,
            "send_cpu_us": 10.0,
            "shared_host": True,
            "host_scheduler": "fair",
            "heap_mb": 64.0,
            "heap_stops": "client_left",
        },
        "brokers": {"coupling": "joint"},
    }
    host = shared_host(scenario_from_mapping(mapping))
    assert isinstance(host, FairShareHost) and host.pause_left and not host.pause_over
