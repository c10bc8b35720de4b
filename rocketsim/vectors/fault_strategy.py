"""Replay of ``fault_strategy_{4_9,4_9_7,5_x}.jsonl`` and ``real_client_fault_strategy_*.jsonl`` (README
"How to replay").

Per scenario: a simulated clock from ``sim_start_time_ms``; per send, the route update (a new
TopicPublishInfo with a new index) if ``k`` is a ``before_send_index``, the gap (5.x: due detector ticks),
then the SYNC loop of :mod:`rocketsim.client.send` with the recorded outcomes as transport. Random draws come
from the recorded ``rand`` events of each index, detector probes from the recorded ``detect`` calls.

Compared per attempt: ``i``, ``last``, ``reset``, ``t``, ``sel``, ``tmo``, ``upd``, ``flow``, ``table``,
``queue_list_changed_to`` (and the detector ticks of the send); per send ``res`` and ``t1``; per scenario
its ``scenario_end`` counts, final time and final table, and that every recorded draw was used.
One :class:`Result` per send (``S03/k=17``) and per scenario end (``S03/end``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rocketsim.client.fault import (
    Detector,
    FaultArrays,
    FaultStrategy,
    ReplayIntSource,
    ThreadLocalIndex,
    new_strategy,
)
from rocketsim.client.route import BrokerData, QueueData, TopicPublishInfo, TopicRouteData, topic_publish_info
from rocketsim.client.send import AttemptRecord, Outcome, SendConfig, SendRecord, send_sync
from rocketsim.client.versions import ClientVersion, RemotingLine, parse_version
from rocketsim.errors import RocketSimError
from rocketsim.rng import SplitMixIntSource
from rocketsim.vectors import Result, failed, passed

# the real client of every other tag (real_client/README.md "More client tags") and the probes of all 15
REAL_CLIENT_TAGS = (
    "4.3.2",
    "4.5.2",
    "4.7.1",
    "4.8.0",
    "5.0.0",
    "5.1.0",
    "5.1.3",
    "5.1.4",
    "5.2.0",
    "5.3.0",
    "5.3.1",
    "5.3.2",
)
PROBE_TAGS = (*REAL_CLIENT_TAGS[:4], "4.9.7", "4.9.8", *REAL_CLIENT_TAGS[4:], "5.3.3")
FILES = (
    "fault_strategy_4_9.jsonl",
    "fault_strategy_4_9_7.jsonl",
    "fault_strategy_5_x.jsonl",
    "real_client_fault_strategy_4_9.jsonl",
    "real_client_fault_strategy_4_9_7.jsonl",
    "real_client_fault_strategy_5_x.jsonl",
    *(f"real_client_fault_strategy_{tag.replace('.', '_')}.jsonl" for tag in REAL_CLIENT_TAGS),
    *(f"real_client_probes_{tag.replace('.', '_')}.jsonl" for tag in PROBE_TAGS),
)


class ReplayMismatch(RocketSimError):
    """The loop asked for something the recording does not have (an extra attempt, another probe)."""


def line_and_version(upstream: str) -> tuple[RemotingLine, ClientVersion]:
    """The client line and version of a recording's ``upstream`` (``develop``: 5.x)."""
    text = "5.x" if upstream.startswith("develop") else upstream.removeprefix("rocketmq-all-")
    version = parse_version(text)
    return version.line, version


