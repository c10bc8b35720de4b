"""The stage's protocols (:mod:`rocketsim.stage.protocols`) as files, and what each file is called.

A stage's tasks (:mod:`rocketsim.stage`) write each table's part into that table's staging folder (a
Parquet file per table and task: :class:`FileTables`), hand on what the broker tasks, the driver and the
next round read through a scratch folder (Arrow IPC and bytes: :class:`ScratchFolder`), and read the
committed files of the tables they do not write (:class:`CommittedFiles`, picked by each file's range
from the Delta log). Every file name is a function of the task (a producer task's: its bin's number;
the bins are deterministic) or of the scratch key, and each file is written under a temporary name and
renamed (:mod:`rocketsim.warehouse.files`), so a task that Spark runs again rewrites the same files with
the same bytes. Small aggregates travel through the scratch folder rather than in a task's returned rows:
they may reach megabytes, which a file keeps out of the JVM. Where a stage's folders are is a
:class:`StageWork`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim.stage.graph import INPUT_COLUMNS
from rocketsim.stage.plan import CHUNK_ROWS, StagePlan
from rocketsim.stage.protocols import (
    AGGREGATES,
    BROKER,
    DELIVERIES,
    DRIVER,
    LOG,
    OTHER_HALVES,
    PRODUCER,
    RESULTS,
    ROUND_WORK,
    TRAJECTORIES,
    VARIANT_AGGREGATES,
    WHOLE_RUN_AGGREGATES,
    ScratchKey,
    StageIO,
    Task,
)
from rocketsim.warehouse.files import (
    IpcGroupSource,
    IpcGroupsSink,
    ParquetSink,
    ipc_group_source,
    map_bytes,
    read_bytes,
    read_ipc,
    read_parquet,
    read_row_group,
    row_group_ranges,
    write_bytes,
    write_ipc,
    write_parquet,
)
from rocketsim.warehouse.paths import delete_dir
from rocketsim.warehouse.read import FileRange, may_hold

PRODUCER_PART = "part-p{:06d}.parquet"  # a producer task's: its bin's number
BROKER_PART = "part-b{:06d}.parquet"
DRIVER_PART = "part-d000000.parquet"
PARTS = {PRODUCER: PRODUCER_PART, BROKER: BROKER_PART, DRIVER: DRIVER_PART}
SCRATCH_FILES = {
    LOG: "log-p{:06d}.arrow",
    RESULTS: "results-p{:06d}.arrow",
    OTHER_HALVES: "other-halves-p{:06d}.arrow",
    AGGREGATES: "aggregates-p{:06d}.bin",
    DELIVERIES: "deliveries-b{:06d}.arrow",
    VARIANT_AGGREGATES: "aggregates-g{:04d}-p{:06d}.bin",
    WHOLE_RUN_AGGREGATES: "aggregates-v{:04d}.bin",  # a capacity sweep: one per variant
    ROUND_WORK: "round{:03d}-work-p{:06d}.arrow",  # brokers.coupling = iterative
    TRAJECTORIES: "round{:03d}-trajectories.bin",
}
# A broker task's send_results file holds every producer's results pointing at that broker, in producer
# order: row groups this small let a task reading one producer's results back (jobs/summarize.py,
# jobs/broker_side.py) skip the others' by the footer's producer ranges, so reading every producer costs
# about one pass over the file, not one pass per producer.
BROKER_RESULTS_ROW_GROUP = 65_536
# the parts written even when empty (a producer task's messages and attempts; the driver's tables)
EMPTY_FILES = {(PRODUCER, "messages"), (PRODUCER, "send_attempts")}


def part_name(task: Task) -> str:
    return PARTS[task.kind].format(task.number)


def scratch_name(key: ScratchKey) -> str:
    return SCRATCH_FILES[key.kind].format(*key.numbers)


@dataclass(frozen=True)
class StageWork:
    """Where a stage's tasks write and what they read: the ``stages`` they run (a contiguous part of
    :data:`rocketsim.stage.graph.STAGES`), the staging folder of every table those stages write
    (``tables``), their ``scratch`` folder (local paths or URIs: shared storage on a cluster), the window
    of the summary tables, the committed files of the tables they read (``inputs``: per table, each file
    with the range of its :data:`rocketsim.stage.graph.INPUT_COLUMNS` column) and the size of a chunk."""

    stages: tuple[str, ...]
    tables: Mapping[str, str]
    scratch: str
    window_ms: int = 10_000
    inputs: Mapping[str, Sequence[FileRange]] = field(default_factory=dict)
    chunk_rows: int = CHUNK_ROWS
    only: tuple[str, ...] = ()  # a summaries-only run's tables (StagePlan.only)

    def __post_init__(self) -> None:
        plan = self.plan  # checks the stages, the window and the chunk
        wanted = set(plan.tables())
        if set(self.tables) != wanted:
            raise ValueError(
                f"stages {self.stages} write {sorted(wanted)}, given folders of {sorted(self.tables)}"
            )
        missing = sorted(set(plan.reads()) - set(self.inputs))
        if missing:
            raise ValueError(f"stages {self.stages} read the committed {missing}: give their files")

    @property
    def plan(self) -> StagePlan:
        return StagePlan(tuple(self.stages), self.window_ms, self.chunk_rows, tuple(self.only))

    def io(self) -> StageIO:
        """The stage's sinks and sources as these folders and files (one per task: each opens its own)."""
        return StageIO(FileTables(self.tables), ScratchFolder(self.scratch), CommittedFiles(self.inputs))

    def all(self) -> tuple[str, ...]:
        """Every folder the tasks and the driver write."""
        return (*self.tables.values(), self.scratch)


