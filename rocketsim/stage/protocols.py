"""Where a stage's tasks write and what they read, as small protocols (no I/O here).

The task bodies (:mod:`rocketsim.stage.producer`, :mod:`~rocketsim.stage.broker`, ...) only call these;
:mod:`rocketsim.warehouse.stage_files` implements them with files (a Parquet file per table and task, a
scratch folder, the committed files of a run) and :mod:`rocketsim.stage.memory` in memory (the tests, a
run in one process). A task names what it writes by its :class:`Task` (a staged table's part) or a
:class:`ScratchKey` (what it hands on to the broker tasks, the driver or the next round); how a name
becomes a file is the implementation's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import numpy as np
import pyarrow as pa

PRODUCER, BROKER, DRIVER = "producer", "broker", "driver"  # the kinds of task


class Task(NamedTuple):
    """Who writes a staged table's part: a producer task (its bin's number), a broker task (the broker's
    place in the cluster) or the driver. A task run again writes the same parts."""

    kind: str
    number: int


DRIVER_TASK = Task(DRIVER, 0)

# what the scratch store holds (ScratchKey.kind), and whose it is (ScratchKey.numbers)
LOG = "log"  # (producer task,): its commit-log records, grouped by broker
RESULTS = "results"  # (producer task,): its results pointing at a record, grouped by the record's broker
OTHER_HALVES = "other_halves"  # (producer task,): results of messages with another stored half, by broker
AGGREGATES = "aggregates"  # (producer task,): its summary aggregates (bytes)
DELIVERIES = "deliveries"  # (broker,): what consumers of its queues get
TRAJECTORIES = "trajectories"  # (round,): the brokers' trajectories of an iterative round (bytes)
ROUND_WORK = "round_work"  # (round, producer task,): its producers' arrival work in that round
VARIANT_AGGREGATES = "variant_aggregates"  # (signature group, producer): a comparison's aggregates (bytes)
WHOLE_RUN_AGGREGATES = "whole_run_aggregates"  # (variant,): a whole coupled run's aggregates (bytes)


class ScratchKey(NamedTuple):
    kind: str
    numbers: tuple[int, ...]


def scratch_key(kind: str, *numbers: int) -> ScratchKey:
    return ScratchKey(kind, tuple(int(n) for n in numbers))


class TableSink(Protocol):
    """A table's part written a chunk at a time: kept by :meth:`close`, dropped by :meth:`abort`."""

    def write(self, table: pa.Table) -> None: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...


class GroupedSink(Protocol):
    """Rows split into groups (a producer task's rows, by the broker that holds them), a part at a time:
    :meth:`write` puts row ``i`` of ``table`` (of its ``rows``, in that order; None: every row) into group
    ``group[i]``."""

    def write(self, table: pa.Table, group: np.ndarray, rows: np.ndarray | None = None) -> None: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...


class RowSource(Protocol):
    """Rows given when asked (e.g. files mapped anew each time, so what a caller drops is let go): whole,
    some rows (``columns`` of them) or a range."""

    @property
    def num_rows(self) -> int: ...

    def __call__(self) -> pa.Table: ...

    def take(self, rows: np.ndarray, columns: Sequence[str]) -> pa.Table: ...

    def slice(self, start: int, length: int) -> pa.Table: ...

    def pieces(self, column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The first and the last value of ``column`` and the rows of each piece of the rows as they are
        stored (e.g. a file's record batches), in order: their order by it without reading it whole."""
        ...

    def let_go(self) -> None:
        """A hint that the rows will not be read again (files: their pages may leave the page cache)."""
        ...


class TableSinks(Protocol):
    """The staged tables of a stage: one part per (table, task); ``schema`` None: the first chunk's."""

    def sink(self, table: str, task: Task, schema: pa.Schema | None) -> TableSink: ...


class Scratch(Protocol):
    """Named bytes and tables the tasks hand on (to the broker tasks, the driver, the next round); the
    driver's finish step clears them."""

    def put_bytes(self, key: ScratchKey, data: bytes) -> None: ...

    def get_bytes(self, key: ScratchKey) -> bytes: ...

    def map_bytes(self, key: ScratchKey) -> np.ndarray:
        """The bytes as a uint8 array (a file: mapped, its pages shared by the readers)."""
        ...

    def put_table(self, key: ScratchKey, table: pa.Table) -> None: ...

    def get_table(self, key: ScratchKey) -> pa.Table: ...

    def grouped_sink(self, key: ScratchKey, schema: pa.Schema, groups: int) -> GroupedSink: ...

    def group_source(
        self, keys: Sequence[ScratchKey], group: int, schema: pa.Schema, groups: int
    ) -> RowSource:
        """Group ``group`` of the grouped sinks ``keys``, one after another, each in the order written."""
        ...

    def clear(self) -> None: ...


class CommittedRows(Protocol):
    """The run's committed rows of the tables a stage reads (those it does not write itself): the rows of
    ``table`` whose columns equal the values of ``where``, the columns of ``schema``, in any order."""

    def producer_rows(
        self, table: str, producer: int, schema: pa.Schema, where: Mapping[str, object] | None = None
    ) -> pa.Table:
        """One producer's rows (a task asks for its producers in increasing order)."""
        ...

    def rows(self, table: str, schema: pa.Schema, where: Mapping[str, object] | None = None) -> pa.Table: ...


def write_through(sinks: Sequence[TableSink | GroupedSink], body: Callable[[], object]) -> None:
    """``body()`` (which writes into ``sinks``), then every sink closed; every one aborted if it fails."""
    try:
        body()
        for sink in sinks:
            sink.close()
    except BaseException:
        for sink in sinks:
            sink.abort()
        raise


def write_whole(sink: TableSink, table: pa.Table) -> None:
    """``table`` as the whole of ``sink``."""
    write_through([sink], lambda: sink.write(table))


@dataclass(frozen=True)
class StageIO:
    """What a stage's tasks write to and read from."""

    tables: TableSinks
    scratch: Scratch
    committed: CommittedRows
