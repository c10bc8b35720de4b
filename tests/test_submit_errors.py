"""Through ./spark-submit.sh, a failure is one line on stderr (the README's promise): the Python driver's
own stderr reaches the JVM's stdout there, and the JVM's stderr carries Spark's logging (a failed task
logs 140-170 lines). The script prints the driver's one line on stderr once the JVM ended and sends
Spark's logging to a log file the line names (rocketsim/spark/launch.py)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from tiny_runs import claim_held_elsewhere, messages_without_files

ROOT = Path(__file__).resolve().parents[1]
STEADY = ROOT / "conf" / "scenarios" / "steady.toml"
SETS = ["workload.messages=200", "producers.count=1"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs Java 17"),
]


def submit(job: str, warehouse: Path, run_id: str, **env: str) -> subprocess.CompletedProcess[str]:
    cmd = [str(ROOT / "spark-submit.sh"), "--master", "local[1]", f"jobs/{job}", "--scenario", str(STEADY)]
    cmd += ["--warehouse", str(warehouse), "--run-id", run_id, *[a for s in SETS for a in ("--set", s)]]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ROCKETSIM_")}
    return subprocess.run(
        cmd, cwd=warehouse.parent, env={**clean, **env}, capture_output=True, text=True, timeout=600
    )


def test_a_failure_after_spark_started_is_one_line_naming_sparks_log(tmp_path: Path) -> None:
    """jobs/simulate.py on a run whose messages file was deleted: the log still lists it (so the check
    before Spark passes), the tasks fail reading it."""
    wh = tmp_path / "wh"
    messages_without_files(wh, STEADY, SETS)

    done = submit("simulate.py", wh, "r1")
    lines = done.stderr.splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr[-3000:]
    line = re.fullmatch(r"error: a file the job needs is missing \(.*\(Spark's log: (\S+)\)", lines[0])
    assert line, lines
    log = Path(line.group(1))
    assert log.is_file() and "ERROR" in log.read_text()  # Spark's own account of the failed task
    assert "Traceback" not in done.stdout and "error:" not in done.stdout  # the line only on stderr


def test_a_refusal_in_the_real_run_is_one_line_too(tmp_path: Path) -> None:
    """A second job on a run id, refused after the JVM started (no preflight here): one line."""
    wh = tmp_path / "wh"
    with claim_held_elsewhere(wh, "r1") as holder:
        done = submit("pipeline.py", wh, "r1", ROCKETSIM_PREFLIGHT="0")
    lines = done.stderr.splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith(f"ClaimError: run r1 is being written by jobs/pipeline.py (pid {holder.pid} ")
