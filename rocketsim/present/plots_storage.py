"""Charts of the broker side of a run: matplotlib over the pandas frames of ``broker_storage`` and
``consumer_load`` (as ``rocketsim.warehouse.read.read_pandas`` returns them). No pyplot state: the
function returns a :class:`matplotlib.figure.Figure`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from rocketsim.broker.store import COMMIT_LOG_FILE_BYTES, HALF_TOPIC, SCHEDULE_TOPIC

__all__ = ["storage_and_consumers"]

_MIB = 1024 * 1024
_KIND_COLORS = {"topic": "#4c72b0", SCHEDULE_TOPIC: "#dd8452", HALF_TOPIC: "#55a868"}


def _queue_label(topic: str, queue_id: int) -> str:
    if topic == SCHEDULE_TOPIC:
        return f"delay L{queue_id + 1}"
    if topic == HALF_TOPIC:
        return "half"
    return f"{topic}:{queue_id}"


def storage_and_consumers(storage: pd.DataFrame, load: pd.DataFrame) -> Figure:
    """Three panels: commit-log growth per broker, records per stored queue, messages per consumer.

    ``storage``: ``broker_storage`` rows; ``load``: ``consumer_load`` rows (any number of groups).
    """
    fig = Figure(figsize=(12, 10), dpi=110, layout="constrained")
    ax_log, ax_queues, ax_load = fig.subplots(3, 1, height_ratios=[1, 1.1, 1.1])
    brokers = sorted(storage["broker"].unique()) if len(storage) else []

    # 1. commit-log bytes (cumulative, broker-wide) at the end of each window with writes
    for b in brokers:
        rows = (
            storage[storage["broker"] == b]
            .groupby("window_start_ms", as_index=False)
            .agg(end_ms=("window_ms", "first"), total=("commit_log_bytes", "max"))
        )
        x = (rows["window_start_ms"] + rows["end_ms"]) / 1000
        ax_log.plot(x, rows["total"] / _MIB, marker=".", label=b)
    top = storage["commit_log_bytes"].max() if len(storage) else 0
    for k in range(1, int(top // COMMIT_LOG_FILE_BYTES) + 1):  # where a new 1 GiB file starts
        ax_log.axhline(k * COMMIT_LOG_FILE_BYTES / _MIB, color="0.6", lw=0.8, ls=":")
    ax_log.set(
        title="Commit log per broker (cumulative; dotted: 1 GiB file boundaries)",
        xlabel="time since scenario start (s)",
        ylabel="MiB",
    )
    if brokers:
        ax_log.legend(loc="upper left", fontsize="small")

    # 2. records per stored (topic, queue), per broker: producer-side skew, delay levels, halves
    per_queue = storage.groupby(["broker", "topic", "queue_id"], as_index=False)["messages"].sum()
    per_queue = per_queue.sort_values(["broker", "topic", "queue_id"]).reset_index(drop=True)
    labels = [f"{r.broker}\n{_queue_label(r.topic, r.queue_id)}" for r in per_queue.itertuples()]
    colors = [_KIND_COLORS.get(t, _KIND_COLORS["topic"]) for t in per_queue["topic"]]
    ax_queues.bar(np.arange(len(per_queue)), per_queue["messages"], color=colors)
    ax_queues.set_xticks(np.arange(len(per_queue)), labels, fontsize=6, rotation=90)
    ax_queues.set(title="Records written per stored queue", ylabel="records")
    handles = [Patch(color=c, label=k if k != "topic" else "user topic") for k, c in _KIND_COLORS.items()]
    ax_queues.legend(handles=handles, fontsize="small")

    # 3. messages each consumer gets (AllocateMessageQueueAveragely), per group; unread queues apart
    groups = sorted(load["consumer_group"].unique()) if len(load) else []
    width = 0.8 / max(len(groups), 1)
    consumers = sorted(c for c in load["consumer"].dropna().unique()) if len(load) else []
    names = [*consumers, "not read"]
    for i, g in enumerate(groups):
        rows = load[load["consumer_group"] == g]
        per = rows.groupby(rows["consumer"].fillna("not read"))["messages"].sum()
        values = [per.get(n, np.nan) for n in names]
        read = per.drop("not read", errors="ignore")
        skew = read.max() / read.mean() if len(read) and read.mean() > 0 else float("nan")
        ax_load.bar(np.arange(len(names)) + i * width, values, width, label=f"{g} (max/mean {skew:.2f})")
    ax_load.set_xticks(np.arange(len(names)) + width * (len(groups) - 1) / 2, names, fontsize=7, rotation=45)
    ax_load.set(title="Messages per consumer (queues written but not read: 'not read')", ylabel="messages")
    if groups:
        ax_load.legend(fontsize="small")
    return fig
