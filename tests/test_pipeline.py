"""The Spark pipeline: the one pass writes every table of the run, equal to the core functions called
directly, to the plain references of the summary and broker-side tables (``tests/analysis.py``,
``tests/broker_reference.py``) and to the staged jobs (generate, simulate, broker side, summarize,
each reading what it needs of the committed tables); every table is the same for 1 and N partitions;
runs are idempotent per run id; the run reconciles from counts with the values the rules have when
read back from the committed tables (``tests/read_back.py``), and fails loudly when a task loses a row;
bad messages are rejected with upstream's text."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from broker_reference import broker_side_tables
from read_back import run_checks
from sample_runs import assert_rows

from rocketsim import simulate
from rocketsim.broker import store
from rocketsim.scenario import Scenario, scenario_from_mapping, workload
from rocketsim.spark import pipeline
from rocketsim.spark import run as spark_run
from rocketsim.spark.cli import JobArgs
from rocketsim.spark.read import read_spark
from rocketsim.spark.run import StageReport
from rocketsim.tables import schemas
from rocketsim.tables.reconcile import ReconciliationError
from rocketsim.tables.schemas import TABLES
from rocketsim.tables.summaries.faults import fault_spans
from rocketsim.warehouse import stage_files
from rocketsim.warehouse.read import list_runs, read_arrow
from tests.analysis import summary_tables

pytestmark = pytest.mark.spark

SCENARIO = {
    "name": "pipe",
    "seed": 3,
    "cluster": {"brokers": ["broker-a", "broker-b", "broker-c"], "write_queues": 4, "read_queues": 4},
    "producers": {
        "count": 3,
        "threads": 2,
        "client_version": "4.9.8",
        "send_latency_fault_enable": True,
        "send_mode": {"sync": 0.8, "async": 0.1, "oneway": 0.1},
    },
    "workload": {
        "messages": 3000,
        "rate_per_s": 300.0,
        "message_types": {"normal": 0.7, "ordered": 0.1, "delay": 0.05, "transaction": 0.05, "batch": 0.1},
        "invalid": {
            "bad_topic": 0.01,
            "oversize_body": 0.01,
            "reserved_property": 0.01,
            "oversize_properties": 0.005,
            "empty_body": 0.005,
        },
        "body_size": {"distribution": "lognormal", "median": 3000, "sigma": 1.0, "min": 1, "max": 70000},
    },
    "brokers": {"default": {"errors": {"system_error": 0.01, "remoting_timeout": 0.005}}},
    "faults": [{"broker": "broker-b", "kind": "outage", "start_s": 2, "end_s": 6}],
}


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return scenario_from_mapping(SCENARIO)


def _args(warehouse: Path, run_id: str, partitions: int) -> JobArgs:
    return JobArgs("inline", str(warehouse), run_id, (), partitions, 1000, quiet=True)


def _sorted(t: pa.Table, keys: list[str]) -> pa.Table:
    return t.drop_columns(["run_id"]).sort_by([(k, "ascending") for k in keys])


RUNS = {"r1": 1, "r3": 3, "s2": 2}  # run id -> partitions; r: the one pass, s: the staged jobs


@pytest.fixture(scope="module")
def one_pass(spark, scenario: Scenario, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, StageReport]:
    """The same scenario in one warehouse, through the one pass as r1 (1 partition, whose report is
    kept) and r3 (3), and through the staged jobs (generate, simulate from the committed messages, the
    broker side and the summaries from the committed tables) as s2."""
    warehouse = tmp_path_factory.mktemp("wh")
    report = None
    for run_id, parts in RUNS.items():
        args = _args(warehouse, run_id, parts)
        if run_id.startswith("r"):
            rep = pipeline.run_one_pass(spark, args, scenario)
            spark_run.publish_stage(spark, str(warehouse), run_id, "test", rep)
            report = rep if run_id == "r1" else report
        else:
            assert pipeline.run_generate(spark, args, scenario) == 3000
            pipeline.run_simulate(spark, args, scenario)
            pipeline.run_broker_side(spark, args, scenario)
            pipeline.run_summarize(spark, args, scenario)
    return warehouse, report


@pytest.fixture(scope="module")
def two_runs(one_pass: tuple[Path, StageReport]) -> Path:
    return one_pass[0]


def _by(t: pa.Table, keys: tuple[str, ...]) -> pa.Table:
    return t.sort_by([(k, "ascending") for k in keys])


def test_the_stage_equals_the_core_called_here(two_runs: Path, scenario: Scenario) -> None:
    """The core functions called directly, on one machine: the committed tables are theirs."""
    messages = workload.generate(scenario)
    out = simulate.simulate(messages, scenario)
    log = store.with_offsets(store.log_records(messages, out.attempts, out.results, scenario), scenario)
    local = {"messages": messages, "send_attempts": out.attempts, "commit_log": log}
    for table, want in local.items():
        keys = TABLES[table].keys
        got = read_arrow(str(two_runs), table, "r1").select(want.column_names)
        assert _by(got, keys).equals(_by(want, keys).cast(got.schema)), table
    results = read_arrow(str(two_runs), "send_results", "r1").drop_columns(["run_id"])
    core = results.select(out.results.column_names)
    assert _by(core, ("producer", "seq")).equals(_by(out.results, ("producer", "seq")).cast(core.schema))
    pointed = _by(log.filter(log.column("is_result")), ("producer", "seq"))
    stored = _by(results.filter(pc.is_valid(results.column("commit_log_offset"))), ("producer", "seq"))
    for name in store.RESULT_STORE_COLUMNS:
        assert stored.column(name).equals(pointed.column(name)), name


RUN_TABLES = [t for t in schemas.written_by(*schemas.RUN_STAGES) if t.keys]  # runs: wall-clock metadata


@pytest.mark.parametrize("table", [t.name for t in RUN_TABLES])
def test_partition_count_and_stage_do_not_change_tables(two_runs: Path, table: str) -> None:
    keys = list(TABLES[table].keys)
    one = _sorted(read_arrow(str(two_runs), table, "r1"), keys)
    assert one.num_rows > 0
    for other in ("r3", "s2"):
        assert one.equals(_sorted(read_arrow(str(two_runs), table, other), keys)), (
            f"{table} differs between r1 and {other} (r: run stage, s: staged jobs; digit: partitions)"
        )


def test_tables_reconcile(two_runs: Path) -> None:
    messages = read_arrow(str(two_runs), "messages", "r1")
    results = read_arrow(str(two_runs), "send_results", "r1")
    attempts = read_arrow(str(two_runs), "send_attempts", "r1")
    assert results.num_rows == messages.num_rows == 3000
    assert attempts.num_rows == pc.sum(results.column("attempts")).as_py()
    summary = {r["scope"]: r for r in read_arrow(str(two_runs), "run_summary", "r1").to_pylist()}
    assert summary["all"]["messages"] == 3000
    stored = sum(r["messages"] for scope, r in summary.items() if scope != "all")
    statuses = results.column("status").to_pylist()
    assert stored == sum(1 for s in statuses if s not in ("FAILED", "REJECTED"))
    assert abs(sum(r["share"] for scope, r in summary.items() if scope != "all") - 1.0) < 1e-9


def test_every_table_of_the_run_is_written_by_the_one_pass_and_equals_the_references(
    two_runs: Path, scenario: Scenario
) -> None:
    written = [t.name for t in schemas.written_by(*schemas.RUN_STAGES) if t.stage != schemas.RUNS_ROW]
    assert all("r1" in list_runs(str(two_runs), t) for t in written)
    messages, attempts, results, log = (
        read_arrow(str(two_runs), t, "r1").drop_columns(["run_id"])
        for t in ("messages", "send_attempts", "send_results", "commit_log")
    )
    spans = [
        (f.broker, f.kind, f.start_ms, f.end_ms) for f in fault_spans(scenario.faults)
    ]  # the reference's
    expected = {
        **summary_tables(attempts.to_pandas(), results.to_pandas(), messages.to_pandas(), 1000, spans),
        **broker_side_tables(log, messages, results, scenario, 1000),
    }
    assert set(expected) | {"messages", "send_attempts", "send_results", "commit_log"} == set(written)
    for name, rows in expected.items():
        assert_rows(read_arrow(str(two_runs), name, "r1"), rows, TABLES[name].keys, name)


def test_the_one_pass_reconciles_as_the_read_back_rules_did(one_pass: tuple[Path, StageReport]) -> None:
    """Every rule the pipeline checked by reading the tables back has, from the counts, the same values
    (and a few more rules: rows committed = rows made)."""
    warehouse, report = one_pass
    read_back = run_checks(lambda table: read_arrow(str(warehouse), table, "r1"))
    assert len(read_back) >= 20  # 12 tables with keys, 12 rules between them, a consumer group
    for rule, values in read_back.items():
        assert report.checks[rule] == tuple(values), rule
    assert len(report.checks) > len(read_back)


def test_reconcile_fails_loudly_when_a_task_drops_a_row(
    spark, scenario: Scenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Producer 0's task writes its send_results file without one row: the one pass refuses the run."""
    written = stage_files.ParquetSink.write  # a task writes its files a chunk at a time

    def dropping(sink: stage_files.ParquetSink, table: pa.Table) -> None:
        first = not sink.rows and table.num_rows
        if first and "/send_results/" in sink.uri and sink.uri.endswith(stage_files.PRODUCER_PART.format(0)):
            table = table.slice(1)
        written(sink, table)

    def in_process(spark, bins, work, what="tasks"):  # noqa: ANN001, ANN202 - the tasks, here: monkeypatch reaches them
        return {item: dict(work(item)) for b in bins for item in b}

    monkeypatch.setattr(stage_files.ParquetSink, "write", dropping)
    monkeypatch.setattr(spark_run, "map_bins", in_process)
    with pytest.raises(ReconciliationError, match="one result per message: 3000 != 2999") as err:
        pipeline.run_one_pass(spark, _args(tmp_path, "broken", 1), scenario)
    assert "send_results rows committed = rows made: 2999 != 3000" in str(err.value)


