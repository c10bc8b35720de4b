"""What the jobs print: a run's summary, its fault windows and a comparison of variants side by side, as
text from the summary tables' rows (tiny; no per-message table is read).

The same definitions as the tables: a broker's latency is that of every attempt sent to it (failed and
timed-out ones included, ``attempt_latency_*``); the send call's latency (``latency_*``) is the whole
run's, and says so ("send").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from rocketsim.tables import schemas

# ---- tables of text ------------------------------------------------------------------------------


def text_table(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """Rows of cells as aligned lines: the first row a header (ruled), the first column left-aligned,
    the others right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append(indent + "  ".join(cells).rstrip())
        if n == 0:
            lines.append(indent + "  ".join("-" * w for w in widths))
    return lines


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 broker``, ``4 brokers`` (``many``: an irregular plural)."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def ms(value: float | None) -> str:
    """A latency in ms: ``-`` for none, one decimal below 1,000, whole ms above."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.1f}" if abs(value) < 1000 else f"{value:,.0f}"


def pct(value: float | None, digits: int = 2) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}%}"


# ---- a run ---------------------------------------------------------------------------------------

FAILURE_CLASSES = (
    ("failed_timeout", "timeout"),
    ("failed_connect", "connect"),
    ("failed_broker_error", "broker error"),
    ("not_store_ok", "not-OK store status"),
    ("failed_other", "other"),
)
_SEND_P = (("p50", "latency_p50_ms"), ("p99", "latency_p99_ms"), ("p99.9", "latency_p999_ms"))
_SEND_P += (("max", "latency_max_ms"),)
_ATTEMPT_P = dict(
    zip(("p50", "p75", "p95", "p99", "p99.9", "p99.99", "max"), schemas.ATTEMPT_LATENCY_COLUMNS, strict=True)
)


def outcome_line(r: Mapping) -> str:
    """How the messages' sends ended, every status counted: the parts add up to the messages."""
    n = r["messages"]
    return (
        f"{n:,} messages: {r['ok']:,} SEND_OK ({pct(r['ok'] / n if n else None)}), "
        f"{r['not_ok_status']:,} stored with a not-OK status, {r['oneway']:,} oneway (no answer), "
        f"{r['failed']:,} failed, {r['rejected']:,} rejected"
    )


def failure_classes(r: Mapping) -> str:
    """The failed attempts by class (and the busy broker's rejections, which are broker errors)."""
    parts = [f"{r[c]:,} {label}" for c, label in FAILURE_CLASSES]
    busy = sum(r[c] for c in schemas.BUSY_COLUMNS)
    return ", ".join(parts) + (f" ({busy:,} of them a busy broker's flow control)" if busy else "")


def run_summary_text(run_id: str, rows: Sequence[Mapping]) -> str:
    """The end-of-run summary from the run's ``run_summary`` rows."""
    every = next(r for r in rows if r["scope"] == "all")
    brokers = sorted((r for r in rows if r["scope"] != "all"), key=lambda r: r["scope"])
    lines = [
        f"\nrun {run_id}: {outcome_line(every)}; {plural(every['retries'], 'retry', 'retries')}",
        "  send latency (the send call of every message, all its attempts): "
        + ", ".join(f"{p} {ms(every[c])} ms" for p, c in _SEND_P),
        f"  queue wait (publish delay) p99 {ms(every['queue_wait_p99_ms'] or 0)} ms, "
        f"{every['retry_budget_exhausted']:,} send(s) ran out of time with retries left, "
        f"{plural(every['isolations'], 'broker isolation')} ({every['isolated_ms'] / 1000:,.1f} producer-s)",
        f"  failed attempts by class ({_failed_attempts(every):,} of {every['sends']:,}): "
        + failure_classes(every),
        f"  delivery: {every['duplicates']:,} duplicate copies stored, {every['lost']:,} lost "
        f"(told sent, never stored), {every['failed_but_stored']:,} failed but stored",
        "  per broker: the latency of every attempt sent to it (failed and timed-out ones included)",
    ]
    table = [
        [
            "broker",
            "attempts",
            "failed",
            "p50 ms",
            "p99 ms",
            "p99.9 ms",
            "max ms",
            "stored",
            "Gini",
            "isolations",
        ]
    ]
    for r in brokers:
        gini = "-" if r["queue_gini"] is None else f"{r['queue_gini']:.3f}"
        table.append(
            [
                r["scope"],
                f"{r['sends']:,}",
                pct(r["attempt_error_rate"]),
                *(ms(r[_ATTEMPT_P[p]]) for p in ("p50", "p99", "p99.9", "max")),
                pct(r["share"], 1),
                gini,
                f"{r['isolations']:,}",
            ]
        )
    lines += text_table(table, "    ")
    lines.append("    (stored: the broker's share of the stored messages; Gini: of its queues' attempts)")
    return "\n".join(lines)


