"""Load a run's (or a comparison's) analysis tables as pandas: what the notebooks and the report read.

No SparkSession is started: the tables are read with ``deltalake``
(:func:`rocketsim.warehouse.read.read_pandas`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from rocketsim.present.timeline import FaultSpan, Timeline, fault_spans, producers_stop_ms
from rocketsim.scenario import Scenario, ScenarioError
from rocketsim.scenario.variants import scenario_of_run
from rocketsim.tables import schemas
from rocketsim.warehouse.read import is_table, list_runs, read_pandas, read_run


def find_warehouse(path: str | os.PathLike[str] = "warehouse") -> str:
    """``path`` if it exists, else the same name one folder up (a notebook runs in ``notebooks/``)."""
    p = Path(path)
    if p.is_dir() or p.is_absolute():
        return str(p)
    parent = Path("..") / p
    return str(parent) if parent.is_dir() else str(p)


def _empty(table: str) -> pd.DataFrame:
    return schemas.TABLES[table].schema.empty_table().to_pandas()


def _read(warehouse: str, run_id: str, tables: Sequence[str]) -> dict[str, pd.DataFrame]:
    """The run's rows of ``tables`` as one version of ``run_commits`` names them (never one table of a
    rerun beside one of the run it replaced); an empty frame with the declared columns for a table the
    run does not hold (a summaries-only run's broker side: its charts are left out)."""
    return {t: rows.to_pandas() for t, rows in read_run(warehouse, run_id, tables, unwritten_ok=True).items()}


def latest_run(warehouse: str, table: str = "run_summary") -> str:
    """The most recent run (by ``runs.started_at``) that has rows in ``table``; else the last run id."""
    have = list_runs(warehouse, table)
    if not have:
        job = "compare --scenario FILE --variant ..." if table == "comparisons" else "run --scenario FILE"
        raise FileNotFoundError(
            f"no run in {Path(warehouse).resolve()}/{table}: make one with `rocketsim {job}`, or name "
            "the warehouse that holds one"
        )
    if is_table(warehouse, "runs"):
        runs = read_pandas(warehouse, "runs", columns=["run_id", "started_at"])
        runs = runs[runs.run_id.isin(have)].sort_values(["started_at", "run_id"])
        if len(runs):
            return str(runs.run_id.iloc[-1])
    return have[-1]


def latest_comparison(warehouse: str) -> str:
    """The most recent comparison (``jobs/compare.py``) in the warehouse."""
    return latest_run(warehouse, "comparisons")


def _runs_row(runs: pd.DataFrame) -> dict | None:
    rows = runs.to_dict("records")
    return rows[0] if rows else None


def scenario_of(runs_row: dict | None, extra_overrides: Sequence[str] = ()) -> Scenario | None:
    """The scenario a run ran (:func:`rocketsim.scenario.variants.scenario_of_run`); None if unknown."""
    if not runs_row:
        return None
    try:
        return scenario_of_run(runs_row, extra_overrides)
    except ScenarioError:
        return None  # written by another version of rocketsim: charts go without the fault shading


@dataclass(frozen=True)
class RunData:
    """Everything the run charts need, as pandas frames."""

    run_id: str
    summary: pd.DataFrame  # run_summary
    broker_windows: pd.DataFrame
    queue_windows: pd.DataFrame
    producer_windows: pd.DataFrame
    intervals: pd.DataFrame  # isolation_intervals
    runs_row: dict | None = None
    scenario: Scenario | None = None
    faults: list[FaultSpan] = field(default_factory=list)
    storage: pd.DataFrame = field(default_factory=pd.DataFrame)  # broker_storage (empty: not run)
    consumer_load: pd.DataFrame = field(default_factory=pd.DataFrame)
    # fault_windows (empty: a run without faults, or written before the table)
    fault_windows: pd.DataFrame = field(default_factory=lambda: _empty("fault_windows"))

    @property
    def span_ms(self) -> int:
        """The run's span (first birth to last send end), from run_summary: the charts' ``end_ms``
        (:mod:`rocketsim.present.timeline`)."""
        rows = self.summary[self.summary.scope == "all"]
        return int(rows.duration_ms.iloc[0]) if len(rows) else 0

    @property
    def timeline(self) -> Timeline:
        """What the run's charts mark on their time axes: its faults, its end, where producers stop."""
        return Timeline(tuple(self.faults), self.span_ms, producers_stop_ms(self.producer_windows))

    @property
    def brokers(self) -> list[str]:
        """The run's brokers (its run_summary scopes), sorted."""
        return sorted(s for s in self.summary.scope.unique() if s != "all")


RUN_TABLES = (
    "run_summary",
    "fault_windows",
    "broker_windows",
    "queue_windows",
    "producer_windows",
    "isolation_intervals",
    "runs",
    "broker_storage",
    "consumer_load",
)


def load_run(warehouse: str, run_id: str) -> RunData:
    """Read a run's summary and broker-side tables (small: per window, per queue, per interval; no
    per-message rows), all as one version of ``run_commits`` names them."""
    t = _read(warehouse, run_id, RUN_TABLES)
    if t["run_summary"].empty:
        raise FileNotFoundError(f"run {run_id!r} has no run_summary rows in {Path(warehouse).resolve()}")
    row = _runs_row(t["runs"])
    sc = scenario_of(row)
    return RunData(
        run_id=run_id,
        summary=t["run_summary"],
        broker_windows=t["broker_windows"],
        queue_windows=t["queue_windows"],
        producer_windows=t["producer_windows"],
        intervals=t["isolation_intervals"],
        runs_row=row,
        scenario=sc,
        faults=fault_spans(sc) if sc is not None else [],
        storage=t["broker_storage"],
        consumer_load=t["consumer_load"],
        fault_windows=t["fault_windows"],
    )


@dataclass(frozen=True)
class ComparisonData:
    """A comparison's rows and windows, with its variants in the order they were given."""

    run_id: str
    rows: pd.DataFrame  # comparisons (long: variant, scope, metric, value, baseline_value, delta, ...)
    windows: pd.DataFrame  # comparison_windows
    variants: list[str]
    baseline: str
    overrides: dict[str, list[str]]
    runs_row: dict | None = None
    faults: dict[str, list[FaultSpan]] = field(default_factory=dict)

    @property
    def timelines(self) -> dict[str, Timeline]:
        """Each variant's :class:`Timeline`: its faults and its run's end (``duration_ms``)."""
        d = self.rows[(self.rows["scope"] == "all") & (self.rows["metric"] == "duration_ms")]
        ends = {str(v): int(x) for v, x in zip(d["variant"], d["value"], strict=True) if pd.notna(x)}
        return {v: Timeline(tuple(self.faults.get(v, ())), ends.get(v)) for v in self.variants}


def load_comparison(warehouse: str, run_id: str) -> ComparisonData:
    """Read a comparison written by ``jobs/compare.py``."""
    t = _read(warehouse, run_id, ("comparisons", "comparison_windows", "runs"))
    rows, windows = t["comparisons"], t["comparison_windows"]
    if rows.empty:
        raise FileNotFoundError(
            f"comparison {run_id!r} has no rows in {Path(warehouse).resolve()}/comparisons"
        )
    firsts = rows.drop_duplicates("variant")
    overrides = {r.variant: list(r.overrides) for r in firsts.itertuples()}
    baseline = str(rows.baseline.iloc[0])
    # the baseline first, then the others in name order (the table keeps no order)
    variants = [baseline, *sorted(v for v in overrides if v != baseline)]
    row = _runs_row(t["runs"])
    faults: dict[str, list[FaultSpan]] = {}
    for v in variants:
        sc = scenario_of(row, overrides[v])
        faults[v] = fault_spans(sc) if sc is not None else []
    return ComparisonData(run_id, rows, windows, variants, baseline, overrides, row, faults)
