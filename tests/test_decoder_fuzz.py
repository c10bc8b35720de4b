"""Bounded fuzz of the decoders test_codec_fuzz.py leaves out or feeds too narrow an alphabet
(docs/design.md §8: decoders refuse corrupt bytes with an error, never a crash or a wrong message).

Covered here: the id readers on any text (whitespace, separators, non-ASCII digits), ``decode_stores``
(commit-log slices; java mode must not raise at all: ``decodes`` returns the prefix), java-mode
``decode_store`` with every flag and ``decode_store_properties``, ``string_to_properties`` /
``java_utf8_decode`` / java-mode ``parse_properties`` (the lenient readers must not raise at all), and
every decompressor (``decompress``, ``decompress_as``
with and without ``java_compat``, ``decode_body``). Only ``DecodeError`` may escape a strict decoder;
whatever decodes must re-encode to the same bytes (compressed streams are not canonical, so for them
the round trip is checked from the encoder's side and mutated streams must decode or raise DecodeError).
"""

from __future__ import annotations

import dataclasses
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketsim.client.versions import V4_9_8, V5_DEVELOP, ClientVersion, parse_version
from rocketsim.errors import DecodeError
from rocketsim.format.codec import (
    StoredMessage,
    create_message_id,
    decode_message_id,
    decode_store,
    decode_store_properties,
    decode_stores,
    encode_store,
    java_utf8_decode,
    parse_properties,
    properties_to_bytes,
    string_to_properties,
    uniq_id_ip,
    uniq_id_ip_str,
    uniq_id_nearly_time,
    uniq_id_pid,
)
from rocketsim.format.compression import (
    COMPRESSED_FLAG,
    CompressionType,
    compress,
    compressed_sys_flag,
    decode_body,
    decompress,
    decompress_as,
)

FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
VERSIONS = st.sampled_from([V4_9_8, V5_DEVELOP])
ALL_TYPES = list(CompressionType)

# Hex digits plus everything bytes.fromhex or int() might quietly accept or choke on: whitespace, signs,
# underscores, full-width and Arabic-Indic digits, separators of the properties format.
ID_ALPHABET = st.sampled_from(
    list(string.hexdigits)
    + [" ", "\t", "\n", "\x0b", "\x0c", "\r", "+", "-", "_", "x", "\x01", "\x02"]
    + ["\uff10", "\u0661", "\u00e9", "\U0001f600", "\x00"]
)


