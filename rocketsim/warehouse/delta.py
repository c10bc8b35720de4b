"""The deltalake half of the sink: files staged by any writer -> one Delta commit per table and run.

More: docs/reference/modules.md, rocketsim/warehouse/delta.py.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from deltalake.transaction import AddAction

from rocketsim.errors import RocketSimError, first_line
from rocketsim.warehouse.paths import (
    PARTITION_COLUMN,
    WRITE_COLUMN,
    WRITE_PARTITIONS,
    DeltaSinkError,
    check_run_id,
    filesystem,
    partition_dir,
    relative_path,
    staging_path,
    table_path,
)

ENGINE_DELTALAKE = "deltalake"
ENGINE_DELTA_SPARK = "delta-spark"
# Delta's own data-skipping prefix for string statistics (delta.dataSkippingStringPrefixLength).
STRING_STATS_PREFIX = 32
# Fault-injection hook for the crash-safety tests (never set it otherwise): "<table>:<stage>[,...]" makes
# the process SIGKILL itself at that point of a deltalake-engine write. Stages, in order: "written"
# (the Parquet files in _staging), "staged" (files moved into the run's partition, uncommitted),
# "before_commit" (commit_run, just before the Delta transaction), "committed" (just after it). The
# run-level commit has the same points as the table "run_commits": "before_commit" (every table of the
# run committed, none visible) and "committed" (the run visible, its superseded writes not yet removed).
CRASH_AT_ENV = "ROCKETSIM_CRASH_AT"
CRASH_STAGES = ("written", "staged", "before_commit", "committed")


@dataclass(frozen=True)
class StagedFile:
    """One data file in its final place, not yet in the Delta log."""

    path: str  # relative to the table root, unescaped (deltalake escapes it in the log)
    size: int
    modification_time: int  # ms since the epoch
    num_records: int
    stats: str  # Delta stats JSON from the footer


@dataclass(frozen=True)
class StagedRun:
    """The output of :func:`stage_written`: files of one run of one table, awaiting :func:`commit_run`."""

    table: str
    table_uri: str
    run_id: str
    write_id: str
    arrow_schema: pa.Schema
    files: tuple[StagedFile, ...]
    stage_s: float


@dataclass(frozen=True)
class WriteReport:
    """What one ``write_run`` committed."""

    table: str
    run_id: str
    engine: str
    path: str  # the table's location
    write_id: str  # the partition the commit made (visible once the run-level commit names it)
    version: int  # table version of the commit
    files: int
    rows: int  # from Parquet footers (deltalake engine) or Delta's metrics (delta-spark)
    bytes: int
    removed_files: int  # the run's previous files replaced by this commit
    stage_s: float  # Spark write (+ moves and footers)
    commit_s: float


# ------------------------------------------------------------------------------------------ staging


def crash_point(table: str, stage: str) -> None:
    """SIGKILL this process here if ``ROCKETSIM_CRASH_AT`` names ``<table>:<stage>`` (tests only)."""
    wanted = os.environ.get(CRASH_AT_ENV)
    if wanted and f"{table}:{stage}" in {w.strip() for w in wanted.split(",")}:
        os.kill(os.getpid(), signal.SIGKILL)


def stage_written(
    warehouse: str | os.PathLike[str],
    table: str,
    run_id: str,
    arrow_schema: pa.Schema,
    write_id: str,
    *,
    started: float | None = None,
    partitions: Sequence[str] = WRITE_PARTITIONS,
) -> StagedRun:
    """Move the ``part-*.parquet`` files already written to ``staging_path(..., write_id)`` (by Spark
    or by tasks writing with pyarrow) into the run's partition, with footer statistics; no commit.
    Raises :class:`DeltaSinkError` (and moves nothing) if a file breaks ``arrow_schema``."""
    check_run_id(run_id)
    started = time.monotonic() if started is None else started
    uri = table_path(warehouse, table)
    fs, root = filesystem(uri)
    _, staging = filesystem(staging_path(warehouse, table, write_id))
    data_schema = pa.schema([f for f in arrow_schema if f.name not in partitions])
    moved: list[str] = []
    try:
        crash_point(table, "written")
        part = partition_dir(run_id)
        if WRITE_COLUMN in partitions:  # Hive-style folders: readers that take partitions from paths
            part = f"{part}/{WRITE_COLUMN}={write_id}"
        files = _publish(fs, root, staging, part, write_id, data_schema, moved)
        fs.delete_dir(staging)
        crash_point(table, "staged")
    except BaseException:
        # Best effort: what is left is invisible anyway and jobs/vacuum.py gets it later.
        with contextlib.suppress(OSError):
            fs.delete_dir(staging)
        for path in moved:
            with contextlib.suppress(OSError):
                fs.delete_file(path)
        raise
    return StagedRun(
        table=table,
        table_uri=uri,
        run_id=run_id,
        write_id=write_id,
        arrow_schema=arrow_schema,
        files=tuple(files),
        stage_s=time.monotonic() - started,
    )


def discard_staging(warehouse: str | os.PathLike[str], table: str, write_id: str) -> None:
    """Delete a write's staging folder if it is there (best effort: jobs/vacuum.py gets leftovers)."""
    fs, staging = filesystem(staging_path(warehouse, table, write_id))
    with contextlib.suppress(OSError):
        fs.delete_dir(staging)


