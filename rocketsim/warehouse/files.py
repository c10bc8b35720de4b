"""Parquet and Arrow IPC files, each written under a temporary name in its folder and then renamed, so a
reader (or a task that Spark re-runs and rewrites the same file) never sees a partial file."""

from __future__ import annotations

import base64
import contextlib
import os
import uuid
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from rocketsim.tables.grouping import take_from_batches, take_rows, take_valid
from rocketsim.warehouse.paths import delete_file, filesystem

# String columns with few distinct values: the only ones worth Parquet dictionary encoding (ids,
# keys and error texts are nearly unique, and trying a dictionary on them doubles the write time).
DICTIONARY_COLUMNS = (
    "topic",
    "tags",
    "message_type",
    "send_mode",
    "order_key",
    "broker",
    "outcome",
    "status",
    "brokers_sent",
    "store_topic",
    "real_topic",
)
# Columns whose min/max go into the file footers (and so into Delta's data-skipping statistics): the
# keys and times a reader filters on. Statistics of every column cost a tenth of the write time.
STATISTICS_COLUMNS = (
    "producer",
    "seq",
    "attempt",
    "topic",
    "message_type",
    "broker",
    "queue_id",
    "status",
    "outcome",
    "born_ts_ms",
    "send_ts_ms",
    "end_ts_ms",
    "start_ts_ms",
    "store_ts_ms",
    "commit_log_offset",
    "queue_offset",
)
# Rows the Parquet writer takes at a time (pyarrow's default 1,024): ~10% less CPU a table, the most in
# the statistics of dictionary columns (the codes a batch uses are found anew in each). The file is the
# same byte for byte wherever a column takes under ~50 B a row (its pages end at the writer's 20,000 rows
# before they reach 1 MiB); a wider column's pages may end later. docs/benchmarks.md, "The Parquet writers'
# batches and the codes made strings".
WRITE_BATCH_ROWS = 32_768


class _AtomicOutput:
    """An output stream to ``uri`` under a temporary name, renamed to ``uri`` when closed cleanly."""

    def __init__(self, uri: str) -> None:
        self.fs, self.path = filesystem(uri)
        self.tmp = f"{self.path}.{uuid.uuid4().hex}.tmp"

    def __enter__(self) -> pa.NativeFile:
        self.sink = self.fs.open_output_stream(self.tmp)
        return self.sink

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        moved = False
        try:
            self.sink.close()
            if kind is None:
                self.fs.move(self.tmp, self.path)
                moved = True
        finally:
            if not moved:
                with contextlib.suppress(OSError):
                    self.fs.delete_file(self.tmp)


def _parquet_options(schema: pa.Schema) -> dict:
    """snappy; dictionaries and statistics on the columns above; integer columns delta-encoded
    (``DELTA_BINARY_PACKED``: ids, sequence numbers and times that grow row by row pack to a few bits a
    value, so the pages are smaller and cheaper to write than plain values snappy compresses; every Parquet
    reader of the tables, Spark, delta-rs and pyarrow, reads the encoding); :data:`WRITE_BATCH_ROWS` rows
    given to the writer at a time."""
    names = schema.names
    return {
        "compression": "snappy",
        "write_batch_size": WRITE_BATCH_ROWS,
        "use_dictionary": [n for n in names if n in DICTIONARY_COLUMNS],
        "write_statistics": [n for n in names if n in STATISTICS_COLUMNS],
        "column_encoding": {
            f.name: "DELTA_BINARY_PACKED"
            for f in schema
            if pa.types.is_integer(f.type) and f.name not in DICTIONARY_COLUMNS
        },
    }


ARROW_SCHEMA_KEY = "ARROW:schema"  # where a Parquet file written by Arrow keeps the Arrow schema


def _coded_strings(schema: pa.Schema, given: pa.Schema | None) -> pa.Schema:
    """``schema`` with its string columns that ``given`` has as dictionaries of strings as those."""
    if given is None:
        return schema

    def coded(f: pa.Field) -> bool:
        if f.name not in given.names or not pa.types.is_string(f.type):
            return False
        g = given.field(f.name).type
        return pa.types.is_dictionary(g) and pa.types.is_string(g.value_type)

    return pa.schema(
        [f.with_type(given.field(f.name).type) if coded(f) else f for f in schema], metadata=schema.metadata
    )


