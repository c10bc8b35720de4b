"""What a broker stores (:mod:`rocketsim.broker.store`): stored records (sizes, topics, queues, delay),
offsets and offset ids, store-file counts, and the broker step (numbering, the results' store columns).

Sizes are checked against ``codec.store_size`` of the StoredMessage the broker's steps build; delay rules
against the conformance vectors (constants.json -> delay). The fast ``store_records``, ``log_records`` and
``with_offsets`` are held to small references written from their definitions (the copies of each stored
attempt, the scalar reference of each record, the pointer rule, the write order and running offsets),
over the shipped scenarios, every message type and client line, several producers, shuffled, repeated
and partial inputs, keys too far apart to pack and random scenarios. The broker step is checked on a
whole local run: offsets dense and in store order, each result pointing at its last stored copy, exact
sizes, decodable ids."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sample_runs import broker_step, message_keys

from rocketsim import engine
from rocketsim.broker import store
from rocketsim.broker.store import (
    ATTEMPT_COLUMNS,
    COPY_COLUMNS,
    HALF_TOPIC,
    LOG_COLUMNS,
    MESSAGE_COLUMNS,
    NOT_STORED_STATUSES,
    RESULT_COLUMNS,
    STORE_COLUMNS,
    STORE_ORDER,
    is_stored_outcome,
    store_hosts,
)
from rocketsim.broker.store.records import count_key_tokens
from rocketsim.client.versions import V4_9_8, V5_3_3
from rocketsim.format import codec
from rocketsim.format.codec import SocketAddress
from rocketsim.format.message import MessageConst, MessageSysFlag, parse_delay_levels
from rocketsim.scenario import Scenario, load_scenario, scenario_from_mapping, workload
from rocketsim.tables import grouping
from rocketsim.tables.schemas import COMMIT_LOG, data_schema

VECTORS = Path(__file__).parent / "data" / "conformance"


def _scenario(version: str, broker: str | None = None) -> Scenario:
    """A small run with every message type; ``broker``: ``cluster.broker_version`` (None: the client's)."""
    return scenario_from_mapping(
        {
            "seed": 5,
            "cluster": {
                "brokers": ["broker-a", "broker-b"],
                **({"broker_version": broker} if broker else {}),
            },
            "producers": {
                "count": 2,
                "client_version": version,
                "retry_another_broker_when_not_store_ok": True,
            },
            "workload": {
                "messages": 1500,
                "rate_per_s": 300.0,
                "delay_levels": [1, 3, 18, 20, 25],
                "message_types": {
                    "normal": 0.5,
                    "ordered": 0.1,
                    "delay": 0.15,
                    "transaction": 0.15,
                    "batch": 0.1,
                },
                "body_size": {
                    "distribution": "lognormal",
                    "median": 3000,
                    "sigma": 1.0,
                    "min": 1,
                    "max": 70000,
                },
                "invalid": {"bad_topic": 0.01, "oversize_body": 0.01},
            },
            "brokers": {"default": {"errors": {"flush_disk_timeout": 0.05, "system_error": 0.01}}},
        }
    )


# (client, broker): each line against its own broker, and each against the other line's broker
VERSION_PAIRS = [("4.9.8", None), ("5.3.3", None), ("4.9.8", "5.3.3"), ("5.3.3", "4.9.8")]


@pytest.fixture(
    scope="module", params=VERSION_PAIRS, ids=[f"client{c}-broker{b or 'default'}" for c, b in VERSION_PAIRS]
)
def records_run(request: pytest.FixtureRequest) -> tuple[Scenario, pa.Table, pa.Table]:
    """(scenario, messages, store records) of a small simulated run with every message type."""
    sc = _scenario(*request.param)
    messages = workload.generate(sc)
    out = engine.simulate(messages, sc)
    records = store.store_records(store.stored_copies(messages, out.attempts, out.results), sc)
    return sc, messages, records


def test_store_sizes_equal_codec_store_size_of_the_stored_message(
    records_run: tuple[Scenario, pa.Table, pa.Table],
) -> None:
    sc, _, records = records_run
    hosts = store.store_hosts(sc.cluster.brokers)
    rows = records.to_pylist()
    assert {r["message_type"] for r in rows} == {"normal", "ordered", "delay", "transaction", "batch"}
    assert any(r["sys_flag"] & MessageSysFlag.COMPRESSED_FLAG for r in rows)  # compressed bodies are stored
    for r in rows:
        # the workload's properties size is what the client would write
        assert (
            codec.properties_size(store.client_properties(r, sc), version=sc.producers.version)
            == r["properties_size"]
        )
        assert store.stored_record_size(r, sc, hosts[0]) == r["store_size"], r
        _, _, props, _ = store.stored_properties(r, sc)
        if r["batch_id"] is None:  # the broker encodes what it stores
            assert codec.properties_size(props, version=sc.broker_version) == r["store_props_size"]


def test_a_normal_record_encodes_to_its_size(records_run: tuple[Scenario, pa.Table, pa.Table]) -> None:
    """Build the bytes once: encode_store of the broker's StoredMessage has exactly store_size bytes.

    The broker writes the properties string with its own release's MessageDecoder (SendMessageProcessor:
    ``string2messageProperties`` of the request's, then ``setPropertiesString(messageProperties2String(
    msgInner.getProperties()))``, 4.9.8 and 5.3.3 alike): its final \\x02 and its HashMap's order, not the
    client's."""
    sc, _, records = records_run
    broker = sc.broker_version
    r = next(r for r in records.to_pylist() if r["message_type"] == "normal")
    topic, queue_id, props, _ = store.stored_properties(r, sc)
    assert ("WAIT" in props) == broker.keeps_wait_in_store  # a 4.9.8 broker leaves WAIT=true out
    assert props["CLUSTER"] == store.CLUSTER_NAME
    # the HashMap order of the broker's release: that of its line's client decoder (the same common module
    # MessageDecoder; the conformance vectors check that order per line)
    same_release = next(v for v in (V4_9_8, V5_3_3) if v.broker == broker)
    assert list(props) == codec.parsed_properties_java_order(props, version=same_release)
    msg = codec.StoredMessage(
        topic=topic,
        body=bytes(r["wire_bytes"] - r["properties_size"]),
        born_host=codec.SocketAddress(bytes([10, 0, 0, r["producer"]]), 50000),
        store_host=store.store_hosts(sc.cluster.brokers)[0],
        properties=props,
        sys_flag=r["sys_flag"],
        queue_id=queue_id,
    )
    data = codec.encode_store(msg, version=broker)
    assert len(data) == r["store_size"]
    written = data[len(data) - r["store_props_size"] :]
    assert written.endswith(b"\x02") == broker.properties_trailing_separator  # whatever the client sent
    assert written == codec.properties_to_bytes(props, version=same_release)
    assert codec.decode_store(data, version=same_release).properties == props


def test_where_each_kind_is_stored(records_run: tuple[Scenario, pa.Table, pa.Table]) -> None:
    sc, _, records = records_run
    table = parse_delay_levels()
    for r in records.to_pylist():
        if r["message_type"] == "delay":
            level = min(r["delay_level"], 18)  # levels above maxDelayLevel are clamped
            assert (r["store_topic"], r["store_queue_id"], r["delay_level_stored"]) == (
                store.SCHEDULE_TOPIC,
                level - 1,
                level,
            )
            assert r["deliver_ts_ms"] == r["stored_ts_ms"] + table.level_to_ms[level]
            assert (r["real_topic"], r["real_queue_id"]) == (r["topic"], r["queue_id"])
        elif r["message_type"] == "transaction":
            assert (r["store_topic"], r["store_queue_id"]) == (store.HALF_TOPIC, 0)
            assert r["store_sys_flag"] & 0xC == MessageSysFlag.TRANSACTION_NOT_TYPE  # reset by the bridge
            assert r["sys_flag"] & 0xC == MessageSysFlag.TRANSACTION_PREPARED_TYPE
            assert (r["real_topic"], r["real_queue_id"], r["deliver_ts_ms"]) == (
                r["topic"],
                r["queue_id"],
                None,
            )
            _, _, props, _ = store.stored_properties(r, sc)
            assert props["TRAN_MSG"] == "true"
            assert ("__transactionId__" in props) == sc.broker_version.stores_half_transaction_id
        else:
            assert (r["store_topic"], r["store_queue_id"]) == (r["topic"], r["queue_id"])
            assert r["real_topic"] is None and r["deliver_ts_ms"] is None
        assert r["index_entries"] == 2  # UNIQ_KEY + one key
        assert r["store_ts_ms"] == r["stored_ts_ms"]  # when the broker stored it (send_attempts)
        if r["outcome"] == "ok":
            assert r["stored_ts_ms"] == r["start_ts_ms"] + r["latency_ms"]


def test_delay_rules_follow_the_conformance_vectors() -> None:
    vectors = json.loads((VECTORS / "constants.json").read_text())["delay"]["broker_put_transform"]
    sc = _scenario("4.9.8")
    store_ts = 1_700_000_000_000
    rows = [
        {
            "producer": 0,
            "topic": v["original_topic"],
            "tags": None,
            "keys": None,
            "uniq_msg_id": "0" * 32,
            "body_size": 10,
            "properties_size": 60,
            "message_type": "delay",
            "delay_level": int(v["input_DELAY_property"]),
            "batch_id": None,
            "wire_bytes": 70,
            "sys_flag": v["sysFlag"],
            "queue_id": v["original_queueId"],
            "start_ts_ms": store_ts,
            "latency_ms": 0,
            "stored_ts_ms": store_ts,
        }
        for v in vectors
    ]
    out = store.store_records(pa.Table.from_pylist(rows), sc).to_pylist()
    checked = 0
    for v, r in zip(vectors, out, strict=True):
        assert (r["deliver_ts_ms"] is not None) == v["delayed"], v
        if v["sysFlag"] & 0xC == MessageSysFlag.TRANSACTION_PREPARED_TYPE:
            assert r["store_topic"] == store.HALF_TOPIC  # a prepared message goes to the half topic first
            continue
        assert (r["store_topic"], r["store_queue_id"]) == (v["stored_topic"], v["stored_queueId"]), v
        if v["delayed"]:
            assert r["delay_level_stored"] == v["effective_level_written_back_to_DELAY"]
            assert (r["real_topic"], str(r["real_queue_id"])) == (v["REAL_TOPIC"], v["REAL_QID"])
            assert r["deliver_ts_ms"] == v["deliver_timestamp_for_storeTimestamp_1700000000000"]
        checked += 1
    assert checked == len(vectors) - 1


def test_offsets_are_dense_and_the_commit_log_is_a_running_sum(
    records_run: tuple[Scenario, pa.Table, pa.Table],
) -> None:
    sc, messages, _ = records_run
    out = engine.simulate(messages, sc)
    log = store.log_records(messages, out.attempts, out.results, sc)
    committed = store.with_offsets(log, sc).to_pandas()
    keys = list(store.STORE_ORDER)
    assert committed[keys].apply(tuple, axis=1).is_monotonic_increasing  # the brokers' write order
    for _, q in committed.groupby(["broker", "store_topic", "store_queue_id"]):
        assert q["queue_offset"].tolist() == list(range(len(q)))  # dense, increasing with store order
    hosts = store.store_hosts(sc.cluster.brokers)
    for name, b in committed.groupby("broker"):
        sizes = b["store_size"].to_numpy(np.int64)
        assert (b["commit_log_offset"].to_numpy() == np.concatenate([[0], np.cumsum(sizes)[:-1]])).all()
        host = hosts[sc.cluster.brokers.index(name)]
        for msg_id, offset in zip(b["offset_msg_id"].head(50), b["commit_log_offset"].head(50), strict=True):
            decoded = codec.decode_message_id(msg_id)
            assert (decoded.ip, decoded.port, decoded.offset) == (host.ip, host.port, offset)
    # the copy a result points at: its last storing attempt, unless the send FAILED
    pointed = committed[committed.is_result].set_index(["producer", "seq"])
    results = out.results.to_pandas().set_index(["producer", "seq"])
    stored = results[~results.status.isin(["FAILED", "REJECTED", "ONEWAY_SENT"])]
    assert stored.index.isin(pointed.index).all() and pointed.index.is_unique
    assert not results[results.status == "FAILED"].index.isin(pointed.index).any()
    last_attempt = committed.groupby(["producer", "seq"]).attempt.max()
    assert (pointed.attempt == last_attempt[pointed.index]).all()


def test_copies_fan_a_batch_out_and_keep_duplicates(records_run: tuple[Scenario, pa.Table, pa.Table]) -> None:
    """A stored batch attempt is one copy per member; a stored not-OK attempt retried elsewhere is a
    copy too."""
    _, _, records = records_run
    df = records.to_pandas()
    batch = df[df.batch_id.notna()]
    assert (batch.groupby(["producer", "batch_id", "attempt"]).send_seq.nunique() == 1).all()
    assert (batch.send_seq <= batch.seq).all() and (batch.send_seq < batch.seq).any()
    per_message = df.groupby(["producer", "seq"]).size()
    assert (per_message > 1).any()  # status:FLUSH_DISK_TIMEOUT, then another broker (retryAnother... = true)


def test_offset_msg_ids_equal_create_message_id() -> None:
    hosts = store.store_hosts([f"b{i}" for i in range(300)])
    assert (hosts[0].ip, hosts[0].port, hosts[299].ip) == (bytes([10, 1, 0, 1]), 10911, bytes([10, 1, 1, 44]))
    rng = np.random.default_rng(1)
    index = rng.integers(0, 300, 5000)
    offsets = np.concatenate([[0, 1, 255, 256, 2**31, 2**63 - 1], rng.integers(0, 2**63 - 1, 4994)])
    ids = store.offset_msg_ids(index, offsets, hosts).to_pylist()
    for i, o, msg_id in zip(index, offsets, ids, strict=True):
        assert msg_id == codec.create_message_id(hosts[i].ip, hosts[i].port, int(o))
    empty = np.zeros(0, np.int64)
    assert store.offset_msg_ids(empty, empty, hosts).to_pylist() == []


def test_store_file_counts() -> None:
    gib = store.COMMIT_LOG_FILE_BYTES
    assert store.commit_log_files(np.array([0, 1, gib, gib + 1])).tolist() == [0, 1, 1, 2]
    assert store.consume_queue_files(np.array([1, 300_000, 300_001])).tolist() == [1, 1, 2]
    assert store.CQ_ENTRY_BYTES * store.CQ_ENTRIES_PER_FILE == 6_000_000  # mappedFileSizeConsumeQueue
    # IndexHeader counts from 1 and a file is full at maxIndexNum (20,000,000): 19,999,999 entries each
    assert store.index_files(np.array([0, 19_999_999, 20_000_000])).tolist() == [1, 1, 2]


def test_index_entries_count_uniq_key_and_each_key() -> None:
    sc = _scenario("4.9.8")
    row = {
        "producer": 0,
        "topic": "T",
        "tags": None,
        "uniq_msg_id": "0" * 32,
        "body_size": 1,
        "properties_size": 50,
        "message_type": "normal",
        "delay_level": 0,
        "batch_id": None,
        "wire_bytes": 51,
        "sys_flag": 0,
        "queue_id": 0,
        "start_ts_ms": 0,
        "latency_ms": 1,
        "stored_ts_ms": 1,
    }
    keys = [None, "", "a", "a b", " a  b ", "k1 k2 k3"]
    out = store.store_records(pa.Table.from_pylist([{**row, "keys": k} for k in keys]), sc)
    assert out.column("index_entries").to_pylist() == [1, 1, 2, 3, 3, 4]  # String.split(" "), empties skipped
    for keys in ([None, "", "a", "k1"], [None, None]):  # no separator at all; no key at all
        out = store.store_records(pa.Table.from_pylist([{**row, "keys": k} for k in keys]), sc)
        assert out.column("index_entries").to_pylist() == [1 if k in (None, "") else 2 for k in keys]


def test_key_tokens_of_slices_and_hidden_bytes_are_counted_as_split_does() -> None:
    """count_key_tokens looks for the separator in the strings' bytes at once: a slice whose separators are
    all outside it, a null row whose slot holds one (Arrow allows it), chunks and no rows count as split."""

    def split_count(k: str | None) -> int:
        return 0 if k is None else len([t for t in k.split(" ") if t])

    keys = pa.array(["a b", "c", "", None, "d  e f", "g"])
    for lo, hi in ((0, 6), (1, 4), (5, 6), (3, 3), (1, 3)):
        got = count_key_tokens(keys.slice(lo, hi - lo))
        assert got.tolist() == [split_count(k) for k in keys.to_pylist()[lo:hi]]
    data = pa.py_buffer(b"x yz")  # row 0 null over "x y", row 1 "z"
    hidden = pa.StringArray.from_buffers(
        2, pa.py_buffer(np.array([0, 3, 4], np.int32)), data, pa.py_buffer(np.array([2], np.uint8))
    )
    assert hidden.to_pylist() == [None, "z"] and count_key_tokens(hidden).tolist() == [0, 1]
    chunked = pa.chunked_array([["p q", "r"], [None, "s"]])
    assert count_key_tokens(chunked).tolist() == [2, 1, 0, 1]


def test_the_broker_checks_properties_as_it_stores_them(
    records_run: tuple[Scenario, pa.Table, pa.Table],
) -> None:
    # one definition: what the broker checks (4.9.8 CommitLog encoder / 5.3.3 MessageExtEncoder.encode:
    # propertiesLength > Short.MAX_VALUE after the delay or half transform) is what it would write
    sc, _, records = records_run
    base, with_qid, chars = store.illegal_properties_parts(records, sc.producers.version, sc.broker_version)
    single = np.asarray(pc.is_null(records.column("batch_id")))
    digits = np.array([len(str(q)) for q in records.column("queue_id").to_pylist()])
    checked = base + np.where(with_qid, digits, 0)
    assert (checked[single] == np.asarray(records.column("store_props_size"))[single]).all()
    assert with_qid[single].any() and not with_qid[~single].any()
    checks_length = sc.broker_version.checks_properties_string_length  # 4.9.8's checkMessage (UTF-16 length)
    assert (chars > 0).any() == checks_length
    if checks_length:  # checkMessage reads the string SendMessageProcessor made and stores
        normal = np.asarray(pc.equal(records.column("message_type"), "normal"))
        assert normal.any() and (chars[normal] == checked[normal]).all()


def _with_broker(sc: Scenario, broker: str) -> Scenario:
    return dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, broker_version=broker))


