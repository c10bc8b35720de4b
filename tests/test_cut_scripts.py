"""The cut scripts of tests/data/realbroker-reruns (``threads/cut_waits.py``, ``threads/cut_worker.py``
through it, ``threads/cut_execq.py``, ``threads/cut_steady.py``, ``threads/cut_beside.py``,
``g1_backlog/cut_c_overload.py``, ``g1_backlog/cut_gcload.py``, ``g1_backlog/cut_pauses.py``):
their ``--set=KEY=VALUE`` is read by the scenario's own ``--set`` parser
(:func:`rocketsim.scenario.overrides.parse_override`), once, before they calibrate; their shared setup
(``g1_backlog/cut_setup.py``) reads their STEPS and ``--run=NAME`` and cuts a run to the steps."""

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
    "g1_backlog/cut_pauses.py",
)


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_bad_set_is_refused_before_the_cut_calibrates(script: str, tmp_path: Path) -> None:
    takes_log = script.endswith(("cut_beside.py", "cut_pauses.py"))
    log = [str(tmp_path / "pauses.csv")] if takes_log else []  # its log comes first
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
    monkeypatch.syspath_prepend(str(RERUNS / "g1_backlog"))
    import cut_setup

    argv = ["10000:1,72000:5", "--no-startup", "--set=producers.heap_stops=client"]
    argv += ["--set=producers.host_other_threads=2", "--set=producers.netty_write_cpu_share=0.25"]
    argv += ["--set=a.b=-1", "--set=a.c=1e-3", "--set=a.d=true"]
    assert cut_setup.overrides(argv) == [
        ("producers.heap_stops", "client"),
        ("producers.host_other_threads", 2),
        ("producers.netty_write_cpu_share", 0.25),
        ("a.b", -1),
        ("a.c", 0.001),
        ("a.d", True),
    ]


def test_the_steps_and_the_run_read_from_the_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    # STEPS: the first argument not an option, wherever it is (cut_steady's --run before it), else the
    # script's default; --run=NAME else the script's run
    monkeypatch.syspath_prepend(str(RERUNS / "g1_backlog"))
    import cut_setup

    argv = ["--run=b_steady_async_p2_60000", "10000:1,72000:2.5", "--no-split", "--set=a.b=1"]
    assert cut_setup.steps(argv, "1:1") == ((10000, 1.0), (72000, 2.5))
    assert cut_setup.steps(["--no-split", "--set=a.b=1"], "10000:1,60000:4") == ((10000, 1.0), (60000, 4.0))
    assert cut_setup.run_name(argv, "c_overload_async_p2_72000") == "b_steady_async_p2_60000"
    assert cut_setup.run_name(argv[1:], "c_overload_async_p2_72000") == "c_overload_async_p2_72000"


def test_a_cut_sends_what_its_steps_send_beside_the_measured_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(RERUNS / "g1_backlog"))
    monkeypatch.chdir(ROOT)  # the runs' folder, as the scripts run: from the project's root
    import cut_setup

    run = cut_setup.read("c_overload_async_p2_72000")
    cut = cut_setup.cut(run, ((10000, 1.0), (72000, 2.5)))
    assert cut.meta.steps == ((10000, 1.0), (72000, 2.5)) and cut.meta.n == 10000 + 180000
    assert cut.per_second is run.per_second  # the measured seconds, to set beside the cut's
    assert run.meta.steps != cut.meta.steps and run.meta.n != cut.meta.n  # the run itself as read
