"""The fault-kind table (rocketsim.broker.fault_kinds.FAULT_KINDS): every row is honoured, identically, by
both engines, and a new kind is a row.

The compiled engine reads each window's row through engine/plan's window columns and compiles the rule
functions themselves (the decision chain ``latency.answer``, ``fault_kinds.process_down``), so a row added
at run time (no source changed, numba's cache untouched) is honoured by the kernel as it is by the
readable engine: :func:`test_a_new_kind_is_a_row` adds one.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from rocketsim.broker import fault_kinds, latency
from rocketsim.broker.fault_kinds import (
    FAULT_KINDS,
    Connect,
    Down,
    Effect,
    FaultKind,
    Probe,
    RouteDrop,
    Store,
)
from rocketsim.engine import compiled, iterative, reference
from rocketsim.engine.plan import SimOutput
from rocketsim.scenario import Scenario, ScenarioError, scenario_from_mapping, workload

WINDOW = {"broker": "broker-b", "start_s": 10.0, "end_s": 190.0}
# what a kind reads of its window, where it has settings
SETTINGS: dict[str, dict[str, Any]] = {
    "slowdown": {"factor": 400.0},
    "flapping": {"period_s": 20.0, "down_s": 8.0},
    "error_burst": {"error": "system_error", "rate": 0.7},
    "store_stall": {"period_s": 3.0, "down_s": 1.5},
}


def raw(
    kind: str | None, version: str = "5.3.3", coupling: str = "open", fault: bool = True
) -> dict[str, Any]:
    """Two minutes and more of sends over three brokers, ``kind`` on broker-b from 10 s to 190 s; the
    fault strategy (``fault``) and (5.x) its detector on, so the row's probe column is read too."""
    faults = [] if kind is None else [{**WINDOW, "kind": kind, **SETTINGS.get(kind, {})}]
    return {
        "seed": 11,
        "cluster": {"brokers": ["broker-a", "broker-b", "broker-c"], "write_queues": 2, "read_queues": 2},
        "producers": {
            "count": 1,
            "threads": 2,
            "client_version": version,
            "send_latency_fault_enable": fault,
            "start_detector_enable": fault and version.startswith("5"),
            "send_mode": {"sync": 0.6, "async": 0.3, "oneway": 0.1},
        },
        "workload": {"messages": 2400, "rate_per_s": 12.0},
        "brokers": {"coupling": coupling, "default": {"latency": {"median_ms": 3.0, "sigma": 0.5}}},
        "faults": faults,
    }


def both_open(sc: Scenario) -> SimOutput:
    """Both engines on the producer's messages; their tables must be equal."""
    messages = workload.generate(sc)
    ref = reference.simulate_producer(messages, sc)
    fast = compiled.simulate_producer(messages, sc)
    assert ref.attempts.equals(fast.attempts) and ref.results.equals(fast.results)
    return ref


def both_closed(sc: Scenario, monkeypatch: pytest.MonkeyPatch) -> SimOutput:
    """Two iterative rounds (the second against the stores the first loaded) on both engines; their
    tables must be equal."""
    messages = workload.generate(sc)
    trajs = iterative.trajectories(sc, None)
    for _ in range(2):
        outs = {}
        for engine in ("reference", "compiled"):
            monkeypatch.setenv("ROCKETSIM_ENGINE", engine)
            outs[engine] = iterative.simulate_round(messages, sc, 0, trajs)
        (ref, work), (fast, _) = outs["reference"], outs["compiled"]
        assert ref.attempts.equals(fast.attempts) and ref.results.equals(fast.results)
        trajs = iterative.trajectories(sc, iterative.arrival_work([work]))
    return ref


def to_broker_b(out: SimOutput, lo_ms: int, hi_ms: int) -> pa.Table:
    a = out.attempts
    start = a.column("start_ts_ms")
    mask = pc.and_(
        pc.equal(a.column("broker"), "broker-b"),
        pc.and_(pc.greater_equal(start, lo_ms), pc.less(start, hi_ms)),
    )
    return a.filter(mask)


WELL: dict[str, SimOutput] = {}  # the tables without a fault, per coupling


