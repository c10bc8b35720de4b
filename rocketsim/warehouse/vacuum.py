"""Vacuum: remove what killed jobs left in a warehouse, and only what is provably garbage.

What a job leaves when it is killed (:mod:`rocketsim.warehouse.delta`,
:mod:`~rocketsim.warehouse.run_commit`): staging folders (``<table>/_staging/<write id>``), data files
moved into a run's partition but never committed (a first run killed before any commit leaves only
these two), committed writes no complete run names (killed before its run-level commit, or superseded
by a rerun killed before removing them), and its claim. :func:`vacuum` deletes the first two, removes
the third from the tables (a commit of remove actions) and clears stale claims, under these rules:

More: docs/reference/modules.md, rocketsim/warehouse/vacuum.py.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import PurePosixPath
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from rocketsim.errors import RocketSimError, first_line
from rocketsim.warehouse.claims import ClaimFile, claim_files, clear_stale
from rocketsim.warehouse.delta import DamagedTableError, open_table, remove_writes, write_partitions
from rocketsim.warehouse.paths import (
    DELTA_LOG_DIR,
    PARTITION_COLUMN,
    STAGING_DIR,
    WRITE_COLUMN,
    relative_path,
    table_path,
    write_time,
)
from rocketsim.warehouse.read import DamagedRunError, checked_table
from rocketsim.warehouse.run_commit import (
    RUN_COMMITS_TABLE,
    publication_path,
    publications,
    published,
    run_commit_files,
)


class VacuumRefused(RocketSimError):
    """A vacuum that would not be safe (or bad arguments): nothing was removed."""


@dataclass
class TableVacuum:
    """What vacuum did (or, in a dry run, would do) to one table."""

    table: str
    writes: list[str] = field(default_factory=list)  # unpublished writes: run_id=<id>/write_id=<id>
    files: list[str] = field(default_factory=list)  # orphan files and staging folders
    damage: str = ""  # why the table was left alone ('' if it was not)
    kept_writes: str = ""  # why its unpublished writes were kept ('' if they were not)


@dataclass
class Vacuum:
    """What :func:`vacuum` did: the runs it left alone, the stale claims it cleared, per table."""

    busy: list[ClaimFile]
    cleared: list[ClaimFile]
    tables: list[TableVacuum]

    @property
    def damaged(self) -> list[TableVacuum]:
        return [t for t in self.tables if t.damage]


def vacuum(
    warehouse: str | os.PathLike[str],
    tables: Sequence[str] | None = None,
    *,
    min_age_s: float = 3600.0,
    dry_run: bool = False,
) -> Vacuum:
    """Vacuum ``tables`` (default: every table) of a local warehouse (module docstring);
    :class:`VacuumRefused` before anything is removed if it would not be safe."""
    base = _local_folder(warehouse)
    check_min_age(min_age_s)
    found = table_folders(base)
    names = found if tables is None else [check_table(base, t, found) for t in tables]
    check_run_commits(base, found)
    cutoff = time.time() - min_age_s
    unlogged = unlogged_commits(base)
    first = {t: _inspect(base, t) for t in names}
    suspect = sorted(t for t, i in first.items() if isinstance(i, _Damaged) and i.missing_write)
    out = [
        TableVacuum(t, damage=i.reason)
        if isinstance(i, _Damaged)
        else _vacuum_table(base, t, cutoff, suspect, unlogged, dry_run)
        for t, i in first.items()
    ]
    claims = claim_files(base)
    cleared = [c for c in claims if c.stale is not None and (dry_run or clear_stale(c))]
    return Vacuum([c for c in claims if c.stale is None], cleared, out)


def _vacuum_table(
    base: str, table: str, cutoff: float, suspect: list[str], unlogged: UnloggedCommits, dry_run: bool
) -> TableVacuum:
    """One table, in an order that leaves a job no gap: the writes to judge are read before the claims,
    and what judges them (``run_commits``, the log's files) after, so a write or file of a job that was
    not live when the claims were read is either published, referenced, or made after that moment."""
    try:
        held = write_partitions(open_table(base, table)) if _has_log(base, table) else {}
    except Exception as exc:  # noqa: BLE001 - damaged since the first look
        return TableVacuum(table, damage=_unreadable(table, exc))
    live = {c.run_id: c for c in claim_files(base) if c.stale is None}
    claims_read = time.time()
    state = _inspect(base, table)
    if isinstance(state, _Damaged):
        return TableVacuum(table, damage=state.reason)
    done = TableVacuum(table)
    kept = unlogged.files if table == RUN_COMMITS_TABLE else frozenset()
    done.files = _orphans(base, table, state, live, kept, min(cutoff, claims_read), dry_run)
    if suspect:
        done.kept_writes = f"table(s) {', '.join(suspect)} lack writes run_commits names"
    elif table != RUN_COMMITS_TABLE:
        keep = unlogged.writes_of(table)
        done.writes = _retire(base, table, held, state.named, keep, live, cutoff, dry_run)
    if unlogged.files and not suspect:
        done.kept_writes = unlogged.why()
    return done


# ---------------------------------------------------------------------------------------- checks


def _local_folder(warehouse: str | os.PathLike[str]) -> str:
    """The warehouse as a local folder (claims, which vacuum must see, live only there)."""
    base = os.fspath(warehouse)
    if base.startswith("file://"):
        base = unquote(urlparse(base).path)
    elif "://" in base:
        raise VacuumRefused(
            f"--warehouse {base!r}: vacuum needs a local or mounted warehouse folder (it must see the jobs' "
            "claims, which object stores do not hold)"
        )
    if not os.path.isdir(base):
        what = "is not a folder" if os.path.exists(base) else "does not exist"
        raise VacuumRefused(f"--warehouse {base!r} {what}: nothing to vacuum")
    return os.path.abspath(base)


def check_min_age(min_age_s: float) -> None:
    """``min_age_s`` must be a finite number >= 0."""
    if not (isinstance(min_age_s, int | float) and math.isfinite(min_age_s) and min_age_s >= 0):
        raise VacuumRefused(f"--min-age-s must be a number of seconds >= 0, got {min_age_s!r}")


def table_folders(base: str) -> list[str]:
    """The folders of ``base`` that are tables or that a job began to write as one (a Delta log, a
    staging folder or run partitions), sorted; folders linked from outside the warehouse left out."""
    out = []
    for entry in sorted(os.scandir(base), key=lambda e: e.name):
        if entry.name.startswith(("_", ".")) or not entry.is_dir():
            continue
        if os.path.dirname(os.path.realpath(entry.path)) != os.path.realpath(base):
            continue  # a link to a folder elsewhere: another warehouse's table is not ours to judge
        inside = os.listdir(entry.path)
        if (
            DELTA_LOG_DIR in inside
            or STAGING_DIR in inside
            or any(n.startswith(f"{PARTITION_COLUMN}=") for n in inside)
        ):
            out.append(entry.name)
    return out


def check_table(base: str, table: str, found: Sequence[str]) -> str:
    """``--table``: the name of one of the warehouse's tables (never a path)."""
    if table in found:
        return table
    if not table or "/" in table or os.sep in table or table in (".", ".."):
        why = "must name a table of the warehouse, not a path"
    else:
        why = f"is not a table of {base}"
    known = ", ".join(found) if found else "none"
    raise VacuumRefused(f"--table {table!r} {why} (its tables: {known})")


def check_run_commits(base: str, tables: Iterable[str]) -> None:
    """Refuse a warehouse whose ``run_commits`` cannot tell garbage from published writes: missing
    while tables hold committed writes or runs were published, unreadable, or behind (a run's
    publication record names a later commit than ``run_commits`` holds)."""
    records, unreadable = publications(base)
    if unreadable:
        raise VacuumRefused(
            f"the publication record {unreadable[0]} cannot be read, so vacuum cannot tell whether "
            f"run_commits lost commits: restore that file or rerun its run; nothing was removed"
        )
    if not DeltaTable.is_deltatable(table_path(base, RUN_COMMITS_TABLE)):
        holding = [t for t in tables if t != RUN_COMMITS_TABLE and _holds_writes(base, t)]
        if holding or records:
            what = (
                f"tables hold committed writes ({', '.join(holding[:3])})"
                if holding
                else "runs were published"
            )
            raise VacuumRefused(
                f"{base}/{RUN_COMMITS_TABLE} is missing while {what}: every run's writes would look "
                "unpublished. If it was moved or deleted, restore it; if no job ever published a run here "
                "(the first was killed before its run-level commit), rerun that run. Nothing was removed"
            )
        return
    try:
        held = run_commit_files(base)
        published(base)  # its rows too: a data file of run_commits that cannot be read
    except (DamagedTableError, DeltaError, OSError, pa.ArrowException) as exc:
        detail = first_line(exc)
        raise VacuumRefused(
            f"{RUN_COMMITS_TABLE} cannot be read ({detail}): restore {base}/{RUN_COMMITS_TABLE}/_delta_log "
            "from a backup; nothing was removed"
        ) from exc
    for run, record in sorted(records.items()):
        now = held.get(run)
        if now is not None and (now == record.commit or now.made_ms > record.commit.made_ms):
            continue  # the recorded commit, or a later one (its job killed before its record)
        holds = f"it holds commit {now.write_id}" if now else "it does not hold the run"
        raise VacuumRefused(
            f"{RUN_COMMITS_TABLE} is behind the tables: run {run} was published by commit "
            f"{record.commit.write_id} (its record {publication_path(base, run)}), but {holds} (a commit "
            f"of it was lost, or it was restored from an older copy): restore {RUN_COMMITS_TABLE} from a "
            f"copy at least as new, or rerun run {run}; nothing was removed"
        )


def _has_log(base: str, table: str) -> bool:
    return os.path.isdir(os.path.join(base, table, DELTA_LOG_DIR))


def _holds_writes(base: str, table: str) -> bool:
    """Whether ``table`` has a log (readable or not) with any commit beyond its creation."""
    if not _has_log(base, table):
        return False
    try:
        return bool(write_partitions(open_table(base, table)))
    except Exception:  # noqa: BLE001 - a log that cannot be read may hold anything
        return True


# ------------------------------------------------------------------------------------ one table


@dataclass(frozen=True)
class _Damaged:
    reason: str
    missing_write: bool  # a write run_commits names is not in the table at all (run_commits may be behind)


@dataclass(frozen=True)
class _Healthy:
    referenced: frozenset[str]  # every data file the log adds or removes
    named: dict[str, str]  # run -> the write run_commits names


def _inspect(base: str, table: str) -> _Healthy | _Damaged:
    """The table's log read and checked against ``run_commits``: every write it names is held with the
    rows it recorded (a table without a log must hold no such write)."""
    try:
        if not _has_log(base, table):
            if any(w.rows for w in published(base).of(table).values()):
                return _Damaged("its _delta_log is missing, while run_commits names writes of it", True)
            return _Healthy(frozenset(), {})
        pin, dt = checked_table(base, table)
        assert dt is not None  # it has a log
        root = table_path(base, table)
        referenced = _logged_paths(root) | {relative_path(u, root) for u in dt.file_uris()}
    except DamagedRunError as exc:
        return _Damaged(str(exc), exc.absent)
    except Exception as exc:  # noqa: BLE001 - a log that cannot be read (deltalake, JSON, Parquet)
        return _Damaged(_unreadable(table, exc), False)
    return _Healthy(frozenset(referenced), {r: w.write_id for r, w in pin.of(table).items()})


def _unreadable(table: str, exc: Exception) -> str:
    """Why a table whose log cannot be read is left alone."""
    bad = isinstance(exc, DamagedTableError)
    what = first_line(exc) if bad else f"its Delta log cannot be read ({first_line(exc)})"
    return f"{what}: restore {table}/_delta_log from a backup"


def _orphans(
    base: str,
    table: str,
    state: _Healthy,
    live: dict[str, ClaimFile],
    kept: frozenset[str],
    cutoff: float,
    dry_run: bool,
) -> list[str]:
    """Delete the table's data files no log entry mentions (but those ``kept``) and its abandoned
    staging folders."""
    root = table_path(base, table)
    fs = pafs.LocalFileSystem()
    doomed: list[str] = []
    staging: dict[str, float] = {}  # folder -> newest modification time in it
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True)):
        if info.type != pafs.FileType.File:
            continue
        parts = PurePosixPath(info.path[len(root) + 1 :]).parts
        mtime = (info.mtime_ns or 0) / 1e9
        if parts[0] == STAGING_DIR and len(parts) > 2:
            staging[parts[1]] = max(staging.get(parts[1], 0.0), mtime)
        elif _orphan_file(parts, state, live) and mtime <= cutoff and "/".join(parts) not in kept:
            doomed.append("/".join(parts))
    first_live = min((_started(c) for c in live.values()), default=math.inf)
    stale = sorted(
        f"{STAGING_DIR}/{name}"
        for name, newest in staging.items()
        if newest <= cutoff and (not live or (write_time(name) or math.inf) < first_live)
    )
    if not dry_run:
        for rel in doomed:
            fs.delete_file(f"{root}/{rel}")
        for rel in stale:
            fs.delete_dir(f"{root}/{rel}")
        _prune_empty(fs, root, doomed)
    return sorted(doomed) + stale


