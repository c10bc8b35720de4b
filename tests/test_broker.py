"""The broker side in the core: stored records (sizes, topics, queues, delay), offsets and offset ids,
store-file counts. Sizes are checked against ``codec.store_size`` of the StoredMessage the broker's
steps build; delay rules against the conformance vectors (constants.json -> delay)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from rocketsim import broker, codec, simulate, workload
from rocketsim.message import MessageSysFlag, parse_delay_levels
from rocketsim.scenario import Scenario, scenario_from_mapping

VECTORS = Path(__file__).parent / "data" / "conformance"


def _scenario(version: str) -> Scenario:
    return scenario_from_mapping(
        {
            "seed": 5,
            "cluster": {"brokers": ["broker-a", "broker-b"]},
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


@pytest.fixture(scope="module", params=["4.9.8", "5.3.3"])
def run(request: pytest.FixtureRequest) -> tuple[Scenario, pa.Table, pa.Table]:
    """(scenario, messages, store records) of a small simulated run with every message type."""
    sc = _scenario(request.param)
    messages = workload.generate(sc)
    out = simulate.simulate(messages, sc)
    records = broker.store_records(broker.stored_copies(messages, out.attempts, out.results), sc)
    return sc, messages, records


def test_store_sizes_equal_codec_store_size_of_the_stored_message(
    run: tuple[Scenario, pa.Table, pa.Table],
) -> None:
    sc, _, records = run
    hosts = broker.store_hosts(sc.cluster.brokers)
    rows = records.to_pylist()
    assert {r["message_type"] for r in rows} == {"normal", "ordered", "delay", "transaction", "batch"}
    assert any(r["sys_flag"] & MessageSysFlag.COMPRESSED_FLAG for r in rows)  # compressed bodies are stored
    for r in rows:
        # the workload's properties size is what the client would write
        assert (
            codec.properties_size(broker.client_properties(r, sc), version=sc.producers.version)
            == r["properties_size"]
        )
        assert broker.stored_record_size(r, sc, hosts[0]) == r["store_size"], r
        _, _, props, _ = broker.stored_properties(r, sc)
        if r["batch_id"] is None:
            assert codec.properties_size(props, version=sc.producers.version) == r["store_props_size"]


def test_a_normal_record_encodes_to_its_size(run: tuple[Scenario, pa.Table, pa.Table]) -> None:
    """Build the bytes once: encode_store of the broker's StoredMessage has exactly store_size bytes."""
    sc, _, records = run
    r = next(r for r in records.to_pylist() if r["message_type"] == "normal")
    topic, queue_id, props, _ = broker.stored_properties(r, sc)
    assert ("WAIT" in props) == sc.producers.version.is_5  # a 4.9.8 broker leaves WAIT=true out
    assert props["CLUSTER"] == broker.CLUSTER_NAME
    msg = codec.StoredMessage(
        topic=topic,
        body=bytes(r["wire_bytes"] - r["properties_size"]),
        born_host=codec.SocketAddress(bytes([10, 0, 0, r["producer"]]), 50000),
        store_host=broker.store_hosts(sc.cluster.brokers)[0],
        properties=props,
        sys_flag=r["sys_flag"],
        queue_id=queue_id,
    )
    data = codec.encode_store(msg, version=sc.producers.version)
    assert len(data) == r["store_size"]
    assert codec.decode_store(data, version=sc.producers.version).properties == props


