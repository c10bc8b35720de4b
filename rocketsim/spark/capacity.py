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

import dataclasses
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pyarrow as pa

from rocketsim import __version__
from rocketsim.present import text
from rocketsim.scenario import Scenario, capacity
from rocketsim.spark import pipeline
from rocketsim.spark.cli import CapacityArgs, JobArgs, chart_file
from rocketsim.spark.delta_sink import publish_run
from rocketsim.spark.launch import PublishedRunError
from rocketsim.spark.run import SCRATCH_SUFFIX, map_bins
from rocketsim.spark.session import Spark, context_of
from rocketsim.stage.driver import merge_aggregates
from rocketsim.stage.graph import RUNS_TABLE
from rocketsim.stage.plan import balanced_bins
from rocketsim.stage.protocols import WHOLE_RUN_AGGREGATES, scratch_key
from rocketsim.stage.sweeps import whole_run_task
from rocketsim.tables import summaries
from rocketsim.warehouse.paths import delete_dir, make_dir, new_write_id, staging_path
from rocketsim.warehouse.stage_files import ScratchFolder

CAPACITY_JOB = "capacity"


def run_capacity(
    spark: Spark, args: CapacityArgs, base: Scenario, scenarios: dict[str, Scenario]
) -> pa.Table:
    """Run every cluster size (a size whose iterative rounds did not converge again with the exact joint
    loop, when small enough), write the ``capacity`` table and a ``runs`` row, print the table and the
    answer and write the chart; returns the capacity rows (one per size)."""
    started = datetime.now(UTC)
    t = time.monotonic()
    say = (lambda line: None) if args.quiet else (lambda line: print(line, flush=True))
    names = list(scenarios)
    total = base.workload.total_messages()
    say(
        f"rocketsim {__version__}: capacity of {base.name} (seed {base.seed}, {total:,} messages, coupling "
        f"{base.coupling}) over {', '.join(names)}: target p99 <= {args.target_p99_ms:g} ms, failures <= "
        f"{args.max_failure_rate:.3%} -> {args.warehouse} run_id={args.run_id}"
    )
    pipeline.say_scenario(args.quiet, base)
    scratch = staging_path(args.warehouse, "capacity", new_write_id() + SCRATCH_SUFFIX)
    make_dir(scratch)
    try:
        merged, couplings = _run_sizes(spark, args, scenarios, scratch, say)
    finally:
        delete_dir(scratch)
    tables = summaries.summary_tables(merged)
    rows = capacity.capacity_table(
        tables["run_summary"],
        tables["broker_windows"],
        scenarios,
        args.target_p99_ms,
        args.max_failure_rate,
        couplings,
    )
    rep_c = pipeline.publish_rows(spark, args.warehouse, "capacity", args.run_id, rows)
    job = JobArgs(args.scenario_path, args.warehouse, args.run_id, args.overrides, quiet=True)
    attempts = int(sum(r["sends"] for r in tables["run_summary"].to_pylist() if r["scope"] == "all"))
    rep_r = pipeline.write_runs_row(
        spark,
        job,
        base,
        total * len(names),
        attempts,
        started,
        time.monotonic() - t,
        tables=(rep_c.table, RUNS_TABLE),
    )
    publish_run(spark, args.warehouse, args.run_id, CAPACITY_JOB, [rep_c, rep_r])
    chart = _write_chart(rows, chart_file(args.chart))
    say(f"[capacity] {rows.num_rows} sizes -> {rep_c.path}; chart -> {chart} ({time.monotonic() - t:.1f} s)")
    print(format_capacity(rows))
    print(capacity.answer(rows))
    return rows


