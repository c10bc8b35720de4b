"""Checker for ``store_encode.json``: the broker store format, message ids and ``UtilAll.crc32``.

An ``encode_store`` vector passes when our bytes, ``store_size`` and the Java-mode decode (including the
computed msgId) equal upstream's, and the strict decoder reads the bytes back to a record that re-encodes
to the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rocketsim.client.versions import ClientVersion
from rocketsim.format.codec import (
    SocketAddress,
    StoredMessage,
    crc32_masked,
    create_message_id,
    decode_message_id,
    decode_store,
    encode_store,
    java_inet_address_bytes,
    store_size,
)
from rocketsim.vectors import Result, failed, passed
from rocketsim.vectors.properties import check_exception, differ, load, pairs_in, sorted_pairs, versions

FILES = ("store_encode.json",)


def _host(spec: dict[str, Any]) -> SocketAddress:
    return SocketAddress(bytes.fromhex(spec["ip_bytes_hex"]), spec["port"])


def _stored(spec: dict[str, Any]) -> StoredMessage:
    return StoredMessage(
        topic=spec["topic"],
        body=bytes.fromhex(spec["body_hex"]),
        born_host=_host(spec["bornHost"]),
        store_host=_host(spec["storeHost"]),
        properties=dict(pairs_in(spec["properties_in_order"]) or []),  # type: ignore[arg-type]
        sys_flag=spec["sysFlag"],
        flag=spec["flag"],
        body_crc=spec["bodyCRC"],
        queue_id=spec["queueId"],
        queue_offset=spec["queueOffset"],
        commit_log_offset=spec["commitLogOffset"],
        born_timestamp=spec["bornTimestamp"],
        store_timestamp=spec["storeTimestamp"],
        reconsume_times=spec["reconsumeTimes"],
        prepared_transaction_offset=spec["preparedTransactionOffset"],
        store_size=spec["storeSize_preset"],
    )


def _host_out(host: SocketAddress) -> dict[str, Any]:
    return {"ip_bytes_hex": java_inet_address_bytes(host.ip).hex(), "port": host.port}


def _decode_out(msg: StoredMessage) -> dict[str, Any]:
    return {
        "storeSize": msg.store_size,
        "bodyCRC": msg.body_crc,
        "queueId": msg.queue_id,
        "flag": msg.flag,
        "queueOffset": msg.queue_offset,
        "commitLogOffset": msg.commit_log_offset,
        "sysFlag": msg.sys_flag,
        "bornTimestamp": msg.born_timestamp,
        "bornHost": _host_out(msg.born_host),
        "storeTimestamp": msg.store_timestamp,
        "storeHost": _host_out(msg.store_host),
        "reconsumeTimes": msg.reconsume_times,
        "preparedTransactionOffset": msg.prepared_transaction_offset,
        "body_hex": None if msg.body is None else msg.body.hex(),
        "topic": msg.topic,
        "properties_sorted": None if msg.properties is None else sorted_pairs(msg.properties),
        "msgId": msg.msg_id,
    }


def _id_out(msg_id: str) -> dict[str, Any]:
    decoded = decode_message_id(msg_id, mode="java")
    return {
        "ip_bytes_hex": decoded.ip.hex(),
        "ip_text": decoded.ip_text,
        "port": decoded.port,
        "offset": decoded.offset,
    }


def _check(vector: dict[str, Any], version: ClientVersion, expected: Any) -> str | None:
    kind = vector["kind"]
    if kind == "encode_store":
        msg = _stored(vector["input"])
        if "exception" in expected:
            problem = check_exception(expected, lambda: encode_store(msg, version=version))
            if problem is None and check_exception(expected, lambda: store_size(msg, version=version)):
                problem = "store_size did not raise like encode_store"
            return problem
        data = encode_store(msg, version=version)
        if store_size(msg, version=version) != len(data):
            return f"store_size {store_size(msg, version=version)} != {len(data)} encoded bytes"
        problem = differ(
            expected,
            {
                "hex": data.hex(),
                "length": len(data),
                "decode": _decode_out(decode_store(data, version=version, mode="java")),
            },
        )
        if problem is None and encode_store(decode_store(data, version=version), version=version) != data:
            problem = "strict decode + encode does not give the same bytes back"
        return problem
    if kind == "createMessageId":
        spec = vector["input"]
        msg_id = create_message_id(bytes.fromhex(spec["ip_bytes_hex"]), spec["port"], spec["offset"])
        return differ(expected, {"msgId": msg_id, "decodeMessageId": _id_out(msg_id)})
    if kind == "decodeMessageId":
        if isinstance(expected, dict) and "exception" in expected:
            return check_exception(expected, lambda: decode_message_id(vector["input"], mode="java"))
        return differ(expected, _id_out(vector["input"]))
    if kind == "UtilAll.crc32":
        return differ(expected, crc32_masked(bytes.fromhex(vector["input_hex"])))
    return f"unknown vector kind {kind!r}"


def _vector_id(vector: dict[str, Any], n: int) -> str:
    if "id" in vector:
        return f"{vector['kind']}/{vector['id']}"
    spec = vector.get("input")
    if vector["kind"] == "createMessageId" and isinstance(spec, dict):
        return f"createMessageId/{spec['ip_text']}:{spec['port']}@{spec['offset']}"
    if vector["kind"] == "decodeMessageId":
        return f"decodeMessageId/{spec}"
    return f"{vector['kind']}/{n}"


def run(path: Path) -> Iterator[Result]:
    doc = load(path)
    for n, vector in enumerate(doc["vectors"]):
        vid = _vector_id(vector, n)
        for key, version, expected in versions(vector["expected"]):
            try:
                problem = _check(vector, version, expected)
            except Exception as exc:  # a crash is a failed vector, not a failed run
                problem = f"raised {type(exc).__name__}: {exc}"
            rid = f"{vid}@{key}"
            yield passed(path.name, rid) if problem is None else failed(path.name, rid, problem)
