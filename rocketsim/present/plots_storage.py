"""Charts of the broker side of a run: matplotlib over the pandas frames of ``broker_storage`` and
``consumer_load`` (as ``rocketsim.warehouse.read.read_pandas`` returns them). No pyplot state: the
function returns a :class:`matplotlib.figure.Figure`; its time axis follows :mod:`rocketsim.present.timeline`
(the run's last window, the fault windows).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from rocketsim.broker.store import COMMIT_LOG_FILE_BYTES, HALF_TOPIC, SCHEDULE_TOPIC
from rocketsim.present.plots import label_groups, legend_right, thin_labels
from rocketsim.present.timeline import NO_TIMELINE, TIME_LABEL, Timeline, broker_styles

__all__ = ["storage_and_consumers"]

_MIB = 1024 * 1024
_KIND_COLORS = {"topic": "#4c72b0", SCHEDULE_TOPIC: "#dd8452", HALF_TOPIC: "#55a868"}


def storage_and_consumers(storage: pd.DataFrame, load: pd.DataFrame, tl: Timeline = NO_TIMELINE) -> Figure:
    """Three panels: commit-log growth per broker, records per stored queue, messages per consumer.

    ``storage``: ``broker_storage`` rows; ``load``: ``consumer_load`` rows (any number of groups);
    ``tl``: the run's :class:`~rocketsim.present.timeline.Timeline`.
    """
    fig = Figure(figsize=(12, 10), dpi=110, layout="constrained")
    ax_log, ax_queues, ax_load = fig.subplots(3, 1, height_ratios=[1, 1.1, 1.1])
    brokers = sorted(storage["broker"].unique()) if len(storage) else []
    styles = broker_styles(brokers)

    # 1. commit-log bytes (cumulative, broker-wide) at the end of the covered part of each window with writes
    tl.mark(ax_log)
    for b in brokers:
        rows = (
            storage[storage["broker"] == b]
            .groupby("window_start_ms", as_index=False)
            .agg(window_ms=("window_ms", "first"), total=("commit_log_bytes", "max"))
        )
        rows = tl.windows(rows)
        x = (rows["window_start_ms"] + rows["covered_ms"]) / 1000
        ax_log.plot(x, rows["total"] / _MIB, label=b, **styles[b])
    top = storage["commit_log_bytes"].max() if len(storage) else 0
    for k in range(1, int(top // COMMIT_LOG_FILE_BYTES) + 1):  # where a new 1 GiB file starts
        ax_log.axhline(k * COMMIT_LOG_FILE_BYTES / _MIB, color="0.6", lw=0.8, ls=":")
    ax_log.set(
        title="Commit log per broker (cumulative; dotted: 1 GiB file boundaries)",
        xlabel=TIME_LABEL,
        ylabel="MiB",
    )
    legend_right(ax_log)

    # 2. records per stored (topic, queue), grouped by broker: producer-side skew, delay levels, halves
    per_queue = storage.groupby(["broker", "topic", "queue_id"], as_index=False)["messages"].sum()
    per_queue = per_queue.sort_values(["broker", "topic", "queue_id"]).reset_index(drop=True)
    colors = [_KIND_COLORS.get(t, _KIND_COLORS["topic"]) for t in per_queue["topic"]]
    ax_queues.bar(np.arange(len(per_queue)), per_queue["messages"], color=colors)
    if len(per_queue):
        label_groups(ax_queues, list(per_queue["broker"]), axis="x")
        ax_queues.set_xlim(-0.6, len(per_queue) - 0.4)
    ax_queues.set(
        title="Records written per stored queue (a bar per queue, grouped by broker)", ylabel="records"
    )
    handles = [Patch(color=c, label=k if k != "topic" else "user topic") for k, c in _KIND_COLORS.items()]
    legend_right(ax_queues, handles=handles)

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
    thin_labels(ax_load)
    ax_load.set(title="Messages per consumer (queues written but not read: 'not read')", ylabel="messages")
    legend_right(ax_load)
    tl.legend(fig)
    return fig
