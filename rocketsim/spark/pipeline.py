"""A run's jobs on Spark: generate -> simulate -> broker side -> summarize -> runs row, each a thin step.

* generate and simulate: the run's stage (:mod:`rocketsim.spark.run`: producer tasks and broker tasks over
  :mod:`rocketsim.stage`, writing Parquet that the driver commits), together (``jobs/pipeline.py``) or
  one at a time (``jobs/generate.py``, then ``jobs/simulate.py`` reading the committed messages);
* broker side: ``broker_storage``, ``transactions``, ``consumer_load`` from ``commit_log``
  (:mod:`rocketsim.spark.broker_side`);
* summarize: Spark aggregations in :mod:`rocketsim.spark.summaries`;
* reconcile: the tables agree with each other; the ``runs`` row; the printed summary.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rocketsim import __version__, schemas
from rocketsim.scenario import Scenario
from rocketsim.spark import broker_side, summaries
from rocketsim.spark.cli import JobArgs
from rocketsim.spark.delta_sink import write_run
from rocketsim.spark.read import read_spark
from rocketsim.spark.run import run_stage
from rocketsim.spark.session import spark_schema
from rocketsim.warehouse.read import read_arrow


def _partitions(spark: SparkSession, args: JobArgs) -> int:
    return args.partitions or spark.sparkContext.defaultParallelism


def _say(args: JobArgs, text: str) -> None:
    if not args.quiet:
        print(text, flush=True)


# ---- generate and simulate: the run's stage -----------------------------------------------------


def run_generate(spark: SparkSession, args: JobArgs, sc: Scenario) -> int:
    """``messages`` of the run (``jobs/generate.py``); returns their count."""
    t = time.monotonic()
    rep = run_stage(spark, sc, args.warehouse, args.run_id, _partitions(spark, args), (schemas.GENERATE,))
    (messages,) = rep.reports
    _say(args, f"[generate] {messages.rows:,} messages -> {messages.path} ({time.monotonic() - t:.1f} s)")
    return messages.rows


def run_simulate(spark: SparkSession, args: JobArgs, sc: Scenario) -> tuple[int, int]:
    """``send_attempts``, ``send_results`` and ``commit_log`` from the run's committed ``messages``
    (``jobs/simulate.py``); returns (results, attempts)."""
    t = time.monotonic()
    rep = run_stage(spark, sc, args.warehouse, args.run_id, _partitions(spark, args), (schemas.SIMULATE,))
    paths = {r.table: r.path for r in rep.reports}
    _say(
        args,
        f"[simulate] {rep.results:,} results, {rep.attempts:,} attempts, {rep.log_records:,} commit-log "
        f"records -> {paths['send_results']}, {paths['send_attempts']}, {paths['commit_log']} "
        f"({time.monotonic() - t:.1f} s)",
    )
    return rep.results, rep.attempts


def run_generate_simulate(spark: SparkSession, args: JobArgs, sc: Scenario) -> tuple[int, int]:
    """generate + simulate in one pass (``jobs/pipeline.py``); returns (messages, attempts)."""
    rep = run_stage(spark, sc, args.warehouse, args.run_id, _partitions(spark, args))
    _say(
        args,
        f"[generate+simulate] {rep.messages:,} messages, {rep.attempts:,} attempts, {rep.results:,} results, "
        f"{rep.log_records:,} commit-log records ({rep.producers_s:.1f} s producers, {rep.brokers_s:.1f} s "
        f"brokers, {rep.commit_s:.1f} s commit)",
    )
    return rep.messages, rep.attempts


# ---- broker side and summaries: Spark aggregations ----------------------------------------------


def run_broker_side(spark: SparkSession, args: JobArgs, sc: Scenario) -> None:
    """broker_storage, transactions, consumer_load from the run's commit_log, results and messages."""
    t = time.monotonic()
    log, messages, results = (
        read_spark(spark, args.warehouse, name, args.run_id)
        for name in ("commit_log", "messages", "send_results")
    )
    storage = broker_side.broker_storage(log, args.window_ms)
    write_run(storage, args.warehouse, "broker_storage", args.run_id, schemas.BROKER_STORAGE)
    txns = broker_side.transaction_table(log, messages, results, sc)
    write_run(txns, args.warehouse, "transactions", args.run_id, schemas.TRANSACTIONS)
    txns = read_spark(spark, args.warehouse, "transactions", args.run_id)
    load = broker_side.consumer_load(log, txns, sc)
    write_run(load, args.warehouse, "consumer_load", args.run_id, schemas.CONSUMER_LOAD)
    _say(args, f"[broker side] broker_storage, transactions, consumer_load ({time.monotonic() - t:.1f} s)")


