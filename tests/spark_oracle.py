"""The Spark aggregations the summary and broker-side tables were computed with before the one pass,
kept verbatim as the oracle the core tables (:mod:`rocketsim.tables.summaries`, :mod:`rocketsim.broker.side`)
are compared with on the same runs, and the reconciliation that read every table back (the one pass
reconciles from counts: :mod:`rocketsim.tables.reconcile`). Used by the tests only.

From ``rocketsim/spark/summaries.py`` (with its own constants and outcome rule: the oracle shares no
definition with the core it checks), ``rocketsim/spark/broker_side.py``, ``rocketsim/spark/compare.py``'s
``comparison_table`` and ``rocketsim/spark/pipeline.py``'s ``reconcile``.

* ``isolation_intervals``: per producer and broker, when its latency-fault table kept the broker isolated
  (derivation in :func:`tests.analysis.isolation_intervals`, the plain reference).
* ``broker_windows``, ``queue_windows``, ``producer_windows``, ``run_summary``: every function takes
  ``keys``: the columns that identify a run (``("run_id",)``; a comparison adds ``"variant"``).

Percentiles are exact: Spark's ``percentile`` (linear interpolation between the closest ranks, numpy's
default), not ``percentile_approx``; ``run_summary``'s queue waits from a histogram
(:func:`histogram_percentiles`, the same values). The "queues" of skew and Gini are the (broker, queue
id) pairs that received at least one attempt anywhere in the run, so an idle queue counts as a zero.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from rocketsim.broker import rebalance, store, transactions
from rocketsim.scenario import Scenario
from rocketsim.scenario.variants import Variant
from rocketsim.spark.session import spark_schema
from rocketsim.tables import schemas

PERCENTILES = (0.5, 0.75, 0.95, 0.99, 0.999, 0.9999)
PERCENTILE_COLUMNS = (
    "latency_p50_ms",
    "latency_p75_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "latency_p999_ms",
    "latency_p9999_ms",
)
# attempt outcome -> column; everything else (client, interrupted, other remoting kinds) is failed_other
OUTCOME_COLUMNS = (
    "ok",
    "failed_timeout",
    "failed_connect",
    "failed_broker_error",
    "not_store_ok",
    "failed_other",
)

RUN_KEYS: tuple[str, ...] = ("run_id",)


def percentiles(
    col: str, names: Sequence[str] = PERCENTILE_COLUMNS, ps: Sequence[float] = PERCENTILES
) -> list[Column]:
    """Exact percentiles of ``col`` (one ``percentile`` aggregate for all of them)."""
    arr = F.percentile(F.col(col).cast("double"), F.array(*[F.lit(p) for p in ps]))
    return [arr.getItem(i).alias(name) for i, name in enumerate(names)]


def histogram_percentiles(
    df: DataFrame, group: Sequence[str], col: str, names: Sequence[str], ps: Sequence[float]
) -> DataFrame:
    """Exact percentiles of ``col`` per ``group``, equal to :func:`percentiles`, from a histogram: for a
    column with very many distinct values in one group (queue waits of a whole run) Spark's
    ``percentile`` keeps them all in one boxed hash map, while this counts (group, value) pairs with a
    hash aggregate and walks the cumulative counts. Null values are ignored, as ``percentile`` does.

    Like ``percentile``: position ``p * (n - 1)``; the values at its floor and ceiling ranks, weighted
    ``(ceil - pos) * low + (pos - floor) * high`` (the low value alone when they are one rank or one
    value).
    """
    value = F.col(col).cast("double")
    hist = (
        df.where(F.col(col).isNotNull()).groupBy(*group, value.alias("_v")).agg(F.count(F.lit(1)).alias("_c"))
    )
    by_value = (
        Window.partitionBy(*group).orderBy("_v").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    hist = hist.withColumn("_cum", F.sum("_c").over(by_value)).withColumn(
        "_n", F.sum("_c").over(Window.partitionBy(*group))
    )
    aggs = []
    for name, p in zip(names, ps, strict=True):
        pos = F.lit(float(p)) * (F.col("_n") - 1)
        low_rank, high_rank = F.floor(pos), F.ceil(pos)
        low = F.min(F.when(F.col("_cum") > low_rank, F.col("_v")))  # the value at that 0-based rank
        high = F.min(F.when(F.col("_cum") > high_rank, F.col("_v")))
        at = F.max(pos)  # one value per group
        weighted = (F.ceil(at) - at) * low + (at - F.floor(at)) * high
        same = (F.ceil(at) == F.floor(at)) | (low == high)
        aggs.append(F.when(same, low).otherwise(weighted).alias(name))
    return hist.groupBy(*group).agg(*aggs)


def _queue_wait() -> list[Column]:
    return [
        *percentiles("queue_wait_ms", ("queue_wait_p50_ms", "queue_wait_p99_ms"), (0.5, 0.99)),
        F.max("queue_wait_ms").alias("queue_wait_max_ms"),
    ]


def window_start(col: str, window_ms: int) -> Column:
    """The start of the ``window_ms`` window holding ``col`` (ms): ``floor(col / w) * w``."""
    return (F.floor(F.col(col) / F.lit(window_ms)) * F.lit(window_ms)).cast("long")


def _outcome_kind() -> Column:
    o = F.col("outcome")
    return (
        F.when(o == "ok", "ok")
        .when(o == "remoting:timeout", "failed_timeout")
        .when(o == "remoting:connect", "failed_connect")
        .when(o.startswith("broker:"), "failed_broker_error")
        .when(o.startswith("status:"), "not_store_ok")
        .otherwise("failed_other")
    )


def _busy_counts() -> list[Column]:
    """Attempts rejected by the closed-loop store's flow control, one count per kind."""
    busy = F.coalesce(F.col("busy_kind"), F.lit(""))
    return [
        F.sum((busy == name.removeprefix("busy_").upper()).cast("long")).alias(name)
        for name in schemas.BUSY_COLUMNS
    ]


