"""Reliability of the real command line (docs/design.md §6, §8), with ./spark-submit.sh on tiny runs.

One warehouse goes through a story, each step a test (they run in file order and share the module
fixture; a failed step makes the later ones error):

1. two pipelines start at the same moment on one fresh warehouse: r1 with every kind of invalid message
   on, r2 plain; both land (concurrent table creation and commits are retried, never lost or doubled), r1's
   bad messages are REJECTED results with upstream's text, and the counts reconcile;
2. at once, a new run r3 is SIGKILLed (its driver by the ``ROCKETSIM_CRASH_AT`` hook, then its whole
   process group) after its first Parquet files were moved into the messages partition, and a rerun of
   r2 just before its first commit: every table is readable and unchanged (versions and contents), r3
   is visible nowhere;
3. ``jobs/vacuum.py --min-age-s 0`` deletes the orphans: no unreferenced data file is left, tables read
   the same;
4. at once, rerunning r2 succeeds and reproduces it exactly, and ``jobs/summarize.py`` on r1, after a
   row of its send_results was deleted between the stages, is refused before Spark (the write holds
   fewer rows than run_commits recorded: the readers refuse it too) and leaves r1's summaries as they
   were;
5. at once, a rerun of r2 with other settings is SIGKILLed once every table of it is committed but
   before its run-level commit, and two pipelines with different settings start on one new run id r4:
   r2 reads as before, one r4 job lands whole and the other fails fast naming it (one writer per run id);
   ``jobs/vacuum.py`` then removes the killed rerun's unpublished writes and changes nothing visible.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import pytest
from deltalake import DeltaTable

from rocketsim.warehouse.delta import CRASH_AT_ENV
from rocketsim.warehouse.read import DamagedRunError, list_runs, read_arrow

ROOT = Path(__file__).resolve().parents[1]
STEADY = ROOT / "conf" / "scenarios" / "steady.toml"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs Java 17"),
]

# Tiny runs: two cores, few partitions, and a JVM tuned for short jobs (C1 JIT only, serial GC: about a
# third less CPU per run, which matters when two runs share the two cores).
SPARK = [
    "--master",
    "local[2]",
    "--driver-memory",
    "2g",
    "--conf",
    "spark.sql.shuffle.partitions=2",
    "--conf",
    "spark.default.parallelism=2",
    "--conf",
    "spark.driver.extraJavaOptions=-Duser.timezone=UTC -XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
]
INVALID = {
    "bad_topic": 0.02,
    "empty_body": 0.02,
    "oversize_body": 0.01,
    "oversize_properties": 0.01,
    "reserved_property": 0.02,
}
RUNS = {
    "r1": [
        "--set",
        "workload.messages=2000",
        "--set",
        "producers.count=2",
        *[a for kind, f in INVALID.items() for a in ("--set", f"workload.invalid.{kind}={f}")],
    ],
    "r2": ["--set", "workload.messages=500", "--set", "producers.count=1"],
    "r3": ["--set", "workload.messages=500", "--set", "producers.count=1", "--set", "seed=9"],
    "r4": ["--set", "workload.messages=300", "--set", "producers.count=1"],
}
MESSAGES = {"r1": 2000, "r2": 500}
UPSTREAM_TEXT = {  # the start of the client validator's message for each kind it refuses
    "bad_topic": "The specified topic[bad topic!] contains illegal characters",
    "empty_body": "CODE: 13  DESC: the message body length is zero",
    "oversize_body": "CODE: 13  DESC: the message body size over max value, MAX: 4194304",
    "reserved_property": "The Property<UNIQ_KEY> is used by system, input another please",
}
# Properties over 32767 bytes on a single message: no client validator checks them (Validators.checkMessage,
# 4.9.8); the broker answers MESSAGE_ILLEGAL (SendMessageProcessor.handlePutMessageResult): one FAILED attempt
BROKER_REFUSAL = (
    "MQBrokerException: CODE: 13  DESC: the message is illegal, maybe msg body or properties length"
)
# r1's send_results after step 4 deleted one of its rows by hand: the readers' refusal.
SHORT = "run 'r1' of table send_results does not match run_commits: the table's log holds 1,999 of the 2,000"
# Columns that a rerun legitimately changes (and the write id of every table's rows: bookkeeping).
VOLATILE = {"runs": {"started_at", "wall_time_s"}, "run_commits": {"write_id", "committed_at"}}


@dataclass(frozen=True)
class Done:
    returncode: int
    output: str  # stdout and stderr


def submit(
    job: str, run_id: str, warehouse: Path, *, crash_at: str = "", extra: tuple[str, ...] = ()
) -> Done:
    """Run ./spark-submit.sh in its own process group; afterwards SIGKILL whatever is left of the group
    (the crash hook kills only the Python driver: this kills the rest, as `kill -9 -<pgid>` would)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCKETSIM_")}
    if crash_at:
        env[CRASH_AT_ENV] = crash_at
    cmd = [
        str(ROOT / "spark-submit.sh"),
        *SPARK,
        f"jobs/{job}",
        "--scenario",
        str(STEADY),
        "--warehouse",
        str(warehouse),
        "--run-id",
        run_id,
        "--partitions",
        "2",
        *RUNS[run_id],
        *extra,
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=warehouse.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=900)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return Done(proc.returncode, out)


