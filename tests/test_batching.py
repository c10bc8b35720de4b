"""autoBatch: the ``ProduceAccumulator`` (:mod:`rocketsim.client.batching`), its batches as sends of both
engines, and the scenario keys.

Upstream: client/src/main/java/org/apache/rocketmq/client/producer/ProduceAccumulator.java and
DefaultMQProducer.java at rocketmq-all-5.2.0..5.3.3 (clients.md A.3.12, AB-1/AB-2); sync sends through the
accumulator as at rocketmq-all-5.1.4..5.3.3 (``DefaultMQProducer.send(Message)`` -> ``sendByAccumulator``
-> ``ProduceAccumulator.send(Message, MessageQueue, DefaultMQProducer)`` ->
``MessageAccumulation.add(Message)``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketsim.client.batching import accumulate, guard_sleep_ms
from rocketsim.client.versions import AutoBatch, parse_version
from rocketsim.engine import compiled, reference
from rocketsim.engine.plan import prepare
from rocketsim.format import codec
from rocketsim.format.message import MessageConst
from rocketsim.scenario import ScenarioError, scenario_from_mapping, span, workload

DEFAULTS = AutoBatch(True, 10, 32 * 1024, 32 * 1024 * 1024)


def run(born, body, *, key=None, through=None, batchable=None, settings=DEFAULTS):
    n = len(born)
    born = np.asarray(born, np.int64)
    key = np.zeros(n, np.int64) if key is None else np.asarray(key, np.int64)
    through = np.ones(n, bool) if through is None else np.asarray(through, bool)
    batchable = through.copy() if batchable is None else np.asarray(batchable, bool)
    return accumulate(born, key, np.asarray(body, np.int64), through, batchable, settings)


# ---- the accumulator --------------------------------------------------------------------------------


def test_defaults_are_upstreams() -> None:
    # ProduceAccumulator's fields: totalHoldSize = 32 * 1024 * 1024, holdSize = 32 * 1024, holdMs = 10;
    # DefaultMQProducer.autoBatch = false; absent before 5.1.4 (the file is missing at 5.1.3)
    assert parse_version("5.3.3").auto_batch_defaults == AutoBatch(False, 10, 32768, 33554432)
    assert parse_version("5.2.0").auto_batch_defaults == AutoBatch(False, 10, 32768, 33554432)
    assert parse_version("4.9.8").auto_batch_defaults is None


def test_guard_sleeps_half_the_hold() -> None:
    # GuardForAsyncSendService.doWork: Thread.sleep(Math.max(1, holdMs / 2)) (Java int division)
    assert [guard_sleep_ms(h) for h in (1, 2, 3, 10, 11)] == [1, 1, 1, 5, 5]


def test_a_batch_is_sent_by_the_guard_once_held_hold_ms() -> None:
    # MessageAccumulation.readyToSend: now >= createTime + holdMs; the async guard sends it on its next
    # pass (doWork: v.readyToSend() -> v.send(null)); createTime is the first add
    out = run([3, 4, 9], [10, 10, 10])
    assert out.batch.tolist() == [0, 0, 0]
    assert out.sent_ms.tolist() == [15]  # created 3, due 13, the guard passes every 5 ms: 15


def test_an_add_past_the_hold_sends_at_once_with_the_message() -> None:
    # MessageAccumulation.add(msg, callback): after adding, if (readyToSend()) this.send(sendCallback) in
    # the caller's thread: a message born at the due ms (before the guard's pass) goes with the batch
    out = run([0, 10], [10, 10])
    assert out.batch.tolist() == [0, 0] and out.sent_ms.tolist() == [10]
    # born after the guard's pass at 10 (passes at 0, 5, 10, ...; due 0 + 10 = 10, sent at 10): a new batch
    out = run([0, 11], [10, 10])
    assert out.batch.tolist() == [0, 1] and out.sent_ms.tolist() == [10, 25]


def test_a_batch_over_hold_size_is_sent_by_the_adding_message() -> None:
    # readyToSend: messagesSize > holdSize (strictly over): the add that crosses it sends the batch
    small = AutoBatch(True, 10, 100, 1 << 20)
    out = run([0, 1, 2, 3], [50, 50, 1, 60], settings=small)
    assert out.batch.tolist() == [0, 0, 0, 1]  # 50 + 50 = 100 is not over; + 1 is
    assert out.sent_ms.tolist() == [2, 15]


def test_batches_are_per_aggregate_key() -> None:
    # AggregateKey(msg): topic, mq (null for send(msg, callback)), waitStoreMsgOK, tag
    out = run([0, 1, 2, 3], [10] * 4, key=[0, 1, 0, 1])
    assert out.batch.tolist() == [0, 1, 0, 1]


def test_refused_messages_leak_into_the_total_hold() -> None:
    # DefaultMQProducer.canBatch calls produceAccumulator.tryAddMessage first (currentlyHoldSize += body),
    # then refuses delay messages; nothing takes their bytes back: once currentlyHoldSize >= totalHoldSize,
    # tryAddMessage is false and every message is sent alone
    total = AutoBatch(True, 10, 1 << 20, 100)
    out = run([0, 1, 2, 3], [60, 60, 10, 10], batchable=[False, False, True, True], settings=total)
    assert out.batch.tolist() == [-1, -1, -1, -1]  # 120 >= 100 held by the leak
    out = run([0, 1, 2], [60, 10, 10], batchable=[False, True, True], settings=total)
    assert out.batch.tolist() == [-1, 0, 0]


def test_messages_not_through_the_accumulator_are_alone_and_hold_nothing() -> None:
    # DefaultMQProducer.send(msg, selector, arg, ...), sendOneway and MessageBatch sends never call
    # sendByAccumulator
    total = AutoBatch(True, 10, 1 << 20, 100)
    out = run([0, 1], [500, 10], through=[False, True], settings=total)
    assert out.batch.tolist() == [-1, 0]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 40), st.integers(0, 3), st.integers(0, 900), st.booleans()),
        min_size=1,
        max_size=80,
    ),
    st.integers(1, 30),
    st.integers(1, 2000),
)
def test_every_batchable_message_is_in_one_batch_within_the_rules(rows, hold_ms, hold_size) -> None:
    rows.sort(key=lambda r: r[0])
    born = np.array([r[0] for r in rows], np.int64)
    key = np.array([r[1] for r in rows], np.int64)
    body = np.array([r[2] for r in rows], np.int64)
    ok = np.array([r[3] for r in rows], bool)
    s = AutoBatch(True, hold_ms, hold_size, 1 << 40)
    out = run(born, body, key=key, batchable=ok, settings=s)
    assert np.all((out.batch >= 0) == ok)  # every batchable message once, nothing else
    sleep = guard_sleep_ms(hold_ms)
    for b in range(out.count):
        members = np.flatnonzero(out.batch == b)
        assert members.size and np.unique(key[members]).size == 1
        first, last = born[members].min(), born[members].max()
        # sent after its last add, at most one guard pass after it fell due
        assert last <= out.sent_ms[b] <= first + hold_ms + sleep
        # below holdSize until its last message: a batch is over holdSize by that message at most
        assert body[members[:-1]].sum() <= hold_size


# ---- the scenario and both engines ------------------------------------------------------------------


def scenario(**producers):
    return scenario_from_mapping(
        {
            "seed": 11,
            "producers": {"client_version": "5.3.3", "count": 1, "send_mode": {"async": 1.0}, **producers},
            "workload": {
                "messages": 1500,
                "rate_per_s": 3000,
                "body_size": {"min": 100, "max": 6000},
                "message_types": {"normal": 0.8, "delay": 0.1, "ordered": 0.1},
                "invalid": {"oversize_body": 0.01, "bad_topic": 0.01},
            },
            "brokers": {"default": {"errors": {"system_busy": 0.05, "remoting_timeout": 0.01}}},
        }
    )


def test_auto_batch_keys_are_refused_where_upstream_has_none() -> None:
    with pytest.raises(ScenarioError, match="exists only in clients 5.1.4 and later"):
        scenario_from_mapping({"producers": {"client_version": "4.9.8", "auto_batch": True}})
    with pytest.raises(ScenarioError, match="batch_max_bytes must be between 1 and 2097152"):
        scenario(auto_batch=True, batch_max_bytes=3 << 20)
    # sync sends through the accumulator are modelled: the default send mode (sync) is accepted
    assert scenario_from_mapping(
        {"producers": {"client_version": "5.3.3", "auto_batch": True}}
    ).producers.auto_batch


def test_both_engines_agree_with_auto_batch() -> None:
    sc = scenario(auto_batch=True, batch_max_bytes=8192)
    messages = workload.generate(sc)
    assert compiled.supports(sc, messages)
    ref = reference.simulate_producer(messages, sc)
    fast = compiled.simulate_producer(messages, sc)
    assert ref.attempts.equals(fast.attempts) and ref.results.equals(fast.results)


def test_a_batch_is_one_send_whose_outcome_every_member_gets() -> None:
    # ProduceAccumulator.MessageAccumulation.send(SendCallback): sendDirect(MessageBatch, null, callback);
    # onSuccess splits the result to each member, onException gives every member the exception
    sc = scenario(auto_batch=True, batch_max_bytes=8192)
    messages = workload.generate(sc)
    prep = prepare(messages, sc)
    out = reference.simulate_producer(messages, sc).results.to_pandas()
    batch = np.asarray(prep.messages.column("batch_id").fill_null(-1), np.int64)
    out["batch"] = batch
    members = out[out.batch >= 0]
    assert len(members) > 100 and members.batch.nunique() < len(members) / 2
    for _, g in members.groupby("batch"):
        assert g.status.nunique() == 1 and g.send_ts_ms.nunique() == 1 and g.end_ts_ms.nunique() == 1
        assert (g.attempts.iloc[1:] == 0).all()  # a batch's attempts are on its first member
        assert (g.send_ts_ms >= g.born_ts_ms).all()  # held: the publish delay is the hold
        assert not g.compressed.any()  # a MessageBatch is never compressed (tryToCompressMessage)
    alone = out[(out.batch < 0)]
    assert (alone.queue_wait_ms == 0).all()  # delay, ordered and refused messages are not held
    assert (out.queue_wait_ms[out.batch >= 0] > 0).any()


SYNC_AND_ASYNC = {"send_mode": {"async": 0.5, "sync": 0.5}, "threads": 8}


@pytest.mark.parametrize("sender_model", ["pool", "partitioned"])
def test_both_engines_agree_with_sync_sends_through_the_accumulator(sender_model: str) -> None:
    sc = scenario(auto_batch=True, batch_max_bytes=8192, sender_model=sender_model, **SYNC_AND_ASYNC)
    messages = workload.generate(sc)
    assert compiled.supports(sc, messages)
    ref = reference.simulate_producer(messages, sc)
    fast = compiled.simulate_producer(messages, sc)
    assert ref.attempts.equals(fast.attempts) and ref.results.equals(fast.results)


def batches_of(sc) -> pd.DataFrame:
    """The results of ``sc``'s producer (readable engine) with each row's accumulator batch (-1: none)."""
    messages = workload.generate(sc)
    prep = prepare(messages, sc)
    out = reference.simulate_producer(messages, sc).results.to_pandas()
    out["batch"] = np.where(prep.auto_member, np.asarray(prep.messages.column("batch_id").fill_null(-1)), -1)
    return out


def test_sync_and_async_sends_are_batched_apart() -> None:
    # ProduceAccumulator.send(Message, DefaultMQProducer) takes getOrCreateSyncSendBatch (syncSendBatchs),
    # send(Message, SendCallback, DefaultMQProducer) getOrCreateAsyncSendBatch (asyncSendBatchs): two maps of
    # MessageAccumulation by AggregateKey, so a sync and an async message of one topic and tag never share
    # a batch; both are held by the same rules (readyToSend: over holdSize, or holdMs after createTime)
    out = batches_of(scenario(auto_batch=True, batch_max_bytes=8192, **SYNC_AND_ASYNC))
    members = out[out.batch >= 0]
    assert set(members.send_mode) == {"sync", "async"}
    assert (members.groupby("batch").send_mode.nunique() == 1).all()
    sync = members[members.send_mode == "sync"]
    assert sync.batch.nunique() < len(sync) / 2  # they are held and joined, as the async ones
    assert (sync.queue_wait_ms > 0).any() and (sync.send_ts_ms >= sync.born_ts_ms).all()


def test_a_sync_batch_is_one_sync_send_whose_end_every_caller_waits_for() -> None:
    # MessageAccumulation.add(Message): the caller waits on the batch (this.wait()) until readyToSend, then
    # send() runs defaultMQProducer.sendDirect(messageBatch, mq, null): a SYNC send with
    # retryTimesWhenSendFailed; notifyAll wakes the other callers, who return sendResults[index] (the
    # batch's result split per member). Here two sync retries, no async one: only the sync batches retry
    # (sendDefaultImpl's SYNC loop retries a SYSTEM_BUSY answer)
    sc = scenario(
        auto_batch=True,
        batch_max_bytes=8192,
        retry_times_when_send_failed=2,
        retry_times_when_send_async_failed=0,
        **SYNC_AND_ASYNC,
    )
    out = batches_of(sc)
    members = out[out.batch >= 0]
    for _, g in members.groupby("batch"):
        assert g.status.nunique() == 1 and g.end_ts_ms.nunique() == 1 and g.send_ts_ms.nunique() == 1
    tries = members.groupby("batch").agg(mode=("send_mode", "first"), attempts=("attempts", "sum"))
    assert tries[tries["mode"] == "sync"].attempts.max() > 1
    assert tries[tries["mode"] == "async"].attempts.max() == 1


def test_auto_batch_off_prepares_as_before() -> None:
    on, off = scenario(auto_batch=False), scenario()
    messages = workload.generate(off)
    a, b = prepare(messages, on), prepare(messages, off)
    for name in ("s_row", "s_born", "s_wire", "send_of_row", "row_wire", "sys_flag"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.auto_member is None and pc.all(pc.is_null(a.messages.column("batch_id"))).as_py()


def test_a_batch_request_is_its_members_encoded_with_the_batch_properties() -> None:
    # MessageAccumulation.batch(): new MessageBatch(messages), setKeys(the members' keys as a set),
    # setTags(the key's tag), setWaitStoreMsgOK, MessageClientIDSetter.setUniqID(batch), body =
    # MessageDecoder.encodeMessages(messages)
    sc = scenario(auto_batch=True, batch_max_bytes=8192)
    prep = prepare(workload.generate(sc), sc)
    m = prep.messages.to_pandas()
    version = sc.producers.version
    m["element"] = codec.encoded_message_sizes(
        m.body_size.to_numpy(np.int64), m.properties_size.to_numpy(np.int64), version=version
    )
    auto = m[prep.auto_member]
    checked = 0
    for _, g in list(auto.groupby("batch_id"))[:20]:
        keys = {k for ks in g["keys"].dropna() for k in ks.split(" ") if k}
        props = {
            MessageConst.PROPERTY_KEYS: " ".join(sorted(keys)),
            MessageConst.PROPERTY_TAGS: g.tags.iloc[0],
            MessageConst.PROPERTY_WAIT_STORE_MSG_OK: "true",
            MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "0" * 32,
        }
        send = prep.send_of_row[g.index[0]]
        assert prep.s_wire[send] == codec.properties_size(props, version=version) + g.element.sum()
        checked += 1
    assert checked == 20


def test_sync_callers_beyond_the_sender_threads_are_warned_of() -> None:
    # each sync caller waits in MessageAccumulation.add for its batch: rate x (hold + send) callers at once;
    # the model gives each its own thread, so a job says when the producer's threads are fewer
    raw = {"producers": {"client_version": "5.3.3", "auto_batch": True}, "workload": {"rate_per_s": 2000}}
    few = scenario_from_mapping({**raw, "producers": {**raw["producers"], "threads": 2}})
    many = scenario_from_mapping({**raw, "producers": {**raw["producers"], "threads": 64}})
    assert any("auto_batch with sync sends" in w for w in span.warnings(few))
    assert not any("auto_batch" in w for w in span.warnings(many))
    off = scenario_from_mapping({**raw, "producers": {"client_version": "5.3.3", "threads": 2}})
    assert not any("auto_batch" in w for w in span.warnings(off))