def _run_sizes(
    spark: Spark,
    args: CapacityArgs,
    scenarios: dict[str, Scenario],
    scratch: str,
    say: Callable[[str], None],
) -> tuple[summaries.SummaryAggregates, dict[str, capacity.Coupling]]:
    """Every size whole, one task each; the sizes whose iterative rounds did not converge run again with
    the joint loop (:func:`rocketsim.scenario.capacity.exact_rerun`), their aggregates replacing the
    iterative ones. The sizes' aggregates merged, and how each was coupled."""
    names = list(scenarios)
    done = _whole_runs(spark, args, [scenarios[n] for n in names], names, scratch, 0)
    couplings = {
        n: capacity.Coupling(scenarios[n].coupling, done[i].get("rounds"), done[i].get("residual"))
        for i, n in enumerate(names)
    }
    keys = [scratch_key(WHOLE_RUN_AGGREGATES, i) for i in range(len(names))]
    again = {
        i: exact
        for i, n in enumerate(names)
        if not couplings[n].converged and (exact := capacity.exact_rerun(scenarios[n])) is not None
    }
    if again:
        rerun = [names[i] for i in again]
        say(
            f"[capacity] {', '.join(rerun)}: iterative rounds did not converge; run again with the joint loop"
        )
        _whole_runs(spark, args, list(again.values()), rerun, scratch, len(names))
        for k, i in enumerate(again):
            keys[i] = scratch_key(WHOLE_RUN_AGGREGATES, len(names) + k)
            couplings[names[i]] = dataclasses.replace(couplings[names[i]], coupling="joint")
    return merge_aggregates(ScratchFolder(scratch), keys), couplings


def _whole_runs(
    spark: Spark,
    args: CapacityArgs,
    scs: list[Scenario],
    names: list[str],
    scratch: str,
    first: int,
) -> dict[int, dict[str, int]]:
    """Each scenario run whole in a task of its own (aggregates numbered from ``first``); their counts."""
    partitions = args.partitions or context_of(spark).defaultParallelism

    def work(i: int) -> dict[str, int]:
        return whole_run_task(scs[i], names[i], first + i, args.window_ms, ScratchFolder(scratch))

    weights = [sc.workload.total_messages() * len(sc.cluster.brokers) for sc in scs]
    done = map_bins(spark, balanced_bins(weights, partitions), work)
    if len(done) != len(scs):
        raise RuntimeError(f"capacity: {len(done)} of {len(scs)} cluster sizes reported")
    return done


def _write_chart(rows: pa.Table, path: str) -> str:
    """The chart of the sweep at ``path`` (checked before Spark started: :func:`rocketsim.spark.cli.
    check_chart`); a failure now is a :class:`PublishedRunError` (the sweep is published by then)."""
    from rocketsim.present import plots  # matplotlib: imported by the sweep alone, not by every job

    folder, name = os.path.split(os.path.abspath(path))
    fig = plots.capacity_chart(rows.to_pandas())
    try:
        return str(plots.save_figure(fig, folder, name.removesuffix(".png")))
    except OSError as exc:
        raise PublishedRunError(f"the chart could not be written to {path}: {exc.strerror or exc}") from exc


def format_capacity(rows: pa.Table) -> str:
    """The sweep as a small text table: per size its p99, failed share, flow-control rejections, the
    writers' peak load (offered vs capacity) and backlog, the client's wait, the coupling (rounds and
    residual of an iterative run) and whether it meets both bounds."""
    head = ["size", "p99 ms", "failed", "busy", "writer load", "backlog", "wait p99", "coupling", "rounds"]
    table = [[*head, "residual", "meets"]]
    for r in rows.to_pylist():
        load = "-" if r["peak_writer_load"] is None else f"{r['peak_writer_load']:.0%}"
        meets = {True: "yes", False: "no", None: "unknown"}[r["meets_target"]]
        rounds, residual = r["coupling_rounds"], r["coupling_residual"]
        table.append(
            [
                r["variant"],
                text.ms(r["latency_p99_ms"]),
                text.pct(r["failure_rate"], 3),
                f"{r['busy_rejections']:,}",
                load,
                "-" if r["peak_queue_depth"] is None else f"{r['peak_queue_depth']:,}",
                text.ms(r["queue_wait_p99_ms"]),
                r["coupling"] + ("" if rounds is None or not residual else " (again)"),
                "-" if rounds is None else f"{rounds:,}",
                "-" if residual is None else f"{residual:,}",
                meets + (" <- smallest" if r["smallest"] else ""),
            ]
        )
    notes = [
        "  (writer load: the busiest broker window's appends over what its writer can do, above 100% a "
        "backlog builds; backlog: the deepest send queue a request found; wait: sends waiting for a sender "
        "thread; coupling: joint (again) when the iterative rounds did not converge, the rounds and "
        "residual the iterative run's)"
    ]
    return "\n".join([*text.text_table(table, ""), *notes])
