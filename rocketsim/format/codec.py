"""Byte formats of the RocketMQ Java client: properties, batch elements, the broker store format, ids.

Everything here follows ``org.apache.rocketmq.common.message.MessageDecoder``, ``UtilAll`` and
``MessageClientIDSetter`` of the selected client version (``version=``, default 4.9.8), including their
quirks: Java strings are UTF-16 (a lone surrogate is written as ``?``), lengths are Java ``short``/``byte``
values that overflow, and the properties parser silently drops what it cannot read.

Decoders have two modes. ``mode="strict"`` (default) accepts only bytes the encoder of ``version`` could have
written, so anything that decodes re-encodes to the same bytes; everything else raises ``DecodeError`` with
what is wrong and where. ``mode="java"`` does what the Java decoder of ``version`` does, edge for edge
(malformed UTF-8 becomes U+FFFD, header fields are ignored, unreadable property segments are dropped, a
store record's empty body or properties stay None, 5.x reads the V2 store format, ``decodes`` returns the
records before the first bad one) and raises ``JavaDecodeError`` where Java throws or where its ``decode``
catches an exception and returns null. Where strict deliberately differs (``b""`` / ``{}`` for zero-length
store sections; V1 records only), the function says so. Decoders raise nothing but ``DecodeError`` whatever
the bytes (asking for a flag the version's decoder lacks is a ``ConfigError``).
Encoders raise ``JavaEncodeError`` (an ``EncodeError``) where Java throws.

The size functions return ``len(encode(...))`` without building bytes; the vectorised ones do it for
columns of lengths (numpy / pyarrow) at tens of millions of rows per second.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal, Union
from zoneinfo import ZoneInfo

import numpy as np

from rocketsim.client.versions import V4_9_8, ClientVersion, PropertiesEncoding
from rocketsim.errors import ConfigError, DecodeError, EncodeError
from rocketsim.format import compression
from rocketsim.format.message import Message, MessageSysFlag
from rocketsim.javaint import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN, int8, int16, int32, java_string_hash

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "BLANK_MAGIC_CODE",
    "MESSAGE_MAGIC_CODE",
    "MESSAGE_MAGIC_CODE_V2",
    "MAX_PROPERTIES_SIZE",
    "NAME_VALUE_SEPARATOR",
    "PROPERTY_SEPARATOR",
    "JavaDecodeError",
    "JavaEncodeError",
    "MessageClientIDSetter",
    "MessageId",
    "SocketAddress",
    "StoredMessage",
    "build_uniq_id",
    "crc32_masked",
    "create_message_id",
    "decimal_lengths",
    "decode_message_id",
    "decode_messages",
    "decode_store",
    "decode_store_properties",
    "decode_stores",
    "encode_message",
    "encode_messages",
    "encode_store",
    "encoded_message_size",
    "encoded_message_sizes",
    "encoded_messages_size",
    "fake_ip",
    "ip_text",
    "java_inet_address_bytes",
    "java_hashmap_order",
    "java_utf8_decode",
    "java_utf8_encode",
    "message_decoder_constants",
    "month_start_ms",
    "next_month_start_ms",
    "parse_properties",
    "parsed_properties_java_order",
    "properties_size",
    "properties_sizes",
    "properties_to_bytes",
    "properties_to_string",
    "store_size",
    "store_sizes",
    "string_to_properties",
    "uniq_id_ip",
    "uniq_id_ip_str",
    "uniq_id_nearly_time",
    "uniq_id_pid",
    "utf16_len",
    "utf8_len",
]

Mode = Literal["strict", "java"]
PropertyItems = Mapping[str | None, str | None] | Iterable[tuple[str | None, str | None]] | None

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
MAX_PROPERTIES_SIZE = 32767  # Short.MAX_VALUE: the PROPLEN field is a signed short
MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7
MESSAGE_MAGIC_CODE_V2 = -626843477  # 0xDAA320AB, 5.x commit log with a 2-byte topic length
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194, end-of-file filler in the commit log

_PROPS_TOO_BIG_4_9 = "Properties size of message exceeded, properties size: {}, maxSize: {}."


class JavaEncodeError(EncodeError):
    """Upstream's encoder throws for this input; ``java_exception``/``java_message`` say what it throws."""

    def __init__(self, message: str, java_exception: str, java_message: str | None = None) -> None:
        super().__init__(message)
        self.java_exception = java_exception
        self.java_message = java_message


class JavaDecodeError(DecodeError):
    """Upstream's decoder throws (or returns null) for these bytes; names the Java exception."""

    def __init__(self, message: str, java_exception: str, java_message: str | None = None) -> None:
        super().__init__(message)
        self.java_exception = java_exception
        self.java_message = java_message


_BUFFER_UNDERFLOW = "java.nio.BufferUnderflowException"
_BUFFER_OVERFLOW = "java.nio.BufferOverflowException"
_NEGATIVE_ARRAY = "java.lang.NegativeArraySizeException"
_ILLEGAL_ARGUMENT = "java.lang.IllegalArgumentException"
_NPE = "java.lang.NullPointerException"


def _allocate(capacity: int, needed: int, what: str) -> None:
    """``ByteBuffer.allocate(capacity)`` then writes of ``needed`` bytes: raise as Java would."""
    if capacity < 0:
        msg = f"capacity < 0: ({capacity} < 0)"
        raise JavaEncodeError(f"{what}: Java computes a negative buffer size ({msg})", _ILLEGAL_ARGUMENT, msg)
    if needed > capacity:
        raise JavaEncodeError(
            f"{what}: {needed} bytes do not fit the {capacity}-byte buffer Java allocates", _BUFFER_OVERFLOW
        )


def _check_range(name: str, value: int, lo: int, hi: int, java_type: str) -> None:
    if not lo <= value <= hi:
        raise EncodeError(f"{name} must fit a Java {java_type}, got {value}")


# --------------------------------------------------------------------------------------------------
# Java strings: UTF-8 the way String.getBytes / new String(bytes, UTF_8) do it
# --------------------------------------------------------------------------------------------------


