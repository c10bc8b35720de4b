"""The model's heap (rocketsim.client.heap) driven as G1Backlog drives the JVM's: 1,000,000 sends, 8.9 KiB
allocated a send, a pending send of 2.65 KiB, the backlog growing 0.44 a send up to HOLD, the oldest
ending first, a send every 10 us (G1Backlog's 8.7-16.4 s a million sends); its young and full collections,
what they copy, and the young generation's size by the old generation's, beside G1's own (hold_*.csv).
Run from the project's root: python tests/data/realbroker-reruns/g1_backlog/model_check.py

Each backlog four ways: the young generation the room the old generation leaves (heap_pause_goal_ms 0),
G1's adaptive sizing (a 200 ms goal, MaxGCPauseMillis's default) from the calibrated costs, that from G1's
start-up predictions (its defaults for 2 stop-the-world threads, learning the calibrated costs collection
by collection: rocketsim.client.g1_predictions), and that with marking cycles of 1.0 s (heap_marking_ms,
the median of G1's cycles here), at the calibrated costs (3 ms a pause, 0.53 us a KiB copied, 0.63 a KiB
compacted). Also the first 20 edens (MiB), G1's and the model's."""

import csv
from collections import deque
from pathlib import Path

from rocketsim.client.heap import ClientHeap, HeapParams
from rocketsim.client.host import HostCores

HERE = Path(__file__).parent
PENDING_KIB = 597 * 1024 / 231_070  # live after a full collection with 231,070 held
OLD_BANDS = ((0, 300), (300, 600), (600, 800), (800, 1024))  # MiB held in the old generation
SETTINGS = {
    "room": (0.0, 0.0, 0),
    "g1 sizing": (200_000.0, 0.0, 0),
    "g1 sizing, start-up predictions": (200_000.0, 0.0, 2),
    "g1 sizing, start-up predictions + marking": (200_000.0, 1e6, 2),
}
FIRST = 20


def g1_figures(hold: int) -> tuple[int, int, list[float], list[float]]:
    """G1's young and full collections, its mean eden (MiB) by the old generation before them, and its
    first edens."""
    with open(HERE / f"hold_{hold}.csv") as f:
        rows = list(csv.DictReader(x for x in f if not x.startswith("#")))
    young = [r for r in rows if r["action"] == "end_of_minor_GC"]
    full = len(rows) - len(young)
    edens = [
        [float(r["eden_before"]) for r in young if lo <= float(r["old_before"]) < hi] for lo, hi in OLD_BANDS
    ]
    first = [float(r["eden_before"]) for r in young[:FIRST]]
    return len(young), full, [sum(e) / len(e) if e else float("nan") for e in edens], first


def model_figures(
    hold: int, goal_us: float, marking_us: float, workers: int
) -> tuple[ClientHeap, list[list[float]]]:
    """The model's heap through the same million sends, and its edens by the old generation."""
    params = HeapParams(1024 * 1024.0, 6.25 + PENDING_KIB, PENDING_KIB, 3000.0, 0.53, 0.63)
    changes = {"marking_us": marking_us, "pause_goal_us": goal_us, "g1_workers": workers}
    params = HeapParams(**{**params.__dict__, **changes})
    heap = ClientHeap(params, HostCores(2))
    held: deque[int] = deque()
    owed = 0.0
    edens: list[list[float]] = [[] for _ in OLD_BANDS]
    firsts: list[float] = []
    for i in range(1_000_000):
        count = len(heap.pauses)
        old_mib = heap.held_kib() / 1024
        eden_mib = heap.allocated_kib / 1024
        heap.allocate(i * 10.0)
        if len(heap.pauses) > count:
            band = next(k for k, (lo, hi) in enumerate(OLD_BANDS) if old_mib < hi or k == len(OLD_BANDS) - 1)
            edens[band].append(eden_mib + params.alloc_kib / 1024)
            firsts.append(eden_mib + params.alloc_kib / 1024)
        owed += 1.44
        while owed >= 1.0:
            held.append(heap.hold())
            owed -= 1.0
        while len(held) > hold:
            heap.release(held.popleft())
    return heap, [[sum(e) / len(e) if e else float("nan") for e in edens], firsts[:FIRST]]


def mib(values: list[float]) -> str:
    return " ".join(f"{v:4.0f}" for v in values)


print(f"eden MiB by old generation MiB {[f'{lo}-{hi}' for lo, hi in OLD_BANDS]}")
for hold in (50_000, 100_000, 231_070):
    young, full, edens, first = g1_figures(hold)
    print(f"backlog {hold}: G1 {young} young, {full} full; eden {mib(edens)}; first edens {mib(first)}")
    for name, (goal, marking, workers) in SETTINGS.items():
        heap, (edens, first) = model_figures(hold, goal, marking, workers)
        young = len(heap.pauses) - heap.full_collections
        print(
            f"  model, {name}: {young} young, {heap.full_collections} full, {heap.markings} markings; young "
            f"{heap.copied_kib / 1024:.0f} MiB copied; full {heap.compacted_kib / 1024:.0f} MiB live; "
            f"eden {mib(edens)}; first edens {mib(first)}"
        )
