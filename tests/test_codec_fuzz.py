"""Property tests of the codec: round trips, size functions == encoded lengths, truncation, and a bounded fuzz
of every decoder (only DecodeError may escape; whatever decodes strictly re-encodes to the same bytes)."""

from __future__ import annotations

import contextlib
import dataclasses

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rocketsim.client.versions import V4_9_8, V5_DEVELOP, ClientVersion
from rocketsim.errors import DecodeError
from rocketsim.format.codec import (
    JavaEncodeError,
    SocketAddress,
    StoredMessage,
    build_uniq_id,
    create_message_id,
    decode_message_id,
    decode_messages,
    decode_store,
    encode_message,
    encode_messages,
    encode_store,
    encoded_message_size,
    encoded_messages_size,
    java_inet_address_bytes,
    parse_properties,
    properties_size,
    properties_to_bytes,
    properties_to_string,
    store_size,
    string_to_properties,
    uniq_id_ip,
    uniq_id_nearly_time,
    uniq_id_pid,
    utf8_len,
)
from rocketsim.format.message import Message, MessageSysFlag

VERSIONS = st.sampled_from([V4_9_8, V5_DEVELOP])
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
# Names and values that survive the text format: no separators, not empty, no lone surrogates.
SAFE_TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"), min_size=1, max_size=12
)
SAFE_PROPS = st.dictionaries(SAFE_TEXT, SAFE_TEXT, max_size=6)
# Anything Java could hold, including separators, lone surrogates and nulls.
ANY_TEXT = st.text(st.characters(blacklist_categories=()), max_size=12)
ANY_PAIRS = st.lists(st.tuples(st.none() | ANY_TEXT, st.none() | ANY_TEXT), max_size=6)
BODIES = st.binary(max_size=64)
SAFE_MESSAGES = st.builds(
    lambda body, flag, props: Message("T", body, flag, props), BODIES, INT32, SAFE_PROPS
)


# ---------------------------------------------------------------------------------- properties


@FAST
@given(SAFE_PROPS, VERSIONS)
def test_properties_round_trip_strict(props: dict[str, str], version: ClientVersion) -> None:
    data = properties_to_bytes(props, version=version)
    back = parse_properties(data, version=version)
    assert list(back.items()) == list(props.items())
    assert string_to_properties(properties_to_string(props, version=version)) == props


@FAST
@given(ANY_PAIRS, VERSIONS)
def test_properties_size_equals_encoded_length(pairs: list, version: ClientVersion) -> None:  # type: ignore[type-arg]
    assert properties_size(pairs, version=version) == len(properties_to_bytes(pairs, version=version))


@FAST
@given(ANY_TEXT)
def test_utf8_len(text: str) -> None:
    assert utf8_len(text) == len(properties_to_bytes([("", text)], version=V4_9_8)) - 1


# ---------------------------------------------------------------------------------- batch elements


@FAST
@given(st.lists(SAFE_MESSAGES, max_size=5), VERSIONS)
def test_messages_round_trip(msgs: list[Message], version: ClientVersion) -> None:
    data = encode_messages(msgs, version=version)
    assert encoded_messages_size(msgs, version=version) == len(data)
    assert decode_messages(data, topic="T", version=version) == msgs
    assert decode_messages(data, topic="T", mode="java") == msgs


