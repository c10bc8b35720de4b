"""Vacuum removes only what is provably garbage, and the readers never answer with fewer rows than a run
committed (:mod:`rocketsim.warehouse.vacuum`, :mod:`rocketsim.warehouse.read`), on tiny runs of the
warehouse layer (no Spark). The cases of a hostile probe of the product, each replayed: the damage, then
``jobs/vacuum.py --min-age-s 0``, then the damage undone where it can be: every complete run reads as
before, and each refusal is one line with exit code 2."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from tiny_runs import POINTS, TABLES, job, killed_job, rows, visible

from jobs import report as report_job
from jobs import vacuum as vacuum_job
from rocketsim.tables import schemas
from rocketsim.warehouse import claims
from rocketsim.warehouse import vacuum as vacuum_module
from rocketsim.warehouse.claims import acquire, claim_files, claim_path, release
from rocketsim.warehouse.delta import commit_written, stage_written
from rocketsim.warehouse.files import write_parquet
from rocketsim.warehouse.paths import new_write_id, staging_path, table_path
from rocketsim.warehouse.read import DamagedRunError, read_arrow, read_run, run_file_uris
from rocketsim.warehouse.run_commit import (
    RUN_COMMITS_TABLE,
    TableWrite,
    publish_writes,
    remove_superseded,
    superseded_writes,
)
from rocketsim.warehouse.vacuum import VacuumRefused, vacuum


def run_vacuum(warehouse: str | Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``jobs/vacuum.py --warehouse W --min-age-s 0 ARGS`` in this interpreter: (code, stdout, stderr)."""
    capsys.readouterr()
    code = vacuum_job.main(["--warehouse", str(warehouse), "--min-age-s", "0", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def three_runs(wh: str) -> dict:
    """r1 (rerun once: its first writes superseded and removed), r2; what the readers show."""
    job(wh, "r1", 1)
    job(wh, "r2", 2)
    job(wh, "r1", 3)
    return visible(wh)


def data_files(wh: str | Path) -> set[str]:
    """Every file of the warehouse but the logs, claims and records (what a vacuum may delete)."""
    root = Path(wh)
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and not {"_delta_log", "_claims", "_published"} & set(p.parts)
    }


def logged(wh: str | Path) -> set[str]:
    """Every data file a log of the warehouse adds or removes (relative to the warehouse)."""
    out = set()
    for log in Path(wh).glob("*/_delta_log/*.json"):
        table = log.parent.parent.name
        for line in log.read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            out |= {f"{table}/{unquote(action[k]['path'])}" for k in ("add", "remove") if k in action}
    return out


def last_commit(wh: str | Path, table: str) -> Path:
    return sorted((Path(wh) / table / "_delta_log").glob("*.json"))[-1]


# ------------------------------------------------------------------------ refusals (exit 2, one line)


def test_a_missing_run_commits_is_refused_and_restoring_it_gives_every_run_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Probe case 1: run_commits moved away, then vacuum: it removed every run's writes."""
    wh = str(tmp_path / "wh")
    before, files = three_runs(wh), data_files(wh)
    shutil.move(f"{wh}/{RUN_COMMITS_TABLE}", tmp_path / "away")
    code, out, err = run_vacuum(wh, capsys)
    assert (code, out) == (2, "") and len(err.splitlines()) == 1
    assert err.startswith(f"error: {wh}/run_commits is missing while tables hold committed writes (")
    assert err.rstrip().endswith("Nothing was removed")
    shutil.move(tmp_path / "away", f"{wh}/{RUN_COMMITS_TABLE}")
    assert visible(wh) == before and data_files(wh) == files


def test_a_table_outside_the_warehouse_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Probe case 2: ``--table ../other_wh/messages`` judged another warehouse's table by this one's
    run_commits and removed every run there. Neither a path nor a link to a folder elsewhere is taken."""
    wh, other = str(tmp_path / "wh"), str(tmp_path / "other_wh")
    three_runs(wh)
    theirs = three_runs(other)
    for table in (f"../other_wh/{TABLES[0]}", f"{other}/{TABLES[0]}", "", "nosuch", ".."):
        code, out, err = run_vacuum(wh, capsys, "--table", table)
        assert (code, out) == (2, "") and len(err.splitlines()) == 1, (table, err)
        assert err.startswith(f"error: --table {table!r} "), err
    os.symlink(f"{other}/{TABLES[0]}", f"{wh}/linked")  # a link to another warehouse's table
    killed_job(other, "r3", 9, f"{RUN_COMMITS_TABLE}:written")  # unpublished writes there
    code, out, err = run_vacuum(wh, capsys)
    assert code == 0 and "linked" not in out, out
    code, _, err = run_vacuum(wh, capsys, "--table", "linked")
    assert code == 2 and err.startswith("error: --table 'linked' is not a table of "), err
    assert visible(other) == theirs and superseded_writes(other, TABLES[0])  # nothing of theirs touched


@pytest.mark.parametrize(
    "args, line",
    [
        (("--min-age-s", "-1"), "error: --min-age-s must be a number of seconds >= 0, got -1.0"),
        (("--min-age-s", "nan"), "error: --min-age-s must be a number of seconds >= 0, got nan"),
        (("--min-age-s", "inf"), "error: --min-age-s must be a number of seconds >= 0, got inf"),
        (("--min-age-s", "x"), "jobs/vacuum.py: error: argument --min-age-s: invalid float value: 'x'"),
    ],
)
def test_bad_arguments_are_refused(
    args: tuple[str, ...], line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wh = str(tmp_path / "wh")
    job(wh, "r1", 1)
    capsys.readouterr()
    try:
        code = vacuum_job.main(["--warehouse", wh, *args])
    except SystemExit as exc:  # argparse's own usage error
        code = exc.code
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith(line), err
    with pytest.raises(VacuumRefused, match="vacuum needs a local or mounted warehouse folder"):
        vacuum("s3://bucket/wh")


@pytest.mark.parametrize(
    "damage, refusal",
    [
        ("deleted", "error: run_commits is behind the tables: run r1 was published by commit "),
        ("emptied", "error: run_commits is behind the tables: run r1 was published by commit "),
        ("truncated", "error: run_commits cannot be read ("),
    ],
)
def test_a_lost_run_commits_commit_is_refused(
    damage: str, refusal: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Probe case 3: after the last run_commits commit is lost, a dry run listed the latest run's writes
    (its only copy) for removal. deltalake reads a log whose last commit is gone, empty or cut short
    without a word (an older version): the run's publication record tells."""
    wh = str(tmp_path / "wh")
    before, files = three_runs(wh), data_files(wh)
    commit = last_commit(wh, RUN_COMMITS_TABLE)
    text = commit.read_text()
    if damage == "deleted":
        commit.unlink()
    else:
        commit.write_text("" if damage == "emptied" else text[:60])
    for args in (("--dry-run",), ()):
        code, out, err = run_vacuum(wh, capsys, *args)
        assert (code, out) == (2, "") and len(err.splitlines()) == 1, err
        assert err.startswith(refusal) and "; nothing was removed" in err
    commit.write_text(text)
    assert visible(wh) == before and data_files(wh) == files


def test_a_damaged_run_commits_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wh = str(tmp_path / "wh")
    three_runs(wh)
    files = data_files(wh)
    last_commit(wh, RUN_COMMITS_TABLE).write_text("garbage{\n")
    code, out, err = run_vacuum(wh, capsys)
    assert (code, out) == (2, "") and len(err.splitlines()) == 1
    assert err.startswith("error: run_commits cannot be read (") and "nothing was removed" in err
    assert data_files(wh) == files


# ------------------------------------------------------------------------------------------ readers


def test_readers_refuse_a_write_the_table_no_longer_holds(tmp_path: Path) -> None:
    """Probe case 4: readers answered 0 rows, no error, when run_commits named a write its table no
    longer held (run_commits recorded its rows)."""
    wh = str(tmp_path / "wh")
    three_runs(wh)
    table = "consumer_load"
    commits = sorted((Path(wh) / table / "_delta_log").glob("*.json"))
    for commit in commits[-2:]:  # r1's rerun: its write's commit and the removal of the old write
        commit.unlink()
    expected = f"run 'r1' of table {table} does not match run_commits: the table's log holds 0 of the 6 rows"
    for read in (
        lambda: read_arrow(wh, table, "r1"),
        lambda: read_arrow(wh, table),  # every run
        lambda: read_run(wh, "r1", TABLES),
        lambda: run_file_uris(wh, table, "r1"),
    ):
        with pytest.raises(DamagedRunError, match=expected):
            read()
    assert read_arrow(wh, table, "r2").num_rows == 5  # the other run is whole


@pytest.mark.parametrize("damage", ["deleted", "truncated", "short"])
def test_readers_refuse_a_missing_truncated_or_short_data_file(damage: str, tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    three_runs(wh)
    table = "run_summary"
    (uri,) = run_file_uris(wh, table, "r2")
    path = Path(unquote(uri.removeprefix("file://")))
    if damage == "deleted":
        path.unlink()
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:100])
    else:  # a row deleted by hand, outside rocketsim: the write holds fewer rows than it committed
        column = _int_column(read_arrow(wh, table, "r2"))
        DeltaTable(table_path(wh, table)).delete(f"run_id = 'r2' AND {column} = 2000")
    with pytest.raises(DamagedRunError, match=f"table {table} of run r2|run 'r2' of table {table}"):
        read_arrow(wh, table, "r2")
    assert read_arrow(wh, table, "r1").num_rows == 6


