"""Read the complete runs of the Delta tables as Arrow or pandas (tests, notebooks, reports, the jobs'
inputs; no Spark).

Only complete runs are read: of each run, the write of the table that ``run_commits`` names
(:mod:`rocketsim.warehouse.run_commit`), so a run a job is still writing, or one whose job died, is seen
nowhere, and a rerun replaces a run at once. Only what the Delta log lists is read (never a directory
listing, which would include uncommitted or removed files), cast to the table's declared schema
(:data:`rocketsim.tables.schemas.TABLES`), without the ``write_id`` bookkeeping column. Spark reads through
:func:`rocketsim.spark.read.read_spark`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from rocketsim.errors import RocketSimError
from rocketsim.tables.schemas import TABLES
from rocketsim.warehouse.delta import open_table
from rocketsim.warehouse.paths import PARTITION_COLUMN, WRITE_COLUMN, check_run_id, filesystem, table_path
from rocketsim.warehouse.run_commit import (
    RUN_COMMITS_TABLE,
    TableWrite,
    current_write_ids,
    current_writes,
)


class MissingRunError(RocketSimError, FileNotFoundError):
    """A job's input is not there: the table, or the run in it."""


def declared_schema(
    table: str, dt: DeltaTable | None = None, arrow_schema: pa.Schema | None = None
) -> pa.Schema:
    """The schema a table is read with: ``arrow_schema`` if given, else the registry's, else the log's."""
    if arrow_schema is not None:
        return arrow_schema
    if table in TABLES:
        return TABLES[table].schema
    if dt is None:
        raise KeyError(f"{table!r} is not a registered table and no Delta table was given")
    return pa.schema(dt.schema().to_arrow())


def read_arrow(
    warehouse: str | os.PathLike[str],
    table: str,
    run_id: str | None = None,
    *,
    columns: list[str] | None = None,
    arrow_schema: pa.Schema | None = None,
) -> pa.Table:
    """The rows of complete runs (one run, or all), cast to the declared schema: of each run, the write
    of ``table`` that ``run_commits`` names (:mod:`rocketsim.warehouse.run_commit`). A run being
    replaced while this reads is read again, so the rows are the old run's or the new run's, whole."""
    dt = open_table(warehouse, table)
    declared = declared_schema(table, dt, arrow_schema)
    if table == RUN_COMMITS_TABLE:
        filters = None if run_id is None else [(PARTITION_COLUMN, "=", run_id)]
        return _cast(dt.to_pyarrow_table(columns=columns, filters=filters), declared)
    for _ in range(_READ_ATTEMPTS):
        writes = current_write_ids(warehouse, table, run_id)
        if not writes:
            wanted = columns or declared.names
            return pa.schema([declared.field(n) for n in wanted]).empty_table()
        filters = [(WRITE_COLUMN, "in", sorted(writes.values()))]
        result = open_table(warehouse, table).to_pyarrow_table(columns=columns, filters=filters)
        if current_write_ids(warehouse, table, run_id) == writes:  # no rerun was published meanwhile
            break
    if WRITE_COLUMN in result.column_names and not (columns and WRITE_COLUMN in columns):
        result = result.drop_columns([WRITE_COLUMN])
    return _cast(result, declared)


_READ_ATTEMPTS = 5


def _cast(result: pa.Table, declared: pa.Schema) -> pa.Table:
    target = pa.schema([declared.field(f.name) if f.name in declared.names else f for f in result.schema])
    return result.cast(target)


def read_pandas(
    warehouse: str | os.PathLike[str],
    table: str,
    run_id: str | None = None,
    *,
    columns: list[str] | None = None,
) -> pd.DataFrame:
    """``read_arrow`` as a pandas DataFrame."""
    return read_arrow(warehouse, table, run_id, columns=columns).to_pandas()


def is_table(warehouse: str | os.PathLike[str], table: str) -> bool:
    """Whether ``<warehouse>/<table>`` is a Delta table."""
    return DeltaTable.is_deltatable(table_path(warehouse, table))


def list_tables(warehouse: str | os.PathLike[str]) -> list[str]:
    """The Delta tables of a local warehouse folder, sorted by name."""
    base = os.fspath(warehouse)
    if not os.path.isdir(base):
        return []
    return [name for name in sorted(os.listdir(base)) if is_table(warehouse, name)]


