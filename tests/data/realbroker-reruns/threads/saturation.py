"""Which thread of a send's path has a queue: each busy Netty and send thread's CPU and the share of the
time it was runnable (running or waiting for a core: schedstat's run_ns + wait_ns), over windows of the
per-thread reruns (docs/validation.md, "Where a written request waits").

A thread whose work queues is runnable all the time its process runs; one that keeps up blocks between
its pieces of work. The driver's threads do not run during its collector's pauses (they wait at the
safepoint, not runnable), so a driver thread's runnable share is also given over the time outside them,
taken as one minus the share its two ``GC Thread``s were runnable (both run through every pause).

usage (from this folder): python3 saturation.py
"""

from __future__ import annotations

import csv
import gzip
import json
from collections import defaultdict

PATH = {  # thread-name prefix (15 characters, as /proc has it) -> the leg of a send it runs
    ("driver", "AsyncSenderExec"): "client executor",
    ("driver", "NettyClientWork"): "client worker (request encoding, answer decoding)",
    ("driver", "NettyClientSele"): "client selector (socket writes and reads)",
    ("driver", "NettyClientPubl"): "client callbacks",
    ("broker", "NettyServerNIOS"): "broker selector (socket reads and writes)",
    ("broker", "NettyServerCode"): "broker codec (request decoding, answer encoding)",
    ("broker", "SendMessageThre"): "broker send threads",
}
WINDOWS = (("r40_40000", 3, 12), ("st_60000", 3, 12), ("ov_72000", 3, 9), ("ov_72000", 10, 19))
BUSY_NS = 5e7  # a thread with less CPU than this over the run is left out (the stats poller's channel)


def shares(name: str, lo: float, hi: float) -> tuple[dict[str, list[tuple[float, float]]], float]:
    """Per leg, each busy thread's (cores, runnable share) over [lo, hi) s after t0; and the share of
    that time the driver's collector pauses took."""
    with open(f"runs/{name}.meta.json") as f:
        t0 = json.load(f)["t0_epoch_ms"] / 1000.0
    last: dict[tuple[str, str], tuple[float, int, int]] = {}
    run: dict[tuple[str, str, str], float] = defaultdict(float)
    runnable: dict[tuple[str, str, str], float] = defaultdict(float)
    total: dict[tuple[str, str, str], float] = defaultdict(float)
    with gzip.open(f"runs/{name}.samples.csv.gz", "rt") as f:
        for r in csv.DictReader(f):
            key, t = (r["proc"], r["tid"]), float(r["t"]) - t0
            ns, wait = int(r["run_ns"]), int(r["wait_ns"])
            thread = (r["proc"], r["tid"], r["comm"][:15])
            if key in last:
                total[thread] += ns - last[key][1]
                if lo <= t < hi:
                    run[thread] += (ns - last[key][1]) / 1e9
                    runnable[thread] += (ns - last[key][1] + wait - last[key][2]) / 1e9
            last[key] = (t, ns, wait)
    span = hi - lo
    gc = [runnable[t] / span for t in runnable if t[0] == "driver" and t[2].startswith("GC Thread")]
    paused = min(1.0, sum(gc) / max(1, len(gc)))
    legs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for thread in sorted(run):
        leg = next(
            (v for (p, prefix), v in PATH.items() if p == thread[0] and thread[2].startswith(prefix)), None
        )
        if leg is not None and total[thread] >= BUSY_NS:
            legs[leg].append((run[thread] / span, runnable[thread] / span))
    return legs, paused


def main() -> None:
    for name, lo, hi in WINDOWS:
        legs, paused = shares(name, lo, hi)
        print(f"{name} [{lo}, {hi}) s: the driver's collector pauses {paused:.2f} of the time")
        for leg in PATH.values():
            if leg not in legs:
                continue
            rows = legs[leg]
            outside = [r / (1 - paused) for _, r in rows] if leg.startswith("client") else []
            print(
                f"  {leg:52s} cores {' '.join(f'{c:.3f}' for c, _ in rows):24s} runnable "
                f"{' '.join(f'{r:.2f}' for _, r in rows):20s}"
                + (f" outside the pauses {' '.join(f'{r:.2f}' for r in outside)}" if outside else "")
            )


if __name__ == "__main__":
    main()
