"""The Delta sink (design §5): one function, ``write_run``, with two engines.

* ``delta-spark`` when the session runs Delta's extension: ``df.write.format("delta")`` with
  ``replaceWhere`` on the run's partition.
* ``deltalake`` (the embedded default, no Delta jars needed): Spark's executors write Parquet files into
  ``<table>/_staging/<write_id>/`` (hidden from Delta readers and from vacuum), the driver moves them
  into ``<table>/run_id=<id>/<write_id>-part-*.parquet``, reads only their footers for the file
  statistics, and commits them in ONE ``deltalake`` transaction
  (``DeltaTable.create_write_transaction(mode="overwrite", partition_filters=[run_id = id])``), which
  adds the new files and removes the run's previous ones. Until that commit the files are orphans no
  reader sees; ``vacuum_orphans`` deletes them.

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
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import quote, unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.transaction import AddAction
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from rocketsim.errors import RocketSimError
from rocketsim.run_files import filesystem as _filesystem
from rocketsim.run_files import table_path
from rocketsim.spark.session import delta_enabled, spark_schema

PARTITION_COLUMN = "run_id"
STAGING_DIR = "_staging"
DELTA_LOG_DIR = "_delta_log"
ENGINE_DELTALAKE = "deltalake"
ENGINE_DELTA_SPARK = "delta-spark"
# Delta's own data-skipping prefix for string statistics (delta.dataSkippingStringPrefixLength).
STRING_STATS_PREFIX = 32
_RUN_ID_FORBIDDEN = set("'\"\\/") | {chr(c) for c in range(32)} | {"\x7f"}
# Fault-injection hook for the crash-safety tests (never set it otherwise): "<table>:<stage>[,...]" makes
# the process SIGKILL itself at that point of a deltalake-engine write. Stages, in order: "written"
# (Spark's Parquet files in _staging), "staged" (files moved into the run's partition, uncommitted),
# "before_commit" (commit_run, just before the Delta transaction).
CRASH_AT_ENV = "ROCKETSIM_CRASH_AT"
CRASH_STAGES = ("written", "staged", "before_commit")


class DeltaSinkError(RocketSimError):
    """A write the sink refuses: bad run id, schema mismatch, or a commit that kept failing."""


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
    """The output of ``stage_run``: files written for one run of one table, awaiting ``commit_run``."""

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


# --------------------------------------------------------------------------------------------- paths


def partition_dir(run_id: str) -> str:
    """Hive-style directory of a run, its value percent-escaped as Hive and deltalake do."""
    return f"{PARTITION_COLUMN}={quote(run_id, safe=' -_.+@~,')}"


def check_run_id(run_id: str) -> str:
    """Refuse run ids that cannot be a partition value or a SQL literal safely."""
    if not run_id or len(run_id) > 200 or any(ch in _RUN_ID_FORBIDDEN for ch in run_id):
        raise DeltaSinkError(
            f"run_id must be 1-200 characters without quotes, slashes, backslashes or control "
            f"characters, got {run_id!r}"
        )
    return run_id


def _crash_point(table: str, stage: str) -> None:
    """SIGKILL this process here if ``ROCKETSIM_CRASH_AT`` names ``<table>:<stage>`` (tests only)."""
    wanted = os.environ.get(CRASH_AT_ENV)
    if wanted and f"{table}:{stage}" in {w.strip() for w in wanted.split(",")}:
        os.kill(os.getpid(), signal.SIGKILL)


# ------------------------------------------------------------------------------------------- writing


def write_run(
    df: DataFrame,
    warehouse: str | os.PathLike[str],
    table: str,
    run_id: str,
    arrow_schema: pa.Schema,
    *,
    engine: str | None = None,
    max_records_per_file: int | None = None,
) -> WriteReport:
    """Replace run ``run_id`` of ``<warehouse>/<table>`` with ``df``, atomically, in one Delta commit.

    ``df`` must have every column of ``arrow_schema`` except ``run_id`` (which it may carry; the
    argument wins); columns are cast to the declared types. ``engine`` is ``"delta-spark"``,
    ``"deltalake"`` or None (delta-spark if the session has Delta's extension, else deltalake).
    """
    check_run_id(run_id)
    if engine is None:
        engine = ENGINE_DELTA_SPARK if delta_enabled(df.sparkSession) else ENGINE_DELTALAKE
    if engine == ENGINE_DELTA_SPARK:
        return _write_delta_spark(df, warehouse, table, run_id, arrow_schema, max_records_per_file)
    if engine != ENGINE_DELTALAKE:
        raise DeltaSinkError(f"engine must be {ENGINE_DELTA_SPARK!r} or {ENGINE_DELTALAKE!r}, got {engine!r}")
    staged = stage_run(df, warehouse, table, run_id, arrow_schema, max_records_per_file=max_records_per_file)
    return commit_run(staged)


def conform(df: DataFrame, arrow_schema: pa.Schema, *, with_run_id: str | None = None) -> DataFrame:
    """``df`` with exactly the schema's columns, in order, cast to its types (``run_id`` optional)."""
    target = spark_schema(arrow_schema)
    present = set(df.columns)
    wanted = [f for f in target.fields if f.name != PARTITION_COLUMN or with_run_id is not None]
    missing = [f.name for f in wanted if f.name not in present and f.name != PARTITION_COLUMN]
    extra = sorted(present - {f.name for f in target.fields})
    if missing or extra:
        raise DeltaSinkError(
            f"DataFrame does not fit the table schema: missing {missing}, unexpected {extra}"
        )
    cols: list[Column] = []
    for field in wanted:
        if field.name == PARTITION_COLUMN:
            cols.append(F.lit(with_run_id).cast(field.dataType).alias(field.name))
        else:
            cols.append(F.col(field.name).cast(field.dataType).alias(field.name))
    return df.select(*cols)


def new_write_id() -> str:
    """A fresh write id: UTC time (sortable) plus a random suffix."""
    return f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:12]}"


