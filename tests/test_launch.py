"""A job's life around its Spark work (:mod:`rocketsim.spark.launch`): two jobs on one run id (the second
fails fast, before Spark, naming the first; a dead first job's claim is taken over), a job whose input
run is missing says so, and every error after Spark started ends with one line saying what happened and
what to do (a full disk, a damaged Delta log, a missing file, a run that does not reconcile), without a
trace unless the error is unknown."""

from __future__ import annotations

import errno
import os
import re
import runpy
import sys
from pathlib import Path

import pytest
from tiny_runs import claim_held_elsewhere

from rocketsim.scenario import load_scenario, workload
from rocketsim.spark import launch
from rocketsim.spark.cli import JobArgs
from rocketsim.spark.session import PREFLIGHT_ENV, PREFLIGHT_OK
from rocketsim.tables import schemas
from rocketsim.tables.reconcile import ReconciliationError
from rocketsim.warehouse.claims import claim_path
from rocketsim.warehouse.delta import commit_written
from rocketsim.warehouse.files import write_parquet
from rocketsim.warehouse.paths import new_write_id, staging_path
from rocketsim.warehouse.read import read_arrow
from rocketsim.warehouse.run_commit import TableWrite, publish_writes, remove_superseded

ROOT = Path(__file__).resolve().parents[1]
STEADY = ROOT / "conf" / "scenarios" / "steady.toml"


def _job(
    job: str, warehouse: Path, run_id: str, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, str]:
    """``jobs/<job>.py`` run in this interpreter in preflight mode: it stops where Spark would start
    (exit 75) unless it was refused before; (exit code, stderr)."""
    argv = [
        f"jobs/{job}.py",
        "--scenario",
        str(STEADY),
        "--warehouse",
        str(warehouse),
        "--run-id",
        run_id,
        *extra,
    ]
    old = sys.argv
    sys.argv = argv
    os.environ[PREFLIGHT_ENV] = "1"
    capsys.readouterr()
    try:
        runpy.run_path(str(ROOT / "jobs" / f"{job}.py"), run_name="__main__")
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.argv = old
        del os.environ[PREFLIGHT_ENV]
    return (code if isinstance(code, int) else 1), capsys.readouterr().err


def test_two_jobs_on_one_run_id_the_second_fails_fast_naming_the_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wh = tmp_path / "wh"
    with claim_held_elsewhere(wh, "r1") as holder:  # SIGKILLed after: dies without releasing its claim
        for job in ("pipeline", "summarize", "compare"):
            extra = (
                ("--variant", "a:producers.threads=1", "--variant", "b:producers.threads=2", "--run-id", "r1")
                if job == "compare"
                else ()
            )
            code, err = _job(job, wh, "r1", capsys, *extra)
            assert code == 2, err
            lines = err.splitlines()
            assert len(lines) == 1 and lines[0].startswith(
                f"ClaimError: run r1 is being written by jobs/pipeline.py (pid {holder.pid} on host "
            ), lines
        code, _ = _job("pipeline", wh, "r2", capsys)  # another run id: no conflict
        assert code == PREFLIGHT_OK
    assert Path(claim_path(wh, "r1")).exists()
    code, err = _job("pipeline", wh, "r1", capsys)  # the dead job's claim is taken over
    assert code == PREFLIGHT_OK, err
    assert not Path(claim_path(wh, "r1")).exists()  # and released when the job ends


def test_a_job_reading_a_run_that_is_not_there_says_so_before_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wh = tmp_path / "wh"
    for job, table in (("summarize", "messages"), ("simulate", "messages"), ("broker_side", "messages")):
        code, err = _job(job, wh, "nodata", capsys)
        assert code == 2
        assert err.splitlines() == [
            f"MissingRunError: run 'nodata' has no {table} ({wh}/{table} is not a Delta table)"
        ]
        assert not wh.exists()  # refused before its claim: nothing written, not even the folder
    _publish_messages(wh, "half")  # messages only: summarize needs attempts and results too
    code, err = _job("summarize", wh, "half", capsys)
    assert (code, err.splitlines()) == (
        2,
        [f"MissingRunError: run 'half' has no send_attempts ({wh}/send_attempts is not a Delta table)"],
    )


def _publish_messages(wh: Path, run_id: str, rows: int = 0) -> None:
    """A run whose only table is ``messages`` (``rows`` of them, from the workload generator)."""
    write_id = new_write_id()
    staging = staging_path(str(wh), "messages", write_id)
    Path(staging).mkdir(parents=True)
    data = schemas.data_schema(schemas.MESSAGES).empty_table()
    if rows:
        sc = load_scenario(STEADY, [f"workload.messages={rows}", "producers.count=1"])
        data = workload.generate(sc).select(data.schema.names).cast(data.schema)
    write_parquet(data, f"{staging}/part-p000000.parquet")
    report = commit_written(str(wh), "messages", run_id, schemas.MESSAGES, write_id)
    publish_writes(str(wh), run_id, "test", [TableWrite("messages", report.write_id, report.rows)])
    remove_superseded(str(wh), run_id, ["messages"])


class _Session:
    def stop(self) -> None:
        pass


