"""What a user sees of a scenario before it runs: ``--check`` (the effective scenario, each value's source,
exit 0 without Spark) on every job, the span and faults every job's header states, the warnings (a fault the
run's end cuts, sender threads that would queue a healthy producer), "did you mean" for an unknown key, and
values in TOML's spelling."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from rocketsim import engine
from rocketsim.scenario import ScenarioError, load_scenario, scenario_from_mapping, span, workload
from rocketsim.scenario.effective import check_text

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "conf" / "scenarios").glob("*.toml"))
CLOSED = ROOT / "conf" / "scenarios" / "capacity_steady.toml"
# what each job needs beside the scenario
JOB_EXTRA = {
    "compare.py": ["--variant", "a", "--variant", "b:producers.send_latency_fault_enable=true"],
    "capacity.py": ["--brokers", "4,5", "--target-p99-ms", "100"],
}
JOBS = (
    "pipeline.py",
    "generate.py",
    "simulate.py",
    "broker_side.py",
    "summarize.py",
    "compare.py",
    "capacity.py",
)


@pytest.mark.parametrize("job", JOBS)
def test_check_prints_the_effective_scenario_and_exits_before_spark(job: str, tmp_path: Path) -> None:
    """Every default filled in, each value's source (the file, --set, the default), the span and the
    faults; exit 0; no warehouse, no Spark (nothing of its log on stderr)."""
    argv = [sys.executable, str(ROOT / "jobs" / job), "--scenario", str(CLOSED), "--warehouse", "wh"]
    argv += ["--set", "producers.retry_times_when_send_failed=4", *JOB_EXTRA.get(job, []), "--check"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROCKETSIM_", "PYSPARK_"))}
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("# the effective scenario")
    for line in (
        "threads = 4  # file",
        "coupling = 'iterative'  # file",
        "retry_times_when_send_failed = 4  # --set",
        "send_msg_timeout_ms = 3000  # default",
        "[brokers.default]",
        "append_us = 718.0  # file",
        "send_threads = 4  # default",
        "# faults: none",
    ):
        assert line in out.splitlines(), line
    assert "# simulated span: 0-133.3 s (400,000 messages at 3,000 msg/s), 8 producer(s)" in out
    assert not (tmp_path / "wh").exists() and "spark" not in done.stderr.lower()


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_the_effective_scenario_loads_back_as_the_same_scenario(path: Path) -> None:
    """What --check prints is TOML that gives the very scenario the run uses (each broker its model)."""
    overrides = ["workload.messages=1000", "brokers.default.errors.system_busy=0.01"]
    sc = load_scenario(path, overrides)
    again = scenario_from_mapping(tomllib.loads(check_text(sc, overrides)))
    assert dataclasses.replace(again, brokers={}) == dataclasses.replace(sc, brokers={})
    for b in sc.cluster.brokers:
        assert again.broker_model(b) == sc.broker_model(b), b


def test_a_brokers_own_section_is_shown_taken_whole() -> None:
    """[brokers.broker-b] does not inherit from [brokers.default]: --check shows it whole, sources
    relative to its own section."""
    file = "[brokers.default]\nlatency = { median_ms = 5.0 }\n"
    file += "[brokers.broker-b]\nerrors = { system_busy = 0.1 }\n"
    sc = scenario_from_mapping(tomllib.loads(file), source_text=file)
    text = check_text(sc, []).splitlines()
    b = text.index("[brokers.broker-b]")
    assert "# broker-b: its own section, taken whole (not merged with [brokers.default])" in text
    assert text[b + 1] == "errors = { system_busy = 0.1 }  # file"
    assert text[text.index("[brokers.broker-b.latency]") + 1] == "median_ms = 2.0  # default"
    assert text[text.index("[brokers.default.latency]") + 1] == "median_ms = 5.0  # file"


def test_the_header_states_the_span_rate_and_faults() -> None:
    sc = load_scenario(ROOT / "conf" / "scenarios" / "brownout.toml")
    assert span.header_lines(sc) == [
        "  simulated span: 0-600.0 s (300,000 messages at 500 msg/s), 8 producer(s) x 4 sender thread(s), "
        "brokers broker-a, broker-b, broker-c, broker-d (coupling open)",
        "  fault 0: slowdown broker-b 120-420 s (latency x30)",
    ]
    assert span.warnings(sc) == []


def test_a_fault_after_the_span_is_refused_and_a_cut_one_warned() -> None:
    """The README's advice (--set workload.messages=...) shrank a run to 1.3 s with its fault at 60 s:
    "100% SEND_OK". A fault that starts after the span is refused; one the span's end cuts is warned."""
    path = ROOT / "conf" / "scenarios" / "broker_outage.toml"
    late = load_scenario(path, ["workload.messages=650", "workload.rate_per_s=500"])
    with pytest.raises(
        ScenarioError, match=r"faults\[0\]\.start_s must be before the simulated span ends at 1.3 s"
    ):
        span.check_faults_in_span(late)
    cut = load_scenario(path, ["workload.messages=50000"])  # 100 s: the outage is 60-300 s
    span.check_faults_in_span(cut)
    (warning,) = span.warnings(cut)
    assert warning == (
        "fault 0, outage broker-b 60-300 s, ends after the simulated span (0-100.0 s): only 40.0 s of its "
        "240.0 s fall in the run"
    )


