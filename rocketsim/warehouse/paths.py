"""Where a warehouse's files are: table paths, file systems, run partitions, staging folders, write ids.

A warehouse is a local folder or a URI that pyarrow and deltalake both open (``s3://``, ``gs://``,
``hdfs://``, ``file://``); each table is ``<warehouse>/<name>``, partitioned by ``run_id`` (Hive-style
folders) and by ``write_id``: one write of the table for a run, which the run-level commit
(:mod:`rocketsim.warehouse.run_commit`) makes visible. Writes wait in ``<table>/_staging/<write id>``
(hidden from Delta readers and from vacuum) until they are moved into the run's partition and committed.
"""

from __future__ import annotations

import calendar
import contextlib
import os
import tempfile
import time
import uuid
from urllib.parse import quote, unquote, urlparse

import pyarrow.fs as pafs

from rocketsim.errors import RocketSimError

PARTITION_COLUMN = "run_id"
WRITE_COLUMN = "write_id"  # the second partition column: which write of the table a row belongs to
WRITE_PARTITIONS = [PARTITION_COLUMN, WRITE_COLUMN]
STAGING_DIR = "_staging"
DELTA_LOG_DIR = "_delta_log"
_RUN_ID_FORBIDDEN = set("'\"\\/") | {chr(c) for c in range(32)} | {"\x7f"}


class DeltaSinkError(RocketSimError):
    """A write the sink refuses: bad run id, schema mismatch, or a commit that kept failing."""


def table_path(warehouse: str | os.PathLike[str], table: str) -> str:
    """``<warehouse>/<table>``: an absolute local path, or a URI kept as given."""
    base = os.fspath(warehouse)
    if "://" in base:
        return base.rstrip("/") + "/" + table
    return os.path.join(os.path.abspath(base), table)


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem of a local path or URI (s3://, gs://, hdfs://, file://) and its path."""
    if "://" in uri:
        return pafs.FileSystem.from_uri(uri)
    return pafs.LocalFileSystem(), uri


# The URI schemes both pyarrow and deltalake open (a warehouse is read and written with both).
URI_SCHEMES = ("file", "s3", "gs", "hdfs", "abfs", "abfss")


def unwritable(warehouse: str) -> str | None:
    """Why a job could not write the warehouse folder ``warehouse`` (None: it can): empty, a URI of a
    scheme the warehouse layer cannot open (:data:`URI_SCHEMES`) or without a path, a file, under a
    file, or a folder (or the nearest existing parent of one to create) this process cannot write to
    (read-only file system, permissions: tried with a probe file, deleted at once). A URI other than
    ``file://`` is not written here (its first write is the test)."""
    if not warehouse.strip():
        return "must not be empty"
    if "://" in warehouse:
        parsed = urlparse(warehouse)
        if parsed.scheme not in URI_SCHEMES:
            return f"must be a folder or a URI of {', '.join(s + '://' for s in URI_SCHEMES)}"
        if not (parsed.netloc + parsed.path).strip("/"):
            return "must name a folder after its scheme"
        if parsed.scheme != "file":
            return None
        if parsed.netloc not in ("", "localhost"):
            return "must be a file:// URI of this host (file:///path)"
    path = os.path.abspath(unquote(urlparse(warehouse).path) if "://" in warehouse else warehouse)
    existing = path
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        return (
            "must be a folder, not a file" if existing == path else f"must not be under a file ({existing})"
        )
    try:
        fd, probe = tempfile.mkstemp(prefix=".rocketsim-probe-", dir=existing)
    except OSError as exc:
        where = "" if existing == path else f" ({existing}, where it would be created)"
        return f"must be a folder this job can write{where}: {exc.strerror}"
    os.close(fd)
    os.unlink(probe)
    return None


def partition_dir(run_id: str) -> str:
    """Hive-style directory of a run, its value percent-escaped as Hive and deltalake do."""
    return f"{PARTITION_COLUMN}={quote(run_id, safe=' -_.+@~,')}"


def check_run_id(run_id: str) -> str:
    """Refuse run ids that cannot be a partition value or a SQL literal safely."""
    if not run_id or len(run_id) > 200 or any(ch in _RUN_ID_FORBIDDEN for ch in run_id):
        raise DeltaSinkError(
            f"run_id must be 1-200 characters without quotes, slashes, backslashes or control "
            f"characters, got {run_id!r}"
        )
    return run_id


def relative_path(file_uri: str, root: str) -> str:
    """A file's path (as the Delta log or deltalake names it) relative to the table root (``root`` as
    pyarrow.fs names it)."""
    if "://" in file_uri:
        parsed = urlparse(file_uri)
        path = unquote(parsed.path) if parsed.scheme == "file" else parsed.netloc + parsed.path
    else:
        path = file_uri
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path


_WRITE_TIME = "%Y%m%dT%H%M%S"


def new_write_id() -> str:
    """A fresh write id: UTC time (sortable) plus a random suffix."""
    return f"{time.strftime(_WRITE_TIME, time.gmtime())}-{uuid.uuid4().hex[:12]}"


def write_time(write_id: str) -> float | None:
    """When a write id was made (seconds since the epoch), from its prefix; None if it has none."""
    try:
        return float(calendar.timegm(time.strptime(write_id.split("-", 1)[0], _WRITE_TIME)))
    except ValueError:
        return None


def staging_path(warehouse: str | os.PathLike[str], table: str, write_id: str) -> str:
    """``<table>/_staging/<write_id>``: where a write's files wait, hidden from Delta readers."""
    return f"{table_path(warehouse, table)}/{STAGING_DIR}/{write_id}"


def make_dir(uri: str) -> None:
    """Create a folder (and its parents) if it is not there."""
    fs, path = filesystem(uri)
    fs.create_dir(path, recursive=True)


def delete_dir(uri: str) -> None:
    """Delete a folder and what it holds, if it is there (best effort: vacuum gets what is left)."""
    fs, path = filesystem(uri)
    with contextlib.suppress(OSError):
        fs.delete_dir(path)


def delete_file(uri: str) -> None:
    """Delete a file if it is there (best effort)."""
    fs, path = filesystem(uri)
    with contextlib.suppress(OSError):
        fs.delete_file(path)


def list_files(uri: str, prefix: str = "", suffix: str = "") -> list[str]:
    """Names of the files directly in a folder (sorted), optionally by prefix and suffix; [] if absent."""
    fs, path = filesystem(uri)
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    except OSError:
        return []
    return sorted(
        i.base_name
        for i in infos
        if i.type == pafs.FileType.File and i.base_name.startswith(prefix) and i.base_name.endswith(suffix)
    )
