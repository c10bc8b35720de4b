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
    MOVED_COLUMNS,
    RESULTS_CORE,
    RESULTS_SCRATCH,
    broker_log,
    broker_results,
    log_scratch_schema,
    scratch_log,
    scratch_results,
)


@pytest.fixture(scope="module")
def producer(mixed: Scenario) -> tables.ProducerTables:
    """The mixed scenario's producer 0: delayed and half records, stored and unstored results."""
    share = workload.producer_shares(mixed)[0]
    return tables.producer_tables(mixed, tables.producer_messages(mixed, share))


def _without_moved_types() -> Scenario:
    mapping = copy.deepcopy(MIXED)
    mapping["workload"]["message_types"] = {"normal": 0.8, "ordered": 0.1, "batch": 0.1}
    return scenario_from_mapping(mapping)


def _same_rows(source: object, whole: pa.Table) -> None:
    """``source`` (a RowSource over the scratch) gives ``whole``'s rows, taken, sliced and whole."""
    rows = np.random.default_rng(3).permutation(whole.num_rows)[: max(1, whole.num_rows // 2)]
    assert source.num_rows == whole.num_rows
    assert source.take(rows, whole.column_names).equals(whole.take(pa.array(rows)))
    part = ["seq", whole.column_names[0]]  # a few columns, in another order
    assert source.take(rows, part).equals(whole.select(part).take(pa.array(rows)))
    assert source.slice(1, 5).equals(whole.slice(1, 5))
    assert source().equals(whole)


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
    """A broker task takes ``broker`` and ``store_topic`` as dictionary arrays (CODED_LOG): the same rows
    as strings, whatever rows are taken; a slice or the whole still gives strings."""
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
    assert source.slice(2, 7).equals(records.slice(2, 7))


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