def _publish(
    fs: pafs.FileSystem,
    root: str,
    staging: str,
    part: str,
    write_id: str,
    data_schema: pa.Schema,
    moved: list[str],
) -> list[StagedFile]:
    """Move the staged part files into the partition dir under write-id names; stats from the footers."""
    written = sorted(
        info.base_name
        for info in fs.get_file_info(pafs.FileSelector(staging))
        if info.type == pafs.FileType.File
        and info.base_name.startswith("part-")
        and info.base_name.endswith(".parquet")
    )
    files: list[StagedFile] = []
    footers = {name: _read_footer(fs, f"{staging}/{name}") for name in written}
    for name, metadata in footers.items():  # every file checked before any is moved
        if metadata.num_rows:
            _check_file_schema(metadata.schema.to_arrow_schema(), data_schema, name)
            _check_nulls(fs, f"{staging}/{name}", metadata, data_schema, name)
    fs.create_dir(f"{root}/{part}", recursive=True)
    for index, name in enumerate(written):
        source = f"{staging}/{name}"
        metadata = footers[name]
        if metadata.num_rows == 0:
            continue  # Spark writes an empty file for an empty DataFrame; Delta needs none
        rel = f"{part}/{write_id}-part-{index:05d}.{name.split('.', 1)[1]}"  # keeps e.g. .snappy.parquet
        fs.move(source, f"{root}/{rel}")
        moved.append(f"{root}/{rel}")
        info = fs.get_file_info(f"{root}/{rel}")
        files.append(
            StagedFile(
                path=rel,
                size=int(info.size or 0),
                modification_time=(info.mtime_ns or time.time_ns()) // 1_000_000,
                num_records=metadata.num_rows,
                stats=footer_stats(metadata, data_schema),
            )
        )
    return files


class DamagedTableError(RocketSimError):
    """A table's Delta log cannot be read (damaged, or edited by hand)."""


def open_table(warehouse: str | os.PathLike[str], table: str, **kwargs: object) -> DeltaTable:
    """The Delta table ``<warehouse>/<table>``; :class:`DamagedTableError` naming it if its log cannot
    be read (a missing table raises deltalake's ``TableNotFoundError``, as before)."""
    uri = table_path(warehouse, table)
    try:
        return DeltaTable(uri, **kwargs)
    except TableNotFoundError:
        raise
    except (DeltaError, OSError) as exc:
        raise DamagedTableError(
            f"the Delta log of table {table} ({uri}) cannot be read: {first_line(exc)}"
        ) from exc


def delta_schema(arrow_schema: pa.Schema) -> pa.Schema:
    """The Delta schema of a table declared as ``arrow_schema``: its columns and the write id, a
    partition column after ``run_id`` (bookkeeping of the sink, not part of the model's rows)."""
    if WRITE_COLUMN in arrow_schema.names:
        return arrow_schema
    return arrow_schema.append(pa.field(WRITE_COLUMN, pa.string(), nullable=False))


