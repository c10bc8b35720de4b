"""Transactional messages after their half: local outcome, check-back timing, discard after checkMax."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pytest

from rocketsim.broker import transactions
from rocketsim.client.versions import BROKER_4_9_8, BROKER_5_3_3
from rocketsim.scenario import Scenario, ScenarioError, TransactionConfig, scenario_from_mapping


def _sc(**tx: object) -> Scenario:
    return scenario_from_mapping({"seed": 11, "transactions": tx})


def _rows(
    status: list[str],
    born: list[int | None],
    end: list[int] | None = None,
    *,
    is_result: list[bool] | None = None,
    attempt: list[int | None] | None = None,
    stored: list[int | None] | None = None,
    seq: list[int] | None = None,
) -> pa.Table:
    """Input rows; by default each stored half is its result's (attempt 0), stored 2 ms after its born."""
    n = len(status)
    return pa.Table.from_pydict(
        {
            "producer": [i % 3 for i in range(n)] if seq is None else [0] * n,
            "seq": list(range(n)) if seq is None else seq,
            "attempt": attempt if attempt is not None else [None if b is None else 0 for b in born],
            "is_result": is_result if is_result is not None else [b is not None for b in born],
            "send_status": status,
            "half_born_ts_ms": born,
            "half_store_ts_ms": stored
            if stored is not None
            else [None if b is None else b + 2 for b in born],
            "end_ts_ms": end if end is not None else [0 if b is None else b + 5 for b in born],
        },
        schema=transactions.INPUT_COLUMNS,
    )


def test_defaults_are_the_broker_config_defaults() -> None:
    # BrokerConfig: transactionCheckInterval 60 * 1000 (4.9.8) / 30 * 1000 (5.3.3), transactionCheckMax 15,
    # transactionTimeOut 6 * 1000 (both)
    cfg = TransactionConfig()
    assert cfg.check_interval_ms is None  # the broker version's
    assert (cfg.check_interval_for(BROKER_4_9_8), cfg.check_max, cfg.timeout_ms) == (60_000, 15, 6_000)
    assert (cfg.check_interval_for(BROKER_5_3_3), cfg.check_max, cfg.timeout_ms) == (30_000, 15, 6_000)
    assert TransactionConfig(check_interval_ms=10_000).check_interval_for(BROKER_5_3_3) == 10_000


@pytest.mark.parametrize(
    ("version", "first_check"), [("4.8.0", 60_000), ("4.9.8", 60_000), ("5.3.3", 30_000)]
)
def test_transaction_check_interval_default_per_version(version: str, first_check: int) -> None:
    # BrokerConfig.transactionCheckInterval: 60 * 1000 in 4.9.8, 30 * 1000 in 5.3.3 (a 4.x client talks to a
    # 4.9.8 broker, a 5.x client to a 5.3.3 one); TransactionalMessageCheckService waits it between rounds
    sc = scenario_from_mapping(
        {
            "seed": 11,
            "producers": {"client_version": version},
            "transactions": {"outcome": {"unknown": 1.0}, "check_outcome": {"unknown": 1.0}},
        }
    )
    out = transactions.resolve(_rows(["SEND_OK"], [0]), sc).to_pylist()[0]
    # 15 checks at first_check, 2 x first_check, ...; the 16th tick discards the half
    assert (out["checks"], out["resolved_ts_ms"]) == (15, 16 * first_check)
    sc = scenario_from_mapping(
        {
            "seed": 11,
            "producers": {"client_version": version},
            "transactions": {"outcome": {"unknown": 1.0}, "check_outcome": {"commit": 1.0}},
        }
    )
    assert transactions.resolve(_rows(["SEND_OK"], [0]), sc).to_pylist()[0]["resolved_ts_ms"] == first_check
    given = scenario_from_mapping(
        {
            "producers": {"client_version": version},
            "transactions": {
                "outcome": {"unknown": 1.0},
                "check_outcome": {"commit": 1.0},
                "check_interval_ms": 45_000,
            },
        }
    )
    assert transactions.resolve(_rows(["SEND_OK"], [0]), given).to_pylist()[0]["resolved_ts_ms"] == 45_000


@pytest.mark.parametrize(
    ("client", "broker", "first_check"), [("4.9.8", "5.3.3", 30_000), ("5.3.3", "4.9.8", 60_000)]
)
def test_transaction_check_interval_is_the_brokers_not_the_clients(
    client: str, broker: str, first_check: int
) -> None:
    # the check is the broker's (TransactionalMessageCheckService, BrokerConfig.transactionCheckInterval:
    # 60 * 1000 in 4.9.8, 30 * 1000 in 5.3.3), whatever client sent the half
    sc = scenario_from_mapping(
        {
            "seed": 11,
            "cluster": {"broker_version": broker},
            "producers": {"client_version": client},
            "transactions": {"outcome": {"unknown": 1.0}, "check_outcome": {"commit": 1.0}},
        }
    )
    assert transactions.resolve(_rows(["SEND_OK"], [0]), sc).to_pylist()[0]["resolved_ts_ms"] == first_check


