"""The broker side (:mod:`rocketsim.broker.side`): the core functions called per broker and per producer
give every table and column of the plain references written from their definitions
(``tests/broker_reference.py``), on the sample runs made here; on a run made by the staged jobs
(generate, simulate, then ``jobs/broker_side.py``'s stage reading the committed commit log back) the
commit log equals the local one, broker_storage, transactions and consumer_load agree with the results
and with each other and with the references, and the read-back rules hold; the pipeline's one pass
commits what the core functions make. (The numbering itself: tests/test_store.py.)"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from broker_reference import broker_side_tables
from read_back import broker_side_checks
from sample_runs import RUNS, assert_rows, assert_same, broker_step, by_producer, run_tables, scenario_of

from rocketsim import engine
from rocketsim.broker import side as broker_side
from rocketsim.broker import store
from rocketsim.scenario import Scenario, scenario_from_mapping, workload
from rocketsim.spark import pipeline
from rocketsim.spark.cli import JobArgs
from rocketsim.tables import schemas
from rocketsim.warehouse.read import read_arrow, read_pandas

RUN = "bs"
SCENARIO = {
    "name": "broker-side",
    "seed": 8,
    "cluster": {"brokers": ["broker-a", "broker-b"], "write_queues": 4, "read_queues": 3},
    "producers": {
        "count": 2,
        "threads": 2,
        "client_version": "4.9.8",
        "retry_another_broker_when_not_store_ok": True,
        "send_mode": {"sync": 0.8, "async": 0.1, "oneway": 0.1},
    },
    "workload": {
        "messages": 1500,
        "rate_per_s": 20.0,  # 75 s: a few check-back ticks
        "delay_levels": [2, 20],
        "message_types": {"normal": 0.5, "ordered": 0.1, "delay": 0.1, "transaction": 0.2, "batch": 0.1},
        "invalid": {"bad_topic": 0.01},
    },
    "brokers": {"default": {"errors": {"flush_disk_timeout": 0.03, "system_error": 0.01}}},
    "transactions": {
        "outcome": {"commit": 0.6, "rollback": 0.1, "unknown": 0.3},
        "producer_crash": 0.1,
        "check_interval_ms": 20_000,
    },
    "consumers": {"groups": [{"name": "cg-three", "count": 3}, {"name": "cg-eight", "count": 8}]},
}


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return scenario_from_mapping(SCENARIO)


@pytest.fixture(scope="module")
def warehouse(spark, scenario: Scenario, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("bs"))
    args = JobArgs("inline", path, RUN, (), 2, 5000, quiet=True)
    pipeline.run_generate(spark, args, scenario)
    pipeline.run_simulate(spark, args, scenario)
    pipeline.run_broker_side(spark, args, scenario)  # reads the committed commit log back
    return path


@pytest.fixture(scope="module")
def local_log(warehouse: str, scenario: Scenario) -> pd.DataFrame:
    """The commit log, computed locally from the run's own tables."""
    messages, attempts, results = (
        read_arrow(warehouse, t, RUN) for t in ("messages", "send_attempts", "send_results")
    )
    return store.with_offsets(store.log_records(messages, attempts, results, scenario), scenario).to_pandas()


@pytest.fixture(scope="module")
def results(warehouse: str) -> pd.DataFrame:
    return read_pandas(warehouse, "send_results", RUN)


@pytest.mark.spark
def test_commit_log_equals_the_local_one(warehouse: str, local_log: pd.DataFrame) -> None:
    got = read_pandas(warehouse, "commit_log", RUN).drop(columns=["run_id"])
    got = got.sort_values(list(store.STORE_ORDER)).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, local_log[got.columns].reset_index(drop=True), check_dtype=False)
    assert got.duplicated(["producer", "seq"]).any()  # a not-OK store retried elsewhere: two copies
    assert (got.offset_msg_id.str.len() == 32).all()
    assert got.store_ts_ms.max() > 7 * 10_000  # the records span several minutes of store time