# What the broker's release changes in a stored record's properties, per kind, from a 4.9.8 broker to a
# 5.3.3 one (the same request): the broker re-encodes the string (SendMessageProcessor.sendMessage /
# asyncSendMessage: messageProperties2String, 5.x keeps the final \x02: +1); a 5.3.3 broker stores WAIT=true
# (4.9.8 removes it, ISSUE 2883: +10 for WAIT\x01true\x02) but the delay and half transforms rebuild the
# string from the whole map (WAIT back in both); 5.3.3 TransactionalMessageBridge.parseHalfMessageInner
# adds __transactionId__ = UNIQ_KEY (+19 + its length); a batch element keeps the client's bytes and its
# separator (CommitLog.MessageExtBatchEncoder.encodeBatch 4.9.8 / MessageExtEncoder.encodeBatch 5.3.3),
# only the batch's own properties string is the broker's (+1).
def _broker_delta(kind: str, uniq_len: int) -> int:
    return {"normal": 11, "ordered": 11, "delay": 1, "transaction": 1 + 19 + uniq_len, "batch": 1}[kind]


@pytest.mark.parametrize("client", ["4.9.8", "5.3.3"])
def test_the_brokers_release_decides_the_stored_record(client: str) -> None:
    """The same stored copies (a client's requests), stored by a 4.9.8 and by a 5.3.3 broker: the record
    sizes differ by what the broker writes, whatever the client; so do the commit-log offsets."""
    sc = _scenario(client)
    messages = workload.generate(sc)
    out = engine.simulate(messages, sc)
    copies = store.stored_copies(messages, out.attempts, out.results)
    old, new = (store.store_records(copies, _with_broker(sc, b)) for b in ("4.9.8", "5.3.3"))
    rows = old.to_pylist()
    assert {r["message_type"] for r in rows} == {"normal", "ordered", "delay", "transaction", "batch"}
    want = np.array([_broker_delta(r["message_type"], len(r["uniq_msg_id"])) for r in rows])
    for name in ("store_props_size", "store_size"):
        assert (np.asarray(new.column(name)) - np.asarray(old.column(name)) == want).all(), name
    for name in ("store_topic", "store_queue_id", "store_sys_flag", "store_body_size", "deliver_ts_ms"):
        assert new.column(name).equals(old.column(name)), name
    # the commit log: running sums of the broker's record sizes
    logs = [
        store.with_offsets(store.log_records(messages, out.attempts, out.results, _with_broker(sc, b)), sc)
        for b in ("4.9.8", "5.3.3")
    ]
    for name in ("producer", "seq", "attempt", "broker"):
        assert logs[0].column(name).equals(logs[1].column(name))
    grew = np.asarray(logs[1].column("store_size")) - np.asarray(logs[0].column("store_size"))
    broker = np.asarray(logs[0].column("broker").to_pylist())
    offset_gap = np.asarray(logs[1].column("commit_log_offset")) - np.asarray(
        logs[0].column("commit_log_offset")
    )
    for b in set(broker.tolist()):
        on = broker == b
        assert (offset_gap[on] == np.cumsum(grew[on]) - grew[on]).all()
        assert (grew[on] > 0).all()


