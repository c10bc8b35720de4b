"""Compare variants of one scenario in ONE Spark job, on the same messages and fault timeline.

The variants are just another dimension of the run's producer step: variants that share their messages
(the same :func:`rocketsim.scenario.variants.message_signature`: a variant cannot change what is sent, and
most change only how it is sent) form a group, and one Spark task per bin of (group, producer) pairs
(longest first onto the least loaded bin) generates the producer's messages once and simulates every
variant of the group on them (:func:`rocketsim.stage.sweeps.variant_task`). A variant with closed-loop
brokers (``brokers.coupling`` joint or iterative) couples its producers, so it is one step of its own,
run whole as a capacity sweep's sizes are. Only the producer's summary
aggregates, keyed by variant, leave the task (a file in a scratch folder); nothing per message is
written. The driver merges them (:func:`rocketsim.tables.summaries.merge`, every table computed per variant)
and writes, each as one commit:

More: docs/reference/modules.md, rocketsim/spark/compare.py.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pyarrow as pa

from rocketsim import __version__
from rocketsim.broker.queue import OPEN
from rocketsim.present import text
from rocketsim.scenario import Scenario, variants, workload
from rocketsim.spark import pipeline
from rocketsim.spark.cli import CompareArgs, JobArgs
from rocketsim.spark.delta_sink import publish_run
from rocketsim.spark.run import SCRATCH_SUFFIX, map_bins
from rocketsim.spark.session import Spark, context_of
from rocketsim.stage.graph import RUNS_TABLE
from rocketsim.stage.plan import balanced_bins
from rocketsim.stage.sweeps import merged_sweep, variant_task, whole_run_task
from rocketsim.tables import summaries
from rocketsim.warehouse.paths import delete_dir, make_dir, new_write_id, staging_path
from rocketsim.warehouse.stage_files import ScratchFolder

COMPARE_JOB = "compare"


class ComparisonError(RuntimeError):
    """The variants of a comparison do not agree on what they were given (e.g. message counts)."""


# ---- the Spark side -----------------------------------------------------------------------------


def simulate_variants(
    spark: Spark, scenarios: dict[str, Scenario], window_ms: int, scratch: str, partitions: int
) -> summaries.SummaryAggregates:
    """Every variant's producers, one task per bin of steps: a (message-signature group, producer) pair
    of the open-loop variants, or a whole coupled variant (closed-loop brokers: its producers are
    simulated together, :func:`rocketsim.stage.sweeps.whole_run_task`); their summary aggregates, keyed by
    variant, merged."""
    coupled = [n for n, sc in scenarios.items() if sc.coupling != OPEN]
    groups = variants.signature_groups({n: sc for n, sc in scenarios.items() if n not in coupled})
    shares = workload.producer_shares(next(iter(scenarios.values())))  # producers.count: the same in all
    pairs = [(g, share) for g in range(len(groups)) for share in shares]

    def work(i: int) -> dict[str, int]:
        store = ScratchFolder(scratch)
        if i >= len(pairs):
            name = coupled[i - len(pairs)]
            return whole_run_task(scenarios[name], name, i - len(pairs), window_ms, store)
        g, share = pairs[i]
        return variant_task({n: scenarios[n] for n in groups[g]}, share, window_ms, store, g)

    total = next(iter(scenarios.values())).workload.total_messages()
    weights = [s.messages * len(groups[g]) for g, s in pairs] + [total] * len(coupled)
    done = map_bins(spark, balanced_bins(weights, partitions), work)
    if len(done) != len(weights):
        raise RuntimeError(f"comparison: {len(done)} of {len(weights)} steps reported")
    return merged_sweep(ScratchFolder(scratch), [[s.producer for s in shares]] * len(groups), len(coupled))


def run_compare(spark: Spark, args: CompareArgs, base: Scenario, scenarios: dict[str, Scenario]) -> pa.Table:
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
    pipeline.say_scenario(args.quiet, base)
    for v in args.variants:
        say(f"  variant {v.name}: {v.describe()}")
    partitions = args.partitions or context_of(spark).defaultParallelism
    scratch = staging_path(args.warehouse, "comparisons", new_write_id() + SCRATCH_SUFFIX)
    make_dir(scratch)
    try:
        merged = simulate_variants(spark, scenarios, args.window_ms, scratch, partitions)
    finally:
        delete_dir(scratch)
    tables = summaries.summary_tables(merged)
    rows = variants.comparison_table(tables["run_summary"], args.variants, args.baseline)
    counts = _overall(rows, "messages")
    wrong = {v: n for v, n in counts.items() if n != total}
    if wrong or set(counts) != set(scenarios):
        raise ComparisonError(
            f"comparison {args.run_id}: variants must each have {total:,} messages, got {counts}"
        )
    rep_c = pipeline.publish_rows(spark, args.warehouse, "comparisons", args.run_id, rows)
    rep_w = pipeline.publish_rows(
        spark, args.warehouse, "comparison_windows", args.run_id, tables["broker_windows"]
    )
    rep_f = pipeline.publish_rows(
        spark, args.warehouse, "comparison_fault_windows", args.run_id, tables["fault_windows"]
    )
    attempts_total = int(sum(_overall(rows, "attempts").values()))
    job = JobArgs(args.scenario_path, args.warehouse, args.run_id, args.overrides, quiet=True)
    written = (rep_c.table, rep_w.table, rep_f.table, RUNS_TABLE)
    rep_r = pipeline.write_runs_row(
        spark, job, base, total, attempts_total, started, time.monotonic() - t, tables=written
    )
    publish_run(spark, args.warehouse, args.run_id, COMPARE_JOB, [rep_c, rep_w, rep_f, rep_r])
    say(f"[compare] {rep_c.rows:,} comparison rows -> {rep_c.path} ({time.monotonic() - t:.1f} s)")
    names = [v.name for v in args.variants]
    print(text.comparison_text(rows.to_pylist(), names, args.baseline, args.run_id))
    print(text.fault_windows_text(tables["fault_windows"].to_pylist(), scopes="fault"))
    if tables["fault_windows"].num_rows:
        print("    (every broker's: the comparison_fault_windows table)")
    say(f"done in {time.monotonic() - t:.1f} s")
    return rows


def _overall(rows: pa.Table, metric: str) -> dict[str, float]:
    return {
        r["variant"]: r["value"] for r in rows.to_pylist() if r["scope"] == "all" and r["metric"] == metric
    }
