"""``run_summary``: per run a row "all" and one per broker that stored a result or got an attempt,
from merged summary aggregates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim.tables import schemas
from rocketsim.tables.grouping import Groups, from_codes, ints, joint_lookup
from rocketsim.tables.summaries.aggregates import (
    BUSY_COLUMNS,
    OUTCOME_COLUMNS,
    PERCENTILE_COLUMNS,
    PERCENTILES,
    QUEUE_WAIT_COLUMNS,
    QUEUE_WAIT_PERCENTILES,
    STATUS_COLUMNS,
    SummaryAggregates,
)
from rocketsim.tables.summaries.arithmetic import (
    arrow_column,
    percentile_columns,
    queue_spread,
    ratio,
    spread_partials,
)
from rocketsim.tables.summaries.grid import Grid, Runs, key_columns, output_table


@dataclass(frozen=True)
class _Scopes:
    """The rows of ``run_summary``: (run, broker code) pairs in order, broker -1 for a run's "all" row
    (every run with results or attempts), the brokers that stored a result or got an attempt."""

    run: np.ndarray
    broker: np.ndarray
    is_all: np.ndarray

    @staticmethod
    def of(runs: Runs) -> _Scopes:
        s_run, s_broker = runs.run["result_scopes"], runs.broker["result_scopes"]
        c_run, c_broker = runs.run["attempt_cells"], runs.broker["attempt_cells"]
        s_all = np.concatenate([s_run, c_run])
        s_b = np.concatenate([np.where(s_broker >= 0, s_broker, -2), c_broker])
        keep = s_b >= 0
        scope_run = np.concatenate([s_all, s_all[keep]])
        scope_broker = np.concatenate([np.full(len(s_all), -1), s_b[keep]])
        if len(scope_run):
            sg = Groups([scope_run, scope_broker])
            scope_run, scope_broker = scope_run[sg.first], scope_broker[sg.first]
        return _Scopes(scope_run, scope_broker, scope_broker < 0)

    @property
    def n(self) -> int:
        return len(self.run)

    def at(self, run: np.ndarray, broker_code: np.ndarray) -> np.ndarray:
        """The row of each (run, broker code); -1 for none."""
        return joint_lookup([self.run, self.broker], [run, broker_code])

    def all_and_broker(self, run: np.ndarray, broker_code: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows mapped to their run's "all" scope and to their broker's (if any): (source row, scope)."""
        rows = np.arange(len(run))
        to_all = self.at(run, np.full(len(run), -1))
        has_b = broker_code >= 0
        to_b = self.at(run[has_b], broker_code[has_b])
        return np.concatenate([rows, rows[has_b]]), np.concatenate([to_all, to_b])


def run_summary_table(merged: SummaryAggregates, runs: Runs, grid: Grid) -> pa.Table:
    """``run_summary``: per run a row "all" and one per broker that
    stored a result or got an attempt. Message columns count the results stored on the broker (all
    results for "all"; their send latency on "all" only), attempt columns the attempts sent to it (their
    latency too), isolation columns its intervals (``isolated_ms`` clipped at the run's last send end);
    rates per second of the run's span."""
    scopes = _Scopes.of(runs)
    cols, first_born, last_end = _message_columns(merged, runs, scopes)
    cols.update(_histogram_columns(merged, runs, scopes))
    cols.update(_attempt_columns(merged, runs, scopes))
    cols.update(_queue_spread_columns(merged, runs, grid, scopes))
    # the run: its span and its last send end (isolated_ms is clipped there)
    all_row = scopes.at(np.arange(runs.n_runs), np.full(runs.n_runs, -1))
    run_last_end = np.where(all_row >= 0, last_end[np.maximum(all_row, 0)], 0)
    run_first_born = np.where(all_row >= 0, first_born[np.maximum(all_row, 0)], 0)
    duration = (run_last_end - run_first_born)[scopes.run]
    cols["duration_ms"] = duration
    cols.update(_isolation_columns(merged, runs, scopes, run_last_end))
    cols["share"] = _shares(runs, scopes, cols["messages"])
    cols.update(_rate_columns(cols, duration))
    cols.update(key_columns(runs, merged.key_names, scopes.run))
    cols["scope"] = (
        pc.if_else(
            pa.array(scopes.is_all),
            pa.scalar("all"),
            # the 'all' rows are null here (if_else takes 'all'): with no send reaching any broker
            # there are no broker names at all
            from_codes(
                np.where(scopes.is_all, -1, np.maximum(scopes.broker, 0)), runs.brokers, dictionary=False
            ),
        )
        if scopes.n
        else pa.array([], pa.string())
    )
    return output_table("run_summary", merged.key_names, cols)


