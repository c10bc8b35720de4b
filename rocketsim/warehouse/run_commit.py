"""The run-level commit: every table of a run becomes visible at once, and a rerun replaces the run at once.

Delta commits one table at a time, and a run is many tables (13 for a pipeline run). So every table is
partitioned by ``(run_id, write_id)``: each write of a table for a run is a partition of its own, and the
table ``run_commits`` (one row per table of a run: the table, its current ``write_id``, the job, the rows
it committed) says which write of each table the run holds. A job that writes a run (every job: the
pipeline, the staged jobs, a comparison, ``write_run`` of the sink):

More: docs/reference/modules.md, rocketsim/warehouse/run_commit.py.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.fs as pafs
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
from rocketsim.warehouse.files import read_bytes, write_bytes, write_parquet
from rocketsim.warehouse.paths import (
    PARTITION_COLUMN,
    WRITE_COLUMN,
    check_run_id,
    delete_dir,
    delete_file,
    filesystem,
    make_dir,
    new_write_id,
    staging_path,
    table_path,
)

RUN_COMMITS_TABLE = "run_commits"
PUBLISHED_DIR = "_published"  # the runs' publication records (module docstring)
_DATA = pa.schema([f for f in RUN_COMMITS if f.name != PARTITION_COLUMN])


@dataclass(frozen=True)
class TableWrite:
    """One write of a table for a run, as ``run_commits`` records it."""

    table: str
    write_id: str
    rows: int
    job: str = ""
    committed_at: str = ""


@dataclass(frozen=True)
class Published:
    """One version of ``run_commits``: per complete run, per table, the write it holds. Readers of
    several tables of a run read the writes ONE version names (:mod:`rocketsim.warehouse.read`)."""

    version: int  # run_commits' Delta version (-1: nothing was ever published)
    runs: dict[str, dict[str, TableWrite]] = field(default_factory=dict)

    def of(self, table: str) -> dict[str, TableWrite]:
        """Per run, its write of ``table`` (runs without that table left out)."""
        return {run: tables[table] for run, tables in self.runs.items() if table in tables}


def _open_run_commits(warehouse: str | os.PathLike[str]) -> DeltaTable | None:
    """``run_commits`` (its latest version); None if nothing was ever published."""
    if not DeltaTable.is_deltatable(table_path(warehouse, RUN_COMMITS_TABLE)):
        return None
    return open_table(warehouse, RUN_COMMITS_TABLE)


def run_commits(warehouse: str | os.PathLike[str], run_id: str | None = None) -> pa.Table:
    """The rows of ``run_commits`` (one run, or all); empty if nothing was ever published."""
    return _rows(_open_run_commits(warehouse), run_id)


def _rows(dt: DeltaTable | None, run_id: str | None) -> pa.Table:
    if dt is None:
        return RUN_COMMITS.empty_table()
    filters = None if run_id is None else [(PARTITION_COLUMN, "=", run_id)]
    return dt.to_pyarrow_table(filters=filters).select(RUN_COMMITS.names)


def published(warehouse: str | os.PathLike[str], run_id: str | None = None) -> Published:
    """The latest version of ``run_commits`` (of one run, or all), read once."""
    dt = _open_run_commits(warehouse)
    out: dict[str, dict[str, TableWrite]] = {}
    for r in _rows(dt, run_id).to_pylist():
        write = TableWrite(r["table"], r["write_id"], r["rows"], r["job"], r["committed_at"])
        out.setdefault(r[PARTITION_COLUMN], {})[r["table"]] = write
    return Published(-1 if dt is None else dt.version(), out)


def run_commits_version(warehouse: str | os.PathLike[str]) -> int:
    """The latest version of ``run_commits`` (-1: none), from its log only."""
    dt = _open_run_commits(warehouse)
    return -1 if dt is None else dt.version()


def current_writes(
    warehouse: str | os.PathLike[str], table: str | None = None, run_id: str | None = None
) -> dict[str, dict[str, TableWrite]]:
    """Per run, per table: the write each complete run holds (of ``table`` only, if given)."""
    runs = published(warehouse, run_id).runs
    if table is None:
        return runs
    return {run: {table: t[table]} for run, t in runs.items() if table in t}


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
    try:
        _commit(staged.table_uri, run_id, write_id, staged.files)
    except BaseException:
        # a failed commit leaves no file of run_commits behind (a killed one does: vacuum deletes it)
        if not _landed(staged.table_uri, run_id, write_id):
            for f in staged.files:
                delete_file(f"{staged.table_uri}/{f.path}")
        raise
    (made,) = (f.modification_time for f in staged.files)
    _record_publication(warehouse, run_id, RunCommit(write_id, made), tables)
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

    crash_point(RUN_COMMITS_TABLE, "before_commit")
    commit_actions(
        uri,
        RUN_COMMITS,
        actions,
        [(PARTITION_COLUMN, "=", run_id)],
        properties,
        committed=lambda: _landed(uri, run_id, write_id),
        what=f"the run-level commit of run {run_id!r}",
    )
    crash_point(RUN_COMMITS_TABLE, "committed")


def _landed(uri: str, run_id: str, write_id: str) -> bool:
    """Whether the run-level commit of ``write_id`` is in ``run_commits`` (False if that cannot be told)."""
    try:
        live = DeltaTable(uri).file_uris(file_pruning_predicate=[(PARTITION_COLUMN, "=", run_id)])
    except Exception:  # noqa: BLE001 - no table, or no log to read: not landed as far as anyone can tell
        return False
    return any(_commit_write_id(u) == write_id for u in live)


def _commit_write_id(path: str) -> str:
    """The write id of a ``run_commits`` data file (``<write id>-part-00000.parquet``)."""
    return unquote(path.rsplit("/", 1)[-1]).split("-part-", 1)[0]


@dataclass(frozen=True)
class RunCommit:
    """The file of ``run_commits`` that holds a run's rows: which run-level commit made it (its write
    id), and when its file was made (ms since the epoch, as the log records it: later for a later
    commit of the run, since a commit's file is made after the run's previous commit landed)."""

    write_id: str
    made_ms: int


def run_commit_files(warehouse: str | os.PathLike[str]) -> dict[str, RunCommit]:
    """Per run, the file of ``run_commits`` that holds its rows now (from the log only)."""
    dt = _open_run_commits(warehouse)
    if dt is None:
        return {}
    adds = pa.table(dt.get_add_actions(flatten=True)).to_pydict()
    return {
        run: RunCommit(_commit_write_id(path), int(made))
        for run, path, made in zip(
            adds[f"partition.{PARTITION_COLUMN}"], adds["path"], adds["modification_time"], strict=True
        )
    }


@dataclass(frozen=True)
class Publication:
    """A run's publication record: the write of ``run_commits`` its last run-level commit made, and
    the writes that commit named."""

    run_id: str
    commit: RunCommit
    writes: dict[str, str]  # table -> write id


def publication_path(warehouse: str | os.PathLike[str], run_id: str) -> str:
    """``<warehouse>/_published/<run id>.json``."""
    return f"{table_path(warehouse, PUBLISHED_DIR)}/{quote(run_id, safe='')}.json"


def _record_publication(
    warehouse: str | os.PathLike[str], run_id: str, commit: RunCommit, tables: dict[str, TableWrite]
) -> None:
    """Write the run's publication record (after its run-level commit landed). A failure here (a full
    disk) only loses a witness, so it warns instead of failing a job whose run is published."""
    record = {
        "run_id": run_id,
        "commit_write_id": commit.write_id,
        "commit_made_ms": commit.made_ms,
        "writes": {t: w.write_id for t, w in tables.items()},
    }
    try:
        make_dir(table_path(warehouse, PUBLISHED_DIR))
        write_bytes(json.dumps(record, sort_keys=True).encode("utf-8"), publication_path(warehouse, run_id))
    except OSError as exc:
        warnings.warn(
            f"run {run_id} is published; its publication record was not written: {exc}", stacklevel=2
        )


def publications(warehouse: str | os.PathLike[str]) -> tuple[dict[str, Publication], list[str]]:
    """The publication records (by run id) and the paths of those that cannot be read."""
    folder = table_path(warehouse, PUBLISHED_DIR)
    fs, root = filesystem(folder)
    out: dict[str, Publication] = {}
    unreadable: list[str] = []
    for info in fs.get_file_info(pafs.FileSelector(root, allow_not_found=True)):
        if info.type != pafs.FileType.File or not info.base_name.endswith(".json"):
            continue
        uri = f"{folder}/{info.base_name}"
        try:
            data = json.loads(read_bytes(uri))
            commit = RunCommit(str(data["commit_write_id"]), int(data["commit_made_ms"]))
            record = Publication(str(data["run_id"]), commit, dict(data["writes"]))
        except (OSError, ValueError, KeyError, TypeError):
            unreadable.append(uri)
            continue
        out[record.run_id] = record
    return out, unreadable


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
    current = {run: w.write_id for run, w in published(warehouse, run_id).of(table).items()}
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
