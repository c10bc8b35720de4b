"""The cut scripts of tests/data/realbroker-reruns (``threads/cut_waits.py``, ``threads/cut_worker.py``
through it, ``threads/cut_execq.py``, ``threads/cut_steady.py``, ``threads/cut_beside.py``,
``g1_backlog/cut_c_overload.py``, ``g1_backlog/cut_gcload.py``):
their ``--set=KEY=VALUE`` is read by the scenario's own ``--set`` parser
(:func:`rocketsim.scenario.overrides.parse_override`), once, before they calibrate."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RERUNS = ROOT / "tests" / "data" / "realbroker-reruns"
SCRIPTS = (
    "threads/cut_waits.py",
    "threads/cut_worker.py",
    "threads/cut_execq.py",
    "threads/cut_steady.py",
    "threads/cut_beside.py",
    "g1_backlog/cut_c_overload.py",
    "g1_backlog/cut_gcload.py",
)


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_bad_set_is_refused_before_the_cut_calibrates(script: str, tmp_path: Path) -> None:
    log = [str(tmp_path / "pauses.csv")] if script.endswith("cut_beside.py") else []  # its log comes first
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(RERUNS / script), *log, "10000:0.1", "--set=producers.heap_stops"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1 and done.stdout == "", (done.stdout, done.stderr[-2000:])
    assert "ScenarioError: --set 'producers.heap_stops' must look like key.path=value" in done.stderr


def test_the_values_read_as_the_scenarios_set_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    # what the helpers' command lines give (a name, a whole number, a share) reads as before; a TOML value
    # the old parse left a string (a negative number, an exponent, a boolean) now reads as `rocketsim run
    # --set` reads it
    monkeypatch.syspath_prepend(str(RERUNS / "threads"))
    import cut_waits

    argv = ["10000:1,72000:5", "--no-startup", "--set=producers.heap_stops=client"]
    argv += ["--set=producers.host_other_threads=2", "--set=producers.netty_write_cpu_share=0.25"]
    argv += ["--set=a.b=-1", "--set=a.c=1e-3", "--set=a.d=true"]
    assert cut_waits.overrides(argv) == [
        ("producers.heap_stops", "client"),
        ("producers.host_other_threads", 2),
        ("producers.netty_write_cpu_share", 0.25),
        ("a.b", -1),
        ("a.c", 0.001),
        ("a.d", True),
    ]