def test_cross_version_sizes_by_hand() -> None:
    """One normal message and one batch element of each client line, stored by the other line's broker."""
    row = {
        "producer": 0,
        "topic": "T",
        "tags": "A",
        "keys": None,
        "uniq_msg_id": "0" * 32,
        "body_size": 10,
        "message_type": "normal",
        "delay_level": 0,
        "batch_id": None,
        "sys_flag": 0,
        "queue_id": 3,
    }
    # 4.9.8 client: WAIT\x01true\x02TAGS\x01A\x02UNIQ_KEY\x01<32>: 10 + 7 + 41 = 58 bytes, no final \x02
    sc = _scenario("4.9.8", "5.3.3")
    assert codec.properties_size(store.client_properties(row, sc), version=sc.producers.version) == 58
    # a 5.3.3 broker: the same entries plus CLUSTER\x01DefaultCluster\x02 (23), with its final \x02
    _, _, props, _ = store.stored_properties(row, sc)
    assert codec.properties_to_bytes(props, version=sc.broker_version).endswith(b"\x02")
    assert codec.properties_size(props, version=sc.broker_version) == 58 + 1 + 23
    # 5.3.3 client (59 bytes, final \x02) to a 4.9.8 broker: WAIT out (-10), CLUSTER in, no final \x02
    sc = _scenario("5.3.3", "4.9.8")
    assert codec.properties_size(store.client_properties(row, sc), version=sc.producers.version) == 59
    _, _, props, _ = store.stored_properties(row, sc)
    assert not codec.properties_to_bytes(props, version=sc.broker_version).endswith(b"\x02")
    assert codec.properties_size(props, version=sc.broker_version) == 59 - 10 + 23 - 1
    # a batch element (encodeBatch): the element's bytes as sent, a separator if they do not end with
    # one, then the batch's own properties as the broker encodes them
    element = {**row, "batch_id": 1}
    sc = _scenario("4.9.8", "5.3.3")  # 58, separator, WAIT\x01true\x02CLUSTER\x01DefaultCluster\x02 (33)
    _, _, items, _ = store.stored_properties(element, sc)
    batch = {"WAIT": "true", "CLUSTER": "DefaultCluster"}  # in the 5.3.3 broker's HashMap(128) order
    assert [k for k, _ in items[3:]] == codec.parsed_properties_java_order(batch, version=V5_3_3)
    table = pa.Table.from_pylist([{**element, "properties_size": 58, "wire_bytes": 0, "stored_ts_ms": 1}])
    assert store.store_records(table, sc).column("store_props_size").to_pylist() == [58 + 1 + 33]
    host = store.store_hosts(sc.cluster.brokers)[0]
    assert (
        store.stored_record_size(table.to_pylist()[0], sc, host)
        == store.store_records(table, sc)["store_size"][0].as_py()
    )
    sc = _scenario("5.3.3", "4.9.8")  # 59 (ends with \x02), WAIT, UNIQ_KEY (42), CLUSTER, no final \x02
    table = pa.Table.from_pylist([{**element, "properties_size": 59, "wire_bytes": 0, "stored_ts_ms": 1}])
    assert store.store_records(table, sc).column("store_props_size").to_pylist() == [59 + 10 + 42 + 22]
    assert (
        store.stored_record_size(table.to_pylist()[0], sc, host)
        == store.store_records(table, sc)["store_size"][0].as_py()
    )


@pytest.mark.parametrize(
    ("client", "props", "legal_on_4_9_8", "legal_on_5_3_3"),
    [("4.9.8", 32754, True, False), ("4.9.8", 32743, True, True), ("5.3.3", 32745, True, False)],
)
def test_the_brokers_release_decides_what_properties_are_too_long(
    client: str, props: int, legal_on_4_9_8: bool, legal_on_5_3_3: bool
) -> None:
    # The broker checks what it would write (4.9.8 DefaultMessageStore.checkMessage and the CommitLog
    # encoder; 5.3.3 MessageExtEncoder.encode: propertiesLength > Short.MAX_VALUE): a 4.9.8 broker stores
    # the client's entries without WAIT (-10) and without a final \x02, a 5.3.3 broker with both, each
    # plus CLUSTER\x01DefaultCluster (23 with its separator). A 4.9.8 client's 32754 bytes: 32767 on a
    # 4.9.8 broker, 32778 on a 5.3.3 one; a 5.3.3 client's 32745 (final \x02 included): 32757 / 32768.
    messages = pa.Table.from_pylist(
        [
            {
                "topic": "T",
                "uniq_msg_id": "0" * 32,
                "properties_size": props,
                "message_type": "normal",
                "delay_level": 0,
                "batch_id": None,
            }
        ],
        schema=pa.schema(
            [
                ("topic", pa.string()),
                ("uniq_msg_id", pa.string()),
                ("properties_size", pa.int32()),
                ("message_type", pa.string()),
                ("delay_level", pa.int32()),
                ("batch_id", pa.int64()),
            ]
        ),
    )
    for broker, legal in (("4.9.8", legal_on_4_9_8), ("5.3.3", legal_on_5_3_3)):
        sc = _scenario(client, broker)
        base, with_qid, chars = store.illegal_properties_parts(
            messages, sc.producers.version, sc.broker_version
        )
        assert store.properties_illegal(int(base[0]), bool(with_qid[0]), int(chars[0]), 3) != legal, broker


def test_properties_over_short_max_are_illegal() -> None:
    assert not store.properties_illegal(32767, False, 0, 0)
    assert store.properties_illegal(32768, False, 0, 0)
    assert not store.properties_illegal(32766, True, 0, 9)  # REAL_QID's value is the queue id's digits
    assert store.properties_illegal(32766, True, 0, 10)
    assert store.properties_illegal(100, False, 32768, 0)  # 4.9.8 DefaultMessageStore.checkMessage


SCENARIOS = sorted((Path(__file__).parent.parent / "conf" / "scenarios").glob("*.toml"))
VERSIONS = ("4.9.7", "4.9.8", "5.3.3")

# ---- references, written from the definitions (plain Python over one run's rows) --------------------


