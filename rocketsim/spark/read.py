"""Read the complete runs of the Delta tables into Spark (tests, notebooks with Spark).

Of each run, the write of the table that ``run_commits`` names (:mod:`rocketsim.warehouse.run_commit`),
without the ``write_id`` bookkeeping column. Through delta-spark when the session has it; otherwise
Spark reads exactly the files the Delta log lists for those writes (never a directory listing, which
would include uncommitted or removed files) and restores ``run_id`` from the partition values. Arrow and
pandas readers: :mod:`rocketsim.warehouse.read`.
"""

from __future__ import annotations

import os
from functools import reduce

import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rocketsim.spark.session import delta_enabled, spark_schema
from rocketsim.warehouse.paths import PARTITION_COLUMN, WRITE_COLUMN, check_run_id, table_path
from rocketsim.warehouse.read import committed_writes, declared_schema


def read_spark(
    spark: SparkSession,
    warehouse: str | os.PathLike[str],
    table: str,
    run_id: str | None = None,
    *,
    arrow_schema: pa.Schema | None = None,
) -> DataFrame:
    """The rows of complete runs of ``table`` (one run, or all), with the declared schema's columns. Each
    run's write is checked against ``run_commits`` first (:func:`rocketsim.warehouse.read.committed_writes`:
    a write the log lacks or holds short is an error, never fewer rows)."""
    uri = table_path(warehouse, table)
    writes = committed_writes(warehouse, table, None if run_id is None else check_run_id(run_id))
    if delta_enabled(spark):
        df = spark.read.format("delta").load(uri)
        ids = sorted(w.write_id for w, _ in writes.values())
        return df.where(F.col(WRITE_COLUMN).isin(ids)).drop(WRITE_COLUMN)
    schema = spark_schema(declared_schema(table, DeltaTable(uri), arrow_schema))
    data_schema = type(schema)([f for f in schema.fields if f.name != PARTITION_COLUMN])
    run_type = schema[PARTITION_COLUMN].dataType
    parts: list[DataFrame] = []
    for rid, (_, files) in sorted(writes.items()):
        if not files:
            continue
        df = spark.read.schema(data_schema).parquet(*files)
        df = df.withColumn(PARTITION_COLUMN, F.lit(rid).cast(run_type))
        parts.append(df.select(*schema.fieldNames()))
    if not parts:
        return spark.createDataFrame([], schema)
    return reduce(DataFrame.unionByName, parts)
