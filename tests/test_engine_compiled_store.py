"""The compiled closed-loop store (rocketsim/engine/compiled_store.py and the compiled engine's iterative
rounds) against the readable one: broker_store.decide / closed_outcome, Trajectory.replay / answer, and
whole rounds table for table (sync and ASYNC; queueing, TIMEOUT_CLEAN_QUEUE, OVERLOAD, store stalls).

The store's rules are upstream's (broker_store.py cites them: NettyRemotingAbstract.processRequestCommand,
SendMessageProcessor.rejectRequest / handlePutMessageResult, BrokerFastFailure.cleanExpiredRequest,
DefaultMessageStore.isOSPageCacheBusy); here both implementations must give the same answers."""

from __future__ import annotations

import dataclasses
import itertools
import re

import numpy as np
import pyarrow as pa
import pytest

from rocketsim.broker import latency as bm
from rocketsim.broker import store
from rocketsim.broker.queue import (
    REMARKS,
    Fate,
    Stall,
    StoreAnswer,
    StoreParams,
    closed_outcome,
    decide,
)
from rocketsim.client.outcomes import OutcomeKind
from rocketsim.client.versions import BROKER_4_9_8
from rocketsim.engine import compiled, iterative
from rocketsim.engine import compiled_store as cs
from rocketsim.engine.iterative import ArrivalWork, Trajectory
from rocketsim.scenario import Scenario, StoreConfig, scenario_from_mapping, workload
from rocketsim.stage import tables as stage

STALL = Stall(1_500_000, 9_000_000, 3_000_000, 1_400_000)


def params(
    append_us: float = 900.0, threads: int = 2, capacity: int = 140, stalls: tuple = ()
) -> StoreParams:
    cfg = StoreConfig(append_us=append_us, send_threads=threads, send_queue_capacity=capacity)
    return dataclasses.replace(StoreParams.from_config(cfg, BROKER_4_9_8), stalls=stalls, extra_us=300)


def random_work(rng: np.random.Generator, n_ms: int, rate: float) -> tuple[np.ndarray, ...]:
    ms = np.flatnonzero(rng.random(n_ms) < rate).astype(np.int64)
    count = rng.integers(1, 6, ms.size).astype(np.int64)
    size = count * rng.integers(200, 3000, ms.size)
    return ms, count, size.astype(np.int64)


@pytest.mark.parametrize("stalls", [(), (STALL,)])
def test_replay_is_the_readable_replay(stalls: tuple) -> None:
    # ~2.9 requests per ms at ~1.4 ms each over 2 threads: the queue fills (OVERLOAD), the sweeper
    # sheds (TIMEOUT_CLEAN_QUEUE), a stall makes the page cache busy (REJECTREQUEST, PCBUSY_CLEAN_QUEUE)
    p = params(stalls=stalls)
    ms, count, size = random_work(np.random.default_rng(7), 9000, 0.35)
    ref = Trajectory.replay(p, ms, count, size)
    fast = Trajectory.from_arrays(p, cs.replay(p, ms, count, size))
    assert ref.same(fast)
    assert (ref.busy.shape[0] > 0) == bool(stalls)


@pytest.mark.parametrize("stalls", [(), (STALL,)])
def test_answers_are_the_readable_answers(stalls: tuple) -> None:
    p = params(stalls=stalls)
    ms, count, size = random_work(np.random.default_rng(11), 9000, 0.35)
    t = Trajectory.replay(p, ms, count, size)
    tables = cs.store_tables([p], [t.arrays()])
    fates = set()
    for m in range(0, 9500, 3):
        wire = 300 + 7 * m % 2500
        ref = t.answer(m, wire)
        fate, answer_us, stored_us, depth, service, period, size_q = cs.trajectory_answer(tables, 0, m, wire)
        fates.add(Fate(fate))
        assert (Fate(fate), answer_us, stored_us, depth, service) == (
            ref.fate,
            ref.answer_us,
            ref.stored_us,
            ref.queue_depth,
            ref.service_us,
        )
        if period >= 0:  # the sweeper's remark, its %s and %d as the reference fills them
            assert ref.remark == REMARKS[ref.fate].replace("%s", str(period)).replace("%d", str(size_q))
    assert {Fate.SERVED, Fate.TIMEOUT_CLEAN_QUEUE, Fate.OVERLOAD} <= fates
    if stalls:
        assert {Fate.REJECT_REQUEST, Fate.PCBUSY_CLEAN_QUEUE} <= fates