def _attempt_counts() -> list[Column]:
    """sends, one count per outcome kind, retries, bytes and flow-control rejections of a group of
    attempts; the closed-loop store's queue depth and writer time."""
    kind = F.col("_kind")
    depth = F.col("store_queue_depth")
    return [
        F.count(F.lit(1)).alias("sends"),
        *[F.sum((kind == name).cast("long")).alias(name) for name in OUTCOME_COLUMNS],
        F.sum((F.col("attempt") > 0).cast("long")).alias("retries"),
        F.sum("wire_bytes").cast("long").alias("bytes"),
        *_busy_counts(),
        (F.sum(depth).cast("double") / F.count(depth)).alias("queue_depth_mean"),
        F.max(depth).cast("long").alias("queue_depth_max"),
        F.when(F.count(depth) > 0, F.coalesce(F.sum("store_service_us"), F.lit(0))).alias("_service_us"),
    ]


def _with_kind(attempts: DataFrame) -> DataFrame:
    return attempts.withColumn("_kind", _outcome_kind())


def _ratio(num: Column, den: Column) -> Column:
    return F.when(den > 0, num.cast("double") / den)


def queue_stats(counts: DataFrame, group: Sequence[str], n_queues: str = "n_queues") -> DataFrame:
    """Skew (max/mean) and Gini of per-queue counts ``n``; ``counts`` may omit zero queues.

    ``counts`` has ``group`` columns, ``n`` (> 0) per queue, and ``n_queues``: how many queues the group
    has in all. Queues left out count as zeros: they sort first, so the k = n_queues - rows present
    shift the ranks of the others by k in ``G = (2 sum i x_(i) - (n+1) sum x) / (n sum x)``.
    """
    w = Window.partitionBy(*group).orderBy("n")
    ranked = counts.withColumn("_i", F.row_number().over(w))
    agg = ranked.groupBy(*group).agg(
        F.first(n_queues).alias("_q"),
        F.count(F.lit(1)).alias("_present"),
        F.sum("n").cast("double").alias("_total"),
        F.max("n").alias("_max"),
        F.sum(F.col("_i") * F.col("n")).cast("double").alias("_sum_ix"),
    )
    q, total = F.col("_q"), F.col("_total")
    sum_ix = F.col("_sum_ix") + (q - F.col("_present")) * total  # zeros first: ranks shift by k
    return agg.select(
        *group,
        F.when(total > 0, F.col("_max") / (total / q)).alias("queue_skew"),
        F.when(total > 0, (2 * sum_ix - (q + 1) * total) / (q * total)).alias("queue_gini"),
    )


def _run_queues(attempts: DataFrame, keys: Sequence[str]) -> DataFrame:
    """(keys, broker, queue_id) of every queue the run sent to."""
    return attempts.select(*keys, "broker", "queue_id").distinct()


