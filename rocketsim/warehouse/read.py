"""Read the complete runs of the Delta tables as Arrow or pandas (tests, notebooks, reports, the jobs'
inputs; no Spark).

Only complete runs are read: of each run, the write of the table that ``run_commits`` names
(:mod:`rocketsim.warehouse.run_commit`), so a run a job is still writing, or one whose job died, is seen
nowhere, and a rerun replaces a run at once. Only what the Delta log lists is read (never a directory
listing, which would include uncommitted or removed files), cast to the table's declared schema
(:data:`rocketsim.tables.schemas.TABLES`), without the ``write_id`` bookkeeping column. Spark reads through
:func:`rocketsim.spark.read.read_spark`.

What is read is checked against what ``run_commits`` recorded: a write the table's log does not hold,
holds with fewer rows, or whose files cannot be read is :class:`DamagedRunError` naming the table and the
run, never an empty or short answer. Several tables of one run (:func:`read_run`) are read as ONE version
of ``run_commits`` names them, so a rerun published meanwhile never mixes into the answer.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from rocketsim.errors import RocketSimError, first_line
from rocketsim.stage.graph import RUNS_TABLE
from rocketsim.tables.schemas import TABLES
from rocketsim.warehouse.delta import open_table
from rocketsim.warehouse.paths import PARTITION_COLUMN, WRITE_COLUMN, check_run_id, filesystem, table_path
from rocketsim.warehouse.run_commit import (
    RUN_COMMITS_TABLE,
    Published,
    TableWrite,
    published,
    run_commits_version,
)

if TYPE_CHECKING:  # pandas only for read_pandas's callers: not imported by every job's driver
    import pandas as pd

T = TypeVar("T")


class MissingRunError(RocketSimError, FileNotFoundError):
    """A job's input is not there: the table, or the run in it."""


class NotWrittenError(MissingRunError):
    """A complete run that did not write the table asked for: its ``runs`` row lists what it wrote (a
    summaries-only run, ``--tables summary``, writes no message row)."""


class DamagedRunError(RocketSimError):
    """A complete run's write of a table is missing, short or unreadable: what the table holds does not
    match what ``run_commits`` recorded (the table's log lost commits, its files were removed or damaged
    outside rocketsim, or ``run_commits`` is an older copy than the tables). ``absent``: the table's log
    does not hold the write at all (the sign of a ``run_commits`` that may be behind)."""

    def __init__(self, message: str, *, absent: bool = False) -> None:
        super().__init__(message)
        self.absent = absent


class _Moved(Exception):
    """``run_commits`` changed since the version being read: read again at the new one."""


_READ_ATTEMPTS = 5


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


def _pinned(warehouse: str | os.PathLike[str], run_id: str | None, body: Callable[[Published], T]) -> T:
    """``body(pin)`` for the latest version ``pin`` of ``run_commits`` (of ``run_id``, or all runs);
    again at the new version if a rerun was published meanwhile and ``body`` found a write it named
    gone (removed as superseded)."""
    for _ in range(_READ_ATTEMPTS):
        try:
            return body(published(warehouse, run_id))
        except _Moved:
            continue
    raise RocketSimError(
        f"run_commits of {os.fspath(warehouse)} changed {_READ_ATTEMPTS} times while reading: jobs are "
        "publishing runs; read again"
    )


def _damage(
    warehouse: str | os.PathLike[str],
    pin: Published,
    table: str,
    run: str,
    write: TableWrite,
    rows: int,
    *,
    absent: bool,
) -> DamagedRunError:
    """The error to raise for a write ``pin`` names that the table does not hold with its rows, unless
    ``run_commits`` moved on since ``pin`` (then :class:`_Moved`: the write was superseded and removed
    meanwhile)."""
    if run_commits_version(warehouse) != pin.version:
        raise _Moved
    return _missing(table, run, write, rows, absent=absent)


