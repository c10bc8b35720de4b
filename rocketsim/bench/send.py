"""``python -m rocketsim.bench send``: throughput of the per-producer send loop on one core.

Builds a fault-on 4.9.8 scenario (8 brokers x 4 write queues, a few sender threads), with a brown-out on
one broker (slow enough for the latency-fault table to isolate it) and background errors on another (each
exception isolates it, as 4.9 does), once per send mode (``--mode``: SYNC, ASYNC, ONEWAY; all three by
default, each a separate scenario whose every send is of that mode). Generates one producer's messages
with :mod:`rocketsim.scenario.workload`, warms up the compiled engine (numba compile or cache load is not
timed), then reports, per mode:

More: docs/reference/modules.md, rocketsim/bench/send.py.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable
from typing import Any

import numba
import numpy as np
import pyarrow as pa

from rocketsim.engine import compiled, reference
from rocketsim.engine.plan import SimOutput, batch_aligned, prepare
from rocketsim.scenario import Scenario, scenario_from_mapping, workload
from rocketsim.stage.plan import CHUNK_ROWS

TARGET_ATTEMPTS_PER_S = 2_000_000  # design §7: the send loop of every mode
BROKERS = tuple(f"broker-{c}" for c in "abcdefgh")


MODES = ("sync", "async", "oneway")


def bench_scenario(
    messages: int,
    *,
    version: str = "4.9.8",
    threads: int = 4,
    seed: int = 42,
    mode: str = "sync",
    producers: dict[str, Any] | None = None,
) -> Scenario:
    """The benchmark's scenario: ``messages`` for one producer at 1000/s, every send of ``mode``
    (``producers``: more producer settings, e.g. autoBatch's for ``--features``)."""
    duration_s = messages / 1000.0
    raw: dict[str, Any] = {
        "name": "bench-send",
        "seed": seed,
        "cluster": {"brokers": list(BROKERS), "write_queues": 4, "read_queues": 4},
        "producers": {
            "count": 1,
            "client_version": version,
            "send_latency_fault_enable": True,
            "threads": threads,
            "send_mode": {mode: 1.0},
            **(producers or {}),
        },
        "workload": {"messages": messages, "rate_per_s": 1000.0, "topics": ["TopicTest"]},
        "brokers": {
            "default": {
                "latency": {
                    "median_ms": 3.0,
                    "sigma": 0.5,
                    "spike_probability": 0.001,
                    "spike_scale_ms": 40.0,
                    "spike_alpha": 1.6,
                },
            },
            # background errors: every exception isolates broker-e (600 s in 4.9)
            "broker-e": {
                "latency": {"median_ms": 3.0, "sigma": 0.5},
                "errors": {"connect_refused": 0.002, "system_busy": 0.002, "remoting_timeout": 0.0005},
            },
        },
        # a brown-out over the middle fifth of the run: ~600 ms answers, isolated 30 s after each one
        "faults": [
            {
                "broker": "broker-c",
                "kind": "slowdown",
                "start_s": 0.4 * duration_s,
                "end_s": 0.6 * duration_s,
                "factor": 200.0,
            },
        ],
    }
    return scenario_from_mapping(raw)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _pin_one_cpu() -> str:
    """Pin this process to one CPU (the last one it may use); returns a description."""
    if not hasattr(os, "sched_setaffinity"):
        return "not pinned (no sched_setaffinity)"
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return f"pinned to CPU {cpu}"


def timed(fn: Callable[[], Any], repeat: int) -> tuple[Any, float, float]:
    """(result, best wall s, best CPU s) over ``repeat`` runs."""
    best_wall = best_cpu = float("inf")
    result = None
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        result = fn()
        best_wall = min(best_wall, time.perf_counter() - w)
        best_cpu = min(best_cpu, time.process_time() - c)
    return result, best_wall, best_cpu


def _simulate_streamed(chunks: list[pa.Table], sc: Scenario) -> SimOutput:
    """Both tables of a streamed run, each concatenated over its chunks."""
    out = list(compiled.simulate_chunks(chunks, sc))
    return SimOutput(pa.concat_tables(c.attempts for c in out), pa.concat_tables(c.results for c in out))


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds:>12,.0f}/s" if seconds > 0 else "inf"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rocketsim.bench send",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--messages", type=int, default=1_500_000, help="messages of the producer (1.5M)")
    parser.add_argument("--sample", type=int, default=20_000, help="messages the reference runs (20000)")
    parser.add_argument("--threads", type=int, default=4, help="sender threads of the producer (4)")
    parser.add_argument("--version", default="4.9.8", help="client version, a 4.9 line by default (4.9.8)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs, best kept (3)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--no-pin", action="store_true", help="do not pin the process to one CPU")
    parser.add_argument("--check", action="store_true", help="exit 1 if the send loop misses 1M attempts/s")
    parser.add_argument(
        "--mode",
        choices=[*MODES, "all"],
        default="all",
        help="the send mode of every send (all: each in turn)",
    )
    args = parser.parse_args(argv)

    cmd = "python -m rocketsim.bench send" + ("" if not argv else " " + shlex.join(argv))
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    pinned = "not pinned" if args.no_pin else _pin_one_cpu()
    print("rocketsim send-loop benchmark")
    print(f"command:  {cmd}")
    print(
        f"machine:  nproc={nproc}, CPU: {_cpu_model()}, {pinned}; load average "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(
        f"software: python {platform.python_version()}, numba {numba.__version__}, numpy {np.__version__}, "
        f"pyarrow {pa.__version__}"
    )

    worst = 0
    for mode in MODES if args.mode == "all" else (args.mode,):
        worst = max(worst, _bench_mode(args, mode))
    return worst


def _bench_mode(args: argparse.Namespace, mode: str) -> int:
    """One mode's figures; the exit code (1: the engines disagree, or --check and the target missed)."""
    sc = bench_scenario(args.messages, version=args.version, threads=args.threads, seed=args.seed, mode=mode)
    print(
        f"\nscenario: client {args.version}, send_latency_fault_enable=true, {len(BROKERS)} brokers x 4 "
        f"queues, every send {mode.upper()}, {args.threads} sender threads, broker-c slowed x200 over the "
        "middle fifth, errors on broker-e"
    )
    t = time.perf_counter()
    messages = workload.generate(sc)
    gen_s = time.perf_counter() - t
    print(f"workload: {messages.num_rows:,} messages of one producer (generated in {gen_s:.1f} s)")
    if not compiled.supports(sc, messages):
        print("error: the compiled engine does not support this scenario", file=sys.stderr)
        return 2

    t = time.perf_counter()
    compiled.simulate_producer(messages.slice(0, min(2_000, messages.num_rows)), sc)
    print(f"warm-up:  {time.perf_counter() - t:.1f} s (numba compile, or cache load; not counted below)")

    cuts = [messages.slice(k, CHUNK_ROWS) for k in range(0, messages.num_rows, CHUNK_ROWS)]
    chunks = list(batch_aligned(cuts))
    topics: list[str] = []
    parts = [prepare(chunk, sc, topics) for chunk in chunks]
    n_att, wall, cpu = timed(lambda: compiled.run_prepared_chunks(parts, sc), args.repeat)
    n_msg = messages.num_rows
    print(
        f"send loop (compiled.run_prepared_chunks, {len(parts)} chunks of {CHUNK_ROWS:,} messages), "
        f"best of {args.repeat}: {wall:.3f} s wall, {cpu:.3f} s CPU"
    )
    print(f"    attempts {n_att:>11,}  {_rate(n_att, wall)} wall  {_rate(n_att, cpu)} CPU")
    print(f"    messages {n_msg:>11,}  {_rate(n_msg, wall)} wall  {_rate(n_msg, cpu)} CPU")
    out, wall_all, cpu_all = timed(lambda: _simulate_streamed(chunks, sc), args.repeat)
    print(
        "whole compiled engine (compiled.simulate_chunks over the same chunks: Arrow in, both tables out): "
        f"{wall_all:.3f} s wall, {cpu_all:.3f} s CPU"
    )
    print(
        f"    attempts {out.attempts.num_rows:>11,}  {_rate(out.attempts.num_rows, wall_all)} wall  "
        f"{_rate(out.attempts.num_rows, cpu_all)} CPU"
    )
    print(f"    messages {n_msg:>11,}  {_rate(n_msg, wall_all)} wall  {_rate(n_msg, cpu_all)} CPU")
    retries = out.attempts.num_rows - out.results.num_rows
    print(
        f"    retries {retries:,}, isolated attempts "
        f"{out.attempts.num_rows - out.attempts.column('fault_isolated_until_ms').null_count:,}"
    )

    sample = messages.slice(0, min(args.sample, n_msg))
    ref, wall_ref, cpu_ref = timed(lambda: reference.simulate_producer(sample, sc), 1)
    fast = compiled.simulate_producer(sample, sc)
    same = ref.attempts.equals(fast.attempts) and ref.results.equals(fast.results)
    print(
        f"reference engine (reference.simulate_producer) on the first {sample.num_rows:,} messages: "
        f"{wall_ref:.2f} s wall, {cpu_ref:.2f} s CPU"
    )
    print(
        f"    attempts {ref.attempts.num_rows:>11,}  {_rate(ref.attempts.num_rows, wall_ref)} wall  "
        f"{_rate(ref.attempts.num_rows, cpu_ref)} CPU"
    )
    speedup = (n_att / cpu) / (ref.attempts.num_rows / cpu_ref)
    print(f"    send loop speed-up over the reference (CPU): x{speedup:,.0f}")
    print(
        f"agreement on the sample: {'EQUAL' if same else 'DIFFERENT'} attempts "
        f"({ref.attempts.num_rows:,} rows) and results ({ref.results.num_rows:,} rows)"
    )

    met = n_att / cpu >= TARGET_ATTEMPTS_PER_S
    print(
        f"target >= {TARGET_ATTEMPTS_PER_S:,} attempts/s per core for the send loop: "
        f"{'met' if met else 'MISSED'} ({n_att / cpu:,.0f}/s CPU)"
    )
    if not same:
        return 1
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
