"""Each broker's store host (``10.1.x.y:10911`` by its place in the cluster) and the offset message
ids of its records, vectorised (``MessageDecoder.createMessageId``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from rocketsim.broker.store.layout import STORE_PORT
from rocketsim.format.codec import SocketAddress


def store_hosts(brokers: Sequence[str]) -> tuple[SocketAddress, ...]:
    """Each broker's store host: ``10.1.x.y:10911`` with x.y = its 1-based place in ``brokers``."""
    if len(brokers) > 0xFFFF:
        raise ValueError(f"at most 65535 brokers get a store host, got {len(brokers)}")
    return tuple(
        SocketAddress(bytes([10, 1, (i + 1) >> 8, (i + 1) & 0xFF]), STORE_PORT) for i in range(len(brokers))
    )


# uppercase hex digits as ASCII, first digit in the lowest byte: of each byte (2), of each uint16 (4)
_HEX_PAIRS = np.array([ord(f"{b:02X}"[0]) | ord(f"{b:02X}"[1]) << 8 for b in range(256)], "<u2")
_HEX_QUADS = (
    _HEX_PAIRS[np.arange(1 << 16) >> 8] | _HEX_PAIRS[np.arange(1 << 16) & 0xFF].astype("<u4") << 16
).astype("<u4")


def offset_msg_ids(broker_index: np.ndarray, offsets: np.ndarray, hosts: Sequence[SocketAddress]) -> pa.Array:
    """Vectorised :func:`rocketsim.format.codec.create_message_id` (``MessageDecoder.createMessageId``) of
    ``(host.ip, host.port, offset)`` for IPv4 store hosts: 32 uppercase hex digits a row, ip and port
    then the offset (tests/test_store.py holds the two equal)."""
    if any(len(h.ip) != 4 for h in hosts):
        raise ValueError("offset_msg_ids handles IPv4 store hosts only")
    head = np.array([list(h.ip) + list(h.port.to_bytes(4, "big")) for h in hosts], np.uint8).reshape(-1, 8)
    idx = np.asarray(broker_index, np.int64)
    offset_digits = _HEX_QUADS[np.asarray(offsets, ">i8").view(">u2").astype(np.intp)]
    chars = np.empty((len(idx), 2), "V16")  # 32 hex digits a row: host and port, offset
    chars[:, 0] = _HEX_PAIRS[head].view("V16").ravel()[idx]
    chars[:, 1] = offset_digits.view("V16").ravel()
    row_offsets = np.arange(0, len(idx) * 32 + 1, 32, dtype=np.int32)
    return pa.StringArray.from_buffers(len(idx), pa.py_buffer(row_offsets), pa.py_buffer(chars))
