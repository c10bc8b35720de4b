"""Smoke job: write a small synthetic ``send_attempts``-shaped DataFrame through the Delta sink.

Proves the plumbing (spark-submit.sh, the shipped package importable on executors, Arrow to Python
workers, the sink's commit) on any master. Prints the WriteReport as one JSON line.

    ./spark-submit.sh jobs/smoke.py --warehouse /tmp/wh --run-id smoke-1 [--rows 1000]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from rocketsim.schemas import SEND_ATTEMPTS, without_run_id
from rocketsim.spark.delta_sink import write_run
from rocketsim.spark.session import build_session, spark_schema


def synthetic(spark: SparkSession, schema: pa.Schema, rows: int, partitions: int) -> DataFrame:
    """Deterministic rows for every column of ``schema`` (minus run_id), derived from ``id``."""
    exprs = []
    for field in without_run_id(schema):
        t, name = field.type, field.name
        if pa.types.is_int32(t):
            expr = "cast(id % 1000 as int)"
        elif pa.types.is_integer(t):
            expr = "id"
        elif pa.types.is_floating(t):
            expr = "id / 8.0"
        elif pa.types.is_boolean(t):
            expr = "id % 2 = 0"
        elif pa.types.is_string(t):
            expr = f"concat('{name}-', id % 13)"
        elif pa.types.is_list(t):
            expr = "array(concat('b-', id % 3))"
        else:
            raise ValueError(f"smoke: no generator for column {name} of type {t}")
        if field.nullable:
            expr = f"if(id % 10 = 0, null, {expr})"
        exprs.append(f"{expr} as {name}")
    return spark.range(0, rows, 1, partitions).selectExpr(*exprs)


def _through_python(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Runs on the executors: fails unless the shipped rocketsim package imports there."""
    import rocketsim.schemas  # noqa: F401

    yield from batches


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--table", default="smoke_attempts")
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=2)
    args = parser.parse_args(argv)

    spark = build_session(app_name="rocketsim-smoke")
    df = synthetic(spark, SEND_ATTEMPTS, args.rows, args.partitions)
    df = df.mapInArrow(_through_python, spark_schema(without_run_id(SEND_ATTEMPTS)))
    report = write_run(df, args.warehouse, args.table, args.run_id, SEND_ATTEMPTS)
    print(json.dumps(dataclasses.asdict(report)))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