def test_outage_shows_in_the_tables(two_runs: Path) -> None:
    attempts = read_arrow(str(two_runs), "send_attempts", "r1").to_pandas()
    messages = read_arrow(str(two_runs), "messages", "r1").to_pandas()[["producer", "seq", "message_type"]]
    attempts = attempts.merge(messages, on=["producer", "seq"])
    during = (attempts.start_ts_ms >= 2000) & (attempts.start_ts_ms < 6000)
    on_b = attempts[during & (attempts.broker == "broker-b")]
    assert len(on_b) > 0 and (on_b.outcome == "remoting:connect").all()
    # every failure the send loop saw isolates broker-b (ordered sends bypass the fault table)
    looped = on_b[on_b.message_type != "ordered"]
    assert looped.fault_isolated_until_ms.notna().all()
    assert (looped.fault_isolated_until_ms >= looped.start_ts_ms + 600_000).all()  # 4.9: 600 s
    before = attempts[(attempts.start_ts_ms < 2000) & (attempts.broker == "broker-b")]
    assert (before.outcome != "remoting:connect").all()


def test_rejected_messages_carry_upstream_text(two_runs: Path) -> None:
    results = read_arrow(str(two_runs), "send_results", "r1").to_pandas()
    rejected = results[results.status == "REJECTED"]
    assert len(rejected) > 0 and (rejected.attempts == 0).all()
    texts = set(rejected.error)
    assert any(
        t.startswith("CODE: 13  DESC: the message body size over max value, MAX: 4194304") for t in texts
    )
    assert any("The specified topic[bad topic!] contains illegal characters" in t for t in texts)
    assert any(t == "The Property<UNIQ_KEY> is used by system, input another please" for t in texts)
    assert any(t.startswith("CODE: 13  DESC: the message body length is zero") for t in texts)
    # properties over 32767 bytes: DefaultMQProducer.batch() fails a batch with such a member; no client
    # checks a single message's (Validators.checkMessage, 4.9.8), the broker refuses it with
    # MESSAGE_ILLEGAL (SendMessageProcessor.handlePutMessageResult), not a retry code: one attempt
    assert any(t.startswith("Failed to initiate the MessageBatch") for t in texts)
    illegal = results[
        results.error.fillna("").str.startswith(
            "MQBrokerException: CODE: 13  DESC: the message is illegal, maybe msg body or properties length"
        )
    ]
    assert len(illegal) > 0 and (illegal.status == "FAILED").all() and (illegal.attempts == 1).all()


