"""The deltalake half of the sink: files staged by any writer -> one Delta commit per table and run.

A write's Parquet files wait in ``<table>/_staging/<write_id>/`` (written by a stage's tasks with
pyarrow, or by Spark), hidden from Delta readers and from vacuum. :func:`stage_written` moves them into
``<table>/run_id=<id>/<write_id>-part-*.parquet`` and reads only their footers for the file statistics;
:func:`commit_run` commits them in ONE ``deltalake`` transaction
(``DeltaTable.create_write_transaction(mode="overwrite", partition_filters=[run_id = id])``), which adds
the new files and removes the run's previous ones. Until that commit the files are orphans no reader
sees; :func:`rocketsim.warehouse.vacuum.vacuum_orphans` deletes them. The delta-spark engine of the sink
is :mod:`rocketsim.spark.delta_sink`.

Commit conflicts between different run ids are resolved by deltalake's own retry (disjoint
partitions); anything else that fails the commit is retried here on a freshly loaded snapshot.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import signal
import time
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.transaction import AddAction

from rocketsim.warehouse.paths import (
    PARTITION_COLUMN,
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
# "before_commit" (commit_run, just before the Delta transaction).
CRASH_AT_ENV = "ROCKETSIM_CRASH_AT"
CRASH_STAGES = ("written", "staged", "before_commit")


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
    version: int  # table version of the commit
    files: int
    rows: int  # from Parquet footers (deltalake engine) or Delta's metrics (delta-spark)
    bytes: int
    removed_files: int  # the run's previous files replaced by this commit
    stage_s: float  # Spark write (+ moves and footers)
    commit_s: float


# ------------------------------------------------------------------------------------------ staging


def _crash_point(table: str, stage: str) -> None:
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
) -> StagedRun:
    """Move the ``part-*.parquet`` files already written to ``staging_path(..., write_id)`` (by Spark
    or by tasks writing with pyarrow) into the run's partition, with footer statistics; no commit."""
    check_run_id(run_id)
    started = time.monotonic() if started is None else started
    uri = table_path(warehouse, table)
    fs, root = filesystem(uri)
    _, staging = filesystem(staging_path(warehouse, table, write_id))
    data_schema = pa.schema([f for f in arrow_schema if f.name != PARTITION_COLUMN])
    moved: list[str] = []
    try:
        _crash_point(table, "written")
        files = _publish(fs, root, staging, partition_dir(run_id), write_id, data_schema, moved)
        fs.delete_dir(staging)
        _crash_point(table, "staged")
    except BaseException:
        # Best effort: what is left is invisible anyway and vacuum_orphans would get it later.
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
    """Delete a write's staging folder if it is there (best effort: vacuum_orphans gets leftovers)."""
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
    fs.create_dir(f"{root}/{part}", recursive=True)
    written = sorted(
        info.base_name
        for info in fs.get_file_info(pafs.FileSelector(staging))
        if info.type == pafs.FileType.File
        and info.base_name.startswith("part-")
        and info.base_name.endswith(".parquet")
    )
    files: list[StagedFile] = []
    for index, name in enumerate(written):
        source = f"{staging}/{name}"
        metadata = _read_footer(fs, source)
        if metadata.num_rows == 0:
            continue  # Spark writes an empty file for an empty DataFrame; Delta needs none
        _check_file_schema(metadata.schema.to_arrow_schema(), data_schema, name)
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


