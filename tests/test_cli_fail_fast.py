"""Bad input fails every job before Spark starts: exit code 2, exactly one line on stderr naming the key
(or option), the rule and the value, nothing on stdout, and no warehouse or table created (docs/design.md §8).

Each job in jobs/ that takes a scenario is run as a command (``python jobs/<job>.py``) on several bad
inputs, and once more through ``./spark-submit.sh``, whose preflight must give the same single line
instead of starting a JVM (where a Python driver's stderr would land on stdout after Spark's banner).
"""

from __future__ import annotations

import os
import runpy
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocketsim.spark.session import PREFLIGHT_ENV

ROOT = Path(__file__).resolve().parents[1]
STEADY = ROOT / "conf" / "scenarios" / "steady.toml"
# Jobs that read a scenario (the others, such as vacuum.py, take no scenario).
SCENARIO_JOBS = sorted(
    p.name
    for p in (ROOT / "jobs").glob("*.py")
    if "parse_job_args" in p.read_text() or "--scenario" in p.read_text()
)
# What a job needs besides the scenario to get as far as validating it.
JOB_EXTRA = {
    "compare.py": [
        "--variant",
        "on:producers.send_latency_fault_enable=true",
        "--variant",
        "off:producers.send_latency_fault_enable=false",
    ],
    "capacity.py": ["--write-queues", "2,4", "--target-p99-ms", "100"],
}

BAD_FAULTS = """
name = "bad"
[cluster]
brokers = ["broker-a", "broker-b"]
[workload]
messages = 100
[[faults]]
broker = "broker-a"
kind = "outage"
start_s = 10
end_s = 60
[[faults]]
broker = "broker-a"
kind = "slowdown"
start_s = 30
end_s = 90
"""


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]  # after --scenario/--warehouse
    expected: str  # the whole stderr line
    scenario: str = ""  # TOML text instead of steady.toml


