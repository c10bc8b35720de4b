"""docs/autobatch.md's comparison: autoBatch off and on (OMB's settings: hold 10 ms, 32 KiB) and async
backpressure off and on, for one 5.3.3 async producer through a hang of one broker.

``python -m rocketsim.present.autobatch_compare [OUT_DIR]`` simulates ``brownout.toml`` reshaped (one
producer, 2000 msg/s for 40 s, every send async, broker-b hung from 15 s to 25 s) under the four variants,
in this process; writes ``autobatch.png`` into OUT_DIR (default ``docs``) and prints the numbers as a
Markdown table.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from rocketsim import engine
from rocketsim.present import figure_args, plots, timeline
from rocketsim.present.grpc_compare import run_once
from rocketsim.scenario import Scenario, load_scenario

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "conf" / "scenarios" / "brownout.toml"
WINDOW_MS = 1000
BASE = (
    "producers.client_version=5.3.3",
    "producers.count=1",
    "producers.send_mode.sync=0",
    "producers.send_mode.async=1",
    "workload.rate_per_s=2000",
    "workload.messages=80000",
    "faults.0.kind=hang",
    "faults.0.start_s=15",
    "faults.0.end_s=25",
)
OMB_BATCHING = (
    "producers.auto_batch=true",
    "producers.batch_max_delay_ms=10",
    "producers.batch_max_bytes=32768",
)
# 10000 permits (the default) never bind at this rate: 1000 do while broker-b holds its sends for 3 s
BACKPRESSURE = (
    "producers.enable_backpressure_for_async_mode=true",
    "producers.back_pressure_for_async_send_num=1000",
)
VARIANTS: dict[str, tuple[str, ...]] = {
    "autoBatch off, backpressure off": (),
    "autoBatch on (10 ms, 32 KiB)": OMB_BATCHING,
    "backpressure on (1000 sends)": BACKPRESSURE,
    "autoBatch on, backpressure on": (*OMB_BATCHING, *BACKPRESSURE),
}
QUANTILES = (0.5, 0.99)


def frame(out: engine.SimOutput) -> pd.DataFrame:
    """Per message: its publish delay (born -> send start: the accumulator's hold, a sender thread's
    wait), its send latency (send start -> callback) and both (born -> callback)."""
    r = out.results.select(["born_ts_ms", "queue_wait_ms", "latency_ms", "end_ts_ms", "status"]).to_pandas()
    r["total_ms"] = r["end_ts_ms"] - r["born_ts_ms"]
    return r


def q(values: pd.Series, quantile: float) -> int:
    return int(np.quantile(values, quantile, method="higher")) if len(values) else 0


def numbers(r: pd.DataFrame, out: engine.SimOutput, sc: Scenario) -> dict[str, object]:
    """One variant's row: publish delay, send latency and born -> callback percentiles outside and
    during the hang, requests per message, failures."""
    fault = sc.faults[0]
    during = (r["born_ts_ms"] >= fault.start_s * 1000) & (r["born_ts_ms"] < fault.end_s * 1000)
    row: dict[str, object] = {}
    for label, part in (("healthy", r[~during]), ("hang", r[during])):
        for col, name in (("queue_wait_ms", "publish delay"), ("latency_ms", "send"), ("total_ms", "total")):
            row[f"{name} p50/p99 ms ({label})"] = f"{q(part[col], 0.5):,} / {q(part[col], 0.99):,}"
    row["requests per message"] = f"{out.attempts.num_rows / max(len(r), 1):.3f}"
    row["failed"] = int((r["status"] == "FAILED").sum())
    return row


def windows(r: pd.DataFrame) -> pd.DataFrame:
    """Per window of birth: p99 of the publish delay, the send latency and born -> callback."""
    w = r["born_ts_ms"] // WINDOW_MS
    per = r.groupby(w)[["queue_wait_ms", "latency_ms", "total_ms"]].quantile(0.99, interpolation="higher")
    per["t_s"] = (per.index + 0.5) * WINDOW_MS / 1000
    return per.reset_index(drop=True)


STYLE = {
    "autoBatch off, backpressure off": {"color": "black", "lw": 1.6},
    "autoBatch on (10 ms, 32 KiB)": {"color": "tab:blue", "lw": 1.6},
    "backpressure on (1000 sends)": {"color": "tab:orange", "lw": 1.6, "ls": "--"},
    "autoBatch on, backpressure on": {"color": "tab:green", "lw": 1.0, "ls": "--"},
}


def figure(per: dict[str, pd.DataFrame], spans: Sequence[timeline.FaultSpan]) -> Figure:
    """Three panels (p99 per second of birth, log scale): publish delay, send latency, born -> callback."""
    panels = (
        ("queue_wait_ms", "publish delay p99 (ms, log)"),
        ("latency_ms", "send latency p99 (ms, log)"),
        ("total_ms", "born -> callback p99 (ms, log)"),
    )
    fig = Figure(figsize=(15, 4.6), layout="constrained")
    axes = fig.subplots(1, len(panels), sharex=True)
    for ax, (col, label) in zip(axes, panels, strict=True):
        timeline.Timeline(tuple(spans)).mark(ax)
        for name, d in per.items():
            ax.plot(d["t_s"], d[col].clip(lower=0.5), label=name, **STYLE[name])
        ax.set_yscale("log")
        ax.set_ylabel(label)
        ax.set_xlabel(timeline.TIME_LABEL)
        ax.grid(True, alpha=0.3)
        ax.set_title(label, fontsize=10)
    axes[0].legend(fontsize=8, loc="upper left")
    fig.suptitle(
        "One 5.3.3 producer, 2000 async msg/s, broker-b hung from 15 s to 25 s: autoBatch (OMB's 10 ms, "
        f"32 KiB) and async backpressure (1000 sends) off and on ({WINDOW_MS // 1000} s windows of birth)"
    )
    return fig


def markdown(rows: dict[str, dict[str, object]]) -> str:
    """Variants as a Markdown table, one column per variant (the rows are long)."""
    names = list(rows)
    metrics = list(next(iter(rows.values())))
    lines = [["", *names], ["---"] * (len(names) + 1)]
    for m in metrics:
        lines.append(
            [m, *(f"{rows[n][m]:,}" if isinstance(rows[n][m], int) else str(rows[n][m]) for n in names)]
        )
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def main(argv: Sequence[str] = ()) -> int:
    out_dir = figure_args.out_dir(argv, "rocketsim.present.autobatch_compare", __doc__)
    out_dir.mkdir(parents=True, exist_ok=True)
    per: dict[str, pd.DataFrame] = {}
    rows: dict[str, dict[str, object]] = {}
    spans: Sequence[timeline.FaultSpan] = ()
    for name, overrides in VARIANTS.items():
        sc = load_scenario(SCENARIO, [*BASE, *overrides])
        _, out = run_once(sc)
        r = frame(out)
        per[name], rows[name] = windows(r), numbers(r, out, sc)
        spans = timeline.fault_spans(sc)
    print(markdown(rows))
    path = plots.save_figure(figure(per, spans), out_dir, "autobatch")
    print(f"\n{path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
