"""The stage in the core (:mod:`rocketsim.stage`), without files or Spark: a producer's tables equal the
simulation and the commit-log records of the core, every record and result is tagged with its broker,
the broker step over all producers equals the commit log numbered at once; the task bodies on in-memory
sinks (:mod:`rocketsim.stage.memory`) give the local oracle's tables for any split into tasks and chunks,
gather small producers into one part per task, and give the same tables when the later stages read the
committed ones; the coupled runs equal the engine's; the stage graph gives what each job reads and
drops; producers are spread over tasks longest first."""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import MIXED

from rocketsim import engine
from rocketsim.broker import side as broker_side
from rocketsim.broker import store
from rocketsim.engine import iterative
from rocketsim.scenario import Scenario, scenario_from_mapping, workload
from rocketsim.stage import coupled, graph, memory, tables
from rocketsim.stage.plan import StagePlan, balanced_bins, producer_bins
from rocketsim.stage.protocols import PRODUCER, StageIO, Task
from rocketsim.stage.sweeps import merged_sweep, variant_aggregates, variant_task
from rocketsim.tables import schemas, summaries
from rocketsim.tables.schemas import BROKER_SIDE, GENERATE, SIMULATE, SUMMARIZE

WINDOW_MS = 1000


@pytest.fixture(scope="module")
def scenario(mixed: Scenario) -> Scenario:
    return mixed


@pytest.fixture(scope="module")
def producers(scenario: Scenario) -> list[tables.ProducerTables]:
    return [
        tables.producer_tables(scenario, tables.producer_messages(scenario, s))
        for s in workload.producer_shares(scenario)
    ]


def test_producer_tables_equal_the_core_functions(scenario: Scenario, producers: list) -> None:
    for share, t in zip(workload.producer_shares(scenario), producers, strict=True):
        messages = workload.generate(scenario, [share.producer])
        assert t.messages.equals(messages)
        out = engine.simulate(messages, scenario)
        assert t.attempts.equals(out.attempts) and t.results.equals(out.results)
        assert t.log.equals(store.log_records(messages, out.attempts, out.results, scenario))


def test_records_and_results_carry_their_broker(scenario: Scenario, producers: list) -> None:
    brokers = np.array(scenario.cluster.brokers)
    for t in producers:
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


def test_result_copies_from_the_records_equal_the_copies_of_the_messages(producers: list) -> None:
    # the copies a producer task's fold reads are its records per message (one per stored copy), the same
    # as store.result_copies over its messages, attempts and results
    for t in producers:
        want = store.result_copies(t.messages, t.attempts, t.results)
        assert t.result_copies().tolist() == want.tolist()
        assert store.log_copies(t.results, t.log).tolist() == want.tolist()


def broker_steps(scenario: Scenario, producers: list[tables.ProducerTables]) -> list[tables.BrokerTables]:
    """Every broker's step over the producers' outputs, as the stage hands them over."""
    out = []
    for b in range(len(scenario.cluster.brokers)):
        log = pa.concat_tables([t.log.filter(pa.array(t.log_broker == b)) for t in producers])
        results = pa.concat_tables(
            [t.stored_results()[0].filter(pa.array(t.stored_results()[1] == b)) for t in producers]
        )
        others = [t.other_half_results() for t in producers]
        other = pa.concat_tables([rows.filter(pa.array(where == b)) for rows, where in others])
        out.append(tables.broker_tables(scenario, b, log, results, other))
    return out


def test_broker_steps_equal_the_whole_commit_log_numbered_at_once(
    scenario: Scenario, producers: list
) -> None:
    whole = store.with_offsets(pa.concat_tables([t.log for t in producers]), scenario)
    parts = []
    for b, out in enumerate(broker_steps(scenario, producers)):
        results = pa.concat_tables(
            [t.stored_results()[0].filter(pa.array(t.stored_results()[1] == b)) for t in producers]
        )
        assert out.broker == b and out.results.num_rows == results.num_rows
        assert out.results.column("commit_log_offset").null_count == 0
        parts.append(out.commit_log)
    order = [("broker", "ascending"), ("commit_log_offset", "ascending")]
    assert pa.concat_tables(parts).sort_by(order).equals(whole.sort_by(order))


