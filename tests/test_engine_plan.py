"""What both engines share (rocketsim.engine.plan): the prepared sends, the rules as data, the outcome
names, and the mirrored definitions that must agree."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from rocketsim.broker import latency as bm
from rocketsim.broker import store
from rocketsim.client.fault import FAULT_UPDATES, fault_updates
from rocketsim.client.outcomes import CATCH_OF_KIND, Catch, OutcomeKind, outcome_label
from rocketsim.client.send import Outcome, oneway_caller_sees
from rocketsim.client.versions import REMOTING_LINES, parse_version
from rocketsim.engine import compiled, reference
from rocketsim.engine.plan import (
    STATUS_NAMES,
    SendKind,
    SimulationError,
    Status,
    plan_for,
    prepare,
    to_outcome,
)
from rocketsim.format import codec
from rocketsim.scenario import scenario_from_mapping, workload


@pytest.mark.parametrize("kind", list(OutcomeKind))
def test_both_engines_speak_one_outcome_vocabulary(kind: OutcomeKind) -> None:
    # the readable engine's Outcome carries the very OutcomeKind the kernel keeps as an int
    code = bm.SYSTEM_BUSY if kind == OutcomeKind.BROKER_ERROR else 0
    outcome = to_outcome(bm.AttemptOutcome(kind, 5, code))
    assert outcome.kind is kind and outcome.catch == CATCH_OF_KIND[kind]
    assert Outcome.from_label(outcome.label, 5).kind is kind
    for version in ("4.9.8", "5.3.3"):
        sc = scenario_from_mapping({"producers": {"client_version": version}, "workload": {"messages": 1}})
        rules = plan_for(sc).rules
        assert oneway_caller_sees(outcome, sc.producers.version) == compiled.oneway_caller_sees(rules, kind)
    assert compiled.is_result_kind(kind) == (CATCH_OF_KIND[kind] == Catch.RESULT)
    assert outcome.label == outcome_label(kind, code)


def test_a_stored_kind_is_its_status() -> None:
    stored = [k for k in OutcomeKind if CATCH_OF_KIND[k] == Catch.RESULT]
    assert [Status(int(k)).name for k in stored] == [
        "SEND_OK",
        "FLUSH_DISK_TIMEOUT",
        "FLUSH_SLAVE_TIMEOUT",
        "SLAVE_NOT_AVAILABLE",
    ]
    assert STATUS_NAMES[Status.REJECTED] == "REJECTED"


@pytest.mark.parametrize(
    ("version", "detector"), [("4.9.7", False), ("4.9.8", True), ("5.3.3", False), ("5.3.3", True)]
)
def test_fault_rules_arrays_are_the_table(version: str, detector: bool) -> None:
    sc = scenario_from_mapping(
        {
            "producers": {"client_version": version, "start_detector_enable": detector},
            "workload": {"messages": 10},
        }
    )
    rules = plan_for(sc).rules
    detecting = detector and version.startswith("5")
    for site, cells in fault_updates(parse_version(version).line).items():
        for catch, (isolation, reachable) in cells.items():
            assert rules.isolation[site, catch] == isolation
            assert rules.reachable[site, catch] == reachable.value_for(detecting)
    assert [rules.catch_of_kind[k] for k in OutcomeKind] == [CATCH_OF_KIND[k] for k in OutcomeKind]
    assert {line.fault_updates for line in REMOTING_LINES} == set(FAULT_UPDATES)


def test_prepare_makes_sends_in_seq_order() -> None:
    sc = scenario_from_mapping(
        {
            "producers": {"count": 1, "threads": 2, "send_mode": {"sync": 1, "oneway": 1, "async": 1}},
            "workload": {
                "messages": 400,
                "message_types": {"normal": 2, "ordered": 1, "transaction": 1, "batch": 1},
                "batch_size": 4,
                "invalid": {"empty_body": 0.05},
            },
        }
    )
    messages = workload.generate(sc)
    prep = prepare(messages.take(pc.sort_indices(messages, [("seq", "descending")])), sc)  # any row order
    assert prep.s_seq.tolist() == sorted(prep.s_seq.tolist())
    rows = prep.messages
    assert rows.column("seq").to_pylist() == sorted(messages.column("seq").to_pylist())
    # every accepted row belongs to one send, a batch's members to the send of its first accepted member
    accepted = ~prep.rejected
    assert (prep.send_of_row[accepted] >= 0).all() and (prep.send_of_row[prep.rejected] == -1).all()
    assert prep.rejected.sum() == len(prep.reject_text) > 0
    kinds = {SendKind(k) for k in prep.s_kind.tolist()}
    assert kinds == set(SendKind)
    mtype = rows.column("message_type").to_pylist()
    for s, row in enumerate(prep.s_row.tolist()):
        if mtype[row] == "transaction":  # sendMessageInTransaction is a SYNC call
            assert prep.s_kind[s] == SendKind.SYNC
    with pytest.raises(SimulationError):
        prepare(messages.slice(0, 0), sc)


def _batches(version: str, batch_size: int, max_message_size: int):
    sc = scenario_from_mapping(
        {
            "producers": {"count": 1, "client_version": version, "max_message_size": max_message_size},
            "workload": {
                "messages": 3 * batch_size,
                "message_types": {"batch": 1.0},
                "batch_size": batch_size,
                "body_size": {"distribution": "fixed", "median": 120},
            },
        }
    )
    return sc, prepare(workload.generate(sc), sc)


@pytest.mark.parametrize(("client", "broker"), [("4.9.8", "5.3.3"), ("5.3.3", "4.9.8")])
def test_the_properties_check_both_engines_read_is_the_brokers(client: str, broker: str) -> None:
    # the broker refuses what it would write (store.illegal_properties_parts: 4.9.8 checkMessage and the
    # CommitLog encoder, 5.3.3 MessageExtEncoder.encode), so the plan's table is the cluster's broker's
    sc = scenario_from_mapping(
        {
            "cluster": {"broker_version": broker},
            "producers": {"count": 1, "client_version": client},
            "workload": {"messages": 60, "message_types": {"normal": 1, "delay": 1, "transaction": 1}},
        }
    )
    prep = prepare(workload.generate(sc), sc)
    parts = store.illegal_properties_parts(prep.messages, sc.producers.version, sc.broker_version)
    line = store.illegal_properties_parts(prep.messages, sc.producers.version, sc.producers.version.broker)
    for got, want, other in zip((prep.s_props_base, prep.s_props_chars), parts[::2], line[::2], strict=True):
        assert (got == want[prep.s_row]).all() and not (got == other[prep.s_row]).all()


def test_batch_over_max_message_size_is_refused_like_upstream() -> None:
    # Upstream DefaultMQProducerImpl.sendDefaultImpl -> Validators.checkMessage(msgBatch, producer) on the
    # MessageBatch that DefaultMQProducer.batch() encoded (MessageBatch.encode: 22 bytes + body + properties
    # per member): `msg.getBody().length > getMaxMessageSize()` -> MQClientException(MESSAGE_ILLEGAL,
    # "the message body size over max value, MAX: " + max), before any selection; equal is accepted.
    sc, prep = _batches("4.9.8", 8, 1000)
    props = prep.messages.column("properties_size").to_pylist()
    encoded = sum(22 + 120 + p for p in props[:8])
    assert encoded > 1000 and prep.rejected.all() and prep.n_sends == 0
    assert set(prep.reject_text.values()) == {
        "CODE: 13  DESC: the message body size over max value, MAX: 1000\n"
        "For more information, please visit the url, http://rocketmq.apache.org/docs/faq/"
    }
    _, four = _batches("4.9.8", 4, 1000)  # about 800 bytes
    assert not four.rejected.any() and four.n_sends == 3
    exact = sum(22 + 120 + p for p in four.messages.column("properties_size").to_pylist()[:4])
    _, at_limit = _batches("4.9.8", 4, exact)
    assert not at_limit.rejected[:4].any()
    _, over = _batches("4.9.8", 4, exact - 1)
    assert over.rejected[:4].all()


@pytest.mark.parametrize(("version", "request_props"), [("4.9.8", 9), ("5.3.3", 52)])
def test_batch_request_carries_its_own_properties(version: str, request_props: int) -> None:
    # Upstream: MessageBatch.generateFromList sets WAIT=true on the batch ("WAIT\x01true": 9 bytes in 4.9,
    # which removes the last separator); 5.3.3 DefaultMQProducer.batch() also calls
    # MessageClientIDSetter.setUniqID(msgBatch) (+ "UNIQ_KEY\x01" + 32 hex + "\x02", trailing separators
    # kept): 52 bytes. 4.9.8's batch() never gives the batch a UNIQ_KEY and sendKernelImpl skips batches.
    sc, prep = _batches(version, 2, 4_194_304)
    props = prep.messages.column("properties_size").to_pylist()
    element = [22 + 120 + p for p in props]
    assert prep.s_wire.tolist() == [
        request_props + element[0] + element[1],
        *[request_props + element[k] + element[k + 1] for k in (2, 4)],
    ]


# ---- UNIQ_KEY: made when the client sends ------------------------------------------------------------


def _ids(results) -> dict[int, tuple[int, int]]:  # noqa: ANN001 - send_results -> seq: (time field, counter)
    out = {}
    for row in results.to_pylist():
        raw = bytes.fromhex(row["uniq_msg_id"])
        out[row["seq"]] = (int.from_bytes(raw[10:14], "big"), int.from_bytes(raw[14:16], "big"))
    return out


def _month_ms(t: int) -> int:
    """The time field of an id made at simulated ``t`` (ms since the start of that month, UTC)."""
    now = workload.EPOCH_MS + t
    return now - codec.month_start_ms(now, "UTC")


def _fixed_latency(ms: float) -> dict:
    return {"default": {"latency": {"median_ms": ms, "sigma": 0.0, "spike_probability": 0.0}}}


def test_uniq_key_time_is_the_send_start_and_counter_the_call_order() -> None:
    # MessageClientIDSetter.createUniqID: time field `System.currentTimeMillis() - startTime` when it is
    # called, counter COUNTER.getAndIncrement() (one AtomicInteger per client process, from 0). setUniqID
    # runs in DefaultMQProducerImpl.sendKernelImpl (first attempt), after Validators.checkMessage in
    # sendDefaultImpl: a refused message takes no counter value. One sender thread, 50 ms answers:
    # message 0 born at 1 is sent at 1; message 1 (a bad topic) is refused; message 2, born at 3, waits
    # for the thread until 51.
    sc = scenario_from_mapping(
        {
            "cluster": {"brokers": ["broker-a"]},
            "producers": {"count": 1, "threads": 1},
            "workload": {"messages": 3, "rate_per_s": 1000.0, "arrival": "uniform"},
            "brokers": _fixed_latency(50.0),
        }
    )
    messages = workload.generate(sc)
    topic = pc.if_else(pc.equal(messages.column("seq"), 1), "bad topic!", messages.column("topic"))
    messages = messages.set_column(messages.schema.get_field_index("topic"), "topic", topic)
    out = reference.simulate_producer(messages, sc)
    assert out.results.column("status").to_pylist() == ["SEND_OK", "REJECTED", "SEND_OK"]
    ids = _ids(out.results)
    assert ids[0] == (_month_ms(1), 0)
    assert ids[2] == (_month_ms(51), 1)  # not the born time (3), not the seq (2)
    # the refused message keeps the workload's placeholder: it never had a UNIQ_KEY
    assert out.results.column("uniq_msg_id")[1] == messages.column("uniq_msg_id")[1]


def test_async_uniq_key_is_made_on_the_executor_thread() -> None:
    # DefaultMQProducerImpl.send(msg, callback, timeout) submits sendDefaultImpl to the async sender
    # executor; sendKernelImpl (setUniqID) runs when a thread takes it. One executor thread, held by
    # message 0's connect failures (4.9.8 invokeAsync connects synchronously, 500 ms refusals, retried at
    # once): message 1, submitted at 20, runs at 1510.
    sc = scenario_from_mapping(
        {
            "cluster": {"brokers": ["broker-a"]},
            "producers": {"count": 1, "send_mode": {"async": 1.0}, "async_sender_threads": 1},
            "workload": {"messages": 2, "rate_per_s": 100.0, "arrival": "uniform"},
            "brokers": {"default": {"latency": {"connect_refused_ms": 500.0}}},
            "faults": [{"broker": "broker-a", "kind": "outage", "start_s": 0.001, "end_s": 5.0}],
        }
    )
    out = reference.simulate_producer(workload.generate(sc), sc)
    res = out.results.to_pandas().set_index("seq")
    assert res.loc[0, "end_ts_ms"] == 1510 and res.loc[1, "send_ts_ms"] == 20
    assert _ids(out.results) == {0: (_month_ms(10), 0), 1: (_month_ms(1510), 1)}


@pytest.mark.parametrize(("version", "single_counter"), [("4.9.8", 2), ("5.3.3", 3)])
def test_batch_members_take_their_keys_when_the_batch_is_sent(version: str, single_counter: int) -> None:
    # DefaultMQProducer.batch(): setUniqID on each member in order, in the caller's thread at
    # send(Collection); 5.3.3 then setUniqID(msgBatch): the batch takes a counter value of its own, which
    # no member carries. A batch of 2 (seq 0, 1) sent at 1, then message 2.
    sc = scenario_from_mapping(
        {
            "cluster": {"brokers": ["broker-a"]},
            "producers": {"count": 1, "threads": 1, "client_version": version},
            "workload": {
                "messages": 3,
                "rate_per_s": 1000.0,
                "arrival": "uniform",
                "batch_size": 2,
                "message_types": {"normal": 1.0, "batch": 1.0},
            },
            "brokers": _fixed_latency(5.0),
        }
    )
    messages = workload.generate(sc)
    assert messages.column("batch_id").to_pylist()[:2] == [0, 0] and messages["batch_id"][2].as_py() is None
    ids = _ids(reference.simulate_producer(messages, sc).results)
    assert ids[0][1] == 0 and ids[1][1] == 1 and ids[0][0] == ids[1][0] == _month_ms(2)
    assert ids[2][1] == single_counter


@pytest.mark.parametrize("sends_per_part", [1, 5, 64])
@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_uniq_counters_made_as_sends_end_equal_the_whole_runs(version: str, sends_per_part: int) -> None:
    """MessageClientIDSetter.createUniqID: COUNTER.getAndIncrement() in call order, process-wide. Given
    the sends a part at a time (in seq order) and, each time, the born time of the next send (no call
    still to come is earlier: a send begins after it is born), UniqCalls counts every call as uniq_keys
    does over the whole run (5.x: a batch's own key after its members)."""
    import numpy as np

    from rocketsim.engine.plan import UniqCalls, plan_for, prepare, uniq_keys

    sc = scenario_from_mapping(
        {
            "name": "uniq",
            "seed": 3,
            "cluster": {"brokers": ["broker-a", "broker-b"], "write_queues": 2},
            "producers": {"count": 1, "threads": 4, "client_version": version},
            "workload": {
                "messages": 600,
                "rate_per_s": 500.0,
                "message_types": {"normal": 0.7, "batch": 0.3},
                "batch_size": 3,
                "invalid": {"empty_body": 0.02},
            },
            "brokers": {"default": {"errors": {"remoting_timeout": 0.05}}},
        }
    )
    m = workload.generate(sc)
    prep = prepare(m, sc)
    out = compiled.engine_output(prep, plan_for(sc), compiled.run_prepared(prep, sc), sc)
    calls = UniqCalls(prep.batch_uniq_key)
    counter = np.zeros(m.num_rows, np.int64)
    n = prep.n_sends
    for s0 in range(0, n, sends_per_part):
        s1 = min(s0 + sends_per_part, n)
        calls.add_sends(prep, out, np.arange(s0, s1))
        rows, counters = calls.assign(int(prep.s_born[s1]) if s1 < n else np.iinfo(np.int64).max)
        counter[rows] = counters
    made = uniq_keys(prep, out).to_pylist() != m.column("uniq_msg_id").to_pylist()
    assert made
    whole = UniqCalls(prep.batch_uniq_key)
    whole.add_sends(prep, out, np.arange(n))
    rows, counters = whole.assign(np.iinfo(np.int64).max)
    expected = np.zeros(m.num_rows, np.int64)
    expected[rows] = counters
    assert (counter == expected).all() and calls.next == whole.next > m.num_rows * 0.9


def test_prepare_a_chunk_at_a_time_gives_the_whole_runs_sends() -> None:
    """A run prepared a chunk at a time (whole batches, plan.batch_aligned) with one growing list of
    topic ids: the sends are the whole run's, in order, each keyed to the same topic."""
    import numpy as np

    from rocketsim.engine.plan import batch_aligned, prepare

    sc = scenario_from_mapping(
        {
            "name": "chunks",
            "seed": 9,
            "cluster": {"brokers": ["broker-a"], "write_queues": 2},
            "producers": {"count": 1, "threads": 2},
            "workload": {
                "messages": 500,
                "topics": ["TopicA", "TopicB", "TopicC"],
                "message_types": {"normal": 0.6, "batch": 0.2, "ordered": 0.2},
                "batch_size": 4,
                "invalid": {"bad_topic": 0.02, "empty_body": 0.02},
            },
        }
    )
    m = workload.generate(sc)
    whole = prepare(m, sc)
    topics: list[str] = []
    parts = [
        prepare(c, sc, topics) for c in batch_aligned(m.slice(at, 37) for at in range(0, m.num_rows, 37))
    ]
    for name in ("s_seq", "s_born", "s_kind", "s_wire", "s_order_hash", "s_props_chars"):
        assert (np.concatenate([getattr(p, name) for p in parts]) == getattr(whole, name)).all(), name
    names = np.array(topics, object)[np.concatenate([p.s_topic for p in parts])]
    assert (names == np.array(whole.topics, object)[whole.s_topic]).all()
    assert sum(len(p.reject_text) for p in parts) == len(whole.reject_text) > 0


def test_prepare_reads_the_generators_codes_as_it_reads_their_strings() -> None:
    """Messages given as drawn (string columns as dictionary arrays, ``generate_producer(coded=True)``), a
    chunk at a time: the same sends, topic ids, rejections and (string) message rows as the strings give."""
    import dataclasses

    import numpy as np

    from rocketsim.engine.plan import batch_aligned

    sc = scenario_from_mapping(
        {
            "seed": 5,
            "cluster": {"brokers": ["broker-a"], "write_queues": 2},
            "producers": {"count": 1, "threads": 2, "send_mode": {"sync": 1, "async": 1, "oneway": 1}},
            "workload": {
                "messages": 600,
                "topics": ["TopicA", "TopicB", "TopicC"],
                "message_types": {"normal": 0.5, "batch": 0.2, "ordered": 0.2, "transaction": 0.1},
                "batch_size": 4,
                "invalid": {"bad_topic": 0.02, "empty_body": 0.02},
            },
        }
    )
    share = workload.producer_shares(sc)[0]
    coded = list(workload.generate_producer(sc, share, batch_rows=53, coded=True))
    strings = list(workload.generate_producer(sc, share, batch_rows=53))
    assert pa.types.is_dictionary(coded[0].schema.field("topic").type)
    by_strings: list[str] = []
    by_codes: list[str] = []
    plain = [prepare(c, sc, by_strings) for c in batch_aligned(strings)]
    drawn = [prepare(c, sc, by_codes) for c in batch_aligned(coded)]
    assert by_codes == by_strings and len(drawn) == len(plain) > 1
    for a, b in zip(plain, drawn, strict=True):
        for f in dataclasses.fields(a):
            x, y = getattr(a, f.name), getattr(b, f.name)
            if isinstance(x, np.ndarray):
                assert np.array_equal(x, y), f.name
            elif isinstance(x, pa.Table):
                assert x.equals(y, check_metadata=True), f.name
            else:
                assert x == y, f.name
    assert sum(len(p.reject_text) for p in drawn) > 0


def test_codes_of_a_dictionary_array_are_those_of_its_strings() -> None:
    """A dictionary's unused, repeated and null values: the codes (and values) ``pc.dictionary_encode`` of
    the strings gives, in the order of their first rows."""
    import numpy as np

    from rocketsim.engine.plan.sends import _codes

    values = pa.array(["z", "a", None, "b", "a"], pa.string())
    indices = pa.array([3, 1, None, 4, 2, 3, 0, 1], pa.int32())
    coded = pa.DictionaryArray.from_arrays(indices, values)
    idx, names = _codes(coded)
    want_idx, want_names = _codes(coded.cast(pa.string()))
    assert names == want_names == ["b", "a", "z"]
    assert np.array_equal(idx, want_idx) and idx.tolist() == [0, 1, -1, 1, -1, 0, 2, 1]
    assert np.array_equal(
        _codes(coded, ("a", "b", "c"))[0], _codes(coded.cast(pa.string()), ("a", "b", "c"))[0]
    )
