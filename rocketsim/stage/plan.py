"""What a stage's tasks do (:class:`StagePlan`: the stages they run, the summaries' window, the size of a
chunk) and how its producers are spread over tasks (:func:`producer_bins`)."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from rocketsim.broker.queue import JOINT
from rocketsim.scenario import Scenario, workload
from rocketsim.stage.graph import RUNS_TABLE, STAGES, SUMMARIES_ONLY, check_stages, tables_read, written
from rocketsim.tables.schemas import BROKER_SIDE, SIMULATE

# messages a producer task simulates at a time by default: its memory is bounded by this, whatever the
# producer's size (one steady producer task's peak RSS: ~0.9 GB with 128k, ~1.4 GB with 256k, ~0.7 GB with
# 64k; the next chunk is given before a chunk's rows come out)
CHUNK_ROWS = 1 << 17


@dataclass(frozen=True)
class StagePlan:
    """The ``stages`` a stage's tasks run (a contiguous part of :data:`rocketsim.stage.graph.STAGES`),
    the window of the summary tables and the messages a producer task handles at a time. ``only``: a
    summaries-only run (every stage, ``--tables summary``): the summary tables it writes (of
    :data:`rocketsim.stage.graph.SUMMARIES_ONLY`); its producer tasks fold the simulation into the
    aggregates and write no row, and it has no broker task."""

    stages: tuple[str, ...]
    window_ms: int = 10_000
    chunk_rows: int = CHUNK_ROWS
    only: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_stages(self.stages)
        if self.only and (self.stages != STAGES or not set(self.only) <= set(SUMMARIES_ONLY)):
            raise ValueError(
                f"a summaries-only stage runs every stage {STAGES} and writes some of {SUMMARIES_ONLY}, "
                f"got stages {self.stages} and tables {self.only}"
            )
        if self.window_ms <= 0:
            raise ValueError(f"window_ms must be > 0, got {self.window_ms}")
        if self.chunk_rows <= 0:
            raise ValueError(f"chunk_rows must be > 0, got {self.chunk_rows}")

    def runs(self, stage_name: str) -> bool:
        return stage_name in self.stages

    @property
    def summaries_only(self) -> bool:
        return bool(self.only)

    def tables(self) -> tuple[str, ...]:
        """The tables the stage's tasks and driver write: its stages', or a summaries-only run's."""
        return tuple(t for t in self.only if t != RUNS_TABLE) if self.only else written(self.stages)

    @property
    def has_brokers(self) -> bool:
        """Whether the stage has broker tasks (numbering commit logs, or the broker side)."""
        return not self.summaries_only and (self.runs(SIMULATE) or self.runs(BROKER_SIDE))

    def reads(self) -> tuple[str, ...]:
        """The committed tables the tasks read (:func:`rocketsim.stage.graph.tables_read`)."""
        return tables_read(self.stages)


def balanced_bins(weights: Sequence[int], bins: int) -> list[list[int]]:
    """Items ``0..len(weights)-1`` spread over at most ``bins`` bins: heaviest first, each onto the least
    loaded bin (LPT), so one heavy item gets a bin of its own. Deterministic; each bin sorted."""
    bins = max(1, min(bins, len(weights)))
    heap = [(0, b) for b in range(bins)]
    out: list[list[int]] = [[] for _ in range(bins)]
    for item in sorted(range(len(weights)), key=lambda i: (-weights[i], i)):
        load, b = heapq.heappop(heap)
        out[b].append(item)
        heapq.heappush(heap, (load + max(weights[item], 1), b))
    return [sorted(b) for b in out if b]


def producer_bins(shares: Sequence[workload.ProducerShare], bins: int) -> list[list[int]]:
    """Producers spread over ``bins`` tasks by their message counts (:func:`balanced_bins`)."""
    by_index = balanced_bins([s.messages for s in shares], bins)
    return [sorted(shares[i].producer for i in b) for b in by_index]


def stage_bins(
    sc: Scenario, plan: StagePlan, shares: Sequence[workload.ProducerShare], tasks: int
) -> list[list[int]]:
    """The producers of each producer task of the stage: :func:`producer_bins`, or every producer in one
    task when they are simulated together (``brokers.coupling`` joint)."""
    if sc.coupling == JOINT and plan.runs(SIMULATE):
        return [sorted(s.producer for s in shares)]
    return producer_bins(shares, tasks)