def _orphan_file(parts: tuple[str, ...], state: _Healthy, live: dict[str, ClaimFile]) -> bool:
    """Whether a file (its path's parts) is a data file of a run partition that no log entry mentions,
    of a run no live job claims."""
    if len(parts) < 2 or not parts[0].startswith(f"{PARTITION_COLUMN}=") or parts[-1].startswith(("_", ".")):
        return False
    run = unquote(parts[0].split("=", 1)[1])
    return "/".join(parts) not in state.referenced and run not in live


def _started(claim: ClaimFile) -> float:
    """When a live claim's job began (epoch seconds, whole as a write id's time; -inf if unknown: then
    every staging folder may be that job's)."""
    try:
        return math.floor(datetime.fromisoformat(claim.claim.started_at).timestamp())  # type: ignore[union-attr]
    except (AttributeError, ValueError):
        return -math.inf


def _prune_empty(fs: pafs.LocalFileSystem, root: str, deleted: list[str]) -> None:
    """Remove the partition folders the deleted files leave empty (best effort)."""
    for folder in sorted({str(PurePosixPath(p).parent) for p in deleted}, key=len, reverse=True):
        path = PurePosixPath(folder)
        while str(path) not in ("", "."):
            full = f"{root}/{path}"
            if fs.get_file_info(pafs.FileSelector(full, allow_not_found=True)):
                break
            fs.delete_dir(full)
            path = path.parent


