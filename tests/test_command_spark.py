"""The ``rocketsim`` command on real Spark runs (rocketsim/command): ``rocketsim run`` writes the very
tables ``./spark-submit.sh jobs/pipeline.py`` writes with the same arguments, prints the same summary,
and shows its progress on stderr (plain lines when stderr is no terminal); a failure after Spark started
is one line on stderr naming Spark's log, exit code 1, as through the script.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_runs import messages_without_files

from rocketsim.bench.digest import TABLES, read_run, table_digest

ROOT = Path(__file__).resolve().parents[1]
STEADY = ROOT / "conf" / "scenarios" / "steady.toml"
SETS = ["workload.messages=3000", "producers.count=2"]
# tiny runs: a JVM tuned for short jobs (C1 JIT only, serial GC), as tests/test_reliability_cli.py
SPARK = [
    "--master", "local[2]", "--driver-memory", "2g",
    "--conf", "spark.driver.extraJavaOptions=-Duser.timezone=UTC -XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
]  # fmt: skip
# a progress line: [m:ss] <job> <run id>: <what>: <how far>
PROGRESS = re.compile(
    r"\[(\d+):(\d\d)\] pipeline r1: (starting|producer tasks, 3,000 messages|broker tasks): "
    r"(\d+/\d+ tasks done(, \d+ running)?(, \d+ failed \(Spark retries them\))?"
    r"|done; the driver is at work|the driver is at work|starting its tasks)"
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs Java 17"),
]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROCKETSIM_", "PYSPARK_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return {**env, **extra}


def rocketsim(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocketsim", *args],
        cwd=cwd, env=_env(**env), capture_output=True, text=True, timeout=900,
    )  # fmt: skip


def spark_submit(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ROOT / "spark-submit.sh"), *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )


def _summary(stdout: str) -> list[str]:
    """The end-of-run summary, without the line that names the warehouse's folder."""
    lines = stdout.split("\nrun r1: ", 1)[1].splitlines()
    return [line for line in lines if not re.match(r"(\d+ )?tables:|done in", line.lstrip())]


def test_rocketsim_run_writes_the_tables_spark_submit_writes(tmp_path: Path) -> None:
    job = [
        "--scenario",
        str(STEADY),
        "--run-id",
        "r1",
        "--partitions",
        "2",
        *[a for s in SETS for a in ("--set", s)],
    ]
    by_script = spark_submit([*SPARK, "jobs/pipeline.py", *job, "--warehouse", str(tmp_path / "a")], tmp_path)
    assert by_script.returncode == 0, by_script.stderr[-3000:]
    # the command's options and the job's in any order; a progress line every half second
    by_command = rocketsim(
        ["run", *job[:2], *SPARK, *job[2:], "--warehouse", str(tmp_path / "b")],
        tmp_path,
        ROCKETSIM_PROGRESS_EVERY_S="0.5",
        ROCKETSIM_LOG_DIR=str(tmp_path / "logs"),
    )
    assert by_command.returncode == 0, by_command.stderr[-3000:]

    for table in TABLES:
        a, b = read_run(tmp_path / "a", table, "r1"), read_run(tmp_path / "b", table, "r1")
        assert a is not None and b is not None, table
        assert table_digest(a) == table_digest(b), table
    assert _summary(by_command.stdout) == _summary(by_script.stdout)
    assert "run r1: 3,000 messages" in by_command.stdout

    # stderr is a pipe here: plain progress lines, nothing else (but the scenario's warnings: 2 producers of
    # steady.toml's 4 threads are told their sync sends will queue)
    lines = [line for line in by_command.stderr.splitlines() if not line.startswith("warning: ")]
    assert lines and all(PROGRESS.fullmatch(line) for line in lines), lines
    seconds = [int(m) * 60 + int(s) for m, s in (PROGRESS.fullmatch(line).groups()[:2] for line in lines)]
    assert seconds == sorted(seconds)
    assert any(re.search(r": producer tasks, 3,000 messages: \d/2 tasks done", line) for line in lines), lines
    assert any(": broker tasks: " in line for line in lines), lines
    assert "\r" not in by_command.stderr and "\x1b" not in by_command.stderr  # no terminal codes in a file


def test_a_failure_after_spark_started_is_one_line_naming_sparks_log(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    messages_without_files(wh, STEADY, ["workload.messages=200", "producers.count=1"])
    done = rocketsim(
        ["run", "--stage", "simulate", *SPARK, "--scenario", str(STEADY), "--warehouse", str(wh),
         "--run-id", "r1", "--set", "workload.messages=200", "--set", "producers.count=1"],
        tmp_path,
        ROCKETSIM_LOG_DIR=str(tmp_path / "logs"),
    )  # fmt: skip
    *progress_lines, last = done.stderr.splitlines()
    assert done.returncode == 1, done.stderr[-3000:]
    # a job longer than ROCKETSIM_PROGRESS_EVERY_S (30 s) printed progress lines before it (and the
    # scenario's warnings: one producer of steady.toml's 4 threads is told its sync sends will queue)
    progress_lines = [line for line in progress_lines if not line.startswith("warning: ")]
    assert all(re.fullmatch(r"\[\d+:\d\d\] simulate r1: .+", line) for line in progress_lines), progress_lines
    line = re.fullmatch(r"error: a file the job needs is missing \(.*\(Spark's log: (\S+)\)", last)
    assert line, last
    log = Path(line.group(1))
    assert log.parent == tmp_path / "logs" and log.name.startswith("spark-simulate-")
    assert "ERROR" in log.read_text()  # Spark's own account of the failed task, kept out of the terminal
    assert "Traceback" not in done.stdout + done.stderr
