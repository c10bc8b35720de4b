"""Orphans of killed jobs: data files no Delta commit mentions, abandoned staging folders, and committed
writes that no complete run names.

A write moves its files into the run's partition before its commit (:mod:`rocketsim.warehouse.delta`);
a job killed in between leaves them behind, invisible to readers. A job killed after some of its
tables' commits but before the run-level commit (:mod:`rocketsim.warehouse.run_commit`) leaves writes in
the Delta log that no reader selects; one killed just after the run-level commit leaves the run's
superseded writes. ``jobs/vacuum.py`` deletes the first and removes the others from the tables.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Collection, Iterable
from pathlib import PurePosixPath
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import DeltaTable

from rocketsim.warehouse.delta import remove_writes
from rocketsim.warehouse.paths import (
    DELTA_LOG_DIR,
    STAGING_DIR,
    filesystem,
    relative_path,
    table_path,
    write_time,
)
from rocketsim.warehouse.run_commit import superseded_writes


def vacuum_orphans(
    warehouse: str | os.PathLike[str],
    table: str,
    *,
    min_age_s: float = 3600.0,
    dry_run: bool = False,
) -> list[str]:
    """Delete data files the Delta log never mentions, and abandoned staging dirs; return their paths.

    Files the log names (current or removed, kept for time travel) stay. ``min_age_s`` protects a
    concurrent writer's files that are moved but not yet committed: keep it well above a job's
    stage-to-commit time (0 only when no writer runs).
    """
    uri = table_path(warehouse, table)
    fs, root = filesystem(uri)
    if not DeltaTable.is_deltatable(uri):
        return []
    dt = DeltaTable(uri)
    referenced = _logged_paths(fs, root) | {relative_path(u, root) for u in dt.file_uris()}
    cutoff_ns = (time.time() - min_age_s) * 1e9
    doomed: list[str] = []
    stale_staging: list[str] = []
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True)):
        rel = info.path[len(root) + 1 :]
        parts = PurePosixPath(rel).parts
        if info.type != pafs.FileType.File or not parts or parts[0] == DELTA_LOG_DIR:
            continue
        if parts[0] == STAGING_DIR:
            if len(parts) > 2 and (info.mtime_ns or 0) <= cutoff_ns:
                stale_staging.append(f"{STAGING_DIR}/{parts[1]}")
            continue
        if any(p.startswith(("_", ".")) for p in parts):
            continue
        if rel not in referenced and (info.mtime_ns or 0) <= cutoff_ns:
            doomed.append(rel)
    staging_dirs = sorted(set(stale_staging))
    if not dry_run:
        for rel in doomed:
            fs.delete_file(f"{root}/{rel}")
        for rel in staging_dirs:
            fs.delete_dir(f"{root}/{rel}")
    return sorted(doomed) + staging_dirs


def retire_orphan_writes(
    warehouse: str | os.PathLike[str],
    table: str,
    *,
    min_age_s: float = 3600.0,
    dry_run: bool = False,
    busy_runs: Collection[str] = (),
) -> list[str]:
    """Remove from ``table`` the committed writes no complete run names (one commit per run), made at
    least ``min_age_s`` ago, of runs no live job claims (``busy_runs``: a job between its tables'
    commits and its run-level commit holds such writes); return them as ``run_id=<id>/write_id=<id>``."""
    cutoff = time.time() - min_age_s
    out: list[str] = []
    for run_id, writes in sorted(superseded_writes(warehouse, table).items()):
        if run_id in busy_runs:
            continue
        old = sorted(w for w in writes if (write_time(w) or 0.0) <= cutoff)
        if old and not dry_run:
            remove_writes(table_path(warehouse, table), table, run_id, old)
        out += [f"run_id={run_id}/write_id={w}" for w in old]
    return out


def _logged_paths(fs: pafs.FileSystem, root: str) -> set[str]:
    """Every data-file path any remaining commit or checkpoint of the log adds or removes."""
    paths: set[str] = set()
    log = f"{root}/{DELTA_LOG_DIR}"
    for info in fs.get_file_info(pafs.FileSelector(log, recursive=True)):
        if info.type != pafs.FileType.File:
            continue
        if info.base_name.endswith(".json") and info.base_name[:1].isdigit():
            with fs.open_input_stream(info.path) as stream:
                for line in stream.read().decode("utf-8").splitlines():
                    action = json.loads(line) if line.strip() else {}
                    for kind in ("add", "remove"):
                        if kind in action:
                            paths.add(action[kind]["path"])
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