@pytest.mark.parametrize("damage", ["run_commits", "parquet"])
def test_the_report_on_a_damaged_warehouse_is_one_line(
    damage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Probe case 12: jobs/report.py on a damaged run_commits or a truncated Parquet file traced."""
    wh = str(tmp_path / "wh")
    three_runs(wh)
    if damage == "run_commits":
        last_commit(wh, RUN_COMMITS_TABLE).write_text("garbage{\n")
        expected = f"error: the Delta log of table run_commits ({wh}/run_commits) cannot be read: "
    else:
        (uri,) = run_file_uris(wh, "run_summary", "r1")
        path = Path(unquote(uri.removeprefix("file://")))
        path.write_bytes(path.read_bytes()[:-30])
        expected = "error: table run_summary of run r1: a data file cannot be read ("
    capsys.readouterr()
    code = report_job.main(["--warehouse", wh, "--run-id", "r1", "--out", str(tmp_path / "r.html")])
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith(expected), err
    assert not (tmp_path / "r.html").exists()


def test_a_multi_table_read_of_one_run_reads_one_version_of_run_commits(tmp_path: Path) -> None:
    """Probe case 6: during reruns, per-table reads mixed two runs across tables. read_run reads every
    table as one version of run_commits names them, while reruns replace the run's writes (and remove the
    old ones) as fast as they can."""
    wh = str(tmp_path / "wh")
    job(wh, "r", 1)
    stop = threading.Event()

    def rerun() -> None:
        seed = 1
        while not stop.is_set():
            seed = 3 - seed  # 1, 2, 1, ...
            job(wh, "r", seed)

    writer = threading.Thread(target=rerun)
    writer.start()
    seen = set()
    try:
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            got = read_run(wh, "r", TABLES)
            seeds = {t: {v // 1000 for v in got[t].column(_int_column(got[t])).to_pylist()} for t in TABLES}
            assert len(set(map(frozenset, seeds.values()))) == 1, seeds  # one run, never a mix
            seen |= set().union(*seeds.values())
    finally:
        stop.set()
        writer.join()
    assert seen == {1, 2}  # the reads did overlap reruns of both kinds


def _int_column(table: pa.Table) -> str:
    """An integer column of a tiny run's table (its values: seed * 1000 + row)."""
    return next(f.name for f in table.schema if pa.types.is_integer(f.type) and f.name != "run_id")


