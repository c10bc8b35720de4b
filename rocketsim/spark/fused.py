"""The fused generate + simulate stage: Spark schedules, the tasks write Parquet, the driver commits.

The staged pipeline (:func:`rocketsim.spark.pipeline.run_generate` then ``run_simulate``) writes
``messages``, reads them back, shuffles them to one group per producer, persists the nested results
and numbers the commit log with window functions: each row crosses the JVM/Python boundary several
times. This stage does the same work in two Spark jobs whose rows are only a few counts:

1. one task per bin of producers (:func:`producer_bins`: longest first onto the least loaded bin)
   runs :func:`rocketsim.run_files.write_producer_files` for each of its producers;
2. one task per broker runs :func:`rocketsim.run_files.write_broker_files`.

The tasks write straight into the tables' staging folders (``<table>/_staging/<write id>``, shared
storage on a cluster, as for the Spark writer), and the driver then moves each table's files into the
run's partition and commits them in one ``deltalake`` transaction per table
(:func:`rocketsim.spark.delta_sink.stage_written`, :func:`~rocketsim.spark.delta_sink.commit_run`),
exactly as the staged path commits what Spark wrote. The tables are the same, row for row (the tests
compare them). Used for the ``deltalake`` engine; with delta-spark the staged path writes through Delta.

The limit: a producer is simulated serially in one task (its fault table and clock are one state), so
one producer's rows must fit in a Python worker's memory (about 1 KiB per message at peak) and the
largest producer bounds the stage's time; brokers are numbered one task each.
"""

from __future__ import annotations

import contextlib
import heapq
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import SparkSession

from rocketsim import run_files, schemas, workload
from rocketsim.scenario import Scenario
from rocketsim.spark import delta_sink

# the tables this stage writes, in commit order
TABLES = ("messages", "commit_log", "send_results", "send_attempts")
SCRATCH_SUFFIX = "-scratch"
_COUNTS = pa.schema([pa.field("who", pa.int64()), pa.field("a", pa.int64()), pa.field("b", pa.int64())])


@dataclass(frozen=True)
class FusedReport:
    """What the stage committed."""

    messages: int
    results: int
    attempts: int
    log_records: int
    reports: tuple[delta_sink.WriteReport, ...]
    producers_s: float  # step 1 (generate, simulate, write)
    brokers_s: float  # step 2 (number the commit logs, write)
    commit_s: float


def producer_bins(shares: list[workload.ProducerShare], bins: int) -> list[list[int]]:
    """Producers spread over ``bins`` tasks: largest first, each onto the least loaded bin (LPT), so
    one heavy producer gets a task of its own and the others share the rest. Deterministic."""
    bins = max(1, min(bins, len(shares)))
    heap = [(0, b) for b in range(bins)]
    out: list[list[int]] = [[] for _ in range(bins)]
    for share in sorted(shares, key=lambda s: (-s.messages, s.producer)):
        load, b = heapq.heappop(heap)
        out[b].append(share.producer)
        heapq.heappush(heap, (load + max(share.messages, 1), b))
    return [sorted(b) for b in out if b]


def _run_dirs(warehouse: str, write_ids: dict[str, str]) -> run_files.RunDirs:
    def staging(table: str) -> str:
        return delta_sink.staging_path(warehouse, table, write_ids[table])

    return run_files.RunDirs(
        messages=staging("messages"),
        send_attempts=staging("send_attempts"),
        send_results=staging("send_results"),
        commit_log=staging("commit_log"),
        scratch=delta_sink.staging_path(warehouse, "commit_log", write_ids["commit_log"] + SCRATCH_SUFFIX),
    )


def generate_and_simulate(
    spark: SparkSession, sc: Scenario, warehouse: str, run_id: str, partitions: int
) -> FusedReport:
    """Write and commit ``messages``, ``commit_log``, ``send_results`` and ``send_attempts`` of a run."""
    delta_sink.check_run_id(run_id)
    shares = workload.producer_shares(sc)
    bins = producer_bins(shares, partitions)
    by_producer = {s.producer: s for s in shares}
    write_ids = {t: delta_sink.new_write_id() for t in TABLES}
    dirs = _run_dirs(warehouse, write_ids)
    for d in dirs.all():
        fs, path = run_files.filesystem(d)
        fs.create_dir(path, recursive=True)
    n_brokers = len(sc.cluster.brokers)
    producers = sorted(by_producer)

    def producer_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for b in batch.column(0).to_pylist():
                for p in bins[b]:
                    c = run_files.write_producer_files(sc, by_producer[p], dirs)
                    yield pa.RecordBatch.from_pylist([{"who": p, "a": c.messages, "b": c.attempts}], _COUNTS)

    def broker_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for b in batch.column(0).to_pylist():
                c = run_files.write_broker_files(sc, b, producers, dirs)
                yield pa.RecordBatch.from_pylist([{"who": b, "a": c.log_records, "b": c.results}], _COUNTS)

    counts_schema = "who long, a long, b long"
    try:
        t0 = time.monotonic()
        # one row per producer and per broker: counts, not data
        per_producer = (
            spark.range(0, len(bins), 1, numPartitions=len(bins))
            .mapInArrow(producer_task, counts_schema)
            .collect()
        )
        t1 = time.monotonic()
        per_broker = (
            spark.range(0, n_brokers, 1, numPartitions=max(1, n_brokers))
            .mapInArrow(broker_task, counts_schema)
            .collect()
        )
        t2 = time.monotonic()
        _delete_dir(dirs.scratch)
        if len(per_producer) != len(shares) or len(per_broker) != n_brokers:
            raise RuntimeError(
                f"fused stage: {len(per_producer)} of {len(shares)} producers and {len(per_broker)} of "
                f"{n_brokers} brokers reported; nothing committed"
            )
        reports = tuple(_commit(warehouse, t, run_id, write_ids[t]) for t in TABLES)
    except BaseException:
        for d in dirs.all():
            _delete_dir(d)  # best effort: vacuum_orphans removes what a killed driver leaves
        raise
    return FusedReport(
        messages=sum(r["a"] for r in per_producer),
        results=reports[TABLES.index("send_results")].rows,
        attempts=sum(r["b"] for r in per_producer),
        log_records=sum(r["a"] for r in per_broker),
        reports=reports,
        producers_s=t1 - t0,
        brokers_s=t2 - t1,
        commit_s=time.monotonic() - t2,
    )


def _commit(warehouse: str, table: str, run_id: str, write_id: str) -> delta_sink.WriteReport:
    """Move a table's staged files into the run's partition and commit them; if the commit fails, the
    moved files are deleted (they are orphans no reader sees, but need not wait for a vacuum)."""
    staged = delta_sink.stage_written(warehouse, table, run_id, schemas.TABLES[table], write_id)
    try:
        return delta_sink.commit_run(staged)
    except BaseException:
        fs, root = run_files.filesystem(staged.table_uri)
        for f in staged.files:
            with contextlib.suppress(OSError):
                fs.delete_file(f"{root}/{f.path}")
        raise


def _delete_dir(uri: str) -> None:
    fs, path = run_files.filesystem(uri)
    with contextlib.suppress(OSError):
        fs.delete_dir(path)