def _failed_attempts(r: Mapping) -> int:
    return sum(r[c] for c, _ in FAILURE_CLASSES)


# ---- fault windows ---------------------------------------------------------------------------------


def fault_heading(r: Mapping) -> str:
    """``fault 0: hang broker-b, 30-150 s`` and how much of it the run covers."""
    start, end = r["fault_start_ms"] / 1000, r["fault_end_ms"] / 1000
    text = f"fault {r['fault']}: {r['fault_kind']} {r['fault_broker']}, {start:g}-{end:g} s"
    covered = r["period_ms"] / 1000
    if covered <= 0:
        return text + " (after the run's end: nothing ran during it)"
    if covered < end - start:
        return text + f" (cut by the run's end: {covered:,.1f} s of it ran)"
    return text


def fault_windows_text(rows: Sequence[Mapping], scopes: str = "every") -> str:
    """The fault-window view: per fault, its window's figures against the rest of the run, per scope
    ("all", then the fault's broker, then the others; ``scopes="fault"``: "all" and the fault's broker
    only) and period; with a ``variant`` column when the rows have one (a comparison)."""
    if not rows:
        return "  fault windows: the scenario has no faults"
    variants = "variant" in rows[0]
    lines = [
        "  fault windows: attempts that started, and messages whose send began, during each fault against "
        "the rest of the run"
    ]
    for fault in sorted({r["fault"] for r in rows}):
        mine = [r for r in rows if r["fault"] == fault]
        during = [r for r in mine if r["period"] == "during" and r["scope"] == "all"]
        lines.append("  " + fault_heading(during[0]))
        hit = mine[0]["fault_broker"]
        order = {"all": 0, hit: 1}
        kept = [r for r in mine if scopes == "every" or r["scope"] in order]
        kept.sort(key=lambda r: (order.get(r["scope"], 2), r["scope"], r.get("variant", ""), r["period"]))
        head = ["scope", "period", "attempts", "share", "failed %", "p50 ms", "p99 ms", "p99.9 ms"]
        head += ["messages", "failed", "send p99 ms", "isolations", "dup", "lost"]
        table = [(["variant"] if variants else []) + head]
        for r in kept:
            table.append(
                ([r["variant"]] if variants else [])
                + [
                    r["scope"],
                    r["period"],
                    f"{r['sends']:,}",
                    pct(r["share"], 1),
                    pct(r["attempt_error_rate"]),
                    *(ms(r[_ATTEMPT_P[p]]) for p in ("p50", "p99", "p99.9")),
                    f"{r['messages']:,}",
                    f"{r['failed']:,}",
                    ms(r["latency_p99_ms"]),
                    f"{r['isolations']:,}",
                    f"{r['duplicates']:,}",
                    f"{r['lost']:,}",
                ]
            )
        lines += text_table(table, "    ")
    lines.append(
        "    (latency and failed share: of the attempts; messages: a broker's are those whose last attempt "
        'went to it; send p99: the send call, on "all")'
    )
    return "\n".join(lines)


# ---- a comparison ----------------------------------------------------------------------------------