def test_producer_tables_take_one_producer(scenario: Scenario) -> None:
    with pytest.raises(ValueError, match="one producer's messages"):
        tables.producer_tables(scenario, workload.generate(scenario, [0, 1]))


def test_producer_bins_put_the_heaviest_alone() -> None:
    sc = scenario_from_mapping(
        {"producers": {"count": 64}, "workload": {"messages": 100_000, "hot_share": 0.5, "rate_per_s": 1e4}}
    )
    bins = producer_bins(workload.producer_shares(sc), 4)
    assert sorted(p for b in bins for p in b) == list(range(64))
    assert [0] in bins  # the hot producer has a task of its own
    sizes = sorted(len(b) for b in bins)
    assert sizes[0] == 1 and sizes[-1] - sizes[1] <= 1  # the other 63 spread evenly over 3 tasks
    assert producer_bins(workload.producer_shares(sc), 1000) == [[p] for p in range(64)]
    assert producer_bins(workload.producer_shares(sc), 1) == [list(range(64))]
    assert balanced_bins([5, 1, 1, 1, 1, 1], 2) == [[0], [1, 2, 3, 4, 5]]


def test_the_derived_outputs_are_the_core_functions_of_the_rows(scenario: Scenario, producers: list) -> None:
    """What a producer and a broker task compute beside their rows: the summary aggregates, the
    transactions rows split between the producer (unstored) and the broker (stored halves), and the
    deliveries; together the whole run's."""
    whole = summaries.producer_aggregates(
        pa.concat_tables([t.attempts for t in producers]),
        pa.concat_tables([t.results for t in producers]),
        1000,
        messages=pa.concat_tables([t.messages for t in producers]),
        faults=summaries.fault_spans(scenario.faults),
    )
    merged = summaries.merge(
        t.summary_aggregates(1000, summaries.fault_spans(scenario.faults)) for t in producers
    )
    assert summaries.summary_tables(merged) == summaries.summary_tables(whole)
    unstored = [t.unstored_transactions(scenario) for t in producers]
    stored, deliveries, storage = [], [], []
    for out in broker_steps(scenario, producers):
        stored.append(out.stored_transactions(scenario))
        deliveries.append(out.deliveries(stored[-1]))
        storage.append(out.storage(1000))
    txns = pa.concat_tables([*unstored, *stored])
    transactional = sum(
        pc.sum(pc.equal(t.messages.column("message_type"), "transaction")).as_py() for t in producers
    )
    other_halves = pc.sum(pc.invert(txns.column("is_result")).cast(pa.int64())).as_py() - sum(
        u.num_rows for u in unstored
    )
    halves = sum(pc.sum(pc.equal(t.log.column("store_topic"), store.HALF_TOPIC)).as_py() for t in producers)
    assert other_halves > 0  # lost replies (remoting_timeout) the brokers stored
    assert txns.num_rows == transactional + other_halves > 0
    assert pc.sum(pc.is_valid(txns.column("half_queue_offset"))).as_py() == halves
    keys = zip(*(txns.column(k).to_pylist() for k in ("producer", "seq", "attempt")), strict=True)
    assert len(set(keys)) == txns.num_rows
    assert all(u.column("half_queue_offset").null_count == u.num_rows for u in unstored)
    assert all(s.column("half_queue_offset").null_count == 0 for s in stored)
    assert sum(pc.sum(s.column("messages")).as_py() or 0 for s in storage) == sum(
        t.log.num_rows for t in producers
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
    made = [tables.producer_tables(sc, tables.producer_messages(sc, s)) for s in workload.producer_shares(sc)]
    brokers = broker_steps(sc, made)
    stored = [out.stored_transactions(sc) for out in brokers]
    txns = pa.concat_tables([*(t.unstored_transactions(sc) for t in made), *stored])
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


# ---- the task bodies, on in-memory sinks -------------------------------------------------------------


def _by_keys(table: pa.Table, name: str) -> pa.Table:
    keys = schemas.TABLES[name].keys
    return table.sort_by([(k, "ascending") for k in keys]) if keys else table


def _in_memory(
    sc: Scenario,
    stages: tuple[str, ...] = graph.STAGES,
    tasks: int = 1,
    chunk_rows: int = 1 << 17,
    **committed,
) -> tuple[memory.MemoryTables, dict[str, int]]:
    """Every task of the stage and the driver's step, in memory; the staged tables and the counts."""
    io = memory.memory_io(committed)
    counts, _ = memory.run_stage(sc, StagePlan(stages, WINDOW_MS, chunk_rows), io, tasks)
    assert not io.scratch.items  # the driver's step clears the scratch store
    return io.tables, counts


@pytest.fixture(scope="module")
def one_pass(scenario: Scenario) -> tuple[memory.MemoryTables, dict[str, int]]:
    return _in_memory(scenario)


def test_the_one_pass_in_memory_equals_the_local_oracle(scenario: Scenario, one_pass: tuple) -> None:
    """Every table of the stage's tasks equals the core's of the whole run at once."""
    made, counts = one_pass
    messages = workload.generate(scenario)
    out = engine.simulate(messages, scenario)
    log = store.with_offsets(store.log_records(messages, out.attempts, out.results, scenario), scenario)
    assert _by_keys(made.table("messages"), "messages").equals(_by_keys(messages, "messages"))
    assert made.table("send_attempts").equals(out.attempts.cast(made.table("send_attempts").schema))
    assert _by_keys(made.table("commit_log"), "commit_log").equals(_by_keys(log, "commit_log"))
    results = _by_keys(made.table("send_results"), "send_results")
    assert results.select(out.results.column_names).cast(out.results.schema).equals(out.results)
    # each result carries the columns of the record it points at, or nulls when none
    pointed = _by_keys(log.filter(log.column("is_result")), "send_results")
    stored = results.filter(pc.is_valid(results.column("commit_log_offset")))
    assert stored.num_rows == pointed.num_rows > 0
    for name in store.RESULT_STORE_COLUMNS:
        assert stored.column(name).equals(pointed.column(name)), name
    failed = results.filter(pc.is_null(results.column("commit_log_offset")))
    assert failed.num_rows > 0
    assert set(failed.column("status").to_pylist()) <= {"FAILED", "REJECTED", "ONEWAY_SENT"}
    whole = summaries.summary_tables(
        summaries.producer_aggregates(
            out.attempts,
            out.results,
            WINDOW_MS,
            messages=messages,
            faults=summaries.fault_spans(scenario.faults),
        )
    )
    assert whole["fault_windows"].num_rows > 0  # the scenario has a fault
    for name, table in whole.items():
        assert made.table(name).equals(table), name
    storage = _by_keys(made.table("broker_storage"), "broker_storage")
    assert storage.equals(broker_side.broker_storage(log, WINDOW_MS))
    halves = pc.and_(
        pc.equal(log.column("store_topic"), store.HALF_TOPIC), pc.invert(log.column("is_result"))
    )
    transactional = pc.sum(pc.equal(messages.column("message_type"), "transaction")).as_py()
    assert made.table("transactions").num_rows == transactional + pc.sum(halves).as_py() > 0
    assert pc.sum(made.table("consumer_load").column("messages")).as_py() > 0
    assert counts["messages.made"] == counts["send_results.made"] == messages.num_rows
    assert counts["commit_log.made"] == log.num_rows


@pytest.mark.parametrize(("tasks", "chunk_rows"), [(3, 13), (2, 97), (4, 600), (1, 1200)])
def test_any_split_into_tasks_and_chunks_gives_the_same_tables_and_counts(
    scenario: Scenario, one_pass: tuple, tasks: int, chunk_rows: int
) -> None:
    """Chunks that cut retries, in-flight sends of a producer's other thread and ASYNC sends waiting for
    answers (never a batch), and producers gathered whole when smaller than a chunk (two to a group with
    1200): the same rows."""
    made, counts = _in_memory(scenario, tasks=tasks, chunk_rows=chunk_rows)
    want, want_counts = one_pass
    assert set(made.parts) == set(want.parts)
    for name in want.parts:
        assert _by_keys(made.table(name), name).equals(_by_keys(want.table(name), name)), name
    assert counts == want_counts


def test_a_broker_fold_that_adds_its_sums_up_as_it_goes_gives_the_same_tables(
    scenario: Scenario, one_pass: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker task's fold keeps sums per queue and window and adds them up every FOLD_PARTS parts (a
    long log): summed every 2 parts of 13 records, the same broker_storage and consumer_load."""
    monkeypatch.setattr(tables, "FOLD_PARTS", 2)
    made, counts = _in_memory(scenario, tasks=3, chunk_rows=13)
    want, want_counts = one_pass
    for name in ("broker_storage", "consumer_load", "transactions"):
        assert _by_keys(made.table(name), name).equals(_by_keys(want.table(name), name)), name
    assert counts == want_counts


def test_small_producers_are_gathered_into_one_part_per_task() -> None:
    """60 producers of a few messages over 3 tasks: each table has one part per task (not one per
    producer), holding its producers in order; a broker's ``send_results`` part is in (producer, seq)
    order whichever task made them; the tables are those of one task."""
    sc = scenario_from_mapping({**MIXED, "producers": {**MIXED["producers"], "count": 60}})
    made, counts = _in_memory(sc, tasks=3)
    bins = producer_bins(workload.producer_shares(sc), 3)
    for name in ("messages", "send_attempts"):
        assert sorted(made.parts[name]) == [Task(PRODUCER, i) for i in range(3)]
        for i, b in enumerate(bins):
            producers = made.parts[name][Task(PRODUCER, i)].column("producer").to_numpy()
            assert sorted(set(producers.tolist())) == b and (np.diff(producers) >= 0).all()
    for task, part in made.parts["send_results"].items():
        keys = (part.column("producer").to_numpy().astype(np.int64) << 40) | part.column("seq").to_numpy()
        assert (np.diff(keys) > 0).all(), task
    whole, whole_counts = _in_memory(sc, tasks=1)
    for name in whole.parts:
        assert _by_keys(made.table(name), name).equals(_by_keys(whole.table(name), name)), name
    assert counts == whole_counts


def test_the_later_stages_of_committed_tables_equal_the_one_pass(scenario: Scenario, one_pass: tuple) -> None:
    """The staged jobs: generate; simulate from the committed messages; the broker side and the summaries
    from the committed tables (each alone and together): every table and its counts as the one pass's."""
    want, want_counts = one_pass
    generated, counts = _in_memory(scenario, (GENERATE,), tasks=2)
    assert generated.table("messages").num_rows == counts["messages.made"] == 2000
    committed = {"messages": generated.table("messages")}
    simulated, counts = _in_memory(scenario, (SIMULATE,), tasks=3, chunk_rows=97, **committed)
    assert counts["messages.read"] == counts["messages.keys"] == 2000
    committed |= {t: simulated.table(t) for t in simulated.parts}
    for stages in ((BROKER_SIDE,), (SUMMARIZE,), (BROKER_SIDE, SUMMARIZE)):
        later, counts = _in_memory(scenario, stages, tasks=2, chunk_rows=500, **committed)
        for name in graph.written(stages):
            assert _by_keys(later.table(name), name).equals(_by_keys(want.table(name), name)), (stages, name)
        if SUMMARIZE in stages:
            assert counts["send_attempts.read"] == want_counts["send_attempts.made"]
        if BROKER_SIDE in stages:
            assert counts["commit_log.read"] == want_counts["commit_log.made"]
            assert counts["transactions.made"] == want_counts["transactions.made"]


def test_a_failing_task_keeps_nothing(scenario: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    """A task that fails half way aborts every part it was writing: none is kept."""
    io = memory.memory_io()
    plan = StagePlan(graph.STAGES, WINDOW_MS, 97)
    shares = workload.producer_shares(scenario)
    real = engine.simulate_chunks

    def failing(chunks, sc):  # noqa: ANN001, ANN202 - the engine's signature
        for n, chunk in enumerate(real(chunks, sc)):
            if n == 2:
                raise RuntimeError("boom")
            yield chunk

    monkeypatch.setattr(engine, "simulate_chunks", failing)
    with pytest.raises(RuntimeError, match="boom"):
        from rocketsim.stage.producer import producer_task

        producer_task(scenario, plan, io, 0, shares[:1])
    assert all(not parts for parts in io.tables.parts.values()) and not io.scratch.items


class _HeldClear(memory.MemoryScratch):
    """A scratch store whose clear waits (5 s at most) until the test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()

    def clear(self) -> None:
        self.go.wait(5)
        super().clear()


def test_the_driver_clears_the_scratch_store_beside_its_own_work(scenario: Scenario) -> None:
    """The driver's finish step reads the tasks' parts, then clears the scratch store on a thread of its
    own: it merges and writes its tables meanwhile and returns before the clear ends;
    ``scratch_cleared`` waits for it."""
    from rocketsim.stage.broker import broker_task
    from rocketsim.stage.driver import finish_stage
    from rocketsim.stage.producer import producer_task

    scratch = _HeldClear()
    io = StageIO(memory.MemoryTables(), scratch, memory.MemoryCommitted())
    plan = StagePlan(graph.STAGES, WINDOW_MS)
    brokers = list(range(len(scenario.cluster.brokers)))
    producer_task(scenario, plan, io, 0, workload.producer_shares(scenario))
    for b in brokers:
        broker_task(scenario, plan, io, b, 1)
    finished = finish_stage(scenario, plan, io, 1, brokers)
    assert scratch.items  # not cleared yet
    assert io.tables.table("producer_windows").num_rows and io.tables.table("consumer_load").num_rows
    scratch.go.set()
    finished.scratch_cleared()
    assert not scratch.items


def _coupled(coupling: str, messages: int, **producers: object) -> Scenario:
    """Four async producers past the brokers' capacity (10 ms appends): the coupling has work to do
    (``producers``: keys of ``[producers]`` changed)."""
    return scenario_from_mapping(
        {
            "producers": {"count": 4, "send_mode": {"async": 1.0}, "threads": 32, **producers},
            "cluster": {"brokers": ["a", "b", "c", "d"]},
            "workload": {"messages": messages, "rate_per_s": 480.0},
            "brokers": {"coupling": coupling, "default": {"store": {"append_us": 10_000 / 1.05}}},
        }
    )


# a fixed point at round 2 (async sends), and past it (SYNC sends and the fault strategy keep moving the
# arrivals): the producers' keys of _coupled's scenario
ROUNDS_PRODUCERS = [
    {},
    {"client_version": "5.3.3", "send_latency_fault_enable": True, "send_mode": {"sync": 1.0}},
]


@pytest.mark.parametrize(("coupling", "messages"), [("iterative", 1600), ("joint", 600)])
def test_coupled_producers_in_tasks_equal_the_engine(coupling: str, messages: int) -> None:
    """brokers.coupling: the iterative rounds spread over 1 or 3 producer tasks, and the joint loop in
    its one task, give the rows of the engine's coupled run in one process; so do iterative producers
    streamed in chunks of 97 messages (the rounds' arrival work and the last pass's rows: joint stays
    whole)."""
    sc = _coupled(coupling, messages)
    shares = workload.producer_shares(sc)
    out = engine.simulate_coupled({s.producer: tables.producer_messages(sc, s) for s in shares}, sc)
    want = pa.concat_tables([out[p].attempts for p in sorted(out)])
    assert pc.sum(pc.equal(want.column("outcome"), "broker:2")).as_py() > 0  # SYSTEM_BUSY sweeps
    for tasks, chunk_rows in ((1, 1 << 17), (3, 1 << 17), (3, 97)):
        made, _ = _in_memory(sc, tasks=tasks, chunk_rows=chunk_rows)
        got = _by_keys(made.table("send_attempts"), "send_attempts")
        assert got.equals(want.cast(got.schema)), (tasks, chunk_rows)
        if coupling == "joint":
            assert len(made.parts["send_attempts"]) == 1  # every producer in one task


@pytest.mark.parametrize("producers", ROUNDS_PRODUCERS)
def test_iterative_rounds_that_make_the_rows_give_the_pass_after_the_rounds(
    monkeypatch: pytest.MonkeyPatch, producers: dict
) -> None:
    """An iterative round run by the stage's producer tasks (coupled.rows_in_round: its rows made and its
    work handed on) gives every table and count of the rounds without rows and the pass after them: when
    it is the last (round 2 of a fixed point, or every round) and when it is not (its rows written over by
    a later pass: the fault strategy and SYNC sends past capacity take more rounds), in 1 or 3 tasks and
    streamed in chunks of 97."""
    sc = _coupled("iterative", 1600, **producers)
    ran: list[coupled.Rounds] = []
    iterate = coupled.iterate_rounds

    def counted(*args, **kwargs) -> coupled.Rounds:
        ran.append(iterate(*args, **kwargs))
        return ran[-1]

    monkeypatch.setattr(memory, "iterate_rounds", counted)
    policies = {
        "never": lambda sc, number, limit: False,
        "default": coupled.rows_in_round,
        "always": lambda sc, number, limit: True,
    }
    for tasks, chunk_rows in ((1, 1 << 17), (3, 97)):
        made = {}
        for name, policy in policies.items():
            monkeypatch.setattr(coupled, "rows_in_round", policy)
            made[name] = _in_memory(sc, tasks=tasks, chunk_rows=chunk_rows)
        assert ran[-3].rows is None and ran[-1].rows is not None  # the pass after the rounds; none
        assert len({(r.last, r.residual) for r in ran[-3:]}) == 1
        want_tables, want_counts = made["never"]
        for name in ("default", "always"):
            got_tables, got_counts = made[name]
            assert got_counts == want_counts, name
            assert got_tables.parts.keys() == want_tables.parts.keys(), name
            for table in got_tables.parts:
                assert got_tables.table(table).equals(want_tables.table(table)), (name, table)
    # a fixed point at round 2 (its rows the run's), or later (round 2's rows written over when always)
    assert ran[-1].last == 2 if not producers else ran[-1].last > 2
    assert coupled.answers_pace_arrivals(sc) == bool(producers)


@pytest.mark.parametrize("producers", ROUNDS_PRODUCERS)
def test_the_driver_ends_the_rounds_where_the_one_process_loop_does(
    monkeypatch: pytest.MonkeyPatch, producers: dict
) -> None:
    """The driver's side of the rounds (coupled.after_round: a broker's work at a time, merged from the
    tasks', and no merge at all once every task hands on the work it handed on the round before) ends at
    the round and residual of the one-process loop (iterative.simulate_iterative, which merges every
    producer's work whole), in 1 or 3 tasks: at a fixed point in round 2 without merging round 2's work,
    and past it (the fault strategy and SYNC sends keep moving the arrivals: a residual above 0 at the
    limit, or a later fixed point)."""
    sc = _coupled("iterative", 1600, **producers)
    shares = workload.producer_shares(sc)
    want = iterative.simulate_iterative({s.producer: tables.producer_messages(sc, s) for s in shares}, sc)
    ran: list[coupled.Rounds] = []
    iterate, merge = coupled.iterate_rounds, coupled.broker_round_work
    merged: list[int] = []

    def counted(*args, **kwargs) -> coupled.Rounds:
        ran.append(iterate(*args, **kwargs))
        return ran[-1]

    def merging(sc: Scenario, scratch: object, number: int, tasks: int, broker: int) -> iterative.ArrivalWork:
        merged.append(number)
        return merge(sc, scratch, number, tasks, broker)  # type: ignore[arg-type]

    monkeypatch.setattr(memory, "iterate_rounds", counted)
    monkeypatch.setattr(coupled, "broker_round_work", merging)
    for tasks in (1, 3):
        merged.clear()
        _in_memory(sc, tasks=tasks)
        assert (ran[-1].last, ran[-1].residual) == (want.rounds, want.residual), tasks
        if want.residual == 0:  # the last round's work equals the round before's in every task
            assert want.rounds not in merged
    assert want.rounds == 2 if not producers else want.rounds > 2


def test_the_stage_graph_gives_what_each_job_reads_and_drops() -> None:
    assert graph.STAGES == (GENERATE, SIMULATE, BROKER_SIDE, SUMMARIZE)
    assert graph.tables_read(graph.STAGES) == ()
    assert graph.tables_read((SIMULATE,)) == ("messages",)
    assert graph.tables_read((BROKER_SIDE,)) == ("messages", "send_results", "commit_log")
    assert graph.tables_read((SUMMARIZE,)) == ("messages", "send_attempts", "send_results")
    assert graph.tables_read((BROKER_SIDE, SUMMARIZE)) == (
        "messages",
        "send_attempts",
        "send_results",
        "commit_log",
    )
    # a rerun of simulate drops what was made of its tables: the broker side, the summaries, the runs row
    dropped = set(graph.derived_tables((SIMULATE,)))
    assert dropped == set(graph.written((BROKER_SIDE, SUMMARIZE, schemas.RUNS_ROW)))
    assert set(graph.derived_tables((GENERATE,))) == set(graph.RUN_TABLES) - {"messages"}
    assert graph.derived_tables((SUMMARIZE,)) == graph.derived_tables((BROKER_SIDE,)) == ()
    assert graph.derived_tables(graph.STAGES) == ("runs",)
    assert len(graph.RUN_TABLES) == 14 and graph.RUN_TABLES[-1] == "runs"  # the driver's, last
    with pytest.raises(ValueError, match="contiguous part"):
        StagePlan((GENERATE, BROKER_SIDE))
    with pytest.raises(ValueError, match="contiguous part"):
        StagePlan((schemas.RUNS_ROW,))
    with pytest.raises(ValueError, match="chunk_rows must be > 0"):
        StagePlan(graph.STAGES, chunk_rows=0)


def test_a_comparison_task_hands_on_each_variants_aggregates(scenario: Scenario) -> None:
    """Messages once, every variant of the signature simulated on them: only aggregates, by variant."""
    share = workload.producer_shares(scenario)[2]
    variants = {
        "on": scenario,
        "off": scenario_from_mapping(
            {**MIXED, "producers": {**MIXED["producers"], "send_latency_fault_enable": False}}
        ),
    }
    scratch = memory.MemoryScratch()
    counts = variant_task(variants, share, WINDOW_MS, scratch, 0)
    got = merged_sweep(scratch, [[share.producer]])
    messages = tables.producer_messages(scenario, share)
    parts = []
    for name, sc in variants.items():
        out = engine.simulate(messages, sc)
        parts.append(
            summaries.producer_aggregates(
                out.attempts,
                out.results,
                WINDOW_MS,
                {"variant": name},
                messages=messages,
                faults=summaries.fault_spans(sc.faults),
            )
        )
    want = summaries.merge(parts)
    for name, table in want.tables().items():
        assert got.tables()[name].equals(table), name
    assert counts["messages"] == 2 * share.messages
    other = scenario_from_mapping({**MIXED, "producers": {**MIXED["producers"], "client_version": "5.3.3"}})
    with pytest.raises(ValueError, match="do not share their messages"):
        variant_aggregates({"a": scenario, "b": other}, share, WINDOW_MS)
