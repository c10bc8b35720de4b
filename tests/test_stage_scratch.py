"""What a producer task hands the broker tasks (:mod:`rocketsim.stage.scratch`): narrower than the rows,
and given back whole. A broker's records and the results pointing at them, written as the scratch and
read back through :func:`broker_log` / :func:`broker_results`, are the rows they were (any rows, any
order, a range, whole); what the scratch leaves out is checked as it is written."""

from __future__ import annotations

import copy

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import MIXED

from rocketsim.broker import store
from rocketsim.scenario import Scenario, scenario_from_mapping, workload
from rocketsim.stage import tables
from rocketsim.stage.memory import TableSource
from rocketsim.stage.scratch import (
    CODED_LOG,
    CODED_SCRATCH,
    MOVED_COLUMNS,
    RESULTS_CORE,
    RESULTS_SCRATCH,
    ScratchCodes,
    broker_log,
    broker_results,
    first_seen_codes,
    log_scratch_schema,
    scratch_log,
    scratch_results,
)
from rocketsim.warehouse.files import IpcGroupsSink, ipc_group_source


@pytest.fixture(scope="module")
def producer(mixed: Scenario) -> tables.ProducerTables:
    """The mixed scenario's producer 0: delayed and half records, stored and unstored results."""
    share = workload.producer_shares(mixed)[0]
    return tables.producer_tables(mixed, tables.producer_messages(mixed, share))


def _without_moved_types() -> Scenario:
    mapping = copy.deepcopy(MIXED)
    mapping["workload"]["message_types"] = {"normal": 0.8, "ordered": 0.1, "batch": 0.1}
    return scenario_from_mapping(mapping)


def _as_strings(table: pa.Table, whole: pa.Table) -> pa.Table:
    """``table`` with ``whole``'s types (its columns that the scratch codes as dictionary arrays, strings)."""
    coded = [n for n in table.column_names if pa.types.is_dictionary(table.schema.field(n).type)]
    assert set(coded) <= set(CODED_SCRATCH)
    return table.cast(pa.schema([whole.schema.field(n) for n in table.column_names]))


