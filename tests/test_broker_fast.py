"""The fast ``log_records``/``with_offsets`` (and ``store_records``) give byte-identical tables to the
implementations they replaced, kept here verbatim as the oracle, over the shipped scenarios, every
message type and client line, several producers, shuffled and duplicated inputs and random scenarios."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketsim import broker, codec, simulate, workload
from rocketsim.broker import (
    ATTEMPT_COLUMNS,
    BATCH_ELEMENT,
    CLUSTER_NAME,
    COPY_COLUMNS,
    DELAYED,
    HALF,
    HALF_TOPIC,
    LOG_COLUMNS,
    MESSAGE_COLUMNS,
    NORMAL,
    NOT_STORED_STATUSES,
    OFFSET_NAMES,
    RESULT_COLUMNS,
    SCHEDULE_TOPIC,
    STORE_COLUMNS,
    STORE_ORDER,
    TRANSACTION_ID,
    _batch_properties,
    is_stored_outcome,
    store_hosts,
)
from rocketsim.codec import SocketAddress
from rocketsim.message import MessageConst, MessageSysFlag, broker_delay_transform
from rocketsim.scenario import Scenario, load_scenario, scenario_from_mapping
from rocketsim.schemas import COMMIT_LOG, data_schema

SCENARIOS = sorted((Path(__file__).parent.parent / "conf" / "scenarios").glob("*.toml"))
VERSIONS = ("4.9.7", "4.9.8", "5.3.3")

# ---- the oracle: the implementations as they were, verbatim ----------------------------------------

_WAIT = MessageConst.PROPERTY_WAIT_STORE_MSG_OK
_TRAN_BITS = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE


def _entry(name: str, value_len: np.ndarray | int) -> np.ndarray | int:
    """Bytes one ``name\\x01value\\x02`` entry adds to a properties string."""
    return len(name) + 2 + value_len


def _digits(values: np.ndarray) -> np.ndarray:
    """Decimal digits of ``str(v)`` for ints (a minus sign counts)."""
    v = np.asarray(values, np.int64)
    a = np.abs(v)
    d = np.ones(len(v), np.int64)
    p = 10
    for _ in range(18):
        d += a >= p
        p *= 10
    return d + (v < 0)


@cache
def _delay_lookup(levels: tuple[int, ...]) -> dict[int, tuple[int, int, int]]:
    """level -> (clamped level, schedule queue id, delay ms) by the broker's own transform."""
    out = {}
    for level in levels:
        t = broker_delay_transform("T", 0, {MessageConst.PROPERTY_DELAY_TIME_LEVEL: str(level)}, 0, 0)
        assert t.delayed and t.effective_level is not None and t.deliver_timestamp_ms is not None
        out[level] = (t.effective_level, t.queue_id, t.deliver_timestamp_ms)
    return out


def _np(table: pa.Table, name: str, dtype: type = np.int64) -> np.ndarray:
    return np.asarray(table.column(name).fill_null(0).to_numpy(zero_copy_only=False), dtype)


