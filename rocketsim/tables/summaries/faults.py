"""``fault_windows``: what happened during each fault of the scenario against the rest of the run (the
fault-window view), from merged summary aggregates.

A producer task splits its attempts (by their start) and its messages (by their send's start) at each
fault's window (:func:`fault_parts`: per fault, the period "during" and the rest, "outside"); the driver
makes one row per (fault, period, scope) of the merged parts (:func:`fault_window_table`), with the
isolation intervals (whole producers') split the same way. Each fault's two periods add up to the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim.tables import schemas
from rocketsim.tables.grouping import Groups, from_codes, ints, joint_lookup
from rocketsim.tables.summaries.aggregates import (
    AGGREGATE_TABLES,
    BUSY_COLUMNS,
    COUNT_FIELDS,
    OUTCOME_COLUMNS,
    PERCENTILE_COLUMNS,
    PERCENTILES,
    STATUS_COLUMNS,
    SummaryAggregates,
)
from rocketsim.tables.summaries.arithmetic import arrow_column, histogram, percentile_columns, ratio
from rocketsim.tables.summaries.cells import QueueCells
from rocketsim.tables.summaries.columns import AttemptColumns, ResultColumns
from rocketsim.tables.summaries.grid import Runs, key_columns, output_table

PERIODS = ("during", "outside")  # fault_windows.period, in the order of its rows
# the aggregate tables of the fault-window view
FAULT_TABLES = (
    "fault_spans",
    "fault_attempt_cells",
    "fault_attempt_latency",
    "fault_results",
    "fault_result_latency",
)
_ATTEMPT_LATENCY = schemas.ATTEMPT_LATENCY_COLUMNS
COUNT_NAMES = tuple(f.name for f in COUNT_FIELDS)  # fault_attempt_cells' counts


class _Fault(Protocol):
    """What :func:`fault_spans` reads of a scenario's fault (``FaultConfig``)."""

    broker: str
    kind: str

    @property
    def start_ms(self) -> int: ...

    @property
    def end_ms(self) -> int: ...


@dataclass(frozen=True)
class FaultSpan:
    """One fault of a scenario as the fault-window view reads it: its place in ``[[faults]]``, the broker
    it hits, its kind and its window ``[start_ms, end_ms)``."""

    fault: int
    broker: str
    kind: str
    start_ms: int
    end_ms: int


def fault_spans(faults: Sequence[_Fault]) -> tuple[FaultSpan, ...]:
    """A scenario's ``faults`` (its ``[[faults]]`` entries, in order) as :class:`FaultSpan`."""
    return tuple(FaultSpan(i, f.broker, f.kind, f.start_ms, f.end_ms) for i, f in enumerate(faults))


# ---- a producer task's part ---------------------------------------------------------------------


def _spans_table(spans: Sequence[FaultSpan]) -> pa.Table:
    return pa.table(
        {
            "fault": pa.array([s.fault for s in spans], pa.int32()),
            "fault_broker": pa.array([s.broker for s in spans]).dictionary_encode(),
            "fault_kind": pa.array([s.kind for s in spans]).dictionary_encode(),
            "fault_start_ms": pa.array([s.start_ms for s in spans], pa.int64()),
            "fault_end_ms": pa.array([s.end_ms for s in spans], pa.int64()),
        }
    ).cast(AGGREGATE_TABLES["fault_spans"])


def _during(times: np.ndarray, span: FaultSpan) -> np.ndarray:
    """1 where a row's time is in the fault's window, else 0."""
    return ((times >= span.start_ms) & (times < span.end_ms)).astype(np.int64)


def _cell(span: FaultSpan, during: np.ndarray) -> dict[str, pa.Array]:
    """The fault and period columns of rows in the periods ``during``."""
    return {
        "fault": pa.array(np.full(len(during), span.fault, np.int32)),
        "during": pa.array(np.asarray(during).astype(np.int8)),
    }