def _message_columns(
    merged: SummaryAggregates, runs: Runs, scopes: _Scopes
) -> tuple[dict[str, object], np.ndarray, np.ndarray]:
    """The results' counts per scope, and each scope's first born and last end time."""
    rs, n = merged.result_scopes, scopes.n
    cols: dict[str, object] = {}
    src, scope = scopes.all_and_broker(runs.run["result_scopes"], runs.broker["result_scopes"])
    for name in (
        "messages",
        *STATUS_COLUMNS,
        "attempts",
        "retries",
        "retry_budget_exhausted",
        *schemas.DELIVERY_COLUMNS,
    ):
        values = np.zeros(n, np.int64)
        np.add.at(values, scope, ints(rs, name)[src])
        cols[name] = values
    first_born = np.full(n, np.iinfo(np.int64).max, np.int64)
    last_end = np.full(n, np.iinfo(np.int64).min, np.int64)
    np.minimum.at(first_born, scope, ints(rs, "first_born_ms")[src])
    np.maximum.at(last_end, scope, ints(rs, "last_end_ms")[src])
    return cols, first_born, last_end


def _histogram_columns(merged: SummaryAggregates, runs: Runs, scopes: _Scopes) -> dict[str, pa.Array]:
    """Per scope, the percentiles and maxima of: the send calls' latency ("all" only: a send may try
    several brokers), the attempts' latency (every attempt sent to the scope) and the results' queue
    wait."""
    cols: dict[str, pa.Array] = {}
    attempt_names = schemas.ATTEMPT_LATENCY_COLUMNS
    for table, column, names, ps, max_name, brokers in (
        ("result_latency", "latency_ms", PERCENTILE_COLUMNS, PERCENTILES, "latency_max_ms", False),
        ("attempt_latency", "latency_ms", attempt_names[:-1], PERCENTILES, attempt_names[-1], True),
        (
            "result_queue_wait",
            "queue_wait_ms",
            QUEUE_WAIT_COLUMNS,
            QUEUE_WAIT_PERCENTILES,
            "queue_wait_max_ms",
            True,
        ),
    ):
        h = getattr(merged, table)
        broker = runs.broker[table] if brokers else np.full(h.num_rows, -1)
        src, scope = scopes.all_and_broker(runs.run[table], broker)
        values, counts = ints(h, column)[src], ints(h, "count")[src]
        cols.update(percentile_columns(scope, values, counts, scopes.n, ps, names, max_name))
    return cols


def _attempt_columns(merged: SummaryAggregates, runs: Runs, scopes: _Scopes) -> dict[str, np.ndarray]:
    """The attempts' counts per scope (their ok count as ``_attempts_ok``)."""
    cells = merged.attempt_cells
    src, scope = scopes.all_and_broker(runs.run["attempt_cells"], runs.broker["attempt_cells"])
    cols = {}
    for name in ("sends", *OUTCOME_COLUMNS, "bytes", *BUSY_COLUMNS):
        values = np.zeros(scopes.n, np.int64)
        np.add.at(values, scope, ints(cells, name)[src])
        cols[name if name != "ok" else "_attempts_ok"] = values
    return cols


