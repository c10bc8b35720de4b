"""Vectorised grouping (:mod:`rocketsim.tables.grouping`) against plain Python: packed keys sort as their
tuples,
groups are numbered in key order, lookups find tuples, regrouping sums per key, running sums restart
per group, string codes round-trip, and windows divide as Spark's doubles do."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from rocketsim.tables import grouping
from rocketsim.tables.summaries.arithmetic import histogram


def test_packed_keys_sort_and_group_as_their_tuples() -> None:
    rng = np.random.default_rng(1)
    keys = [rng.integers(-5, 5, 500), rng.integers(0, 3, 500), rng.integers(100, 140, 500)]
    rows = list(zip(*(k.tolist() for k in keys), strict=True))
    packed = grouping.pack_keys(keys)
    assert [rows[i] for i in np.argsort(packed, kind="stable")] == sorted(rows)
    g = grouping.Groups(keys)
    distinct = sorted(set(rows))
    assert g.n == len(distinct)
    assert [distinct[i] for i in g.index] == rows  # numbered in key order
    assert [rows[i] for i in g.first] == distinct
    assert g.count().tolist() == [rows.count(d) for d in distinct]
    assert g.sum(keys[2]).tolist() == [sum(r[2] for r in rows if r == d) for d in distinct]
    wide = [np.array([0, 1 << 62, 0]), np.array([1 << 62, 0, 1 << 62])]
    assert grouping.pack_keys(wide) is None
    assert grouping.Groups(wide).index.tolist() == [0, 1, 0]


@pytest.mark.parametrize("ordered", [False, True])
def test_group_sums_counts_and_extremes_equal_plain_python(ordered: bool) -> None:
    # rows in any order or already by group (the ways Groups reduces: sorted runs, or few groups counted
    # in doubles while exact), values past 2**53 and small ones
    rng = np.random.default_rng(7)
    key = np.sort(rng.integers(0, 40, 3_000)) if ordered else rng.integers(0, 40, 3_000)
    values = rng.integers(-(1 << 60), 1 << 60, 3_000) // 8
    flags, codes = rng.random(3_000) < 0.3, rng.integers(-1, 4, 3_000)
    g = grouping.Groups([key])
    members = [np.flatnonzero(g.index == i) for i in range(g.n)]
    assert g.sum(values).tolist() == [sum(values[m].tolist()) for m in members]
    for small in (values >> 20, values >> 12):  # sums below 2**53 (in doubles) and past it
        assert g.sum(small).tolist() == [sum(small[m].tolist()) for m in members]
    assert g.sum(flags).tolist() == [int(flags[m].sum()) for m in members]
    assert g.min(values).tolist() == [min(values[m].tolist()) for m in members]
    assert g.max(values).tolist() == [max(values[m].tolist()) for m in members]
    assert g.count().tolist() == [len(m) for m in members]
    by_code = g.code_counts(codes, 3)  # code 3 and -1: not counted
    assert by_code.tolist() == [[int((codes[m] == j).sum()) for j in range(3)] for m in members]
    none = grouping.Groups([np.zeros(0, np.int64)])
    assert none.sum(np.zeros(0, np.int64)).tolist() == none.count().tolist() == []
    assert none.min(np.zeros(0, np.int64)).tolist() == none.code_counts(np.zeros(0, np.int64), 2).tolist()


@pytest.mark.parametrize("span", [5, 50_000, 1 << 40, 1 << 61])
def test_histograms_count_each_group_and_value_pair(span: int) -> None:
    # the three ways (counted in place, packed keys sorted, sorted by value then group) give one result
    rng = np.random.default_rng(span)
    group, values = rng.integers(0, 30, 5_000), rng.integers(0, span, 5_000) - span // 2
    pairs = sorted(set(zip(group.tolist(), values.tolist(), strict=True)))
    got_group, got_value, count = histogram(group, values, 30)
    assert list(zip(got_group.tolist(), got_value.tolist(), strict=True)) == pairs
    everyone = list(zip(group.tolist(), values.tolist(), strict=True))
    assert count.tolist() == [everyone.count(p) for p in pairs]


@pytest.mark.parametrize("groups", [3, 400, 70_000])
def test_histograms_of_low_values_with_spikes(groups: int) -> None:
    # latencies: most within a few ms of the lowest, a few spikes far above (counted in place below a
    # cap, the spikes' keys sorted, the two merged by group), and one group past 16 bits
    rng = np.random.default_rng(groups)
    n = 20_000
    group = rng.integers(0, groups, n)
    values = np.exp(rng.normal(1.2, 0.6, n)).astype(np.int64) + 7
    spikes = rng.random(n) < 0.02
    values[spikes] += rng.integers(0, 5_000, int(spikes.sum()))
    everyone = list(zip(group.tolist(), values.tolist(), strict=True))
    pairs = sorted(set(everyone))
    got_group, got_value, count = histogram(group, values, groups)
    assert list(zip(got_group.tolist(), got_value.tolist(), strict=True)) == pairs
    counted: dict[tuple[int, int], int] = {}
    for p in everyone:
        counted[p] = counted.get(p, 0) + 1
    assert count.tolist() == [counted[p] for p in pairs]


def test_lookups_find_key_tuples() -> None:
    keys = [np.array([0, 0, 1, 2]), np.array([5, 7, 5, 5])]
    got = grouping.joint_lookup(keys, [np.array([1, 0, 2, 3]), np.array([5, 7, 6, 5])])
    assert got.tolist() == [2, 1, -1, -1]
    assert grouping.lookup(np.array([], np.int64), np.array([3])).tolist() == [-1]


def test_string_codes_round_trip_with_nulls() -> None:
    codes, names = grouping.string_codes(pa.array(["b", None, "a"]), pa.array(["c", "a"]).dictionary_encode())
    assert names.to_pylist() == ["a", "b", "c"] and codes.tolist() == [1, -1, 0, 2, 0]
    assert grouping.from_codes(codes, names, dictionary=False).to_pylist() == ["b", None, "a", "c", "a"]


def test_regroup_and_running_sums() -> None:
    table = pa.table({"k": ["y", "x", "y"], "n": [1, 2, 3], "t": [5, 6, 4]})
    out = grouping.regroup(table, ("k",), ("n",), ("t",), ())
    assert out.to_pylist() == [{"k": "x", "n": 2, "t": 6}, {"k": "y", "n": 4, "t": 4}]
    assert grouping.running_sum(np.array([0, 0, 1, 1, 1]), np.array([1, 2, 3, 4, 5])).tolist() == [
        1,
        3,
        3,
        7,
        12,
    ]


def test_windows_divide_as_doubles() -> None:
    ts = np.array([-1, 0, 999, 1000, 2_500])
    assert grouping.spark_window(ts, 1000).tolist() == [-1000, 0, 0, 1000, 2000]
    assert grouping.window_index(ts, 700).tolist() == [-1, 0, 1, 1, 3]
    assert grouping.spark_ceil_div(np.array([0, 1, 20, 21]), 20).tolist() == [0, 1, 1, 2]


def test_take_rows_equals_take_over_many_batches() -> None:
    """take_rows takes from each record batch alone (no concatenation of the table's chunks): the rows,
    their order, nulls and strings as Table.take gives them."""
    rng = np.random.default_rng(3)
    batches = [
        pa.record_batch(
            {
                "i": pa.array(rng.integers(0, 1 << 40, n)),
                "s": pa.array([f"v{x}" if x % 3 else None for x in rng.integers(0, 50, n)], pa.string()),
            }
        )
        for n in (5, 0, 17, 1, 30)
    ]
    table = pa.Table.from_batches(batches)
    for rows in (
        rng.permutation(table.num_rows),
        rng.integers(0, table.num_rows, 100),  # repeats
        np.arange(table.num_rows),  # batch by batch already
        np.arange(10, 20),
        np.zeros(0, np.int64),
    ):
        got = grouping.take_rows(table, rows)
        assert got.equals(table.take(pa.array(rows, pa.int64())))
        assert all(c.num_chunks <= 1 for c in got.columns)
    # long runs of consecutive rows (whole batches in another order, runs across a batch boundary):
    # sliced from their batches rather than taken, the same rows
    schema = pa.schema([pa.field("i", pa.int64()), pa.field("s", pa.string())])
    parts = ((0, 300), (300, 0), (300, 500), (800, 200))
    big = pa.Table.from_batches(
        [
            pa.record_batch([np.arange(lo, lo + n), [f"v{x}" for x in range(n)]], schema=schema)
            for lo, n in parts
        ]
    )
    for rows in (
        np.concatenate([np.arange(800, 1000), np.arange(0, 300), np.arange(300, 800)]),
        np.concatenate([np.arange(250, 400), np.arange(900, 1000)]),
        np.arange(1000)[::-1].reshape(10, 100)[:, ::-1].ravel(),  # runs of 100 from the last
    ):
        got = grouping.take_rows(big, rows)
        assert got.equals(big.take(pa.array(rows, pa.int64())))
        assert all(c.num_chunks <= 1 for c in got.columns)
    # many rows: each row's batch looked up by blocks of rows, stepped past the batches that start in a
    # block (batches longer and shorter than a block, empty ones; a block of many tiny ones: the search)
    sizes = (3000, 0, 1, 700, 2, 5000, 0, *([1] * 9), 4000)
    wide = pa.Table.from_batches(
        [pa.record_batch({"i": np.arange(n) + 10 * n}) for n in sizes], pa.schema([("i", pa.int64())])
    )
    for rows in (rng.permutation(wide.num_rows), rng.integers(0, wide.num_rows, 4 * wide.num_rows)):
        assert grouping.take_rows(wide, rows).equals(wide.take(pa.array(rows, pa.int64())))
    single = pa.Table.from_batches(batches[2:3])
    assert grouping.take_rows(single, np.array([3, 0])).equals(single.take([3, 0]))
    with pytest.raises(IndexError):
        grouping.take_rows(table, np.array([table.num_rows]))


def test_take_valid_equals_take_and_refuses_rows_outside() -> None:
    """take_valid checks the rows once itself and has Arrow's take skip its own check: the same rows as
    take (a table, a batch, an array; repeats, nulls, strings, none), and a row outside is an IndexError,
    not memory read past the columns."""
    rng = np.random.default_rng(5)
    n = 40
    values = [f"s{x}" if x % 4 else None for x in rng.integers(0, 9, n)]
    batch = pa.record_batch({"i": pa.array(rng.integers(0, 1 << 50, n)), "s": pa.array(values, pa.string())})
    for data in (pa.Table.from_batches([batch, batch]), batch, batch.column(1)):
        for rows in (rng.permutation(len(data)), rng.integers(0, len(data), 3 * n), np.zeros(0, np.int64)):
            assert grouping.take_valid(data, rows).equals(data.take(pa.array(rows, pa.int64())))
        for outside in (np.array([0, len(data)]), np.array([-1, 3])):
            with pytest.raises(IndexError):
                grouping.take_valid(data, outside)


def test_string_columns_given_as_codes_compare_count_and_cast_as_the_strings() -> None:
    """A broker task's string columns may be dictionary arrays (their codes kept to the Parquet writer):
    ``is_value`` gives the rows the strings give, ``keeping_codes`` casts the rest and keeps the codes,
    ``single_values_coded`` codes only a column of one value and no null."""
    strings = pa.chunked_array([["a", None, "b", "a"], ["b", "b"]], pa.string())
    coded = pa.chunked_array([c.dictionary_encode() for c in strings.chunks])
    plain = [v == "b" for v in strings.to_pylist()]
    assert grouping.is_value(strings, "b").tolist() == plain == grouping.is_value(coded, "b").tolist()
    schema = pa.schema([pa.field("s", pa.string()), pa.field("n", pa.int64())])
    table = pa.table({"s": coded, "n": pa.array(range(6), pa.int32())})
    kept = grouping.keeping_codes(table, schema)
    assert kept.schema.field("s").type == coded.type and kept.schema.field("n").type == pa.int64()
    assert kept.cast(schema).equals(pa.table({"s": strings, "n": pa.array(range(6), pa.int64())}))
    one = pa.table({"a": ["x"] * 3, "b": ["x", "y", "x"], "c": ["x", None, "x"]})
    made = grouping.single_values_coded(one, ["a", "b", "c"])
    assert pa.types.is_dictionary(made.schema.field("a").type)
    assert made.schema.field("b").type == made.schema.field("c").type == pa.string()
    assert made.cast(one.schema).equals(one)


def test_single_values_coded_takes_codes_as_it_takes_strings() -> None:
    """A column given as a dictionary array (codes of a larger dictionary, in chunks) comes out as the
    same column given as strings does: one value (``x`` under codes 0 and 2 of two chunks' dictionaries)
    as the dictionary of that value alone, else (two values, a null, no row) as strings."""

    def codes(values: list[str | None], names: list[str]) -> pa.DictionaryArray:
        idx = pa.array([names.index(v) if v is not None else None for v in values], pa.int8())
        return pa.DictionaryArray.from_arrays(idx, pa.array(names))

    rows = {
        "one": [["x", "x"], ["x"]],
        "two": [["x", "x"], ["y"]],
        "null": [["x", None], ["x"]],
    }
    strings = pa.table({n: pa.chunked_array(v, pa.string()) for n, v in rows.items()})
    coded = pa.table(
        {
            n: pa.chunked_array([codes(v[0], ["x", "y", "z"]), codes(v[1], ["z", "y", "x"])])
            for n, v in rows.items()
        }
    )
    names = list(rows)
    assert grouping.single_values_coded(coded, names).equals(grouping.single_values_coded(strings, names))
    made = grouping.single_values_coded(coded, names)
    assert pa.types.is_dictionary(made.schema.field("one").type) and made.column("one").chunk(
        0
    ).dictionary.to_pylist() == ["x"]
    empty = pa.table({"e": pa.chunked_array([codes([], ["x"])])})
    assert grouping.single_values_coded(empty, ["e"]).schema.field("e").type == pa.string()


def _dictionary(
    rows: list[int | None], names: list[str], index: pa.DataType | None = None
) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(rows, index or pa.int32()), pa.array(names, pa.string()))


@pytest.mark.parametrize(
    "array",
    [
        _dictionary([1, 1, 1, 1], ["sync", "async", "oneway"]),  # one value: its bytes repeated
        _dictionary([0, 3, 2, 1, 3, 0], ["broker-a", "broker-b", "broker-c", "broker-d"]),  # 8-byte words
        _dictionary([2, 0, 1, 2], ["TagA", "TagB", "TagC"]),  # 4-byte words
        _dictionary([0, 1, 1, 0], ["a", "b"]),  # 1-byte words
        _dictionary([0, 1, 2, 0], ["ok", "timeout", "SEND_OK"]),  # mixed widths: the cast
        _dictionary([0, 1, 0], ["abcdef", "ghijkl"]),  # six bytes: the cast
        _dictionary([0, None, 1], ["x", "y"]),  # a null: the cast
        _dictionary([None, None], ["x"]),  # all null
        _dictionary([1, 1], ["", "x"]),
        _dictionary([0, 0], ["", "x"]),  # one empty value
        _dictionary([0, 1, 1, 2], ["x1", "y1", "z1"], pa.int8()),  # narrow codes: the cast
        _dictionary([0, 1, 1, 2, 1, 0], ["x1", "y1", "z1"]).slice(2, 3),  # a slice: the cast
        _dictionary([], ["x"]),
    ],
)
def test_dictionary_strings_are_the_casts_strings(array: pa.DictionaryArray) -> None:
    """``dictionary_strings`` gives the string array Arrow's cast gives: the same values, nulls and
    offsets, a valid array, whichever way it is made."""
    made, cast = grouping.dictionary_strings(array), array.cast(pa.string())
    made.validate(full=True)
    assert made.type == pa.string() and made.equals(cast) and made.null_count == cast.null_count
    if len(array) and not cast.null_count and not array.offset:
        assert [b.to_pybytes() for b in made.buffers()[1:]] == [b.to_pybytes() for b in cast.buffers()[1:]]


def test_as_plain_strings_is_the_tables_cast() -> None:
    """A table of dictionary columns in chunks (each its own dictionary), other columns and metadata, as
    a schema of strings: what ``Table.cast`` gives."""
    codes = pa.chunked_array(
        [_dictionary([0, 1], ["broker-a", "broker-b"]), _dictionary([0, 0], ["broker-c"])]
    )
    table = pa.table({"broker": codes, "n": pa.array([1, 2, 3, 4], pa.int32())})
    schema = pa.schema([pa.field("broker", pa.string()), pa.field("n", pa.int64())], metadata={"k": "v"})
    made = grouping.as_plain_strings(table, schema)
    assert made.equals(table.cast(schema), check_metadata=True)
    assert made.column("broker").to_pylist() == ["broker-a", "broker-b", "broker-c", "broker-c"]
