"""Codec: properties, batch elements, store format, ids, sizes. Expected values marked "JVM" were produced by
running the same input through Java 17 (``new String(bytes, UTF_8)``, ``HashMap``, ``Calendar``)."""

from __future__ import annotations

import json
import shutil
import struct
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from rocketsim.client.versions import V4_9_8, V5_DEVELOP, ClientVersion, parse_version
from rocketsim.errors import ConfigError, DecodeError, EncodeError
from rocketsim.format.codec import (
    ELEMENT_HEADER,
    MESSAGE_MAGIC_CODE_V2,
    JavaDecodeError,
    JavaEncodeError,
    MessageClientIDSetter,
    SocketAddress,
    StoredMessage,
    build_uniq_id,
    crc32_masked,
    create_message_id,
    decimal_lengths,
    decode_message_id,
    decode_messages,
    decode_store,
    decode_store_properties,
    decode_stores,
    encode_message,
    encode_messages,
    encode_store,
    encoded_message_size,
    encoded_message_sizes,
    fake_ip,
    java_hashmap_order,
    java_utf8_decode,
    java_utf8_encode,
    month_start_ms,
    next_month_start_ms,
    parse_properties,
    properties_size,
    properties_sizes,
    properties_to_bytes,
    properties_to_string,
    store_size,
    store_sizes,
    string_to_properties,
    uniq_id_ip,
    uniq_id_ip_str,
    uniq_id_nearly_time,
    uniq_id_pid,
)
from rocketsim.format.message import Message
from rocketsim.javaint import java_string_hash
from rocketsim.vectors import encode_message as encode_message_checker
from rocketsim.vectors import store_encode as store_checker

VECTORS = Path(__file__).parent / "data" / "conformance"
BOTH = [V4_9_8, V5_DEVELOP]


# ---------------------------------------------------------------------------------- Java strings


class TestJavaStrings:
    def test_lone_surrogates_are_written_as_question_marks(self) -> None:
        assert java_utf8_encode("a\ud800b") == b"a?b"
        assert java_utf8_encode("\udc00\ud83d") == b"??"
        # a pair held as two code points is one character for Java
        assert java_utf8_encode("\ud83d" + "\ude00") == "\U0001f600".encode()

    @pytest.mark.parametrize(  # JVM
        ("hex_in", "expected"),
        [
            ("eda080", "\ufffd"),
            ("f0908d", "\ufffd"),
            ("e0a0", "\ufffd"),
            ("f4908080", "\ufffd" * 4),
            ("c3", "\ufffd"),
            ("61f0", "a\ufffd"),
            ("6b01c0af7878", "k\x01\ufffd\ufffdxx"),
            ("6b018076", "k\x01\ufffdv"),
        ],
    )
    def test_malformed_utf8_decodes_like_the_jdk(self, hex_in: str, expected: str) -> None:
        assert java_utf8_decode(bytes.fromhex(hex_in)) == expected

    def test_string_hash(self) -> None:
        assert (
            java_string_hash("KEYS") == 2303476 and java_string_hash("") == 0 and java_string_hash(None) == 0
        )
        assert java_string_hash("\U0001f600") == 31 * 0xD83D + 0xDE00  # over UTF-16 units

    def test_hashmap_order(self) -> None:  # JVM
        assert java_hashmap_order(["KEYS", "TAGS"]) == ["KEYS", "TAGS"]
        assert java_hashmap_order(["KEYS", "TAGS"], 128) == ["TAGS", "KEYS"]
        keys = [f"key{c}" for c in "abcdefghijklmnopq"]  # 17 keys: the table grows to 32 bins
        assert java_hashmap_order(keys) == [f"key{c}" for c in "qopabefcdijghmnkl"]
        assert java_hashmap_order(["b", "a", "b"]) == ["a", "b"]


# ---------------------------------------------------------------------------------- properties


class TestProperties:
    def test_trailing_separator_depends_on_version(self) -> None:
        props = {"a": "1", "b": "2"}
        assert properties_to_string(props, version=V4_9_8) == "a\x011\x02b\x012"
        assert properties_to_string(props, version=V5_DEVELOP) == "a\x011\x02b\x012\x02"
        assert properties_to_string({}, version=V5_DEVELOP) == "" and properties_to_string(None) == ""

    def test_null_values_skipped_and_null_key_written_as_null(self) -> None:
        pairs = [("a", None), (None, "v"), ("k", "w")]
        assert properties_to_string(pairs) == "null\x01v\x02k\x01w"
        assert properties_size(pairs) == 10 and properties_size(pairs, version=V5_DEVELOP) == 11

    def test_size_counts_utf8_bytes(self) -> None:
        pairs = {"键": "值", "emoji": "\U0001f600", "lone": "\ud800"}
        for v in BOTH:
            assert properties_size(pairs, version=v) == len(properties_to_bytes(pairs, version=v))

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("", {}),
            (None, {}),
            ("k\x01v\x02", {"k": "v"}),
            ("\x02\x02k\x01v", {"k": "v"}),
            ("ab\x01", {}),
            ("\x01ab", {}),
            ("abc\x02d\x01e", {"d": "e"}),
            ("k\x01v\x01w", {"k": "v\x01w"}),
            ("a\x01b\x02a\x01c", {"a": "c"}),
            ("\U0001f600\x01", {}),
            (" \x01 ", {" ": " "}),
        ],
    )
    def test_java_parser_quirks(self, text: str | None, expected: dict[str, str]) -> None:
        assert string_to_properties(text) == expected

    def test_strict_parse_accepts_each_versions_canonical_form(self) -> None:
        props = {"TAGS": "A", "KEYS": "k1 k2", "键": "值"}
        for v in BOTH:
            data = properties_to_bytes(props, version=v)
            assert parse_properties(data, version=v) == props
            assert list(parse_properties(data, version=v)) == list(props)  # wire order kept

    @pytest.mark.parametrize(
        ("data", "version", "match"),
        [
            (b"k\x01v\x02", V4_9_8, "ends with"),
            (b"k\x01v", V5_DEVELOP, "lacks the trailing"),
            (b"k\x01v\x02\x02", V5_DEVELOP, "no \\\\x01"),
            (b"kv", V4_9_8, "no \\\\x01"),
            (b"\x01v", V4_9_8, "empty name"),
            (b"k\x01", V4_9_8, "empty value"),
            (b"k\x01a\x02k\x01b", V4_9_8, "repeats"),
            (b"k\x01\xc0\xaf", V4_9_8, "invalid UTF-8 at byte 2"),
            (b"k\x01\xed\xa0\x80", V4_9_8, "invalid UTF-8"),
        ],
    )
    def test_strict_parse_refuses_what_would_not_round_trip(self, data: bytes, version, match: str) -> None:  # type: ignore[no-untyped-def]
        with pytest.raises(DecodeError, match=match):
            parse_properties(data, version=version)

    def test_java_mode_parses_what_java_parses(self) -> None:
        assert parse_properties(b"k\x01\xc0\xafxx\x02\x02a\x01", mode="java") == {"k": "\ufffd\ufffdxx"}


