"""A run's stage on Spark: Spark schedules, the tasks write Parquet, the driver merges and publishes.

The stage is core functions (:mod:`rocketsim.stage`) over file-backed sinks and sources
(:class:`rocketsim.warehouse.stage_files.StageWork`); this module only decides where they run and hands
them those. Two Spark jobs whose rows are only counts (no message row passes through the JVM, and no
Spark job reads a table):

1. one task per bin of producers (:func:`rocketsim.stage.plan.stage_bins`: longest first onto the least
   loaded bin; every producer in one when ``brokers.coupling`` is joint) runs
   :func:`rocketsim.stage.producer.producer_task`;
2. one task per broker runs :func:`rocketsim.stage.broker.broker_task`.

More: docs/reference/modules.md, rocketsim/spark/run.py.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from rocketsim.broker.queue import ITERATIVE
from rocketsim.scenario import Scenario, workload
from rocketsim.spark.delta_sink import publish_run, publish_staged
from rocketsim.spark.progress import step
from rocketsim.spark.session import Spark, context_of
from rocketsim.stage.broker import broker_task
from rocketsim.stage.coupled import iterate_rounds, round_task
from rocketsim.stage.driver import finish_stage
from rocketsim.stage.graph import INPUT_COLUMNS, RUN_TABLES, STAGES, derived_tables, tables_read
from rocketsim.stage.plan import StagePlan, stage_bins
from rocketsim.stage.producer import producer_task
from rocketsim.tables import reconcile, schemas
from rocketsim.tables.schemas import SIMULATE
from rocketsim.warehouse.delta import WriteReport
from rocketsim.warehouse.paths import check_run_id, delete_dir, make_dir, new_write_id, staging_path
from rocketsim.warehouse.read import current_write, run_file_ranges, run_rows
from rocketsim.warehouse.stage_files import StageWork

SCRATCH_SUFFIX = "-scratch"
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
    only: tuple[str, ...] = ()  # a summaries-only run's tables (StagePlan.only)

    def rows(self, table: str) -> int:
        """Rows of ``table`` committed (or, for a table the stage only read, in the run)."""
        return self.counts.get(f"{table}.rows", 0)

    def simulated(self, table: str) -> int:
        """Rows of ``messages``, ``send_attempts`` or ``send_results`` the run simulated: committed, or
        made and not written (a summaries-only run)."""
        return self.counts.get(f"{table}.rows", self.counts.get(f"{table}.made", 0))

    def dropped(self) -> tuple[str, ...]:
        """The tables of the run its publication drops: those made from what it rewrote
        (:func:`rocketsim.stage.graph.derived_tables`), and for a summaries-only run every other table
        (an earlier run of the same id must not leave its rows beside these summaries)."""
        if not self.only:
            return derived_tables(self.stages)
        return tuple(t for t in RUN_TABLES if t not in self.only)


def map_bins(
    spark: Spark,
    bins: Sequence[Sequence[int]],
    work: Callable[[int], Mapping[str, int]],
    what: str = "tasks",
) -> dict[int, dict[str, int]]:
    """``work(item)`` for every item of every bin, one Spark task per bin; each item's counts, collected
    (rows of named counts, never data). ``what``: the work's name in the progress line and Spark's UI.

    Plain RDD tasks (Spark core): a job that only schedules tasks and collects counts needs none of
    Spark SQL, whose planning, code generation and Arrow set-up cost the JVM seconds of CPU
    (docs/benchmarks.md)."""
    bins = [list(b) for b in bins]
    step(spark, what)

    def task(numbers: Iterator[int]) -> Iterator[tuple[int, str, int]]:
        for b in numbers:
            for item in bins[b]:
                counts = {_REPORTED: 1, **work(item)}
                yield from ((item, n, int(v)) for n, v in counts.items())

    rows = context_of(spark).parallelize(range(len(bins)), max(1, len(bins))).mapPartitions(task)
    out: dict[int, dict[str, int]] = {}
    # Tiny: one row per (task item, count name), a few dozen per producer or broker; no table rows.
    for who, name, value in rows.collect():
        counts = out.setdefault(who, {})
        if name != _REPORTED:
            counts[name] = value
    return out


def run_stage(
    spark: Spark,
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
    spark: Spark, warehouse: str, run_id: str, job: str, rep: StageReport, *extra: WriteReport
) -> None:
    """The run-level commit of a stage's writes (and of ``extra`` writes of the same job)."""
    publish_run(spark, warehouse, run_id, job, [*rep.reports, *extra], rep.dropped())


