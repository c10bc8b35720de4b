"""Grouping rows of Arrow tables with numpy, vectorised: the helpers the summary and broker-side tables
(:mod:`rocketsim.tables.summaries`, :mod:`rocketsim.broker.side`) and the commit log's numbering
(:mod:`rocketsim.broker.store`) share.

* columns as numpy (:func:`ints`, :func:`bools`), string columns as int codes numbered in the sorted
  order of their values (:func:`string_codes`, back with :func:`from_codes`);
* key tuples packed into one int64 that sorts as the tuple (:func:`pack_keys`), groups of equal keys
  numbered in key order (:class:`Groups`), lookups of key tuples in sorted unique ones
  (:func:`lookup`, :func:`joint_lookup`);
* tables regrouped (:func:`regroup`: sums, mins, maxes per key) or sorted by key columns;
* Spark's window arithmetic (``floor(ts / w) * w`` divides as doubles): :func:`window_index`,
  :func:`spark_window`, :func:`spark_ceil_div`, so the tables equal what Spark computed before.

Every function is a handful of numpy passes (a sort at most), never a Python loop over rows.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def ints(table: pa.Table, name: str) -> np.ndarray:
    """A column without nulls as int64."""
    return np.asarray(table.column(name).to_numpy(), np.int64)


def bools(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A boolean column as numpy, null as False."""
    return np.asarray(column.fill_null(False).to_numpy(zero_copy_only=False), bool)


def _chunks(columns: Sequence[pa.ChunkedArray | pa.Array]) -> list[pa.Array]:
    return [c for col in columns for c in (col.chunks if isinstance(col, pa.ChunkedArray) else [col])]