def queue_datas_route(queue_datas: list[dict[str, Any]]) -> TopicRouteData:
    qds = tuple(
        QueueData(q["brokerName"], q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in queue_datas
    )
    bds = tuple(
        BrokerData.of(q["brokerName"]) if q["hasMasterAddr"] else BrokerData.of(q["brokerName"], {1: "slave"})
        for q in queue_datas
    )
    return TopicRouteData(qds, bds)


def _walk_events(node: Any, kind: str, out: list[list]) -> None:
    """Every event list ``[kind, ...]`` inside ``node``, in document order."""
    if isinstance(node, list):
        if node and node[0] == kind and isinstance(node[0], str):
            out.append(node)
            return
        for x in node:
            _walk_events(x, kind, out)
    elif isinstance(node, dict):
        for v in node.values():
            _walk_events(v, kind, out)


def _detector_ticks(node: Any) -> list[list]:
    ticks: list[list] = []
    _walk_events(node, "detector_tick", ticks)
    return ticks


def _pairs(tp: TopicPublishInfo) -> list[list]:
    return [list(p) for p in tp.queue_pairs()]


def _first_diff(what: str, expected: Any, got: Any) -> str | None:
    if expected != got:
        return f"{what}: expected {json.dumps(expected)}, got {json.dumps(got)}"
    return None


class _Scenario:
    """The replay state of one scenario."""

    def __init__(self, header: dict[str, Any], sends: list[dict[str, Any]]) -> None:
        self.header = header
        cfg = header["config"]
        self.line, self.version = line_and_version(header["upstream"])
        self.topic = header["topic"]
        self.clock = header["sim_start_time_ms"]
        rands: list[list] = []
        _walk_events(sends, "rand", rands)
        self.draws: dict[str, list[tuple[str, int]]] = {}
        for ev in rands:
            self.draws.setdefault(ev[1], []).append((ev[2], ev[3]))
        detects: list[list] = []
        _walk_events(sends, "detect", detects)
        self.probes = [(d[1], d[2], d[3]) for d in detects]
        self.probe_pos = 0
        self.problems: list[str] = []
        self.sources: list[ReplayIntSource] = []
        self.ticks: list[list] = []
        self._tick_calls: list[list] = []

        self.route = queue_datas_route(header["route_initial_queueDatas"])
        self.updates = {u["before_send_index"]: u["queueDatas"] for u in header["route_updates"]}
        detector = None
        if self.line.has_fault_detector:
            detector = Detector(
                cfg["first_detector_tick_at"],
                self._resolve,
                self._probe,
                cfg["detector_tick_period_ms"],
                self._on_tick,
                self._on_tick_done,
            )
        worst = self._source("whichItemWorst")
        self.strategy: FaultStrategy = new_strategy(
            self.line,
            send_latency_fault_enable=cfg["sendLatencyFaultEnable"],
            which_item_worst_source=worst,
            arrays=FaultArrays(tuple(cfg["latencyMax"]), tuple(cfg["notAvailableDuration"])),
            start_detector_enable=cfg.get("startDetectorEnable", False),
            detector=detector,
            detect_interval_ms=cfg.get("detectInterval", 2000),
            detect_timeout_ms=cfg.get("detectTimeout", 200),
            # Collections.shuffle's static Random is not observable: the recordings carry no draws of it
            # (their fault items never tie, so any shuffle gives the recorded pick)
            shuffle_source=SplitMixIntSource(0),
        )
        self.send_cfg = SendConfig(
            version=self.version,
            send_msg_timeout_ms=cfg["sendMsgTimeout"],
            retry_times_when_send_failed=cfg["retryTimesWhenSendFailed"],
            retry_another_broker_when_not_store_ok=cfg["retryAnotherBrokerWhenNotStoreOK"],
            send_msg_max_timeout_per_request_ms=cfg.get("sendMsgMaxTimeoutPerRequest", -1),
            retry_response_codes=frozenset(cfg["retryResponseCodes"]),
        )
        self.generation = 1
        self.tp = self._new_tp()
        if _pairs(self.tp) != [list(p) for p in header["messageQueueList_initial"]]:
            self.problems.append(
                f"initial queue list: expected {header['messageQueueList_initial']}, got {_pairs(self.tp)}"
            )

    # -- injected sources --
    def _source(self, name: str) -> ReplayIntSource:
        src = ReplayIntSource(self.draws.get(name, []), name)
        self.sources.append(src)
        return src

    def _new_tp(self) -> TopicPublishInfo:
        name = f"sendWhichQueue#{self.generation}"
        index = ThreadLocalIndex.shared(self.line, self._source(name), name)
        return topic_publish_info(self.topic, self.route, index, self.generation)

    def _resolve(self, broker: str) -> str | None:
        addr = self.route.master_addr(broker)
        self._tick_calls.append(["resolve", broker, addr])
        return addr

    def _probe(self, endpoint: str, timeout_ms: int) -> bool:
        if self.probe_pos >= len(self.probes):
            raise ReplayMismatch(f"detector probed {endpoint} but no probe result is left")
        rec_endpoint, rec_timeout, result = self.probes[self.probe_pos]
        self.probe_pos += 1
        if (rec_endpoint, rec_timeout) != (endpoint, timeout_ms):
            raise ReplayMismatch(
                f"detector probed {endpoint}/{timeout_ms}, recorded {rec_endpoint}/{rec_timeout}"
            )
        self._tick_calls.append(["detect", endpoint, timeout_ms, result])
        return result

    def _on_tick(self, t: int) -> None:
        self._tick_calls = []

    def _on_tick_done(self, t: int) -> None:
        self.ticks.append(["detector_tick", t, self._tick_calls, self.strategy.table.vector_rows()])

    # -- one send --
    def replay_send(self, send: dict[str, Any]) -> tuple[str | None, SendRecord | None]:
        diff: str | None = None
        k = send["k"]
        self.ticks = []
        if k in self.updates:
            self.route = queue_datas_route(self.updates[k])
            self.generation += 1
            self.tp = self._new_tp()
            rec_updates: list[list] = []
            _walk_events(send.get("ev_before", []), "route_update", rec_updates)
            if rec_updates:
                diff = _first_diff("route_update queue list", rec_updates[0][2], _pairs(self.tp))
        self.clock += send["gap"]
        self.strategy.advance_to(self.clock)
        diff = diff or _first_diff("t0", send["t0"], self.clock)

        expected_atts = send["att"]
        snapshots: list[tuple[list, list]] = []
        lists_before: list[list] = [_pairs(self.tp)]

        def on_attempt(rec: AttemptRecord) -> None:
            pairs = _pairs(self.tp)
            snapshots.append((self.strategy.table.vector_rows(), pairs))
            lists_before.append(pairs)

        def transport(attempt: int, broker: str, queue_id: int, start_ms: int, timeout_ms: int) -> Outcome:
            if attempt >= len(expected_atts) or "out" not in expected_atts[attempt]:
                raise ReplayMismatch(
                    f"attempt {attempt} was sent ({broker}, {queue_id}) but none is recorded"
                )
            kind, latency = expected_atts[attempt]["out"]
            return Outcome.from_label(kind, latency)

        noted = noted_costs(send)

        def real_cost(attempt: int, cost: int) -> int:
            return noted.get((attempt, cost), cost)

        try:
            record = send_sync(
                self.strategy,
                self.tp,
                self.send_cfg,
                self.topic,
                self.clock,
                transport,
                on_attempt=on_attempt,
                real_cost=real_cost,
            )
        except RocketSimError as exc:  # ReplayMismatch, ReplayExhaustedError
            return diff or f"replay stopped: {exc}", None
        self.clock = record.end_ms
        diff = diff or self._compare_attempts(expected_atts, record, snapshots, lists_before)
        diff = diff or self._compare_ticks(send)
        diff = diff or _first_diff("res", send["res"], _res_json(record))
        diff = diff or _first_diff("t1", send["t1"], record.end_ms)
        return diff, record

    def _compare_attempts(
        self,
        expected: list[dict[str, Any]],
        record: SendRecord,
        snapshots: list[tuple[list, list]],
        lists_before: list[list],
    ) -> str | None:
        if len(expected) != len(record.attempts):
            got = [[a.broker, a.queue_id, a.flow] for a in record.attempts]
            return f"attempts: expected {len(expected)}, got {len(record.attempts)} {json.dumps(got)}"
        for exp, rec, (table, pairs), before in zip(
            expected, record.attempts, snapshots, lists_before, strict=False
        ):
            got: dict[str, Any] = {
                "i": rec.index,
                "last": rec.last_broker,
                "reset": rec.reset_index,
                "t": rec.start_ms,
                "sel": [rec.broker, rec.queue_id],
                "tmo": rec.timeout_ms,
                "out": None if rec.outcome is None else [rec.outcome.label, rec.outcome.latency_ms],
                "upd": None if rec.fault_update is None else rec.fault_update.as_vector(),
                "flow": rec.flow,
                "table": table,
            }
            for key in ("i", "last", "reset", "t", "sel", "tmo", "out", "upd", "flow", "table"):
                if key in exp:
                    d = _first_diff(f"attempt {rec.index} {key}", exp[key], got[key])
                    if d:
                        return d
            changed = pairs if pairs != before else None
            d = _first_diff(
                f"attempt {rec.index} queue_list_changed_to", exp.get("queue_list_changed_to"), changed
            )
            if d:
                return d
        return None

    def _compare_ticks(self, send: dict[str, Any]) -> str | None:
        expected = _detector_ticks(
            {"b": send.get("ev_before", []), "a": [a.get("ev", []) for a in send["att"]]}
        )
        return _first_diff("detector ticks", expected, self.ticks)


_NOTE = re.compile(r"attempt (\d+): call-timeout break with costTime (\d+) \(real (\d+)\)")


def noted_costs(send: dict[str, Any]) -> dict[tuple[int, int], int]:
    """(attempt, restated costTime) -> the real costTime, from a send's ``notes`` (README: a decision
    within 10 ms of a timing boundary). The restated clock advances only by attempt latencies; where it
    lands on the boundary (costTime 3000, timeout 3000), the real client's clock (3001) decided."""
    out: dict[tuple[int, int], int] = {}
    for note in send.get("notes", []):
        m = _NOTE.match(note)
        if m:
            out[(int(m[1]), int(m[2]))] = int(m[3])
    return out


def _res_json(record: SendRecord) -> dict[str, Any]:
    """The record's end in the vectors' ``res`` form."""
    if record.result is not None:
        return {"returned": record.result.status, "from_attempt": record.result.from_attempt}
    err = record.error
    cls = getattr(err, "java_class", type(err).__name__)
    if cls == "MQClientException":
        return {
            "thrown": cls,
            "responseCode": err.response_code,
            "errorMessage": err.error_message,  # type: ignore[union-attr]
            "cause": getattr(err, "cause", None),
        }
    if cls == "MQBrokerException":
        return {"thrown": cls, "responseCode": err.response_code}  # type: ignore[union-attr]
    if cls == "RemotingTooMuchRequestException":
        return {"thrown": cls, "message": err.message}  # type: ignore[union-attr]
    return {"thrown": cls}


def scenario_records(
    path: Path, item: str = "send"
) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any] | None]]:
    """A JSONL vector file's scenarios: (header, its ``item`` records, its ``scenario_end`` record or
    None when the file starts another scenario or ends first). Read by this checker and
    :mod:`rocketsim.vectors.async_replay` (``item="step"``)."""
    header: dict[str, Any] | None = None
    sends: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as fh:
        for raw in fh:
            if not raw.strip():
                continue
            rec = json.loads(raw)
            if rec["type"] == "scenario":
                if header is not None:
                    yield header, sends, None
                header, sends = rec, []
            elif rec["type"] == item:
                sends.append(rec)
            elif rec["type"] == "scenario_end":
                if header is not None:
                    yield header, sends, rec
                header, sends = None, []
    if header is not None:
        yield header, sends, None


