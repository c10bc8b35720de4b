"""A run's jobs on Spark, each a thin step over the run's stage (:mod:`rocketsim.spark.run`).

* the whole run (``jobs/pipeline.py``): ONE pass, generate -> simulate -> broker side -> summarize:
  producer tasks generate, simulate and write their rows and their mergeable aggregates, broker tasks
  number the commit logs and write the broker-side rows, the driver merges the small parts into the
  summary tables and ``consumer_load``, commits every table once, reconciles the run from the tasks'
  counts and the commits' reports, writes the ``runs`` row, makes all of them the run's in one
  run-level commit (:mod:`rocketsim.warehouse.run_commit`: nothing of the run is visible before it, and
  a rerun replaces the old run only then), and prints the summary;
* the same stage one part at a time (``jobs/generate.py``, ``simulate.py``, ``broker_side.py``,
  ``summarize.py``): the tasks read what they need of the run's published tables, each job reconciles
  what it wrote and read, then publishes its tables the same way.

No Spark job reads a table back: Spark only schedules the tasks and collects their counts.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from rocketsim import __version__
from rocketsim.present import text
from rocketsim.scenario import Scenario, span
from rocketsim.spark.cli import JobArgs
from rocketsim.spark.delta_sink import publish_staged
from rocketsim.spark.run import StageReport, publish_stage, run_stage, write_stage
from rocketsim.spark.session import Spark, context_of
from rocketsim.stage.graph import RUN_TABLES, STAGES
from rocketsim.tables import schemas
from rocketsim.warehouse.delta import WriteReport
from rocketsim.warehouse.paths import delete_dir, make_dir, new_write_id, staging_path
from rocketsim.warehouse.stage_files import write_driver_table

PIPELINE_JOB = "pipeline"


def _partitions(spark: Spark, args: JobArgs) -> int:
    return args.partitions or context_of(spark).defaultParallelism


def _say(args: JobArgs, line: str) -> None:
    if not args.quiet:
        print(line, flush=True)


def say_scenario(quiet: bool, sc: Scenario) -> None:
    """The scenario's span, rate and faults (:func:`rocketsim.scenario.span.header_lines`), unless
    ``quiet``; and its warnings (a fault the span cuts, sender threads that would queue), always, on
    stderr."""
    if not quiet:
        print("\n".join(span.header_lines(sc)), flush=True)
    for warning in span.warnings(sc):
        print(f"warning: {warning}", file=sys.stderr, flush=True)


# ---- the run's stage: the whole run in one pass, or one part of it --------------------------------


def _stage(spark: Spark, args: JobArgs, sc: Scenario, stages: tuple[str, ...]) -> StageReport:
    """One part of the run's stage, written, reconciled and published."""
    (job,) = stages
    _say(
        args, f"rocketsim {__version__}: {job} of scenario {sc.name} -> {args.warehouse} run_id={args.run_id}"
    )
    say_scenario(args.quiet, sc)
    return run_stage(
        spark, sc, args.warehouse, args.run_id, _partitions(spark, args), stages, args.window_ms, job
    )


def run_generate(spark: Spark, args: JobArgs, sc: Scenario) -> int:
    """``messages`` of the run (``jobs/generate.py``); returns their count."""
    t = time.monotonic()
    rep = _stage(spark, args, sc, (schemas.GENERATE,))
    (messages,) = rep.reports
    _say(args, f"[generate] {messages.rows:,} messages -> {messages.path} ({time.monotonic() - t:.1f} s)")
    return messages.rows


def run_simulate(spark: Spark, args: JobArgs, sc: Scenario) -> tuple[int, int]:
    """``send_attempts``, ``send_results`` and ``commit_log`` from the run's committed ``messages``
    (``jobs/simulate.py``); returns (results, attempts)."""
    t = time.monotonic()
    rep = _stage(spark, args, sc, (schemas.SIMULATE,))
    _say_rounds(args, rep)
    paths = {r.table: r.path for r in rep.reports}
    _say(
        args,
        f"[simulate] {rep.rows('send_results'):,} results, {rep.rows('send_attempts'):,} attempts, "
        f"{rep.rows('commit_log'):,} commit-log records -> {paths['send_results']}, "
        f"{paths['send_attempts']}, {paths['commit_log']} ({time.monotonic() - t:.1f} s)",
    )
    return rep.rows("send_results"), rep.rows("send_attempts")


def run_broker_side(spark: Spark, args: JobArgs, sc: Scenario) -> None:
    """``broker_storage``, ``transactions``, ``consumer_load`` from the run's committed commit log,
    messages and results (``jobs/broker_side.py``)."""
    t = time.monotonic()
    rep = _stage(spark, args, sc, (schemas.BROKER_SIDE,))
    _say(args, f"[broker side] {', '.join(r.table for r in rep.reports)} ({time.monotonic() - t:.1f} s)")


def run_summarize(spark: Spark, args: JobArgs, sc: Scenario) -> dict[str, pa.Table]:
    """The summary tables from the run's committed attempts and results (``jobs/summarize.py``, e.g.
    with another ``--window-ms``); returns them."""
    t = time.monotonic()
    rep = _stage(spark, args, sc, (schemas.SUMMARIZE,))
    _say(args, f"[summarize] {', '.join(r.table for r in rep.reports)} ({time.monotonic() - t:.1f} s)")
    return rep.summary_tables


