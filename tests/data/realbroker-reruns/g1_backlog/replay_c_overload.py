"""The model's heap (rocketsim.client.heap) driven by c_overload_async_p2_72000's measured backlog, beside
the collections its real driver ran (meta.json's driver_gc: 283 young, 7,861 ms; 5 full, 1,412 ms).

Every send due in a second of per_second.csv is held from its due time (uniform in the second) for the
measured latency of its outcome in that second (OK: that second's OK p50; the failure classes: their p50
in outcomes.csv); a send the executor rejected holds and allocates nothing. The heap's values are the
validation's calibrated ones (1 GiB; 9.32 KiB allocated a send, 3.05 KiB held, 3 ms a pause, 0.53 us a
KiB copied, 0.63 us a KiB compacted). So it asks only what the collector does with the backlog the real
client had, whatever the rest of the model makes of it.
Run from the project's root: python tests/data/realbroker-reruns/g1_backlog/replay_c_overload.py"""

import csv
import heapq
import json
from pathlib import Path

import numpy as np

from rocketsim.client.heap import ClientHeap, HeapParams
from rocketsim.client.host import HostCores

RUN = Path("tests/data/realbroker/c_overload_async_p2_72000")
CLASSES = ("OVERLOAD", "TIMEOUT_CLEAN_QUEUE", "invokeAsync_timeout", "executor_rejected")
SETTINGS = {
    "room": (0.0, 0.0, 0),
    "g1 sizing": (200_000.0, 0.0, 0),
    "g1 sizing, start-up predictions": (200_000.0, 0.0, 2),
    "g1 sizing, start-up predictions + marking 1 s": (200_000.0, 1e6, 2),
}


def sends() -> tuple[np.ndarray, np.ndarray]:
    """Every held send's due time and end time, us, in due order."""
    with open(RUN / "outcomes.csv") as f:
        class_p50 = {r["klass"]: float(r["lat_p50_ms"]) for r in csv.DictReader(f)}
    due, end = [], []
    with open(RUN / "per_second.csv") as f:
        for row in csv.DictReader(f):
            n, second = int(row["scheduled"]), int(row["second"])
            held = [(int(row["ok"]), float(row["ok_latency_p50_ms"] or 0.0))]
            held += [(int(float(row[f"err_{c}"])), class_p50[c]) for c in CLASSES[:3]]
            t = (second + (np.arange(n) + 0.5) / n) * 1e6
            lat = np.concatenate([np.full(k, ms * 1000.0) for k, ms in held])
            lat = np.concatenate([lat, np.full(n - lat.size, -1.0)])  # the rejected: not held
            np.random.default_rng(second).shuffle(lat)
            keep = lat >= 0
            due.append(t[keep])
            end.append(t[keep] + lat[keep])
    return np.concatenate(due), np.concatenate(end)


def replay(goal_us: float, marking_us: float, workers: int) -> ClientHeap:
    params = HeapParams(
        1024 * 1024.0, 9.3237, 3.0498, 3000.0, 0.5278, 0.6333, 0, marking_us, goal_us, workers
    )
    heap = ClientHeap(params, HostCores(2))
    due, end = sends()
    ends: list[tuple[float, int]] = []
    for t, e in zip(due.tolist(), end.tolist(), strict=True):
        while ends and ends[0][0] <= t:
            heap.release(heapq.heappop(ends)[1])
        heap.allocate(t)
        heapq.heappush(ends, (e, heap.hold()))
    return heap


def main() -> None:
    meta = json.loads((RUN / "meta.json").read_text())
    print(f"{RUN.name}: driver {meta['driver_gc']}")
    for name, (goal, marking, workers) in SETTINGS.items():
        heap = replay(goal, marking, workers)
        full = heap.full_collections
        full_ms = heap.compacted_kib * heap.params.full_us_per_kib / 1000
        young_ms = sum(p for _, p in heap.pauses) / 1000 - full_ms
        print(
            f"  model, {name}: {len(heap.pauses) - full} young ({young_ms:,.0f} ms), {full} full "
            f"({full_ms:,.0f} ms), {heap.markings} markings; "
            f"{heap.copied_kib / 1024:,.0f} MiB copied, {heap.compacted_kib / 1024:,.0f} MiB compacted"
        )


if __name__ == "__main__":
    main()
