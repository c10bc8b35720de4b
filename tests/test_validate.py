"""Client-side validation: Validators / TopicValidator rules, texts, codes and constants per version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocketsim.client.versions import V4_9_7, V4_9_8, V5_3_3, V5_DEVELOP, ClientVersion, parse_version
from rocketsim.errors import EncodeError, MQClientError
from rocketsim.format.validate import (
    VALID_CHAR_TABLE,
    ClientErrorCode,
    FAQUrl,
    PermName,
    PropertiesSizeError,
    ResponseCode,
    TopicValidator,
    Validators,
    check_group,
    check_message,
    check_properties_size,
    check_send_topic_allowed,
    check_topic,
    is_blank,
    is_not_allowed_send_topic,
    is_system_topic,
    is_topic_or_group_illegal,
    java_length,
)

CONSTANTS = Path(__file__).parent / "data" / "conformance" / "constants.json"
ALL_VERSIONS = [V4_9_8, V5_3_3, V5_DEVELOP]
ILLEGAL = "contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"


def refusal(fn, *args, **kwargs) -> MQClientError:  # type: ignore[no-untyped-def]
    with pytest.raises(MQClientError) as info:
        fn(*args, **kwargs)
    return info.value


# ---------------------------------------------------------------- characters and blanks


def test_valid_char_table_is_upstreams_128_entries() -> None:
    assert len(VALID_CHAR_TABLE) == 128
    allowed = "".join(chr(i) for i, ok in enumerate(VALID_CHAR_TABLE) if ok)
    assert allowed == "%-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz|"


@pytest.mark.parametrize(
    ("text", "illegal"),
    [
        ("TopicTest", False),
        ("A-Z_a-z%0|9", False),
        ("", False),  # empty is not illegal (blank is checked first)
        ("a.b", True),
        ("a b", True),
        ("a/b", True),
        ("T\x00", True),
        ("\x7f", True),
        ("é", True),  # >= 128
        ("主题", True),
        ("a😀", True),
        ("\ud800", True),  # lone surrogate
    ],
)
def test_is_topic_or_group_illegal(text: str, illegal: bool) -> None:
    assert is_topic_or_group_illegal(text) is illegal


@pytest.mark.parametrize(
    "text",
    [None, "", " ", "\t\n\x0b\x0c\r", "\x1c\x1d\x1e\x1f", "\u3000", "\u2028\u2029", "\u2000\u200a\u205f"],
)
def test_blank_is_null_empty_or_java_whitespace(text: str | None) -> None:
    assert is_blank(text)


@pytest.mark.parametrize("text", ["a", " a ", "\u00a0", "\u2007", "\u202f", "\x85", "\u200b", "\ufeff"])
def test_not_blank(text: str) -> None:
    assert not is_blank(text)  # no-break spaces, NEL, ZWSP and BOM are not Java whitespace


def test_java_length_counts_utf16_units() -> None:
    assert java_length("abc") == 3
    assert java_length("主题") == 2
    assert java_length("a😀") == 3


# ---------------------------------------------------------------- checkTopic / checkGroup


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_check_topic_texts_and_order(version: ClientVersion) -> None:
    assert check_topic("t" * 127, version) == "t" * 127
    for blank in (None, "", "  "):
        assert refusal(check_topic, blank, version).error_message == "The specified topic is blank"
    too_long = refusal(check_topic, "t" * 128, version)
    assert too_long.error_message == "The specified topic is longer than topic max length 127."
    assert too_long.response_code == -1
    # length is checked before characters, in UTF-16 units
    assert "longer" in refusal(check_topic, "é" * 128, version).error_message
    assert "longer" in refusal(check_topic, "t" * 126 + "😀", version).error_message
    bad = refusal(check_topic, "主题", version)
    assert bad.error_message == f"The specified topic[主题] {ILLEGAL}"
    assert bad.full_message == bad.error_message + "\nFor more information, please visit the url, " + (
        version.faq_url
    )


def test_faq_url_differs_between_lines() -> None:
    assert refusal(check_topic, "", V4_9_8).full_message.endswith("http://rocketmq.apache.org/docs/faq/")
    assert refusal(check_topic, "", V5_3_3).full_message.endswith(
        "https://rocketmq.apache.org/docs/bestPractice/06FAQ"
    )


@pytest.mark.parametrize("version", [V4_9_7, V4_9_8, V5_3_3, parse_version("5.2.0")])
def test_check_group_255_up_to_5_3_3(version: ClientVersion) -> None:
    assert check_group("g" * 255, version) == "g" * 255
    e = refusal(check_group, "g" * 256, version)
    assert e.error_message == "the specified group is longer than group max length 255."


def test_check_group_120_in_develop() -> None:
    assert check_group("g" * 120, V5_DEVELOP)
    e = refusal(check_group, "g" * 121, V5_DEVELOP)
    assert e.error_message == f"the specified group[{'g' * 121}] is longer than group max length: 120."


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_check_group_blank_and_characters(version: ClientVersion) -> None:
    for blank in (None, "", " \t"):
        assert refusal(check_group, blank, version).error_message == "the specified group is blank"
    assert refusal(check_group, "g.dot", version).error_message == f"the specified group[g.dot] {ILLEGAL}"
    assert check_group("%RETRY%g-1_2|3", version)


# ---------------------------------------------------------------- topics clients may not send to


@pytest.mark.parametrize("topic", sorted(TopicValidator.NOT_ALLOWED_SEND_TOPICS))
def test_not_allowed_send_topics_are_refused(topic: str) -> None:
    assert is_not_allowed_send_topic(topic)
    assert is_system_topic(topic)
    e = refusal(check_send_topic_allowed, topic, V5_DEVELOP)
    assert e.error_message == f"Sending message to topic[{topic}] is forbidden."
    assert e.response_code == -1


@pytest.mark.parametrize(
    "topic",
    [
        "TBW102",
        "BenchmarkTest",
        "RMQ_SYS_TRACE_TOPIC",
        "rmq_sys_foo",
        "CHECKPOINT_TOPIC",
        "schedule_topic_xxxx",
    ],
)
def test_other_system_topics_may_be_sent_to(topic: str) -> None:
    assert not is_not_allowed_send_topic(topic)
    check_send_topic_allowed(topic, V4_9_8)


def test_system_topics_by_version() -> None:
    assert not is_system_topic("CHECKPOINT_TOPIC", V4_9_8)
    assert is_system_topic("CHECKPOINT_TOPIC", V5_DEVELOP)
    assert is_system_topic("rmq_sys_anything", V4_9_8)
    assert not is_system_topic("TopicTest", V5_DEVELOP)


# ---------------------------------------------------------------- checkMessage


def _code_text(version: ClientVersion, **kwargs) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    args = {"topic": "TopicTest", "body": 1, "version": version} | kwargs
    e = refusal(check_message, **args)
    return e.response_code, e.error_message


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_check_message_order_of_checks(version: ClientVersion) -> None:
    # each case breaks every later rule too, so only the order makes the expected text come first
    assert _code_text(version, topic="bad topic", body=None, message_is_null=True) == (
        13,
        "the message is null",
    )
    assert _code_text(version, topic="bad topic", body=None)[1].startswith("The specified topic[bad topic]")
    assert _code_text(version, topic="SCHEDULE_TOPIC_XXXX", body=None) == (
        -1,
        "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden.",
    )
    assert _code_text(version, body=None) == (13, "the message body is null")
    assert _code_text(version, body=b"") == (13, "the message body length is zero")
    assert _code_text(version, body=0) == (13, "the message body length is zero")


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_check_message_size_limit(version: ClientVersion) -> None:
    check_message("TopicTest", 4 * 1024 * 1024, version=version)
    check_message("TopicTest", b"x" * 10, 10, version=version)
    assert _code_text(version, body=4 * 1024 * 1024 + 1) == (
        13,
        "the message body size over max value, MAX: 4194304",
    )
    e = refusal(check_message, "TopicTest", b"x" * 11, 10, version=version)
    assert e.full_message.startswith("CODE: 13  DESC: the message body size over max value, MAX: 10\n")


def test_inner_multi_dispatch_separator_only_in_5x() -> None:
    props = {"INNER_MULTI_DISPATCH": "%LMQ%a/b"}
    check_message("TopicTest", 1, properties=props, version=V4_9_8)
    e = refusal(check_message, "TopicTest", 1, properties=props, version=V5_3_3)
    assert (e.response_code, e.error_message) == (
        13,
        "INNER_MULTI_DISPATCH %LMQ%a/b can not contains / character",
    )
    check_message("TopicTest", 1, properties={"INNER_MULTI_DISPATCH": "%LMQ%a,%LMQ%b"}, version=V5_DEVELOP)
    # body rules come first
    assert refusal(check_message, "TopicTest", 0, properties=props, version=V5_3_3).error_message == (
        "the message body length is zero"
    )


# ---------------------------------------------------------------- properties size


def test_properties_size_limit_is_a_short() -> None:
    check_properties_size(32767)
    with pytest.raises(PropertiesSizeError) as info:
        check_properties_size(32768)
    assert str(info.value) == "Properties size of message exceeded, properties size: {}, maxSize: {}."
    assert (info.value.properties_size, info.value.max_size) == (32768, 32767)
    assert isinstance(info.value, EncodeError)


# ---------------------------------------------------------------- constants


def test_constants_match_upstream_per_version() -> None:
    per_version = json.loads(CONSTANTS.read_text(encoding="utf-8"))["per_version"]
    classes = {
        "TopicValidator": TopicValidator,
        "Validators": Validators,
        "ClientErrorCode": ClientErrorCode,
        "PermName": PermName,
        "FAQUrl": FAQUrl,
        "ResponseCode": ResponseCode,
    }
    for key, version in (("4.9.8", V4_9_8), ("5.x", V5_DEVELOP)):
        seen = set()
        for java_class, values in per_version[key].items():
            name = java_class.rsplit(".", 1)[-1]
            if name in classes:
                assert classes[name].declared(version) == values, (key, java_class)
                seen.add(name)
        assert seen == set(classes)
        assert (
            sorted(TopicValidator.system_topic_set(version))
            == per_version[key]["TopicValidator.getSystemTopicSet()"]
        )


def test_response_codes_the_send_engine_uses() -> None:
    rc = ResponseCode
    assert (rc.SUCCESS, rc.SYSTEM_ERROR, rc.SYSTEM_BUSY) == (0, 1, 2)
    assert (rc.SERVICE_NOT_AVAILABLE, rc.NO_PERMISSION, rc.TOPIC_NOT_EXIST) == (14, 16, 17)
    assert (rc.NO_BUYER_ID, rc.NOT_IN_CURRENT_UNIT, rc.GO_AWAY, rc.MESSAGE_ILLEGAL) == (204, 205, 1500, 13)
    assert "GO_AWAY" not in rc.declared(V4_9_8)
    assert "SUCCESS" in rc.declared(V4_9_8, include_inherited=True)
    assert "FLOW_CONTROL" not in rc.declared(parse_version("4.9.4"))


def test_perm_name_helpers() -> None:
    assert (PermName.PERM_PRIORITY, PermName.PERM_READ, PermName.PERM_WRITE, PermName.PERM_INHERIT) == (
        8,
        4,
        2,
        1,
    )
    assert PermName.is_writeable(6) and PermName.is_readable(6) and not PermName.is_inherited(6)
    assert not PermName.is_writeable(4) and not PermName.is_readable(2)
    assert PermName.perm2string(7) == "RWX" and PermName.perm2string(4) == "R--"
    assert PermName.is_valid(7) and not PermName.is_valid(8) and PermName.is_priority(8 | 6)


def test_faq_url_message_suffix() -> None:
    e = refusal(check_topic, "", V4_9_8)
    assert e.full_message == FAQUrl.attach_default_url("The specified topic is blank", V4_9_8)