def _run_windows(attempts: DataFrame, keys: Sequence[str], window_ms: int) -> DataFrame:
    """(keys, window_start_ms) of every window from the run's first attempt to its last."""
    bounds = attempts.groupBy(*keys).agg(
        F.min(window_start("start_ts_ms", window_ms)).alias("_lo"),
        F.max(window_start("start_ts_ms", window_ms)).alias("_hi"),
    )
    return bounds.select(
        *keys, F.explode(F.sequence("_lo", "_hi", F.lit(window_ms).cast("long"))).alias("window_start_ms")
    )


# ---- isolation intervals ------------------------------------------------------------------------


def isolation_intervals(attempts: DataFrame, keys: Sequence[str] = RUN_KEYS) -> DataFrame:
    """Intervals [start_ms, end_ms) during which a producer's fault table kept a broker isolated.

    Each attempt with ``fault_isolated_until_ms`` after its end contributes the piece
    ``[end, min(until, next end))``, where "next end" is the end of the producer's next attempt to the
    same broker (whose state replaces this one); touching pieces are merged (gaps and islands).
    """
    part = [*keys, "producer", "broker"]
    end = (F.col("start_ts_ms") + F.col("latency_ms")).alias("end_ms")
    a = attempts.select(*part, "seq", "attempt", "start_ts_ms", end, "fault_isolated_until_ms")
    by_end = Window.partitionBy(*part).orderBy("end_ms", "start_ts_ms", "seq", "attempt")
    until = F.col("fault_isolated_until_ms")
    pieces = (
        a.withColumn("_next_end", F.lead("end_ms").over(by_end))
        .where(until > F.col("end_ms"))
        .select(
            *part,
            F.col("end_ms").alias("start_ms"),
            F.least(until, F.coalesce(F.col("_next_end"), until)).alias("end_ms"),
        )
        .where(F.col("end_ms") > F.col("start_ms"))
    )
    by_start = Window.partitionBy(*part).orderBy("start_ms", "end_ms")
    prev_end = F.lag("end_ms").over(by_start)
    islands = pieces.withColumn(
        "_new", F.when(prev_end.isNull() | (prev_end < F.col("start_ms")), 1).otherwise(0)
    )
    islands = islands.withColumn(
        "_island", F.sum("_new").over(by_start.rowsBetween(Window.unboundedPreceding, Window.currentRow))
    )
    return (
        islands.groupBy(*part, "_island")
        .agg(F.min("start_ms").alias("start_ms"), F.max("end_ms").alias("end_ms"))
        .select(*part, "start_ms", "end_ms")
    )


def _interval_windows(intervals: DataFrame, keys: Sequence[str], window_ms: int) -> DataFrame:
    """(keys, producer, broker, window_start_ms) for every window an interval overlaps."""
    w = F.lit(window_ms).cast("long")
    lo = (F.floor(F.col("start_ms") / w) * w).cast("long")
    hi = (F.floor((F.col("end_ms") - 1) / w) * w).cast("long")
    return intervals.select(
        *keys, "producer", "broker", F.explode(F.sequence(lo, hi, w)).alias("window_start_ms")
    )


# ---- windows ------------------------------------------------------------------------------------


def queue_windows(attempts: DataFrame, window_ms: int, keys: Sequence[str] = RUN_KEYS) -> DataFrame:
    """Sends per (broker, queue) and window, zeros included; ``skew`` = sends / the broker's queue mean."""
    a = attempts.withColumn("window_start_ms", window_start("start_ts_ms", window_ms))
    cell = [*keys, "broker", "queue_id", "window_start_ms"]
    counts = a.groupBy(*cell).agg(
        F.count(F.lit(1)).alias("sends"), F.sum((F.col("outcome") == "ok").cast("long")).alias("ok")
    )
    grid = _run_queues(attempts, keys).join(_run_windows(attempts, keys, window_ms), list(keys))
    out = grid.join(counts, cell, "left").fillna(0, ["sends", "ok"])
    mean = F.avg("sends").over(Window.partitionBy(*keys, "broker", "window_start_ms"))
    return out.withColumn("skew", _ratio(F.col("sends"), mean)).withColumn(
        "window_ms", F.lit(window_ms).cast("long")
    )