def test_decide_is_the_readable_decide() -> None:
    rng = np.random.default_rng(3)
    busy = [(2500, 2600), (2900, 3100)]
    flat = np.asarray(busy, np.int64).ravel()
    for p in (params(), params(stalls=(STALL,))):
        row, stalls = cs.params_array(p), cs.stall_array(p)
        for _ in range(3000):
            a = int(rng.integers(0, 4_000_000))
            args = (a, int(rng.integers(1, 5000)), int(rng.integers(0, 40)))
            frees = (a + int(rng.integers(-5000, 400_000)), a + int(rng.integers(-5000, 400_000)))
            d = decide(p, busy, *args, *frees)
            assert cs.decide(row, stalls, flat, len(busy), *args, *frees) == (int(d.fate), *d[1:])


@pytest.mark.parametrize("timeout", [3000, 5, -4])
def test_closed_outcome_is_the_readable_one(timeout: int) -> None:
    for fate, pc_code in itertools.product(Fate, (1, 2)):  # the 4.9.8 / 5.3.3 broker's PC_SYNCHRONIZED
        for answer_us, stored_us in ((1_004_000, 1_003_400), (1_000_400, 1_000_200), (4_700_000, 4_600_000)):
            served = fate == Fate.SERVED
            stored_at = stored_us if served else -1
            ans = StoreAnswer(fate, 1_000_000, answer_us, stored_at, remark="r", pc_code=pc_code)
            net = bm.AttemptOutcome(OutcomeKind.OK, 3, 0, True, 3)
            ref = closed_outcome(net, ans, 1000, timeout)
            kind, lat, code, stored, store_ms, late_ms, late_code = cs.closed_outcome(
                3, 1000, timeout, int(fate), answer_us, stored_at, pc_code
            )
            overshoot = 1 if ref.kind == OutcomeKind.REMOTING_TIMEOUT else 0  # compiled.attempt_outcome's
            assert (kind, lat, code, stored, late_ms, late_code) == (
                ref.kind,
                ref.latency_ms + overshoot,
                ref.response_code,
                ref.stored,
                ref.late_ms,
                ref.late_code,
            )
            assert store_ms == (ref.store_ms if ref.stored else 0)


@pytest.mark.parametrize("timeout", [3000, 5])
def test_refused_as_illegal_is_the_readable_one(timeout: int) -> None:
    # brokers.refused_as_illegal and its compiled twin on every closed-loop answer (each Fate, in time and
    # late) and on the open model's kinds: only what would be stored reaches the properties check
    answers = [
        bm.AttemptOutcome(OutcomeKind.OK, 12, 0, True, 10),
        bm.AttemptOutcome(OutcomeKind.SLAVE_NOT_AVAILABLE, 12, 0, True, 10),
        bm.AttemptOutcome(OutcomeKind.REMOTING_TIMEOUT, 3000, 0, True, 3400, 3400),
        bm.AttemptOutcome(OutcomeKind.REMOTING_TIMEOUT, 3000, 0, True, 20),
        bm.AttemptOutcome(OutcomeKind.REMOTING_TIMEOUT, 3000),
        bm.AttemptOutcome(OutcomeKind.REMOTING_CONNECT, 1),
        bm.AttemptOutcome(OutcomeKind.BROKER_ERROR, 5, bm.SYSTEM_BUSY),
    ]
    for fate, pc_code in itertools.product(Fate, (1, 2)):
        stored_at = 1_250_000 if fate == Fate.SERVED else -1
        ans = StoreAnswer(
            fate, 1_000_000, 1_260_000, stored_at, remark=REMARKS.get(fate, ""), pc_code=pc_code
        )
        answers.append(closed_outcome(bm.AttemptOutcome(OutcomeKind.OK, 3, 0, True, 3), ans, 1000, timeout))
    for o in answers:
        ref = bm.refused_as_illegal(o)
        fast = compiled.refused_as_illegal(o.kind, o.response_code, o.stored, o.late_ms, o.late_code)
        assert fast == (ref.kind, ref.response_code, ref.stored, ref.late_code), o
        assert ref == o or o.stored  # nothing the broker would not store changes


