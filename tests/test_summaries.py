"""The summary tables (:mod:`rocketsim.tables.summaries`): hand-computed values on small fixed tables, exact
percentiles against numpy (and Spark's ``percentile``, to the bit), Gini on known distributions, the
isolation-interval derivation against the plain reference; and every table and column equal to the
plain reference written from their definitions (:func:`tests.analysis.summary_tables`): on the sample
runs simulated here and as the pipeline's one pass committed them, a comparison's variants (key
variant), a closed-loop run and hand-made edge cases. Merged aggregates do not depend on the merge
order, and travel as bytes.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from sample_runs import BASE as SAMPLE_BASE
from sample_runs import RUNS, assert_rows, assert_same, by_producer, deep_update, run_tables, scenario_of

from rocketsim import engine
from rocketsim.broker import store
from rocketsim.scenario import Scenario, scenario_from_mapping, workload
from rocketsim.tables import schemas, summaries
from rocketsim.tables.schemas import SEND_ATTEMPTS
from rocketsim.tables.summaries.columns import AttemptColumns
from tests import analysis

QS = [50, 75, 95, 99, 99.9, 99.99]
ATTEMPT_COLUMNS = [f.name for f in SEND_ATTEMPTS]
# the natural key of each table (rows are compared after sorting both sides by it)
KEYS = {
    "isolation_intervals": ["producer", "broker", "start_ms"],
    "broker_windows": ["broker", "window_start_ms"],
    "queue_windows": ["broker", "queue_id", "window_start_ms"],
    "producer_windows": ["producer", "window_start_ms"],
    "run_summary": ["scope"],
    "fault_windows": ["fault", "period", "scope"],
}

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
    for name, dtype in (
        ("busy_kind", "string"),
        ("store_queue_depth", "Int32"),
        ("store_service_us", "Int64"),
    ):
        df[name] = pd.array([None] * len(df), dtype)  # brokers.coupling open: no closed-loop store
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


def edge_tables(rows_a: list[tuple], rows_r: list[tuple]) -> tuple[pa.Table, pa.Table]:
    """Attempt and result rows as the simulator returns them (core schemas, no run_id)."""
    a_names = ["producer", "seq", "attempt", "start_ts_ms", "latency_ms", "broker", "queue_id", "outcome"]
    a_names += ["fault_isolated_until_ms", "wire_bytes"]
    a = pa.Table.from_pylist([dict(zip(a_names, r, strict=True)) for r in rows_a])
    a = a.append_column(
        "response_code",
        pa.array([14 if o == "broker:14" else None for o in a.column("outcome").to_pylist()], pa.int32()),
    )
    stored = pa.array([o == "ok" or o.startswith("status:") for o in a.column("outcome").to_pylist()])
    a = a.append_column("stored", stored)
    end = pc.add(a.column("start_ts_ms"), a.column("latency_ms"))
    a = a.append_column("stored_ts_ms", pc.if_else(stored, end, pa.scalar(None, pa.int64())))
    r_names = ["producer", "seq", "status", "attempts", "retry_budget_exhausted", "born_ts_ms", "send_ts_ms"]
    r_names += ["latency_ms", "wire_bytes", "broker", "queue_id"]
    r = pa.Table.from_pylist([dict(zip(r_names, row, strict=True)) for row in rows_r])
    send, born, lat = (
        np.asarray(r.column(c).to_numpy(), np.int64) for c in ("send_ts_ms", "born_ts_ms", "latency_ms")
    )
    n = r.num_rows
    extra = {
        "uniq_msg_id": pa.array([f"id{i}" for i in range(n)]),
        "send_mode": pa.array(["sync"] * n),
        "error": pa.nulls(n, pa.string()),
        "brokers_sent": pa.nulls(n, pa.list_(pa.string())),
        "end_ts_ms": pa.array(send + lat),
        "latency_us": pa.array(lat * 1000),
        "queue_wait_ms": pa.array(send - born),
        "compressed": pa.array([False] * n),
        "sys_flag": pa.array([0] * n, pa.int32()),
        "sender_thread": pa.array([0] * n, pa.int32()),
    }
    for k, v in extra.items():
        r = r.append_column(k, v)
    a_schema = schemas.without_run_id(schemas.SEND_ATTEMPTS)
    for name in schemas.STORE_ATTEMPT_COLUMNS:  # brokers.coupling open: null
        a = a.append_column(name, pa.nulls(a.num_rows, a_schema.field(name).type))
    r_schema = schemas.without_run_id(schemas.SEND_RESULTS)
    return a.select(a_schema.names).cast(a_schema), r.select(r_schema.names).cast(r_schema)


def merged_in_shuffled_order(
    aggs: list[summaries.SummaryAggregates], seed: int
) -> summaries.SummaryAggregates:
    """Merge in a random order and grouping: merge(merge(some), merge(others), ...)."""
    aggs = list(aggs)
    random.Random(seed).shuffle(aggs)
    if len(aggs) < 3:
        return summaries.merge(aggs)
    cut = len(aggs) // 2
    return summaries.merge([summaries.merge(aggs[cut:]), summaries.merge(aggs[:cut])])


def unbatched_messages(results: pa.Table) -> pa.Table:
    """What producer_aggregates reads of the messages, for results of messages sent alone (no batch)."""
    keys = results.select(["producer", "seq"])
    return keys.append_column("batch_id", pa.nulls(keys.num_rows, pa.int64()))


def core_summaries(
    attempts: pa.Table,
    results: pa.Table,
    window_ms: int,
    *,
    variant: str | None = None,
    messages: pa.Table | None = None,
    faults: Sequence[summaries.FaultSpan] = (),
) -> list[summaries.SummaryAggregates]:
    """One aggregate per producer, as the producer tasks make them (``messages``: the results' own, or
    none in a batch; ``faults``: the scenario's)."""
    keys = {"variant": variant} if variant is not None else None
    messages = unbatched_messages(results) if messages is None else messages
    a, r, m = by_producer(attempts), by_producer(results), by_producer(messages)
    empty = attempts.schema.empty_table()
    return [
        summaries.producer_aggregates(a.get(p, empty), r[p], window_ms, keys, messages=m[p], faults=faults)
        for p in r
    ]


def core_tables(attempts: pa.Table, results: pa.Table, window_ms: int) -> dict[str, pa.Table]:
    return summaries.summary_tables(summaries.merge(core_summaries(attempts, results, window_ms)))


def core_tables_of(
    attempts: pa.Table,
    results: pa.Table,
    messages: pa.Table,
    window_ms: int,
    faults: Sequence[summaries.FaultSpan] = (),
) -> dict[str, pa.Table]:
    return summaries.summary_tables(
        summaries.merge(core_summaries(attempts, results, window_ms, messages=messages, faults=faults))
    )


def rows_of(table: pa.Table, columns: Sequence[str]) -> list[tuple]:
    """The rows of ``columns``, sorted (None sorts first)."""
    rows = [tuple(r[c] for c in columns) for r in table.select(list(columns)).to_pylist()]
    return sorted(rows, key=lambda r: tuple((v is not None, v) for v in r))


def expected_rows(rows: list[tuple]) -> list[tuple]:
    return sorted(rows, key=lambda r: tuple((v is not None, v) for v in r))


@pytest.fixture(scope="module")
def fixed() -> tuple[pa.Table, pa.Table]:
    """ATTEMPTS and RESULTS as the simulator returns them."""
    return edge_tables(ATTEMPTS, RESULTS)


@pytest.fixture(scope="module")
def summary(fixed: tuple[pa.Table, pa.Table]) -> pa.Table:
    """run_summary of the fixed tables."""
    return core_tables(*fixed, 1000)["run_summary"]


# ---- Gini (plain reference and the core's) ----------------------------------------------------------


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


GINI_CASES = {
    "even": [7, 7, 7, 7],
    "one-hot": [0, 0, 0, 9],
    "ramp": [1, 2, 3, 4],
    "two-idle": [0, 0, 1, 3],
    "random": list(np.random.default_rng(11).integers(0, 50, 16)),
}


def test_queue_spread_equals_the_reference_with_idle_queues() -> None:
    """The core's skew and Gini from partials (idle queues only counted): the plain reference's."""
    for g, values in GINI_CASES.items():
        present = sorted(int(v) for v in values if v > 0)  # no zeros: idle queues are not rows
        ranks = np.arange(1, len(present) + 1)
        skew, gini, valid = summaries.queue_spread(
            np.array([len(present)]),
            np.array([sum(present)]),
            np.array([max(present)]),
            np.array([int((ranks * np.array(present)).sum())]),
            np.array([len(values)]),
        )
        assert valid[0]
        assert gini[0] == pytest.approx(analysis.gini(values), abs=1e-12), g
        assert skew[0] == pytest.approx(analysis.skew(values), abs=1e-12), g
        if g == "two-idle":
            assert gini[0] == pytest.approx(0.625)
        if g == "one-hot":
            assert skew[0] == pytest.approx(4.0)


# ---- isolation intervals ------------------------------------------------------------------------


def test_isolation_interval_reference_on_hand_made_attempts() -> None:
    got = analysis.isolation_intervals(attempts_pandas(), keys=["run_id"])
    assert list(got.itertuples(index=False, name=None)) == [("r", *i) for i in sorted(INTERVALS)]
    assert analysis.isolation_intervals(attempts_pandas().iloc[0:0], keys=["run_id"]).empty


def test_isolation_intervals_hand_computed(fixed: tuple[pa.Table, pa.Table]) -> None:
    attempts, _ = fixed
    got = summaries.isolation_intervals(attempts).to_pylist()
    assert [tuple(r.values()) for r in got] == sorted(INTERVALS)
    assert (
        core_tables(*fixed, 1000)["isolation_intervals"].to_pylist()
        == summaries.isolation_intervals(attempts).to_pylist()
    )


def test_isolation_intervals_equal_the_reference() -> None:
    attempts, _ = edge_tables(EDGE_ATTEMPTS, EDGE_RESULTS)
    got = summaries.isolation_intervals(attempts).to_pylist()
    ref = analysis.isolation_intervals(attempts.to_pandas())
    assert [tuple(r.values()) for r in got] == list(ref.itertuples(index=False, name=None))
    assert summaries.isolation_intervals(attempts.slice(0, 0)).num_rows == 0


# ---- windows, hand-computed ----------------------------------------------------------------------

BROKER_WINDOW_COLUMNS = (
    "broker",
    "window_start_ms",
    "sends",
    "ok",
    "failed_timeout",
    "failed_connect",
    "failed_broker_error",
    "not_store_ok",
    "failed_other",
    "retries",
    "bytes",
    "error_rate",
    "publish_rate_per_s",
    "isolated_producers",
    "queue_skew",
    "queue_gini",
)


def test_broker_windows_hand_computed(fixed: tuple[pa.Table, pa.Table]) -> None:
    got = core_tables(*fixed, 1000)["broker_windows"]
    expected = [
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
    ]
    assert rows_of(got, BROKER_WINDOW_COLUMNS) == expected_rows(expected)


def test_queue_windows_hand_computed(fixed: tuple[pa.Table, pa.Table]) -> None:
    got = core_tables(*fixed, 2000)["queue_windows"]
    columns = ("broker", "queue_id", "window_start_ms", "sends", "skew")
    expected = [
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
    ]
    assert rows_of(got, columns) == expected_rows(expected)


def test_producer_windows_hand_computed(fixed: tuple[pa.Table, pa.Table]) -> None:
    got = core_tables(*fixed, 1000)["producer_windows"]
    columns = (
        "producer",
        "window_start_ms",
        "sends",
        "ok",
        "failed",
        "rejected",
        "attempts",
        "retries",
        "retry_budget_exhausted",
        "bytes",
        "publish_rate_per_s",
        "error_rate",
        "queue_skew",
        "queue_gini",
        "isolated_brokers",
    )
    expected = [
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
    ]
    assert rows_of(got, columns) == expected_rows(expected)


def test_run_summary_hand_computed(summary: pa.Table) -> None:
    columns = (
        "scope",
        "messages",
        "ok",
        "failed",
        "rejected",
        "attempts",
        "retries",
        "retry_budget_exhausted",
        "share",
        "sends",
        "failed_timeout",
        "failed_broker_error",
        "not_store_ok",
        "failed_other",
        "attempt_error_rate",
        "bytes",
        "duration_ms",
        "publish_rate_per_s",
        "error_rate",
        "isolations",
        "isolated_ms",
    )
    expected = [
        # isolated_ms is clipped at the run's last send end (5000): 405 + 2300 + 1900 + 4000
        ("all", 10, 6, 2, 1, 10, 1, 1, 1.0, 10, 1, 1, 1, 1, 0.4, 1450, 5000, 1.2, 0.3, 4, 8605),
        ("a", 2, 2, 0, 0, 3, 1, 0, 2 / 7, 3, 0, 0, 0, 1, 1 / 3, 210, 5000, 0.4, 0.0, 1, 1900),
        ("b", 5, 4, 0, 0, 5, 0, 0, 5 / 7, 7, 1, 1, 1, 0, 3 / 7, 1240, 5000, 0.8, 0.0, 3, 6705),
    ]
    assert rows_of(summary, columns) == expected_rows(expected)
    spread = {r["scope"]: r for r in summary.to_pylist()}  # 3 rows
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


def test_run_summary_percentiles_are_numpys(summary: pa.Table) -> None:
    """Latency and queue wait per scope of the fixed tables: numpy's percentiles (linear between the
    closest ranks) and max. The send call's latency on "all" only; a broker's latency is that of every
    attempt sent to it, the failed and timed-out ones included (they were left out when a broker's
    figure was its stored results' send latency: broker b's p99 read 1 ms less)."""
    rows = {r["scope"]: r for r in summary.to_pylist()}  # 3 rows
    local, attempts = results_pandas(), attempts_pandas()
    stored = local[~local.status.isin(["FAILED", "REJECTED"]) & local.broker.notna()]
    attempt_names = schemas.ATTEMPT_LATENCY_COLUMNS
    have = [rows["all"][c] for c in summaries.PERCENTILE_COLUMNS]
    np.testing.assert_allclose(have, np.percentile(local.latency_ms, QS), rtol=1e-12)
    assert rows["all"]["latency_max_ms"] == local.latency_ms.max()
    for scope, sent in [
        ("all", attempts),
        ("a", attempts[attempts.broker == "a"]),
        ("b", attempts[attempts.broker == "b"]),
    ]:
        np.testing.assert_allclose(
            [rows[scope][c] for c in attempt_names[:-1]], np.percentile(sent.latency_ms, QS), rtol=1e-12
        )
        assert rows[scope][attempt_names[-1]] == sent.latency_ms.max(), scope
        if scope != "all":
            assert (sent.outcome != "ok").any(), scope  # failed attempts count
            assert all(rows[scope][c] is None for c in (*summaries.PERCENTILE_COLUMNS, "latency_max_ms"))
    for scope, g in [
        ("all", local),
        ("a", stored[stored.broker == "a"]),
        ("b", stored[stored.broker == "b"]),
    ]:
        np.testing.assert_allclose(
            [rows[scope]["queue_wait_p50_ms"], rows[scope]["queue_wait_p99_ms"]],
            np.percentile(g.queue_wait_ms, [50, 99]),
            rtol=1e-12,
        )


@pytest.mark.spark
def test_exact_percentiles_are_sparks_percentile_to_the_bit(spark) -> None:
    """The tables' percentiles are Spark's exact ``percentile`` (Percentile.getPercentile), value for
    value: one value, two, ties, odd and even counts, a long tail; and numpy's to rounding."""
    from pyspark.sql import functions as F

    rng = np.random.default_rng(5)
    groups = {
        0: np.array([7]),
        1: np.array([3, 10]),
        2: np.array([5] * 40 + [6] * 3 + [900]),
        3: np.floor(np.exp(rng.normal(1.5, 1.2, 301)) + rng.pareto(1.5, 301) * 5).astype(int),
        4: rng.integers(0, 5_000_000, 400),
    }
    ps = summaries.PERCENTILES
    df = spark.createDataFrame([(g, int(v)) for g, vs in groups.items() for v in vs], "g int, v long")
    pct = F.percentile(F.col("v").cast("double"), F.array(*[F.lit(p) for p in ps]))
    by_spark = {r["g"]: r["p"] for r in df.groupBy("g").agg(pct.alias("p")).collect()}  # 5 rows
    group = np.concatenate([[g] * len(v) for g, v in groups.items()]).astype(np.int64)
    values = np.concatenate(list(groups.values())).astype(np.int64)
    got, has = summaries.exact_percentiles(group, values, np.ones(len(values), np.int64), len(groups), ps)
    assert has.all()
    for g, vs in groups.items():
        assert got[g].tolist() == by_spark[g], g
        np.testing.assert_allclose(got[g], np.percentile(vs, QS), rtol=1e-12, err_msg=str(g))


def test_exact_percentiles_equal_numpy_and_ties() -> None:
    rng = np.random.default_rng(3)
    groups = {0: [7], 1: [3, 10], 2: [5] * 40 + [6] * 3 + [900], 3: list(rng.integers(0, 50_000, 2001))}
    g = np.concatenate([[k] * len(v) for k, v in groups.items()]).astype(np.int64)
    v = np.concatenate([np.asarray(x, np.int64) for x in groups.values()])
    pairs, count = np.unique(np.stack([g, v]), axis=1, return_counts=True)
    group, value = pairs
    ps = summaries.PERCENTILES
    got, has = summaries.exact_percentiles(group, value, count, 6, ps)
    assert has.tolist() == [True] * 4 + [False] * 2
    for k, values in groups.items():
        np.testing.assert_allclose(got[k], np.percentile(values, [100 * p for p in ps]), rtol=1e-12)
    assert got[0].tolist() == [7.0] * 6 and got[2, 0] == 5.0


def test_outcome_kinds_are_one_table() -> None:
    kinds = {
        "ok": "ok",
        "remoting:timeout": "failed_timeout",
        "remoting:connect": "failed_connect",
        "broker:14": "failed_broker_error",
        "status:FLUSH_DISK_TIMEOUT": "not_store_ok",
        "client": "failed_other",
        "remoting:send_request": "failed_other",
    }
    for label, column in kinds.items():
        assert summaries.OUTCOME_COLUMNS[summaries.outcome_kind(label)] == column, label
    assert summaries.OUTCOME_COLUMNS[-1] == "failed_other"


# ---- every table and column against the reference (tests/analysis.py) ------------------------------


def with_keys(table: pa.Table, **keys: str) -> pa.Table:
    for i, (k, v) in enumerate(keys.items()):
        table = table.add_column(i, k, pa.array([v] * table.num_rows, pa.string()))
    return table


def assert_reference_tables(
    got: Mapping[str, pa.Table],
    attempts: pa.Table,
    results: pa.Table,
    messages: pa.Table,
    window_ms: int,
    faults: Sequence[summaries.FaultSpan] = (),
) -> None:
    """Every summary table equals :func:`analysis.summary_tables` of the same rows (and faults)."""
    spans = [(f.broker, f.kind, f.start_ms, f.end_ms) for f in faults]
    a, r, m = attempts.to_pandas(), results.to_pandas(), messages.to_pandas()
    want = analysis.summary_tables(a, r, m, window_ms, spans)
    assert set(got) == set(want) == set(summaries.SUMMARY_TABLES)
    for name, table in got.items():
        assert_rows(table, want[name], KEYS[name], name)


def _simulated(sc: Scenario) -> tuple[pa.Table, pa.Table, pa.Table]:
    messages = workload.generate(sc)
    out = engine.simulate(messages, sc)
    return out.attempts, out.results, messages


@pytest.fixture(scope="module", params=sorted(RUNS))
def local_run(request: pytest.FixtureRequest) -> tuple[pa.Table, pa.Table, pa.Table, int, str]:
    """(attempts, results, messages, window_ms, run id) of a sample run simulated here (no Spark)."""
    return (*_simulated(scenario_of(request.param)), RUNS[request.param][1], request.param)


def faults_of(run_id: str) -> tuple[summaries.FaultSpan, ...]:
    return summaries.fault_spans(scenario_of(run_id).faults)


def test_summary_tables_equal_the_reference(local_run: tuple) -> None:
    """The sample runs, simulated here: every table and column, the per-producer aggregates merged in a
    shuffled order."""
    attempts, results, messages, window_ms, run_id = local_run
    faults = faults_of(run_id)
    aggs = core_summaries(attempts, results, window_ms, messages=messages, faults=faults)
    got = summaries.summary_tables(merged_in_shuffled_order(aggs, seed=len(run_id)))
    assert all(got[name].num_rows > 0 for name in summaries.SUMMARY_TABLES)
    (every,) = got["run_summary"].filter(pc.equal(got["run_summary"].column("scope"), "all")).to_pylist()
    assert every["lost"] > 0 and every["failed_but_stored"] > 0 and every["isolations"] > 0
    assert_reference_tables(got, attempts, results, messages, window_ms, faults)


def _total(table: pa.Table, name: str) -> int:
    return pc.sum(table.column(name)).as_py() or 0


def test_windows_add_up_to_the_run(local_run: tuple) -> None:
    """Whatever the rules per cell: the windows of each table add up to the run's "all" row and to the
    rows they count (attempts, results), and the brokers' rows of run_summary to its "all" row."""
    attempts, results, messages, window_ms, _ = local_run
    tables = core_tables_of(attempts, results, messages, window_ms)
    summary = tables["run_summary"].to_pylist()
    (every,) = [r for r in summary if r["scope"] == "all"]
    brokers, pw, bw = (
        [r for r in summary if r["scope"] != "all"],
        tables["producer_windows"],
        tables["broker_windows"],
    )
    assert (
        _total(bw, "sends") == _total(tables["queue_windows"], "sends") == every["sends"] == attempts.num_rows
    )
    assert _total(tables["queue_windows"], "ok") == _total(bw, "ok")
    for name in (*schemas.OUTCOME_COLUMNS[1:], "bytes", *schemas.BUSY_COLUMNS):
        assert _total(bw, name) == every[name] == sum(r[name] for r in brokers), name
    assert _total(pw, "sends") == every["messages"] == results.num_rows
    for name in ("ok", "failed", "rejected", "attempts", "retries", "retry_budget_exhausted"):
        assert _total(pw, name) == every[name], name
    assert every["attempts"] == attempts.num_rows
    for name in schemas.DELIVERY_COLUMNS:
        assert _total(pw, name) == _total(bw, name) == every[name], name
    assert every["isolations"] == tables["isolation_intervals"].num_rows
    assert sum(r["share"] for r in brokers) == pytest.approx(1.0)


def test_any_split_of_the_producers_merges_to_the_whole(local_run: tuple) -> None:
    """Aggregates of any grouping of whole producers, merged in any order, give the tables of all the
    producers aggregated at once."""
    attempts, results, messages, window_ms, run_id = local_run
    faults = faults_of(run_id)
    whole = summaries.summary_tables(
        summaries.producer_aggregates(attempts, results, window_ms, messages=messages, faults=faults)
    )
    producers = sorted(pc.unique(results.column("producer")).to_pylist())
    rng = random.Random(len(producers))
    for _ in range(3):
        groups: dict[int, list[int]] = {}
        for p in producers:
            groups.setdefault(rng.randrange(2), []).append(p)

        def of(table: pa.Table, group: list[int]) -> pa.Table:
            return table.filter(pc.is_in(table.column("producer"), pa.array(group, pa.int32())))

        aggs = [
            summaries.producer_aggregates(
                of(attempts, g), of(results, g), window_ms, messages=of(messages, g), faults=faults
            )
            for g in groups.values()
        ]
        got = summaries.summary_tables(merged_in_shuffled_order(aggs, rng.randrange(100)))
        for name in summaries.SUMMARY_TABLES:
            assert got[name].equals(whole[name]), name


def test_closed_loop_summary_tables_equal_the_reference() -> None:
    """The closed-loop store's columns (busy rejections by kind, queue depth, utilisation) too."""
    from test_engine_joint import CAPACITY, messages, run, scenario

    out = run(1.2 * CAPACITY)
    m = messages(scenario(1.2 * CAPACITY))
    got = summaries.summary_tables(summaries.producer_aggregates(out.attempts, out.results, 2000, messages=m))
    assert pc.sum(got["broker_windows"].column("busy_timeout_clean_queue")).as_py() > 0
    assert_reference_tables(got, out.attempts, out.results, m, 2000)


@pytest.mark.spark
@pytest.mark.parametrize("run_id", sorted(RUNS))
def test_the_one_pass_summary_tables_equal_the_core_and_the_reference(sample_runs: Path, run_id: str) -> None:
    """What the pipeline committed = the core functions called here on its committed attempts and results,
    merged in another order = the reference."""
    attempts, results, messages = run_tables(sample_runs, run_id, "send_attempts", "send_results", "messages")
    results = results.select(schemas.without_run_id(schemas.SEND_RESULTS).names)  # as the simulator gives
    window_ms, faults = RUNS[run_id][1], faults_of(run_id)
    aggs = core_summaries(attempts, results, window_ms, messages=messages, faults=faults)
    local = summaries.summary_tables(merged_in_shuffled_order(aggs, seed=len(run_id)))
    assert set(local) == set(summaries.SUMMARY_TABLES)
    for name in summaries.SUMMARY_TABLES:
        (committed,) = run_tables(sample_runs, run_id, name)
        assert local[name].schema == schemas.data_schema(schemas.TABLES[name].schema), name
        assert local[name].num_rows > 0, name
        assert_same(local[name], committed, KEYS[name])
    assert_reference_tables(local, attempts, results, messages, window_ms, faults)


@pytest.mark.spark
def test_merge_order_does_not_matter(sample_runs: Path) -> None:
    attempts, results, messages = run_tables(
        sample_runs, "mixed-533", "send_attempts", "send_results", "messages"
    )
    results = results.select(schemas.without_run_id(schemas.SEND_RESULTS).names)
    aggs = core_summaries(attempts, results, 700, messages=messages)
    one = merged_in_shuffled_order(aggs, 1)
    for seed in (2, 3):
        other = merged_in_shuffled_order(aggs, seed)
        for name, table in one.tables().items():
            assert table.equals(other.tables()[name]), name
    with pytest.raises(ValueError, match="more than one aggregate"):
        summaries.merge([aggs[0], aggs[0]])
    with pytest.raises(ValueError, match="cannot be merged"):
        summaries.merge(
            [
                aggs[0],
                summaries.producer_aggregates(attempts, results, 1000, messages=unbatched_messages(results)),
            ]
        )


# ---- a comparison: keys (run_id, variant) on the same rows ---------------------------------------------

VARIANTS = {
    "fault_off": {"producers": {"send_latency_fault_enable": False}},
    "fault_on": {},
    "line5": {
        "producers": {"client_version": "5.3.3"},
        "workload": {"messages": 1200},
        "faults": [  # a variant's own fault timeline: its own fault_windows rows
            {"broker": "broker-a", "kind": "hang", "start_s": 1, "end_s": 2},
            {"broker": "broker-c", "kind": "slowdown", "start_s": 1.5, "end_s": 3, "factor": 20.0},
        ],
    },
}


def _variant(tables: Mapping[str, pa.Table], variant: str) -> dict[str, pa.Table]:
    """The rows of one variant, without the key column."""
    return {
        name: t.filter(pc.equal(t.column("variant"), variant)).drop_columns(["variant"])
        for name, t in tables.items()
    }


def test_comparison_keys_equal_the_reference_per_variant() -> None:
    """Three variants in one table set, as jobs/compare.py summarises them (key variant): each variant's
    rows are the reference's of its own run."""
    window_ms = 1500
    runs, aggs = {}, []
    for name, over in VARIANTS.items():
        sc = scenario_from_mapping(
            {"name": "cmp", **deep_update(deep_update(SAMPLE_BASE, RUNS["mixed-498"][0]), over)}
        )
        faults = summaries.fault_spans(sc.faults)
        runs[name] = (*_simulated(sc), window_ms, faults)
        attempts, results, messages = runs[name][:3]
        aggs += core_summaries(attempts, results, window_ms, variant=name, messages=messages, faults=faults)
    got = summaries.summary_tables(merged_in_shuffled_order(aggs, 7))
    for name, table in got.items():
        assert table.column_names[0] == "variant"
        if name != "isolation_intervals":  # fault_off isolates nothing
            assert set(table.column("variant").to_pylist()) == set(VARIANTS), name
    line5 = _variant(got, "line5")["fault_windows"]
    assert set(line5.column("fault_kind").to_pylist()) == {"hang", "slowdown"}
    for variant, run in runs.items():
        assert_reference_tables(_variant(got, variant), *run)


# ---- hand-made edge cases ----------------------------------------------------------------------------

# (producer, seq, attempt, start, latency, broker, queue, outcome, fault_isolated_until_ms, wire_bytes)
EDGE_ATTEMPTS = [
    (0, 0, 0, 0, 600, "b", 0, "remoting:timeout", 30600, 100),  # b isolated ... past the run's end
    (0, 0, 1, 600, 5, "a", 0, "ok", None, 100),
    (0, 1, 0, 1000, 5, "b", 1, "ok", None, 200),  # ... until a fast success (4.9 overwrites)
    (0, 2, 0, 2000, 700, "b", 0, "broker:14", 32700, 300),
    (0, 3, 0, 3000, 800, "b", 1, "status:FLUSH_DISK_TIMEOUT", 33800, 400),  # touching: extends
    (0, 4, 0, 3790, 10, "b", 1, "ok", 5000, 10),  # ends at 3800 too: a tie in end order
    (1, 0, 0, 100, 3000, "a", 1, "client", 603100, 50),  # 600 s: outlasts the run by far
    (1, 1, 0, 3200, 10, "b", 0, "ok", None, 80),
    (1, 2, 0, 9000, 10, "c", 0, "ok", None, 80),  # c: one attempt, after an empty window
    (2, 0, 0, 500, 500, "b", 0, "ok", 10500, 70),
    (2, 1, 0, 4000, 1000, "b", 1, "ok", 15000, 90),  # extends while isolated
    (2, 2, 0, 4100, 5, "b", 1, "ok", None, 90),  # same latency: ties in the percentiles
    (2, 2, 1, 4105, 5, "b", 1, "ok", None, 90),
    (3, 0, 0, 4500, 500, "a", 1, "ok", 5000, 60),  # until == end: not isolated
    (3, 1, 0, 6100, 500, "a", 1, "status:SLAVE_NOT_AVAILABLE", None, 60),  # a stored not-OK result
]
# (producer, seq, status, attempts, exhausted, born, send, latency, wire_bytes, broker, queue)
EDGE_RESULTS = [
    (0, 0, "SEND_OK", 2, False, 0, 0, 605, 100, "a", 0),
    (0, 1, "SEND_OK", 1, False, 950, 1000, 5, 200, "b", 1),
    (0, 2, "FAILED", 1, True, 1990, 2000, 700, 300, "b", 0),
    (0, 3, "FLUSH_DISK_TIMEOUT", 1, False, 3000, 3000, 800, 400, "b", 1),
    (0, 4, "SEND_OK", 1, False, 3700, 3790, 10, 10, "b", 1),
    (1, 0, "FAILED", 1, False, 100, 100, 3000, 50, "a", 1),
    (1, 1, "SEND_OK", 1, False, 3150, 3200, 10, 80, "b", 0),
    (1, 2, "SEND_OK", 1, False, 8000, 9000, 10, 80, "c", 0),
    (2, 0, "SEND_OK", 1, False, 500, 500, 500, 70, "b", 0),
    (2, 1, "SEND_OK", 1, False, 3500, 4000, 1000, 90, "b", 1),
    (2, 2, "SEND_OK", 2, False, 4100, 4100, 10, 90, "b", 1),
    (3, 0, "SEND_OK", 1, False, 4500, 4500, 500, 60, "a", 1),
    (3, 1, "SLAVE_NOT_AVAILABLE", 1, False, 5800, 5950, 650, 60, "a", 1),  # its attempt starts later
    (3, 2, "REJECTED", 0, False, 4600, 4600, 0, 70, None, None),
    (4, 0, "REJECTED", 0, False, 10, 10, 0, 70, None, None),  # a producer with nothing sent
    (4, 1, "REJECTED", 0, False, 20_000, 20_000, 0, 70, None, None),
]


@pytest.mark.parametrize("window_ms", [1000, 700, 10_000])
def test_edge_cases_equal_the_reference(window_ms: int) -> None:
    """Empty windows, a broker without attempts in a window, ties, single values, all-rejected
    producers (and a whole variant of them), intervals past the end of the run, equal end times."""
    attempts, results = edge_tables(EDGE_ATTEMPTS, EDGE_RESULTS)
    rejected = results.filter(pc.equal(results.column("producer"), 4))
    nothing = attempts.schema.empty_table()
    aggs = core_summaries(attempts, results, window_ms, variant="v")
    aggs += core_summaries(nothing, rejected, window_ms, variant="only-rejected")
    got = summaries.summary_tables(merged_in_shuffled_order(aggs, window_ms))
    for variant, (a, r) in {"v": (attempts, results), "only-rejected": (nothing, rejected)}.items():
        assert_reference_tables(_variant(got, variant), a, r, unbatched_messages(r), window_ms)
    # and without keys, the run alone
    got = summaries.summary_tables(summaries.merge(core_summaries(attempts, results, window_ms)))
    assert_reference_tables(got, attempts, results, unbatched_messages(results), window_ms)


def test_aggregates_travel_as_bytes() -> None:
    attempts, results = edge_tables(EDGE_ATTEMPTS, EDGE_RESULTS)
    aggs = core_summaries(attempts, results, 1000, variant="v")
    for agg in aggs:
        back = summaries.SummaryAggregates.from_bytes(agg.to_bytes())
        assert (back.window_ms, back.key_names) == (1000, ("variant",))
        for name, table in agg.tables().items():
            assert back.tables()[name].equals(table), name
    with pytest.raises(ValueError, match="not summary aggregates"):
        summaries.SummaryAggregates.from_bytes(b"")


# ---- delivery: duplicates, lost and failed-but-stored messages ---------------------------------------


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_run_summary_counts_duplicates_lost_and_failed_but_stored_per_scope(version: str) -> None:
    # broker-a answers after 1.5 s, broker-b hangs. 5.3.3 gives up on broker-a at
    # sendMsgMaxTimeoutPerRequest (1000 ms) and retries within its 2500 ms (DefaultMQProducerImpl.
    # sendDefaultImpl): a duplicate. 4.9.8 (1000 ms in all) cannot retry after the timeout: FAILED,
    # stored anyway; its oneway sends to the hung broker-b are lost (5.3.3's reachability filter keeps
    # them off it: MQFaultStrategy.selectOneMessageQueue)
    limits = (
        {"send_msg_max_timeout_per_request_ms": 1000, "send_msg_timeout_ms": 2500}
        if version == "5.3.3"
        else {"send_msg_timeout_ms": 1000}
    )
    sc = scenario_from_mapping(
        {
            "cluster": {"brokers": ["broker-a", "broker-b", "broker-c"]},
            "producers": {
                "count": 2,
                "client_version": version,
                **limits,
                "send_mode": {"sync": 0.8, "oneway": 0.2},
            },
            "workload": {"messages": 300, "rate_per_s": 4.0, "message_types": {"normal": 0.7, "batch": 0.3}},
            "brokers": {
                "default": {"latency": {"median_ms": 2.0, "sigma": 0.0, "spike_probability": 0.0}},
                "broker-a": {"latency": {"median_ms": 1500.0, "sigma": 0.0, "spike_probability": 0.0}},
            },
            "faults": [{"broker": "broker-b", "kind": "hang", "start_s": 0, "end_s": 1000}],
        }
    )
    messages = workload.generate(sc)
    out = engine.simulate(messages, sc)
    copies = store.stored_copy_counts(messages, out.attempts, out.results)
    want_all = store.delivery_counts(copies)
    if version == "5.3.3":
        assert want_all["duplicates"] > 0
    else:
        assert want_all["lost"] > 0 and want_all["failed_but_stored"] > 0
    aggs = core_summaries(out.attempts, out.results, 1000, messages=messages)
    summary = {
        r["scope"]: r for r in summaries.summary_tables(summaries.merge(aggs))["run_summary"].to_pylist()
    }
    assert {k: summary["all"][k] for k in schemas.DELIVERY_COLUMNS} == want_all
    # per window, in the same pass: producer_windows by the window of the send's start, broker_windows
    # also by the broker the send last went to (a failed send's too); each sums to run_summary's "all"
    tables = summaries.summary_tables(summaries.merge(aggs))
    for name in ("producer_windows", "broker_windows"):
        sums = {k: pc.sum(tables[name].column(k)).as_py() for k in schemas.DELIVERY_COLUMNS}
        assert sums == want_all, name
    windows = tables["producer_windows"].to_pandas().set_index(["producer", "window_start_ms"])
    res_w = out.results.select(["producer", "seq", "send_ts_ms", "broker"]).to_pandas()
    res_w["window_start_ms"] = res_w.send_ts_ms // 1000 * 1000
    flagged = copies.to_pandas().merge(res_w, on=["producer", "seq"])
    flags = store.delivery_flags(pa.array(flagged.status, pa.string()), flagged.copies.to_numpy())
    for k, v in flags.items():
        flagged[k] = v
    per_window = flagged.groupby(["producer", "window_start_ms"])[list(schemas.DELIVERY_COLUMNS)].sum()
    got = windows.loc[per_window.index, list(schemas.DELIVERY_COLUMNS)]
    assert (got.to_numpy() == per_window.to_numpy()).all()
    bw = tables["broker_windows"].to_pandas().set_index(["broker", "window_start_ms"])
    per_broker = flagged.groupby(["broker", "window_start_ms"])[list(schemas.DELIVERY_COLUMNS)].sum()
    assert (
        bw.loc[per_broker.index, list(schemas.DELIVERY_COLUMNS)].to_numpy() == per_broker.to_numpy()
    ).all()
    # a broker's row counts the messages whose result it stored (or, oneway, was sent to)
    res = out.results.select(["producer", "seq", "broker", "status"]).to_pandas()
    per = copies.to_pandas().merge(res, on=["producer", "seq", "status"])
    for broker in sc.cluster.brokers:
        mine = per[(per.broker == broker) & ~per.status.isin(["FAILED", "REJECTED"])]
        got = {k: summary[broker][k] for k in schemas.DELIVERY_COLUMNS}
        flags = store.delivery_flags(pa.array(mine.status, pa.string()), mine.copies.to_numpy())
        assert got == {k: int(v.sum()) for k, v in flags.items()}, broker


# ---- the closed-loop store's columns --------------------------------------------------------------


def test_busy_rejections_queue_depth_and_utilisation_of_closed_loop_brokers() -> None:
    """Past capacity (joint coupling) BrokerFastFailure's sweeper answers [TIMEOUT_CLEAN_QUEUE]
    (BrokerFastFailure.cleanExpiredRequestInQueue, 4.9.8): counted by kind per broker window and in
    run_summary; the queue is deep and the writer busy; per-producer aggregates merge to the whole.
    With coupling open there is no store: zeros and nulls."""
    from test_engine_joint import CAPACITY, messages, run, scenario

    out = run(1.2 * CAPACITY)
    m = messages(scenario(1.2 * CAPACITY))
    whole = summaries.summary_tables(
        summaries.producer_aggregates(out.attempts, out.results, 2000, messages=m)
    )
    parts = []
    for p in range(4):
        keep = lambda t, p=p: t.filter(pc.equal(t.column("producer"), p))  # noqa: E731
        parts.append(
            summaries.producer_aggregates(keep(out.attempts), keep(out.results), 2000, messages=keep(m))
        )
    merged = summaries.summary_tables(summaries.merge(parts))
    for name in ("broker_windows", "producer_windows", "run_summary"):
        assert merged[name].equals(whole[name]), name
    bw, rs, pw = whole["broker_windows"], whole["run_summary"], whole["producer_windows"]
    kinds = out.attempts.column("busy_kind")
    swept = pc.sum(pc.equal(kinds, "TIMEOUT_CLEAN_QUEUE")).as_py()
    assert swept > 0 and pc.sum(bw.column("busy_timeout_clean_queue")).as_py() == swept
    # producer_windows: each producer's sends, in the window the send began, with their rejected attempts
    assert pc.sum(pw.column("busy_timeout_clean_queue")).as_py() == swept
    for p in range(4):
        mine = pw.filter(pc.equal(pw.column("producer"), p))
        rejected = out.attempts.filter(
            pc.and_(pc.equal(out.attempts.column("producer"), p), pc.equal(kinds, "TIMEOUT_CLEAN_QUEUE"))
        )
        assert pc.sum(mine.column("busy_timeout_clean_queue")).as_py() == rejected.num_rows, p
    (all_row,) = rs.filter(pc.equal(rs.column("scope"), "all")).to_pylist()
    assert all_row["busy_timeout_clean_queue"] == swept and all_row["busy_overload"] == 0
    busy = bw.filter(
        pc.and_(
            pc.greater_equal(bw.column("window_start_ms"), 2000), pc.less(bw.column("window_start_ms"), 10000)
        )
    )
    assert (
        pc.min(busy.column("utilisation")).as_py() > 0.9
        and pc.min(busy.column("queue_depth_max")).as_py() >= 10
    )
    assert pc.max(busy.column("queue_depth_mean")).as_py() <= pc.max(busy.column("queue_depth_max")).as_py()

    open_out = run(1.2 * CAPACITY, "open")
    bw = summaries.summary_tables(
        summaries.producer_aggregates(open_out.attempts, open_out.results, 2000, messages=m)
    )["broker_windows"]
    for name in ("queue_depth_mean", "queue_depth_max", "utilisation"):
        assert bw.column(name).null_count == bw.num_rows, name
    assert all(pc.sum(bw.column(n)).as_py() == 0 for n in schemas.BUSY_COLUMNS)


@pytest.mark.parametrize("rows", [1, 7, 250])
def test_producer_fold_of_chunks_equals_the_whole_producer(rows: int) -> None:
    """A producer task folds its aggregates a chunk at a time (rows of whole messages): every table equals
    producer_aggregates of all its rows, the producer-level ones (producer_windows' exact percentiles,
    the isolation intervals, whose pieces end at the next attempt's end in any later chunk) included."""
    sc = scenario_from_mapping(
        {
            "name": "fold",
            "seed": 5,
            "cluster": {"brokers": ["broker-a", "broker-b", "broker-c"], "write_queues": 4},
            "producers": {"count": 1, "threads": 3, "send_latency_fault_enable": True},
            "workload": {
                "messages": 1500,
                "rate_per_s": 300.0,
                "message_types": {"normal": 0.8, "batch": 0.2},
                "invalid": {"bad_topic": 0.01},
            },
            "brokers": {"default": {"errors": {"system_busy": 0.05, "remoting_timeout": 0.02}}},
            "faults": [{"broker": "broker-b", "kind": "slowdown", "start_s": 1, "end_s": 3, "factor": 40.0}],
        }
    )
    messages = workload.generate(sc)
    whole = engine.simulate(messages, sc)
    expected = summaries.producer_aggregates(whole.attempts, whole.results, 1000, messages=messages)
    fold = summaries.ProducerFold(1000)
    chunks = [messages.slice(at, rows) for at in range(0, messages.num_rows, rows)]
    kept = []
    for c in engine.simulate_chunks(chunks, sc):
        fold.add(c.attempts, c.results, c.messages, c.later_start_ms)
        kept.append(fold._intervals.kept)  # the attempts whose isolation piece is not settled yet
    got, want = summaries.merge([fold.result()]), summaries.merge([expected])
    assert max(kept) < whole.attempts.num_rows / 4  # the intervals keep few attempts, not the producer's
    assert want.intervals.num_rows > 0 and want.producer_windows.num_rows > 1
    for name in summaries.AGGREGATE_TABLES:
        assert getattr(got, name).equals(getattr(want, name)), name


def test_interval_fold_closes_an_interval_left_open_by_a_watermark_past_every_attempt() -> None:
    # the watermark of the only part is past every attempt's end: every attempt settles then, the
    # interval stays open (a later attempt could extend it) and must still come out at the end
    attempts = pa.table(
        {
            "producer": [0, 0, 0],
            "seq": [0, 1, 2],
            "attempt": [0, 0, 0],
            "start_ts_ms": [0, 10, 20],
            "latency_ms": [600, 5, 5],
            "broker": ["broker-a"] * 3,
            "queue_id": [0, 0, 0],
            "outcome": ["ok"] * 3,
            "fault_isolated_until_ms": pa.array([30_600, None, None], pa.int64()),
            "wire_bytes": [1, 1, 1],
        }
    )
    fold = summaries.IntervalFold()
    fold.add(AttemptColumns(attempts, 1000), 1_000_000)
    assert fold.kept == 0
    want = [{"producer": 0, "broker": "broker-a", "start_ms": 600, "end_ms": 30_600}]
    assert summaries.isolation_intervals(attempts).to_pylist() == want
    assert fold.result().to_pylist() == want


def test_run_summary_when_no_send_reaches_any_broker() -> None:
    """Every broker in outage for the whole run: no attempt, so no broker is known to the summaries; the
    run's 'all' rows are still made (this crashed with ArrowIndexError: an index into no broker names)."""
    sc = scenario_from_mapping(
        {
            "cluster": {"brokers": ["broker-a", "broker-b"]},
            "producers": {"count": 2, "client_version": "4.9.8", "send_latency_fault_enable": True},
            "workload": {"messages": 40, "rate_per_s": 100.0},
            "faults": [
                {"broker": b, "kind": "outage", "start_s": 0, "end_s": 100} for b in ("broker-a", "broker-b")
            ],
        }
    )
    messages = workload.generate(sc)
    out = engine.simulate(messages, sc)
    assert out.attempts.num_rows == 0
    tables = summaries.summary_tables(
        summaries.merge(core_summaries(out.attempts, out.results, 1000, messages=messages))
    )
    rows = tables["run_summary"].to_pylist()
    assert [r["scope"] for r in rows] == ["all"]
    assert rows[0]["messages"] == 40 and rows[0]["failed"] == 40 and rows[0]["sends"] == 0
