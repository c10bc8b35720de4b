"""A run's stage on Spark: Spark schedules, the tasks write Parquet, the driver publishes.

The stage is plain core functions (:mod:`rocketsim.stage`) and the files its tasks write
(:mod:`rocketsim.warehouse.stage_files`); this module only decides where they run and where their output
goes. Two Spark jobs whose rows are only a few counts (no message row passes through the JVM):

1. one task per bin of producers (:func:`rocketsim.stage.producer_bins`: longest first onto the least
   loaded bin) runs :func:`~rocketsim.warehouse.stage_files.write_producer_files` for each of them;
2. one task per broker runs :func:`~rocketsim.warehouse.stage_files.write_broker_files`.

The tasks write straight into the tables' staging folders (``<table>/_staging/<write id>``, shared
storage on a cluster), and the driver publishes each table's files as one commit per table
(:func:`rocketsim.spark.delta_sink.publish_staged`: a ``deltalake`` transaction, or delta-spark when the
session has it), in registry order.

One stage, three uses (:func:`run_stage`'s ``stages``): ``jobs/pipeline.py`` generates and simulates
(``messages``, ``send_attempts``, ``send_results``, ``commit_log``); ``jobs/generate.py`` only generates
(step 1 writes ``messages``); ``jobs/simulate.py`` reads each producer's messages back from the files of
the run's committed ``messages`` (the driver hands each task the files that may hold its producers, from
the Delta log's statistics, so executors need no deltalake) and writes the other three. The tables are
the same, row for row, for any split of the work (the tests compare them).

The limit: a producer is simulated serially in one task (its fault table and clock are one state), so
one producer's rows must fit in a Python worker's memory (about 1 KiB per message at peak) and the
largest producer bounds the stage's time; brokers are numbered one task each.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import SparkSession

from rocketsim import schemas, stage, workload
from rocketsim.scenario import Scenario
from rocketsim.spark.delta_sink import publish_staged
from rocketsim.warehouse.delta import WriteReport
from rocketsim.warehouse.paths import check_run_id, delete_dir, make_dir, new_write_id, staging_path
from rocketsim.warehouse.read import run_file_ranges
from rocketsim.warehouse.stage_files import StageDirs, finish_stage, write_broker_files, write_producer_files

SCRATCH_SUFFIX = "-scratch"
COUNTS = pa.schema([pa.field("who", pa.int64()), pa.field("a", pa.int64()), pa.field("b", pa.int64())])


@dataclass(frozen=True)
class StageReport:
    """What the stage committed."""

    messages: int
    results: int
    attempts: int
    log_records: int
    reports: tuple[WriteReport, ...]
    producers_s: float  # step 1 (generate or read, simulate, write)
    brokers_s: float  # step 2 (number the commit logs, write)
    commit_s: float


def map_bins(
    spark: SparkSession, bins: Sequence[Sequence[int]], work: Callable[[int], tuple[int, int]]
) -> list[tuple[int, int, int]]:
    """``work(item)`` for every item of every bin, one Spark task per bin; each item's two counts, as
    ``(item, a, b)``, collected (rows of counts, never data)."""
    bins = [list(b) for b in bins]

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for b in batch.column(0).to_pylist():
                for item in bins[b]:
                    a, c = work(item)
                    yield pa.RecordBatch.from_pylist([{"who": item, "a": a, "b": c}], COUNTS)

    rows = spark.range(0, len(bins), 1, numPartitions=max(1, len(bins))).mapInArrow(
        task, "who long, a long, b long"
    )
    return [(r["who"], r["a"], r["b"]) for r in rows.collect()]


def run_stage(
    spark: SparkSession,
    sc: Scenario,
    warehouse: str,
    run_id: str,
    partitions: int,
    stages: Sequence[str] = (schemas.GENERATE, schemas.SIMULATE),
) -> StageReport:
    """Write and commit the tables of ``stages`` (generate, simulate or both) for one run."""
    check_run_id(run_id)
    if not stages or set(stages) - {schemas.GENERATE, schemas.SIMULATE}:
        raise ValueError(f"the stage runs {schemas.GENERATE!r} and/or {schemas.SIMULATE!r}, got {stages}")
    tables = [t.name for t in schemas.written_by(*stages)]
    simulates = schemas.SIMULATE in stages
    shares = workload.producer_shares(sc)
    by_producer = {s.producer: s for s in shares}
    bins = stage.producer_bins(shares, partitions)
    producers = sorted(by_producer)
    # generated in the tasks, or read from the run's committed messages
    message_files = None if schemas.GENERATE in stages else _message_files(warehouse, run_id, producers)
    write_ids = {t: new_write_id() for t in tables}
    scratch = None
    if simulates:
        scratch = staging_path(warehouse, "commit_log", write_ids["commit_log"] + SCRATCH_SUFFIX)
    dirs = StageDirs({t: staging_path(warehouse, t, write_ids[t]) for t in tables}, scratch)
    for d in dirs.all():
        make_dir(d)
    n_brokers = len(sc.cluster.brokers)

    def producer_work(p: int) -> tuple[int, int]:
        c = write_producer_files(
            sc, by_producer[p], dirs, None if message_files is None else message_files[p]
        )
        return c.messages, c.attempts

    def broker_work(b: int) -> tuple[int, int]:
        c = write_broker_files(sc, b, producers, dirs)
        return c.log_records, c.results

    try:
        t0 = time.monotonic()
        per_producer = map_bins(spark, bins, producer_work)
        t1 = time.monotonic()
        per_broker = map_bins(spark, [[b] for b in range(n_brokers)], broker_work) if simulates else []
        t2 = time.monotonic()
        finish_stage(dirs)
        if len(per_producer) != len(shares) or (simulates and len(per_broker) != n_brokers):
            raise RuntimeError(
                f"stage: {len(per_producer)} of {len(shares)} producers and {len(per_broker)} of "
                f"{n_brokers} brokers reported; nothing committed"
            )
        reports = tuple(
            publish_staged(spark, warehouse, t, run_id, schemas.TABLES[t].schema, write_ids[t])
            for t in tables
        )
    except BaseException:
        for d in dirs.all():
            delete_dir(d)  # best effort: vacuum_orphans removes what a killed driver leaves
        raise
    rows = {r.table: r.rows for r in reports}
    return StageReport(
        messages=sum(a for _, a, _ in per_producer),
        results=rows.get("send_results", 0),
        attempts=sum(b for _, _, b in per_producer),
        log_records=sum(a for _, a, _ in per_broker),
        reports=reports,
        producers_s=t1 - t0,
        brokers_s=t2 - t1,
        commit_s=time.monotonic() - t2,
    )


def _message_files(warehouse: str, run_id: str, producers: Sequence[int]) -> dict[int, tuple[str, ...]]:
    """Per producer, the files of the run's committed ``messages`` that may hold its rows (by the
    producer ranges of the Delta log's file statistics)."""
    files = run_file_ranges(warehouse, "messages", run_id, "producer")
    return {p: tuple(f.uri for f in files if f.may_hold(p)) for p in producers}