# ---------------------------------------------------------------------------------- batch elements


def _msg(props: dict[str, str] | None = None, body: bytes = b"hello", flag: int = 0) -> Message:
    return Message("T", body, flag, {"TAGS": "A"} if props is None else props)


class TestEncodeMessage:
    def test_golden_bytes(self) -> None:  # encode_message.json "basic"
        assert (
            encode_message(_msg()).hex()
            == "000000210000000000000000000000000000000568656c6c6f0006544147530141"
        )
        assert encode_message(_msg(), version=V5_DEVELOP).hex().endswith("00075441475301410" + "2")

    def test_layout_fields(self) -> None:
        data = encode_message(_msg(flag=-1))
        total, magic, crc, flag, body_len = ELEMENT_HEADER.unpack_from(data)
        assert (total, magic, crc, flag, body_len) == (len(data), 0, 0, -1, 5)

    def test_properties_limit_in_4_9(self) -> None:
        ok = _msg({"k": "v" * (32767 - 2)})
        assert len(encode_message(ok)) == 22 + 5 + 32767 == encoded_message_size(ok)
        too_big = _msg({"k": "v" * (32768 - 2)})
        for fn in (encode_message, encoded_message_size):
            with pytest.raises(JavaEncodeError) as err:
                fn(too_big)
            assert str(err.value) == "Properties size of message exceeded, properties size: {}, maxSize: {}."
            assert err.value.java_exception == "java.lang.RuntimeException"

    @pytest.mark.parametrize(
        ("size", "exception", "message"),
        [
            (32768, "java.lang.IllegalArgumentException", "capacity < 0: (-32741 < 0)"),
            (65535, "java.nio.BufferOverflowException", None),
            (70000, "java.nio.BufferOverflowException", None),
        ],
    )
    def test_5x_overflows_the_short_like_java(self, size: int, exception: str, message: str | None) -> None:
        msg = _msg({"k": "v" * (size - 3)})  # 5.x: "k" SEP1 value SEP2
        for fn in (encode_message, encoded_message_size):
            with pytest.raises(JavaEncodeError) as err:
                fn(msg, version=V5_DEVELOP)
            assert err.value.java_exception == exception and err.value.java_message == message

    def test_null_body_and_bad_flag(self) -> None:
        with pytest.raises(JavaEncodeError) as err:
            encode_message(Message("T", None))
        assert err.value.java_exception == "java.lang.NullPointerException"
        with pytest.raises(EncodeError, match="flag must fit a Java int"):
            encode_message(_msg(flag=2**31))

    def test_encode_messages_concatenates(self) -> None:
        msgs = [_msg(), _msg({"k": "v"}, b"", 1)]
        assert encode_messages(msgs) == b"".join(encode_message(m) for m in msgs)
        assert encode_messages([]) == b""


class TestDecodeMessages:
    def test_round_trip_with_topic(self) -> None:
        msgs = [_msg(), _msg({"k": "v"}, b"", 1)]
        for v in BOTH:
            back = decode_messages(encode_messages(msgs, version=v), topic="T", version=v)
            assert back == msgs

    def test_java_mode_ignores_header_fields(self) -> None:
        data = bytes.fromhex("ffffffffdeadbeef123456780000000900000002686900036b0176")
        assert decode_messages(data, mode="java") == [Message("", b"hi", 9, {"k": "v"})]
        with pytest.raises(DecodeError, match="TOTALSIZE -1 does not match"):
            decode_messages(data)

    def test_strict_mode_requires_zero_magic_and_crc(self) -> None:
        data = bytearray(encode_message(_msg()))
        data[7] = 1
        with pytest.raises(DecodeError, match="MAGICCODE/BODYCRC must be 0"):
            decode_messages(bytes(data))

    @pytest.mark.parametrize(
        ("hex_in", "exception", "match"),
        [
            (
                "000000000000000000000000000000000000000141ffff",
                "java.lang.NegativeArraySizeException",
                "PROPLEN -1",
            ),
            (
                "0000000000000000000000000000000080000000",
                "java.lang.NegativeArraySizeException",
                "BODYLEN -2147483648",
            ),
            (
                "00000000000000000000000000000000000000ff41",
                "java.nio.BufferUnderflowException",
                "BODYLEN 255 runs past",
            ),
            (
                "0000000000000000000000000000000000000001410005",
                "java.nio.BufferUnderflowException",
                "PROPLEN 5 runs past",
            ),
            (
                "00000000000000000000000000000000000000014100",
                "java.nio.BufferUnderflowException",
                "before PROPLEN",
            ),
            ("00000000", "java.nio.BufferUnderflowException", "truncated header"),
        ],
    )
    def test_corrupt_input(self, hex_in: str, exception: str, match: str) -> None:
        for mode in ("strict", "java"):
            with pytest.raises(JavaDecodeError, match=match) as err:
                decode_messages(bytes.fromhex(hex_in), mode=mode)  # type: ignore[arg-type]
            assert err.value.java_exception == exception

    def test_every_truncated_prefix_of_one_element_raises(self) -> None:
        data = encode_message(_msg({"k": "v", "TAGS": "x"}))
        for cut in range(1, len(data)):
            with pytest.raises(DecodeError):
                decode_messages(data[:cut])

    def test_trailing_bytes_raise(self) -> None:
        with pytest.raises(DecodeError, match="batch element 1"):
            decode_messages(encode_message(_msg()) + b"\x00")