def _missing(table: str, run: str, write: TableWrite, rows: int, *, absent: bool = False) -> DamagedRunError:
    return DamagedRunError(
        f"run {run!r} of table {table} does not match run_commits: the table's log holds {rows:,} of the "
        f"{write.rows:,} rows of its write {write.write_id} (the table lost commits or files, or "
        f"run_commits is an older copy than the tables): restore the table from a backup, or rerun run {run}",
        absent=absent,
    )


def _open_named(
    warehouse: str | os.PathLike[str], table: str, pin: Published, writes: dict[str, TableWrite]
) -> DeltaTable | None:
    """The table whose ``writes`` ``pin`` names, checked against its log (files and rows of each write);
    None if the table is absent and holds no complete run."""
    try:
        dt = open_table(warehouse, table)
    except TableNotFoundError:
        if not any(w.rows for w in writes.values()):
            return None
        run, write = next((r, w) for r, w in sorted(writes.items()) if w.rows)
        raise _damage(warehouse, pin, table, run, write, 0, absent=True) from None
    logged = _logged_writes(dt) if writes else {}
    bad = []
    for run, write in sorted(writes.items()):
        files, rows = logged.get((run, write.write_id), (0, 0))
        if rows != write.rows and not (rows is None and files):  # no statistics: counted when read
            bad.append((bool(files), run, write, rows or 0))
    if bad:  # a write absent from the log first: the graver sign
        held, run, write, rows = min(bad, key=lambda b: b[0])
        raise _damage(warehouse, pin, table, run, write, rows, absent=not held)
    return dt


def _logged_writes(dt: DeltaTable) -> dict[tuple[str, str], tuple[int, int | None]]:
    """Per (run, write) of a table: its files in the log and their rows (None if a file has no
    statistics); metadata only."""
    adds = pa.table(dt.get_add_actions(flatten=True))
    run, write = f"partition.{PARTITION_COLUMN}", f"partition.{WRITE_COLUMN}"
    if run not in adds.column_names or write not in adds.column_names:
        return {}
    records = adds.column("num_records").to_pylist() if "num_records" in adds.column_names else None
    out: dict[tuple[str, str], tuple[int, int | None]] = {}
    for i, key in enumerate(zip(adds.column(run).to_pylist(), adds.column(write).to_pylist(), strict=True)):
        files, rows = out.get(key, (0, 0))
        n = None if records is None else records[i]
        out[key] = (files + 1, None if rows is None or n is None else rows + int(n))
    return out


def _read_named(
    warehouse: str | os.PathLike[str],
    table: str,
    pin: Published,
    run_id: str | None,
    columns: list[str] | None,
    arrow_schema: pa.Schema | None,
    *,
    absent_ok: bool = False,
    unwritten_ok: bool = False,
) -> pa.Table:
    """The rows of the writes of ``table`` that ``pin`` names (of ``run_id``, or every run), checked
    against what ``run_commits`` recorded, cast to the declared schema."""
    writes = pin.of(table)
    held = pin.runs.get(run_id) if run_id is not None else None
    if held is not None and table not in held and table != RUNS_TABLE and not unwritten_ok:
        _check_written(warehouse, table, pin, run_id)
    dt = _open_named(warehouse, table, pin, writes)
    if dt is None and not absent_ok:
        open_table(warehouse, table)  # raises deltalake's TableNotFoundError, as before
    declared = declared_schema(table, dt, arrow_schema)
    if dt is None or not writes:
        wanted = columns or declared.names
        return pa.schema([declared.field(n) for n in wanted]).empty_table()
    read = None if columns is None else list(dict.fromkeys([*columns, WRITE_COLUMN]))
    ids = sorted({w.write_id for w in writes.values()})
    try:
        result = dt.to_pyarrow_table(columns=read, filters=[(WRITE_COLUMN, "in", ids)])
    except (OSError, pa.ArrowException, DeltaError) as exc:
        detail = first_line(exc)
        runs = ", ".join(sorted(writes)) if run_id is None else run_id
        raise DamagedRunError(
            f"table {table} of run {runs}: a data file cannot be read ({detail}): restore the table from a "
            f"backup, or rerun the run"
        ) from exc
    counts = dict(zip(*_value_counts(result.column(WRITE_COLUMN)), strict=True))
    for run, write in sorted(writes.items()):
        if counts.get(write.write_id, 0) != write.rows:
            raise _missing(table, run, write, counts.get(write.write_id, 0))
    if not (columns and WRITE_COLUMN in columns):
        result = result.drop_columns([WRITE_COLUMN])
    return _cast(result, declared)