def _copies_reference(messages: pa.Table, attempts: pa.Table, results: pa.Table) -> pa.Table:
    """Every stored copy (:data:`COPY_COLUMNS`): each stored attempt (``stored``) of a send whose message
    has a result that is not REJECTED, once per member of the send: the message itself, or each such
    member of its batch (a batch's attempts carry its leading member's seq, ``send_seq``)."""
    result_of = {
        (r["producer"], r["seq"]): r for r in results.select(["producer", "seq", *RESULT_COLUMNS]).to_pylist()
    }
    sent: dict[tuple[int, int], dict] = {}
    batches: dict[tuple[int, int], list[dict]] = {}
    for m in messages.select(["producer", "seq", *MESSAGE_COLUMNS]).to_pylist():
        r = result_of.get((m["producer"], m["seq"]))
        if r is not None and r["status"] != "REJECTED":
            sent[m["producer"], m["seq"]] = {**m, **r}
            if m["batch_id"] is not None:
                batches.setdefault((m["producer"], m["batch_id"]), []).append(sent[m["producer"], m["seq"]])
    rows = []
    for a in (
        attempts.filter(attempts.column("stored")).select(["producer", "seq", *ATTEMPT_COLUMNS]).to_pylist()
    ):
        lead = sent.get((a["producer"], a["seq"]))
        if lead is None:
            continue
        members = [lead] if lead["batch_id"] is None else batches[lead["producer"], lead["batch_id"]]
        rows += [{**m, **{c: a[c] for c in ATTEMPT_COLUMNS}, "send_seq": a["seq"]} for m in members]
    return pa.Table.from_pylist(rows, schema=COPY_COLUMNS)


def _record_reference(copy: dict, sc: Scenario, host: SocketAddress) -> dict:
    """The store columns of one stored copy from the scalar reference: what the broker writes
    (``store.stored_properties``) and that record's ``codec.store_size`` (``store.stored_record_size``).
    A batch element's properties: the element's bytes as the client encoded them, a separator when they
    do not end with one, the batch's as the broker encodes them (``encodeBatch``)."""
    topic, queue_id, props, delay_ms = store.stored_properties(copy, sc)
    is_batch = copy["batch_id"] is not None
    half, delayed = topic == HALF_TOPIC, delay_ms is not None
    if is_batch:
        n_element = len(store.client_properties(copy, sc))
        element = codec.properties_to_bytes(props[:n_element], version=sc.producers.version)
        batch = codec.properties_to_bytes(props[n_element:], version=sc.broker_version)
        props_size = len(element) + (not element.endswith(b"\x02")) + len(batch)
    else:
        props_size = codec.properties_size(props, version=sc.broker_version)
    flag = copy["sys_flag"]  # a half's transaction bits are reset to NOT_TYPE (TRAN_MSG marks it)
    if half:
        flag = MessageSysFlag.reset_transaction_value(flag, MessageSysFlag.TRANSACTION_NOT_TYPE)
    return {
        "store_ts_ms": copy["stored_ts_ms"],
        "store_topic": topic,
        "store_queue_id": queue_id,
        "store_sys_flag": flag,
        "store_body_size": copy["body_size"] if is_batch else copy["wire_bytes"] - copy["properties_size"],
        "store_props_size": props_size,
        "store_size": store.stored_record_size(copy, sc, host),
        "delay_level_stored": int(props[MessageConst.PROPERTY_DELAY_TIME_LEVEL]) if delayed else None,
        "deliver_ts_ms": copy["stored_ts_ms"] + delay_ms if delayed else None,
        "real_topic": copy["topic"] if half or delayed else None,
        "real_queue_id": copy["queue_id"] if half or delayed else None,
        "index_entries": 1 + len([k for k in (copy["keys"] or "").split(" ") if k]),
    }


def _is_pointable(copy: dict) -> bool:
    """A copy a result can point at: from an answered attempt (ok, status:*), or a oneway's."""
    return copy["outcome"] == "ok" or copy["outcome"].startswith("status:") or copy["status"] == "ONEWAY_SENT"


def _log_reference(messages: pa.Table, attempts: pa.Table, results: pa.Table, sc: Scenario) -> pa.Table:
    """``log_records`` from its definition: every copy (:func:`_copies_reference`) as stored
    (``store_records``, held row by row to :func:`_record_reference`), in (producer, seq, attempt)
    order; ``is_result`` on the last pointable copy of each message whose result is not
    FAILED/REJECTED."""
    order = [(k, "ascending") for k in ("producer", "seq", "attempt")]
    records = store.store_records(_copies_reference(messages, attempts, results), sc).sort_by(order)
    rows = records.to_pylist()
    last = {(r["producer"], r["seq"]): i for i, r in enumerate(rows) if _is_pointable(r)}
    pointed = {i for i in last.values() if rows[i]["status"] not in NOT_STORED_STATUSES}
    renamed = {
        "start_ts_ms": "born_ts_ms",
        "delay_level": "requested_level",
        "delay_level_stored": "delay_level",
    }
    out = [
        {renamed.get(k, k): v for k, v in r.items()} | {"is_result": i in pointed} for i, r in enumerate(rows)
    ]
    return pa.Table.from_pylist(out, schema=LOG_COLUMNS)


def _commit_log_reference(log: pa.Table, sc: Scenario) -> pa.Table:
    """``with_offsets`` from its definition: the records in the brokers' write order (:data:`STORE_ORDER`,
    equal keys in input order), each (broker, store topic, queue) numbered from 0, each record's
    commit-log offset the bytes its broker wrote before it, its id ``createMessageId(store host,
    offset)``."""
    hosts = dict(zip(sc.cluster.brokers, store_hosts(sc.cluster.brokers), strict=True))
    next_offset: dict[tuple, int] = {}
    written: dict[str, int] = {}
    rows = sorted(log.to_pylist(), key=lambda r: tuple(r[k] for k in STORE_ORDER))  # a stable sort
    for r in rows:
        queue = (r["broker"], r["store_topic"], r["store_queue_id"])
        r["queue_offset"] = next_offset.get(queue, 0)
        next_offset[queue] = r["queue_offset"] + 1
        r["commit_log_offset"] = written.get(r["broker"], 0)
        written[r["broker"]] = r["commit_log_offset"] + r["store_size"]
        host = hosts[r["broker"]]
        r["offset_msg_id"] = codec.create_message_id(host.ip, host.port, r["commit_log_offset"])
    return pa.Table.from_pylist(rows, schema=data_schema(COMMIT_LOG))


# ---- runs ----------------------------------------------------------------------------------------

Run = tuple[Scenario, pa.Table, pa.Table, pa.Table]  # scenario, messages, attempts, results


def _mixed(version: str, **workload_: Any) -> Scenario:
    """Every message type, rejected messages, stores that are not OK and retried elsewhere."""
    return scenario_from_mapping(
        {
            "seed": 5,
            "cluster": {"brokers": ["broker-a", "broker-b", "broker-c"]},
            "producers": {
                "count": 3,
                "threads": 2,
                "client_version": version,
                "retry_another_broker_when_not_store_ok": True,
                "send_mode": {"sync": 0.8, "async": 0.1, "oneway": 0.1},
            },
            "workload": {
                "messages": 1500,
                "rate_per_s": 300.0,
                "delay_levels": [1, 3, 18, 20, 25],
                "message_types": {
                    "normal": 0.4,
                    "ordered": 0.1,
                    "delay": 0.15,
                    "transaction": 0.15,
                    "batch": 0.2,
                },
                "batch_size": 4,
                "body_size": {
                    "distribution": "lognormal",
                    "median": 3000,
                    "sigma": 1.0,
                    "min": 1,
                    "max": 70000,
                },
                "invalid": {"bad_topic": 0.02, "oversize_body": 0.01, "empty_body": 0.01},
                **workload_,
            },
            "brokers": {"default": {"errors": {"flush_disk_timeout": 0.05, "system_error": 0.02}}},
        }
    )


def _simulated(sc: Scenario) -> Run:
    messages = workload.generate(sc)
    out = engine.simulate(messages, sc)
    return sc, messages, out.attempts, out.results


_RUNS = {
    **{f"conf:{p.stem}": lambda p=p: load_scenario(p, ["workload.messages=3000"]) for p in SCENARIOS},
    **{f"mixed:{v}": lambda v=v: _mixed(v) for v in VERSIONS},
    "mixed:5.3.3-big-batches": lambda: _mixed("5.3.3", batch_size=16),
    "mixed:4.9.8-no-keys": lambda: _mixed("4.9.8", keys=False),
}


@pytest.fixture(scope="module", params=sorted(_RUNS))
def run(request: pytest.FixtureRequest) -> Run:
    return _simulated(_RUNS[request.param]())


def _producer(table: pa.Table, p: int) -> pa.Table:
    return table.filter(pc.equal(table.column("producer"), p))


def _shuffled(table: pa.Table, seed: int) -> pa.Table:
    return table.take(np.random.default_rng(seed).permutation(table.num_rows))


def _same_log(
    messages: pa.Table, attempts: pa.Table, results: pa.Table, sc: Scenario, fast: bool = True
) -> pa.Table:
    """log_records equals its reference; ``fast``: by index arithmetic, not the joins."""
    assert (store.copy_rows(messages, attempts, results) is not None) == fast
    got = store.log_records(messages, attempts, results, sc)
    assert got.equals(_log_reference(messages, attempts, results, sc), check_metadata=True)
    return got


def _same_offsets(log: pa.Table, sc: Scenario) -> pa.Table:
    got = store.with_offsets(log, sc)
    assert got.equals(_commit_log_reference(log, sc), check_metadata=True)
    return got


# ---- log_records ---------------------------------------------------------------------------------


