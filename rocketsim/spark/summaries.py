"""Summary tables computed in Spark from a run's attempts and results.

Percentiles are exact (Spark's ``percentile``, linear interpolation between the closest ranks, like
numpy's default), not approximations.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

PERCENTILES = (0.5, 0.75, 0.95, 0.99, 0.999, 0.9999)
PERCENTILE_COLUMNS = (
    "latency_p50_ms",
    "latency_p75_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "latency_p999_ms",
    "latency_p9999_ms",
)


def _percentiles(col: str) -> list[Column]:
    """Exact percentiles of ``col`` as the PERCENTILE_COLUMNS."""
    arr = F.percentile(F.col(col).cast("double"), F.array(*[F.lit(p) for p in PERCENTILES]))
    return [arr.getItem(i).alias(name) for i, name in enumerate(PERCENTILE_COLUMNS)]


def _window(col: str, window_ms: int) -> Column:
    return (F.floor(F.col(col) / F.lit(window_ms)) * F.lit(window_ms)).cast("long")


def broker_windows(attempts: DataFrame, window_ms: int) -> DataFrame:
    """Per broker and attempt-start window: sends, failures by kind, bytes, latency, isolation, skew."""
    a = attempts.withColumn("window_start_ms", _window("start_ts_ms", window_ms))
    keys = ["run_id", "broker", "window_start_ms"]
    outcome = F.col("outcome")
    main = a.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("sends"),
        F.sum((outcome == "ok").cast("long")).alias("ok"),
        F.sum((outcome == "remoting:timeout").cast("long")).alias("failed_timeout"),
        F.sum((outcome == "remoting:connect").cast("long")).alias("failed_connect"),
        F.sum(outcome.startswith("broker:").cast("long")).alias("failed_broker_error"),
        F.sum(outcome.startswith("status:").cast("long")).alias("not_store_ok"),
        F.sum("wire_bytes").cast("long").alias("bytes"),
        *_percentiles("latency_ms"),
        F.max("latency_ms").alias("latency_max_ms"),
        F.countDistinct(
            F.when(
                F.col("fault_isolated_until_ms") > F.col("start_ts_ms") + F.col("latency_ms"),
                F.col("producer"),
            )
        ).alias("isolated_producers"),
    )
    per_queue = a.groupBy(*keys, "queue_id").agg(F.count(F.lit(1)).alias("n"))
    skew = per_queue.groupBy(*keys).agg((F.max("n") / F.avg("n")).alias("queue_skew"))
    return main.join(skew, keys, "left").withColumn("window_ms", F.lit(window_ms).cast("long"))


def producer_windows(results: DataFrame, window_ms: int) -> DataFrame:
    """Per producer and window of send start: rate, errors, retries, lost retries, queue wait."""
    r = results.withColumn("window_start_ms", _window("send_ts_ms", window_ms))
    ok = F.col("status") == "SEND_OK"
    qw = F.percentile(F.col("queue_wait_ms").cast("double"), F.array(F.lit(0.5), F.lit(0.99)))
    return (
        r.groupBy("run_id", "producer", "window_start_ms")
        .agg(
            F.count(F.lit(1)).alias("sends"),
            F.sum(ok.cast("long")).alias("ok"),
            F.sum((F.col("status").isin("FAILED", "REJECTED")).cast("long")).alias("_errors"),
            F.sum(F.greatest(F.col("attempts") - 1, F.lit(0))).cast("long").alias("retries"),
            F.sum(F.col("retry_budget_exhausted").cast("long")).alias("retry_budget_exhausted"),
            qw.getItem(0).alias("queue_wait_p50_ms"),
            qw.getItem(1).alias("queue_wait_p99_ms"),
            F.max("queue_wait_ms").alias("queue_wait_max_ms"),
        )
        .withColumn("window_ms", F.lit(window_ms).cast("long"))
        .withColumn("publish_rate_per_s", F.col("ok") * F.lit(1000.0) / F.lit(window_ms))
        .withColumn("error_rate", F.col("_errors") / F.col("sends"))
        .drop("_errors")
    )


def run_summary(results: DataFrame) -> DataFrame:
    """One row for the whole run (scope "all") and one per broker the messages were stored on."""
    status = F.col("status")

    def metrics() -> list[Column]:
        return [
            F.count(F.lit(1)).alias("messages"),
            F.sum((status == "SEND_OK").cast("long")).alias("ok"),
            F.sum((status == "FAILED").cast("long")).alias("failed"),
            F.sum((status == "REJECTED").cast("long")).alias("rejected"),
            F.sum("attempts").cast("long").alias("attempts"),
            F.sum(F.greatest(F.col("attempts") - 1, F.lit(0))).cast("long").alias("retries"),
            *_percentiles("latency_ms"),
            F.max("latency_ms").alias("latency_max_ms"),
        ]

    overall = results.groupBy("run_id").agg(*metrics()).withColumn("scope", F.lit("all"))
    overall = overall.withColumn("share", F.lit(1.0))
    stored = results.where(F.col("broker").isNotNull() & (status != "REJECTED") & (status != "FAILED"))
    per_broker = stored.groupBy("run_id", F.col("broker").alias("scope")).agg(*metrics())
    total = stored.groupBy("run_id").agg(F.count(F.lit(1)).alias("_stored"))
    per_broker = (
        per_broker.join(total, "run_id")
        .withColumn("share", F.col("messages") / F.col("_stored"))
        .drop("_stored")
    )
    return overall.unionByName(per_broker)