def commit_run(staged: StagedRun, *, max_attempts: int = 8, table: DeltaTable | None = None) -> WriteReport:
    """Commit a staged run in one transaction: its files become the partition (run, write id) of the
    table (the run's earlier writes stay until :func:`remove_writes`).

    ``table`` (a possibly stale snapshot) is for tests that force a concurrent-commit conflict.
    """
    started = time.monotonic()
    schema = delta_schema(staged.arrow_schema)
    ensure_table(staged.table_uri, schema, name=staged.table)
    partition = {PARTITION_COLUMN: staged.run_id, WRITE_COLUMN: staged.write_id}
    actions = [
        AddAction(
            path=f.path,
            size=f.size,
            partition_values=partition,
            modification_time=f.modification_time,
            data_change=True,
            stats=f.stats,
        )
        for f in staged.files
    ]
    crash_point(staged.table, "before_commit")
    commit_actions(
        staged.table_uri,
        schema,
        actions,
        [(k, "=", v) for k, v in partition.items()],
        _properties(staged.table, staged.run_id, staged.write_id),
        committed=lambda: _committed(staged),
        what=f"commit of {staged.table} run {staged.run_id!r}",
        max_attempts=max_attempts,
        table=table,
    )
    crash_point(staged.table, "committed")
    return WriteReport(
        table=staged.table,
        run_id=staged.run_id,
        engine=ENGINE_DELTALAKE,
        path=staged.table_uri,
        write_id=staged.write_id,
        version=_commit_version(staged.table_uri, staged.write_id),
        files=len(staged.files),
        rows=sum(f.num_records for f in staged.files),
        bytes=sum(f.size for f in staged.files),
        removed_files=0,
        stage_s=staged.stage_s,
        commit_s=time.monotonic() - started,
    )


def commit_actions(
    uri: str,
    schema: pa.Schema,
    actions: list[AddAction],
    partition_filters: list[tuple[str, str, object]],
    properties: CommitProperties,
    *,
    committed: Callable[[], bool],
    what: str,
    max_attempts: int = 8,
    table: DeltaTable | None = None,
) -> None:
    """ONE Delta transaction of the table at ``uri``: remove the files of the partitions
    ``partition_filters`` selects, add ``actions``; retried on a fresh snapshot (with jitter) unless
    ``committed()`` says an earlier attempt landed although its call failed."""
    jitter = random.Random()
    for attempt in range(1, max_attempts + 1):
        dt = table if (table is not None and attempt == 1) else DeltaTable(uri)
        try:
            dt.create_write_transaction(
                actions,
                mode="overwrite",
                schema=schema,
                partition_by=dt.metadata().partition_columns,
                partition_filters=partition_filters,
                commit_properties=properties,
            )
            return
        except (CommitFailedError, OSError) as exc:
            if committed():  # the commit landed although the call failed (e.g. lost reply)
                return
            if attempt == max_attempts:
                raise DeltaSinkError(f"{what} failed {attempt} times: {exc}") from exc
            time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + jitter.random()))


def _properties(table: str, run_id: str, write_id: str) -> CommitProperties:
    return CommitProperties(
        custom_metadata={"rocketsim.table": table, "rocketsim.run_id": run_id, "rocketsim.write_id": write_id}
    )


def commit_written(
    warehouse: str | os.PathLike[str], table: str, run_id: str, arrow_schema: pa.Schema, write_id: str
) -> WriteReport:
    """:func:`stage_written` then :func:`commit_run`; if the commit fails, the moved files are deleted
    (they are orphans no reader sees, but need not wait for a vacuum)."""
    staged = stage_written(warehouse, table, run_id, arrow_schema, write_id)
    try:
        return commit_run(staged)
    except BaseException:
        if not _committed(staged):  # else the write is in the log: its files stay
            fs, root = filesystem(staged.table_uri)
            for f in staged.files:
                with contextlib.suppress(OSError):
                    fs.delete_file(f"{root}/{f.path}")
        raise


