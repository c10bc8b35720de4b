"""The windowed summary tables of merged aggregates: ``isolation_intervals``, ``broker_windows``
(every broker x every window of its run, zeros included), ``queue_windows`` and ``producer_windows``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from rocketsim.tables import schemas
from rocketsim.tables.grouping import Groups, all_found, bools, from_codes, ints, joint_lookup
from rocketsim.tables.summaries.aggregates import (
    COUNT_FIELDS,
    I64,
    PERCENTILE_COLUMNS,
    PERCENTILES,
    SPREAD_PARTIALS,
    STORE_SUMS,
    SummaryAggregates,
)
from rocketsim.tables.summaries.arithmetic import (
    arrow_column,
    percentile_columns,
    queue_spread,
    rate_per_s,
    ratio,
    spread_partials,
)
from rocketsim.tables.summaries.grid import Grid, Runs, key_columns, output_table
from rocketsim.tables.summaries.windows import interval_windows


def isolation_table(merged: SummaryAggregates, runs: Runs) -> pa.Table:
    """``isolation_intervals``: the producers' intervals."""
    t = merged.intervals
    run = runs.run["intervals"]
    cols = {
        **key_columns(runs, merged.key_names, run),
        **{n: t.column(n) for n in t.column_names if n not in merged.key_names},
    }
    return output_table("isolation_intervals", merged.key_names, cols)


