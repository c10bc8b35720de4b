"""Transactional messages after their halves are stored: the local transaction and the broker's check-back.

``TransactionMQProducer.sendMessageInTransaction`` sends the half message (``TRAN_MSG=true``) with a SYNC
``send`` (its retries reuse the message, UNIQ_KEY included); the broker stores each half it processes in
``RMQ_SYS_TRANS_HALF_TOPIC`` (:mod:`rocketsim.broker.store`), also one whose request the client gave up on (a
stored timeout, ``send_attempts.stored``). One row per half, and one per message with no half its
result points at:

More: docs/reference/modules.md, rocketsim/broker/transactions.py.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim import rng
from rocketsim.scenario import TRANSACTION_STATES, Scenario

__all__ = ["INPUT_COLUMNS", "OTHER_HALF_SALT", "OUTPUT_COLUMNS", "TRANSACTION_SALT", "resolve"]

TRANSACTION_SALT = 0x7A5C_70E1_C4EC_4BAC  # keeps transaction draws apart from workload and broker draws
OTHER_HALF_SALT = 0x3D0B_5F27_91A6_E853  # and the check draws of the halves the result does not point at
S_LOCAL, S_CRASH, S_CHECK = 0, 1, 2  # streams of a message's key (check draws use attempt = check number)

COMMIT, ROLLBACK, UNKNOWN = range(3)  # indexes into TRANSACTION_STATES

INPUT_COLUMNS = pa.schema(
    [
        pa.field("producer", pa.int32(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("attempt", pa.int32()),  # the attempt that stored the half; null: no half
        pa.field("is_result", pa.bool_(), nullable=False),  # the half the send result points at
        pa.field("send_status", pa.string(), nullable=False),
        pa.field("half_born_ts_ms", pa.int64()),  # start of the attempt that stored the half; null: none
        pa.field("half_store_ts_ms", pa.int64()),  # when the broker stored it
        pa.field("end_ts_ms", pa.int64(), nullable=False),  # when the send returned to the producer
    ]
)
OUTPUT_COLUMNS = pa.schema(
    [
        pa.field("local_state", pa.string(), nullable=False),
        pa.field("checks", pa.int32(), nullable=False),
        pa.field("resolution", pa.string(), nullable=False),
        pa.field("resolved_by", pa.string()),
        pa.field("resolved_ts_ms", pa.int64()),
        pa.field("delivered", pa.bool_(), nullable=False),
    ]
)


def _choose(u: np.ndarray, weights: dict[str, float]) -> np.ndarray:
    w = np.array([weights.get(s, 0.0) for s in TRANSACTION_STATES], np.float64)
    cum = np.cumsum(w / w.sum())
    return np.minimum(np.searchsorted(cum, u, side="right"), len(w) - 1)


def _uniforms(
    seed: int, producers: np.ndarray, seqs: np.ndarray, attempts: np.ndarray | int, stream: int
) -> np.ndarray:
    """One uniform per row for (seed, producer, seq, attempt) on ``stream``."""
    out = np.empty(len(seqs), np.float64)
    attempts = np.broadcast_to(np.asarray(attempts, np.int64), seqs.shape)
    for p in np.unique(producers):
        rows = producers == p
        keys = rng.draw_keys(seed, int(p), seqs[rows], attempts[rows])
        out[rows] = rng.uniforms(keys, stream)
    return out


def first_check_ms(born_ts_ms: np.ndarray, interval_ms: int, timeout_ms: int) -> np.ndarray:
    """The first check tick ``k * interval`` (k >= 1) with ``tick - born > timeout``."""
    return (np.floor_divide(np.asarray(born_ts_ms, np.int64) + timeout_ms, interval_ms) + 1) * interval_ms


def first_tick_after(ts_ms: np.ndarray, interval_ms: int) -> np.ndarray:
    """The first check tick ``k * interval`` after ``ts`` (a round that began after the half was stored)."""
    return (np.floor_divide(np.asarray(ts_ms, np.int64), interval_ms) + 1) * interval_ms


def _column(table: pa.Table, name: str, dtype: type) -> np.ndarray:
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype)


def resolve(table: pa.Table, sc: Scenario) -> pa.Table:
    """``table`` (:data:`INPUT_COLUMNS`: one row per stored half, and one per transactional message
    whose result points at no half) plus :data:`OUTPUT_COLUMNS`."""
    cfg = sc.transactions
    interval = cfg.check_interval_for(sc.broker_version)
    n = table.num_rows
    producers, seqs = _column(table, "producer", np.int64), _column(table, "seq", np.int64)
    stored = np.asarray(pc.is_valid(table.column("half_born_ts_ms")).to_numpy(zero_copy_only=False), bool)
    born = np.asarray(table.column("half_born_ts_ms").fill_null(0).to_numpy(zero_copy_only=False), np.int64)
    stored_at = pc.coalesce(table.column("half_store_ts_ms"), table.column("half_born_ts_ms")).fill_null(0)
    stored_at = np.asarray(stored_at.to_numpy(zero_copy_only=False), np.int64)
    attempt = np.asarray(table.column("attempt").fill_null(0).to_numpy(zero_copy_only=False), np.int64)
    end = _column(table, "end_ts_ms", np.int64)
    ok = np.asarray(pc.equal(table.column("send_status"), "SEND_OK").to_numpy(zero_copy_only=False), bool)
    pointed = stored & _column(table, "is_result", bool)  # the half endTransaction addresses
    other = stored & ~pointed  # nobody ends it: checked back

    # the message's local transaction (the same on each of its rows)
    salt = sc.seed ^ TRANSACTION_SALT
    crash = ok & stored & (_uniforms(salt, producers, seqs, 0, S_CRASH) < cfg.producer_crash)
    local = _choose(_uniforms(salt, producers, seqs, 0, S_LOCAL), dict(cfg.outcome))
    ran = stored & ok & ~crash
    to_check = (pointed & (crash | (ran & (local == UNKNOWN)))) | other

    # check-backs, one tick apart, until one finds commit or rollback
    first = np.maximum(first_check_ms(born, interval, cfg.timeout_ms), first_tick_after(stored_at, interval))
    checks = np.zeros(n, np.int64)
    answer = np.full(n, UNKNOWN)
    pending = to_check.copy()
    check_weights = dict(cfg.check_outcome)
    other_salt = sc.seed ^ TRANSACTION_SALT ^ OTHER_HALF_SALT
    for k in range(1, cfg.check_max + 1):
        if not pending.any():
            break
        checks[pending] = k
        u = _uniforms(salt, producers, seqs, k, S_CHECK)
        if other.any():
            u[other] = _uniforms(other_salt, producers[other], seqs[other], attempt[other], S_CHECK + k)
        drawn = _choose(u, check_weights)
        answered = pending & (drawn != UNKNOWN)
        answer[answered] = drawn[answered]
        pending &= ~answered
    discarded = to_check & (answer == UNKNOWN)
    checked = to_check & ~discarded

    names = np.array(TRANSACTION_STATES, dtype=object)
    state = np.full(n, "not_run", dtype=object)
    state[ran] = names[local[ran]]
    state[crash] = "crash"
    by_producer = pointed & ~to_check  # ended by the producer as the send returned
    resolution = np.full(n, "not_stored", dtype=object)
    resolution[by_producer] = np.where(ok, names[local], "rollback")[by_producer]  # not SEND_OK: rollback
    resolution[checked] = names[answer[checked]]
    resolution[discarded] = "discard"
    resolved_by = np.full(n, None, dtype=object)
    resolved_by[by_producer], resolved_by[checked], resolved_by[discarded] = "producer", "check", "discard"
    resolved_ts = np.where(by_producer, end, first + (checks - 1 + discarded) * interval)
    cols = {
        "local_state": pa.array(state.tolist(), pa.string()),
        "checks": pa.array(checks.astype(np.int32)),
        "resolution": pa.array(resolution.tolist(), pa.string()),
        "resolved_by": pa.array(resolved_by.tolist(), pa.string()),
        "resolved_ts_ms": pa.array(resolved_ts, mask=~stored),
        "delivered": pa.array(resolution == "commit", pa.bool_()),
    }
    for f in OUTPUT_COLUMNS:
        table = table.append_column(f, pa.chunked_array([cols[f.name]], f.type))
    return table
