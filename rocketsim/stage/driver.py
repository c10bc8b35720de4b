"""The driver's finish step, once every task of the stage is done and before its tables are published:
the producer tasks' summary aggregates merged into the summary tables
(:func:`rocketsim.tables.summaries.merge`, :func:`~rocketsim.tables.summaries.summary_tables`) and the
broker tasks' deliveries into ``consumer_load`` (:func:`rocketsim.broker.side.consumer_load`), each
written whole as the driver's part of its table (small tables; a summaries-only run: the summary tables
it selected). The scratch store (at 100M messages ~20 GB of files, a second or more to delete) is cleared
on a thread of its own once its parts are read, beside the merge and the commits after it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa

from rocketsim.broker import side as broker_side
from rocketsim.scenario import Scenario
from rocketsim.stage.plan import StagePlan
from rocketsim.stage.protocols import (
    AGGREGATES,
    DELIVERIES,
    DRIVER_TASK,
    Scratch,
    ScratchKey,
    StageIO,
    scratch_key,
    write_whole,
)
from rocketsim.tables import reconcile, summaries
from rocketsim.tables.schemas import BROKER_SIDE, SUMMARIZE


@dataclass(frozen=True)
class FinishedStage:
    """What :func:`finish_stage` made: its counts (:func:`rocketsim.tables.reconcile.table_counts` of every
    table it wrote) and the summary tables (to print the run's summary without reading it back)."""

    counts: dict[str, int]
    summary_tables: dict[str, pa.Table]
    # waits until the scratch store is cleared (the caller calls it once its own work is done)
    scratch_cleared: Callable[[], None] = lambda: None


def finish_stage(
    sc: Scenario, plan: StagePlan, io: StageIO, producer_tasks: int, brokers: Sequence[int]
) -> FinishedStage:
    """The driver's step after the ``producer_tasks`` producer tasks and the ``brokers``' tasks (the
    module docstring); the scratch store is still being cleared when it returns
    (:attr:`FinishedStage.scratch_cleared`)."""
    aggregates = deliveries = None
    if plan.runs(SUMMARIZE):
        keys = [scratch_key(AGGREGATES, t) for t in range(producer_tasks)]
        aggregates = read_aggregates(io.scratch, keys)  # read before the scratch is cleared
    if plan.runs(BROKER_SIDE) and plan.has_brokers:
        deliveries = [io.scratch.get_table(scratch_key(DELIVERIES, b)) for b in brokers]
    clearing = threading.Thread(target=io.scratch.clear, name="scratch-clear")
    clearing.start()
    try:
        made: dict[str, pa.Table] = {}
        if aggregates is not None:
            made = summaries.summary_tables(summaries.merge(aggregates))
        if deliveries is not None:
            made["consumer_load"] = broker_side.consumer_load(deliveries, sc)
        counts = _write_made(plan, io, made)
    except BaseException:
        clearing.join()
        raise
    summary_tables = {n: t for n, t in made.items() if n in summaries.SUMMARY_TABLES}
    return FinishedStage(counts, summary_tables, clearing.join)


def _write_made(plan: StagePlan, io: StageIO, made: dict[str, pa.Table]) -> dict[str, int]:
    """The driver's tables written whole (those the run writes); their counts."""
    counts: dict[str, int] = {}
    writes = plan.tables()  # a summaries-only run's selection may leave some out
    for name, table in made.items():
        if name in writes:
            write_whole(io.tables.sink(name, DRIVER_TASK, table.schema), table)
            counts |= reconcile.table_counts(name, table)
    return counts


def read_aggregates(scratch: Scratch, keys: Sequence[ScratchKey]) -> list[summaries.SummaryAggregates]:
    """The summary aggregates the tasks put in the scratch store under ``keys``."""
    return [summaries.SummaryAggregates.from_bytes(scratch.get_bytes(k)) for k in keys]


def merge_aggregates(scratch: Scratch, keys: Sequence[ScratchKey]) -> summaries.SummaryAggregates:
    """The summary aggregates the tasks put in the scratch store under ``keys``, merged."""
    return summaries.merge(read_aggregates(scratch, keys))