@pytest.mark.spark
def test_transactions_table(warehouse: str, scenario: Scenario, results: pd.DataFrame) -> None:
    txns = read_pandas(warehouse, "transactions", RUN)
    messages = read_pandas(warehouse, "messages", RUN)
    log = read_pandas(warehouse, "commit_log", RUN)
    halves = log[log.store_topic == store.HALF_TOPIC]
    # one row per stored half, one per transactional message whose result points at none
    assert len(txns) == (messages.message_type == "transaction").sum() + (~halves.is_result).sum()
    assert not txns.duplicated(["producer", "seq", "attempt"]).any()
    merged = txns.merge(
        results[["producer", "seq", "end_ts_ms", "queue_offset", "store_topic"]], on=["producer", "seq"]
    )
    pointed = merged.is_result
    assert (merged.loc[pointed, "store_topic"] == store.HALF_TOPIC).all()
    assert (merged.loc[pointed, "half_queue_offset"] == merged.loc[pointed, "queue_offset"]).all()
    stored = merged.half_queue_offset.notna()
    assert (merged.loc[~stored, "resolution"] == "not_stored").all() and merged.loc[
        ~stored, "attempt"
    ].isna().all()
    # DefaultMQProducerImpl.endTransaction addresses the result's half only: the others are checked back
    assert merged.loc[stored & ~pointed, "resolved_by"].isin(["check", "discard"]).all()
    assert (merged.delivered == (merged.resolution == "commit")).all()
    by_producer = merged[merged.resolved_by == "producer"]
    assert (by_producer.resolved_ts_ms == by_producer.end_ts_ms).all()
    checked = merged[merged.resolved_by.isin(["check", "discard"])]
    assert len(checked) > 0 and (checked.resolved_ts_ms % 20_000 == 0).all()
    assert (checked.resolved_ts_ms > checked.half_store_ts_ms + 6_000).all()
    assert set(merged.local_state) >= {"commit", "rollback", "unknown", "crash"}
    assert set(merged.resolution) >= {"commit", "rollback", "not_stored"}


@pytest.mark.spark
def test_broker_storage_totals(warehouse: str, local_log: pd.DataFrame) -> None:
    storage = read_pandas(warehouse, "broker_storage", RUN)
    assert storage.messages.sum() == len(local_log)
    last = storage.sort_values("window_start_ms").groupby(["broker", "topic", "queue_id"]).tail(1)
    ends = local_log.groupby(["broker", "store_topic", "store_queue_id"]).queue_offset.max() + 1
    keys = zip(last.broker, last.topic, last.queue_id, strict=True)
    assert dict(zip(keys, last.cq_entries, strict=True)) == ends.to_dict()
    per_broker = storage.groupby("broker").agg(
        bytes=("commit_log_bytes", "max"), index=("index_entries", "max")
    )
    assert per_broker["bytes"].to_dict() == local_log.groupby("broker").store_size.sum().to_dict()
    assert per_broker["index"].to_dict() == local_log.groupby("broker").index_entries.sum().to_dict()
    # broker-wide columns are the same on every queue row of a broker window
    assert (storage.groupby(["broker", "window_start_ms"]).commit_log_bytes.nunique() == 1).all()
    assert (storage.cq_files == store.consume_queue_files(storage.cq_entries.to_numpy())).all()
    assert (storage.commit_log_files == store.commit_log_files(storage.commit_log_bytes.to_numpy())).all()
    assert (storage.index_files == 1).all()
    assert {store.SCHEDULE_TOPIC, store.HALF_TOPIC, "TopicTest"} == set(storage.topic)


