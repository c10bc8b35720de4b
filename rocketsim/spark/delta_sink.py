"""The Delta sink for Spark (design §6): ``write_run`` for a DataFrame, and ``publish_staged`` for the
Parquet files a stage's tasks wrote, each with two engines.

* ``deltalake`` (the embedded default, no Delta jars needed): Spark's executors (or the stage's tasks)
  write Parquet files into ``<table>/_staging/<write_id>/``, and the driver moves and commits them in ONE
  ``deltalake`` transaction (:mod:`rocketsim.warehouse.delta`).
* ``delta-spark`` when the session runs Delta's extension: ``df.write.format("delta")`` with
  ``replaceWhere`` on the run's partition; staged files are read with ``spark.read.parquet`` and written
  the same way, then their staging folder is deleted.
"""

from __future__ import annotations

import os
import time

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from rocketsim.spark.session import delta_enabled, spark_schema
from rocketsim.warehouse.delta import (
    ENGINE_DELTA_SPARK,
    ENGINE_DELTALAKE,
    StagedRun,
    WriteReport,
    commit_run,
    commit_written,
    discard_staging,
    stage_written,
)
from rocketsim.warehouse.paths import (
    PARTITION_COLUMN,
    DeltaSinkError,
    check_run_id,
    list_files,
    new_write_id,
    staging_path,
    table_path,
)


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
    engine = _engine(df.sparkSession, engine)
    if engine == ENGINE_DELTA_SPARK:
        return write_delta_spark(df, warehouse, table, run_id, arrow_schema, max_records_per_file)
    staged = stage_run(df, warehouse, table, run_id, arrow_schema, max_records_per_file=max_records_per_file)
    return commit_run(staged)


def publish_staged(
    spark: SparkSession,
    warehouse: str | os.PathLike[str],
    table: str,
    run_id: str,
    arrow_schema: pa.Schema,
    write_id: str,
    *,
    engine: str | None = None,
) -> WriteReport:
    """Commit the ``part-*.parquet`` files tasks wrote into ``staging_path(warehouse, table, write_id)``
    as run ``run_id`` of the table, replacing its previous rows."""
    check_run_id(run_id)
    if _engine(spark, engine) == ENGINE_DELTALAKE:
        return commit_written(warehouse, table, run_id, arrow_schema, write_id)
    staging = staging_path(warehouse, table, write_id)
    data = spark_schema(pa.schema([f for f in arrow_schema if f.name != PARTITION_COLUMN]))
    parts = [f"{staging}/{n}" for n in list_files(staging, "part-", ".parquet")]
    df = spark.read.schema(data).parquet(*parts) if parts else spark.createDataFrame([], data)
    try:
        return write_delta_spark(df, warehouse, table, run_id, arrow_schema, None)
    finally:
        discard_staging(warehouse, table, write_id)


def _engine(spark: SparkSession, engine: str | None) -> str:
    if engine is None:
        return ENGINE_DELTA_SPARK if delta_enabled(spark) else ENGINE_DELTALAKE
    if engine not in (ENGINE_DELTA_SPARK, ENGINE_DELTALAKE):
        raise DeltaSinkError(f"engine must be {ENGINE_DELTA_SPARK!r} or {ENGINE_DELTALAKE!r}, got {engine!r}")
    return engine


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


def write_delta_spark(
    df: DataFrame,
    warehouse: str | os.PathLike[str],
    table: str,
    run_id: str,
    arrow_schema: pa.Schema,
    max_records_per_file: int | None,
) -> WriteReport:
    """Replace run ``run_id`` of the table with ``df`` through delta-spark (``replaceWhere`` on the
    run's partition); the report's counts come from Delta's commit metrics."""
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
