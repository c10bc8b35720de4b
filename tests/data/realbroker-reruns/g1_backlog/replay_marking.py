"""G1's concurrent marking on the host (producers.heap_marking_on_host) under c_overload_async_p2_72000's
measured backlog (replay_c_overload.py's sends: each held for its outcome's measured latency in its second),
on a fair host of 2 cores where ``RUNNABLE`` other threads always want a core (the per-thread rerun
ov_72000 had 10.7 runnable on average in its overloaded seconds), beside the driver's G1 threads measured
there (tests/data/realbroker-reruns/threads/runs/ov_72000.summary.json, seconds [3, 9) after t0): the
concurrent group (G1 Conc, Refine, Service) 0.151 cores, 0.93 threads runnable on average; the collector's
pauses (GC Thread) 0.289 cores. Per second of the run: the marking threads' CPU, the share of the second a
cycle was under way, the cycles ended, the young / full collections and their pause ms.
Run from the project's root: python tests/data/realbroker-reruns/g1_backlog/replay_marking.py [RUNNABLE]
(default 9; ~1 minute)."""

import heapq
import sys
from collections import defaultdict

from replay_c_overload import sends

from rocketsim.client.heap import ClientHeap, HeapParams
from rocketsim.client.host import FairShareHost

RUNNABLE = int(sys.argv[1]) if len(sys.argv) > 1 else 9
PIECE_US = 500.0  # the other threads' CPU placed a piece at a time


def main() -> None:
    host = FairShareHost(2)
    params = HeapParams(1024 * 1024.0, 9.3237, 3.0498, 3000.0, 0.5278, 0.6333, 0, 0.0, 200_000.0, 2, 1)
    heap = ClientHeap(params, host)
    others = [0.0] * RUNNABLE
    cpu, busy, ended = defaultdict(float), defaultdict(float), defaultdict(int)
    due, end = sends()
    ends: list[tuple[float, int]] = []
    last_t, last_cpu, last_cycles = 0.0, 0.0, 0
    for t, e in zip(due.tolist(), end.tolist(), strict=True):
        host.advance(t)
        for i, free in enumerate(others):
            if free <= t:
                others[i] = host.run(t, PIECE_US, ("other", i))
        while ends and ends[0][0] <= t:
            heap.release(heapq.heappop(ends)[1])
        heap.allocate(t)
        heapq.heappush(ends, (e, heap.hold()))
        second = int(t // 1e6)
        cpu[second] += heap.marking_cpu_us - last_cpu
        if heap.marking_left_us is not None or heap.markings > last_cycles:
            busy[second] += t - last_t
        ended[second] += heap.markings - last_cycles
        last_t, last_cpu, last_cycles = t, heap.marking_cpu_us, heap.markings
    pauses = defaultdict(list)
    for start, length in heap.pauses:
        pauses[int(start // 1e6)].append(length)
    print(
        f"{RUNNABLE} other threads runnable: {heap.markings} cycles, {heap.marking_cpu_us / 1e6:.2f} s of "
        f"marking CPU; {len(heap.pauses) - heap.full_collections} young, {heap.full_collections} full, "
        f"{sum(p for _, p in heap.pauses) / 1e6:.2f} s of pauses"
    )
    print("sec  marking CPU ms, share of the second under way, cycles ended | collections, pause ms")
    for s in sorted(set(cpu) | set(pauses)):
        print(
            f"{s:3d}  {cpu[s] / 1000:5.0f} {busy[s] / 1e6:5.2f} {ended[s]:2d} | {len(pauses[s]):3d} "
            f"{sum(pauses[s]) / 1000:5.0f}"
        )


if __name__ == "__main__":
    main()
