"""What a producer task hands on to the broker tasks, narrower than the rows it stands for.

Each group of the scratch is one broker's (:class:`rocketsim.stage.producer.ProducerSinks`), so the
records' ``broker`` column is not written: the broker task knows it. Nor are the records' columns only
delayed and half records fill (:data:`MOVED_COLUMNS`) when the workload sends neither delay nor
transaction messages (null then), nor the results' columns that are differences of two others
(:data:`DERIVED_RESULTS`) or null on every result the scratch holds (:data:`UNSTORED_ERROR`), both
checked as they are written. The string columns of few values (:data:`CODED_SCRATCH`) are written as
dictionary arrays of one or two bytes a row: one dictionary a file, grown as new values come
(:class:`ScratchCodes`; the file holds its additions as dictionary deltas). :func:`log_scratch_schema`
and :data:`RESULTS_SCRATCH` are what is written; :class:`FilledRows` gives a broker task the rows with
the left-out columns back, the coded ones as dictionary arrays (a take numbers a column's values in the
order they first come, as :func:`pyarrow.compute.dictionary_encode` of its strings would). The scratch
is internal: no table changes, and less of it is written, mapped and taken.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim.broker import store
from rocketsim.scenario import Scenario
from rocketsim.stage.protocols import RowSource
from rocketsim.tables import schemas
from rocketsim.tables.grouping import bools

RESULTS_CORE = schemas.without_run_id(schemas.SEND_RESULTS)  # what the simulation returns
# the string columns of few values written as dictionary arrays, and the width of their codes: the
# workload's few types and modes, the statuses; the cluster's brokers and the topics (with the delay and
# half topics) might be more than a byte numbers
CODED_SCRATCH = {
    "store_topic": pa.int16(),
    "message_type": pa.int8(),
    "send_mode": pa.int8(),
    "status": pa.int8(),
    "broker": pa.int16(),
}
# filled only for delayed and half records (rocketsim.broker.store.store_records), null for the others
MOVED_COLUMNS = ("real_topic", "real_queue_id", "delay_level", "deliver_ts_ms")
# the workload's message types whose records are delayed or halves
_MOVED_TYPES = ("delay", "transaction")
# results' columns that are one column less another (send_results' definitions)
DERIVED_RESULTS = {"queue_wait_ms": ("send_ts_ms", "born_ts_ms"), "latency_ms": ("end_ts_ms", "send_ts_ms")}
# a FAILED or REJECTED send's text: null on every result that points at a record (those the scratch has)
UNSTORED_ERROR = "error"


def _coded(fields: Sequence[pa.Field]) -> pa.Schema:
    """``fields`` with those of :data:`CODED_SCRATCH` as dictionary arrays of strings."""
    coded = {n: pa.dictionary(index, pa.string()) for n, index in CODED_SCRATCH.items()}
    return pa.schema([f.with_type(coded[f.name]) if f.name in coded else f for f in fields])


RESULTS_SCRATCH = _coded([f for f in RESULTS_CORE if f.name not in (*DERIVED_RESULTS, UNSTORED_ERROR)])


def log_scratch_schema(sc: Scenario) -> pa.Schema:
    """The columns of :data:`rocketsim.broker.store.LOG_COLUMNS` a producer task writes to the scratch
    for ``sc``: all but ``broker``, and but :data:`MOVED_COLUMNS` when ``sc``'s workload has no delay
    or transaction messages; those of :data:`CODED_SCRATCH` as dictionary arrays."""
    left_out = {"broker"}
    if not any(sc.workload.message_types.get(t, 0) > 0 for t in _MOVED_TYPES):
        left_out.update(MOVED_COLUMNS)
    return _coded([f for f in store.LOG_COLUMNS if f.name not in left_out])


def scratch_log(log: pa.Table, schema: pa.Schema, codes: ScratchCodes | None = None) -> pa.Table:
    """Records (``LOG_COLUMNS``) as :func:`log_scratch_schema`'s ``schema`` (``codes``: the file's
    dictionaries, None: this table's own); AssertionError when a moved column it leaves out holds a
    value (the workload's types said it could not)."""
    for name in MOVED_COLUMNS:
        if name not in schema.names and log.column(name).null_count != log.num_rows:
            raise AssertionError(f"a commit-log record has a {name}, which the scratch leaves out")
    return (codes or ScratchCodes()).coded(log.select(schema.names), schema)


def scratch_results(results: pa.Table, stored: np.ndarray, codes: ScratchCodes | None = None) -> pa.Table:
    """Results (:data:`RESULTS_CORE`, their string columns strings or dictionary arrays; rows ``stored``
    point at a record and go to the scratch) as :data:`RESULTS_SCRATCH` (``codes`` as
    :func:`scratch_log`'s); AssertionError when a column of :data:`DERIVED_RESULTS` is not the difference
    it is made from again, or a stored result has an error."""
    for name, (a, b) in DERIVED_RESULTS.items():
        kept, made = results.column(name), pc.subtract(results.column(a), results.column(b))
        same = pc.equal(kept, made)  # null where either is: equal null counts mean the same rows null
        nulls_agree = same.null_count == kept.null_count == made.null_count
        if results.num_rows and not (nulls_agree and pc.all(same).as_py()):
            raise AssertionError(f"send_results.{name} is not {a} - {b}, which the scratch relies on")
    error = results.column(UNSTORED_ERROR)
    if error.null_count != len(error) and bools(error.is_valid())[stored].any():
        raise AssertionError("a send_results row pointing at a record has an error")
    return (codes or ScratchCodes()).coded(results.select(RESULTS_SCRATCH.names), RESULTS_SCRATCH)


class ScratchCodes:
    """The dictionaries of one scratch file's coded columns (:data:`CODED_SCRATCH`): each value numbered
    as it first comes, so that the dictionary a part is written with starts with the one of the part
    before (an IPC file holds one dictionary a column; what a part adds is written as a delta)."""

    def __init__(self) -> None:
        self._numbers: dict[str, dict[str, int]] = {}
        self._dictionaries: dict[str, pa.Array] = {}

    def coded(self, table: pa.Table, schema: pa.Schema) -> pa.Table:
        """``table`` (``schema``'s columns, its coded ones strings or dictionary arrays) as ``schema``."""
        for at, f in enumerate(schema):
            if pa.types.is_dictionary(f.type):
                table = table.set_column(at, f, self._codes(f.name, table.column(at), f.type.index_type))
        return table.cast(schema)

    def _codes(self, name: str, column: pa.ChunkedArray, index: pa.DataType) -> pa.DictionaryArray:
        """``column``'s values as codes of the file's dictionary of ``name`` (grown by the new ones): a
        dictionary array's few values looked up, a string column of one value compared, else encoded."""
        numbers = self._numbers.setdefault(name, {})
        parts = [np.zeros(0, np.int64)]
        for chunk in column.chunks:
            if not pa.types.is_dictionary(chunk.type):
                if len(chunk) and not chunk.null_count and pc.all(pc.equal(chunk, chunk[0])).as_py():
                    parts.append(np.full(len(chunk), self._number(numbers, chunk[0].as_py()), np.int64))
                    continue
                chunk = pc.dictionary_encode(chunk)
            lookup = np.array([self._number(numbers, v) for v in chunk.dictionary.to_pylist()], np.int64)
            idx = np.asarray(chunk.indices.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
            parts.append(lookup[idx] if len(lookup) else idx)
        if len(numbers) > np.iinfo(index.to_pandas_dtype()).max + 1:
            raise AssertionError(f"the scratch's {name} has more values than its {index} codes number")
        if name not in self._dictionaries or len(self._dictionaries[name]) != len(numbers):
            self._dictionaries[name] = pa.array(list(numbers), pa.string())
        codes = np.concatenate(parts).astype(index.to_pandas_dtype())
        mask = ~bools(column.is_valid()) if column.null_count else None
        return pa.DictionaryArray.from_arrays(pa.array(codes, mask=mask), self._dictionaries[name])

    @staticmethod
    def _number(numbers: dict[str, int], value: str | None) -> int:
        if value is None:  # a dictionary of no null value: never here
            raise AssertionError("a null value in a dictionary")
        return numbers.setdefault(value, len(numbers))


def first_seen_codes(column: pa.ChunkedArray | pa.Array) -> pa.DictionaryArray:
    """A dictionary column as :func:`pyarrow.compute.dictionary_encode` of its strings gives it: its
    values in the order they first come (those it does not use left out), int32 codes."""
    chunk = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    used = pc.unique(chunk.indices).drop_null()
    idx = np.asarray(chunk.indices.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
    place = np.zeros(len(chunk.dictionary), np.int32)
    place[np.asarray(used.to_numpy(), np.int64)] = np.arange(len(used), dtype=np.int32)
    codes = place[idx] if len(place) else idx.astype(np.int32)
    mask = ~bools(chunk.is_valid()) if chunk.null_count else None
    return pa.DictionaryArray.from_arrays(pa.array(codes, mask=mask), chunk.dictionary.take(used))


# the records' columns a broker task takes as dictionary arrays (broker_log's ``coded``): read by its
# numbering, its counts, its broker side and the Parquet writer, each of which would encode them again
CODED_LOG = ("broker", "store_topic")


def broker_log(source: RowSource, schema: pa.Schema, broker: str, coded: Sequence[str] = ()) -> FilledRows:
    """Broker ``broker``'s records from the scratch (``source``: rows of :func:`log_scratch_schema`'s
    ``schema``) as ``LOG_COLUMNS`` rows: its name on every row, the moved columns null; the string columns
    ``coded`` (of :data:`CODED_LOG`) taken as dictionary arrays (:class:`FilledRows`)."""
    made = _Constant(broker, [f for f in store.LOG_COLUMNS if f.name not in schema.names])

    def column(rows: pa.Table, name: str, as_codes: bool) -> pa.Array | pa.ChunkedArray:
        if name == "broker" and as_codes:  # one value: codes 0, no string made or encoded
            return pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows.num_rows, np.int32)), [broker])
        return made.column(rows.num_rows, name)

    return FilledRows(source, schema, store.LOG_COLUMNS, column, coded=coded)


