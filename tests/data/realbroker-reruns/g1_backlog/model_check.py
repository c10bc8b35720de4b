"""The model's heap (rocketsim.client.heap) driven as G1Backlog drives the JVM's: 1,000,000 sends, 8.9 KiB
allocated a send, a pending send of 2.65 KiB, the backlog growing 0.44 a send up to HOLD, the oldest
ending first; its young and full collections and what they copy, to set beside results.txt.
Run from the project's root: python tests/data/realbroker-reruns/g1_backlog/model_check.py"""

from collections import deque

from rocketsim.client.heap import ClientHeap, HeapParams
from rocketsim.client.host import HostCores

PENDING_KIB = 597 * 1024 / 231_070  # live after a full collection with 231,070 held
for hold in (50_000, 100_000, 231_070):
    # pause 0 and 1 us a KiB: a pause's length is the KiB it copied (young) or compacted (full)
    heap = ClientHeap(HeapParams(1024 * 1024.0, 6.25 + PENDING_KIB, PENDING_KIB, 0.0, 1.0, 1.0), HostCores(2))
    held: deque[int] = deque()
    owed = 0.0
    full_kib = 0.0
    for i in range(1_000_000):
        fulls = heap.full_collections
        heap.allocate(float(i))
        if heap.full_collections > fulls:
            full_kib += heap.pauses[-1][1]
        owed += 1.44
        while owed >= 1.0:
            held.append(heap.hold())
            owed -= 1.0
        while len(held) > hold:
            heap.release(held.popleft())
    young = len(heap.pauses) - heap.full_collections
    copied = sum(p for _, p in heap.pauses) - full_kib
    print(
        f"backlog {hold}: {young} young, {heap.full_collections} full; young {copied / 1024:.0f} MiB copied; "
        f"full {full_kib / 1024:.0f} MiB live"
    )
