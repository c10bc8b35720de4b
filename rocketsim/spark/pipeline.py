"""The Spark stages of a run: generate -> simulate -> summarize, each a thin adapter over the core.

* generate: one row per producer, ``mapInArrow`` runs :func:`rocketsim.workload.generate_producer`.
* simulate: ``groupBy("producer").applyInArrow`` runs :func:`rocketsim.simulate.simulate` on each
  producer's messages; the result rows carry their attempts as a nested list, so one pass of the
  simulation feeds both ``send_results`` and ``send_attempts`` (the nested frame is persisted once).
  Each result row also carries its stored copies (:mod:`rocketsim.spark.broker_side`): they are
  numbered into ``commit_log``, and ``send_results`` gets its copy's offsets before it is written.
* generate + simulate fused (:mod:`rocketsim.spark.fused`, the default for the ``deltalake`` engine): the
  same tables written by the tasks themselves, without passing rows through Spark.
* broker side: ``broker_storage``, ``transactions``, ``consumer_load`` from ``commit_log``.
* summarize: Spark aggregations in :mod:`rocketsim.spark.summaries`.
"""

from __future__ import annotations

import argparse
import sys
import time
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rocketsim import __version__, schemas, simulate, workload
from rocketsim.scenario import Scenario, ScenarioError, load_scenario
from rocketsim.spark import broker_side, fused, summaries
from rocketsim.spark.delta_sink import write_run
from rocketsim.spark.session import delta_enabled, spark_schema

ATTEMPTS_COLUMN = "attempt_rows"


