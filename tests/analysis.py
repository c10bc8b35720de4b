"""Plain, readable reference implementations of analysis metrics and of the summary tables (no Spark, no
I/O), written from their definitions: what the tests hold the fast versions to.

The fast versions, vectorised over whole runs and merged from per-producer aggregates, are in
:mod:`rocketsim.tables.summaries`.

* ``gini``: the Gini coefficient of per-queue send counts (0 = perfectly even, (n-1)/n = all on one).
* ``skew``: max / mean of per-queue send counts.
* ``isolation_intervals``: when each producer's latency-fault table kept a broker isolated, derived from
  the attempts' ``fault_isolated_until_ms`` column (see the function for the rule).
* ``summary_tables``: every summary table of one run, cell by cell (``broker_windows``,
  ``queue_windows``, ``producer_windows``, ``run_summary``, ``isolation_intervals``): counts by
  filtering the rows of each cell, percentiles by numpy, queue spread by ``gini`` and ``skew``; rows as
  dicts, None where the table has null. Slow; for runs of a few thousand messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rocketsim.tables import schemas

INTERVAL_COLUMNS = ("producer", "broker", "start_ms", "end_ms")


def gini(values: Iterable[float]) -> float:
    """Gini coefficient of non-negative ``values`` (NaN if empty or all zero).

    ``G = sum_i (2i - n - 1) x_(i) / (n sum x)`` over the values sorted ascending, i = 1..n.
    """
    x = np.sort(np.asarray(list(values), dtype=np.float64))
    n, total = len(x), float(x.sum()) if len(x) else 0.0
    if n == 0 or total == 0:
        return float("nan")
    i = np.arange(1, n + 1)
    return float(((2 * i - n - 1) * x).sum() / (n * total))


def skew(values: Iterable[float]) -> float:
    """max / mean of ``values`` (1.0 = even; NaN if empty or all zero)."""
    x = np.asarray(list(values), dtype=np.float64)
    if len(x) == 0 or x.sum() == 0:
        return float("nan")
    return float(x.max() / x.mean())


def isolation_intervals(attempts: pd.DataFrame, keys: Sequence[str] = ()) -> pd.DataFrame:
    """Isolation intervals ``[start_ms, end_ms)`` per (keys..., producer, broker) from attempt rows.

    ``fault_isolated_until_ms`` on an attempt is the producer's fault-table state for that broker right
    after the attempt ended (``end = start_ts_ms + latency_ms``): isolated until that instant, or null.
    Walking one producer's attempts to one broker in order of their end:

    * an attempt whose ``fault_isolated_until_ms`` is after its end starts (or continues) an isolation
      lasting until that value;
    * the next attempt to the same broker replaces that state at its own end: 4.9 overwrites the fault
      item, so a fast success ends an isolation early (its value is null); 5.x only extends it;
    * touching pieces (an isolation still running when the next attempt extends it) form one interval.

    An isolation that nothing ends lasts until its ``fault_isolated_until_ms``, even past the last send.
    """
    cols = [*keys, *INTERVAL_COLUMNS]
    if attempts.empty:
        return pd.DataFrame(
            {c: pd.Series(dtype="object" if c in (*keys, "broker") else "int64") for c in cols}
        )
    a = attempts.assign(end_ms=attempts["start_ts_ms"] + attempts["latency_ms"])
    a = a.sort_values([*keys, "producer", "broker", "end_ms", "start_ts_ms", "seq", "attempt"], kind="stable")
    rows: list[tuple] = []
    for group, g in a.groupby([*keys, "producer", "broker"], sort=True):
        ends = g["end_ms"].to_numpy()
        until = g["fault_isolated_until_ms"].to_numpy(dtype="float64", na_value=np.nan)
        current: list[int] | None = None  # [start, end] of the interval being built
        for i, e in enumerate(ends):
            u = until[i]
            if np.isnan(u) or u <= e:
                continue
            stop = int(min(u, ends[i + 1])) if i + 1 < len(ends) else int(u)
            if stop <= e:
                continue  # replaced at the same instant
            if current is not None and current[1] >= e:
                current[1] = stop
            else:
                if current is not None:
                    rows.append((*group, *current))
                current = [int(e), stop]
        if current is not None:
            rows.append((*group, *current))
    out = pd.DataFrame(rows, columns=cols)
    return out.astype({"producer": "int32", "start_ms": "int64", "end_ms": "int64"})


# ---- the summary tables, cell by cell (rows as dicts; None where the table has null) -------------------

LATENCY_QUANTILES = (50, 75, 95, 99, 99.9, 99.99)  # percent, the latency_p* columns in order
QUEUE_WAIT_QUANTILES = (50, 99)
SENT_STATUSES = ("SEND_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE", "ONEWAY_SENT")


def outcome_column(outcome: str) -> str:
    """The column counting an attempt of this outcome."""
    exact = {"ok": "ok", "remoting:timeout": "failed_timeout", "remoting:connect": "failed_connect"}
    # the gRPC family: the Proxy's status (stored but not OK: the persistence timeouts), the RPC's failure
    exact |= {
        "proxy:OK": "ok",
        "grpc:DEADLINE_EXCEEDED": "failed_timeout",
        "proxy:PROXY_TIMEOUT": "failed_timeout",
    }
    exact |= {"grpc:UNAVAILABLE": "failed_connect"}
    stored = ("MASTER_PERSISTENCE_TIMEOUT", "SLAVE_PERSISTENCE_TIMEOUT", "HA_NOT_AVAILABLE")
    exact |= {f"proxy:{code}": "not_store_ok" for code in stored}
    if outcome in exact:
        return exact[outcome]
    if outcome.startswith(("broker:", "proxy:")):
        return "failed_broker_error"
    return "not_store_ok" if outcome.startswith("status:") else "failed_other"


def percentiles(values: pd.Series, names: Sequence[str], quantiles: Sequence[float]) -> dict:
    """numpy's percentiles (linear between the closest ranks) of ``values``, None for none."""
    got = np.percentile(values, quantiles) if len(values) else [None] * len(names)
    return {n: None if v is None else float(v) for n, v in zip(names, got, strict=True)}


def ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


def nan_to_none(x: float) -> float | None:
    return None if np.isnan(x) else x


def spread(counts: Sequence[int]) -> dict:
    """Queue skew and Gini of per-queue counts (idle queues as zeros), None without attempts."""
    return {"queue_skew": nan_to_none(skew(counts)), "queue_gini": nan_to_none(gini(counts))}


def delivery_flags(messages: pd.DataFrame, attempts: pd.DataFrame, results: pd.DataFrame) -> pd.DataFrame:
    """``results`` with ``duplicates`` (copies - 1), ``lost`` (told sent, no copy) and
    ``failed_but_stored`` (FAILED, a copy). A message's copies: its send's stored attempts; a batch
    member's, its batch's (their attempts carry the leading member's seq); none when REJECTED."""
    keys = ["producer", "seq"]
    own = attempts[attempts["stored"]].groupby(keys).size().rename("own")
    m = messages[[*keys, "batch_id"]].merge(results[[*keys, "status"]], on=keys)
    m = m.merge(own, left_on=keys, right_index=True, how="left").fillna({"own": 0})
    batch = m["batch_id"].fillna(-1 - m["seq"])  # a message alone: a batch of its own
    copies = m.groupby([m["producer"], batch])["own"].transform("sum").where(m["status"] != "REJECTED", 0)
    flags = pd.DataFrame(
        {
            "duplicates": (copies - 1).clip(lower=0).astype("int64"),
            "lost": (m["status"].isin(SENT_STATUSES) & (copies == 0)).astype("int64"),
            "failed_but_stored": ((m["status"] == "FAILED") & (copies > 0)).astype("int64"),
        }
    )
    return results.merge(pd.concat([m[keys], flags], axis=1), on=keys, how="left")