def test_producer_ends_commit_and_rollback_when_the_send_returns() -> None:
    out = transactions.resolve(_rows(["SEND_OK"] * 2, [100, 2000]), _sc(outcome={"commit": 1.0})).to_pylist()
    assert [
        (r["local_state"], r["resolution"], r["resolved_by"], r["resolved_ts_ms"], r["checks"]) for r in out
    ] == [
        ("commit", "commit", "producer", 105, 0),
        ("commit", "commit", "producer", 2005, 0),
    ]
    out = transactions.resolve(_rows(["SEND_OK"], [100]), _sc(outcome={"rollback": 1.0})).to_pylist()
    assert (out[0]["resolution"], out[0]["resolved_ts_ms"]) == ("rollback", 105)


def test_a_not_ok_half_is_rolled_back_and_a_failed_send_has_no_half() -> None:
    rows = _rows(["FLUSH_DISK_TIMEOUT", "SLAVE_NOT_AVAILABLE", "FAILED", "REJECTED"], [10, 20, None, None])
    out = transactions.resolve(rows, _sc(outcome={"unknown": 1.0})).to_pylist()
    assert [(r["local_state"], r["resolution"], r["resolved_by"]) for r in out] == [
        ("not_run", "rollback", "producer"),
        ("not_run", "rollback", "producer"),
        ("not_run", "not_stored", None),
        ("not_run", "not_stored", None),
    ]
    assert [r["resolved_ts_ms"] for r in out] == [15, 25, None, None]


def test_first_check_is_the_first_tick_after_born_plus_timeout() -> None:
    # interval 60 s, timeout 6 s: born 0 -> tick 60 s; born 54,000 -> 60,000 is not > timeout -> 120 s
    sc = _sc(outcome={"unknown": 1.0}, check_outcome={"commit": 1.0})
    out = transactions.resolve(_rows(["SEND_OK"] * 4, [0, 53_999, 54_000, 60_000]), sc).to_pylist()
    assert [r["resolved_ts_ms"] for r in out] == [60_000, 60_000, 120_000, 120_000]
    assert {(r["local_state"], r["resolution"], r["resolved_by"], r["checks"]) for r in out} == {
        ("unknown", "commit", "check", 1)
    }
    assert transactions.first_check_ms(np.array([0, 53_999, 54_000]), 60_000, 6_000).tolist() == [
        60_000,
        60_000,
        120_000,
    ]


def test_fifteen_unknown_checks_then_discard() -> None:
    sc = _sc(outcome={"unknown": 1.0}, check_outcome={"unknown": 1.0})
    out = transactions.resolve(_rows(["SEND_OK"], [1_000]), sc).to_pylist()[0]
    # checks at 60 s, 120 s, ..., 900 s (15); the 16th tick (960 s) discards (needDiscard: times >= 15)
    assert (out["checks"], out["resolution"], out["resolved_by"], out["resolved_ts_ms"]) == (
        15,
        "discard",
        "discard",
        960_000,
    )
    short = _sc(
        outcome={"unknown": 1.0}, check_outcome={"unknown": 1.0}, check_max=2, check_interval_ms=10_000
    )
    out = transactions.resolve(_rows(["SEND_OK"], [1_000]), short).to_pylist()[0]
    assert (out["checks"], out["resolved_ts_ms"]) == (2, 30_000)  # checks at 10 s, 20 s; discard at 30 s