def java_utf8_encode(text: str) -> bytes:
    """``text.getBytes(UTF_8)``: a lone surrogate becomes ``?``; a surrogate pair one 4-byte character."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Join surrogate pairs held as two code points, then let 'replace' write '?' for lone ones.
        joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        return joined.encode("utf-8", "replace")


def utf8_len(text: str) -> int:
    """Length of ``java_utf8_encode(text)``."""
    return len(text) if text.isascii() else len(java_utf8_encode(text))


def utf16_len(text: str) -> int:
    """Java ``String.length()``: UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def java_utf8_decode(data: bytes) -> str:
    """``new String(data, UTF_8)``: malformed input becomes U+FFFD exactly where the JDK puts them."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return _java_utf8_decode_malformed(bytes(data))


def _cont(b: int) -> bool:
    return (b & 0xC0) == 0x80


def _java_utf8_decode_malformed(b: bytes) -> str:
    # The JDK's replacement rules (String.decodeUTF8_UTF16): one U+FFFD per malformed subsequence, where the
    # length of a malformed 3-/4-byte sequence depends on which byte first breaks it.
    out: list[str] = []
    n = len(b)
    i = 0
    repl = "\ufffd"
    while i < n:
        b1 = b[i]
        i += 1
        if b1 < 0x80:
            out.append(chr(b1))
        elif 0xC2 <= b1 <= 0xDF:
            if i < n:
                b2 = b[i]
                if _cont(b2):
                    out.append(chr(((b1 & 0x1F) << 6) | (b2 & 0x3F)))
                    i += 1
                else:
                    out.append(repl)
                continue
            out.append(repl)
            break
        elif 0xE0 <= b1 <= 0xEF:
            if i + 1 < n:
                b2, b3 = b[i], b[i + 1]
                if (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _cont(b2) or not _cont(b3):
                    out.append(repl)
                    i += 0 if ((b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _cont(b2)) else 1
                else:
                    c = ((b1 & 0x0F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
                    out.append(repl if 0xD800 <= c <= 0xDFFF else chr(c))
                    i += 2
                continue
            if i < n and ((b1 == 0xE0 and (b[i] & 0xE0) == 0x80) or not _cont(b[i])):
                out.append(repl)
                continue
            out.append(repl)
            break
        elif 0xF0 <= b1 <= 0xF7:
            if i + 2 < n:
                b2, b3, b4 = b[i], b[i + 1], b[i + 2]
                uc = ((b1 & 0x07) << 18) | ((b2 & 0x3F) << 12) | ((b3 & 0x3F) << 6) | (b4 & 0x3F)
                if not (_cont(b2) and _cont(b3) and _cont(b4)) or not 0x10000 <= uc <= 0x10FFFF:
                    out.append(repl)
                    if (
                        b1 > 0xF4
                        or (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF)
                        or (b1 == 0xF4 and (b2 & 0xF0) != 0x80)
                        or not _cont(b2)
                    ):
                        pass
                    elif not _cont(b3):
                        i += 1
                    else:
                        i += 2
                else:
                    out.append(chr(uc))
                    i += 3
                continue
            if b1 > 0xF4 or (
                i < n
                and (
                    (b1 == 0xF0 and not 0x90 <= b[i] <= 0xBF)
                    or (b1 == 0xF4 and (b[i] & 0xF0) != 0x80)
                    or not _cont(b[i])
                )
            ):
                out.append(repl)
                continue
            i += 1
            out.append(repl)
            if i < n and not _cont(b[i]):
                continue
            break
        else:
            out.append(repl)
    return "".join(out)


def java_hashmap_order(keys: Iterable[str | None], initial_capacity: int = 16) -> list[str | None]:
    """The order a ``java.util.HashMap`` iterates keys put in this order (duplicates keep their first slot).

    Bins are visited in index order, entries inside a bin in insertion order (resizing keeps that order).
    Not modelled: bins turned into trees (9+ keys colliding in one bin of a 64+ table).
    """
    unique = list(dict.fromkeys(keys))
    cap = 1
    while cap < max(initial_capacity, 1):
        cap <<= 1
    while len(unique) > cap * 3 // 4:
        cap <<= 1
    mask = cap - 1

    def bucket(key: str | None) -> int:
        h = java_string_hash(key) & 0xFFFF_FFFF
        return (h ^ (h >> 16)) & mask

    order = sorted(range(len(unique)), key=lambda k: (bucket(unique[k]), k))
    return [unique[k] for k in order]


# --------------------------------------------------------------------------------------------------
# Properties <-> string
# --------------------------------------------------------------------------------------------------


def _items(props: PropertyItems) -> Iterable[tuple[str | None, str | None]]:
    if props is None:
        return ()
    if isinstance(props, Mapping):
        return props.items()
    return props


def properties_to_string(props: PropertyItems, *, version: PropertiesEncoding = V4_9_8) -> str:
    """``messageProperties2String``: ``name\\x01value\\x02`` per entry, null values skipped, a null name
    written as ``null``; 4.9 removes the final ``\\x02``, 5.x keeps it. Nothing is escaped."""
    parts = [
        f"{'null' if name is None else name}\x01{value}\x02"
        for name, value in _items(props)
        if value is not None
    ]
    text = "".join(parts)
    if text and not version.properties_trailing_separator:
        return text[:-1]
    return text


def properties_to_bytes(props: PropertyItems, *, version: PropertiesEncoding = V4_9_8) -> bytes:
    """UTF-8 bytes of ``properties_to_string`` (Java's encoder: lone surrogates become ``?``)."""
    return java_utf8_encode(properties_to_string(props, version=version))


def properties_size(props: PropertyItems, *, version: PropertiesEncoding = V4_9_8) -> int:
    """``len(properties_to_bytes(props, version=version))`` without building the string."""
    total = 0
    for name, value in _items(props):
        if value is None:
            continue
        total += (4 if name is None else utf8_len(name)) + utf8_len(value) + 2
    if total and not version.properties_trailing_separator:
        total -= 1
    return total


def string_to_properties(text: str | None) -> dict[str, str]:
    """``string2messageProperties``: split on ``\\x02``, cut each segment at its first ``\\x01``.

    A segment is kept only with a non-empty name and a non-empty value; the value may contain ``\\x01``;
    the last of duplicate names wins. Keys are in first-seen order (``java_hashmap_order`` gives Java's).
    """
    out: dict[str, str] = {}
    if not text:
        return out
    for segment in text.split(PROPERTY_SEPARATOR):
        name, sep, value = segment.partition(NAME_VALUE_SEPARATOR)
        if sep and name and value:
            out[name] = value
    return out


def parsed_properties_java_order(
    props: Mapping[str, str], *, version: PropertiesEncoding = V4_9_8
) -> list[str]:
    """Key order of the ``HashMap`` that ``string2messageProperties`` returns (capacity 16; 128 in 5.x)."""
    return [k for k in java_hashmap_order(props, version.properties_map_capacity) if k is not None]


def parse_properties(
    data: bytes, *, version: ClientVersion = V4_9_8, mode: Mode = "strict", where: str = "properties"
) -> dict[str, str]:
    """Properties bytes -> map. ``strict``: valid UTF-8 in ``version``'s canonical form, else DecodeError."""
    if mode == "java":
        return string_to_properties(java_utf8_decode(data))
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"{where}: invalid UTF-8 at byte {exc.start} ({exc.reason})") from None
    out: dict[str, str] = {}
    if not text:
        return out
    if text.endswith(PROPERTY_SEPARATOR):
        if not version.properties_trailing_separator:
            raise DecodeError(f"{where}: ends with \\x02, which {version} does not write (5.x does)")
        text = text[:-1]
    elif version.properties_trailing_separator:
        raise DecodeError(f"{where}: lacks the trailing \\x02 that {version} writes (4.9 removes it)")
    for index, segment in enumerate(text.split(PROPERTY_SEPARATOR)):
        name, sep, value = segment.partition(NAME_VALUE_SEPARATOR)
        if not sep:
            raise DecodeError(f"{where}: entry {index} {segment[:40]!r} has no \\x01 separator")
        if not name or not value:
            raise DecodeError(f"{where}: entry {index} has an empty {'name' if not name else 'value'}")
        if name in out:
            raise DecodeError(f"{where}: entry {index} repeats the name {name[:40]!r}")
        out[name] = value
    return out


# --------------------------------------------------------------------------------------------------
# Batch element format (MessageDecoder.encodeMessage / decodeMessages)
# --------------------------------------------------------------------------------------------------
#
# One element, big-endian; a batch body is the elements back to back. The topic is not written.
#   int    TOTALSIZE   length of the whole element
#   int    MAGICCODE   always 0
#   int    BODYCRC     always 0
#   int    FLAG        Message.getFlag()
#   int    BODYLEN
#   bytes  BODY        BODYLEN bytes
#   short  PROPLEN
#   bytes  PROPERTIES  PROPLEN bytes, UTF-8 of messageProperties2String
ELEMENT_HEADER = struct.Struct(
    ">i"  # TOTALSIZE
    "i"  # MAGICCODE
    "i"  # BODYCRC
    "i"  # FLAG
    "i"  # BODYLEN
)
PROPLEN = struct.Struct(">h")  # PROPLEN (signed short)
ELEMENT_OVERHEAD = ELEMENT_HEADER.size + PROPLEN.size  # 22

