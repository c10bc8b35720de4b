"""Reconciliation from counts (:mod:`rocketsim.tables.reconcile`), without Spark: what each task counts, every
rule holding on a whole run computed with the core stage functions, and each rule broken when a task
loses rows (a broker that lost a producer's records, a producer task whose written results lack one,
duplicated keys), named in the error; a job's partial counts check only their rules."""

from __future__ import annotations

import pyarrow as pa
import pytest

from rocketsim.broker import side as broker_side
from rocketsim.scenario import Scenario, scenario_from_mapping, workload
from rocketsim.stage import tables as stage
from rocketsim.tables import reconcile, summaries
from rocketsim.tables.reconcile import ReconciliationError

SCENARIO = {
    "name": "recon",
    "seed": 4,
    "cluster": {"brokers": ["broker-a", "broker-b", "broker-c"], "write_queues": 4, "read_queues": 3},
    "producers": {
        "count": 3,
        "threads": 2,
        "client_version": "4.9.8",
        "send_latency_fault_enable": True,
        "retry_another_broker_when_not_store_ok": True,
        "send_mode": {"sync": 0.7, "async": 0.2, "oneway": 0.1},
    },
    "workload": {
        "messages": 1500,
        "rate_per_s": 300.0,
        "message_types": {"normal": 0.6, "ordered": 0.1, "delay": 0.1, "transaction": 0.1, "batch": 0.1},
        "invalid": {"bad_topic": 0.01},
    },
    "brokers": {"default": {"errors": {"system_error": 0.01, "flush_disk_timeout": 0.02}}},
    "transactions": {"outcome": {"commit": 0.6, "rollback": 0.1, "unknown": 0.3}, "check_interval_ms": 2_000},
    "consumers": {"groups": [{"name": "cg-two", "count": 2}, {"name": "cg-five", "count": 5}]},
    "faults": [{"broker": "broker-b", "kind": "outage", "start_s": 1, "end_s": 3}],
}
WINDOW_MS = 1000


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return scenario_from_mapping(SCENARIO)


@pytest.fixture(scope="module")
def producers(scenario: Scenario) -> list[stage.ProducerTables]:
    return [
        stage.producer_tables(scenario, stage.producer_messages(scenario, s))
        for s in workload.producer_shares(scenario)
    ]


def broker_tables(sc: Scenario, producers: list[stage.ProducerTables], lose: int | None = None) -> list:
    """Every broker's step; ``lose``: a producer whose records (and results pointing at them) a broker
    step never got."""
    out = []
    for b in range(len(sc.cluster.brokers)):
        kept = [t for t in producers if lose is None or int(t.messages.column("producer")[0].as_py()) != lose]
        log = pa.concat_tables([t.log.filter(pa.array(t.log_broker == b)) for t in kept])
        results = pa.concat_tables(
            [t.stored_results()[0].filter(pa.array(t.stored_results()[1] == b)) for t in kept]
        )
        others = [t.other_half_results() for t in kept]
        other = pa.concat_tables([rows.filter(pa.array(where == b)) for rows, where in others])
        out.append(stage.broker_tables(sc, b, log, results, other))
    return out


def run_counts(
    sc: Scenario, producers: list[stage.ProducerTables], brokers: list, blind: int | None = None
) -> dict[str, int]:
    """What the tasks and the driver of the one pass count, with every table committed as made;
    ``blind``: a producer whose task did not split its rows at the faults."""
    parts = []
    for t in producers:
        parts.append(
            reconcile.message_counts(t.messages)
            | reconcile.attempt_counts(t.attempts)
            | reconcile.result_counts(t.results)
            | reconcile.transaction_counts(t.unstored_transactions(sc))
        )
    deliveries = []
    for out in brokers:
        txns = out.stored_transactions(sc)
        deliveries.append(out.deliveries(txns))
        parts.append(
            reconcile.log_counts(out.commit_log)
            | reconcile.stored_result_counts(out.results)
            | reconcile.storage_counts(out.storage(WINDOW_MS))
            | reconcile.transaction_counts(txns)
        )
    counts = reconcile.add_counts(parts)
    faults = summaries.fault_spans(sc.faults)
    merged = summaries.merge(
        t.summary_aggregates(WINDOW_MS, () if i == blind else faults) for i, t in enumerate(producers)
    )
    made = {**summaries.summary_tables(merged), "consumer_load": broker_side.consumer_load(deliveries, sc)}
    for name, table in made.items():
        counts |= reconcile.table_counts(name, table)
    for name in reconcile.RUN_TABLES:  # committed as made
        counts[f"{name}.rows"] = counts[f"{name}.made"]
    return counts


