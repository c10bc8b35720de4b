"""The run-level commit without Spark (:mod:`rocketsim.warehouse.run_commit`): a run's tables become
visible together; a rerun killed at any point of any table's write, or of the run-level commit, leaves the
old run whole and nothing of the new one visible; killed after the run-level commit, the new run is
whole; the readers see complete runs only; a job's dropped tables leave the run; vacuum removes the
unpublished writes of dead jobs, not those of a live one."""

from __future__ import annotations

import signal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from rocketsim.tables import schemas
from rocketsim.warehouse import delta
from rocketsim.warehouse.delta import CRASH_AT_ENV, CRASH_STAGES, commit_written
from rocketsim.warehouse.files import write_parquet
from rocketsim.warehouse.paths import new_write_id, staging_path, table_path
from rocketsim.warehouse.read import (
    MissingRunError,
    list_runs,
    read_arrow,
    require_run,
    run_file_uris,
    run_rows,
)
from rocketsim.warehouse.run_commit import (
    RUN_COMMITS_TABLE,
    TableWrite,
    current_writes,
    publish_writes,
    remove_superseded,
    superseded_writes,
)
from rocketsim.warehouse.vacuum import retire_orphan_writes

TABLES = ("isolation_intervals", "consumer_load", "run_summary")  # three tables of a "run"


class Killed(BaseException):
    """What the crash hook's SIGKILL does here: the job stops at that point."""


def _rows(table: str, n: int, seed: int) -> pa.Table:
    """n rows of a registry table, values derived from ``seed`` (so two runs differ)."""
    schema = schemas.data_schema(schemas.TABLES[table].schema)
    cols = {}
    for f in schema:
        if pa.types.is_integer(f.type) or pa.types.is_floating(f.type):
            cols[f.name] = pa.array([seed * 1000 + i for i in range(n)], f.type)
        elif pa.types.is_string(f.type):
            cols[f.name] = pa.array([f"{f.name}-{seed}-{i}" for i in range(n)], f.type)
        else:
            raise AssertionError(f.type)
    return pa.table(cols, schema=schema)


def job(
    warehouse: str, run_id: str, seed: int, tables: tuple[str, ...] = TABLES, dropped: tuple = ()
) -> None:
    """What every job does (rocketsim.spark.run): each table's write committed, then the run-level
    commit, then the superseded writes removed."""
    written = []
    for table in tables:
        write_id = new_write_id()
        staging = staging_path(warehouse, table, write_id)
        Path(staging).mkdir(parents=True)
        write_parquet(_rows(table, 3 + seed % 4, seed), f"{staging}/part-p000000.parquet")
        report = commit_written(warehouse, table, run_id, schemas.TABLES[table].schema, write_id)
        written.append(TableWrite(table, report.write_id, report.rows))
    publish_writes(warehouse, run_id, "test", written, dropped)
    remove_superseded(warehouse, run_id, [*tables, *dropped])


def visible(warehouse: str) -> dict[str, dict[str, list]]:
    """Every complete run's rows of every table, as the readers give them."""
    return {
        t: {r: sorted(map(str, read_arrow(warehouse, t, r).to_pylist())) for r in list_runs(warehouse, t)}
        for t in TABLES
    }


@pytest.fixture
def kill_at(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    def fake_kill(pid: int, sig: int) -> None:
        assert sig == signal.SIGKILL
        raise Killed

    monkeypatch.setattr(delta.os, "kill", fake_kill)

    def arm(point: str) -> None:
        monkeypatch.setenv(CRASH_AT_ENV, point)

    return arm


POINTS = [f"{t}:{s}" for t in TABLES for s in CRASH_STAGES] + [
    f"{RUN_COMMITS_TABLE}:{s}" for s in ("written", "staged", "before_commit")
]


def test_a_rerun_killed_anywhere_before_its_run_level_commit_leaves_the_old_run_whole(
    tmp_path: Path, kill_at
) -> None:  # noqa: ANN001
    wh = str(tmp_path / "wh")
    job(wh, "r1", seed=1)
    job(wh, "other", seed=2)
    before = visible(wh)
    for i, point in enumerate(POINTS):
        kill_at(point)
        with pytest.raises(Killed):
            job(wh, "r1", seed=10 + i)  # other content: a mix would show
        kill_at("")
        assert visible(wh) == before, point
        assert list_runs(wh) == ["other", "r1"]
    # the dead reruns' committed writes are in the tables, unpublished; vacuum removes them
    assert superseded_writes(wh, "isolation_intervals", "r1")
    assert retire_orphan_writes(wh, "isolation_intervals", min_age_s=3600) == []  # too young
    assert (
        retire_orphan_writes(wh, "isolation_intervals", min_age_s=0, busy_runs={"r1"}) == []
    )  # a live job's
    for table in TABLES:
        retire_orphan_writes(wh, table, min_age_s=0)
        assert superseded_writes(wh, table) == {}
    assert visible(wh) == before


def test_a_rerun_killed_after_its_run_level_commit_is_whole_and_the_old_writes_go_later(
    tmp_path: Path, kill_at
) -> None:  # noqa: ANN001
    wh = str(tmp_path / "wh")
    job(wh, "r1", seed=1)
    clean = str(tmp_path / "clean")
    job(clean, "r1", seed=7)
    kill_at(f"{RUN_COMMITS_TABLE}:committed")
    with pytest.raises(Killed):
        job(wh, "r1", seed=7)
    kill_at("")
    assert visible(wh) == visible(clean)  # the new run, whole
    assert all(superseded_writes(wh, t, "r1") for t in TABLES)  # the old writes: invisible, still there
    job(wh, "r1", seed=7)  # the next run of the id removes them (and its own predecessor's)
    assert all(superseded_writes(wh, t, "r1") == {} for t in TABLES)
    assert visible(wh) == visible(clean)


def test_readers_see_complete_runs_only(tmp_path: Path, kill_at) -> None:  # noqa: ANN001
    wh = str(tmp_path / "wh")
    job(wh, "r1", seed=1)
    kill_at(f"{RUN_COMMITS_TABLE}:before_commit")  # every table of r2 committed, r2 never published
    with pytest.raises(Killed):
        job(wh, "r2", seed=2)
    kill_at("")
    assert (
        DeltaTable(table_path(wh, "isolation_intervals")).to_pyarrow_table().num_rows > 3
    )  # r2 is in the log
    assert list_runs(wh) == ["r1"] and set(current_writes(wh)) == {"r1"}
    for table in TABLES:
        assert set(read_arrow(wh, table).column("run_id").to_pylist()) == {"r1"}
        assert read_arrow(wh, table, "r2").num_rows == 0
        assert "write_id" not in read_arrow(wh, table, "r1").column_names
        with pytest.raises(MissingRunError, match=f"run 'r2' has no {table} \\(no complete run"):
            require_run(wh, table, "r2")
        assert run_rows(wh, table, "r1") == read_arrow(wh, table, "r1").num_rows
        assert len(run_file_uris(wh, table, "r1")) == 1


def test_a_job_that_rewrites_tables_drops_the_tables_made_from_them(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    job(wh, "r1", seed=1)
    job(wh, "r1", seed=2, tables=("isolation_intervals",), dropped=("run_summary",))
    assert set(current_writes(wh)["r1"]) == {"isolation_intervals", "consumer_load"}
    assert read_arrow(wh, "run_summary", "r1").num_rows == 0
    assert superseded_writes(wh, "run_summary") == {}  # removed at once
    assert read_arrow(wh, "consumer_load", "r1").num_rows == 4  # kept: seed 1's