def _fail_after_start(
    error: BaseException, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, list[str]]:
    monkeypatch.setattr(launch, "start_spark", lambda app_name: _Session())

    def body(spark: object) -> None:
        raise error

    capsys.readouterr()
    code = launch.run_job("summarize", JobArgs("s.toml", str(tmp_path / "wh"), "r1"), body)
    return code, capsys.readouterr().err.splitlines()


@pytest.mark.parametrize(
    "error, line",
    [
        (
            OSError(errno.ENOSPC, "No space left on device"),
            "error: the disk is full (No space left on device) while writing run r1 to ",
        ),
        (
            RuntimeError(  # a Spark task's error: the task's Python trace as text
                "An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
                "  File 'x.py', line 1\n"
                "FileNotFoundError: [Errno 2] Failed to open local file '/w/t/a.parquet'"
            ),
            "error: a file the job needs is missing (FileNotFoundError: [Errno 2] Failed to open local file "
            "'/w/t/a.parquet'): a table's data files were deleted or moved outside rocketsim; restore them "
            "or rerun the job that wrote the run (nothing of this job is visible in run r1)",
        ),
        (
            ReconciliationError("run r1 does not reconcile: one result per message: 2000 != 1999"),
            "ReconciliationError: run r1 does not reconcile: one result per message: 2000 != 1999 (nothing "
            "of this job is visible in run r1: its tables are as they were)",
        ),
    ],
)
def test_an_error_after_spark_started_ends_with_one_line(
    error: BaseException,
    line: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, lines = _fail_after_start(error, tmp_path, monkeypatch, capsys)
    assert code == 1 and len(lines) == 1 and lines[0].startswith(line), lines
    assert not Path(claim_path(tmp_path / "wh", "r1")).exists()


def test_an_unknown_error_gets_its_line_first_then_the_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = _fail_after_start(ZeroDivisionError("division by zero"), tmp_path, monkeypatch, capsys)
    assert code == 1
    assert lines[0] == (
        "error: the job failed with ZeroDivisionError: division by zero "
        "(nothing of this job is visible in run r1)"
    )
    assert lines[1].startswith("Traceback") and lines[-1] == "ZeroDivisionError: division by zero"


def test_a_damaged_delta_log_is_named_in_one_line(tmp_path: Path) -> None:
    """The real error of a reader on a damaged log, as the job reports it."""
    wh = tmp_path / "wh"
    _publish_messages(wh, "r1")
    log = sorted((wh / "messages" / "_delta_log").glob("*.json"))[-1]
    log.write_text("garbage\n")
    with pytest.raises(Exception) as info:
        read_arrow(str(wh), "messages", "r1")
    line, known = launch.describe_failure(info.value, str(wh), "r1")
    assert known
    assert line.startswith(f"error: the Delta log of table messages ({wh}/messages) cannot be read: ")
    assert line.endswith(
        "restore that table's _delta_log from a backup (jobs/vacuum.py leaves a damaged table alone, and "
        "refuses a warehouse whose run_commits is damaged); nothing of this job is visible in run r1"
    )
    assert "\n" not in line and "move" not in line  # moving run_commits away made vacuum destroy every run


def test_through_spark_submit_the_line_goes_to_its_error_file_and_the_trace_to_sparks_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """spark-submit.sh sets ROCKETSIM_ERROR_FILE (the driver's own stderr reaches the JVM's stdout there)
    and ROCKETSIM_SPARK_LOG (where the JVM's stderr, Spark's logging, goes): the one line goes to the
    first, naming the second, and an unknown error's trace goes to the log, not to the user."""
    errors, log = tmp_path / "error", tmp_path / "spark.log"
    monkeypatch.setenv(launch.ERROR_FILE_ENV, str(errors))
    monkeypatch.setenv(launch.SPARK_LOG_ENV, str(log))
    code, lines = _fail_after_start(ZeroDivisionError("division by zero"), tmp_path, monkeypatch, capsys)
    assert code == 1 and lines == []
    assert errors.read_text().splitlines() == [
        "error: the job failed with ZeroDivisionError: division by zero (nothing of this job is visible in "
        f"run r1) (its trace is in Spark's log {log})"
    ]
    assert "Traceback" in log.read_text() and log.read_text().rstrip().endswith("division by zero")
    errors.unlink()
    code, _ = _fail_after_start(OSError(errno.ENOSPC, "No space left"), tmp_path, monkeypatch, capsys)
    (line,) = errors.read_text().splitlines()
    assert code == 1 and line.startswith("error: the disk is full") and line.endswith(f"(Spark's log: {log})")


def test_a_job_reading_a_run_whose_run_commits_lost_a_commit_says_so_before_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Probe case 12: jobs/summarize.py after the run's last run_commits commit was lost ended in an
    IndexError after Spark started: run_commits names the writes the rerun replaced (and removed)."""
    wh = tmp_path / "wh"
    for _ in range(2):  # the run, then a rerun (which removes the first writes)
        _publish_messages(wh, "r1", rows=3)
    sorted((wh / "run_commits" / "_delta_log").glob("*.json"))[-1].unlink()
    code, err = _job("simulate", wh, "r1", capsys)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert re.fullmatch(
        r"DamagedRunError: run 'r1' of table messages does not match run_commits: the table's log holds 0 "
        r"of the 3 rows of its write \S+ \(the table lost commits or files, or run_commits is an older copy "
        r"than the tables\): restore the table from a backup, or rerun run r1\n",
        err,
    ), err
