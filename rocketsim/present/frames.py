"""Summary and comparison tables as readable pandas frames (notebooks, the HTML report, the printed
comparison): headers with units, one row per scope or metric, each variant beside the baseline."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

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
