"""The run-level commit: every table of a run becomes visible at once, and a rerun replaces the run at once.

Delta commits one table at a time, and a run is many tables (13 for a pipeline run). So every table is
partitioned by ``(run_id, write_id)``: each write of a table for a run is a partition of its own, and the
table ``run_commits`` (one row per table of a run: the table, its current ``write_id``, the job, the rows
it committed) says which write of each table the run holds. A job that writes a run (every job: the
pipeline, the staged jobs, a comparison, ``write_run`` of the sink):

1. commits each table's write as its own partition (:func:`rocketsim.warehouse.delta.commit_run`): no
   earlier row changes, and no reader sees the new ones;
2. reconciles what it wrote;
3. publishes (:func:`publish_writes`): ONE commit of ``run_commits`` replaces the run's rows there by the
   new set (the tables it wrote point at their new writes; tables made from what it rewrote, which it
   does not write itself, are dropped from the run; the others keep theirs). From that commit on,
   readers see the new run, whole; before it, the old one, whole;
4. removes the run's superseded writes from the tables (:func:`rocketsim.warehouse.delta.remove_writes`:
   remove actions only, no data rewritten).

A job killed before step 3 leaves the old run whole and nothing of the new one visible (its writes are
orphans: :func:`rocketsim.warehouse.vacuum.retire_orphan_writes` removes them); killed after it, the new
run is whole and its superseded writes wait for the next run or ``jobs/vacuum.py``.

Every reader of the project (:mod:`rocketsim.warehouse.read`, :func:`rocketsim.spark.read.read_spark`,
the report, the notebooks, the jobs reading a run's committed tables) selects the rows whose
``write_id`` ``run_commits`` names. An outside reader does the same (the README's query)::

    SELECT * FROM delta_scan('<warehouse>/send_results')
    WHERE write_id IN (SELECT write_id FROM delta_scan('<warehouse>/run_commits'))
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable
from deltalake.transaction import AddAction

from rocketsim.tables.schemas import RUN_COMMITS
from rocketsim.warehouse.delta import (
    StagedFile,
    commit_actions,
    crash_point,
    ensure_table,
    open_table,
    remove_writes,
    stage_written,
    write_partitions,
)
from rocketsim.warehouse.files import write_parquet
from rocketsim.warehouse.paths import (
    PARTITION_COLUMN,
    WRITE_COLUMN,
    check_run_id,
    delete_dir,
    make_dir,
    new_write_id,
    staging_path,
    table_path,
)

RUN_COMMITS_TABLE = "run_commits"
_DATA = pa.schema([f for f in RUN_COMMITS if f.name != PARTITION_COLUMN])


@dataclass(frozen=True)
class TableWrite:
    """One write of a table for a run, as ``run_commits`` records it."""

    table: str
    write_id: str
    rows: int
    job: str = ""
    committed_at: str = ""


def run_commits(warehouse: str | os.PathLike[str], run_id: str | None = None) -> pa.Table:
    """The rows of ``run_commits`` (one run, or all); empty if nothing was ever published."""
    uri = table_path(warehouse, RUN_COMMITS_TABLE)
    if not DeltaTable.is_deltatable(uri):
        return RUN_COMMITS.empty_table()
    filters = None if run_id is None else [(PARTITION_COLUMN, "=", run_id)]
    return (
        open_table(warehouse, RUN_COMMITS_TABLE).to_pyarrow_table(filters=filters).select(RUN_COMMITS.names)
    )


def current_writes(
    warehouse: str | os.PathLike[str], table: str | None = None, run_id: str | None = None
) -> dict[str, dict[str, TableWrite]]:
    """Per run, per table: the write each complete run holds (of ``table`` only, if given)."""
    out: dict[str, dict[str, TableWrite]] = {}
    for r in run_commits(warehouse, run_id).to_pylist():
        if table is None or r["table"] == table:
            write = TableWrite(r["table"], r["write_id"], r["rows"], r["job"], r["committed_at"])
            out.setdefault(r[PARTITION_COLUMN], {})[r["table"]] = write
    return out


def current_write_ids(
    warehouse: str | os.PathLike[str], table: str, run_id: str | None = None
) -> dict[str, str]:
    """Per complete run, the write id of ``table`` it holds."""
    return {run: w[table].write_id for run, w in current_writes(warehouse, table, run_id).items()}


def publish_writes(
    warehouse: str | os.PathLike[str],
    run_id: str,
    job: str,
    written: Iterable[TableWrite],
    dropped: Iterable[str] = (),
) -> dict[str, TableWrite]:
    """Make the writes ``written`` (already committed, one per table) the run's, in ONE commit of
    ``run_commits``; the run's tables ``dropped`` leave it; its other tables keep their writes.
    Returns the run's tables after the commit. Crash points: ``run_commits:written``, ``staged``,
    ``before_commit``, ``committed``."""
    check_run_id(run_id)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    new = {w.table: TableWrite(w.table, w.write_id, w.rows, job, now) for w in written}
    gone = set(new) | set(dropped)
    kept = {
        t: w for t, w in current_writes(warehouse, run_id=run_id).get(run_id, {}).items() if t not in gone
    }
    tables = kept | new
    rows = pa.Table.from_pylist(
        [
            {
                "table": w.table,
                "write_id": w.write_id,
                "job": w.job,
                "rows": w.rows,
                "committed_at": w.committed_at,
            }
            for w in sorted(tables.values(), key=lambda w: w.table)
        ],
        schema=_DATA,
    )
    write_id = new_write_id()
    staging = staging_path(warehouse, RUN_COMMITS_TABLE, write_id)
    make_dir(staging)
    try:
        write_parquet(rows, f"{staging}/part-00000.parquet")
        staged = stage_written(
            warehouse, RUN_COMMITS_TABLE, run_id, RUN_COMMITS, write_id, partitions=(PARTITION_COLUMN,)
        )
    except BaseException:
        delete_dir(staging)
        raise
    _commit(staged.table_uri, run_id, write_id, staged.files)
    return tables


def _commit(uri: str, run_id: str, write_id: str, files: tuple[StagedFile, ...]) -> None:
    """The commit of step 3: the run's partition of ``run_commits`` replaced by ``files``."""
    ensure_table(uri, RUN_COMMITS, name=RUN_COMMITS_TABLE, partition_by=[PARTITION_COLUMN])
    actions = [
        AddAction(
            path=f.path,
            size=f.size,
            partition_values={PARTITION_COLUMN: run_id},
            modification_time=f.modification_time,
            data_change=True,
            stats=f.stats,
        )
        for f in files
    ]
    properties = CommitProperties(
        custom_metadata={
            "rocketsim.table": RUN_COMMITS_TABLE,
            "rocketsim.run_id": run_id,
            "rocketsim.write_id": write_id,
        }
    )

    def committed() -> bool:
        live = DeltaTable(uri).file_uris(file_pruning_predicate=[(PARTITION_COLUMN, "=", run_id)])
        return any(write_id in u.rsplit("/", 1)[-1] for u in live)

    crash_point(RUN_COMMITS_TABLE, "before_commit")
    commit_actions(
        uri,
        RUN_COMMITS,
        actions,
        [(PARTITION_COLUMN, "=", run_id)],
        properties,
        committed=committed,
        what=f"the run-level commit of run {run_id!r}",
    )
    crash_point(RUN_COMMITS_TABLE, "committed")


def superseded_writes(
    warehouse: str | os.PathLike[str], table: str, run_id: str | None = None
) -> dict[str, set[str]]:
    """Per run, the writes ``table`` holds that no complete run names: superseded by a rerun, or
    orphans of a job that died before publishing (or one still running)."""
    uri = table_path(warehouse, table)
    if table == RUN_COMMITS_TABLE or not DeltaTable.is_deltatable(uri):
        return {}
    dt = open_table(warehouse, table)
    if WRITE_COLUMN not in dt.metadata().partition_columns:
        return {}
    held = write_partitions(dt, run_id)
    current = current_write_ids(warehouse, table, run_id)
    out = {run: ids - {current.get(run)} for run, ids in held.items()}
    return {run: ids for run, ids in out.items() if ids}


def remove_superseded(
    warehouse: str | os.PathLike[str], run_id: str, tables: Iterable[str]
) -> dict[str, int]:
    """Step 4 of the module docstring for a run's ``tables`` (deltalake): per table, the files removed."""
    out: dict[str, int] = {}
    for table in tables:
        doomed = superseded_writes(warehouse, table, run_id).get(run_id, set())
        if doomed:
            out[table] = remove_writes(table_path(warehouse, table), table, run_id, doomed)
    return out