@dataclass(frozen=True)
class JobArgs:
    """The command line every job shares."""

    scenario_path: str
    warehouse: str = "warehouse"
    run_id: str = ""
    overrides: tuple[str, ...] = ()
    partitions: int = 0  # 0: Spark's default parallelism
    window_ms: int = 10_000
    quiet: bool = False
    extra: dict[str, str] = field(default_factory=dict)


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit code 2), like a bad scenario."""

    def error(self, message: str) -> typing.NoReturn:
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        raise SystemExit(2)


def add_scenario_arguments(p: argparse.ArgumentParser, *, run_id_help: str, set_help: str) -> None:
    """The options every job shares: --scenario, --warehouse, --run-id, --set."""
    p.add_argument("--scenario", required=True, help="scenario TOML file, e.g. conf/scenarios/steady.toml")
    p.add_argument(
        "--warehouse", default="warehouse", help="folder of the Delta tables (default ./warehouse)"
    )
    p.add_argument("--run-id", default="", help=run_id_help)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=set_help)


def parse_job_args(argv: list[str] | None, prog: str, description: str) -> tuple[JobArgs, Scenario]:
    """Parse and validate before Spark starts; a bad scenario exits with code 2 and one clear line."""
    p = OneLineArgumentParser(prog=prog, description=description)
    add_scenario_arguments(
        p,
        run_id_help="run id (default: <scenario name>-s<seed>)",
        set_help="override a scenario key by dotted path, e.g. --set workload.messages=200000",
    )
    p.add_argument(
        "--partitions",
        type=int,
        default=None,
        help="tasks of the simulate stage (the producers are spread over them)",
    )
    p.add_argument("--window-ms", type=int, default=10_000, help="window of the summary tables (ms)")
    p.add_argument("--quiet", action="store_true", help="print only the final summary")
    ns = p.parse_args(argv)
    try:
        sc = load_scenario(ns.scenario, ns.overrides)
        if ns.partitions is not None and ns.partitions < 1:  # absent: Spark's default parallelism
            raise ScenarioError(f"--partitions must be >= 1, got {ns.partitions}")
        if ns.window_ms <= 0:
            raise ScenarioError(f"--window-ms must be > 0, got {ns.window_ms}")
        if ns.run_id and not all(c.isalnum() or c in "-_." for c in ns.run_id):
            raise ScenarioError(
                f"--run-id may hold only letters, digits, '-', '_' and '.', got {ns.run_id!r}"
            )
        if not ns.run_id and not all(c.isalnum() or c in "-_." for c in sc.run_id):
            raise ScenarioError(  # else write_run refuses the default run id after Spark started
                f"name must hold only letters, digits, '-', '_' and '.' (it names the run), got {sc.name!r}"
            )
        if len(ns.run_id or sc.run_id) > 200:
            raise ScenarioError(f"the run id must be at most 200 characters, got {ns.run_id or sc.run_id!r}")
    except ScenarioError as exc:
        print(f"ScenarioError: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    args = JobArgs(
        ns.scenario,
        ns.warehouse,
        ns.run_id or sc.run_id,
        tuple(ns.overrides),
        ns.partitions or 0,
        ns.window_ms,
        ns.quiet,
    )
    return args, sc


def _partitions(spark: SparkSession, args: JobArgs) -> int:
    return args.partitions or spark.sparkContext.defaultParallelism


# ---- generate -----------------------------------------------------------------------------------


def generate_messages(spark: SparkSession, sc: Scenario, run_id: str, partitions: int) -> DataFrame:
    """The ``messages`` of the run: each producer's rows are made on the worker that owns it."""
    shares = workload.producer_shares(sc)
    n = len(shares)

    def produce(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for p in batch.column(0).to_pylist():
                yield from workload.generate_producer(sc, shares[p])

    producers = spark.range(0, n, 1, numPartitions=max(1, min(partitions, n)))
    schema = spark_schema(schemas.without_run_id(schemas.MESSAGES))
    return producers.mapInArrow(produce, schema).withColumn("run_id", F.lit(run_id))


# ---- simulate -----------------------------------------------------------------------------------

_ATTEMPT_STRUCT = pa.struct(list(schemas.without_run_id(schemas.SEND_ATTEMPTS)))
NESTED_RESULTS = (
    schemas.without_run_id(schemas.SEND_RESULTS)
    .append(pa.field(ATTEMPTS_COLUMN, pa.list_(_ATTEMPT_STRUCT)))
    .append(broker_side.COPIES_FIELD)  # the message's stored copies (commit-log records)
)


def nest_attempts(results: pa.Table, attempts: pa.Table) -> pa.Table:
    """Attach each result's attempt rows (matched on seq) as a list column."""
    results = results.sort_by([("seq", "ascending")])
    attempts = attempts.sort_by([("seq", "ascending"), ("attempt", "ascending")])
    import numpy as np

    counts = np.zeros(results.num_rows, np.int32)
    if attempts.num_rows:
        idx = np.searchsorted(results.column("seq").to_numpy(), attempts.column("seq").to_numpy())
        np.add.at(counts, idx, 1)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    struct = pa.StructArray.from_arrays(
        [attempts.column(f.name).combine_chunks() for f in _ATTEMPT_STRUCT], fields=list(_ATTEMPT_STRUCT)
    )
    nested = pa.ListArray.from_arrays(pa.array(offsets), struct, type=pa.list_(_ATTEMPT_STRUCT))
    return results.append_column(ATTEMPTS_COLUMN, nested)


def simulate_sends(messages: DataFrame, sc: Scenario, run_id: str, partitions: int) -> DataFrame:
    """Results with nested attempts: one group per producer through :func:`rocketsim.simulate.simulate`."""

    def per_producer(table: pa.Table) -> pa.Table:
        messages = table.drop_columns(["run_id"])
        out = simulate.simulate(messages, sc)
        return broker_side.nest_copies(nest_attempts(out.results, out.attempts), messages, out, sc)

    spark = messages.sparkSession
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    nested = messages.groupBy("producer").applyInArrow(per_producer, spark_schema(NESTED_RESULTS))
    return nested.withColumn("run_id", F.lit(run_id))


def split_nested(nested: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(send_attempts, send_results) from the nested frame."""
    results = nested.drop(ATTEMPTS_COLUMN, broker_side.COPIES_COLUMN)
    attempts = nested.select("run_id", F.explode(ATTEMPTS_COLUMN).alias("a")).select("run_id", "a.*")
    return attempts, results


# ---- the whole run ------------------------------------------------------------------------------


def _say(args: JobArgs, text: str) -> None:
    if not args.quiet:
        print(text, flush=True)


def run_generate(spark: SparkSession, args: JobArgs, sc: Scenario) -> int:
    t = time.monotonic()
    df = generate_messages(spark, sc, args.run_id, _partitions(spark, args))
    rep = write_run(df, args.warehouse, "messages", args.run_id, schemas.MESSAGES)
    _say(args, f"[generate] {rep.rows:,} messages -> {rep.path} ({time.monotonic() - t:.1f} s)")
    return rep.rows


def run_simulate(
    spark: SparkSession, args: JobArgs, sc: Scenario, messages: DataFrame | None = None
) -> tuple[int, int]:
    from rocketsim.spark.tables import read_spark

    t = time.monotonic()
    if messages is None:
        messages = read_spark(spark, args.warehouse, "messages", args.run_id)
    nested = simulate_sends(messages, sc, args.run_id, _partitions(spark, args)).persist(
        StorageLevel.MEMORY_AND_DISK
    )
    try:
        attempts, results = split_nested(nested)
        log = broker_side.commit_log(nested, sc)  # every stored copy, numbered in write order
        write_run(log, args.warehouse, "commit_log", args.run_id, schemas.COMMIT_LOG)
        log = read_spark(spark, args.warehouse, "commit_log", args.run_id)
        results = broker_side.add_store_columns(results, log)  # offsets, ids, delivery of its copy
        rep_r = write_run(results, args.warehouse, "send_results", args.run_id, schemas.SEND_RESULTS)
        rep_a = write_run(attempts, args.warehouse, "send_attempts", args.run_id, schemas.SEND_ATTEMPTS)
    finally:
        nested.unpersist()
    _say(
        args,
        f"[simulate] {rep_r.rows:,} results, {rep_a.rows:,} attempts -> {rep_r.path}, {rep_a.path} "
        f"({time.monotonic() - t:.1f} s)",
    )
    return rep_r.rows, rep_a.rows


def run_generate_simulate(spark: SparkSession, args: JobArgs, sc: Scenario) -> tuple[int, int]:
    """generate + simulate in one pass (:mod:`rocketsim.spark.fused`) for the ``deltalake`` engine; the
    staged stages (``run_generate``, ``run_simulate``) when the session writes through delta-spark."""
    if delta_enabled(spark):
        messages = run_generate(spark, args, sc)
        _, attempts = run_simulate(spark, args, sc)
        return messages, attempts
    rep = fused.generate_and_simulate(spark, sc, args.warehouse, args.run_id, _partitions(spark, args))
    _say(
        args,
        f"[generate+simulate] {rep.messages:,} messages, {rep.attempts:,} attempts, {rep.results:,} results, "
        f"{rep.log_records:,} commit-log records ({rep.producers_s:.1f} s producers, {rep.brokers_s:.1f} s "
        f"brokers, {rep.commit_s:.1f} s commit)",
    )
    return rep.messages, rep.attempts


def run_broker_side(spark: SparkSession, args: JobArgs, sc: Scenario) -> None:
    """broker_storage, transactions, consumer_load from the run's commit_log, results and messages."""
    from rocketsim.spark.tables import read_spark

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
    from rocketsim.spark.tables import read_spark

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


RECONCILE_SCOPES = ("simulate", "summarize", "run")


def reconcile(spark: SparkSession, args: JobArgs, *, through: str = "run") -> dict[str, int]:
    """Check the run's tables agree: one result per message, attempt rows = sum of attempts, per-broker
    sums = totals. Raises :class:`ReconciliationError` naming every broken rule.

    ``through`` limits the rules to the tables written by then, for the standalone jobs: "simulate"
    (messages, send_results, send_attempts), "summarize" (and the summary tables), "run" (every table).
    """
    if through not in RECONCILE_SCOPES:
        raise ValueError(f"through must be one of {RECONCILE_SCOPES}, got {through!r}")
    from rocketsim.spark.tables import read_spark

    def one(table: str, *aggs: object) -> dict:
        df = read_spark(spark, args.warehouse, table, args.run_id)
        return df.agg(*aggs).first().asDict()  # one aggregated row

    m = one("messages", F.count(F.lit(1)).alias("n"), F.countDistinct("producer", "seq").alias("keys"))
    r = one(
        "send_results",
        F.count(F.lit(1)).alias("n"),
        F.countDistinct("producer", "seq").alias("keys"),
        F.coalesce(F.sum("attempts"), F.lit(0)).alias("attempts"),
        F.sum(
            F.when(F.col("status").isin("FAILED", "REJECTED") | F.col("broker").isNull(), 0).otherwise(1)
        ).alias("stored"),
    )
    a = one("send_attempts", F.count(F.lit(1)).alias("n"))
    checks = {
        "one result per message": (m["n"], r["n"]),
        "distinct (producer, seq) in messages and results": (m["keys"], r["keys"]),
        "result rows are distinct (producer, seq)": (r["n"], r["keys"]),
        "attempt rows = sum of results.attempts": (a["n"], r["attempts"]),
    }
    if through != "simulate":
        total_sends = F.coalesce(F.sum("sends"), F.lit(0)).alias("sends")
        bw, qw = one("broker_windows", total_sends), one("queue_windows", total_sends)
        s = (
            read_spark(spark, args.warehouse, "run_summary", args.run_id)
            .where(F.col("scope") != "all")
            .agg(F.coalesce(F.sum("messages"), F.lit(0)).alias("stored"))
            .first()
            .asDict()
        )
        checks["per-broker messages in run_summary = stored results"] = (s["stored"], r["stored"] or 0)
        checks["sends in broker_windows = attempt rows"] = (bw["sends"], a["n"])
        checks["sends in queue_windows = attempt rows"] = (qw["sends"], a["n"])
    if through == "run":
        checks.update(
            broker_side.reconcile_checks(lambda table: read_spark(spark, args.warehouse, table, args.run_id))
        )
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
    """The end-of-run summary, from the tiny run_summary table."""
    from rocketsim.spark.tables import read_arrow

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
    print(
        f"  tables: {Path(args.warehouse).resolve()}/{{messages,send_attempts,send_results,broker_windows,"
        f"queue_windows,producer_windows,isolation_intervals,run_summary,commit_log,broker_storage,"
        f"transactions,consumer_load,runs}} (run_id={args.run_id})"
    )


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
