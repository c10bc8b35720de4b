"""The broker side of a run in Spark: ``broker_storage``, ``transactions``, ``consumer_load`` and their
reconciliation rules, aggregated from the committed ``commit_log`` (numbered by the stage's broker step,
:func:`rocketsim.store.number_broker`). Thin over the core (:mod:`rocketsim.store`,
:mod:`rocketsim.transactions`, :mod:`rocketsim.rebalance`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from rocketsim import rebalance, schemas, store, transactions
from rocketsim.scenario import Scenario
from rocketsim.spark.session import spark_schema
from rocketsim.spark.summaries import window_start

# transactions columns taken as they are from the message and its result
_TXN_PASSED = frozenset(
    {
        "uniq_msg_id",
        "topic",
        "broker",
        "queue_id",
        "half_store_ts_ms",
        "half_queue_offset",
        "half_commit_log_offset",
        "half_store_size",
    }
)


# ---- the broker-side stage ----------------------------------------------------------------------


def _ceil_div(col: Column, size: int) -> Column:
    return F.floor((col + F.lit(size - 1)) / F.lit(size)).cast("long")  # as the broker counts files


def broker_storage(log: DataFrame, window_ms: int) -> DataFrame:
    """``broker_storage``: per broker, store-time window and stored (topic, queue) with writes in it."""
    running = Window.unboundedPreceding, Window.currentRow
    per_queue = (
        log.withColumn("window_start_ms", window_start("store_ts_ms", window_ms))
        .groupBy(
            "broker",
            "window_start_ms",
            F.col("store_topic").alias("topic"),
            F.col("store_queue_id").alias("queue_id"),
        )
        .agg(
            F.count(F.lit(1)).alias("messages"),
            F.sum(F.col("store_size").cast("long")).alias("store_bytes"),
            F.sum(F.col("index_entries").cast("long")).alias("index_new"),
        )
    )
    q = Window.partitionBy("broker", "topic", "queue_id").orderBy("window_start_ms").rowsBetween(*running)
    per_queue = per_queue.withColumn("cq_entries", F.sum("messages").over(q))
    b = Window.partitionBy("broker").orderBy("window_start_ms").rowsBetween(*running)
    per_broker = (
        per_queue.groupBy("broker", "window_start_ms")
        .agg(F.sum("store_bytes").alias("bytes_new"), F.sum("index_new").alias("index_new"))
        .select(
            "broker",
            "window_start_ms",
            F.sum("bytes_new").over(b).alias("commit_log_bytes"),
            F.sum("index_new").over(b).alias("index_entries"),
        )
    )
    out = per_queue.drop("index_new").join(per_broker, ["broker", "window_start_ms"])
    return out.select(
        "broker",
        "window_start_ms",
        F.lit(window_ms).cast("long").alias("window_ms"),
        "topic",
        "queue_id",
        "messages",
        "store_bytes",
        "cq_entries",
        _ceil_div(F.col("cq_entries"), store.CQ_ENTRIES_PER_FILE).alias("cq_files"),
        "commit_log_bytes",
        _ceil_div(F.col("commit_log_bytes"), store.COMMIT_LOG_FILE_BYTES).alias("commit_log_files"),
        "index_entries",
        F.greatest(
            F.lit(1).cast("long"), _ceil_div(F.col("index_entries"), store.INDEX_ENTRIES_PER_FILE)
        ).alias("index_files"),
    )


def transaction_table(log: DataFrame, messages: DataFrame, results: DataFrame, sc: Scenario) -> DataFrame:
    """``transactions``: one row per transactional message, its half and how it was resolved."""
    txn = messages.where(F.col("message_type") == "transaction").select("producer", "seq", "topic")
    half = F.col("store_topic") == store.HALF_TOPIC
    res = results.select(
        "producer",
        "seq",
        "uniq_msg_id",  # the client's, set when it sent the half
        F.col("status").alias("send_status"),
        "end_ts_ms",
        F.when(half, F.col("broker")).alias("broker"),
        F.when(half, F.col("queue_id")).alias("queue_id"),
        F.when(half, F.col("store_ts_ms")).alias("half_store_ts_ms"),
        F.when(half, F.col("queue_offset")).alias("half_queue_offset"),
        F.when(half, F.col("commit_log_offset")).alias("half_commit_log_offset"),
        F.when(half, F.col("store_size")).alias("half_store_size"),
    )
    born = log.where(F.col("is_result") & (F.col("store_topic") == store.HALF_TOPIC)).select(
        "producer", "seq", F.col("born_ts_ms").alias("half_born_ts_ms")
    )
    rows = txn.join(res, ["producer", "seq"]).join(born, ["producer", "seq"], "left")
    passed = [f for f in schemas.TRANSACTIONS if f.name in _TXN_PASSED]
    in_schema = pa.schema([*transactions.INPUT_COLUMNS, *passed])
    out_schema = pa.schema([*in_schema, *transactions.OUTPUT_COLUMNS])

    def resolve(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield from transactions.resolve(pa.Table.from_batches([batch]), sc).cast(out_schema).to_batches()

    out = rows.select(*in_schema.names).mapInArrow(resolve, spark_schema(out_schema))
    return out.select(*schemas.data_schema(schemas.TRANSACTIONS).names)


def consumer_load(log: DataFrame, txns: DataFrame, sc: Scenario) -> DataFrame:
    """``consumer_load``: per consumer group, consumer and queue, the messages its consumers get.

    What consumers of a topic read: normal, ordered and batch records where they were stored, delay
    messages in their real queue once delivered, transactional messages in their real queue once
    committed (their bytes: the stored half's); halves themselves and rolled back or discarded
    transactions never.
    """
    visible = log.where(F.col("store_topic") != store.HALF_TOPIC).select(
        F.coalesce("real_topic", "store_topic").alias("topic"),
        "broker",
        F.coalesce("real_queue_id", "store_queue_id").alias("queue_id"),
        F.col("store_size").cast("long").alias("bytes"),
    )
    committed = txns.where(F.col("resolution") == "commit").select(
        "topic", "broker", "queue_id", F.col("half_store_size").cast("long").alias("bytes")
    )
    per_queue = (
        visible.unionByName(committed)
        .groupBy("topic", "broker", "queue_id")
        .agg(F.count(F.lit(1)).alias("messages"), F.sum("bytes").alias("bytes"))
    )
    alloc_names = ("consumer_group", "consumer", "topic", "broker", "queue_id")
    alloc_schema = pa.schema([f for f in schemas.CONSUMER_LOAD if f.name in alloc_names])
    alloc = log.sparkSession.createDataFrame(
        rebalance.allocation(sc), spark_schema(alloc_schema)
    )  # groups x queues
    joined = alloc.join(per_queue, ["topic", "broker", "queue_id"], "left")
    return joined.select(
        "consumer_group",
        "consumer",
        "topic",
        "broker",
        "queue_id",
        F.coalesce("messages", F.lit(0)).cast("long").alias("messages"),
        F.coalesce("bytes", F.lit(0)).cast("long").alias("bytes"),
    )


# ---- reconciliation -----------------------------------------------------------------------------


def reconcile_checks(read: Callable[[str], DataFrame]) -> dict[str, tuple[int, int]]:
    """Rules the broker-side tables keep with the run's other tables: name -> (left, right), equal when
    the run reconciles. ``read(table)`` gives the run's rows of a table. Aggregations only, no joins."""

    def one(df: DataFrame, *aggs: Column) -> dict:
        return df.agg(*aggs).first().asDict()  # one aggregated row

    n = F.count(F.lit(1))
    half = F.col("store_topic") == store.HALF_TOPIC
    log = one(
        read("commit_log"),
        n.alias("records"),
        F.count(F.when(F.col("seq") == F.col("send_seq"), 1)).alias("attempts"),  # one lead copy per attempt
        F.count(F.when(F.col("is_result"), 1)).alias("pointed"),
        F.count(F.when(~half, 1)).alias("visible"),
    )
    storage = one(read("broker_storage"), F.coalesce(F.sum("messages"), F.lit(0)).alias("m"))["m"]
    # rocketsim.store.is_stored_outcome: the stored column (timed-out requests the broker wrote too)
    stored_attempts = one(read("send_attempts").where(F.col("stored")), n.alias("n"))["n"]
    r = one(
        read("send_results"),
        F.count(F.col("queue_offset")).alias("with_offset"),
        F.count(F.when(~F.col("status").isin(*store.NOT_STORED_STATUSES, "ONEWAY_SENT"), 1)).alias(
            "answered"
        ),
        F.count(F.when(~F.col("status").isin("ONEWAY_SENT") & F.col("queue_offset").isNotNull(), 1)).alias(
            "answered_with_offset"
        ),
        F.count(F.when(half, 1)).alias("halves"),
    )
    txn_messages = one(read("messages").where(F.col("message_type") == "transaction"), n.alias("n"))["n"]
    t = one(
        read("transactions"),
        n.alias("n"),
        F.count(F.col("half_queue_offset")).alias("halves"),
        F.count(F.when(F.col("resolution") == "commit", 1)).alias("commits"),
    )
    checks = {
        "broker_storage messages = commit_log records": (storage, log["records"]),
        "stored attempts = attempts in commit_log": (stored_attempts, log["attempts"]),
        "send_results with a queue offset = commit_log records they point at": (
            r["with_offset"],
            log["pointed"],
        ),
        "answered results with a stored status have a queue offset": (
            r["answered_with_offset"],
            r["answered"],
        ),
        "one transactions row per transaction message": (t["n"], txn_messages),
        "stored halves in transactions = results in the half topic": (t["halves"], r["halves"]),
    }
    loads = read("consumer_load").groupBy("consumer_group").agg(F.sum("messages").alias("m")).collect()  # few
    for row in loads:
        checks[f"consumer_load of {row['consumer_group']} = delivered + committed messages"] = (
            row["m"],
            log["visible"] + t["commits"],
        )
    return checks
