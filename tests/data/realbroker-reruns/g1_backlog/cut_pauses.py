"""``cut_gcload.py`` with every collection of the client heaps logged: per collection its host time, kind
(young / full), the eden it had, what it copied or compacted, its CPU (the calibrated work) and its wall
(the pause's length on the host), the old generation after it and the sends held. docs/validation.md,
"The client's pauses under the backlog". Run from the project's root:
python tests/data/realbroker-reruns/g1_backlog/cut_pauses.py LOG.csv [cut_gcload's arguments]
(under the heavy-run lock, as cut_gcload.py)."""

import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import cut_gcload  # noqa: E402

from rocketsim.client import heap as heap_module  # noqa: E402

ROWS: list[dict[str, object]] = []
_young = cut_gcload.collect  # cut_gcload's recorder of ClientHeap.collect
_full = heap_module.ClientHeap.collect_full


def young(self, at_us, young_kib):  # type: ignore[no-untyped-def]
    p = self.params
    eden, allocated = self.eden_kib, self.allocated_kib
    copied = (self.pending_young + self.survivors) * p.pending_kib
    before = len(self.pauses)
    fulls = self.full_collections
    _young(self, at_us, young_kib)
    start, wall = self.pauses[before]
    ROWS.append(
        dict(
            heap=id(self) % 10007,
            start_s=round(start / 1e6, 4),
            kind="young",
            eden_mib=round(eden / 1024, 1),
            allocated_mib=round(allocated / 1024, 1),
            work_kib=round(copied),
            cpu_ms=round((p.pause_us + p.copy_us_per_kib * copied) / 1000, 2),
            wall_ms=round(wall / 1000, 2),
            old_mib=round(self.held_kib() / 1024, 1),
            pending=self.pending,
            full_after=self.full_collections - fulls,
        )
    )


def full(self, at_us):  # type: ignore[no-untyped-def]
    p = self.params
    live = self.pending * p.pending_kib
    before = len(self.pauses)
    _full(self, at_us)
    start, wall = self.pauses[before]
    ROWS.append(
        dict(
            heap=id(self) % 10007,
            start_s=round(start / 1e6, 4),
            kind="full",
            eden_mib=0.0,
            allocated_mib=0.0,
            work_kib=round(live),
            cpu_ms=round(p.full_us_per_kib * live / 1000, 2),
            wall_ms=round(wall / 1000, 2),
            old_mib=round(self.held_kib() / 1024, 1),
            pending=self.pending,
            full_after=0,
        )
    )


def main() -> None:
    log = sys.argv.pop(1)
    cut_gcload.collect = young  # main() installs cut_gcload.collect as ClientHeap.collect
    heap_module.ClientHeap.collect_full = full  # type: ignore[method-assign]
    cut_gcload.main()
    with open(log, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(ROWS[0]))
        w.writeheader()
        w.writerows(sorted(ROWS, key=lambda r: r["start_s"]))
    print(f"{len(ROWS)} collections logged to {log}")


if __name__ == "__main__":
    main()