def _check_written(warehouse: str | os.PathLike[str], table: str, pin: Published, run_id: str) -> None:
    """:class:`NotWrittenError` if run ``run_id``'s ``runs`` row lists the tables it wrote and ``table``
    is not one of them (rather than an empty answer that reads as a run of no rows)."""
    if RUNS_TABLE not in pin.runs[run_id]:
        return
    row = _read_named(warehouse, RUNS_TABLE, pin, run_id, ["tables"], None).column("tables").to_pylist()
    wrote = row[0] if row else None
    if wrote and table not in wrote:
        raise NotWrittenError(
            f"run {run_id!r} did not write {table}: it wrote only {', '.join(wrote)} (a summaries-only "
            f"run, --tables); run it again with --tables all for {table}"
        )


def _value_counts(column: pa.ChunkedArray) -> tuple[list[str], list[int]]:
    counts = pc.value_counts(column)
    return counts.field("values").to_pylist(), counts.field("counts").to_pylist()


def read_arrow(
    warehouse: str | os.PathLike[str],
    table: str,
    run_id: str | None = None,
    *,
    columns: list[str] | None = None,
    arrow_schema: pa.Schema | None = None,
) -> pa.Table:
    """The rows of complete runs (one run, or all), cast to the declared schema: of each run, the write
    of ``table`` that ``run_commits`` names (:mod:`rocketsim.warehouse.run_commit`), checked against what
    it recorded (a write missing or short is :class:`DamagedRunError` naming the table and the run, never
    fewer rows). A run being replaced while this reads gives the old run's rows or the new run's, whole.
    Several tables of one run: :func:`read_run`."""
    if table == RUN_COMMITS_TABLE:
        dt = open_table(warehouse, table)
        filters = None if run_id is None else [(PARTITION_COLUMN, "=", run_id)]
        return _cast(
            dt.to_pyarrow_table(columns=columns, filters=filters), declared_schema(table, dt, arrow_schema)
        )
    return _pinned(
        warehouse, run_id, lambda pin: _read_named(warehouse, table, pin, run_id, columns, arrow_schema)
    )


def read_run(
    warehouse: str | os.PathLike[str], run_id: str, tables: Sequence[str], *, unwritten_ok: bool = False
) -> dict[str, pa.Table]:
    """Several tables of one run as ONE version of ``run_commits`` names them (never one table of the
    old run beside one of a rerun published meanwhile), each checked as :func:`read_arrow` does; a table
    absent from the warehouse and from the run reads empty. A table the run did not write (its ``runs``
    row's ``tables``) is :class:`NotWrittenError`, or reads empty with ``unwritten_ok`` (a reader that
    shows what there is, such as the report)."""
    check_run_id(run_id)

    def body(pin: Published) -> dict[str, pa.Table]:
        return {
            t: _read_named(warehouse, t, pin, run_id, None, None, absent_ok=True, unwritten_ok=unwritten_ok)
            for t in tables
        }

    return _pinned(warehouse, run_id, body)


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
    pin = published(warehouse)
    return sorted(pin.runs if table is None else pin.of(table))


def checked_table(warehouse: str | os.PathLike[str], table: str) -> tuple[Published, DeltaTable | None]:
    """The latest version of ``run_commits`` and the table checked against it: every write it names is
    in the table's log with the rows it recorded (else :class:`DamagedRunError`); None for a table that
    is absent and holds no complete run."""
    return _pinned(warehouse, None, lambda pin: (pin, _open_named(warehouse, table, pin, pin.of(table))))


