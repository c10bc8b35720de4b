"""The readable engine's records (:class:`rocketsim.engine.reference.Send`, ``SendRecord``) as the
engine-output arrays both engines hand to :mod:`rocketsim.engine.plan` (the compiled engine's twin:
:func:`rocketsim.engine.compiled.engine_output`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from rocketsim.broker.queue import StoreAnswer
from rocketsim.client.outcomes import OutcomeKind
from rocketsim.client.send import AttemptRecord, SendRecord
from rocketsim.engine.plan import NO_ISOLATION, EngineOutput, Status, StoreColumns, error_text
from rocketsim.scenario import Scenario

if TYPE_CHECKING:
    from rocketsim.engine.reference import Send

__all__ = ["engine_output"]


class _Interned:
    """Strings as indexes into a growing list."""

    def __init__(self, values: list[str] | None = None) -> None:
        self.values: list[str] = list(values or [])
        self._index = {v: k for k, v in enumerate(self.values)}

    def __call__(self, value: str | None) -> int:
        if value is None:
            return -1
        k = self._index.get(value)
        if k is None:
            k = self._index[value] = len(self.values)
            self.values.append(value)
        return k


def _result_status(record: SendRecord) -> tuple[Status, str | None]:
    if record.error is not None:
        return Status.FAILED, error_text(record.error)
    if record.result is not None:
        return Status[record.result.status], None
    return Status.ONEWAY_SENT, None


ATTEMPT_COLUMNS = (
    "send",
    "attempt",
    "start",
    "latency",
    "broker",
    "qid",
    "label",
    "code",
    "has_code",
    "iso",
    "stored",
    "stored_ts",
    "busy",
    "depth",
    "service",
    "start_us",
    "latency_us",
)
SEND_COLUMNS = ("status", "error", "broker", "qid", "begin", "end", "exhausted", "n_sent", "thread", "kernel")


def engine_output(
    sc: Scenario,
    n_sends: int,
    done: list[tuple[Send, SendRecord]],
    store_answers: Mapping[tuple[int, int], StoreAnswer] | None = None,
    start_us: Mapping[tuple[int, int], int] | None = None,
) -> tuple[EngineOutput, np.ndarray]:
    """The records as an :class:`EngineOutput`, and each attempt's rank in completion order;
    ``store_answers``: the closed-loop store's answer per (send, attempt) (its attempt columns);
    ``start_us``: each request's start in microseconds where the client's CPU moved it off its ms."""
    brokers = _Interned(list(sc.cluster.brokers))
    labels, texts = _Interned(), _Interned()
    by_send: list[tuple[int, SendRecord, int] | None] = [None] * n_sends
    for rank, (s, record) in enumerate(done):
        by_send[s.index] = (rank, record, s.thread)
    cols: dict[str, list] = {k: [] for k in ATTEMPT_COLUMNS}
    per_send: dict[str, list] = {k: [] for k in SEND_COLUMNS}
    ranks: list[int] = []
    att_off = [0]
    for s, entry in enumerate(by_send):
        assert entry is not None, f"send {s} never ended"
        rank, record, thread = entry
        sent = [a for a in record.attempts if a.outcome is not None]
        for a in sent:
            ans = store_answers.get((s, a.index)) if store_answers is not None else None
            a_start_us = start_us.get((s, a.index), a.start_ms * 1000) if start_us else a.start_ms * 1000
            _add_attempt_row(cols, s, a, record.mode, a_start_us, ans, brokers, labels)
            ranks.append(rank)
        att_off.append(len(cols["send"]))
        _add_send_row(per_send, record, sent, thread, brokers, texts)
    out = _output_arrays(cols, per_send, att_off, brokers, labels, texts)
    if store_answers is not None:
        out.a_store = StoreColumns(_ints(cols["busy"]), _ints(cols["depth"]), _ints(cols["service"]))
    return out, _ints(ranks)


def _add_attempt_row(
    cols: dict[str, list],
    s: int,
    a: AttemptRecord,
    mode: str,
    start_us: int,
    ans: StoreAnswer | None,
    brokers: _Interned,
    labels: _Interned,
) -> None:
    """One sent attempt's row of the attempt columns (``ans``: the closed-loop store's answer to it)."""
    o = a.outcome
    assert o is not None
    cols["send"].append(s)
    cols["attempt"].append(a.index)
    cols["start"].append(a.start_ms)
    # a oneway caller waits for the write only; other modes wait for the broker's answer
    cols["latency"].append(a.end_ms - a.start_ms if mode == "oneway" else o.latency_ms)
    cols["broker"].append(brokers(a.broker))
    cols["qid"].append(a.queue_id)
    cols["label"].append(labels(o.label))
    cols["code"].append(o.response_code if o.kind == OutcomeKind.BROKER_ERROR else 0)
    cols["has_code"].append(o.kind == OutcomeKind.BROKER_ERROR)
    cols["iso"].append(NO_ISOLATION if a.isolated_until_ms is None else a.isolated_until_ms)
    cols["stored"].append(o.stored)
    cols["stored_ts"].append(a.start_ms + o.store_ms if o.stored else 0)
    cols["start_us"].append(start_us)
    cols["latency_us"].append(-1 if mode == "oneway" else o.latency_us)
    cols["busy"].append(-1 if ans is None or ans.busy_kind is None else int(ans.fate))
    cols["depth"].append(-1 if ans is None else ans.queue_depth)
    cols["service"].append(-1 if ans is None or not ans.stored else ans.service_us)


def _add_send_row(
    per_send: dict[str, list],
    record: SendRecord,
    sent: list[AttemptRecord],
    thread: int,
    brokers: _Interned,
    texts: _Interned,
) -> None:
    """One send's row of the per-send columns: how it ended, where (its result's queue, else its last
    attempt's), and when."""
    status, text = _result_status(record)
    last = sent[-1] if sent else None
    result = record.result
    per_send["status"].append(status)
    per_send["error"].append(texts(text))
    per_send["broker"].append(
        brokers(result.broker if result is not None else (last.broker if last else None))
    )
    per_send["qid"].append(result.queue_id if result is not None else (last.queue_id if last else -1))
    per_send["begin"].append(record.begin_ms)
    per_send["end"].append(record.end_ms)
    per_send["exhausted"].append(any(a.flow.startswith("break:callTimeout") for a in record.attempts))
    per_send["n_sent"].append(len(sent))
    per_send["thread"].append(thread)
    per_send["kernel"].append(record.begin_ms if record.exec_ms is None else record.exec_ms)


