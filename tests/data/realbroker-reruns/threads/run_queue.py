"""How long each busy thread of the harness waited for a core while runnable, per thread group, over a
window of a per-thread rerun (``runs/NAME.samples.csv.gz``: schedstat's run_ns and wait_ns, each 0.5 s):
the cores it took, the share of the time it was runnable, its wait over its run, and its speed while
runnable (run / (run + wait)), beside the runnable threads on average. Processor sharing of ``P`` cores
among ``N`` runnable threads gives every thread ``P / N`` while runnable, light or busy; docs/validation.md,
"`b_steady`'s latency below the host's capacity".

usage (from this folder): python3 run_queue.py NAME LO HI   e.g. python3 run_queue.py st_60000 2 5
"""

from __future__ import annotations

import csv
import gzip
import json
import sys
from collections import defaultdict

MIN_CORES = 0.005  # a thread with less CPU than this share of a core over the window is left out


def window(name: str, lo: float, hi: float) -> tuple[dict[tuple[str, str, str], list[float]], float]:
    """Per thread (proc, tid, name), its run and wait seconds within [lo, hi) s after t0; the span."""
    with open(f"runs/{name}.meta.json") as f:
        t0 = json.load(f)["t0_epoch_ms"] / 1000.0
    last: dict[tuple[str, str], tuple[int, int]] = {}
    out: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    with gzip.open(f"runs/{name}.samples.csv.gz", "rt") as f:
        for r in csv.DictReader(f):
            key, t = (r["proc"], r["tid"]), float(r["t"]) - t0
            ns, wait = int(r["run_ns"]), int(r["wait_ns"])
            if key in last and lo <= t < hi:
                thread = out[(r["proc"], r["tid"], r["comm"][:15])]
                thread[0] += (ns - last[key][0]) / 1e9
                thread[1] += (wait - last[key][1]) / 1e9
            last[key] = (ns, wait)
    return out, hi - lo


def main(argv: list[str]) -> None:
    name, lo, hi = argv[0], float(argv[1]), float(argv[2])
    threads, span = window(name, lo, hi)
    run = sum(t[0] for t in threads.values())
    wait = sum(t[1] for t in threads.values())
    runnable = (run + wait) / span
    print(f"{name} [{lo:g}, {hi:g}) s: {run / span:.2f} cores, {runnable:.2f} threads runnable on average")
    groups: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for (proc, _, comm), (r, w) in threads.items():
        if r >= MIN_CORES * span:
            g = groups[(proc, comm.rstrip("#0123456789 _-"))]
            g[0], g[1], g[2] = g[0] + r, g[1] + w, g[2] + 1
    print("proc    thread group     threads  cores  runnable a thread  wait / run  speed while runnable")
    for (proc, group), (r, w, n) in sorted(groups.items(), key=lambda g: -g[1][0]):
        share = (r + w) / span / n
        print(f"{proc:7s} {group:16s} {n:7d} {r / span:6.3f} {share:18.2f} {w / r:11.2f} {r / (r + w):21.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
