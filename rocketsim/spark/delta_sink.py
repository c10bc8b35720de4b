"""The Delta sink for Spark (docs/design.md §6): ``publish_staged`` commits the Parquet files a stage's
tasks wrote as one write of a table, ``publish_run`` makes a job's writes the run's (the run-level commit of
:mod:`rocketsim.warehouse.run_commit`, then the superseded writes removed), and ``write_run`` does both
for a DataFrame. Table writes have two engines:

* ``deltalake`` (the embedded default, no Delta jars needed): Spark's executors (or the stage's tasks)
  write Parquet files into ``<table>/_staging/<write_id>/``, and the driver moves and commits them in ONE
  ``deltalake`` transaction (:mod:`rocketsim.warehouse.delta`).
* ``delta-spark`` when the session runs Delta's extension: ``df.write.format("delta")`` with
  ``replaceWhere`` on the write's partition ``(run_id, write_id)``; staged files are read with
  ``spark.read.parquet`` and written the same way, then their staging folder is deleted. Delta itself
  enforces the non-nullable columns there.

More: docs/reference/modules.md, rocketsim/spark/delta_sink.py.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Iterable, Sequence

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from rocketsim.spark.session import Spark, delta_enabled, session_of, spark_schema
from rocketsim.warehouse.delta import (
    ENGINE_DELTA_SPARK,
    ENGINE_DELTALAKE,
    StagedRun,
    WriteReport,
    commit_run,
    commit_written,
    delta_schema,
    discard_staging,
    remove_writes,
    stage_written,
    write_partitions,
)
from rocketsim.warehouse.paths import (
    PARTITION_COLUMN,
    WRITE_COLUMN,
    WRITE_PARTITIONS,
    DeltaSinkError,
    check_run_id,
    list_files,
    new_write_id,
    staging_path,
    table_path,
)
from rocketsim.warehouse.run_commit import TableWrite, publish_writes


def write_run(
    df: DataFrame,
    warehouse: str | os.PathLike[str],
    table: str,
    run_id: str,
    arrow_schema: pa.Schema,
    *,
    engine: str | None = None,
    max_records_per_file: int | None = None,
    job: str = "write_run",
) -> WriteReport:
    """Replace run ``run_id`` of ``<warehouse>/<table>`` with ``df``, atomically: one Delta commit of the
    table's new write, then the run-level commit naming it (:func:`publish_run`).

    ``df`` must have every column of ``arrow_schema`` except ``run_id`` (which it may carry; the
    argument wins); columns are cast to the declared types. ``engine`` is ``"delta-spark"``,
    ``"deltalake"`` or None (delta-spark if the session has Delta's extension, else deltalake).
    """
    check_run_id(run_id)
    engine = _engine(df.sparkSession, engine)
    if engine == ENGINE_DELTA_SPARK:
        report = write_delta_spark(df, warehouse, table, run_id, arrow_schema, max_records_per_file)
    else:
        staged = stage_run(
            df, warehouse, table, run_id, arrow_schema, max_records_per_file=max_records_per_file
        )
        report = commit_run(staged)
    removed = publish_run(df.sparkSession, warehouse, run_id, job, [report], engine=engine)
    return dataclasses.replace(report, removed_files=removed.get(table, 0))


def publish_run(
    spark: Spark,
    warehouse: str | os.PathLike[str],
    run_id: str,
    job: str,
    reports: Sequence[WriteReport],
    dropped: Iterable[str] = (),
    *,
    engine: str | None = None,
) -> dict[str, int]:
    """The run-level commit of a job's writes (``reports``: one per table, committed), then the run's
    superseded writes of those tables and of ``dropped`` removed; returns the files removed per table.

    A failed removal only leaves invisible writes behind (``jobs/vacuum.py`` removes them): it is
    reported on stderr, not raised, since the run is published by then."""
    dropped = tuple(dropped)
    writes = [TableWrite(r.table, r.write_id, r.rows) for r in reports]
    held = publish_writes(warehouse, run_id, job, writes, dropped)
    removed: dict[str, int] = {}
    for table in [*(r.table for r in reports), *dropped]:
        keep = held[table].write_id if table in held else None
        try:
            removed[table] = _remove_superseded(spark, warehouse, table, run_id, keep, _engine(spark, engine))
        except (DeltaError, DeltaSinkError, OSError) as exc:
            print(
                f"warning: run {run_id} is published, but its superseded writes of {table} were not "
                f"removed ({exc}); they are invisible, and jobs/vacuum.py removes them",
                file=sys.stderr,
            )
    return removed


def _remove_superseded(
    spark: Spark,
    warehouse: str | os.PathLike[str],
    table: str,
    run_id: str,
    keep: str | None,
    engine: str,
) -> int:
    """Remove the run's writes of ``table`` but ``keep`` (the one just published, if any)."""
    uri = table_path(warehouse, table)
    if not DeltaTable.is_deltatable(uri):
        return 0
    doomed = sorted(write_partitions(DeltaTable(uri), run_id).get(run_id, set()) - {keep})
    if not doomed:
        return 0
    if engine == ENGINE_DELTALAKE:
        return remove_writes(uri, table, run_id, doomed)
    from delta.tables import DeltaTable as SparkDeltaTable  # needs the Delta jars: only on this path

    listed = ", ".join(f"'{w}'" for w in doomed)  # write ids: time and hex digits, no quotes
    SparkDeltaTable.forPath(session_of(spark), uri).delete(
        f"{PARTITION_COLUMN} = '{run_id}' AND {WRITE_COLUMN} IN ({listed})"  # partitions only: no rewrite
    )
    return len(doomed)


def publish_staged(
    spark: Spark,
    warehouse: str | os.PathLike[str],
    table: str,
    run_id: str,
    arrow_schema: pa.Schema,
    write_id: str,
    *,
    engine: str | None = None,
) -> WriteReport:
    """Commit the ``part-*.parquet`` files tasks wrote into ``staging_path(warehouse, table, write_id)``
    as the write ``write_id`` of run ``run_id`` of the table (visible once :func:`publish_run` names it)."""
    check_run_id(run_id)
    if _engine(spark, engine) == ENGINE_DELTALAKE:
        return commit_written(warehouse, table, run_id, arrow_schema, write_id)
    staging = staging_path(warehouse, table, write_id)
    data = spark_schema(pa.schema([f for f in arrow_schema if f.name != PARTITION_COLUMN]))
    parts = [f"{staging}/{n}" for n in list_files(staging, "part-", ".parquet")]
    spark = session_of(spark)
    df = spark.read.schema(data).parquet(*parts) if parts else spark.createDataFrame([], data)
    try:
        return write_delta_spark(df, warehouse, table, run_id, arrow_schema, None, write_id=write_id)
    finally:
        discard_staging(warehouse, table, write_id)


def _engine(spark: Spark, engine: str | None) -> str:
    if engine is None:
        return ENGINE_DELTA_SPARK if delta_enabled(spark) else ENGINE_DELTALAKE
    if engine not in (ENGINE_DELTA_SPARK, ENGINE_DELTALAKE):
        raise DeltaSinkError(f"engine must be {ENGINE_DELTA_SPARK!r} or {ENGINE_DELTALAKE!r}, got {engine!r}")
    return engine


def conform(
    df: DataFrame,
    arrow_schema: pa.Schema,
    *,
    with_run_id: str | None = None,
    with_write_id: str | None = None,
) -> DataFrame:
    """``df`` with exactly the schema's columns, in order, cast to its types (``run_id`` and the
    ``write_id`` partition column optional)."""
    target = spark_schema(delta_schema(arrow_schema) if with_write_id is not None else arrow_schema)
    present = set(df.columns)
    given = {PARTITION_COLUMN: with_run_id, WRITE_COLUMN: with_write_id}
    wanted = [f for f in target.fields if f.name not in given or given[f.name] is not None]
    missing = [f.name for f in wanted if f.name not in present and f.name not in given]
    extra = sorted(present - {f.name for f in target.fields})
    if missing or extra:
        raise DeltaSinkError(
            f"DataFrame does not fit the table schema: missing {missing}, unexpected {extra}"
        )
    cols: list[Column] = []
    for field in wanted:
        if field.name in given:
            cols.append(F.lit(given[field.name]).cast(field.dataType).alias(field.name))
        else:
            cols.append(F.col(field.name).cast(field.dataType).alias(field.name))
    return df.select(*cols)


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

    A crash after this leaves orphans that no Delta reader sees (``jobs/vacuum.py`` removes them).
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


def write_delta_spark(
    df: DataFrame,
    warehouse: str | os.PathLike[str],
    table: str,
    run_id: str,
    arrow_schema: pa.Schema,
    max_records_per_file: int | None,
    *,
    write_id: str | None = None,
) -> WriteReport:
    """``df`` as a new write of run ``run_id`` of the table through delta-spark (``replaceWhere`` on the
    write's partition); the report's counts come from Delta's commit metrics."""
    started = time.monotonic()
    uri = table_path(warehouse, table)
    write_id = write_id or new_write_id()
    where = f"{PARTITION_COLUMN} = '{run_id}' AND {WRITE_COLUMN} = '{write_id}'"  # checked: no quotes
    writer = (
        conform(df, arrow_schema, with_run_id=run_id, with_write_id=write_id)
        .write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", where)
        .partitionBy(*WRITE_PARTITIONS)
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
        write_id=write_id,
        version=int(last["version"]),
        files=int(metrics.get("numFiles", 0)),
        rows=int(metrics.get("numOutputRows", 0)),
        bytes=int(metrics.get("numOutputBytes", 0)),
        removed_files=int(metrics.get("numRemovedFiles", 0)),
        stage_s=elapsed,
        commit_s=0.0,
    )
