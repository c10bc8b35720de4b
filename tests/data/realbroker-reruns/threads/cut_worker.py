"""cut_waits.py with the client's Netty threads traced: per second of the host's clock, for each producer's
worker and selector (``rocketsim.client.host.ClientThreads``), the median and p99 wait of its pieces (the
piece's start less when it was ready: the thread's queue) and its busy share (the time its pieces span over
the second). docs/validation.md, "The client's Netty worker as the thread that queues". Run from the
project's root: python tests/data/realbroker-reruns/threads/cut_worker.py [STEPS] [--set=KEY=VALUE ...]."""

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from rocketsim.client import host

sys.path.insert(0, str(Path(__file__).parent))
import cut_waits  # noqa: E402

WAITS: dict[tuple[str, int], list[float]] = defaultdict(list)
BUSY: dict[tuple[str, int], float] = defaultdict(float)
_place = host.FairShareHost.place
_on = host.ClientThreads._on


def traced_on(self, name, ready_us, work_us):  # type: ignore[no-untyped-def]
    CURRENT_READY[name] = ready_us
    return _on(self, name, ready_us, work_us)


CURRENT_READY: dict[str, float] = {}


def place_with_ready(self, ready_us, work_us, thread=None):  # type: ignore[no-untyped-def]
    start, end = _place(self, ready_us, work_us, thread)
    if isinstance(thread, tuple) and len(thread) == 2 and thread[1] in ("worker", "selector"):
        second = int(start // 1e6)
        WAITS[(thread[1], second)].append(start - CURRENT_READY.get(thread[1], start))
        BUSY[(thread[1], second)] += end - start
    return start, end


def main() -> None:
    host.ClientThreads._on = traced_on
    host.FairShareHost.place = place_with_ready
    cut_waits.main()
    print("host s  worker wait p50/p99 ms, busy (both producers, s a second)  selector the same")
    for s in sorted({k[1] for k in WAITS}):
        row = [f"{s:3d}"]
        for name in ("worker", "selector"):
            w = np.asarray(WAITS.get((name, s), [0.0])) / 1000.0
            row.append(f"{np.median(w):8.1f} {np.percentile(w, 99):8.1f} {BUSY[(name, s)] / 1e6:5.2f}")
        print("  ".join(row))


if __name__ == "__main__":
    main()
