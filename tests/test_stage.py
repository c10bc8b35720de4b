"""The stage's core functions (:mod:`rocketsim.stage`): a producer's tables equal the simulation and the
commit-log records of the core, every record and result is tagged with its broker, the broker step over
all producers equals the commit log numbered at once, and producers are spread over tasks longest first."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from rocketsim import simulate, stage
from rocketsim.broker import store
from rocketsim.scenario import Scenario, scenario_from_mapping, workload

MIXED = {
    "name": "stage",
    "seed": 11,
    "cluster": {"brokers": ["broker-a", "broker-b", "broker-c"], "write_queues": 4},
    "producers": {
        "count": 4,
        "threads": 2,
        "client_version": "4.9.8",
        "send_latency_fault_enable": True,
        "send_mode": {"sync": 0.8, "async": 0.1, "oneway": 0.1},
    },
    "workload": {
        "messages": 2000,
        "rate_per_s": 400.0,
        "message_types": {"normal": 0.6, "ordered": 0.1, "delay": 0.1, "transaction": 0.1, "batch": 0.1},
        "invalid": {"bad_topic": 0.01, "oversize_body": 0.01},
    },
    "brokers": {"default": {"errors": {"system_error": 0.01, "remoting_timeout": 0.005}}},
    "faults": [{"broker": "broker-b", "kind": "outage", "start_s": 1, "end_s": 3}],
}


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return scenario_from_mapping(MIXED)


@pytest.fixture(scope="module")
def tables(scenario: Scenario) -> list[stage.ProducerTables]:
    return [
        stage.producer_tables(scenario, stage.producer_messages(scenario, s))
        for s in workload.producer_shares(scenario)
    ]


def test_producer_tables_equal_the_core_functions(scenario: Scenario, tables: list) -> None:
    for share, t in zip(workload.producer_shares(scenario), tables, strict=True):
        messages = workload.generate(scenario, [share.producer])
        assert t.messages.equals(messages)
        out = simulate.simulate(messages, scenario)
        assert t.attempts.equals(out.attempts) and t.results.equals(out.results)
        assert t.log.equals(store.log_records(messages, out.attempts, out.results, scenario))


def test_records_and_results_carry_their_broker(scenario: Scenario, tables: list) -> None:
    brokers = np.array(scenario.cluster.brokers)
    for t in tables:
        assert (brokers[t.log_broker] == np.array(t.log.column("broker").to_pylist())).all()
        stored, where = t.stored_results()
        unstored = t.unstored_results()
        assert stored.num_rows + unstored.num_rows == t.results.num_rows
        assert stored.num_rows == pc.sum(t.log.column("is_result")).as_py()
        assert set(unstored.column("status").to_pylist()) <= {"FAILED", "REJECTED", "ONEWAY_SENT"}
        assert unstored.column("commit_log_offset").null_count == unstored.num_rows
        assert unstored.schema.equals(store.RESULTS_DATA)
        pointed = t.log.filter(t.log.column("is_result")).sort_by([("seq", "ascending")])
        assert (brokers[where] == np.array(pointed.column("broker").to_pylist())).all()


def test_result_copies_from_the_records_equal_the_copies_of_the_messages(tables: list) -> None:
    # the copies a producer task's fold reads are its records per message (one per stored copy), the same
    # as store.result_copies over its messages, attempts and results
    for t in tables:
        want = store.result_copies(t.messages, t.attempts, t.results)
        assert t.result_copies().tolist() == want.tolist()
        assert store.log_copies(t.results, t.log).tolist() == want.tolist()


def broker_steps(scenario: Scenario, tables: list[stage.ProducerTables]) -> list[stage.BrokerTables]:
    """Every broker's step over the producers' outputs, as the stage hands them over."""
    out = []
    for b in range(len(scenario.cluster.brokers)):
        log = pa.concat_tables([t.log.filter(pa.array(t.log_broker == b)) for t in tables])
        results = pa.concat_tables(
            [t.stored_results()[0].filter(pa.array(t.stored_results()[1] == b)) for t in tables]
        )
        others = [t.other_half_results() for t in tables]
        other = pa.concat_tables([rows.filter(pa.array(where == b)) for rows, where in others])
        out.append(stage.broker_tables(scenario, b, log, results, other))
    return out


def test_broker_steps_equal_the_whole_commit_log_numbered_at_once(scenario: Scenario, tables: list) -> None:
    whole = store.with_offsets(pa.concat_tables([t.log for t in tables]), scenario)
    parts = []
    for b, out in enumerate(broker_steps(scenario, tables)):
        results = pa.concat_tables(
            [t.stored_results()[0].filter(pa.array(t.stored_results()[1] == b)) for t in tables]
        )
        assert out.broker == b and out.results.num_rows == results.num_rows
        assert out.results.column("commit_log_offset").null_count == 0
        parts.append(out.commit_log)
    order = [("broker", "ascending"), ("commit_log_offset", "ascending")]
    assert pa.concat_tables(parts).sort_by(order).equals(whole.sort_by(order))


def test_producer_tables_take_one_producer(scenario: Scenario) -> None:
    with pytest.raises(ValueError, match="one producer's messages"):
        stage.producer_tables(scenario, workload.generate(scenario, [0, 1]))


def test_producer_bins_put_the_heaviest_alone() -> None:
    sc = scenario_from_mapping(
        {"producers": {"count": 64}, "workload": {"messages": 100_000, "hot_share": 0.5, "rate_per_s": 1e4}}
    )
    bins = stage.producer_bins(workload.producer_shares(sc), 4)
    assert sorted(p for b in bins for p in b) == list(range(64))
    assert [0] in bins  # the hot producer has a task of its own
    sizes = sorted(len(b) for b in bins)
    assert sizes[0] == 1 and sizes[-1] - sizes[1] <= 1  # the other 63 spread evenly over 3 tasks
    assert stage.producer_bins(workload.producer_shares(sc), 1000) == [[p] for p in range(64)]
    assert stage.producer_bins(workload.producer_shares(sc), 1) == [list(range(64))]
    assert stage.balanced_bins([5, 1, 1, 1, 1, 1], 2) == [[0], [1, 2, 3, 4, 5]]


def test_the_derived_outputs_are_the_core_functions_of_the_rows(scenario: Scenario, tables: list) -> None:
    """What a producer and a broker task compute beside their rows: the summary aggregates, the
    transactions rows split between the producer (unstored) and the broker (stored halves), and the
    deliveries; together the whole run's."""
    from rocketsim.broker import side as broker_side
    from rocketsim.tables import summaries

    whole = summaries.producer_aggregates(
        pa.concat_tables([t.attempts for t in tables]),
        pa.concat_tables([t.results for t in tables]),
        1000,
        messages=pa.concat_tables([t.messages for t in tables]),
        faults=summaries.fault_spans(scenario.faults),
    )
    merged = summaries.merge(
        t.summary_aggregates(1000, summaries.fault_spans(scenario.faults)) for t in tables
    )
    assert summaries.summary_tables(merged) == summaries.summary_tables(whole)
    unstored = [t.unstored_transactions(scenario) for t in tables]
    stored, deliveries, storage = [], [], []
    for out in broker_steps(scenario, tables):
        stored.append(out.stored_transactions(scenario))
        deliveries.append(out.deliveries(stored[-1]))
        storage.append(out.storage(1000))
    txns = pa.concat_tables([*unstored, *stored])
    transactional = sum(
        pc.sum(pc.equal(t.messages.column("message_type"), "transaction")).as_py() for t in tables
    )
    other_halves = pc.sum(pc.invert(txns.column("is_result")).cast(pa.int64())).as_py() - sum(
        u.num_rows for u in unstored
    )
    halves = sum(pc.sum(pc.equal(t.log.column("store_topic"), store.HALF_TOPIC)).as_py() for t in tables)
    assert other_halves > 0  # lost replies (remoting_timeout) the brokers stored
    assert txns.num_rows == transactional + other_halves > 0
    assert pc.sum(pc.is_valid(txns.column("half_queue_offset"))).as_py() == halves
    keys = zip(*(txns.column(k).to_pylist() for k in ("producer", "seq", "attempt")), strict=True)
    assert len(set(keys)) == txns.num_rows
    assert all(u.column("half_queue_offset").null_count == u.num_rows for u in unstored)
    assert all(s.column("half_queue_offset").null_count == 0 for s in stored)
    assert sum(pc.sum(s.column("messages")).as_py() or 0 for s in storage) == sum(
        t.log.num_rows for t in tables
    )
    load = broker_side.consumer_load(deliveries, scenario)
    assert pc.sum(load.column("messages")).as_py() > 0


