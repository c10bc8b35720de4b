"""What the ``rocketsim`` command imports before it has work to do: ``--help``, a usage error and a bad
scenario (exit 2, one line) never import pyspark or numba, each of which takes most of a second to import
(with the engine and Spark's layer, a usage error took ~1 s on two idle cores, ~3 s loaded). Each case
runs in a fresh interpreter, as a user's command does, and reports the modules it ended with.

``rocketsim validate``'s help names its fit's constants: they live in a module of their own
(rocketsim.validation.hosts), its options in rocketsim.command.validate_options, so that neither its help nor
a usage error imports the engine. A run whose input tables are missing is refused before Spark's layer
starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STEADY = str(ROOT / "conf" / "scenarios" / "steady.toml")
HEAVY = ("pyspark", "numba")
PROBE = """
import contextlib, io, json, sys
from rocketsim.command import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
heavy = sorted({name.split(".")[0] for name in sys.modules} & set(json.loads(HEAVY)))
print(json.dumps({"code": code, "heavy": heavy, "stderr": err.getvalue()}))
"""


def imports_of(*argv: str, cwd: Path, heavy: tuple[str, ...] = HEAVY) -> dict:
    """``rocketsim ARGV`` in a fresh interpreter: its exit code, stderr, and which of ``heavy`` it
    imported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROCKETSIM_", "PYSPARK_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    code = PROBE.replace("HEAVY", repr(json.dumps(heavy)))
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


HELP = [
    ["--help"],
    ["run", "--help"],
    ["compare", "--help"],
    ["capacity", "--help"],
    ["replay", "--help"],
    ["calibrate", "--help"],
    ["report", "--help"],
    ["export", "omb", "--help"],
    ["validate", "--help"],
    ["vacuum", "--help"],
]
USAGE = [
    ["frobnicate"],
    ["run", "--bogus"],
    ["compare", "--scenario", STEADY],
    ["capacity", "--scenario", STEADY, "--brokers", "2,3"],
    ["calibrate", "--out", "x.toml"],
    ["report", "--bogus"],
    ["export", "omb", "--run-id", "r"],
    ["validate", "runs"],
    ["replay", "--base", STEADY],
]


def shown(argv: list[str]) -> str:
    return " ".join(Path(a).name if a == STEADY else a for a in argv)


@pytest.mark.parametrize("argv", HELP, ids=shown)
def test_help_imports_neither_spark_nor_numba(argv: list[str], tmp_path: Path) -> None:
    seen = imports_of(*argv, cwd=tmp_path)
    assert seen["code"] == 0 and seen["heavy"] == [], seen


# the help of a command that takes no scenario: no numerical library either (validate's took ~1 s of CPU with
# the engine and the report's charts, replay's ~0.5 s with pandas and scipy)
LIGHT_HELP = [["--help"], ["validate", "--help"], ["replay", "--help"], ["report", "--help"]]
NUMERICAL = ("numpy", "pandas", "scipy", "pyarrow", "matplotlib", *HEAVY)


@pytest.mark.parametrize("argv", LIGHT_HELP, ids=shown)
def test_help_without_a_scenario_imports_no_numerical_library(argv: list[str], tmp_path: Path) -> None:
    seen = imports_of(*argv, cwd=tmp_path, heavy=NUMERICAL)
    assert seen["code"] == 0 and seen["heavy"] == [], seen


@pytest.mark.parametrize("argv", USAGE, ids=shown)
def test_a_usage_error_imports_neither_spark_nor_numba(argv: list[str], tmp_path: Path) -> None:
    seen = imports_of(*argv, cwd=tmp_path)
    assert seen["code"] == 2 and seen["stderr"].count("\n") == 1, seen
    assert seen["heavy"] == [], seen


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["run", "--set", "workload.messages=-1"], "workload.messages must be >= 0, got -1"),
        (["compare", "--variant", "a:x=1", "--variant", "b:x=2"], "ScenarioError"),
        (["capacity", "--brokers", "0", "--target-p99-ms", "5"], "--brokers needs at least 2"),
    ],
    ids=lambda v: shown(v) if isinstance(v, list) else "",
)
def test_a_bad_scenario_is_refused_without_spark_or_numba(argv: list[str], says: str, tmp_path: Path) -> None:
    seen = imports_of(argv[0], "--scenario", STEADY, *argv[1:], cwd=tmp_path)
    assert seen["code"] == 2 and says in seen["stderr"] and seen["stderr"].count("\n") == 1, seen
    assert seen["heavy"] == [], seen
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_bad_scenario_file_is_refused_without_spark_or_numba(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[cluster]\nbrokers = 0\n", encoding="utf-8")
    seen = imports_of("run", "--scenario", str(bad), cwd=tmp_path)
    assert seen["code"] == 2 and "ScenarioError: cluster.brokers" in seen["stderr"], seen
    assert seen["heavy"] == [], seen


@pytest.mark.parametrize(("given", "loaded_with"), [(None, "1"), ("2", "2")])
def test_calibrate_loads_scipy_with_one_blas_thread_unless_told(
    given: str | None, loaded_with: str, tmp_path: Path
) -> None:
    # scipy's OpenBLAS reads OPENBLAS_NUM_THREADS when scipy loads: the command must set it before then
    probe = """
import json, os, sys
seen = []
def audit(event, args):
    if event == "import" and args[0] == "scipy" and not seen:
        seen.append(os.environ.get("OPENBLAS_NUM_THREADS"))
sys.addaudithook(audit)
from rocketsim.command import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "scipy_loaded_with": seen}))
"""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    csv = ROOT / "tests" / "data" / "calibration" / "latencies.csv"
    argv = ["calibrate", "--input", f"csv:{csv}", "--out", str(tmp_path / "f.toml")]
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"code": 0, "scipy_loaded_with": [loaded_with]}


def test_a_run_whose_input_tables_are_missing_is_refused_without_spark(tmp_path: Path) -> None:
    # --stage summarize reads the run's attempts and results: none in an empty warehouse, so the job is
    # refused (exit 2, one line) before Spark starts, and pyspark is never imported
    seen = imports_of(
        "run", "--scenario", STEADY, "--stage", "summarize", "--warehouse", str(tmp_path), cwd=tmp_path
    )
    assert seen["code"] == 2 and seen["stderr"].startswith("MissingRunError: run 'steady-s42' has no"), seen
    assert seen["stderr"].count("\n") == 1 and seen["heavy"] == [], seen
