"""The batch element format (``MessageDecoder.encodeMessage`` / ``decodeMessages``): one message's
flag, body and properties, the elements of a ``MessageBatch`` body back to back.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from rocketsim.client.versions import V4_9_8, ClientVersion
from rocketsim.errors import DecodeError
from rocketsim.format.codec.errors import (
    BUFFER_UNDERFLOW,
    NEGATIVE_ARRAY,
    NULL_POINTER,
    JavaDecodeError,
    JavaEncodeError,
    Mode,
    check_java_range,
    java_allocate,
)
from rocketsim.format.codec.properties import (
    MAX_PROPERTIES_SIZE,
    PropertyItems,
    parse_properties,
    properties_size,
    properties_to_bytes,
)
from rocketsim.format.message import Message
from rocketsim.javaint import INT_MAX, INT_MIN, int16, int32

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


_PROPS_TOO_BIG_4_9 = "Properties size of message exceeded, properties size: {}, maxSize: {}."


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
        raise JavaEncodeError(
            "message body is None (Java: NullPointerException)", NULL_POINTER, _NPE_ENCODE_MESSAGE
        )
    check_java_range("flag", msg.flag, INT_MIN, INT_MAX, "int")
    props, prop_len = _checked_properties_bytes(msg.properties, version, "encodeMessage")
    needed = ELEMENT_OVERHEAD + len(body) + len(props)
    capacity = int32(ELEMENT_OVERHEAD + len(body) + prop_len)
    if capacity != needed:
        java_allocate(capacity, needed, f"encodeMessage with {len(props)} property bytes")
    return b"".join(
        (ELEMENT_HEADER.pack(needed, 0, 0, msg.flag, len(body)), body, PROPLEN.pack(prop_len), props)
    )


def encode_messages(msgs: Iterable[Message], *, version: ClientVersion = V4_9_8) -> bytes:
    """``MessageDecoder.encodeMessages``: the elements concatenated (a ``MessageBatch`` body)."""
    return b"".join([encode_message(m, version=version) for m in msgs])


def encoded_message_size(msg: Message, *, version: ClientVersion = V4_9_8) -> int:
    """``len(encode_message(msg, version=version))``; raises exactly where ``encode_message`` raises."""
    if msg.body is None:
        raise JavaEncodeError(
            "message body is None (Java: NullPointerException)", NULL_POINTER, _NPE_ENCODE_MESSAGE
        )
    check_java_range("flag", msg.flag, INT_MIN, INT_MAX, "int")
    size = properties_size(msg.properties, version=version)
    if size > MAX_PROPERTIES_SIZE:
        _checked_properties_bytes(msg.properties, version, "encodeMessage")  # raises the 4.9 error
        capacity = int32(ELEMENT_OVERHEAD + len(msg.body) + int16(size))
        java_allocate(
            capacity, ELEMENT_OVERHEAD + len(msg.body) + size, f"encodeMessage with {size} property bytes"
        )
    needed = ELEMENT_OVERHEAD + len(msg.body) + size
    if needed > INT_MAX:
        java_allocate(int32(needed), needed, "encodeMessage")
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
                BUFFER_UNDERFLOW,
            )
        total, magic, crc, flag, body_len = ELEMENT_HEADER.unpack_from(view, pos)
        p = pos + ELEMENT_HEADER.size
        if body_len < 0:
            raise JavaDecodeError(f"{where}: BODYLEN {body_len} is negative", NEGATIVE_ARRAY, str(body_len))
        if body_len > end - p:
            raise JavaDecodeError(
                f"{where}: BODYLEN {body_len} runs past the end ({end - p} bytes left)", BUFFER_UNDERFLOW
            )
        body = bytes(view[p : p + body_len])
        p += body_len
        if end - p < PROPLEN.size:
            raise JavaDecodeError(
                f"{where}: truncated before PROPLEN ({end - p} bytes left)", BUFFER_UNDERFLOW
            )
        (prop_len,) = PROPLEN.unpack_from(view, p)
        p += PROPLEN.size
        if prop_len < 0:
            raise JavaDecodeError(f"{where}: PROPLEN {prop_len} is negative", NEGATIVE_ARRAY, str(prop_len))
        if prop_len > end - p:
            raise JavaDecodeError(
                f"{where}: PROPLEN {prop_len} runs past the end ({end - p} bytes left)", BUFFER_UNDERFLOW
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