def broker_windows(merged: SummaryAggregates, runs: Runs, grid: Grid) -> pa.Table:
    """``broker_windows``: every broker of a run that got an
    attempt x every window of the run, zeros included; counts, rates, exact attempt-latency
    percentiles, producers isolating the broker, queue skew/Gini over the broker's queues."""
    w = merged.window_ms
    cells = merged.attempt_cells
    c_run, c_broker = runs.run["attempt_cells"], runs.broker["attempt_cells"]
    c_window = ints(cells, "window_start_ms") // w
    if cells.num_rows:
        pairs = Groups([c_run, c_broker])
        p_run, p_broker = c_run[pairs.first], c_broker[pairs.first]
    else:
        p_run = p_broker = np.zeros(0, np.int64)
    row, window = grid.windows(p_run)
    g_run, g_broker = p_run[row], p_broker[row]  # the grid, sorted by (run, broker, window)
    n = len(row)

    def at(run: np.ndarray, broker_code: np.ndarray, window_idx: np.ndarray) -> np.ndarray:
        return all_found(joint_lookup([g_run, g_broker, window], [run, broker_code, window_idx]))

    cols: dict[str, object] = {}
    pos = at(c_run, c_broker, c_window)
    for f in COUNT_FIELDS:
        values = np.zeros(n, np.int64)
        values[pos] = ints(cells, f.name)
        cols[f.name] = values
    rate, valid = ratio(cols["sends"] - cols["ok"], cols["sends"])
    cols["error_rate"] = arrow_column(rate, pa.float64(), valid)
    cols["publish_rate_per_s"] = rate_per_s(cols["ok"], w)
    cols.update(_store_columns(cells, pos, n, w))

    lat = merged.attempt_latency
    l_pos = at(runs.run["attempt_latency"], runs.broker["attempt_latency"], ints(lat, "window_start_ms") // w)
    values, counts = ints(lat, "latency_ms"), ints(lat, "count")
    cols.update(
        percentile_columns(l_pos, values, counts, n, PERCENTILES, PERCENTILE_COLUMNS, "latency_max_ms")
    )

    q = merged.queue_cells
    q_pos = at(runs.run["queue_cells"], runs.broker["queue_cells"], ints(q, "window_start_ms") // w)
    present, total, busiest, sum_ix = spread_partials(q_pos, ints(q, "sends"), n)
    skew, gini, valid = queue_spread(present, total, busiest, sum_ix, grid.queues_per(g_run, g_broker))
    cols["queue_skew"] = arrow_column(skew, pa.float64(), valid)
    cols["queue_gini"] = arrow_column(gini, pa.float64(), valid)

    d = merged.delivery_cells
    d_pos = at(runs.run["delivery_cells"], runs.broker["delivery_cells"], ints(d, "window_start_ms") // w)
    for name in schemas.DELIVERY_COLUMNS:
        values = np.zeros(n, np.int64)
        values[d_pos] = ints(d, name)
        cols[name] = values

    cols["isolated_producers"] = _isolated_producers(merged, runs, grid, (g_run, g_broker, window))
    cols.update(key_columns(runs, merged.key_names, g_run))
    cols["broker"] = from_codes(g_broker, runs.brokers, dictionary=False)
    cols["window_start_ms"] = window * np.int64(w)
    cols["window_ms"] = np.full(n, w, np.int64)
    return output_table("broker_windows", merged.key_names, cols)


def _store_columns(cells: pa.Table, pos: np.ndarray, n: int, window_ms: int) -> dict[str, pa.Array]:
    """broker_windows' closed-loop store columns from the attempt cells at grid rows ``pos``."""
    sums = {}
    for name in (*STORE_SUMS, "queue_depth_max"):
        values = np.zeros(n, np.int64) if name != "queue_depth_max" else np.full(n, -1, np.int64)
        values[pos] = ints(cells, name)
        sums[name] = values
    seen = sums["store_requests"] > 0
    mean, _ = ratio(sums["queue_depth_sum"].astype(np.float64), sums["store_requests"])
    util = sums["store_service_us"].astype(np.float64) / (window_ms * 1000.0)
    return {
        "queue_depth_mean": arrow_column(mean, pa.float64(), seen),
        "queue_depth_max": arrow_column(sums["queue_depth_max"], I64, seen),
        "utilisation": arrow_column(util, pa.float64(), seen),
    }


def _isolated_producers(
    merged: SummaryAggregates, runs: Runs, grid: Grid, cells: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> np.ndarray:
    """``countDistinct(producer)`` of the intervals overlapping each (run, broker, window) cell."""
    g_run, g_broker, g_window = cells
    out = np.zeros(len(g_run), np.int64)
    t = merged.intervals
    if not t.num_rows or not len(g_run):
        return out
    i_run = runs.run["intervals"]
    row, window = interval_windows(t, merged.window_ms, grid.lo[i_run], grid.hi[i_run])
    at = joint_lookup([g_run, g_broker, g_window], [i_run[row], runs.broker["intervals"][row], window])
    hit = at >= 0
    distinct = Groups([at[hit], ints(t, "producer")[row][hit]]) if hit.any() else None
    if distinct is not None:
        np.add.at(out, at[hit][distinct.first], 1)
    return out


def queue_windows(merged: SummaryAggregates, runs: Runs, grid: Grid) -> pa.Table:
    """``queue_windows``: every queue of a run (a (broker, queue)
    that got an attempt) x every window of the run: attempts, ok attempts, and skew: attempts over
    the mean of the broker's queues in that window (null when that mean is 0)."""
    w = merged.window_ms
    row, window = grid.windows(grid.queue_run)
    g_run, g_broker, g_queue = grid.queue_run[row], grid.queue_broker[row], grid.queue_id[row]
    n = len(row)
    q = merged.queue_cells
    pos = all_found(
        joint_lookup(
            [g_run, g_broker, g_queue, window],
            [
                runs.run["queue_cells"],
                runs.broker["queue_cells"],
                ints(q, "queue_id"),
                ints(q, "window_start_ms") // w,
            ],
        )
    )
    sends, ok = np.zeros(n, np.int64), np.zeros(n, np.int64)
    sends[pos], ok[pos] = ints(q, "sends"), ints(q, "ok")
    skew = np.zeros(n, np.float64)
    valid = np.zeros(n, bool)
    if n:
        cell = Groups([g_run, g_broker, window])
        mean = cell.sum(sends).astype(np.float64) / cell.count().astype(np.float64)  # avg over the window
        m = mean[cell.index]
        valid = m > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            skew = sends.astype(np.float64) / np.where(valid, m, 1.0)
    cols = {
        **key_columns(runs, merged.key_names, g_run),
        "broker": from_codes(g_broker, runs.brokers, dictionary=False),
        "queue_id": pa.array(g_queue.astype(np.int32)),
        "window_start_ms": window * np.int64(w),
        "window_ms": np.full(n, w, np.int64),
        "sends": sends,
        "ok": ok,
        "skew": arrow_column(skew, pa.float64(), valid),
    }
    return output_table("queue_windows", merged.key_names, cols)


def producer_window_table(merged: SummaryAggregates, runs: Runs, grid: Grid) -> pa.Table:
    """``producer_windows``: the producers' rows, with queue
    skew/Gini over every queue of the run."""
    t = merged.producer_windows
    run = runs.run["producer_windows"]
    present, total, busiest, sum_ix = (
        np.asarray(t.column(n).fill_null(0).to_numpy(), np.int64) for n in SPREAD_PARTIALS
    )
    has = bools(t.column("queue_total").is_valid())
    skew, gini, valid = queue_spread(present, total, busiest, sum_ix, grid.queues_per(run, None))
    valid &= has
    cols = {
        **key_columns(runs, merged.key_names, run),
        **{n: t.column(n) for n in t.column_names if n not in merged.key_names},
        "queue_skew": arrow_column(skew, pa.float64(), valid),
        "queue_gini": arrow_column(gini, pa.float64(), valid),
    }
    return output_table("producer_windows", merged.key_names, cols)
