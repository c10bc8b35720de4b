"""The comparison of the shipped closed-loop scenarios (``cascade``, ``store_stall``, ``overload_retry``;
docs/closed-loop.md): each scenario under the variants its question names, simulated in this process with
the exact coupling (``brokers.coupling = joint``), summarised (:mod:`rocketsim.tables.summaries`) and charted.

``python -m rocketsim.present.closed_loop [OUT_DIR]`` writes ``closed_loop_<scenario>.png`` (per broker
over time: writer utilisation, flow-control rejections per second, attempt p99, one column per variant)
into OUT_DIR (default ``docs``) and prints the run-level numbers as Markdown tables.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa
from matplotlib.figure import Figure

from rocketsim import engine
from rocketsim.present import figure_args, plots, timeline
from rocketsim.scenario import Scenario, load_scenario, workload
from rocketsim.stage.tables import producer_messages
from rocketsim.tables import schemas, summaries

ROOT = Path(__file__).resolve().parents[2]
WINDOW_MS = 5_000
# scenario -> variant label -> overrides (the question in each scenario's header)
VARIANTS: dict[str, dict[str, tuple[str, ...]]] = {
    "cascade": {
        "fault strategy on": (),
        "fault strategy off": ("producers.send_latency_fault_enable=false",),
    },
    "store_stall": {
        "client 4.9.8, broker 4.9.8": (),
        "client 5.3.3, broker 4.9.8": ("producers.client_version=5.3.3",),
        "client 4.9.8, broker 5.3.3": ("cluster.broker_version=5.3.3",),
        "client 5.3.3, broker 5.3.3": ("producers.client_version=5.3.3", "cluster.broker_version=5.3.3"),
    },
    "overload_retry": {
        "client 4.9.8 (no SYSTEM_BUSY retry)": (),
        "client 5.3.3 (retries SYSTEM_BUSY)": ("producers.client_version=5.3.3",),
    },
}
PANELS = (
    plots.Panel("utilisation", "writer utilisation (%)", per="time"),
    plots.Panel("busy", "SYSTEM_BUSY / s", per="second"),
    plots.Panel("latency_p99_ms", "attempt p99 (ms, log)", log=True),
)


def summary_of(sc: Scenario, window_ms: int = WINDOW_MS) -> dict[str, pa.Table]:
    """The summary tables of one whole run of ``sc``, simulated here (``window_ms`` windows)."""
    messages = pa.concat_tables([producer_messages(sc, s) for s in workload.producer_shares(sc)])
    out = engine.simulate(messages, sc)
    return summaries.summary_tables(
        summaries.producer_aggregates(
            out.attempts, out.results, window_ms, messages=messages, faults=summaries.fault_spans(sc.faults)
        )
    )


def run_variants(
    name: str, variants: Mapping[str, Sequence[str]]
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, timeline.Timeline]]:
    """``broker_windows`` and ``run_summary`` of scenario ``name`` under each variant (a ``variant``
    column), with the exact coupling, and each variant's :class:`~rocketsim.present.timeline.Timeline`."""
    windows, runs, timelines = [], [], {}
    for label, overrides in variants.items():
        sc = load_scenario(
            ROOT / "conf" / "scenarios" / f"{name}.toml", ["brokers.coupling=joint", *overrides]
        )
        tables = {table: t.to_pandas() for table, t in summary_of(sc).items()}
        windows.append(tables["broker_windows"].assign(variant=label))
        runs.append(tables["run_summary"].assign(variant=label))
        span = tables["run_summary"].query("scope == 'all'")["duration_ms"]
        stop = timeline.producers_stop_ms(tables["producer_windows"])
        timelines[label] = timeline.Timeline(tuple(timeline.fault_spans(sc)), int(span.iloc[0]), stop)
    return pd.concat(windows, ignore_index=True), pd.concat(runs, ignore_index=True), timelines


def comparison_figure(
    name: str, bw: pd.DataFrame, variants: Sequence[str], timelines: Mapping[str, timeline.Timeline]
) -> Figure:
    """Per broker over time under each variant: utilisation, flow-control rejections, attempt p99."""
    bw = bw.assign(busy=bw[list(schemas.BUSY_COLUMNS)].sum(axis=1))
    fig = plots.variant_timelines(bw, variants, timelines, PANELS)
    fig.suptitle(f"{name}.toml: per broker over time, under each variant ({WINDOW_MS // 1000} s windows)")
    return fig


def numbers(rs: pd.DataFrame) -> pd.DataFrame:
    """The run-level numbers of each variant (scope "all")."""
    a = rs[rs["scope"] == "all"].set_index("variant")
    out = pd.DataFrame(index=a.index)
    out["messages"] = a["messages"]
    out["failed %"] = (a["failed"] / a["messages"] * 100).round(2)
    out["attempts"] = a["sends"]
    out["retries"] = a["retries"]
    for col in schemas.BUSY_COLUMNS:
        out[col.removeprefix("busy_").upper()] = a[col]
    out["p99 ms"] = a["latency_p99_ms"]
    out["duplicates"] = a["duplicates"]
    return out.loc[:, (out != 0).any(axis=0) | out.columns.isin(["failed %", "retries", "duplicates"])]


def markdown(df: pd.DataFrame) -> str:
    """A frame as a Markdown table (index first)."""
    head = [df.index.name or "", *map(str, df.columns)]
    rows = [
        [str(i), *(f"{v:,}" if isinstance(v, int) else f"{v:g}" for v in r)]
        for i, r in zip(df.index, df.itertuples(index=False, name=None), strict=True)
    ]
    lines = [head, ["---"] * len(head), *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def main(argv: Sequence[str] = ()) -> int:
    out_dir = figure_args.out_dir(argv, "rocketsim.present.closed_loop", __doc__)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, variants in VARIANTS.items():
        bw, rs, timelines = run_variants(name, variants)
        fig = comparison_figure(name, bw, list(variants), timelines)
        path = plots.save_figure(fig, out_dir, f"closed_loop_{name}")
        print(f"\n### {name} ({path})\n")
        print(markdown(numbers(rs)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