def test_sender_threads_that_would_queue_are_warned_and_the_advice_keeps_up() -> None:
    """The defaults (one sender thread, 1,000 msg/s over 4 producers of ~2.4 ms sends) queue a healthy
    producer: a warning names the thread count that keeps up, and with it the publish delay is gone
    (simulated: p99 from hundreds of ms to a few)."""
    sc = scenario_from_mapping({"workload": {"messages": 20_000}})
    advice = span.thread_advice(sc)
    assert advice is not None and advice.startswith("producers.threads = 1: a producer's 250 sync sends/s")
    threads = int(advice.rsplit("producers.threads = ", 1)[1].split()[0])
    fixed = dataclasses.replace(sc, producers=dataclasses.replace(sc.producers, threads=threads))
    assert span.thread_advice(fixed) is None

    def wait_p99(s: object) -> float:
        out = engine.simulate(workload.generate(s), s)
        return float(np.percentile(out.results.column("queue_wait_ms").to_numpy(), 99))

    assert wait_p99(sc) > 100 and wait_p99(fixed) < 10


def test_the_queued_backlog_estimate_is_the_simulated_one() -> None:
    """One producer of steady.toml's 4 threads outruns them: the sends still waiting for a thread when the
    last message arrives, estimated before Spark (what its task holds; a run over a worker's memory is
    refused), are those the engine leaves waiting (within 10%)."""
    sc = load_scenario(ROOT / "conf" / "scenarios" / "steady.toml")
    sc = dataclasses.replace(
        sc,
        producers=dataclasses.replace(sc.producers, count=1),
        workload=dataclasses.replace(sc.workload, messages=100_000),
    )
    estimated, held = span.queued_bytes(sc)
    results = engine.simulate(workload.generate(sc), sc).results
    last = results.column("born_ts_ms").to_numpy().max()
    waiting = int((results.column("send_ts_ms").to_numpy() > last).sum())
    assert abs(estimated - waiting) < 0.1 * waiting and held > estimated * 1024
    span.check_queued_bytes(sc)  # 0.3 GiB: runs
    big = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, messages=5_000_000))
    with pytest.raises(ScenarioError, match=r"about 4\.2 GiB its task would hold \(at most 1\.5 GiB\)"):
        span.check_queued_bytes(big)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "producers.treads=4",
            "producers.treads is not a known key (did you mean producers.threads?), got 4",
        ),
        ("coupling='joint'", "coupling is not a known key (did you mean brokers.coupling?), got 'joint'"),
        ("threads=4", "threads is not a known key (did you mean producers.threads?), got 4"),
        (
            "producers.send_mode.synk=1.0",
            "producers.send_mode.synk is not a known key (did you mean producers.send_mode.sync or "
            "producers.send_mode.async?), got 1.0",
        ),
        ("producers.count=true", "producers.count must be an integer, got true"),  # TOML's true, not True
        ("workload.topics={a=1}", "workload.topics must be a list of str, got { a = 1 }"),
    ],
)
def test_unknown_keys_get_a_did_you_mean_and_values_their_toml_spelling(override: str, message: str) -> None:
    with pytest.raises(ScenarioError) as err:
        load_scenario(ROOT / "conf" / "scenarios" / "steady.toml", [override])
    assert str(err.value) == message


def test_an_unknown_top_level_key_lists_only_keys_a_file_can_hold() -> None:
    """broker_coupling is the config's own name for brokers.coupling: never offered to the user."""
    with pytest.raises(ScenarioError) as err:
        scenario_from_mapping({"qqqqq": 1})
    assert "broker_coupling" not in str(err.value) and "expected one of brokers, cluster" in str(err.value)
