"""The broker step of the stage: one broker's records from every producer numbered in its write order,
and the ``send_results`` rows that point at them completed with the record's columns
(:data:`RESULT_STORE_COLUMNS`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from rocketsim.broker.store.commit_log import LogSource, broker_indexes, log_rows, with_offsets
from rocketsim.broker.store.copies import key_positions, result_keys
from rocketsim.broker.store.hosts import offset_msg_ids, store_hosts
from rocketsim.scenario import Scenario
from rocketsim.tables.grouping import bools, ints, keeping_codes, string_codes
from rocketsim.tables.schemas import COMMIT_LOG, SEND_RESULTS, data_schema, is_broker_side

RESULTS_DATA = data_schema(SEND_RESULTS)
# the columns send_results gains from the commit-log record it points at
RESULT_STORE_COLUMNS = tuple(f.name for f in SEND_RESULTS if is_broker_side(f))
# how PointedRecords keeps them: strings as codes, numbers as such (with their nulls), the id made again
_POINTED_STRINGS = tuple(
    n for n in RESULT_STORE_COLUMNS if n != "offset_msg_id" and pa.types.is_string(RESULTS_DATA.field(n).type)
)
_POINTED_NUMBERS = tuple(n for n in RESULT_STORE_COLUMNS if n not in ("offset_msg_id", *_POINTED_STRINGS))
OFFSETS = ("queue_offset", "commit_log_offset")
_POINTED_NULLABLE = tuple(n for n in _POINTED_NUMBERS if data_schema(COMMIT_LOG).field(n).nullable)


def pointed_brokers(
    results: pa.Table, log: pa.Table, brokers: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """For some producers' ``results`` (in (producer, seq) order) and their commit-log records
    (:func:`log_records`): (each record's place in ``brokers``, each result's broker: that of the record
    it points at (``is_result``), -1 when it points at none)."""
    key = result_keys(results)
    if len(key) > 1 and not (key[1:] > key[:-1]).all():
        raise AssertionError("pointed_brokers needs results in increasing (producer, seq) order")
    log_broker = broker_indexes(log.column("broker"), brokers)
    is_result = bools(log.column("is_result"))
    pointed = result_keys(log)[is_result]
    at = key_positions(key, pointed)
    if len(at) and (at.max() >= len(key) or not (key[at] == pointed).all()):
        raise AssertionError("a commit-log record points at no result")
    result_broker = np.full(len(key), -1, np.int64)
    result_broker[at] = log_broker[is_result]
    return log_broker, result_broker


def with_null_store_columns(results: pa.Table) -> pa.Table:
    """``send_results`` rows that point at no stored copy: the broker-side columns are null."""
    for name in RESULT_STORE_COLUMNS:
        field = RESULTS_DATA.field(name)
        results = results.append_column(field, pa.nulls(results.num_rows, field.type))
    return results.select(RESULTS_DATA.names).cast(RESULTS_DATA)


def attach_store_columns(results: pa.Table, numbered: pa.Table, sc: Scenario) -> pa.Table:
    """``results`` (each pointing at one record of ``numbered``) with that record's broker-side columns."""
    pointed = PointedRecords(sc.cluster.brokers)
    pointed.add(numbered)
    if pointed.rows != results.num_rows:
        raise AssertionError("send_results rows and the commit-log records they point at do not pair up")
    return pointed.attach(results)


