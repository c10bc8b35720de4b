"""Compare variants of one scenario in ONE Spark job, on the same messages and fault timeline.

The variants are just another grouping key: each class of variants with the same message signature
(:func:`rocketsim.variants.message_signature`, normally one class) generates its messages once; they
are cross-joined with the variant names and ``groupBy(variant, producer).applyInArrow`` simulates each
producer under the variant's :class:`~rocketsim.scenario.Scenario`, looked up by name. The summaries of
:mod:`rocketsim.spark.summaries` run with ``keys=("run_id", "variant")``, and the comparison writes:

* ``comparisons``: every ``run_summary`` metric of every variant and scope, next to the baseline
  variant's value, with the delta and the delta in percent (long format);
* ``comparison_windows``: ``broker_windows`` of every variant (the timelines side by side);
* a ``runs`` row for the comparison (the base scenario, its overrides, counts, wall time).

Nothing per message is written, so the driver and the warehouse stay small whatever the run size.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rocketsim import __version__, analysis, schemas, simulate
from rocketsim.scenario import Scenario, ScenarioError
from rocketsim.spark import pipeline, summaries
from rocketsim.spark.delta_sink import write_run
from rocketsim.spark.session import spark_schema
from rocketsim.variants import (
    Variant,
    build_scenarios,
    combine,
    message_signature,
    parse_variants,
    sweep_variants,
)

KEYS = ("run_id", "variant")
# every run_summary metric is compared
METRICS = tuple(f.name for f in schemas.RUN_SUMMARY if f.name not in ("run_id", "scope"))
# what the grouped map returns: a variant's results with their attempts nested (pipeline.nest_attempts)
NESTED_VARIANT_RESULTS = pa.schema(
    [
        schemas.VARIANT,
        *schemas.without_run_id(schemas.SEND_RESULTS),
        pa.field(
            pipeline.ATTEMPTS_COLUMN, pa.list_(pa.struct(list(schemas.without_run_id(schemas.SEND_ATTEMPTS))))
        ),
    ]
)
# what the printed table shows (all of them are in the comparisons table)
SHOWN_OVERALL = analysis.KEY_METRICS
SHOWN_PER_BROKER = ("sends", "share", "latency_p99_ms")
_INTEGER_METRICS = frozenset(f.name for f in schemas.RUN_SUMMARY if pa.types.is_integer(f.type))


class ComparisonError(RuntimeError):
    """The variants of a comparison do not agree on what they were given (e.g. message counts)."""


@dataclass(frozen=True)
class CompareArgs:
    """The command line of ``jobs/compare.py``."""

    scenario_path: str
    variants: tuple[Variant, ...]
    baseline: str
    warehouse: str = "warehouse"
    run_id: str = ""
    overrides: tuple[str, ...] = ()
    partitions: int = 0  # 0: Spark's default parallelism
    window_ms: int = 10_000
    quiet: bool = False


def parse_compare_args(
    argv: list[str] | None, prog: str = "jobs/compare.py", description: str | None = None
) -> tuple[CompareArgs, Scenario, dict[str, Scenario]]:
    """Parse and validate every variant before Spark starts; bad input exits with code 2 and one line."""
    p = pipeline.OneLineArgumentParser(prog=prog, description=description)  # usage errors: one line too
    pipeline.add_scenario_arguments(
        p,
        run_id_help="comparison id (default: <scenario name>-s<seed>-compare)",
        set_help="override a scenario key for every variant, e.g. --set workload.messages=200000",
    )
    p.add_argument(
        "--variant",
        "--variants",
        dest="variants",
        action="extend",
        nargs="+",
        default=[],
        metavar="NAME[:KEY=VALUE]",
        help="a variant and one of its overrides (repeat NAME for more), e.g. "
        "fault_on:producers.send_latency_fault_enable=true",
    )
    p.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="a grid axis, e.g. --sweep producers.client_version=4.9.7,4.9.8,5.3.3 (repeatable)",
    )
    p.add_argument("--baseline", default="", help="the variant deltas are taken against (default: the first)")
    p.add_argument("--partitions", type=int, default=None, help="partitions of the simulate stage")
    p.add_argument("--window-ms", type=int, default=10_000, help="window of comparison_windows (ms)")
    p.add_argument("--quiet", action="store_true", help="print only the comparison table")
    ns = p.parse_args(argv)
    try:
        variants = combine(parse_variants(ns.variants), sweep_variants(ns.sweep))
        base, scenarios = build_scenarios(ns.scenario, ns.overrides, variants)
        names = [v.name for v in variants]
        baseline = ns.baseline or names[0]
        if baseline not in names:
            raise ScenarioError(f"--baseline must name a variant ({', '.join(names)}), got {baseline!r}")
        if ns.partitions is not None and ns.partitions < 1:  # absent: Spark's default parallelism
            raise ScenarioError(f"--partitions must be >= 1, got {ns.partitions}")
        if ns.window_ms <= 0:
            raise ScenarioError(f"--window-ms must be > 0, got {ns.window_ms}")
        run_id = ns.run_id or f"{base.run_id}-compare"
        if not all(c.isalnum() or c in "-_." for c in run_id):
            what = "--run-id" if ns.run_id else "name (it names the comparison)"
            raise ScenarioError(f"{what} may hold only letters, digits, '-', '_' and '.', got {run_id!r}")
        if len(run_id) > 200:
            raise ScenarioError(f"the run id must be at most 200 characters, got {run_id!r}")
    except ScenarioError as exc:
        print(f"ScenarioError: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    args = CompareArgs(
        scenario_path=ns.scenario,
        variants=tuple(variants),
        baseline=baseline,
        warehouse=ns.warehouse,
        run_id=run_id,
        overrides=tuple(ns.overrides),
        partitions=ns.partitions or 0,
        window_ms=ns.window_ms,
        quiet=ns.quiet,
    )
    return args, base, scenarios


# ---- the Spark side -----------------------------------------------------------------------------


def variant_messages(
    spark: SparkSession, scenarios: dict[str, Scenario], run_id: str, partitions: int
) -> DataFrame:
    """Every variant's messages: generated once per message signature, cross-joined with the names."""
    classes: list[tuple[tuple, list[str]]] = []  # signatures hold mappings: compared, not hashed
    for name, sc in scenarios.items():
        sig = message_signature(sc)
        same = next((names for s, names in classes if s == sig), None)
        if same is None:
            classes.append((sig, [name]))
        else:
            same.append(name)
    frames = []
    for _, names in classes:
        messages = pipeline.generate_messages(spark, scenarios[names[0]], run_id, partitions)
        names_df = spark.createDataFrame([(n,) for n in names], "variant string")
        frames.append(messages.crossJoin(F.broadcast(names_df)))
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def simulate_variants(messages: DataFrame, scenarios: dict[str, Scenario], partitions: int) -> DataFrame:
    """Results with nested attempts and a ``variant`` column: one group per (variant, producer)."""

    def per_group(table: pa.Table) -> pa.Table:
        name = table.column("variant")[0].as_py()
        out = simulate.simulate(table.drop_columns(["run_id", "variant"]), scenarios[name])
        nested = pipeline.nest_attempts(out.results, out.attempts)
        return nested.add_column(0, schemas.VARIANT, pa.array([name] * nested.num_rows, pa.string()))

    # Partitioned by the grouping keys so the grouped map adds no second shuffle (and the session's
    # spark.sql.shuffle.partitions is left alone).
    grouped = messages.repartition(partitions, "variant", "producer").groupBy("variant", "producer")
    return grouped.applyInArrow(per_group, spark_schema(NESTED_VARIANT_RESULTS))