class FileTables:
    """Each table's part as one Parquet file of its staging folder, named by the task (:func:`part_name`)."""

    def __init__(self, folders: Mapping[str, str]) -> None:
        self.folders = folders

    def sink(self, table: str, task: Task, schema: pa.Schema | None) -> ParquetSink:
        uri = f"{self.folders[table]}/{part_name(task)}"
        empty_file = task.kind == DRIVER or (task.kind, table) in EMPTY_FILES
        rows = BROKER_RESULTS_ROW_GROUP if (task.kind, table) == (BROKER, "send_results") else None
        return ParquetSink(uri, schema, empty_file=empty_file, row_group_size=rows)


def write_driver_table(folder: str, table: pa.Table) -> None:
    """A table the driver made (small), as the one Parquet file of its staging folder."""
    write_parquet(table, f"{folder}/{DRIVER_PART}")


class ScratchFolder:
    """The scratch store as a folder: bytes as files, tables and grouped rows as Arrow IPC files (a
    grouped sink: one record batch per group per part, :class:`rocketsim.warehouse.files.IpcGroupsSink`,
    read by a broker task memory-mapped, its batches only)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def uri(self, key: ScratchKey) -> str:
        return f"{self.folder}/{scratch_name(key)}"

    def put_bytes(self, key: ScratchKey, data: bytes) -> None:
        write_bytes(data, self.uri(key))

    def get_bytes(self, key: ScratchKey) -> bytes:
        return read_bytes(self.uri(key))

    def map_bytes(self, key: ScratchKey) -> np.ndarray:
        return map_bytes(self.uri(key))

    def put_table(self, key: ScratchKey, table: pa.Table) -> None:
        write_ipc(table, self.uri(key))

    def get_table(self, key: ScratchKey) -> pa.Table:
        return read_ipc(self.uri(key))

    def grouped_sink(self, key: ScratchKey, schema: pa.Schema, groups: int) -> IpcGroupsSink:
        return IpcGroupsSink(self.uri(key), schema, groups)

    def group_source(
        self, keys: Sequence[ScratchKey], group: int, schema: pa.Schema, groups: int
    ) -> IpcGroupSource:
        return ipc_group_source([self.uri(k) for k in keys], group, schema, groups)

    def clear(self) -> None:
        delete_dir(self.folder)


class CommittedFiles:
    """The committed files of the tables a stage reads (``inputs``: per table, each file with the range of
    its :data:`rocketsim.stage.graph.INPUT_COLUMNS` column). A producer's rows come from the row groups
    whose footer says they may hold it (:class:`ProducerRowGroups`: files that hold many producers are
    read once, not once per producer)."""

    def __init__(self, inputs: Mapping[str, Sequence[FileRange]]) -> None:
        self.inputs = inputs
        self._by_producer: dict[str, ProducerRowGroups] = {}

    def producer_rows(
        self, table: str, producer: int, schema: pa.Schema, where: Mapping[str, object] | None = None
    ) -> pa.Table:
        if table not in self._by_producer:
            self._by_producer[table] = ProducerRowGroups(self.inputs[table])
        return self._by_producer[table].rows(producer, schema, where or {})

    def rows(self, table: str, schema: pa.Schema, where: Mapping[str, object] | None = None) -> pa.Table:
        where = dict(where or {})
        files, column = self.inputs[table], INPUT_COLUMNS[table]
        uris = may_hold(files, where[column]) if column in where else [f.uri for f in files]
        return read_parquet(uris, schema, filters=[(c, "=", v) for c, v in where.items()])


class ProducerRowGroups:
    """Producers' rows of Parquet files, asked for one producer at a time in increasing order (a producer
    task's): each row group that may hold the producer (its footer's ``producer`` range) is read once,
    sorted by producer and kept until a later producer passes its range, then each producer's rows are a
    slice of it. Row groups without a range are read for each producer (their rows filtered)."""

    def __init__(self, files: Sequence[FileRange]) -> None:
        self.files = files
        self._ranges: dict[str, list[tuple[int, object, object]]] = {}
        self._kept: dict[tuple[str, int, tuple[str, ...]], tuple[np.ndarray, pa.Table, int]] = {}

    def rows(self, producer: int, schema: pa.Schema, where: Mapping[str, object]) -> pa.Table:
        extra = tuple(dict.fromkeys(c for c in ("producer", *where) if c not in schema.names))
        self._kept = {k: v for k, v in self._kept.items() if v[2] >= producer}
        parts = [schema.empty_table()]
        for uri in may_hold(self.files, producer):
            if uri not in self._ranges:
                self._ranges[uri] = row_group_ranges(uri, "producer")
            for group, low, high in self._ranges[uri]:
                if low is not None and not low <= producer <= high:
                    continue
                rows = self._producer_slice(uri, group, high, schema, extra, producer)
                for column, value in where.items():
                    rows = rows.filter(pc.fill_null(pc.equal(rows.column(column), value), False))
                parts.append(rows.select(schema.names).cast(schema))
        return pa.concat_tables(parts)

    def _producer_slice(
        self, uri: str, group: int, high: object, schema: pa.Schema, extra: tuple[str, ...], producer: int
    ) -> pa.Table:
        """The producer's rows of one row group (kept sorted by producer when its range is known)."""
        if high is None:
            rows = read_row_group(uri, group, schema, extra)
            return rows.filter(pc.fill_null(pc.equal(rows.column("producer"), producer), False))
        key = (uri, group, (*schema.names, *extra))
        if key not in self._kept:
            rows = read_row_group(uri, group, schema, extra)
            keys = np.asarray(rows.column("producer").to_numpy(), np.int64)
            if len(keys) > 1 and not (keys[1:] >= keys[:-1]).all():
                order = np.argsort(keys, kind="stable")
                rows, keys = rows.take(pa.array(order)), keys[order]
            self._kept[key] = (keys, rows, int(high))
        keys, rows, _ = self._kept[key]
        lo, hi = np.searchsorted(keys, [producer, producer + 1])
        return rows.slice(int(lo), int(hi - lo))