def commit_run(staged: StagedRun, *, max_attempts: int = 8, table: DeltaTable | None = None) -> WriteReport:
    """Commit a staged run in one transaction: add its files, remove the run's previous ones.

    ``table`` (a possibly stale snapshot) is for tests that force a concurrent-commit conflict.
    """
    started = time.monotonic()
    _, root = filesystem(staged.table_uri)
    ensure_table(staged.table_uri, staged.arrow_schema, name=staged.table)
    actions = [
        AddAction(
            path=f.path,
            size=f.size,
            partition_values={PARTITION_COLUMN: staged.run_id},
            modification_time=f.modification_time,
            data_change=True,
            stats=f.stats,
        )
        for f in staged.files
    ]
    properties = CommitProperties(
        custom_metadata={
            "rocketsim.table": staged.table,
            "rocketsim.run_id": staged.run_id,
            "rocketsim.write_id": staged.write_id,
        }
    )
    jitter = random.Random()
    _crash_point(staged.table, "before_commit")
    for attempt in range(1, max_attempts + 1):
        dt = table if (table is not None and attempt == 1) else DeltaTable(staged.table_uri)
        before = _run_files(dt, staged.run_id, root)
        try:
            dt.create_write_transaction(
                actions,
                mode="overwrite",
                schema=staged.arrow_schema,
                partition_by=[PARTITION_COLUMN],
                partition_filters=[(PARTITION_COLUMN, "=", staged.run_id)],
                commit_properties=properties,
            )
            break
        except (CommitFailedError, OSError) as exc:
            if _committed(staged, root):  # the commit landed although the call failed (e.g. lost reply)
                break
            if attempt == max_attempts:
                raise DeltaSinkError(
                    f"commit of {staged.table} run {staged.run_id!r} failed {attempt} times: {exc}"
                ) from exc
            time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + jitter.random()))
    version = _commit_version(staged)
    return WriteReport(
        table=staged.table,
        run_id=staged.run_id,
        engine=ENGINE_DELTALAKE,
        path=staged.table_uri,
        version=version,
        files=len(staged.files),
        rows=sum(f.num_records for f in staged.files),
        bytes=sum(f.size for f in staged.files),
        removed_files=len(before - {f.path for f in staged.files}),
        stage_s=staged.stage_s,
        commit_s=time.monotonic() - started,
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
        fs, root = filesystem(staged.table_uri)
        for f in staged.files:
            with contextlib.suppress(OSError):
                fs.delete_file(f"{root}/{f.path}")
        raise


def ensure_table(uri: str, arrow_schema: pa.Schema, *, name: str | None = None) -> None:
    """Create the table (partitioned by run_id) unless it exists; refuse one with another schema."""
    if not DeltaTable.is_deltatable(uri):
        try:
            # No retries: a racing creator that lost must not write a second CREATE as version 1.
            DeltaTable.create(
                uri,
                arrow_schema,
                mode="ignore",
                partition_by=[PARTITION_COLUMN],
                name=name,
                commit_properties=CommitProperties(max_commit_retries=0),
            )
        except (CommitFailedError, DeltaError):
            if not DeltaTable.is_deltatable(uri):
                raise
    dt = DeltaTable(uri)
    found = pa.schema(dt.schema().to_arrow())
    if not found.equals(arrow_schema) or dt.metadata().partition_columns != [PARTITION_COLUMN]:
        raise DeltaSinkError(
            f"table {uri} has schema {found} partitioned by {dt.metadata().partition_columns}, "
            f"expected {arrow_schema} partitioned by [{PARTITION_COLUMN!r}]"
        )


def _run_files(dt: DeltaTable, run_id: str, root: str) -> set[str]:
    """Relative paths of the run's committed files (tiny metadata, not data)."""
    uris = dt.file_uris(file_pruning_predicate=[(PARTITION_COLUMN, "=", run_id)])
    return {relative_path(u, root) for u in uris}


def _committed(staged: StagedRun, root: str) -> bool:
    if not staged.files:
        return False
    return staged.files[0].path in _run_files(DeltaTable(staged.table_uri), staged.run_id, root)


def _commit_version(staged: StagedRun) -> int:
    """The version whose commit carries this write id (normally the latest)."""
    dt = DeltaTable(staged.table_uri)
    for entry in dt.history(limit=50):
        if entry.get("rocketsim.write_id") == staged.write_id:
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