def broker_results(source: RowSource) -> FilledRows:
    """Results from the scratch (``source``: rows of :data:`RESULTS_SCRATCH`) as :data:`RESULTS_CORE`
    rows: :data:`DERIVED_RESULTS` made again, no error."""

    def made(rows: pa.Table, name: str, as_codes: bool) -> pa.Array | pa.ChunkedArray:
        if name == UNSTORED_ERROR:
            return pa.nulls(rows.num_rows, RESULTS_CORE.field(name).type)
        a, b = DERIVED_RESULTS[name]
        return pc.subtract(rows.column(a), rows.column(b))

    return FilledRows(source, RESULTS_SCRATCH, RESULTS_CORE, made, DERIVED_RESULTS)


class FilledRows:
    """A :class:`rocketsim.stage.protocols.RowSource` of ``full``'s rows over ``source`` (rows of
    ``stored``, some of ``full``'s columns): a column ``stored`` has not is ``made(rows, name,
    as_codes)`` of the stored columns taken (with those it ``needs``), made only when asked for.
    :meth:`take` gives the string columns ``coded`` as dictionary arrays numbered as the take's values first
    come (:func:`first_seen_codes`; a made one asked ``as_codes``), for readers that would encode them
    again; a slice, the whole and the other columns of a take give the stored dictionary arrays as they
    are (:data:`CODED_SCRATCH`: their values those of the strings)."""

    def __init__(
        self,
        source: RowSource,
        stored: pa.Schema,
        full: pa.Schema,
        made: Callable[[pa.Table, str, bool], pa.Array | pa.ChunkedArray],
        needs: Mapping[str, Sequence[str]] | None = None,
        coded: Sequence[str] = (),
    ) -> None:
        self.source, self.stored, self.full, self.made = source, stored, full, made
        self.needs = needs or {}
        self.coded = frozenset(coded)

    @property
    def num_rows(self) -> int:
        return self.source.num_rows

    def __call__(self) -> pa.Table:
        return self._filled(self.source(), self.full.names)

    def take(self, rows: np.ndarray, columns: Sequence[str]) -> pa.Table:
        wanted = set(columns).union(*(self.needs.get(c, ()) for c in columns))
        return self._filled(
            self.source.take(rows, [c for c in self.stored.names if c in wanted]), columns, self.coded
        )

    def slice(self, start: int, length: int) -> pa.Table:
        return self._filled(self.source.slice(start, length), self.full.names)

    def pieces(self, column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.source.pieces(column)

    def let_go(self) -> None:
        self.source.let_go()

    def _filled(
        self, rows: pa.Table, columns: Sequence[str], coded: frozenset[str] = frozenset()
    ) -> pa.Table:
        """``columns`` of ``rows`` (stored columns), those it has not made; those ``coded`` as dictionary
        arrays numbered as their values first come (the others' ``made`` strings)."""
        have = set(rows.column_names)
        out = {}
        for c in columns:
            if c not in have:
                out[c] = self.made(rows, c, c in coded)
            elif c in coded:  # stored as codes of the file's dictionary: numbered as the take's
                column = rows.column(c)
                if pa.types.is_dictionary(column.type):
                    out[c] = first_seen_codes(column)
                else:
                    out[c] = pc.dictionary_encode(column.combine_chunks())
            else:
                out[c] = rows.column(c)
        fields = [self.full.field(c) for c in columns]
        return pa.table(out, schema=pa.schema([f.with_type(out[f.name].type) for f in fields]))


class _Constant:
    """The records' columns the scratch leaves out (``fields``), for a number of rows: ``broker`` the
    broker's name on every row, the others null; made once for the most rows asked so far."""

    def __init__(self, broker: str, fields: Sequence[pa.Field]) -> None:
        self.broker, self.fields = broker, list(fields)
        self.made: pa.Table | None = None

    def column(self, rows: int, name: str) -> pa.ChunkedArray:
        if self.made is None or self.made.num_rows < rows:
            columns = {
                f.name: _repeated(self.broker, rows) if f.name == "broker" else pa.nulls(rows, f.type)
                for f in self.fields
            }
            self.made = pa.table(columns, schema=pa.schema(self.fields))
        return self.made.column(name).slice(0, rows)


def _repeated(value: str, rows: int) -> pa.ChunkedArray:
    """``value`` on each of ``rows`` rows, as strings made from their buffers (``pa.repeat`` makes one
    row at a time), in chunks of at most :data:`_PIECE` rows whose offsets fit an int32."""
    data = value.encode()
    piece = max(1, min(rows, _PIECE, ((1 << 31) - 1) // max(len(data), 1)))
    offsets = pa.py_buffer((np.arange(piece + 1, dtype=np.int64) * len(data)).astype(np.int32))
    one = pa.StringArray.from_buffers(piece, offsets, pa.py_buffer(np.frombuffer(data * piece, np.uint8)))
    chunks = [one] * (rows // piece) + ([one.slice(0, rows % piece)] if rows % piece else [])
    return pa.chunked_array(chunks, pa.string())


_PIECE = 1 << 20  # rows of a chunk of _repeated at most