def list_runs(warehouse: str | os.PathLike[str], table: str | None = None) -> list[str]:
    """The complete runs that hold ``table`` (or any table), sorted."""
    return sorted(current_writes(warehouse, table))


def current_write(warehouse: str | os.PathLike[str], table: str, run_id: str) -> TableWrite:
    """The write of ``table`` that run ``run_id`` holds; :class:`MissingRunError` if none."""
    check_run_id(run_id)
    write = current_writes(warehouse, table, run_id).get(run_id, {}).get(table)
    if write is None:
        where = (
            f"{table_path(warehouse, table)} is not a Delta table"
            if not is_table(warehouse, table)
            else f"no complete run {run_id!r} holds it in {os.fspath(warehouse)}"
        )
        raise MissingRunError(f"run {run_id!r} has no {table} ({where})")
    return write


def _write_filter(write: TableWrite, run_id: str) -> list[tuple[str, str, str]]:
    return [(PARTITION_COLUMN, "=", run_id), (WRITE_COLUMN, "=", write.write_id)]


def run_file_uris(warehouse: str | os.PathLike[str], table: str, run_id: str) -> list[str]:
    """The data files of one complete run of a table (its current write), as the Delta log lists them
    (uris pyarrow and Spark open)."""
    write = current_write(warehouse, table, run_id)
    dt = open_table(warehouse, table)
    return dt.file_uris(file_pruning_predicate=_write_filter(write, run_id))


@dataclass(frozen=True)
class FileRange:
    """A data file and the range of a column in it (None: unknown, any value may be there)."""

    uri: str
    low: int | str | None
    high: int | str | None

    def may_hold(self, value: int | str) -> bool:
        return (self.low is None or self.low <= value) and (self.high is None or value <= self.high)


def may_hold(files: Sequence[FileRange], value: int | str) -> tuple[str, ...]:
    """The uris of ``files`` that may hold ``value``."""
    return tuple(f.uri for f in files if f.may_hold(value))


def _run_adds(dt: DeltaTable, run_id: str, write_id: str) -> list[dict]:
    """The Delta log's add actions (flattened: path, num_records, min./max. per column) of one write."""
    adds = pa.table(dt.get_add_actions(flatten=True))
    run, write = f"partition.{PARTITION_COLUMN}", f"partition.{WRITE_COLUMN}"
    return [a for a in adds.to_pylist() if a.get(run) == run_id and a.get(write) == write_id]


def run_file_ranges(
    warehouse: str | os.PathLike[str], table: str, run_id: str, column: str
) -> list[FileRange]:
    """The data files of one run of a table with the min and max of ``column`` in each, from the Delta
    log's file statistics (no data read), so a reader can open only the files that may hold a value."""
    write = current_write(warehouse, table, run_id)
    dt = open_table(warehouse, table)
    uris = dt.file_uris(file_pruning_predicate=_write_filter(write, run_id))
    names = [f"min.{column}", f"max.{column}"]
    # by file name (unique in a table): the log escapes the partition folder differently from file_uris
    adds = _run_adds(dt, run_id, write.write_id)
    stats = {_file_name(a["path"]): (a.get(names[0]), a.get(names[1])) for a in adds}
    return [FileRange(uri, *stats.get(_file_name(uri), (None, None))) for uri in uris]


def run_rows(warehouse: str | os.PathLike[str], table: str, run_id: str) -> int:
    """The rows one complete run of a table holds, from the Delta log's file statistics (a file without
    them: from its Parquet footer); no data read. (``run_commits`` records what the write committed:
    :func:`current_write`; the two differ only if the table's log was damaged or edited.)"""
    write = current_write(warehouse, table, run_id)
    dt = open_table(warehouse, table)
    rows = 0
    uris = {_file_name(u): u for u in dt.file_uris(file_pruning_predicate=_write_filter(write, run_id))}
    for add in _run_adds(dt, run_id, write.write_id):
        if add.get("num_records") is not None:
            rows += int(add["num_records"])
        else:
            fs, path = filesystem(uris[_file_name(add["path"])])
            with fs.open_input_file(path) as handle:
                rows += pq.read_metadata(handle).num_rows
    return rows


def require_run(warehouse: str | os.PathLike[str], table: str, run_id: str) -> None:
    """Raise :class:`MissingRunError` unless a complete run ``run_id`` holds ``table`` (metadata only)."""
    current_write(warehouse, table, run_id)


def _file_name(path: str) -> str:
    return unquote(path.rstrip("/").rsplit("/", 1)[-1])
