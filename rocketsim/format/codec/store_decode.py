"""Store records back to messages (``MessageDecoder.decode`` / ``decodes`` / ``decodeProperties``):
``strict`` reads exactly what :func:`~rocketsim.format.codec.store_format.encode_store` writes;
``java`` reads what upstream's decoder of a version reads, edge for edge, and raises
:class:`~rocketsim.format.codec.errors.JavaDecodeError` where upstream's ``decode`` returns null.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from rocketsim.client.versions import V4_9_8, ClientVersion
from rocketsim.errors import ConfigError, DecodeError
from rocketsim.format import compression
from rocketsim.format.codec.batch import PROPLEN
from rocketsim.format.codec.errors import (
    BUFFER_UNDERFLOW,
    ILLEGAL_ARGUMENT,
    NEGATIVE_ARRAY,
    JavaDecodeError,
    Mode,
)
from rocketsim.format.codec.java_text import java_utf8_decode
from rocketsim.format.codec.message_id import SocketAddress, crc32_masked
from rocketsim.format.codec.properties import parse_properties, string_to_properties
from rocketsim.format.codec.store_format import (
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    STORE_HEAD,
    STORE_MID,
    STORE_PORT,
    STORE_TIMESTAMP,
    TOPICLEN,
    StoredMessage,
)
from rocketsim.format.message import MessageSysFlag
from rocketsim.javaint import int32


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
        ILLEGAL_ARGUMENT,
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


@dataclass(frozen=True, slots=True)
class _Record:
    """The bytes a record is read from (``view`` up to ``end``), named ``where`` in errors."""

    view: memoryview
    end: int
    where: str

    def need(self, p: int, n: int, what: str) -> None:
        """``n`` bytes at ``p``, else Java's ``BufferUnderflowException``."""
        if self.end - p < n:
            raise JavaDecodeError(
                f"{self.where}: truncated in {what} at byte {p} (needs {n}, {self.end - p} left)",
                BUFFER_UNDERFLOW,
            )

    def host(self, p: int, v6: bool, what: str) -> tuple[SocketAddress, int]:
        """A host address (4 or 16 bytes) and its port at ``p``; the address and the offset after it."""
        n = 16 if v6 else 4
        self.need(p, n + 4, what)
        ip = bytes(self.view[p : p + n])
        (port,) = STORE_PORT.unpack_from(self.view, p + n)
        if not 0 <= port <= 0xFFFF:
            raise JavaDecodeError(
                f"{self.where}: {what} port {port} out of range",
                ILLEGAL_ARGUMENT,
                f"port out of range:{port}",
            )
        return SocketAddress(ip, port), p + n + 4


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
    r = _Record(view, end, where)
    r.need(pos, _TOTAL_MAGIC.size, "TOTALSIZE/MAGICCODE")
    _, magic = _TOTAL_MAGIC.unpack_from(view, pos)
    topic_len_size = _store_topic_length_size(magic, version, strict, where)  # 5.x checks it at once
    r.need(pos, STORE_HEAD.size, "the fixed header")
    (total, magic, body_crc, queue_id, flag, queue_offset, commit_log_offset, sys_flag, born_ts) = (
        STORE_HEAD.unpack_from(view, pos)
    )
    p = pos + STORE_HEAD.size
    born_host, p = r.host(p, bool(sys_flag & MessageSysFlag.BORNHOST_V6_FLAG), "BORNHOST")
    r.need(p, STORE_TIMESTAMP.size, "STORETIMESTAMP")
    (store_ts,) = STORE_TIMESTAMP.unpack_from(view, p)
    p += STORE_TIMESTAMP.size
    store_host, p = r.host(p, bool(sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG), "STOREHOST")
    r.need(p, STORE_MID.size, "RECONSUMETIMES/PREPARED_TRANSACTION_OFFSET/BODYLEN")
    reconsume, prepared, body_len = STORE_MID.unpack_from(view, p)
    p += STORE_MID.size
    body, sys_flag, p = _read_body(r, p, body_len, sys_flag, body_crc, version, strict, options)
    topic, p = _read_topic(r, p, topic_len_size, strict)
    props, p = _read_properties(r, p, version, mode, options)
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
        p = _strict_record_end(r, pos, p, total)
    return msg, p


