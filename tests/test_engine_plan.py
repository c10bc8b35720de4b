"""What both engines share (rocketsim.engine.plan): the prepared sends, the rules as data, the outcome
names, and the mirrored definitions that must agree."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest

from rocketsim import brokers as bm
from rocketsim import workload
from rocketsim.engine import compiled
from rocketsim.engine.plan import (
    STATUS_NAMES,
    SendKind,
    SimulationError,
    Status,
    plan_for,
    prepare,
    to_outcome,
)
from rocketsim.fault import FAULT_UPDATES
from rocketsim.outcomes import CATCH_OF_KIND, Catch, OutcomeKind, outcome_label
from rocketsim.scenario import scenario_from_mapping
from rocketsim.send import catch_of, oneway_caller_sees, outcome_kind
from rocketsim.versions import LINES, parse_version


@pytest.mark.parametrize("kind", list(OutcomeKind))
def test_the_mirrored_outcome_rules_agree(kind: OutcomeKind) -> None:
    code = bm.SYSTEM_BUSY if kind == OutcomeKind.BROKER_ERROR else 0
    outcome = to_outcome(bm.AttemptOutcome(kind, 5, code))
    assert catch_of(outcome) == CATCH_OF_KIND[kind]
    assert outcome_kind(outcome) == kind
    for version in ("4.9.8", "5.3.3"):
        sc = scenario_from_mapping({"producers": {"client_version": version}, "workload": {"messages": 1}})
        rules = plan_for(sc).rules
        assert oneway_caller_sees(outcome, sc.producers.version) == compiled.oneway_caller_sees(rules, kind)
    assert compiled.is_stored(kind) == (CATCH_OF_KIND[kind] == Catch.RESULT)
    assert outcome.label == outcome_label(kind, code)


def test_a_stored_kind_is_its_status() -> None:
    stored = [k for k in OutcomeKind if CATCH_OF_KIND[k] == Catch.RESULT]
    assert [Status(int(k)).name for k in stored] == [
        "SEND_OK",
        "FLUSH_DISK_TIMEOUT",
        "FLUSH_SLAVE_TIMEOUT",
        "SLAVE_NOT_AVAILABLE",
    ]
    assert STATUS_NAMES[Status.REJECTED] == "REJECTED"


@pytest.mark.parametrize(
    ("version", "detector"), [("4.9.7", False), ("4.9.8", True), ("5.3.3", False), ("5.3.3", True)]
)
def test_fault_rules_arrays_are_the_table(version: str, detector: bool) -> None:
    sc = scenario_from_mapping(
        {
            "producers": {"client_version": version, "start_detector_enable": detector},
            "workload": {"messages": 10},
        }
    )
    rules = plan_for(sc).rules
    detecting = detector and version.startswith("5")
    for site, cells in FAULT_UPDATES[parse_version(version).fault_line].items():
        for catch, (isolation, reachable) in cells.items():
            assert rules.isolation[site, catch] == isolation
            assert rules.reachable[site, catch] == reachable.value_for(detecting)
    assert [rules.catch_of_kind[k] for k in OutcomeKind] == [CATCH_OF_KIND[k] for k in OutcomeKind]
    assert set(LINES) == set(FAULT_UPDATES)


def test_prepare_makes_sends_in_seq_order() -> None:
    sc = scenario_from_mapping(
        {
            "producers": {"count": 1, "threads": 2, "send_mode": {"sync": 1, "oneway": 1, "async": 1}},
            "workload": {
                "messages": 400,
                "message_types": {"normal": 2, "ordered": 1, "transaction": 1, "batch": 1},
                "batch_size": 4,
                "invalid": {"empty_body": 0.05},
            },
        }
    )
    messages = workload.generate(sc)
    prep = prepare(messages.take(pc.sort_indices(messages, [("seq", "descending")])), sc)  # any row order
    assert prep.s_seq.tolist() == sorted(prep.s_seq.tolist())
    rows = prep.messages
    assert rows.column("seq").to_pylist() == sorted(messages.column("seq").to_pylist())
    # every accepted row belongs to one send, a batch's members to the send of its first accepted member
    accepted = ~prep.rejected
    assert (prep.send_of_row[accepted] >= 0).all() and (prep.send_of_row[prep.rejected] == -1).all()
    assert prep.rejected.sum() == len(prep.reject_text) > 0
    kinds = {SendKind(k) for k in prep.s_kind.tolist()}
    assert kinds == set(SendKind)
    mtype = rows.column("message_type").to_pylist()
    for s, row in enumerate(prep.s_row.tolist()):
        if mtype[row] == "transaction":  # sendMessageInTransaction is a SYNC call
            assert prep.s_kind[s] == SendKind.SYNC
    with pytest.raises(SimulationError):
        prepare(messages.slice(0, 0), sc)

