"""Byte formats of the RocketMQ Java client: properties, batch elements, the broker store format, ids.

Everything here follows ``org.apache.rocketmq.common.message.MessageDecoder``, ``UtilAll`` and
``MessageClientIDSetter`` of the selected client version (``version=``, default 4.9.8), including their
quirks: Java strings are UTF-16 (a lone surrogate is written as ``?``), lengths are Java ``short``/``byte``
values that overflow, and the properties parser silently drops what it cannot read.

More: docs/reference/modules.md, rocketsim/format/codec/__init__.py.
"""

from __future__ import annotations

from rocketsim.format.codec.batch import (
    ELEMENT_HEADER,
    ELEMENT_OVERHEAD,
    PROPLEN,
    decode_messages,
    encode_message,
    encode_messages,
    encoded_message_size,
    encoded_messages_size,
)
from rocketsim.format.codec.errors import JavaDecodeError, JavaEncodeError, Mode
from rocketsim.format.codec.java_text import java_utf8_decode, java_utf8_encode, utf8_len, utf16_len
from rocketsim.format.codec.message_id import (
    MessageId,
    SocketAddress,
    crc32_masked,
    create_message_id,
    decode_message_id,
    ip_text,
    java_inet_address_bytes,
)
from rocketsim.format.codec.properties import (
    MAX_PROPERTIES_SIZE,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    PropertyItems,
    java_hashmap_order,
    parse_properties,
    parsed_properties_java_order,
    properties_size,
    properties_to_bytes,
    properties_to_string,
    string_to_properties,
)
from rocketsim.format.codec.sizes import (
    PropertyColumn,
    decimal_lengths,
    encoded_message_sizes,
    properties_sizes,
    store_sizes,
)
from rocketsim.format.codec.store_decode import decode_store, decode_store_properties, decode_stores
from rocketsim.format.codec.store_format import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    STORE_FIXED_V4,
    STORE_HEAD,
    STORE_MID,
    STORE_PORT,
    STORE_TIMESTAMP,
    TOPICLEN,
    StoredMessage,
    encode_store,
    message_decoder_constants,
    store_size,
)
from rocketsim.format.codec.uniq_id import (
    UNIQ_FIXED,
    UNIQ_TAIL,
    MessageClientIDSetter,
    build_uniq_id,
    fake_ip,
    month_start_ms,
    next_month_start_ms,
    uniq_id_ip,
    uniq_id_ip_str,
    uniq_id_nearly_time,
    uniq_id_pid,
)

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
    "ELEMENT_HEADER",
    "ELEMENT_OVERHEAD",
    "Mode",
    "PROPLEN",
    "PropertyColumn",
    "PropertyItems",
    "STORE_FIXED_V4",
    "STORE_HEAD",
    "STORE_MID",
    "STORE_PORT",
    "STORE_TIMESTAMP",
    "TOPICLEN",
    "UNIQ_FIXED",
    "UNIQ_TAIL",
]