def test_where_each_kind_is_stored(run: tuple[Scenario, pa.Table, pa.Table]) -> None:
    sc, _, records = run
    table = parse_delay_levels()
    for r in records.to_pylist():
        if r["message_type"] == "delay":
            level = min(r["delay_level"], 18)  # levels above maxDelayLevel are clamped
            assert (r["store_topic"], r["store_queue_id"], r["delay_level_stored"]) == (
                broker.SCHEDULE_TOPIC,
                level - 1,
                level,
            )
            assert r["deliver_ts_ms"] == r["start_ts_ms"] + r["latency_ms"] + table.level_to_ms[level]
            assert (r["real_topic"], r["real_queue_id"]) == (r["topic"], r["queue_id"])
        elif r["message_type"] == "transaction":
            assert (r["store_topic"], r["store_queue_id"]) == (broker.HALF_TOPIC, 0)
            assert r["store_sys_flag"] & 0xC == MessageSysFlag.TRANSACTION_NOT_TYPE  # reset by the bridge
            assert r["sys_flag"] & 0xC == MessageSysFlag.TRANSACTION_PREPARED_TYPE
            assert (r["real_topic"], r["real_queue_id"], r["deliver_ts_ms"]) == (
                r["topic"],
                r["queue_id"],
                None,
            )
            _, _, props, _ = broker.stored_properties(r, sc)
            assert props["TRAN_MSG"] == "true" and ("__transactionId__" in props) == sc.producers.version.is_5
        else:
            assert (r["store_topic"], r["store_queue_id"]) == (r["topic"], r["queue_id"])
            assert r["real_topic"] is None and r["deliver_ts_ms"] is None
        assert r["index_entries"] == 2  # UNIQ_KEY + one key
        assert r["store_ts_ms"] == r["start_ts_ms"] + r["latency_ms"]


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
        }
        for v in vectors
    ]
    out = broker.store_records(pa.Table.from_pylist(rows), sc).to_pylist()
    checked = 0
    for v, r in zip(vectors, out, strict=True):
        assert (r["deliver_ts_ms"] is not None) == v["delayed"], v
        if v["sysFlag"] & 0xC == MessageSysFlag.TRANSACTION_PREPARED_TYPE:
            assert r["store_topic"] == broker.HALF_TOPIC  # a prepared message goes to the half topic first
            continue
        assert (r["store_topic"], r["store_queue_id"]) == (v["stored_topic"], v["stored_queueId"]), v
        if v["delayed"]:
            assert r["delay_level_stored"] == v["effective_level_written_back_to_DELAY"]
            assert (r["real_topic"], str(r["real_queue_id"])) == (v["REAL_TOPIC"], v["REAL_QID"])
            assert r["deliver_ts_ms"] == v["deliver_timestamp_for_storeTimestamp_1700000000000"]
        checked += 1
    assert checked == len(vectors) - 1


def test_offsets_are_dense_and_the_commit_log_is_a_running_sum(
    run: tuple[Scenario, pa.Table, pa.Table],
) -> None:
    sc, messages, _ = run
    out = simulate.simulate(messages, sc)
    log = broker.log_records(messages, out.attempts, out.results, sc)
    committed = broker.with_offsets(log, sc).to_pandas()
    keys = list(broker.STORE_ORDER)
    assert committed[keys].apply(tuple, axis=1).is_monotonic_increasing  # the brokers' write order
    for _, q in committed.groupby(["broker", "store_topic", "store_queue_id"]):
        assert q["queue_offset"].tolist() == list(range(len(q)))  # dense, increasing with store order
    hosts = broker.store_hosts(sc.cluster.brokers)
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


def test_copies_fan_a_batch_out_and_keep_duplicates(run: tuple[Scenario, pa.Table, pa.Table]) -> None:
    """A stored batch attempt is one copy per member; a stored not-OK attempt retried elsewhere is a
    copy too."""
    _, _, records = run
    df = records.to_pandas()
    batch = df[df.batch_id.notna()]
    assert (batch.groupby(["producer", "batch_id", "attempt"]).send_seq.nunique() == 1).all()
    assert (batch.send_seq <= batch.seq).all() and (batch.send_seq < batch.seq).any()
    per_message = df.groupby(["producer", "seq"]).size()
    assert (per_message > 1).any()  # status:FLUSH_DISK_TIMEOUT, then another broker (retryAnother... = true)


def test_offset_msg_ids_equal_create_message_id() -> None:
    hosts = broker.store_hosts([f"b{i}" for i in range(300)])
    assert (hosts[0].ip, hosts[0].port, hosts[299].ip) == (bytes([10, 1, 0, 1]), 10911, bytes([10, 1, 1, 44]))
    rng = np.random.default_rng(1)
    index = rng.integers(0, 300, 500)
    offsets = np.concatenate([[0, 1, 2**31, 2**63 - 1], rng.integers(0, 2**62, 496)])
    ids = broker.offset_msg_ids(index, offsets, hosts).to_pylist()
    for i, o, msg_id in zip(index, offsets, ids, strict=True):
        assert msg_id == codec.create_message_id(hosts[i].ip, hosts[i].port, int(o))


def test_store_file_counts() -> None:
    gib = broker.COMMIT_LOG_FILE_BYTES
    assert broker.commit_log_files(np.array([0, 1, gib, gib + 1])).tolist() == [0, 1, 1, 2]
    assert broker.consume_queue_files(np.array([1, 300_000, 300_001])).tolist() == [1, 1, 2]
    assert broker.CQ_ENTRY_BYTES * broker.CQ_ENTRIES_PER_FILE == 6_000_000  # mappedFileSizeConsumeQueue
    # IndexHeader counts from 1 and a file is full at maxIndexNum (20,000,000): 19,999,999 entries each
    assert broker.index_files(np.array([0, 19_999_999, 20_000_000])).tolist() == [1, 1, 2]


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
    }
    keys = [None, "", "a", "a b", " a  b ", "k1 k2 k3"]
    out = broker.store_records(pa.Table.from_pylist([{**row, "keys": k} for k in keys]), sc)
    assert out.column("index_entries").to_pylist() == [1, 1, 2, 3, 3, 4]  # String.split(" "), empties skipped