def _short_id(header: dict[str, Any], sends: list[dict[str, Any]]) -> str:
    return sends[0]["sc"] if sends else header["scenario"].split("_")[0]


def run(path: Path) -> Iterator[Result]:
    """One Result per send and per scenario end of a fault-strategy vector file."""
    file = path.name
    for header, sends, end in scenario_records(path):
        sc = _short_id(header, sends)
        state = _Scenario(header, sends)
        counts: Counter[str] = Counter()
        attempts = 0
        for send in sends:
            vid = f"{sc}/k={send['k']}"
            diff, record = state.replay_send(send)
            if state.problems:
                diff = diff or state.problems.pop(0)
            if record is not None:
                counts[record.label] += 1
                attempts += len(record.attempts)
            yield failed(file, vid, diff) if diff else passed(file, vid)
        if end is None:
            yield failed(file, f"{sc}/end", "scenario_end line missing")
            continue
        returned = sum(v for k, v in counts.items() if k.startswith("returned:"))
        got_end = {
            "sends": len(sends),
            "attempts": attempts,
            "returned": returned,
            "thrown": sum(counts.values()) - returned,
            "result_counts": dict(sorted(counts.items())),
            "final_time_ms": state.clock,
            "final_fault_table": state.strategy.table.vector_rows(),
        }
        diff = None
        for key, value in got_end.items():
            exp = dict(sorted(end[key].items())) if key == "result_counts" else end[key]
            diff = diff or _first_diff(f"scenario_end {key}", exp, value)
        for src in state.sources:
            if src.remaining:
                diff = diff or f"scenario_end: {src.remaining} recorded draws of {src.name} were not used"
        if state.probe_pos != len(state.probes):
            diff = (
                diff or f"scenario_end: {len(state.probes) - state.probe_pos} recorded probes were not used"
            )
        yield failed(file, f"{sc}/end", diff) if diff else passed(file, f"{sc}/end")
