"""Replay of the gRPC family's real-client vectors (``grpc/grpc_python_*.jsonl``, format
``rocketmq-grpc-send-oracle/1``, ``tests/data/conformance/grpc/README.md``).

Per scenario: the client row of the header's version (:mod:`rocketsim.client.grpc_versions`), its
settings as the client derives them from what the scripted Proxy pushed, the route of each topic, and
each topic's random start drawn as the client draws it (``random.Random(seed).randint(1, 1000)``, one draw
per queue pick, the first for a topic its start). Per send, the loop of :mod:`rocketsim.client.grpc_send`
with a transport that plays the scripted Proxy: each attempt's step resolved from the header's reply
rules (``by_send`` by the message's arrival count, ``by_endpoint``, ``default``), a reply as the fake Proxy
makes it (status after its delay, a drop or a delay past the deadline as DEADLINE_EXCEEDED, a close as
UNAVAILABLE), and connections refused after a scripted close with a refuse window until the gRPC
channel's next reconnect (:func:`rocketsim.broker.proxy.reconnect_ready_ms`).

More: docs/reference/modules.md, rocketsim/vectors/grpc_send.py.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rocketsim.broker.proxy import REFUSED_MS, reconnect_ready_ms
from rocketsim.client.grpc_balance import GrpcQueue
from rocketsim.client.grpc_codes import DEADLINE_EXCEEDED, UNAVAILABLE, Reply, code_named
from rocketsim.client.grpc_send import (
    GrpcCall,
    GrpcSendRecord,
    GrpcSettings,
    ProducerState,
    grpc_send_steps,
)
from rocketsim.client.grpc_versions import GrpcClient, parse_grpc_version
from rocketsim.errors import RocketSimError
from rocketsim.vectors import Result, failed, passed
from rocketsim.vectors.fault_strategy import scenario_records

FILES = ("grpc/grpc_python_5_1_2.jsonl", "grpc/grpc_python_5_1_2_probes.jsonl")
FORMAT = "rocketmq-grpc-send-oracle/1"
REPLY_MS = 2  # the fake Proxy's answer after its scripted delay (README: delay + 1.5 ms median)
CLOSE_MS = 5  # a closed connection reaches the client (README: 4-8 ms)
KINDS = {"normal": "NORMAL", "fifo": "FIFO", "delay": "DELAY", "transaction": "TRANSACTION"}


def _settings(header: dict[str, Any], client: GrpcClient) -> GrpcSettings:
    """The client's settings from what the Proxy pushed (``Producer.reset_setting``: max_attempts from an
    exponential policy, max_body_size, validate_message_type; nothing pushed: the defaults)."""
    s = header["settings"]
    pushed = s.get("pushed") or {}
    max_attempts = client.default_max_attempts
    if client.max_attempts_from_server and pushed.get("strategy") == "exponential":
        max_attempts = pushed["max_attempts"]
    return GrpcSettings(
        request_timeout_ms=s["request_timeout_ms"],
        max_attempts=max_attempts,
        validate_message_type=pushed.get("validate_message_type", True)
        or header["client"]["api"] != "Producer.send",
        max_body_size=pushed.get("max_body_size", 4 * 1024 * 1024),
    )


def _routes(header: dict[str, Any]) -> dict[str, list[GrpcQueue] | None]:
    out: dict[str, list[GrpcQueue] | None] = {}
    for topic, r in (header.get("route") or {}).items():
        if r is None:
            out[topic] = None
            continue
        accept = tuple(r["accept"])
        out[topic] = [
            GrpcQueue(q["broker"], q["queue_id"], q["endpoint"], q["perm"], q["broker_id"], accept)
            for q in r["queues"]
        ]
    return out


class _ScriptedProxy:
    """The fake Proxy of one scenario, as the transport of the replayed sends."""

    def __init__(self, header: dict[str, Any]) -> None:
        self.replies = header.get("replies") or {}
        self.arrivals: dict[int, int] = {}  # send -> arrivals of its message
        self.endpoint_calls: dict[str, int] = {}
        self.refused: dict[str, list[tuple[float, float]]] = {}  # endpoint -> [(from, usable again)]

    def step(self, endpoint: str, send: int, arrival: int, ep_call: int) -> dict[str, Any]:
        default = {"code": "OK", "delay_ms": 0, "action": "reply", **self.replies.get("default", {})}
        step = None
        by_send = self.replies.get("by_send", {}).get(str(send))
        if by_send is not None and arrival - 1 < len(by_send):
            step = by_send[arrival - 1]
        if step is None:
            by_ep = self.replies.get("by_endpoint", {}).get(endpoint)
            if isinstance(by_ep, dict):
                step = by_ep
            elif isinstance(by_ep, list) and ep_call - 1 < len(by_ep):
                step = by_ep[ep_call - 1]
        return {**default, **(step or {})}

    def answer(self, call: GrpcCall, send: int, timeout_ms: int) -> Reply:
        t = call.start_ms
        if any(a <= t < b for a, b in self.refused.get(call.endpoint, ())):
            return Reply.grpc_error(UNAVAILABLE, REFUSED_MS, reached=False)
        self.arrivals[send] = self.arrivals.get(send, 0) + 1
        self.endpoint_calls[call.endpoint] = self.endpoint_calls.get(call.endpoint, 0) + 1
        step = self.step(call.endpoint, send, self.arrivals[send], self.endpoint_calls[call.endpoint])
        action, delay = step.get("action", "reply"), int(step.get("delay_ms") or 0)
        if action == "drop" or delay >= timeout_ms:
            return Reply.grpc_error(DEADLINE_EXCEEDED, timeout_ms)
        if action == "close":
            closed_at = t + delay
            if step.get("refuse_ms"):
                back = closed_at + int(step["refuse_ms"])
                self.refused.setdefault(call.endpoint, []).append(
                    (closed_at, reconnect_ready_ms(closed_at, back))
                )
            return Reply.grpc_error(UNAVAILABLE, delay + CLOSE_MS)
        if action == "grpc_status":
            return Reply.grpc_error(step.get("grpc_status", "UNAVAILABLE"), delay + REPLY_MS)
        code = step.get("code", "OK")
        message = step.get("message", "" if code == "OK" else f"scripted {code}")
        entries = step.get("entries", 1 if code == "OK" else 0)
        return Reply.status(code_named(code), delay + REPLY_MS, message, entries=entries)


def _outcome_class(reply_or_observed: Reply | dict[str, Any]) -> str:
    if isinstance(reply_or_observed, Reply):  # the vectors' spelling: status:<Code>, grpc:<gRPC status>
        r = reply_or_observed
        return f"status:{r.code_name}" if r.kind == "status" else f"grpc:{r.grpc_code}"
    o = reply_or_observed
    if o["kind"] == "status":
        return f"status:{o['code']}"
    if o["kind"] == "grpc_error":
        return f"grpc:{o['grpc_code']}"
    return f"exception:{o.get('exception')}"


def _pick_json(p: Any, topic: str) -> dict[str, Any]:
    q = p.queue
    out = {"by": p.by, "queue": f"{q.broker}.{topic}.{q.queue_id}", "endpoint": q.endpoint}
    out["index" if p.by == "rr" else "hash_mod"] = p.index
    return out


def _expected_picks(send: dict[str, Any]) -> list[dict[str, Any]]:
    keys = ("by", "queue", "endpoint", "index", "hash_mod")
    return [{k: p[k] for k in keys if k in p} for p in send["picks"]]


def _result_json(record: GrpcSendRecord, topic: str) -> dict[str, Any]:
    if record.result is not None:
        r = record.result
        last = record.attempts[-1]
        return {"ok": True, "queue": f"{r.broker}.{topic}.{r.queue_id}", "endpoint": last.endpoint}
    err = record.error
    assert err is not None
    out: dict[str, Any] = {"ok": False, "exception": err.java_class, "attempts": len(record.attempts)}
    if err.grpc_code is not None:
        out["grpc_code"] = err.grpc_code
    else:
        out["text"] = err.text
        out["code"] = err.code
    return out


def _expected_result(send: dict[str, Any]) -> dict[str, Any]:
    r = send["result"]
    if r["ok"]:
        return {"ok": True, "queue": r["queue"], "endpoint": r["endpoint"]}
    out = {"ok": False, "exception": r["exception"], "attempts": r["attempts"]}
    if r["exception"] == "AioRpcError":
        out["grpc_code"] = r["grpc_code"]
    else:
        out["text"] = r["text"]
        out["code"] = r.get("code")
    return out


def _end_transaction(record: GrpcSendRecord, send: dict[str, Any], header: dict[str, Any]) -> dict[str, Any]:
    """``Transaction.commit/rollback`` after the half send (PY producer.py
    ``Transaction.__commit_or_rollback``): no message added (the type check refused the send first):
    'no message in transaction.'; no receipt (the send failed): 'no transaction_id ...'; else
    EndTransaction to the receipt's endpoint."""
    refused_first = record.error is not None and not record.attempts
    if refused_first:
        return {
            "client_ok": False,
            "client_exception": "IllegalArgumentException",
            "client_text": "no message in transaction.",
            "endpoint": None,
        }
    if record.result is None:
        text = "no transaction_id in transaction, must send half message at first."
        return {
            "client_ok": False,
            "client_exception": "IllegalArgumentException",
            "client_text": text,
            "endpoint": None,
        }
    code = (header.get("end_transaction") or {}).get("code", "OK")
    if code != "OK":
        text = f"{int(code_named(code))}, scripted {code}"
        return {
            "client_ok": False,
            "client_exception": "ClientException",
            "client_text": text,
            "endpoint": record.endpoint,
        }
    return {"client_ok": True, "client_exception": None, "client_text": None, "endpoint": record.endpoint}