def _slow_a_transactions(version: str, **producers: object) -> Scenario:
    """Transactions only; broker-a answers after 3.5 s (past the 3 s timeout), broker-b after 2 ms; every
    local transaction and every check-back commits."""
    return scenario_from_mapping(
        {
            "seed": 5,
            "cluster": {"brokers": ["broker-a", "broker-b"]},
            "producers": {"count": 1, "client_version": version, **producers},
            "workload": {"messages": 40, "rate_per_s": 1.0, "message_types": {"transaction": 1}},
            "brokers": {
                "default": {"latency": {"median_ms": 2.0, "sigma": 0.0, "spike_probability": 0.0}},
                "broker-a": {"latency": {"median_ms": 3500.0, "sigma": 0.0, "spike_probability": 0.0}},
            },
            "transactions": {"outcome": {"commit": 1.0}, "check_outcome": {"commit": 1.0}},
        }
    )


def _transactions_and_load(sc: Scenario) -> tuple[pa.Table, int]:
    """The run's transactions rows and how many messages consumers get, from the stage's functions."""
    from rocketsim.broker import side as broker_side

    tables = [stage.producer_tables(sc, stage.producer_messages(sc, s)) for s in workload.producer_shares(sc)]
    brokers = broker_steps(sc, tables)
    stored = [out.stored_transactions(sc) for out in brokers]
    txns = pa.concat_tables([*(t.unstored_transactions(sc) for t in tables), *stored])
    load = broker_side.consumer_load([out.deliveries(s) for out, s in zip(brokers, stored, strict=True)], sc)
    order = [("seq", "ascending"), ("attempt", "ascending")]
    return txns.sort_by(order), pc.sum(load.column("messages")).as_py()