# ---- whole rounds: the compiled engine against the reference, table for table --------------------------


def scenario(mode: str, load: float, **extra: object) -> Scenario:
    """Four brokers of ~100 msg/s each (10 ms per ~1 KiB append), two producers, 8 s."""
    spec: dict = {
        "seed": 5,
        "producers": {"count": 2, "send_mode": {mode: 1.0}, "threads": 16, "send_latency_fault_enable": True},
        "cluster": {"brokers": ["a", "b", "c", "d"]},
        "workload": {
            "duration_s": 8,
            "rate_per_s": 400 * load,
            "body_size": {"distribution": "lognormal", "median": 900, "sigma": 0.6, "max": 8000},
            "message_types": {"normal": 0.85, "ordered": 0.05, "delay": 0.05, "transaction": 0.05},
        },
        "brokers": {"coupling": "iterative", "default": {"store": {"append_us": 9000.0}}},
    }
    for key, value in extra.items():
        section, name = key.split("__")
        if section == "faults":
            spec["faults"] = value
        elif section == "store":
            spec["brokers"]["default"]["store"][name] = value
        else:
            spec[section][name] = value
    return scenario_from_mapping(spec)


def by_producer(sc: Scenario) -> dict[int, pa.Table]:
    return {s.producer: stage.producer_messages(sc, s) for s in workload.producer_shares(sc)}


