"""Read the committed Delta tables back as Arrow or pandas (tests, notebooks, reports; no Spark).

Only what the Delta log lists is read (never a directory listing, which would include uncommitted or
removed files), cast to the table's declared schema (:data:`rocketsim.schemas.TABLES`). Spark reads
through :func:`rocketsim.spark.read.read_spark`.
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
from rocketsim.schemas import TABLES
from rocketsim.warehouse.paths import PARTITION_COLUMN, check_run_id, filesystem, table_path


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
    """The committed rows as Arrow (one run, or all), cast to the declared schema."""
    dt = DeltaTable(table_path(warehouse, table))
    filters = None if run_id is None else [(PARTITION_COLUMN, "=", run_id)]
    result = dt.to_pyarrow_table(columns=columns, filters=filters)
    declared = declared_schema(table, dt, arrow_schema)
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
    """Run ids committed in ``table``, or in any Delta table of the warehouse, sorted."""
    if table is not None:
        return run_ids(DeltaTable(table_path(warehouse, table))) if is_table(warehouse, table) else []
    runs: set[str] = set()
    for name in list_tables(warehouse):
        runs.update(run_ids(DeltaTable(table_path(warehouse, name))))
    return sorted(runs)


def run_ids(dt: DeltaTable) -> list[str]:
    """The run ids a Delta table holds (from the log: metadata, not data), sorted."""
    return sorted({p[PARTITION_COLUMN] for p in dt.partitions() if p.get(PARTITION_COLUMN) is not None})


def run_file_uris(warehouse: str | os.PathLike[str], table: str, run_id: str) -> list[str]:
    """The data files of one run of a table, as the Delta log lists them (uris pyarrow and Spark open)."""
    dt = DeltaTable(table_path(warehouse, table))
    return dt.file_uris(file_pruning_predicate=[(PARTITION_COLUMN, "=", check_run_id(run_id))])


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


def _run_adds(dt: DeltaTable, run_id: str) -> list[dict]:
    """The Delta log's add actions (flattened: path, num_records, min./max. per column) of one run."""
    adds = pa.table(dt.get_add_actions(flatten=True))
    return [a for a in adds.to_pylist() if a.get(f"partition.{PARTITION_COLUMN}") == run_id]


def run_file_ranges(
    warehouse: str | os.PathLike[str], table: str, run_id: str, column: str
) -> list[FileRange]:
    """The data files of one run of a table with the min and max of ``column`` in each, from the Delta
    log's file statistics (no data read), so a reader can open only the files that may hold a value."""
    uris = run_file_uris(warehouse, table, run_id)
    dt = DeltaTable(table_path(warehouse, table))
    names = [f"min.{column}", f"max.{column}"]
    # by file name (unique in a table): the log escapes the partition folder differently from file_uris
    stats = {_file_name(a["path"]): (a.get(names[0]), a.get(names[1])) for a in _run_adds(dt, run_id)}
    return [FileRange(uri, *stats.get(_file_name(uri), (None, None))) for uri in uris]


def run_rows(warehouse: str | os.PathLike[str], table: str, run_id: str) -> int:
    """The rows one run of a table holds, from the Delta log's file statistics (a file without them:
    from its Parquet footer); no data read."""
    check_run_id(run_id)
    dt = DeltaTable(table_path(warehouse, table))
    rows = 0
    uris = {_file_name(u): u for u in dt.file_uris(file_pruning_predicate=[(PARTITION_COLUMN, "=", run_id)])}
    for add in _run_adds(dt, run_id):
        if add.get("num_records") is not None:
            rows += int(add["num_records"])
        else:
            fs, path = filesystem(uris[_file_name(add["path"])])
            with fs.open_input_file(path) as handle:
                rows += pq.read_metadata(handle).num_rows
    return rows


class MissingRunError(RocketSimError, FileNotFoundError):
    """A job's input is not there: the table, or the run in it."""


def require_run(warehouse: str | os.PathLike[str], table: str, run_id: str) -> None:
    """Raise :class:`MissingRunError` unless ``table`` is a Delta table holding run ``run_id`` (from the
    log: metadata, not data)."""
    if not is_table(warehouse, table):
        raise MissingRunError(
            f"{table_path(warehouse, table)} is not a Delta table: run {run_id!r} has no {table}"
        )
    if run_id not in run_ids(DeltaTable(table_path(warehouse, table))):
        raise MissingRunError(f"table {table} holds no run {run_id!r}")


def _file_name(path: str) -> str:
    return unquote(path.rstrip("/").rsplit("/", 1)[-1])