def test_stored_timed_out_half_is_checked_back() -> None:
    # 5.3.3, sendMsgMaxTimeoutPerRequest 1000: the half sent to slow broker-a times out after 1 s and
    # sendMessageInTransaction's send(msg) retries on broker-b (SEND_OK); broker-a stores its half
    # anyway at 3.5 s (SendMessageProcessor: the broker never learns the client gave up). Two halves:
    # DefaultMQProducerImpl.endTransaction ends only the one the SendResult names (it decodes the
    # offsetMsgId into the commit-log offset of EndTransactionRequestHeader): broker-b's, committed when
    # the send returns. Nobody ends broker-a's: TransactionalMessageServiceImpl.check finds it at the
    # first round (TransactionalMessageCheckService: every transactionCheckInterval, 30 s on a 5.3.3
    # broker) after born + transactionTimeOut (6 s) that began after it was stored; checkLocalTransaction
    # answers commit: a second delivery of the message (a duplicate).
    sc = _slow_a_transactions("5.3.3", send_msg_max_timeout_per_request_ms=1000)
    txns, delivered = _transactions_and_load(sc)
    rows = txns.to_pandas()
    other = rows[~rows.is_result]
    assert len(other) > 0 and (other.broker == "broker-a").all() and (other.send_status == "SEND_OK").all()
    assert (other.resolved_by == "check").all() and (other.resolution == "commit").all()
    assert (other.checks == 1).all() and other.delivered.all()
    born = other.half_store_ts_ms - 3500  # the storing attempt's start
    first = (((born + 6000) // 30_000) + 1) * 30_000
    assert (other.resolved_ts_ms == np.maximum(first, (other.half_store_ts_ms // 30_000 + 1) * 30_000)).all()
    pointed = rows[rows.is_result & rows.seq.isin(other.seq)]
    assert len(pointed) == len(other) and (pointed.broker == "broker-b").all()
    assert (pointed.resolved_by == "producer").all() and (pointed.resolution == "commit").all()
    assert (pointed.attempt == 1).all() and (other.attempt == 0).all()
    assert (pointed.uniq_msg_id.to_numpy() == other.uniq_msg_id.to_numpy()).all()  # one UNIQ_KEY
    # every message delivered once, those with two committed halves twice
    assert delivered == 40 + len(other)

    # 4.9.8: the timed-out attempt used the whole 3 s budget, so the send throws (FAILED) and ends
    # nothing (sendMessageInTransaction: MQClientException "send message Exception"): the message's row
    # says its result points at no half, and the half broker-a stored is checked back (60 s rounds)
    sc = _slow_a_transactions("4.9.8")
    rows = _transactions_and_load(sc)[0].to_pandas()
    failed = rows[rows.send_status == "FAILED"]
    assert len(failed) > 0
    no_half = failed[failed.attempt.isna()]
    halves = failed[failed.attempt.notna()]
    assert (no_half.resolution == "not_stored").all() and set(halves.seq) == set(no_half.seq)
    assert (halves.broker == "broker-a").all() and (~halves.is_result).all()
    assert (halves.resolved_by == "check").all() and (halves.resolved_ts_ms % 60_000 == 0).all()
    assert (halves.local_state == "not_run").all() and halves.delivered.all()
