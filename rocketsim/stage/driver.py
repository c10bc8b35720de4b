"""The driver's finish step, once every task of the stage is done and before its tables are published:
the producer tasks' summary aggregates merged into the summary tables
(:func:`rocketsim.tables.summaries.merge`, :func:`~rocketsim.tables.summaries.summary_tables`) and the
broker tasks' deliveries into ``consumer_load`` (:func:`rocketsim.broker.side.consumer_load`), each
written whole as the driver's part of its table (small tables; a summaries-only run: the summary tables
it selected); then the scratch store is cleared."""

from __future__ import annotations

from collections.abc import Sequence
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


def finish_stage(
    sc: Scenario, plan: StagePlan, io: StageIO, producer_tasks: int, brokers: Sequence[int]
) -> FinishedStage:
    """The driver's step after the ``producer_tasks`` producer tasks and the ``brokers``' tasks (the
    module docstring)."""
    made: dict[str, pa.Table] = {}
    if plan.runs(SUMMARIZE):
        keys = [scratch_key(AGGREGATES, t) for t in range(producer_tasks)]
        made = summaries.summary_tables(merge_aggregates(io.scratch, keys))
    if plan.runs(BROKER_SIDE) and plan.has_brokers:
        deliveries = [io.scratch.get_table(scratch_key(DELIVERIES, b)) for b in brokers]
        made["consumer_load"] = broker_side.consumer_load(deliveries, sc)
    counts: dict[str, int] = {}
    writes = plan.tables()  # a summaries-only run's selection may leave some out
    for name, table in made.items():
        if name in writes:
            write_whole(io.tables.sink(name, DRIVER_TASK, table.schema), table)
            counts |= reconcile.table_counts(name, table)
    io.scratch.clear()
    return FinishedStage(counts, {n: t for n, t in made.items() if n in summaries.SUMMARY_TABLES})


def merge_aggregates(scratch: Scratch, keys: Sequence[ScratchKey]) -> summaries.SummaryAggregates:
    """The summary aggregates the tasks put in the scratch store under ``keys``, merged."""
    return summaries.merge(summaries.SummaryAggregates.from_bytes(scratch.get_bytes(k)) for k in keys)