def _stored_schema(schema: pa.Schema) -> str:
    """The ``ARROW:schema`` value Arrow's Parquet writer stores for ``schema`` (its IPC form in base64)."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def write_parquet(table: pa.Table, uri: str, row_group_size: int | None = None) -> None:
    """Write ``table`` to ``uri`` atomically (:func:`_parquet_options`; ``row_group_size`` rows per row
    group, default pyarrow's)."""
    with _AtomicOutput(uri) as sink:
        pq.write_table(table, sink, row_group_size=row_group_size, **_parquet_options(table.schema))


class ParquetSink:
    """A Parquet file written a part at a time (each :meth:`write` adds row groups), renamed into place
    by :meth:`close` (as :func:`write_parquet` writes it whole). With ``empty_file=False`` a sink given no
    rows writes no file; ``schema`` None: the first part's; ``row_group_size`` as :func:`write_parquet`'s."""

    def __init__(
        self, uri: str, schema: pa.Schema | None, empty_file: bool = True, row_group_size: int | None = None
    ) -> None:
        self.uri, self.schema, self.empty_file, self.row_group_size = uri, schema, empty_file, row_group_size
        self.rows = 0
        self._written = schema  # the schema of the arrays written (:func:`_coded_strings`)
        self._out: _AtomicOutput | None = None
        self._writer: pq.ParquetWriter | None = None

    def write(self, table: pa.Table) -> None:
        """A part (its string columns may be dictionary arrays: written as the file's strings, their
        dictionary taken as is instead of hashing every value again; the first part decides which)."""
        if not table.num_rows:
            return
        if self.schema is None:  # the first part's
            self.schema = table.schema
        if self._writer is None:
            self._open(table.schema)
        assert self._writer is not None
        self._writer.write_table(table.cast(self._written), row_group_size=self.row_group_size)
        self.rows += table.num_rows

    def _open(self, given: pa.Schema | None = None) -> None:
        assert self.schema is not None
        self._written = _coded_strings(self.schema, given)
        self._out = _AtomicOutput(self.uri)
        if self._written.equals(self.schema):
            self._writer = pq.ParquetWriter(
                self._out.__enter__(), self.schema, **_parquet_options(self.schema)
            )
            return
        # dictionary arrays written, the file's Arrow schema the table's (strings), as pyarrow stores it
        self._writer = pq.ParquetWriter(
            self._out.__enter__(), self._written, store_schema=False, **_parquet_options(self.schema)
        )
        self._writer.add_key_value_metadata({ARROW_SCHEMA_KEY: _stored_schema(self.schema)})

    def close(self) -> None:
        """Finish the file (an empty one if no rows came and ``empty_file``) and rename it into place. No
        row and no ``empty_file``: no file, not even one an earlier run of the same task left (a task run
        again, such as an ``iterative`` round's producer task, leaves only what it wrote)."""
        if self._writer is None and not self.empty_file:
            delete_file(self.uri)
        if self._writer is None and self.empty_file:
            self._open()
        if self._writer is not None and self._out is not None:
            self._writer.close()
            self._out.__exit__(None)
            self._writer = None

    def abort(self) -> None:
        """Drop the file being written (a task that failed)."""
        if self._out is not None:
            with contextlib.suppress(Exception):
                if self._writer is not None:
                    self._writer.close()
            self._out.__exit__(RuntimeError)
            self._writer = self._out = None


class IpcGroupsSink:
    """An Arrow IPC file of rows split into ``groups`` groups, written a part at a time: each
    :meth:`write` adds ``groups`` record batches, batch ``g`` holding that part's rows of group ``g`` in
    their order (empty ones included), so the file's batch ``k * groups + g`` is part ``k`` of group
    ``g`` (:func:`read_ipc_group`). Renamed into place by :meth:`close`. A dictionary column holds one
    dictionary: a part's may add values to the last part's (written as a delta), not change it."""

    def __init__(self, uri: str, schema: pa.Schema, groups: int) -> None:
        self.schema, self.groups = schema, groups
        self._out = _AtomicOutput(uri)
        deltas = pa.ipc.IpcWriteOptions(emit_dictionary_deltas=True)
        self._writer = pa.ipc.new_file(self._out.__enter__(), schema, options=deltas)
        self.parts = 0

    def write(self, table: pa.Table, group: np.ndarray, rows: np.ndarray | None = None) -> None:
        """A part: ``table``'s rows (``rows``: those rows of it, in their order; None: every row), row
        ``i`` of them into group ``group[i]``; one take of ``table`` (no filter before)."""
        group = np.asarray(group)
        small = group.astype(np.uint8) if self.groups <= 256 else group  # a radix sort
        order = np.argsort(small, kind="stable")
        if rows is not None:
            order = np.asarray(rows, np.int64)[order]
        ends = np.cumsum(np.bincount(group, minlength=self.groups))
        grouped = _one_batch(take_valid(table, order).combine_chunks().cast(self.schema))
        start = 0
        for end in ends.tolist():  # slices of one batch: every group's dictionaries the part's, even empty
            self._writer.write_batch(grouped.slice(start, end - start))
            start = end
        self.parts += 1

    def close(self) -> None:
        if not self.parts:  # no part: one of empty groups
            self.write(self.schema.empty_table(), np.zeros(0, np.int64))
        self._writer.close()
        self._out.__exit__(None)

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self._writer.close()
        self._out.__exit__(RuntimeError)


def _one_batch(table: pa.Table) -> pa.RecordBatch:
    """``table`` as one record batch (a column with no chunk: empty)."""
    table = table.combine_chunks()
    columns = [c.chunk(0) if c.num_chunks else pa.array([], c.type) for c in table.columns]
    return pa.RecordBatch.from_arrays(columns, schema=table.schema)


def read_ipc_group(uris: Sequence[str], g: int, schema: pa.Schema, groups: int = 0) -> pa.Table:
    """Group ``g`` of each IPC file of ``groups`` groups (:class:`IpcGroupsSink`; 0: record batch ``g``
    alone): memory-mapped (no copy) when local, read when remote."""
    return pa.Table.from_batches(list(_batches(uris, g, groups)), schema=schema)


def ipc_group_source(uris: Sequence[str], g: int, schema: pa.Schema, groups: int = 0) -> IpcGroupSource:
    """:class:`IpcGroupSource` of :func:`read_ipc_group`'s arguments."""
    return IpcGroupSource(tuple(uris), g, schema, groups)


class IpcGroupSource:
    """Group ``g`` of IPC files of ``groups`` groups (:class:`IpcGroupsSink`; :func:`read_ipc_group`'s
    arguments), given each time it is asked: whole (a call) or some of its rows (:meth:`take`). Local
    files are memory-mapped anew at each call, and :meth:`take` maps only the batches the rows are in (a
    caller that drops what it got lets go of the pages it touched); remote ones are read once (at the
    first call) and kept."""

    def __init__(self, uris: Sequence[str], g: int, schema: pa.Schema, groups: int = 0) -> None:
        self.uris, self.g, self.schema, self.groups = tuple(uris), g, schema, groups
        self.local = all(isinstance(filesystem(u)[0], pafs.LocalFileSystem) for u in self.uris)
        self._kept: pa.Table | None = None
        self._where: list[tuple[int, int]] | None = None  # each batch of the group: (file, batch in it)
        self._sizes: list[int] = []

    def __call__(self) -> pa.Table:
        if self.local:
            return read_ipc_group(self.uris, self.g, self.schema, self.groups)
        if self._kept is None:
            self._kept = read_ipc_group(self.uris, self.g, self.schema, self.groups)
        return self._kept

    @property
    def num_rows(self) -> int:
        return sum(self._batch_sizes()) if self.local else self().num_rows

    def take(self, rows: np.ndarray, columns: Sequence[str]) -> pa.Table:
        """Rows ``rows`` of the group (:func:`rocketsim.tables.grouping.take_from_batches`), ``columns``
        only."""
        columns = list(columns)
        if not self.local:
            return take_rows(self().select(columns), rows)
        schema = pa.schema([self.schema.field(c) for c in columns])
        return take_from_batches(
            lambda which: self._batches(which, columns), self._batch_sizes(), rows, schema
        )

    def slice(self, start: int, length: int) -> pa.Table:
        """Rows ``start`` to ``start + length`` of the group (no copy: the batches they are in, mapped)."""
        if not self.local:
            return self().slice(start, length)
        ends = np.cumsum(self._batch_sizes())
        first = int(np.searchsorted(ends, start, "right"))
        last = int(np.searchsorted(ends, start + length, "left"))
        which = list(range(first, min(last + 1, len(ends))))
        before = int(ends[first - 1]) if first else 0
        table = pa.Table.from_batches(self._batches(which, self.schema.names), schema=self.schema)
        return table.slice(start - before, length)

    def pieces(self, column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The first and the last value of ``column`` and the rows of each batch of the group (non-empty
        ones), in order: a page or two of each batch read, not the column (remote files: each row)."""
        if not self.local:
            values = self().column(column).to_numpy()
            return values, values, np.ones(len(values), np.int64)
        sizes = np.array(self._batch_sizes(), np.int64)
        which = np.flatnonzero(sizes).tolist()
        got = self._batches(which, [column])
        first = np.array([b.column(0)[0].as_py() for b in got])
        last = np.array([b.column(0)[len(b) - 1].as_py() for b in got])
        return first, last, sizes[which]

    def let_go(self) -> None:
        """Tell the system that the group's pages of the files will not be read again (a hint: they leave
        the page cache first, so the groups other tasks still read stay in it; the files are unchanged)."""
        if not self.local or not hasattr(os, "posix_fadvise"):  # Linux's; elsewhere nothing
            return
        self._batch_sizes()
        assert self._where is not None
        for i, uri in enumerate(self.uris):
            mapped = pa.memory_map(filesystem(uri)[1])
            base = mapped.read_buffer(1).address  # the map's start (a read at 0 of 0 bytes has none)
            reader = pa.ipc.open_file(mapped)
            spans = [_body_span(reader.get_batch(k), base) for f, k in self._where if f == i]
            with open(filesystem(uri)[1], "rb") as handle:
                for start, end in spans:
                    if end > start:
                        os.posix_fadvise(handle.fileno(), start, end - start, os.POSIX_FADV_DONTNEED)

    def _batch_sizes(self) -> list[int]:
        """Rows of each batch of the group (the files read once for them)."""
        if self._where is None:
            self._where, self._sizes = [], []
            for i, uri in enumerate(self.uris):
                reader = pa.ipc.open_file(pa.memory_map(filesystem(uri)[1]))
                for k in range(self.g, reader.num_record_batches, self.groups or reader.num_record_batches):
                    self._where.append((i, k))
                    self._sizes.append(reader.get_batch(k).num_rows)
        return self._sizes

    def _batches(self, which: list[int], columns: Sequence[str]) -> list[pa.RecordBatch]:
        """Batches ``which`` of the group (local files, mapped anew), ``columns`` only."""
        self._batch_sizes()
        assert self._where is not None
        out, readers = [], {}
        for w in which:
            i, k = self._where[w]
            if i not in readers:
                readers[i] = pa.ipc.open_file(pa.memory_map(filesystem(self.uris[i])[1]))
            out.append(readers[i].get_batch(k).select(list(columns)))
        return out


def _body_span(batch: pa.RecordBatch, base: int) -> tuple[int, int]:
    """The byte range of a memory-mapped record batch's buffers in its file (``base``: the map's
    address)."""
    spans = [
        (buffer.address - base, buffer.address - base + buffer.size)
        for column in batch.columns
        for buffer in column.buffers()  # its children's too
        if buffer is not None and buffer.size
    ]
    return (min(s for s, _ in spans), max(e for _, e in spans)) if spans else (0, 0)


def _batches(uris: Sequence[str], g: int, groups: int) -> Iterator[pa.RecordBatch]:
    for uri in uris:
        fs, path = filesystem(uri)
        if isinstance(fs, pafs.LocalFileSystem):
            reader = pa.ipc.open_file(pa.memory_map(path))
            yield from _group_batches(reader, g, groups)
        else:
            with fs.open_input_file(path) as handle:
                yield from _group_batches(pa.ipc.open_file(handle), g, groups)


def _group_batches(reader: pa.ipc.RecordBatchFileReader, g: int, groups: int) -> Iterator[pa.RecordBatch]:
    step = groups or reader.num_record_batches
    for k in range(g, reader.num_record_batches, step):
        yield reader.get_batch(k)


def read_parquet(uris: Sequence[str], schema: pa.Schema, filters: Sequence[tuple] | None = None) -> pa.Table:
    """The rows of Parquet files (local paths or URIs) that pass ``filters`` (``(column, "=", value)``
    conjunctions), cast to ``schema``.

    Row groups whose footer statistics rule a filter out are skipped; the rest is read, cast, then
    filtered. (Files another writer made may hold ``string_view`` columns, e.g. delta-rs rewriting a
    file for a DELETE, which pyarrow's dataset filters cannot compare: the cast comes first.)"""
    filters = list(filters or ())
    if any(op != "=" for _, op, _ in filters):
        raise ValueError(f"read_parquet filters are (column, '=', value), got {filters}")
    extra = list(dict.fromkeys(c for c, _, _ in filters if c not in schema.names))
    parts = [schema.empty_table()]
    for uri in uris:
        fs, path = filesystem(uri)
        with fs.open_input_file(path) as handle:
            pf = pq.ParquetFile(handle)
            groups = [g for g in range(pf.num_row_groups) if _may_match(pf.metadata, g, filters)]
            if not groups:
                continue
            read = pf.read_row_groups(groups, columns=[*schema.names, *extra])
        rows = pa.table(
            {
                **{f.name: read.column(f.name).cast(f.type) for f in schema},
                **{n: _without_views(read.column(n)) for n in extra},
            }
        )
        for column, _, value in filters:
            rows = rows.filter(pc.fill_null(pc.equal(rows.column(column), value), False))
        parts.append(rows.select(schema.names).cast(schema))
    return pa.concat_tables(parts)


def row_group_ranges(uri: str, column: str) -> list[tuple[int, object, object]]:
    """Each row group with rows of a Parquet file, with the min and max of ``column`` its footer gives
    (None, None: unknown)."""
    fs, path = filesystem(uri)
    with fs.open_input_file(path) as handle:
        metadata = pq.ParquetFile(handle).metadata
    index = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    out = []
    for g in range(metadata.num_row_groups):
        row_group = metadata.row_group(g)
        if row_group.num_rows == 0:
            continue
        stats = row_group.column(index[column]).statistics if column in index else None
        known = stats is not None and stats.has_min_max
        out.append((g, stats.min if known else None, stats.max if known else None))
    return out


def read_row_group(uri: str, group: int, schema: pa.Schema, extra: Sequence[str] = ()) -> pa.Table:
    """Row group ``group`` of a Parquet file: the columns of ``schema`` cast to it, then the ``extra``
    columns (string views read as strings: :func:`read_parquet`)."""
    fs, path = filesystem(uri)
    with fs.open_input_file(path) as handle:
        read = pq.ParquetFile(handle).read_row_group(group, columns=[*schema.names, *extra])
    return pa.table(
        {
            **{f.name: read.column(f.name).cast(f.type) for f in schema},
            **{n: _without_views(read.column(n)) for n in extra},
        }
    )


def _without_views(column: pa.ChunkedArray) -> pa.ChunkedArray:
    return column.cast(pa.string()) if pa.types.is_string_view(column.type) else column


def _may_match(metadata: pq.FileMetaData, group: int, filters: Sequence[tuple]) -> bool:
    """Whether row group ``group`` may hold rows passing ``filters``, by its columns' statistics."""
    row_group = metadata.row_group(group)
    if row_group.num_rows == 0:
        return False
    index = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    for column, _, value in filters:
        if column not in index:
            continue
        stats = row_group.column(index[column]).statistics
        if stats is None or not stats.has_min_max:
            continue
        try:
            if not stats.min <= value <= stats.max:
                return False
        except TypeError:  # bounds of another type (e.g. bytes): no skipping
            continue
    return True


def write_bytes(data: bytes, uri: str) -> None:
    """Write ``data`` to ``uri`` atomically."""
    with _AtomicOutput(uri) as sink:
        sink.write(data)


def read_bytes(uri: str) -> bytes:
    """The whole content of ``uri``."""
    fs, path = filesystem(uri)
    with fs.open_input_stream(path) as handle:
        return handle.read()


def map_bytes(uri: str) -> np.ndarray:
    """The content of ``uri`` as a uint8 array: a local file mapped copy-on-write (nothing read until
    used, pages shared with other readers of the file), else read whole."""
    fs, path = filesystem(uri)
    if isinstance(fs, pafs.LocalFileSystem):
        return np.asarray(np.memmap(path, np.uint8, mode="c"))
    return np.frombuffer(bytearray(read_bytes(uri)), np.uint8)


def write_ipc(table: pa.Table, uri: str) -> None:
    """``table`` as an Arrow IPC file, atomically."""
    with _AtomicOutput(uri) as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def read_ipc(uri: str) -> pa.Table:
    """The table of an Arrow IPC file :func:`write_ipc` wrote."""
    fs, path = filesystem(uri)
    with fs.open_input_file(path) as handle:
        return pa.ipc.open_file(handle).read_all()