@pytest.mark.spark
def test_consumer_load(warehouse: str, local_log: pd.DataFrame) -> None:
    load = read_pandas(warehouse, "consumer_load", RUN)
    txns = read_pandas(warehouse, "transactions", RUN)
    visible = (local_log.store_topic != store.HALF_TOPIC).sum() + (txns.resolution == "commit").sum()
    assert load.groupby("consumer_group").messages.sum().to_dict() == {
        "cg-three": visible,
        "cg-eight": visible,
    }
    three = load[load.consumer_group == "cg-three"]
    assert three.groupby("consumer").size().to_dict() == {"consumer-0": 2, "consumer-1": 2, "consumer-2": 2}
    unread = three[three.consumer.isna()]  # queue 3 of each broker: written, never read (read_queues 3)
    assert sorted(zip(unread.broker, unread.queue_id, strict=True)) == [("broker-a", 3), ("broker-b", 3)]
    assert (unread.messages > 0).all()
    eight = load[load.consumer_group == "cg-eight"]
    idle = eight[eight.broker.isna()]
    assert sorted(idle.consumer) == ["consumer-6", "consumer-7"] and (idle.messages == 0).all()


@pytest.mark.spark
def test_the_read_back_rules_hold_on_the_staged_run(warehouse: str) -> None:
    """The broker-side rules, read back from the committed tables, hold (the stage checked the same
    rules from its counts: tests/test_reconcile.py breaks them)."""
    checks = broker_side_checks(lambda table: read_arrow(warehouse, table, RUN))
    assert len(checks) == 9 and all(x == y for x, y in checks.values()), checks  # 7 rules + 2 groups


@pytest.mark.spark
def test_send_results_have_the_declared_schema(warehouse: str) -> None:
    assert read_arrow(warehouse, "send_results", RUN).schema.equals(schemas.SEND_RESULTS)
    assert Path(warehouse, "broker_storage").is_dir()


@pytest.mark.spark
def test_storage_figure(warehouse: str) -> None:
    from rocketsim.present import plots_storage

    fig = plots_storage.storage_and_consumers(
        read_pandas(warehouse, "broker_storage", RUN), read_pandas(warehouse, "consumer_load", RUN)
    )
    log, queues, load = fig.axes
    assert [line.get_label() for line in log.get_lines()] == ["broker-a", "broker-b"]
    assert len(queues.patches) == len(
        read_pandas(warehouse, "broker_storage", RUN).groupby(["broker", "topic", "queue_id"])
    )
    assert {t.get_text() for t in load.get_xticklabels()} >= {"consumer-0", "consumer-7", "not read"}


# ---- the tables against the references (tests/broker_reference.py) ------------------------------------

BROKER_SIDE_KEYS = {
    "broker_storage": ["broker", "window_start_ms", "topic", "queue_id"],
    "transactions": ["producer", "seq", "attempt"],
    "consumer_load": ["consumer_group", "topic", "broker", "queue_id", "consumer"],
}


def _key(table: pa.Table) -> pa.Array:
    return pa.array(
        np.asarray(table.column("producer").to_numpy(), np.int64) << 40 | table.column("seq").to_numpy()
    )


def core_broker_side(
    messages: pa.Table, attempts: pa.Table, results: pa.Table, log: pa.Table, sc: Scenario, window_ms: int
) -> dict[str, pa.Table]:
    """The three tables from the core functions, as the tasks call them: per broker (every record of
    its broker), per producer (its own records, not numbered), the deliveries added up in any order."""
    core_results = results.select(schemas.without_run_id(schemas.SEND_RESULTS).names)
    storage, txns, deliveries = [], [], []
    for b in sc.cluster.brokers:
        records = log.filter(pc.equal(log.column("broker"), b))
        # the results of every message with a record here (the tasks': those pointing here and those
        # of messages with another half here)
        its_results = core_results.filter(pc.is_in(_key(core_results), value_set=_key(records)))
        storage.append(broker_side.broker_storage(records, window_ms))
        stored = broker_side.stored_transactions(records, its_results, sc)
        txns.append(stored)
        deliveries.append(broker_side.queue_deliveries(records, stored))
    m, a, r = by_producer(messages), by_producer(attempts), by_producer(core_results)
    for p in m:
        own = store.log_records(m[p], a.get(p, attempts.schema.empty_table()), r[p], sc)
        txns.append(broker_side.unstored_transactions(m[p], r[p], broker_side.pointed_halves(own), sc))
    random.Random(1).shuffle(deliveries)
    return {
        "broker_storage": pa.concat_tables(storage),
        "transactions": pa.concat_tables(txns),
        "consumer_load": broker_side.consumer_load(deliveries, sc),
    }