def split_variants(nested: DataFrame, run_id: str) -> tuple[DataFrame, DataFrame]:
    """(attempts, results), each with run_id and variant."""
    nested = nested.withColumn("run_id", F.lit(run_id))
    results = nested.drop(pipeline.ATTEMPTS_COLUMN)
    attempts = nested.select(*KEYS, F.explode(pipeline.ATTEMPTS_COLUMN).alias("a")).select(*KEYS, "a.*")
    return attempts, results


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
    from rocketsim.spark.tables import read_arrow

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
    messages = variant_messages(spark, scenarios, args.run_id, partitions)
    nested = simulate_variants(messages, scenarios, partitions)
    # Every summary reads these: simulated once (per-message data, kept on the executors), and the
    # small ones (intervals, the per-variant summary) computed once.
    cached: list[DataFrame] = []

    def keep(df: DataFrame, level: StorageLevel = StorageLevel.MEMORY_AND_DISK) -> DataFrame:
        cached.append(df.persist(level))
        return df

    try:
        nested = keep(nested)
        attempts, results = split_variants(nested, args.run_id)
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
    rows = read_arrow(args.warehouse, "comparisons", args.run_id)
    say(f"[compare] {rep_c.rows:,} comparison rows -> {rep_c.path} ({time.monotonic() - t:.1f} s)")
    counts = _overall(rows, "messages")
    wrong = {v: n for v, n in counts.items() if n != total}
    if wrong:
        raise ComparisonError(
            f"comparison {args.run_id}: variants must each have {total:,} messages, got {wrong}"
        )
    attempts_total = int(sum(_overall(rows, "attempts").values()))
    job = pipeline.JobArgs(args.scenario_path, args.warehouse, args.run_id, args.overrides, quiet=True)
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
