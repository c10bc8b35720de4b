"""Read the Delta tables back: into Spark (jobs), Arrow or pandas (tests, notebooks).

Spark reads through delta-spark when the session has it; otherwise it reads exactly the files the
Delta log lists (never a directory listing, which would include uncommitted or removed files) and
restores ``run_id`` from the partition values.
"""

from __future__ import annotations

import os
from functools import reduce

import pandas as pd
import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rocketsim.schemas import TABLES
from rocketsim.spark.delta_sink import PARTITION_COLUMN, check_run_id, table_path
from rocketsim.spark.session import delta_enabled, spark_schema

__all__ = ["list_runs", "read_arrow", "read_pandas", "read_spark", "table_path"]


def _declared(table: str, dt: DeltaTable, arrow_schema: pa.Schema | None) -> pa.Schema:
    if arrow_schema is not None:
        return arrow_schema
    if table in TABLES:
        return TABLES[table]
    return pa.schema(dt.schema().to_arrow())


def read_spark(
    spark: SparkSession,
    warehouse: str | os.PathLike[str],
    table: str,
    run_id: str | None = None,
    *,
    arrow_schema: pa.Schema | None = None,
) -> DataFrame:
    """The committed rows of ``table`` (one run, or all), with the declared schema's columns."""
    uri = table_path(warehouse, table)
    if delta_enabled(spark):
        df = spark.read.format("delta").load(uri)
        return df if run_id is None else df.where(F.col(PARTITION_COLUMN) == check_run_id(run_id))
    dt = DeltaTable(uri)
    schema = spark_schema(_declared(table, dt, arrow_schema))
    data_schema = type(schema)([f for f in schema.fields if f.name != PARTITION_COLUMN])
    run_type = schema[PARTITION_COLUMN].dataType
    runs = [run_id] if run_id is not None else _runs(dt)
    parts: list[DataFrame] = []
    for rid in runs:
        files = dt.file_uris(file_pruning_predicate=[(PARTITION_COLUMN, "=", rid)])
        if not files:
            continue
        df = spark.read.schema(data_schema).parquet(*files)
        df = df.withColumn(PARTITION_COLUMN, F.lit(rid).cast(run_type))
        parts.append(df.select(*schema.fieldNames()))
    if not parts:
        return spark.createDataFrame([], schema)
    return reduce(DataFrame.unionByName, parts)


def read_arrow(
    warehouse: str | os.PathLike[str],
    table: str,
    run_id: str | None = None,
    *,
    columns: list[str] | None = None,
    arrow_schema: pa.Schema | None = None,
) -> pa.Table:
    """The committed rows as Arrow, cast to the declared schema (``schemas.TABLES`` or the log's)."""
    dt = DeltaTable(table_path(warehouse, table))
    filters = None if run_id is None else [(PARTITION_COLUMN, "=", run_id)]
    result = dt.to_pyarrow_table(columns=columns, filters=filters)
    declared = _declared(table, dt, arrow_schema)
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


def list_runs(warehouse: str | os.PathLike[str], table: str | None = None) -> list[str]:
    """Run ids committed in ``table``, or in any Delta table of the warehouse, sorted."""
    if table is not None:
        uri = table_path(warehouse, table)
        return sorted(_runs(DeltaTable(uri))) if DeltaTable.is_deltatable(uri) else []
    base = os.fspath(warehouse)
    if not os.path.isdir(base):
        return []
    runs: set[str] = set()
    for name in sorted(os.listdir(base)):
        uri = table_path(warehouse, name)
        if DeltaTable.is_deltatable(uri):
            runs.update(_runs(DeltaTable(uri)))
    return sorted(runs)


def _runs(dt: DeltaTable) -> list[str]:
    return sorted({p[PARTITION_COLUMN] for p in dt.partitions() if p.get(PARTITION_COLUMN) is not None})