def ensure_table(
    uri: str,
    arrow_schema: pa.Schema,
    *,
    name: str | None = None,
    partition_by: Sequence[str] = WRITE_PARTITIONS,
) -> None:
    """Create the table (partitioned by ``partition_by``) unless it exists; refuse one with another
    schema or partitioning (e.g. a table an older rocketsim wrote, without write ids)."""
    partition_by = list(partition_by)
    if not DeltaTable.is_deltatable(uri):
        try:
            # No retries: a racing creator that lost must not write a second CREATE as version 1.
            DeltaTable.create(
                uri,
                arrow_schema,
                mode="ignore",
                partition_by=partition_by,
                name=name,
                commit_properties=CommitProperties(max_commit_retries=0),
            )
        except (CommitFailedError, DeltaError):
            if not DeltaTable.is_deltatable(uri):
                raise
    dt = DeltaTable(uri)
    found = pa.schema(dt.schema().to_arrow())
    if not found.equals(arrow_schema) or dt.metadata().partition_columns != partition_by:
        raise DeltaSinkError(
            f"table {uri} has schema {found} partitioned by {dt.metadata().partition_columns}, "
            f"expected {arrow_schema} partitioned by {partition_by} (a table of another rocketsim "
            "version: write to a new warehouse)"
        )


def write_partitions(dt: DeltaTable, run_id: str | None = None) -> dict[str, set[str]]:
    """Per run id, the write ids the table holds (from the log: metadata, not data)."""
    out: dict[str, set[str]] = {}
    for p in dt.partitions():
        run, write = p.get(PARTITION_COLUMN), p.get(WRITE_COLUMN)
        if run is not None and write is not None and (run_id is None or run == run_id):
            out.setdefault(run, set()).add(write)
    return out


def remove_writes(
    uri: str, table: str, run_id: str, write_ids: Iterable[str], *, max_attempts: int = 8
) -> int:
    """Drop the writes ``write_ids`` of a run from the table in ONE commit of remove actions (the data
    files stay for time travel until a Delta vacuum); returns how many files that removed."""
    check_run_id(run_id)
    dt = DeltaTable(uri)
    present = write_partitions(dt, run_id).get(run_id, set())
    doomed = sorted(present & set(write_ids))
    if not doomed:
        return 0
    files = len(
        dt.file_uris(file_pruning_predicate=[(PARTITION_COLUMN, "=", run_id), (WRITE_COLUMN, "in", doomed)])
    )
    commit_actions(
        uri,
        pa.schema(dt.schema().to_arrow()),
        [],
        [(PARTITION_COLUMN, "=", run_id), (WRITE_COLUMN, "in", doomed)],
        _properties(table, run_id, "remove:" + ",".join(doomed)),
        committed=lambda: not (write_partitions(DeltaTable(uri), run_id).get(run_id, set()) & set(doomed)),
        what=f"removal of {len(doomed)} superseded write(s) of {table} run {run_id!r}",
        max_attempts=max_attempts,
    )
    return files


def _write_files(dt: DeltaTable, run_id: str, write_id: str, root: str) -> set[str]:
    """Relative paths of one write's committed files (tiny metadata, not data)."""
    uris = dt.file_uris(
        file_pruning_predicate=[(PARTITION_COLUMN, "=", run_id), (WRITE_COLUMN, "=", write_id)]
    )
    return {relative_path(u, root) for u in uris}


def _committed(staged: StagedRun) -> bool:
    """Whether the write's files are in the table's log (False if that cannot be told)."""
    if not staged.files:
        return False
    _, root = filesystem(staged.table_uri)
    try:
        dt = DeltaTable(staged.table_uri)
        return staged.files[0].path in _write_files(dt, staged.run_id, staged.write_id, root)
    except (DeltaError, OSError):
        return False


def _commit_version(uri: str, write_id: str) -> int:
    """The version whose commit carries this write id (normally the latest)."""
    dt = DeltaTable(uri)
    for entry in dt.history(limit=50):
        if entry.get("rocketsim.write_id") == write_id:
            return int(entry["version"])
    return dt.version()


# -------------------------------------------------------------------------------- footers and stats


def _read_footer(fs: pafs.FileSystem, path: str) -> pq.FileMetaData:
    """Only the footer: the driver never reads data pages."""
    with fs.open_input_file(path) as handle:
        return pq.read_metadata(handle)


def _same_type(found: pa.DataType, expected: pa.DataType) -> bool:
    """Type equality ignoring nullability and list item names (Spark writes ``element``)."""
    if pa.types.is_list(expected) or pa.types.is_large_list(expected):
        return type(found) is type(expected) and _same_type(found.value_type, expected.value_type)
    if pa.types.is_struct(expected):
        return (
            pa.types.is_struct(found)
            and [f.name for f in found] == [f.name for f in expected]
            and all(_same_type(a.type, b.type) for a, b in zip(found, expected, strict=True))
        )
    return found.equals(expected)


