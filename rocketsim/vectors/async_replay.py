"""Replay of the real-client ASYNC / ONEWAY traces: ``real_client_{async,oneway}_4_9.jsonl``,
``real_client_async_5_x.jsonl`` (README "real_client_async_4_9.jsonl, ...").

The unmodified Java client sent one message at a time, but its callbacks ran on other threads, so a
send's steps interleave with the next send's. The replay keeps one :mod:`rocketsim.client.send` generator per
send (``async_send_steps`` / ``oneway_send_steps``) and runs the recorded steps in their recorded order:
each step resumes its send's generator at the step's time on the step's thread, which must be about to
do what the step recorded (a :class:`rocketsim.client.send.Step` of that action, or a ``Call``). Waits for a
pool thread (the executor, a callback) are answered by the send's next recorded step. Compared: each
selection (thread, ``last``, the queue, the thread's ``sendWhichQueue`` / ``whichItemWorst`` values
before and after), each request (broker, queue id), each ``updateFaultItem`` (call site, arguments, the
duration, the table after), each result. One :class:`Result` per send (``R22/k=3``) and per scenario end.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rocketsim.client.fault import (
    FaultArrays,
    FaultStrategy,
    FaultTable,
    FaultUpdate,
    ReplayIntSource,
    ThreadKey,
    ThreadLocalIndex,
)
from rocketsim.client.route import QueueSlot, TopicPublishInfo, topic_publish_info
from rocketsim.client.send import (
    Action,
    Call,
    Outcome,
    Resume,
    SendConfig,
    SendRecord,
    Step,
    async_send_steps,
    oneway_send_steps,
)
from rocketsim.errors import RocketSimError
from rocketsim.rng import SplitMixIntSource
from rocketsim.vectors import Result, failed, passed
from rocketsim.vectors.fault_strategy import (
    REAL_CLIENT_TAGS,
    line_and_version,
    queue_datas_route,
    scenario_records,
)

FILES = (
    "real_client_async_4_9.jsonl",
    "real_client_oneway_4_9.jsonl",
    "real_client_async_5_x.jsonl",
    # every other tag (real_client/convert.py OTHER_TAGS)
    *(
        f"real_client_{mode}_{tag.replace('.', '_')}.jsonl"
        for tag in REAL_CLIENT_TAGS
        for mode in ("async", "oneway")
    ),
)
ACTIONS = {"select": Action.SELECT, "update": Action.UPDATE, "result": Action.RESULT}
WAITS = (Action.EXECUTE, Action.CALLBACK)


class ReplayMismatch(RocketSimError):
    """The generator is not about to do what the recording did next."""


class RecordingStrategy(FaultStrategy):
    """The strategy, noting each selection and ``updateFaultItem`` call for the comparison."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.selected: QueueSlot | None = None
        self.updated: FaultUpdate | None = None

    def select_one_message_queue(
        self,
        tp: TopicPublishInfo,
        last_broker_name: str | None,
        now: int,
        reset_index: bool = False,
        thread: ThreadKey = 0,
    ) -> QueueSlot | None:
        self.selected = super().select_one_message_queue(tp, last_broker_name, now, reset_index, thread)
        return self.selected

    def update_fault_item(
        self, broker: str, latency: int, isolation: bool, now: int, reachable: bool = True
    ) -> FaultUpdate:
        self.updated = super().update_fault_item(broker, latency, isolation, now, reachable)
        return self.updated


def _first_diff(what: str, expected: Any, got: Any) -> str | None:
    if expected != got:
        return f"{what}: expected {json.dumps(expected)}, got {json.dumps(got, default=str)}"
    return None


def _res_json(record: SendRecord) -> list[dict[str, Any]]:
    """What the application got, in the vectors' ``res`` form (a message's first line: no FAQ suffix):
    one per result step (a send whose onException ran again: each call's, :attr:`SendRecord.again`)."""
    if record.result is not None:
        return [{"returned": record.result.status, "mq": [record.result.broker, record.result.queue_id]}]
    if record.error is None:
        return [{"oneway": True}]
    return [_error_json(err) for err in (record.error, *record.again)]