# --------------------------------------------------------------------------------------- live jobs


def test_vacuum_leaves_a_live_jobs_staging_and_files_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Probe case 10: vacuum --min-age-s 0 during a job deleted the job's staging folder while printing
    "left alone". A staging folder does not say its run: one made after the earliest live claim began
    may be the job's; one made before is a dead job's."""
    wh = str(tmp_path / "wh")
    before = three_runs(wh)
    dead = staging_path(wh, TABLES[0], "20200101T000000-0123456789ab")  # a job killed long ago
    Path(dead).mkdir(parents=True)
    write_parquet(rows(TABLES[0], 2, 5), f"{dead}/part-p000000.parquet")
    claim = acquire(wh, "r3", "jobs/pipeline.py")
    try:
        time.sleep(1.1)  # the job's write ids come after its claim (whole seconds)
        staging = staging_path(wh, TABLES[1], new_write_id())
        Path(staging).mkdir(parents=True)
        write_parquet(rows(TABLES[1], 2, 6), f"{staging}/part-p000000.parquet")
        moved_id = new_write_id()  # a write moved into the run's partition, not committed yet
        Path(staging_path(wh, TABLES[2], moved_id)).mkdir(parents=True)
        write_parquet(rows(TABLES[2], 2, 7), f"{staging_path(wh, TABLES[2], moved_id)}/part-p000000.parquet")
        moved = stage_written(wh, TABLES[2], "r3", rows(TABLES[2], 0, 0).schema, moved_id)
        code, out, _ = run_vacuum(wh, capsys)
        assert code == 0
        assert out.startswith("run r3: left alone, being written by jobs/pipeline.py (pid ")
        assert Path(staging, "part-p000000.parquet").exists()
        assert all(Path(table_path(wh, TABLES[2]), f.path).exists() for f in moved.files)
        assert (
            not Path(dead).exists() and f"{TABLES[0]}: deleted _staging/20200101T000000-0123456789ab" in out
        )
    finally:
        release(wh, claim)
    code, out, _ = run_vacuum(wh, capsys)  # the job is gone (and left its files behind)
    assert code == 0 and not Path(staging).exists()
    assert not any(Path(table_path(wh, TABLES[2]), f.path).exists() for f in moved.files)
    assert visible(wh) == before


def test_a_run_published_while_vacuum_runs_keeps_its_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writes a job committed before vacuum looked, published while it works (between its look at a
    table's writes and its look at run_commits), are not taken for unpublished: the writes to judge are
    read before the claims, run_commits after."""
    wh = str(tmp_path / "wh")
    three_runs(wh)
    written = []
    for table in TABLES:  # a job's writes, committed, not yet published
        write_id = new_write_id()
        Path(staging_path(wh, table, write_id)).mkdir(parents=True)
        write_parquet(rows(table, 4, 8), f"{staging_path(wh, table, write_id)}/part-p000000.parquet")
        report = commit_written(wh, table, "r2", schemas.TABLES[table].schema, write_id)
        written.append(TableWrite(table, report.write_id, report.rows))
    real_claims = vacuum_module.claim_files

    def publish_then_claims(base: str) -> list:
        if written:  # the job publishes at the first table's look at the claims
            publish_writes(wh, "r2", "test", written)
            remove_superseded(wh, "r2", TABLES)
            written.clear()
        return real_claims(base)

    monkeypatch.setattr(vacuum_module, "claim_files", publish_then_claims)
    time.sleep(1.1)  # the writes are older than the vacuum's cutoff (whole seconds)
    vacuum(wh, min_age_s=0)
    assert {t: read_arrow(wh, t, "r2").num_rows for t in TABLES} == dict.fromkeys(TABLES, 4)