def write_stage(
    spark: Spark,
    sc: Scenario,
    warehouse: str,
    run_id: str,
    partitions: int,
    stages: Sequence[str] = STAGES,
    window_ms: int = 10_000,
    only: tuple[str, ...] = (),
) -> StageReport:
    """Write, commit (not yet visible) and reconcile the tables of ``stages`` (a contiguous part of
    generate, simulate, broker side, summarize) for one run; the run's tables the stages read must be
    there (:class:`rocketsim.warehouse.read.MissingRunError` before anything is written). ``only``: a
    summaries-only run's tables (:class:`rocketsim.stage.plan.StagePlan`)."""
    check_run_id(run_id)
    stages = tuple(stages)
    tables = list(StagePlan(stages, window_ms, only=only).tables())
    reads = tables_read(stages)
    published = {f"{t}.published": current_write(warehouse, t, run_id).rows for t in reads}
    inputs = {t: tuple(run_file_ranges(warehouse, t, run_id, INPUT_COLUMNS[t])) for t in reads}
    committed = {f"{t}.rows": run_rows(warehouse, t, run_id) for t in reads}
    write_ids = {t: new_write_id() for t in tables}
    work = StageWork(
        stages,
        {t: staging_path(warehouse, t, write_ids[t]) for t in tables},
        staging_path(warehouse, tables[0], write_ids[tables[0]] + SCRATCH_SUFFIX),
        window_ms,
        inputs,
        only=only,
    )
    for d in work.all():
        make_dir(d)
    try:
        ran = run_tasks(spark, sc, work, partitions)
        t2 = time.monotonic()
        finished = finish_stage(sc, work.plan, work.io(), ran.producer_tasks, ran.brokers)
        t3 = time.monotonic()
        reports = tuple(
            publish_staged(spark, warehouse, t, run_id, schemas.TABLES[t].schema, write_ids[t])
            for t in tables
        )
        finished.scratch_cleared()  # cleared beside the merge and the commits
    except BaseException:
        for d in work.all():
            delete_dir(d)  # best effort: vacuum_orphans removes what a killed driver leaves
        raise
    t4 = time.monotonic()
    counts = reconcile.add_counts(ran.counts)
    counts |= finished.counts | committed | published | {f"{r.table}.rows": r.rows for r in reports}
    checks = reconcile.check(counts, run_id, complete=stages == STAGES and not only)
    return StageReport(
        stages=stages,
        counts=counts,
        checks=checks,
        reports=reports,
        summary_tables=finished.summary_tables,
        producers_s=ran.producers_s,
        brokers_s=ran.brokers_s,
        driver_s=t3 - t2,
        commit_s=t4 - t3,
        rounds=ran.rounds,
        residual=ran.residual,
        only=only,
    )


@dataclass(frozen=True)
class TasksRun:
    """What the stage's tasks reported (each task's counts) and how long they took."""

    counts: list[dict[str, int]]
    producer_tasks: int
    brokers: list[int]
    producers_s: float
    brokers_s: float
    rounds: int | None
    residual: int | None


def run_tasks(spark: Spark, sc: Scenario, work: StageWork, partitions: int) -> TasksRun:
    """The stage's tasks on Spark: the iterative rounds (``brokers.coupling = iterative``), one producer
    task per bin (:func:`rocketsim.stage.plan.stage_bins`), one broker task per broker; each task given
    the files of ``work``. RuntimeError when a task did not report."""
    plan = work.plan
    shares = workload.producer_shares(sc)
    by_producer = {s.producer: s for s in shares}
    bins = [[by_producer[p] for p in b] for b in stage_bins(sc, plan, shares, partitions)]
    brokers = list(range(len(sc.cluster.brokers)))
    tasks = [[i] for i in range(len(bins))]
    rounds = left = None

    def producer_tasks(last_round: int | None, hand_on: bool = False) -> dict[int, dict[str, int]]:
        return map_bins(
            spark,
            tasks,
            lambda i: in_worker(
                lambda: producer_task(
                    sc, plan, work.io(), i, bins[i], last_round, release=give_back_unused, hand_on=hand_on
                )
            ),
            f"producer tasks, {sum(s.messages for s in shares):,} messages"
            + (f" (round {last_round})" if hand_on else ""),
        )

    def run_round(number: int, rows: bool) -> dict[int, dict[str, int]] | None:
        if rows:  # a round that may be the last: the producer tasks themselves
            return producer_tasks(number, hand_on=True)
        map_bins(
            spark,
            tasks,
            lambda i: round_task(sc, plan, work.io(), i, bins[i], number),
            f"round {number}: producer tasks",
        )
        return None

    t0 = time.monotonic()
    per_task = None
    if sc.coupling == ITERATIVE and plan.runs(SIMULATE):  # the rounds, then the last one's rows
        ran = iterate_rounds(sc, work.io().scratch, run_round, len(bins))
        rounds, left, per_task = ran.last, ran.residual, ran.rows
    if per_task is None:
        per_task = producer_tasks(rounds)
    t1 = time.monotonic()
    per_broker: dict[int, dict[str, int]] = {}
    if plan.has_brokers:
        per_broker = map_bins(
            spark,
            [[b] for b in brokers],
            lambda b: in_worker(lambda: broker_task(sc, plan, work.io(), b, len(bins))),
            "broker tasks",
        )
    t2 = time.monotonic()
    if len(per_task) != len(bins) or (plan.has_brokers and len(per_broker) != len(brokers)):
        raise RuntimeError(
            f"stage: {len(per_task)} of {len(bins)} producer tasks and {len(per_broker)} of "
            f"{len(brokers)} brokers reported; nothing committed"
        )
    counts = [*per_task.values(), *per_broker.values()]
    return TasksRun(counts, len(bins), brokers, t1 - t0, t2 - t1, rounds, left)


def in_worker(task: Callable[[], Mapping[str, int]]) -> Mapping[str, int]:
    """A task's body, then what it freed given back to the system (:func:`give_back_memory`)."""
    try:
        return task()
    finally:
        give_back_memory()


def give_back_memory() -> None:
    """What a task freed given back to the system (:func:`give_back_unused`), its cycles collected first.
    A Python worker runs many tasks one after another: without this it carries the freed-but-kept memory
    of a producer task (~0.6 GB) into the broker task after it."""
    gc.collect()  # Python's garbage collector (not a Spark collect): frees the task's cycles first
    give_back_unused()


def give_back_unused() -> None:
    """Arrow's pool's unused memory and glibc's free heap (``malloc_trim``; elsewhere nothing) given back
    to the system: milliseconds, so a producer task does it between its producers (their peaks do not
    pile up on what the last one left)."""
    pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