@FAST
@given(
    BODIES, INT32, ANY_PAIRS, st.integers(0, 40000), st.sampled_from(["v", "é", "中", "\U0001f600"]), VERSIONS
)
def test_message_size_equals_encoded_length(
    body: bytes,
    flag: int,
    pairs: list,
    big: int,
    char: str,  # type: ignore[type-arg]
    version: ClientVersion,
) -> None:
    props = dict(pairs)
    if big > 30000:  # near and over the 32767-byte limit
        props["big"] = char * (big // len(char.encode()))
    msg = Message("T", body, flag, props)  # type: ignore[arg-type]
    try:
        data = encode_message(msg, version=version)
    except JavaEncodeError as exc:
        try:
            encoded_message_size(msg, version=version)
        except JavaEncodeError as size_exc:
            assert size_exc.java_exception == exc.java_exception
        else:
            raise AssertionError("the size function did not raise where encode_message does") from None
        assert properties_size(props, version=version) > 32767  # type: ignore[arg-type]
    else:
        assert encoded_message_size(msg, version=version) == len(data)


def _element_ends(msgs: list[Message], version: ClientVersion) -> list[int]:
    ends, pos = [], 0
    for m in msgs:
        pos += len(encode_message(m, version=version))
        ends.append(pos)
    return ends


@FAST
@given(st.lists(SAFE_MESSAGES, min_size=1, max_size=3), VERSIONS)
def test_truncated_batches_never_decode_to_a_wrong_message(
    msgs: list[Message], version: ClientVersion
) -> None:
    data = encode_messages(msgs, version=version)
    ends = _element_ends(msgs, version)
    for cut in range(len(data)):
        try:
            got = decode_messages(data[:cut], topic="T", version=version)
        except DecodeError:
            assert cut not in ends
        else:  # only a cut at an element boundary is itself a valid (shorter) batch
            assert cut == 0 or cut in ends
            assert got == msgs[: ends.index(cut) + 1 if cut else 0]


@FAST
@given(st.lists(SAFE_MESSAGES, max_size=3), st.binary(min_size=1, max_size=21), VERSIONS)
def test_trailing_bytes_raise(msgs: list[Message], extra: bytes, version: ClientVersion) -> None:
    data = encode_messages(msgs, version=version) + extra  # shorter than the smallest element (22 bytes)
    for mode in ("strict", "java"):
        try:
            decode_messages(data, version=version, mode=mode)  # type: ignore[arg-type]
        except DecodeError:
            continue
        raise AssertionError("trailing bytes decoded")


# ---------------------------------------------------------------------------------- store format

IPV4 = st.binary(min_size=4, max_size=4)
IPV6 = st.binary(min_size=16, max_size=16)
PORTS = st.integers(0, 0xFFFF)


@st.composite
def stored_messages(draw: st.DrawFn, *, safe: bool = True) -> StoredMessage:
    born_v6, store_v6 = draw(st.booleans()), draw(st.booleans())
    sys_flag = draw(INT32)
    sys_flag &= ~(MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG)
    sys_flag |= MessageSysFlag.BORNHOST_V6_FLAG if born_v6 else 0
    sys_flag |= MessageSysFlag.STOREHOSTADDRESS_V6_FLAG if store_v6 else 0
    topic = draw(SAFE_TEXT.filter(lambda t: utf8_len(t) <= 127) if safe else ANY_TEXT)
    props = draw(SAFE_PROPS if safe else ANY_PAIRS.map(dict))
    msg = StoredMessage(
        topic=topic,
        body=draw(BODIES),
        properties=props,
        sys_flag=sys_flag,
        born_host=SocketAddress(draw(IPV6 if born_v6 else IPV4), draw(PORTS)),
        store_host=SocketAddress(draw(IPV6 if store_v6 else IPV4), draw(PORTS)),
        flag=draw(INT32),
        body_crc=draw(INT32),
        queue_id=draw(INT32),
        queue_offset=draw(INT64),
        commit_log_offset=draw(INT64),
        born_timestamp=draw(INT64),
        store_timestamp=draw(INT64),
        reconsume_times=draw(INT32),
        prepared_transaction_offset=draw(INT64),
    )
    if draw(st.booleans()):
        msg = dataclasses.replace(msg, store_size=draw(st.integers(0, 600)))
    return msg


@FAST
@given(stored_messages(), VERSIONS)
def test_store_round_trip(msg: StoredMessage, version: ClientVersion) -> None:
    try:
        data = encode_store(msg, version=version)
    except JavaEncodeError:
        assume(False)  # a preset size too small for this record: covered below
    assert store_size(msg, version=version) == len(data)
    back = decode_store(data, version=version)
    assert back == dataclasses.replace(msg, store_size=len(data))
    assert encode_store(back, version=version) == data
    expected_id = create_message_id(msg.store_host.ip, msg.store_host.port, msg.commit_log_offset)
    assert back.msg_id.startswith(expected_id)


@FAST
@given(stored_messages(safe=False), st.booleans(), VERSIONS)
def test_store_size_equals_encoded_length(
    msg: StoredMessage, swap_hosts: bool, version: ClientVersion
) -> None:
    if swap_hosts:  # hosts that disagree with their V6 bits
        msg = dataclasses.replace(msg, sys_flag=msg.sys_flag ^ MessageSysFlag.BORNHOST_V6_FLAG)
    try:
        data = encode_store(msg, version=version)
    except JavaEncodeError as exc:
        try:
            store_size(msg, version=version)
        except JavaEncodeError as size_exc:
            assert (size_exc.java_exception, size_exc.java_message) == (exc.java_exception, exc.java_message)
        else:
            raise AssertionError("store_size did not raise where encode_store does") from None
    else:
        assert store_size(msg, version=version) == len(data)


@settings(max_examples=40, deadline=None)
@given(stored_messages(), VERSIONS)
def test_truncated_or_extended_store_records_raise(msg: StoredMessage, version: ClientVersion) -> None:
    msg = dataclasses.replace(msg, store_size=0)
    data = encode_store(msg, version=version)
    for cut in range(len(data)):
        try:
            decode_store(data[:cut], version=version)
        except DecodeError:
            continue
        raise AssertionError(f"a {cut}-byte prefix decoded")
    for extra in (b"\x00", b"\xff" * 7):
        try:
            decode_store(data + extra, version=version)
        except DecodeError:
            continue
        raise AssertionError("trailing bytes decoded")


# ---------------------------------------------------------------------------------- ids


@FAST
@given(IPV4 | IPV6, PORTS, INT64)
def test_message_id_round_trip(ip: bytes, port: int, offset: int) -> None:
    decoded = decode_message_id(create_message_id(ip, port, offset))
    assert (decoded.ip, decoded.port, decoded.offset) == (java_inet_address_bytes(ip), port, offset)


@FAST
@given(IPV4 | IPV6, st.integers(0, 2**31), INT32, st.integers(0, 2**41), st.integers(0, 2**41), INT32)
def test_uniq_id_fields_read_back(
    ip: bytes, pid: int, cl_hash: int, now: int, start: int, counter: int
) -> None:
    uid = build_uniq_id(ip, pid, cl_hash, now, start, counter)
    assert len(uid) == (32 if len(ip) == 4 else 56) and uid == uid.upper()
    assert uniq_id_ip(uid) == ip and uniq_id_pid(uid) == pid & 0xFFFF
    assert int(uid[-4:], 16) == counter & 0xFFFF


@FAST
@given(
    st.integers(1_600_000_000_000, 1_800_000_000_000),
    st.integers(1, 20 * 86_400_000),
    st.sampled_from(["UTC", "Asia/Shanghai", "America/New_York", "Australia/Lord_Howe"]),
)
def test_nearly_time_recovers_the_creation_time_within_the_month(now: int, later: int, tz: str) -> None:
    from rocketsim.format.codec import month_start_ms

    start = month_start_ms(now, tz)
    uid = build_uniq_id(bytes(4), 1, 1, now, start, 0)
    reader = now + later
    if month_start_ms(reader, tz) == start:  # read in the same month, after creation
        assert uniq_id_nearly_time(uid, reader, tz) == now


# ---------------------------------------------------------------------------------- fuzz


def _mutate(data: bytes, edits: list[tuple[int, int]]) -> bytes:
    out = bytearray(data)
    for pos, value in edits:
        if out:
            out[pos % len(out)] = value
    return bytes(out)


EDITS = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4)


