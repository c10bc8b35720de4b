"""What the jobs print (rocketsim.present.text): the run's summary with a broker's latency over every attempt
sent to it, every message counted in the outcome line, the fault-window view, and plurals that read."""

from __future__ import annotations

import re

import numpy as np
import pyarrow.compute as pc
import pytest

from rocketsim import engine
from rocketsim.present import text
from rocketsim.scenario import scenario_from_mapping, workload
from rocketsim.tables import summaries

# broker-b hangs from 2 s to 6 s (its requests time out after 3 s); brokers answer FLUSH_SLAVE_TIMEOUT
# now and then (stored, not OK)
HANG = {
    "seed": 4,
    "cluster": {"brokers": ["broker-a", "broker-b", "broker-c"]},
    "producers": {"count": 3, "threads": 4, "send_mode": {"sync": 0.9, "oneway": 0.1}},
    "workload": {"messages": 2400, "rate_per_s": 300.0},
    "brokers": {"default": {"errors": {"flush_slave_timeout": 0.01}}},
    "faults": [{"broker": "broker-b", "kind": "hang", "start_s": 2, "end_s": 6}],
}


@pytest.fixture(scope="module")
def run() -> tuple:
    sc = scenario_from_mapping(HANG)
    messages = workload.generate(sc)
    out = engine.simulate(messages, sc)
    aggregates = summaries.producer_aggregates(
        out.attempts, out.results, 1000, messages=messages, faults=summaries.fault_spans(sc.faults)
    )
    return out, summaries.summary_tables(aggregates)


def test_the_printed_broker_latency_is_every_attempt_sent_to_it(run: tuple) -> None:
    """The hung broker's timed-out attempts count: its printed p99 is about the 3 s timeout (it printed the
    ~6 ms of the results it stored), as the attempts' percentile says. About: a request of another thread
    on the channel a timeout closed fails just before its own timeout (client.connection)."""
    out, tables = run
    printed = text.run_summary_text("r", tables["run_summary"].to_pylist())
    row = next(line for line in printed.splitlines() if line.strip().startswith("broker-b "))
    attempts = out.attempts.filter(pc.equal(out.attempts.column("broker"), "broker-b"))
    p99 = np.percentile(attempts.column("latency_ms").to_numpy(), 99)
    assert p99 > 2900 and text.ms(p99) == row.split()[4]
    assert "per broker: the latency of every attempt sent to it" in printed


def test_the_outcome_line_counts_every_message(run: tuple) -> None:
    """SEND_OK, stored with a not-OK status (FLUSH_SLAVE_TIMEOUT), oneway, failed and rejected add up to
    the messages ("99.96% SEND_OK" left the not-OK ones unaccounted)."""
    _, tables = run
    (every,) = [r for r in tables["run_summary"].to_pylist() if r["scope"] == "all"]
    line = text.outcome_line(every)
    counts = [
        int(n.replace(",", ""))
        for n in re.findall(r"([\d,]+) (?:SEND_OK|stored|oneway|failed|rejected)", line)
    ]
    assert len(counts) == 5 and sum(counts) == every["messages"] == 2400
    assert every["not_ok_status"] > 0 and every["oneway"] > 0 and every["failed"] > 0


def test_the_fault_window_view_puts_the_faults_broker_first(run: tuple) -> None:
    _, tables = run
    lines = text.fault_windows_text(tables["fault_windows"].to_pylist()).splitlines()
    assert lines[1] == "  fault 0: hang broker-b, 2-6 s"
    scopes = [line.split()[:2] for line in lines[4:8]]
    assert scopes == [["all", "during"], ["all", "outside"], ["broker-b", "during"], ["broker-b", "outside"]]
    b_during = lines[6].split()
    assert b_during[4] == "100.00%" and b_during[6] == "3,001"  # failed share and p99 of its attempts
    assert text.fault_windows_text([]) == "  fault windows: the scenario has no faults"


def test_plurals_read() -> None:
    assert text.plural(1, "broker") == "1 broker" and text.plural(4, "broker") == "4 brokers"
    assert (
        text.plural(1, "retry", "retries") == "1 retry" and text.plural(0, "retry", "retries") == "0 retries"
    )
