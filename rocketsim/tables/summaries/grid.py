"""The runs and the grid of merged summary aggregates: each run's key values and brokers as codes
(:class:`Runs`), its windows and queues (:class:`Grid`), and the output table of a summary schema.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from rocketsim.tables import schemas
from rocketsim.tables.grouping import Groups, ints, joint_codes, joint_lookup
from rocketsim.tables.summaries.aggregates import SummaryAggregates, with_keys


@dataclass(frozen=True)
class Runs:
    """The runs (key tuples) and brokers of merged aggregates, as codes."""

    run: dict[str, np.ndarray]  # per aggregate table: each row's run
    broker: dict[str, np.ndarray]  # per aggregate table with a broker column: each row's broker (-1 null)
    key_values: list[pa.Array]  # per key column: its value per run
    brokers: pa.Array  # broker names, sorted
    n_runs: int


def runs_of(merged: SummaryAggregates) -> Runs:
    """The :class:`Runs` of merged aggregates (one run when they have no key columns)."""
    tables = merged.tables()
    names = list(tables)
    per_key = []
    key_values = []
    for key in merged.key_names:
        codes, values = joint_codes([tables[n].column(key) for n in names])
        per_key.append(codes)
        key_values.append(values)
    lengths = [tables[n].num_rows for n in names]
    if per_key:
        stacked = [np.concatenate(c) for c in per_key]
        g = Groups(stacked) if len(stacked[0]) else None
        run_all = g.index if g is not None else np.zeros(0, np.int64)
        n_runs = g.n if g is not None else 0
        run_keys = [
            values.take(pa.array(s[g.first] if g is not None else np.zeros(0, np.int64)))
            for s, values in zip(stacked, key_values, strict=True)
        ]
    else:
        run_all = np.zeros(sum(lengths), np.int64)
        n_runs = 1
        run_keys = []
    run = dict(zip(names, np.split(run_all, np.cumsum(lengths)[:-1]), strict=True))
    with_broker = [n for n in names if "broker" in tables[n].column_names]
    codes, brokers = joint_codes([tables[n].column("broker") for n in with_broker])
    return Runs(run, dict(zip(with_broker, codes, strict=True)), run_keys, brokers, n_runs)


def key_columns(runs: Runs, key_names: Sequence[str], run: np.ndarray) -> dict[str, pa.Array]:
    """The key columns of rows of runs ``run``."""
    return {k: runs.key_values[i].take(pa.array(run)) for i, k in enumerate(key_names)}


def output_table(schema_name: str, key_names: Sequence[str], cols: Mapping[str, object]) -> pa.Table:
    """The summary table ``schema_name`` (its data schema, the key columns first) of ``cols``."""
    schema = with_keys(schemas.data_schema(schemas.TABLES[schema_name].schema), key_names, pa.string())
    return pa.table({f.name: cols[f.name] for f in schema}, schema=schema)


@dataclass(frozen=True)
class Grid:
    """Each run's windows (first to last window of attempt start) and queues (with any attempt)."""

    lo: np.ndarray  # per run: first window index (no attempts: lo > hi)
    hi: np.ndarray
    queue_run: np.ndarray  # the run's (broker, queue) pairs, sorted
    queue_broker: np.ndarray
    queue_id: np.ndarray

    @staticmethod
    def of(merged: SummaryAggregates, runs: Runs) -> Grid:
        w = merged.window_ms
        # the windows of attempt starts (and of the send starts of delivery outcomes: a send begins
        # before its first attempt, in an earlier window only if an executor held it across the edge)
        run = np.concatenate([runs.run["attempt_cells"], runs.run["delivery_cells"]])
        index = np.concatenate(
            [ints(t, "window_start_ms") // w for t in (merged.attempt_cells, merged.delivery_cells)]
        )
        lo = np.full(runs.n_runs, 1, np.int64)
        hi = np.zeros(runs.n_runs, np.int64)
        if len(run):
            g = Groups([run])
            has = run[g.first]
            lo[has], hi[has] = g.min(index), g.max(index)
        q = merged.queue_cells
        q_run, q_broker, q_id = runs.run["queue_cells"], runs.broker["queue_cells"], ints(q, "queue_id")
        if q.num_rows:
            g = Groups([q_run, q_broker, q_id])
            q_run, q_broker, q_id = q_run[g.first], q_broker[g.first], q_id[g.first]
        return Grid(lo, hi, q_run, q_broker, q_id)

    def windows(self, run: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row of ``run``, window index): each row of ``run`` crossed with its run's windows."""
        n = np.maximum(self.hi[run] - self.lo[run] + 1, 0)
        row = np.repeat(np.arange(len(run)), n)
        within = np.arange(len(row)) - np.repeat(np.cumsum(n) - n, n)
        return row, self.lo[run[row]] + within

    def queues_per(self, run: np.ndarray, broker_code: np.ndarray | None) -> np.ndarray:
        """How many of the run's queues each (run, broker) has (broker None: the run's in all)."""
        if broker_code is None:
            counts = np.bincount(self.queue_run, minlength=max(len(self.lo), 1))
            return counts[run].astype(np.int64)
        pairs = Groups([self.queue_run, self.queue_broker]) if len(self.queue_run) else None
        if pairs is None:
            return np.zeros(len(run), np.int64)
        at = joint_lookup([self.queue_run[pairs.first], self.queue_broker[pairs.first]], [run, broker_code])
        return np.where(at >= 0, pairs.count()[np.maximum(at, 0)], 0)