# ---------------------------------------------------------------------------------- store format


def _stored(**kw: object) -> StoredMessage:
    fields: dict[str, object] = {
        "topic": "TopicTest",
        "body": b"Hello RocketMQ",
        "born_host": SocketAddress(bytes([192, 168, 0, 10]), 54321),
        "store_host": SocketAddress(bytes([10, 0, 0, 5]), 10911),
        "properties": {"WAIT": "true", "TAGS": "TagA"},
        "body_crc": crc32_masked(b"Hello RocketMQ"),
        "queue_id": 3,
        "queue_offset": 100,
        "commit_log_offset": 123456,
        "born_timestamp": 1700000000000,
        "store_timestamp": 1700000000123,
    }
    fields.update(kw)
    return StoredMessage(**fields)  # type: ignore[arg-type]


V6_A = bytes.fromhex("20010db885a3000000008a2e03707334")


class TestStore:
    def test_golden_ipv4_record(self) -> None:  # store_encode.json "ipv4_basic"
        data = encode_store(_stored())
        assert len(data) == 133 == store_size(_stored())
        assert data.hex().startswith("00000085daa320a769c865ed00000003")
        msg = decode_store(data)
        assert msg == dataclass_replace(_stored(), store_size=133)
        assert msg.msg_id == "0A00000500002A9F000000000001E240"

    def test_ipv6_hosts_by_sys_flag(self) -> None:
        msg = _stored(sys_flag=0x30, born_host=SocketAddress(V6_A, 1), store_host=SocketAddress(V6_A, 2))
        data = encode_store(msg, version=V5_DEVELOP)
        assert len(data) == 133 + 24 + 1 == store_size(msg, version=V5_DEVELOP)
        back = decode_store(data, version=V5_DEVELOP)
        assert (
            back.store_host.ip == V6_A
            and back.msg_id == (V6_A.hex() + "00000002" + "000000000001e240").upper()
        )

    def test_ipv6_host_without_flag_overflows(self) -> None:
        msg = _stored(born_host=SocketAddress(V6_A, 1))
        for fn in (encode_store, store_size):
            with pytest.raises(JavaEncodeError) as err:
                fn(msg)
            assert err.value.java_exception == "java.nio.BufferOverflowException"

    def test_topic_length_byte_overflow(self) -> None:
        assert len(encode_store(_stored(topic="t" * 127))) == 133 - 9 + 127
        with pytest.raises(JavaEncodeError) as err:
            encode_store(_stored(topic="t" * 128))
        assert err.value.java_message == "capacity < 0: (-4 < 0)"  # 133 - 9 + (byte) 128
        with pytest.raises(JavaEncodeError, match="do not fit"):
            store_size(_stored(topic="t" * 300))

    def test_preset_store_size(self) -> None:
        data = encode_store(_stored(store_size=150))
        assert len(data) == 150 and data[133:] == bytes(17) and store_size(_stored(store_size=150)) == 150
        assert decode_store(data).store_size == 150
        assert encode_store(decode_store(data)) == data
        with pytest.raises(JavaEncodeError, match="do not fit"):
            encode_store(_stored(store_size=132))

    def test_mapped_ipv6_store_host_msg_id(self) -> None:
        mapped = bytes(10) + b"\xff\xff" + bytes([10, 1, 2, 3])
        msg = _stored(sys_flag=0x20, store_host=SocketAddress(mapped, 7))
        # Java reads the address as IPv4 but sizes its buffer for IPv6: 12 zero bytes trail the id
        assert (
            decode_store(encode_store(msg)).msg_id
            == ("0a010203" + "00000007" + "000000000001e240").upper() + "0" * 24
        )

    @pytest.mark.parametrize(
        ("offset", "value", "match"),
        [
            (4, b"\x00\x00\x00\x00", "MAGICCODE"),
            (0, b"\x00\x00\x00\x10", "TOTALSIZE 16 is smaller"),
            (0, b"\x00\x00\x01\x00", "TOTALSIZE 256 runs past"),
            (48 + 4, b"\xff\xff\xff\xff", "BORNHOST port -1"),
            (84, b"\xff\xff\xff\xff", "BODYLEN -1 is negative"),
            (84 + 4 + 14, b"\x80", "TOPICLEN -128"),
            (84 + 4 + 14 + 1 + 9, b"\xff\xff", "PROPLEN -1 is negative"),
            (84 + 4 + 14 + 1, b"\xc0", "topic has invalid UTF-8"),
            (84 + 4 + 14 + 1 + 9 + 2, b"\xff", "invalid UTF-8"),
        ],
    )
    def test_corrupt_records(self, offset: int, value: bytes, match: str) -> None:
        data = bytearray(encode_store(_stored()))
        data[offset : offset + len(value)] = value
        with pytest.raises(DecodeError, match=match):
            decode_store(bytes(data))

    def test_v2_magic_is_refused_by_name_in_strict_mode(self) -> None:
        # strict reads what encode_store writes (V1 only); 5.x java mode reads V2 (TestDecoderEdges)
        data = bytearray(encode_store(_stored()))
        data[4:8] = MESSAGE_MAGIC_CODE_V2.to_bytes(4, "big", signed=True)
        for v in BOTH:
            with pytest.raises(DecodeError, match="V2 format"):
                decode_store(bytes(data), version=v)
        assert decode_store(bytes(data), mode="java").topic == "TopicTest"  # 4.9 ignores the magic

    def test_java_mode_leniency(self) -> None:
        data = bytearray(encode_store(_stored(body=b"", properties={})))
        assert decode_store(bytes(data), mode="java").body is None  # Java leaves an empty body null
        data[84:88] = b"\xff\xff\xff\xff"  # negative BODYLEN: Java skips the body
        assert decode_store(bytes(data) + b"junk", mode="java").topic == "TopicTest"

    def test_nonzero_padding_truncation_and_trailing_bytes(self) -> None:
        data = encode_store(_stored(store_size=140))
        with pytest.raises(DecodeError, match="not zero padding"):
            decode_store(data[:-1] + b"\x01")
        with pytest.raises(DecodeError, match="trailing"):
            decode_store(data + b"\x00")
        for cut in range(len(data)):
            with pytest.raises(DecodeError):
                decode_store(data[:cut])

    def test_decode_stores(self) -> None:
        records = [_stored(), _stored(topic="B", store_size=200), _stored(properties={})]
        data = b"".join(encode_store(r) for r in records)
        assert [r.topic for r in decode_stores(data)] == ["TopicTest", "B", "TopicTest"]