def test_store_records_follow_the_scalar_reference(run: Run) -> None:
    """The copies are those the definition gives; each one's store columns are those of the record the
    broker writes for it."""
    sc, messages, attempts, results = run
    copies = store.stored_copies(messages, attempts, results)
    order = [(k, "ascending") for k in ("producer", "seq", "attempt")]  # copies come in no set order
    assert copies.sort_by(order).equals(_copies_reference(messages, attempts, results).sort_by(order))
    hosts = dict(zip(sc.cluster.brokers, store_hosts(sc.cluster.brokers), strict=True))
    records = store.store_records(copies, sc).select(STORE_COLUMNS.names)
    for copy, got in zip(copies.to_pylist(), records.to_pylist(), strict=True):
        assert got == _record_reference(copy, sc, hosts[copy["broker"]]), copy


def test_log_records_per_producer_equal_the_reference(run: Run) -> None:
    sc, messages, attempts, results = run
    for p in range(sc.producers.count):
        log = _same_log(_producer(messages, p), _producer(attempts, p), _producer(results, p), sc)
        assert log.num_rows > 0


def test_log_records_of_several_producers_equal_the_reference(run: Run) -> None:
    sc, messages, attempts, results = run
    log = _same_log(messages, attempts, results, sc)
    assert len(set(log.column("producer").to_pylist())) == sc.producers.count


def test_log_records_of_shuffled_and_repeated_inputs(run: Run) -> None:
    """Shuffled inputs give the same log; repeated rows (the joins) give the same records, each message
    still pointed at once."""
    sc, messages, attempts, results = run
    whole = _same_log(_shuffled(messages, 1), _shuffled(attempts, 2), _shuffled(results, 3), sc)

    def records(log: pa.Table) -> set[tuple]:
        return set(
            zip(*(log.column(c).to_pylist() for c in LOG_COLUMNS.names if c != "is_result"), strict=True)
        )

    def pointed(log: pa.Table) -> list[tuple]:
        rows = log.filter(log.column("is_result")).select(["producer", "seq", "attempt"])
        return sorted(zip(*(c.to_pylist() for c in rows.columns), strict=True))

    twice = [pa.concat_tables([t, t]) for t in (messages, attempts, results)]
    for inputs in (twice, [twice[0], attempts, results], [messages, attempts, twice[2]]):
        assert store.copy_rows(*inputs) is None
        log = store.log_records(*inputs, sc)
        assert log.num_rows > whole.num_rows
        assert records(log) == records(whole) and pointed(log) == pointed(whole)


def test_log_records_of_partial_inputs_equal_the_reference(run: Run) -> None:
    sc, messages, attempts, results = run
    rng = np.random.default_rng(4)
    keep = [t.filter(pa.array(rng.random(t.num_rows) < 0.7)) for t in (messages, attempts, results)]
    _same_log(*keep, sc)
    _same_log(messages.slice(0, 0), attempts.slice(0, 0), results.slice(0, 0), sc)
    _same_log(messages, attempts.slice(0, 0), results, sc)


def test_log_records_of_keys_far_apart_equal_the_reference() -> None:
    """(producer, seq) pairs that do not fit one int64 key: the joins."""
    sc, *tables = _simulated(_mixed("5.3.3"))

    def moved(t: pa.Table) -> pa.Table:
        far = pc.multiply(pc.cast(pc.equal(t.column("producer"), 1), pa.int64()), 1 << 62)
        return t.set_column(t.schema.get_field_index("seq"), "seq", pc.add(t.column("seq"), far))

    _same_log(*(moved(t) for t in tables), sc, fast=False)
    _same_log(*(_producer(moved(t), 1) for t in tables), sc)  # one producer: seq alone is the key


def test_a_oneways_result_points_at_its_copy_whatever_its_attempt_heard() -> None:
    """A oneway send waits for no answer: its result points at the copy the broker stored whatever the
    attempt's outcome says (here each stored oneway attempt made a timeout)."""
    sc, messages, attempts, results = _simulated(_mixed("4.9.8"))
    oneway = results.filter(pc.equal(results.column("status"), "ONEWAY_SENT"))
    of_oneway = pc.is_in(message_keys(attempts), value_set=message_keys(oneway))
    heard_nothing = pc.and_(of_oneway, attempts.column("stored"))
    outcome = pc.if_else(heard_nothing, "remoting:timeout", attempts.column("outcome"))
    attempts = _with(attempts, outcome=outcome.combine_chunks())
    assert pc.sum(heard_nothing).as_py() > 0
    log = _same_log(messages, attempts, results, sc)
    copies = log.filter(pc.is_in(message_keys(log), value_set=message_keys(oneway)))
    pointed = copies.filter(copies.column("is_result"))
    assert pointed.num_rows == len(set(message_keys(copies).to_pylist())) > 0  # each oneway with a copy


def test_the_mixed_runs_have_what_the_references_must_cover() -> None:
    sc, messages, attempts, results = _simulated(_mixed("4.9.7"))
    log = store.log_records(messages, attempts, results, sc).to_pandas()
    assert set(log.message_type) == {"normal", "ordered", "delay", "transaction", "batch"}
    assert "REJECTED" in results.column("status").to_pylist()
    assert log.duplicated(["producer", "seq"]).any()  # a not-OK store retried elsewhere
    assert (log.send_seq != log.seq).any()  # batch members
    assert (~log.is_result).any()


# ---- with_offsets --------------------------------------------------------------------------------


def test_with_offsets_equals_the_reference(run: Run) -> None:
    sc, messages, attempts, results = run
    log = store.log_records(messages, attempts, results, sc)
    committed = _same_offsets(log, sc)
    assert committed.num_rows == log.num_rows
    _same_offsets(_shuffled(log, 5), sc)
    per_producer = [
        store.log_records(*(_producer(t, p) for t in run[1:]), sc) for p in range(sc.producers.count)
    ]
    _same_offsets(pa.concat_tables(per_producer), sc)  # chunked, in producer order
    for b in sc.cluster.brokers:  # what the pipeline does: one broker's records of every producer
        _same_offsets(_shuffled(log.filter(pc.equal(log.column("broker"), b)), 6), sc)
    _same_offsets(log.slice(0, 0), sc)
    _same_offsets(LOG_COLUMNS.empty_table(), sc)


def test_numbered_chunks_of_a_log_given_by_a_function_equal_the_whole(run: Run) -> None:
    """A broker task gives its log as a function (its scratch files mapped anew for each part): the parts,
    concatenated, are with_offsets of the whole; a log already in write order is copied, never sliced."""
    sc, messages, attempts, results = run
    log = store.log_records(messages, attempts, results, sc)
    ordered = store.with_offsets(log, sc).select(LOG_COLUMNS.names).cast(LOG_COLUMNS)
    for records in (_shuffled(log, 7), ordered, log.slice(0, 0)):
        calls = []

        def given(records: pa.Table = records, calls: list = calls) -> pa.Table:
            calls.append(1)
            return records

        parts = list(store.numbered_chunks(given, sc, 11))
        want = store.with_offsets(records, sc)
        got = pa.concat_tables([want.schema.empty_table(), *parts])
        assert got.equals(want, check_metadata=True)
        assert len(calls) == 1 + len(parts)  # once for the numbering, once per part
        for part in parts:  # no buffer of the given table kept
            mine = {b.address for c in records.columns for ch in c.chunks for b in ch.buffers() if b}
            kept = {b.address for c in part.columns for ch in c.chunks for b in ch.buffers() if b}
            assert not mine & kept


def _with(log: pa.Table, **columns: Any) -> pa.Table:
    for name, values in columns.items():
        i = log.schema.get_field_index(name)
        log = log.set_column(i, log.field(i), pa.array(values, log.field(i).type))
    return log


def test_with_offsets_of_ties_and_unknown_brokers() -> None:
    sc, messages, attempts, results = _simulated(_mixed("5.3.3"))
    log = store.log_records(messages, attempts, results, sc)
    n = log.num_rows
    _same_offsets(_shuffled(pa.concat_tables([log, log, log]), 7), sc)  # equal rows
    _same_offsets(_shuffled(_with(log, store_ts_ms=np.zeros(n)), 8), sc)
    # different records with equal STORE_ORDER keys keep their input order, in both sorts
    ts = log.column("store_ts_ms").to_numpy() // 5000
    zeros = np.zeros(n, np.int64)
    _same_offsets(_shuffled(_with(log, store_ts_ms=ts, send_seq=zeros, seq=zeros, attempt=zeros), 9), sc)
    far = ts + (log.column("producer").to_numpy() % 2 << 62)  # too far apart to pack: lexsort
    _same_offsets(_shuffled(_with(log, store_ts_ms=far, send_seq=zeros, seq=zeros, attempt=zeros), 10), sc)
    with pytest.raises(ValueError, match="'broker-x' is not in the cluster's brokers"):
        store.with_offsets(_with(log, broker=["broker-x"] * n), sc)


def test_with_offsets_of_far_apart_keys() -> None:
    """Sort keys that do not pack into one int64: lexsort; queue keys: numbered."""
    sc, messages, attempts, results = _simulated(_mixed("4.9.8"))
    log = store.log_records(messages, attempts, results, sc)
    producer1 = log.column("producer").to_numpy() == 1
    for name, shift in (("store_ts_ms", 1 << 62), ("seq", 1 << 62), ("send_seq", -(1 << 62))):
        _same_offsets(_shuffled(_with(log, **{name: log.column(name).to_numpy() + producer1 * shift}), 9), sc)
    rng = np.random.default_rng(3)
    keys = [rng.integers(0, 3, 1000) << 61, rng.integers(0, 3, 1000) << 40, rng.integers(0, 2, 1000)]
    codes = grouping.group_codes(keys)
    same = np.all([k[:, None] == k[None, :] for k in keys], axis=0)
    assert grouping.pack_keys(keys) is None and ((codes[:, None] == codes[None, :]) == same).all()


