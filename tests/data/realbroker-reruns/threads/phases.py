"""Cores per thread group over windows of the per-thread reruns, the client's callback, logger and
response-scan threads apart (docs/validation.md, "Where the host's cores go under the backlog").

usage (from this folder): python3 phases.py
"""

from __future__ import annotations

import csv
import gzip
import json
import re
from collections import defaultdict

DRIVER = {  # thread-name prefix -> group (the driver's; anything else is "other")
    "GC Thread": "collector pauses",
    "G1 Conc": "collector concurrent",
    "G1 Refine": "collector concurrent",
    "G1 Main Marker": "collector concurrent",
    "G1 Service": "collector concurrent",
    "VM Thread": "collector concurrent",
    "C1 CompilerThre": "jit",
    "C2 CompilerThre": "jit",
    "AsyncSenderExec": "executor",
    "NettyClientWork": "netty worker",
    "NettyClientSele": "netty selector",
    "NettyClientPubl": "callbacks",
    "AsyncAppender-D": "logger",
    "ClientHouseKeep": "response scan",
    "java": "dispatcher",
}
BROKER_NETTY = ("NettyServerCode", "NettyServerNIOS", "NettyServerEPOL")
WINDOWS = (("r40_40000", 3, 12), ("st_60000", 3, 12), ("ov_72000", 3, 9), ("ov_72000", 10, 19))


def prefix(comm: str) -> str:
    return re.sub(r"[\s_#\-]*\d+([\s_#\-]+\d+)*$", "", comm) or comm


def group(proc: str, comm: str) -> str:
    p = prefix(comm)
    if proc == "broker":
        return "b:send" if p == "SendMessageThre" else "b:netty" if p in BROKER_NETTY else "b:other"
    return "d:" + DRIVER.get(p, "other")


def cores(name: str, lo: float, hi: float) -> dict[str, float]:
    """Each group's CPU over [lo, hi) s after the run's t0, in cores."""
    with open(f"runs/{name}.meta.json") as f:
        t0 = json.load(f)["t0_epoch_ms"] / 1000.0
    last: dict[tuple[str, str], int] = {}
    cpu: dict[str, float] = defaultdict(float)
    with gzip.open(f"runs/{name}.samples.csv.gz", "rt") as f:
        for r in csv.DictReader(f):
            key, t, ns = (r["proc"], r["tid"]), float(r["t"]) - t0, int(r["run_ns"])
            if key in last and lo <= t < hi:
                cpu[group(r["proc"], r["comm"])] += (ns - last[key]) / 1e9
            last[key] = ns
    return {g: v / (hi - lo) for g, v in cpu.items()}


def main() -> None:
    res = [cores(*w) for w in WINDOWS]
    print("group", *(f"{n}[{lo},{hi})" for n, lo, hi in WINDOWS))
    for k in sorted({k for r in res for k in r}):
        print(k, *(f"{r.get(k, 0.0):.3f}" for r in res))
    for proc in ("d", "b"):
        print(proc, "all", *(f"{sum(v for k, v in r.items() if k[0] == proc):.2f}" for r in res))


if __name__ == "__main__":
    main()
