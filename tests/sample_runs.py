"""Small real runs shared by the tests of the summary and broker-side tables (one warehouse per test
session, made by the pipeline's one pass: ``conftest.sample_runs``): both client lines, faults, mixed
send modes, rejected, ordered, delay, transactional and batch messages, several producers and consumer
groups, each with its own summary window."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from rocketsim.broker import store
from rocketsim.scenario import Scenario, scenario_from_mapping
from rocketsim.warehouse.read import read_arrow

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


def deep_update(base: Mapping, over: Mapping) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = deep_update(base[k], v) if isinstance(v, Mapping) and isinstance(base.get(k), Mapping) else v
    return out


def scenario_of(run_id: str) -> Scenario:
    return scenario_from_mapping({"name": run_id, **deep_update(BASE, RUNS[run_id][0])})


def message_keys(t: pa.Table) -> pa.ChunkedArray:
    """(producer, seq) as one int64."""
    return pc.add(pc.multiply(pc.cast(t.column("producer"), pa.int64()), 1 << 40), t.column("seq"))


def broker_step(
    messages: pa.Table, attempts: pa.Table, results: pa.Table, sc: Scenario
) -> tuple[pa.Table, pa.Table]:
    """(the commit log, the results with their store columns in (producer, seq) order) of a run simulated
    here, as the one pass makes them: every producer's records (store.log_records), then
    store.number_broker once per broker with the results pointing at its records."""
    log = store.log_records(messages, attempts, results, sc)
    key = message_keys(results)
    has_record = pc.is_in(key, value_set=message_keys(log.filter(log.column("is_result"))))
    logs, completed = [], [store.with_null_store_columns(results.filter(pc.invert(has_record)))]
    for b in sc.cluster.brokers:
        mine = log.filter(pc.equal(log.column("broker"), b))
        own = pc.is_in(key, value_set=message_keys(mine.filter(mine.column("is_result"))))
        numbered, theirs = store.number_broker(mine, results.filter(own), sc)
        logs.append(numbered)
        completed.append(theirs)
    order = [("producer", "ascending"), ("seq", "ascending")]
    return pa.concat_tables(logs), pa.concat_tables(completed).sort_by(order)


def make_runs(spark, warehouse: Path) -> None:  # noqa: ANN001 - SparkSession
    """Every run of :data:`RUNS` through the pipeline's one pass (every table but ``runs``)."""
    from rocketsim.spark import pipeline
    from rocketsim.spark import run as spark_run
    from rocketsim.spark.cli import JobArgs

    for run_id, (_, window_ms) in RUNS.items():
        args = JobArgs("inline", str(warehouse), run_id, (), 2, window_ms, quiet=True)
        report = pipeline.run_one_pass(spark, args, scenario_of(run_id))
        spark_run.publish_stage(spark, str(warehouse), run_id, "test", report)


def run_tables(warehouse: Path, run_id: str, *names: str) -> list[pa.Table]:
    """Committed tables of a run, without ``run_id``."""
    return [read_arrow(str(warehouse), n, run_id).drop_columns(["run_id"]) for n in names]


def by_producer(table: pa.Table) -> dict[int, pa.Table]:
    col = table.column("producer")
    return {p: table.filter(pc.equal(col, p)) for p in sorted(pc.unique(col).to_pylist())}


def assert_same(expected: pa.Table, got: pa.Table, keys: list[str] | tuple[str, ...]) -> None:
    """Same rows (sorted by ``keys``), same types, values equal with ``==`` (floats too), nulls where
    nulls."""
    expected = expected.drop_columns([c for c in ("run_id",) if c in expected.column_names])
    got = got.drop_columns([c for c in ("run_id",) if c in got.column_names])
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
            raise AssertionError(f"{name} at {row}: expected {ev[i]!r}, got {gv[i]!r}")


def assert_rows(got: pa.Table, want: list[dict], keys: Sequence[str], where: str = "") -> None:
    """``got`` (without ``run_id``) holds a reference's rows (dicts): the same keys, every column of
    ``got`` equal (floats to 1e-12 relative), nulls where the reference has None."""

    def key(row: dict) -> tuple:
        return tuple((row[k] is not None, row[k]) for k in keys)  # None sorts first

    have = sorted(got.drop_columns([c for c in ("run_id",) if c in got.column_names]).to_pylist(), key=key)
    want = sorted(want, key=key)
    assert [key(r) for r in have] == [key(r) for r in want], where
    for h, w in zip(have, want, strict=True):
        for name, x in h.items():
            y = w[name]  # every column the table has, the reference has
            if isinstance(x, float) or isinstance(y, float):
                close = x is None or x == pytest.approx(y, rel=1e-12, abs=1e-9)
                same = (x is None) == (y is None) and close
            else:
                same = x == y
            assert same, f"{where} {name} at {key(h)}: {x!r}, the reference {y!r}"
