"""Summary and comparison tables as readable pandas frames (notebooks, the HTML report, the printed
comparison): headers with units, one row per scope or metric, each variant beside the baseline."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from rocketsim.present.text import COMPARED_OVERALL, FAILURE_CLASSES

# run_summary column -> readable header (units in the name), in display order: the send call's latency
# ("send", the whole run's) apart from the attempts' ("attempt", every attempt sent to the scope)
SUMMARY_COLUMNS = {
    "messages": "messages",
    "share": "share of stored",
    "ok": "SEND_OK",
    "not_ok_status": "stored, not-OK status",
    "oneway": "oneway (no answer)",
    "failed": "failed",
    "rejected": "rejected",
    "sends": "attempts sent",
    "retries": "retries",
    "retry_budget_exhausted": "lost retry budget",
    "attempt_error_rate": "failed attempts",
    **{c: f"failed attempts: {label}" for c, label in FAILURE_CLASSES},
    "latency_p50_ms": "send p50 (ms)",
    "latency_p99_ms": "send p99 (ms)",
    "latency_p999_ms": "send p99.9 (ms)",
    "latency_max_ms": "send max (ms)",
    "attempt_latency_p50_ms": "attempt p50 (ms)",
    "attempt_latency_p99_ms": "attempt p99 (ms)",
    "attempt_latency_p999_ms": "attempt p99.9 (ms)",
    "attempt_latency_max_ms": "attempt max (ms)",
    "queue_wait_p99_ms": "publish delay p99 (ms)",
    "publish_rate_per_s": "publish rate (msg/s)",
    "duplicates": "duplicate copies",
    "lost": "lost (told sent, not stored)",
    "failed_but_stored": "failed but stored",
    "queue_skew": "queue max/mean",
    "queue_gini": "queue Gini",
    "isolations": "isolations",
    "isolated_ms": "isolated (producer-s)",
}
# fault_windows column -> readable header, in display order (rows: scope and period)
FAULT_WINDOW_COLUMNS = {
    "sends": "attempts",
    "share": "share of attempts",
    "attempt_error_rate": "failed attempts",
    **{c: f"failed: {label}" for c, label in FAILURE_CLASSES},
    "attempt_latency_p50_ms": "attempt p50 (ms)",
    "attempt_latency_p99_ms": "attempt p99 (ms)",
    "attempt_latency_p999_ms": "attempt p99.9 (ms)",
    "messages": "messages",
    "failed": "failed messages",
    "error_rate": "failed share",
    "latency_p99_ms": "send p99 (ms)",
    "isolations": "isolations",
    "duplicates": "duplicate copies",
    "lost": "lost",
    "failed_but_stored": "failed but stored",
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
    _as_percent(out, ("share", "attempt_error_rate"))
    out.index.name = "scope"
    return out.rename(columns=SUMMARY_COLUMNS)


def _as_percent(df: pd.DataFrame, columns: Sequence[str]) -> None:
    for c in columns:
        if c in df:
            df[c] = df[c].map(lambda v: "-" if pd.isna(v) else f"{v:.2%}")


def fault_window_frames(fault_windows: pd.DataFrame) -> list[tuple[dict, pd.DataFrame]]:
    """Per fault of ``fault_windows`` (one run's): its "all" row during it, and its figures as a readable
    table: a row per scope ("all", the fault's broker, the others) and period, headers with units."""
    out = []
    for _, d in fault_windows.groupby("fault", sort=True):
        order = (d["scope"] != "all").astype(int) * (1 + (d["scope"] != d["fault_broker"]).astype(int))
        d = d.assign(_order=order).sort_values(["_order", "scope", "period"])
        head = d[(d["scope"] == "all") & (d["period"] == "during")].iloc[0].to_dict()
        table = d.set_index(["scope", "period"])[[c for c in FAULT_WINDOW_COLUMNS if c in d.columns]].copy()
        _as_percent(table, ("share", "attempt_error_rate", "error_rate"))
        out.append((head, table.rename(columns=FAULT_WINDOW_COLUMNS)))
    return out


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


# the run_summary metrics a comparison shows first, as the printed comparison (every metric is in the
# comparisons table)
KEY_METRICS = tuple(metric for metric, _ in COMPARED_OVERALL)


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
