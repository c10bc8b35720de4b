"""Group sample_threads.py's samples by thread name and say where each JVM's CPU went.

usage: python3 analyze_threads.py SAMPLES.csv META.json [--from S] [--to S] [--json OUT.json]
Per process and thread group (the thread's name less its number: ``NettyClientWork`` for
``NettyClientWorkerThread_3``): CPU seconds and microseconds per send over the window [FROM, TO) s after
the driver's t0 (default: the whole schedule), and per second of the run: the group's CPU (cores), how
many of its threads ran in it, and its runnable threads on average ((run + run-queue wait) / second).
A send is one of the schedule's sends due in the window.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from collections import defaultdict

GROUPS = {  # thread-name prefix (as the kernel keeps it, 15 characters) -> group
    "AsyncSenderExec": "client executor",
    "NettyClientSele": "client netty selector",
    "NettyClientWork": "client netty worker",
    "NettyClientPubl": "client callback",
    "main": "driver dispatcher",
    "NettyServerNIOS": "broker netty selector",
    "NettyServerEPOL": "broker netty selector",
    "NettyServerCode": "broker netty worker",
    "NettyBoss": "broker netty boss",
    "SendMessageThre": "broker send",
    "FlushRealTimeSe": "broker flush",
    "ReputMessageSer": "broker reput",
    "GC Thread": "gc",
    "G1 Young RemSet": "gc",
    "G1 Conc": "gc concurrent",
    "G1 Refine": "gc concurrent",
    "G1 Main Marker": "gc concurrent",
    "G1 Service": "gc concurrent",
    "VM Thread": "gc vm thread",
    "C1 CompilerThre": "jit",
    "C2 CompilerThre": "jit",
}


def prefix(comm: str) -> str:
    return re.sub(r"[\s_#\-]*\d+([\s_#\-]+\d+)*$", "", comm) or comm


def group(comm: str) -> str:
    p = prefix(comm)
    return GROUPS.get(p, "other")


def due_per_second(steps: str, warm_s: float = 0.0) -> list[int]:
    out: list[int] = []
    for step in steps.split(","):
        rate, secs = step.split(":")
        out += [int(rate)] * int(secs)
    return out


def load(path: str) -> dict[tuple[str, int], list[tuple[float, int, int, str]]]:
    series: dict[tuple[str, int], list[tuple[float, int, int, str]]] = defaultdict(list)
    with open(path) as f:
        for row in csv.DictReader(f):
            key = (row["proc"], int(row["tid"]))
            series[key].append((float(row["t"]), int(row["run_ns"]), int(row["wait_ns"]), row["comm"]))
    return series


def main(argv: list[str]) -> None:
    samples, meta_path = argv[0], argv[1]
    with open(meta_path) as f:
        meta = json.load(f)
    t0 = meta["t0_epoch_ms"] / 1000.0
    due = due_per_second(meta["steps"])
    lo = float(argv[argv.index("--from") + 1]) if "--from" in argv else 0.0
    hi = float(argv[argv.index("--to") + 1]) if "--to" in argv else float(len(due))
    sends = sum(due[int(s)] for s in range(int(lo), int(hi)))
    series = load(samples)
    cpu = defaultdict(float)  # (proc, group) -> ns in window
    per_sec = defaultdict(lambda: [0.0, set(), 0.0])  # (proc, group, second) -> ns, tids ran, runnable ns
    names = defaultdict(set)
    for (proc, tid), rows in series.items():
        for (ta, ra, wa, comm), (tb, rb, wb, _) in zip(rows, rows[1:], strict=False):
            mid = (ta + tb) / 2 - t0
            g = group(comm)
            names[(proc, g)].add(prefix(comm))
            d_run, d_wait = rb - ra, wb - wa
            if lo <= mid < hi:
                cpu[(proc, g)] += d_run
            sec = int(mid // 1) if mid >= 0 else -1
            cell = per_sec[(proc, g, sec)]
            cell[0] += d_run
            cell[2] += d_run + d_wait
            if d_run > 0:
                cell[1].add(tid)
    window = hi - lo
    report = {"window_s": [lo, hi], "sends": sends, "groups": {}, "per_second": []}
    print(f"window {lo:g}-{hi:g} s after t0, {sends} sends due")
    print(f"{'proc':7s} {'group':24s} {'cpu s':>7s} {'us/send':>8s} {'cores':>6s}  threads")
    for proc in ("driver", "broker"):
        tot = 0.0
        for (p, g), ns in sorted(cpu.items(), key=lambda kv: -kv[1]):
            if p != proc:
                continue
            tot += ns
            us = ns / 1e3 / max(1, sends)
            report["groups"][f"{p}/{g}"] = {
                "cpu_s": round(ns / 1e9, 3),
                "us_per_send": round(us, 3),
                "names": sorted(names[(p, g)]),
            }
            joined = ",".join(sorted(names[(p, g)]))
            print(f"{p:7s} {g:24s} {ns / 1e9:7.2f} {us:8.2f} {ns / 1e9 / window:6.2f}  {joined}")
        per_send = tot / 1e3 / max(1, sends)
        print(f"{proc:7s} {'total':24s} {tot / 1e9:7.2f} {per_send:8.2f} {tot / 1e9 / window:6.2f}")
    secs = sorted({k[2] for k in per_sec if -2 <= k[2] < len(due) + 10})
    keys = sorted({(k[0], k[1]) for k in per_sec})
    for sec in secs:
        row = {"second": sec, "due": due[sec] if 0 <= sec < len(due) else 0}
        for proc, g in keys:
            ns, ran, runnable = per_sec.get((proc, g, sec), (0.0, set(), 0.0))
            if ns:
                row[f"{proc}/{g}"] = [round(ns / 1e9, 3), len(ran), round(runnable / 1e9, 2)]
        report["per_second"].append(row)
    means = {}
    for proc, g in keys:
        cells = [per_sec.get((proc, g, sec), (0.0, set(), 0.0)) for sec in range(int(lo), int(hi))]
        means[f"{proc}/{g}"] = [
            round(sum(c[0] for c in cells) / 1e9 / len(cells), 3),
            round(sum(len(c[1]) for c in cells) / len(cells), 2),
            round(sum(c[2] for c in cells) / 1e9 / len(cells), 2),
        ]
    report["window_means"] = means
    print("window means per second: cores / threads that ran / runnable threads on average")
    for k, v in sorted(means.items(), key=lambda kv: -kv[1][2]):
        if v[2] >= 0.05:
            print(f"  {k:32s} {v[0]:5.2f} {v[1]:5.2f} {v[2]:5.2f}")
    if "--json" in argv:
        with open(argv[argv.index("--json") + 1], "w") as f:
            json.dump(report, f, indent=1)
    print("per second: group cpu cores / threads that ran / runnable threads on average")
    for row in report["per_second"]:
        parts = [
            f"{k.split('/')[0][0]}:{k.split('/')[1]} {v[0]:.2f}/{v[1]}/{v[2]:.1f}"
            for k, v in row.items()
            if k not in ("second", "due") and v[0] >= 0.02
        ]
        print(f"s{row['second']:>3} due {row['due']:>6}: " + "; ".join(parts))


if __name__ == "__main__":
    main(sys.argv[1:])