class PointedRecords:
    """The numbered commit-log records that ``send_results`` rows point at (``is_result``), gathered a
    part at a time (:meth:`add`, e.g. of :func:`numbered_chunks`) as what results take of them
    (:data:`RESULT_STORE_COLUMNS`: numbers, strings as codes; the offset message id made again from the
    broker and the offset when attached), sorted by (producer, seq) once, at the first :meth:`attach`;
    :meth:`attach` completes results a part at a time. Among records of one message (more pointed
    records than results allowed), the first added."""

    def __init__(self, brokers: Sequence[str]) -> None:
        self.brokers = list(brokers)
        self.rows = 0
        self._parts: list[dict[str, np.ndarray]] = []
        self._names: dict[str, dict[str, int]] = {n: {} for n in _POINTED_STRINGS}
        self._sorted: dict[str, np.ndarray] | None = None

    def add(self, numbered: pa.Table) -> None:
        """Keep the pointed records of ``numbered`` (``commit_log`` columns)."""
        if self._sorted is not None:
            raise ValueError("PointedRecords.add after attach")
        mask = bools(numbered.column("is_result"))
        if not mask.any():
            return
        part = {"key": result_keys(numbered)[mask]}
        part["broker"] = broker_indexes(numbered.column("broker"), self.brokers)[mask].astype(np.int32)
        for name in _POINTED_STRINGS:
            codes, names = string_codes(numbered.column(name))
            known = self._names[name]
            remap = np.array([known.setdefault(v, len(known)) for v in names.to_pylist()], np.int32)
            part[name] = remap[codes[mask]]
        for name in _POINTED_NUMBERS:
            column = numbered.column(name)
            dtype = RESULTS_DATA.field(name).type.to_pandas_dtype()
            part[name] = np.asarray(column.fill_null(0).to_numpy(), dtype)[mask]
            if name in _POINTED_NULLABLE:
                part[f"{name}.valid"] = bools(column.is_valid())[mask]
        self._parts.append(part)
        self.rows += len(part["key"])

    def _columns(self) -> dict[str, np.ndarray]:
        """The kept columns, sorted by key (stable: the first added first); made once, parts let go."""
        if self._sorted is None:
            names = list(self._parts[0]) if self._parts else []
            cols = {n: np.concatenate([p.pop(n) for p in self._parts]) for n in names}
            self._parts = []
            order = np.argsort(cols["key"], kind="stable") if cols else None
            if order is not None and not (order[1:] > order[:-1]).all():
                cols = {n: c[order] for n, c in cols.items()}
            self._sorted = cols
        return self._sorted

    def attach(self, results: pa.Table) -> pa.Table:
        """``results`` (each pointing at one kept record) with the broker-side columns of its record."""
        cols, wanted = self._columns(), result_keys(results)
        keys = cols.get("key", np.zeros(0, np.int64))
        at = np.searchsorted(keys, wanted)
        paired = not len(at) or (at.max() < len(keys) and (keys[at] == wanted).all())
        if not paired:
            raise AssertionError("send_results rows and the commit-log records they point at do not pair up")
        made: dict[str, pa.Array] = {}
        if len(at):
            for name in _POINTED_STRINGS:
                names = pa.array(list(self._names[name]), pa.string())
                made[name] = names.take(pa.array(cols[name][at]))
            for name in _POINTED_NUMBERS:
                valid = cols.get(f"{name}.valid")
                mask = None if valid is None else ~valid[at]
                made[name] = pa.array(cols[name][at], RESULTS_DATA.field(name).type, mask=mask)
            hosts = store_hosts(self.brokers)
            made["offset_msg_id"] = offset_msg_ids(cols["broker"][at], cols["commit_log_offset"][at], hosts)
        return _completed(results, made)


def _completed(results: pa.Table, made: dict[str, pa.Array]) -> pa.Table:
    """``results`` with the store columns ``made`` (none: ``results`` is empty) as ``send_results`` rows
    (string columns given as dictionary arrays kept so: :func:`rocketsim.tables.grouping.keeping_codes`)."""
    for name in RESULT_STORE_COLUMNS:
        field = RESULTS_DATA.field(name)
        column = made.get(name, pa.array([], field.type))
        results = results.append_column(field.with_type(column.type), column)
    return keeping_codes(results, RESULTS_DATA)


# what PointedOffsets takes again of a pointed record (the rest of the store columns are its offsets)
_RECORD_TAKEN = (
    "producer",
    "seq",
    "broker",
    *(n for n in _POINTED_NUMBERS if n not in OFFSETS),
    *_POINTED_STRINGS,
)


def _unpointed_rows(log: LogSource, piece: int) -> tuple[np.ndarray, int]:
    """The rows of ``log`` that no result points at (not ``is_result``: few, the copies of timed-out
    requests a retry stored again), read ``piece`` at a time, and the rows of ``log``."""
    total = log.num_rows if hasattr(log, "num_rows") else log().num_rows
    found = [np.zeros(0, np.int64)]
    for at in range(0, total, piece):
        if hasattr(log, "slice"):  # mapped, not copied
            is_result = log.slice(at, piece).column("is_result")
        else:
            rows = np.arange(at, min(at + piece, total))
            is_result = log_rows(log, rows, ["is_result"]).column("is_result")
        found.append(at + np.flatnonzero(~bools(is_result)))
    return np.concatenate(found), total