def staging_path(warehouse: str | os.PathLike[str], table: str, write_id: str) -> str:
    """``<table>/_staging/<write_id>``: where a write's files wait, hidden from Delta readers."""
    return f"{table_path(warehouse, table)}/{STAGING_DIR}/{write_id}"


def stage_run(
    df: DataFrame,
    warehouse: str | os.PathLike[str],
    table: str,
    run_id: str,
    arrow_schema: pa.Schema,
    *,
    max_records_per_file: int | None = None,
) -> StagedRun:
    """Write the run's Parquet files with Spark and move them into the partition; no commit.

    A crash after this leaves orphans that no Delta reader sees (``vacuum_orphans`` removes them).
    """
    check_run_id(run_id)
    started = time.monotonic()
    write_id = new_write_id()
    staging = staging_path(warehouse, table, write_id)
    writer = conform(df, arrow_schema).write.mode("errorifexists")
    if max_records_per_file:
        writer = writer.option("maxRecordsPerFile", str(max_records_per_file))
    try:
        writer.parquet(staging)
    except BaseException:
        discard_staging(warehouse, table, write_id)
        raise
    return stage_written(warehouse, table, run_id, arrow_schema, write_id, started=started)


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
    fs, root = _filesystem(uri)
    _, staging = _filesystem(staging_path(warehouse, table, write_id))
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
    fs, staging = _filesystem(staging_path(warehouse, table, write_id))
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
    """Move Spark's part files into the partition dir under write-id names; stats from the footers."""
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
    _, root = _filesystem(staged.table_uri)
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
    return {_relative(u, root) for u in uris}


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


def _relative(file_uri: str, root: str) -> str:
    """A file's path relative to the table root (``root`` as pyarrow.fs names it)."""
    if "://" in file_uri:
        parsed = urlparse(file_uri)
        path = unquote(parsed.path) if parsed.scheme == "file" else parsed.netloc + parsed.path
    else:
        path = file_uri
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path


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


# -------------------------------------------------------------------------------------- delta-spark


