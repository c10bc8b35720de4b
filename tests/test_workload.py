"""Synthetic messages: seeded per (producer, seq), exact property sizes, real UNIQ_KEY ids."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from rocketsim.client.versions import parse_version
from rocketsim.format import codec
from rocketsim.format.message import MessageConst
from rocketsim.scenario import scenario_from_mapping
from rocketsim.scenario.workload import (
    CODED_COLUMNS,
    EPOCH_MS,
    SEND_MODES,
    generate,
    generate_producer,
    producer_identity,
    producer_shares,
    seq_keys,
    uniq_ids,
)

MIXED = {
    "name": "wl",
    "seed": 9,
    "producers": {
        "count": 3,
        "threads": 2,
        "group": "grp_1",
        "send_mode": {"sync": 0.5, "async": 0.3, "oneway": 0.2},
    },
    "workload": {
        "messages": 20_000,
        "rate_per_s": 2000.0,
        "topics": ["TopicA", "TopicB"],
        "tags": ["TagA", "", "Tag_long_name"],
        "message_types": {"normal": 0.5, "ordered": 0.1, "delay": 0.1, "transaction": 0.1, "batch": 0.2},
        "delay_levels": [1, 3, 18],
        "batch_size": 4,
        "invalid": {"bad_topic": 0.01, "empty_body": 0.01, "oversize_body": 0.01},
    },
}


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return generate(scenario_from_mapping(MIXED))


def test_counts_split_over_producers() -> None:
    sc = scenario_from_mapping({"producers": {"count": 3}, "workload": {"messages": 10}})
    assert [s.messages for s in producer_shares(sc)] == [4, 3, 3]


@pytest.mark.parametrize(
    ("total", "count", "hot", "share"), [(10_000, 64, 1, 0.5), (7, 5, 2, 0.3), (999, 3, 2, 0.9)]
)
def test_hot_producers_send_their_share(total: int, count: int, hot: int, share: float) -> None:
    sc = scenario_from_mapping(
        {
            "producers": {"count": count},
            "workload": {"messages": total, "rate_per_s": 500.0, "hot_share": share, "hot_producers": hot},
        }
    )
    shares = producer_shares(sc)
    assert [s.producer for s in shares] == list(range(count))
    assert sum(s.messages for s in shares) == total
    assert sum(s.messages for s in shares[:hot]) == round(total * share)
    assert max(s.messages for s in shares[:hot]) - min(s.messages for s in shares[:hot]) <= 1
    assert max(s.messages for s in shares[hot:]) - min(s.messages for s in shares[hot:]) <= 1
    assert sum(s.rate_per_s for s in shares) == pytest.approx(500.0)
    assert sum(s.rate_per_s for s in shares[:hot]) == pytest.approx(500.0 * share)


def test_hot_share_zero_is_the_even_split() -> None:
    even = producer_shares(scenario_from_mapping({"producers": {"count": 4}, "workload": {"messages": 10}}))
    assert [s.messages for s in even] == [3, 3, 2, 2]
    assert {s.rate_per_s for s in even} == {1000.0 / 4}


def test_same_rows_whatever_the_chunking() -> None:
    sc = scenario_from_mapping(MIXED)
    share = producer_shares(sc)[1]
    whole = pa.Table.from_batches(list(generate_producer(sc, share)))
    chunked = pa.Table.from_batches(list(generate_producer(sc, share, chunk_rows=777)))
    # arrival times are a running float sum: chunking must not change a single value
    assert whole.equals(chunked)


def test_coded_messages_are_the_same_rows_as_dictionaries() -> None:
    # the producer task writes the drawn codes (bad topics among them) and reads the strings
    sc = scenario_from_mapping(MIXED)
    share = producer_shares(sc)[1]
    plain = list(generate_producer(sc, share, batch_rows=2_000))
    coded = list(generate_producer(sc, share, batch_rows=2_000, coded=True))
    assert [b.cast(plain[0].schema) for b in coded] == plain
    assert all(pa.types.is_dictionary(coded[0].schema.field(c).type) for c in CODED_COLUMNS)
    assert all(pa.types.is_string(plain[0].schema.field(c).type) for c in CODED_COLUMNS)
    assert "bad topic!" in pa.Table.from_batches(plain).column("topic").to_pylist()


def test_other_seed_other_messages(table: pa.Table) -> None:
    other = generate(scenario_from_mapping({**MIXED, "seed": 10}))
    assert not other.column("born_ts_ms").equals(table.column("born_ts_ms"))


def _properties(row: dict, group: str) -> dict[str, str]:
    """The properties the Java client would send for this row."""
    props = {
        MessageConst.PROPERTY_WAIT_STORE_MSG_OK: "true",
        MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: row["uniq_msg_id"],
    }
    if row["tags"]:
        props[MessageConst.PROPERTY_TAGS] = row["tags"]
    if row["keys"]:
        props[MessageConst.PROPERTY_KEYS] = row["keys"]
    if row["message_type"] == "delay":
        props[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(row["delay_level"])
    if row["message_type"] == "transaction":
        props[MessageConst.PROPERTY_TRANSACTION_PREPARED] = "true"
        props[MessageConst.PROPERTY_PRODUCER_GROUP] = group
    return props


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_properties_size_is_the_exact_encoded_length(version: str) -> None:
    sc = scenario_from_mapping({**MIXED, "producers": {**MIXED["producers"], "client_version": version}})
    rows = generate(sc).slice(0, 3000).to_pylist()
    v = parse_version(version)
    for row in rows:
        expected = codec.properties_size(_properties(row, "grp_1"), version=v)
        assert row["properties_size"] == expected, row


def test_uniq_ids_are_message_client_id_setter_ids(table: pa.Table) -> None:
    for row in table.slice(0, 500).to_pylist() + table.slice(15_000, 500).to_pylist():
        ip, pid, loader = producer_identity(9, row["producer"])
        now = EPOCH_MS + row["born_ts_ms"]
        start = codec.month_start_ms(now, "UTC")
        assert row["uniq_msg_id"] == codec.build_uniq_id(ip, pid, loader, now, start, row["seq"])
        assert codec.uniq_id_ip(row["uniq_msg_id"]) == ip


def test_uniq_ids_across_a_month_boundary_count_from_each_ids_own_month() -> None:
    # times on both sides of a UTC month start (and one month alone): each id's time field counts from
    # the start of its own month, as MessageClientIDSetter's does
    boundary = codec.next_month_start_ms(EPOCH_MS, "UTC") - EPOCH_MS
    for times in ([boundary - 2, boundary - 1, boundary, boundary + 5], [boundary - 9, boundary - 1]):
        seqs = np.arange(70_000, 70_000 + len(times), dtype=np.int64)
        ids = uniq_ids(9, 2, seqs, np.array(times, np.int64)).to_pylist()
        ip, pid, loader = producer_identity(9, 2)
        for got, t, seq in zip(ids, times, seqs.tolist(), strict=True):
            start = codec.month_start_ms(EPOCH_MS + t, "UTC")
            assert got == codec.build_uniq_id(ip, pid, loader, EPOCH_MS + t, start, seq)
    assert uniq_ids(9, 2, np.zeros(0, np.int64), np.zeros(0, np.int64)).to_pylist() == []


def test_batches_are_blocks_of_one_topic_and_mode(table: pa.Table) -> None:
    df = table.to_pandas()
    batches = df[df.batch_id.notna()]
    assert len(batches) > 0
    for (_, bid), block in batches.groupby(["producer", "batch_id"]):
        assert block.seq.min() == bid and len(block) == block.batch_size.iloc[0] <= 4
        assert block.topic.nunique() == 1 or "bad topic!" in set(block.topic)
        assert block.send_mode.nunique() == 1


def test_mix_proportions_and_fields(table: pa.Table) -> None:
    df = table.to_pandas()
    share = df.message_type.value_counts(normalize=True)
    assert (
        abs(share["batch"] - 0.2) < 0.04 and abs(share["ordered"] - 0.1) < 0.02
    )  # weights are overall shares
    assert set(df[df.message_type == "delay"].delay_level) == {1, 3, 18}
    assert (df[df.message_type != "delay"].delay_level == 0).all()
    assert df[df.message_type == "ordered"].order_key.notna().all()
    assert df[df.message_type != "ordered"].order_key.isna().all()
    assert (df.thread == df.seq % 2).all()
    assert set(df.topic) == {"TopicA", "TopicB", "bad topic!"}
    assert (df.body_size == 0).sum() > 0 and (df.body_size == 4_194_305).sum() > 0
    for _, g in df.groupby("producer"):
        assert np.all(np.diff(g.sort_values("seq").born_ts_ms.to_numpy()) >= 0)
    # 20k messages at 2000/s: about 10 s of arrivals per producer (poisson)
    assert 8_000 < df.born_ts_ms.max() < 12_000


@pytest.mark.parametrize(("level", "digits"), [(100, 3), (2147483647, 10)])
def test_delay_levels_of_any_size_are_sized_by_their_decimal_length(level: int, digits: int) -> None:
    # Message.setDelayTimeLevel(int level) = putProperty("DELAY", String.valueOf(level)) (4.9.8 and 5.3.3):
    # no client bound (Validators never read DELAY), so level 100 is sent as 3 digits, Integer.MAX_VALUE as 10
    def run(lv: int) -> list[dict]:
        sc = scenario_from_mapping(
            {
                **MIXED,
                "workload": {
                    **MIXED["workload"],
                    "messages": 300,
                    "message_types": {"delay": 1.0},
                    "delay_levels": [lv],
                    "invalid": {},
                },
            }
        )
        return generate(sc).to_pylist()

    rows, one_digit = run(level), run(1)
    assert {r["delay_level"] for r in rows} == {level}
    for row, base in zip(rows, one_digit, strict=True):
        assert row["properties_size"] == codec.properties_size(_properties(row, "grp_1"))
        assert row["properties_size"] - base["properties_size"] == digits - 1


@pytest.mark.parametrize(
    ("prefix", "lo", "hi"),
    [
        ("k0-", 5_000_000, 5_131_072),  # a chunk of a large producer: made from buffers
        ("k1-", 999_990, 1_000_020),  # from buffers: six digits, then seven
        ("k12-", 9_999_990, 10_000_010),  # from buffers: seven digits, then eight (12-byte keys)
        ("k1-", 99_995, 100_020),  # a key shorter than 8 bytes: joined
        ("k3-", 99_999_000, 100_000_100),  # past eight digits: joined
        ("k65535-", 9, 20_000),  # a 7-byte prefix, one digit to five: joined
        ("kß-", 998, 1001),  # a prefix of 4 bytes, not 3 characters
        ("", 0, 12),
        ("k7-", 5, 5),
    ],
)
def test_seq_keys_are_the_prefix_joined_to_each_seq(prefix: str, lo: int, hi: int) -> None:
    import pyarrow.compute as pc

    want = pc.binary_join_element_wise(
        prefix, pc.cast(pa.array(np.arange(lo, hi, dtype=np.int64)), pa.string()), ""
    )
    got = seq_keys(prefix, lo, hi)
    got.validate(full=True)
    assert got.equals(want)


def test_choose_draws_as_the_binary_search_over_the_cumulative_weights() -> None:
    """``_choose`` (one comparison a bound) draws what ``np.searchsorted`` over the cumulative weights
    did: weights of one, several and zero names, a draw on a bound exactly."""
    from rocketsim.scenario.workload import _choose

    u = np.concatenate([np.random.default_rng(5).random(10_000), [0.0, 0.25, 0.5, 0.75, 1 - 1e-12]])
    for weights in (
        {"sync": 1.0},
        {"async": 1.0},
        {"sync": 0.25, "async": 0.25, "oneway": 0.5},
        {"sync": 0.5, "oneway": 0.5},
        {"sync": 0.0, "async": 0.3, "oneway": 0.7},
    ):
        w = np.array([weights.get(n, 0.0) for n in SEND_MODES])
        cum = np.cumsum(w / w.sum())
        expected = np.minimum(np.searchsorted(cum, u, side="right"), len(SEND_MODES) - 1)
        assert np.array_equal(_choose(u, weights, SEND_MODES), expected)
