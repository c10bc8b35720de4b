"""A run's stage on Spark (:mod:`rocketsim.spark.run`): a hot producer with half the traffic completes,
a failed commit leaves no staged file behind, a job whose committed inputs are missing writes nothing,
and the delta-spark publisher reads exactly the staged files. (Its tables equal the staged jobs' and
the local oracle's: tests/test_pipeline.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import MIXED

from rocketsim.engine.iterative import simulate_iterative
from rocketsim.scenario import Scenario, scenario_from_mapping, workload
from rocketsim.spark import delta_sink, pipeline
from rocketsim.spark import run as spark_run
from rocketsim.spark.cli import JobArgs
from rocketsim.stage.graph import RUN_TABLES
from rocketsim.stage.tables import producer_messages
from rocketsim.tables import schemas
from rocketsim.warehouse.delta import WriteReport
from rocketsim.warehouse.files import write_parquet
from rocketsim.warehouse.paths import STAGING_DIR, DeltaSinkError, new_write_id, staging_path
from rocketsim.warehouse.read import MissingRunError, read_arrow

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def scenario(mixed: Scenario) -> Scenario:
    return mixed


def test_hot_producer_with_half_the_traffic_completes(spark, tmp_path: Path) -> None:
    mapping = {**MIXED, "workload": {**MIXED["workload"], "messages": 6000, "hot_share": 0.5}}
    sc = scenario_from_mapping(mapping)
    args = JobArgs("inline", str(tmp_path), "hot", (), 2, 1000, quiet=True)
    report = pipeline.run_one_pass(spark, args, sc)  # reconciled, or it raises
    spark_run.publish_stage(spark, str(tmp_path), "hot", "test", report)
    assert report.rows("messages") == 6000 == report.rows("send_results")
    assert report.rows("send_attempts") == report.counts["send_results.attempts"]
    written = [t for t in RUN_TABLES if schemas.TABLES[t].stage != schemas.RUNS_ROW]
    assert "one result per message" in report.checks and len(report.reports) == len(written)
    per_producer = read_arrow(str(tmp_path), "messages", "hot", columns=["producer"]).column("producer")
    assert np.bincount(per_producer.to_numpy()).tolist() == [3000, 1000, 1000, 1000]
    staging = [p for p in tmp_path.rglob("*") if STAGING_DIR in p.parts and p.is_file()]
    assert staging == []  # committed: nothing left in staging or scratch


def test_a_failed_commit_leaves_no_staged_files(spark, scenario: Scenario, tmp_path: Path) -> None:
    """send_attempts exists with another schema: the stage fails naming it, and no
    staging or scratch file is left behind."""
    from deltalake import DeltaTable

    other = pa.schema([pa.field("run_id", pa.string()), pa.field("x", pa.int64())])
    DeltaTable.create(str(tmp_path / "send_attempts"), other, partition_by=["run_id"])
    args = JobArgs("inline", str(tmp_path), "boom", (), 2, 1000, quiet=True)
    with pytest.raises(DeltaSinkError, match="send_attempts"):
        pipeline.run_one_pass(spark, args, scenario)
    leftovers = [p for p in (tmp_path / "send_attempts").rglob("*") if "_delta_log" not in p.parts]
    assert [p for p in leftovers if p.is_file()] == []
    staging = [p for p in tmp_path.rglob("*") if STAGING_DIR in p.parts and p.is_file()]
    assert staging == []


def test_a_job_without_its_inputs_writes_nothing(spark, scenario: Scenario, tmp_path: Path) -> None:
    """summarize, broker side and simulate need the run's committed tables: they say which is missing."""
    args = JobArgs("inline", str(tmp_path), "none", (), 2, 1000, quiet=True)
    for step, table in (
        (pipeline.run_summarize, "messages"),
        (pipeline.run_broker_side, "messages"),
        (pipeline.run_simulate, "messages"),
    ):
        with pytest.raises(MissingRunError, match=f"run 'none' has no {table}"):
            step(spark, args, scenario)
    assert list(tmp_path.iterdir()) == []
    pipeline.run_generate(spark, args, scenario)
    with pytest.raises(MissingRunError, match="run 'none' has no send_attempts"):
        pipeline.run_summarize(spark, args, scenario)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["_published", "messages", "run_commits"]


