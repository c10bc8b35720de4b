"""Checker for ``encode_message.json``: ``encodeMessage`` / ``encodeMessages`` / ``decodeMessages``.

Successful encodings are compared byte for byte, with ``encoded_message_size`` and a Java-mode decode;
Java exceptions must come out as ``JavaEncodeError``/``JavaDecodeError`` naming the same class (and the same
text where upstream has one, e.g. 4.9's properties-size message).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rocketsim.client.versions import ClientVersion
from rocketsim.format.codec import (
    decode_messages,
    encode_message,
    encode_messages,
    encoded_message_size,
    encoded_messages_size,
    java_hashmap_order,
)
from rocketsim.format.message import Message
from rocketsim.vectors import Result, failed, passed
from rocketsim.vectors.properties import check_exception, differ, load, pairs_in, sorted_pairs, versions

FILES = ("encode_message.json",)

# Vectors built through the Java Message API, rebuilt through ours (by vector id). Our properties keep
# insertion order; java_hashmap_order must then give the HashMap iteration order the vector recorded.
_API_BUILDERS: dict[str, Callable[[bytes], Message]] = {
    "api_ctor_topic_body": lambda body: Message.create("TopicTest", body),
    "api_ctor_waitstore_false_flag_5": lambda body: Message.create(
        "TopicTest", body, tags="TagB", flag=5, wait_store_msg_ok=False
    ),
    "api_tags_keys_delay_user_uniq": lambda body: (
        Message.create("TopicTest", body, tags="TagA", keys="K1 K2")
        .with_delay_time_level(3)
        .put_user_property("userKey", "userValue")
        .put_user_property("a", "b")
        .with_uniq_key("7F0000010F2C18B4AAC2164A1F0A0000")
    ),
}


def _message(spec: dict[str, Any]) -> Message:
    body = None if spec.get("body_is_null") else bytes.fromhex(spec["body_hex"])
    pairs = None if spec.get("properties_is_null") else pairs_in(spec.get("properties_in_order"))
    return Message("", body, spec["flag"], dict(pairs or []))  # type: ignore[arg-type]


def _decoded(data: bytes) -> list[dict[str, Any]]:
    return [
        {"flag": m.flag, "body_hex": (m.body or b"").hex(), "properties_sorted": sorted_pairs(m.properties)}
        for m in decode_messages(data, mode="java")
    ]


def _encoded_output(encode: Callable[[], bytes], size: Callable[[], int], expected: Any) -> str | None:
    if "exception" in expected:
        problem = check_exception(expected, encode)
        return problem or (None if check_exception(expected, size) is None else "size function did not raise")
    data = encode()
    if size() != len(data):
        return f"size function says {size()}, encoding has {len(data)} bytes"
    return differ(expected, {"hex": data.hex(), "length": len(data), "decodeMessages": _decoded(data)})


def _check(vector: dict[str, Any], version: ClientVersion, expected: Any) -> str | None:
    kind = vector["kind"]
    if kind == "encodeMessage":
        msg = _message(vector["input"])
        return _encoded_output(
            lambda: encode_message(msg, version=version),
            lambda: encoded_message_size(msg, version=version),
            expected,
        )
    if kind == "encodeMessage_api_built":
        spec = vector["input"]
        order = [(k, v) for k, v in spec["properties_hashmap_iteration_order"]]
        body = bytes.fromhex(spec["body_hex"])
        builder = _API_BUILDERS.get(vector.get("id", ""))
        if builder is not None:
            built = builder(body)
            java_order = java_hashmap_order(built.properties)
            rebuilt = [(k, built.properties[k]) for k in java_order if k is not None]
            if rebuilt != order or built.flag != spec["flag"]:
                return f"our API + HashMap order gave {rebuilt} flag {built.flag}, upstream {order}"
        java_keys = [k for k, _ in order]
        if java_hashmap_order(java_keys) != java_keys:
            return f"java_hashmap_order does not keep upstream's iteration order {java_keys}"
        msg = Message("TopicTest", body, spec["flag"], dict(order))
        return _encoded_output(
            lambda: encode_message(msg, version=version),
            lambda: encoded_message_size(msg, version=version),
            expected,
        )
    if kind == "encodeMessages":
        msgs = [_message(spec) for spec in vector["input"]]
        return _encoded_output(
            lambda: encode_messages(msgs, version=version),
            lambda: encoded_messages_size(msgs, version=version),
            expected,
        )
    if kind == "decodeMessages":
        data = bytes.fromhex(vector["input_hex"])
        if isinstance(expected, dict) and "exception" in expected:
            return check_exception(expected, lambda: decode_messages(data, mode="java"))
        return differ(expected, _decoded(data))
    return f"unknown vector kind {kind!r}"


def run(path: Path) -> Iterator[Result]:
    doc = load(path)
    for n, vector in enumerate(doc["vectors"]):
        vid = f"{vector['kind']}/{vector.get('id', n)}"
        for key, version, expected in versions(vector["expected"]):
            try:
                problem = _check(vector, version, expected)
            except Exception as exc:  # a crash is a failed vector, not a failed run
                problem = f"raised {type(exc).__name__}: {exc}"
            rid = f"{vid}@{key}"
            yield passed(path.name, rid) if problem is None else failed(path.name, rid, problem)