@st.composite
def _spliced_ids(draw: st.DrawFn) -> str:
    """A well-formed hex id with some byte pairs replaced by two whitespace or odd characters (the shape
    bytes.fromhex silently accepts when the whitespace falls between pairs)."""
    size = draw(st.sampled_from([32, 56]))
    chars = list(draw(st.text(st.sampled_from(string.hexdigits), min_size=size, max_size=size)))
    for pair in draw(st.lists(st.integers(0, size // 2 - 1), min_size=1, max_size=4)):
        chars[2 * pair : 2 * pair + 2] = draw(st.text(ID_ALPHABET, min_size=2, max_size=2))
    return "".join(chars)


def _id_texts() -> st.SearchStrategy[str]:
    """Texts of exactly the two lengths the readers accept (32 and 56), spliced ids, and any length."""
    return (
        st.text(ID_ALPHABET, min_size=32, max_size=32)
        | st.text(ID_ALPHABET, min_size=56, max_size=56)
        | _spliced_ids()
        | st.text(ID_ALPHABET, max_size=64)
    )


@FUZZ
@given(_id_texts())
def test_id_readers_raise_only_decode_error_and_never_misread(text: str) -> None:
    readers = {
        "decode_message_id": lambda: decode_message_id(text),
        "uniq_id_ip": lambda: uniq_id_ip(text),
        "uniq_id_ip_str": lambda: uniq_id_ip_str(text),
        "uniq_id_pid": lambda: uniq_id_pid(text),
        "uniq_id_nearly_time": lambda: uniq_id_nearly_time(text, 1_700_000_000_000, "UTC"),
    }
    is_hex_id = len(text) in (32, 56) and all(c in string.hexdigits for c in text)
    for name, call in readers.items():
        try:
            value = call()
        except DecodeError:
            assert not (is_hex_id and name != "decode_message_id"), f"{name} refused a well-formed id"
            continue
        # Whatever a strict reader accepts is a well-formed id: pure hex of length 32 or 56.
        assert is_hex_id, f"{name} read {text!r} as {value!r}"
        if name == "uniq_id_ip":
            assert len(value) == (4 if len(text) == 32 else 16)
            assert value == bytes.fromhex(text)[: len(value)]
        if name == "uniq_id_pid":
            assert 0 <= value <= 0xFFFF
    try:
        mid = decode_message_id(text)
    except DecodeError:
        return
    if len(text) == 32 or len(mid.ip) == 16:  # an IPv4-mapped IPv6 id reads back as IPv4
        assert create_message_id(mid.ip, mid.port, mid.offset) == text.upper()


@FUZZ
@given(_id_texts())
def test_java_mode_message_id_raises_only_decode_error(text: str) -> None:
    try:
        mid = decode_message_id(text, mode="java")
    except DecodeError:
        return
    assert 0 <= mid.port <= 0xFFFF and len(mid.ip) in (4, 16)


# ---------------------------------------------------------------------------------- commit-log slices


def _stored(topic: str, body: bytes, queue_offset: int) -> StoredMessage:
    from rocketsim.format.codec import SocketAddress

    return StoredMessage(
        topic=topic,
        body=body,
        properties={"KEYS": "k"},
        sys_flag=0,
        born_host=SocketAddress(b"\x7f\x00\x00\x01", 1234),
        store_host=SocketAddress(b"\x0a\x00\x00\x02", 10911),
        queue_offset=queue_offset,
    )


EDITS = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=3)


def _mutate(data: bytes, edits: list[tuple[int, int]], cut: int | None) -> bytes:
    out = bytearray(data)
    for pos, value in edits:
        if out:
            out[pos % len(out)] = value
    return bytes(out if cut is None else out[: cut % (len(out) + 1)])


@FUZZ
@given(
    st.lists(st.tuples(st.sampled_from(["T", "TopicTest", "中文"]), st.binary(max_size=24)), max_size=3),
    EDITS,
    st.none() | st.integers(0, 10_000),
    VERSIONS,
)
def test_fuzz_decode_stores(
    records: list[tuple[str, bytes]], edits: list[tuple[int, int]], cut: int | None, version: ClientVersion
) -> None:
    msgs = [_stored(topic, body, i) for i, (topic, body) in enumerate(records)]
    clean = b"".join(encode_store(m, version=version) for m in msgs)
    assert [dataclasses.replace(m, store_size=0) for m in decode_stores(clean, version=version)] == msgs
    data = _mutate(clean, edits, cut)
    try:
        got = decode_stores(data, version=version)
    except DecodeError:
        return
    assert b"".join(encode_store(m, version=version) for m in got) == data


# ---------------------------------------------------------------------------------- lenient readers


@FUZZ
@given(st.binary(max_size=80), VERSIONS)
def test_lenient_property_readers_never_raise(data: bytes, version: ClientVersion) -> None:
    text = java_utf8_decode(data)
    assert isinstance(text, str)
    props = string_to_properties(text)
    assert all(k and v and "\x02" not in k + v and "\x01" not in k for k, v in props.items())
    assert parse_properties(data, mode="java", version=version) == props
    try:
        strict = parse_properties(data, version=version)
    except DecodeError:
        return
    assert strict == props  # where strict accepts, both readers agree
    assert properties_to_bytes(strict, version=version) == data


# ---------------------------------------------------------------------------------- decompressors


@FUZZ
@given(
    st.binary(max_size=300), st.sampled_from(ALL_TYPES), st.integers(-1, 9), EDITS, st.none() | st.integers()
)
def test_fuzz_decompress(
    body: bytes, ctype: CompressionType, level: int, edits: list[tuple[int, int]], cut: int | None
) -> None:
    data = compress(body, ctype, level)
    flag = compressed_sys_flag(ctype, version=V4_9_8) | COMPRESSED_FLAG
    assert decompress(data, flag) == body
    assert decode_body(data, flag) == body
    assert compress(decompress_as(data, ctype), ctype, level) == data  # the encoder is deterministic
    bad = _mutate(data, edits, cut)
    for call in (
        lambda: decompress_as(bad, ctype),
        lambda: decompress_as(bad, ctype, java_compat=True),
        lambda: decompress(bad, flag),
    ):
        try:
            out = call()
        except DecodeError:
            continue
        assert isinstance(out, bytes)
        if ctype is CompressionType.ZLIB and not edits and cut is None:
            assert out == body


@FUZZ
@given(st.binary(max_size=200), st.integers(-(2**31), 2**31 - 1))
def test_fuzz_decompress_any_bytes_any_flag(data: bytes, sys_flag: int) -> None:
    for call in (lambda: decompress(data, sys_flag), lambda: decode_body(data, sys_flag)):
        try:
            out = call()
        except DecodeError:
            continue
        assert isinstance(out, bytes)
    if not sys_flag & COMPRESSED_FLAG:
        assert decode_body(data, sys_flag) == data


@pytest.mark.parametrize(
    "text",
    [" " * 32, "00 " * 10 + "00", "0" * 30 + "\t\n", " " * 56, "0" * 54 + " 0", "\uff10" * 32],
    ids=["spaces32", "spaced-pairs", "tab-newline", "spaces56", "inner-space", "fullwidth"],
)
def test_ids_with_whitespace_or_non_ascii_digits_are_refused(text: str) -> None:
    """bytes.fromhex skips ASCII whitespace between pairs: the readers must not (a 32-char id of spaces
    once read as an empty IP, and decode_message_id crashed with struct.error)."""
    for call in (decode_message_id, uniq_id_ip, uniq_id_ip_str, uniq_id_pid):
        with pytest.raises(DecodeError):
            call(text)
    with pytest.raises(DecodeError):
        uniq_id_nearly_time(text, 1_700_000_000_000, "UTC")


@FUZZ
@given(
    st.lists(st.tuples(st.sampled_from(["T", "TopicTest", "中文"]), st.binary(max_size=24)), max_size=3),
    EDITS,
    st.none() | st.integers(0, 10_000),
    st.sampled_from([V4_9_8, parse_version("4.9.3"), parse_version("5.3.3"), V5_DEVELOP]),
    st.sampled_from([0, COMPRESSED_FLAG | 0x300, COMPRESSED_FLAG | 0x100, COMPRESSED_FLAG | 0x700]),
)
def test_java_mode_store_decoders_raise_only_decode_error(
    records: list[tuple[str, bytes]],
    edits: list[tuple[int, int]],
    cut: int | None,
    version: ClientVersion,
    sys_flag: int,
) -> None:
    """decodes never throws (it returns the prefix); decode and decodeProperties raise only DecodeError."""
    msgs = [dataclasses.replace(_stored(t, b, i), sys_flag=sys_flag) for i, (t, b) in enumerate(records)]
    data = _mutate(b"".join(encode_store(m, version=version) for m in msgs), edits, cut)
    for read_body in (True, False):
        got = decode_stores(data, version=version, mode="java", read_body=read_body)
        assert len(got) <= max(1, len(data) // 48)
    calls = [
        lambda: decode_store(data, version=version, mode="java"),
        lambda: decode_store(data, version=version, mode="java", decompress_body=True, read_body=True),
        lambda: decode_store(data, version=version, mode="java", read_body=False),
        lambda: decode_store_properties(data, version=version),
    ]
    if version.decoder_has_crc_check_option:
        calls.append(
            lambda: decode_store(
                data, version=version, mode="java", check_crc=True, set_properties_string=True
            )
        )
    for call in calls:
        try:
            call()
        except DecodeError:
            continue
