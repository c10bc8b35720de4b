"""Transactional messages after the half is stored: the local transaction and the broker's check-back.

``TransactionMQProducer.sendMessageInTransaction`` sends the half message (``TRAN_MSG=true``); the broker
stores it in ``RMQ_SYS_TRANS_HALF_TOPIC`` (:mod:`rocketsim.broker`). Then, per message:

* the send result is not SEND_OK (FLUSH_*/SLAVE_NOT_AVAILABLE): the producer does not run the local
  transaction and ends it with ROLLBACK_MESSAGE at once (``local_state`` ``not_run``);
* SEND_OK: the producer may crash before ending it (``producer_crash``); otherwise the local transaction
  returns commit, rollback or unknown (``[transactions] outcome`` weights) and the producer ends it with
  that state when the send returns (commit/rollback resolve there, unknown is ignored by the broker);
* unknown or crash: ``TransactionalMessageCheckService`` runs every ``check_interval_ms``
  (transactionCheckInterval, 60 s; ticks at multiples of it in simulated time) and checks a half once
  ``tick - born > timeout_ms`` (transactionTimeOut, 6 s; born = the storing request's start). Each check
  asks the producer group (the crashed instance's peers, or itself restarted), which answers commit,
  rollback or unknown (``check_outcome`` weights); the first commit/rollback resolves it at that tick.
  After ``check_max`` checks (transactionCheckMax, 15) the next tick discards it (``needDiscard``): the
  message is never delivered, like a rollback.

A committed message is written to its real topic and queue and reaches consumers; a rolled back or
discarded one never does. Halves whose send failed (no stored copy the result points at) are
``not_stored``. Every draw is counter-based, keyed by (seed, producer, seq, check number) on a salt of
its own, so the outcome does not depend on partitioning.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim import rng
from rocketsim.scenario import TRANSACTION_STATES, Scenario

__all__ = ["INPUT_COLUMNS", "OUTPUT_COLUMNS", "TRANSACTION_SALT", "resolve"]

TRANSACTION_SALT = 0x7A5C_70E1_C4EC_4BAC  # keeps transaction draws apart from workload and broker draws
S_LOCAL, S_CRASH, S_CHECK = 0, 1, 2  # streams of a message's key (check draws use attempt = check number)

COMMIT, ROLLBACK, UNKNOWN = range(3)  # indexes into TRANSACTION_STATES

INPUT_COLUMNS = pa.schema(
    [
        pa.field("producer", pa.int32(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("send_status", pa.string(), nullable=False),
        pa.field("half_born_ts_ms", pa.int64()),  # start of the attempt that stored the half; null: none
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
    ]
)


def _choose(u: np.ndarray, weights: dict[str, float]) -> np.ndarray:
    w = np.array([weights.get(s, 0.0) for s in TRANSACTION_STATES], np.float64)
    cum = np.cumsum(w / w.sum())
    return np.minimum(np.searchsorted(cum, u, side="right"), len(w) - 1)


def _uniforms(seed: int, producers: np.ndarray, seqs: np.ndarray, attempt: int, stream: int) -> np.ndarray:
    """One uniform per row for (seed ^ salt, producer, seq, attempt) on ``stream``."""
    out = np.empty(len(seqs), np.float64)
    for p in np.unique(producers):
        rows = producers == p
        keys = rng.draw_keys(seed ^ TRANSACTION_SALT, int(p), seqs[rows], np.full(int(rows.sum()), attempt))
        out[rows] = rng.uniforms(keys, stream)
    return out


def first_check_ms(born_ts_ms: np.ndarray, interval_ms: int, timeout_ms: int) -> np.ndarray:
    """The first check tick ``k * interval`` (k >= 1) with ``tick - born > timeout``."""
    return (np.floor_divide(np.asarray(born_ts_ms, np.int64) + timeout_ms, interval_ms) + 1) * interval_ms


def resolve(table: pa.Table, sc: Scenario) -> pa.Table:
    """``table`` (:data:`INPUT_COLUMNS`, one row per transactional message) plus :data:`OUTPUT_COLUMNS`."""
    cfg = sc.transactions
    n = table.num_rows
    producers = np.asarray(table.column("producer").to_numpy(zero_copy_only=False), np.int64)
    seqs = np.asarray(table.column("seq").to_numpy(zero_copy_only=False), np.int64)
    stored = np.asarray(pc.is_valid(table.column("half_born_ts_ms")).to_numpy(zero_copy_only=False), bool)
    born = np.asarray(table.column("half_born_ts_ms").fill_null(0).to_numpy(zero_copy_only=False), np.int64)
    end = np.asarray(table.column("end_ts_ms").to_numpy(zero_copy_only=False), np.int64)
    ok = np.asarray(pc.equal(table.column("send_status"), "SEND_OK").to_numpy(zero_copy_only=False), bool)

    crash = ok & stored & (_uniforms(sc.seed, producers, seqs, 0, S_CRASH) < cfg.producer_crash)
    local = _choose(_uniforms(sc.seed, producers, seqs, 0, S_LOCAL), dict(cfg.outcome))
    ran = stored & ok & ~crash
    to_check = crash | (ran & (local == UNKNOWN))

    # check-backs, one tick apart, until one finds commit or rollback
    first = first_check_ms(born, cfg.check_interval_ms, cfg.timeout_ms)
    checks = np.zeros(n, np.int64)
    answer = np.full(n, UNKNOWN)
    pending = to_check.copy()
    check_weights = dict(cfg.check_outcome)
    for k in range(1, cfg.check_max + 1):
        if not pending.any():
            break
        checks[pending] = k
        drawn = _choose(_uniforms(sc.seed, producers, seqs, k, S_CHECK), check_weights)
        answered = pending & (drawn != UNKNOWN)
        answer[answered] = drawn[answered]
        pending &= ~answered
    discarded = to_check & (answer == UNKNOWN)
    checked = to_check & ~discarded

    names = np.array(TRANSACTION_STATES, dtype=object)
    state = np.full(n, "not_run", dtype=object)
    state[ran] = names[local[ran]]
    state[crash] = "crash"
    by_producer = stored & ~to_check  # ended by the producer as the send returned
    resolution = np.full(n, "not_stored", dtype=object)
    resolution[by_producer] = np.where(ok, names[local], "rollback")[by_producer]  # not SEND_OK: rollback
    resolution[checked] = names[answer[checked]]
    resolution[discarded] = "discard"
    resolved_by = np.full(n, None, dtype=object)
    resolved_by[by_producer], resolved_by[checked], resolved_by[discarded] = "producer", "check", "discard"
    resolved_ts = np.where(by_producer, end, first + (checks - 1 + discarded) * cfg.check_interval_ms)
    cols = {
        "local_state": pa.array(state.tolist(), pa.string()),
        "checks": pa.array(checks.astype(np.int32)),
        "resolution": pa.array(resolution.tolist(), pa.string()),
        "resolved_by": pa.array(resolved_by.tolist(), pa.string()),
        "resolved_ts_ms": pa.array(resolved_ts, mask=~stored),
    }
    for f in OUTPUT_COLUMNS:
        table = table.append_column(f, pa.chunked_array([cols[f.name]], f.type))
    return table