def broker_windows(
    attempts: DataFrame,
    window_ms: int,
    *,
    intervals: DataFrame | None = None,
    keys: Sequence[str] = RUN_KEYS,
) -> DataFrame:
    """Per broker and attempt-start window (every broker x every window of the run, zeros included)."""
    keys = list(keys)
    cell = [*keys, "broker", "window_start_ms"]
    a = _with_kind(attempts).withColumn("window_start_ms", window_start("start_ts_ms", window_ms))
    main = a.groupBy(*cell).agg(
        *_attempt_counts(), *percentiles("latency_ms"), F.max("latency_ms").alias("latency_max_ms")
    )
    brokers = attempts.select(*keys, "broker").distinct()
    grid = brokers.join(_run_windows(attempts, keys, window_ms), keys)
    counts = ["sends", *OUTCOME_COLUMNS, "retries", "bytes", *schemas.BUSY_COLUMNS]
    out = grid.join(main, cell, "left").fillna(0, counts)

    n_queues = _run_queues(attempts, keys).groupBy(*keys, "broker").agg(F.count(F.lit(1)).alias("n_queues"))
    per_queue = (
        a.groupBy(*cell, "queue_id").agg(F.count(F.lit(1)).alias("n")).join(n_queues, [*keys, "broker"])
    )
    out = out.join(queue_stats(per_queue, cell), cell, "left")

    if intervals is None:
        intervals = isolation_intervals(attempts, keys)
    isolated = (
        _interval_windows(intervals, keys, window_ms)
        .groupBy(*cell)
        .agg(F.countDistinct("producer").alias("isolated_producers"))
    )
    out = out.join(isolated, cell, "left").fillna(0, ["isolated_producers"])
    return (
        out.withColumn("window_ms", F.lit(window_ms).cast("long"))
        .withColumn("error_rate", _ratio(F.col("sends") - F.col("ok"), F.col("sends")))
        .withColumn("publish_rate_per_s", F.col("ok") * F.lit(1000.0) / F.lit(window_ms))
        .withColumn("utilisation", F.col("_service_us").cast("double") / F.lit(window_ms * 1000.0))
        .drop("_service_us")
    )


def producer_windows(
    results: DataFrame,
    window_ms: int,
    *,
    attempts: DataFrame,
    intervals: DataFrame | None = None,
    keys: Sequence[str] = RUN_KEYS,
) -> DataFrame:
    """Per producer and window of send start: rate, errors, retries, lost retry budget, latency, queue
    wait; queue skew and Gini over all of the run's queues (by attempt start); brokers it isolated; the
    sends' attempts the closed-loop store rejected, by kind."""
    keys = list(keys)
    cell = [*keys, "producer", "window_start_ms"]
    send = [*keys, "producer", "seq"]
    busy = attempts.groupBy(*send).agg(*_busy_counts())
    r = (
        results.withColumn("window_start_ms", window_start("send_ts_ms", window_ms))
        .join(busy, send, "left")
        .fillna(0, list(schemas.BUSY_COLUMNS))
    )
    status = F.col("status")
    out = (
        r.groupBy(*cell)
        .agg(
            F.count(F.lit(1)).alias("sends"),
            F.sum((status == "SEND_OK").cast("long")).alias("ok"),
            F.sum((status == "FAILED").cast("long")).alias("failed"),
            F.sum((status == "REJECTED").cast("long")).alias("rejected"),
            F.sum("attempts").cast("long").alias("attempts"),
            F.sum(F.greatest(F.col("attempts") - 1, F.lit(0))).cast("long").alias("retries"),
            F.sum(F.col("retry_budget_exhausted").cast("long")).alias("retry_budget_exhausted"),
            F.sum("wire_bytes").cast("long").alias("bytes"),
            *percentiles("latency_ms"),
            F.max("latency_ms").alias("latency_max_ms"),
            *_queue_wait(),
            *[F.sum(n).cast("long").alias(n) for n in schemas.BUSY_COLUMNS],
        )
        .withColumn("window_ms", F.lit(window_ms).cast("long"))
        .withColumn("publish_rate_per_s", F.col("ok") * F.lit(1000.0) / F.lit(window_ms))
        .withColumn("error_rate", (F.col("failed") + F.col("rejected")) / F.col("sends"))
    )
    n_queues = _run_queues(attempts, keys).groupBy(*keys).agg(F.count(F.lit(1)).alias("n_queues"))
    per_queue = (
        attempts.withColumn("window_start_ms", window_start("start_ts_ms", window_ms))
        .groupBy(*cell, "broker", "queue_id")
        .agg(F.count(F.lit(1)).alias("n"))
        .join(n_queues, keys)
    )
    out = out.join(queue_stats(per_queue, cell), cell, "left")
    if intervals is None:
        intervals = isolation_intervals(attempts, keys)
    isolated = (
        _interval_windows(intervals, keys, window_ms)
        .groupBy(*cell)
        .agg(F.countDistinct("broker").alias("isolated_brokers"))
    )
    return out.join(isolated, cell, "left").fillna(0, ["isolated_brokers"])


