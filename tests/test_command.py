"""The ``rocketsim`` command without Spark (rocketsim/command): every command listed, grouped and documented
in ``--help`` and its own ``--help``; bad input through it is one line on stderr, exit code 2, nothing
written and no log left; spark-submit's options pass through to the JVM it would start; the console script
a wheel installs; the progress line (a status tracker played back).

The real runs (the same tables as ``./spark-submit.sh jobs/pipeline.py``, a failure after Spark started,
the progress lines of a real run) are in tests/test_command_spark.py.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from tiny_runs import claim_held_elsewhere

from rocketsim.command import COMMANDS, main, overview
from rocketsim.command import options as command_options
from rocketsim.spark import progress, submit

ROOT = Path(__file__).resolve().parents[1]
STEADY = ROOT / "conf" / "scenarios" / "steady.toml"
SPARK_COMMANDS = ("run", "compare", "capacity", "replay")


def rocketsim(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m rocketsim ARGS`` (what the console script runs) in ``cwd``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ROCKETSIM_", "PYSPARK_"))}
    clean["PYTHONPATH"] = os.pathsep.join([str(ROOT), clean.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "rocketsim", *args],
        cwd=cwd,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


# ---- help ----------------------------------------------------------------------------------------------


def test_the_overview_lists_every_command_under_its_group(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    assert text == overview() + "\n"
    groups = re.findall(r"^(\S[^\n]*):\n((?:  \S+ +\S[^\n]*\n)+)", text, re.M)
    listed = {
        line.split()[0]: group
        for group, lines in groups
        if group != "examples"
        for line in lines.splitlines()
    }
    assert listed == {c.name: c.group for c in COMMANDS}
    assert len({c.group for c in COMMANDS}) >= 3  # grouped by what users do
    for c in COMMANDS:
        assert re.search(rf"^  {c.name} +{re.escape(c.summary)}$", text, re.M), c.name
    assert re.search(r"^examples:\n  rocketsim run --scenario ", text, re.M)


def help_of(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    """``rocketsim COMMAND --help``'s text (argparse's help exits 0, the others return 0)."""
    try:
        code = main([command, "--help"])
    except SystemExit as exc:
        code = exc.code
    assert code in (0, None), command
    return capsys.readouterr().out


def test_every_command_documents_its_options_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    for c in COMMANDS:
        text = help_of(c.name, capsys)
        assert text.startswith(f"usage: rocketsim {c.name}"), (c.name, text[:200])
        examples = text.split("\nexamples:\n", 1)[1]
        assert re.match(rf"  rocketsim {c.name} ", examples), c.name
        if c.name in SPARK_COMMANDS:  # spark-submit's options pass through
            assert "--master URL" in text and "--conf KEY=VALUE" in text, c.name


def test_the_usage_line_says_what_the_command_takes(capsys: pytest.CaptureFixture[str]) -> None:
    # the options the command takes off before the job's parser sees them (--stage, spark-submit's) are in
    # the usage line too, after the job's own
    for name in SPARK_COMMANDS:
        usage = help_of(name, capsys).split("\n\n", 1)[0]
        assert usage.endswith(" [SPARK OPTIONS]") and "[-h]" in usage, usage
    run = help_of("run", capsys).split("\n\n", 1)[0]
    assert re.search(r"\[--tables [^]]+\]\s+\[--stage STAGE\] \[SPARK OPTIONS\]$", run), run
    assert "SPARK OPTIONS" not in help_of("validate", capsys).split("\n\n", 1)[0]


def test_run_lists_its_stages(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of("run", capsys)
    for stage in ("all", "generate", "simulate", "broker-side", "summarize"):
        assert re.search(rf"^    {stage} +\S", text, re.M), stage


def test_the_export_formats(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--help"]) == 0
    assert re.search(r"^formats:\n  omb +OpenMessaging Benchmark", capsys.readouterr().out, re.M)


def test_the_docs_page_names_every_command() -> None:
    page = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    for c in COMMANDS:
        assert f"`rocketsim {c.name}" in page, c.name


# ---- bad input -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], "rocketsim: error: name a command: run, compare, "),
        (["rnu"], "rocketsim: error: unknown command 'rnu'; did you mean run? (see rocketsim --help)"),
        (
            ["run", "--set", "producers.count=0"],
            "ScenarioError: producers.count must be between 1 and 100000",
        ),
        (["run", "--partitions", "x"], "rocketsim run: error: argument --partitions: invalid int value: 'x'"),
        (["run", "--stage", "nope"], "rocketsim run: error: argument --stage: invalid choice: 'nope'"),
        (["run", "--master"], "rocketsim run: error: argument --master: expected one argument"),
        (
            ["run", "--set", "workload.messages=-1", "--master", "local[1]"],
            "ScenarioError: workload.messages",
        ),
        (
            ["compare", "--variant", "a:producers.cuont=1"],
            "ScenarioError: variant a: producers.cuont is not",
        ),
        (["capacity", "--brokers", "3,x", "--target-p99-ms", "9"], "ScenarioError: --brokers must be comma"),
        (["export"], "rocketsim export: error: name a format: one of omb (see --help)"),
        (["export", "csv"], "rocketsim export: error: unknown format 'csv': one of omb (see --help)"),
        (["export", "omb", "--run-id", "r1", "--out", "o"], "error: "),  # no such run
        (["report", "--run-id", "nosuchrun"], "error: "),
        (["vacuum"], "error: --warehouse 'warehouse' does not exist: nothing to vacuum"),
        (["calibrate", "--out", "f.toml"], "rocketsim calibrate: error: give at least one --input"),
        (
            ["validate", "nosuch", "--calibrate-from", "a_low_async"],
            "rocketsim validate: error: nosuch: expected a harness run folder",
        ),
        (["replay", "--base", str(STEADY)], "rocketsim replay: error: give at least one of --latency"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    scenario = ["--scenario", str(STEADY)] if args[:1] in (["run"], ["compare"], ["capacity"]) else []
    extra = ["--variant", "b:producers.threads=2"] if args[:1] == ["compare"] else []
    warehouse = ["--warehouse", str(tmp_path / "wh")] if scenario else []
    done = rocketsim(
        *args, *scenario, *extra, *warehouse, cwd=tmp_path, ROCKETSIM_LOG_DIR=str(tmp_path / "logs")
    )
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith(expected), lines
    assert done.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no warehouse, no log, no report


def test_a_run_another_job_writes_is_refused_before_spark(tmp_path: Path) -> None:
    """Refused after the command set up the driver (the package zipped, the log named) but before Spark:
    one line, exit 2, and no log is left."""
    wh, logs = tmp_path / "wh", tmp_path / "logs"
    with claim_held_elsewhere(wh, "r1") as holder:
        done = rocketsim(
            "run", "--scenario", str(STEADY), "--warehouse", str(wh), "--run-id", "r1",
            cwd=tmp_path, ROCKETSIM_LOG_DIR=str(logs),
        )  # fmt: skip
    lines = done.stderr.splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"ClaimError: run r1 is being written by jobs/pipeline.py (pid {holder.pid} ")
    assert list(logs.iterdir()) == []


# ---- spark-submit's options ----------------------------------------------------------------------------


def test_spark_options_pass_through_to_the_jvm_the_command_starts(tmp_path: Path) -> None:
    argv = [
        "--scenario", "s.toml", "--master", "spark://h:7077", "--conf", "spark.a=1", "--set", "x=1",
        "--conf", "spark.b=2", "--executor-memory", "4g", "--py-files", "extra.zip",
    ]  # fmt: skip
    ns, rest = command_options.split(argv, "rocketsim run")
    assert rest == ["--scenario", "s.toml", "--set", "x=1"]  # the job's own, for its parser
    seen: dict[str, str] = {}

    def body() -> int:
        seen.update(os.environ)
        return 0

    env = {"ROCKETSIM_LOG_DIR": str(tmp_path / "logs"), "PYSPARK_SUBMIT_ARGS": "before"}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        assert (
            submit.run_as_driver(command_options.spark_options(ns), "pipeline", body, {"X_EXTRA": "1"}) == 0
        )
        assert os.environ["PYSPARK_SUBMIT_ARGS"] == "before" and "X_EXTRA" not in os.environ  # restored
    args = shlex.split(seen["PYSPARK_SUBMIT_ARGS"])
    zipped = ROOT / "build" / "rocketsim.zip"
    assert args[:2] == ["--py-files", f"{zipped},extra.zip"]
    assert args[2:4] == ["--properties-file", str(ROOT / "conf" / "spark-defaults.conf")]
    assert args[4:] == [
        "--master", "spark://h:7077", "--conf", "spark.a=1", "--conf", "spark.b=2",
        "--executor-memory", "4g", "pyspark-shell",
    ]  # fmt: skip
    assert seen["PYSPARK_PYTHON"] == sys.executable and seen["X_EXTRA"] == "1"
    assert seen["SPARK_HOME"].endswith("pyspark") and "ROCKETSIM_ERROR_FILE" not in seen
    assert seen["ROCKETSIM_SPARK_LOG"].startswith(str(tmp_path / "logs" / "spark-pipeline-"))
    assert not list((tmp_path / "logs").iterdir())  # an empty log of a job that ended well goes
    with zipfile.ZipFile(zipped) as zf:
        names = set(zf.namelist())
    assert {"rocketsim/__init__.py", "rocketsim/engine/compiled.py", "rocketsim/command/__init__.py"} <= names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)


def test_spark_submit_sh_reads_its_options_as_before() -> None:
    opts, rest = submit.parse_spark_options(
        ["--master=local[2]", "-v", "--conf", "spark.master=x", "--py-files", "a.zip", "--deploy-mode",
         "cluster", "--files=f.txt", "job.py", "--scenario", "s"]
    )  # fmt: skip
    assert rest == ["job.py", "--scenario", "s"]
    assert opts.args == ["--master=local[2]", "-v", "--conf", "spark.master=x", "--deploy-mode", "cluster"]
    assert (opts.py_files, opts.files, opts.has_master, opts.cluster_mode) == ("a.zip", "f.txt", True, True)
    conf = Path("conf/spark-defaults.conf")
    assert submit.submit_arguments(opts, Path("p.zip"), conf) == [
        "--py-files", "p.zip,a.zip", "--properties-file", str(conf), "--files", f"{conf},f.txt", *opts.args,
    ]  # fmt: skip
    plain, _ = submit.parse_spark_options(["job.py"])
    assert submit.submit_arguments(plain, Path("p.zip"), None) == [
        "--py-files",
        "p.zip",
        "--master",
        "local[*]",
    ]
    with pytest.raises(submit.UsageError, match="option --master needs a value"):
        submit.parse_spark_options(["--master"])
    assert submit.parse_spark_options(["--driver-memory", "1g", "-h"])[0].help


# ---- the console script --------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_wheel_installs_the_rocketsim_console_script(tmp_path: Path) -> None:
    """The wheel pip builds names the entry point, and pip installs a ``rocketsim`` script that runs it
    (into a target folder: the project's .venv stays as it is). Built as the Makefile's install builds the
    package (pip's isolated build, its setuptools and wheel from the package index)."""
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    copy = tmp_path / "src"
    shutil.copytree(
        ROOT,
        copy,
        # .hypothesis: the other test process may be writing its examples (make test runs two)
        ignore=shutil.ignore_patterns(".venv", "build", "warehouse", "*.egg-info", ".git", ".hypothesis"),
    )
    built = subprocess.run(
        [*pip, "wheel", "--no-deps", "-w", str(tmp_path / "dist"), str(copy)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("rocketsim-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        entry_points = next(n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt"))
        assert "[console_scripts]\nrocketsim = rocketsim.command:entry" in zf.read(entry_points).decode()
        assert "rocketsim/calibration/thread_split.json" in zf.namelist()  # package data
    target = tmp_path / "site"
    installed = subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(target), str(wheel)], capture_output=True, text=True
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    script = target / "bin" / "rocketsim"
    env = {**os.environ, "PYTHONPATH": str(target)}
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("usage: rocketsim COMMAND"), done.stderr
    which = subprocess.run([str(script), "--version"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert which.stdout.strip() == "rocketsim 0.1.0"
    # the measured constants --thread-split sets come with the package, read from where it is installed
    split = "from rocketsim.warehouse.thread_runs import read_thread_split as r; print(r().other_threads)"
    read = subprocess.run(
        [sys.executable, "-c", split], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert read.returncode == 0 and read.stdout.strip() == "2", read.stderr[-2000:]


# ---- progress ------------------------------------------------------------------------------------------


class Tracker:
    """A status tracker that plays back (active stage ids, their infos) snapshots."""

    def __init__(self, snapshots: list[list[tuple[int, int, int, int]]]) -> None:
        self.snapshots, self.now = snapshots, 0

    def getActiveStageIds(self) -> list[int]:  # noqa: N802 - pyspark's names
        return list(range(len(self.snapshots[self.now])))

    def getStageInfo(self, stage_id: int) -> SimpleNamespace:  # noqa: N802, N803
        total, done, running, failed = self.snapshots[self.now][stage_id]
        return SimpleNamespace(
            numTasks=total, numCompletedTasks=done, numActiveTasks=running, numFailedTasks=failed
        )


def test_progress_on_a_terminal_is_one_line_redrawn_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([0.0, 1.0, 2.0, 75.0, 76.0])
    tracker = Tracker([[(8, 3, 2, 0)], [(8, 7, 1, 1)], [], []])
    out = io.StringIO()
    monkeypatch.setattr(progress._Step, "what", "producer tasks, 3,000 messages")
    rep = progress.Reporter(tracker, "pipeline r1", out, True, now=lambda: next(clock), width=lambda: 200)
    for i in range(3):
        tracker.now = i
        rep.tick()
    rep.wipe()
    fresh = io.StringIO()  # the step named, its tasks not started yet; a narrow terminal
    progress.Reporter(tracker, "pipeline r1", fresh, True, now=lambda: 0.0, width=lambda: 65).tick()
    assert fresh.getvalue() == "\r\x1b[K[0:00] pipeline r1: producer tasks, 3,000 messages: starting its"
    assert out.getvalue() == (
        "\r\x1b[K[0:01] pipeline r1: producer tasks, 3,000 messages: 3/8 tasks done, 2 running"
        "\r\x1b[K[0:02] pipeline r1: producer tasks, 3,000 messages: 7/8 tasks done, 1 running, 1 failed "
        "(Spark retries them)"
        "\r\x1b[K[1:15] pipeline r1: producer tasks, 3,000 messages: done; the driver is at work"
        "\r\x1b[K"
    )
    assert "\n" not in out.getvalue()


def test_progress_elsewhere_is_a_plain_line_now_and_then(monkeypatch: pytest.MonkeyPatch) -> None:
    times = [0.0, 5.0, 5.0, 31.0, 31.0, 31.0, 40.0, 40.0, 62.0, 62.0, 62.0]
    clock = iter(times)
    tracker = Tracker([[(4, 0, 4, 0)]] * 2 + [[(4, 2, 2, 0), (2, 1, 1, 0)]] * 3)
    out = io.StringIO()
    monkeypatch.setattr(progress._Step, "what", "broker tasks")
    rep = progress.Reporter(tracker, "compare c1", out, terminal=False, every_s=30.0, now=lambda: next(clock))
    for i in range(4):
        tracker.now = i
        rep.tick()
    assert out.getvalue().splitlines() == [  # none in the first 30 s: a short job prints none
        "[0:31] compare c1: broker tasks: 0/4 tasks done, 4 running",
        "[1:02] compare c1: broker tasks: 3/6 tasks done, 3 running",
    ]


def test_progress_is_off_unless_the_command_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(progress.PROGRESS_ENV, raising=False)
    assert not progress.wanted()
    monkeypatch.setenv(progress.PROGRESS_ENV, "0")
    assert not progress.wanted()
    monkeypatch.setenv(progress.PROGRESS_ENV, "1")
    assert progress.wanted()
    assert progress.clock(3725) == "1:02:05" and progress.clock(59.9) == "0:59"
