"""A run's stage on Spark: Spark schedules, the tasks write Parquet, the driver merges and publishes.

The stage is plain core functions (:mod:`rocketsim.stage`) and the files its tasks write
(:mod:`rocketsim.warehouse.stage_files`); this module only decides where they run and where their output
goes. Two Spark jobs whose rows are only counts (no message row passes through the JVM, and no Spark
job reads a table):

1. one task per bin of producers (:func:`rocketsim.stage.producer_bins`: longest first onto the least
   loaded bin) runs :func:`~rocketsim.warehouse.stage_files.write_producer_files` for each of them;
2. one task per broker runs :func:`~rocketsim.warehouse.stage_files.write_broker_files`.

Closed-loop brokers (``brokers.coupling``): ``joint`` gives every producer one task (the exact event
loop); ``iterative`` first runs its rounds (:func:`iterate_rounds`: Spark jobs of producer tasks, the
driver merging their arrival work between them), and step 1 then simulates against the last round's
trajectories.

The tasks write straight into the tables' staging folders (``<table>/_staging/<write id>``, shared
storage on a cluster) and their small aggregates into a scratch folder beside them; the driver merges
those into the summary tables and ``consumer_load`` (:func:`~rocketsim.warehouse.stage_files.finish_stage`)
and commits each table's files as one write of the table
(:func:`rocketsim.spark.delta_sink.publish_staged`: a ``deltalake`` transaction, or delta-spark when the
session has it), in registry order, invisible to readers; then reconciles the run from the tasks' counts
and the commits' reports (:mod:`rocketsim.tables.reconcile`), and only then makes the writes the run's in one
run-level commit (:func:`rocketsim.spark.delta_sink.publish_run`): readers see the old run until that
commit and the new one, whole, from it on (:func:`write_stage` stops before it, for a job that adds a
table of its own, such as the pipeline's ``runs`` row).

One stage, every job (:func:`run_stage`'s ``stages``, a contiguous part of generate, simulate, broker
side, summarize): ``jobs/pipeline.py`` runs all four in one pass; ``jobs/generate.py`` only generates;
``jobs/simulate.py`` reads each producer's messages back from the files of the run's committed
``messages``; ``jobs/broker_side.py`` and ``jobs/summarize.py`` read what they need of the committed
tables the same way (the driver hands the tasks the files, with the producer or broker range of each
from the Delta log's statistics, so executors need no deltalake). The tables are the same, row for
row, for any split of the work (the tests compare them).

The limit: a producer is simulated serially in one task (its fault table and clock are one state), so
one producer's rows must fit in a Python worker's memory (about 1 KiB per message at peak) and the
largest producer bounds the stage's time; brokers are numbered one task each.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import SparkSession

from rocketsim import stage
from rocketsim.broker.queue import ITERATIVE, JOINT
from rocketsim.engine import iterative
from rocketsim.scenario import Scenario, workload
from rocketsim.spark.delta_sink import publish_run, publish_staged
from rocketsim.spark.progress import step
from rocketsim.tables import reconcile, schemas
from rocketsim.tables.schemas import SIMULATE
from rocketsim.warehouse.delta import WriteReport
from rocketsim.warehouse.paths import check_run_id, delete_dir, make_dir, new_write_id, staging_path
from rocketsim.warehouse.read import current_write, run_file_ranges, run_rows
from rocketsim.warehouse.stage_files import (
    INPUT_COLUMNS,
    STAGES,
    CoupledProducers,
    IterativeRound,
    StageWork,
    derived_tables,
    finish_stage,
    tables_read,
    write_broker_files,
    write_producer_files,
)

SCRATCH_SUFFIX = "-scratch"
COUNTS = pa.schema(
    [pa.field("who", pa.int64()), pa.field("name", pa.string()), pa.field("value", pa.int64())]
)
_REPORTED = ""  # the count every item reports, so an item with no counts is still seen


@dataclass(frozen=True)
class StageReport:
    """What the stage committed, the quantities it reconciled (:mod:`rocketsim.tables.reconcile`) and the
    summary tables it made (to print without reading them back)."""

    stages: tuple[str, ...]
    counts: dict[str, int]
    checks: dict[str, tuple[int, int]]
    reports: tuple[WriteReport, ...]
    summary_tables: dict[str, pa.Table]
    producers_s: float  # step 1 (generate or read, simulate, aggregate, write)
    brokers_s: float  # step 2 (number the commit logs, the broker side, write)
    driver_s: float  # merge the aggregates, write the driver's tables
    commit_s: float
    rounds: int | None = None  # brokers.coupling = iterative: the rounds run (None: not iterative)
    residual: int | None = None  # and the last round's residual (0: a fixed point)

    def rows(self, table: str) -> int:
        """Rows of ``table`` committed (or, for a table the stage only read, in the run)."""
        return self.counts.get(f"{table}.rows", 0)


def map_bins(
    spark: SparkSession,
    bins: Sequence[Sequence[int]],
    work: Callable[[int], Mapping[str, int]],
    what: str = "tasks",
) -> dict[int, dict[str, int]]:
    """``work(item)`` for every item of every bin, one Spark task per bin; each item's counts, collected
    (rows of named counts, never data). ``what``: the work's name in the progress line and Spark's UI."""
    bins = [list(b) for b in bins]
    step(spark, what)

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for b in batch.column(0).to_pylist():
                for item in bins[b]:
                    counts = {_REPORTED: 1, **work(item)}
                    rows = [{"who": item, "name": n, "value": int(v)} for n, v in counts.items()]
                    yield pa.RecordBatch.from_pylist(rows, COUNTS)

    rows = spark.range(0, len(bins), 1, numPartitions=max(1, len(bins))).mapInArrow(
        task, "who long, name string, value long"
    )
    out: dict[int, dict[str, int]] = {}
    # Tiny: one row per (task item, count name), a few dozen per producer or broker; no table rows.
    for r in rows.collect():
        counts = out.setdefault(r["who"], {})
        if r["name"] != _REPORTED:
            counts[r["name"]] = r["value"]
    return out


def run_stage(
    spark: SparkSession,
    sc: Scenario,
    warehouse: str,
    run_id: str,
    partitions: int,
    stages: Sequence[str] = STAGES,
    window_ms: int = 10_000,
    job: str = "stage",
) -> StageReport:
    """:func:`write_stage`, then the run-level commit: the tables of ``stages`` become the run's (and
    the tables made from them by other stages leave it)."""
    rep = write_stage(spark, sc, warehouse, run_id, partitions, stages, window_ms)
    publish_stage(spark, warehouse, run_id, job, rep)
    return rep


def publish_stage(
    spark: SparkSession, warehouse: str, run_id: str, job: str, rep: StageReport, *extra: WriteReport
) -> None:
    """The run-level commit of a stage's writes (and of ``extra`` writes of the same job)."""
    publish_run(spark, warehouse, run_id, job, [*rep.reports, *extra], derived_tables(rep.stages))