_NPE_ENCODE_MESSAGE = 'Cannot read the array length because "<local1>" is null'


def _checked_properties_bytes(props: PropertyItems, version: ClientVersion, where: str) -> tuple[bytes, int]:
    """Properties bytes and the PROPLEN Java writes; raise where ``encodeMessage`` refuses or overflows."""
    data = properties_to_bytes(props, version=version)
    size = len(data)
    if size > MAX_PROPERTIES_SIZE and version.checks_properties_size_on_encode:
        err = JavaEncodeError(_PROPS_TOO_BIG_4_9, "java.lang.RuntimeException", _PROPS_TOO_BIG_4_9)
        err.properties_size = size  # type: ignore[attr-defined]
        err.max_size = MAX_PROPERTIES_SIZE  # type: ignore[attr-defined]
        raise err
    return data, int16(size)


def encode_message(msg: Message, *, version: ClientVersion = V4_9_8) -> bytes:
    """``MessageDecoder.encodeMessage``: one batch element (flag, body, properties).

    4.9 refuses properties over 32767 bytes with upstream's literal text; 5.x has no check and fails the
    way Java does when the ``short`` length overflows (``JavaEncodeError`` naming the Java exception).
    """
    body = msg.body
    if body is None:
        raise JavaEncodeError("message body is None (Java: NullPointerException)", _NPE, _NPE_ENCODE_MESSAGE)
    _check_range("flag", msg.flag, INT_MIN, INT_MAX, "int")
    props, prop_len = _checked_properties_bytes(msg.properties, version, "encodeMessage")
    needed = ELEMENT_OVERHEAD + len(body) + len(props)
    capacity = int32(ELEMENT_OVERHEAD + len(body) + prop_len)
    if capacity != needed:
        _allocate(capacity, needed, f"encodeMessage with {len(props)} property bytes")
    return b"".join(
        (ELEMENT_HEADER.pack(needed, 0, 0, msg.flag, len(body)), body, PROPLEN.pack(prop_len), props)
    )


def encode_messages(msgs: Iterable[Message], *, version: ClientVersion = V4_9_8) -> bytes:
    """``MessageDecoder.encodeMessages``: the elements concatenated (a ``MessageBatch`` body)."""
    return b"".join([encode_message(m, version=version) for m in msgs])


def encoded_message_size(msg: Message, *, version: ClientVersion = V4_9_8) -> int:
    """``len(encode_message(msg, version=version))``; raises exactly where ``encode_message`` raises."""
    if msg.body is None:
        raise JavaEncodeError("message body is None (Java: NullPointerException)", _NPE, _NPE_ENCODE_MESSAGE)
    _check_range("flag", msg.flag, INT_MIN, INT_MAX, "int")
    size = properties_size(msg.properties, version=version)
    if size > MAX_PROPERTIES_SIZE:
        _checked_properties_bytes(msg.properties, version, "encodeMessage")  # raises the 4.9 error
        capacity = int32(ELEMENT_OVERHEAD + len(msg.body) + int16(size))
        _allocate(
            capacity, ELEMENT_OVERHEAD + len(msg.body) + size, f"encodeMessage with {size} property bytes"
        )
    needed = ELEMENT_OVERHEAD + len(msg.body) + size
    if needed > INT_MAX:
        _allocate(int32(needed), needed, "encodeMessage")
    return needed


def encoded_messages_size(msgs: Iterable[Message], *, version: ClientVersion = V4_9_8) -> int:
    """``len(encode_messages(msgs, version=version))``."""
    return sum(encoded_message_size(m, version=version) for m in msgs)


def decode_messages(
    data: bytes, *, topic: str = "", version: ClientVersion = V4_9_8, mode: Mode = "strict"
) -> list[Message]:
    """``MessageDecoder.decodeMessages``: batch elements back to ``Message`` objects (with ``topic``).

    ``strict``: TOTALSIZE must match, MAGICCODE and BODYCRC must be 0, lengths non-negative and inside the
    data, properties canonical for ``version``. ``java``: header fields ignored, Java's exceptions (no
    try/catch upstream: ``NegativeArraySizeException`` for a negative length, ``BufferUnderflowException``
    for short input). In both, ``decodeMessage``'s ``new byte[len]`` makes a BODYLEN / PROPLEN of 0 an
    empty body ``b""`` and empty properties ``{}`` (not None, unlike a store record's ``decode``).
    Not modelled: 5.x's inner-batch helpers ``decodeMessage(MessageExt, List)`` / ``countInnerMsgNum``
    (the broker's batch consume queue, which the producer model never reads).
    """
    view = memoryview(data)
    end = len(view)
    pos = 0
    out: list[Message] = []
    index = 0
    strict = mode == "strict"
    while pos < end:
        where = f"batch element {index} at byte {pos}"
        if end - pos < ELEMENT_HEADER.size:
            raise JavaDecodeError(
                f"{where}: truncated header, needs {ELEMENT_HEADER.size} bytes, {end - pos} left",
                _BUFFER_UNDERFLOW,
            )
        total, magic, crc, flag, body_len = ELEMENT_HEADER.unpack_from(view, pos)
        p = pos + ELEMENT_HEADER.size
        if body_len < 0:
            raise JavaDecodeError(f"{where}: BODYLEN {body_len} is negative", _NEGATIVE_ARRAY, str(body_len))
        if body_len > end - p:
            raise JavaDecodeError(
                f"{where}: BODYLEN {body_len} runs past the end ({end - p} bytes left)", _BUFFER_UNDERFLOW
            )
        body = bytes(view[p : p + body_len])
        p += body_len
        if end - p < PROPLEN.size:
            raise JavaDecodeError(
                f"{where}: truncated before PROPLEN ({end - p} bytes left)", _BUFFER_UNDERFLOW
            )
        (prop_len,) = PROPLEN.unpack_from(view, p)
        p += PROPLEN.size
        if prop_len < 0:
            raise JavaDecodeError(f"{where}: PROPLEN {prop_len} is negative", _NEGATIVE_ARRAY, str(prop_len))
        if prop_len > end - p:
            raise JavaDecodeError(
                f"{where}: PROPLEN {prop_len} runs past the end ({end - p} bytes left)", _BUFFER_UNDERFLOW
            )
        prop_bytes = bytes(view[p : p + prop_len])
        p += prop_len
        if strict:
            if total != p - pos:
                raise DecodeError(f"{where}: TOTALSIZE {total} does not match the element's {p - pos} bytes")
            if magic != 0 or crc != 0:
                raise DecodeError(f"{where}: MAGICCODE/BODYCRC must be 0, got {magic:#x}/{crc:#x}")
        props = parse_properties(prop_bytes, version=version, mode=mode, where=f"{where}: properties")
        out.append(Message(topic, body, flag, props))
        pos = p
        index += 1
    return out


# --------------------------------------------------------------------------------------------------
# Hosts, message ids, CRC
# --------------------------------------------------------------------------------------------------

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


