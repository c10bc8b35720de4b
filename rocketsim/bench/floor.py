"""The Parquet floor: Spark writing N rows shaped like ``send_results`` to Parquet, as its own process.

``./spark-submit.sh --master 'local[2]' rocketsim/bench/floor.py N OUT`` builds N rows from
``spark.range`` with Spark expressions only (no Python in the loop): a run id, a producer name, a
sequence number, a 32-hex-digit message id, a status, a null error, attempts, the brokers sent to, the
broker, a queue id, a queue wait, a latency, the wire bytes, a compressed flag and the system flag.
It overwrites OUT with them as Parquet and prints ``FLOOR_SECONDS <s>`` (the write alone); the
benchmark (:mod:`rocketsim.bench.pipeline`) times the whole process, start-up included, as it times
rocketsim's jobs. This is the floor the issue's targets are stated against: nothing rocketsim writes
can be cheaper than Spark writing as many rows of that shape.
"""

from __future__ import annotations

import sys
import time


def floor_frame(spark, n: int):  # noqa: ANN001, ANN201 - pyspark objects
    """N send_results-shaped rows, made by Spark expressions."""
    from pyspark.sql import functions as F

    i = F.col("id")
    broker = F.concat(F.lit("broker-"), (i % 8).cast("string"))
    return spark.range(n).select(
        F.lit("floor").alias("run_id"),
        F.concat(F.lit("producer-"), (i % 64).cast("string")).alias("producer"),
        i.alias("seq"),
        F.md5(i.cast("string")).alias("uniq_msg_id"),
        F.lit("SEND_OK").alias("status"),
        F.lit(None).cast("string").alias("error"),
        (i % 3 + 1).cast("int").alias("attempts"),
        F.array(broker).alias("brokers_sent"),
        broker.alias("broker"),
        (i % 4).cast("int").alias("queue_id"),
        (F.rand(1) * 5).cast("long").alias("queue_wait_ms"),
        (F.rand(2) * 100 + i % 7 * 0.5).alias("latency_ms"),
        (F.rand(3) * 8192).cast("int").alias("wire_bytes"),
        (i % 5 == 0).alias("compressed"),
        (i % 2).cast("int").alias("sys_flag"),
    )


def main(argv: list[str]) -> int:
    from pyspark.sql import SparkSession

    if len(argv) != 2:
        print("usage: floor.py N OUT", file=sys.stderr)
        return 2
    n, out = int(argv[0]), argv[1]
    spark = SparkSession.builder.appName("rocketsim-floor").getOrCreate()
    try:
        t = time.monotonic()
        floor_frame(spark, n).write.mode("overwrite").parquet(out)
        print(f"FLOOR_SECONDS {time.monotonic() - t:.2f}", flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