@dataclass(frozen=True)
class Run:
    """One run's rows as the tables read them: attempts with their window and outcome column, results
    with their window of send start and delivery flags, the isolation intervals, the run's windows
    (first to last window of attempt start, and of the send start of a delivery outcome) and queues
    (every (broker, queue) with an attempt)."""

    a: pd.DataFrame
    r: pd.DataFrame
    intervals: pd.DataFrame
    window_ms: int
    windows: list[int]
    queues: list[tuple[str, int]]

    @staticmethod
    def of(attempts: pd.DataFrame, results: pd.DataFrame, messages: pd.DataFrame, window_ms: int) -> Run:
        w = window_ms
        a = attempts.assign(window_start_ms=attempts["start_ts_ms"] // w * w)
        a["kind"] = a["outcome"].map(outcome_column)
        r = delivery_flags(messages, attempts, results)
        r["window_start_ms"] = r["send_ts_ms"] // w * w
        flagged = r[list(schemas.DELIVERY_COLUMNS)].sum(axis=1) > 0
        starts = [*a["window_start_ms"], *r.loc[flagged, "window_start_ms"]]
        windows = list(range(min(starts), max(starts) + w, w)) if starts else []
        queues = sorted(set(zip(a["broker"], a["queue_id"].astype(int), strict=True)))
        return Run(a, r, isolation_intervals(attempts), w, windows, queues)

    def queues_of(self, broker: str | None) -> list[tuple[str, int]]:
        """The run's queues (broker None) or the broker's."""
        return [q for q in self.queues if broker is None or q[0] == broker]


def summary_tables(
    attempts: pd.DataFrame,
    results: pd.DataFrame,
    messages: pd.DataFrame,
    window_ms: int,
    faults: Sequence[tuple[str, str, int, int]] = (),
) -> dict[str, list[dict]]:
    """Every summary table of one run (``send_attempts``, ``send_results`` and ``messages`` columns;
    ``faults``: the scenario's, as (broker, kind, start_ms, end_ms))."""
    run = Run.of(attempts, results, messages, window_ms)
    return {
        "isolation_intervals": run.intervals.to_dict("records"),
        "broker_windows": broker_windows(run),
        "queue_windows": queue_windows(run),
        "producer_windows": producer_windows(run),
        "run_summary": run_summary(run),
        "fault_windows": fault_windows(run, faults),
    }


def _sums(rows: pd.DataFrame | None, names: Sequence[str]) -> dict:
    return {n: 0 if rows is None else int(rows[n].sum()) for n in names}


def _busy(attempts: pd.DataFrame) -> dict:
    """The attempts the closed-loop store rejected, by kind (``busy_overload``: kind OVERLOAD)."""
    kinds = attempts["busy_kind"]
    return {n: int((kinds == n.removeprefix("busy_").upper()).sum()) for n in schemas.BUSY_COLUMNS}


def _store_load(attempts: pd.DataFrame, window_ms: int) -> dict:
    """Mean and max queue depth the store's requests found, its writer's share of the window; None
    when no attempt met the store (coupling open)."""
    depth = attempts["store_queue_depth"].dropna()
    if not len(depth):
        return {"queue_depth_mean": None, "queue_depth_max": None, "utilisation": None}
    busy_us = attempts["store_service_us"].fillna(0).sum()
    return {
        "queue_depth_mean": depth.mean(),
        "queue_depth_max": depth.max(),
        "utilisation": busy_us / (window_ms * 1000.0),
    }


def _isolating(
    intervals: pd.DataFrame, by: str, value: object, start: int, window_ms: int, count: str
) -> int:
    """Distinct ``count`` values of the intervals of ``by == value`` overlapping [start, start + w)."""
    mine = intervals[(intervals[by] == value) & (intervals["start_ms"] < start + window_ms)]
    return mine.loc[mine["end_ms"] > start, count].nunique()


def _queue_counts(attempts: pd.DataFrame, queues: Sequence[tuple[str, int]]) -> list[int]:
    per_queue = attempts.groupby(["broker", "queue_id"]).size()
    return [int(per_queue.get(q, 0)) for q in queues]


def broker_windows(run: Run) -> list[dict]:
    """Every broker with an attempt x every window of the run: its attempts (by outcome, retries,
    bytes, latency), producers isolating it, its queues' spread, the delivery outcomes of the sends
    begun in the window that last went to it, the closed-loop store's rejections and load."""
    w = run.window_ms
    cells = dict(tuple(run.a.groupby(["broker", "window_start_ms"])))
    sent = dict(tuple(run.r.groupby(["broker", "window_start_ms"])))
    rows = []
    for broker in sorted(set(run.a["broker"])):
        for start in run.windows:
            cell = cells.get((broker, start), run.a.iloc[:0])
            sends, ok = len(cell), int((cell["kind"] == "ok").sum())
            row = {"broker": broker, "window_start_ms": start, "window_ms": w, "sends": sends}
            row |= {c: int((cell["kind"] == c).sum()) for c in schemas.OUTCOME_COLUMNS}
            row |= {"error_rate": ratio(sends - ok, sends), "publish_rate_per_s": ok * 1000.0 / w}
            row |= {"retries": int((cell["attempt"] > 0).sum()), "bytes": int(cell["wire_bytes"].sum())}
            row |= percentiles(cell["latency_ms"], schemas.LATENCY_PERCENTILE_COLUMNS, LATENCY_QUANTILES)
            row["latency_max_ms"] = max(cell["latency_ms"], default=None)
            row["isolated_producers"] = _isolating(run.intervals, "broker", broker, start, w, "producer")
            row |= spread(_queue_counts(cell, run.queues_of(broker)))
            row |= _sums(sent.get((broker, start)), schemas.DELIVERY_COLUMNS)
            rows.append(row | _busy(cell) | _store_load(cell, w))
    return rows


def queue_windows(run: Run) -> list[dict]:
    """Every queue of the run x every window: attempts, ok attempts, and skew: attempts over the mean
    of the broker's queues in the window (None when that is 0)."""
    cells = dict(tuple(run.a.groupby(["broker", "window_start_ms"])))
    rows = []
    for start in run.windows:
        for broker in sorted({b for b, _ in run.queues}):
            cell = cells.get((broker, start), run.a.iloc[:0])
            queues = run.queues_of(broker)
            sends = _queue_counts(cell, queues)
            oks = _queue_counts(cell[cell["kind"] == "ok"], queues)
            mean = sum(sends) / len(queues)
            for (_, queue), n, ok in zip(queues, sends, oks, strict=True):
                row = {
                    "broker": broker,
                    "queue_id": queue,
                    "window_start_ms": start,
                    "window_ms": run.window_ms,
                }
                rows.append(row | {"sends": n, "ok": ok, "skew": ratio(n, mean)})
    return rows


def _statuses(results: pd.DataFrame) -> dict:
    """How a group of results' sends ended: SEND_OK, FAILED, REJECTED, a not-OK store status, oneway."""
    status = results["status"]
    return {
        k: int(status.isin(s).sum())
        for k, s in (
            ("ok", ["SEND_OK"]),
            ("failed", ["FAILED"]),
            ("rejected", ["REJECTED"]),
            ("not_ok_status", ["FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"]),
            ("oneway", ["ONEWAY_SENT"]),
        )
    }


def _attempt_latency(attempts: pd.DataFrame) -> dict:
    """The percentiles and maximum of some attempts' latency (``attempt_latency_*``)."""
    names = schemas.ATTEMPT_LATENCY_COLUMNS
    latency = attempts["latency_ms"]
    return percentiles(latency, names[:-1], LATENCY_QUANTILES) | {names[-1]: max(latency, default=None)}


def _message_columns(results: pd.DataFrame) -> dict:
    """What a group of results counts: statuses, attempts, retries, latency and queue wait."""
    attempts = results["attempts"]
    wait = results["queue_wait_ms"]
    return {
        **_statuses(results),
        "attempts": int(attempts.sum()),
        "retries": int((attempts - 1).clip(lower=0).sum()),
        "retry_budget_exhausted": int(results["retry_budget_exhausted"].sum()),
        **percentiles(results["latency_ms"], schemas.LATENCY_PERCENTILE_COLUMNS, LATENCY_QUANTILES),
        "latency_max_ms": max(results["latency_ms"], default=None),
        **percentiles(wait, ("queue_wait_p50_ms", "queue_wait_p99_ms"), QUEUE_WAIT_QUANTILES),
        "queue_wait_max_ms": max(wait, default=None),
        **_sums(results, schemas.DELIVERY_COLUMNS),
    }


def producer_windows(run: Run) -> list[dict]:
    """Per producer and window of send start with a send: its sends' statuses, attempts, bytes, latency
    and queue wait, the spread over the run's queues of its attempts begun in the window, brokers it
    isolated, its sends' attempts the closed-loop store rejected."""
    w = run.window_ms
    begun = dict(tuple(run.a.groupby(["producer", "window_start_ms"])))
    rows = []
    for (producer, start), sent in run.r.groupby(["producer", "window_start_ms"]):
        n = len(sent)
        row = {"producer": producer, "window_start_ms": start, "window_ms": w, "sends": n}
        row |= _message_columns(sent) | {"bytes": int(sent["wire_bytes"].sum())}
        row |= {
            "publish_rate_per_s": row["ok"] * 1000.0 / w,
            "error_rate": (row["failed"] + row["rejected"]) / n,
        }
        theirs = begun.get((producer, start))
        row |= spread(_queue_counts(theirs, run.queues)) if theirs is not None else spread([])
        row["isolated_brokers"] = _isolating(run.intervals, "producer", producer, start, w, "broker")
        sends_attempts = run.a[(run.a["producer"] == producer) & run.a["seq"].isin(sent["seq"])]
        rows.append(row | _busy(sends_attempts))
    return rows


def run_summary(run: Run) -> list[dict]:
    """A row for the whole run ("all") and one per broker that stored a result or got an attempt:
    message columns over the results stored there (all results for "all"), attempt columns over the
    attempts sent there, isolation columns over its intervals (``isolated_ms`` clipped at the run's
    last send end); rates per second of the run's span (first birth to last send end)."""
    r, a = run.r, run.a
    stored = r[r["broker"].notna() & ~r["status"].isin(["FAILED", "REJECTED"])]
    run_end = r["end_ts_ms"].max()
    duration = int(run_end - r["born_ts_ms"].min())
    rows = []
    for scope in ["all", *sorted(set(stored["broker"]) | set(a["broker"]))]:
        everything = scope == "all"
        msgs = r if everything else stored[stored["broker"] == scope]
        sends = a if everything else a[a["broker"] == scope]
        isolations = run.intervals if everything else run.intervals[run.intervals["broker"] == scope]
        row = {"scope": scope, "messages": len(msgs), "duration_ms": duration} | _message_columns(msgs)
        if not everything:  # a send may try several brokers: a broker's latency is its attempts'
            row |= dict.fromkeys([*schemas.LATENCY_PERCENTILE_COLUMNS, "latency_max_ms"])
        row |= _attempt_latency(sends)
        share = 1.0 if everything else ratio(len(msgs), len(stored))
        row["share"] = 0.0 if share is None else share
        row["error_rate"] = ratio(row["failed"] + row["rejected"], len(msgs))
        row["publish_rate_per_s"] = ratio(row["ok"] * 1000.0, duration)
        row |= {"sends": len(sends), "bytes": int(sends["wire_bytes"].sum())}
        row |= {c: int((sends["kind"] == c).sum()) for c in schemas.OUTCOME_COLUMNS if c != "ok"}
        row["attempt_error_rate"] = ratio(int((sends["kind"] != "ok").sum()), len(sends))
        row |= spread(_queue_counts(sends, run.queues_of(None if everything else scope)))
        clipped = (isolations["end_ms"].clip(upper=run_end) - isolations["start_ms"]).clip(lower=0)
        row |= {"isolations": len(isolations), "isolated_ms": int(clipped.sum())}
        rows.append(row | _busy(sends))
    return rows


def fault_windows(run: Run, faults: Sequence[tuple[str, str, int, int]]) -> list[dict]:
    """Per fault (broker, kind, start_ms, end_ms), per period ("during": attempts that started, messages
    whose send began, in [start, end); "outside": the rest) and scope ("all", every broker with an
    attempt): the attempts (by failure class, share of the period's, latency), the messages (statuses,
    send latency on "all"; a broker: those whose last attempt went to it), delivery outcomes, the
    isolations that began in the period and their producer-ms within it, the part of the run's span in
    the period."""
    a, r, iv = run.a, run.r, run.intervals
    first, last = int(r["born_ts_ms"].min()), int(r["end_ts_ms"].max())
    rows = []
    for fault, (broker_hit, kind, start, end) in enumerate(faults):
        during_span = max(0, min(end, last) - max(start, first))
        a_in = (a["start_ts_ms"] >= start) & (a["start_ts_ms"] < end)
        r_in = (r["send_ts_ms"] >= start) & (r["send_ts_ms"] < end)
        i_in = (iv["start_ms"] >= start) & (iv["start_ms"] < end)
        i_end = iv["end_ms"].clip(upper=last)
        inside = (i_end.clip(upper=end) - iv["start_ms"].clip(lower=start)).clip(lower=0)
        total = (i_end - iv["start_ms"]).clip(lower=0)
        for period, mask_a, mask_r, mask_i, span, ms in (
            ("during", a_in, r_in, i_in, during_span, inside),
            ("outside", ~a_in, ~r_in, ~i_in, last - first - during_span, total - inside),
        ):
            period_a = a[mask_a]
            for scope in ["all", *sorted(set(a["broker"]))]:
                everything = scope == "all"
                sends = period_a if everything else period_a[period_a["broker"] == scope]
                msgs = r[mask_r] if everything else r[mask_r & (r["broker"] == scope)]
                mine = np.ones(len(iv), bool) if everything else (iv["broker"] == scope).to_numpy()
                row = {"fault": fault, "fault_broker": broker_hit, "fault_kind": kind}
                row |= {"fault_start_ms": start, "fault_end_ms": end, "period": period, "scope": scope}
                row |= {"period_ms": span, "sends": len(sends)}
                row |= {c: int((sends["kind"] == c).sum()) for c in schemas.OUTCOME_COLUMNS if c != "ok"}
                row["attempt_error_rate"] = ratio(int((sends["kind"] != "ok").sum()), len(sends))
                row["share"] = ratio(len(sends), len(period_a))
                row |= _attempt_latency(sends) | {"messages": len(msgs)} | _statuses(msgs)
                row["error_rate"] = ratio(row["failed"] + row["rejected"], len(msgs))
                latency = msgs["latency_ms"] if everything else msgs["latency_ms"].iloc[:0]
                row |= percentiles(latency, schemas.LATENCY_PERCENTILE_COLUMNS, LATENCY_QUANTILES)
                row["latency_max_ms"] = max(latency, default=None)
                row["isolations"] = int((mask_i.to_numpy() & mine).sum())
                row["isolated_ms"] = int(ms[mine].sum())
                rows.append(row | _sums(msgs, schemas.DELIVERY_COLUMNS) | _busy(sends))
    return rows