def _fault_attempts(a: AttemptColumns, q: QueueCells, span: FaultSpan) -> tuple[pa.Table, pa.Table]:
    """fault_attempt_cells and fault_attempt_latency of one fault (``q``: the attempts' queue cells).
    A part whose attempts all started in one period (all but the parts a fault's start or end cuts) is
    counted per broker from its queue cells."""
    during = _during(a.start, span)
    if during.min() == during.max():
        brokers = Groups([q.broker])  # of the queue cells
        f, period = brokers.first, np.full(brokers.n, during[0])
        counts = {name: brokers.sum(q.counts[name]) for name in COUNT_NAMES}
        group, latency, count = histogram(brokers.index[q.rows.index], a.latency, brokers.n)
        at = f[group]
        keys, at_keys = (period, q.broker[f]), (period[group], q.broker[at])
    else:
        g = Groups([during, a.broker])
        f = g.first
        counts = a.counts(g)
        group, latency, count = histogram(g.index, a.latency, g.n)
        at = f[group]
        keys, at_keys = (during[f], a.broker[f]), (during[at], a.broker[at])
    cells = pa.table({**_cell(span, keys[0]), "broker": from_codes(keys[1], a.broker_names)} | counts)
    latencies = pa.table(
        {
            **_cell(span, at_keys[0]),
            "broker": from_codes(at_keys[1], a.broker_names),
            "latency_ms": latency,
            "count": count,
        }
    )
    return cells, latencies


def _fault_results(r: ResultColumns, span: FaultSpan) -> tuple[pa.Table, pa.Table]:
    """fault_results and fault_result_latency of one fault."""
    during = _during(r.send, span)
    g = Groups([during, r.broker])
    first = g.first
    results = pa.table(
        {
            **_cell(span, during[first]),
            "broker": from_codes(r.broker[first], r.broker_names),
            "messages": g.count(),
            **{name: g.sum(r.status[name]) for name in STATUS_COLUMNS},
            **{name: g.sum(values) for name, values in r.delivery.items()},
        }
    )
    periods = Groups([during])
    group, latency, count = histogram(periods.index, r.latency, periods.n)
    latencies = pa.table({**_cell(span, during[periods.first[group]]), "latency_ms": latency, "count": count})
    return results, latencies


def fault_parts(
    a: AttemptColumns, q: QueueCells, r: ResultColumns, spans: Sequence[FaultSpan]
) -> dict[str, pa.Table]:
    """The fault-window aggregates of some whole messages' attempts ``a`` (``q``: their queue cells) and
    results ``r`` (:data:`FAULT_TABLES`, without key columns): each attempt counted in each fault's period
    it started in, each message in the period its send began in (one fault at a time, the rows in place)."""
    out = {name: AGGREGATE_TABLES[name].empty_table() for name in FAULT_TABLES}
    if not spans:
        return out
    out["fault_spans"] = _spans_table(spans)
    for names, rows, of in (
        (("fault_attempt_cells", "fault_attempt_latency"), a.n, lambda s: _fault_attempts(a, q, s)),
        (("fault_results", "fault_result_latency"), r.n, lambda s: _fault_results(r, s)),
    ):
        if rows:
            parts = [of(span) for span in spans]
            for k, name in enumerate(names):
                out[name] = pa.concat_tables([p[k].cast(AGGREGATE_TABLES[name]) for p in parts])
    return {name: t.cast(AGGREGATE_TABLES[name]) for name, t in out.items()}


# ---- the driver's table -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rows:
    """The rows of ``fault_windows`` in key order: (run, fault, period: 0 during / 1 outside, broker code:
    -1 for "all"), and each row's fault (a row of the merged ``fault_spans``)."""

    run: np.ndarray
    fault: np.ndarray
    outside: np.ndarray
    broker: np.ndarray
    span: np.ndarray

    @staticmethod
    def of(merged: SummaryAggregates, runs: Runs) -> _Rows:
        """Per fault of each run, per period: "all", then every broker the run sent an attempt to."""
        cells = merged.fault_attempt_cells
        c_run, c_broker = runs.run["fault_attempt_cells"], runs.broker["fault_attempt_cells"]
        pairs = Groups([c_run, c_broker]) if cells.num_rows else None
        brokers_of: dict[int, list[int]] = {}
        if pairs is not None:
            for run, broker in zip(c_run[pairs.first], c_broker[pairs.first], strict=True):
                brokers_of.setdefault(int(run), []).append(int(broker))
        faults = ints(merged.fault_spans, "fault")
        parts: list[tuple[int, int, int, int, int]] = []
        for span, run in enumerate(runs.run["fault_spans"]):
            for outside in (0, 1):
                for broker in (-1, *sorted(brokers_of.get(int(run), []))):
                    parts.append((int(run), int(faults[span]), outside, broker, span))
        cols = np.array(parts, np.int64).reshape(-1, 5).T
        return _Rows(*cols)

    @property
    def n(self) -> int:
        return len(self.run)

    def at(self, run: np.ndarray, fault: np.ndarray, outside: np.ndarray, broker: np.ndarray) -> np.ndarray:
        """The row of each (run, fault, period, broker code); -1 for none."""
        if not self.n:
            return np.full(len(run), -1, np.int64)
        keys = [self.run, self.fault, self.outside, self.broker]
        return joint_lookup(keys, [run, fault, outside, broker])

    def targets(self, runs: Runs, merged: SummaryAggregates, table: str) -> tuple[np.ndarray, np.ndarray]:
        """The rows of an aggregate table mapped to their "all" row and to their broker's (when it has
        one): (source row, fault_windows row)."""
        t = getattr(merged, table)
        run, fault = runs.run[table], ints(t, "fault")
        outside = 1 - ints(t, "during")
        src = np.arange(t.num_rows)
        dst = self.at(run, fault, outside, np.full(t.num_rows, -1))
        if table in runs.broker:
            broker = runs.broker[table]
            has = broker >= 0
            src = np.concatenate([src, src[has]])
            dst = np.concatenate([dst, self.at(run[has], fault[has], outside[has], broker[has])])
        if (dst < 0).any():
            raise AssertionError(f"fault_windows: rows of {table} without a row of the table")
        return src, dst