CASES = {
    "sync-queueing": ("sync", 0.8, {}),
    "async-overload": ("async", 1.4, {}),
    "async-small-queue": (
        "async",
        1.3,
        {"store__send_queue_capacity": 6, "producers__client_version": "5.3.3"},
    ),
    "sync-5.3.3-retries-busy": ("sync", 1.3, {"producers__client_version": "5.3.3"}),
    "async-stall": (
        "async",
        0.7,
        {
            "faults__": [
                {"broker": "b", "kind": "store_stall", "start_s": 2, "end_s": 8, "period_s": 3, "down_s": 1.5}
            ],
            "producers__send_msg_timeout_ms": 900,
        },
    ),
    "oneway-and-sync-short-timeout": ("oneway", 1.2, {"producers__send_msg_timeout_ms": 120}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rounds_agree_table_for_table(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    mode, load, extra = CASES[case]
    sc = scenario(mode, load, **extra)
    msgs = by_producer(sc)
    trajs = iterative.trajectories(sc, None)
    kinds: set[str] = set()
    for _ in range(3):  # three rounds, each against the trajectories of the one before
        outs = {}
        for engine in ("reference", "compiled"):
            monkeypatch.setenv("ROCKETSIM_ENGINE", engine)
            outs[engine] = [iterative.simulate_round(m, sc, p, trajs) for p, m in msgs.items()]
        for (ref, ref_work), (fast, fast_work) in zip(outs["reference"], outs["compiled"], strict=True):
            assert ref.attempts.equals(fast.attempts), case
            assert ref.results.equals(fast.results), case
            assert ref_work == fast_work
            kinds |= set(ref.attempts.column("busy_kind").drop_null().to_pylist())
        work = iterative.arrival_work([w for _, w in outs["reference"]])
        replayed = {}
        for engine in ("reference", "compiled"):
            monkeypatch.setenv("ROCKETSIM_ENGINE", engine)
            replayed[engine] = iterative.trajectories(sc, work)
        assert all(a.same(b) for a, b in zip(replayed["reference"], replayed["compiled"], strict=True))
        trajs = replayed["compiled"]
    if load > 1.0:
        assert "TIMEOUT_CLEAN_QUEUE" in kinds or "OVERLOAD" in kinds, kinds
    if "faults__" in extra:
        assert "PCBUSY_CLEAN_QUEUE" in kinds or "REJECTREQUEST" in kinds, kinds


def test_compiled_rounds_carry_the_sweepers_text() -> None:
    # BrokerFastFailure.cleanExpiredRequestInQueue's remark, "%s" and "%d" filled, in a 4.9.8 client's
    # MQBrokerException (MQClientAPIImpl.processSendResponse: "CODE: 2  DESC: <remark> BROKER: <name>")
    sc = scenario("async", 1.4)
    msgs = by_producer(sc)
    work = iterative.arrival_work(
        [iterative.simulate_round(m, sc, p, iterative.trajectories(sc, None))[1] for p, m in msgs.items()]
    )
    out, _ = iterative.simulate_round(msgs[0], sc, 0, iterative.trajectories(sc, work))
    errors = out.results.column("error").drop_null().to_pylist()
    pattern = re.compile(
        r"MQBrokerException: CODE: 2  DESC: \[TIMEOUT_CLEAN_QUEUE\]broker busy, start flow control for a "
        r"while, period in queue: (\d+)ms, size of queue: (\d+) BROKER: [abcd]\n"
    )
    assert sum(bool(pattern.match(e)) for e in errors) > 0


# Flow control comes before the broker looks at a message's properties (4.9.8 and 5.3.3):
# NettyRemotingAbstract.processRequestCommand answers [REJECTREQUEST] (SendMessageProcessor.rejectRequest) and
# [OVERLOAD] before the processor runs; BrokerFastFailure.cleanExpiredRequest / cleanExpiredRequestInQueue
# answer [PCBUSY_CLEAN_QUEUE] / [TIMEOUT_CLEAN_QUEUE] for requests still in the send queue; [PC_SYNCHRONIZED]
# is DefaultMessageStore.checkStoreStatus (4.9.8; 5.3.3: HookUtils.checkBeforePutMessage), which
# asyncPutMessage runs before checkMessage and CommitLog.asyncPutMessage's encoder, the properties checks
# (MESSAGE_ILLEGAL, SendMessageProcessor.handlePutMessageResult). So an illegal message the store rejects gets
# the rejection's code and remark, in time or late; one that gets through is refused as MESSAGE_ILLEGAL.
ILLEGAL_CASES = {
    "sync": ("sync", 1.4, {}),  # the sweeper answers within the 3 s timeout
    # a 150 ms timeout: the sweeper (>= 200 ms in queue) answers late, before the response-table scan
    # removes the request (NettyRemotingAbstract.scanResponseTable): the ASYNC callback gets that answer
    "async-late": ("async", 1.4, {"producers__send_msg_timeout_ms": 150}),
    "async-stall": CASES["async-stall"],
}
ILLEGAL_TEXT = (
    "MQBrokerException: CODE: 13  DESC: the message is illegal, maybe msg body or properties length"
)


def illegal_attempts(sc: Scenario, messages: pa.Table, attempts: pa.Table) -> list[dict]:
    """The attempts of ``attempts`` whose message's properties the broker refuses (store.properties_illegal
    of the queue it went to)."""
    base, with_qid, chars = store.illegal_properties_parts(messages, sc.producers.version, sc.broker_version)
    row = {seq: i for i, seq in enumerate(messages.column("seq").to_pylist())}
    return [
        a
        for a in attempts.to_pylist()
        if store.properties_illegal(
            int(base[row[a["seq"]]]), bool(with_qid[row[a["seq"]]]), int(chars[row[a["seq"]]]), a["queue_id"]
        )
    ]


@pytest.mark.parametrize("case", sorted(ILLEGAL_CASES))
def test_flow_control_comes_before_the_properties_check(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    mode, load, extra = ILLEGAL_CASES[case]
    sc = scenario(mode, load, workload__invalid={"oversize_properties": 0.2}, **extra)
    msgs = by_producer(sc)
    work = iterative.arrival_work(
        [iterative.simulate_round(m, sc, p, iterative.trajectories(sc, None))[1] for p, m in msgs.items()]
    )
    trajs = iterative.trajectories(sc, work)
    busy: dict[str, int] = {}
    late = admitted = 0
    for p, m in msgs.items():
        outs = {}
        for engine in ("reference", "compiled"):
            monkeypatch.setenv("ROCKETSIM_ENGINE", engine)
            outs[engine], _ = iterative.simulate_round(m, sc, p, trajs)
        ref, fast = outs["reference"], outs["compiled"]
        assert ref.attempts.equals(fast.attempts) and ref.results.equals(fast.results), case
        errors = {r["seq"]: r["error"] for r in ref.results.to_pylist()}
        last = {}
        for a in ref.attempts.to_pylist():
            last[a["seq"]] = max(last.get(a["seq"], 0), a["attempt"])
        for a in illegal_attempts(sc, m, ref.attempts):
            assert not a["stored"]
            if a["busy_kind"] is not None and a["outcome"].startswith("broker:"):
                code = bm.SYSTEM_ERROR if a["busy_kind"] == "PC_SYNCHRONIZED" else bm.SYSTEM_BUSY  # 4.9.8
                assert (a["outcome"], a["response_code"]) == (f"broker:{code}", code), a
                busy[a["busy_kind"]] = busy.get(a["busy_kind"], 0) + 1
                late += a["latency_ms"] > sc.producers.send_msg_timeout_ms
                if a["attempt"] == last[a["seq"]]:
                    assert errors[a["seq"]].startswith(
                        f"MQBrokerException: CODE: {code}  DESC: [{a['busy_kind']}]"
                    )
            elif (
                a["busy_kind"] is None
                and a["store_queue_depth"] is not None
                and a["outcome"].startswith("broker:")
            ):
                assert (a["outcome"], a["response_code"]) == ("broker:13", bm.MESSAGE_ILLEGAL), a
                admitted += 1
                if a["attempt"] == last[a["seq"]]:
                    assert errors[a["seq"]].startswith(ILLEGAL_TEXT)
    assert admitted > 0 and busy, (admitted, busy)
    if case == "async-late":
        assert late > 0
    if case == "async-stall":
        assert busy.keys() & {"REJECTREQUEST", "PCBUSY_CLEAN_QUEUE"}, busy


def test_arrival_work_sums_in_any_order() -> None:
    rng = np.random.default_rng(1)
    b, ms, wire = rng.integers(0, 4, 5000), rng.integers(0, 300, 5000), rng.integers(1, 9000, 5000)
    whole = ArrivalWork.of_requests(b, ms, wire)
    parts = [ArrivalWork.of_requests(b[i::3], ms[i::3], wire[i::3]) for i in range(3)]
    assert iterative.arrival_work(parts) == whole == iterative.arrival_work(parts[::-1])
    assert whole.requests == 5000 and np.all(np.diff(whole.keys()) > 0)
    cells: dict[tuple[int, int], list[int]] = {}
    for key in zip(b.tolist(), ms.tolist(), wire.tolist(), strict=True):
        cell = cells.setdefault(key[:2], [0, 0])
        cell[0] += 1
        cell[1] += key[2]
    assert ArrivalWork.of_cells(cells) == whole


def test_rounds_choose_the_compiled_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """ROCKETSIM_ENGINE unset: a round runs compiled where the compiled engine supports the messages
    (else the reference: repeated seqs); ``reference`` forces the readable one."""
    calls: list[str] = []
    fast, slow = compiled.simulate_round, iterative.simulate_round_reference
    monkeypatch.setattr(compiled, "simulate_round", lambda *a: calls.append("compiled") or fast(*a))
    monkeypatch.setattr(
        iterative, "simulate_round_reference", lambda *a: calls.append("reference") or slow(*a)
    )
    sc = scenario("async", 0.5)
    m = by_producer(sc)[0]
    trajs = iterative.trajectories(sc, None)
    monkeypatch.delenv("ROCKETSIM_ENGINE", raising=False)
    iterative.simulate_round(m, sc, 0, trajs)
    repeated = m.set_column(m.schema.get_field_index("seq"), "seq", pa.array([7] * m.num_rows, pa.int64()))
    iterative.simulate_round(repeated, sc, 0, trajs)
    monkeypatch.setenv("ROCKETSIM_ENGINE", "reference")
    iterative.simulate_round(m, sc, 0, trajs)
    assert calls == ["compiled", "reference", "reference"]
