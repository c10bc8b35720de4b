"""The broker store format (``MessageDecoder.encode(MessageExt)``): the layout of one commit-log record,
:class:`StoredMessage`, its encoder and exact size (Java's overflows reproduced), and the public
constants of ``MessageDecoder``. Decoding: :mod:`rocketsim.format.codec.store_decode`.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from rocketsim.client.versions import V4_9_8, ClientVersion, PropertiesEncoding
from rocketsim.format.codec.batch import PROPLEN
from rocketsim.format.codec.errors import NULL_POINTER, JavaEncodeError, check_java_range, java_allocate
from rocketsim.format.codec.java_text import java_utf8_encode, utf8_len
from rocketsim.format.codec.message_id import PORT_OFFSET, SocketAddress, java_inet_address_bytes
from rocketsim.format.codec.properties import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    properties_size,
    properties_to_bytes,
)
from rocketsim.format.message import MessageSysFlag
from rocketsim.javaint import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN, int8, int16, int32

MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7
MESSAGE_MAGIC_CODE_V2 = -626843477  # 0xDAA320AB, 5.x commit log with a 2-byte topic length
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194, end-of-file filler in the commit log


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
        raw = ip + PORT_OFFSET.pack(self.store_host.port, self.commit_log_offset)
        return raw.ljust(ip_len + 12, b"\x00").hex().upper()


def _store_parts(msg: StoredMessage, version: PropertiesEncoding) -> tuple[bytes, bytes, int, int]:
    """(topic bytes, properties bytes, computed Java capacity, bytes actually written)."""
    if msg.body is None:
        raise JavaEncodeError("store encode: body is None (Java: NullPointerException)", NULL_POINTER)
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
        check_java_range(name, getattr(msg, name), INT_MIN, INT_MAX, "int")
    for name in (
        "queue_offset",
        "commit_log_offset",
        "born_timestamp",
        "store_timestamp",
        "prepared_transaction_offset",
    ):
        check_java_range(name, getattr(msg, name), LONG_MIN, LONG_MAX, "long")


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
    java_allocate(capacity, needed, "store encode")
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
        raise JavaEncodeError("store encode: body is None (Java: NullPointerException)", NULL_POINTER)
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
    java_allocate(capacity, needed, "store encode")
    return capacity


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