@FUZZ
@given(
    st.binary(max_size=120)
    | st.tuples(st.lists(SAFE_MESSAGES, max_size=2), EDITS).map(
        lambda t: _mutate(encode_messages(t[0]), t[1])
    ),
    VERSIONS,
)
def test_fuzz_decode_messages(data: bytes, version: ClientVersion) -> None:
    try:
        msgs = decode_messages(data, topic="T", version=version)
    except DecodeError:
        pass
    else:
        assert encode_messages(msgs, version=version) == data
    with contextlib.suppress(DecodeError):
        decode_messages(data, mode="java")


@FUZZ
@given(
    st.binary(max_size=200)
    | st.tuples(stored_messages(), EDITS).map(
        lambda t: _mutate(encode_store(dataclasses.replace(t[0], store_size=0)), t[1])
    ),
    VERSIONS,
)
def test_fuzz_decode_store(data: bytes, version: ClientVersion) -> None:
    try:
        msg = decode_store(data, version=version)
    except DecodeError:
        pass
    else:
        assert encode_store(msg, version=version) == data
    with contextlib.suppress(DecodeError):
        decode_store(data, version=version, mode="java")


@FUZZ
@given(st.binary(max_size=60), VERSIONS)
def test_fuzz_parse_properties(data: bytes, version: ClientVersion) -> None:
    try:
        props = parse_properties(data, version=version)
    except DecodeError:
        pass
    else:
        assert properties_to_bytes(props, version=version) == data
    assert isinstance(parse_properties(data, mode="java"), dict)


@FUZZ
@given(st.text(st.sampled_from("0123456789ABCDEFabcdefXZ\u00e9\U0001f600"), max_size=60))
def test_fuzz_id_readers(text: str) -> None:
    for call in (
        lambda: decode_message_id(text),
        lambda: decode_message_id(text, mode="java"),
        lambda: uniq_id_ip(text),
        lambda: uniq_id_pid(text),
        lambda: uniq_id_nearly_time(text, 1_700_000_000_000, "UTC"),
    ):
        with contextlib.suppress(DecodeError):
            call()
    try:
        mid = decode_message_id(text)
    except DecodeError:
        return
    assert (
        create_message_id(mid.ip, mid.port, mid.offset) == text.upper()
        or len(mid.ip) == 4
        and len(text) == 56
    )
