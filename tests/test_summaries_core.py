"""The core summaries (:mod:`rocketsim.summaries`) equal what Spark computes, value for value.

On small real runs made with the pipeline (both client lines, faults, mixed send modes, rejected,
ordered, delay, transactional and batch messages, several producers), every summary and broker-side
table is computed from per-producer (and per-broker) aggregates merged in a shuffled order, and
compared with the tables the pipeline wrote: same rows, same types, floats equal with ``==``, nulls
where Spark has nulls. A comparison (keys run_id, variant) and hand-made edge cases are compared with
``rocketsim.spark.summaries`` run on the same rows.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from rocketsim import schemas, simulate, store, summaries, workload
from rocketsim.scenario import Scenario, scenario_from_mapping
from rocketsim.spark import pipeline
from rocketsim.spark import summaries as spark_summaries
from rocketsim.spark.cli import JobArgs
from rocketsim.spark.session import spark_schema
from rocketsim.warehouse.read import read_arrow

pytestmark = pytest.mark.spark

# the natural key of each table (rows are compared after sorting both sides by it)
KEYS = {
    "isolation_intervals": ["producer", "broker", "start_ms"],
    "broker_windows": ["broker", "window_start_ms"],
    "queue_windows": ["broker", "queue_id", "window_start_ms"],
    "producer_windows": ["producer", "window_start_ms"],
    "run_summary": ["scope"],
    "broker_storage": ["broker", "window_start_ms", "topic", "queue_id"],
    "transactions": ["producer", "seq"],
    "consumer_load": ["consumer_group", "topic", "broker", "queue_id", "consumer"],
}
BASE = {
    "seed": 3,
    "cluster": {"brokers": ["broker-a", "broker-b", "broker-c"], "write_queues": 4, "read_queues": 3},
    "producers": {
        "count": 3,
        "threads": 2,
        "client_version": "4.9.8",
        "send_latency_fault_enable": True,
        "send_mode": {"sync": 0.7, "async": 0.2, "oneway": 0.1},
    },
    "workload": {
        "messages": 3000,
        "rate_per_s": 300.0,
        "delay_levels": [2, 20],
        "message_types": {"normal": 0.6, "ordered": 0.1, "delay": 0.1, "transaction": 0.1, "batch": 0.1},
        "invalid": {"bad_topic": 0.01, "oversize_body": 0.005, "reserved_property": 0.005},
        "body_size": {"distribution": "lognormal", "median": 3000, "sigma": 1.0, "min": 1, "max": 70000},
    },
    "brokers": {"default": {"errors": {"system_error": 0.01, "remoting_timeout": 0.005}}},
    "transactions": {
        "outcome": {"commit": 0.6, "rollback": 0.1, "unknown": 0.3},
        "producer_crash": 0.1,
        "check_interval_ms": 2_000,
    },
    "consumers": {"groups": [{"name": "cg-two", "count": 2}, {"name": "cg-twelve", "count": 12}]},
    "faults": [{"broker": "broker-b", "kind": "outage", "start_s": 2, "end_s": 6}],
}
# run id -> (overrides of BASE, window_ms)
RUNS: dict[str, tuple[dict, int]] = {
    "mixed-498": ({}, 1000),
    "mixed-533": (
        {
            "seed": 5,
            "producers": {
                "count": 4,
                "threads": 3,
                "client_version": "5.3.3",
                "send_latency_fault_enable": True,
                "retry_another_broker_when_not_store_ok": True,
                "send_mode": {"sync": 0.5, "async": 0.3, "oneway": 0.2},
            },
            "brokers": {"default": {"errors": {"flush_disk_timeout": 0.03, "system_error": 0.01}}},
            "transactions": {"check_max": 2},  # some are discarded
            "faults": [{"broker": "broker-c", "kind": "slowdown", "start_s": 1, "end_s": 5, "factor": 40.0}],
        },
        700,
    ),
    "flap-497": (
        {
            "seed": 9,
            "producers": {
                "count": 2,
                "threads": 4,
                "client_version": "4.9.7",
                "send_latency_fault_enable": True,
                "send_mode": {"sync": 1.0},
            },
            "workload": {"messages": 2500, "rate_per_s": 250.0, "hot_share": 0.8, "hot_producers": 1},
            "faults": [
                {
                    "broker": "broker-a",
                    "kind": "flapping",
                    "start_s": 1,
                    "end_s": 9,
                    "period_s": 3,
                    "down_s": 1,
                }
            ],
        },
        2000,
    ),
}


def _deep_update(base: Mapping, over: Mapping) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = (
            _deep_update(base[k], v) if isinstance(v, Mapping) and isinstance(base.get(k), Mapping) else v
        )
    return out


def scenario_of(run_id: str) -> Scenario:
    return scenario_from_mapping({"name": run_id, **_deep_update(BASE, RUNS[run_id][0])})


def by_producer(table: pa.Table) -> dict[int, pa.Table]:
    col = table.column("producer")
    return {p: table.filter(pc.equal(col, p)) for p in sorted(pc.unique(col).to_pylist())}


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


def core_summaries(
    attempts: pa.Table, results: pa.Table, window_ms: int, *, variant: str | None = None
) -> list[summaries.SummaryAggregates]:
    """One aggregate per producer, as the producer tasks make them."""
    keys = {"variant": variant} if variant is not None else None
    a, r = by_producer(attempts), by_producer(results)
    empty = attempts.schema.empty_table()
    return [summaries.producer_aggregates(a.get(p, empty), r[p], window_ms, keys) for p in r]


def assert_same(expected: pa.Table, got: pa.Table, keys: Sequence[str]) -> None:
    """Same rows (sorted by ``keys``), values equal with ``==`` (floats too), nulls where nulls."""
    expected = expected.drop_columns([c for c in ("run_id",) if c in expected.column_names])
    assert sorted(expected.column_names) == sorted(got.column_names)
    order = [(k, "ascending") for k in keys]
    e, g = expected.select(got.column_names).sort_by(order), got.sort_by(order)
    assert e.num_rows == g.num_rows, (e.num_rows, g.num_rows)
    for name in got.column_names:
        assert e.schema.field(name).type == g.schema.field(name).type, name
        ev, gv = e.column(name).to_pylist(), g.column(name).to_pylist()
        if ev != gv:
            i = next(i for i, (x, y) in enumerate(zip(ev, gv, strict=True)) if x != y)
            row = {k: e.column(k)[i].as_py() for k in keys}
            raise AssertionError(f"{name} at {row}: Spark {ev[i]!r}, core {gv[i]!r}")


# ---- runs made with the pipeline ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def warehouse(spark, tmp_path_factory: pytest.TempPathFactory) -> Path:
    wh = tmp_path_factory.mktemp("core-summaries")
    for run_id, (_, window_ms) in RUNS.items():
        sc = scenario_of(run_id)
        args = JobArgs("inline", str(wh), run_id, (), 2, window_ms, quiet=True)
        pipeline.run_generate_simulate(spark, args, sc)
        pipeline.run_broker_side(spark, args, sc)
        pipeline.run_summarize(spark, args)
    return wh


def _key(table: pa.Table) -> pa.Array:
    return pa.array(
        np.asarray(table.column("producer").to_numpy(), np.int64) << 40 | table.column("seq").to_numpy()
    )


def _run_tables(wh: Path, run_id: str, *names: str) -> list[pa.Table]:
    return [read_arrow(str(wh), n, run_id).drop_columns(["run_id"]) for n in names]


def _core_run(wh: Path, run_id: str) -> dict[str, pa.Table]:
    attempts, results = _run_tables(wh, run_id, "send_attempts", "send_results")
    results = results.select(schemas.without_run_id(schemas.SEND_RESULTS).names)  # as the simulator gives
    merged = merged_in_shuffled_order(core_summaries(attempts, results, RUNS[run_id][1]), seed=len(run_id))
    return summaries.summary_tables(merged)


@pytest.mark.parametrize("run_id", sorted(RUNS))
def test_summary_tables_equal_the_pipeline(warehouse: Path, run_id: str) -> None:
    got = _core_run(warehouse, run_id)
    assert set(got) == set(summaries.SUMMARY_TABLES)
    for name, table in got.items():
        expected = read_arrow(str(warehouse), name, run_id)
        assert table.schema == schemas.data_schema(schemas.TABLES[name].schema), name
        assert expected.num_rows > 0, name
        assert_same(expected, table, KEYS[name])


@pytest.mark.parametrize("run_id", sorted(RUNS))
def test_broker_side_tables_equal_the_pipeline(warehouse: Path, run_id: str) -> None:
    sc = scenario_of(run_id)
    window_ms = RUNS[run_id][1]
    messages, attempts, results, log = _run_tables(
        warehouse, run_id, "messages", "send_attempts", "send_results", "commit_log"
    )
    core_results = results.select(schemas.without_run_id(schemas.SEND_RESULTS).names)
    storage, txns, deliveries = [], [], []
    for b in sc.cluster.brokers:  # one broker task each: every record of its broker
        records = log.filter(pc.equal(log.column("broker"), b))
        pointed = records.filter(records.column("is_result"))
        its_results = core_results.filter(pc.is_in(_key(core_results), value_set=_key(pointed)))
        storage.append(summaries.broker_storage(records, window_ms))
        stored = summaries.stored_transactions(records, its_results, sc)
        txns.append(stored)
        deliveries.append(summaries.queue_deliveries(records, stored))
    m, a, r = by_producer(messages), by_producer(attempts), by_producer(core_results)
    for p in m:  # one producer task each: its own records, not numbered
        own = store.log_records(m[p], a.get(p, attempts.schema.empty_table()), r[p], sc)
        txns.append(summaries.unstored_transactions(m[p], r[p], own, sc))
    random.Random(1).shuffle(deliveries)
    got = {
        "broker_storage": pa.concat_tables(storage),
        "transactions": pa.concat_tables(txns),
        "consumer_load": summaries.consumer_load(deliveries, sc),
    }
    for name, table in got.items():
        expected = read_arrow(str(warehouse), name, run_id)
        assert table.schema == schemas.data_schema(schemas.TABLES[name].schema), name
        assert expected.num_rows > 0, name
        assert_same(expected, table, KEYS[name])


def test_merge_order_does_not_matter(warehouse: Path) -> None:
    attempts, results = _run_tables(warehouse, "mixed-533", "send_attempts", "send_results")
    results = results.select(schemas.without_run_id(schemas.SEND_RESULTS).names)
    aggs = core_summaries(attempts, results, 700)
    one = merged_in_shuffled_order(aggs, 1)
    for seed in (2, 3):
        other = merged_in_shuffled_order(aggs, seed)
        for name, table in one.tables().items():
            assert table.equals(other.tables()[name]), name
    with pytest.raises(ValueError, match="more than one aggregate"):
        summaries.merge([aggs[0], aggs[0]])
    with pytest.raises(ValueError, match="cannot be merged"):
        summaries.merge([aggs[0], summaries.producer_aggregates(attempts, results, 1000)])


# ---- Spark's summaries with keys (run_id, variant) on the same rows -------------------------------------


def spark_tables(
    spark, attempts: pa.Table, results: pa.Table, window_ms: int, keys: Sequence[str]
) -> dict[str, pa.Table]:
    """The five summary tables of ``rocketsim.spark.summaries`` (``attempts``/``results`` carry the
    key columns), collected as Arrow."""
    key_fields = [pa.field(k, pa.string(), nullable=False) for k in keys]
    a_schema = pa.schema([*key_fields, *schemas.without_run_id(schemas.SEND_ATTEMPTS)])
    r_schema = pa.schema([*key_fields, *schemas.without_run_id(schemas.SEND_RESULTS)])
    a = spark.createDataFrame(attempts.select(a_schema.names).cast(a_schema), spark_schema(a_schema))
    r = spark.createDataFrame(results.select(r_schema.names).cast(r_schema), spark_schema(r_schema))
    intervals = spark_summaries.isolation_intervals(a, keys).cache()
    out = {
        "isolation_intervals": intervals,
        "broker_windows": spark_summaries.broker_windows(a, window_ms, intervals=intervals, keys=keys),
        "queue_windows": spark_summaries.queue_windows(a, window_ms, keys=keys),
        "producer_windows": spark_summaries.producer_windows(
            r, window_ms, attempts=a, intervals=intervals, keys=keys
        ),
        "run_summary": spark_summaries.run_summary(r, a, intervals=intervals, keys=keys),
    }
    tables = {name: df.toArrow() for name, df in out.items()}  # small
    intervals.unpersist()
    return tables


def _with_keys(table: pa.Table, **keys: str) -> pa.Table:
    for i, (k, v) in enumerate(keys.items()):
        table = table.add_column(i, k, pa.array([v] * table.num_rows, pa.string()))
    return table


VARIANTS = {
    "fault_off": {"producers": {"send_latency_fault_enable": False}},
    "fault_on": {},
    "line5": {"producers": {"client_version": "5.3.3"}, "workload": {"messages": 1200}},
}


def test_comparison_keys_equal_spark(spark) -> None:
    """Three variants in one table set, as jobs/compare.py summarises them (keys run_id, variant)."""
    window_ms = 1500
    attempts, results, aggs = [], [], []
    for name, over in VARIANTS.items():
        sc = scenario_from_mapping(
            {"name": "cmp", **_deep_update(_deep_update(BASE, RUNS["mixed-498"][0]), over)}
        )
        out = simulate.simulate(workload.generate(sc), sc)
        attempts.append(_with_keys(out.attempts, run_id="cmp", variant=name))
        results.append(_with_keys(out.results, run_id="cmp", variant=name))
        aggs += core_summaries(out.attempts, out.results, window_ms, variant=name)
    keys = ["run_id", "variant"]
    expected = spark_tables(spark, pa.concat_tables(attempts), pa.concat_tables(results), window_ms, keys)
    got = summaries.summary_tables(merged_in_shuffled_order(aggs, 7))
    for name, table in got.items():
        assert table.column_names[0] == "variant"
        if name != "isolation_intervals":  # fault_off isolates nothing
            assert set(table.column("variant").to_pylist()) == set(VARIANTS), name
        assert_same(expected[name], table, ["variant", *KEYS[name]])


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


def edge_tables(rows_a: list[tuple], rows_r: list[tuple]) -> tuple[pa.Table, pa.Table]:
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
        "queue_wait_ms": pa.array(send - born),
        "compressed": pa.array([False] * n),
        "sys_flag": pa.array([0] * n, pa.int32()),
        "sender_thread": pa.array([0] * n, pa.int32()),
    }
    for k, v in extra.items():
        r = r.append_column(k, v)
    a_schema = schemas.without_run_id(schemas.SEND_ATTEMPTS)
    r_schema = schemas.without_run_id(schemas.SEND_RESULTS)
    return a.select(a_schema.names).cast(a_schema), r.select(r_schema.names).cast(r_schema)


@pytest.mark.parametrize("window_ms", [1000, 700, 10_000])
def test_edge_cases_equal_spark(spark, window_ms: int) -> None:
    """Empty windows, a broker without attempts in a window, ties, single values, all-rejected
    producers (and a whole variant of them), intervals past the end of the run, equal end times."""
    attempts, results = edge_tables(EDGE_ATTEMPTS, EDGE_RESULTS)
    rejected = results.filter(pc.equal(results.column("producer"), 4))
    a_in = pa.concat_tables([_with_keys(attempts, run_id="e", variant="v")])
    r_in = pa.concat_tables(
        [
            _with_keys(results, run_id="e", variant="v"),
            _with_keys(rejected, run_id="e", variant="only-rejected"),
        ]
    )
    expected = spark_tables(spark, a_in, r_in, window_ms, ["run_id", "variant"])
    aggs = core_summaries(attempts, results, window_ms, variant="v")
    aggs += core_summaries(attempts.schema.empty_table(), rejected, window_ms, variant="only-rejected")
    got = summaries.summary_tables(merged_in_shuffled_order(aggs, window_ms))
    for name, table in got.items():
        assert_same(expected[name], table, ["variant", *KEYS[name]])
    # and without keys, the run alone
    expected = spark_tables(
        spark, _with_keys(attempts, run_id="e"), _with_keys(results, run_id="e"), window_ms, ["run_id"]
    )
    got = summaries.summary_tables(summaries.merge(core_summaries(attempts, results, window_ms)))
    for name, table in got.items():
        assert_same(expected[name], table, KEYS[name])


# ---- pieces on their own -------------------------------------------------------------------------------


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


def test_isolation_intervals_equal_the_reference() -> None:
    from rocketsim import analysis

    attempts, _ = edge_tables(EDGE_ATTEMPTS, EDGE_RESULTS)
    got = summaries.isolation_intervals(attempts).to_pylist()
    ref = analysis.isolation_intervals(attempts.to_pandas())
    assert [tuple(r.values()) for r in got] == list(ref.itertuples(index=False, name=None))
    assert summaries.isolation_intervals(attempts.slice(0, 0)).num_rows == 0


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
