"""G1's concurrent marking as its threads' CPU on the shared host (``producers.heap_marking_on_host``,
rocketsim.client.heap): a cycle costs a part per cycle and a part per KiB live in the old generation, run by
``ConcGCThreads`` threads runnable beside every other thread until it is done.

HotSpot (OpenJDK 17u, src/hotspot/share/gc/g1/): ``G1ConcurrentMark::G1ConcurrentMark`` sizes its workers
``ConcGCThreads`` = ``scale_concurrent_worker_threads(ParallelGCThreads)`` = max((ParallelGCThreads + 2) / 4,
1), one on the harness's 2 processors; ``G1Policy::need_to_start_conc_mark`` starts a cycle once the old
generation is over the initiating occupancy (``InitiatingHeapOccupancyPercent``, 45); its threads join the
``SuspendibleThreadSet``, so a pause (a safepoint) stops them. The cost: G1_Conc's CPU in
tests/data/realbroker-reruns/g1_backlog (the harness's driver JVM holding 50,000, 100,000, 231,070 pending
sends): 0.53, 0.52, 1.41 s over 7, 5, 9 cycles with 129, 259, 560-598 MiB live.
"""

from __future__ import annotations

import pytest

from rocketsim.client.heap import (
    MARKING_CYCLE_US,
    MARKING_US_PER_KIB,
    ClientHeap,
    HeapParams,
    client_heap,
    conc_gc_threads,
)
from rocketsim.client.host import G1_CONCURRENT, FairShareHost, is_client_thread
from rocketsim.scenario import ScenarioError, scenario_from_mapping

START_US = 100_000.0


def marking_heap(host: FairShareHost, threads: int = 1) -> ClientHeap:
    """A 10,000 KiB heap (2 KiB a pending send, next to nothing allocated a send, so no collection comes)
    whose old generation holds 1,000 live sends and 6,000 KiB of garbage: over 45%, a cycle starts."""
    h = ClientHeap(HeapParams(10_000.0, 0.001, 2.0, 1000.0, 0.5, 0.6, marking_threads=threads), host)
    epochs = [h.hold() for _ in range(4000)]
    h.collect(0.0, 2000.0)  # 125 to the survivor space, the rest promoted
    for e in epochs[:3000]:
        h.release(e)
    assert h.old_dead_kib == 6000.0
    return h


def cycle_end(h: ClientHeap, every_us: float = 100.0) -> float:
    """Allocate every ``every_us`` from START_US until the cycle under way has ended: when."""
    t = START_US
    while h.markings == 0:
        h.allocate(t)
        t += every_us
        assert t < START_US + 5e6
    return t - every_us


def test_a_cycle_costs_its_fixed_part_and_the_live_old_generation() -> None:
    # 1,000 live sends outside the eden (2,000 KiB): 55 ms + 0.168 us a KiB, on one thread of an idle
    # host in 1 ms pieces; the garbage dead at the start is freed at the end, as with a cycle's length
    h = marking_heap(FairShareHost(2))
    end = cycle_end(h)
    cpu = MARKING_CYCLE_US + MARKING_US_PER_KIB * 2000.0
    assert h.marking_cpu_us == pytest.approx(cpu)
    assert end - START_US == pytest.approx(cpu, rel=0.01)
    assert h.old_dead_kib == 0.0 and h.markings == 1 and h.marking_left_us is None


def test_the_cycle_takes_the_share_the_host_gives_its_thread() -> None:
    # three threads of the broker's busy throughout: the marking thread is the fourth on 2 cores, half of
    # one, and the cycle takes twice its CPU; a piece placed while it runs is one more thread beside
    idle = cycle_end(marking_heap(FairShareHost(2))) - START_US
    busy = FairShareHost(2)
    for i in range(3):
        busy.place(START_US, 1e6, ("writer", i))
    h = marking_heap(busy)
    assert cycle_end(h) - START_US == pytest.approx(2 * idle, rel=0.02)

    without = FairShareHost(2)
    for i in range(3):
        without.place(START_US, 1e6, ("writer", i))
    marking = FairShareHost(2)
    for i in range(3):
        marking.place(START_US, 1e6, ("writer", i))
    h = marking_heap(marking)
    for k in range(5):
        h.allocate(START_US + 100.0 * k)  # the cycle under way: its thread is runnable
    at = START_US + 500.0
    assert without.run(at, 100.0, (0, "worker")) - at == pytest.approx(200.0)  # 4 threads on 2 cores
    assert marking.run(at, 100.0, (0, "worker")) - at == pytest.approx(250.0)  # 5


