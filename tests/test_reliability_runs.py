"""A run is atomic (docs/design.md §8): every job that writes a run (the one pass, each staged job, a
comparison), rerun with other settings and killed at several points of its stage (the crash hook
``ROCKETSIM_CRASH_AT``: a table's files written, staged, committed, the run-level commit), leaves the
old run whole and nothing of the new one visible; killed just after its run-level commit, the new run
is whole; vacuum then removes every unpublished write and changes nothing visible.

Here the hook's SIGKILL is an exception that stops the job in this process (the Spark session is
shared); tests/test_reliability_cli.py kills real jobs with SIGKILL."""

from __future__ import annotations

import dataclasses
import signal
from pathlib import Path

import pytest

from rocketsim.scenario import Scenario, scenario_from_mapping
from rocketsim.scenario.variants import Variant
from rocketsim.spark import compare, pipeline
from rocketsim.spark.cli import CompareArgs, JobArgs
from rocketsim.tables import schemas
from rocketsim.warehouse import delta
from rocketsim.warehouse.delta import CRASH_AT_ENV
from rocketsim.warehouse.read import list_runs, list_tables, read_arrow
from rocketsim.warehouse.run_commit import RUN_COMMITS_TABLE, run_commits, superseded_writes
from rocketsim.warehouse.vacuum import vacuum

pytestmark = pytest.mark.spark

SCENARIO = {
    "name": "atomic",
    "seed": 1,
    "cluster": {"brokers": ["broker-a", "broker-b"], "write_queues": 2, "read_queues": 2},
    "producers": {"count": 2, "send_mode": {"sync": 0.8, "async": 0.2}},
    "workload": {"messages": 200, "rate_per_s": 200.0, "message_types": {"normal": 0.8, "transaction": 0.2}},
    "consumers": {"groups": [{"name": "cg", "count": 2}]},
}
VARIANTS = (
    Variant("off", ("producers.send_latency_fault_enable=false",)),
    Variant("on", ("producers.send_latency_fault_enable=true",)),
)


class Killed(BaseException):
    """What the crash hook's SIGKILL does here."""


def _scenario(seed: int, messages: int = 200) -> Scenario:
    return scenario_from_mapping(
        {**SCENARIO, "seed": seed, "workload": {**SCENARIO["workload"], "messages": messages}}
    )


def _args(wh: Path, run_id: str) -> JobArgs:
    return JobArgs("inline", str(wh), run_id, (), 1, 1000, quiet=True)


def _compare(spark, wh: Path, seed: int) -> None:  # noqa: ANN001
    base = _scenario(seed)
    scenarios = {
        v.name: scenario_from_mapping(
            {
                **SCENARIO,
                "seed": seed,
                "producers": {**SCENARIO["producers"], "send_latency_fault_enable": v.name == "on"},
            }
        )
        for v in VARIANTS
    }
    args = CompareArgs("inline", VARIANTS, "off", str(wh), "c", (), 1, 1000, quiet=True)
    compare.run_compare(spark, args, base, scenarios)


def _staged(spark, wh: Path, seed: int, messages: int = 200) -> None:  # noqa: ANN001
    sc, args = _scenario(seed, messages), _args(wh, "s")
    pipeline.run_generate(spark, args, sc)
    pipeline.run_simulate(spark, args, sc)
    pipeline.run_broker_side(spark, args, sc)
    pipeline.run_summarize(spark, args, sc)


# what each kill reruns: (point, job of a run id, with other settings than the run it replaces)
KILLS = [
    ("consumer_load:committed", "pipeline"),
    ("runs:before_commit", "pipeline"),
    (f"{RUN_COMMITS_TABLE}:before_commit", "pipeline"),
    ("messages:staged", "generate"),
    ("send_attempts:committed", "simulate"),
    (f"{RUN_COMMITS_TABLE}:before_commit", "broker_side"),
    ("producer_windows:committed", "summarize"),
    ("comparisons:committed", "compare"),
]