def dataclass_replace(obj: StoredMessage, **kw: object) -> StoredMessage:
    import dataclasses

    return dataclasses.replace(obj, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------- ids and crc


class TestIds:
    def test_message_id_round_trip(self) -> None:
        mid = create_message_id(bytes([10, 0, 0, 5]), 10911, 123456789)
        assert mid == "0A00000500002A9F00000000075BCD15"
        decoded = decode_message_id(mid.lower())
        assert (decoded.ip_text, decoded.port, decoded.offset) == ("10.0.0.5", 10911, 123456789)
        v6 = decode_message_id(create_message_id(V6_A, 80, -1))
        assert v6.ip_text == "2001:db8:85a3:0:0:8a2e:370:7334" and v6.offset == -1

    def test_mapped_address_becomes_ipv4(self) -> None:
        assert (
            create_message_id(bytes(10) + b"\xff\xff\x0a\x01\x02\x03", 1, 7)
            == "0A01020300000001" + "0" * 15 + "7"
        )

    @pytest.mark.parametrize("bad", ["", "0A0000050000", "0A00000500002A9F00000000075BCD1", "XX" * 16])
    def test_strict_decode_refuses_malformed_ids(self, bad: str) -> None:
        with pytest.raises(DecodeError):
            decode_message_id(bad)

    def test_java_mode_quirks(self) -> None:
        with pytest.raises(JavaDecodeError) as err:
            decode_message_id("C0A80101FFFFFFFF7FFFFFFFFFFFFFFF", mode="java")
        assert err.value.java_message == "port out of range:-1"
        with pytest.raises(JavaDecodeError) as err:
            decode_message_id("0A0000050000", mode="java")
        assert err.value.java_exception == "java.nio.BufferUnderflowException"
        # a non-hex digit reads as nibble -1: "Z0" -> 0xF0, "0Z" -> 0xFF
        assert decode_message_id("Z00000050000000100000000000000FF", mode="java").ip == b"\xf0\x00\x00\x05"

    def test_create_message_id_validates(self) -> None:
        with pytest.raises(EncodeError):
            create_message_id(b"\x01\x02\x03", 1, 0)
        with pytest.raises(EncodeError):
            create_message_id(b"\x01\x02\x03\x04", 70000, 0)

    def test_crc32_masked(self) -> None:
        assert crc32_masked(b"a") == 3904355907 & 0x7FFFFFFF == 1756872259 and crc32_masked(b"") == 0


# ---------------------------------------------------------------------------------- uniq ids

MARCH_2024_UTC = 1709251200000  # 2024-03-01T00:00Z


class TestUniqId:
    def test_layout(self) -> None:
        uid = build_uniq_id(
            bytes([192, 168, 1, 100]), 70000, -1, MARCH_2024_UTC + 0x1234, MARCH_2024_UTC, 0x12345
        )
        assert uid == "C0A80164" + "1170" + "FFFFFFFF" + "00001234" + "2345"
        assert uniq_id_ip(uid) == bytes([192, 168, 1, 100]) and uniq_id_ip_str(uid) == "192.168.1.100"
        assert uniq_id_pid(uid) == 0x1170

    def test_time_field_clamps_small_negatives_and_wraps(self) -> None:
        assert build_uniq_id(bytes(4), 0, 0, 1000, 1500, 0)[20:28] == "00000000"
        assert build_uniq_id(bytes(4), 0, 0, 0, 1_000_000, 0)[20:28] == "FFF0BDC0"
        assert build_uniq_id(bytes(4), 0, 0, 2**31, 0, 0)[20:28] == "80000000"

    def test_ipv6_reader_functions(self) -> None:
        uid = build_uniq_id(V6_A, 1, 2, 3, 0, 4)
        assert len(uid) == 56 and uniq_id_ip(uid) == V6_A and uniq_id_pid(uid) == 1
        assert uniq_id_ip_str(uid) == "2001:0db8:85a3:0000:0000:8a2e:0370:7334"

    def test_setter_state(self) -> None:
        now = [MARCH_2024_UTC + 5]
        setter = MessageClientIDSetter(ip=None, pid=1, class_loader_hash=0, clock=lambda: now[0], tz="UTC")
        assert setter.ip == fake_ip(MARCH_2024_UTC + 5)
        assert setter.create_uniq_id().endswith("000000050000")
        now[0] = 1711929600000  # April: the month start moves
        assert setter.create_uniq_id().endswith("000000000001") and setter.start_time_ms == 1711929600000
        now[0] -= 10  # the clock steps back: the start stays, small negative diffs become 0
        assert setter.create_uniq_id().endswith("000000000002") and setter.start_time_ms == 1711929600000
        setter.counter = 2**31 - 1
        setter.create_uniq_id()
        assert setter.counter == -(2**31) and setter.create_uniq_id().endswith("0000")
        msg = setter.set_uniq_id(Message("T", b""))
        assert msg.uniq_key is not None and setter.set_uniq_id(msg) is msg

    def test_month_start_in_time_zones(self) -> None:  # JVM
        assert month_start_ms(1710496800000, "Asia/Shanghai") == 1709222400000
        # America/Asuncion 2017-10-01: midnight falls in the DST gap (01:00 -03), and Calendar.add keeps 01:00
        assert month_start_ms(1506852000000, "America/Asuncion") == 1506830400000
        assert next_month_start_ms(1506852000000, "America/Asuncion") == 1509508800000
        # America/Havana 2015-11-01: midnight happens twice; Java takes the later one
        assert month_start_ms(1446422400000, "America/Havana") == 1446354000000

    def test_nearly_time(self) -> None:
        uid = build_uniq_id(bytes(4), 0, 0, MARCH_2024_UTC + 1000, MARCH_2024_UTC, 0)
        assert uniq_id_nearly_time(uid, MARCH_2024_UTC + 2000, "UTC") == MARCH_2024_UTC + 1000
        # read in the same millisecond: upstream steps back one month
        assert uniq_id_nearly_time(uid, MARCH_2024_UTC + 1000, "UTC") == 1706745600000 + 1000

    @pytest.mark.parametrize("bad", ["", "C0A8", "G" * 32, "0" * 33])
    def test_malformed_ids(self, bad: str) -> None:
        with pytest.raises(DecodeError):
            uniq_id_pid(bad)


# ---------------------------------------------------------------------------------- vectorised sizes


class TestVectorisedSizes:
    def test_properties_sizes_match_the_scalar_function(self) -> None:
        tags = pa.array(["TagA", None, "标签", ""])
        keys = ["k1 k2", "k", None, None]
        for v in BOTH:
            got = properties_sizes({"TAGS": tags, "KEYS": keys, "WAIT": "true", "UNIQ_KEY": 32}, version=v)
            rows = [
                {"TAGS": t, "KEYS": k, "WAIT": "true", "UNIQ_KEY": "X" * 32}
                for t, k in zip(tags.to_pylist(), keys, strict=True)
            ]
            assert got.tolist() == [properties_size(r, version=v) for r in rows]

    def test_absent_everywhere_and_length_arrays(self) -> None:
        assert properties_sizes({"A": None, "B": np.array([-1, 3])}).tolist() == [0, 5]
        assert properties_sizes({"A": None, "B": np.array([-1, 3])}, version=V5_DEVELOP).tolist() == [0, 6]
        assert properties_sizes({"WAIT": "true"}, length=3).tolist() == [9, 9, 9]
        with pytest.raises(ValueError, match="length="):
            properties_sizes({"WAIT": "true"})

    def test_encoded_message_sizes(self) -> None:
        got = encoded_message_sizes(np.array([5, 0, 1]), np.array([6, 32767, 32768]))
        assert got.tolist() == [33, 22 + 32767, -1]
        assert got[0] == encoded_message_size(_msg())

    def test_store_sizes(self) -> None:
        got = store_sizes([14, 14, 14, 14], [9, 9, 128, 9], [19, 19, 19, 40000], [0, 0x30, 0, 0])
        assert got.tolist() == [133, 157, -1, -1]


# ---------------------------------------------------------------------------------- the checkers


@pytest.mark.parametrize(
    ("checker", "file_name", "needle", "replacement"),
    [
        (encode_message_checker, "encode_message.json", "0006544147530141", "0006544147530142"),
        (
            store_checker,
            "store_encode.json",
            '"msgId": "0A00000500002A9F000000000001E240"',
            '"msgId": "0A00000500002A9F000000000001E241"',
        ),
    ],
)
def test_checkers_notice_a_corrupted_expectation(
    checker,
    file_name: str,
    needle: str,
    replacement: str,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    original = tmp_path / "orig" / file_name
    original.parent.mkdir()
    shutil.copy(VECTORS / file_name, original)
    assert all(r.status == "passed" for r in checker.run(original))
    text = (VECTORS / file_name).read_text()
    assert needle in text
    broken = tmp_path / file_name
    broken.write_text(text.replace(needle, replacement, 1))
    failures = [r for r in checker.run(broken) if r.status == "failed"]
    assert len(failures) == 1 and "expected" in failures[0].detail
    json.loads(broken.read_text())  # still valid JSON: the checker, not the parser, caught it


@pytest.mark.parametrize(
    "value", [0, 1, 9, 10, 99, 100, 2147483647, -1, -10, -2147483648, 10**18 - 1, 10**18, -(2**63), 2**63 - 1]
)
def test_decimal_lengths_are_java_string_value_of_lengths(value: int) -> None:
    # String.valueOf(long): what Message.setDelayTimeLevel writes as DELAY (and the broker as REAL_QID)
    assert decimal_lengths([value]).tolist() == [len(str(value))]


# ---------------------------------------------------------------------------------- decoder edges
#
# Every edge of upstream's MessageDecoder decode functions (common/src/main/java/org/apache/rocketmq/common/
# message/MessageDecoder.java, tags rocketmq-all-4.9.8 (= 4.9.7) and rocketmq-all-5.3.3), java mode; strict
# mode keeps rocketsim's own choices where noted.

V4_9_3 = parse_version("4.9.3")
V5_3_3 = parse_version("5.3.3")
JAVA_LINES = [V4_9_8, V5_3_3]
_BODYLEN_AT = 84  # BODYLEN of a record with IPv4 hosts: 48-byte head + 8 + 8 + 8 + 4 + 8


def _v2_record(msg: StoredMessage, version: ClientVersion = V5_3_3) -> bytes:
    """``msg`` in the 5.x V2 commit-log layout (``MessageVersion.MESSAGE_VERSION_V2``): magic 0xDAA320AB and
    a 2-byte TOPICLEN (IPv4 hosts)."""
    v1 = encode_store(dataclass_replace(msg, topic=""), version=version)
    at = _BODYLEN_AT + 4 + len(msg.body or b"")
    topic = msg.topic.encode()
    data = v1[:at] + struct.pack(">h", len(topic)) + topic + v1[at + 1 :]
    return struct.pack(">ii", len(data), MESSAGE_MAGIC_CODE_V2) + data[8:]


def _set_int(data: bytes, at: int, value: int, fmt: str = ">i") -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


class TestDecoderEdges:
    def test_proplen_zero_leaves_properties_null(self) -> None:
        # decode: `if (propertiesLength > 0) { ... msgExt.setProperties(map); }` -> getProperties() null
        for v in JAVA_LINES:
            data = encode_store(_stored(properties={}), version=v)
            assert decode_store(data, version=v, mode="java").properties is None
            assert decode_store(data, version=v).properties == {}  # strict: rocketsim's {} (re-encodes alike)
        data = encode_store(_stored(properties={}), version=V5_3_3)
        got = decode_store(data, version=V5_3_3, mode="java", set_properties_string=True)
        assert got.properties is None  # isSetPropertiesString only acts inside `propertiesLength > 0`

    def test_negative_proplen_leaves_properties_null_and_the_position_before_them(self) -> None:
        # decode: a negative `short propertiesLength` is not > 0: no read, the position stays after PROPLEN
        a = _set_int(encode_store(_stored(properties={})), 112, -1, ">h")
        b = encode_store(_stored(topic="B"))
        got = decode_stores(a + b, mode="java")
        assert [(m.topic, m.properties) for m in got] == [
            ("TopicTest", None),
            ("B", {"WAIT": "true", "TAGS": "TagA"}),
        ]
        with pytest.raises(DecodeError, match="PROPLEN -1 is negative"):
            decode_stores(a + b)
        # the property bytes left behind are read as the next record: 5.x's magic check refuses them
        data = encode_store(_stored(), version=V5_3_3)
        cut = _set_int(data, 112, -1, ">h")
        assert [m.properties for m in decode_stores(cut + data, version=V5_3_3, mode="java")] == [None]

    def test_bodylen_zero_or_negative_leaves_the_body_null(self) -> None:
        # decode: `if (bodyLen > 0) { ... msgExt.setBody(body); }`; a negative length does not move the
        # position
        for v in JAVA_LINES:
            empty = encode_store(_stored(body=b"", body_crc=0), version=v)
            assert decode_store(empty, version=v, mode="java").body is None
            assert decode_store(empty, version=v).body == b""  # strict: rocketsim's b"" (re-encodes alike)
            negative = _set_int(empty, _BODYLEN_AT, -5)
            got = decode_store(negative, version=v, mode="java")
            assert (got.body, got.topic, got.properties) == (
                None,
                "TopicTest",
                {"WAIT": "true", "TAGS": "TagA"},
            )
            with pytest.raises(DecodeError, match="BODYLEN -5 is negative"):
                decode_store(negative, version=v)

    def test_v2_magic_decodes_in_5x_java_mode(self) -> None:
        # 5.3.3 decode: MessageVersion.valueOfMagicCode(magic) -> V2: `int topicLen = buffer.getShort()`
        msg = _stored(topic="T" * 200)  # over 127 bytes: only the V2 format holds it
        data = _v2_record(msg)
        assert decode_store(data, version=V5_3_3, mode="java") == dataclass_replace(msg, store_size=len(data))
        with pytest.raises(DecodeError, match="V2 format"):
            decode_store(data, version=V5_3_3)  # strict: encode_store never writes V2
        # 4.9.8 decode never reads the magic: the 2-byte length's high byte is a TOPICLEN of 0, then PROPLEN
        # is read from 0xC8 'T'
        got = decode_store(data, version=V4_9_8, mode="java")
        assert got.topic == "" and got.properties is None  # PROPLEN 0xC854 is negative
        v2_short_topic = _v2_record(_stored(), V5_3_3)
        records = [
            encode_store(_stored(), version=V5_3_3),
            v2_short_topic,
            encode_store(_stored(topic="Z"), version=V5_3_3),
        ]
        got_all = decode_stores(b"".join(records), version=V5_3_3, mode="java", decompress_body=False)
        assert [m.topic for m in got_all] == ["TopicTest", "TopicTest", "Z"]

    def test_unknown_magic_is_invalid_in_5x_and_ignored_in_4_9(self) -> None:
        # 5.3.3 MessageVersion.valueOfMagicCode: IllegalArgumentException("Invalid magicCode " + magicCode)
        data = _set_int(encode_store(_stored(), version=V5_3_3), 4, 0)
        with pytest.raises(JavaDecodeError) as err:
            decode_store(data, version=V5_3_3, mode="java")
        assert (err.value.java_exception, err.value.java_message) == (
            "java.lang.IllegalArgumentException",
            "Invalid magicCode 0",
        )
        with pytest.raises(JavaDecodeError, match="Invalid magicCode|MAGICCODE"):
            decode_store(data[:8], version=V5_3_3, mode="java")  # checked before the rest is read
        # 4.9.8 decode: `byteBuffer.getInt()` for MAGICCODE, value unused
        assert decode_store(_set_int(encode_store(_stored()), 4, 0), mode="java").topic == "TopicTest"

    def test_decodes_returns_the_prefix_before_the_first_null(self) -> None:
        # decodes: `while (hasRemaining) { msgExt = clientDecode(..); if (null != msgExt) add; else break; }`
        for v in JAVA_LINES:
            good = encode_store(_stored(), version=v)
            other = encode_store(_stored(topic="B"), version=v)
            assert [m.topic for m in decode_stores(good + other, version=v, mode="java")] == [
                "TopicTest",
                "B",
            ]
            for tail in (other[:-1], other[:47], b"\x00" * 3):
                got = decode_stores(good + tail, version=v, mode="java")
                assert [m.topic for m in got] == ["TopicTest"]
            assert decode_stores(b"", version=v, mode="java") == []
            assert decode_stores(b"\xff" * 7, version=v, mode="java") == []
            with pytest.raises(DecodeError):
                decode_stores(good + other[:-1], version=v)  # strict raises

    def test_decodes_reads_records_back_to_back_ignoring_totalsize(self) -> None:
        # decode never uses TOTALSIZE to move on: padding of a preset storeSize is read as the next record.
        # 5.x: its zero magic is invalid; 4.9.8: it reads BODYLEN 0x0500002A from the next record's store host
        # and runs out of bytes. Both stop after the first record; strict mode delimits by TOTALSIZE.
        for v in JAVA_LINES:
            padded = encode_store(_stored(store_size=150), version=v)
            other = encode_store(_stored(topic="B"), version=v)
            assert [m.topic for m in decode_stores(padded + other, version=v)] == ["TopicTest", "B"]
            assert [m.topic for m in decode_stores(padded + other, version=v, mode="java")] == ["TopicTest"]

    def test_decodes_decompresses_and_5_3_2_clears_the_flag(self) -> None:
        # decodes -> clientDecode(bb, readBody) = decode(bb, readBody, deCompressBody=true, isClient=true):
        # CompressorFactory.getCompressor(getCompressionType(sysFlag)).decompress(body); 5.3.2+ then
        # `sysFlag &= ~MessageSysFlag.COMPRESSED_FLAG` (4.9.8 keeps it)
        plain = b"x" * 5000
        packed = zlib.compress(plain, 5)
        msg = _stored(body=packed, sys_flag=0x301, body_crc=crc32_masked(packed))
        for v, flag in ((V4_9_8, 0x301), (V5_3_3, 0x300)):
            data = encode_store(msg, version=v)
            (got,) = decode_stores(data, version=v, mode="java")
            assert (got.body, got.sys_flag) == (plain, flag)
            assert decode_store(data, version=v, mode="java", decompress_body=True) == got
            assert decode_store(data, version=v, mode="java").body == packed  # decode(bb, true, false)
            raw = decode_stores(data, version=v, mode="java", decompress_body=False)  # 5.x decodesBatch
            assert raw[0].body == packed and raw[0].sys_flag == 0x301

    def test_a_body_that_does_not_decompress_makes_decode_null(self) -> None:
        packed = zlib.compress(b"y" * 100)
        lz4_bits = _stored(body=packed, sys_flag=0x101)  # says LZ4, holds zlib
        for v in JAVA_LINES:
            data = encode_store(lz4_bits, version=v)
            with pytest.raises(JavaDecodeError) as err:
                decode_store(data, version=v, mode="java", decompress_body=True)
            assert err.value.java_exception == "java.io.IOException"
            assert decode_stores(data, version=v, mode="java") == []
        # CompressionType.findByValue(4): RuntimeException("Unknown compress type value: 4")
        with pytest.raises(JavaDecodeError) as err:
            decode_store(encode_store(_stored(sys_flag=0x401)), mode="java", decompress_body=True)
        assert err.value.java_message == "Unknown compress type value: 4"
        # before 4.9.4 decode inflated with UtilAll.uncompress: zlib whatever the type bits say
        (old,) = decode_stores(encode_store(lz4_bits), version=V4_9_3, mode="java")
        assert old.body == b"y" * 100 and old.sys_flag == 0x101

    def test_read_body_false_skips_the_body(self) -> None:
        # decode(bb, readBody=false, ..): `byteBuffer.position(byteBuffer.position() + bodyLen)`, body null
        for v in JAVA_LINES:
            a, b = encode_store(_stored(), version=v), encode_store(_stored(topic="B"), version=v)
            got = decode_stores(a + b, version=v, mode="java", read_body=False)
            assert [(m.topic, m.body) for m in got] == [("TopicTest", None), ("B", None)]
            past_end = _set_int(a, _BODYLEN_AT, 1000)  # position beyond the limit: IllegalArgumentException
            with pytest.raises(JavaDecodeError) as err:
                decode_store(past_end, version=v, mode="java", read_body=False)
            assert err.value.java_exception == "java.lang.IllegalArgumentException"
        with pytest.raises(ConfigError, match="mode='java' only"):
            decode_store(encode_store(_stored()), read_body=False)

    def test_check_crc_is_a_5x_option(self) -> None:
        # 5.3.3 decode(.., checkCRC): `if (UtilAll.crc32(body, 0, bodyLen) != bodyCRC) throw new
        # Exception("Msg crc is error!")` -> null
        data = encode_store(_stored(), version=V5_3_3)
        assert decode_store(data, version=V5_3_3, mode="java", check_crc=True).body == b"Hello RocketMQ"
        with pytest.raises(JavaDecodeError) as err:
            decode_store(_set_int(data, 8, 7), version=V5_3_3, mode="java", check_crc=True)
        assert (err.value.java_exception, err.value.java_message) == (
            "java.lang.Exception",
            "Msg crc is error!",
        )
        with pytest.raises(ConfigError, match="no checkCRC"):
            decode_store(encode_store(_stored()), mode="java", check_crc=True)

    def test_set_properties_string_is_a_5x_option(self) -> None:
        # 5.3.3 decode(.., isSetPropertiesString): map.put("propertiesString", propertiesString)
        data = encode_store(_stored(), version=V5_3_3)
        got = decode_store(data, version=V5_3_3, mode="java", set_properties_string=True)
        assert got.properties == {
            "WAIT": "true",
            "TAGS": "TagA",
            "propertiesString": "WAIT\x01true\x02TAGS\x01TagA\x02",
        }
        with pytest.raises(ConfigError, match="no isSetPropertiesString"):
            decode_store(encode_store(_stored()), mode="java", set_properties_string=True)

    def test_batch_elements_read_empty_body_and_properties_as_empty(self) -> None:
        # decodeMessage: `new byte[bodyLen]` -> an empty array (not null); string2messageProperties(new
        # String(new byte[0])) -> an empty HashMap (not null): unlike decode's store records
        data = encode_message(Message("T", b"", 3, {}))
        for mode in ("strict", "java"):
            (got,) = decode_messages(data, mode=mode)  # type: ignore[arg-type]
            assert got.body == b"" and got.properties == {} and got.properties is not None and got.flag == 3
        assert decode_messages(b"", mode="java") == []  # decodeMessages: `while (hasRemaining)`

    def test_string2message_properties_of_null_is_an_empty_map(self) -> None:
        # string2messageProperties(null): `new HashMap<>()` then `if (properties != null)` -> empty, not null
        assert string_to_properties(None) == {} and string_to_properties("") == {}

    def test_decode_message_id_counts_utf16_units(self) -> None:
        # decodeMessageId: `msgId.length() == 32 ? 4 : 16` counts UTF-16 units; UtilAll.string2bytes pairs
        # units after toUpperCase(), a surrogate is no hex digit (nibble -1)
        emoji = decode_message_id("0A00000500002A9F00000000075BCD" + "\U0001f600", mode="java")
        assert (emoji.ip_text, emoji.port, emoji.offset) == ("10.0.0.5", 10911, 0x075BCDFF)
        # "ß".toUpperCase() is "SS": 33 units -> 16 bytes (the odd last one ignored), the first one 0xFF
        sharp = decode_message_id("ß" + "0A0000" + "00002A9F" + "0000000000000001" + "F", mode="java")
        assert (sharp.ip_text, sharp.port, sharp.offset) == ("255.10.0.0", 10911, 1)
        with pytest.raises(JavaDecodeError) as err:
            decode_message_id("", mode="java")  # string2bytes("") is null: ByteBuffer.wrap(null)
        assert err.value.java_exception == "java.lang.NullPointerException"


class TestDecodeProperties:
    # MessageDecoder.decodeProperties(ByteBuffer): absolute reads, no try/catch
    def test_reads_only_the_properties(self) -> None:
        for v in JAVA_LINES:
            assert decode_store_properties(encode_store(_stored(), version=v), version=v) == {
                "WAIT": "true",
                "TAGS": "TagA",
            }
            # `if (propertiesLength > 0) {..} return null;`
            assert decode_store_properties(encode_store(_stored(properties={}), version=v), version=v) is None

    def test_magic_and_v2(self) -> None:
        v2 = _v2_record(_stored(topic="T" * 300))
        assert decode_store_properties(v2, version=V5_3_3) == {"WAIT": "true", "TAGS": "TagA"}
        with pytest.raises(JavaDecodeError, match="Invalid magicCode|MAGICCODE"):
            decode_store_properties(_set_int(encode_store(_stored(), version=V5_3_3), 4, 1), version=V5_3_3)
        assert decode_store_properties(_set_int(encode_store(_stored()), 4, 1)) == {
            "WAIT": "true",
            "TAGS": "TagA",
        }

    def test_java_index_arithmetic(self) -> None:
        data = encode_store(_stored())
        # BODYLEN -4 points TOPICLEN back at BODYLEN's own 0xFF (-1); PROPLEN is then read at 84 too: -1
        for v in JAVA_LINES:
            assert (
                decode_store_properties(
                    _set_int(encode_store(_stored(), version=v), _BODYLEN_AT, -4), version=v
                )
                is None
            )
        with pytest.raises(JavaDecodeError) as err:
            decode_store_properties(_set_int(data, _BODYLEN_AT, 10_000))
        assert err.value.java_exception == "java.lang.IndexOutOfBoundsException"
        with pytest.raises(JavaDecodeError) as err:
            decode_store_properties(data[:30])  # getInt(SYSFLAG_POSITION = 36)
        assert err.value.java_exception == "java.lang.IndexOutOfBoundsException"
        with pytest.raises(JavaDecodeError) as err:
            decode_store_properties(data[:-1])
        assert err.value.java_exception == "java.nio.BufferUnderflowException"
