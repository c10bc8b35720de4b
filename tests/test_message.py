"""Message, MessageBatch, MessageConst, MessageSysFlag, producer defaults and delay levels."""

from __future__ import annotations

import dataclasses

import pytest

from rocketsim.client.versions import V4_9_8, V5_DEVELOP
from rocketsim.format.codec import decode_messages, encode_messages
from rocketsim.format.message import (
    DEFAULT_MESSAGE_DELAY_LEVEL,
    Message,
    MessageBatch,
    MessageConst,
    MessageError,
    MessageSysFlag,
    broker_delay_transform,
    java_parse_int,
    parse_delay_levels,
    producer_defaults,
)


class TestMessage:
    def test_properties_default_to_an_empty_read_only_mapping(self) -> None:
        assert dict(Message("T", b"x").properties) == {}
        assert dict(Message("T", b"x", 0, None).properties) == {}
        with pytest.raises(TypeError):
            Message("T", b"x").properties["k"] = "v"  # type: ignore[index]

    def test_properties_are_copied_so_the_caller_cannot_mutate_the_message(self) -> None:
        source = {"a": "1"}
        msg = Message("T", b"x", properties=source)
        source["b"] = "2"
        assert dict(msg.properties) == {"a": "1"}

    def test_frozen_hashable_and_equal_by_value(self) -> None:
        a = Message("T", b"x", 3, {"k": "v"}, "tx")
        b = Message("T", bytearray(b"x"), 3, {"k": "v"}, "tx")  # type: ignore[arg-type]
        assert a == b and hash(a) == hash(b) and isinstance(b.body, bytes)
        with pytest.raises(dataclasses.FrozenInstanceError):
            a.topic = "U"  # type: ignore[misc]

    def test_create_sets_tags_keys_and_wait_like_the_java_constructor(self) -> None:
        msg = Message.create("T", b"b", tags="TagA", keys=["k1", "k2"], flag=7, wait_store_msg_ok=False)
        assert list(msg.properties.items()) == [("TAGS", "TagA"), ("KEYS", "k1 k2"), ("WAIT", "false")]
        assert msg.flag == 7 and msg.tags == "TagA" and msg.keys == "k1 k2" and not msg.wait_store_msg_ok

    def test_create_skips_empty_tags_and_keys(self) -> None:
        assert list(Message.create("T", b"b", tags="", keys="").properties) == ["WAIT"]

    @pytest.mark.parametrize(
        ("text", "expected"), [(None, True), ("true", True), ("TRUE", True), ("yes", False)]
    )
    def test_wait_store_msg_ok_parses_like_boolean_parse_boolean(
        self, text: str | None, expected: bool
    ) -> None:
        props = {} if text is None else {"WAIT": text}
        assert Message("T", b"", properties=props).wait_store_msg_ok is expected

    def test_delay_time_level(self) -> None:
        assert Message("T", b"").delay_time_level == 0
        assert Message("T", b"").with_delay_time_level(3).delay_time_level == 3
        assert Message("T", b"", properties={"DELAY": "+7"}).delay_time_level == 7
        with pytest.raises(MessageError, match='For input string: "3s"') as err:
            _ = Message("T", b"", properties={"DELAY": "3s"}).delay_time_level
        assert err.value.java_exception == "java.lang.NumberFormatException"

    def test_with_methods_return_copies(self) -> None:
        msg = Message("T", b"x")
        changed = msg.with_tags("A").with_keys(["a", "b"]).with_property("p", "q").without_property("p")
        assert dict(msg.properties) == {}
        assert dict(changed.properties) == {"TAGS": "A", "KEYS": "a b"}
        assert changed.with_topic("U").topic == "U" and changed.with_flag(2).flag == 2
        assert changed.with_body(None).body is None

    def test_uniq_key_is_only_set_when_absent(self) -> None:
        msg = Message("T", b"x").with_uniq_key_if_absent("A" * 32)
        assert msg.uniq_key == "A" * 32
        assert msg.with_uniq_key_if_absent("B" * 32).uniq_key == "A" * 32

    def test_transaction_prepared_property(self) -> None:
        assert Message("T", b"", properties={"TRAN_MSG": "True"}).is_transaction_prepared
        assert not Message("T", b"", properties={"TRAN_MSG": "1"}).is_transaction_prepared