def test_checks_stop_at_the_first_answer() -> None:
    sc = _sc(outcome={"unknown": 1.0}, check_outcome={"commit": 0.2, "rollback": 0.2, "unknown": 0.6})
    out = transactions.resolve(_rows(["SEND_OK"] * 3000, [0] * 3000), sc).to_pandas()
    checked = out[out.resolved_by == "check"]
    assert ((checked.resolved_ts_ms - 60_000) // 60_000 + 1 == checked.checks).all()
    assert set(checked.resolution) == {"commit", "rollback"}
    # P(still unknown after 15 checks) = 0.6^15 ~ 0.05%
    assert (out.resolution == "discard").sum() < 15
    # the number of checks is geometric: mean 1 / 0.4 = 2.5
    assert 2.3 < checked.checks.mean() < 2.7


def test_crash_leaves_the_transaction_to_the_check() -> None:
    sc = _sc(outcome={"commit": 1.0}, producer_crash=1.0, check_outcome={"rollback": 1.0})
    out = transactions.resolve(_rows(["SEND_OK", "FLUSH_DISK_TIMEOUT"], [0, 0]), sc).to_pylist()
    assert (out[0]["local_state"], out[0]["resolution"], out[0]["resolved_by"]) == (
        "crash",
        "rollback",
        "check",
    )
    assert (out[1]["local_state"], out[1]["resolution"]) == (
        "not_run",
        "rollback",
    )  # no crash without SEND_OK


def test_outcomes_follow_the_weights_and_do_not_depend_on_row_grouping() -> None:
    sc = _sc(outcome={"commit": 0.7, "rollback": 0.2, "unknown": 0.1}, producer_crash=0.05)
    rows = _rows(["SEND_OK"] * 6000, list(range(0, 600_000, 100)))
    whole = transactions.resolve(rows, sc)
    parts = pa.concat_tables([transactions.resolve(rows.slice(a, 1000), sc) for a in range(0, 6000, 1000)])
    assert whole.equals(parts)
    states = whole.column("local_state").to_pandas().value_counts(normalize=True)
    assert abs(states["commit"] - 0.7 * 0.95) < 0.03 and abs(states["crash"] - 0.05) < 0.015
    other_seed = transactions.resolve(rows, dataclasses.replace(sc, seed=12))
    assert not other_seed.column("local_state").equals(whole.column("local_state"))


@pytest.mark.parametrize(
    ("tx", "message"),
    [
        ({"outcome": {"maybe": 1.0}}, "transactions.outcome.maybe is not a known key"),
        ({"outcome": {"commit": 0.0}}, "transactions.outcome weights must add up to more than 0"),
        ({"producer_crash": 1.5}, "transactions.producer_crash must be between 0 and 1"),
        ({"check_max": 0}, "transactions.check_max must be between 1 and 1000"),
        ({"check_interval_ms": 0}, "transactions.check_interval_ms must be > 0"),
        ({"check_interval_ms": "30s"}, "transactions.check_interval_ms must be an integer, got '30s'"),
        ({"timeout": 5}, "transactions.timeout is not a known key"),
    ],
)
def test_bad_transaction_keys_are_refused(tx: dict[str, object], message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        scenario_from_mapping({"transactions": tx})


def test_a_half_the_result_does_not_point_at_is_checked_back() -> None:
    # DefaultMQProducerImpl.endTransaction ends the half whose offsetMsgId the SendResult carries; any
    # other half of the message (a timed-out attempt the broker stored anyway) is never ended by the
    # producer: TransactionalMessageServiceImpl.check finds it at the first round after born +
    # transactionTimeOut that began after it was stored ("Fresh stored ... check it later":
    # storeTimestamp >= startTime), and each check is answered on its own (checkLocalTransaction)
    sc = _sc(outcome={"rollback": 1.0}, check_outcome={"commit": 1.0})
    rows = _rows(
        ["SEND_OK", "SEND_OK", "FAILED", "FAILED"],
        [10_000, 0, 500, None],
        [10_005, 10_005, 9_000, 9_000],
        is_result=[True, False, False, False],
        attempt=[1, 0, 0, None],
        stored=[10_002, 62_000, 3_500, None],  # the second half stored late: a round after 60 s
        seq=[7, 7, 8, 8],
    )
    out = transactions.resolve(rows, sc).to_pylist()
    got = [
        (r["local_state"], r["resolution"], r["resolved_by"], r["resolved_ts_ms"], r["delivered"])
        for r in out
    ]
    assert got == [
        ("rollback", "rollback", "producer", 10_005, False),  # the producer's local transaction
        ("rollback", "commit", "check", 120_000, True),  # its other half: checked, committed (delivered)
        ("not_run", "commit", "check", 60_000, True),  # a failed send's half
        ("not_run", "not_stored", None, None, False),  # the failed send itself: nothing to end
    ]


def test_other_halves_draw_their_checks_apart() -> None:
    # two halves of one message checked back get answers of their own, keyed by the storing attempt;
    # the draws of the result's half do not change when other halves are added
    sc = _sc(outcome={"unknown": 1.0}, check_outcome={"commit": 0.3, "rollback": 0.3, "unknown": 0.4})
    n = 2000
    rows = _rows(
        ["SEND_OK"] * (3 * n),
        [0] * (3 * n),
        is_result=[True] * n + [False] * (2 * n),
        attempt=[2] * n + [0] * n + [1] * n,
        seq=list(range(n)) * 3,
    )
    out = transactions.resolve(rows, sc).to_pandas()
    same = transactions.resolve(_rows(["SEND_OK"] * n, [0] * n, seq=list(range(n))), sc).to_pandas()
    assert out.iloc[:n].checks.tolist() == same.checks.tolist()
    a, b = out.iloc[n : 2 * n].reset_index(drop=True), out.iloc[2 * n :].reset_index(drop=True)
    assert (a.checks != b.checks).mean() > 0.3 and (a.resolution != b.resolution).mean() > 0.3
    assert (a.checks != out.iloc[:n].reset_index(drop=True).checks).mean() > 0.3