def _queue_spread_columns(
    merged: SummaryAggregates, runs: Runs, grid: Grid, scopes: _Scopes
) -> dict[str, pa.Array]:
    """Queue skew and Gini over the run's queues (all) or the broker's."""
    q, n = merged.queue_cells, scopes.n
    q_run, q_broker, q_id = runs.run["queue_cells"], runs.broker["queue_cells"], ints(q, "queue_id")
    if q.num_rows:
        per_queue = Groups([q_run, q_broker, q_id])
        n_q = per_queue.sum(ints(q, "sends"))
        pq_run, pq_broker = q_run[per_queue.first], q_broker[per_queue.first]
        src, scope = scopes.all_and_broker(pq_run, pq_broker)
        parts = spread_partials(scope, n_q[src], n)
    else:
        parts = tuple(np.zeros(n, np.int64) for _ in range(4))
    n_queues = np.where(
        scopes.is_all, grid.queues_per(scopes.run, None), grid.queues_per(scopes.run, scopes.broker)
    )
    skew, gini, valid = queue_spread(*parts, n_queues)
    return {
        "queue_skew": arrow_column(skew, pa.float64(), valid),
        "queue_gini": arrow_column(gini, pa.float64(), valid),
    }


def _isolation_columns(
    merged: SummaryAggregates, runs: Runs, scopes: _Scopes, run_last_end: np.ndarray
) -> dict[str, np.ndarray]:
    """``isolations`` and ``isolated_ms`` per scope: the intervals of runs with results, clipped at the
    run's last send end."""
    t = merged.intervals
    isolations, isolated_ms = np.zeros(scopes.n, np.int64), np.zeros(scopes.n, np.int64)
    if t.num_rows:
        run_has_results = np.zeros(runs.n_runs, bool)
        run_has_results[runs.run["result_scopes"]] = True
        i_run = runs.run["intervals"]
        keep_i = run_has_results[i_run]  # Spark joins the intervals with the run's last result end
        i_broker = runs.broker["intervals"]
        clipped = np.maximum(np.minimum(ints(t, "end_ms"), run_last_end[i_run]) - ints(t, "start_ms"), 0)
        src, scope = scopes.all_and_broker(i_run[keep_i], i_broker[keep_i])
        found = scope >= 0  # an interval's broker always has a scope (it got the attempt)
        np.add.at(isolations, scope[found], 1)
        np.add.at(isolated_ms, scope[found], clipped[keep_i][src][found])
    return {"isolations": isolations, "isolated_ms": isolated_ms}


def _shares(runs: Runs, scopes: _Scopes, messages: np.ndarray) -> np.ndarray:
    """Each broker's share of its run's stored messages (1.0 for "all"; 0 where the run stored none)."""
    is_all = scopes.is_all
    stored = np.zeros(runs.n_runs, np.int64)
    has_stored = np.zeros(runs.n_runs, bool)
    np.add.at(stored, scopes.run[~is_all], messages[~is_all])
    has_stored[scopes.run[~is_all]] = True
    run_stored = stored[scopes.run]
    share_valid = has_stored[scopes.run] & (run_stored > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(
            is_all,
            1.0,
            np.where(
                share_valid,
                messages.astype(np.float64) / np.where(share_valid, run_stored, 1).astype(np.float64),
                0.0,
            ),
        )


def _rate_columns(cols: dict[str, object], duration: np.ndarray) -> dict[str, pa.Array]:
    """The publish rate over the run's span, the messages' and the attempts' error rates."""
    out = {}
    num = cols["ok"].astype(np.float64) * 1000.0
    rate, valid = ratio(num, duration)
    out["publish_rate_per_s"] = arrow_column(rate, pa.float64(), valid)
    rate, valid = ratio(cols["failed"] + cols["rejected"], cols["messages"])
    out["error_rate"] = arrow_column(rate, pa.float64(), valid)
    rate, valid = ratio(cols["sends"] - cols["_attempts_ok"], cols["sends"])
    out["attempt_error_rate"] = arrow_column(rate, pa.float64(), valid)
    return out
