"""A capacity sweep in ONE Spark job (``jobs/capacity.py``): the scenario at each cluster size
(:mod:`rocketsim.scenario.capacity`), the sizes as grouping keys of the summaries.

Each size is a variant run whole in one task (:func:`rocketsim.stage.sweeps.whole_run_task`: with
closed-loop brokers its producers are coupled, so one producer alone is not the run; the variants are
what spreads over executors). Only the variants' summary aggregates, keyed by variant, leave the tasks (a
file each in a scratch folder); the driver merges them, computes the ``capacity`` table (one row per
size, :func:`rocketsim.scenario.capacity.capacity_table`), writes it and a ``runs`` row as the sweep's run
(one
run-level commit), prints the answer and writes the chart (:func:`rocketsim.present.plots.capacity_chart`).
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

import pyarrow as pa
from pyspark.sql import SparkSession

from rocketsim import __version__
from rocketsim.present import plots
from rocketsim.scenario import Scenario, capacity
from rocketsim.spark import pipeline
from rocketsim.spark.cli import CapacityArgs, JobArgs, chart_file
from rocketsim.spark.delta_sink import publish_run
from rocketsim.spark.launch import PublishedRunError
from rocketsim.spark.run import SCRATCH_SUFFIX, map_bins
from rocketsim.stage.plan import balanced_bins
from rocketsim.stage.sweeps import merged_sweep, whole_run_task
from rocketsim.tables import summaries
from rocketsim.warehouse.paths import delete_dir, make_dir, new_write_id, staging_path
from rocketsim.warehouse.stage_files import ScratchFolder

CAPACITY_JOB = "capacity"


def run_capacity(
    spark: SparkSession, args: CapacityArgs, base: Scenario, scenarios: dict[str, Scenario]
) -> pa.Table:
    """Run every cluster size, write the ``capacity`` table and a ``runs`` row, print the answer and write
    the chart; returns the capacity rows (one per size)."""
    started = datetime.now(UTC)
    t = time.monotonic()
    say = (lambda text: None) if args.quiet else (lambda text: print(text, flush=True))
    names = list(scenarios)
    total = base.workload.total_messages()
    say(
        f"rocketsim {__version__}: capacity of {base.name} (seed {base.seed}, {total:,} messages, coupling "
        f"{base.coupling}) over {', '.join(names)}: target p99 <= {args.target_p99_ms:g} ms, failures <= "
        f"{args.max_failure_rate:.3%} -> {args.warehouse} run_id={args.run_id}"
    )
    partitions = args.partitions or spark.sparkContext.defaultParallelism
    scratch = staging_path(args.warehouse, "capacity", new_write_id() + SCRATCH_SUFFIX)
    make_dir(scratch)

    def work(i: int) -> dict[str, int]:
        return whole_run_task(scenarios[names[i]], names[i], i, args.window_ms, ScratchFolder(scratch))

    try:
        weights = [sc.workload.total_messages() * len(sc.cluster.brokers) for sc in scenarios.values()]
        done = map_bins(spark, balanced_bins(weights, partitions), work)
        if len(done) != len(names):
            raise RuntimeError(f"capacity: {len(done)} of {len(names)} cluster sizes reported")
        merged = merged_sweep(ScratchFolder(scratch), whole_runs=len(names))
    finally:
        delete_dir(scratch)
    tables = summaries.summary_tables(merged)
    rows = capacity.capacity_table(
        tables["run_summary"], tables["broker_windows"], scenarios, args.target_p99_ms, args.max_failure_rate
    )
    rep_c = pipeline.publish_rows(spark, args.warehouse, "capacity", args.run_id, rows)
    job = JobArgs(args.scenario_path, args.warehouse, args.run_id, args.overrides, quiet=True)
    attempts = int(sum(r["sends"] for r in tables["run_summary"].to_pylist() if r["scope"] == "all"))
    rep_r = pipeline.write_runs_row(
        spark, job, base, total * len(names), attempts, started, time.monotonic() - t
    )
    publish_run(spark, args.warehouse, args.run_id, CAPACITY_JOB, [rep_c, rep_r])
    chart = _write_chart(rows, chart_file(args.chart))
    say(f"[capacity] {rows.num_rows} sizes -> {rep_c.path}; chart -> {chart} ({time.monotonic() - t:.1f} s)")
    print(format_capacity(rows))
    print(capacity.answer(rows))
    return rows


def _write_chart(rows: pa.Table, path: str) -> str:
    """The chart of the sweep at ``path`` (checked before Spark started: :func:`rocketsim.spark.cli.
    check_chart`); a failure now is a :class:`PublishedRunError` (the sweep is published by then)."""
    folder, name = os.path.split(os.path.abspath(path))
    fig = plots.capacity_chart(rows.to_pandas())
    try:
        return str(plots.save_figure(fig, folder, name.removesuffix(".png")))
    except OSError as exc:
        raise PublishedRunError(f"the chart could not be written to {path}: {exc.strerror or exc}") from exc


def format_capacity(rows: pa.Table) -> str:
    """The sweep as a small text table."""
    lines = [f"{'size':<18} {'p99 ms':>10} {'failed':>9} {'busy':>8} {'max util':>9}  meets"]
    for r in rows.to_pylist():
        util = "-" if r["max_utilisation"] is None else f"{r['max_utilisation']:.0%}"
        p99 = "-" if r["latency_p99_ms"] is None else f"{r['latency_p99_ms']:,.1f}"
        failed = "-" if r["failure_rate"] is None else f"{r['failure_rate']:.3%}"
        mark = "yes" + (" <- smallest" if r["smallest"] else "") if r["meets_target"] else "no"
        lines.append(f"{r['variant']:<18} {p99:>10} {failed:>9} {r['busy_rejections']:>8,} {util:>9}  {mark}")
    return "\n".join(lines)
