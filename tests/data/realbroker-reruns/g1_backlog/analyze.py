"""Summarises run.sh's output: per held backlog, the young and full collections G1 ran, their CPU (the
JVM's own User+Sys per pause, -Xlog:gc+cpu) and what they copied (a young one: the survivor space after it
and what it promoted; a full one: the heap after it, all live), and the two costs per KiB."""

import csv
import re
import sys

PAUSE = re.compile(r"GC\((\d+)\) Pause (Young|Full|Remark|Cleanup).*? (\d+)M->(\d+)M\(\d+M\) ([\d.]+)ms")
CPU = re.compile(r"GC\((\d+)\) User=([\d.]+)s Sys=([\d.]+)s Real=([\d.]+)s")


def summary(hold: str) -> tuple[float, float, float, float]:
    pauses, cpu = [], {}
    with open(f"hold_{hold}.gclog") as log:
        for line in log:
            if m := PAUSE.search(line):
                pauses.append((int(m[1]), m[2], int(m[4]), float(m[5])))
            elif m := CPU.search(line):
                cpu[int(m[1])] = float(m[2]) + float(m[3])
    with open(f"hold_{hold}.csv") as f:
        rows = list(csv.DictReader(x for x in f if not x.startswith("#")))
    stw = [p for p in pauses if p[1] in ("Young", "Full")]
    assert len(stw) == len(rows)
    young_kib = young_cpu = full_kib = full_cpu = 0.0
    young = full = 0
    for (gc, kind, after_mib, _), row in zip(stw, rows, strict=True):
        if kind == "Full":
            full, full_kib, full_cpu = full + 1, full_kib + after_mib * 1024, full_cpu + cpu.get(gc, 0.0)
        else:
            copied = int(row["surv_after"]) + int(row["old_after"]) - int(row["old_before"])
            young += 1
            if copied >= 20:  # the fixed part is small beside it
                young_kib, young_cpu = young_kib + copied * 1024, young_cpu + cpu.get(gc, 0.0)
    print(
        f"backlog {hold}: {young} young, {full} full; young (>= 20 MiB copied) {young_cpu:.2f} s CPU for "
        f"{young_kib / 1024:.0f} MiB copied; full {full_cpu:.2f} s CPU for {full_kib / 1024:.0f} MiB live"
    )
    return young_cpu, young_kib, full_cpu, full_kib


totals = [sum(x) for x in zip(*(summary(h) for h in sys.argv[1:]), strict=True)]
young_us, full_us = totals[0] / totals[1] * 1e6, totals[2] / totals[3] * 1e6
ratio = full_us / young_us
print(f"CPU per KiB: young {young_us:.3f} us copied, full {full_us:.3f} us live; ratio {ratio:.2f}")