def _retire(
    base: str,
    table: str,
    held: dict[str, set[str]],
    named: dict[str, str],
    keep: dict[str, set[str] | None],
    live: dict[str, ClaimFile],
    cutoff: float,
    dry_run: bool,
) -> list[str]:
    """Remove from the table the writes it ``held`` that ``run_commits`` does not name (``named``) nor
    an unlogged commit (``keep``: per run, its writes, None for all), made before ``cutoff``, of runs no
    live job claims (one commit per run); returns them as ``run_id=<id>/write_id=<id>``."""
    out: list[str] = []
    for run, writes in sorted(held.items()):
        if run in live or (run in keep and keep[run] is None):
            continue
        spared = {named.get(run), *(keep.get(run) or ())}
        old = sorted(w for w in writes - spared if (write_time(w) or math.inf) <= cutoff)
        if old and not dry_run:
            remove_writes(table_path(base, table), table, run, old)
        out += [f"{PARTITION_COLUMN}={run}/{WRITE_COLUMN}={w}" for w in old]
    return out


@dataclass(frozen=True)
class UnloggedCommits:
    """Files of ``run_commits`` no log entry mentions, newer than their run's logged commit (module
    docstring): kept, with the writes they name."""

    files: frozenset[str]  # paths relative to run_commits
    writes: dict[str, dict[str, set[str] | None]]  # table -> run -> write ids (None: every write)

    def writes_of(self, table: str) -> dict[str, set[str] | None]:
        return self.writes.get(table, {})

    def why(self) -> str:
        runs = sorted({unquote(f.split("/", 1)[0].split("=", 1)[1]) for f in self.files})
        return (
            f"run(s) {', '.join(runs)} hold a run_commits file newer than their logged commit that no log "
            "entry mentions (a job killed before its run-level commit, or a commit whose log entry was "
            "lost): kept with the writes it names until a later run of the same id supersedes it"
        )