class TestPutUserProperty:
    def test_accepts_a_normal_pair(self) -> None:
        assert Message("T", b"").put_user_property("color", "red").get_property("color") == "red"

    @pytest.mark.parametrize("name", ["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "WAIT"])
    def test_reserved_names_are_refused_with_upstream_text(self, name: str) -> None:
        with pytest.raises(MessageError) as err:
            Message("T", b"").put_user_property(name, "v")
        assert str(err.value) == f"The Property<{name}> is used by system, input another please"
        assert err.value.java_exception == "java.lang.RuntimeException"

    def test_reserved_set_depends_on_the_version(self) -> None:
        msg = Message("T", b"").put_user_property("TIMER_DELAY_SEC", "5", version=V4_9_8)
        assert msg.get_property("TIMER_DELAY_SEC") == "5"
        with pytest.raises(MessageError, match="TIMER_DELAY_SEC"):
            Message("T", b"").put_user_property("TIMER_DELAY_SEC", "5", version=V5_DEVELOP)

    @pytest.mark.parametrize(
        ("name", "value"),
        [("k", None), ("k", ""), ("k", " \t\n"), ("k", "\x00\x1f"), (None, "v"), ("", "v"), ("  ", "v")],
    )
    def test_null_or_blank_names_and_values_are_refused(self, name: str | None, value: str | None) -> None:
        with pytest.raises(MessageError) as err:
            Message("T", b"").put_user_property(name, value)
        assert str(err.value) == "The name or value of property can not be null or blank string!"
        assert err.value.java_exception == "java.lang.IllegalArgumentException"

    def test_trim_only_drops_chars_up_to_space(self) -> None:
        # String.trim() keeps U+00A0 and U+3000: such a value is not blank for putUserProperty.
        msg = Message("T", b"").put_user_property("k", "\u00a0").put_user_property("\u3000", "v")
        assert msg.get_property("k") == "\u00a0" and msg.get_property("\u3000") == "v"


class TestMessageBatch:
    def _msgs(self, n: int = 3) -> list[Message]:
        return [Message.create("T", f"m{i}".encode(), tags="A") for i in range(n)]

    def test_generate_from_list_keeps_order_topic_and_wait(self) -> None:
        batch = MessageBatch.generate_from_list(self._msgs())
        assert [m.body for m in batch] == [b"m0", b"m1", b"m2"] and len(batch) == 3
        assert batch.topic == "T" and batch.wait_store_msg_ok
        assert dict(batch.properties) == {"WAIT": "true"}

    @pytest.mark.parametrize(
        ("change", "text"),
        [
            (lambda m: m.with_delay_time_level(1), "TimeDelayLevel is not supported for batching"),
            (lambda m: m.with_topic("%RETRY%group"), "Retry Group is not supported for batching"),
            (lambda m: m.with_topic("U"), "The topic of the messages in one batch should be the same"),
            (
                lambda m: m.with_wait_store_msg_ok(False),
                "The waitStoreMsgOK of the messages in one batch should the same",
            ),
        ],
    )
    def test_rules_with_upstream_text(self, change, text: str) -> None:  # type: ignore[no-untyped-def]
        msgs = self._msgs()
        msgs[2] = change(msgs[2])
        with pytest.raises(MessageError) as err:
            MessageBatch.generate_from_list(msgs)
        assert str(err.value) == text
        assert err.value.java_exception == "java.lang.UnsupportedOperationException"

    def test_delay_and_retry_checks_apply_to_the_first_message_too(self) -> None:
        msgs = self._msgs()
        msgs[0] = msgs[0].with_topic("%RETRY%g")
        with pytest.raises(MessageError, match="Retry Group"):
            MessageBatch.generate_from_list(msgs)

    def test_delay_level_zero_or_negative_is_allowed(self) -> None:
        msgs = [m.with_delay_time_level(0) for m in self._msgs(2)] + [
            self._msgs(1)[0].with_delay_time_level(-1)
        ]
        assert len(MessageBatch.generate_from_list(msgs)) == 3

    def test_checks_run_message_by_message(self) -> None:
        # message 1 has another topic, message 2 a delay: upstream stops at message 1
        msgs = self._msgs()
        msgs[1] = msgs[1].with_topic("U")
        msgs[2] = msgs[2].with_delay_time_level(2)
        with pytest.raises(MessageError, match="topic of the messages"):
            MessageBatch.generate_from_list(msgs)

    def test_empty_list_fails(self) -> None:
        with pytest.raises(MessageError) as err:
            MessageBatch.generate_from_list([])
        assert err.value.java_exception == "java.lang.NullPointerException"

    def test_uniq_keys_and_request_message(self) -> None:
        ids = iter(f"{i:032X}" for i in range(10))
        batch = MessageBatch.generate_from_list([*self._msgs(2), self._msgs(1)[0].with_uniq_key("F" * 32)])
        batch = batch.with_uniq_keys(ids)
        assert [m.uniq_key for m in batch] == [f"{0:032X}", f"{1:032X}", "F" * 32]
        body = encode_messages(batch, version=V5_DEVELOP)
        request = batch.to_message(body, batch_uniq_key="E" * 32)
        assert request.topic == "T" and dict(request.properties) == {"WAIT": "true", "UNIQ_KEY": "E" * 32}
        back = decode_messages(request.body or b"", topic="T", version=V5_DEVELOP)
        assert [m.body for m in back] == [m.body for m in batch]


class TestConstants:
    def test_message_const_names_per_version(self) -> None:
        names_4 = MessageConst.names(V4_9_8)
        names_5 = MessageConst.names(V5_DEVELOP)
        assert len(names_4) == 36 and len(names_5) == 65
        assert "PROPERTY_TIMER_DELAY_SEC" not in names_4 and names_5["PROPERTY_CRC32"] == "__CRC32#"
        assert names_4.items() <= names_5.items()

    def test_string_hash_set(self) -> None:
        set_4, set_5 = MessageConst.string_hash_set(V4_9_8), MessageConst.string_hash_set(V5_DEVELOP)
        assert len(set_4) == 31 and len(set_5) == 51 and set_4 < set_5
        # INNER_MULTI_DISPATCH and the transaction-check names are not reserved in either version
        assert "INNER_MULTI_DISPATCH" not in set_5 and "TRANSACTION_CHECK_TIMES" not in set_5

    def test_sys_flag_bits_and_helpers(self) -> None:
        f = MessageSysFlag
        assert (f.COMPRESSED_FLAG, f.MULTI_TAGS_FLAG, f.BORNHOST_V6_FLAG, f.STOREHOSTADDRESS_V6_FLAG) == (
            1,
            2,
            16,
            32,
        )
        assert (f.NEED_UNWRAP_FLAG, f.INNER_BATCH_FLAG, f.COMPRESSION_TYPE_COMPARATOR) == (0x40, 0x80, 0x700)
        assert f.get_transaction_value(0x30D) == f.TRANSACTION_ROLLBACK_TYPE
        assert f.reset_transaction_value(0x305, f.TRANSACTION_COMMIT_TYPE) == 0x309
        assert f.clear_compressed_flag(0x301) == 0x300
        assert f.compression_type_value(0x201) == 2 and f.compression_type_value(0x701) == 7
        assert f.check(0x30, f.BORNHOST_V6_FLAG) and not f.check(0x20, f.BORNHOST_V6_FLAG)
        assert len(f.names()) == 14

    def test_producer_defaults(self) -> None:
        d4, d5 = producer_defaults(V4_9_8), producer_defaults(V5_DEVELOP)
        assert (d4.send_msg_timeout, d4.retry_times_when_send_failed, d4.max_message_size) == (
            3000,
            2,
            4194304,
        )
        assert d4.send_msg_max_timeout_per_request is None and d5.send_msg_max_timeout_per_request == -1
        assert set(d5.retry_response_codes) - set(d4.retry_response_codes) == {2, 1500}

    def test_java_parse_int(self) -> None:
        assert java_parse_int("-2147483648") == -(2**31) and java_parse_int("\u0663") == 3
        for bad in ("", "+", " 1", "1_0", "2147483648", "0x1"):
            with pytest.raises(MessageError, match="For input string"):
                java_parse_int(bad)


class TestDelayLevels:
    def test_default_table(self) -> None:
        table = parse_delay_levels(DEFAULT_MESSAGE_DELAY_LEVEL)
        assert table.parse_ok and table.max_level == 18
        assert (
            table.level_to_ms[1] == 1000
            and table.level_to_ms[5] == 60_000
            and table.level_to_ms[18] == 7_200_000
        )

    @pytest.mark.parametrize(
        ("text", "ok", "max_level", "levels"),
        [
            ("1s 2d", True, 2, {1: 1000, 2: 172_800_000}),
            ("1s  5s", False, 1, {1: 1000}),
            ("500ms", False, 1, {}),
            ("1x", False, 1, {}),
            ("", False, 0, {}),
            ("1s ", True, 1, {1: 1000}),
        ],
    )
    def test_malformed_strings_stop_the_parse(
        self, text: str, ok: bool, max_level: int, levels: dict
    ) -> None:
        table = parse_delay_levels(text)
        assert (table.parse_ok, table.max_level, dict(table.level_to_ms)) == (ok, max_level, levels)

    def test_put_transform_moves_to_the_schedule_topic(self) -> None:
        out = broker_delay_transform("T", 5, {"DELAY": "3", "KEYS": "k"}, 0, 1_000)
        assert out.delayed and out.topic == "SCHEDULE_TOPIC_XXXX" and out.queue_id == 2
        assert out.properties["REAL_TOPIC"] == "T" and out.properties["REAL_QID"] == "5"
        assert out.deliver_timestamp_ms == 11_000 and out.effective_level == 3

    def test_put_transform_clamps_and_skips(self) -> None:
        clamped = broker_delay_transform("T", 0, {"DELAY": "99"}, 8, 0)
        assert clamped.delayed and clamped.properties["DELAY"] == "18" and clamped.queue_id == 17
        for props, sys_flag in (({"DELAY": "3"}, 4), ({"DELAY": "3"}, 12), ({"DELAY": "0"}, 0), ({}, 0)):
            out = broker_delay_transform("T", 1, props, sys_flag, 0)
            assert not out.delayed and (out.topic, out.queue_id) == ("T", 1) and dict(out.properties) == props