def tables(warehouse: Path) -> list[str]:
    return sorted(p.name for p in warehouse.iterdir() if DeltaTable.is_deltatable(str(p)))


def digest(warehouse: Path, table: str) -> dict[str, tuple[int, str]]:
    """Per run id: row count and a checksum of the rows (order-independent)."""
    data = DeltaTable(str(warehouse / table)).to_pyarrow_table()
    drop = [c for c in {"write_id", *VOLATILE.get(table, ())} if c in data.column_names]
    per_run: dict[str, list[str]] = {}
    for row in data.drop_columns(drop).to_pylist():
        per_run.setdefault(row["run_id"], []).append(json.dumps(row, sort_keys=True, default=str))
    return {
        run: (len(rows), hashlib.sha256("\n".join(sorted(rows)).encode()).hexdigest()[:16])
        for run, rows in per_run.items()
    }


@dataclass(frozen=True)
class Snapshot:
    versions: dict[str, int]
    contents: dict[str, dict[str, tuple[int, str]]]


def snapshot(warehouse: Path) -> Snapshot:
    names = tables(warehouse)
    return Snapshot(
        {t: DeltaTable(str(warehouse / t)).version() for t in names},
        {t: digest(warehouse, t) for t in names},
    )


def logged_paths(table_dir: Path) -> set[str]:
    """Every data file any commit of the log adds or removes (relative, unescaped)."""
    paths: set[str] = set()
    for commit in sorted((table_dir / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            for kind in ("add", "remove"):
                if kind in action:
                    paths.add(unquote(action[kind]["path"]))
    return paths


def unreferenced(warehouse: Path) -> dict[str, list[str]]:
    """Data files on disk that no commit mentions, staging leftovers included, per table."""
    out: dict[str, list[str]] = {}
    for table in tables(warehouse):
        root = warehouse / table
        known = logged_paths(root)
        files = [
            p.relative_to(root).as_posix()
            for p in root.rglob("*")
            if p.is_file() and p.relative_to(root).parts[0] != "_delta_log"
        ]
        extra = sorted(f for f in files if f not in known)
        if extra:
            out[table] = extra
    return out


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("reliability") / "wh"


@pytest.fixture(scope="module")
def state() -> dict[str, object]:
    return {}


# ---------------------------------------------------------------------------------- 1. concurrency


def test_two_pipelines_at_once_both_land_and_bad_messages_are_rejected(
    warehouse: Path, state: dict[str, object]
) -> None:
    warehouse.parent.mkdir(exist_ok=True)
    with ThreadPoolExecutor(max_workers=2) as pool:
        r1, r2 = pool.map(lambda rid: submit("pipeline.py", rid, warehouse), ["r1", "r2"])
    assert r1.returncode == 0, r1.output[-3000:]
    assert r2.returncode == 0, r2.output[-3000:]
    assert "[reconcile] 2,000 messages = 2,000 results" in r1.output
    assert "[reconcile] 500 messages = 500 results" in r2.output

    names = tables(warehouse)
    assert {"messages", "send_results", "send_attempts", "run_summary", "runs"} <= set(names)
    for table in ("messages", "send_results", "send_attempts", "run_summary", "runs"):
        assert list_runs(warehouse, table) == ["r1", "r2"], table
    for table in names:
        # one commit per run and table: nothing lost, nothing committed twice by a retry
        history = DeltaTable(str(warehouse / table)).history()
        committed = [h["rocketsim.run_id"] for h in history if "rocketsim.run_id" in h]
        assert sorted(committed) == ["r1", "r2"], (table, committed)
    for run, n in MESSAGES.items():
        assert read_arrow(warehouse, "messages", run).num_rows == n
        assert read_arrow(warehouse, "send_results", run).num_rows == n
    assert sorted(read_arrow(warehouse, "runs").column("run_id").to_pylist()) == ["r1", "r2"]

    # r1: every invalid kind became REJECTED results with the validator's text and no attempt
    results = read_arrow(warehouse, "send_results", "r1").to_pandas()
    rejected = results[results.status == "REJECTED"]
    assert 0.04 * 2000 < len(rejected) < 0.14 * 2000
    assert (rejected.attempts == 0).all()
    for kind, text in UPSTREAM_TEXT.items():
        assert rejected.error.str.startswith(text).any(), kind
    illegal = results[results.error.fillna("").str.startswith(BROKER_REFUSAL)]
    assert len(illegal) > 0 and (illegal.status == "FAILED").all() and (illegal.attempts == 1).all()
    summary = {r["scope"]: r for r in read_arrow(warehouse, "run_summary", "r1").to_pylist()}
    assert summary["all"]["rejected"] == len(rejected) and summary["all"]["messages"] == 2000
    assert f"{len(rejected):,} rejected" in r1.output
    attempts = read_arrow(warehouse, "send_attempts", "r1")
    assert attempts.num_rows == results.attempts.sum()
    state["before"] = snapshot(warehouse)


# ---------------------------------------------------------------------------------- 2. crashes


def test_kills_at_two_points_leave_every_table_readable_and_unchanged(
    warehouse: Path, state: dict[str, object]
) -> None:
    """Two runs killed at the same time: a new run r3 right after its first Parquet files were moved into
    its partition (staged), and a rerun of r2 just before it would commit its first table."""
    before: Snapshot = state["before"]  # type: ignore[assignment]
    with ThreadPoolExecutor(max_workers=2) as pool:
        new_run, rerun = pool.map(
            lambda job: submit("pipeline.py", job[0], warehouse, crash_at=job[1]),
            [("r3", "messages:staged"), ("r2", "messages:before_commit")],
        )
    for done in (new_run, rerun):
        assert done.returncode != 0 and "[generate]" not in done.output, done.output[-2000:]
    # both were killed after their files were in the table's partitions: orphans no reader sees
    orphans = unreferenced(warehouse).get("messages", [])
    assert any(f.startswith("run_id=r3/") for f in orphans), orphans
    assert any(f.startswith("run_id=r2/") for f in orphans), orphans
    after = snapshot(warehouse)  # every table reads (deltalake) and equals the last committed state
    assert after.versions == before.versions
    assert after.contents == before.contents
    assert list_runs(warehouse) == ["r1", "r2"]  # no partial r3 anywhere


# ---------------------------------------------------------------------------------- 3. vacuum


def test_vacuum_removes_every_orphan_and_changes_no_table(warehouse: Path, state: dict[str, object]) -> None:
    before: Snapshot = state["before"]  # type: ignore[assignment]
    assert unreferenced(warehouse)
    versions = snapshot(warehouse).versions
    done = subprocess.run(
        [sys.executable, str(ROOT / "jobs" / "vacuum.py"), "--warehouse", str(warehouse), "--min-age-s", "0"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert unreferenced(warehouse) == {}
    after = snapshot(warehouse)
    assert after.contents == before.contents and after.versions == versions


# ---------------------------------------------------------------------------------- 4. rerun, reconcile


def test_rerun_succeeds_while_a_tampered_run_fails_reconciliation(
    warehouse: Path, state: dict[str, object]
) -> None:
    """At the same time: r2 (killed above) is rerun by the pipeline, and jobs/summarize.py runs on r1
    after one of r1's result rows was deleted between the stages."""
    before: Snapshot = state["before"]  # type: ignore[assignment]
    victim = read_arrow(warehouse, "send_results", "r1", columns=["producer", "seq"]).to_pylist()[0]
    DeltaTable(str(warehouse / "send_results")).delete(
        f"run_id = 'r1' AND producer = {victim['producer']} AND seq = {victim['seq']}"
    )
    with pytest.raises(DamagedRunError, match=SHORT):
        read_arrow(warehouse, "send_results", "r1")  # never 1,999 rows without a word
    summaries = {
        t: read_arrow(warehouse, t, "r1") for t in ("producer_windows", "run_summary", "broker_windows")
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        rerun, tampered = pool.map(
            lambda job: submit(job[0], job[1], warehouse), [("pipeline.py", "r2"), ("summarize.py", "r1")]
        )

    assert rerun.returncode == 0, rerun.output[-3000:]
    after = snapshot(warehouse)
    for table, runs in before.contents.items():  # r2 replaced by an identical run
        assert after.contents[table].get("r2") == runs.get("r2"), table
    assert read_arrow(warehouse, "runs", "r2").num_rows == 1

    assert tampered.returncode == 2, tampered.output[-3000:]
    assert f"DamagedRunError: {SHORT}" in tampered.output and "[summarize]" not in tampered.output
    for table, rows in summaries.items():  # the inputs are checked before anything is replaced
        assert read_arrow(warehouse, table, "r1").equals(rows), table


# ------------------------------------------------------------------ 5. run-level commit, one writer


def visible(warehouse: Path) -> dict[str, dict[str, list[str] | str]]:
    """Every complete run's rows of every table, as the project's readers give them (r1's send_results,
    tampered with in step 4, as the readers' refusal)."""
    return {
        t: {run: _rows(warehouse, t, run) for run in list_runs(warehouse, t)}
        for t in tables(warehouse)
        if t != "run_commits"
    }


def _rows(warehouse: Path, table: str, run: str) -> list[str] | str:
    try:
        rows = read_arrow(warehouse, table, run).drop_columns(sorted(VOLATILE.get(table, ())))
    except DamagedRunError as exc:
        return type(exc).__name__
    return sorted(map(repr, rows.to_pylist()))


def test_a_kill_before_the_run_level_commit_and_two_writers_on_one_run_id(
    warehouse: Path, state: dict[str, object]
) -> None:
    before = visible(warehouse)
    jobs = [
        ("r2", "run_commits:written", ("--set", "seed=77")),  # every table written, none published
        ("r4", "", ("--set", "seed=1")),
        ("r4", "", ("--set", "seed=2", "--set", "workload.messages=200")),
    ]
    with ThreadPoolExecutor(max_workers=3) as pool:
        killed, a, b = pool.map(
            lambda j: submit("pipeline.py", j[0], warehouse, crash_at=j[1], extra=j[2]), jobs
        )
    assert killed.returncode != 0 and "[one pass]" in killed.output, killed.output[-2000:]
    assert "[runs] 1 row" not in killed.output
    landed, refused = (a, b) if a.returncode == 0 else (b, a)
    assert landed.returncode == 0, landed.output[-3000:]
    assert refused.returncode == 2, refused.output[-3000:]
    assert re.search(
        r"ClaimError: run r4 is being written by jobs/pipeline\.py \(pid \d+ on host ", refused.output
    )
    messages = read_arrow(warehouse, "messages", "r4").num_rows
    assert messages in (300, 200) and read_arrow(warehouse, "send_results", "r4").num_rows == messages
    assert read_arrow(warehouse, "runs", "r4").column("messages").to_pylist() == [messages]

    after = visible(warehouse)
    assert {t: {r: v for r, v in runs.items() if r != "r4"} for t, runs in after.items()} == {
        t: runs for t, runs in before.items()
    }  # r2 (and r1) exactly as before the killed rerun
    unpublished = DeltaTable(str(warehouse / "send_results")).to_pyarrow_table(
        filters=[("run_id", "=", "r2")]
    )
    assert len(set(unpublished.column("write_id").to_pylist())) == 2  # the killed rerun's write is there

    done = subprocess.run(
        [sys.executable, str(ROOT / "jobs" / "vacuum.py"), "--warehouse", str(warehouse), "--min-age-s", "0"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    # send_results holds r1's write short (step 4): reported and left alone, the other tables vacuumed
    assert done.returncode == 1 and done.stderr.startswith(f"error: send_results: left alone: {SHORT}"), done
    assert len(done.stderr.splitlines()) == 1
    assert "messages: removed unpublished write run_id=r2/write_id=" in done.stdout
    assert visible(warehouse) == after
    left = DeltaTable(str(warehouse / "messages")).to_pyarrow_table(filters=[("run_id", "=", "r2")])
    assert len(set(left.column("write_id").to_pylist())) == 1