def string_codes(*columns: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Int64 codes of string (or dictionary) columns, numbered in the sorted order of their distinct
    values (null: -1), and those values."""
    encoded = [c if pa.types.is_dictionary(c.type) else pc.dictionary_encode(c) for c in _chunks(columns)]
    if not encoded:
        return np.zeros(0, np.int64), pa.array([], pa.string())
    names = pc.unique(pa.concat_arrays([c.dictionary.cast(pa.string()) for c in encoded]))
    names = names.take(pc.sort_indices(names))
    parts = [np.zeros(0, np.int64)]
    for c in encoded:
        remap = np.asarray(pc.index_in(c.dictionary.cast(pa.string()), value_set=names).to_numpy(), np.int64)
        idx = np.asarray(c.indices.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
        code = remap[idx] if len(remap) else np.zeros(len(idx), np.int64)
        if c.null_count:
            code[~bools(c.is_valid())] = -1
        parts.append(code)
    return np.concatenate(parts), names


def is_value(column: pa.ChunkedArray | pa.Array, value: str) -> np.ndarray:
    """Per row, whether a string (or dictionary of strings) column is ``value`` (null: False); a dictionary
    array's few values compared, not its rows."""
    parts = [np.zeros(0, bool)]
    for c in _chunks([column]):
        if not pa.types.is_dictionary(c.type):
            parts.append(bools(pc.equal(c, value)))
            continue
        hit = bools(pc.equal(c.dictionary, value))
        idx = np.asarray(c.indices.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
        rows = hit[idx] if len(hit) else np.zeros(len(idx), bool)
        parts.append(rows & bools(c.is_valid()) if c.null_count else rows)
    return np.concatenate(parts)


def keeping_codes(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` (``schema``'s columns) cast to ``schema``, but its string columns given as dictionary
    arrays of strings kept so (what a reader of codes, e.g. the Parquet writer, takes without encoding
    every row again)."""

    def coded(name: str) -> bool:
        t = table.schema.field(name).type
        return pa.types.is_string(schema.field(name).type) and pa.types.is_dictionary(t)

    kept = {f.name for f in schema if f.name in table.column_names and coded(f.name)}
    if not kept:
        return table.select(schema.names).cast(schema)
    fields = [f.with_type(table.schema.field(f.name).type) if f.name in kept else f for f in schema]
    return table.select(schema.names).cast(pa.schema(fields, metadata=schema.metadata))


def as_plain_strings(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` cast to ``schema``, its dictionary columns of strings that ``schema`` has as strings made
    by :func:`dictionary_strings` (the same arrays as the cast's, most without Arrow's take of every row)."""
    columns = []
    for field, column in zip(schema, table.select(schema.names).columns, strict=True):
        if pa.types.is_string(field.type) and pa.types.is_dictionary(column.type):
            column = pa.chunked_array([dictionary_strings(c) for c in column.chunks], pa.string())
        columns.append(column.cast(field.type))
    return pa.Table.from_arrays(columns, schema=schema)


# the widths a row's string may have for dictionary_strings to gather the values as numpy words
_WORDS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def dictionary_strings(array: pa.DictionaryArray) -> pa.Array:
    """A dictionary array of strings as the string array ``array.cast(pa.string())`` gives (its values and
    offsets; no validity bitmap where no row is null). Made by numpy where every row is one value (its
    bytes repeated) or the dictionary's values are all of one width of 1, 2, 4 or 8 bytes (the brokers'
    names: gathered as numpy words), an all-null array as nulls; any other by the cast."""
    n = len(array)
    if n and array.null_count == n:
        return pa.nulls(n, pa.string())
    values = array.dictionary
    plain = n and not (array.null_count or values.null_count or array.offset or values.offset)
    if not plain or array.indices.type != pa.int32() or values.type != pa.string():
        return array.cast(pa.string())
    codes = np.frombuffer(array.indices.buffers()[1], np.int32, n)
    ends = np.frombuffer(values.buffers()[1], np.int32, len(values) + 1)
    data = np.frombuffer(values.buffers()[2], np.uint8) if ends[-1] else None
    low, high = int(codes.min()), int(codes.max())
    width = int(ends[low + 1] - ends[low])
    if low == high and width and data is not None:
        body: bytes | np.ndarray = data[ends[low] : ends[low] + width].tobytes() * n
    elif data is not None and width in _WORDS and (np.diff(ends) == width).all():
        body = data[ends[0] : ends[-1]].view(_WORDS[width])[codes]
    else:
        return array.cast(pa.string())
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(body))


def single_values_coded(table: pa.Table, names: Sequence[str]) -> pa.Table:
    """``table`` with each string column of ``names`` that holds one value on every row (no null) as a
    dictionary array of that value (codes 0): what the Parquet writer takes without hashing every row
    (one comparison a row to find it; the file is the same). A column of ``names`` given as a dictionary
    array is made so too when it holds one value, else given as strings (as the column was)."""
    for name in names:
        column = table.column(name)
        if pa.types.is_dictionary(column.type):
            one = _one_value(column)
            made = column.cast(pa.string()) if one is None else _single(one, len(column))
        elif not pa.types.is_string(column.type) or not len(column) or column.null_count:
            continue
        else:
            first = column[0]
            if not pc.all(pc.equal(column, first)).as_py():
                continue
            made = _single(first.as_py(), len(column))
        at = table.schema.get_field_index(name)
        table = table.set_column(at, table.field(name).with_type(made.type), made)
    return table


def _single(value: str, rows: int) -> pa.DictionaryArray:
    """``value`` on each of ``rows`` rows, as a dictionary array of it (codes 0)."""
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int32)), pa.array([value], pa.string()))


def _one_value(column: pa.ChunkedArray | pa.Array) -> str | None:
    """The value on every row of a dictionary column of strings, None when it has rows of two values, a
    null or no row (the codes read, not the rows' strings: one code a chunk, or the values of its codes)."""
    values = set()
    for c in _chunks([column]):
        if c.null_count:
            return None
        if len(c):
            low, high = (s.as_py() for s in pc.min_max(c.indices).values())
            used = pa.array([low]) if low == high else pc.unique(c.indices)
            values.update(c.dictionary.take(used).to_pylist())
    return values.pop() if len(values) == 1 else None


def joint_codes(columns: Sequence[pa.ChunkedArray]) -> tuple[list[np.ndarray], pa.Array]:
    """:func:`string_codes` of several columns over one shared set of values, one code array per column."""
    codes, names = string_codes(*columns)
    return np.split(codes, np.cumsum([len(c) for c in columns])[:-1]), names


def from_codes(codes: np.ndarray, names: pa.Array, *, dictionary: bool = True) -> pa.Array:
    """Codes back to a dictionary (or plain string) column; -1 is null."""
    missing = codes < 0
    idx = pa.array(np.where(missing, 0, codes).astype(np.int32), mask=missing if missing.any() else None)
    if dictionary:
        return pa.DictionaryArray.from_arrays(idx, names.cast(pa.string()))
    return names.cast(pa.string()).take(idx)


def take_valid(
    data: pa.Table | pa.RecordBatch | pa.Array, rows: np.ndarray
) -> pa.Table | pa.RecordBatch | pa.Array:
    """``data.take(rows)`` of rows checked once to be within ``data`` (IndexError if not): Arrow's take
    checks them again for every column it copies (a fifth of a wide table's take, docs/benchmarks.md)."""
    rows = np.asarray(rows)
    if len(rows) and (int(rows.min()) < 0 or int(rows.max()) >= len(data)):
        raise IndexError(f"take_valid: a row outside 0..{len(data) - 1}")
    return pc.take(data, pa.array(rows), boundscheck=False)


def take_rows(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """``table.take(rows)`` (one chunk a column) without concatenating ``table``'s chunks first (which
    ``take`` does: a copy of every column per call): :func:`take_from_batches` of its record batches."""
    batches = table.to_batches()
    return take_from_batches(
        lambda which: [batches[i] for i in which], [b.num_rows for b in batches], rows, table.schema
    )


# rows per run of consecutive rows (on average) from which take_from_batches slices rather than takes
RUN_ROWS = 64


def _slices(
    batches: Callable[[list[int]], list[pa.RecordBatch]],
    starts: np.ndarray,
    rows: np.ndarray,
    batch: np.ndarray,
    runs: np.ndarray,
    schema: pa.Schema,
) -> pa.Table:
    """:func:`take_from_batches` of rows in runs (``runs``: where each starts) as a slice of its batch
    each, in the order of ``rows``."""
    which = np.unique(batch[runs]).tolist()
    got = dict(zip(which, batches(which), strict=True))
    ends = [*runs[1:].tolist(), len(rows)]
    pieces = [
        got[int(batch[at])].slice(int(rows[at] - starts[batch[at]]), end - at)
        for at, end in zip(runs.tolist(), ends, strict=True)
    ]
    return pa.Table.from_batches(pieces, schema=schema).combine_chunks()


# rows per block of the table that finds a row's batch (_batch_of)
_BLOCK_BITS = 10


def _batch_of(starts: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Each row's batch (``starts``: each batch's first row, then the rows of all): for many rows, the
    batch of each block's first row looked up and stepped past the batches that start within the block
    (a few times cheaper than a binary search of rows in no order, docs/benchmarks.md), else the search."""
    blocks = (int(starts[-1]) >> _BLOCK_BITS) + 1
    if len(rows) >= 2 * blocks:
        batch = (np.searchsorted(starts, np.arange(blocks) << _BLOCK_BITS, "right") - 1)[rows >> _BLOCK_BITS]
        for _ in range(4):  # batches shorter than a block: a step each, a few at most, else the search
            after = rows >= starts[batch + 1]
            if not after.any():
                return batch
            batch += after
    return np.searchsorted(starts, rows, "right") - 1


def take_from_batches(
    batches: Callable[[list[int]], list[pa.RecordBatch]],
    sizes: Sequence[int],
    rows: np.ndarray,
    schema: pa.Schema,
) -> pa.Table:
    """Rows ``rows`` (one chunk a column, in that order) of the record batches of ``sizes`` rows each, in
    order, given by ``batches`` (the batches of the indices given, only those the rows are in): each
    batch's rows taken from it alone, then put back in the order of ``rows``; rows that come in long runs
    of consecutive rows of one batch (e.g. whole batches in another order) as slices of their batches,
    in order. What it costs follows ``rows``, not the batches."""
    rows = np.asarray(rows, np.int64)
    starts = np.cumsum([0, *sizes])
    if len(rows) and (int(rows.min()) < 0 or int(rows.max()) >= starts[-1]):
        raise IndexError(f"take_from_batches: a row outside 0..{starts[-1] - 1}")
    batch = _batch_of(starts, rows)
    runs = np.flatnonzero(np.concatenate([[True], (np.diff(rows) != 1) | (np.diff(batch) != 0)]))
    if len(rows) and len(runs) * RUN_ROWS <= len(rows):
        return _slices(batches, starts, rows, batch, runs, schema)
    # stable: numpy sorts 16-bit keys by radix, not by comparisons as it does int64
    by_batch = np.argsort(batch.astype(np.uint16) if len(sizes) < 1 << 16 else batch, kind="stable")
    in_batch = batch[by_batch]
    local = rows[by_batch] - starts[in_batch]
    first = np.flatnonzero(first_of_runs(in_batch))
    ends = [*first[1:].tolist(), len(rows)][: len(first)]
    got = batches(in_batch[first].tolist()) if len(first) else []
    pieces = [take_valid(b, local[at:end]) for b, at, end in zip(got, first.tolist(), ends, strict=True)]
    gathered = pa.Table.from_batches(pieces, schema=schema).combine_chunks()
    if (by_batch[1:] > by_batch[:-1]).all():  # rows already batch by batch
        return gathered
    back = np.empty(len(rows), np.int64)
    back[by_batch] = np.arange(len(rows))
    return take_valid(gathered, back)


def pack_keys(
    keys: Sequence[np.ndarray], ranges: Sequence[tuple[int, int]] | None = None
) -> np.ndarray | None:
    """One int64 per row that sorts as the row's tuple of ``keys`` (mixed radix over their ranges:
    ``ranges``, each key's (lowest value, span), when the rows are some of many packed alike, else their
    own); None when the ranges do not fit."""
    n = len(keys[0])
    if n == 0:
        return np.zeros(0, np.int64)
    if ranges is None:
        ranges = [(int(k.min()), int(k.max()) - int(k.min()) + 1) for k in keys]
    lows, spans = [lo for lo, _ in ranges], [span for _, span in ranges]
    if math.prod(spans) >= 1 << 63:
        return None
    packed = np.zeros(n, np.int64)
    for k, lo, span in zip(keys, lows, spans, strict=True):
        if span > 1:
            packed *= span
            packed += k
            packed -= lo
    return packed


def group_codes(keys: Sequence[np.ndarray]) -> np.ndarray:
    """Int codes, equal where the rows' ``keys`` are: packed, or numbered when they do not fit."""
    packed = pack_keys(keys)
    if packed is not None:
        return packed
    return np.unique(np.stack(keys), axis=1, return_inverse=True)[1].reshape(-1)


# groups few enough that a pass a column (bincount) costs less than sorting the rows by group once
FEW_GROUPS = 64


def _exact_in_doubles(values: np.ndarray) -> bool:
    """Whether any sum of some of ``values`` (bools or ints) is exact in doubles: below 2**53."""
    if values.dtype == bool or not len(values):
        return True
    top = max(int(values.max()), -int(values.min()))
    return top < (1 << 53) // len(values)


class Groups:
    """Rows grouped by equal ``keys``: group numbers in the sorted order of the key tuples."""

    def __init__(self, keys: Sequence[np.ndarray]) -> None:
        n = len(keys[0])
        packed = pack_keys(keys)
        if packed is None:
            _, index = np.unique(np.stack(keys, axis=1), axis=0, return_inverse=True)
            self.index = index.reshape(-1).astype(np.int64)
        elif n and int(packed.max()) <= max(4 * n, 1 << 16):  # dense: no sort
            present = np.bincount(packed) > 0
            rank = np.cumsum(present) - 1
            self.index = rank[packed]
        else:  # a stable sort: fast on concatenated sorted runs (merged aggregates)
            order = np.argsort(packed, kind="stable")
            self.index = np.empty(n, np.int64)
            self.index[order] = np.cumsum(first_of_runs(packed[order])) - 1
        self.n = int(self.index.max()) + 1 if n else 0
        self.first = np.zeros(self.n, np.int64)  # a row of each group
        self.first[self.index[::-1]] = np.arange(n - 1, -1, -1)

    def count(self) -> np.ndarray:
        if self._few:
            return np.bincount(self.index, minlength=self.n).astype(np.int64)
        return np.diff(self._runs[1], append=len(self.index)).astype(np.int64)

    @functools.cached_property
    def _sorted(self) -> bool:
        index = self.index
        return bool((index[1:] >= index[:-1]).all())

    @functools.cached_property
    def _few(self) -> bool:
        """Rows not in group order, in few groups: counts and sums by ``bincount`` (a pass a column)
        rather than sorting the rows by group first."""
        return self.n <= FEW_GROUPS and not self._sorted

    @functools.cached_property
    def _runs(self) -> tuple[np.ndarray | None, np.ndarray]:
        """The row order that sorts the rows by group (None: they are), and where each group's run of
        rows starts in it (every group has a row): what the sums below reduce, one pass a column."""
        index = self.index
        order = None
        if not self._sorted:
            # a radix sort when the group numbers fit 16 bits
            order = np.argsort(index.astype(np.uint16) if self.n <= 1 << 16 else index, kind="stable")
            index = index[order]
        return order, np.flatnonzero(first_of_runs(index))

    def _by_group(self, values: np.ndarray, dtype: type | None = None) -> np.ndarray:
        order = self._runs[0]
        values = np.asarray(values, dtype) if dtype is not None else np.asarray(values)
        return values if order is None else values[order]

    def sum(self, values: np.ndarray) -> np.ndarray:
        """Exact int64 sums."""
        if not self.n:
            return np.zeros(0, np.int64)
        values = np.asarray(values)
        if not values.any():  # a column of rare events (busy kinds, losses) is often all zero
            return np.zeros(self.n, np.int64)
        if self._few and _exact_in_doubles(values):
            return np.bincount(self.index, weights=values, minlength=self.n).astype(np.int64)
        return np.add.reduceat(self._by_group(values, np.int64), self._runs[1])

    def code_counts(self, codes: np.ndarray, k: int) -> np.ndarray:
        """Per group (rows) and code ``0..k-1`` (columns), the rows with that code: ``sum(codes == j)``
        for every ``j`` in one pass (codes outside, such as -1 for none, are not counted)."""
        counted = (codes >= 0) & (codes < k)
        index = self.index
        if not counted.all():
            index, codes = index[counted], codes[counted]
        return np.bincount(index * k + codes, minlength=self.n * k).reshape(self.n, k).astype(np.int64)

    def min(self, values: np.ndarray) -> np.ndarray:
        if not self.n:
            return np.zeros(0, np.int64)
        return np.minimum.reduceat(self._by_group(values, np.int64), self._runs[1])

    def max(self, values: np.ndarray) -> np.ndarray:
        if not self.n:
            return np.zeros(0, np.int64)
        return np.maximum.reduceat(self._by_group(values, np.int64), self._runs[1])


def distinct_values(*arrays: np.ndarray) -> np.ndarray:
    """The sorted distinct values of some int arrays (one group pass each, then a small sort)."""
    firsts = [a[Groups([a]).first] for a in arrays if len(a)]
    return np.unique(np.concatenate([np.zeros(0, np.int64), *firsts]))


def first_of_runs(sorted_keys: np.ndarray) -> np.ndarray:
    """Whether each row of a sorted key array starts a run of equal keys."""
    start = np.ones(len(sorted_keys), bool)
    start[1:] = sorted_keys[1:] != sorted_keys[:-1]
    return start


def sort_order(group: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The row order that sorts by (group, value)."""
    packed = pack_keys([group, values])
    if packed is None:
        return np.lexsort((values, group))
    if (packed[1:] >= packed[:-1]).all():
        return np.arange(len(packed))
    return np.argsort(packed, kind="stable")


def lookup(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Position of each value in the sorted unique ``keys``, -1 where it is not there."""
    if len(keys) == len(values) and (keys == values).all():
        return np.arange(len(keys))
    pos = np.minimum(np.searchsorted(keys, values), max(len(keys) - 1, 0))
    found = keys[pos] == values if len(keys) else np.zeros(len(values), bool)
    return np.where(found, pos, -1)


def all_found(positions: np.ndarray) -> np.ndarray:
    """``positions`` from :func:`lookup`, which must all have been found."""
    if len(positions) and int(positions.min()) < 0:
        raise AssertionError("an aggregate row falls outside the run's grid")
    return positions


def joint_lookup(keys: Sequence[np.ndarray], values: Sequence[np.ndarray]) -> np.ndarray:
    """Row of the (sorted, unique) key tuples ``keys`` holding each tuple of ``values``, -1 if none."""
    both = pack_keys([np.concatenate([k, v]) for k, v in zip(keys, values, strict=True)])
    if both is None:
        raise ValueError("key tuples too wide to look up")
    n = len(keys[0])
    return lookup(both[:n], both[n:])


def key_codes(table: pa.Table, columns: Sequence[str]) -> list[tuple[np.ndarray, pa.Array | None]]:
    """Per column: int64 codes that sort as its values, and the values of the codes of a string one."""
    out: list[tuple[np.ndarray, pa.Array | None]] = []
    for name in columns:
        col = table.column(name)
        if pa.types.is_dictionary(col.type) or pa.types.is_string(col.type):
            out.append(string_codes(col))
        else:
            out.append((np.asarray(col.to_numpy(), np.int64), None))
    return out


def take_keys(table: pa.Table, keys: Sequence[str], codes: list, rows: np.ndarray) -> dict[str, pa.Array]:
    """Key columns at ``rows``; dictionary columns rebuilt with one sorted dictionary."""
    out = {}
    for name, (code, names) in zip(keys, codes, strict=True):
        if pa.types.is_dictionary(table.schema.field(name).type):
            out[name] = from_codes(code[rows], names)
        else:
            out[name] = table.column(name).take(pa.array(rows))
    return out


def regroup(
    table: pa.Table, keys: Sequence[str], sums: Sequence[str], mins: Sequence[str], maxs: Sequence[str]
) -> pa.Table:
    """Rows with equal ``keys`` combined (sums, mins, maxes), sorted by ``keys``."""
    if not table.num_rows:
        return table
    codes = key_codes(table, keys)
    g = Groups([c for c, _ in codes])  # groups in key order
    cols: dict[str, object] = take_keys(table, keys, codes, g.first)
    for name in sums:
        cols[name] = pa.array(g.sum(ints(table, name)), pa.int64())
    for name in mins:
        cols[name] = pa.array(g.min(ints(table, name)), pa.int64())
    for name in maxs:
        cols[name] = pa.array(g.max(ints(table, name)), pa.int64())
    return pa.table({f.name: cols[f.name] for f in table.schema}, schema=table.schema)


def sort_rows(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """``table`` sorted by ``keys`` (dictionary key columns rebuilt with one sorted dictionary)."""
    if not table.num_rows:
        return table
    codes = key_codes(table, keys)
    order = np.lexsort([c for c, _ in codes][::-1])
    cols = {name: table.column(name).take(pa.array(order)) for name in table.column_names}
    cols.update(take_keys(table, keys, codes, order))
    return pa.table({f.name: cols[f.name] for f in table.schema}, schema=table.schema)


def running_sum(group: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per row, the sum of ``values`` over the rows of its group up to it (rows sorted by group)."""
    total = np.cumsum(values)
    starts = np.flatnonzero(first_of_runs(group))
    before = np.repeat(total[starts] - values[starts], np.diff(np.append(starts, len(group))))
    return total - before


def window_index(ts: np.ndarray, window_ms: int) -> np.ndarray:
    """The window number of ``ts``: ``floor(ts / window_ms)`` with the division in doubles."""
    return np.floor(np.asarray(ts, np.int64).astype(np.float64) / float(window_ms)).astype(np.int64)


def spark_window(ts: np.ndarray, window_ms: int) -> np.ndarray:
    """``floor(ts / window_ms) * window_ms`` as Spark evaluates it (``/`` divides as doubles), int64."""
    return window_index(ts, window_ms) * np.int64(window_ms)


def spark_ceil_div(values: np.ndarray, size: int) -> np.ndarray:
    """``floor((x + size - 1) / size)`` with the division in doubles, as Spark counts files."""
    return np.floor((np.asarray(values, np.int64) + (size - 1)).astype(np.float64) / float(size)).astype(
        np.int64
    )