def _error_json(err: Exception) -> dict[str, Any]:
    text = getattr(err, "error_message", None) or getattr(err, "message", None) or str(err)
    return {
        "thrown": getattr(err, "java_class", type(err).__name__),
        "responseCode": getattr(err, "response_code", None),
        "message": text.split("\n", 1)[0],
    }


class _Scenario:
    """The replay state of one scenario: the strategy, the route's TopicPublishInfo, the sends."""

    def __init__(self, header: dict[str, Any]) -> None:
        cfg = header["config"]
        self.header = header
        self.line, self.version = line_and_version(header["upstream"])
        self.mode = header["mode"]
        self.topic = header["topic"]
        forced = header["forced_random_values"]
        self.sources: list[ReplayIntSource] = []

        def sources_of(name: str):  # noqa: ANN202 - a ThreadLocalIndex's source_for
            def source_for(thread: ThreadKey) -> ReplayIntSource:
                key = f"{name}@{thread}"
                src = ReplayIntSource([("nextInt()", v) for v in forced.get(key, [])], key)
                self.sources.append(src)
                return src

            return source_for

        worst = ThreadLocalIndex(self.line, sources_of("whichItemWorst"), "whichItemWorst")
        index = ThreadLocalIndex(self.line, sources_of("sendWhichQueue#1"), "sendWhichQueue#1")
        for key, value in header["index_start_values"].items():
            name, thread = key.split("@")
            (worst if name == "whichItemWorst" else index).preset(thread, value)
        self.worst, self.index = worst, index
        self.strategy = RecordingStrategy(
            self.line,
            # Collections.shuffle's draws are not recorded (README); its fault items never tie
            FaultTable(self.line, worst, shuffle_source=SplitMixIntSource(0)),
            send_latency_fault_enable=cfg["sendLatencyFaultEnable"],
            arrays=FaultArrays(tuple(cfg["latencyMax"]), tuple(cfg["notAvailableDuration"])),
        )
        self.cfg = SendConfig(
            version=self.version,
            send_msg_timeout_ms=cfg["sendMsgTimeout"],
            retry_times_when_send_failed=cfg["retryTimesWhenSendFailed"],
            retry_times_when_send_async_failed=cfg["retryTimesWhenSendAsyncFailed"],
            retry_another_broker_when_not_store_ok=cfg["retryAnotherBrokerWhenNotStoreOK"],
        )
        self.tp = topic_publish_info(
            self.topic, queue_datas_route(header["route_initial_queueDatas"]), index, 1
        )
        self.problems: list[str] = []
        if [list(p) for p in self.tp.queue_pairs()] != header["messageQueueList_initial"]:
            self.problems.append("initial queue list differs")
        self.gens: dict[int, Any] = {}
        self.pending: dict[int, Call | Step | None] = {}
        self.records: dict[int, SendRecord] = {}
        self.expected_res: dict[int, list[dict[str, Any]]] = {}

    def _advance(self, k: int, value: Outcome | Resume | None) -> None:
        gen = self.gens[k]
        try:
            self.pending[k] = next(gen) if value is None else gen.send(value)
        except StopIteration as stop:
            self.pending[k] = None
            self.records[k] = stop.value

    def step(self, step: dict[str, Any]) -> str | None:
        """Run one recorded step; a description of the first difference, else None."""
        k, t, th, what = step["k"], step["t"], step["th"], step["what"]
        if what == "submit":
            if self.mode == "oneway":
                self.gens[k] = oneway_send_steps(self.strategy, self.tp, self.cfg, self.topic, t, thread=th)
            else:
                self.gens[k] = async_send_steps(self.strategy, self.tp, self.cfg, self.topic, t)
            self._advance(k, None)
            return None
        item = self.pending.get(k)
        if isinstance(item, Step) and item.action in WAITS:  # the pool's thread, as recorded
            self._advance(k, Resume(t, th))
            item = self.pending.get(k)
        if what == "send":
            return self._send(k, t, th, step, item)
        action = ACTIONS[what]
        if not isinstance(item, Step) or item.action != action:
            return f"{what}: the send is about to do {item!r}"
        if item.thread != th:
            return f"{what}: on thread {item.thread!r}, recorded {th!r}"
        if what == "select":
            before = [self.index.value(th), self.worst.value(th)]
            self.strategy.selected = None
            self._advance(k, Resume(t, th))
            mq = self.strategy.selected
            got = {
                "sel": None if mq is None else [mq.broker_name, mq.queue_id],
                "idx": [before[0], self.index.value(th)],
                "worst": [before[1], self.worst.value(th)],
            }
            for key in ("sel", "idx", "worst"):
                d = _first_diff(f"select {step['i']} {key}", step[key], got[key])
                if d:
                    return d
            return None
        if what == "update":
            if item.source != step["src"]:
                return f"update: from {item.source!r}, recorded {step['src']!r}"
            self.strategy.updated = None
            self._advance(k, Resume(t, th))
            upd = self.strategy.updated
            d = _first_diff("update upd", step["upd"], None if upd is None else upd.as_vector())
            if d is None and "table" in step:  # absent: a concurrent update came before the snapshot
                d = _first_diff("update table", step["table"], self.strategy.table.vector_rows())
            return d
        self.expected_res.setdefault(k, []).append(step["res"])
        self._advance(k, Resume(t, th))
        return None

    def _send(self, k: int, t: int, th: str, step: dict[str, Any], item: Call | Step | None) -> str | None:
        if isinstance(item, Step):
            if item.action != Action.SEND or item.thread != th:
                return f"send {step['i']}: the send is about to do {item!r}"
            self._advance(k, Resume(t, th))
            item = self.pending.get(k)
        out = step.get("out")
        if not isinstance(item, Call):
            return f"send {step['i']}: recorded a request, no call made" if out is not None else None
        if out is None:
            return f"send {step['i']}: a call to {item.broker}/{item.queue_id}, none recorded"
        # ``unread``: written to that queue's broker, which closed the connection before reading it
        wrote = step.get("request", step.get("unread"))
        d = _first_diff(f"send {step['i']} request", wrote, [item.broker, item.queue_id])
        if d:
            return d
        outcome = Outcome.from_label(out[0], out[1])
        if len(out) > 2:  # a broker error's remark
            outcome = Outcome.broker_error(outcome.response_code, out[1], out[2])
        self._advance(k, outcome)
        return None

    def finish(self, k: int) -> str | None:
        """Compare how send ``k`` ended."""
        if k not in self.records:
            return f"send {k} did not end (about to do {self.pending.get(k)!r})"
        return _first_diff("res", self.expected_res.get(k), _res_json(self.records[k]))