def write_stage(
    spark: SparkSession,
    sc: Scenario,
    warehouse: str,
    run_id: str,
    partitions: int,
    stages: Sequence[str] = STAGES,
    window_ms: int = 10_000,
) -> StageReport:
    """Write, commit (not yet visible) and reconcile the tables of ``stages`` (a contiguous part of
    generate, simulate, broker side, summarize) for one run; the run's tables the stages read must be
    there (:class:`rocketsim.warehouse.read.MissingRunError` before anything is written)."""
    check_run_id(run_id)
    stages = tuple(stages)
    tables = [t.name for t in schemas.written_by(*stages)]
    reads = tables_read(stages)
    published = {f"{t}.published": current_write(warehouse, t, run_id).rows for t in reads}
    inputs = {t: tuple(run_file_ranges(warehouse, t, run_id, INPUT_COLUMNS[t])) for t in reads}
    committed = {f"{t}.rows": run_rows(warehouse, t, run_id) for t in reads}
    shares = workload.producer_shares(sc)
    by_producer = {s.producer: s for s in shares}
    producers = sorted(by_producer)
    brokers = list(range(len(sc.cluster.brokers)))
    write_ids = {t: new_write_id() for t in tables}
    work = StageWork(
        stages,
        {t: staging_path(warehouse, t, write_ids[t]) for t in tables},
        staging_path(warehouse, tables[0], write_ids[tables[0]] + SCRATCH_SUFFIX),
        window_ms,
        inputs,
    )
    for d in work.all():
        make_dir(d)

    # closed-loop brokers, joint: every producer in one task, simulated together (CoupledProducers)
    coupled: CoupledProducers | IterativeRound | None = None
    if sc.coupling == JOINT and work.runs(SIMULATE):
        coupled = CoupledProducers(sc, shares, work)
    bins = [producers] if coupled is not None else stage.producer_bins(shares, partitions)
    rounds = left = None

    def producer_work(p: int) -> dict[str, int]:
        return write_producer_files(sc, by_producer[p], work, coupled)

    def broker_work(b: int) -> dict[str, int]:
        return write_broker_files(sc, b, producers, work)

    try:
        t0 = time.monotonic()
        if sc.coupling == ITERATIVE and work.runs(SIMULATE):  # the rounds, then the last one's rows
            coupled, rounds, left = iterate_rounds(spark, sc, by_producer, work, bins)
        messages = sum(s.messages for s in shares)
        per_producer = map_bins(spark, bins, producer_work, f"producer tasks, {messages:,} messages")
        t1 = time.monotonic()
        per_broker = (
            map_bins(spark, [[b] for b in brokers], broker_work, "broker tasks") if work.has_brokers else {}
        )
        t2 = time.monotonic()
        if len(per_producer) != len(shares) or (work.has_brokers and len(per_broker) != len(brokers)):
            raise RuntimeError(
                f"stage: {len(per_producer)} of {len(shares)} producers and {len(per_broker)} of "
                f"{len(brokers)} brokers reported; nothing committed"
            )
        finished = finish_stage(sc, work, producers, brokers)
        t3 = time.monotonic()
        reports = tuple(
            publish_staged(spark, warehouse, t, run_id, schemas.TABLES[t].schema, write_ids[t])
            for t in tables
        )
    except BaseException:
        for d in work.all():
            delete_dir(d)  # best effort: vacuum_orphans removes what a killed driver leaves
        raise
    t4 = time.monotonic()
    counts = reconcile.add_counts([*per_producer.values(), *per_broker.values()])
    counts |= finished.counts | committed | published | {f"{r.table}.rows": r.rows for r in reports}
    checks = reconcile.check(counts, run_id, complete=stages == STAGES)
    return StageReport(
        stages=stages,
        counts=counts,
        checks=checks,
        reports=reports,
        summary_tables=finished.summary_tables,
        producers_s=t1 - t0,
        brokers_s=t2 - t1,
        driver_s=t3 - t2,
        commit_s=t4 - t3,
        rounds=rounds,
        residual=left,
    )


