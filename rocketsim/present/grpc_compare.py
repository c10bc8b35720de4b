"""docs/grpc.md's comparison: one broker's brown-out through the remoting client 5.3.3 and through the
gRPC clients (Java java-5.2.1, Python 5.1.2) behind a 5.3.3 Proxy, in cluster and local mode.

``python -m rocketsim.present.grpc_compare [OUT_DIR]`` simulates ``brownout.toml`` (broker-b 30x slower from
120 s to 420 s) and a severe variant of it (300x: broker-b answers in about a second, often past the
Proxy's 2 s wait), at 100 messages/s, under each client, in this process; writes ``grpc_brownout.png`` into
OUT_DIR (default ``docs``) and prints the numbers as Markdown tables.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
from matplotlib.figure import Figure

from rocketsim import engine
from rocketsim.present import figure_args, plots, timeline
from rocketsim.scenario import Scenario, load_scenario, workload
from rocketsim.stage.tables import producer_messages
from rocketsim.tables import summaries

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "conf" / "scenarios" / "brownout.toml"
WINDOW_MS = 10_000
SICK = "broker-b"
BASE = ("workload.rate_per_s=100", "workload.messages=60000")
SEVERITIES = {
    "brown-out x30 (brownout.toml)": (),
    "severe brown-out x300": ("faults.0.factor=300",),
    "for contrast: an outage from 125 s": ("faults.0.kind=outage", "faults.0.start_s=125"),
}
_GRPC = ("producers.client_family=grpc",)
VARIANTS: dict[str, tuple[str, ...]] = {
    "remoting 5.3.3, fault strategy on": ("producers.client_version=5.3.3",),
    "remoting 5.3.3, fault strategy off": (
        "producers.client_version=5.3.3",
        "producers.send_latency_fault_enable=false",
    ),
    "gRPC Java, cluster Proxy": (*_GRPC, "producers.client_version=java-5.2.1", "proxy.mode=cluster"),
    "gRPC Python, cluster Proxy": (*_GRPC, "producers.client_version=python-5.1.2", "proxy.mode=cluster"),
    "gRPC Java, local Proxies": (*_GRPC, "producers.client_version=java-5.2.1", "proxy.mode=local"),
    "gRPC Python, local Proxies": (*_GRPC, "producers.client_version=python-5.1.2", "proxy.mode=local"),
}
RECOVERED = 1.5  # a window is back to normal when its send p99 is within 1.5x the pre-fault p99


def run_once(sc: Scenario) -> tuple[pa.Table, engine.SimOutput]:
    """Every producer's messages of ``sc`` and their simulation, here (the engine the scenario's client
    family takes)."""
    messages = pa.concat_tables([producer_messages(sc, s) for s in workload.producer_shares(sc)])
    return messages, engine.simulate(messages, sc)


def send_windows(out: engine.SimOutput) -> pd.DataFrame:
    """Per window of send start: the send p99 (ms), retries per second, and the sick broker's share of
    the attempts (%)."""
    r = out.results.select(["send_ts_ms", "latency_ms", "status"]).to_pandas()
    a = out.attempts.select(["start_ts_ms", "attempt", "broker"]).to_pandas()
    r["w"] = r["send_ts_ms"] // WINDOW_MS
    a["w"] = a["start_ts_ms"] // WINDOW_MS
    per = pd.DataFrame({"p99_ms": r.groupby("w")["latency_ms"].quantile(0.99, interpolation="higher")})
    per["failed"] = r.assign(f=r["status"] == "FAILED").groupby("w")["f"].sum()
    per["retries_per_s"] = a.assign(x=a["attempt"] > 0).groupby("w")["x"].sum() / (WINDOW_MS / 1000)
    per["sick_share_pct"] = a.assign(x=a["broker"] == SICK).groupby("w")["x"].mean() * 100
    per["sends"] = r.groupby("w").size()
    per = per.fillna(0).reset_index()
    per["t_s"] = (per["w"] + 0.5) * WINDOW_MS / 1000
    return per[per["sends"] >= 0.5 * per["sends"].median()]  # not the run's ragged last window


def time_to_recover_s(
    per: pd.DataFrame, fault_start_ms: int, fault_end_ms: int, fair_share_pct: float
) -> float | None:
    """Seconds after the fault ends until the clients are back for good: no failed send, the windowed send
    p99 within ``RECOVERED`` x its median before the fault, and the sick broker's share of attempts within
    80% of its fair share (a client still avoiding it has not recovered). None: not within the run."""
    base = per.loc[(per["w"] + 1) * WINDOW_MS <= fault_start_ms, "p99_ms"].median()
    ok = (
        (per["failed"] == 0)
        & (per["p99_ms"] <= RECOVERED * base)
        & (per["sick_share_pct"] >= 0.8 * fair_share_pct)
    )
    after = per[per["w"] * WINDOW_MS >= fault_end_ms]
    bad = after.index[~ok[after.index]]
    if len(bad) == 0:
        return 0.0
    rest = after.loc[after.index > bad[-1]]
    return None if rest.empty else float(rest["w"].iloc[0] * WINDOW_MS - fault_end_ms) / 1000


def numbers(sc: Scenario, messages: pa.Table, out: engine.SimOutput, per: pd.DataFrame) -> dict[str, object]:
    """One variant's row: the run's failures, retries, p99 and duplicates (run_summary), the send p99 and
    the sick broker's share during the fault, and the times to adapt and recover."""
    aggregates = summaries.producer_aggregates(out.attempts, out.results, WINDOW_MS, messages=messages)
    tables = summaries.summary_tables(aggregates)
    rs = tables["run_summary"].to_pandas().set_index("scope")
    fault = sc.faults[0]
    start, end = int(fault.start_s * 1000), int(fault.end_s * 1000)
    r = out.results.select(["send_ts_ms", "latency_ms"]).to_pandas()
    during = r[(r["send_ts_ms"] >= start) & (r["send_ts_ms"] < end)]["latency_ms"]
    a = out.attempts.select(["start_ts_ms", "broker"]).to_pandas()
    a = a[(a["start_ts_ms"] >= start) & (a["start_ts_ms"] < end)]
    recovered = time_to_recover_s(per, start, end, 100 / len(sc.cluster.brokers))
    return {
        "failed": int(rs.loc["all", "failed"]),
        "retries": int(rs.loc["all", "retries"]),
        "p99 ms (run)": int(rs.loc["all", "latency_p99_ms"]),
        "p99 ms (during the fault)": int(np.quantile(during, 0.99, method="higher")),
        f"{SICK} share (during the fault)": f"{(a['broker'] == SICK).mean() * 100:.1f}%",
        "recovered after the end (s)": "not in the run" if recovered is None else f"{recovered:g}",
        "duplicates": int(rs.loc["all", "duplicates"]),
    }


