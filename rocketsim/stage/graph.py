"""The stage graph as one table: each stage of a run and the tables its work reads.

What each stage writes is the table registry's (:func:`rocketsim.tables.schemas.written_by`: a table's
``stage``); :data:`GRAPH` adds what each one reads. Everything else follows from the two, so the jobs,
the reconciliation, the digest and the Spark jobs read it here instead of listing tables: the stages a
run's tasks run (:data:`STAGES`), what a job running some of them reads of the run's committed tables
(:func:`tables_read`) and what other stages made from the tables it rewrites (:func:`derived_tables`).
A whole run may also write only its summaries (:func:`selected_tables`: ``--tables summary``): the
summarize stage's tables and ``runs``, folded from the simulation without the per-message tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rocketsim.tables import schemas
from rocketsim.tables.schemas import BROKER_SIDE, GENERATE, RUNS_ROW, SIMULATE, SUMMARIZE


@dataclass(frozen=True)
class StageSpec:
    """One stage: its name, the tables its work reads (the committed ones when the stage writing them is
    not in the same job) and whether the run's tasks run it (else the driver, once the run is whole)."""

    name: str
    reads: tuple[str, ...]
    tasks: bool = True


# In the order a run runs them: a stage reads only what stages before it write.
GRAPH: tuple[StageSpec, ...] = (
    StageSpec(GENERATE, ()),
    StageSpec(SIMULATE, ("messages",)),
    StageSpec(BROKER_SIDE, ("messages", "send_results", "commit_log")),
    StageSpec(SUMMARIZE, ("messages", "send_attempts", "send_results")),
    StageSpec(RUNS_ROW, ("messages", "send_attempts", "send_results"), tasks=False),  # its counts
)
SPECS = {s.name: s for s in GRAPH}
STAGES = tuple(s.name for s in GRAPH if s.tasks)  # a run's tasks (a job runs a contiguous part of them)
RUN_STAGES = tuple(s.name for s in GRAPH)  # what jobs/pipeline.py writes
# the column by which a task picks the committed files it reads (each file's range of it: the Delta log's)
INPUT_COLUMNS = {"messages": "producer", "send_attempts": "producer", "send_results": "producer"}
INPUT_COLUMNS["commit_log"] = "broker"


def written(stages: Sequence[str]) -> tuple[str, ...]:
    """The tables ``stages`` write, in registry order."""
    return tuple(t.name for t in schemas.written_by(*stages))


RUN_TABLES = written(RUN_STAGES)  # every table of a run
(RUNS_TABLE,) = written((RUNS_ROW,))  # the run's row: what it ran and what it wrote
# what a summaries-only run writes (--tables summary): the summarize stage's tables and its runs row
SUMMARIES_ONLY = written((SUMMARIZE, RUNS_ROW))
ALL, SUMMARY = "all", "summary"  # the named selections of --tables


def selected_tables(spec: str) -> tuple[str, ...]:
    """The tables a whole run writes for ``--tables spec`` (``runs`` always: it records the selection):
    ``all`` (every table), ``summary`` (:data:`SUMMARIES_ONLY`) or a comma-separated list of those.
    ValueError naming the rule and the value otherwise: the other tables are per message or made by the
    broker tasks from the numbered commit logs, which only a run of every table makes."""
    names = [n.strip() for n in spec.split(",")]
    if names == [ALL]:
        return RUN_TABLES
    if names == [SUMMARY]:
        return SUMMARIES_ONLY
    if not set(names) <= set(SUMMARIES_ONLY):
        summaries = ", ".join(t for t in SUMMARIES_ONLY if t != RUNS_TABLE)
        raise ValueError(
            f"--tables must be all, summary or a comma-separated list of summary tables ({summaries}), "
            f"got {spec!r}"
        )
    return tuple(t for t in SUMMARIES_ONLY if t in (*names, RUNS_TABLE))


def check_stages(stages: Sequence[str]) -> None:
    """ValueError unless ``stages`` is a contiguous part of :data:`STAGES`, in order."""
    at = [STAGES.index(s) for s in stages if s in STAGES]
    if len(at) != len(stages) or not at or at != list(range(at[0], at[0] + len(at))):
        raise ValueError(f"the stage runs a contiguous part of {STAGES}, got {tuple(stages)}")


def tables_read(stages: Sequence[str]) -> tuple[str, ...]:
    """The committed tables the work of ``stages`` reads: what those stages read and do not write."""
    mine = set(written(stages))
    needed = {t for s in stages for t in SPECS[s].reads} - mine
    return tuple(t.name for t in schemas.REGISTRY if t.name in needed)


def derived_tables(stages: Sequence[str]) -> tuple[str, ...]:
    """The tables of a run made (by stages not in ``stages``) from the tables ``stages`` write: a job
    that rewrites those drops these from the run, which would otherwise describe rows it replaced (a
    rerun of ``jobs/simulate.py`` drops the broker side, the summaries and the ``runs`` row)."""
    mine = set(written(stages))
    changed = set(mine)
    for spec in GRAPH:  # in run order: what a stage made from changed tables changes the stages after it
        if spec.name not in stages and changed & set(spec.reads):
            changed |= set(written((spec.name,)))
    return tuple(t.name for t in schemas.REGISTRY if t.name in changed - mine)