def test_an_empty_claim_never_holds_a_run_id_and_vacuum_clears_stale_claims(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Probe case 9: a full disk while claiming left a 0-byte claim: the run id was refused forever and
    vacuum did not clear it."""
    wh = str(tmp_path / "wh")
    job(wh, "r1", 1)

    def full(*_: object, **__: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(claims.json, "dump", full)
        with pytest.raises(OSError, match="No space left"):
            acquire(wh, "r1", "jobs/pipeline.py")
    assert not Path(claim_path(wh, "r1")).exists()  # the claimer deletes what it could not write

    empty = Path(claim_path(wh, "r2"))
    empty.write_bytes(b"")  # as a claimer killed between creating and writing it leaves it
    assert [c.stale for c in claim_files(wh)] == [None]  # just made: maybe being written
    old = time.time() - claims.WRITE_GRACE_S - 1
    os.utime(empty, (old, old))
    release(wh, acquire(wh, "r2", "jobs/pipeline.py"))  # taken over
    empty.write_bytes(b"")
    os.utime(empty, (old, old))
    dead = dataclasses.replace(claims.new_claim("r3", "jobs/pipeline.py"), pid=_dead_pid())
    Path(claim_path(wh, "r3")).write_text(json.dumps(dataclasses.asdict(dead)))
    code, out, _ = run_vacuum(wh, capsys, "--dry-run")
    assert code == 0 and "run r2: stale claim would clear (it is empty or damaged" in out
    assert "run r3: stale claim would clear (its process " in out and len(claim_files(wh)) == 2
    code, out, _ = run_vacuum(wh, capsys)
    assert code == 0 and "run r2: stale claim cleared" in out and "run r3: stale claim cleared" in out
    assert claim_files(wh) == []


def _dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return int(done.stdout)


# ------------------------------------------------------------------------------ killed jobs, damage


@pytest.mark.parametrize(
    "point", [f"{TABLES[0]}:written", f"{TABLES[0]}:staged", f"{TABLES[0]}:before_commit"]
)
def test_a_first_run_killed_before_any_commit_leaves_nothing_after_vacuum(
    point: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Probe case 13: a first run killed before any commit (no table log, no run_commits) left its files
    (334 MB) to every vacuum."""
    wh = str(tmp_path / "wh")
    killed_job(wh, "r1", 1, point)
    assert data_files(wh)
    code, out, err = run_vacuum(wh, capsys)
    assert (code, err) == (0, ""), err
    assert data_files(wh) == set(), out


def test_a_first_run_killed_after_a_commit_is_cleaned_up_once_a_run_is_published(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A table holds a committed write but nothing was ever published (killed before run_commits was
    made): run_commits is missing as if moved away, so vacuum refuses (naming both causes) until a run is
    published."""
    wh = str(tmp_path / "wh")
    killed_job(wh, "r1", 1, f"{TABLES[1]}:staged")
    code, _, err = run_vacuum(wh, capsys)
    assert code == 2 and "rerun that run. Nothing was removed" in err
    job(wh, "r1", 2)
    before = visible(wh)
    code, _, err = run_vacuum(wh, capsys)
    assert (code, err) == (0, "")
    assert visible(wh) == before and data_files(wh) <= logged(wh)
    assert all(superseded_writes(wh, t) == {} for t in TABLES)


@pytest.mark.parametrize("point", POINTS)
def test_a_rerun_killed_at_any_point_is_cleaned_up_and_every_run_reads_as_before(
    point: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The crash harness's kill points: after vacuum nothing of the killed job is left (no file no log
    names, no write no run names) and every complete run reads as before (killed after its run-level
    commit: the new run, whole). Killed with its run_commits file in the run's partition but not in the
    log, that file and its writes stay (they may be a commit whose log entry was lost) until a rerun of
    the run supersedes them."""
    wh = str(tmp_path / "wh")
    three_runs(wh)
    killed_job(wh, "r2", 7, point)
    before = visible(wh)
    code, out, err = run_vacuum(wh, capsys)
    assert (code, err) == (0, ""), err
    assert visible(wh) == before
    if point in (f"{RUN_COMMITS_TABLE}:staged", f"{RUN_COMMITS_TABLE}:before_commit"):
        unlogged = data_files(wh) - logged(wh)
        assert [f.split("/")[:2] for f in unlogged] == [[RUN_COMMITS_TABLE, "run_id=r2"]], unlogged
        assert all(list(superseded_writes(wh, t)) == ["r2"] for t in TABLES), out
        assert "until a later run of the same id supersedes it" in out
        job(wh, "r2", 8)
        before = visible(wh)
        code, out, err = run_vacuum(wh, capsys)
        assert (code, err) == (0, "") and visible(wh) == before, err
    assert data_files(wh) <= logged(wh), data_files(wh) - logged(wh)
    assert all(superseded_writes(wh, t) == {} for t in TABLES), out


def test_a_damaged_table_is_reported_and_the_others_are_vacuumed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Probe case 12: vacuum on a damaged table log traced (Python and Rust) and stopped partway."""
    wh = str(tmp_path / "wh")
    three_runs(wh)
    killed_job(wh, "r2", 7, f"{RUN_COMMITS_TABLE}:written")  # unpublished writes in every table
    garbage, cut = TABLES[0], TABLES[1]  # to deltalake, to Python's JSON reader
    last_commit(wh, garbage).write_text("garbage{\n")  # deltalake refuses it
    text = last_commit(wh, cut).read_text()  # two objects on a line: deltalake reads on, Python's JSON not
    last_commit(wh, cut).write_text(text.replace("}\n", "}{}\n", 1))
    code, out, err = run_vacuum(wh, capsys)
    lines = sorted(err.splitlines())
    assert code == 1 and len(lines) == 2, err
    assert lines[0].startswith(f"error: {cut}: left alone: its Delta log cannot be read (Extra data: ")
    assert lines[1].startswith(f"error: {garbage}: left alone: the Delta log of table {garbage} (")
    assert "Traceback" not in err and "<unknown>" not in err
    assert f"{TABLES[2]}: removed unpublished write run_id=r2/" in out
    assert superseded_writes(wh, TABLES[2]) == {}


def test_unpublished_writes_are_kept_while_a_table_lacks_a_write_run_commits_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A table without a write run_commits names may be the sign of a run_commits behind the tables:
    then no write anywhere is taken for unpublished."""
    wh = str(tmp_path / "wh")
    three_runs(wh)
    killed_job(wh, "r2", 7, f"{RUN_COMMITS_TABLE}:written")
    for commit in sorted((Path(wh) / TABLES[0] / "_delta_log").glob("*.json"))[-3:]:
        commit.unlink()  # the killed job's write, r1's rerun and the removal of its old write
    code, out, err = run_vacuum(wh, capsys)
    assert code == 1 and err.startswith(f"error: {TABLES[0]}: left alone: run 'r1' of table {TABLES[0]} ")
    assert f"{TABLES[1]}: 0 orphan(s) deleted, 0 unpublished write(s) (unpublished writes kept: " in out
    assert superseded_writes(wh, TABLES[1]) and superseded_writes(wh, TABLES[2])


def test_a_table_holding_a_write_short_is_left_alone_and_the_others_vacuumed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row deleted by hand (outside rocketsim): that table is reported and left alone; it says nothing
    about run_commits, so the other tables lose their unpublished writes."""
    wh = str(tmp_path / "wh")
    three_runs(wh)
    killed_job(wh, "r2", 7, f"{RUN_COMMITS_TABLE}:written")
    column = _int_column(read_arrow(wh, TABLES[0], "r1"))
    DeltaTable(table_path(wh, TABLES[0])).delete(f"run_id = 'r1' AND {column} = 3000")
    code, out, err = run_vacuum(wh, capsys)
    assert code == 1 and err.startswith(f"error: {TABLES[0]}: left alone: run 'r1' of table {TABLES[0]} ")
    assert "the table's log holds 5 of the 6 rows" in err and len(err.splitlines()) == 1
    assert superseded_writes(wh, TABLES[0]) and not superseded_writes(wh, TABLES[1])


def test_vacuum_of_a_warehouse_never_written_and_of_file_uris(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert vacuum(tmp_path / "empty").tables == []
    wh = str(tmp_path / "wh")
    job(wh, "r1", 1)
    assert [t.table for t in vacuum(f"file://{wh}").tables] == sorted([*TABLES, RUN_COMMITS_TABLE])
    with pytest.raises(VacuumRefused, match="does not exist: nothing to vacuum"):
        vacuum(tmp_path / "nosuch")


def test_a_commit_whose_log_entry_was_lost_before_its_record_survives_vacuum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by the vacuum property: a rerun killed right after its run-level commit (no publication
    record yet), then that commit's log entry lost. The rerun's run_commits file and the writes it names
    look unpublished; vacuum keeps them, so restoring the entry gives back the rerun, whole."""
    wh = str(tmp_path / "wh")
    three_runs(wh)
    killed_job(wh, "r2", 7, f"{RUN_COMMITS_TABLE}:committed")
    before = visible(wh)
    entry = last_commit(wh, RUN_COMMITS_TABLE)
    text = entry.read_text()
    entry.unlink()
    code, out, err = run_vacuum(wh, capsys)
    assert (code, err) == (0, "") and "unpublished writes kept: run(s) r2 hold a run_commits file" in out
    entry.write_text(text)
    assert visible(wh) == before