_PORT_OFFSET = struct.Struct(
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
    _check_range("offset", offset, LONG_MIN, LONG_MAX, "long")
    return (ip + _PORT_OFFSET.pack(port, offset)).hex().upper()


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


def _hex_bytes(text: str, where: str, lengths: tuple[int, ...]) -> bytes:
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
        raw = _hex_bytes(msg_id, "message id", (32, 56))
        ip_len = 4 if len(raw) == 16 else 16
        port, offset = _PORT_OFFSET.unpack_from(raw, ip_len)
        if port < 0 or port > 0xFFFF:
            raise JavaDecodeError(
                f"message id: port {port} out of range", _ILLEGAL_ARGUMENT, f"port out of range:{port}"
            )
        return MessageId(java_inet_address_bytes(raw[:ip_len]), port, offset)
    java_bytes = _java_string2bytes(msg_id)
    if java_bytes is None:
        raise JavaDecodeError("message id is empty", _NPE)
    ip_len = 4 if utf16_len(msg_id) == 32 else 16
    if len(java_bytes) < ip_len + _PORT_OFFSET.size:
        raise JavaDecodeError(f"message id: {len(java_bytes)} bytes, needs {ip_len + 12}", _BUFFER_UNDERFLOW)
    port, offset = _PORT_OFFSET.unpack_from(java_bytes, ip_len)
    if port < 0 or port > 0xFFFF:
        raise JavaDecodeError(
            f"message id: port {port} out of range", _ILLEGAL_ARGUMENT, f"port out of range:{port}"
        )
    return MessageId(java_inet_address_bytes(java_bytes[:ip_len]), port, offset)


def crc32_masked(data: bytes) -> int:
    """``UtilAll.crc32``: CRC32 with the sign bit cleared (the BODYCRC the broker stores)."""
    return zlib.crc32(data) & 0x7FFF_FFFF


# --------------------------------------------------------------------------------------------------
# Broker store format (MessageDecoder.encode(MessageExt) / decode(ByteBuffer))
# --------------------------------------------------------------------------------------------------
#
# One commit-log record, big-endian:
#   int    TOTALSIZE
#   int    MAGICCODE                   MESSAGE_MAGIC_CODE 0xDAA320A7
#   int    BODYCRC                     as the MessageExt holds it (the broker stores crc32_masked(body))
#   int    QUEUEID
#   int    FLAG
#   long   QUEUEOFFSET
#   long   PHYSICALOFFSET              commitLogOffset
#   int    SYSFLAG                     BORNHOST_V6 (0x10) / STOREHOSTADDRESS_V6 (0x20) pick the host sizes
#   long   BORNTIMESTAMP
#   bytes  BORNHOST                    4-byte IPv4 or 16-byte IPv6 address, then int port
#   long   STORETIMESTAMP
#   bytes  STOREHOST                   same rule
#   int    RECONSUMETIMES
#   long   PREPARED_TRANSACTION_OFFSET
#   int    BODYLEN, BODY
#   byte   TOPICLEN, TOPIC             UTF-8; a signed byte, so 128+ bytes overflow
#   short  PROPLEN, PROPERTIES
#   (zero padding up to TOTALSIZE when the MessageExt carries a preset storeSize)
STORE_HEAD = struct.Struct(
    ">i"  # TOTALSIZE
    "i"  # MAGICCODE
    "i"  # BODYCRC
    "i"  # QUEUEID
    "i"  # FLAG
    "q"  # QUEUEOFFSET
    "q"  # PHYSICALOFFSET
    "i"  # SYSFLAG
    "q"  # BORNTIMESTAMP
)
STORE_PORT = struct.Struct(">i")  # port after each host address
STORE_TIMESTAMP = struct.Struct(">q")  # STORETIMESTAMP
STORE_MID = struct.Struct(
    ">i"  # RECONSUMETIMES
    "q"  # PREPARED_TRANSACTION_OFFSET
    "i"  # BODYLEN
)
TOPICLEN = struct.Struct(">b")  # TOPICLEN (signed byte)
# Fixed part with two IPv4 hosts: head + 2 x (4 + port) + store timestamp + mid (incl. BODYLEN) + TOPICLEN
# + PROPLEN.
STORE_FIXED_V4 = STORE_HEAD.size + 2 * (4 + 4) + STORE_TIMESTAMP.size + STORE_MID.size + 1 + 2  # 91


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A ``MessageExt`` as the store format holds it.

    ``store_size`` is upstream's ``storeSize``: 0 lets ``encode_store`` compute the size; a positive value is
    the buffer size Java allocates (zero padding, or an overflow if too small). Decoding sets it to
    TOTALSIZE. Host addresses keep the bytes as written (``msg_id`` applies Java's IPv4-mapped rule).
    ``body`` and ``properties`` are None where upstream leaves them null (a java-mode decode of BODYLEN or
    PROPLEN <= 0); ``encode_store`` writes None properties as PROPLEN 0, like ``{}``.
    """

    topic: str
    body: bytes | None
    born_host: SocketAddress
    store_host: SocketAddress
    properties: Mapping[str, str] | None = field(default_factory=lambda: MappingProxyType({}))
    sys_flag: int = 0
    flag: int = 0
    body_crc: int = 0
    queue_id: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    born_timestamp: int = 0
    store_timestamp: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    store_size: int = 0

    def __post_init__(self) -> None:
        if self.properties is not None:  # None: Java's null map (a java-mode decode of PROPLEN <= 0)
            object.__setattr__(self, "properties", MappingProxyType(dict(self.properties)))

    @property
    def msg_id(self) -> str:
        """The offset message id the Java decoder computes: store host + port + commit-log offset.

        Upstream sizes its buffer by the STOREHOST_V6 bit but writes the Java address, so an IPv4-mapped
        IPv6 store host gives a 4-byte address followed by 12 zero bytes.
        """
        ip = java_inet_address_bytes(self.store_host.ip)
        ip_len = 16 if self.sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG else 4
        raw = ip + _PORT_OFFSET.pack(self.store_host.port, self.commit_log_offset)
        return raw.ljust(ip_len + 12, b"\x00").hex().upper()


def _store_parts(msg: StoredMessage, version: PropertiesEncoding) -> tuple[bytes, bytes, int, int]:
    """(topic bytes, properties bytes, computed Java capacity, bytes actually written)."""
    if msg.body is None:
        raise JavaEncodeError("store encode: body is None (Java: NullPointerException)", _NPE)
    topic = java_utf8_encode(msg.topic)
    props = properties_to_bytes(msg.properties, version=version)
    born_len = 20 if msg.sys_flag & MessageSysFlag.BORNHOST_V6_FLAG else 8
    store_len = 20 if msg.sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG else 8
    base = STORE_HEAD.size + STORE_TIMESTAMP.size + STORE_MID.size + 1 + 2
    computed = int32(base + born_len + store_len + len(msg.body) + int8(len(topic)) + int16(len(props)))
    needed = (
        base
        + len(msg.born_host.ip)
        + 4
        + len(msg.store_host.ip)
        + 4
        + len(msg.body)
        + len(topic)
        + len(props)
    )
    return topic, props, computed, needed


def _check_store_fields(msg: StoredMessage) -> None:
    for name in ("sys_flag", "flag", "body_crc", "queue_id", "reconsume_times", "store_size"):
        _check_range(name, getattr(msg, name), INT_MIN, INT_MAX, "int")
    for name in (
        "queue_offset",
        "commit_log_offset",
        "born_timestamp",
        "store_timestamp",
        "prepared_transaction_offset",
    ):
        _check_range(name, getattr(msg, name), LONG_MIN, LONG_MAX, "long")


def encode_store(msg: StoredMessage, *, version: PropertiesEncoding = V4_9_8) -> bytes:
    """``MessageDecoder.encode(messageExt, needCompress=false)``: one store-format record.

    Java's overflows are reproduced: a topic of 128+ UTF-8 bytes or properties over 32767 bytes corrupt the
    computed size (negative: IllegalArgumentException; too small: BufferOverflowException); so does an IPv6
    host without its V6 sys-flag bit. A preset ``store_size`` is used as is (zero padding). ``version``
    encodes the properties: a broker writes its store with its own release's (a ``BrokerVersion``).
    """
    _check_store_fields(msg)
    topic, props, computed, needed = _store_parts(msg, version)
    capacity = msg.store_size if msg.store_size > 0 else computed
    _allocate(capacity, needed, "store encode")
    body = msg.body
    assert body is not None  # checked by _store_parts
    parts = [
        STORE_HEAD.pack(
            capacity,
            MESSAGE_MAGIC_CODE,
            msg.body_crc,
            msg.queue_id,
            msg.flag,
            msg.queue_offset,
            msg.commit_log_offset,
            msg.sys_flag,
            msg.born_timestamp,
        ),
        msg.born_host.ip,
        STORE_PORT.pack(msg.born_host.port),
        STORE_TIMESTAMP.pack(msg.store_timestamp),
        msg.store_host.ip,
        STORE_PORT.pack(msg.store_host.port),
        STORE_MID.pack(msg.reconsume_times, msg.prepared_transaction_offset, len(body)),
        body,
        TOPICLEN.pack(int8(len(topic))),
        topic,
        PROPLEN.pack(int16(len(props))),
        props,
    ]
    if capacity > needed:
        parts.append(bytes(capacity - needed))
    return b"".join(parts)


def store_size(msg: StoredMessage, *, version: PropertiesEncoding = V4_9_8) -> int:
    """``len(encode_store(msg, version=version))``; raises exactly where ``encode_store`` raises."""
    _check_store_fields(msg)
    if msg.body is None:
        raise JavaEncodeError("store encode: body is None (Java: NullPointerException)", _NPE)
    topic_len = utf8_len(msg.topic)
    props_len = properties_size(msg.properties, version=version)
    born_len = 20 if msg.sys_flag & MessageSysFlag.BORNHOST_V6_FLAG else 8
    store_len = 20 if msg.sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG else 8
    base = STORE_HEAD.size + STORE_TIMESTAMP.size + STORE_MID.size + 1 + 2
    computed = int32(base + born_len + store_len + len(msg.body) + int8(topic_len) + int16(props_len))
    needed = (
        base + len(msg.born_host.ip) + 4 + len(msg.store_host.ip) + 4 + len(msg.body) + topic_len + props_len
    )
    capacity = msg.store_size if msg.store_size > 0 else computed
    _allocate(capacity, needed, "store encode")
    return capacity


@dataclass(frozen=True, slots=True)
class _JavaDecodeOptions:
    """The flags of upstream's ``decode(buffer, readBody, deCompressBody, isClient, isSetPropertiesString,
    checkCRC)`` that change what is read (``isClient`` only picks ``MessageClientExt``, whose ``getMsgId()``
    is the ``UNIQ_KEY`` property when present; :attr:`StoredMessage.msg_id` is its ``offsetMsgId``)."""

    read_body: bool = True
    decompress_body: bool = False
    check_crc: bool = False
    set_properties_string: bool = False


_STRICT_OPTIONS = _JavaDecodeOptions()
_TOTAL_MAGIC = struct.Struct(
    ">i"  # TOTALSIZE
    "i"  # MAGICCODE
)
_TOPICLEN_V2 = struct.Struct(">h")  # TOPICLEN of the 5.x V2 format (signed short)
_CRC_ERROR = "Msg crc is error!"


def _java_options(
    version: ClientVersion,
    mode: Mode,
    *,
    read_body: bool,
    decompress_body: bool,
    check_crc: bool,
    set_properties_string: bool,
) -> _JavaDecodeOptions:
    options = _JavaDecodeOptions(read_body, decompress_body, check_crc, set_properties_string)
    if mode == "strict" and options != _STRICT_OPTIONS:
        raise ConfigError(
            "read_body, decompress_body, check_crc and set_properties_string apply to mode='java' only "
            "(strict mode reads exactly what encode_store writes)"
        )
    if check_crc and not version.decoder_has_crc_check_option:
        raise ConfigError(f"check_crc: MessageDecoder.decode of {version} has no checkCRC flag (5.x has)")
    if set_properties_string and not version.decoder_has_properties_string_option:
        raise ConfigError(
            f"set_properties_string: MessageDecoder.decode of {version} has no isSetPropertiesString flag "
            "(5.x has)"
        )
    return options


def _store_topic_length_size(magic: int, version: ClientVersion, strict: bool, where: str) -> int:
    """Bytes of TOPICLEN for a record with this magic code: 1 (V1), 2 (5.x V2, java mode); else raise.

    4.9's decoder never reads the magic (any value, V1 layout); 5.x's ``MessageVersion.valueOfMagicCode``
    knows V1 and V2 and throws ``IllegalArgumentException("Invalid magicCode " + m)`` for anything else.
    Strict mode reads only what ``encode_store`` writes (V1), in every version.
    """
    if magic == MESSAGE_MAGIC_CODE or not (strict or version.decoder_refuses_unknown_magic):
        return 1
    if magic == MESSAGE_MAGIC_CODE_V2 and not strict and version.decoder_knows_v2_store_format:
        return 2
    note = ""
    if magic == MESSAGE_MAGIC_CODE_V2:
        note = (
            " (the 5.x V2 format with a 2-byte topic length: encode_store never writes it, so strict mode "
            "refuses it; mode='java' reads it for a 5.x version)"
            if strict and version.decoder_knows_v2_store_format
            else " (the V2 format with a 2-byte topic length is not supported)"
        )
    raise JavaDecodeError(
        f"{where}: MAGICCODE {magic & 0xFFFF_FFFF:#010x} is not "
        f"{MESSAGE_MAGIC_CODE & 0xFFFF_FFFF:#010x}{note}",
        _ILLEGAL_ARGUMENT,
        f"Invalid magicCode {magic}",
    )


def _java_body(
    body: bytes, sys_flag: int, body_crc: int, version: ClientVersion, options: _JavaDecodeOptions, where: str
) -> tuple[bytes, int]:
    """What 4.9/5.x ``decode`` does to a read body: the 5.x CRC check, then decompression (``deCompressBody``
    and COMPRESSED_FLAG): by the sys flag's type bits from 4.9.4 (``CompressorFactory``; zlib before,
    ``UtilAll.uncompress``), clearing COMPRESSED_FLAG in the sys flag from 5.3.2. Returns (body, sys flag)."""
    if options.check_crc and crc32_masked(body) != body_crc:
        raise JavaDecodeError(
            f"{where}: BODYCRC {body_crc} is not the body's {crc32_masked(body)}",
            "java.lang.Exception",
            _CRC_ERROR,
        )
    if options.decompress_body and sys_flag & MessageSysFlag.COMPRESSED_FLAG:
        try:
            ctype = (
                compression.get_compression_type(sys_flag)
                if version.decoder_decompresses_by_type
                else compression.CompressionType.ZLIB
            )
        except compression.CompressionTypeError as exc:
            raise JavaDecodeError(f"{where}: {exc}", "java.lang.RuntimeException", str(exc)) from None
        try:
            body = compression.decompress_as(body, ctype, java_compat=True)
        except DecodeError as exc:
            raise JavaDecodeError(f"{where}: {exc}", "java.io.IOException") from None
        if version.decoder_clears_compressed_flag:
            sys_flag &= ~MessageSysFlag.COMPRESSED_FLAG
    return body, sys_flag


def _decode_store_at(
    view: memoryview,
    pos: int,
    end: int,
    version: ClientVersion,
    mode: Mode,
    where: str,
    options: _JavaDecodeOptions = _STRICT_OPTIONS,
) -> tuple[StoredMessage, int]:
    """Decode one record starting at ``pos``; returns it and the offset after its last field.

    Java mode follows ``MessageDecoder.decode``'s reads one by one, so it raises (with the Java exception
    it catches) exactly where upstream's ``decode`` returns null.
    """
    strict = mode == "strict"

    def need(p: int, n: int, what: str) -> None:
        if end - p < n:
            raise JavaDecodeError(
                f"{where}: truncated in {what} at byte {p} (needs {n}, {end - p} left)", _BUFFER_UNDERFLOW
            )

    need(pos, _TOTAL_MAGIC.size, "TOTALSIZE/MAGICCODE")
    _, magic = _TOTAL_MAGIC.unpack_from(view, pos)
    topic_len_size = _store_topic_length_size(magic, version, strict, where)  # 5.x checks it at once
    need(pos, STORE_HEAD.size, "the fixed header")
    (total, magic, body_crc, queue_id, flag, queue_offset, commit_log_offset, sys_flag, born_ts) = (
        STORE_HEAD.unpack_from(view, pos)
    )
    p = pos + STORE_HEAD.size

    def host(p: int, v6: bool, what: str) -> tuple[SocketAddress, int]:
        n = 16 if v6 else 4
        need(p, n + 4, what)
        ip = bytes(view[p : p + n])
        (port,) = STORE_PORT.unpack_from(view, p + n)
        if not 0 <= port <= 0xFFFF:
            raise JavaDecodeError(
                f"{where}: {what} port {port} out of range", _ILLEGAL_ARGUMENT, f"port out of range:{port}"
            )
        return SocketAddress(ip, port), p + n + 4

    born_host, p = host(p, bool(sys_flag & MessageSysFlag.BORNHOST_V6_FLAG), "BORNHOST")
    need(p, STORE_TIMESTAMP.size, "STORETIMESTAMP")
    (store_ts,) = STORE_TIMESTAMP.unpack_from(view, p)
    p += STORE_TIMESTAMP.size
    store_host, p = host(p, bool(sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG), "STOREHOST")
    need(p, STORE_MID.size, "RECONSUMETIMES/PREPARED_TRANSACTION_OFFSET/BODYLEN")
    reconsume, prepared, body_len = STORE_MID.unpack_from(view, p)
    p += STORE_MID.size
    # 15 BODY: strict reads b"" for BODYLEN 0 (what encode_store writes for b""); Java leaves the body null
    # when BODYLEN <= 0 and then does not move (a negative length is not skipped backwards)
    body: bytes | None = b"" if strict else None
    if body_len < 0 and strict:
        raise DecodeError(f"{where}: BODYLEN {body_len} is negative")
    if body_len > 0 and not options.read_body:  # byteBuffer.position(position + bodyLen)
        if body_len > end - p:
            raise JavaDecodeError(
                f"{where}: skipping BODY (BODYLEN {body_len}) runs past the end ({end - p} bytes left)",
                _ILLEGAL_ARGUMENT,
            )
        p += body_len
    elif body_len > 0:
        need(p, body_len, f"BODY (BODYLEN {body_len})")
        body = bytes(view[p : p + body_len])
        p += body_len
        if not strict:
            body, sys_flag = _java_body(body, sys_flag, body_crc, version, options, where)
    # 16 TOPIC: a signed byte, or a signed short in the 5.x V2 format
    length_field = TOPICLEN if topic_len_size == 1 else _TOPICLEN_V2
    need(p, length_field.size, "TOPICLEN")
    (topic_len,) = length_field.unpack_from(view, p)
    p += length_field.size
    if topic_len < 0:
        raise JavaDecodeError(f"{where}: TOPICLEN {topic_len} is negative", _NEGATIVE_ARRAY, str(topic_len))
    need(p, topic_len, f"TOPIC (TOPICLEN {topic_len})")
    topic_bytes = bytes(view[p : p + topic_len])
    p += topic_len
    if strict:
        try:
            topic = topic_bytes.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"{where}: topic has invalid UTF-8 at byte {exc.start}") from None
    else:
        topic = java_utf8_decode(topic_bytes)
    # 17 PROPERTIES: strict reads {} for PROPLEN 0 (what encode_store writes for no properties); Java leaves
    # the map null when PROPLEN <= 0 and does not move past a negative length
    need(p, PROPLEN.size, "PROPLEN")
    (prop_len,) = PROPLEN.unpack_from(view, p)
    p += PROPLEN.size
    props: dict[str, str] | None = {} if strict else None
    if prop_len < 0 and strict:
        raise DecodeError(f"{where}: PROPLEN {prop_len} is negative")
    if prop_len > 0:
        need(p, prop_len, f"PROPERTIES (PROPLEN {prop_len})")
        raw = bytes(view[p : p + prop_len])
        props = parse_properties(raw, version=version, mode=mode, where=f"{where}: properties")
        if options.set_properties_string:
            props["propertiesString"] = java_utf8_decode(raw)
        p += prop_len
    msg = StoredMessage(
        topic=topic,
        body=body,
        born_host=born_host,
        store_host=store_host,
        properties=props,
        sys_flag=sys_flag,
        flag=flag,
        body_crc=body_crc,
        queue_id=queue_id,
        queue_offset=queue_offset,
        commit_log_offset=commit_log_offset,
        born_timestamp=born_ts,
        store_timestamp=store_ts,
        reconsume_times=reconsume,
        prepared_transaction_offset=prepared,
        store_size=total,
    )
    if strict:
        used = p - pos
        if total < used:
            raise DecodeError(f"{where}: TOTALSIZE {total} is smaller than the record's {used} bytes")
        if total > end - pos:
            raise DecodeError(f"{where}: TOTALSIZE {total} runs past the end ({end - pos} bytes left)")
        if any(view[p : pos + total]):
            raise DecodeError(f"{where}: the {total - used} bytes after the properties are not zero padding")
        p = pos + total
    return msg, p


def decode_store(
    data: bytes,
    *,
    version: ClientVersion = V4_9_8,
    mode: Mode = "strict",
    read_body: bool = True,
    decompress_body: bool = False,
    check_crc: bool = False,
    set_properties_string: bool = False,
) -> StoredMessage:
    """``MessageDecoder.decode(buffer, readBody, deCompressBody[, isClient, isSetPropertiesString,
    checkCRC])``: one store record, by default as ``decode(buffer, true, false)``.

    ``strict``: magic (V1), lengths, padding and TOTALSIZE == len(data) are checked, UTF-8 must be valid;
    a BODYLEN / PROPLEN of 0 reads as ``b""`` / ``{}`` (rocketsim's choice: the record compares equal to
    the one encoded, and ``encode_store`` writes the same bytes for None). The java-mode flags are refused.

    ``java``: what upstream reads, edge for edge (4.9.8 = 4.9.7; 5.3.3): TOTALSIZE ignored, trailing
    bytes ignored; the magic ignored by 4.9, checked by 5.x, which also reads the V2 format (2-byte topic
    length); BODYLEN <= 0 -> ``body`` None (position not moved); PROPLEN <= 0 -> ``properties`` None;
    ``read_body=False`` skips the body (None); ``decompress_body`` inflates a COMPRESSED_FLAG body (5.3.2+
    clear the flag); 5.x only: ``check_crc`` (BODYCRC must be the body's ``UtilAll.crc32``) and
    ``set_properties_string`` (adds ``propertiesString``, the raw properties text). Where upstream's
    ``decode`` catches an exception and returns null, this raises :class:`JavaDecodeError` naming it.
    Not modelled: ``new byte[len]`` beyond the JVM's heap is an ``OutOfMemoryError``, which ``decode`` does
    not catch; here it is the ``BufferUnderflowException`` a large enough heap gives.
    """
    options = _java_options(
        version,
        mode,
        read_body=read_body,
        decompress_body=decompress_body,
        check_crc=check_crc,
        set_properties_string=set_properties_string,
    )
    view = memoryview(data)
    msg, p = _decode_store_at(view, 0, len(view), version, mode, "store record", options)
    if mode == "strict" and p != len(view):
        raise DecodeError(f"store record: {len(view) - p} trailing bytes after TOTALSIZE {msg.store_size}")
    return msg


def decode_stores(
    data: bytes,
    *,
    version: ClientVersion = V4_9_8,
    mode: Mode = "strict",
    read_body: bool = True,
    decompress_body: bool = True,
) -> list[StoredMessage]:
    """Records back to back (a commit-log slice or a pull response body).

    ``strict``: each record strictly decoded and delimited by its TOTALSIZE; any bad record raises.
    ``java``: ``MessageDecoder.decodes(buffer, readBody)`` (``clientDecode``: ``deCompressBody`` true; 5.x
    ``decodesBatch(buffer, readBody, decompressBody, isClient)`` with ``decompress_body``): records are
    read one after the other from where the previous one's properties end (TOTALSIZE, hence padding, is
    ignored) and the list stops before the first record ``decode`` returns null for: the prefix, never an
    exception. ``read_body`` and ``decompress_body`` apply to java mode (strict refuses ``read_body=False``
    and never decompresses).
    """
    view = memoryview(data)
    out: list[StoredMessage] = []
    pos = 0
    if mode == "strict":
        _java_options(
            version,
            mode,
            read_body=read_body,
            decompress_body=False,
            check_crc=False,
            set_properties_string=False,
        )
        while pos < len(view):
            msg, pos = _decode_store_at(view, pos, len(view), version, mode, f"store record {len(out)}")
            out.append(msg)
        return out
    options = _JavaDecodeOptions(read_body=read_body, decompress_body=decompress_body)
    while pos < len(view):  # while (byteBuffer.hasRemaining())
        try:
            msg, pos = _decode_store_at(
                view, pos, len(view), version, mode, f"store record {len(out)}", options
            )
        except DecodeError:  # decode returned null: break
            break
        out.append(msg)
    return out


def decode_store_properties(data: bytes, *, version: ClientVersion = V4_9_8) -> dict[str, str] | None:
    """``MessageDecoder.decodeProperties(buffer)``: only the properties of the record at index 0.

    Absolute reads at offsets computed from SYSFLAG (host sizes), BODYLEN and TOPICLEN, in Java int
    arithmetic (a corrupt BODYLEN may point anywhere, even backwards); 5.x first checks the magic and
    reads a 2-byte TOPICLEN for V2. PROPLEN <= 0 -> None. It has no try/catch: where Java throws
    (``IndexOutOfBoundsException``, ``IllegalArgumentException``, ``BufferUnderflowException``,
    ``NegativeArraySizeException``) this raises :class:`JavaDecodeError` naming it.
    """
    view = memoryview(data)
    limit = len(view)
    where = "decodeProperties"

    def absolute(fmt: struct.Struct, index: int, what: str) -> int:
        if index < 0 or index > limit - fmt.size:
            raise JavaDecodeError(
                f"{where}: {what} at index {index} is outside the {limit} bytes",
                "java.lang.IndexOutOfBoundsException",
            )
        return int(fmt.unpack_from(view, index)[0])

    def position(index: int) -> int:
        if index < 0 or index > limit:
            raise JavaDecodeError(
                f"{where}: position {index} is outside the {limit} bytes", _ILLEGAL_ARGUMENT
            )
        return index

    sys_flag = absolute(STORE_PORT, 36, "SYSFLAG")  # SYSFLAG_POSITION
    topic_len_size = 1
    if version.decoder_refuses_unknown_magic:  # 5.x: MessageVersion.valueOfMagicCode
        magic = absolute(STORE_PORT, 4, "MAGICCODE")  # MESSAGE_MAGIC_CODE_POSITION
        topic_len_size = _store_topic_length_size(magic, version, False, where)
    born_len = 20 if sys_flag & MessageSysFlag.BORNHOST_V6_FLAG else 8
    store_len = 20 if sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG else 8
    body_size_position = STORE_HEAD.size + born_len + STORE_TIMESTAMP.size + store_len + 4 + 8
    topic_length_position = int32(
        body_size_position + 4 + absolute(STORE_PORT, body_size_position, "BODYLEN")
    )
    if topic_len_size == 1 and not version.decoder_refuses_unknown_magic:  # 4.9: absolute get(index)
        topic_length = absolute(TOPICLEN, topic_length_position, "TOPICLEN")
    else:  # 5.x: position(topicLengthPosition), then a relative get() / getShort()
        field_ = TOPICLEN if topic_len_size == 1 else _TOPICLEN_V2
        if limit - position(topic_length_position) < field_.size:
            raise JavaDecodeError(f"{where}: truncated in TOPICLEN", _BUFFER_UNDERFLOW)
        topic_length = int(field_.unpack_from(view, topic_length_position)[0])
    properties_position = int32(topic_length_position + topic_len_size + topic_length)
    prop_len = absolute(PROPLEN, properties_position, "PROPLEN")
    start = position(int32(properties_position + 2))
    if prop_len <= 0:
        return None
    if limit - start < prop_len:
        raise JavaDecodeError(f"{where}: truncated in PROPERTIES (PROPLEN {prop_len})", _BUFFER_UNDERFLOW)
    return string_to_properties(java_utf8_decode(bytes(view[start : start + prop_len])))


def message_decoder_constants(version: ClientVersion = V4_9_8) -> dict[str, object]:
    """The public constants of ``MessageDecoder`` in ``version`` (4.9 spells POSITION as POSTION)."""
    pos = version.decoder_position_spelling
    out: dict[str, object] = {
        f"MESSAGE_MAGIC_CODE_{pos}": 4,
        f"MESSAGE_FLAG_{pos}": 16,
        f"MESSAGE_PHYSIC_OFFSET_{pos}": 28,
        "MESSAGE_MAGIC_CODE": MESSAGE_MAGIC_CODE,
        "NAME_VALUE_SEPARATOR": NAME_VALUE_SEPARATOR,
        "PROPERTY_SEPARATOR": PROPERTY_SEPARATOR,
        "PHY_POS_POSITION": 4 + 4 + 4 + 4 + 4 + 8,
        "QUEUE_OFFSET_POSITION": 4 + 4 + 4 + 4 + 4,
        "SYSFLAG_POSITION": 4 + 4 + 4 + 4 + 4 + 8 + 8,
    }
    if version.decoder_knows_v2_store_format:
        out["MESSAGE_STORE_TIMESTAMP_POSITION"] = 56
        out["MESSAGE_MAGIC_CODE_V2"] = MESSAGE_MAGIC_CODE_V2
        out["BLANK_MAGIC_CODE"] = BLANK_MAGIC_CODE
    return out


# --------------------------------------------------------------------------------------------------
# Client unique id (UNIQ_KEY), MessageClientIDSetter
# --------------------------------------------------------------------------------------------------
#
# createUniqID(), written as uppercase hex (32 chars for an IPv4 client, 56 for IPv6):
#   bytes  IP        4 or 16 bytes, computed once (a fake 4-byte IP if the lookup fails)
#   short  PID       process id cast to short
#   int    CLHASH    MessageClientIDSetter.class.getClassLoader().hashCode()
#   int    TIME      (int)(now - start of the current month in the JVM default time zone)
#   short  COUNTER   low 16 bits of a process-wide counter
UNIQ_FIXED = struct.Struct(
    ">h"  # PID
    "i"  # CLHASH
)
UNIQ_TAIL = struct.Struct(
    ">i"  # TIME
    "H"  # COUNTER (low 16 bits)
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def _zone(tz: tzinfo | str) -> tzinfo:
    return ZoneInfo(tz) if isinstance(tz, str) else tz


def _resolve_wall(wall: datetime, tz: tzinfo) -> int:
    """Epoch ms of a naive local wall time, resolved as Java's lenient ``Calendar`` does (checked against
    JDK 17 and 25): in a DST gap with the offset before the gap (fold=0), an ambiguous time as the later
    instant (fold=1)."""
    local = wall.replace(tzinfo=tz)
    later = local.replace(fold=1)
    before, after = local.utcoffset(), later.utcoffset()
    if before is not None and after is not None and before > after:
        local = later
    return (local - _EPOCH) // _MS


def _wall(ms: int, tz: tzinfo) -> datetime:
    return (_EPOCH + timedelta(milliseconds=ms)).astimezone(tz).replace(tzinfo=None)


def _add_months(wall: datetime, months: int) -> datetime:
    # Only used on the 1st of a month, so the day never needs pinning.
    index = wall.year * 12 + wall.month - 1 + months
    return wall.replace(year=index // 12, month=index % 12 + 1)


def month_start_ms(now_ms: int, tz: tzinfo | str) -> int:
    """Midnight of the 1st of ``now_ms``'s month in ``tz``, as Java's ``Calendar`` computes it."""
    zone = _zone(tz)
    wall = _wall(now_ms, zone)
    return _resolve_wall(datetime(wall.year, wall.month, 1), zone)


def _shift_month_start(start_ms: int, months: int, zone: tzinfo) -> int:
    # Calendar.add(MONTH, n) first re-derives the wall fields from the resolved instant: a month start that
    # fell in a DST gap (00:00 -> 01:00) keeps 01:00 in the other month.
    return _resolve_wall(_add_months(_wall(start_ms, zone), months), zone)


def next_month_start_ms(now_ms: int, tz: tzinfo | str) -> int:
    """``setStartTime``'s ``nextStartTime``: the month start moved one month on with ``Calendar.add``."""
    zone = _zone(tz)
    return _shift_month_start(month_start_ms(now_ms, zone), 1, zone)