def test_rerun_replaces_the_run_and_keeps_others(spark, two_runs: Path, scenario: Scenario) -> None:
    from deltalake import DeltaTable

    before = read_arrow(str(two_runs), "send_results", "r3")
    version = DeltaTable(str(two_runs / "send_results")).version()
    args = _args(two_runs, "r3", 2)
    pipeline.run_generate(spark, args, scenario)
    pipeline.run_simulate(spark, args, scenario)
    after = read_arrow(str(two_runs), "send_results", "r3")
    keys = list(TABLES["send_results"].keys)
    assert _sorted(after, keys).equals(_sorted(before, keys))
    assert DeltaTable(str(two_runs / "send_results")).version() > version
    assert read_arrow(str(two_runs), "send_results", "r1").num_rows == 3000
    runs = set(read_arrow(str(two_runs), "send_results").column("run_id").to_pylist())
    assert {"r1", "r3"} <= runs


def test_spark_reader_matches_deltalake_reader(spark, two_runs: Path) -> None:
    via_spark = read_spark(spark, str(two_runs), "send_attempts", "r1")
    via_delta = read_arrow(str(two_runs), "send_attempts", "r1")
    assert via_spark.count() == via_delta.num_rows
    assert via_spark.agg({"latency_ms": "sum"}).first()[0] == pc.sum(via_delta.column("latency_ms")).as_py()