def _ints(values: list) -> np.ndarray:
    return np.array(values, np.int64)


def _output_arrays(
    cols: dict[str, list],
    per_send: dict[str, list],
    att_off: list[int],
    brokers: _Interned,
    labels: _Interned,
    texts: _Interned,
) -> EngineOutput:
    """The columns as the arrays of an :class:`EngineOutput` (no store columns)."""
    return EngineOutput(
        brokers=brokers.values,
        labels=labels.values,
        texts=texts.values,
        a_send=_ints(cols["send"]),
        a_attempt=_ints(cols["attempt"]),
        a_start=_ints(cols["start"]),
        a_latency=_ints(cols["latency"]),
        a_broker=_ints(cols["broker"]),
        a_queue_id=_ints(cols["qid"]),
        a_label=_ints(cols["label"]),
        a_code=_ints(cols["code"]),
        a_has_code=np.array(cols["has_code"], bool),
        a_isolated_until=_ints(cols["iso"]),
        a_stored=np.array(cols["stored"], bool),
        a_stored_ts=_ints(cols["stored_ts"]),
        a_start_us=_ints(cols["start_us"]),
        a_latency_us=_ints(cols["latency_us"]),
        att_off=_ints(att_off),
        status=_ints(per_send["status"]),
        error=_ints(per_send["error"]),
        broker=_ints(per_send["broker"]),
        queue_id=_ints(per_send["qid"]),
        begin=_ints(per_send["begin"]),
        end=_ints(per_send["end"]),
        exhausted=np.array(per_send["exhausted"], bool),
        n_sent=_ints(per_send["n_sent"]),
        thread=_ints(per_send["thread"]),
        kernel_start=_ints(per_send["kernel"]),
    )
