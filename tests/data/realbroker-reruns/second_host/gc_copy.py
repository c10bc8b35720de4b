"""What G1 copied in the driver's young collections and the CPU it took, from a JVM log of
``-Xlog:gc*=info,gc+phases=debug:file=F:time,uptimemillis`` (run.sh's DRIVER_JAVA_OPTS).

Per collection: its uptime, kind, heap before / after (MiB), pause (ms), the bytes its workers copied
(``Copied Bytes``, summed over the workers), the workers' wall (``GC Worker Total``, summed) and the
process's CPU over the pause (``User`` + ``Sys``, 10 ms resolution). With the run's thread samples
(``sample_threads.py``'s CSV) and ``--from N --to M``: the driver's ``GC Thread`` CPU over collections N..M
(all young) against what they copied, and the cores those threads had while the client was paused.
docs/validation.md, "A second host".

usage: python3 gc_copy.py GC.log [SAMPLES.csv --from N --to M]
"""

from __future__ import annotations

import csv
import gzip
import re
import sys
from datetime import datetime

LINE = re.compile(r"\[([^\]]+)\]\[(\d+)ms\] GC\((\d+)\) (.*)")
PAUSE = re.compile(r"Pause (\w+) .* (\d+)M->(\d+)M\(\d+M\) ([\d.]+)ms$")
CPU = re.compile(r"User=([\d.]+)s Sys=([\d.]+)s Real=([\d.]+)s")
BIG_KIB = 5 * 1024  # a collection that copied more than this: the sums below


def _open(path: str):  # type: ignore[no-untyped-def]
    return gzip.open(path, "rt") if path.endswith(".gz") else open(path)


def collections(path: str) -> dict[int, dict[str, float | str]]:
    """Per collection number, what the log says of it."""
    rows: dict[int, dict[str, float | str]] = {}
    with _open(path) as f:
        for line in f:
            m = LINE.match(line)
            if m is None:
                continue
            row = rows.setdefault(int(m[3]), {"uptime_ms": float(m[2])})
            rest = m[4]
            if (p := PAUSE.search(rest)) is not None:
                stamp = datetime.fromisoformat(m[1].replace("+0000", "+00:00")).timestamp()
                row.update(kind=p[1], before=int(p[2]), after=int(p[3]), pause_ms=float(p[4]), end=stamp)
            elif "Copied Bytes" in rest:
                row["copied_kib"] = float(row.get("copied_kib", 0.0)) + _sum(rest) / 1024
            elif "GC Worker Total" in rest:
                row["workers_ms"] = _sum(rest)
            elif (c := CPU.search(rest)) is not None:
                row["cpu_ms"] = (float(c[1]) + float(c[2])) * 1000
    return {n: r for n, r in rows.items() if "pause_ms" in r}


def _sum(rest: str) -> float:
    """A phase line's sum over the workers (``... Sum: 40590824, Workers: 2``)."""
    return float(re.findall(r"Sum: ([\d.]+)", rest)[0])


def gc_thread_cpu(samples: str, start: float, end: float) -> float:
    """The driver's ``GC Thread`` CPU seconds between the samples around ``start`` and ``end`` (epoch s)."""
    series: dict[str, list[tuple[float, int]]] = {}
    with _open(samples) as f:
        for r in csv.DictReader(f):
            if r["proc"] == "driver" and r["comm"].startswith("GC Thread"):
                series.setdefault(r["tid"], []).append((float(r["t"]), int(r["run_ns"])))
    total = 0.0
    for points in series.values():
        before = [ns for t, ns in points if t <= start] or [points[0][1]]
        after = [ns for t, ns in points if t >= end] or [points[-1][1]]
        total += (after[0] - before[-1]) / 1e9
    return total


def main(argv: list[str]) -> None:
    rows = collections(argv[0])
    print("gc uptime_ms kind before after pause_ms copied_KiB workers_ms cpu_ms")
    big = [0.0, 0.0, 0.0]
    for n, r in sorted(rows.items()):
        kib = float(r.get("copied_kib", 0.0))
        print(
            n,
            r["uptime_ms"],
            r["kind"],
            r["before"],
            r["after"],
            r["pause_ms"],
            round(kib),
            r.get("workers_ms", ""),
            r.get("cpu_ms", ""),
        )
        if r["kind"] == "Young" and kib > BIG_KIB:
            big[0] += kib
            big[1] += float(r.get("workers_ms", 0.0))
            big[2] += float(r.get("cpu_ms", 0.0))
    if big[0]:
        mib, wall, cpu = big[0] / 1024, big[1] * 1000 / big[0], big[2] * 1000 / big[0]
        print(f"young collections copying over {BIG_KIB // 1024} MiB: {mib:,.0f} MiB copied, workers' wall")
        print(f"  {wall:.2f} us/KiB, process CPU in the pauses {cpu:.2f} us/KiB")
    if len(argv) > 1:
        lo, hi = int(argv[argv.index("--from") + 1]), int(argv[argv.index("--to") + 1])
        span = [rows[n] for n in range(lo, hi + 1) if n in rows]
        start = float(span[0]["end"]) - float(span[0]["pause_ms"]) / 1000 - 0.5  # a sample before it
        end = float(span[-1]["end"]) + 0.25
        cpu = gc_thread_cpu(argv[1], start, end)
        kib = sum(float(r.get("copied_kib", 0.0)) for r in span)
        paused = sum(float(r["pause_ms"]) for r in span)
        kinds = sorted({str(r["kind"]) for r in span})
        head = f"GC({lo}..{hi}) {kinds}: {paused:,.0f} ms paused in {end - start:.2f} s"
        per_kib, cores = cpu * 1e6 / kib, cpu * 1000 / paused
        copied = f"{kib / 1024:,.0f} MiB copied: {per_kib:.2f} us a KiB, {cores:.2f} cores paused"
        print(f"{head}, GC Thread CPU {cpu:.2f} s, {copied}")


if __name__ == "__main__":
    main(sys.argv[1:])