def fault_window_table(merged: SummaryAggregates, runs: Runs) -> pa.Table:
    """``fault_windows``: per fault of each run, per period (during its window, outside it) and scope
    ("all", each broker with an attempt): the attempts that started in the period (counts by failure
    class, the traffic share, latency), the messages whose send began in it (statuses, send latency on
    "all", delivery outcomes; a broker: those its last attempt went to) and the isolations that began in
    it (and their producer-ms within it)."""
    rows = _Rows.of(merged, runs)
    cols: dict[str, object] = {}
    cols.update(_attempt_columns(merged, runs, rows))
    cols.update(_message_columns(merged, runs, rows))
    first_born, last_end = _run_span(merged, runs)
    cols.update(_span_columns(merged, rows, first_born, last_end))
    cols.update(_isolation_columns(merged, runs, rows, last_end))
    cols.update(key_columns(runs, merged.key_names, rows.run))
    cols["period"] = pa.array(np.array(PERIODS, object)[rows.outside], pa.string())
    names = from_codes(np.maximum(rows.broker, 0), runs.brokers, dictionary=False)
    cols["scope"] = pc.if_else(pa.array(rows.broker < 0), pa.scalar("all"), names) if rows.n else names
    return output_table("fault_windows", merged.key_names, cols)


def _sums(
    merged: SummaryAggregates, runs: Runs, rows: _Rows, table: str, names: Sequence[str]
) -> dict[str, np.ndarray]:
    src, dst = rows.targets(runs, merged, table)
    t = getattr(merged, table)
    out = {}
    for name in names:
        values = np.zeros(rows.n, np.int64)
        np.add.at(values, dst, ints(t, name)[src])
        out[name] = values
    return out


def _attempt_columns(merged: SummaryAggregates, runs: Runs, rows: _Rows) -> dict[str, object]:
    """The period's attempts to the scope: counts by failure class, error rate, share, latency."""
    names = ("sends", *OUTCOME_COLUMNS, *BUSY_COLUMNS)
    cols: dict[str, object] = _sums(merged, runs, rows, "fault_attempt_cells", names)
    sends = cols["sends"]
    rate, valid = ratio(sends - cols.pop("ok"), sends)
    cols["attempt_error_rate"] = arrow_column(rate, pa.float64(), valid)
    all_row = rows.at(rows.run, rows.fault, rows.outside, np.full(rows.n, -1))
    share, valid = ratio(sends, sends[all_row] if rows.n else sends)
    cols["share"] = arrow_column(share, pa.float64(), valid)
    src, dst = rows.targets(runs, merged, "fault_attempt_latency")
    h = merged.fault_attempt_latency
    values, counts = ints(h, "latency_ms")[src], ints(h, "count")[src]
    names, top = _ATTEMPT_LATENCY[:-1], _ATTEMPT_LATENCY[-1]
    cols.update(percentile_columns(dst, values, counts, rows.n, PERCENTILES, names, top))
    return cols


