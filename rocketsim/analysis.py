"""Plain reference implementations of the analysis metrics (no Spark, no I/O).

The Spark summaries (:mod:`rocketsim.spark.summaries`) compute the same quantities at scale; the tests
hold them to these small, readable versions.

* ``gini``: the Gini coefficient of per-queue send counts (0 = perfectly even, (n-1)/n = all on one).
* ``isolation_intervals``: when each producer's latency-fault table kept a broker isolated, derived from
  the attempts' ``fault_isolated_until_ms`` column (see the function for the rule).
* ``fault_spans``: a scenario's fault timeline in milliseconds, for shading charts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rocketsim.scenario import Scenario

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


@dataclass(frozen=True)
class FaultSpan:
    """One fault of the timeline, in simulated milliseconds."""

    broker: str
    kind: str
    start_ms: int
    end_ms: int

    @property
    def label(self) -> str:
        return f"{self.kind} {self.broker}"


def fault_spans(sc: Scenario) -> list[FaultSpan]:
    """The scenario's fault timeline, in start order."""
    spans = [
        FaultSpan(f.broker, f.kind, int(round(f.start_s * 1000)), int(round(f.end_s * 1000)))
        for f in sc.faults
    ]
    return sorted(spans, key=lambda s: (s.start_ms, s.broker))


# run_summary column -> readable header (units in the name), in display order
SUMMARY_COLUMNS = {
    "messages": "messages",
    "share": "share of stored",
    "ok": "SEND_OK",
    "failed": "failed",
    "rejected": "rejected",
    "sends": "attempts sent",
    "retries": "retries",
    "retry_budget_exhausted": "lost retry budget",
    "attempt_error_rate": "failed attempts",
    "latency_p50_ms": "p50 (ms)",
    "latency_p99_ms": "p99 (ms)",
    "latency_p999_ms": "p99.9 (ms)",
    "latency_max_ms": "max (ms)",
    "queue_wait_p99_ms": "publish delay p99 (ms)",
    "publish_rate_per_s": "publish rate (msg/s)",
    "queue_skew": "queue max/mean",
    "queue_gini": "queue Gini",
    "isolations": "isolations",
    "isolated_ms": "isolated (producer-s)",
}


def summary_frame(summary: pd.DataFrame) -> pd.DataFrame:
    """run_summary rows as a readable table: one row per scope ("all" first), headers with units."""
    df = summary.copy()
    df["_order"] = (df["scope"] != "all").astype(int)
    df = df.sort_values(["_order", "scope"]).set_index("scope")
    cols = [c for c in SUMMARY_COLUMNS if c in df.columns]
    out = df[cols].copy()
    if "isolated_ms" in out:
        out["isolated_ms"] = out["isolated_ms"] / 1000.0
    for c in ("share", "attempt_error_rate"):
        if c in out:
            out[c] = out[c].map(lambda v: "-" if pd.isna(v) else f"{v:.2%}")
    out.index.name = "scope"
    return out.rename(columns=SUMMARY_COLUMNS)


def comparison_frame(
    rows: pd.DataFrame, variants: Sequence[str], scope: str = "all", metrics: Sequence[str] | None = None
) -> pd.DataFrame:
    """Comparison rows of one scope side by side: one row per metric, per variant its value and its
    change vs the baseline in percent (``<variant> Δ%``)."""
    d = rows[rows["scope"] == scope]
    if metrics is not None:
        d = d[d["metric"].isin(metrics)]
    order = list(metrics) if metrics is not None else list(dict.fromkeys(d["metric"]))
    values = d.pivot_table(index="metric", columns="variant", values="value", aggfunc="first")
    deltas = d.pivot_table(index="metric", columns="variant", values="delta_pct", aggfunc="first")
    baseline = str(d["baseline"].iloc[0]) if len(d) else ""
    out = pd.DataFrame(index=pd.Index([m for m in order if m in values.index], name="metric"))
    for v in variants:
        if v not in values.columns:
            continue
        out[v] = values[v]
        if v != baseline and v in deltas.columns:
            out[f"{v} Δ%"] = deltas[v].round(1)
    return out


# the run_summary metrics a comparison shows first (every metric is in the comparisons table)
KEY_METRICS = (
    "messages",
    "ok",
    "failed",
    "attempts",
    "retries",
    "retry_budget_exhausted",
    "latency_p50_ms",
    "latency_p99_ms",
    "latency_p999_ms",
    "latency_max_ms",
    "queue_wait_p99_ms",
    "publish_rate_per_s",
    "attempt_error_rate",
    "isolations",
    "isolated_ms",
    "queue_gini",
)


def comparison_by_broker(rows: pd.DataFrame, variants: Sequence[str], metric: str = "sends") -> pd.DataFrame:
    """One metric per broker (rows) and variant (columns), with each variant's change vs the baseline."""
    d = rows[(rows["scope"] != "all") & (rows["metric"] == metric)]
    values = d.pivot_table(index="scope", columns="variant", values="value", aggfunc="first")
    deltas = d.pivot_table(index="scope", columns="variant", values="delta_pct", aggfunc="first")
    baseline = str(d["baseline"].iloc[0]) if len(d) else ""
    out = pd.DataFrame(index=values.index.rename("broker"))
    for v in variants:
        if v in values.columns:
            out[v] = values[v]
            if v != baseline:
                out[f"{v} Δ%"] = deltas[v].round(1)
    return out