def _check_file_schema(found: pa.Schema, expected: pa.Schema, name: str) -> None:
    bad = [
        f"{f.name}: {found.field(f.name).type if f.name in found.names else 'missing'} != {f.type}"
        for f in expected
        if f.name not in found.names or not _same_type(found.field(f.name).type, f.type)
    ]
    if bad or found.names != expected.names:
        raise DeltaSinkError(f"Parquet file {name} does not carry the declared types: {bad or found.names}")


def _check_nulls(
    fs: pafs.FileSystem, path: str, metadata: pq.FileMetaData, expected: pa.Schema, name: str
) -> None:
    """Refuse a file with nulls in a column the schema declares non-nullable. A column the file itself
    declares required holds none; otherwise the footer's null counts tell, and a column without them
    is read (that column only)."""
    found = metadata.schema.to_arrow_schema()
    index = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    unknown: list[str] = []
    bad: dict[str, int] = {}
    for field in expected:
        if field.nullable or not found.field(field.name).nullable:
            continue
        nulls = _footer_nulls(metadata, index.get(field.name)) if not pa.types.is_nested(field.type) else None
        if nulls is None:
            unknown.append(field.name)
        elif nulls:
            bad[field.name] = nulls
    if unknown:
        with fs.open_input_file(path) as handle:
            data = pq.read_table(handle, columns=unknown)
        bad |= {n: data.column(n).null_count for n in unknown if data.column(n).null_count}
    if bad:
        raise DeltaSinkError(
            f"Parquet file {name} has nulls in non-nullable column(s) "
            + ", ".join(f"{n} ({k} null(s))" for n, k in bad.items())
        )


def _footer_nulls(metadata: pq.FileMetaData, col: int | None) -> int | None:
    """The nulls of a top-level column over every row group, from the footer; None if unknown."""
    if col is None:
        return None
    total = 0
    for rg in range(metadata.num_row_groups):
        st = metadata.row_group(rg).column(col).statistics
        if st is None or not st.has_null_count:
            return None
        total += st.null_count
    return total


def footer_stats(metadata: pq.FileMetaData, data_schema: pa.Schema) -> str:
    """Delta file statistics (numRecords, minValues, maxValues, nullCount) from a Parquet footer.

    Only top-level primitive columns get min/max/nullCount; a column lacking statistics in any row
    group is left out (readers then simply do not skip on it).
    """
    index = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    mins: dict[str, object] = {}
    maxs: dict[str, object] = {}
    nulls: dict[str, int] = {}
    for field in data_schema:
        if pa.types.is_nested(field.type) or field.name not in index:
            continue
        col = index[field.name]
        lows, highs, null_count, complete = [], [], 0, True
        for rg in range(metadata.num_row_groups):
            chunk = metadata.row_group(rg).column(col)
            st = chunk.statistics
            if metadata.row_group(rg).num_rows == 0:
                continue
            if st is None or not st.has_null_count:
                complete = False
                break
            null_count += st.null_count
            if st.has_min_max:
                lows.append(st.min)
                highs.append(st.max)
            elif st.null_count != chunk.num_values:
                complete = False  # values present but no bounds: unknown
        if not complete:
            continue
        nulls[field.name] = null_count
        lows = [v for v in lows if not _is_nan(v)]
        highs = [v for v in highs if not _is_nan(v)]
        if lows and highs:
            low, high = min(lows), max(highs)
            if isinstance(low, bytes) or isinstance(high, bytes):
                continue
            if isinstance(low, str) and len(low) > STRING_STATS_PREFIX:
                low = low[:STRING_STATS_PREFIX]  # a prefix is still a lower bound
            mins[field.name] = low
            if not (isinstance(high, str) and len(high) > STRING_STATS_PREFIX):
                maxs[field.name] = high  # a truncated max would not be an upper bound: omit it
    stats = {"numRecords": metadata.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}
    return json.dumps(stats, separators=(",", ":"), allow_nan=False)


def _is_nan(value: object) -> bool:
    return isinstance(value, float) and math.isnan(value)
