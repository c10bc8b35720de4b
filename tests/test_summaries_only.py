"""Summaries-only runs (``--tables summary``), in the core: the producer tasks fold the simulation into
the summary aggregates and write no row, there is no broker task, and the summary tables equal, row for
row, those of a run of every table of the same scenario and seed, on either engine, for any split into
tasks and chunks; the selection's rules."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from conftest import MIXED

from rocketsim import engine
from rocketsim.scenario import Scenario, load_scenario, scenario_from_mapping
from rocketsim.spark.cli import JobArgs, parse_job_args
from rocketsim.stage import graph, memory
from rocketsim.stage.plan import StagePlan
from rocketsim.tables import reconcile
from rocketsim.warehouse.read import NotWrittenError, read_arrow, read_run
from rocketsim.warehouse.run_commit import run_commits

WINDOW_MS = 1000
SCENARIOS = Path(__file__).resolve().parents[1] / "conf" / "scenarios"


def _brownout() -> Scenario:
    """The shipped brown-out (its fault moved into a short run), fault strategy on."""
    return load_scenario(
        SCENARIOS / "brownout.toml",
        ["workload.messages=6000", "workload.rate_per_s=1000", "faults.0.start_s=2", "faults.0.end_s=4"],
    )


def _closed_loop(coupling: str) -> Scenario:
    """Four async producers past the brokers' capacity: the coupling has work to do."""
    return scenario_from_mapping(
        {
            "producers": {"count": 4, "send_mode": {"async": 1.0}, "threads": 32},
            "cluster": {"brokers": ["a", "b", "c", "d"]},
            "workload": {"messages": 800, "rate_per_s": 480.0},
            "brokers": {"coupling": coupling, "default": {"store": {"append_us": 10_000 / 1.05}}},
        }
    )


def _run(
    sc: Scenario, only: tuple[str, ...] = (), tasks: int = 2, chunk_rows: int = 1 << 17
) -> tuple[memory.MemoryTables, dict[str, int], dict[str, pa.Table]]:
    """The stage in memory: its staged tables, its counts and the summary tables the driver made."""
    io = memory.memory_io()
    counts, finished = memory.run_stage(sc, StagePlan(graph.STAGES, WINDOW_MS, chunk_rows, only), io, tasks)
    return io.tables, counts, finished.summary_tables


def _same_summaries(sc: Scenario, tasks: int = 2, chunk_rows: int = 1 << 17) -> None:
    full, full_counts, _ = _run(sc)
    made, counts, _ = _run(sc, graph.SUMMARIES_ONLY, tasks, chunk_rows)
    summary = set(graph.SUMMARIES_ONLY) - {graph.RUNS_TABLE}
    assert set(made.parts) == summary  # no message row, no broker side
    for name in summary:
        want = full.table(name)
        assert want.num_rows > 0 or name in ("fault_windows", "isolation_intervals"), name
        assert made.table(name).equals(want), name
    assert (full.table("fault_windows").num_rows > 0) == bool(sc.faults)
    for name in ("messages", "send_attempts", "send_results"):  # simulated, counted, not written
        assert counts[f"{name}.made"] == full_counts[f"{name}.made"] > 0, name
    checked = reconcile.check(counts, "summaries-only")
    assert "sends in broker_windows = attempts simulated" in checked


def test_the_mixed_scenario_gives_the_summaries_of_a_full_run() -> None:
    """Every message kind and send mode, invalid messages, broker errors and an outage."""
    _same_summaries(scenario_from_mapping(MIXED))


def test_the_shipped_brownout_gives_the_summaries_of_a_full_run() -> None:
    _same_summaries(_brownout())


@pytest.mark.parametrize("coupling", ["iterative", "joint"])
def test_closed_loop_runs_give_the_summaries_of_a_full_run(coupling: str) -> None:
    _same_summaries(_closed_loop(coupling))