def unlogged_commits(base: str) -> UnloggedCommits:
    """The files of ``run_commits`` that may be commits whose log entry was lost, and their writes."""
    if not _has_log(base, RUN_COMMITS_TABLE):
        return UnloggedCommits(frozenset(), {})
    root = table_path(base, RUN_COMMITS_TABLE)
    logged, held = _logged_paths(root), run_commit_files(base)
    fs = pafs.LocalFileSystem()
    files: set[str] = set()
    writes: dict[str, dict[str, set[str] | None]] = {}
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True)):
        parts = PurePosixPath(info.path[len(root) + 1 :]).parts
        if info.type != pafs.FileType.File or not _orphan_file(parts, _Healthy(frozenset(logged), {}), {}):
            continue
        run = unquote(parts[0].split("=", 1)[1])
        now = held.get(run)
        if now is not None and (info.mtime_ns or 0) // 1_000_000 <= now.made_ms:
            continue  # older than the run's logged commit: superseded
        files.add("/".join(parts))
        for table, write_id in _named_writes(info.path):
            per_run = writes.setdefault(table, {})
            if write_id is None or (run in per_run and per_run[run] is None):
                per_run[run] = None
            else:
                per_run.setdefault(run, set()).add(write_id)  # type: ignore[union-attr]
    return UnloggedCommits(frozenset(files), writes)