# ---- random scenarios ----------------------------------------------------------------------------

_types = st.dictionaries(
    st.sampled_from(["normal", "ordered", "delay", "transaction", "batch"]),
    st.floats(0.1, 1.0),
    min_size=1,
)


@st.composite
def _scenarios(draw: st.DrawFn) -> Scenario:
    brokers = [f"broker-{i}" for i in range(draw(st.integers(1, 3)))]
    return scenario_from_mapping(
        {
            "seed": draw(st.integers(0, 2**31)),
            "cluster": {"brokers": brokers, "write_queues": draw(st.integers(1, 4))},
            "producers": {
                "count": draw(st.integers(1, 3)),
                "threads": draw(st.integers(1, 3)),
                "client_version": draw(st.sampled_from(VERSIONS)),
                "retry_another_broker_when_not_store_ok": draw(st.booleans()),
                "send_mode": draw(
                    st.sampled_from([{"sync": 1.0}, {"sync": 0.5, "async": 0.3, "oneway": 0.2}])
                ),
            },
            "workload": {
                "messages": draw(st.integers(0, 300)),
                "rate_per_s": 200.0,
                "keys": draw(st.booleans()),
                "delay_levels": draw(st.lists(st.integers(1, 30), min_size=1, max_size=3)),
                "message_types": draw(_types),
                "batch_size": draw(st.integers(1, 6)),
                "invalid": draw(
                    st.sampled_from([{}, {"bad_topic": 0.05}, {"oversize_body": 0.05, "empty_body": 0.05}])
                ),
            },
            "brokers": {
                "default": {
                    "errors": draw(
                        st.sampled_from(
                            [
                                {},
                                {"flush_disk_timeout": 0.1},
                                {"system_error": 0.05, "slave_not_available": 0.1},
                            ]
                        )
                    )
                }
            },
        }
    )


@settings(max_examples=20, deadline=None)
@given(_scenarios(), st.integers(0, 2**32 - 1))
def test_random_scenarios_equal_the_references(sc: Scenario, seed: int) -> None:
    _, messages, attempts, results = _simulated(sc)
    for p in range(sc.producers.count):
        _same_log(_producer(messages, p), _producer(attempts, p), _producer(results, p), sc)
    log = _same_log(messages, attempts, results, sc)
    _same_offsets(_shuffled(log, seed), sc)


# ---- the broker step on a whole run --------------------------------------------------------------

BROKER_STEP = {
    "name": "broker-side",
    "seed": 8,
    "cluster": {"brokers": ["broker-a", "broker-b"], "write_queues": 4, "read_queues": 3},
    "producers": {
        "count": 2,
        "threads": 2,
        "client_version": "4.9.8",
        "retry_another_broker_when_not_store_ok": True,
        "send_mode": {"sync": 0.8, "async": 0.1, "oneway": 0.1},
    },
    "workload": {
        "messages": 1500,
        "rate_per_s": 20.0,  # 75 s
        "delay_levels": [2, 20],
        "message_types": {"normal": 0.5, "ordered": 0.1, "delay": 0.1, "transaction": 0.2, "batch": 0.1},
        "invalid": {"bad_topic": 0.01},
    },
    "brokers": {"default": {"errors": {"flush_disk_timeout": 0.03, "system_error": 0.01}}},
}


@pytest.fixture(scope="module")
def step_run() -> tuple[Scenario, pa.Table, pa.Table, pd.DataFrame, pd.DataFrame]:
    """(scenario, messages, attempts, commit log, results with their store columns) of a local run: every
    producer's records (store.log_records), then store.number_broker once per broker."""
    sc = scenario_from_mapping(BROKER_STEP)
    messages = workload.generate(sc)
    out = engine.simulate(messages, sc)
    committed, completed = broker_step(messages, out.attempts, out.results, sc)
    assert completed.num_rows == messages.num_rows
    return sc, messages, out.attempts, committed.to_pandas(), completed.to_pandas()


def _broker_records_and_results(step_run: tuple, broker: str) -> tuple[pa.Table, pa.Table]:
    """The step run's records of one broker (in (producer, seq, attempt) order) and the results that
    point at them (in (producer, seq) order), as a broker task gets them."""
    sc, messages, attempts, _, _ = step_run
    out = engine.simulate(messages, sc)
    log = store.log_records(messages, attempts, out.results, sc)
    mine = log.filter(pc.equal(log.column("broker"), broker))
    pointed = message_keys(mine.filter(mine.column("is_result")))
    return mine, out.results.filter(pc.is_in(message_keys(out.results), value_set=pointed))


def test_pointed_records_fed_in_parts_complete_results_as_the_whole(step_run: tuple) -> None:
    """A broker task keeps the records results point at a numbered part at a time and completes its
    results a part at a time, in any order: each result gets the columns of the record it points at
    (the record with is_result, MessageDecoder.createMessageId of its store host and offset)."""
    sc, _, _, committed, _ = step_run
    b = sc.cluster.brokers[0]
    mine, own = _broker_records_and_results(step_run, b)
    pointed = store.PointedRecords(sc.cluster.brokers)
    for part in store.numbered_chunks(mine, sc, 7):
        pointed.add(part)
    assert pointed.rows == own.num_rows
    parts = [pointed.attach(own.slice(at, 5)) for at in reversed(range(0, own.num_rows, 5))]
    got = pa.concat_tables(parts).sort_by([("producer", "ascending"), ("seq", "ascending")])
    whole = store.attach_store_columns(own, store.with_offsets(mine, sc), sc)
    assert got.equals(whole)
    want = committed[committed.is_result & committed.broker.eq(b)][
        ["producer", "seq", *store.RESULT_STORE_COLUMNS]
    ]
    merged = got.to_pandas().merge(want, on=["producer", "seq"], suffixes=("", "_o"))
    assert len(merged) == got.num_rows
    for c in store.RESULT_STORE_COLUMNS:
        assert merged[c].equals(merged[f"{c}_o"]), c
    with pytest.raises(ValueError):
        pointed.add(mine.slice(0, 0))
    empty = store.PointedRecords(sc.cluster.brokers)
    assert empty.attach(own.slice(0, 0)).num_rows == 0
    with pytest.raises(AssertionError, match="do not pair up"):
        empty.attach(own.slice(0, 1))


def test_broker_step_offsets_are_dense_and_follow_store_order(step_run: tuple) -> None:
    _, _, _, committed, _ = step_run
    assert committed.duplicated(["producer", "seq"]).any()  # a not-OK store retried elsewhere: two copies
    assert (committed.offset_msg_id.str.len() == 32).all()
    assert committed.store_ts_ms.max() > 7 * 10_000  # the records span several minutes of store time
    for _, q in committed.groupby(["broker", "store_topic", "store_queue_id"]):
        assert q.queue_offset.tolist() == list(range(len(q)))
        assert q.store_ts_ms.is_monotonic_increasing
    for _, b in committed.groupby("broker"):
        sizes = b.store_size.to_numpy(np.int64)
        assert b.commit_log_offset.tolist() == np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()


def test_broker_step_results_point_at_their_last_stored_copy(step_run: tuple) -> None:
    _, _, attempts, committed, results = step_run
    outcome = attempts.select(["producer", "seq", "attempt", "outcome"]).to_pandas()
    outcome = outcome.rename(columns={"seq": "send_seq"})
    with_outcome = committed.merge(outcome, on=["producer", "send_seq", "attempt"], how="left")
    status = with_outcome.merge(results[["producer", "seq", "status"]], on=["producer", "seq"]).status
    answered = with_outcome.outcome.eq("ok") | with_outcome.outcome.str.startswith("status:")
    pointable = with_outcome[(answered | status.eq("ONEWAY_SENT")).to_numpy()]
    last = pointable.sort_values("attempt").groupby(["producer", "seq"]).tail(1)
    cols = ["store_ts_ms", "store_topic", "store_queue_id", "queue_offset", "commit_log_offset", "store_size"]
    merged = results.merge(
        last[["producer", "seq", *cols]], on=["producer", "seq"], suffixes=("", "_o"), how="left"
    )
    stored = ~merged.status.isin(["FAILED", "REJECTED"])
    for c in cols:  # NaN on both sides: a oneway whose attempt the broker did not store
        a, b = merged.loc[stored, c], merged.loc[stored, f"{c}_o"]
        assert a.isna().tolist() == b.isna().tolist() and a[a.notna()].tolist() == b[a.notna()].tolist(), c
        assert merged.loc[~stored, c].isna().all(), c
    # a oneway result may point at nothing: the broker failed while the client saw success
    answered = results[~results.status.isin(["FAILED", "REJECTED", "ONEWAY_SENT"])]
    assert answered.queue_offset.notna().all()
    assert results.queue_offset.notna().sum() > 1000


