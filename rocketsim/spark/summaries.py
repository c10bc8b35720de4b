"""Summary tables computed in Spark from a run's attempts and results.

* ``isolation_intervals``: per producer and broker, when its latency-fault table kept the broker isolated
  (derivation in :func:`rocketsim.analysis.isolation_intervals`, the plain reference).
* ``broker_windows``: per broker and window of attempt start (every broker x every window of the run,
  zeros included): sends, outcomes, error rate, publish rate, retries, bytes, attempt latency, producers
  isolating the broker, queue skew (max/mean) and Gini over the broker's queues.
* ``queue_windows``: per (broker, queue) and window: sends and skew (sends / the broker's mean queue).
* ``producer_windows``: per producer and window of send start: rate, errors, retries, lost retry budget,
  send latency, queue wait (OMB's "publish delay"), queue skew and Gini over all queues, isolated brokers.
* ``run_summary``: the same over the whole run, for scope "all" and each broker.

Every function takes ``keys``: the columns that identify a run (``("run_id",)``; a comparison adds
``"variant"``), so one Spark job can summarize many variants at once.

Percentiles are exact: Spark's ``percentile`` (linear interpolation between the closest ranks, numpy's
default), not ``percentile_approx``. It keeps a map of distinct values per group; latencies are whole
milliseconds, so that map stays small at any row count. Queue waits are not small: a saturated run's
waits take millions of distinct values, so ``run_summary`` takes their percentiles from a histogram
(:func:`histogram_percentiles`, the same values). The "queues" of skew and Gini are the
(broker, queue id) pairs that received at least one attempt anywhere in the run, so an idle queue
counts as a zero.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
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


def _attempt_counts() -> list[Column]:
    """sends, one count per outcome kind, retries and bytes of a group of attempts."""
    kind = F.col("_kind")
    return [
        F.count(F.lit(1)).alias("sends"),
        *[F.sum((kind == name).cast("long")).alias(name) for name in OUTCOME_COLUMNS],
        F.sum((F.col("attempt") > 0).cast("long")).alias("retries"),
        F.sum("wire_bytes").cast("long").alias("bytes"),
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
    counts = ["sends", *OUTCOME_COLUMNS, "retries", "bytes"]
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
    wait; queue skew and Gini over all of the run's queues (by attempt start); brokers it isolated."""
    keys = list(keys)
    cell = [*keys, "producer", "window_start_ms"]
    r = results.withColumn("window_start_ms", window_start("send_ts_ms", window_ms))
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
