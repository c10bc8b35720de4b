"""Vectorised sizes: per row ``len(encode(...))`` of batch elements, properties and store records from
columns of lengths (numpy / pyarrow), at tens of millions of rows per second.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Union

import numpy as np

from rocketsim.client.versions import V4_9_8, ClientVersion
from rocketsim.format.codec.batch import ELEMENT_OVERHEAD
from rocketsim.format.codec.java_text import utf8_len
from rocketsim.format.codec.properties import MAX_PROPERTIES_SIZE
from rocketsim.format.codec.store_format import STORE_FIXED_V4
from rocketsim.format.message import MessageSysFlag

if TYPE_CHECKING:
    import pyarrow as pa

PropertyColumn = Union["pa.Array", "pa.ChunkedArray", np.ndarray, Sequence[str | None], str, int, None]


def _as_int64(values: np.ndarray | Sequence[int]) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def encoded_message_sizes(
    body_lens: np.ndarray | Sequence[int],
    props_lens: np.ndarray | Sequence[int],
    *,
    version: ClientVersion = V4_9_8,
) -> np.ndarray:
    """Per row ``len(encode_message(...))`` from body and properties byte lengths; -1 where encoding raises
    (properties over 32767 bytes: refused by 4.9, a short overflow in 5.x)."""
    body = _as_int64(body_lens)
    props = _as_int64(props_lens)
    sizes = body + props + ELEMENT_OVERHEAD
    return np.where(props > MAX_PROPERTIES_SIZE, np.int64(-1), sizes)


_TENS = 10 ** np.arange(1, 20, dtype=np.uint64)  # 10 .. 10**19


def decimal_lengths(values: np.ndarray | Sequence[int]) -> np.ndarray:
    """Per row ``String.valueOf(v).length()`` of Java ints/longs (a minus sign counts): the bytes of a
    number written as a property value (``DELAY`` = ``Message.setDelayTimeLevel``'s
    ``String.valueOf(level)``, ``REAL_QID``), any number of digits."""
    v = np.asarray(values, dtype=np.int64)
    magnitude = np.abs(v).view(np.uint64)  # abs(Long.MIN_VALUE) wraps to itself, which is 2**63 unsigned
    return 1 + np.searchsorted(_TENS, magnitude, side="right").astype(np.int64) + (v < 0)


def _value_lengths(column: PropertyColumn, n: int) -> np.ndarray:
    """UTF-8 byte length per row, -1 where the property is absent (null)."""
    if column is None:
        return np.full(n, -1, dtype=np.int64)
    if isinstance(column, str):
        return np.full(n, utf8_len(column), dtype=np.int64)
    if isinstance(column, int | np.integer):
        return np.full(n, int(column), dtype=np.int64)
    if isinstance(column, np.ndarray) and column.dtype.kind in "iu":
        return column.astype(np.int64, copy=False)
    import pyarrow as pa
    import pyarrow.compute as pc

    if not isinstance(column, pa.Array | pa.ChunkedArray):
        column = pa.array(list(column), type=pa.string())  # type: ignore[arg-type]
    lengths = pc.binary_length(column)
    return np.asarray(lengths.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)


def properties_sizes(
    columns: Mapping[str, PropertyColumn], *, length: int | None = None, version: ClientVersion = V4_9_8
) -> np.ndarray:
    """Per row ``properties_size`` of a map given as columns: name -> values.

    A column is a pyarrow string array (null = property absent), a sequence of ``str | None``, an integer
    numpy array of value byte lengths (negative = absent), a ``str`` (the same value on every row), an
    ``int`` (the same value byte length on every row) or None (absent). Order does not change the size.
    """
    n = length
    if n is None:
        for column in columns.values():
            if column is not None and not isinstance(column, str | int | np.integer):
                n = len(column)  # type: ignore[arg-type]
                break
        else:
            raise ValueError("properties_sizes: give length= when every column is a constant")
    total = np.zeros(n, dtype=np.int64)
    present = np.zeros(n, dtype=bool)
    for name, column in columns.items():
        lengths = _value_lengths(column, n)
        if len(lengths) != n:
            raise ValueError(f"properties_sizes: column {name!r} has {len(lengths)} rows, expected {n}")
        has = lengths >= 0
        total += np.where(has, lengths + (utf8_len(name) + 2), 0)
        present |= has
    if not version.properties_trailing_separator:
        total -= present
    return total


def store_sizes(
    body_lens: np.ndarray | Sequence[int],
    topic_lens: np.ndarray | Sequence[int],
    props_lens: np.ndarray | Sequence[int],
    sys_flags: np.ndarray | Sequence[int] | int = 0,
) -> np.ndarray:
    """Per row ``store_size`` for hosts matching their V6 sys-flag bits and no preset size; -1 where
    ``encode_store`` raises (topic of 128+ bytes, properties over 32767 bytes)."""
    body = _as_int64(body_lens)
    topic = _as_int64(topic_lens)
    props = _as_int64(props_lens)
    flags = np.asarray(sys_flags, dtype=np.int64)
    v6 = ((flags & MessageSysFlag.BORNHOST_V6_FLAG) != 0).astype(np.int64) + (
        (flags & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG) != 0
    ).astype(np.int64)
    sizes = STORE_FIXED_V4 + 12 * v6 + body + topic + props
    bad = (topic > 127) | (props > MAX_PROPERTIES_SIZE)
    return np.where(bad, np.int64(-1), sizes)
