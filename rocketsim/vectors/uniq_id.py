"""Checker for ``uniq_id.json``: ``MessageClientIDSetter`` replayed with the recorded clock and time zone.

Each config is one fresh JVM: a ``MessageClientIDSetter`` built at ``class_init_now_ms``, then the calls in
order (the counter set first where the vector did it by reflection). Per call the id, the month start after
the call and every reader function must match.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rocketsim.format.codec import (
    MessageClientIDSetter,
    uniq_id_ip,
    uniq_id_ip_str,
    uniq_id_nearly_time,
    uniq_id_pid,
)
from rocketsim.vectors import Result, failed, passed
from rocketsim.vectors.properties import differ, load

FILES = ("uniq_id.json",)


class _Clock:
    """A settable clock: the replay moves it to each call's ``now_ms``."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def _call_output(
    setter: MessageClientIDSetter, clock: _Clock, call: dict[str, Any], tz: str
) -> dict[str, Any]:
    clock.now_ms = call["now_ms"]
    if call.get("counter_set_before_call") is not None:
        setter.counter = call["counter_set_before_call"]
    uniq_id = setter.create_uniq_id()
    readers = [
        {
            "reader_now_ms": r["reader_now_ms"],
            "result_ms": uniq_id_nearly_time(uniq_id, r["reader_now_ms"], tz),
        }
        for r in call["getNearlyTimeFromID"]
    ]
    return {
        "uniq_id": uniq_id,
        "startTime_after_call_ms": setter.start_time_ms,
        "getIPStrFromID": uniq_id_ip_str(uniq_id),
        "getIPFromID_hex": uniq_id_ip(uniq_id).hex(),
        "getPidFromID": uniq_id_pid(uniq_id),
        "getNearlyTimeFromID": readers,
    }


def _expected(call: dict[str, Any]) -> dict[str, Any]:
    keys = ("uniq_id", "startTime_after_call_ms", "getIPStrFromID", "getIPFromID_hex", "getPidFromID")
    out: dict[str, Any] = {k: call[k] for k in keys}
    out["getNearlyTimeFromID"] = [
        {"reader_now_ms": r["reader_now_ms"], "result_ms": r["result_ms"]}
        for r in call["getNearlyTimeFromID"]
    ]
    return out


def run(path: Path) -> Iterator[Result]:
    doc = load(path)
    for config in doc["configs"]:
        name, tz, fixed = config["config"], config["timezone"], config["fixed_inputs"]
        for version_key in config.get("same_in_versions", ["4.9.8", "5.x"]):
            prefix = f"{name}@{version_key}"
            try:
                clock = _Clock(fixed["class_init_now_ms"])
                setter = MessageClientIDSetter(
                    ip=None if fixed["ip_lookup_fails"] else bytes.fromhex(fixed["ip_hex"]),
                    pid=fixed["pid"],
                    class_loader_hash=fixed["classLoaderHashCode"],
                    clock=clock,
                    tz=tz,
                    counter=fixed.get("counter_initial", 0),
                )
            except Exception as exc:
                for k, _ in enumerate(config["calls"]):
                    yield failed(path.name, f"{prefix}/call{k}", f"cannot build the setter: {exc}")
                continue
            for k, call in enumerate(config["calls"]):
                rid = f"{prefix}/call{k} {call['now_utc']}"
                try:
                    problem = differ(_expected(call), _call_output(setter, clock, call, tz))
                except Exception as exc:  # a crash is a failed vector, not a failed run
                    problem = f"raised {type(exc).__name__}: {exc}"
                yield passed(path.name, rid) if problem is None else failed(path.name, rid, problem)
