"""``python -m rocketsim.bench pipeline``: rocketsim end to end against Spark's own Parquet-write floor.

In one process and one SparkSession, for each N it measures

(a) the floor: Spark writing N rows of the ``send_results`` schema to Parquet (rows made by Spark
    expressions from ``spark.range``: no Python in the loop);
(b) rocketsim end to end: the run's one pass for N messages of a fault-on 4.9.8 scenario with 8
    brokers and 64 producers (:func:`rocketsim.spark.pipeline.run_one_pass`): every table of the run
    but ``runs`` (generate, simulate, broker side, summaries), committed and reconciled;

and prints both times, their ratio, messages/s, and the peak RSS of the driver (Python + JVM; the JVM
keeps the heap the floor's write grew, so the Python alone is shown too) and of the Python workers,
sampled every 0.2 s. With ``--repeat R`` each figure is the median of R runs. Then, at the largest N,
one skewed run (``--hot-share``, default 0.5: producer 0 sends half of the messages), and the targets
of design §6 checked against the medians: ratio <= 2.0 at the largest N, time x <= 10.5 and driver
RSS x <= 1.5 from the smallest N to the largest. The table is printed and written as JSON (``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

SCENARIO = """
name = "bench"
seed = 1
[cluster]
brokers = ["broker-a", "broker-b", "broker-c", "broker-d", "broker-e", "broker-f", "broker-g", "broker-h"]
write_queues = 4
read_queues = 4
[producers]
count = 64
client_version = "4.9.8"
send_latency_fault_enable = true
[workload]
messages = 1000
rate_per_s = 20000.0
[brokers.default]
latency = { median_ms = 2.0, sigma = 0.5, spike_probability = 0.001, spike_scale_ms = 40.0 }
errors = { system_busy = 0.0005, remoting_timeout = 0.0001, flush_slave_timeout = 0.0002 }
[[faults]]
broker = "broker-c"
kind = "slowdown"
start_s = 60.0
end_s = 360.0
factor = 20.0
"""


class RssSampler:
    """Peak RSS of this process tree: the driver (this Python and its JVM) and the Python workers."""

    def __init__(self, period_s: float = 0.2) -> None:
        self.period_s = period_s
        self.driver_peak = 0
        self.python_peak = 0  # the driver's Python alone (what the run's stage keeps on the driver)
        self.workers_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        python = me.memory_info().rss
        driver, workers = python, 0
        for child in me.children(recursive=True):
            try:
                name = " ".join(child.cmdline())
                rss = child.memory_info().rss
            except psutil.Error:
                continue  # a worker that just ended
            if "pyspark.daemon" in name or "pyspark.worker" in name:
                workers += rss
            elif "java" in name:
                driver += rss
        self.driver_peak = max(self.driver_peak, driver)
        self.python_peak = max(self.python_peak, python)
        self.workers_peak = max(self.workers_peak, workers)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.period_s)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


@dataclass
class Row:
    """One N: medians over the repeats."""

    workload: str  # "even", or "hot <share>": producer 0 sends that share
    messages: int
    floor_s: float
    rocketsim_s: float
    ratio: float
    messages_per_s: float
    attempts: int
    driver_peak_mib: float
    driver_python_peak_mib: float
    workers_peak_mib: float
    repeats: int


def floor_seconds(spark, n: int, out: Path, partitions: int) -> float:  # noqa: ANN001 - SparkSession
    """Spark writing n rows with the send_results schema to Parquet (the floor)."""
    from pyspark.sql import functions as F

    from rocketsim import schemas
    from rocketsim.spark.session import spark_schema

    target = spark_schema(schemas.SEND_RESULTS)
    id_ = F.col("id")
    values = {
        "run_id": F.lit("floor"),
        "producer": (id_ % 64).cast("int"),
        "seq": (id_ / 64).cast("long"),
        "uniq_msg_id": F.lpad(F.upper(F.hex(id_ * 2654435761)), 32, "0"),
        "send_mode": F.lit("sync"),
        "status": F.when(id_ % 1000 == 0, "FAILED").otherwise("SEND_OK"),
        "attempts": F.lit(1),
        "brokers_sent": F.array(F.concat(F.lit("broker-"), (id_ % 8).cast("string"))),
        "broker": F.concat(F.lit("broker-"), (id_ % 8).cast("string")),
        "queue_id": (id_ % 4).cast("int"),
        "born_ts_ms": id_ / 20,
        "send_ts_ms": id_ / 20,
        "end_ts_ms": id_ / 20 + 2,
        "latency_ms": (id_ % 7).cast("long"),
        "wire_bytes": (id_ % 2000 + 100).cast("int"),
        "compressed": F.lit(False),
        "sys_flag": F.lit(0),
        "retry_budget_exhausted": F.lit(False),
    }
    cols = [
        (
            values.get(f.name, F.lit(0))
            if f.dataType.typeName() not in ("string", "array")
            else values.get(f.name, F.lit(None))
        )
        .cast(f.dataType)
        .alias(f.name)
        for f in target.fields
    ]
    df = spark.range(0, n, 1, numPartitions=partitions).select(*cols)
    t = time.monotonic()
    df.write.mode("overwrite").parquet(str(out))
    return time.monotonic() - t


def rocketsim_seconds(
    spark,  # noqa: ANN001 - SparkSession
    n: int,
    warehouse: Path,
    scenario_path: Path,
    hot_share: float = 0.0,
) -> tuple[float, int]:
    """The one pass (every table but ``runs``) for n messages; returns (seconds, attempt rows)."""
    from rocketsim.scenario import load_scenario
    from rocketsim.spark import pipeline
    from rocketsim.spark.cli import JobArgs

    sc = load_scenario(scenario_path, [f"workload.messages={n}", f"workload.hot_share={hot_share}"])
    args = JobArgs(str(scenario_path), str(warehouse), f"bench-{n}", (), 0, 10_000, quiet=True)
    t = time.monotonic()
    attempts = pipeline.run_one_pass(spark, args, sc).rows("send_attempts")
    return time.monotonic() - t, attempts


def targets(rows: list[Row]) -> dict[str, tuple[float, float, bool]]:
    """Design §6 against the even-workload medians: name -> (value, limit, met)."""
    if not rows:
        return {}
    out = {f"ratio at {rows[-1].messages:,}": (rows[-1].ratio, 2.0, rows[-1].ratio <= 2.0)}
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        time_x = b.rocketsim_s / a.rocketsim_s
        rss_x = b.driver_peak_mib / a.driver_peak_mib
        scale = b.messages / a.messages
        out[f"time x from {a.messages:,} to {b.messages:,}"] = (time_x, 1.05 * scale, time_x <= 1.05 * scale)
        out[f"driver RSS x from {a.messages:,} to {b.messages:,}"] = (rss_x, 1.5, rss_x <= 1.5)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rocketsim.bench pipeline", description=__doc__)
    p.add_argument("--sizes", default="1000000,10000000", help="comma-separated message counts")
    p.add_argument("--repeat", type=int, default=3, help="runs per size; figures are medians")
    p.add_argument("--json", default="bench-results/pipeline.json", help="where to write the table as JSON")
    p.add_argument("--master", default="local[*]")
    p.add_argument(
        "--hot-share",
        type=float,
        default=0.5,
        help="the skewed run at the largest N: producer 0's share of the messages (0: no skewed run)",
    )
    ns = p.parse_args(argv)
    sizes = [int(s.replace("_", "")) for s in ns.sizes.split(",") if s]

    from rocketsim.spark.session import build_session

    spark = build_session(app_name="rocketsim-bench", master=ns.master)
    partitions = spark.sparkContext.defaultParallelism
    work = Path(tempfile.mkdtemp(prefix="rocketsim-bench-"))
    scenario_path = work / "bench.toml"
    scenario_path.write_text(SCENARIO)
    rows: list[Row] = []
    try:
        floor_seconds(spark, 100_000, work / "warmup-floor", partitions)  # JIT, class loading
        rocketsim_seconds(spark, 20_000, work / "warmup-wh", scenario_path)  # numba cache, workers
        for n in sizes:
            floors, sims, driver, python, workers, attempts = [], [], [], [], [], 0
            for r in range(ns.repeat):
                floors.append(floor_seconds(spark, n, work / f"floor-{n}-{r}", partitions))
                shutil.rmtree(work / f"floor-{n}-{r}", ignore_errors=True)
                with RssSampler() as rss:
                    secs, attempts = rocketsim_seconds(spark, n, work / f"wh-{n}-{r}", scenario_path)
                sims.append(secs)
                driver.append(rss.driver_peak / 2**20)
                python.append(rss.python_peak / 2**20)
                workers.append(rss.workers_peak / 2**20)
                shutil.rmtree(work / f"wh-{n}-{r}", ignore_errors=True)
                print(
                    f"  N={n:,} run {r + 1}: floor {floors[-1]:.1f} s, rocketsim {sims[-1]:.1f} s", flush=True
                )
            f, s = statistics.median(floors), statistics.median(sims)
            rows.append(
                Row(
                    "even",
                    n,
                    round(f, 2),
                    round(s, 2),
                    round(s / f, 2),
                    round(n / s),
                    attempts,
                    round(statistics.median(driver)),
                    round(statistics.median(python)),
                    round(statistics.median(workers)),
                    ns.repeat,
                )
            )
        if ns.hot_share > 0 and rows:
            n, f = rows[-1].messages, rows[-1].floor_s
            with RssSampler() as rss:
                secs, attempts = rocketsim_seconds(
                    spark, n, work / f"wh-hot-{n}", scenario_path, hot_share=ns.hot_share
                )
            shutil.rmtree(work / f"wh-hot-{n}", ignore_errors=True)
            print(f"  N={n:,} producer 0 with {ns.hot_share:.0%}: rocketsim {secs:.1f} s", flush=True)
            skew = f"hot {ns.hot_share:g}"
            rows.append(
                Row(
                    skew,
                    n,
                    f,
                    round(secs, 2),
                    round(secs / f, 2),
                    round(n / secs),
                    attempts,
                    round(rss.driver_peak / 2**20),
                    round(rss.python_peak / 2**20),
                    round(rss.workers_peak / 2**20),
                    1,
                )
            )
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)

    cpu = (
        next(
            (
                ln.split(":", 1)[1].strip()
                for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")
            ),
            platform.processor(),
        )
        if Path("/proc/cpuinfo").exists()
        else ""
    )
    print(
        f"\nrocketsim pipeline benchmark: {os.cpu_count()} cores ({cpu}), "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB, medians of {ns.repeat}"
    )
    print(
        f"{'workload':>9} {'messages':>12} {'floor s':>9} {'rocketsim s':>12} {'ratio':>6} {'msg/s':>10} "
        f"{'attempts':>11} {'driver MiB':>11} {'of it Python':>12} {'workers MiB':>12} {'runs':>5}"
    )
    for r in rows:
        print(
            f"{r.workload:>9} {r.messages:>12,} {r.floor_s:>9.1f} {r.rocketsim_s:>12.1f} {r.ratio:>6.2f} "
            f"{r.messages_per_s:>10,} {r.attempts:>11,} {r.driver_peak_mib:>11,.0f} "
            f"{r.driver_python_peak_mib:>12,.0f} "
            f"{r.workers_peak_mib:>12,.0f} {r.repeats:>5}"
        )
    checks = targets([r for r in rows if r.workload == "even"])
    for name, (value, limit, ok) in checks.items():
        print(f"{'PASS' if ok else 'FAIL'} {name}: {value:.2f} (target <= {limit})")
    out = Path(ns.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "machine": {"cores": os.cpu_count(), "cpu": cpu},
                "rows": [asdict(r) for r in rows],
                "targets": {k: {"value": v, "limit": lim, "ok": ok} for k, (v, lim, ok) in checks.items()},
            },
            indent=2,
        )
    )
    print(f"written: {out}")
    return 0