def run_summarize(spark: SparkSession, args: JobArgs) -> None:
    """isolation_intervals, broker_windows, queue_windows, producer_windows, run_summary."""
    t = time.monotonic()
    attempts = read_spark(spark, args.warehouse, "send_attempts", args.run_id)
    results = read_spark(spark, args.warehouse, "send_results", args.run_id)
    # the (small) intervals are written first and read back, so the three summaries below reuse them
    write_run(
        summaries.isolation_intervals(attempts),
        args.warehouse,
        "isolation_intervals",
        args.run_id,
        schemas.ISOLATION_INTERVALS,
    )
    intervals = read_spark(spark, args.warehouse, "isolation_intervals", args.run_id)
    w = args.window_ms
    outputs = {
        "broker_windows": (
            summaries.broker_windows(attempts, w, intervals=intervals),
            schemas.BROKER_WINDOWS,
        ),
        "queue_windows": (summaries.queue_windows(attempts, w), schemas.QUEUE_WINDOWS),
        "producer_windows": (
            summaries.producer_windows(results, w, attempts=attempts, intervals=intervals),
            schemas.PRODUCER_WINDOWS,
        ),
        "run_summary": (summaries.run_summary(results, attempts, intervals=intervals), schemas.RUN_SUMMARY),
    }
    for name, (df, schema) in outputs.items():
        write_run(df, args.warehouse, name, args.run_id, schema)
    _say(args, f"[summarize] isolation_intervals, {', '.join(outputs)} ({time.monotonic() - t:.1f} s)")


class ReconciliationError(RuntimeError):
    """The run's tables disagree with each other: the run is reported as failed."""


# what each standalone job has written by the time it reconciles
RECONCILE_SCOPES = {
    "simulate": (schemas.GENERATE, schemas.SIMULATE),
    "summarize": (schemas.GENERATE, schemas.SIMULATE, schemas.SUMMARIZE),
    "run": (schemas.GENERATE, schemas.SIMULATE, schemas.BROKER_SIDE, schemas.SUMMARIZE),
}


def reconcile(spark: SparkSession, args: JobArgs, *, through: str = "run") -> dict[str, int]:
    """Check the run's tables agree: every table's rows are distinct by its keys (the registry's), one
    result per message, attempt rows = sum of attempts, per-broker and per-window sums = totals. Raises
    :class:`ReconciliationError` naming every broken rule.

    ``through`` limits the rules to the tables written by then, for the standalone jobs: "simulate"
    (messages, send_results, send_attempts, commit_log), "summarize" (and the summary tables), "run"
    (every table but ``runs``).
    """
    if through not in RECONCILE_SCOPES:
        raise ValueError(f"through must be one of {tuple(RECONCILE_SCOPES)}, got {through!r}")

    def read(table: str) -> DataFrame:
        return read_spark(spark, args.warehouse, table, args.run_id)

    n = F.count(F.lit(1)).alias("n")
    sends = F.coalesce(F.sum("sends"), F.lit(0)).alias("sends")
    stored = F.when(F.col("status").isin("FAILED", "REJECTED") | F.col("broker").isNull(), 0).otherwise(1)
    # what the rules below need of each table, besides its row and key counts
    extra = {
        "send_results": [
            F.coalesce(F.sum("attempts"), F.lit(0)).alias("attempts"),
            F.sum(stored).alias("stored"),
        ],
        "broker_windows": [sends],
        "queue_windows": [sends],
        "run_summary": [
            F.coalesce(F.sum(F.when(F.col("scope") != "all", F.col("messages"))), F.lit(0)).alias("stored")
        ],
    }
    got: dict[str, dict] = {}
    checks: dict[str, tuple[object, object]] = {}
    for spec in schemas.written_by(*RECONCILE_SCOPES[through]):
        keys = [F.count_distinct(F.struct(*spec.keys)).alias("keys")] if spec.keys else []
        got[spec.name] = row = read(spec.name).agg(n, *keys, *extra.get(spec.name, [])).first().asDict()
        if spec.keys:
            checks[f"{spec.name} rows are distinct ({', '.join(spec.keys)})"] = (row["n"], row["keys"])
    m, r, a = got["messages"], got["send_results"], got["send_attempts"]
    checks["one result per message"] = (m["n"], r["n"])
    checks["distinct (producer, seq) in messages and results"] = (m["keys"], r["keys"])
    checks["attempt rows = sum of results.attempts"] = (a["n"], r["attempts"])
    if through != "simulate":
        stored_results = r["stored"] or 0
        checks["per-broker messages in run_summary = stored results"] = (
            got["run_summary"]["stored"],
            stored_results,
        )
        checks["sends in broker_windows = attempt rows"] = (got["broker_windows"]["sends"], a["n"])
        checks["sends in queue_windows = attempt rows"] = (got["queue_windows"]["sends"], a["n"])
    if through == "run":
        checks.update(broker_side.reconcile_checks(read))
    broken = [f"{rule}: {x} != {y}" for rule, (x, y) in checks.items() if x != y]
    if broken:
        raise ReconciliationError(f"run {args.run_id} does not reconcile: " + "; ".join(broken))
    return {"messages": m["n"], "results": r["n"], "attempts": a["n"]}


