"""The brokers' trajectories of an ``iterative`` round as arrays: the one layout the readable
(:meth:`rocketsim.engine.iterative.Trajectory.answer`) and the compiled
(:func:`rocketsim.engine.compiled_store.trajectory_answer`) answers read, and the scratch file's bytes.

Per broker (``columns``, what a replay gives):

More: docs/reference/modules.md, rocketsim/engine/trajectory_layout.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = [
    "C_ADMITTED",
    "C_MS",
    "C_QUEUED",
    "C_THREAD",
    "C_WRITER",
    "H_BUSY",
    "H_LEAVE",
    "H_MID",
    "H_N_BUSY",
    "H_N_LEAVE",
    "H_N_MID",
    "H_N_SNAP",
    "H_N_STALL",
    "H_SNAP",
    "H_STALL",
    "L_LEFT",
    "L_MS",
    "M_DEPTH",
    "M_MS",
    "M_THREAD",
    "M_WRITER",
    "N_HEAD",
    "N_MID_COLUMNS",
    "N_SNAP_COLUMNS",
    "ROWS",
    "compact",
    "empty_columns",
    "from_buffer",
    "leave_rows",
    "pack",
    "to_bytes",
    "unpack",
]

C_MS, C_THREAD, C_WRITER, C_ADMITTED, C_QUEUED = range(5)
N_SNAP_COLUMNS = 5
M_MS, M_THREAD, M_WRITER, M_DEPTH = range(4)
N_MID_COLUMNS = 4
L_MS, L_LEFT = range(2)
H_SNAP, H_N_SNAP, H_MID, H_N_MID, H_LEAVE, H_N_LEAVE, H_BUSY, H_N_BUSY, H_STALL, H_N_STALL = range(10)
N_HEAD = 10
ROWS = {"snap": N_SNAP_COLUMNS, "mid": N_MID_COLUMNS, "leave": 2}  # the sections in ``data``, in order

_MAGIC = 0x4A41525452534B52  # "RKSRTRAJ"
_VERSION = 2
_HEADER = 8  # int64 words: magic, version, brokers, head size, data size, data itemsize, 0, 0
_INT32 = np.iinfo(np.int32)


def empty_columns() -> dict[str, np.ndarray]:
    """A broker without arrivals."""
    return {**{k: np.zeros((r, 0), np.int64) for k, r in ROWS.items()}, "busy": np.zeros((0, 2), np.int64)}


def leave_rows(queued_leave_us: np.ndarray) -> np.ndarray:
    """The ``leave`` rows from the leave times (us, any order) of the requests that were queued."""
    ms, n = np.unique(-(-np.asarray(queued_leave_us, np.int64) // 1000), return_counts=True)
    return np.stack([ms.astype(np.int64), np.cumsum(n, dtype=np.int64)])


def pack(
    columns: Sequence[Mapping[str, np.ndarray]], stalls: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """``(head, data)`` of every broker's ``columns`` and ``store_stall`` quads (flat int64)."""
    n = len(columns)
    parts = [np.ravel(c[k]) for c in columns for k in ROWS]
    data = np.empty(sum(p.size for p in parts), np.int32 if all(map(_fits, parts)) else np.int64)
    if parts:
        np.concatenate(parts, out=data, casting="unsafe")
    head = [np.zeros(n * N_HEAD, np.int64)]
    at_data, at_head = 0, n * N_HEAD
    for b, (c, st) in enumerate(zip(columns, stalls, strict=True)):
        row: list[int] = []
        for k, r in ROWS.items():
            row += [at_data, c[k].shape[1]]
            at_data += r * c[k].shape[1]
        busy = np.ravel(c["busy"]).astype(np.int64)
        row += [at_head, busy.size // 2, at_head + busy.size, np.size(st) // 4]
        head[0][b * N_HEAD : (b + 1) * N_HEAD] = row
        head += [busy, np.asarray(st, np.int64).ravel()]
        at_head += busy.size + np.size(st)
    return np.concatenate(head), data


def _fits(a: np.ndarray) -> bool:
    return a.dtype == np.int32 or a.size == 0 or (a.min() >= _INT32.min and a.max() <= _INT32.max)


def compact(columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A broker's ``columns`` in as little memory as they take packed: int32 where every value fits, and
    no view holding on to a larger array (what a replay gives is cut from arrays sized for its worst case)."""
    out = {k: columns[k].astype(np.int32 if _fits(columns[k]) else np.int64) for k in ROWS}
    return {**out, "busy": np.array(columns["busy"], np.int64)}


def unpack(head: np.ndarray, data: np.ndarray, b: int) -> dict[str, np.ndarray]:
    """Broker ``b``'s columns, views of the packed arrays."""
    h = head[b * N_HEAD : (b + 1) * N_HEAD].tolist()
    out = {}
    for j, (k, r) in enumerate(ROWS.items()):
        at, n = h[2 * j], h[2 * j + 1]
        out[k] = data[at : at + r * n].reshape(r, n)
    out["busy"] = head[h[H_BUSY] : h[H_BUSY] + 2 * h[H_N_BUSY]].reshape(-1, 2)
    return out


def to_bytes(head: np.ndarray, data: np.ndarray, brokers: int) -> bytes:
    """The packed arrays as bytes (:func:`from_buffer` reads them)."""
    header = np.asarray([_MAGIC, _VERSION, brokers, head.size, data.size, data.itemsize, 0, 0], np.int64)
    return b"".join(
        [header.tobytes(), np.ascontiguousarray(head, np.int64).data, np.ascontiguousarray(data).data]
    )


def from_buffer(buf: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """``(brokers, head, data)`` of :func:`to_bytes`'s bytes (``buf``: uint8, e.g. a file mapped
    copy-on-write), views of it."""
    header = buf[: 8 * _HEADER].view(np.int64)
    magic, version, brokers, n_head, n_data, size = header[:6].tolist()
    if magic != _MAGIC or version != _VERSION:
        raise ValueError(f"not a trajectories file of layout {_VERSION} (magic {magic:#x}, layout {version})")
    start = 8 * _HEADER + 8 * n_head
    head = buf[8 * _HEADER : start].view(np.int64)
    data = buf[start : start + size * n_data].view(np.int32 if size == 4 else np.int64)
    return brokers, head, data
