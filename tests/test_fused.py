"""The fused generate + simulate stage: the tasks' files equal the local oracle, producers spread over
tasks longest first, a hot producer with half the traffic completes, and a failed stage leaves no
files behind."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from rocketsim import broker, run_files, simulate, workload
from rocketsim.scenario import Scenario, scenario_from_mapping
from rocketsim.spark import delta_sink, fused, pipeline
from rocketsim.spark.tables import read_arrow

MIXED = {
    "name": "fused",
    "seed": 11,
    "cluster": {"brokers": ["broker-a", "broker-b", "broker-c"], "write_queues": 4},
    "producers": {
        "count": 4,
        "threads": 2,
        "client_version": "4.9.8",
        "send_latency_fault_enable": True,
        "send_mode": {"sync": 0.8, "async": 0.1, "oneway": 0.1},
    },
    "workload": {
        "messages": 2000,
        "rate_per_s": 400.0,
        "message_types": {"normal": 0.6, "ordered": 0.1, "delay": 0.1, "transaction": 0.1, "batch": 0.1},
        "invalid": {"bad_topic": 0.01, "oversize_body": 0.01},
    },
    "brokers": {"default": {"errors": {"system_error": 0.01, "remoting_timeout": 0.005}}},
    "faults": [{"broker": "broker-b", "kind": "outage", "start_s": 1, "end_s": 3}],
}


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return scenario_from_mapping(MIXED)


def _dirs(root: Path) -> run_files.RunDirs:
    dirs = run_files.RunDirs(*(str(root / n) for n in ("m", "a", "r", "l", "s")))
    for d in dirs.all():
        Path(d).mkdir(parents=True)
    return dirs


def _read(folder: str) -> pa.Table:
    files = sorted(Path(folder).glob("part-*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files])


def _by(t: pa.Table, *keys: str) -> pa.Table:
    return t.sort_by([(k, "ascending") for k in keys])


def test_task_files_equal_the_local_oracle(scenario: Scenario, tmp_path: Path) -> None:
    dirs = _dirs(tmp_path)
    shares = workload.producer_shares(scenario)
    for share in shares:
        run_files.write_producer_files(scenario, share, dirs)
    producers = [s.producer for s in shares]
    for b in range(len(scenario.cluster.brokers)):
        run_files.write_broker_files(scenario, b, producers, dirs)

    messages = workload.generate(scenario)
    out = simulate.simulate(messages, scenario)
    log = broker.with_offsets(broker.log_records(messages, out.attempts, out.results, scenario), scenario)

    assert _by(_read(dirs.messages), "producer", "seq").equals(_by(messages, "producer", "seq"))
    assert _read(dirs.send_attempts).cast(out.attempts.schema).equals(out.attempts)
    assert _by(_read(dirs.commit_log), "broker", "commit_log_offset").equals(
        _by(log, "broker", "commit_log_offset")
    )
    results = _by(_read(dirs.send_results), "producer", "seq")
    assert results.num_rows == messages.num_rows
    assert results.select(out.results.column_names).cast(out.results.schema).equals(out.results)
    # each result carries the columns of the record it points at, or nulls when none
    pointed = _by(log.filter(log.column("is_result")), "producer", "seq")
    stored = results.filter(pc.is_valid(results.column("commit_log_offset")))
    assert stored.num_rows == pointed.num_rows > 0
    for name in run_files.RESULT_STORE_COLUMNS:
        assert stored.column(name).equals(pointed.column(name)), name
    failed = results.filter(pc.is_null(results.column("commit_log_offset")))
    assert set(failed.column("status").to_pylist()) <= {"FAILED", "REJECTED"}
    assert failed.num_rows > 0


def test_rewriting_a_task_gives_the_same_bytes(scenario: Scenario, tmp_path: Path) -> None:
    """Spark may run a task twice: the second run replaces each file by an identical one."""
    dirs = _dirs(tmp_path)
    share = workload.producer_shares(scenario)[1]
    run_files.write_producer_files(scenario, share, dirs)
    first = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    run_files.write_producer_files(scenario, share, dirs)
    second = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert first.keys() == second.keys() and all(first[p] == second[p] for p in first)
    assert not [p for p in first if p.name.endswith(".tmp")]


def test_producer_bins_put_the_heaviest_alone() -> None:
    sc = scenario_from_mapping(
        {"producers": {"count": 64}, "workload": {"messages": 100_000, "hot_share": 0.5, "rate_per_s": 1e4}}
    )
    bins = fused.producer_bins(workload.producer_shares(sc), 4)
    assert sorted(p for b in bins for p in b) == list(range(64))
    assert [0] in bins  # the hot producer has a task of its own
    sizes = sorted(len(b) for b in bins)
    assert sizes[0] == 1 and sizes[-1] - sizes[1] <= 1  # the other 63 spread evenly over 3 tasks
    assert fused.producer_bins(workload.producer_shares(sc), 1000) == [[p] for p in range(64)]
    assert fused.producer_bins(workload.producer_shares(sc), 1) == [list(range(64))]


def test_broker_indexes_refuse_unknown_brokers() -> None:
    assert broker.broker_indexes(pa.array(["b", "a", "b"]), ("a", "b")).tolist() == [1, 0, 1]
    with pytest.raises(ValueError, match=r"'z' is not in the cluster's brokers \['a', 'b'\]"):
        broker.broker_indexes(pa.array(["a", "z"]), ("a", "b"))


@pytest.mark.spark
def test_hot_producer_with_half_the_traffic_completes(spark, tmp_path: Path) -> None:
    mapping = {**MIXED, "workload": {**MIXED["workload"], "messages": 6000, "hot_share": 0.5}}
    sc = scenario_from_mapping(mapping)
    args = pipeline.JobArgs("inline", str(tmp_path), "hot", (), 2, 1000, quiet=True)
    messages, attempts = pipeline.run_generate_simulate(spark, args, sc)
    assert messages == 6000
    counts = pipeline.reconcile(spark, args, through="simulate")
    assert counts == {"messages": 6000, "results": 6000, "attempts": attempts}
    per_producer = read_arrow(str(tmp_path), "messages", "hot", columns=["producer"]).column("producer")
    assert np.bincount(per_producer.to_numpy()).tolist() == [3000, 1000, 1000, 1000]
    staging = [p for p in tmp_path.rglob("*") if delta_sink.STAGING_DIR in p.parts and p.is_file()]
    assert staging == []  # committed: nothing left in staging or scratch


@pytest.mark.spark
def test_a_failed_commit_leaves_no_staged_files(spark, scenario: Scenario, tmp_path: Path) -> None:
    """send_attempts (committed last) exists with another schema: the stage fails naming it, and no
    staging or scratch file is left behind."""
    from deltalake import DeltaTable

    other = pa.schema([pa.field("run_id", pa.string()), pa.field("x", pa.int64())])
    DeltaTable.create(str(tmp_path / "send_attempts"), other, partition_by=["run_id"])
    args = pipeline.JobArgs("inline", str(tmp_path), "boom", (), 2, 1000, quiet=True)
    with pytest.raises(delta_sink.DeltaSinkError, match="send_attempts"):
        pipeline.run_generate_simulate(spark, args, scenario)
    leftovers = [p for p in (tmp_path / "send_attempts").rglob("*") if "_delta_log" not in p.parts]
    assert [p for p in leftovers if p.is_file()] == []
    staging = [p for p in tmp_path.rglob("*") if delta_sink.STAGING_DIR in p.parts and p.is_file()]
    assert staging == []
