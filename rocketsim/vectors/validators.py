"""Checker for ``validators.json``: ``Validators`` checks and ``TopicValidator`` predicates.

One result per vector and per version key of its ``expected`` ("4.9.8", "5.x", "5.3.3"). A refusal must
match upstream's response code, raw text (``errorMessage``) and full message (``getMessage``); where Java
threw something other than ``MQClientException`` (e.g. a ``NullPointerException``), we must raise too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rocketsim.client.versions import ClientVersion, parse_version
from rocketsim.errors import MQClientError
from rocketsim.format.validate import (
    check_group,
    check_message,
    check_send_topic_allowed,
    check_topic,
    is_not_allowed_send_topic,
    is_system_topic,
    is_topic_or_group_illegal,
)
from rocketsim.vectors import Result, failed, passed, skipped

FILES = ("validators.json",)

MQ_CLIENT_EXCEPTION = "org.apache.rocketmq.client.exception.MQClientException"
KINDS = frozenset({"checkTopic", "checkGroup", "isNotAllowedSendTopic", "checkMessage"})


def _short(value: Any, limit: int = 96) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=True)
    return text if len(text) <= limit else f"{text[:limit]}...({len(text)} chars)"


def _check_outcome(fn: Callable[[], object]) -> dict[str, Any]:
    """A check's outcome in the vectors' shape: accepted, or the exception's code and texts."""
    try:
        fn()
    except MQClientError as e:
        return {
            "accepted": False,
            "exception": MQ_CLIENT_EXCEPTION,
            "responseCode": e.response_code,
            "errorMessage": e.error_message,
            "getMessage": e.full_message,
        }
    except Exception as e:  # Java's NPE and the like: what matters is that we raised too
        return {"accepted": False, "exception": type(e).__name__, "message": str(e)}
    return {"accepted": True}


def _value(fn: Callable[[], object]) -> object:
    try:
        return fn()
    except Exception as e:
        return {"exception": type(e).__name__, "message": str(e)}


def _ours(v: dict[str, Any], version: ClientVersion) -> dict[str, Any]:
    kind = v["kind"]
    if kind == "checkTopic":
        return _check_outcome(lambda: check_topic(v["input"], version))
    if kind == "checkGroup":
        return _check_outcome(lambda: check_group(v["input"], version))
    if kind == "isNotAllowedSendTopic":
        topic = v["input"]
        return {
            **_check_outcome(lambda: check_send_topic_allowed(topic, version)),
            "TopicValidator.isNotAllowedSendTopic": _value(lambda: is_not_allowed_send_topic(topic)),
            "TopicValidator.isSystemTopic": _value(lambda: is_system_topic(topic, version)),
            "TopicValidator.isTopicOrGroupIllegal": _value(lambda: is_topic_or_group_illegal(topic)),
        }
    if kind == "checkMessage":
        i = v["input"]
        lmq = i.get("INNER_MULTI_DISPATCH")
        return _check_outcome(
            lambda: check_message(
                i.get("topic"),
                None if i.get("body_is_null") else i.get("body_len"),
                i["maxMessageSize"],
                None if lmq is None else {"INNER_MULTI_DISPATCH": lmq},
                version,
                message_is_null=bool(i.get("message_is_null")),
            )
        )
    raise ValueError(f"unknown kind {kind!r}")


def _is_exception(x: object) -> bool:
    return isinstance(x, dict) and "exception" in x


def _compare(ours: dict[str, Any], want: dict[str, Any]) -> list[str]:
    diffs = []
    skip: set[str] = set()
    java_exception = want.get("exception")
    if java_exception is not None and java_exception != MQ_CLIENT_EXCEPTION:
        # another Java exception (e.g. NullPointerException): raising at all is the match
        if ours.get("accepted", True):
            diffs.append(f"Java threw {java_exception}, we accepted")
        skip = {"accepted", "exception", "message"}
    for key, w in want.items():
        if key in skip:
            continue
        got = ours.get(key, "<missing>")
        if _is_exception(w):
            if not _is_exception(got):
                diffs.append(f"{key}: Java threw {w['exception']}, we gave {_short(got)}")
        elif got != w:
            diffs.append(f"{key}: got {_short(got)}, want {_short(w)}")
    return diffs


def run(path: Path) -> Iterator[Result]:
    """Check every vector of ``path`` for every version key it has."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    for n, v in enumerate(doc["vectors"]):
        kind = v.get("kind", "?")
        label = v.get("id") or _short(v.get("input"), 40)
        for key, want in v.get("expected", {}).items():
            vid = f"{kind}#{n}:{label}@{key}"
            if kind not in KINDS:
                yield skipped(path.name, vid, f"unknown kind {kind!r}")
                continue
            try:
                ours = _ours(v, parse_version(key))
            except Exception as e:  # a crash on one vector is that vector's failure, not the run's
                yield failed(path.name, vid, f"checker raised {type(e).__name__}: {_short(str(e))}")
                continue
            diffs = _compare(ours, want)
            yield failed(path.name, vid, "; ".join(diffs)) if diffs else passed(path.name, vid)
