"""Attempts per queue cell (producer, window of the attempt's start, broker, queue), counted once a part:
the finest cells the attempt tables need. ``attempt_cells`` (broker, window) and ``queue_cells`` (broker,
queue, window) add the queue cells up, ``producer_windows``' queue spread reads them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rocketsim.tables.grouping import Groups
from rocketsim.tables.summaries.columns import AttemptColumns


@dataclass(frozen=True)
class QueueCells:
    """Per queue cell (in (producer, window, broker, queue) order): its keys and its attempts' counts
    (:meth:`AttemptColumns.counts`, the store's sums and ``queue_depth_max``: -1 without a request the
    store saw); ``rows``: the attempts grouped by cell."""

    producer: np.ndarray
    window: np.ndarray
    broker: np.ndarray
    queue: np.ndarray
    counts: dict[str, np.ndarray]
    rows: Groups

    @staticmethod
    def of(a: AttemptColumns) -> QueueCells:
        g = Groups([a.producer, a.window, a.broker, a.queue])
        counts = {
            **a.counts(g),
            "store_requests": g.sum(a.seen),
            "queue_depth_sum": g.sum(a.depth),
            "store_service_us": g.sum(a.service),
            "queue_depth_max": g.max(np.where(a.seen, a.depth, -1)),
        }
        f = g.first
        return QueueCells(a.producer[f], a.window[f], a.broker[f], a.queue[f], counts, g)

    def sums(self, cells: Groups) -> dict[str, np.ndarray]:
        """The counts per group of ``cells`` (a grouping of the queue cells): sums, the depth's max."""
        return {
            name: (cells.max if name == "queue_depth_max" else cells.sum)(v)
            for name, v in self.counts.items()
        }