@pytest.fixture(scope="module")
def counts(scenario: Scenario, producers: list[stage.ProducerTables]) -> dict[str, int]:
    return run_counts(scenario, producers, broker_tables(scenario, producers))


def test_every_rule_holds_on_a_whole_run(counts: dict[str, int]) -> None:
    checks = reconcile.check(counts, "r", complete=True)
    assert {r.name for r in reconcile.RULES} <= set(checks)
    assert {
        "consumer_load of cg-two = delivered + committed messages",
        "consumer_load of cg-five = delivered + committed messages",
    } <= set(checks)
    for table in reconcile.RUN_TABLES:
        assert f"{table} rows committed = rows made" in checks, table
    assert {r.name for r in reconcile.FAULT_RULES} <= set(checks)
    assert all(x == y for x, y in checks.values())
    # the run is not trivial: every rule counts something
    for name in (
        "one result per message",
        "halves the results point at in transactions = results in the half topic",
        "stored halves in transactions = half records in commit_log",
    ):
        assert checks[name][0] > 0, name
    assert counts["send_results.stored"] < counts["send_results.rows"]  # failures and rejections
    assert counts["transactions.halves"] < counts["transactions.rows"]  # unstored transactions


def test_a_broker_that_lost_a_producers_records_breaks_the_broker_side_rules(
    scenario: Scenario, producers: list[stage.ProducerTables], counts: dict[str, int]
) -> None:
    """The broker steps never got producer 0's records: the commit log, its storage and the results
    pointing at it are short, which the producers' counts give away; or a broker task lost them when
    writing: the commit report gives it away."""
    lost = run_counts(scenario, producers, broker_tables(scenario, producers, lose=0))
    broken = {rule for rule, (x, y) in reconcile.checks(lost).items() if x != y}
    assert {
        "stored attempts = attempts in commit_log",
        "answered results with a stored status have a queue offset",
        "one transactions row per transaction message and per other half",
    } <= broken
    # a broker task that wrote its commit log without producer 0's records: the commit report says so
    records_of_0 = producers[0].log.num_rows
    written = dict(counts, **{"commit_log.rows": counts["commit_log.rows"] - records_of_0})
    broken = {rule for rule, (x, y) in reconcile.checks(written).items() if x != y}
    assert broken == {
        "broker_storage messages = commit_log records",
        "commit_log rows committed = rows made",
        "commit_log rows are distinct (broker, commit_log_offset)",
    }


def test_fault_windows_that_miss_a_producers_rows_break_their_rules(
    scenario: Scenario, producers: list[stage.ProducerTables]
) -> None:
    """A producer task that did not split its attempts and messages at the faults: each fault's periods
    no longer add up to the run."""
    blind = run_counts(scenario, producers, broker_tables(scenario, producers), blind=1)
    broken = {rule for rule, (x, y) in reconcile.checks(blind).items() if x != y}
    assert broken == {r.name for r in (*reconcile.FAULT_RULES, *reconcile.SIMULATED_FAULT_RULES)}