def write_runs_row(
    spark: SparkSession,
    args: JobArgs,
    sc: Scenario,
    messages: int,
    attempts: int,
    started: datetime,
    wall_s: float,
) -> None:
    """The run's ``runs`` row: its scenario and overrides, counts, and when and how long it ran."""
    row = {
        "run_id": args.run_id,
        "scenario_name": sc.name,
        "scenario_text": sc.source_text,
        "overrides": list(args.overrides),
        "seed": sc.seed,
        "code_version": __version__,
        "messages": messages,
        "attempts": attempts,
        "started_at": started.isoformat(timespec="seconds"),
        "wall_time_s": wall_s,
    }
    table = pa.Table.from_pylist([row], schema=schemas.RUNS)
    df = spark.createDataFrame(table.to_pandas(), schema=spark_schema(schemas.RUNS))
    write_run(df, args.warehouse, "runs", args.run_id, schemas.RUNS)


def print_summary(args: JobArgs) -> None:
    """The end-of-run summary, from the tiny run_summary table, and where every table of the run is."""
    rows = read_arrow(args.warehouse, "run_summary", args.run_id).to_pylist()
    overall = next(r for r in rows if r["scope"] == "all")
    brokers = sorted((r for r in rows if r["scope"] != "all"), key=lambda r: r["scope"])
    msgs = overall["messages"]
    print(
        f"\nrun {args.run_id}: {msgs:,} messages, {overall['ok'] / msgs:.2%} SEND_OK, "
        f"{overall['failed']:,} failed, {overall['rejected']:,} rejected, {overall['retries']:,} retries"
    )
    print(
        f"  send latency p50 {overall['latency_p50_ms']:.1f} ms, p99 {overall['latency_p99_ms']:.1f} ms, "
        f"p99.9 {overall['latency_p999_ms']:.1f} ms, max {overall['latency_max_ms']} ms"
    )
    print(
        f"  queue wait (publish delay) p99 {overall['queue_wait_p99_ms'] or 0:.1f} ms, "
        f"{overall['retry_budget_exhausted']:,} send(s) ran out of time with retries left, "
        f"{overall['isolations']:,} broker isolations ({overall['isolated_ms'] / 1000:,.1f} producer-s)"
    )
    for r in brokers:
        p99 = "-" if r["latency_p99_ms"] is None else f"{r['latency_p99_ms']:.1f} ms"
        err = r["attempt_error_rate"] or 0.0
        gini = "-" if r["queue_gini"] is None else f"{r['queue_gini']:.3f}"
        print(
            f"  {r['scope']:<12} {r['share']:6.1%} of stored messages, p99 {p99}, {r['sends']:,} attempts "
            f"({err:.2%} failed), queue Gini {gini}, {r['isolations']:,} isolations"
        )
    names = ",".join(t.name for t in schemas.written_by(*schemas.RUN_STAGES))
    print(f"  tables: {Path(args.warehouse).resolve()}/{{{names}}} (run_id={args.run_id})")


def run_pipeline(spark: SparkSession, args: JobArgs, sc: Scenario) -> None:
    """generate -> simulate -> broker side -> summarize -> runs row -> printed summary."""
    started = datetime.now(UTC)
    t = time.monotonic()
    _say(
        args,
        f"rocketsim {__version__}: scenario {sc.name} (seed {sc.seed}, "
        f"{sc.workload.total_messages():,} messages, client {sc.producers.client_version}, "
        f"fault strategy {'on' if sc.producers.send_latency_fault_enable else 'off'}) "
        f"-> {args.warehouse} run_id={args.run_id}",
    )
    messages, attempts = run_generate_simulate(spark, args, sc)
    run_broker_side(spark, args, sc)
    run_summarize(spark, args)
    counts = reconcile(spark, args)
    _say(
        args,
        f"[reconcile] {counts['messages']:,} messages = {counts['results']:,} results; "
        f"{counts['attempts']:,} attempt rows = sum of attempts; per-broker sums = totals",
    )
    write_runs_row(spark, args, sc, messages, attempts, started, time.monotonic() - t)
    print_summary(args)
    _say(args, f"done in {time.monotonic() - t:.1f} s")
