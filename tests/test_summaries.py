"""The summary tables on small fixed tables: hand-computed values, exact percentiles against numpy, Gini
on known distributions, and the isolation-interval derivation (Spark and the plain reference)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from chispa import assert_df_equality

from rocketsim import analysis
from rocketsim.schemas import SEND_ATTEMPTS, SEND_RESULTS
from rocketsim.spark import summaries
from rocketsim.spark.session import spark_schema

QS = [50, 75, 95, 99, 99.9, 99.99]
ATTEMPT_COLUMNS = [f.name for f in SEND_ATTEMPTS]

# (producer, seq, attempt, start, latency, broker, queue, outcome, fault_isolated_until_ms, wire_bytes)
ATTEMPTS = [
    (0, 0, 0, 0, 600, "b", 0, "remoting:timeout", 30600, 100),  # slow: b isolated until 30600 ...
    (0, 0, 1, 600, 5, "a", 0, "ok", None, 100),
    (0, 1, 0, 1000, 5, "b", 1, "ok", None, 200),  # ... until this fast success overwrites it (4.9)
    (0, 2, 0, 2000, 700, "b", 0, "broker:14", 32700, 300),  # isolated again from 2700 ...
    (0, 3, 0, 3000, 800, "b", 1, "status:FLUSH_DISK_TIMEOUT", 33800, 400),  # ... and extended
    (1, 0, 0, 100, 3000, "a", 1, "client", 603100, 50),  # an exception: 600 s
    (1, 1, 0, 3200, 10, "b", 0, "ok", None, 80),  # another broker: a stays isolated
    (2, 0, 0, 500, 500, "b", 0, "ok", 10500, 70),
    (2, 1, 0, 4000, 1000, "b", 1, "ok", 15000, 90),  # 5.x style: extends while still isolated
    (3, 0, 0, 4500, 500, "a", 1, "ok", 5000, 60),  # "until" == end: not isolated
]
# every hand-computed interval of ATTEMPTS: (producer, broker, start_ms, end_ms)
INTERVALS = [(0, "b", 600, 1005), (0, "b", 2700, 33800), (1, "a", 3100, 603100), (2, "b", 1000, 15000)]
# (producer, seq, status, attempts, retry_budget_exhausted, born, send, latency, wire_bytes, broker, queue)
RESULTS = [
    (0, 0, "SEND_OK", 2, False, 0, 0, 605, 100, "a", 0),
    (0, 1, "SEND_OK", 1, False, 950, 1000, 5, 200, "b", 1),
    (0, 2, "FAILED", 1, True, 1990, 2000, 700, 300, "b", 0),
    (0, 3, "FLUSH_DISK_TIMEOUT", 1, False, 3000, 3000, 800, 400, "b", 1),
    (1, 0, "FAILED", 1, False, 100, 100, 3000, 50, "a", 1),
    (1, 1, "SEND_OK", 1, False, 3150, 3200, 10, 80, "b", 0),
    (2, 0, "SEND_OK", 1, False, 500, 500, 500, 70, "b", 0),
    (2, 1, "SEND_OK", 1, False, 3500, 4000, 1000, 90, "b", 1),
    (3, 0, "SEND_OK", 1, False, 4500, 4500, 500, 60, "a", 1),
    (3, 1, "REJECTED", 0, False, 4600, 4600, 0, 70, None, None),
]


def attempts_pandas(rows: list[tuple] = ATTEMPTS, run_id: str = "r") -> pd.DataFrame:
    df = pd.DataFrame(
        rows,
        columns=[
            "producer",
            "seq",
            "attempt",
            "start_ts_ms",
            "latency_ms",
            "broker",
            "queue_id",
            "outcome",
            "fault_isolated_until_ms",
            "wire_bytes",
        ],
    )
    df["fault_isolated_until_ms"] = df["fault_isolated_until_ms"].astype("Int64")
    df["response_code"] = pd.array([14 if o == "broker:14" else None for o in df.outcome], dtype="Int32")
    df["stored"] = [o == "ok" or o.startswith("status:") for o in df.outcome]  # answered: stored at the end
    end = (df["start_ts_ms"] + df["latency_ms"]).tolist()
    df["stored_ts_ms"] = pd.array([e if s else None for e, s in zip(end, df.stored, strict=True)], "Int64")
    df.insert(0, "run_id", run_id)
    return df[ATTEMPT_COLUMNS]


def results_pandas(rows: list[tuple] = RESULTS, run_id: str = "r") -> pd.DataFrame:
    cols = ["producer", "seq", "status", "attempts", "retry_budget_exhausted", "born_ts_ms", "send_ts_ms"]
    cols += ["latency_ms", "wire_bytes", "broker", "queue_id"]
    df = pd.DataFrame(rows, columns=cols)
    df["queue_id"] = df["queue_id"].astype("Int32")
    df["queue_wait_ms"] = df["send_ts_ms"] - df["born_ts_ms"]
    df["end_ts_ms"] = df["send_ts_ms"] + df["latency_ms"]
    df.insert(0, "run_id", run_id)
    return df


@pytest.fixture(scope="module")
def attempts(spark):  # noqa: ANN201 - a Spark DataFrame
    return spark.createDataFrame(attempts_pandas(), schema=spark_schema(SEND_ATTEMPTS))


@pytest.fixture(scope="module")
def results(spark):  # noqa: ANN201
    names = [f.name for f in SEND_RESULTS]
    df = results_pandas()
    schema = spark_schema(SEND_RESULTS)
    keep = [f for f in schema.fields if f.name in df.columns]
    return spark.createDataFrame(df[[n for n in names if n in df.columns]], schema=type(schema)(keep))


@pytest.fixture(scope="module")
def intervals(spark):  # noqa: ANN201
    """The hand-computed intervals (their derivation is tested on its own below)."""
    return spark.createDataFrame(
        [("r", *i) for i in INTERVALS],
        "run_id string, producer int, broker string, start_ms long, end_ms long",
    )


@pytest.fixture(scope="module")
def summary(results, attempts, intervals):  # noqa: ANN201
    """run_summary of the fixed tables, computed once (tiny)."""
    return summaries.run_summary(results, attempts, intervals=intervals).cache()


# ---- Gini (plain) -------------------------------------------------------------------------------


def test_gini_of_known_distributions() -> None:
    assert analysis.gini([5, 5, 5, 5]) == 0.0
    assert analysis.gini([0, 0, 0, 12]) == pytest.approx(0.75)  # all on one of n: (n - 1) / n
    assert analysis.gini([1, 2, 3, 4]) == pytest.approx(0.25)
    assert analysis.gini([3, 1, 4, 2]) == pytest.approx(0.25)  # order does not matter
    assert analysis.gini([10, 20, 30, 40]) == pytest.approx(0.25)  # nor scale
    assert math.isnan(analysis.gini([])) and math.isnan(analysis.gini([0, 0]))
    rng = np.random.default_rng(7)
    # population values: uniform(0, 1) -> 1/3, exponential -> 1/2, Pareto(alpha) -> 1 / (2 alpha - 1)
    assert analysis.gini(rng.uniform(0, 1, 200_000)) == pytest.approx(1 / 3, abs=0.005)
    assert analysis.gini(rng.exponential(1.0, 200_000)) == pytest.approx(0.5, abs=0.005)
    assert analysis.gini(rng.pareto(3.0, 400_000) + 1) == pytest.approx(1 / 5, abs=0.01)
    assert analysis.skew([1, 1, 2]) == pytest.approx(1.5)


def test_spark_gini_and_skew_equal_the_reference_with_idle_queues(spark) -> None:
    rng = np.random.default_rng(11)
    cases = {
        "even": [7, 7, 7, 7],
        "one-hot": [0, 0, 0, 9],
        "ramp": [1, 2, 3, 4],
        "two-idle": [0, 0, 1, 3],
        "random": list(rng.integers(0, 50, 16)),
    }
    rows = [(g, q, int(n), len(v)) for g, v in cases.items() for q, n in enumerate(v) if n > 0]  # no zeros
    counts = spark.createDataFrame(rows, "g string, queue_id int, n long, n_queues long")
    got = {r["g"]: r for r in summaries.queue_stats(counts, ["g"]).collect()}  # 5 tiny rows
    for g, values in cases.items():
        assert got[g]["queue_gini"] == pytest.approx(analysis.gini(values), abs=1e-12), g
        assert got[g]["queue_skew"] == pytest.approx(analysis.skew(values), abs=1e-12), g
    assert got["two-idle"]["queue_gini"] == pytest.approx(0.625)
    assert got["one-hot"]["queue_skew"] == pytest.approx(4.0)


# ---- isolation intervals ------------------------------------------------------------------------


def test_isolation_interval_reference_on_hand_made_attempts() -> None:
    got = analysis.isolation_intervals(attempts_pandas(), keys=["run_id"])
    assert list(got.itertuples(index=False, name=None)) == [("r", *i) for i in sorted(INTERVALS)]
    assert analysis.isolation_intervals(attempts_pandas().iloc[0:0], keys=["run_id"]).empty


def test_isolation_intervals_in_spark(spark, attempts) -> None:
    expected = spark.createDataFrame(
        [("r", *i) for i in INTERVALS],
        "run_id string, producer int, broker string, start_ms long, end_ms long",
    )
    assert_df_equality(
        summaries.isolation_intervals(attempts), expected, ignore_row_order=True, ignore_nullable=True
    )


# ---- windows ------------------------------------------------------------------------------------

BROKER_WINDOW_COLUMNS = (
    "broker string, window_start_ms long, sends long, ok long, failed_timeout long, failed_connect long, "
    "failed_broker_error long, not_store_ok long, failed_other long, retries long, bytes long, "
    "error_rate double, publish_rate_per_s double, isolated_producers long, queue_skew double, "
    "queue_gini double"
)


def test_broker_windows_hand_computed(spark, attempts, intervals) -> None:
    got = summaries.broker_windows(attempts, 1000, intervals=intervals)
    expected = spark.createDataFrame(
        [
            # every broker x every window of the run, zeros included; queues: a0 a1 b0 b1
            ("a", 0, 2, 1, 0, 0, 0, 0, 1, 1, 150, 0.5, 1.0, 0, 1.0, 0.0),
            ("a", 1000, 0, 0, 0, 0, 0, 0, 0, 0, 0, None, 0.0, 0, None, None),
            ("a", 2000, 0, 0, 0, 0, 0, 0, 0, 0, 0, None, 0.0, 0, None, None),
            ("a", 3000, 0, 0, 0, 0, 0, 0, 0, 0, 0, None, 0.0, 1, None, None),
            ("a", 4000, 1, 1, 0, 0, 0, 0, 0, 0, 60, 0.0, 1.0, 1, 2.0, 0.5),
            ("b", 0, 2, 1, 1, 0, 0, 0, 0, 0, 170, 0.5, 1.0, 1, 2.0, 0.5),
            ("b", 1000, 1, 1, 0, 0, 0, 0, 0, 0, 200, 0.0, 1.0, 2, 2.0, 0.5),
            ("b", 2000, 1, 0, 0, 0, 1, 0, 0, 0, 300, 1.0, 0.0, 2, 2.0, 0.5),
            ("b", 3000, 2, 1, 0, 0, 0, 1, 0, 0, 480, 0.5, 1.0, 2, 1.0, 0.0),
            ("b", 4000, 1, 1, 0, 0, 0, 0, 0, 0, 90, 0.0, 1.0, 2, 2.0, 0.5),
        ],
        BROKER_WINDOW_COLUMNS,
    )
    cols = expected.columns
    assert_df_equality(got.select(*cols), expected, ignore_row_order=True, ignore_nullable=True)


def test_queue_windows_hand_computed(spark, attempts) -> None:
    got = summaries.queue_windows(attempts, 2000).select(
        "broker", "queue_id", "window_start_ms", "sends", "skew"
    )
    expected = spark.createDataFrame(
        [
            ("a", 0, 0, 1, 1.0),
            ("a", 1, 0, 1, 1.0),
            ("a", 0, 2000, 0, None),  # the broker got nothing: no skew
            ("a", 1, 2000, 0, None),
            ("a", 0, 4000, 0, 0.0),
            ("a", 1, 4000, 1, 2.0),
            ("b", 0, 0, 2, 4 / 3),
            ("b", 1, 0, 1, 2 / 3),
            ("b", 0, 2000, 2, 4 / 3),
            ("b", 1, 2000, 1, 2 / 3),
            ("b", 0, 4000, 0, 0.0),
            ("b", 1, 4000, 1, 2.0),
        ],
        "broker string, queue_id int, window_start_ms long, sends long, skew double",
    )
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)


def test_producer_windows_hand_computed(spark, results, attempts, intervals) -> None:
    got = summaries.producer_windows(results, 1000, attempts=attempts, intervals=intervals)
    expected = spark.createDataFrame(
        [
            # queues a0 a1 b0 b1: one attempt on one queue -> max/mean 4, Gini 0.75
            (0, 0, 1, 1, 0, 0, 2, 1, 0, 100, 1.0, 0.0, 2.0, 0.5, 1),
            (0, 1000, 1, 1, 0, 0, 1, 0, 0, 200, 1.0, 0.0, 4.0, 0.75, 1),
            (0, 2000, 1, 0, 1, 0, 1, 0, 1, 300, 0.0, 1.0, 4.0, 0.75, 1),
            (0, 3000, 1, 0, 0, 0, 1, 0, 0, 400, 0.0, 0.0, 4.0, 0.75, 1),
            (1, 0, 1, 0, 1, 0, 1, 0, 0, 50, 0.0, 1.0, 4.0, 0.75, 0),
            (1, 3000, 1, 1, 0, 0, 1, 0, 0, 80, 1.0, 0.0, 4.0, 0.75, 1),
            (2, 0, 1, 1, 0, 0, 1, 0, 0, 70, 1.0, 0.0, 4.0, 0.75, 0),
            (2, 4000, 1, 1, 0, 0, 1, 0, 0, 90, 1.0, 0.0, 4.0, 0.75, 1),
            (3, 4000, 2, 1, 0, 1, 1, 0, 0, 130, 1.0, 0.5, 4.0, 0.75, 0),
        ],
        "producer int, window_start_ms long, sends long, ok long, failed long, rejected long, "
        "attempts long, retries long, retry_budget_exhausted long, bytes long, publish_rate_per_s double, "
        "error_rate double, queue_skew double, queue_gini double, isolated_brokers long",
    )
    assert_df_equality(got.select(*expected.columns), expected, ignore_row_order=True, ignore_nullable=True)


def test_run_summary_hand_computed(spark, summary) -> None:
    got = summary
    cols = (
        "scope string, messages long, ok long, failed long, rejected long, attempts long, retries long, "
        "retry_budget_exhausted long, share double, sends long, failed_timeout long, "
        "failed_broker_error long, not_store_ok long, failed_other long, attempt_error_rate double, "
        "bytes long, duration_ms long, "
        "publish_rate_per_s double, error_rate double, isolations long, isolated_ms long"
    )
    expected = spark.createDataFrame(
        [
            # isolated_ms is clipped at the run's last send end (5000): 405 + 2300 + 1900 + 4000
            ("all", 10, 6, 2, 1, 10, 1, 1, 1.0, 10, 1, 1, 1, 1, 0.4, 1450, 5000, 1.2, 0.3, 4, 8605),
            ("a", 2, 2, 0, 0, 3, 1, 0, 2 / 7, 3, 0, 0, 0, 1, 1 / 3, 210, 5000, 0.4, 0.0, 1, 1900),
            ("b", 5, 4, 0, 0, 5, 0, 0, 5 / 7, 7, 1, 1, 1, 0, 3 / 7, 1240, 5000, 0.8, 0.0, 3, 6705),
        ],
        cols,
    )
    assert_df_equality(got.select(*expected.columns), expected, ignore_row_order=True, ignore_nullable=True)
    spread = {r["scope"]: r for r in got.collect()}  # 3 rows
    assert spread["all"]["queue_skew"] == pytest.approx(1.6) and spread["all"]["queue_gini"] == pytest.approx(
        0.25
    )
    assert spread["a"]["queue_skew"] == pytest.approx(4 / 3) and spread["a"]["queue_gini"] == pytest.approx(
        1 / 6
    )
    assert spread["b"]["queue_skew"] == pytest.approx(8 / 7) and spread["b"]["queue_gini"] == pytest.approx(
        1 / 14
    )


# ---- exact percentiles --------------------------------------------------------------------------


def test_histogram_percentiles_equal_spark_percentile_and_numpy(spark) -> None:
    """The histogram path (run_summary's queue waits) gives ``percentile``'s values: ties, one value,
    two values, a run of many distinct values, nulls ignored."""
    rng = np.random.default_rng(8)
    values = {
        "one": np.array([7]),
        "two": np.array([3, 10]),
        "ties": np.array([5] * 40 + [6] * 3 + [900]),
        "wide": rng.integers(0, 5_000_000, 20_000),  # nearly all distinct
        "tail": np.floor(np.exp(rng.normal(1.5, 1.2, 3001))).astype(int),
    }
    rows = [(g, int(v)) for g, vs in values.items() for v in vs] + [("two", None)]
    df = spark.createDataFrame(rows, "g string, latency_ms long")
    names = [f"p{i}" for i in range(len(QS))]
    ps = [q / 100 for q in QS]
    hist = {r["g"]: r for r in summaries.histogram_percentiles(df, ["g"], "latency_ms", names, ps).collect()}
    spark_pct = {
        r["g"]: r for r in df.groupBy("g").agg(*summaries.percentiles("latency_ms", names, ps)).collect()
    }
    for g, vs in values.items():  # 5 groups: tiny results
        got = [hist[g][n] for n in names]
        assert got == [spark_pct[g][n] for n in names], g
        np.testing.assert_allclose(got, np.percentile(vs, QS), rtol=1e-12, atol=1e-9, err_msg=g)


def test_percentiles_are_exact_like_numpy(spark, summary) -> None:
    """Spark's ``percentile`` interpolates linearly between closest ranks: numpy's default."""
    rng = np.random.default_rng(5)
    sizes = {"one": 1, "two": 2, "odd": 1001, "even": 2000}  # odd and even counts, ties, a long tail
    values = {
        g: np.floor(np.exp(rng.normal(1.5, 1.2, n)) + rng.pareto(1.5, n) * 5).astype(int)
        for g, n in sizes.items()
    }
    df = spark.createDataFrame(
        [(g, int(v)) for g, vs in values.items() for v in vs], "g string, latency_ms long"
    )
    got = {r["g"]: r for r in df.groupBy("g").agg(*summaries.percentiles("latency_ms")).collect()}  # 4 rows
    for g, vs in values.items():
        have = [got[g][c] for c in summaries.PERCENTILE_COLUMNS]
        np.testing.assert_allclose(have, np.percentile(vs, QS), rtol=1e-12, atol=1e-9, err_msg=g)
    # and as the run summary reports them: message latency and queue wait per scope of the fixed tables
    rows = {r["scope"]: r for r in summary.collect()}  # 3 rows
    local = results_pandas()
    stored = local[~local.status.isin(["FAILED", "REJECTED"]) & local.broker.notna()]
    for scope, g in [
        ("all", local),
        ("a", stored[stored.broker == "a"]),
        ("b", stored[stored.broker == "b"]),
    ]:
        have = [rows[scope][c] for c in summaries.PERCENTILE_COLUMNS]
        np.testing.assert_allclose(have, np.percentile(g.latency_ms, QS), rtol=1e-12, err_msg=scope)
        np.testing.assert_allclose(
            [rows[scope]["queue_wait_p50_ms"], rows[scope]["queue_wait_p99_ms"]],
            np.percentile(g.queue_wait_ms, [50, 99]),
            rtol=1e-12,
        )
        assert rows[scope]["latency_max_ms"] == g.latency_ms.max()