def test_the_delta_spark_publisher_reads_exactly_the_staged_files(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without Delta's jars here, the delta-spark write itself is replaced: what it is given must be the
    rows of the staged part files (not the temporary ones), and the staging folder goes afterwards."""
    schema = schemas.ISOLATION_INTERVALS
    data = schemas.data_schema(schema)
    rows = pa.table(
        {
            "producer": pa.array([1, 2, 3], pa.int32()),
            "broker": ["a", "b", "c"],
            "start_ms": [1, 2, 3],
            "end_ms": [4, 5, 6],
        },
        schema=data,
    )
    wh, write_id = str(tmp_path), new_write_id()
    staging = Path(staging_path(wh, "isolation_intervals", write_id))
    staging.mkdir(parents=True)
    write_parquet(rows.slice(0, 2), str(staging / "part-p000000.parquet"))
    write_parquet(rows.slice(2), str(staging / "part-p000001.parquet"))
    (staging / "part-p000002.parquet.1234.tmp").write_bytes(b"half a file")
    given: list[pa.Table] = []

    def fake(df, warehouse, table, run_id, arrow_schema, max_records_per_file, *, write_id) -> WriteReport:  # noqa: ANN001
        given.append(pa.Table.from_pandas(df.toPandas(), schema=data, preserve_index=False))
        return WriteReport(
            table, run_id, "delta-spark", warehouse, write_id, 0, 1, df.count(), 0, 0, 0.0, 0.0
        )

    monkeypatch.setattr(delta_sink, "write_delta_spark", fake)
    report = delta_sink.publish_staged(
        spark, wh, "isolation_intervals", "r1", schema, write_id, engine="delta-spark"
    )
    assert report.rows == 3 and given[0].sort_by("producer").equals(rows)
    assert not staging.exists()


def _iterative_scenario() -> Scenario:
    """Four producers past the brokers' capacity (10 ms appends, 4 x 100 msg/s; 1.2x that): the rounds
    have work to do (queue waits and BrokerFastFailure's [TIMEOUT_CLEAN_QUEUE] sweeps)."""
    return scenario_from_mapping(
        {
            "name": "iterative",
            "producers": {"count": 4, "send_mode": {"async": 1.0}, "threads": 32},
            "cluster": {"brokers": ["a", "b", "c", "d"]},
            "workload": {
                "duration_s": 4,
                "rate_per_s": 480.0,
                "body_size": {"distribution": "fixed", "median": 950},
            },
            "brokers": {"coupling": "iterative", "default": {"store": {"append_us": 10_000 / 1.05}}},
        }
    )


def test_iterative_coupling_on_spark_is_partition_invariant_and_equals_the_one_process_rounds(
    spark, tmp_path: Path
) -> None:
    """brokers.coupling = iterative: the rounds spread over producer tasks give the same tables with 1
    and 4 partitions, the same rows as the rounds in one process, and record rounds and residual in
    ``runs``."""
    sc = _iterative_scenario()
    for run_id, parts in (("p1", 1), ("p4", 4)):
        args = JobArgs("inline", str(tmp_path), run_id, (), parts, 1000, quiet=True)
        pipeline.run_pipeline(spark, args, sc)
    for t in (schemas.TABLES[n] for n in RUN_TABLES):
        keys = list(t.keys)
        one, four = (read_arrow(str(tmp_path), t.name, r).drop_columns(["run_id"]) for r in ("p1", "p4"))
        if t.name == "runs":
            one, four = (x.drop_columns(list(t.wall_clock)) for x in (one, four))
        elif keys:
            one, four = (x.sort_by([(k, "ascending") for k in keys]) for x in (one, four))
        assert one.equals(four), t.name
    (row,) = read_arrow(str(tmp_path), "runs", "p1").to_pylist()
    by_producer = {s.producer: producer_messages(sc, s) for s in workload.producer_shares(sc)}
    local = simulate_iterative(by_producer, sc)
    assert (row["coupling_rounds"], row["coupling_residual"]) == (local.rounds, local.residual)
    assert (row["client_version"], row["client_line"]) == (sc.producers.client_version, "R4.9.8")
    assert local.rounds > 1
    attempts = read_arrow(str(tmp_path), "send_attempts", "p4").drop_columns(["run_id"])
    want = pa.concat_tables([local.outputs[p].attempts for p in sorted(local.outputs)])
    keys = [("producer", "ascending"), ("seq", "ascending"), ("attempt", "ascending")]
    assert (
        attempts.select(want.column_names)
        .sort_by(keys)
        .equals(want.sort_by(keys).cast(attempts.select(want.column_names).schema))
    )
    assert pc.sum(pc.equal(attempts.column("outcome"), "broker:2")).as_py() > 0
