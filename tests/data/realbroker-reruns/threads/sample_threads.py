"""Sample every thread of the harness's JVMs: CPU and run-queue wait per thread, each interval.

usage: python3 sample_threads.py OUT.csv BROKER_PID [--interval 0.5] [--match LoadDriver]
Writes one row per thread per sample: t (s, the epoch), proc (broker | driver), tid, comm (the thread's
name as the kernel has it, 15 characters), run_ns, wait_ns and slices (/proc/PID/task/TID/schedstat: time
on a CPU, time runnable but waiting for one, and the times it was given a CPU, cumulative), ticks (utime +
stime). Runs until the broker
is gone or a file OUT.csv.stop exists. The driver is the java process whose command line holds MATCH.
"""

from __future__ import annotations

import os
import sys
import time


def find_driver(match: str) -> int | None:
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"java") and any(match.encode() == c for c in cmd):
            return int(pid)
    return None


def sample(pid: int, proc: str, t: float, out) -> None:
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return
    for tid in tids:
        base = f"/proc/{pid}/task/{tid}"
        try:
            with open(base + "/comm") as f:
                comm = f.read().strip().replace(",", ";")
            with open(base + "/schedstat") as f:
                run_ns, wait_ns, slices = f.read().split()[:3]
            with open(base + "/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ticks = int(fields[11]) + int(fields[12])
        except (OSError, ValueError, IndexError):
            continue
        out.write(f"{t:.3f},{proc},{tid},{comm},{run_ns},{wait_ns},{ticks},{slices}\n")


def main(argv: list[str]) -> None:
    out_path, broker = argv[0], int(argv[1])
    interval = float(argv[argv.index("--interval") + 1]) if "--interval" in argv else 0.5
    match = argv[argv.index("--match") + 1] if "--match" in argv else "LoadDriver"
    driver = None
    with open(out_path, "w") as out:
        out.write("t,proc,tid,comm,run_ns,wait_ns,ticks,slices\n")
        nxt = time.monotonic()
        while os.path.exists(f"/proc/{broker}") and not os.path.exists(out_path + ".stop"):
            t = time.time()
            if driver is None or not os.path.exists(f"/proc/{driver}"):
                driver = find_driver(match)
            sample(broker, "broker", t, out)
            if driver is not None:
                sample(driver, "driver", t, out)
            out.flush()
            nxt += interval
            time.sleep(max(0.0, nxt - time.monotonic()))


if __name__ == "__main__":
    main(sys.argv[1:])
