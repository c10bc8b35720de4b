"""The stage's protocols in memory, and the stage run in one process (:func:`run_stage`): the task
bodies without files or Spark, for the tests and for small runs in a notebook."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim.broker.queue import ITERATIVE
from rocketsim.scenario import Scenario, workload
from rocketsim.stage.broker import broker_task
from rocketsim.stage.coupled import iterate_rounds, round_task
from rocketsim.stage.driver import FinishedStage, finish_stage
from rocketsim.stage.plan import StagePlan, stage_bins
from rocketsim.stage.producer import producer_task
from rocketsim.stage.protocols import ScratchKey, StageIO, Task
from rocketsim.tables import reconcile
from rocketsim.tables.grouping import take_rows
from rocketsim.tables.schemas import SIMULATE


class MemorySink:
    """A table's part kept in ``parts`` when closed (``schema`` None: the first chunk's; no chunk: none)."""

    def __init__(self, parts: dict[Task, pa.Table], task: Task, schema: pa.Schema | None) -> None:
        self._parts, self.task, self.schema = parts, task, schema
        self._chunks: list[pa.Table] = []

    def write(self, table: pa.Table) -> None:
        if table.num_rows:
            self.schema = self.schema or table.schema
            self._chunks.append(table.cast(self.schema))

    def close(self) -> None:
        if self.schema is not None:
            self._parts[self.task] = pa.concat_tables([self.schema.empty_table(), *self._chunks])
        else:  # no part, not even one an earlier run of the task left
            self._parts.pop(self.task, None)

    def abort(self) -> None:
        self._chunks = []


class MemoryTables:
    """The staged tables: per table, each task's part."""

    def __init__(self) -> None:
        self.parts: dict[str, dict[Task, pa.Table]] = {}

    def sink(self, table: str, task: Task, schema: pa.Schema | None) -> MemorySink:
        return MemorySink(self.parts.setdefault(table, {}), task, schema)

    def table(self, name: str) -> pa.Table:
        """Every part of ``name``, by task."""
        parts = self.parts.get(name, {})
        return pa.concat_tables([parts[t] for t in sorted(parts)])


class MemoryGroupedSink:
    """Rows by group, kept (one table per group) under its key when closed."""

    def __init__(self, items: dict[ScratchKey, object], key: ScratchKey, schema: pa.Schema, groups: int):
        self._items, self.key, self.schema = items, key, schema
        self._groups: list[list[pa.Table]] = [[] for _ in range(groups)]

    def write(self, table: pa.Table, group: np.ndarray, rows: np.ndarray | None = None) -> None:
        group = np.asarray(group)
        taken = table if rows is None else table.take(pa.array(np.asarray(rows, np.int64)))
        for g, parts in enumerate(self._groups):
            parts.append(taken.filter(pa.array(group == g)).cast(self.schema))

    def close(self) -> None:
        self._items[self.key] = [pa.concat_tables([self.schema.empty_table(), *p]) for p in self._groups]

    def abort(self) -> None:
        self._groups = [[] for _ in self._groups]


class TableSource:
    """A table as a :class:`rocketsim.stage.protocols.RowSource`."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    @property
    def num_rows(self) -> int:
        return self.table.num_rows

    def __call__(self) -> pa.Table:
        return self.table

    def take(self, rows: np.ndarray, columns: Sequence[str]) -> pa.Table:
        return take_rows(self.table.select(list(columns)), np.asarray(rows, np.int64))

    def slice(self, start: int, length: int) -> pa.Table:
        return self.table.slice(start, length)

    def pieces(self, column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        values = self.table.column(column).to_numpy()  # each row a piece: exact
        return values, values, np.ones(len(values), np.int64)

    def let_go(self) -> None:
        pass  # nothing cached


class MemoryScratch:
    """Named bytes, tables and grouped rows."""

    def __init__(self) -> None:
        self.items: dict[ScratchKey, object] = {}

    def put_bytes(self, key: ScratchKey, data: bytes) -> None:
        self.items[key] = bytes(data)

    def get_bytes(self, key: ScratchKey) -> bytes:
        return self.items[key]

    def map_bytes(self, key: ScratchKey) -> np.ndarray:
        return np.frombuffer(bytearray(self.items[key]), np.uint8)

    def put_table(self, key: ScratchKey, table: pa.Table) -> None:
        self.items[key] = table

    def get_table(self, key: ScratchKey) -> pa.Table:
        return self.items[key]

    def grouped_sink(self, key: ScratchKey, schema: pa.Schema, groups: int) -> MemoryGroupedSink:
        return MemoryGroupedSink(self.items, key, schema, groups)

    def group_source(
        self, keys: Sequence[ScratchKey], group: int, schema: pa.Schema, groups: int
    ) -> TableSource:
        return TableSource(pa.concat_tables([schema.empty_table(), *(self.items[k][group] for k in keys)]))

    def clear(self) -> None:
        self.items.clear()


class MemoryCommitted:
    """A run's committed tables, whole."""

    def __init__(self, tables: Mapping[str, pa.Table] | None = None) -> None:
        self.tables = dict(tables or {})

    def producer_rows(
        self, table: str, producer: int, schema: pa.Schema, where: Mapping[str, object] | None = None
    ) -> pa.Table:
        return self.rows(table, schema, {**(where or {}), "producer": producer})

    def rows(self, table: str, schema: pa.Schema, where: Mapping[str, object] | None = None) -> pa.Table:
        rows = self.tables[table]
        for column, value in (where or {}).items():
            rows = rows.filter(pc.fill_null(pc.equal(rows.column(column), value), False))
        return rows.select(schema.names).cast(schema)


def memory_io(committed: Mapping[str, pa.Table] | None = None) -> StageIO:
    """A stage's sinks and sources in memory (``committed``: the run's committed tables it reads)."""
    return StageIO(MemoryTables(), MemoryScratch(), MemoryCommitted(committed))


def run_stage(
    sc: Scenario, plan: StagePlan, io: StageIO, tasks: int = 1
) -> tuple[dict[str, int], FinishedStage]:
    """The stage in this process, as a scheduler runs it: ``brokers.coupling = iterative``'s rounds, the
    producer tasks (``tasks`` bins), the broker tasks, the driver's finish step; the tasks' counts added
    up, and what the driver made."""
    shares = workload.producer_shares(sc)
    by_producer = {s.producer: s for s in shares}
    bins = [[by_producer[p] for p in b] for b in stage_bins(sc, plan, shares, tasks)]

    def producer_tasks(last_round: int | None, hand_on: bool = False) -> list[dict[str, int]]:
        return [producer_task(sc, plan, io, i, b, last_round, hand_on=hand_on) for i, b in enumerate(bins)]

    def run_round(number: int, rows: bool) -> list[dict[str, int]] | None:
        if rows:
            return producer_tasks(number, hand_on=True)
        for i, b in enumerate(bins):
            round_task(sc, plan, io, i, b, number)
        return None

    if sc.coupling == ITERATIVE and plan.runs(SIMULATE):
        rounds = iterate_rounds(sc, io.scratch, run_round, len(bins))
        counts = rounds.rows if rounds.rows is not None else producer_tasks(rounds.last)
    else:
        counts = producer_tasks(None)
    brokers = list(range(len(sc.cluster.brokers)))
    if plan.has_brokers:
        counts += [broker_task(sc, plan, io, b, len(bins)) for b in brokers]
    finished = finish_stage(sc, plan, io, len(bins), brokers)
    finished.scratch_cleared()
    return reconcile.add_counts([*counts, finished.counts]), finished
