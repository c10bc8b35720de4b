"""A property of :func:`rocketsim.warehouse.vacuum.vacuum`: over random sequences of runs, reruns, partial
reruns, killed jobs, litter of killed jobs, claims and damage on a small warehouse (tiny runs of the
warehouse layer, no Spark), vacuum never removes a file a complete run needs: every complete run reads
the same (rows, or the same error for one the damage broke) before and after each vacuum, and after a
damage that can be undone (run_commits moved away, its last commit lost) is undone. A live job's files
are never touched."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import tempfile
from pathlib import Path

from deltalake.exceptions import DeltaError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiny_runs import POINTS, TABLES, Killed, job, killed_at, rows

from rocketsim.errors import RocketSimError
from rocketsim.warehouse import claims
from rocketsim.warehouse.files import write_parquet
from rocketsim.warehouse.paths import partition_dir, staging_path, table_path
from rocketsim.warehouse.read import read_arrow, run_file_uris
from rocketsim.warehouse.run_commit import RUN_COMMITS_TABLE, published
from rocketsim.warehouse.vacuum import VacuumRefused, vacuum

RUNS = st.sampled_from(["r1", "r2", "r3"])
SEEDS = st.integers(1, 9)
OPS = st.one_of(
    st.tuples(st.just("run"), RUNS, SEEDS),
    st.tuples(st.just("partial"), RUNS, SEEDS),  # rewrites one table, drops another from the run
    st.tuples(st.just("kill"), RUNS, SEEDS, st.sampled_from(POINTS)),
    st.tuples(st.just("litter"), RUNS, st.sampled_from([*TABLES, RUN_COMMITS_TABLE]), st.booleans()),
    st.tuples(st.just("claim"), RUNS, st.sampled_from(["dead", "empty"])),
    st.tuples(st.just("live"), RUNS),  # a vacuum while a live job holds the run
    st.tuples(st.just("move_run_commits")),
    st.tuples(st.just("lose_last_commit")),
    st.tuples(st.just("break_log"), st.sampled_from(TABLES)),
    st.tuples(st.just("delete_file"), st.sampled_from(TABLES), RUNS),
    st.tuples(st.just("vacuum")),
)
DEAD_PID = 2**22 + 12345  # beyond pid_max: no process has it


def readable(wh: str) -> dict[tuple[str, str], object]:
    """Every complete run of every table as the readers give it: its rows, or the error's type."""
    out: dict[tuple[str, str], object] = {}
    try:
        runs = published(wh).runs
    except (RocketSimError, OSError) as exc:
        return {("run_commits", ""): type(exc).__name__}
    for run, tables in runs.items():
        for table in tables:
            try:
                out[(table, run)] = sorted(map(str, read_arrow(wh, table, run).to_pylist()))
            except (RocketSimError, OSError) as exc:
                out[(table, run)] = type(exc).__name__
    return out


def checked_vacuum(wh: str) -> None:
    """Vacuum (or its refusal) changes nothing any complete run reads."""
    before = readable(wh)
    with contextlib.suppress(VacuumRefused):
        vacuum(wh, min_age_s=0)
    assert readable(wh) == before


def files_of(wh: str, run: str) -> set[Path]:
    return {p for t in (*TABLES, RUN_COMMITS_TABLE) for p in Path(wh, t, partition_dir(run)).rglob("*")}


def litter(wh: str, run: str, table: str, staged: bool) -> None:
    """What a killed job leaves and an in-process kill cleans up: a staging folder, or a file moved into
    the run's partition and never committed."""
    write_id = "20200101T000000-0123456789ab"
    data = rows(table, 2, 5) if table != RUN_COMMITS_TABLE else rows(TABLES[0], 2, 5)
    folder = staging_path(wh, table, write_id)
    if not staged:
        part = partition_dir(run) + ("" if table == RUN_COMMITS_TABLE else f"/write_id={write_id}")
        folder = f"{table_path(wh, table)}/{part}"
    Path(folder).mkdir(parents=True, exist_ok=True)
    write_parquet(data, f"{folder}/{write_id}-part-00000.parquet")


def apply(wh: str, op: tuple, scratch: Path) -> None:
    kind, *args = op
    if kind in ("run", "partial", "kill"):
        options = {"tables": (TABLES[0],), "dropped": (TABLES[2],)} if kind == "partial" else {}
        try:
            if kind == "kill":
                with killed_at(args[2]):
                    job(wh, args[0], args[1])
            else:
                job(wh, args[0], args[1], **options)
        except (Killed, RocketSimError, DeltaError, OSError):
            pass  # killed, or failed on a damaged table: a job that died
    elif kind == "litter":
        litter(wh, *args)
    elif kind == "claim":
        plant_claim(wh, *args)
    elif kind == "live":
        claim = claims.acquire(wh, args[0], "jobs/pipeline.py")
        try:
            kept = files_of(wh, args[0])
            checked_vacuum(wh)
            assert kept <= files_of(wh, args[0])  # nothing of the live job's run removed
        finally:
            claims.release(wh, claim)
    elif kind == "move_run_commits":
        undoable(wh, scratch, move_away)
    elif kind == "lose_last_commit":
        undoable(wh, scratch, lose_last_commit)
    elif kind == "break_log":
        log = sorted(Path(wh, args[0], "_delta_log").glob("*.json"))
        if log:
            log[-1].write_text("garbage{\n")
    elif kind == "delete_file":
        try:
            uris = run_file_uris(wh, args[0], args[1])
        except (RocketSimError, OSError):
            uris = []
        for uri in uris[:1]:
            Path(uri.removeprefix("file://")).unlink(missing_ok=True)
    else:
        checked_vacuum(wh)


def plant_claim(wh: str, run: str, kind: str) -> None:
    path = Path(claims.claim_path(wh, run))
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "empty":
        path.write_bytes(b"")
        old = path.stat().st_mtime - claims.WRITE_GRACE_S - 1
        os.utime(path, (old, old))
    else:
        dead = dataclasses.replace(claims.new_claim(run, "jobs/pipeline.py"), pid=DEAD_PID)
        path.write_text(json.dumps(dataclasses.asdict(dead)))


def move_away(wh: str, scratch: Path):  # noqa: ANN201
    if not Path(wh, RUN_COMMITS_TABLE).exists():
        return lambda: None
    shutil.move(str(Path(wh, RUN_COMMITS_TABLE)), scratch / "away")
    return lambda: shutil.move(str(scratch / "away"), str(Path(wh, RUN_COMMITS_TABLE)))


def lose_last_commit(wh: str, scratch: Path):  # noqa: ANN201
    log = sorted(Path(wh, RUN_COMMITS_TABLE, "_delta_log").glob("*.json"))
    if len(log) < 2:
        return lambda: None
    text = log[-1].read_text()
    log[-1].unlink()
    return lambda: log[-1].write_text(text)


def undoable(wh: str, scratch: Path, damage) -> None:  # noqa: ANN001
    """The damage, a vacuum, the damage undone: every complete run reads as before the damage."""
    before = readable(wh)
    undo = damage(wh, scratch)
    with contextlib.suppress(VacuumRefused):
        vacuum(wh, min_age_s=0)
    undo()
    assert readable(wh) == before


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=2, max_size=9))
def test_vacuum_never_removes_what_a_complete_run_needs(ops: list[tuple]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        wh = str(Path(tmp, "wh"))
        for op in [("run", "r1", 1), *ops, ("vacuum",)]:
            apply(wh, op, Path(tmp))