def _read_body(
    r: _Record,
    p: int,
    body_len: int,
    sys_flag: int,
    body_crc: int,
    version: ClientVersion,
    strict: bool,
    options: _JavaDecodeOptions,
) -> tuple[bytes | None, int, int]:
    """15 BODY at ``p``: (body, sys flag, offset after). Strict reads b"" for BODYLEN 0 (what encode_store
    writes for b""); Java leaves the body null when BODYLEN <= 0 and then does not move (a negative
    length is not skipped backwards)."""
    body: bytes | None = b"" if strict else None
    if body_len < 0 and strict:
        raise DecodeError(f"{r.where}: BODYLEN {body_len} is negative")
    if body_len > 0 and not options.read_body:  # byteBuffer.position(position + bodyLen)
        if body_len > r.end - p:
            raise JavaDecodeError(
                f"{r.where}: skipping BODY (BODYLEN {body_len}) runs past the end ({r.end - p} bytes left)",
                ILLEGAL_ARGUMENT,
            )
        p += body_len
    elif body_len > 0:
        r.need(p, body_len, f"BODY (BODYLEN {body_len})")
        body = bytes(r.view[p : p + body_len])
        p += body_len
        if not strict:
            body, sys_flag = _java_body(body, sys_flag, body_crc, version, options, r.where)
    return body, sys_flag, p


def _read_topic(r: _Record, p: int, topic_len_size: int, strict: bool) -> tuple[str, int]:
    """16 TOPIC at ``p``, after its length (a signed byte, or a signed short in the 5.x V2 format)."""
    length_field = TOPICLEN if topic_len_size == 1 else _TOPICLEN_V2
    r.need(p, length_field.size, "TOPICLEN")
    (topic_len,) = length_field.unpack_from(r.view, p)
    p += length_field.size
    if topic_len < 0:
        raise JavaDecodeError(f"{r.where}: TOPICLEN {topic_len} is negative", NEGATIVE_ARRAY, str(topic_len))
    r.need(p, topic_len, f"TOPIC (TOPICLEN {topic_len})")
    topic_bytes = bytes(r.view[p : p + topic_len])
    p += topic_len
    if not strict:
        return java_utf8_decode(topic_bytes), p
    try:
        return topic_bytes.decode("utf-8"), p
    except UnicodeDecodeError as exc:
        raise DecodeError(f"{r.where}: topic has invalid UTF-8 at byte {exc.start}") from None


def _read_properties(
    r: _Record, p: int, version: ClientVersion, mode: Mode, options: _JavaDecodeOptions
) -> tuple[dict[str, str] | None, int]:
    """17 PROPERTIES at ``p``, after PROPLEN. Strict reads {} for PROPLEN 0 (what encode_store writes for
    no properties); Java leaves the map null when PROPLEN <= 0 and does not move past a negative
    length."""
    strict = mode == "strict"
    r.need(p, PROPLEN.size, "PROPLEN")
    (prop_len,) = PROPLEN.unpack_from(r.view, p)
    p += PROPLEN.size
    props: dict[str, str] | None = {} if strict else None
    if prop_len < 0 and strict:
        raise DecodeError(f"{r.where}: PROPLEN {prop_len} is negative")
    if prop_len > 0:
        r.need(p, prop_len, f"PROPERTIES (PROPLEN {prop_len})")
        raw = bytes(r.view[p : p + prop_len])
        props = parse_properties(raw, version=version, mode=mode, where=f"{r.where}: properties")
        if options.set_properties_string:
            props["propertiesString"] = java_utf8_decode(raw)
        p += prop_len
    return props, p


def _strict_record_end(r: _Record, pos: int, p: int, total: int) -> int:
    """Where a strictly read record that starts at ``pos`` and whose fields end at ``p`` ends: its
    TOTALSIZE, checked against the fields, the data and the zero padding after the properties."""
    used = p - pos
    if total < used:
        raise DecodeError(f"{r.where}: TOTALSIZE {total} is smaller than the record's {used} bytes")
    if total > r.end - pos:
        raise DecodeError(f"{r.where}: TOTALSIZE {total} runs past the end ({r.end - pos} bytes left)")
    if any(r.view[p : pos + total]):
        raise DecodeError(f"{r.where}: the {total - used} bytes after the properties are not zero padding")
    return pos + total


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
            raise JavaDecodeError(f"{where}: position {index} is outside the {limit} bytes", ILLEGAL_ARGUMENT)
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
            raise JavaDecodeError(f"{where}: truncated in TOPICLEN", BUFFER_UNDERFLOW)
        topic_length = int(field_.unpack_from(view, topic_length_position)[0])
    properties_position = int32(topic_length_position + topic_len_size + topic_length)
    prop_len = absolute(PROPLEN, properties_position, "PROPLEN")
    start = position(int32(properties_position + 2))
    if prop_len <= 0:
        return None
    if limit - start < prop_len:
        raise JavaDecodeError(f"{where}: truncated in PROPERTIES (PROPLEN {prop_len})", BUFFER_UNDERFLOW)
    return string_to_properties(java_utf8_decode(bytes(view[start : start + prop_len])))