def test_a_pause_of_the_client_stops_its_marking_threads() -> None:
    # the marking threads are the client JVM's: a collection's pause (heap_stops = "client") holds them,
    # while a broker's thread runs on
    assert is_client_thread((G1_CONCURRENT, 0)) and not is_client_thread(("writer", 0))
    idle = cycle_end(marking_heap(FairShareHost(2, client_stops=True))) - START_US
    host = FairShareHost(2, client_stops=True)
    h = marking_heap(host)
    h.allocate(START_US)
    start, end = host.stop_client(START_US + 10_000.0, 20_000.0, 2)  # two collector threads, 20 ms each
    assert cycle_end(h) - START_US == pytest.approx(idle + (end - start), rel=0.02)
    assert host.run(START_US + 20_000.0, 100.0, ("writer", 0)) < end


def test_two_marking_threads_split_the_cycle() -> None:
    one = cycle_end(marking_heap(FairShareHost(4), threads=1)) - START_US
    two = cycle_end(marking_heap(FairShareHost(4), threads=2)) - START_US
    assert two == pytest.approx(one / 2, rel=0.03)


def test_concgcthreads_by_processors() -> None:
    # ParallelGCThreads: every processor up to 8, then 5/8 of the rest; ConcGCThreads a quarter, rounded
    assert [conc_gc_threads(n) for n in (1, 2, 4, 8, 16, 64)] == [1, 1, 1, 2, 3, 11]


def scenario(**producers: object) -> dict:
    return {
        "name": "marking",
        "cluster": {"brokers": ["broker-a"]},
        "brokers": {"coupling": "joint"},
        "producers": {"send_cpu_us": 10.0, "heap_mb": 64, **producers},
        "workload": {"messages": 10},
    }


def test_the_key_needs_the_shared_host_and_the_heap() -> None:
    with pytest.raises(ScenarioError, match="heap_marking_on_host"):
        scenario_from_mapping(scenario(heap_marking_on_host=True))
    sc = scenario_from_mapping(scenario(heap_marking_on_host=True, shared_host=True, processors=2))
    assert client_heap(sc, FairShareHost(2)).params.marking_threads == 1  # type: ignore[union-attr]
    sc = scenario_from_mapping(scenario(shared_host=True, processors=2))
    assert client_heap(sc, FairShareHost(2)).params.marking_threads == 0  # type: ignore[union-attr]


def most_held(median_ms: float, monkeypatch: pytest.MonkeyPatch) -> int:
    """The most sends a producer's heap held at once, 2,000 async sends/s for 1 s answered after
    ``median_ms``."""
    from rocketsim.engine import reference
    from rocketsim.scenario.workload import generate

    most = [0]
    hold = ClientHeap.hold

    def counted(self: ClientHeap) -> int:
        epoch = hold(self)
        most[0] = max(most[0], self.pending)
        return epoch

    monkeypatch.setattr(ClientHeap, "hold", counted)
    raw = scenario(send_mode={"async": 1}, processors=2, count=1)
    raw["brokers"] = {"default": {"latency": {"median_ms": median_ms, "sigma": 0.01, "spike_probability": 0}}}
    raw["workload"] = {"rate_steps": [[2000.0, 1.0]], "arrival": "uniform", "tags": [], "keys": False}
    sc = scenario_from_mapping(raw)
    reference.simulate_producer(generate(sc), sc)
    return most[0]


def test_the_heap_holds_the_sends_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    # what a backlog holds once the client's Netty worker is the thread that queues: the sends written and
    # not yet answered. rocketmq-all-4.9.8 NettyRemotingAbstract.invokeAsyncImpl takes a semaphoreAsync
    # permit (clientAsyncSemaphoreValue 65,535) and keeps the ResponseFuture (its request, the callback that
    # holds the Message) in responseTable until processResponseCommand reads the answer or scanResponseTable
    # times it out; DefaultMQProducerImpl.send(msg, callback, timeout) submits the send to the async sender
    # executor first (its queue holds the Message too). The model's heap holds a send from its due time to
    # its end (EventLoop.start, advance), so every one of these is live: ~2,000/s x 0.3 s in flight
    assert most_held(300.0, monkeypatch) == pytest.approx(600, rel=0.05)
    assert most_held(1.0, monkeypatch) < 10
