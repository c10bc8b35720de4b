"""The broker side through Spark (:mod:`rocketsim.spark.broker_side`), on a run made by the staged jobs:
the commit log equals the local oracle, and broker_storage, transactions and consumer_load agree with
the results and with each other. (The numbering itself: tests/test_store.py.)"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from rocketsim import schemas, store
from rocketsim.scenario import Scenario, scenario_from_mapping
from rocketsim.spark import broker_side, pipeline
from rocketsim.spark.cli import JobArgs
from rocketsim.spark.read import read_spark
from rocketsim.warehouse.read import read_arrow, read_pandas

pytestmark = pytest.mark.spark

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
    pipeline.run_broker_side(spark, args, scenario)
    return path


@pytest.fixture(scope="module")
def oracle(warehouse: str, scenario: Scenario) -> pd.DataFrame:
    """The commit log, computed locally from the run's own tables."""
    messages, attempts, results = (
        read_arrow(warehouse, t, RUN) for t in ("messages", "send_attempts", "send_results")
    )
    return store.with_offsets(store.log_records(messages, attempts, results, scenario), scenario).to_pandas()


@pytest.fixture(scope="module")
def results(warehouse: str) -> pd.DataFrame:
    return read_pandas(warehouse, "send_results", RUN)


def test_commit_log_equals_the_local_oracle(warehouse: str, oracle: pd.DataFrame) -> None:
    got = read_pandas(warehouse, "commit_log", RUN).drop(columns=["run_id"])
    got = got.sort_values(list(store.STORE_ORDER)).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, oracle[got.columns].reset_index(drop=True), check_dtype=False)
    assert got.duplicated(["producer", "seq"]).any()  # a not-OK store retried elsewhere: two copies
    assert (got.offset_msg_id.str.len() == 32).all()
    assert got.store_ts_ms.max() > 7 * 10_000  # the records span several minutes of store time


def test_transactions_table(warehouse: str, scenario: Scenario, results: pd.DataFrame) -> None:
    txns = read_pandas(warehouse, "transactions", RUN)
    messages = read_pandas(warehouse, "messages", RUN)
    assert len(txns) == (messages.message_type == "transaction").sum()
    merged = txns.merge(
        results[["producer", "seq", "end_ts_ms", "queue_offset", "store_topic"]], on=["producer", "seq"]
    )
    stored = merged.half_queue_offset.notna()
    assert (merged.loc[stored, "store_topic"] == store.HALF_TOPIC).all()
    assert (merged.loc[stored, "half_queue_offset"] == merged.loc[stored, "queue_offset"]).all()
    assert (merged.loc[~stored, "resolution"] == "not_stored").all()
    by_producer = merged[merged.resolved_by == "producer"]
    assert (by_producer.resolved_ts_ms == by_producer.end_ts_ms).all()
    checked = merged[merged.resolved_by.isin(["check", "discard"])]
    assert len(checked) > 0 and (checked.resolved_ts_ms % 20_000 == 0).all()
    assert (checked.resolved_ts_ms > checked.half_store_ts_ms + 6_000).all()
    assert set(merged.local_state) >= {"commit", "rollback", "unknown", "crash"}
    assert set(merged.resolution) >= {"commit", "rollback", "not_stored"}


def test_broker_storage_totals(warehouse: str, oracle: pd.DataFrame) -> None:
    storage = read_pandas(warehouse, "broker_storage", RUN)
    assert storage.messages.sum() == len(oracle)
    last = storage.sort_values("window_start_ms").groupby(["broker", "topic", "queue_id"]).tail(1)
    ends = oracle.groupby(["broker", "store_topic", "store_queue_id"]).queue_offset.max() + 1
    keys = zip(last.broker, last.topic, last.queue_id, strict=True)
    assert dict(zip(keys, last.cq_entries, strict=True)) == ends.to_dict()
    per_broker = storage.groupby("broker").agg(
        bytes=("commit_log_bytes", "max"), index=("index_entries", "max")
    )
    assert per_broker["bytes"].to_dict() == oracle.groupby("broker").store_size.sum().to_dict()
    assert per_broker["index"].to_dict() == oracle.groupby("broker").index_entries.sum().to_dict()
    # broker-wide columns are the same on every queue row of a broker window
    assert (storage.groupby(["broker", "window_start_ms"]).commit_log_bytes.nunique() == 1).all()
    assert (storage.cq_files == store.consume_queue_files(storage.cq_entries.to_numpy())).all()
    assert (storage.commit_log_files == store.commit_log_files(storage.commit_log_bytes.to_numpy())).all()
    assert (storage.index_files == 1).all()
    assert {store.SCHEDULE_TOPIC, store.HALF_TOPIC, "TopicTest"} == set(storage.topic)


def test_consumer_load(warehouse: str, oracle: pd.DataFrame) -> None:
    load = read_pandas(warehouse, "consumer_load", RUN)
    txns = read_pandas(warehouse, "transactions", RUN)
    visible = (oracle.store_topic != store.HALF_TOPIC).sum() + (txns.resolution == "commit").sum()
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


def test_reconcile_rules_hold_and_catch_a_missing_storage_row(spark, warehouse: str) -> None:
    def read(table: str) -> DataFrame:
        return read_spark(spark, warehouse, table, RUN)

    checks = broker_side.reconcile_checks(read)
    assert len(checks) == 8 and all(x == y for x, y in checks.values()), checks  # 6 rules + 2 groups

    def short(table: str) -> DataFrame:  # a commit log that lost producer 0's records
        df = read(table)
        return df.where(F.col("producer") != 0) if table == "commit_log" else df

    broken = {rule for rule, (x, y) in broker_side.reconcile_checks(short).items() if x != y}
    assert {
        "broker_storage messages = commit_log records",
        "stored attempts = attempts in commit_log",
        "send_results with a queue offset = commit_log records they point at",
    } <= broken


def test_send_results_have_the_declared_schema(warehouse: str) -> None:
    assert read_arrow(warehouse, "send_results", RUN).schema.equals(schemas.SEND_RESULTS)
    assert Path(warehouse, "broker_storage").is_dir()


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