CASES = [
    Case(
        "out-of-range",
        ("--set", "producers.count=0"),
        "ScenarioError: producers.count must be between 1 and 100000, got 0",
    ),
    Case(
        "unknown-key",
        ("--set", "producers.cuont=3"),
        "ScenarioError: producers.cuont is not a known key (did you mean producers.count?), got 3",
    ),
    Case(
        "wrong-type",
        ("--set", "producers.send_latency_fault_enable=yes"),
        "ScenarioError: producers.send_latency_fault_enable must be true or false, got 'yes'",
    ),
    Case(
        "upstream-topic",
        ("--set", 'workload.topics=["bad topic!"]'),
        "ScenarioError: workload.topics[0] is not a topic the client accepts (The specified "
        "topic[bad topic!] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$), got 'bad topic!'",
    ),
    Case(
        "zero-brokers",
        ("--set", "cluster.brokers=[]"),
        "ScenarioError: cluster.brokers must name at least one broker, got []",
    ),
    Case(
        "unknown-broker-fault",
        ("--set", "faults.1.broker=broker-z"),
        "ScenarioError: faults[1].broker must name a broker of cluster.brokers, got 'broker-z'",
        BAD_FAULTS,
    ),
    Case(
        "overlapping-faults",
        (),
        "ScenarioError: faults[1] must not overlap faults[0] on the same broker (10.0-60.0 s), "
        "got '30.0-90.0 s'",
        BAD_FAULTS,
    ),
    Case(
        "inverted-window",
        ("--set", "faults.0.end_s=5"),
        "ScenarioError: faults[0].end_s must be after start_s (10.0), got 5.0",
        BAD_FAULTS,
    ),
    Case("partitions-0", ("--partitions", "0"), "ScenarioError: --partitions must be >= 1, got 0"),
    Case("partitions-negative", ("--partitions", "-4"), "ScenarioError: --partitions must be >= 1, got -4"),
    Case(
        "overflow",
        ("--set", "producers.send_msg_timeout_ms=9223372036854775808"),
        "ScenarioError: producers.send_msg_timeout_ms must fit a Java int (-2147483648..2147483647), "
        "got 9223372036854775808",
    ),
    Case(
        "grpc-auto-batch",
        (
            "--set",
            "producers.client_family=grpc",
            "--set",
            "producers.client_version=java-5.2.1",
            "--set",
            "producers.auto_batch=true",
        ),
        "ScenarioError: producers.auto_batch must be false with client_family grpc (no gRPC client batches), "
        "got true",
    ),
    Case(
        "auto-batch-before-5.1.4",
        ("--set", "producers.auto_batch=true"),
        "ScenarioError: producers.auto_batch exists only in clients 5.1.4 and later "
        "(DefaultMQProducer.autoBatch, ProduceAccumulator), not in client_version 4.9.8",
    ),
    Case(
        "missing-file",
        (),
        "ScenarioError: scenario file 'missing.toml' cannot be read: No such file or directory",
        "<missing>",
    ),
    # the int32 wrap: an oversize body (max + 1), wire and store sizes beyond a Java int
    Case(
        "max-message-size-wraps",
        ("--set", "producers.max_message_size=2147483647", "--set", "workload.invalid.oversize_body=0.1"),
        "ScenarioError: producers.max_message_size must be between 1 and 1073741824 (a commit-log file; "
        "beyond it a body, its wire and store sizes overflow a Java int), got 2147483647",
    ),
    Case(
        "int-beyond-a-double",
        ("--set", "workload.rate_per_s=1" + "0" * 400),
        "ScenarioError: workload.rate_per_s must be a finite number, got an integer of 401 digits",
    ),
    Case(
        "control-character",
        ("--set", "producers.group=grp\x07"),
        # the value as TOML spells it (a basic string: \u0007)
        'ScenarioError: producers.group must not contain control characters, got "grp\\u0007"',
    ),
    Case(
        "not-utf8",
        (),
        "ScenarioError: scenario file 'bad.toml' must be UTF-8 text, got byte 0xe9",
        "<latin1>",
    ),
    Case("fifo", (), "ScenarioError: scenario file 'bad.toml' must be a regular file, got a FIFO", "<fifo>"),
    Case(
        "device",
        (),
        "ScenarioError: scenario file '/dev/zero' must be a regular file, got a FIFO, socket or device",
        "<device>",
    ),
    Case("warehouse-empty", ("--warehouse", ""), "ScenarioError: --warehouse must not be empty, got ''"),
    Case(
        "warehouse-a-file",
        ("--warehouse", str(STEADY)),
        f"ScenarioError: --warehouse must be a folder, not a file, got '{STEADY}'",
    ),
    Case(
        "warehouse-under-a-file",
        ("--warehouse", str(STEADY / "wh")),
        f"ScenarioError: --warehouse must not be under a file ({STEADY}), got '{STEADY / 'wh'}'",
    ),
    Case(
        "warehouse-unwritable",  # /sys refuses new files even to root
        ("--warehouse", "/sys/rocketsim-wh"),
        "ScenarioError: --warehouse must be a folder this job can write (/sys, where it would be created): ",
    ),
    Case(
        "warehouse-unknown-scheme",
        ("--warehouse", "nosuch://x"),
        "ScenarioError: --warehouse must be a folder or a URI of file://, s3://, gs://, hdfs://, abfs://, "
        "abfss://, got 'nosuch://x'",
    ),
    Case(
        "warehouse-uri-without-path",
        ("--warehouse", "file://"),
        "ScenarioError: --warehouse must name a folder after its scheme, got 'file://'",
    ),
    Case(
        "deeply-nested-toml",  # tomllib recurses per level: this was a RecursionError trace
        (),
        "ScenarioError: scenario file 'bad.toml' nests tables or arrays too deeply for a scenario",
        "name = 'deep'\nx = " + "{a = " * 2000 + "1" + "}" * 2000 + "\n",
    ),
    Case(
        "window-too-small",  # 100 messages at a very low rate, in 1 ms windows, 4 brokers x 4 queues
        ("--window-ms", "1", "--set", "workload.rate_per_s=0.001", "--set", "workload.messages=100"),
        "ScenarioError: --window-ms must be >= 101 for this scenario (a span of about 100,009 s over 16 "
        "queues would give 100,009,001 windows and 1,600,144,016 queue_windows rows; at most 1,000,000 "
        "and 20,000,000), got 1",
    ),
    Case(  # one producer on one thread: its 1M sync sends of ~2.4 ms take ~2,370 s, not the arrivals' 100 s
        "window-too-small-for-queued-sends",
        ("--window-ms", "1", "--set", "producers.count=1", "--set", "producers.threads=1")
        + ("--set", "workload.messages=1000000", "--set", "workload.rate_per_s=10000"),
        "ScenarioError: --window-ms must be >= 3 for this scenario (a span of about 2,377 s (the sends queue "
        "on producers.threads) over 16 queues would give 2,376,965 windows and 38,031,440 queue_windows "
        "rows; at most 1,000,000 and 20,000,000), got 1",
    ),
    Case(  # one producer of steady.toml's 4 threads: 2.9M of its 5M sends wait when the last arrives (a
        # worker peaked at 4.5 GB running it: docs/benchmarks.md)
        "queued-sends-beyond-a-worker",
        ("--set", "producers.count=1", "--set", "workload.messages=5000000"),
        "ScenarioError: producers.threads must keep up with a producer's sync sends, got 4: its 4,000 "
        "sends/s of about 2.4 ms each leave about 2,888,482 messages waiting for a thread when the last "
        "arrives, about 4.2 GiB its task would hold (at most 1.5 GiB); raise producers.threads or "
        "producers.count, lower workload.rate_per_s, or pass --allow-large-backlog",
    ),
    Case(  # steady.toml sends for 100 s: a fault from 200 s would change nothing (it read "100% SEND_OK")
        "fault-after-the-span",
        ("--set", "faults=[{broker='broker-b', kind='outage', start_s=200.0, end_s=300.0}]"),
        "ScenarioError: faults[0].start_s must be before the simulated span ends at 100.0 s (400,000 "
        "messages at 4,000 msg/s), got 200: the fault would change nothing",
    ),
    Case(
        "window-beyond-a-year",
        ("--window-ms", str(10**15)),
        "ScenarioError: --window-ms must be between 1 and 31536000000 (one year), got 1000000000000000",
    ),
]


