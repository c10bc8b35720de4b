"""The summary tables of a run from small mergeable aggregates: ``isolation_intervals``, ``broker_windows``,
``queue_windows``, ``producer_windows``, ``run_summary``, ``fault_windows`` (docs/design.md §6, one pass;
the broker-side
tables:
:mod:`rocketsim.broker.side`).

* a producer task calls :func:`producer_aggregates` on its own attempts and results (whole producers):
  a :class:`SummaryAggregates` of small Arrow tables (counts, bytes, exact (value, count) latency and
  queue-wait histograms over integer ms, the producer's isolation intervals, its finished
  ``producer_windows`` rows), which travels to the driver as bytes (:meth:`SummaryAggregates.to_bytes`);
* the driver calls :func:`merge` (associative, any order gives the same value) and
  :func:`summary_tables`.

More: docs/reference/modules.md, rocketsim/tables/summaries/__init__.py.
"""

from __future__ import annotations

import pyarrow as pa

from rocketsim.tables.summaries.aggregates import (
    AGGREGATE_TABLES,
    ATTEMPT_COLUMNS,
    BUSY_COLUMNS,
    FAILED_OTHER,
    MESSAGE_COLUMNS,
    NAME,
    OK,
    OUTCOME_COLUMNS,
    OUTCOME_KINDS,
    PERCENTILE_COLUMNS,
    PERCENTILES,
    QUEUE_WAIT_COLUMNS,
    QUEUE_WAIT_PERCENTILES,
    RESULT_COLUMNS,
    SUMMARY_TABLES,
    SummaryAggregates,
    merge,
)
from rocketsim.tables.summaries.arithmetic import exact_percentiles, queue_spread
from rocketsim.tables.summaries.columns import outcome_kind
from rocketsim.tables.summaries.faults import FaultSpan, fault_spans, fault_window_table
from rocketsim.tables.summaries.grid import Grid, runs_of
from rocketsim.tables.summaries.intervals import IntervalFold, isolation_intervals
from rocketsim.tables.summaries.producer import ProducerFold, producer_aggregates
from rocketsim.tables.summaries.run_summary import run_summary_table
from rocketsim.tables.summaries.window_tables import (
    broker_windows,
    isolation_table,
    producer_window_table,
    queue_windows,
)
from rocketsim.tables.summaries.windows import WindowParts, merge_window_parts

__all__ = [
    "AGGREGATE_TABLES",
    "ATTEMPT_COLUMNS",
    "BUSY_COLUMNS",
    "FAILED_OTHER",
    "MESSAGE_COLUMNS",
    "NAME",
    "OK",
    "OUTCOME_COLUMNS",
    "OUTCOME_KINDS",
    "PERCENTILES",
    "PERCENTILE_COLUMNS",
    "QUEUE_WAIT_COLUMNS",
    "QUEUE_WAIT_PERCENTILES",
    "RESULT_COLUMNS",
    "SUMMARY_TABLES",
    "FaultSpan",
    "IntervalFold",
    "ProducerFold",
    "SummaryAggregates",
    "WindowParts",
    "exact_percentiles",
    "fault_spans",
    "isolation_intervals",
    "merge",
    "merge_window_parts",
    "outcome_kind",
    "producer_aggregates",
    "queue_spread",
    "summary_tables",
]


def summary_tables(merged: SummaryAggregates) -> dict[str, pa.Table]:
    """Every summary table of the merged aggregates, with the schemas of :mod:`rocketsim.tables.schemas`
    (without ``run_id``; the key columns first): ``isolation_intervals``, ``broker_windows``,
    ``queue_windows``, ``producer_windows``, ``run_summary``, ``fault_windows`` (see their functions)."""
    runs = runs_of(merged)
    grid = Grid.of(merged, runs)
    return {
        "isolation_intervals": isolation_table(merged, runs),
        "broker_windows": broker_windows(merged, runs, grid),
        "queue_windows": queue_windows(merged, runs, grid),
        "producer_windows": producer_window_table(merged, runs, grid),
        "run_summary": run_summary_table(merged, runs, grid),
        "fault_windows": fault_window_table(merged, runs),
    }