# ---- the whole run ------------------------------------------------------------------------------


def run_summary(
    results: DataFrame,
    attempts: DataFrame,
    *,
    intervals: DataFrame | None = None,
    keys: Sequence[str] = RUN_KEYS,
) -> DataFrame:
    """One row for the whole run (scope "all") and one per broker.

    Message columns (messages, ok, failed, rejected, attempts, retries, latency, queue wait, ...) count
    the results stored on that broker (all results for "all"); attempt columns (sends, outcomes, bytes,
    attempt_error_rate, queue skew/Gini) count the attempts sent to it; isolation columns the intervals
    of that broker (``isolated_ms``: their producer-milliseconds before the run's last send ended). Rates
    are per second of the run's span (first birth to last send end).
    """
    keys = list(keys)
    status = F.col("status")

    def message_metrics() -> list[Column]:
        return [
            F.count(F.lit(1)).alias("messages"),
            F.sum((status == "SEND_OK").cast("long")).alias("ok"),
            F.sum((status == "FAILED").cast("long")).alias("failed"),
            F.sum((status == "REJECTED").cast("long")).alias("rejected"),
            F.sum("attempts").cast("long").alias("attempts"),
            F.sum(F.greatest(F.col("attempts") - 1, F.lit(0))).cast("long").alias("retries"),
            F.sum(F.col("retry_budget_exhausted").cast("long")).alias("retry_budget_exhausted"),
            *percentiles("latency_ms"),
            F.max("latency_ms").alias("latency_max_ms"),
            F.max("queue_wait_ms").alias("queue_wait_max_ms"),
        ]

    def attempt_metrics() -> list[Column]:
        kind = F.col("_kind")
        return [
            F.count(F.lit(1)).alias("sends"),
            F.sum((kind == "ok").cast("long")).alias("_attempts_ok"),
            *[F.sum((kind == name).cast("long")).alias(name) for name in OUTCOME_COLUMNS if name != "ok"],
            F.sum("wire_bytes").cast("long").alias("bytes"),
            *_busy_counts(),
        ]

    def interval_metrics() -> list[Column]:
        return [
            F.count(F.lit(1)).alias("isolations"),
            F.sum("_clipped_ms").cast("long").alias("isolated_ms"),
        ]

    def by_scope(df: DataFrame, scope: Column, metrics: list[Column]) -> DataFrame:
        """``metrics`` per broker (``scope``; null rows are dropped) and over all rows ("all"), in one
        aggregation (grouping sets)."""
        d = df.withColumn("_scope", scope)
        g = d.groupingSets([[*keys, "_scope"], keys], *keys, "_scope").agg(
            *metrics, F.grouping("_scope").alias("_is_all")
        )
        g = g.where((F.col("_is_all") == 1) | F.col("_scope").isNotNull())
        label = F.when(F.col("_is_all") == 1, F.lit("all")).otherwise(F.col("_scope")).alias("scope")
        return g.select(*keys, label, *[c for c in g.columns if c not in (*keys, "_scope", "_is_all")])

    if intervals is None:
        intervals = isolation_intervals(attempts, keys)
    # isolated_ms counts the part of each interval inside the run (an isolation may outlast the sends)
    run_end = results.groupBy(*keys).agg(F.max("end_ts_ms").alias("_run_end"))
    intervals = intervals.join(run_end, keys).withColumn(
        "_clipped_ms", F.greatest(F.least(F.col("end_ms"), F.col("_run_end")) - F.col("start_ms"), F.lit(0))
    )
    stored = F.col("broker").isNotNull() & (status != "REJECTED") & (status != "FAILED")
    messages = by_scope(
        results,
        F.when(stored, F.col("broker")),
        [*message_metrics(), F.max("end_ts_ms").alias("_last_end"), F.min("born_ts_ms").alias("_first_born")],
    )
    # queue-wait percentiles by histogram: a whole run's waits can take millions of distinct values
    scoped = results.select(*keys, F.lit("all").alias("scope"), "queue_wait_ms").unionByName(
        results.where(stored).select(*keys, F.col("broker").alias("scope"), "queue_wait_ms")
    )
    names, ps = ("queue_wait_p50_ms", "queue_wait_p99_ms"), (0.5, 0.99)
    waits = histogram_percentiles(scoped, [*keys, "scope"], "queue_wait_ms", names, ps)
    messages = messages.join(waits, [*keys, "scope"], "left")
    sends = by_scope(_with_kind(attempts), F.col("broker"), attempt_metrics())
    isolations = by_scope(intervals, F.col("broker"), interval_metrics())

    # queue skew and Gini: per broker over its queues, and over all queues of the run
    per_queue = attempts.groupBy(*keys, "broker", "queue_id").agg(F.count(F.lit(1)).alias("n"))
    queues = _run_queues(attempts, keys)
    n_all = queues.groupBy(*keys).agg(F.count(F.lit(1)).alias("n_queues"))
    n_broker = queues.groupBy(*keys, "broker").agg(F.count(F.lit(1)).alias("n_queues"))
    scoped_queues = (
        per_queue.join(n_all, keys)
        .withColumn("scope", F.lit("all"))
        .unionByName(per_queue.join(n_broker, [*keys, "broker"]).withColumn("scope", F.col("broker")))
    )
    spread = queue_stats(scoped_queues, [*keys, "scope"])

    scope = [*keys, "scope"]
    run = Window.partitionBy(*keys)
    is_all = F.col("scope") == "all"
    both = (
        messages.join(sends, scope, "full")
        .join(spread, scope, "left")
        .join(isolations, scope, "left")
        .fillna(0, ["messages", "ok", "failed", "rejected", "attempts", "retries", "retry_budget_exhausted"])
        .fillna(0, ["sends", "_attempts_ok", *OUTCOME_COLUMNS[1:], "bytes", "isolations", "isolated_ms"])
        .fillna(0, list(schemas.BUSY_COLUMNS))
        # the run's span and stored messages, from its "all" and broker rows (a tiny window per run)
        .withColumn("duration_ms", F.max(F.when(is_all, F.col("_last_end") - F.col("_first_born"))).over(run))
        .withColumn("_stored", F.sum(F.when(~is_all, F.col("messages"))).over(run))
    )
    return (
        both.withColumn(
            "share",
            F.when(is_all, F.lit(1.0))
            .when(F.col("_stored") > 0, F.col("messages") / F.col("_stored"))
            .otherwise(F.lit(0.0)),
        )
        .withColumn("publish_rate_per_s", _ratio(F.col("ok") * F.lit(1000.0), F.col("duration_ms")))
        .withColumn("error_rate", _ratio(F.col("failed") + F.col("rejected"), F.col("messages")))
        .withColumn("attempt_error_rate", _ratio(F.col("sends") - F.col("_attempts_ok"), F.col("sends")))
        .drop("_attempts_ok", "_stored", "_last_end", "_first_born")
    )