def run_one_pass(spark: Spark, args: JobArgs, sc: Scenario) -> StageReport:
    """Every table of the run but ``runs`` (or a summaries-only run's, ``--tables``), in one pass
    (generate, simulate, broker side, summarize), committed and reconciled, not yet published
    (:func:`rocketsim.spark.run.publish_stage`)."""
    only = () if args.tables == RUN_TABLES else args.tables
    parts = _partitions(spark, args)
    rep = write_stage(spark, sc, args.warehouse, args.run_id, parts, STAGES, args.window_ms, only)
    if only:
        rows = (
            f"{rep.simulated('messages'):,} messages and {rep.simulated('send_attempts'):,} attempts "
            f"simulated and summarized, no row of them written (--tables {', '.join(only)})"
        )
    else:
        rows = (
            f"{rep.rows('messages'):,} messages, {rep.rows('send_attempts'):,} attempts, "
            f"{rep.rows('send_results'):,} results, {rep.rows('commit_log'):,} commit-log records"
        )
    _say(
        args,
        f"[one pass] {rows}, {text.plural(len(rep.reports), 'table')} ({rep.producers_s:.1f} s producer "
        f"tasks, {rep.brokers_s:.1f} s broker tasks, {rep.driver_s:.1f} s driver merge, "
        f"{rep.commit_s:.1f} s commits)",
    )
    _say_rounds(args, rep)
    return rep


def _say_rounds(args: JobArgs, rep: StageReport) -> None:
    if rep.rounds is not None:
        fixed = "a fixed point" if rep.residual == 0 else "the round limit"
        _say(
            args,
            f"[iterative] {rep.rounds} rounds, last residual {rep.residual} (broker, ms) buckets ({fixed})",
        )


def write_runs_row(
    spark: Spark,
    args: JobArgs,
    sc: Scenario,
    messages: int,
    attempts: int,
    started: datetime,
    wall_s: float,
    rounds: int | None = None,
    residual: int | None = None,
    *,
    tables: Sequence[str],
) -> WriteReport:
    """The run's ``runs`` row: its scenario and overrides, counts, when and how long it ran, the
    iterative coupling's rounds and residual and the ``tables`` it wrote (the driver writes it with
    pyarrow and commits it as a write of the table, for the job to publish)."""
    row = {
        "scenario_name": sc.name,
        "scenario_text": sc.source_text,
        "overrides": list(args.overrides),
        "seed": sc.seed,
        "code_version": __version__,
        "messages": messages,
        "attempts": attempts,
        "started_at": started.isoformat(timespec="seconds"),
        "wall_time_s": wall_s,
        "coupling_rounds": rounds,
        "coupling_residual": residual,
        "client_version": sc.producers.client_version,
        "client_line": sc.producers.client_line,
        "tables": list(tables),
    }
    return publish_rows(
        spark,
        args.warehouse,
        "runs",
        args.run_id,
        pa.Table.from_pylist([row], schemas.data_schema(schemas.RUNS)),
    )


def publish_rows(spark: Spark, warehouse: str, table: str, run_id: str, rows: pa.Table) -> WriteReport:
    """``rows`` (a small table the driver made) as the run's one commit of ``table``: written with pyarrow
    into a staging folder, then published (:func:`rocketsim.spark.delta_sink.publish_staged`)."""
    write_id = new_write_id()
    staging = staging_path(warehouse, table, write_id)
    make_dir(staging)
    try:
        write_driver_table(staging, rows)
        return publish_staged(spark, warehouse, table, run_id, schemas.TABLES[table].schema, write_id)
    except BaseException:
        delete_dir(staging)
        raise


def print_summary(args: JobArgs, summary_tables: Mapping[str, pa.Table]) -> None:
    """The end-of-run summary and the fault-window view, from the run's (tiny) ``run_summary`` and
    ``fault_windows`` rows, and where every table the run wrote is."""
    print(text.run_summary_text(args.run_id, summary_tables["run_summary"].to_pylist()))
    print(text.fault_windows_text(summary_tables["fault_windows"].to_pylist()))
    names = args.tables
    print(
        f"  {text.plural(len(names), 'table')}: {Path(args.warehouse).resolve()}/{{{','.join(names)}}} "
        f"(run_id={args.run_id})"
    )


def run_pipeline(spark: Spark, args: JobArgs, sc: Scenario) -> None:
    """Every table in one pass -> reconciled -> ``runs`` row -> the run published -> printed summary."""
    started = datetime.now(UTC)
    t = time.monotonic()
    _say(
        args,
        f"rocketsim {__version__}: scenario {sc.name} (seed {sc.seed}, "
        f"{sc.workload.total_messages():,} messages, {sc.client_summary}) "
        f"-> {args.warehouse} run_id={args.run_id}",
    )
    say_scenario(args.quiet, sc)
    rep = run_one_pass(spark, args, sc)
    messages, attempts = rep.simulated("messages"), rep.simulated("send_attempts")
    _say(
        args,
        f"[reconcile] {messages:,} messages = {rep.simulated('send_results'):,} results; "
        f"{attempts:,} attempt rows = sum of attempts; per-broker sums = totals ({len(rep.checks)} rules)",
    )
    t_runs = time.monotonic()
    runs = write_runs_row(
        spark, args, sc, messages, attempts, started, t_runs - t, rep.rounds, rep.residual, tables=args.tables
    )
    publish_stage(spark, args.warehouse, args.run_id, PIPELINE_JOB, rep, runs)
    tables = text.plural(len(rep.reports) + 1, "table")
    _say(args, f"[runs] 1 row; run {args.run_id} published: {tables} ({time.monotonic() - t_runs:.1f} s)")
    print_summary(args, rep.summary_tables)
    _say(args, f"done in {time.monotonic() - t:.1f} s")