def test_a_missing_result_row_fails_loudly_naming_the_rules(counts: dict[str, int]) -> None:
    """A producer task wrote one result row less than it made: the commit report has one row less."""
    short = dict(counts, **{"send_results.rows": counts["send_results.rows"] - 1})
    n = counts["messages.rows"]
    with pytest.raises(
        ReconciliationError, match=f"run r does not reconcile: one result per message: {n} != {n - 1}"
    ) as err:
        reconcile.check(short, "r")
    assert f"send_results rows committed = rows made: {n - 1} != {n}" in str(err.value)
    assert "send_results rows are distinct (producer, seq)" in str(err.value)


def test_duplicated_keys_are_counted_by_each_task(producers: list[stage.ProducerTables]) -> None:
    t = producers[1]
    twice = pa.concat_tables([t.attempts, t.attempts.slice(5, 1)])
    got = reconcile.attempt_counts(twice)
    assert got["send_attempts.made"] == t.attempts.num_rows + 1
    assert got["send_attempts.keys"] == t.attempts.num_rows
    assert reconcile.attempt_counts(t.attempts)["send_attempts.keys"] == t.attempts.num_rows


def test_distinct_keys_of_unsorted_rows_strings_and_nulls() -> None:
    table = pa.table(
        {
            "g": ["x", "x", None, None, "y", "x"],
            "q": pa.array([1, 1, None, None, 2, None], pa.int32()),
            "n": [3, 1, 2, 2, 9, 4],
        }
    )
    assert reconcile.distinct_keys(table, ["g", "q"]) == 4  # (x, 1), (None, None), (y, 2), (x, None)
    assert reconcile.distinct_keys(table, ["n"]) == 5
    assert reconcile.distinct_keys(table.slice(0, 0), ["n"]) == 0
    wide = pa.table({"a": [0, 1 << 62, 0], "b": [1 << 62, 0, 1 << 62]})  # does not pack: hashed
    assert reconcile.distinct_keys(wide, ["a", "b"]) == 2


def test_a_job_checks_only_the_rules_of_what_it_has(counts: dict[str, int]) -> None:
    """jobs/simulate.py has messages (read), attempts, results and the commit log: their rules only."""
    simulate = {
        k: v
        for k, v in counts.items()
        if k.split(".")[0] in ("messages", "send_attempts", "send_results", "commit_log")
    }
    simulate["messages.read"] = simulate.pop("messages.made")
    checks = reconcile.check(simulate, "r")
    assert "one result per message" in checks and "messages rows read = rows committed" in checks
    assert "stored attempts = attempts in commit_log" in checks
    assert not any("run_summary" in c or "broker_storage" in c or "consumer_load" in c for c in checks)
    with pytest.raises(AssertionError, match="did not count what reconciliation needs"):
        reconcile.check(simulate, "r", complete=True)


def test_counts_of_committed_results_include_their_store_columns(
    producers: list[stage.ProducerTables],
) -> None:
    t = producers[0]
    plain = reconcile.result_counts(t.results)
    assert "send_results.with_offset" not in plain
    unstored = t.unstored_results()
    whole = reconcile.result_counts(unstored, "read")
    assert whole["send_results.read"] == unstored.num_rows and whole["send_results.with_offset"] == 0
    assert whole["send_results.halves"] == 0  # none points at a record


def test_message_counts_of_the_generators_codes_are_those_of_its_strings() -> None:
    """Messages as drawn (dictionary arrays, two chunks with dictionaries that differ: one holds
    "transaction" twice, the other not at all) are counted as their strings are."""
    types = pa.chunked_array(
        [
            pa.DictionaryArray.from_arrays(
                pa.array([0, 1, 2, None, 1], pa.int32()), pa.array(["normal", "transaction", "transaction"])
            ),
            pa.DictionaryArray.from_arrays(pa.array([0, 0], pa.int32()), pa.array(["delay"])),
        ]
    )
    coded = pa.table({"producer": pa.array([0] * 7, pa.int32()), "seq": range(7), "message_type": types})
    strings = coded.set_column(2, "message_type", types.cast(pa.string()))
    assert reconcile.message_counts(coded) == reconcile.message_counts(strings)
    assert reconcile.message_counts(coded)["messages.transaction"] == 3