def _same_rows(source: object, whole: pa.Table) -> None:
    """``source`` (a RowSource over the scratch) gives ``whole``'s rows, taken, sliced and whole (the
    coded columns as dictionary arrays of the same values)."""
    rows = np.random.default_rng(3).permutation(whole.num_rows)[: max(1, whole.num_rows // 2)]
    assert source.num_rows == whole.num_rows
    assert _as_strings(source.take(rows, whole.column_names), whole).equals(whole.take(pa.array(rows)))
    part = ["seq", whole.column_names[0]]  # a few columns, in another order
    assert _as_strings(source.take(rows, part), whole).equals(whole.select(part).take(pa.array(rows)))
    assert _as_strings(source.slice(1, 5), whole).equals(whole.slice(1, 5))
    assert _as_strings(source(), whole).equals(whole)


def test_a_brokers_records_come_back_whole(mixed: Scenario, producer: tables.ProducerTables) -> None:
    schema = log_scratch_schema(mixed)
    assert "broker" not in schema.names and set(MOVED_COLUMNS) <= set(schema.names)  # delays, halves
    for b, name in enumerate(mixed.cluster.brokers):
        records = producer.log.filter(pa.array(producer.log_broker == b))
        written = scratch_log(records, schema)
        assert written.schema.equals(schema) and written.num_columns < records.num_columns
        _same_rows(broker_log(TableSource(written), schema, name), records)


def test_a_brokers_records_taken_as_codes_are_the_same_rows(
    mixed: Scenario, producer: tables.ProducerTables
) -> None:
    """A broker task takes ``broker`` and ``store_topic`` as dictionary arrays (CODED_LOG) numbered as
    ``dictionary_encode`` of the taken strings numbers them, whatever rows are taken; a slice gives the
    scratch's codes."""
    schema = log_scratch_schema(mixed)
    b = 1
    records = producer.log.filter(pa.array(producer.log_broker == b))
    written = TableSource(scratch_log(records, schema))
    source = broker_log(written, schema, mixed.cluster.brokers[b], CODED_LOG)
    assert pc.any(pc.equal(records.column("store_topic"), store.HALF_TOPIC)).as_py()  # topics differ
    rows = np.random.default_rng(5).permutation(records.num_rows)[: records.num_rows // 2]
    taken = source.take(rows, records.column_names)
    assert all(pa.types.is_dictionary(taken.schema.field(c).type) for c in CODED_LOG)
    assert len(taken.column("broker").chunk(0).dictionary) == 1
    assert taken.cast(records.schema).equals(records.take(pa.array(rows)))
    topics = records.column("store_topic").take(pa.array(rows)).combine_chunks()
    assert (
        taken.column("store_topic").chunk(0).equals(pc.dictionary_encode(topics))
    )  # the writer's dictionary
    assert _as_strings(source.slice(2, 7), records).equals(records.slice(2, 7))


def test_without_delay_or_transaction_messages_the_moved_columns_stay_out(
    producer: tables.ProducerTables,
) -> None:
    sc = _without_moved_types()
    schema = log_scratch_schema(sc)
    assert not set(MOVED_COLUMNS) & set(schema.names)
    moved = pc.is_valid(producer.log.column("real_queue_id"))
    assert pc.any(moved).as_py()  # the mixed producer's records have some: the scratch refuses them
    with pytest.raises(AssertionError, match="which the scratch leaves out"):
        scratch_log(producer.log, schema)
    plain = producer.log.filter(pc.invert(moved))
    records = plain.filter(pc.equal(plain.column("broker"), sc.cluster.brokers[0]))
    _same_rows(broker_log(TableSource(scratch_log(records, schema)), schema, sc.cluster.brokers[0]), records)


def test_the_results_come_back_whole(producer: tables.ProducerTables) -> None:
    rows, _ = producer.stored_result_rows()
    stored = producer.results.take(pa.array(rows))
    written = scratch_results(producer.results, rows).take(pa.array(rows))
    assert written.schema.equals(RESULTS_SCRATCH) and len(RESULTS_SCRATCH) < len(RESULTS_CORE)
    assert pa.types.is_dictionary(RESULTS_SCRATCH.field("status").type)
    assert pc.any(pc.is_valid(producer.results.column("error"))).as_py()  # the unstored ones have errors
    _same_rows(broker_results(TableSource(written)), stored)


def test_results_the_scratch_cannot_make_again_are_refused(producer: tables.ProducerTables) -> None:
    rows, _ = producer.stored_result_rows()
    results = producer.results
    latency = np.asarray(results.column("latency_ms").to_numpy()).copy()
    latency[rows[0]] += 1
    at = results.schema.get_field_index("latency_ms")
    with pytest.raises(AssertionError, match="latency_ms is not end_ts_ms - send_ts_ms"):
        scratch_results(results.set_column(at, "latency_ms", pa.array(latency)), rows)
    error = pa.array(["an error" if i == rows[0] else None for i in range(results.num_rows)], pa.string())
    at = results.schema.get_field_index("error")
    with pytest.raises(AssertionError, match="has an error"):
        scratch_results(results.set_column(at, "error", error), rows)


_CODED_PART = pa.schema([("seq", pa.int64()), ("status", pa.dictionary(pa.int8(), pa.string()))])
_STRING_PART = pa.schema([("seq", pa.int64()), ("status", pa.string())])


def _engine_coded(values: list[str], names: list[str], nulls: list[bool]) -> pa.DictionaryArray:
    """``values`` as codes of ``names`` (an engine's fixed dictionary, with values no row uses), nulls
    where ``nulls``."""
    codes = pa.array(
        [names.index(v) if v is not None else 0 for v in values], pa.int32(), mask=np.array(nulls)
    )
    return pa.DictionaryArray.from_arrays(codes, pa.array(names))


def test_a_files_dictionaries_grow_part_by_part(tmp_path: object) -> None:
    """A scratch file's coded column: each part's values numbered on from the parts before, whether they
    come as strings (of one value, none, or several) or as another dictionary's codes (with a null); the
    file (one dictionary, its additions written as deltas) gives every group's rows back."""
    parts = [
        pa.array(["SEND_OK"] * 4),
        pa.array([], pa.string()),  # a part of no row: the file's dictionary kept, not replaced
        pa.array(["FLUSH_DISK_TIMEOUT", "SEND_OK", "FLUSH_DISK_TIMEOUT"]),
        _engine_coded(
            ["SLAVE_NOT_AVAILABLE", None, "SEND_OK", "FLUSH_DISK_TIMEOUT", "SEND_OK"],
            ["SEND_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"],
            [False, True, False, False, False],
        ),
    ]
    codes, written, seq = ScratchCodes(), [], 0
    sink = IpcGroupsSink(f"{tmp_path}/part.arrow", _CODED_PART, 2)
    dictionaries = []
    for status in parts:
        table = pa.table({"seq": np.arange(seq, seq + len(status)), "status": status})
        seq += len(status)
        coded = codes.coded(table, _CODED_PART)
        assert coded.schema.equals(_CODED_PART)
        dictionaries.append(coded.column("status").chunk(0).dictionary.to_pylist())
        assert _as_strings(
            coded, table.cast(pa.schema([("seq", pa.int64()), ("status", pa.string())]))
        ).equals(table.cast(pa.schema([("seq", pa.int64()), ("status", pa.string())])))
        group = np.arange(len(status)) % 2
        sink.write(coded, group)
        written.append((table, group))
    sink.close()
    for before, after in zip(dictionaries, dictionaries[1:], strict=False):
        assert after[: len(before)] == before  # grown, never renumbered
    assert dictionaries[-1] == ["SEND_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"]
    for g in range(2):
        back = ipc_group_source([f"{tmp_path}/part.arrow"], g, _CODED_PART, 2)()
        expected = pa.concat_tables([t.cast(_STRING_PART).filter(pa.array(k == g)) for t, k in written])
        assert back.cast(_STRING_PART).equals(expected)


def test_a_files_codes_are_bounded_by_their_width() -> None:
    table = pa.table({"seq": np.arange(129), "status": pa.array([f"s{i}" for i in range(129)])})
    with pytest.raises(AssertionError, match="more values than its int8 codes"):
        ScratchCodes().coded(table, _CODED_PART)


def test_first_seen_codes_number_values_as_the_strings_encoding_does() -> None:
    """A dictionary column (values no row uses, a null, two chunks of two dictionaries) renumbered as
    ``dictionary_encode`` of its strings: the dictionary the Parquet writer is given, as before."""
    a = _engine_coded(["c", "a", None, "c"], ["a", "b", "c", "d"], [False, False, True, False])
    b = _engine_coded(["d", "a"], ["d", "c", "a"], [False, False])
    column = pa.chunked_array([a, b])
    made = first_seen_codes(column)
    expected = pc.dictionary_encode(column.cast(pa.string()).combine_chunks())
    assert made.equals(expected) and made.dictionary.to_pylist() == ["c", "a", "d"]


def test_the_engines_codes_give_the_scratch_the_strings_give(mixed: Scenario) -> None:
    """Results whose ``status`` and ``broker`` come as the engine's codes (a chunk of the compiled
    engine's stream) write the same scratch rows as their strings."""
    share = workload.producer_shares(mixed)[0]
    chunk = next(tables.producer_chunks(mixed, [tables.producer_messages(mixed, share)]))
    assert chunk.coded is not None
    assert pa.types.is_dictionary(chunk.coded_results().schema.field("status").type)
    rows, _ = chunk.stored_result_rows()
    from_codes = scratch_results(chunk.coded_results(), rows)
    from_strings = scratch_results(chunk.results, rows)
    assert from_codes.schema.equals(RESULTS_SCRATCH)
    strings = pa.schema([RESULTS_CORE.field(n) for n in RESULTS_SCRATCH.names])
    assert from_codes.cast(strings).equals(from_strings.cast(strings))