def committed_writes(
    warehouse: str | os.PathLike[str], table: str, run_id: str | None = None
) -> dict[str, tuple[TableWrite, list[str]]]:
    """Per complete run (one, or all): its write of ``table`` and that write's data files as the Delta
    log lists them (uris pyarrow and Spark open), checked against ``run_commits`` (files and rows, from
    the log), all as one version of ``run_commits`` names them."""

    def body(pin: Published) -> dict[str, tuple[TableWrite, list[str]]]:
        writes = pin.of(table)
        dt = _open_named(warehouse, table, pin, writes)
        if dt is None:
            return {}
        return {
            r: (w, dt.file_uris(file_pruning_predicate=_write_filter(w, r)))
            for r, w in sorted(writes.items())
        }

    return _pinned(warehouse, run_id, body)


def current_write(warehouse: str | os.PathLike[str], table: str, run_id: str) -> TableWrite:
    """The write of ``table`` that run ``run_id`` holds; :class:`MissingRunError` if none."""
    check_run_id(run_id)
    write = published(warehouse, run_id).runs.get(run_id, {}).get(table)
    if write is None:
        where = (
            f"{table_path(warehouse, table)} is not a Delta table"
            if not is_table(warehouse, table)
            else f"no complete run {run_id!r} holds it in {os.fspath(warehouse)}"
        )
        raise MissingRunError(f"run {run_id!r} has no {table} ({where})")
    return write


def _checked_write(
    warehouse: str | os.PathLike[str], table: str, run_id: str
) -> tuple[TableWrite, DeltaTable]:
    """The write of ``table`` run ``run_id`` holds (:func:`current_write`), and the table, checked
    against ``run_commits`` (files and rows, from the log)."""

    def body(pin: Published) -> tuple[TableWrite, DeltaTable]:
        write = current_write(warehouse, table, run_id)
        dt = _open_named(warehouse, table, pin, {run_id: write})
        assert dt is not None  # a run holding the table: absent raised above
        return write, dt

    return _pinned(warehouse, run_id, body)


def _write_filter(write: TableWrite, run_id: str) -> list[tuple[str, str, str]]:
    return [(PARTITION_COLUMN, "=", run_id), (WRITE_COLUMN, "=", write.write_id)]


def run_file_uris(warehouse: str | os.PathLike[str], table: str, run_id: str) -> list[str]:
    """The data files of one complete run of a table (its current write), as the Delta log lists them
    (uris pyarrow and Spark open), checked against ``run_commits``."""
    write, dt = _checked_write(warehouse, table, run_id)
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
    write, dt = _checked_write(warehouse, table, run_id)
    uris = dt.file_uris(file_pruning_predicate=_write_filter(write, run_id))
    names = [f"min.{column}", f"max.{column}"]
    # by file name (unique in a table): the log escapes the partition folder differently from file_uris
    adds = _run_adds(dt, run_id, write.write_id)
    stats = {_file_name(a["path"]): (a.get(names[0]), a.get(names[1])) for a in adds}
    return [FileRange(uri, *stats.get(_file_name(uri), (None, None))) for uri in uris]


def run_rows(warehouse: str | os.PathLike[str], table: str, run_id: str) -> int:
    """The rows one complete run of a table holds, from the Delta log's file statistics (a file without
    them: from its Parquet footer); no data read. (``run_commits`` records what the write committed:
    :func:`current_write`, and the log is checked against it: the two differ only if a file without
    statistics is short.)"""
    write, dt = _checked_write(warehouse, table, run_id)
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
    """Raise :class:`MissingRunError` unless a complete run ``run_id`` holds ``table``, and
    :class:`DamagedRunError` unless the table's log holds that write as ``run_commits`` recorded it
    (metadata only)."""
    _checked_write(warehouse, table, run_id)


def _file_name(path: str) -> str:
    return unquote(path.rstrip("/").rsplit("/", 1)[-1])