def _rerun(spark, wh: Path, job: str) -> None:  # noqa: ANN001
    sc = _scenario(seed=9, messages=150)
    if job == "pipeline":
        pipeline.run_pipeline(spark, _args(wh, "p"), sc)
    elif job == "compare":
        _compare(spark, wh, seed=9)
    else:
        getattr(pipeline, f"run_{job}")(spark, _args(wh, "s"), sc)


def visible(wh: Path) -> dict[tuple[str, str], list[str]]:
    """Every complete run's rows of every table (runs: without its wall-clock columns), and the
    run-level commit's rows but their times."""
    out: dict[tuple[str, str], list[str]] = {}
    for table in list_tables(wh):
        if table == RUN_COMMITS_TABLE:
            continue
        drop = list(schemas.TABLES[table].wall_clock)
        for run in list_runs(wh, table):
            rows = read_arrow(str(wh), table, run).drop_columns(drop).to_pylist()
            out[(table, run)] = sorted(map(repr, rows))
    commits = run_commits(str(wh)).drop_columns(["committed_at"]).to_pylist()
    out[(RUN_COMMITS_TABLE, "*")] = sorted(map(repr, commits))
    return out


@pytest.fixture(scope="module")
def warehouse(spark, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: ANN001
    wh = tmp_path_factory.mktemp("atomic") / "wh"
    pipeline.run_pipeline(spark, _args(wh, "p"), _scenario(1))
    _staged(spark, wh, 1)
    _compare(spark, wh, 1)
    return wh


@pytest.fixture
def kill_at(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    real_kill = delta.os.kill  # the os module's: other signals (a claim's liveness probe) pass through

    def fake_kill(pid: int, sig: int) -> None:
        if sig != signal.SIGKILL:
            return real_kill(pid, sig)
        raise Killed

    monkeypatch.setattr(delta.os, "kill", fake_kill)
    return lambda point: monkeypatch.setenv(CRASH_AT_ENV, point)


def test_a_rerun_killed_at_any_point_of_any_stage_leaves_the_old_run_whole(
    spark, warehouse: Path, kill_at
) -> None:  # noqa: ANN001
    before = visible(warehouse)
    assert {run for _, run in before} >= {"p", "s", "c"}
    for point, job in KILLS:
        kill_at(point)
        with pytest.raises(Killed):
            _rerun(spark, warehouse, job)
        kill_at("")
        assert visible(warehouse) == before, (point, job)
    assert any(
        superseded_writes(str(warehouse), t) for t in ("messages", "send_attempts", "producer_windows")
    )


def test_killed_after_its_run_level_commit_the_new_run_is_whole_and_vacuum_cleans_up(
    spark, warehouse: Path, kill_at, tmp_path: Path
) -> None:  # noqa: ANN001
    clean = tmp_path / "clean"
    pipeline.run_pipeline(spark, _args(clean, "p"), _scenario(seed=9, messages=150))
    kill_at(f"{RUN_COMMITS_TABLE}:committed")
    with pytest.raises(Killed):
        _rerun(spark, warehouse, "pipeline")
    kill_at("")
    new = {k: v for k, v in visible(warehouse).items() if k[1] == "p"}
    assert new == {k: v for k, v in visible(clean).items() if k[1] == "p"}  # the new run, whole
    assert read_arrow(str(warehouse), "messages", "p").num_rows == 150

    shown = visible(warehouse)
    vacuum(str(warehouse), min_age_s=0)
    for table in list_tables(warehouse):
        assert superseded_writes(str(warehouse), table) == {}, table
    assert visible(warehouse) == shown


def test_a_staged_rerun_drops_the_tables_made_from_what_it_replaced(spark, warehouse: Path) -> None:  # noqa: ANN001
    pipeline.run_simulate(spark, _args(warehouse, "s"), _scenario(seed=1))
    held = set(dataclasses.asdict(w)["table"] for w in _current(warehouse, "s"))
    assert held == {"messages", "send_attempts", "send_results", "commit_log"}  # summaries, broker side gone
    assert read_arrow(str(warehouse), "producer_windows", "s").num_rows == 0


def _current(wh: Path, run_id: str):  # noqa: ANN202
    from rocketsim.warehouse.run_commit import current_writes

    return current_writes(str(wh), run_id=run_id)[run_id].values()