def _lengths(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """UTF-8 byte length per row (0 for null)."""
    return np.asarray(pc.binary_length(column).fill_null(0).to_numpy(zero_copy_only=False), np.int64)


def _key_tokens(keys: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Per row, how many non-empty keys ``keys.split(" ")`` gives (0 for null)."""
    keys = (keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys).cast(pa.string())
    parts = pc.split_pattern(keys.fill_null(""), " ")
    nonempty = np.asarray(
        pc.greater(pc.binary_length(parts.flatten()), 0).to_numpy(zero_copy_only=False), np.int64
    )
    offsets = np.asarray(parts.offsets, np.int64)
    csum = np.concatenate([[0], np.cumsum(nonempty)])
    return csum[offsets[1:]] - csum[offsets[:-1]]


def _oracle_store_records(table: pa.Table, sc: Scenario) -> pa.Table:
    version = sc.producers.version
    n = table.num_rows
    topic = table.column("topic")
    topic_len = _lengths(topic)
    uniq_len = _lengths(table.column("uniq_msg_id"))
    body = _np(table, "body_size")
    props = _np(table, "properties_size")
    wire = _np(table, "wire_bytes")
    sys_flag = _np(table, "sys_flag")
    level = _np(table, "delay_level")
    queue_id = _np(table, "queue_id")
    is_batch = np.asarray(pc.is_valid(table.column("batch_id")).to_numpy(zero_copy_only=False), bool)
    tran = sys_flag & _TRAN_BITS
    half = (tran == MessageSysFlag.TRANSACTION_PREPARED_TYPE) & ~is_batch
    delayed = (level > 0) & ((tran == 0) | (tran == MessageSysFlag.TRANSACTION_COMMIT_TYPE)) & ~is_batch

    # the delay transform, once per distinct level
    eff = np.zeros(n, np.int64)
    sched_q = np.zeros(n, np.int64)
    delay_ms = np.zeros(n, np.int64)
    if delayed.any():
        lookup = _delay_lookup(tuple(sorted(set(level[delayed].tolist()))))
        for lv, (e, q, d) in lookup.items():
            hit = delayed & (level == lv)
            eff[hit], sched_q[hit], delay_ms[hit] = e, q, d

    # the properties string the broker writes
    cluster = _entry(MessageConst.PROPERTY_CLUSTER, len(CLUSTER_NAME))
    real = _entry(MessageConst.PROPERTY_REAL_TOPIC, topic_len) + _entry(
        MessageConst.PROPERTY_REAL_QUEUE_ID, _digits(queue_id)
    )
    normal_props = props + cluster - (0 if version.is_5 else _entry(_WAIT, 4))
    delayed_props = props + cluster + real + _digits(eff) - _digits(level)
    half_props = props + cluster + real + (_entry(TRANSACTION_ID, uniq_len) if version.is_5 else 0)
    batch_props = (
        props
        + (0 if version.is_5 else 1)
        + codec.properties_size(_batch_properties(version), version=version)
    )
    kind = np.select([is_batch, half, delayed], [BATCH_ELEMENT, HALF, DELAYED], NORMAL)
    stored_props = np.choose(kind, [normal_props, delayed_props, half_props, batch_props])

    store_topic = pc.if_else(pa.array(delayed), SCHEDULE_TOPIC, pc.if_else(pa.array(half), HALF_TOPIC, topic))
    store_topic_len = np.where(delayed, len(SCHEDULE_TOPIC), np.where(half, len(HALF_TOPIC), topic_len))
    store_q = np.where(delayed, sched_q, np.where(half, 0, queue_id))
    store_flag = np.where(half, sys_flag & ~_TRAN_BITS, sys_flag)
    store_body = np.where(is_batch, body, wire - props)
    sizes = codec.store_sizes(store_body, store_topic_len, stored_props, store_flag)
    store_ts = _np(table, "start_ts_ms") + _np(table, "latency_ms")
    moved = delayed | half
    cols = {
        "store_ts_ms": pa.array(store_ts),
        "store_topic": store_topic,
        "store_queue_id": pa.array(store_q.astype(np.int32)),
        "store_sys_flag": pa.array(store_flag.astype(np.int32)),
        "store_body_size": pa.array(store_body.astype(np.int32)),
        "store_props_size": pa.array(stored_props.astype(np.int32)),
        "store_size": pa.array(sizes.astype(np.int32)),
        "delay_level_stored": pa.array(eff.astype(np.int32), mask=~delayed),
        "deliver_ts_ms": pa.array(store_ts + delay_ms, mask=~delayed),
        "real_topic": pc.if_else(pa.array(moved), topic, pa.scalar(None, pa.string())),
        "real_queue_id": pa.array(queue_id.astype(np.int32), mask=~moved),
        "index_entries": pa.array((1 + _key_tokens(table.column("keys"))).astype(np.int32)),
    }
    for f in STORE_COLUMNS:
        table = table.append_column(f, pa.chunked_array([cols[f.name]], f.type))
    return table


def _oracle_stored_copies(messages: pa.Table, attempts: pa.Table, results: pa.Table) -> pa.Table:
    sent = messages.select(["producer", "seq", *MESSAGE_COLUMNS]).join(
        results.select(["producer", "seq", *RESULT_COLUMNS]), ["producer", "seq"], join_type="inner"
    )
    sent = sent.filter(pc.not_equal(sent.column("status"), "REJECTED"))
    att = attempts.filter(is_stored_outcome(attempts.column("outcome")))
    att = att.select(["producer", "seq", *ATTEMPT_COLUMNS]).rename_columns(
        ["producer", "send_seq", *ATTEMPT_COLUMNS]
    )
    lead = att.join(
        sent.select(["producer", "seq", "batch_id"]), ["producer", "send_seq"], ["producer", "seq"], "inner"
    )
    single = lead.filter(pc.is_null(lead.column("batch_id"))).drop_columns(["batch_id"])
    single = single.join(sent, ["producer", "send_seq"], ["producer", "seq"], "inner")
    single = single.append_column("seq", single.column("send_seq"))
    grouped = lead.filter(pc.is_valid(lead.column("batch_id")))
    grouped = grouped.join(
        sent.filter(pc.is_valid(sent.column("batch_id"))), ["producer", "batch_id"], join_type="inner"
    )
    parts = [t.select(COPY_COLUMNS.names).cast(COPY_COLUMNS) for t in (single, grouped)]
    return pa.concat_tables(parts)


def _oracle_log_records(messages: pa.Table, attempts: pa.Table, results: pa.Table, sc: Scenario) -> pa.Table:
    records = _oracle_store_records(_oracle_stored_copies(messages, attempts, results), sc)
    records = records.sort_by([("producer", "ascending"), ("seq", "ascending"), ("attempt", "ascending")])
    producer = np.asarray(records.column("producer").to_numpy(zero_copy_only=False))
    seq = np.asarray(records.column("seq").to_numpy(zero_copy_only=False))
    last = np.ones(len(seq), bool)
    last[:-1] = (producer[1:] != producer[:-1]) | (seq[1:] != seq[:-1])
    answered = pc.invert(pc.is_in(records.column("status"), value_set=pa.array(NOT_STORED_STATUSES)))
    records = records.append_column("is_result", pc.and_(pa.array(last), answered))
    renamed = {
        "start_ts_ms": "born_ts_ms",
        "delay_level": "requested_level",
        "delay_level_stored": "delay_level",
    }
    records = records.rename_columns([renamed.get(n, n) for n in records.column_names])
    return records.select(LOG_COLUMNS.names).cast(LOG_COLUMNS)


_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)


def _oracle_hex_rows(raw: np.ndarray) -> pa.Array:
    """Rows of bytes -> uppercase hex strings, written straight into an Arrow string buffer."""
    n, width = raw.shape
    out = np.empty((n, width * 2), dtype=np.uint8)
    out[:, 0::2] = _HEX[raw >> 4]
    out[:, 1::2] = _HEX[raw & 15]
    offsets = np.arange(0, n * width * 2 + 1, width * 2, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(out.tobytes()))


def _oracle_offset_msg_ids(
    broker_index: np.ndarray, offsets: np.ndarray, hosts: Sequence[SocketAddress]
) -> pa.Array:
    """Vectorised ``codec.create_message_id(host.ip, host.port, offset)`` for IPv4 store hosts."""
    if any(len(h.ip) != 4 for h in hosts):
        raise ValueError("offset_msg_ids handles IPv4 store hosts only")
    head = np.array([list(h.ip) + list(h.port.to_bytes(4, "big")) for h in hosts], np.uint8).reshape(-1, 8)
    idx = np.asarray(broker_index, np.int64)
    raw = np.empty((len(idx), 16), np.uint8)
    raw[:, :8] = head[idx]
    raw[:, 8:] = np.asarray(offsets, ">i8").view(np.uint8).reshape(-1, 8)
    return _oracle_hex_rows(raw)


def _oracle_with_offsets(log: pa.Table, sc: Scenario) -> pa.Table:
    log = log.sort_by([(k, "ascending") for k in STORE_ORDER])
    df = log.select(["broker", "store_topic", "store_queue_id", "store_size"]).to_pandas()
    queue_offset = df.groupby(["broker", "store_topic", "store_queue_id"], sort=False).cumcount()
    size = df["store_size"].astype(np.int64)
    commit_log_offset = size.groupby(df["broker"], sort=False).cumsum() - size
    brokers = list(sc.cluster.brokers)
    index = np.array([brokers.index(b) for b in df["broker"]], np.int64)
    cols = {
        "queue_offset": pa.array(queue_offset.to_numpy(np.int64)),
        "commit_log_offset": pa.array(commit_log_offset.to_numpy(np.int64)),
        "offset_msg_id": _oracle_offset_msg_ids(
            index, commit_log_offset.to_numpy(np.int64), store_hosts(brokers)
        ),
    }
    for name in OFFSET_NAMES:
        log = log.append_column(name, cols[name])
    schema = data_schema(COMMIT_LOG)
    return log.select(schema.names).cast(schema)


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
    out = simulate.simulate(messages, sc)
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
    """log_records equals the oracle; ``fast``: by index arithmetic, not the joins."""
    assert (broker._copy_rows(messages, attempts, results) is not None) == fast
    want = _oracle_log_records(messages, attempts, results, sc)
    got = broker.log_records(messages, attempts, results, sc)
    assert got.equals(want, check_metadata=True)
    return want


def _same_offsets(log: pa.Table, sc: Scenario) -> pa.Table:
    want = _oracle_with_offsets(log, sc)
    got = broker.with_offsets(log, sc)
    assert got.equals(want, check_metadata=True)
    return want


# ---- log_records ---------------------------------------------------------------------------------


def test_store_records_equal_the_oracle(run: Run) -> None:
    sc, messages, attempts, results = run
    copies = _oracle_stored_copies(messages, attempts, results)
    assert broker.store_records(copies, sc).equals(_oracle_store_records(copies, sc), check_metadata=True)
    order = [(k, "ascending") for k in ("producer", "seq", "attempt")]  # copies come in no set order
    assert broker.stored_copies(messages, attempts, results).sort_by(order).equals(copies.sort_by(order))


def test_log_records_per_producer_equal_the_oracle(run: Run) -> None:
    sc, messages, attempts, results = run
    for p in range(sc.producers.count):
        log = _same_log(_producer(messages, p), _producer(attempts, p), _producer(results, p), sc)
        assert log.num_rows > 0


def test_log_records_of_several_producers_equal_the_oracle(run: Run) -> None:
    sc, messages, attempts, results = run
    log = _same_log(messages, attempts, results, sc)
    assert len(set(log.column("producer").to_pylist())) == sc.producers.count


def test_log_records_of_shuffled_and_duplicated_inputs_equal_the_oracle(run: Run) -> None:
    sc, messages, attempts, results = run
    _same_log(_shuffled(messages, 1), _shuffled(attempts, 2), _shuffled(results, 3), sc)
    # repeated rows: the joins multiply them (every tie is between equal rows)
    twice = [pa.concat_tables([t, t]) for t in (messages, attempts, results)]
    _same_log(*twice, sc, fast=False)
    _same_log(twice[0], attempts, results, sc, fast=False)
    _same_log(messages, attempts, twice[2], sc, fast=False)


def test_log_records_of_partial_inputs_equal_the_oracle(run: Run) -> None:
    sc, messages, attempts, results = run
    rng = np.random.default_rng(4)
    keep = [t.filter(pa.array(rng.random(t.num_rows) < 0.7)) for t in (messages, attempts, results)]
    _same_log(*keep, sc)
    _same_log(messages.slice(0, 0), attempts.slice(0, 0), results.slice(0, 0), sc)
    _same_log(messages, attempts.slice(0, 0), results, sc)


def test_log_records_of_keys_far_apart_equal_the_oracle() -> None:
    """(producer, seq) pairs that do not fit one int64 key: the joins."""
    sc, *tables = _simulated(_mixed("5.3.3"))

    def moved(t: pa.Table) -> pa.Table:
        far = pc.multiply(pc.cast(pc.equal(t.column("producer"), 1), pa.int64()), 1 << 62)
        return t.set_column(t.schema.get_field_index("seq"), "seq", pc.add(t.column("seq"), far))

    _same_log(*(moved(t) for t in tables), sc, fast=False)
    _same_log(*(_producer(moved(t), 1) for t in tables), sc)  # one producer: seq alone is the key


def test_the_mixed_runs_have_what_the_oracle_must_cover() -> None:
    sc, messages, attempts, results = _simulated(_mixed("4.9.7"))
    log = _oracle_log_records(messages, attempts, results, sc).to_pandas()
    assert set(log.message_type) == {"normal", "ordered", "delay", "transaction", "batch"}
    assert "REJECTED" in results.column("status").to_pylist()
    assert log.duplicated(["producer", "seq"]).any()  # a not-OK store retried elsewhere
    assert (log.send_seq != log.seq).any()  # batch members
    assert (~log.is_result).any()


# ---- with_offsets --------------------------------------------------------------------------------


def test_with_offsets_equals_the_oracle(run: Run) -> None:
    sc, messages, attempts, results = run
    log = _oracle_log_records(messages, attempts, results, sc)
    committed = _same_offsets(log, sc)
    assert committed.num_rows == log.num_rows
    _same_offsets(_shuffled(log, 5), sc)
    per_producer = [
        _oracle_log_records(*(_producer(t, p) for t in run[1:]), sc) for p in range(sc.producers.count)
    ]
    _same_offsets(pa.concat_tables(per_producer), sc)  # chunked, in producer order
    for b in sc.cluster.brokers:  # what the pipeline does: one broker's records of every producer
        _same_offsets(_shuffled(log.filter(pc.equal(log.column("broker"), b)), 6), sc)
    _same_offsets(log.slice(0, 0), sc)
    _same_offsets(LOG_COLUMNS.empty_table(), sc)


def test_offset_msg_ids_equal_the_oracle() -> None:
    hosts = store_hosts([f"b{i}" for i in range(300)])
    rng = np.random.default_rng(2)
    index = rng.integers(0, 300, 5000)
    offsets = np.concatenate([[0, 1, 255, 256, 2**31, 2**63 - 1], rng.integers(0, 2**63 - 1, 4994)])
    assert broker.offset_msg_ids(index, offsets, hosts).equals(_oracle_offset_msg_ids(index, offsets, hosts))
    empty = np.zeros(0, np.int64)
    assert broker.offset_msg_ids(empty, empty, hosts).equals(_oracle_offset_msg_ids(empty, empty, hosts))


def _with(log: pa.Table, **columns: Any) -> pa.Table:
    for name, values in columns.items():
        i = log.schema.get_field_index(name)
        log = log.set_column(i, log.field(i), pa.array(values, log.field(i).type))
    return log


def test_with_offsets_of_ties_and_unknown_brokers() -> None:
    sc, messages, attempts, results = _simulated(_mixed("5.3.3"))
    log = _oracle_log_records(messages, attempts, results, sc)
    n = log.num_rows
    _same_offsets(_shuffled(pa.concat_tables([log, log, log]), 7), sc)  # equal rows
    _same_offsets(_shuffled(_with(log, store_ts_ms=np.zeros(n)), 8), sc)
    # different records with equal STORE_ORDER keys keep their input order, in both sorts
    ts = log.column("store_ts_ms").to_numpy() // 5000
    zeros = np.zeros(n, np.int64)
    _same_offsets(_shuffled(_with(log, store_ts_ms=ts, send_seq=zeros, seq=zeros, attempt=zeros), 9), sc)
    far = ts + (log.column("producer").to_numpy() % 2 << 62)  # too far apart to pack: lexsort
    _same_offsets(_shuffled(_with(log, store_ts_ms=far, send_seq=zeros, seq=zeros, attempt=zeros), 10), sc)
    stranger = _with(log, broker=["broker-x"] * n)
    with pytest.raises(ValueError):
        _oracle_with_offsets(stranger, sc)
    with pytest.raises(ValueError):
        broker.with_offsets(stranger, sc)


def test_with_offsets_of_far_apart_keys() -> None:
    """Sort keys that do not pack into one int64: lexsort; queue keys: numbered."""
    sc, messages, attempts, results = _simulated(_mixed("4.9.8"))
    log = _oracle_log_records(messages, attempts, results, sc)
    producer1 = log.column("producer").to_numpy() == 1
    for name, shift in (("store_ts_ms", 1 << 62), ("seq", 1 << 62), ("send_seq", -(1 << 62))):
        _same_offsets(_shuffled(_with(log, **{name: log.column(name).to_numpy() + producer1 * shift}), 9), sc)
    rng = np.random.default_rng(3)
    keys = [rng.integers(0, 3, 1000) << 61, rng.integers(0, 3, 1000) << 40, rng.integers(0, 2, 1000)]
    codes = broker._group_codes(keys)
    same = np.all([k[:, None] == k[None, :] for k in keys], axis=0)
    assert broker._packed(keys) is None and ((codes[:, None] == codes[None, :]) == same).all()


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
def test_random_scenarios_equal_the_oracle(sc: Scenario, seed: int) -> None:
    _, messages, attempts, results = _simulated(sc)
    for p in range(sc.producers.count):
        _same_log(_producer(messages, p), _producer(attempts, p), _producer(results, p), sc)
    log = _same_log(messages, attempts, results, sc)
    _same_offsets(_shuffled(log, seed), sc)