def test_broker_step_store_sizes_are_exact_for_a_sample(step_run: tuple) -> None:
    sc, messages, _, _, results = step_run
    rows = results[results.queue_offset.notna()].merge(
        messages.to_pandas().drop(columns=["send_mode", "born_ts_ms", "uniq_msg_id"]), on=["producer", "seq"]
    )
    sample = pd.concat([g.head(8) for _, g in rows.groupby("message_type")])
    hosts = store.store_hosts(sc.cluster.brokers)
    for r in sample.to_dict("records"):
        r["batch_id"] = None if pd.isna(r["batch_id"]) else int(r["batch_id"])
        r["queue_id"] = int(r["queue_id"])
        host = hosts[sc.cluster.brokers.index(r["broker"])]
        assert store.stored_record_size(r, sc, host) == r["store_size"], r["message_type"]


def test_broker_step_offset_msg_ids_decode_to_store_host_and_offset(step_run: tuple) -> None:
    sc, _, _, _, results = step_run
    stored = results[results.offset_msg_id.notna()]
    hosts = dict(zip(sc.cluster.brokers, store.store_hosts(sc.cluster.brokers), strict=True))
    assert {h.ip for h in hosts.values()} == {bytes([10, 1, 0, 1]), bytes([10, 1, 0, 2])}
    for msg_id, b, offset in zip(stored.offset_msg_id, stored.broker, stored.commit_log_offset, strict=True):
        decoded = codec.decode_message_id(msg_id)
        assert (decoded.ip, decoded.port, decoded.offset) == (hosts[b].ip, 10911, int(offset))


def test_broker_step_delay_messages_wait_in_the_schedule_topic(step_run: tuple) -> None:
    _, messages, _, _, results = step_run
    kinds = messages.select(["producer", "seq", "message_type", "delay_level"]).to_pandas()
    rows = results[results.queue_offset.notna()].merge(kinds, on=["producer", "seq"])
    delay = rows[rows.message_type == "delay"]
    assert set(delay.delay_level) == {2, 20}
    level = delay.delay_level.clip(upper=18)  # 20 is clamped to maxDelayLevel
    table = parse_delay_levels()
    assert (delay.store_topic == store.SCHEDULE_TOPIC).all()
    assert (delay.store_queue_id == level - 1).all()
    assert (delay.deliver_ts_ms == delay.store_ts_ms + level.map(table.level_to_ms)).all()
    assert rows[rows.message_type != "delay"].deliver_ts_ms.isna().all()


def test_pointed_offsets_complete_results_as_the_whole_keeping_a_few_ints_a_result(step_run: tuple) -> None:
    """A broker task pairs its results with the records they point at by place (both come in (producer,
    seq) order): fed the numbered parts, PointedOffsets completes the results a part at a time, in any
    order of parts, as attach_store_columns does the whole, and refuses results that do not pair up."""
    sc = step_run[0]
    mine, own = _broker_records_and_results(step_run, sc.cluster.brokers[1])
    pointed = store.PointedOffsets(mine, sc.cluster.brokers)
    assert pointed.results == own.num_rows > 10
    with pytest.raises(ValueError, match="before every record was numbered"):
        pointed.attach(own.slice(0, 1), np.arange(1))
    for part, rows in store.numbered_parts(mine, sc, 7):
        pointed.add(part, rows)
    starts = list(reversed(range(0, own.num_rows, 5)))
    parts = [pointed.attach(own.slice(at, 5), np.arange(at, min(at + 5, own.num_rows))) for at in starts]
    got = pa.concat_tables(parts).sort_by([("producer", "ascending"), ("seq", "ascending")])
    assert got.equals(store.attach_store_columns(own, store.with_offsets(mine, sc), sc))
    # what it keeps: the rows no result points at (copies of timed-out requests stored again) and two
    # offsets a result
    assert len(pointed.unpointed) == mine.num_rows - own.num_rows
    assert set(pointed.offsets) == {"queue_offset", "commit_log_offset"}
    with pytest.raises(AssertionError, match="do not pair up"):
        pointed.attach(own.slice(1, 3), np.arange(3))
    # with records no result points at between the others (a timed-out request a retry stored again)
    stored = _with_unpointed_copies(mine, np.arange(0, mine.num_rows, 3))
    pointed = store.PointedOffsets(stored, sc.cluster.brokers)
    assert len(pointed.unpointed) >= len(range(0, mine.num_rows, 3)) and pointed.results == own.num_rows
    for part, rows in store.numbered_parts(stored, sc, 7):
        pointed.add(part, rows)
    got = pointed.attach(own, np.arange(own.num_rows))
    assert got.equals(store.attach_store_columns(own, store.with_offsets(stored, sc), sc))


def _with_unpointed_copies(log: pa.Table, rows: np.ndarray) -> pa.Table:
    """``log`` with a copy of each of its rows ``rows`` right after it, pointed at by no result."""
    every = np.concatenate([np.arange(log.num_rows), rows])
    order = np.argsort(np.concatenate([np.arange(log.num_rows), rows + 0.5]), kind="stable")
    pointed = np.concatenate([log["is_result"].to_numpy(zero_copy_only=False), np.zeros(len(rows), bool)])
    out = log.take(pa.array(every[order]))
    at = out.schema.get_field_index("is_result")
    return out.set_column(at, out.schema.field("is_result"), pa.array(pointed[order]))


def test_broker_step_refuses_results_and_records_that_do_not_pair_up(step_run: tuple) -> None:
    sc, messages, attempts, _, _ = step_run
    out = engine.simulate(messages, sc)
    numbered = store.with_offsets(store.log_records(messages, attempts, out.results, sc), sc)
    own = pc.is_in(message_keys(out.results), value_set=message_keys(numbered.filter(numbered["is_result"])))
    results = out.results.filter(own)
    assert store.attach_store_columns(results, numbered, sc).num_rows == results.num_rows
    with pytest.raises(AssertionError, match="do not pair up"):
        store.attach_store_columns(results.slice(1), numbered, sc)
    assert store.RESULT_STORE_COLUMNS == (
        "store_ts_ms",
        "store_topic",
        "store_queue_id",
        "queue_offset",
        "commit_log_offset",
        "store_size",
        "offset_msg_id",
        "deliver_ts_ms",
    )


def test_key_positions_are_the_binary_searches() -> None:
    """``key_positions`` (subtraction where the wanted keys have no gap) gives ``np.searchsorted``'s
    positions: keys inside, before and after the wanted ones, wanted keys with a gap, none."""
    from rocketsim.broker.store.copies import key_positions

    wanted = (np.int64(3) << 40) + np.arange(1000, 1200, dtype=np.int64)
    keys = np.concatenate([[wanted[0] - 5, wanted[0] - 1], wanted[::3], [wanted[-1] + 1, wanted[-1] + 9]])
    other = (np.int64(2) << 40) + np.arange(5, dtype=np.int64)  # another producer's keys
    for w in (wanted, np.delete(wanted, 7), wanted[:1], wanted[:0]):
        for k in (keys, other, np.sort(np.concatenate([keys, other])), keys[:0]):
            assert np.array_equal(key_positions(w, k), np.searchsorted(w, k))


def test_pointed_brokers_tag_records_and_results(step_run: tuple) -> None:
    sc, messages, attempts, _, _ = step_run
    one = messages.filter(pc.equal(messages.column("producer"), 1))
    out = engine.simulate(one, sc)
    log = store.log_records(one, out.attempts, out.results, sc)
    log_broker, result_broker = store.pointed_brokers(out.results, log, sc.cluster.brokers)
    brokers = np.array(sc.cluster.brokers)
    assert (brokers[log_broker] == np.array(log.column("broker").to_pylist())).all()
    statuses = np.array(out.results.column("status").to_pylist())
    assert (result_broker[np.isin(statuses, ["FAILED", "REJECTED"])] == -1).all()
    assert (result_broker >= 0).sum() == pc.sum(log.column("is_result")).as_py() > 0
    with pytest.raises(AssertionError, match=r"\(producer, seq\) order"):
        store.pointed_brokers(
            out.results.take(pa.array(range(out.results.num_rows - 1, -1, -1))), log, brokers
        )
    # whole producers one after another (a producer task's gathered small producers): each one's tags
    two = messages.filter(pc.is_in(messages.column("producer"), pa.array([0, 1], pa.int32())))
    both = engine.simulate(two, sc)
    both_log = store.log_records(two, both.attempts, both.results, sc)
    _, both_results = store.pointed_brokers(both.results, both_log, sc.cluster.brokers)
    first = both.results.num_rows - out.results.num_rows  # producer 0's, then producer 1's
    assert both_results[first:].tolist() == result_broker.tolist()
    assert (both_results[:first] >= 0).sum() > 0


def test_broker_indexes_refuse_unknown_brokers() -> None:
    assert store.broker_indexes(pa.array(["b", "a", "b"]), ("a", "b")).tolist() == [1, 0, 1]
    with pytest.raises(ValueError, match=r"'z' is not in the cluster's brokers \['a', 'b'\]"):
        store.broker_indexes(pa.array(["a", "z"]), ("a", "b"))