def _expected_end_transaction(send: dict[str, Any]) -> dict[str, Any]:
    e = send["end_transaction"]
    server = e.get("server") or {}
    return {k: e[k] for k in ("client_ok", "client_exception", "client_text")} | {
        "endpoint": server.get("endpoint")
    }


def _diff(what: str, expected: Any, got: Any) -> str | None:
    if expected != got:
        return f"{what}: expected {json.dumps(expected)}, got {json.dumps(got)}"
    return None


class _Replay:
    """The replay state of one scenario."""

    def __init__(self, header: dict[str, Any]) -> None:
        self.header = header
        version = header["client"]["version"]
        self.client = parse_grpc_version(f"{header['client']['language']}-{version}")
        self.settings = _settings(header, self.client)
        self.routes = _routes(header)
        self.proxy = _ScriptedProxy(header)
        rnd = header.get("random") or {}
        self.rng = random.Random(rnd.get("seed")) if rnd.get("seed") is not None else None
        self.draws: list[int] = []
        self.picks_so_far = 0
        self.starts: dict[str, int] = {}
        self.state = ProducerState(self.client, self._start_of)

    def _draw(self) -> int:
        assert self.rng is not None
        value = self.rng.randint(self.client.start_low, self.client.start_high)
        self.draws.append(value)
        return value

    def _start_of(self, topic: str) -> int:
        """The topic's start: the draw of this pick (every earlier pick drew once), or the header's
        forced start."""
        sel = (self.header.get("selectors") or {}).get(topic) or {}
        if sel.get("source") == "forced" or self.rng is None:
            self.starts[topic] = sel.get("start_index", self.client.start_low)
        else:
            self.starts[topic] = self._draw()
        return self.starts[topic]

    def replay(self, send: dict[str, Any]) -> str | None:
        while self.rng is not None and len(self.draws) < self.picks_so_far:
            self._draw()  # every pick of the earlier sends drew once
        topic = send["topic"]
        steps = grpc_send_steps(
            self.state,
            self.routes.get(topic),
            self.settings,
            topic,
            int(send["t_ms"]),
            message_type=KINDS[send["kind"]],
            group=send.get("group"),
            body_size=len(f"oracle-{self.header['id']}-{send['send']}"),
        )
        got_attempts: list[tuple[str, str, bool]] = []
        try:
            call = next(steps)
            while True:
                reply = self.proxy.answer(call, send["send"], self.settings.request_timeout_ms)
                got_attempts.append((call.endpoint, _outcome_class(reply), reply.reached))
                call = steps.send(reply)
        except StopIteration as stop:
            record: GrpcSendRecord = stop.value
        self.picks_so_far += len(record.picks)
        exp_attempts = [
            (a["endpoint"], _outcome_class(a["observed"]), a["reached_proxy"]) for a in send["attempts"]
        ]
        diff = _diff("picks", _expected_picks(send), [_pick_json(p, topic) for p in record.picks])
        diff = diff or _diff("attempts", [list(a) for a in exp_attempts], [list(a) for a in got_attempts])
        diff = diff or _diff("result", _expected_result(send), _result_json(record, topic))
        if send.get("end_transaction") is not None:
            diff = diff or _diff(
                "end_transaction",
                _expected_end_transaction(send),
                _end_transaction(record, send, self.header),
            )
        return diff

    def check_header(self) -> str | None:
        while self.rng is not None and len(self.draws) < self.picks_so_far:
            self._draw()
        exp_starts = {t: s["start_index"] for t, s in (self.header.get("selectors") or {}).items()}
        diff = _diff("start indexes", exp_starts, self.starts)
        rnd = self.header.get("random") or {}
        if rnd.get("draws") is not None and self.rng is not None:
            diff = diff or _diff("random draws", rnd["draws"], self.draws)
        observed = self.header["settings"]["observed"]
        return diff or _diff("max_attempts", observed["max_attempts"], self.settings.max_attempts)


def run(path: Path) -> Iterator[Result]:
    """One Result per send and one per scenario header of a gRPC vector file."""
    file = path.name
    for header, sends, _ in scenario_records(path):  # the format's framing: header, then its sends
        sid = header["id"]
        if header.get("format") != FORMAT:
            yield failed(file, f"{sid}/header", f"format {header.get('format')!r} is not {FORMAT}")
            continue
        state = _Replay(header)
        for send in sends:
            vid = f"{sid}/send={send['send']}"
            try:
                diff = state.replay(send)
            except (
                KeyError,
                IndexError,
                TypeError,
                ValueError,
                RocketSimError,
            ) as exc:  # a record the model cannot take
                diff = f"replay stopped: {type(exc).__name__}: {exc}"
            yield failed(file, vid, diff) if diff else passed(file, vid)
        diff = state.check_header()
        yield failed(file, f"{sid}/header", diff) if diff else passed(file, f"{sid}/header")
