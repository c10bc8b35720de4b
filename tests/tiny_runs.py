"""Tiny runs made with the warehouse layer alone (no Spark): each job writes a few rows of three registry
tables, commits each as a write, publishes them in one run-level commit and removes what they superseded,
as every job of the project does (:mod:`rocketsim.warehouse.run_commit`); the crash hook stops it at any
point; readers give every complete run's rows. Shared by the run-level commit and vacuum tests."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa

from rocketsim.scenario import load_scenario, workload
from rocketsim.tables import schemas
from rocketsim.warehouse import delta
from rocketsim.warehouse.delta import CRASH_AT_ENV, CRASH_STAGES, commit_written
from rocketsim.warehouse.files import write_parquet
from rocketsim.warehouse.paths import new_write_id, staging_path
from rocketsim.warehouse.read import list_runs, read_arrow, run_file_uris
from rocketsim.warehouse.run_commit import RUN_COMMITS_TABLE, TableWrite, publish_writes, remove_superseded

HERE = Path(__file__).resolve().parent
TABLES = ("isolation_intervals", "consumer_load", "run_summary")  # three tables of a "run"
# Every point a job can be killed at: each table's write, then the run-level commit's.
POINTS = [f"{t}:{s}" for t in TABLES for s in CRASH_STAGES] + [
    f"{RUN_COMMITS_TABLE}:{s}" for s in ("written", "staged", "before_commit", "committed")
]


class Killed(BaseException):
    """What the crash hook's SIGKILL does here: the job stops at that point."""


def rows(table: str, n: int, seed: int) -> pa.Table:
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
        write_parquet(rows(table, 3 + seed % 4, seed), f"{staging}/part-p000000.parquet")
        report = commit_written(warehouse, table, run_id, schemas.TABLES[table].schema, write_id)
        written.append(TableWrite(table, report.write_id, report.rows))
    publish_writes(warehouse, run_id, "test", written, dropped)
    remove_superseded(warehouse, run_id, [*tables, *dropped])


def visible(warehouse: str, tables: tuple[str, ...] = TABLES) -> dict[str, dict[str, list]]:
    """Every complete run's rows of every table, as the readers give them."""
    return {
        t: {r: sorted(map(str, read_arrow(warehouse, t, r).to_pylist())) for r in list_runs(warehouse, t)}
        for t in tables
    }


@contextlib.contextmanager
def killed_at(point: str) -> Iterator[None]:
    """Within the block, the crash hook raises :class:`Killed` at ``point`` (``<table>:<stage>``)
    instead of SIGKILLing the process; other signals pass through."""
    real_kill = delta.os.kill  # the os module's: a claim's liveness probe sends signal 0

    def fake_kill(pid: int, sig: int) -> None:
        if sig != signal.SIGKILL:
            return real_kill(pid, sig)
        raise Killed

    old_env = delta.os.environ.get(CRASH_AT_ENV)
    delta.os.kill = fake_kill
    delta.os.environ[CRASH_AT_ENV] = point
    try:
        yield
    finally:
        delta.os.kill = real_kill
        if old_env is None:
            delta.os.environ.pop(CRASH_AT_ENV, None)
        else:
            delta.os.environ[CRASH_AT_ENV] = old_env


def killed_job(warehouse: str, run_id: str, seed: int, point: str) -> None:
    """:func:`job` in a process of its own, SIGKILLed at ``point`` by the crash hook: what it leaves is
    what a killed job leaves (in this process, the hook's :class:`Killed` would run the cleanup code a
    real kill skips)."""
    code = f"from tiny_runs import job; job({warehouse!r}, {run_id!r}, {seed})"
    env = {**os.environ, CRASH_AT_ENV: point, "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent)])}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, (point, done.returncode, done.stderr[-2000:])


@contextlib.contextmanager
def claim_held_elsewhere(warehouse: str | Path, run_id: str) -> Iterator[subprocess.Popen[str]]:
    """A live job's claim of ``run_id``, held by another process; SIGKILLed at the end of the block
    (dying without releasing it, as a killed job)."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from rocketsim.warehouse.claims import acquire; "
            "acquire(sys.argv[1], sys.argv[2], 'jobs/pipeline.py'); print('held', flush=True); "
            "time.sleep(600)",
            str(warehouse),
            run_id,
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(HERE.parent)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()


def messages_without_files(warehouse: Path, scenario: Path, overrides: list[str], run_id: str = "r1") -> None:
    """A run's ``messages`` of ``scenario`` published, then their data files deleted: the log still lists
    them (so a job's checks before Spark pass) and its tasks fail reading them."""
    messages = workload.generate(load_scenario(scenario, overrides))
    write_id = new_write_id()
    Path(staging_path(str(warehouse), "messages", write_id)).mkdir(parents=True)
    data = messages.select(schemas.data_schema(schemas.MESSAGES).names)
    write_parquet(data, f"{staging_path(str(warehouse), 'messages', write_id)}/part-p000000.parquet")
    report = commit_written(str(warehouse), "messages", run_id, schemas.MESSAGES, write_id)
    publish_writes(str(warehouse), run_id, "test", [TableWrite("messages", report.write_id, report.rows)])
    for uri in run_file_uris(str(warehouse), "messages", run_id):
        Path(unquote(uri.removeprefix("file://"))).unlink()