def iterate_rounds(
    spark: SparkSession,
    sc: Scenario,
    shares: Mapping[int, workload.ProducerShare],
    work: StageWork,
    bins: Sequence[Sequence[int]],
    max_rounds: int = iterative.MAX_ROUNDS,
) -> tuple[IterativeRound, int, int]:
    """``brokers.coupling = iterative`` across executors (the rounds of
    :func:`rocketsim.engine.iterative.simulate_iterative`, spread out): per round the driver writes the
    brokers' trajectories, one Spark task per bin simulates its producers against them and writes their
    arrival work, the driver merges it, checks the residual and replays the next trajectories. Returns
    the last round (its producer tasks are then the stage's normal ones: the same simulation against the
    same trajectories, writing rows), the rounds and the residual. Deterministic and partition-invariant:
    a producer depends only on the trajectories, and the merge is a sum."""
    previous: iterative.ArrivalWork | None = None
    trajs = iterative.trajectories(sc, None)
    producers = sorted(shares)
    number = 0
    while True:
        number += 1
        rnd = IterativeRound(sc, work, number)
        rnd.write_trajectories(trajs)
        map_bins(spark, bins, lambda p, rnd=rnd: rnd.write_work(shares[p]), f"round {number}: producer tasks")
        merged = rnd.merged_work(producers)
        last, left = iterative.converged(previous, merged, number, max_rounds)
        if last:
            return rnd, number, left
        previous, trajs = merged, iterative.trajectories(sc, merged)