@pytest.mark.parametrize(("version", "level", "digits"), [("4.9.8", 100, 3), ("5.3.3", 2147483647, 10)])
def test_delay_levels_above_the_maximum_are_stored_clamped_to_18(
    version: str, level: int, digits: int
) -> None:
    # The client sends DELAY=String.valueOf(level) unbounded (Message.setDelayTimeLevel); the broker clamps
    # (4.9.8 CommitLog.asyncPutMessage, 5.3.3 HookUtils.transformDelayLevelMessage: level > maxDelayLevel ->
    # setDelayTimeLevel(maxDelayLevel)), writes DELAY=18 back and stores in SCHEDULE_TOPIC_XXXX queue 17.
    sc = scenario_from_mapping(
        {
            "seed": 3,
            "producers": {"count": 1, "client_version": version},
            "workload": {"messages": 40, "message_types": {"delay": 1.0}, "delay_levels": [level]},
        }
    )
    messages = workload.generate(sc)
    out = engine.simulate(messages, sc)
    records = store.store_records(store.stored_copies(messages, out.attempts, out.results), sc)
    hosts = store.store_hosts(sc.cluster.brokers)
    rows = records.to_pylist()
    assert rows and all(r["delay_level"] == level for r in rows)
    v, broker = sc.producers.version, sc.broker_version
    for r in rows:
        assert (r["store_topic"], r["store_queue_id"], r["delay_level_stored"]) == (
            store.SCHEDULE_TOPIC,
            17,
            18,
        )
        _, _, props, _ = store.stored_properties(r, sc)
        assert props["DELAY"] == "18"
        assert codec.properties_size(props, version=broker) == r["store_props_size"]
        assert store.stored_record_size(r, sc, hosts[0]) == r["store_size"]
        # the written-back DELAY is digits - 2 bytes shorter than the one the client sent
        client = store.client_properties(r, sc)
        assert client["DELAY"] == str(level)
        shorter = codec.properties_size(client, version=v) - codec.properties_size(
            {**client, "DELAY": "18"}, version=v
        )
        assert shorter == digits - 2


# ---- timed-out requests the broker stored anyway: duplicates, lost and failed-but-stored messages -------


def _slow_a(
    version: str, message_types: dict[str, float] | None = None, **producers: object
) -> tuple[Scenario, pa.Table, engine.SimOutput]:
    """broker-a answers after 1.5 s, broker-b after 2 ms; one producer, 40 messages a second apart."""
    sc = scenario_from_mapping(
        {
            "cluster": {"brokers": ["broker-a", "broker-b"]},
            "producers": {"count": 1, "client_version": version, **producers},
            "workload": {"messages": 40, "rate_per_s": 1.0, "message_types": message_types or {"normal": 1}},
            "brokers": {
                "default": {"latency": {"median_ms": 2.0, "sigma": 0.0, "spike_probability": 0.0}},
                "broker-a": {"latency": {"median_ms": 1500.0, "sigma": 0.0, "spike_probability": 0.0}},
            },
        }
    )
    messages = workload.generate(sc)
    return sc, messages, engine.simulate(messages, sc)


def test_timeout_then_retry_makes_a_duplicate() -> None:
    # Upstream (5.3.3): sendDefaultImpl caps every attempt but the last at sendMsgMaxTimeoutPerRequest
    # (1000 here) and retries after the RemotingTimeoutException; the broker never learns that the client
    # gave up: SendMessageProcessor stores the request when it gets to it (nothing deduplicates by
    # UNIQ_KEY), and MessageClientIDSetter.setUniqID sets the id once, so the retry stores a second copy
    # of the same message.
    sc, messages, out = _slow_a("5.3.3", send_msg_max_timeout_per_request_ms=1000)
    att = out.attempts.to_pandas()
    slow = att[att.broker == "broker-a"]
    assert len(slow) > 0 and (slow.outcome == "remoting:timeout").all() and slow.stored.all()
    assert (slow.latency_ms == 1001).all() and (slow.stored_ts_ms == slow.start_ts_ms + 1500).all()
    copies = store.stored_copy_counts(messages, out.attempts, out.results).to_pandas()
    twice = copies[copies.copies == 2]
    assert set(twice.seq) == set(slow.seq) and (twice.status == "SEND_OK").all()
    res = out.results.to_pandas().set_index("seq")
    assert (res.loc[twice.seq, "broker"] == "broker-b").all()
    both = store.stored_copies(messages, out.attempts, out.results).to_pandas()
    both = both[both.seq.isin(twice.seq)]
    assert (both.groupby("seq").uniq_msg_id.nunique() == 1).all()  # the same UNIQ_KEY twice
    assert set(both.groupby("seq").broker.apply(lambda b: tuple(sorted(b)))) == {("broker-a", "broker-b")}
    log = store.log_records(messages, out.attempts, out.results, sc).to_pandas()
    dup = log[log.seq.isin(twice.seq)]
    assert (dup[dup.is_result].attempt == 1).all() and dup.groupby("seq").is_result.sum().eq(1).all()
    assert store.delivery_counts(store.stored_copy_counts(messages, out.attempts, out.results)) == {
        "duplicates": len(twice),
        "lost": 0,
        "failed_but_stored": 0,
    }


def test_timed_out_request_the_broker_stored_is_failed_but_stored() -> None:
    # Upstream (4.9.8): a SYNC timeout costs the whole budget (sendDefaultImpl: `if (timeout < costTime)
    # { callTimeout = true; break; }`): RemotingTooMuchRequestException, but the broker stored it.
    sc, messages, out = _slow_a("4.9.8", send_msg_timeout_ms=1000)
    counts = store.stored_copy_counts(messages, out.attempts, out.results).to_pandas()
    res = out.results.to_pandas()
    failed = res[res.status == "FAILED"]
    assert (
        len(failed) > 0
        and (failed.error == "RemotingTooMuchRequestException: sendDefaultImpl call timeout").all()
    )
    assert (counts.set_index("seq").loc[failed.seq, "copies"] == 1).all()
    assert store.delivery_counts(store.stored_copy_counts(messages, out.attempts, out.results))[
        "failed_but_stored"
    ] == len(failed)


def test_oneway_to_a_hung_broker_is_lost() -> None:
    # Upstream: invokeOnewayImpl writes and forgets (writeAndFlush with a listener that only logs); the
    # caller gets ONEWAY_SENT; a hung broker (model choice) never processes what it accepted: lost.
    sc = scenario_from_mapping(
        {
            "cluster": {"brokers": ["broker-a"]},
            "producers": {"count": 1, "send_mode": {"oneway": 1.0}},
            "workload": {"messages": 30, "rate_per_s": 1.0},
            "faults": [{"broker": "broker-a", "kind": "hang", "start_s": 0, "end_s": 1000}],
        }
    )
    messages = workload.generate(sc)
    out = engine.simulate(messages, sc)
    assert set(out.results.column("status").to_pylist()) == {"ONEWAY_SENT"}
    assert not any(out.attempts.column("stored").to_pylist())
    counts = store.stored_copy_counts(messages, out.attempts, out.results)
    assert store.delivery_counts(counts) == {"duplicates": 0, "lost": 30, "failed_but_stored": 0}
    assert store.log_records(messages, out.attempts, out.results, sc).num_rows == 0


def test_is_stored_outcome_reads_the_stored_column() -> None:
    attempts = pa.table(
        {
            "outcome": [
                "ok",
                "remoting:timeout",
                "remoting:timeout",
                "broker:2",
                "status:FLUSH_DISK_TIMEOUT",
            ],
            "stored": [True, True, False, False, True],
        }
    )
    assert is_stored_outcome(attempts).to_pylist() == [True, True, False, False, True]
    assert store.is_answered_outcome(attempts.column("outcome")).to_pylist() == [
        True,
        False,
        False,
        False,
        True,
    ]


def test_a_stored_timed_out_half_is_a_record_no_result_points_at() -> None:
    # Upstream: a transactional half whose send timed out but was stored stays prepared; endTransaction
    # (DefaultMQProducerImpl) addresses only the half its SendResult names (decodeMessageId of its
    # offsetMsgId). The extra half is in the commit log; no send_results row points at it.
    sc, messages, out = _slow_a(
        "5.3.3", send_msg_max_timeout_per_request_ms=1000, message_types={"transaction": 1.0}
    )
    log = store.log_records(messages, out.attempts, out.results, sc).to_pandas()
    halves = log[log.store_topic == store.HALF_TOPIC]
    extra = halves[~halves.is_result]
    assert len(extra) > 0 and extra.seq.isin(halves[halves.is_result].seq).all()


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_result_copies_count_the_stored_copies_of_each_message(version: str) -> None:
    # one definition, checked against the other form: result_copies (per result row, by index) equals the
    # rows stored_copies makes per message, batches (a copy per member per stored attempt of the batch's
    # send) and duplicates (timed-out requests broker-a stored anyway) included
    sc, messages, out = _slow_a(
        version,
        {"normal": 0.6, "batch": 0.4},
        send_msg_max_timeout_per_request_ms=1000 if version == "5.3.3" else -1,
        retry_times_when_send_failed=2,
    )
    copies = store.result_copies(messages, out.attempts, out.results)
    # both forms: by index (copy_rows) and by joins (what repeated keys fall back to)
    assert copies.tolist() == store.result_copies_by_joins(messages, out.attempts, out.results).tolist()
    rows = store.stored_copies(messages, out.attempts, out.results).to_pandas()
    per_message = rows.groupby(["producer", "seq"]).size()
    res = out.results.to_pandas()
    want = [per_message.get((p, s), 0) for p, s in zip(res.producer, res.seq, strict=True)]
    assert copies.tolist() == want
    assert pc.is_valid(messages.column("batch_id")).to_pylist().count(True) > 0
    assert sum(want) == len(rows)
    # 5.3.3 caps the attempts to broker-a at 1000 ms and retries: a second copy; 4.9.8 waits 3000 ms
    assert max(want) == (2 if version == "5.3.3" else 1)
