"""Checker for ``constants.json``: upstream constants, producer defaults and the delay-level rules.

One result per (group, version). A group is compared with what the module that owns it defines; the
registry ``GROUPS`` maps each ``per_version`` key to a resolver ``version -> value in the JSON's shape``.
A resolver that cannot find its module or attribute (another engineer's module not written yet) makes the
group *skipped*, naming what is missing. To cover a new group, add one entry to ``GROUPS``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from rocketsim.client.versions import ClientVersion, parse_version
from rocketsim.format.codec import message_decoder_constants
from rocketsim.format.message import (
    SEND_STATUS_BY_RESPONSE_CODE,
    DelayLevelTable,
    MessageConst,
    MessageSysFlag,
    broker_delay_transform,
    parse_delay_levels,
    producer_defaults,
)
from rocketsim.vectors import Result, failed, passed, skipped
from rocketsim.vectors.properties import differ, load

FILES = ("constants.json",)


class Missing(Exception):
    """The module or attribute a group is checked against does not exist (yet)."""


def attr(module: str, path: str) -> Any:
    """``rocketsim.<module>`` then the dotted ``path`` inside it; ``Missing`` if any part is absent."""
    try:
        obj: Any = importlib.import_module(f"rocketsim.{module}")
    except ImportError as exc:
        raise Missing(f"rocketsim.{module} cannot be imported ({exc})") from None
    for part in path.split("."):
        if not hasattr(obj, part):
            raise Missing(f"rocketsim.{module}.{path} does not exist")
        obj = getattr(obj, part)
    return obj


def _decoder(version: ClientVersion) -> dict[str, Any]:
    out: dict[str, Any] = dict(message_decoder_constants(version))
    for name in ("NAME_VALUE_SEPARATOR", "PROPERTY_SEPARATOR"):
        char = out[name]
        out[name] = {"char": char, "code": ord(char)}
    return out


def _compression_types(version: ClientVersion) -> list[dict[str, Any]]:
    ctype = attr("compression", "CompressionType")
    return [{"name": t.name, "value": t.value, "compressionFlag": t.flag} for t in ctype]


def _fault_arrays(version: ClientVersion) -> Any:
    return attr("fault", "FaultArrays").default(version.line)


# per_version key -> resolver(version) giving the value in the JSON's shape (sets as sorted lists).
Resolver = Callable[[ClientVersion], Any]
GROUPS: dict[str, Resolver] = {
    "org.apache.rocketmq.common.sysflag.MessageSysFlag": lambda v: MessageSysFlag.names(),
    "org.apache.rocketmq.common.message.MessageConst": lambda v: MessageConst.names(v),
    "MessageConst.STRING_HASH_SET": lambda v: sorted(MessageConst.string_hash_set(v)),
    "org.apache.rocketmq.common.message.MessageDecoder": _decoder,
    "org.apache.rocketmq.common.topic.TopicValidator": lambda v: attr("validate", "TopicValidator").declared(
        v
    ),
    "org.apache.rocketmq.client.Validators": lambda v: attr("validate", "Validators").declared(v),
    "org.apache.rocketmq.client.common.ClientErrorCode": lambda v: attr(
        "validate", "ClientErrorCode"
    ).declared(v),
    "org.apache.rocketmq.common.constant.PermName": lambda v: attr("validate", "PermName").declared(v),
    "org.apache.rocketmq.common.help.FAQUrl": lambda v: attr("validate", "FAQUrl").declared(v),
    "org.apache.rocketmq.common.protocol.ResponseCode": lambda v: attr("validate", "ResponseCode").declared(
        v
    ),
    "org.apache.rocketmq.remoting.protocol.ResponseCode": lambda v: attr("validate", "ResponseCode").declared(
        v
    ),
    "TopicValidator.getSystemTopicSet()": lambda v: sorted(
        attr("validate", "TopicValidator").system_topic_set(v)
    ),
    "TopicValidator.getNotAllowedSendTopicSet()": lambda v: sorted(
        attr("validate", "TopicValidator").not_allowed_send_topic_set(v)
    ),
    "TopicValidator.VALID_CHAR_BIT_MAP.allowed_chars": lambda v: attr("validate", "VALID_CHARS"),
    "CompressionType": _compression_types,
    "MQFaultStrategy.latencyMax": lambda v: list(_fault_arrays(v).latency_max),
    "MQFaultStrategy.notAvailableDuration": lambda v: list(_fault_arrays(v).not_available_duration),
    "MQFaultStrategy.sendLatencyFaultEnable(default)": lambda v: (
        producer_defaults(v).send_latency_fault_enable
    ),
}

# Groups whose JSON value is a set written as a list: compared ignoring order.
_SETS = frozenset(
    {
        "MessageConst.STRING_HASH_SET",
        "TopicValidator.getSystemTopicSet()",
        "TopicValidator.getNotAllowedSendTopicSet()",
    }
)

# producer_defaults key -> ProducerDefaults field (rocketsim.format.message) and ProducerConfig field or
# dotted
# property path, read with the version's defaults filled in (rocketsim.scenario; None when the scenario has
# no such setting).
PRODUCER_FIELDS: dict[str, tuple[str, str | None]] = {
    "defaultTopicQueueNums": ("default_topic_queue_nums", "default_topic_queue_nums"),
    "sendMsgTimeout": ("send_msg_timeout", "send_msg_timeout_ms"),
    "sendMsgMaxTimeoutPerRequest": (
        "send_msg_max_timeout_per_request",
        "send_msg_max_timeout_per_request_ms",
    ),
    "compressMsgBodyOverHowmuch": ("compress_msg_body_over_howmuch", "compress_msg_body_over_howmuch"),
    "retryTimesWhenSendFailed": ("retry_times_when_send_failed", "retry_times_when_send_failed"),
    "retryTimesWhenSendAsyncFailed": (
        "retry_times_when_send_async_failed",
        "retry_times_when_send_async_failed",
    ),
    "retryAnotherBrokerWhenNotStoreOK": (
        "retry_another_broker_when_not_store_ok",
        "retry_another_broker_when_not_store_ok",
    ),
    "maxMessageSize": ("max_message_size", "max_message_size"),
    "autoBatch": ("auto_batch", None),
    "enableBackpressureForAsyncMode": (
        "enable_backpressure_for_async_mode",
        "async_backpressure.enable_backpressure_for_async_mode",
    ),
    "backPressureForAsyncSendNum": (
        "back_pressure_for_async_send_num",
        "async_backpressure.back_pressure_for_async_send_num",
    ),
    "backPressureForAsyncSendSize": (
        "back_pressure_for_async_send_size",
        "async_backpressure.back_pressure_for_async_send_size",
    ),
    "batchMaxDelayMs": ("batch_max_delay_ms", None),
    "batchMaxBytes": ("batch_max_bytes", None),
    "totalBatchMaxBytes": ("total_batch_max_bytes", None),
    "createTopicKey": ("create_topic_key", None),
    "compressLevel": ("compress_level", "compress_level"),
    "compressType": ("compress_type", "compress_type"),
    "compressLevel_system_property": ("compress_level_system_property", None),
    "compressType_system_property": ("compress_type_system_property", None),
    "sendLatencyFaultEnable(MQFaultStrategy field)": (
        "send_latency_fault_enable",
        "send_latency_fault_enable",
    ),
    "sendLatencyEnable(ClientConfig, system property com.rocketmq.sendLatencyEnable)": (
        "send_latency_fault_enable",
        "send_latency_fault_enable",
    ),
    "startDetectorEnable(ClientConfig, system property com.rocketmq.startDetectorEnable)": (
        "start_detector_enable",
        "start_detector_enable",
    ),
    "detectTimeout(ClientConfig)": ("detect_timeout", None),
    "detectInterval(ClientConfig)": ("detect_interval", None),
}


def _compare_sets(expected: Any, got: Any) -> str | None:
    exp, act = set(expected), set(got)
    if exp == act:
        return None
    return f"missing {sorted(exp - act)[:8]}, unexpected {sorted(act - exp)[:8]}"


def _compare(key: str, expected: Any, got: Any) -> str | None:
    return _compare_sets(expected, got) if key in _SETS else differ(expected, got)


def _result(file: str, rid: str, check: Callable[[], str | None]) -> Result:
    try:
        problem = check()
    except Missing as exc:
        return skipped(file, rid, str(exc))
    except Exception as exc:  # a crash is a failed vector, not a failed run
        problem = f"raised {type(exc).__name__}: {exc}"
    return passed(file, rid) if problem is None else failed(file, rid, problem)


def _producer_defaults(expected: Mapping[str, Any], version: ClientVersion) -> str | None:
    defaults = producer_defaults(version)
    got: dict[str, Any] = {}
    for key in expected:
        if key not in PRODUCER_FIELDS:
            return f"no ProducerDefaults field models {key!r}"
        got[key] = getattr(defaults, PRODUCER_FIELDS[key][0])
    return differ(dict(expected), got)


def _producer_config(expected: Mapping[str, Any], version: ClientVersion) -> str | None:
    config = attr("scenario", "ProducerConfig")(client_version=version.text)
    got: dict[str, Any] = {}
    want: dict[str, Any] = {}
    for key, value in expected.items():
        path = PRODUCER_FIELDS.get(key, ("", None))[1]
        if path is None or not hasattr(config, path.split(".")[0]):
            continue
        obj: Any = config
        for part in path.split("."):
            obj = getattr(obj, part)
        got[key], want[key] = obj, value
    return differ(want, got)


def _send_status(expected: Mapping[str, str]) -> str | None:
    want = {int(k.split()[0]): v for k, v in expected.items() if k.split()[0].lstrip("-").isdigit()}
    return differ(
        {str(k): v for k, v in want.items()}, {str(k): v for k, v in SEND_STATUS_BY_RESPONSE_CODE.items()}
    )


def _delay_parse(case: Mapping[str, Any]) -> str | None:
    table: DelayLevelTable = parse_delay_levels(case["messageDelayLevel"])
    got = {
        "messageDelayLevel": case["messageDelayLevel"],
        "parse_ok": table.parse_ok,
        "maxDelayLevel": table.max_level,
        "level_to_ms": [[k, v] for k, v in sorted(table.level_to_ms.items())],
    }
    return differ(dict(case), got)


_STORE_TS = 1_700_000_000_000


def _delay_transform(case: Mapping[str, Any]) -> str | None:
    props = {"DELAY": case["input_DELAY_property"]}
    out = broker_delay_transform(
        case["original_topic"], case["original_queueId"], props, case["sysFlag"], _STORE_TS
    )
    got: dict[str, Any] = {
        k: case[k] for k in ("input_DELAY_property", "sysFlag", "original_topic", "original_queueId")
    }
    got.update(delayed=out.delayed, stored_topic=out.topic, stored_queueId=out.queue_id)
    if out.delayed:
        got["effective_level_written_back_to_DELAY"] = out.effective_level
        got["REAL_TOPIC"] = out.properties.get("REAL_TOPIC")
        got["REAL_QID"] = out.properties.get("REAL_QID")
        got[f"deliver_timestamp_for_storeTimestamp_{_STORE_TS}"] = out.deliver_timestamp_ms
    return differ(dict(case), got)


def run(path: Path) -> Iterator[Result]:
    doc = load(path)
    name = path.name
    for version_key, groups in doc.get("per_version", {}).items():
        version = parse_version(version_key)
        for key, expected in groups.items():
            resolver = GROUPS.get(key)
            rid = f"{version_key}/{key}"
            if resolver is None:
                yield skipped(name, rid, "no resolver registered for this group")
                continue
            yield _result(name, rid, lambda k=key, e=expected, r=resolver, v=version: _compare(k, e, r(v)))
    for version_key, expected in doc.get("producer_defaults", {}).items():
        version = parse_version(version_key)
        yield _result(
            name, f"{version_key}/producer_defaults", lambda e=expected, v=version: _producer_defaults(e, v)
        )
        yield _result(
            name,
            f"{version_key}/producer_defaults vs scenario.ProducerConfig",
            lambda e=expected, v=version: _producer_config(e, v),
        )
    for version_key, expected in doc.get("retryResponseCodes_default", {}).items():
        version = parse_version(version_key)
        yield _result(
            name,
            f"{version_key}/retryResponseCodes_default",
            lambda e=expected, v=version: differ(e, list(producer_defaults(v).retry_response_codes)),
        )
        yield _result(
            name,
            f"{version_key}/retryResponseCodes_default vs send.retry_response_codes",
            lambda e=expected, v=version: _compare_sets(e, attr("send", "retry_response_codes")(v)),
        )
    if "send_status_mapping_from_broker_response_code" in doc:
        yield _result(
            name,
            "send_status_mapping_from_broker_response_code",
            lambda: _send_status(doc["send_status_mapping_from_broker_response_code"]),
        )
    delay = doc.get("delay", {})
    for case in delay.get("parses", []):
        yield _result(name, f"delay/parse {case['messageDelayLevel']!r}", lambda c=case: _delay_parse(c))
    for case in delay.get("broker_put_transform", []):
        rid = f"delay/put DELAY={case['input_DELAY_property']} sysFlag={case['sysFlag']}"
        yield _result(name, rid, lambda c=case: _delay_transform(c))
