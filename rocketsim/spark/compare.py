"""Compare variants of one scenario in ONE Spark job, on the same messages and fault timeline.

The variants are just another dimension of the run's stage: one Spark task per bin of (variant,
producer) pairs (longest first onto the least loaded bin) runs the same producer step as a run
(:func:`rocketsim.warehouse.stage_files.write_producer_files` over :mod:`rocketsim.stage`) under the
variant's :class:`~rocketsim.scenario.Scenario`, writing the attempts and results into a scratch folder
per variant. A variant cannot change what is sent (:mod:`rocketsim.variants` refuses it), so every
variant generates the same messages. The summaries of :mod:`rocketsim.spark.summaries` then run over
those files with ``keys=("run_id", "variant")``, and the comparison writes:

* ``comparisons``: every ``run_summary`` metric of every variant and scope, next to the baseline
  variant's value, with the delta and the delta in percent (long format);
* ``comparison_windows``: ``broker_windows`` of every variant (the timelines side by side);
* a ``runs`` row for the comparison (the base scenario, its overrides, counts, wall time).

Nothing per message is committed, so the driver and the warehouse stay small whatever the run size.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import reduce

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rocketsim import __version__, schemas, stage, workload
from rocketsim.present.frames import KEY_METRICS
from rocketsim.scenario import Scenario
from rocketsim.spark import pipeline, summaries
from rocketsim.spark.cli import CompareArgs, JobArgs
from rocketsim.spark.delta_sink import write_run
from rocketsim.spark.run import SCRATCH_SUFFIX, map_bins
from rocketsim.spark.session import spark_schema
from rocketsim.variants import Variant
from rocketsim.warehouse.paths import delete_dir, list_files, make_dir, new_write_id, staging_path
from rocketsim.warehouse.read import read_arrow
from rocketsim.warehouse.stage_files import StageDirs, write_producer_files

KEYS = ("run_id", "variant")
# every run_summary metric is compared
METRICS = tuple(f.name for f in schemas.RUN_SUMMARY if f.name not in ("run_id", "scope"))
# what the printed table shows (all of them are in the comparisons table)
SHOWN_OVERALL = KEY_METRICS
SHOWN_PER_BROKER = ("sends", "share", "latency_p99_ms")
_INTEGER_METRICS = frozenset(f.name for f in schemas.RUN_SUMMARY if pa.types.is_integer(f.type))
# what each variant's producer steps write into its scratch folder
VARIANT_TABLES = ("send_attempts", "send_results")


class ComparisonError(RuntimeError):
    """The variants of a comparison do not agree on what they were given (e.g. message counts)."""


# ---- the Spark side -----------------------------------------------------------------------------


@dataclass(frozen=True)
class VariantRows:
    """The attempts and results of every variant (each with ``run_id`` and ``variant``), read from the
    scratch files the producer steps wrote; ``scratch`` is deleted once the comparison is written."""

    attempts: DataFrame
    results: DataFrame
    scratch: str


def simulate_variants(
    spark: SparkSession, scenarios: dict[str, Scenario], warehouse: str, run_id: str, partitions: int
) -> VariantRows:
    """Every variant's producers through the run's producer step, one task per bin of (variant,
    producer) pairs; their attempts and results as DataFrames."""
    names = list(scenarios)
    shares = workload.producer_shares(scenarios[names[0]])  # producers.count: the same in every variant
    pairs = [(name, share) for name in names for share in shares]
    scratch = staging_path(warehouse, "comparisons", new_write_id() + SCRATCH_SUFFIX)
    dirs = {
        name: StageDirs({t: f"{scratch}/v{i:04d}/{t}" for t in VARIANT_TABLES})
        for i, name in enumerate(names)
    }
    for d in dirs.values():
        for folder in d.all():
            make_dir(folder)

    def work(i: int) -> tuple[int, int]:
        name, share = pairs[i]
        c = write_producer_files(scenarios[name], share, dirs[name])
        return c.messages, c.attempts

    try:
        done = map_bins(spark, stage.balanced_bins([s.messages for _, s in pairs], partitions), work)
        if len(done) != len(pairs):
            raise RuntimeError(f"comparison: {len(done)} of {len(pairs)} (variant, producer) steps reported")
        run = F.lit(run_id).cast("string")

        def read(table: str) -> DataFrame:
            schema = spark_schema(schemas.data_schema(schemas.TABLES[table].schema))
            frames = [
                spark.read.schema(schema)
                .parquet(
                    *[f"{d.tables[table]}/{f}" for f in list_files(d.tables[table], "part-", ".parquet")]
                )
                .select(run.alias("run_id"), F.lit(name).alias("variant"), "*")
                for name, d in dirs.items()
            ]
            return reduce(DataFrame.unionByName, frames)

        return VariantRows(read("send_attempts"), read("send_results"), scratch)
    except BaseException:
        delete_dir(scratch)
        raise


def comparison_table(summary: DataFrame, variants: Sequence[Variant], baseline: str) -> DataFrame:
    """run_summary rows of every variant -> long rows (variant, scope, metric) with baseline and deltas."""
    spark = summary.sparkSession
    wide = summary.select(*KEYS, "scope", *[F.col(m).cast("double").alias(m) for m in METRICS])
    long = wide.unpivot([*KEYS, "scope"], list(METRICS), "metric", "value")
    base = long.where(F.col("variant") == baseline).select(
        "run_id", "scope", "metric", F.col("value").alias("baseline_value")
    )
    described = spark.createDataFrame(
        [(v.name, list(v.overrides)) for v in variants], "variant string, overrides array<string>"
    )
    delta = F.col("value") - F.col("baseline_value")
    return (
        long.join(base, ["run_id", "scope", "metric"], "left")
        .join(F.broadcast(described), "variant")
        .withColumn("baseline", F.lit(baseline))
        .withColumn("delta", delta)
        .withColumn(
            "delta_pct",
            F.when(F.abs(F.col("baseline_value")) > 0, F.lit(100.0) * delta / F.abs(F.col("baseline_value"))),
        )
    )


def run_compare(
    spark: SparkSession, args: CompareArgs, base: Scenario, scenarios: dict[str, Scenario]
) -> pa.Table:
    """Simulate every variant, write ``comparisons`` + ``comparison_windows`` + a ``runs`` row, print the
    table; returns the comparisons rows (tiny)."""
    started = datetime.now(UTC)
    t = time.monotonic()
    say = (lambda text: None) if args.quiet else (lambda text: print(text, flush=True))
    total = base.workload.total_messages()
    say(
        f"rocketsim {__version__}: comparing {len(scenarios)} variants of {base.name} (seed {base.seed}, "
        f"{total:,} messages each, baseline {args.baseline}) -> {args.warehouse} run_id={args.run_id}"
    )
    for v in args.variants:
        say(f"  {v.name}: {v.describe()}")
    partitions = args.partitions or spark.sparkContext.defaultParallelism
    rows_of = simulate_variants(spark, scenarios, args.warehouse, args.run_id, partitions)
    attempts, results = rows_of.attempts, rows_of.results
    # Every summary reads these small ones: computed once.
    cached: list[DataFrame] = []

    def keep(df: DataFrame, level: StorageLevel = StorageLevel.MEMORY_AND_DISK) -> DataFrame:
        cached.append(df.persist(level))
        return df

    try:
        intervals = keep(summaries.isolation_intervals(attempts, KEYS))
        summary = keep(summaries.run_summary(results, attempts, intervals=intervals, keys=KEYS))
        windows = summaries.broker_windows(attempts, args.window_ms, intervals=intervals, keys=KEYS)
        rep_c = write_run(
            comparison_table(summary, args.variants, args.baseline),
            args.warehouse,
            "comparisons",
            args.run_id,
            schemas.COMPARISONS,
        )
        write_run(windows, args.warehouse, "comparison_windows", args.run_id, schemas.COMPARISON_WINDOWS)
    finally:
        for df in cached:
            df.unpersist()
        delete_dir(rows_of.scratch)
    rows = read_arrow(args.warehouse, "comparisons", args.run_id)
    say(f"[compare] {rep_c.rows:,} comparison rows -> {rep_c.path} ({time.monotonic() - t:.1f} s)")
    counts = _overall(rows, "messages")
    wrong = {v: n for v, n in counts.items() if n != total}
    if wrong:
        raise ComparisonError(
            f"comparison {args.run_id}: variants must each have {total:,} messages, got {wrong}"
        )
    attempts_total = int(sum(_overall(rows, "attempts").values()))
    job = JobArgs(args.scenario_path, args.warehouse, args.run_id, args.overrides, quiet=True)
    pipeline.write_runs_row(spark, job, base, total, attempts_total, started, time.monotonic() - t)
    print(format_comparison(rows, [v.name for v in args.variants], args.baseline, args.run_id))
    say(f"done in {time.monotonic() - t:.1f} s")
    return rows


def _overall(rows: pa.Table, metric: str) -> dict[str, float]:
    return {
        r["variant"]: r["value"] for r in rows.to_pylist() if r["scope"] == "all" and r["metric"] == metric
    }


# ---- the printed table --------------------------------------------------------------------------


def _fmt(metric: str, value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if metric in _INTEGER_METRICS:
        return f"{value:,.0f}"
    if metric in ("share", "error_rate", "attempt_error_rate"):
        return f"{value:.2%}"
    return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"


def _cell(metric: str, value: float | None, pct: float | None, is_base: bool) -> str:
    text = _fmt(metric, value)
    if is_base or value is None:
        return text
    return f"{text} ({pct:+.1f}%)" if pct is not None and math.isfinite(pct) else f"{text} (n/a)"


def format_comparison(rows: pa.Table, variants: Sequence[str], baseline: str, run_id: str) -> str:
    """The readable side-by-side table: metric rows, one column per variant, deltas vs the baseline."""
    by_key = {(r["scope"], r["metric"], r["variant"]): r for r in rows.to_pylist()}
    scopes = sorted({r[0] for r in by_key if r[0] != "all"})
    table: list[list[str]] = [["metric", *[f"{v} (baseline)" if v == baseline else v for v in variants]]]

    def add(scope: str, metric: str, label: str) -> None:
        cells = []
        for v in variants:
            r = by_key.get((scope, metric, v))
            cells.append(_cell(metric, r and r["value"], r and r["delta_pct"], v == baseline) if r else "-")
        table.append([label, *cells])

    for m in SHOWN_OVERALL:
        add("all", m, m)
    for m in SHOWN_PER_BROKER:
        for s in scopes:
            add(s, m, f"{s} {m}")
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = [
        f"\ncomparison {run_id}: each variant on the same messages and fault timeline, deltas vs {baseline}"
    ]
    for i, row in enumerate(table):
        lines.append(
            "  "
            + "  ".join(
                c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if i == 0:
            lines.append("  " + "  ".join("-" * w for w in widths))
    lines.append("  (all metrics of every scope: the comparisons table; timelines: comparison_windows)")
    return "\n".join(lines)