def assert_reference_tables(
    got: dict[str, pa.Table],
    log: pa.Table,
    messages: pa.Table,
    results: pa.Table,
    sc: Scenario,
    window_ms: int,
) -> None:
    """Every broker-side table equals the reference's of the same commit log, messages and results."""
    want = broker_side_tables(log, messages, results, sc, window_ms)
    assert set(got) == set(want) == set(BROKER_SIDE_KEYS)
    for name, keys in BROKER_SIDE_KEYS.items():
        assert_rows(got[name], want[name], keys, name)


@pytest.mark.parametrize("run_id", sorted(RUNS))
def test_broker_side_tables_equal_the_reference(run_id: str) -> None:
    """The sample runs, simulated and numbered here (no Spark): the core functions called per broker and
    per producer give the references' rows."""
    sc, window_ms = scenario_of(run_id), RUNS[run_id][1]
    messages = workload.generate(sc)
    out = engine.simulate(messages, sc)
    log, results = broker_step(messages, out.attempts, out.results, sc)
    local = core_broker_side(messages, out.attempts, results, log, sc, window_ms)
    txns = local["transactions"]
    assert set(txns.column("resolution").to_pylist()) >= {"commit", "rollback", "not_stored"}
    halves = txns.filter(pc.is_valid(txns.column("attempt")))
    assert pc.any(pc.invert(halves.column("is_result"))).as_py() == (run_id != "mixed-498")  # other halves
    assert_reference_tables(local, log, messages, results, sc, window_ms)


@pytest.mark.spark
@pytest.mark.parametrize("run_id", sorted(RUNS))
def test_broker_side_tables_of_the_one_pass_equal_the_core_and_the_reference(
    sample_runs: Path, run_id: str
) -> None:
    sc, window_ms = scenario_of(run_id), RUNS[run_id][1]
    messages, attempts, results, log = run_tables(
        sample_runs, run_id, "messages", "send_attempts", "send_results", "commit_log"
    )
    local = core_broker_side(messages, attempts, results, log, sc, window_ms)
    for name, keys in BROKER_SIDE_KEYS.items():
        (committed,) = run_tables(sample_runs, run_id, name)
        assert local[name].schema == schemas.data_schema(schemas.TABLES[name].schema), name
        assert local[name].num_rows > 0, name
        assert_same(local[name], committed, keys)
    assert_reference_tables(local, log, messages, results, sc, window_ms)


@pytest.mark.spark
def test_broker_side_of_the_staged_run_equals_the_reference(warehouse: str, scenario: Scenario) -> None:
    """jobs/broker_side.py's stage (reading the committed commit log and results back) = the references."""
    messages, results, log = (
        read_arrow(warehouse, t, RUN).drop_columns(["run_id"])
        for t in ("messages", "send_results", "commit_log")
    )
    got = {name: read_arrow(warehouse, name, RUN) for name in BROKER_SIDE_KEYS}
    assert_reference_tables(got, log, messages, results, scenario, 5000)


@pytest.mark.spark
def test_halves_from_records_and_from_results_agree(sample_runs: Path) -> None:
    """A producer task finds its stored halves in its commit-log records, a job reading committed
    results in their store_topic: the same (producer, seq)."""
    results, log = run_tables(sample_runs, "mixed-533", "send_results", "commit_log")
    order = [("producer", "ascending"), ("seq", "ascending")]
    from_log = broker_side.pointed_halves(log).sort_by(order)
    assert from_log.num_rows > 0
    assert from_log.equals(broker_side.result_halves(results).sort_by(order))