def style(variant: str) -> dict[str, object]:
    """A variant's line: the colour says the client (remoting black/grey, Java blue, Python orange), the
    dashes the Proxy's mode (local dashed); Python in cluster mode thin over Java's (they coincide)."""
    if variant.startswith("remoting"):
        return {"color": "black" if "on" in variant.split(",")[-1] else "0.6", "lw": 1.4}
    color = "tab:blue" if "Java" in variant else "tab:orange"
    local = "local" in variant
    return {
        "color": color,
        "ls": "--" if local else "-",
        "lw": 0.9 if ("Python" in variant and not local) else 1.6,
    }


def figure(per: dict[str, dict[str, pd.DataFrame]], spans: dict[str, Sequence[timeline.FaultSpan]]) -> Figure:
    """One row per severity: send p99, retries per second, the sick broker's share of attempts; one line
    per client."""
    panels = (
        ("p99_ms", "send p99 (ms, log)"),
        ("retries_per_s", "retries / s"),
        ("sick_share_pct", f"{SICK} share (%)"),
    )
    fig = Figure(figsize=(15, 4.2 * len(per) + 0.8), layout="constrained")
    axes = fig.subplots(len(per), len(panels), sharex=True, squeeze=False)
    for i, (severity, variants) in enumerate(per.items()):
        for j, (col, label) in enumerate(panels):
            ax = axes[i, j]
            timeline.Timeline(tuple(spans[severity])).mark(ax)
            for name, d in variants.items():
                ax.plot(d["t_s"], d[col], label=name, **style(name))
            if col == "p99_ms":
                ax.set_yscale("log")
            ax.set_ylabel(label)
            ax.grid(True, alpha=0.3)
            ax.set_title(f"{severity}: {label}", fontsize=10)
        axes[i, 0].legend(fontsize=8, loc="upper left")
    for ax in axes[-1]:
        ax.set_xlabel(timeline.TIME_LABEL)
    fig.suptitle(
        f"{SICK} browns out from 120 s to 420 s (for contrast, bottom: dies from 125 s): remoting 5.3.3 vs "
        f"the gRPC clients behind a 5.3.3 Proxy\n({WINDOW_MS // 1000} s windows, 8 producers, 100 msg/s; "
        "Java and Python coincide in cluster mode)"
    )
    return fig


def markdown(rows: dict[str, dict[str, object]]) -> str:
    """Variants as a Markdown table."""
    cols = list(next(iter(rows.values())))
    lines = [["client", *cols], ["---"] * (len(cols) + 1)]
    lines += [
        [name, *(f"{v:,}" if isinstance(v, int) else str(v) for v in row.values())]
        for name, row in rows.items()
    ]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def main(argv: Sequence[str] = ()) -> int:
    out_dir = figure_args.out_dir(argv, "rocketsim.present.grpc_compare", __doc__)
    out_dir.mkdir(parents=True, exist_ok=True)
    per: dict[str, dict[str, pd.DataFrame]] = {}
    spans: dict[str, Sequence[timeline.FaultSpan]] = {}
    for severity, extra in SEVERITIES.items():
        per[severity], rows = {}, {}
        for name, overrides in VARIANTS.items():
            sc = load_scenario(SCENARIO, [*BASE, *extra, *overrides])
            messages, out = run_once(sc)
            per[severity][name] = send_windows(out)
            rows[name] = numbers(sc, messages, out, per[severity][name])
            spans[severity] = timeline.fault_spans(sc)
        print(f"\n### {severity}\n")
        print(markdown(rows))
    path = plots.save_figure(figure(per, spans), out_dir, "grpc_brownout")
    print(f"\n{path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
