"""What a producer task hands on to the broker tasks, narrower than the rows it stands for.

Each group of the scratch is one broker's (:class:`rocketsim.stage.producer.ProducerSinks`), so the
records' ``broker`` column is not written: the broker task knows it. Nor are the records' columns only
delayed and half records fill (:data:`MOVED_COLUMNS`) when the workload sends neither delay nor
transaction messages (null then), nor the results' columns that are differences of two others
(:data:`DERIVED_RESULTS`) or null on every result the scratch holds (:data:`UNSTORED_ERROR`), both
checked as they are written. :func:`log_scratch_schema` and
:data:`RESULTS_SCRATCH` are what is written; :class:`FilledRows` gives a broker task the rows with those
columns back. The scratch is internal: no table changes, and less of it is written, mapped and taken.
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
# filled only for delayed and half records (rocketsim.broker.store.store_records), null for the others
MOVED_COLUMNS = ("real_topic", "real_queue_id", "delay_level", "deliver_ts_ms")
# the workload's message types whose records are delayed or halves
_MOVED_TYPES = ("delay", "transaction")
# results' columns that are one column less another (send_results' definitions)
DERIVED_RESULTS = {"queue_wait_ms": ("send_ts_ms", "born_ts_ms"), "latency_ms": ("end_ts_ms", "send_ts_ms")}
# a FAILED or REJECTED send's text: null on every result that points at a record (those the scratch has)
UNSTORED_ERROR = "error"
RESULTS_SCRATCH = pa.schema([f for f in RESULTS_CORE if f.name not in (*DERIVED_RESULTS, UNSTORED_ERROR)])


def log_scratch_schema(sc: Scenario) -> pa.Schema:
    """The columns of :data:`rocketsim.broker.store.LOG_COLUMNS` a producer task writes to the scratch
    for ``sc``: all but ``broker``, and but :data:`MOVED_COLUMNS` when ``sc``'s workload has no delay
    or transaction messages."""
    left_out = {"broker"}
    if not any(sc.workload.message_types.get(t, 0) > 0 for t in _MOVED_TYPES):
        left_out.update(MOVED_COLUMNS)
    return pa.schema([f for f in store.LOG_COLUMNS if f.name not in left_out])


def scratch_log(log: pa.Table, schema: pa.Schema) -> pa.Table:
    """Records (``LOG_COLUMNS``) as :func:`log_scratch_schema`'s ``schema``; AssertionError when a moved
    column it leaves out holds a value (the workload's types said it could not)."""
    for name in MOVED_COLUMNS:
        if name not in schema.names and log.column(name).null_count != log.num_rows:
            raise AssertionError(f"a commit-log record has a {name}, which the scratch leaves out")
    return log.select(schema.names)


def scratch_results(results: pa.Table, stored: np.ndarray) -> pa.Table:
    """Results (:data:`RESULTS_CORE`, of which rows ``stored`` point at a record and go to the scratch)
    as :data:`RESULTS_SCRATCH`; AssertionError when a column of :data:`DERIVED_RESULTS` is not the
    difference it is made from again, or a stored result has an error."""
    for name, (a, b) in DERIVED_RESULTS.items():
        kept, made = results.column(name), pc.subtract(results.column(a), results.column(b))
        same = pc.equal(kept, made)  # null where either is: equal null counts mean the same rows null
        nulls_agree = same.null_count == kept.null_count == made.null_count
        if results.num_rows and not (nulls_agree and pc.all(same).as_py()):
            raise AssertionError(f"send_results.{name} is not {a} - {b}, which the scratch relies on")
    error = results.column(UNSTORED_ERROR)
    if error.null_count != len(error) and bools(error.is_valid())[stored].any():
        raise AssertionError("a send_results row pointing at a record has an error")
    return results.select(RESULTS_SCRATCH.names)


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
    :meth:`take` gives the string columns ``coded`` as dictionary arrays (a stored one encoded once a
    take; a made one asked ``as_codes``), for readers that would encode them again; a slice or the whole
    gives strings."""

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
        arrays (the others' ``made`` strings)."""
        have = set(rows.column_names)
        out = {}
        for c in columns:
            if c not in have:
                out[c] = self.made(rows, c, c in coded)
            elif c in coded:
                out[c] = pc.dictionary_encode(rows.column(c).combine_chunks())
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