def _previous_month_start(now_ms: int, zone: tzinfo) -> int:
    return _shift_month_start(month_start_ms(now_ms, zone), -1, zone)


def fake_ip(now_ms: int) -> bytes:
    """``createFakeIP()``: the low 4 bytes of ``currentTimeMillis()``."""
    return (now_ms & 0xFFFF_FFFF).to_bytes(4, "big")


def _uniq_time_field(now_ms: int, start_ms: int) -> int:
    diff = int32(now_ms - start_ms)
    if -1_000_000 < diff < 0:  # a small step back (NTP) is written as 0
        diff = 0
    return diff


def build_uniq_id(
    ip: bytes, pid: int, class_loader_hash: int, now_ms: int, start_time_ms: int, counter: int
) -> str:
    """One ``createUniqID()`` result from its inputs (see the layout above)."""
    if len(ip) not in (4, 16):
        raise EncodeError(f"ip must be 4 or 16 bytes, got {len(ip)}")
    raw = (
        bytes(ip)
        + UNIQ_FIXED.pack(int16(pid), int32(class_loader_hash))
        + UNIQ_TAIL.pack(_uniq_time_field(now_ms, start_time_ms), counter & 0xFFFF)
    )
    return raw.hex().upper()


class MessageClientIDSetter:
    """The stateful ``MessageClientIDSetter`` of one JVM, with its clock and default time zone injected.

    The fixed part (IP, pid, class-loader hash) and the month start are computed at construction, as the
    class initialiser does; ``create_uniq_id`` moves the month start only when the clock reaches the next
    month (a clock going backwards keeps the old start); ``counter`` is the ``AtomicInteger``.
    """

    def __init__(
        self,
        *,
        ip: bytes | None,
        pid: int,
        class_loader_hash: int,
        clock: Callable[[], int],
        tz: tzinfo | str = "UTC",
        counter: int = 0,
    ) -> None:
        self._clock = clock
        self._zone = _zone(tz)
        now = clock()
        self.ip = bytes(ip) if ip is not None else fake_ip(now)
        if len(self.ip) not in (4, 16):
            raise ValueError(f"ip must be 4 or 16 bytes, got {len(self.ip)}")
        self.pid = pid
        self.class_loader_hash = class_loader_hash
        self._fix_hex = (self.ip + UNIQ_FIXED.pack(int16(pid), int32(class_loader_hash))).hex().upper()
        self.counter = counter
        self.start_time_ms = 0
        self.next_start_time_ms = 0
        self._set_start_time(now)

    def _set_start_time(self, now_ms: int) -> None:
        self.start_time_ms = month_start_ms(now_ms, self._zone)
        self.next_start_time_ms = next_month_start_ms(now_ms, self._zone)

    def create_uniq_id(self) -> str:
        """``createUniqID()`` at the clock's current time."""
        now = self._clock()
        if now >= self.next_start_time_ms:
            self._set_start_time(now)
        count = self.counter
        self.counter = int32(count + 1)
        return (
            self._fix_hex
            + UNIQ_TAIL.pack(_uniq_time_field(now, self.start_time_ms), count & 0xFFFF).hex().upper()
        )

    def set_uniq_id(self, msg: Message) -> Message:
        """``setUniqID(msg)``: a copy with a new ``UNIQ_KEY`` unless the message has one."""
        if msg.uniq_key is not None:
            return msg
        return msg.with_uniq_key(self.create_uniq_id())