# (metric, label) of the whole run, in order; every metric of every scope is in the comparisons table
COMPARED_OVERALL = (
    ("messages", "messages"),
    ("ok", "SEND_OK"),
    ("not_ok_status", "stored, not-OK status"),
    ("oneway", "oneway (no answer)"),
    ("failed", "failed"),
    ("rejected", "rejected"),
    ("attempts", "attempts"),
    ("retries", "retries"),
    ("retry_budget_exhausted", "out of time, retries left"),
    ("latency_p50_ms", "send p50 (ms)"),
    ("latency_p99_ms", "send p99 (ms)"),
    ("latency_p999_ms", "send p99.9 (ms)"),
    ("latency_max_ms", "send max (ms)"),
    ("queue_wait_p99_ms", "queue wait p99 (ms)"),
    ("publish_rate_per_s", "publish rate (msg/s)"),
    ("attempt_error_rate", "failed attempts"),
    *((c, f"  {label}") for c, label in FAILURE_CLASSES),
    ("duplicates", "duplicate copies"),
    ("lost", "lost (told sent, not stored)"),
    ("failed_but_stored", "failed but stored"),
    ("isolations", "isolations"),
    ("isolated_ms", "isolated (producer-ms)"),
    ("queue_gini", "queue Gini"),
)
COMPARED_PER_BROKER = (
    ("sends", "attempts"),
    ("attempt_error_rate", "failed attempts"),
    ("attempt_latency_p99_ms", "attempt p99 (ms)"),
    ("share", "share of stored"),
)
RATES = frozenset({"share", "error_rate", "attempt_error_rate"})  # deltas in percentage points
_INTEGERS = frozenset(f.name for f in schemas.RUN_SUMMARY if str(f.type).startswith("int"))
# a percent change is shown only from a baseline at least this share of the new value: below, it reads
# like "+98529.8%", so the change is shown as it is
NEAR_ZERO = 0.1


def compared_value(metric: str, value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if metric in _INTEGERS:
        return f"{value:,.0f}"
    if metric in RATES:
        return pct(value, 3 if 0 < abs(value) < 0.001 else 2)
    return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"


def compared_delta(metric: str, value: float | None, base: float | None) -> str:
    """The change from the baseline: in percentage points for a rate, in percent from a baseline of a
    size like the value's, else as it is (from a zero or near-zero baseline)."""
    if value is None or base is None or any(isinstance(x, float) and math.isnan(x) for x in (value, base)):
        return "n/a"
    delta = value - base
    if metric in RATES:
        return f"{100 * delta:+.{3 if 0 < abs(delta) < 0.001 else 2}f} pp"
    if base != 0 and abs(base) >= NEAR_ZERO * abs(value):
        return f"{100 * delta / abs(base):+.1f}%"
    return compared_value(metric, delta) if delta < 0 else "+" + compared_value(metric, delta)


def comparison_text(rows: Sequence[Mapping], variants: Sequence[str], baseline: str, run_id: str) -> str:
    """The side-by-side comparison: a row per metric (the whole run's, then each broker's), a column per
    variant, each change against the baseline (rows: the ``comparisons`` table's)."""
    by_key = {(r["scope"], r["metric"], r["variant"]): r for r in rows}
    scopes = sorted({k[0] for k in by_key if k[0] != "all"})
    table = [["metric", *[f"{v} (baseline)" if v == baseline else v for v in variants]]]

    def add(scope: str, metric: str, label: str) -> None:
        base = by_key.get((scope, metric, baseline))
        cells = []
        for v in variants:
            r = by_key.get((scope, metric, v))
            if r is None:
                cells.append("-")
                continue
            text = compared_value(metric, r["value"])
            if v != baseline and r["value"] is not None:
                text += f" ({compared_delta(metric, r['value'], base and base['value'])})"
            cells.append(text)
        table.append([label, *cells])

    for metric, label in COMPARED_OVERALL:
        add("all", metric, label)
    for metric, label in COMPARED_PER_BROKER:
        for s in scopes:
            add(s, metric, f"{s} {label}")
    lines = [
        f"\ncomparison {run_id}: each variant on the same messages and fault timeline, changes vs {baseline}"
    ]
    lines += text_table(table)
    lines.append(
        "  (send: the send call of every message; a broker's: every attempt sent to it, failed ones "
        "included; a change from a zero or near-zero baseline is shown as it is, a rate's in percentage "
        "points; every metric of every scope: the comparisons table; timelines: comparison_windows)"
    )
    return "\n".join(lines)