def _message_columns(merged: SummaryAggregates, runs: Runs, rows: _Rows) -> dict[str, object]:
    """The messages whose send began in the period: statuses, error rate, delivery, send latency."""
    names = ("messages", *STATUS_COLUMNS, *schemas.DELIVERY_COLUMNS)
    cols: dict[str, object] = _sums(merged, runs, rows, "fault_results", names)
    rate, valid = ratio(cols["failed"] + cols["rejected"], cols["messages"])
    cols["error_rate"] = arrow_column(rate, pa.float64(), valid)
    src, dst = rows.targets(runs, merged, "fault_result_latency")
    h = merged.fault_result_latency
    values, counts = ints(h, "latency_ms")[src], ints(h, "count")[src]
    names = PERCENTILE_COLUMNS
    cols.update(percentile_columns(dst, values, counts, rows.n, PERCENTILES, names, "latency_max_ms"))
    return cols


def _run_span(merged: SummaryAggregates, runs: Runs) -> tuple[np.ndarray, np.ndarray]:
    """Per run: its first birth and its last send end (0, 0 without results)."""
    first = np.zeros(runs.n_runs, np.int64)
    last = np.zeros(runs.n_runs, np.int64)
    rs = merged.result_scopes
    if rs.num_rows:
        g = Groups([runs.run["result_scopes"]])
        run = runs.run["result_scopes"][g.first]
        first[run] = g.min(ints(rs, "first_born_ms"))
        last[run] = g.max(ints(rs, "last_end_ms"))
    return first, last


def _span_columns(
    merged: SummaryAggregates, rows: _Rows, first_born: np.ndarray, last_end: np.ndarray
) -> dict[str, object]:
    """The fault's columns, and the part of the run's span in each period."""
    spans = merged.fault_spans
    start, end = ints(spans, "fault_start_ms")[rows.span], ints(spans, "fault_end_ms")[rows.span]
    lo, hi = first_born[rows.run], last_end[rows.run]
    during = np.maximum(np.minimum(end, hi) - np.maximum(start, lo), 0)
    take = pa.array(rows.span)
    return {
        "fault": pa.array(rows.fault, pa.int32()),
        "fault_broker": spans.column("fault_broker").take(take).cast(pa.string()),
        "fault_kind": spans.column("fault_kind").take(take).cast(pa.string()),
        "fault_start_ms": start,
        "fault_end_ms": end,
        "period_ms": np.where(rows.outside == 0, during, (hi - lo) - during),
    }


def _isolation_columns(
    merged: SummaryAggregates, runs: Runs, rows: _Rows, last_end: np.ndarray
) -> dict[str, np.ndarray]:
    """Isolation intervals that began in the period, and their producer-ms within it (clipped at the
    run's last send end, as run_summary's)."""
    isolations, isolated_ms = np.zeros(rows.n, np.int64), np.zeros(rows.n, np.int64)
    t = merged.intervals
    spans = merged.fault_spans
    if not t.num_rows or not spans.num_rows:
        return {"isolations": isolations, "isolated_ms": isolated_ms}
    i_run, i_broker = runs.run["intervals"], runs.broker["intervals"]
    i_start = ints(t, "start_ms")
    i_end = np.minimum(ints(t, "end_ms"), last_end[i_run])
    total = np.maximum(i_end - i_start, 0)
    fs, fe, faults = ints(spans, "fault_start_ms"), ints(spans, "fault_end_ms"), ints(spans, "fault")
    for span, run in enumerate(runs.run["fault_spans"]):
        mine = np.flatnonzero(i_run == run)
        inside = np.maximum(np.minimum(i_end[mine], fe[span]) - np.maximum(i_start[mine], fs[span]), 0)
        began = (i_start[mine] >= fs[span]) & (i_start[mine] < fe[span])
        outside = (~began).astype(np.int64)
        n = len(mine)
        run_of, fault_of = np.full(n, run), np.full(n, faults[span])
        for broker in (np.full(n, -1), i_broker[mine]):
            np.add.at(isolations, _found(rows.at(run_of, fault_of, outside, broker)), 1)
            for period, ms in ((0, inside), (1, total[mine] - inside)):
                at = _found(rows.at(run_of, fault_of, np.full(n, period), broker))
                np.add.at(isolated_ms, at, ms)
    return {"isolations": isolations, "isolated_ms": isolated_ms}


def _found(rows: np.ndarray) -> np.ndarray:
    if (rows < 0).any():
        raise AssertionError("fault_windows: an isolation interval of a broker without attempts")
    return rows
