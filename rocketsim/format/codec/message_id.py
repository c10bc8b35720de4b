"""Hosts and offset message ids (``MessageDecoder.createMessageId`` / ``decodeMessageId``): Java's
address bytes and text, the id's hex layout, and ``UtilAll.crc32`` (the BODYCRC a broker stores).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from rocketsim.errors import DecodeError, EncodeError
from rocketsim.format.codec.errors import (
    BUFFER_UNDERFLOW,
    ILLEGAL_ARGUMENT,
    NULL_POINTER,
    JavaDecodeError,
    Mode,
    check_java_range,
)
from rocketsim.format.codec.java_text import utf16_len
from rocketsim.javaint import LONG_MAX, LONG_MIN

_V4_MAPPED_PREFIX = b"\x00" * 10 + b"\xff\xff"


def java_inet_address_bytes(ip: bytes) -> bytes:
    """``InetAddress.getByAddress(ip).getAddress()``: an IPv4-mapped IPv6 address becomes 4 bytes."""
    if len(ip) == 16 and ip[:12] == _V4_MAPPED_PREFIX:
        return ip[12:]
    return ip


def ip_text(ip: bytes) -> str:
    """Java's ``getHostAddress()``: dotted IPv4, or eight lowercase hex groups without zero compression."""
    ip = java_inet_address_bytes(ip)
    if len(ip) == 4:
        return ".".join(str(b) for b in ip)
    return ":".join(format((ip[k] << 8) | ip[k + 1], "x") for k in range(0, 16, 2))


@dataclass(frozen=True, slots=True)
class SocketAddress:
    """An ``InetSocketAddress`` as written: 4 (IPv4) or 16 (IPv6) address bytes and a port 0..65535."""

    ip: bytes
    port: int

    def __post_init__(self) -> None:
        if len(self.ip) not in (4, 16):
            raise ValueError(f"ip must be 4 or 16 bytes, got {len(self.ip)}")
        if not 0 <= self.port <= 0xFFFF:
            raise ValueError(f"port out of range:{self.port}")

    @property
    def is_ipv6(self) -> bool:
        return len(self.ip) == 16

    @property
    def ip_text(self) -> str:
        return ip_text(self.ip)


@dataclass(frozen=True, slots=True)
class MessageId:
    """A decoded offset message id: the store host and the commit-log offset."""

    ip: bytes
    port: int
    offset: int

    @property
    def ip_text(self) -> str:
        return ip_text(self.ip)


PORT_OFFSET = struct.Struct(
    ">i"  # port
    "q"  # commit-log offset
)


def create_message_id(ip: bytes, port: int, offset: int) -> str:
    """``MessageDecoder.createMessageId``: uppercase hex of ip + int port + long offset (32 or 56 chars)."""
    ip = java_inet_address_bytes(bytes(ip))
    if len(ip) not in (4, 16):
        raise EncodeError(f"ip must be 4 or 16 bytes, got {len(ip)}")
    if not 0 <= port <= 0xFFFF:
        raise EncodeError(f"port must be 0..65535, got {port}")
    check_java_range("offset", offset, LONG_MIN, LONG_MAX, "long")
    return (ip + PORT_OFFSET.pack(port, offset)).hex().upper()


def _java_string2bytes(text: str) -> bytes | None:
    """``UtilAll.string2bytes``: ``toUpperCase()`` (which may change the length, e.g. ``ß`` -> ``SS``),
    then one byte per pair of UTF-16 units; a unit that is not a hex digit reads as nibble -1 (so the byte
    becomes 0xFF or 0xF_); an odd last unit is ignored. Null or ``""`` -> null."""
    if not text:
        return None
    raw = text.upper().encode("utf-16-le", "surrogatepass")
    units = struct.unpack(f"<{len(raw) // 2}H", raw)
    digits = "0123456789ABCDEF"

    def nibble(unit: int) -> int:
        return digits.find(chr(unit)) if unit < 0x80 else -1

    out = bytearray()
    for k in range(len(units) // 2):
        hi, lo = nibble(units[2 * k]), nibble(units[2 * k + 1])
        out.append(((hi << 4) | lo) & 0xFF if lo >= 0 else 0xFF)
    return bytes(out)


_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def hex_bytes(text: str, where: str, lengths: tuple[int, ...]) -> bytes:
    """The bytes of ``text``: hexadecimal digits only, as many as one of ``lengths``; else a DecodeError."""
    if len(text) not in lengths:
        raise DecodeError(f"{where}: {len(text)} characters, expected {' or '.join(map(str, lengths))}")
    if not all(c in _HEX_DIGITS for c in text):  # bytes.fromhex would skip whitespace between pairs
        raise DecodeError(f"{where}: {text[:64]!r} is not hexadecimal")
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise DecodeError(f"{where}: {text[:64]!r} is not hexadecimal") from None


def decode_message_id(msg_id: str, *, mode: Mode = "strict") -> MessageId:
    """``MessageDecoder.decodeMessageId``: 32 hex chars = IPv4 id, 56 = IPv6 id.

    ``java`` mode reproduces upstream (4.9.8 = 5.3.3) on malformed ids: the address is 4 bytes iff
    ``msgId.length() == 32`` (UTF-16 units of the text as given), else 16; the bytes come from
    ``UtilAll.string2bytes`` (see ``_java_string2bytes``); null/``""`` -> ``NullPointerException``
    (``ByteBuffer.wrap(null)``), too few bytes -> ``BufferUnderflowException``, a port outside 0..65535 ->
    ``IllegalArgumentException``; an IPv4-mapped IPv6 address reads as IPv4 (``InetAddress.getByAddress``).
    Python's ``str.upper`` stands for Java's ``toUpperCase()`` in a root-like locale (same Unicode case
    mappings; a Turkish default locale would map ``i`` differently, which changes nothing here: ``I`` is
    not a hex digit either way).
    """
    if mode == "strict":
        raw = hex_bytes(msg_id, "message id", (32, 56))
        ip_len = 4 if len(raw) == 16 else 16
        port, offset = PORT_OFFSET.unpack_from(raw, ip_len)
        if port < 0 or port > 0xFFFF:
            raise JavaDecodeError(
                f"message id: port {port} out of range", ILLEGAL_ARGUMENT, f"port out of range:{port}"
            )
        return MessageId(java_inet_address_bytes(raw[:ip_len]), port, offset)
    java_bytes = _java_string2bytes(msg_id)
    if java_bytes is None:
        raise JavaDecodeError("message id is empty", NULL_POINTER)
    ip_len = 4 if utf16_len(msg_id) == 32 else 16
    if len(java_bytes) < ip_len + PORT_OFFSET.size:
        raise JavaDecodeError(f"message id: {len(java_bytes)} bytes, needs {ip_len + 12}", BUFFER_UNDERFLOW)
    port, offset = PORT_OFFSET.unpack_from(java_bytes, ip_len)
    if port < 0 or port > 0xFFFF:
        raise JavaDecodeError(
            f"message id: port {port} out of range", ILLEGAL_ARGUMENT, f"port out of range:{port}"
        )
    return MessageId(java_inet_address_bytes(java_bytes[:ip_len]), port, offset)


def crc32_masked(data: bytes) -> int:
    """``UtilAll.crc32``: CRC32 with the sign bit cleared (the BODYCRC the broker stores)."""
    return zlib.crc32(data) & 0x7FFF_FFFF