def _scenario_file(case: Case, work: Path) -> str:
    """The --scenario a case gives: steady.toml, its own TOML text, or a special file."""
    if case.scenario == "<missing>":
        return "missing.toml"
    if case.scenario == "<device>":
        return "/dev/zero"
    if case.scenario == "<fifo>":
        os.mkfifo(work / "bad.toml")  # reading it would block the job forever
    elif case.scenario == "<latin1>":
        (work / "bad.toml").write_bytes('name = "café"\n'.encode("latin-1"))
    elif case.scenario:
        (work / "bad.toml").write_text(case.scenario)
    else:
        return str(STEADY)
    return "bad.toml"


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    warehouse_created: bool


def _run(job: str, case: Case, tmp: Path, *, via_submit: bool) -> Outcome:
    work = tmp / f"{job}-{case.name}-{'submit' if via_submit else 'python'}"
    work.mkdir()
    scenario = _scenario_file(case, work)
    warehouse = work / "wh"
    argv = [f"jobs/{job}", "--scenario", scenario, "--warehouse", str(warehouse), *JOB_EXTRA.get(job, [])]
    argv += case.args
    if via_submit:
        cmd = [str(ROOT / "spark-submit.sh"), "--master", "local[1]", *argv]
    else:
        cmd = [sys.executable, str(ROOT / argv[0]), *argv[1:]]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROCKETSIM_", "PYSPARK_"))}
    done = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=env, timeout=120)
    created = warehouse.exists() or (work / "warehouse").exists() or (work / "spark-warehouse").exists()
    return Outcome(done.returncode, done.stdout, done.stderr, created)