def _write_delta_spark(
    df: DataFrame,
    warehouse: str | os.PathLike[str],
    table: str,
    run_id: str,
    arrow_schema: pa.Schema,
    max_records_per_file: int | None,
) -> WriteReport:
    started = time.monotonic()
    uri = table_path(warehouse, table)
    writer = (
        conform(df, arrow_schema, with_run_id=run_id)
        .write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", f"{PARTITION_COLUMN} = '{run_id}'")  # run_id checked: no quotes
        .partitionBy(PARTITION_COLUMN)
    )
    if max_records_per_file:
        writer = writer.option("maxRecordsPerFile", str(max_records_per_file))
    writer.save(uri)
    elapsed = time.monotonic() - started
    from delta.tables import DeltaTable as SparkDeltaTable  # needs the Delta jars: only on this path

    # One row of commit metadata, not data.
    last = SparkDeltaTable.forPath(df.sparkSession, uri).history(1).collect()[0]
    metrics = last["operationMetrics"] or {}
    return WriteReport(
        table=table,
        run_id=run_id,
        engine=ENGINE_DELTA_SPARK,
        path=uri,
        version=int(last["version"]),
        files=int(metrics.get("numFiles", 0)),
        rows=int(metrics.get("numOutputRows", 0)),
        bytes=int(metrics.get("numOutputBytes", 0)),
        removed_files=int(metrics.get("numRemovedFiles", 0)),
        stage_s=elapsed,
        commit_s=0.0,
    )


# ------------------------------------------------------------------------------------------- vacuum


def vacuum_orphans(
    warehouse: str | os.PathLike[str],
    table: str,
    *,
    min_age_s: float = 3600.0,
    dry_run: bool = False,
) -> list[str]:
    """Delete data files the Delta log never mentions, and abandoned staging dirs; return their paths.

    Files the log names (current or removed, kept for time travel) stay. ``min_age_s`` protects a
    concurrent writer's files that are moved but not yet committed: keep it well above a job's
    stage-to-commit time (0 only when no writer runs).
    """
    uri = table_path(warehouse, table)
    fs, root = _filesystem(uri)
    if not DeltaTable.is_deltatable(uri):
        return []
    dt = DeltaTable(uri)
    referenced = _logged_paths(fs, root) | {_relative(u, root) for u in dt.file_uris()}
    cutoff_ns = (time.time() - min_age_s) * 1e9
    doomed: list[str] = []
    stale_staging: list[str] = []
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True)):
        rel = info.path[len(root) + 1 :]
        parts = PurePosixPath(rel).parts
        if info.type != pafs.FileType.File or not parts or parts[0] == DELTA_LOG_DIR:
            continue
        if parts[0] == STAGING_DIR:
            if len(parts) > 2 and (info.mtime_ns or 0) <= cutoff_ns:
                stale_staging.append(f"{STAGING_DIR}/{parts[1]}")
            continue
        if any(p.startswith(("_", ".")) for p in parts):
            continue
        if rel not in referenced and (info.mtime_ns or 0) <= cutoff_ns:
            doomed.append(rel)
    staging_dirs = sorted(set(stale_staging))
    if not dry_run:
        for rel in doomed:
            fs.delete_file(f"{root}/{rel}")
        for rel in staging_dirs:
            fs.delete_dir(f"{root}/{rel}")
    return sorted(doomed) + staging_dirs


def _logged_paths(fs: pafs.FileSystem, root: str) -> set[str]:
    """Every data-file path any remaining commit or checkpoint of the log adds or removes."""
    paths: set[str] = set()
    log = f"{root}/{DELTA_LOG_DIR}"
    for info in fs.get_file_info(pafs.FileSelector(log, recursive=True)):
        if info.type != pafs.FileType.File:
            continue
        if info.base_name.endswith(".json") and info.base_name[:1].isdigit():
            with fs.open_input_stream(info.path) as stream:
                for line in stream.read().decode("utf-8").splitlines():
                    action = json.loads(line) if line.strip() else {}
                    for kind in ("add", "remove"):
                        if kind in action:
                            paths.add(action[kind]["path"])
        elif info.base_name.endswith(".parquet"):
            with fs.open_input_file(info.path) as handle:
                checkpoint = pq.ParquetFile(handle)
                kinds = [k for k in ("add", "remove") if k in checkpoint.schema_arrow.names]
                if kinds:
                    paths.update(_checkpoint_paths(checkpoint.read(columns=kinds), kinds))
    return {_relative(unquote(p), root) for p in paths}


def _checkpoint_paths(checkpoint: pa.Table, kinds: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for kind in kinds:
        # Checkpoints hold metadata only (one row per file), never table data.
        for value in pc.struct_field(checkpoint.column(kind), "path").to_pylist():
            if value is not None:
                out.add(value)
    return out