def _named_writes(path: str) -> list[tuple[str, str | None]]:
    """(table, write id) of each row of a ``run_commits`` data file; a file that cannot be read names
    every write of its run in every table (``(table, None)`` for each)."""
    try:
        rows = pq.read_table(path, columns=["table", "write_id"]).to_pylist()
    except (OSError, pa.ArrowException, KeyError):
        return [(t, None) for t in _every_table(path)]
    return [(str(r["table"]), str(r["write_id"])) for r in rows]


def _every_table(run_commits_file: str) -> list[str]:
    base = str(PurePosixPath(run_commits_file).parents[2])
    return [t for t in table_folders(base) if t != RUN_COMMITS_TABLE]


def _logged_paths(root: str) -> set[str]:
    """Every data-file path any remaining commit or checkpoint of the log adds or removes."""
    fs = pafs.LocalFileSystem()
    paths: set[str] = set()
    for info in fs.get_file_info(pafs.FileSelector(f"{root}/{DELTA_LOG_DIR}", recursive=True)):
        if info.type != pafs.FileType.File:
            continue
        if info.base_name.endswith(".json") and info.base_name[:1].isdigit():
            with fs.open_input_stream(info.path) as stream:
                for line in stream.read().decode("utf-8").splitlines():
                    action = json.loads(line) if line.strip() else {}
                    paths.update(action[k]["path"] for k in ("add", "remove") if k in action)
        elif info.base_name.endswith(".parquet"):
            with fs.open_input_file(info.path) as handle:
                checkpoint = pq.ParquetFile(handle)
                kinds = [k for k in ("add", "remove") if k in checkpoint.schema_arrow.names]
                if kinds:
                    paths.update(_checkpoint_paths(checkpoint.read(columns=kinds), kinds))
    return {relative_path(unquote(p), root) for p in paths}


def _checkpoint_paths(checkpoint: pa.Table, kinds: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for kind in kinds:
        # Checkpoints hold metadata only (one row per file), never table data.
        for value in pc.struct_field(checkpoint.column(kind), "path").to_pylist():
            if value is not None:
                out.add(value)
    return out
