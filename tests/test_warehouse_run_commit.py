"""The run-level commit without Spark (:mod:`rocketsim.warehouse.run_commit`): a run's tables become
visible together; a rerun killed at any point of any table's write, or of the run-level commit, leaves the
old run whole and nothing of the new one visible; killed after the run-level commit, the new run is
whole; the readers see complete runs only; a job's dropped tables leave the run; vacuum removes the
unpublished writes of dead jobs, not those of a live one."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from deltalake import DeltaTable
from tiny_runs import POINTS, TABLES, Killed, job, killed_at, visible

from rocketsim.warehouse.claims import claimed
from rocketsim.warehouse.paths import table_path
from rocketsim.warehouse.read import (
    MissingRunError,
    list_runs,
    read_arrow,
    require_run,
    run_file_uris,
    run_rows,
)
from rocketsim.warehouse.run_commit import RUN_COMMITS_TABLE, current_writes, superseded_writes
from rocketsim.warehouse.vacuum import vacuum

BEFORE_PUBLISHING = [p for p in POINTS if p != f"{RUN_COMMITS_TABLE}:committed"]


@pytest.fixture
def kill_at():  # noqa: ANN201
    """``kill_at(point)``: the next job stops at ``point`` ("": nowhere)."""
    with contextlib.ExitStack() as stack:

        def arm(point: str) -> None:
            stack.close()
            if point:
                stack.enter_context(killed_at(point))

        yield arm


def test_a_rerun_killed_anywhere_before_its_run_level_commit_leaves_the_old_run_whole(
    tmp_path: Path, kill_at
) -> None:  # noqa: ANN001
    wh = str(tmp_path / "wh")
    job(wh, "r1", seed=1)
    job(wh, "other", seed=2)
    before = visible(wh)
    for i, point in enumerate(BEFORE_PUBLISHING):
        kill_at(point)
        with pytest.raises(Killed):
            job(wh, "r1", seed=10 + i)  # other content: a mix would show
        kill_at("")
        assert visible(wh) == before, point
        assert list_runs(wh) == ["other", "r1"]
    # the dead reruns' committed writes are in the tables, unpublished; vacuum removes them
    assert superseded_writes(wh, "isolation_intervals", "r1")
    assert all(t.writes == [] for t in vacuum(wh, min_age_s=3600).tables)  # too young
    with claimed(wh, "r1", "test"):  # a live job's
        assert all(t.writes == [] for t in vacuum(wh, min_age_s=0).tables)
    vacuum(wh, min_age_s=0)
    for table in TABLES:
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