def run(path: Path) -> Iterator[Result]:
    """One Result per send and per scenario end of a real-client ASYNC / ONEWAY file."""
    file = path.name
    for header, steps, end in scenario_records(path, "step"):
        sc = header["scenario"].split("_")[0]
        state = _Scenario(header)
        diffs: dict[int, str] = {}
        for step in steps:
            k = step["k"]
            if k in diffs:
                continue  # a send that went wrong is not driven further
            try:
                d = state.step(step)
            except RocketSimError as exc:  # ReplayExhaustedError: a draw that was not recorded
                d = f"step {step['n']}: {exc}"
            if d:
                diffs[k] = f"step {step['n']} ({step['what']} on {step['th']}): {d}"
        for k in sorted(state.gens):
            d = diffs.get(k) or state.finish(k)
            yield failed(file, f"{sc}/k={k}", d) if d else passed(file, f"{sc}/k={k}")
        problems = list(state.problems)
        if end is None:
            problems.append("scenario_end line missing")
        else:
            d = _first_diff("final table", end["final_fault_table"], state.strategy.table.vector_rows())
            if d:
                problems.append(d)
            if end["sends"] != len(state.gens):
                problems.append(f"{end['sends']} sends recorded, {len(state.gens)} replayed")
        for src in state.sources:
            if src.remaining:
                problems.append(f"{src.remaining} recorded draws of {src.name} were not used")
        yield failed(file, f"{sc}/end", problems[0]) if problems else passed(file, f"{sc}/end")