# ---- the broker side --------------------------------------------------------------------------------

# transactions columns taken as they are from the message and its result
_TXN_PASSED = frozenset(
    {
        "uniq_msg_id",
        "topic",
        "broker",
        "queue_id",
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
    """``transactions``: one row per stored half (the one its result points at, and any other: a
    timed-out attempt the broker stored anyway) and one per transactional message whose result points
    at no half, each resolved."""
    txn = messages.where(F.col("message_type") == "transaction").select("producer", "seq", "topic")
    res = results.select(
        "producer",
        "seq",
        "uniq_msg_id",  # the client's, set when it sent the half
        F.col("status").alias("send_status"),
        "end_ts_ms",
    )
    halves = log.where(F.col("store_topic") == store.HALF_TOPIC).select(
        "producer",
        "seq",
        "attempt",
        "is_result",
        F.col("real_topic").alias("topic"),
        "broker",
        F.col("real_queue_id").alias("queue_id"),
        F.col("born_ts_ms").alias("half_born_ts_ms"),
        F.col("store_ts_ms").alias("half_store_ts_ms"),
        F.col("queue_offset").alias("half_queue_offset"),
        F.col("commit_log_offset").alias("half_commit_log_offset"),
        F.col("store_size").alias("half_store_size"),
    )
    pointed = halves.where(F.col("is_result")).select("producer", "seq")
    unstored = txn.join(pointed, ["producer", "seq"], "left_anti").select(
        "producer",
        "seq",
        F.lit(None).cast("int").alias("attempt"),
        F.lit(False).alias("is_result"),
        "topic",
        *[
            F.lit(None).cast(t).alias(c)
            for c, t in (
                ("broker", "string"),
                ("queue_id", "int"),
                ("half_born_ts_ms", "long"),
                ("half_store_ts_ms", "long"),
                ("half_queue_offset", "long"),
                ("half_commit_log_offset", "long"),
                ("half_store_size", "int"),
            )
        ],
    )
    rows = halves.unionByName(unstored).join(res, ["producer", "seq"])
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
    messages in their real queue once delivered, transactional messages in their real queue once a
    half is committed (each committed half once; their bytes: the stored half's); halves themselves
    and rolled back or discarded halves never.
    """
    visible = log.where(F.col("store_topic") != store.HALF_TOPIC).select(
        F.coalesce("real_topic", "store_topic").alias("topic"),
        "broker",
        F.coalesce("real_queue_id", "store_queue_id").alias("queue_id"),
        F.col("store_size").cast("long").alias("bytes"),
    )
    committed = txns.where(F.col("delivered")).select(
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
        F.count(F.when(half, 1)).alias("halves"),
    )
    storage = one(read("broker_storage"), F.coalesce(F.sum("messages"), F.lit(0)).alias("m"))["m"]
    # rocketsim.broker.store.is_stored_outcome: the stored column (timed-out requests the broker wrote too)
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
        F.count(F.when(F.col("is_result"), 1)).alias("pointed"),
        F.count(F.when(F.col("delivered"), 1)).alias("delivered"),
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
        "one transactions row per transaction message and per other half": (
            t["n"] + t["pointed"],
            txn_messages + t["halves"],
        ),
        "stored halves in transactions = half records in commit_log": (t["halves"], log["halves"]),
        "halves the results point at in transactions = results in the half topic": (
            t["pointed"],
            r["halves"],
        ),
    }
    loads = read("consumer_load").groupBy("consumer_group").agg(F.sum("messages").alias("m")).collect()  # few
    for row in loads:
        checks[f"consumer_load of {row['consumer_group']} = delivered + committed messages"] = (
            row["m"],
            log["visible"] + t["delivered"],
        )
    return checks


# ---- a comparison (rocketsim/spark/compare.py) ----------------------------------------------------------

KEYS = ("run_id", "variant")
METRICS = tuple(f.name for f in schemas.RUN_SUMMARY if f.name not in ("run_id", "scope"))


def comparison_table(summary: DataFrame, variants: Sequence[Variant], baseline: str) -> DataFrame:
    """run_summary rows of every variant -> long rows (variant, scope, metric) with baseline and deltas."""
    spark = summary.sparkSession
    wide = summary.select(*KEYS, "scope", *[F.col(m).cast("double").alias(m) for m in METRICS])
    long = wide.unpivot([*KEYS, "scope"], list(METRICS), "metric", "value")
    base = long.where(F.col("variant") == baseline).select(
        "run_id", "scope", "metric", F.col("value").alias("baseline_value")
    )
    described = spark.createDataFrame(
        [(v.name, list(v.overrides)) for v in variants], "variant string, overrides array<string>"
    )
    delta = F.col("value") - F.col("baseline_value")
    return (
        long.join(base, ["run_id", "scope", "metric"], "left")
        .join(F.broadcast(described), "variant")
        .withColumn("baseline", F.lit(baseline))
        .withColumn("delta", delta)
        .withColumn(
            "delta_pct",
            F.when(F.abs(F.col("baseline_value")) > 0, F.lit(100.0) * delta / F.abs(F.col("baseline_value"))),
        )
    )


# ---- the whole run's rules, reading every table back (pipeline.reconcile before the one pass) ----------

RECONCILE_SCOPES = {
    "simulate": (schemas.GENERATE, schemas.SIMULATE),
    "summarize": (schemas.GENERATE, schemas.SIMULATE, schemas.SUMMARIZE),
    "run": (schemas.GENERATE, schemas.SIMULATE, schemas.BROKER_SIDE, schemas.SUMMARIZE),
}


def reconcile_read_back(read: Callable[[str], DataFrame], through: str = "run") -> dict[str, tuple[int, int]]:
    """The rules the pipeline checked by reading every table of the run back (``read(table)``): name ->
    (left, right)."""
    n = F.count(F.lit(1)).alias("n")
    sends = F.coalesce(F.sum("sends"), F.lit(0)).alias("sends")
    stored = F.when(F.col("status").isin("FAILED", "REJECTED") | F.col("broker").isNull(), 0).otherwise(1)
    # what the rules below need of each table, besides its row and key counts
    extra = {
        "send_results": [
            F.coalesce(F.sum("attempts"), F.lit(0)).alias("attempts"),
            F.sum(stored).alias("stored"),
        ],
        "broker_windows": [sends],
        "queue_windows": [sends],
        "run_summary": [
            F.coalesce(F.sum(F.when(F.col("scope") != "all", F.col("messages"))), F.lit(0)).alias("stored")
        ],
    }
    got: dict[str, dict] = {}
    checks: dict[str, tuple[object, object]] = {}
    for spec in schemas.written_by(*RECONCILE_SCOPES[through]):
        keys = [F.count_distinct(F.struct(*spec.keys)).alias("keys")] if spec.keys else []
        got[spec.name] = row = read(spec.name).agg(n, *keys, *extra.get(spec.name, [])).first().asDict()
        if spec.keys:
            checks[f"{spec.name} rows are distinct ({', '.join(spec.keys)})"] = (row["n"], row["keys"])
    m, r, a = got["messages"], got["send_results"], got["send_attempts"]
    checks["one result per message"] = (m["n"], r["n"])
    checks["distinct (producer, seq) in messages and results"] = (m["keys"], r["keys"])
    checks["attempt rows = sum of results.attempts"] = (a["n"], r["attempts"])
    if through != "simulate":
        stored_results = r["stored"] or 0
        checks["per-broker messages in run_summary = stored results"] = (
            got["run_summary"]["stored"],
            stored_results,
        )
        checks["sends in broker_windows = attempt rows"] = (got["broker_windows"]["sends"], a["n"])
        checks["sends in queue_windows = attempt rows"] = (got["queue_windows"]["sends"], a["n"])
    if through == "run":
        checks.update(reconcile_checks(read))
    return checks


# ---- the oracle's tables of committed rows (helpers of the tests, not copies) ---------------------------


def summary_tables_of(
    spark,  # noqa: ANN001 - SparkSession
    attempts: pa.Table,
    results: pa.Table,
    window_ms: int,
    keys: Sequence[str] = RUN_KEYS,
) -> dict[str, pa.Table]:
    """The five summary tables the oracle computes from attempt and result rows (as Arrow, carrying the
    ``keys`` columns; other columns beyond the core's are ignored), collected as Arrow."""
    key_fields = [pa.field(k, pa.string(), nullable=False) for k in keys]
    a_schema = pa.schema([*key_fields, *schemas.without_run_id(schemas.SEND_ATTEMPTS)])
    r_schema = pa.schema([*key_fields, *schemas.without_run_id(schemas.SEND_RESULTS)])
    a = spark.createDataFrame(attempts.select(a_schema.names).cast(a_schema), spark_schema(a_schema))
    r = spark.createDataFrame(results.select(r_schema.names).cast(r_schema), spark_schema(r_schema))
    intervals = isolation_intervals(a, keys).cache()
    out = {
        "isolation_intervals": intervals,
        "broker_windows": broker_windows(a, window_ms, intervals=intervals, keys=keys),
        "queue_windows": queue_windows(a, window_ms, keys=keys),
        "producer_windows": producer_windows(r, window_ms, attempts=a, intervals=intervals, keys=keys),
        "run_summary": run_summary(r, a, intervals=intervals, keys=keys),
    }
    tables = {name: df.toArrow() for name, df in out.items()}  # small
    intervals.unpersist()
    return tables


def broker_side_tables_of(
    spark,  # noqa: ANN001 - SparkSession
    log: pa.Table,
    messages: pa.Table,
    results: pa.Table,
    sc: Scenario,
    window_ms: int,
) -> dict[str, pa.Table]:
    """The three broker-side tables the oracle computes from a run's committed commit log, messages and
    results (as Arrow, without ``run_id``), collected as Arrow."""

    def frame(table: pa.Table, name: str) -> DataFrame:
        schema = schemas.data_schema(schemas.TABLES[name].schema)
        return spark.createDataFrame(table.select(schema.names).cast(schema), spark_schema(schema))

    log_df = frame(log, "commit_log")
    txns = transaction_table(log_df, frame(messages, "messages"), frame(results, "send_results"), sc).cache()
    out = {
        "broker_storage": broker_storage(log_df, window_ms).toArrow(),
        "transactions": txns.toArrow(),
        "consumer_load": consumer_load(log_df, txns, sc).toArrow(),
    }
    txns.unpersist()
    return out
