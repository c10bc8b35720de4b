"""Checker for ``properties.json``: ``messageProperties2String`` / ``string2messageProperties``.

Also home of the small helpers the other codec checkers share (``load``, ``versions``, ``differ``,
``check_exception``, ``sorted_pairs``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from rocketsim.client.versions import ClientVersion, parse_version
from rocketsim.format.codec import (
    JavaDecodeError,
    JavaEncodeError,
    java_utf8_decode,
    parse_properties,
    parsed_properties_java_order,
    properties_size,
    properties_to_bytes,
    properties_to_string,
    string_to_properties,
    utf16_len,
)
from rocketsim.vectors import Result, failed, passed

FILES = ("properties.json",)


# -- shared helpers ----------------------------------------------------------------------------------


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def versions(expected: Mapping[str, Any]) -> Iterator[tuple[str, ClientVersion, Any]]:
    """(version key, parsed version, expected output) for every version a vector lists."""
    for key, output in expected.items():
        yield key, parse_version(key), output


def shorten(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=True, default=repr)
    return text if len(text) <= limit else f"{text[:limit]}...({len(text)} chars)"


def normalise(expected: Any, got: Any) -> Any:
    """``got`` with strings turned into ``$long_string`` records wherever ``expected`` has one."""
    if isinstance(expected, dict) and expected.get("$long_string") and isinstance(got, str):
        return {
            "$long_string": True,
            "len_chars": utf16_len(got),
            "sha256_utf8": hashlib.sha256(got.encode("utf-8", "surrogatepass")).hexdigest(),
        }
    if isinstance(expected, list) and isinstance(got, list) and len(expected) == len(got):
        return [normalise(e, g) for e, g in zip(expected, got, strict=True)]
    if isinstance(expected, dict) and isinstance(got, dict):
        return {k: normalise(expected.get(k), v) for k, v in got.items()}
    return got


def differ(expected: Any, got: Any) -> str | None:
    """None when equal (after ``$long_string`` normalisation), else a short 'expected X, got Y'."""
    got = normalise(expected, got)
    if expected == got:
        return None
    if isinstance(expected, dict) and isinstance(got, dict):
        keys = [k for k in dict.fromkeys([*expected, *got]) if expected.get(k) != got.get(k)]
        parts = [f"{k}: expected {shorten(expected.get(k), 80)}, got {shorten(got.get(k), 80)}" for k in keys]
        return "; ".join(parts[:4])
    return f"expected {shorten(expected)}, got {shorten(got)}"


def check_exception(expected: Mapping[str, Any], call: Callable[[], Any]) -> str | None:
    """Java threw ``expected``: we must raise the matching Java*Error (same class, same message if we
    reproduce one). Returns None when it matches, else what differed."""
    try:
        got = call()
    except (JavaEncodeError, JavaDecodeError) as exc:
        if exc.java_exception != expected["exception"]:
            return f"expected {expected['exception']}, got {exc.java_exception} ({exc})"
        if exc.java_message is not None and exc.java_message != expected.get("message"):
            return f"message: expected {shorten(expected.get('message'))}, got {shorten(exc.java_message)}"
        return None
    return f"expected {expected['exception']}, got a result {shorten(got, 80)}"


def _java_sort_key(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")  # String.compareTo order


def sorted_pairs(props: Mapping[str, str]) -> list[list[str]]:
    return [[k, props[k]] for k in sorted(props, key=_java_sort_key)]


def pairs_in(items: list[list[str | None]] | None) -> list[tuple[str | None, str | None]] | None:
    return None if items is None else [(k, v) for k, v in items]


# -- the checker -------------------------------------------------------------------------------------


def _to_string_output(
    pairs: list[tuple[str | None, str | None]] | None, version: ClientVersion
) -> dict[str, Any]:
    text = properties_to_string(pairs, version=version)
    data = properties_to_bytes(pairs, version=version)
    size = properties_size(pairs, version=version)
    if size != len(data):
        raise AssertionError(f"properties_size {size} != encoded length {len(data)}")
    return {"string": text, "utf8_hex": data.hex(), "utf8_len": len(data), "char_len": utf16_len(text)}


def _parse_output(props: dict[str, str], version: ClientVersion) -> dict[str, Any]:
    order = parsed_properties_java_order(props, version=version)
    return {
        "map_sorted_pairs": sorted_pairs(props),
        "java_hashmap_iteration_order": [[k, props[k]] for k in order],
        "size": len(props),
    }


def _check(vector: dict[str, Any], version: ClientVersion, expected: Any) -> str | None:
    kind = vector["kind"]
    if kind == "messageProperties2String":
        pairs = None if vector.get("input_is_null") else pairs_in(vector["input_pairs_in_order"])
        return differ(expected, _to_string_output(pairs, version))
    if kind == "string2messageProperties":
        text = vector["input_string"]
        props = string_to_properties(text)
        if text is not None and vector.get("input_utf8_hex") is not None:
            from_bytes = parse_properties(
                bytes.fromhex(vector["input_utf8_hex"]), version=version, mode="java"
            )
            if from_bytes != props:
                return f"parse_properties(java) on the bytes gave {shorten(from_bytes)}, not {shorten(props)}"
        return differ(expected, _parse_output(props, version))
    if kind == "string2messageProperties_from_utf8_bytes":
        data = bytes.fromhex(vector["input_bytes_hex"])
        decoded = java_utf8_decode(data)
        if decoded != vector["decoded_string"]:
            return f"decoded string: expected {shorten(vector['decoded_string'])}, got {shorten(decoded)}"
        return differ(expected, _parse_output(parse_properties(data, version=version, mode="java"), version))
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