class PointedOffsets:
    """A broker task's results completed from its log (a table or a
    :class:`rocketsim.stage.protocols.RowSource`) with little kept per record: the pointed records
    (``is_result``) pair with the results by their place, the k-th pointed record of the log as given
    with the k-th result as given (both come in (producer, seq) order, producer task after producer task:
    :class:`rocketsim.stage.producer.ProducerSinks`). Kept: the rows no result points at (few: a pointed
    record's place among the pointed ones is its row less the unpointed rows before it, and back), and
    per result the two offsets the numbering gave its record (:meth:`add`, a numbered part at a time);
    :meth:`attach` takes the record's other columns from the log again and checks that each pair is one
    message. The log is read ``piece`` records at a time."""

    def __init__(self, log: LogSource, brokers: Sequence[str], piece: int = 1 << 17) -> None:
        self.log, self.brokers, self.numbered = log, list(brokers), 0
        self.unpointed, total = _unpointed_rows(log, piece)
        # per unpointed row, the pointed rows before it: where the pointed places jump a row
        self._before = self.unpointed - np.arange(len(self.unpointed))
        # a queue offset is below the log's rows: int32 when they fit (a commit-log offset counts bytes)
        kept = {"queue_offset": np.int32 if total < 1 << 31 else np.int64, "commit_log_offset": np.int64}
        self.offsets = {name: np.zeros(total - len(self.unpointed), kept[name]) for name in OFFSETS}

    @property
    def results(self) -> int:
        """The results the log's records pair with."""
        return len(self.offsets["queue_offset"])

    def _places(self, rows: np.ndarray) -> np.ndarray:
        """Each pointed record's place among the pointed records, from its row."""
        return rows - np.searchsorted(self.unpointed, rows) if len(self.unpointed) else rows

    def _rows(self, places: np.ndarray) -> np.ndarray:
        """The rows of the pointed records at ``places`` (:meth:`_places` the other way)."""
        return places + np.searchsorted(self._before, places, "right") if len(self.unpointed) else places

    def add(self, numbered: pa.Table, rows: np.ndarray) -> None:
        """Keep the offsets of the pointed records of ``numbered`` (a part of :func:`numbered_parts`, the
        log's rows ``rows``)."""
        mask = bools(numbered.column("is_result"))
        place = self._places(np.asarray(rows, np.int64)[mask])
        for name in OFFSETS:
            self.offsets[name][place] = ints(numbered, name)[mask]
        self.numbered += len(place)

    def attach(self, results: pa.Table, rows: np.ndarray) -> pa.Table:
        """``results`` (the results' rows ``rows``) with the broker-side columns of their records."""
        if self.numbered != self.results:
            raise ValueError("PointedOffsets.attach before every record was numbered")
        if not len(rows):
            return _completed(results, {})
        records = log_rows(self.log, self._rows(np.asarray(rows, np.int64)), _RECORD_TAKEN)
        if not np.array_equal(result_keys(records), result_keys(results)):
            raise AssertionError("send_results rows and the commit-log records they point at do not pair up")
        made = {
            name: records.column(name)
            for name in (*_POINTED_NUMBERS, *_POINTED_STRINGS)
            if name not in OFFSETS
        }
        for name in OFFSETS:
            made[name] = pa.array(self.offsets[name][rows], RESULTS_DATA.field(name).type)
        index = broker_indexes(records.column("broker"), self.brokers)
        made["offset_msg_id"] = offset_msg_ids(
            index, self.offsets["commit_log_offset"][rows], store_hosts(self.brokers)
        )
        return _completed(results, made)


def number_broker(log: pa.Table, results: pa.Table, sc: Scenario) -> tuple[pa.Table, pa.Table]:
    """The broker step: one broker's records from every producer (:data:`LOG_COLUMNS`) and the results
    that point at them -> (its ``commit_log`` rows, those results with their store columns)."""
    numbered = with_offsets(log, sc)
    return numbered, attach_store_columns(results, numbered, sc)