def _uniq_bytes(uniq_id: str) -> bytes:
    return _hex_bytes(uniq_id, "uniq id", (32, 56))


def uniq_id_ip(uniq_id: str) -> bytes:
    """``getIPFromID``: the client address bytes (16 for a 56-char id, else 4)."""
    raw = _uniq_bytes(uniq_id)
    return raw[:16] if len(raw) == 28 else raw[:4]


def uniq_id_ip_str(uniq_id: str) -> str:
    """``getIPStrFromID``: dotted IPv4, or IPv6 as eight zero-padded lowercase groups."""
    ip = uniq_id_ip(uniq_id)
    if len(ip) == 4:
        return ".".join(str(b) for b in ip)
    return ":".join(ip[k : k + 2].hex() for k in range(0, 16, 2))


def uniq_id_pid(uniq_id: str) -> int:
    """``getPidFromID``: the 2-byte pid field as 0..65535."""
    raw = _uniq_bytes(uniq_id)
    return int.from_bytes(raw[len(raw) - 12 : len(raw) - 10], "big")


def uniq_id_nearly_time(uniq_id: str, reader_now_ms: int, tz: tzinfo | str) -> int:
    """``getNearlyTimeFromID``: the time field (unsigned) added to the reader's month start in ``tz``,
    one month earlier if that is not before the reader's now (so ids from another month come out shifted)."""
    raw = _uniq_bytes(uniq_id)
    span = int.from_bytes(raw[len(raw) - 6 : len(raw) - 2], "big")
    zone = _zone(tz)
    start = month_start_ms(reader_now_ms, zone)
    if start + span >= reader_now_ms:
        start = _previous_month_start(reader_now_ms, zone)
    return start + span


# --------------------------------------------------------------------------------------------------
# Vectorised sizes (numpy / pyarrow columns)
# --------------------------------------------------------------------------------------------------

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