@pytest.mark.parametrize("kind", sorted(FAULT_KINDS))
def test_every_row_is_honoured_identically_by_both_engines(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rule = FAULT_KINDS[kind]
    coupling = "open" if rule.open_model_sees else "iterative"
    run = both_open if coupling == "open" else lambda sc: both_closed(sc, monkeypatch)
    faulty = run(scenario_from_mapping(raw(kind, coupling=coupling)))
    well = WELL.get(coupling) or WELL.setdefault(
        coupling, run(scenario_from_mapping(raw(None, coupling=coupling)))
    )
    assert not faulty.attempts.equals(well.attempts), f"{kind}'s row changed nothing"
    if not rule.open_model_sees:  # the validation reads the row too
        with pytest.raises(ScenarioError, match=f"{kind} needs a closed-loop store"):
            scenario_from_mapping(raw(kind))


def test_the_table_is_what_the_model_says() -> None:
    # the columns that act, per kind (the rest left as a well broker has them)
    acts = {
        name: {f: getattr(row, f) for f in ("down", "connect", "answer", "route", "probe", "store")}
        for name, row in FAULT_KINDS.items()
    }
    assert acts["outage"]["down"] == Down.WHOLE_WINDOW and acts["outage"]["route"] == RouteDrop.AT_ONCE
    assert acts["flapping"]["down"] == Down.PERIODIC and acts["flapping"]["route"] == RouteDrop.AT_ONCE
    assert acts["hang"]["route"] == RouteDrop.AFTER_HEARTBEAT_TIMEOUT and acts["hang"]["probe"] == Probe.FAILS
    assert (
        acts["partition"]["connect"] == Connect.TIMES_OUT
        and acts["partition"]["route"] == RouteDrop.UNTOUCHED
    )
    assert acts["store_stall"]["store"] == Store.STALLS and not FAULT_KINDS["store_stall"].open_model_sees
    assert [k for k, r in FAULT_KINDS.items() if r.periodic] == ["flapping", "store_stall"]
    assert {k: r.effect for k, r in FAULT_KINDS.items() if r.effect != Effect.NONE} == {
        "hang": Effect.NO_ANSWER,
        "slowdown": Effect.SLOWER,
        "error_burst": Effect.ERROR_BURST,
        "partition": Effect.CONNECT_TIMES_OUT,
        "paused": Effect.PAUSED,
    }
    # kill -STOP: the route and the probe see a hang; the closed-loop store takes the held requests later
    assert (acts["paused"]["route"], acts["paused"]["probe"]) == (
        RouteDrop.AFTER_HEARTBEAT_TIMEOUT,
        Probe.FAILS,
    )
    assert acts["paused"]["store"] == Store.DEFERS
    with pytest.raises(ValueError, match="needs a process that dies"):
        FaultKind(route=RouteDrop.AT_ONCE)  # dropped at once over no interval: refused, not ignored


def test_is_thebroker_process_down_is_one_definition() -> None:
    # a whole-window and a periodic pattern, through the one formula both engines use
    whole = fault_kinds.down_cycle(Down.WHOLE_WINDOW, 1000, 5000, 20, 10)
    flap = fault_kinds.down_cycle(Down.PERIODIC, 1000, 5000, 1000, 300)
    never = fault_kinds.down_cycle(Down.NEVER, 1000, 5000, 1000, 300)
    assert all(fault_kinds.process_down(1000, *whole, t) for t in range(1000, 5000, 7))
    assert [fault_kinds.process_down(1000, *flap, t) for t in (1000, 1299, 1300, 2000, 4999)] == [
        True,
        True,
        False,
        True,
        False,
    ]
    assert not any(fault_kinds.process_down(1000, *never, t) for t in range(1000, 5000, 7))
    assert fault_kinds.down_intervals(1000, 5000, *flap, 10**9) == [
        (1000, 1300),
        (2000, 2300),
        (3000, 3300),
        (4000, 4300),
    ]
    # the compiled engine runs these very functions (numba compiles them as they are)
    assert compiled.broker_process_down.py_func is fault_kinds.process_down
    assert compiled.broker_answer.py_func is latency.answer


BLACKHOLE = FaultKind(connect=Connect.TIMES_OUT, route=RouteDrop.AFTER_HEARTBEAT_TIMEOUT, probe=Probe.FAILS)


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_a_new_kind_is_a_row(version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A worked example: "blackhole", a broker host cut off from everyone, producers and name server alike
    # (a partition that also stops its registrations), is this one row and nothing else: the scenario's
    # validation, the route timeline, the decision chain and the probe of both engines read it.
    monkeypatch.setitem(FAULT_KINDS, "blackhole", BLACKHOLE)
    # (the fault strategy off: an isolated broker would be avoided, whatever the route)
    hole = both_open(scenario_from_mapping(raw("blackhole", version, fault=False)))
    cut = both_open(scenario_from_mapping(raw("partition", version, fault=False)))
    # while it lasts, every attempt that reaches the broker waits for the connect timeout, as a partition
    inside = to_broker_b(hole, 10_000, 130_000)
    assert inside.num_rows > 0
    assert set(inside.column("outcome").to_pylist()) == {"remoting:connect"}
    waited = set(inside.column("latency_ms").to_pylist())  # (a 5.x oneway caller waits for no connect)
    assert 3000 in waited and waited <= {0, 3000}
    # its last registration (10 s) + 120 s of idle channel, then the producer's next poll (150.01 s): the
    # route has no broker-b left, where the partition (route untouched) keeps it
    assert to_broker_b(hole, 151_000, 190_000).num_rows == 0
    assert to_broker_b(cut, 151_000, 190_000).num_rows > 0