@pytest.mark.parametrize(("tasks", "chunk_rows"), [(1, 97), (3, 500), (4, 1 << 17)])
def test_any_split_gives_the_same_summaries(tasks: int, chunk_rows: int) -> None:
    """Chunks that cut retries and in-flight sends, small producers gathered: the same tables."""
    sc = scenario_from_mapping(MIXED)
    want, _, _ = _run(sc, graph.SUMMARIES_ONLY)
    made, _, _ = _run(sc, graph.SUMMARIES_ONLY, tasks, chunk_rows)
    for name in want.parts:
        assert made.table(name).equals(want.table(name)), name


@pytest.mark.parametrize("name", [engine.REFERENCE, engine.COMPILED])
def test_each_engine_gives_the_summaries_of_the_other(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """The summaries-only fold on the readable and on the compiled engine: the same tables as a run of
    every table on the other (the default: the compiled engine where it covers the input)."""
    sc = _brownout()
    other = engine.COMPILED if name == engine.REFERENCE else engine.REFERENCE
    monkeypatch.setenv(engine.ENGINE_VARIABLE, other)
    want, _, _ = _run(sc)
    monkeypatch.setenv(engine.ENGINE_VARIABLE, name)
    made, _, _ = _run(sc, graph.SUMMARIES_ONLY, chunk_rows=700)
    for name_ in made.parts:
        assert made.table(name_).equals(want.table(name_)), name_


def test_a_selection_writes_only_the_tables_it_names() -> None:
    sc = scenario_from_mapping(MIXED)
    only = graph.selected_tables("run_summary,fault_windows")
    assert only == ("run_summary", "fault_windows", "runs")
    made, _, summaries = _run(sc, only)
    assert set(made.parts) == {"run_summary", "fault_windows"}
    assert set(summaries) >= {"run_summary", "fault_windows"}  # the printed summary has what it needs


def test_the_selection_rules() -> None:
    assert graph.selected_tables("all") == graph.RUN_TABLES
    assert graph.selected_tables("summary") == graph.SUMMARIES_ONLY
    assert "runs" in graph.SUMMARIES_ONLY and "send_results" not in graph.SUMMARIES_ONLY
    assert graph.selected_tables(" broker_windows , runs") == ("broker_windows", "runs")
    for bad in ("send_results", "summary,messages", "everything", "", "run_summary,,"):
        with pytest.raises(ValueError, match=r"--tables must be all, summary or a comma-separated list"):
            graph.selected_tables(bad)
    with pytest.raises(ValueError, match="a summaries-only stage runs every stage"):
        StagePlan(("summarize",), only=graph.SUMMARIES_ONLY)
    with pytest.raises(ValueError, match="a summaries-only stage runs every stage"):
        StagePlan(graph.STAGES, only=("send_results",))
    plan = StagePlan(graph.STAGES, only=graph.SUMMARIES_ONLY)
    assert plan.summaries_only and not plan.has_brokers and "runs" not in plan.tables()


# ---- on Spark: the job's run, its runs row, its readers -------------------------------------------------


def _job_args(warehouse: Path, run_id: str, partitions: int, tables: tuple[str, ...]) -> JobArgs:
    return JobArgs("inline", str(warehouse), run_id, (), partitions, WINDOW_MS, quiet=True, tables=tables)


@pytest.mark.spark
def test_a_summaries_only_job_writes_the_summaries_of_a_full_run(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pipeline job with --tables summary (1 and 3 partitions) beside the same run with every table:
    the same summary tables row for row, a runs row saying what it wrote and what it simulated, readers
    refusing the tables it did not write, and a full run of the same id made summaries-only loses its
    message rows instead of keeping them beside the new summaries."""
    sc = scenario_from_mapping(MIXED)
    from rocketsim.spark import pipeline

    pipeline.run_pipeline(spark, _job_args(tmp_path, "full", 2, graph.RUN_TABLES), sc)
    for run_id, partitions in (("s1", 1), ("s3", 3), ("full", 2)):  # "full" last: made summaries-only
        if run_id == "full":
            want = {t: read_arrow(tmp_path, t, "full").drop_columns(["run_id"]) for t in graph.SUMMARIES_ONLY}
            full_row = want.pop(graph.RUNS_TABLE).to_pylist()[0]
            assert read_arrow(tmp_path, "send_results", "full").num_rows == sc.workload.total_messages()
        pipeline.run_pipeline(spark, _job_args(tmp_path, run_id, partitions, graph.SUMMARIES_ONLY), sc)
    got = read_run(tmp_path, "s1", graph.SUMMARIES_ONLY)
    for name, table in want.items():
        for run_id in ("s1", "s3", "full"):
            assert read_arrow(tmp_path, name, run_id).drop_columns(["run_id"]).equals(table), (name, run_id)
    row = got[graph.RUNS_TABLE].to_pylist()[0]
    assert row["tables"] == list(graph.SUMMARIES_ONLY) and full_row["tables"] == list(graph.RUN_TABLES)
    assert (row["messages"], row["attempts"]) == (full_row["messages"], full_row["attempts"])
    for run_id in ("s1", "full"):
        for name in ("send_results", "commit_log", "consumer_load"):
            with pytest.raises(NotWrittenError, match=f"run '{run_id}' did not write {name}: it wrote only"):
                read_arrow(tmp_path, name, run_id)
        with pytest.raises(NotWrittenError):
            read_run(tmp_path, run_id, ["run_summary", "send_attempts"])
    held = set(run_commits(tmp_path, "full").column("table").to_pylist())
    assert held == set(graph.SUMMARIES_ONLY)
    from rocketsim.present import explore  # the report shows what there is: no broker-side chart

    run = explore.load_run(str(tmp_path), "s1")
    assert run.storage.empty and len(run.summary) == len(want["run_summary"])
    _explore_notebook_runs(tmp_path, "s1", monkeypatch)  # it read broker_storage and stopped


def _explore_notebook_runs(warehouse: Path, run_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """notebooks/explore_run.ipynb on ``run_id``: every cell runs, and the broker side has no chart."""
    import nbformat
    from nbclient import NotebookClient

    figures = warehouse / "figures"
    monkeypatch.setenv("ROCKETSIM_WAREHOUSE", str(warehouse))
    monkeypatch.setenv("ROCKETSIM_RUN_ID", run_id)
    monkeypatch.setenv("ROCKETSIM_FIGURES", str(figures))
    nb = nbformat.read(Path(__file__).resolve().parents[1] / "notebooks" / "explore_run.ipynb", 4)
    NotebookClient(nb, timeout=300, kernel_name="python3").execute()  # raises on a cell's error
    drawn = {p.stem for p in (figures / run_id).glob("*.png")}
    assert "latency_percentiles" in drawn and "broker_storage" not in drawn, drawn


def test_the_job_refuses_a_bad_selection_before_spark(capsys: pytest.CaptureFixture) -> None:
    scenario = str(SCENARIOS / "steady.toml")
    for argv, says in (
        (["--tables", "send_results"], "ScenarioError: --tables must be all, summary or a comma-separated"),
        (["--tables", "summary,commit_log"], "got 'summary,commit_log'"),
    ):
        with pytest.raises(SystemExit) as ended:
            parse_job_args(["--scenario", scenario, *argv], "jobs/pipeline.py", None, whole_run=True)
        assert ended.value.code == 2
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1
    args, _ = parse_job_args(
        ["--scenario", scenario, "--tables", "run_summary"], "jobs/pipeline.py", None, whole_run=True
    )
    assert args.tables == ("run_summary", "runs")
    with pytest.raises(SystemExit) as ended:  # a stage of the run takes no --tables
        parse_job_args(["--scenario", scenario, "--tables", "summary"], "jobs/generate.py", None)
    assert ended.value.code == 2 and "--tables" in capsys.readouterr().err
