"""``python -m rocketsim.bench features``: what autoBatch and async backpressure cost a producer's
simulation, against the same producer with both off.

The send benchmark's scenario (:func:`rocketsim.bench.send.bench_scenario`) on a 5.3.3 client (both
features are 5.x), every send ASYNC (and once SYNC through the accumulator), run as a producer task runs
it: :func:`rocketsim.engine.simulate_chunks` over the workload's chunks, both tables out (an autoBatch
producer whole, the others streamed). Per variant: CPU seconds (best of ``--repeat``), messages and attempts
per CPU second, the requests per message, the sends backpressure refused and the publish delay's p99
(``queue_wait_ms``: the hold, the wait for a permit).

More: docs/benchmarks.md (autoBatch and backpressure), docs/autobatch.md.
"""

from __future__ import annotations

import argparse
import os
import shlex
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from rocketsim.bench.send import bench_scenario, timed
from rocketsim.client.backpressure import TIMEOUT_TEXTS
from rocketsim.engine import compiled, simulate_chunks
from rocketsim.engine.plan import SimOutput
from rocketsim.scenario import Scenario, workload
from rocketsim.stage.plan import CHUNK_ROWS

OMB_BATCHING = {"auto_batch": True, "batch_max_delay_ms": 10, "batch_max_bytes": 32 * 1024}
# (label, send mode, producer settings)
VARIANTS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("ASYNC, both off", "async", {}),
    ("ASYNC, autoBatch (10 ms, 32 KiB)", "async", OMB_BATCHING),
    ("ASYNC, backpressure (10000 permits)", "async", {"enable_backpressure_for_async_mode": True}),
    (
        "ASYNC, backpressure (10 permits)",
        "async",
        {"enable_backpressure_for_async_mode": True, "back_pressure_for_async_send_num": 10},
    ),
    ("ASYNC, both on", "async", {**OMB_BATCHING, "enable_backpressure_for_async_mode": True}),
    ("SYNC, both off", "sync", {}),
    ("SYNC, autoBatch (10 ms, 32 KiB)", "sync", OMB_BATCHING),
)


def variant_scenario(messages: int, mode: str, settings: dict[str, Any], seed: int) -> Scenario:
    """The send benchmark's scenario on 5.3.3, every send ``mode``, 64 sender threads (a sync caller waits
    for its batch: about 13 wait at once here), with ``settings`` added."""
    return bench_scenario(messages, version="5.3.3", seed=seed, mode=mode, threads=64, producers=settings)


def _streamed(chunks: list[pa.Table], sc: Scenario) -> SimOutput:
    out = list(simulate_chunks(chunks, sc))
    return SimOutput(pa.concat_tables(c.attempts for c in out), pa.concat_tables(c.results for c in out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocketsim.bench features", description=__doc__)
    parser.add_argument("--messages", type=int, default=400_000, help="messages of the producer (400k)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs, best kept (3)")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    print("rocketsim autoBatch and backpressure benchmark")
    print(f"command:  python -m rocketsim.bench features {shlex.join(argv or [])}".rstrip())
    print(f"machine:  nproc={os.cpu_count()}, load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return run(args)


def run(args: argparse.Namespace) -> int:
    """Print the table of the variants (``args``: messages, repeat, seed)."""
    print(
        f"scenario: the send benchmark's on client 5.3.3, 64 sender threads, {args.messages:,} messages; "
        f"simulate_chunks (Arrow in, both tables out), best of {args.repeat} (CPU s)"
    )
    print(
        f"{'variant':44} {'CPU s':>8} {'msg/s CPU':>12} {'att/s CPU':>12} {'req/msg':>8} {'refused':>8} "
        f"{'wait p99':>9} {'vs off':>7}"
    )
    off: dict[str, float] = {}
    for label, mode, settings in VARIANTS:
        sc = variant_scenario(args.messages, mode, settings, args.seed)
        messages = workload.generate(sc)
        if not compiled.supports(sc, messages):
            print(f"{label:44} not on the compiled engine")
            return 2
        chunks = [messages.slice(k, CHUNK_ROWS) for k in range(0, messages.num_rows, CHUNK_ROWS)]
        _streamed(chunks[:1], sc)  # warm-up: numba compile or cache load
        out, _, cpu = timed(lambda sc=sc, chunks=chunks: _streamed(chunks, sc), args.repeat)
        n_msg, n_att = messages.num_rows, out.attempts.num_rows  # a batch's attempts: rows of one member
        errors = out.results.column("error")
        refused = sum(pc.sum(pc.ends_with(errors, text)).as_py() or 0 for text in TIMEOUT_TEXTS)
        wait = pc.quantile(out.results.column("queue_wait_ms"), 0.99)[0].as_py()  # the publish delay
        off.setdefault(mode, cpu)
        print(
            f"{label:44} {cpu:8.2f} {n_msg / cpu:12,.0f} {n_att / cpu:12,.0f} {n_att / n_msg:8.3f} "
            f"{refused:8,} {wait:7,.0f}ms {cpu / off[mode]:6.2f}x"
        )
    return 0
