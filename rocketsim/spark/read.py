"""Read the Delta tables into Spark (the jobs' later stages and reconciliation).

Through delta-spark when the session has it; otherwise Spark reads exactly the files the Delta log lists
(never a directory listing, which would include uncommitted or removed files) and restores ``run_id``
from the partition values. Arrow and pandas readers: :mod:`rocketsim.warehouse.read`.
"""

from __future__ import annotations

import os
from functools import reduce

import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rocketsim.spark.session import delta_enabled, spark_schema
from rocketsim.warehouse.paths import PARTITION_COLUMN, check_run_id, table_path
from rocketsim.warehouse.read import declared_schema, run_ids


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
    schema = spark_schema(declared_schema(table, dt, arrow_schema))
    data_schema = type(schema)([f for f in schema.fields if f.name != PARTITION_COLUMN])
    run_type = schema[PARTITION_COLUMN].dataType
    runs = [run_id] if run_id is not None else run_ids(dt)
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