def _check(outcome: Outcome, case: Case, label: str) -> list[str]:
    problems = []
    lines = outcome.stderr.splitlines()
    if outcome.returncode != 2:
        problems.append(f"{label}: exit code {outcome.returncode}, not 2; stderr: {outcome.stderr[-400:]}")
    if len(lines) != 1 or not lines[0].startswith(case.expected):
        problems.append(f"{label}: stderr is not the one expected line {case.expected!r}: {lines[:6]}")
    if outcome.stdout.strip():
        problems.append(f"{label}: printed to stdout: {outcome.stdout[:300]!r}")
    if outcome.warehouse_created:
        problems.append(f"{label}: a warehouse was created")
    return problems


def test_the_jobs_are_found() -> None:
    assert {"generate.py", "simulate.py", "summarize.py", "pipeline.py"} <= set(SCENARIO_JOBS)


def _run_in_process(
    job: str, case: Case, tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Outcome:
    """The job file run as __main__ in this interpreter: the same code path as the command, minus the
    interpreter start-up (so the whole matrix costs well under a second)."""
    work = tmp / f"{job}-{case.name}-inproc"
    work.mkdir()
    scenario = _scenario_file(case, work)
    warehouse = work / "wh"
    argv = [f"jobs/{job}", "--scenario", scenario, "--warehouse", str(warehouse), *JOB_EXTRA.get(job, [])]
    monkeypatch.chdir(work)
    monkeypatch.setattr(sys, "argv", [*argv, *case.args])
    # A bad input that slipped through would stop at build_session instead of starting Spark here.
    monkeypatch.setenv(PREFLIGHT_ENV, "1")
    capsys.readouterr()
    code: object = 0
    try:
        runpy.run_path(str(ROOT / "jobs" / job), run_name="__main__")
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    created = warehouse.exists() or (work / "warehouse").exists() or (work / "spark-warehouse").exists()
    return Outcome(code if isinstance(code, int) else 1, out.out, out.err, created)


def test_every_job_rejects_every_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    problems = []
    for job in SCENARIO_JOBS:
        for case in CASES:
            with monkeypatch.context() as mp:
                out = _run_in_process(job, case, tmp_path, mp, capsys)
            problems += _check(out, case, f"{job} {case.name}")
    assert not problems, "\n".join(problems)


def test_every_job_fails_fast_as_a_command(tmp_path: Path) -> None:
    """Each job as a real command on two of the cases (rotating through them)."""
    runs = [(job, CASES[(2 * i + k) % len(CASES)]) for i, job in enumerate(SCENARIO_JOBS) for k in range(2)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        outcomes = list(pool.map(lambda jc: _run(jc[0], jc[1], tmp_path, via_submit=False), runs))
    problems = [
        p
        for (job, case), out in zip(runs, outcomes, strict=True)
        for p in _check(out, case, f"{job} {case.name}")
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.skipif(shutil.which("java") is None, reason="spark-submit.sh needs Java 17")
def test_spark_submit_fails_fast_without_starting_spark(tmp_path: Path) -> None:
    """Through ./spark-submit.sh: the same single line, from its preflight, before any JVM starts."""
    picks = {job: CASES[i % len(CASES)] for i, job in enumerate(SCENARIO_JOBS)}
    picks["pipeline.py"] = CASES[0]
    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = dict(
            zip(
                picks,
                pool.map(lambda job: _run(job, picks[job], tmp_path, via_submit=True), picks),
                strict=True,
            )
        )
    problems = [p for job, out in outcomes.items() for p in _check(out, picks[job], f"spark-submit {job}")]
    assert not problems, "\n".join(problems)


def test_usage_errors_are_one_line_too(tmp_path: Path) -> None:
    for args, expected in (
        (["--partitions", "x"], "jobs/pipeline.py: error: argument --partitions: invalid int value: 'x'"),
        (["--bogus"], "jobs/pipeline.py: error: unrecognized arguments: --bogus"),
    ):
        done = subprocess.run(
            [sys.executable, str(ROOT / "jobs" / "pipeline.py"), "--scenario", str(STEADY), *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2
        assert done.stderr.splitlines() == [f"{expected} (see --help)"]
    assert not (tmp_path / "warehouse").exists()
