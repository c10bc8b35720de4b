"""One writer per run id: a job claims its run id in the warehouse before it writes anything.

A claim is the file ``<warehouse>/_claims/<run id>.json`` (the job, host, pid, the process's start time,
when the claim was made), created atomically (``O_CREAT | O_EXCL``: of two jobs, exactly one creates
it). A job that finds its run id claimed fails at once, before Spark starts, with one line naming the
holder (:class:`ClaimError`). While the job runs, a thread refreshes the claim's modification time
every :data:`HEARTBEAT_S`; the job deletes its claim when it ends, however it ends, short of being
killed.

More: docs/reference/modules.md, rocketsim/warehouse/claims.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from urllib.parse import quote, unquote, urlparse

from rocketsim.errors import RocketSimError
from rocketsim.warehouse.paths import check_run_id

CLAIMS_DIR = "_claims"
HEARTBEAT_S = 30.0
STALE_S = 600.0  # a claim of another host not refreshed for this long belongs to a dead job
STALE_ENV = "ROCKETSIM_CLAIM_STALE_S"
TAKEOVER_STALE_S = 60.0  # a takeover lock left by a job killed while taking over
WRITE_GRACE_S = 10.0  # a claim file unreadable for this long was never written whole: its job is dead


class ClaimError(RocketSimError):
    """The run id is being written by another job (named in the message)."""


@dataclass(frozen=True)
class Claim:
    """Who writes a run id: the job, where it runs, since when."""

    run_id: str
    job: str
    host: str
    pid: int
    pid_start: str  # the process's start time as the kernel counts it ('' where unknown)
    boot_id: str  # the host's boot ('' where unknown): pids of an earlier boot are meaningless
    started_at: str  # UTC, ISO 8601
    token: str  # unique to this claim

    def describe(self) -> str:
        return f"{self.job} (pid {self.pid} on host {self.host}, started {self.started_at})"


def _folder(warehouse: str | os.PathLike[str]) -> str:
    base = os.fspath(warehouse)
    if base.startswith("file://"):
        base = unquote(urlparse(base).path)
    return os.path.join(os.path.abspath(base), CLAIMS_DIR)


def claim_path(warehouse: str | os.PathLike[str], run_id: str) -> str:
    """``<warehouse>/_claims/<run id>.json`` (a local path)."""
    return os.path.join(_folder(warehouse), f"{quote(run_id, safe='')}.json")


def _local(warehouse: str | os.PathLike[str]) -> bool:
    base = os.fspath(warehouse)
    return "://" not in base or base.startswith("file://")


def warehouse_exists(warehouse: str | os.PathLike[str]) -> bool:
    """Whether a local warehouse's folder is there (an object store's: taken as there). A job that only
    reads is refused before it claims a run in a warehouse that is not: the claim would make its folder."""
    return not _local(warehouse) or os.path.isdir(os.path.dirname(_folder(warehouse)))


def _proc_start(pid: int) -> str:
    """Field 22 of ``/proc/<pid>/stat`` (start time in clock ticks since boot); '' if unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def new_claim(run_id: str, job: str) -> Claim:
    """A claim of ``run_id`` by this process."""
    pid = os.getpid()
    return Claim(
        run_id=run_id,
        job=job,
        host=socket.gethostname(),
        pid=pid,
        pid_start=_proc_start(pid),
        boot_id=_boot_id(),
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        token=uuid.uuid4().hex,
    )


def why_stale(claim: Claim, refreshed: float, now: float | None = None) -> str | None:
    """Why ``claim`` (last refreshed at ``refreshed``, epoch seconds) belongs to a dead job; None if its
    job may be alive."""
    now = time.time() if now is None else now
    if claim.host == socket.gethostname() and claim.boot_id == _boot_id():
        if not _pid_alive(claim.pid):
            return f"its process {claim.pid} is gone"
        if claim.pid_start and _proc_start(claim.pid) not in ("", claim.pid_start):
            return f"pid {claim.pid} is now another process"
        return None
    if claim.host == socket.gethostname():
        return "the host was restarted since"
    limit = float(os.environ.get(STALE_ENV, STALE_S))
    if now - refreshed > limit:
        return f"it was not refreshed for {now - refreshed:.0f} s (limit {limit:.0f} s)"
    return None


def read_claim(path: str) -> tuple[Claim, float] | None:
    """The claim at ``path`` and when it was last refreshed; None if there is none (or it is unreadable:
    a claim being written, or damaged, counts as absent for at most one retry)."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        return Claim(**data), os.stat(path).st_mtime
    except (OSError, ValueError, TypeError):
        return None


def _create(path: str, claim: Claim) -> bool:
    """Create the claim file exclusively; False if it exists. A claim that cannot be written whole (a
    full disk) is deleted again: an empty claim file would hold the run id."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(asdict(claim), handle)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    return True


def _unreadable_age(path: str) -> float | None:
    """How long ago an unreadable claim file was last touched (None: it is gone)."""
    try:
        return time.time() - os.stat(path).st_mtime
    except FileNotFoundError:
        return None


def acquire(warehouse: str | os.PathLike[str], run_id: str, job: str) -> Claim:
    """Claim ``run_id`` for ``job``; :class:`ClaimError` if a live job holds it."""
    check_run_id(run_id)
    claim = new_claim(run_id, job)
    if not _local(warehouse):
        return claim  # not exclusive on object stores (module docstring)
    path = claim_path(warehouse, run_id)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    for _ in range(3):
        if _create(path, claim):
            return claim
        held = read_claim(path)
        if held is None:
            age = _unreadable_age(path)
            if age is not None and age > WRITE_GRACE_S and _take_over(path, None, claim):
                return claim  # an empty or damaged claim: its creator died before writing it
            time.sleep(0.05)  # being written by its creator, or just deleted: look again
            continue
        other, refreshed = held
        reason = why_stale(other, refreshed)
        if reason is None:
            raise ClaimError(
                f"run {run_id} is being written by {other.describe()}: wait for it to end, or stop it "
                f"(its claim: {path})"
            )
        if _take_over(path, other, claim):
            return claim
    raise ClaimError(f"run {run_id}: could not claim it, other jobs keep claiming it (claim: {path})")


@contextlib.contextmanager
def _takeover_lock(path: str) -> Iterator[bool]:
    """Hold the takeover lock of the claim at ``path`` for the ``with`` block (False: another holds it)."""
    lock = f"{path}.takeover"
    with contextlib.suppress(FileNotFoundError):
        if time.time() - os.stat(lock).st_mtime > TAKEOVER_STALE_S:
            os.unlink(lock)  # left by a job killed while taking over
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        yield False
        return
    os.close(fd)
    try:
        yield True
    finally:
        os.unlink(lock)


def _still_stale(path: str, stale: Claim | None) -> bool:
    """Whether the claim at ``path`` is still the stale one judged (None: still unreadable, and old)."""
    held = read_claim(path)
    if stale is None:
        return held is None and (_unreadable_age(path) or 0.0) > WRITE_GRACE_S
    return held is not None and held[0].token == stale.token


def _take_over(path: str, stale: Claim | None, claim: Claim) -> bool:
    """Replace the stale claim (None: the unreadable one) by ours, under the takeover lock; False if
    another job got there first."""
    with _takeover_lock(path) as locked:
        if not locked:
            return False
        if _still_stale(path, stale):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        return _create(path, claim)  # if it changed meanwhile: compete for it normally


def release(warehouse: str | os.PathLike[str], claim: Claim) -> None:
    """Delete the claim if it is still ours."""
    if not _local(warehouse):
        return
    path = claim_path(warehouse, claim.run_id)
    held = read_claim(path)
    if held is not None and held[0].token == claim.token:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


@dataclass(frozen=True)
class ClaimFile:
    """A claim file as found: its run id (from its name), the claim (None: unreadable), whether it is
    stale (and why)."""

    path: str
    run_id: str
    claim: Claim | None
    stale: str | None  # why its job is dead; None: it may be alive

    def describe(self) -> str:
        if self.claim is not None:
            return self.claim.describe()
        return "a job whose claim is being written"


def claim_files(warehouse: str | os.PathLike[str]) -> list[ClaimFile]:
    """Every claim of the warehouse, live or stale (sorted by run id)."""
    folder = _folder(warehouse)
    if not _local(warehouse) or not os.path.isdir(folder):
        return []
    out: list[ClaimFile] = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json"):
            continue
        path = os.path.join(folder, name)
        held = read_claim(path)
        if held is not None:
            out.append(ClaimFile(path, held[0].run_id, held[0], why_stale(*held)))
            continue
        age = _unreadable_age(path)
        if age is not None:
            stale = f"it is empty or damaged, {age:.0f} s old" if age > WRITE_GRACE_S else None
            out.append(ClaimFile(path, unquote(name.removesuffix(".json")), None, stale))
    return out


def live_claims(warehouse: str | os.PathLike[str]) -> dict[str, ClaimFile]:
    """The claims of jobs that may be alive, by run id (what ``jobs/vacuum.py`` must not touch)."""
    return {c.run_id: c for c in claim_files(warehouse) if c.stale is None}


def clear_stale(found: ClaimFile) -> bool:
    """Delete a stale claim (one of :func:`claim_files`) under the takeover lock, if it is still the one
    judged stale; False if it changed meanwhile (a job took it over) or a taker holds the lock."""
    if found.stale is None:
        raise ValueError(f"the claim of run {found.run_id} is not stale")
    with _takeover_lock(found.path) as locked:
        if not locked or not _still_stale(found.path, found.claim):
            return False
        with contextlib.suppress(FileNotFoundError):
            os.unlink(found.path)
        return True


@contextlib.contextmanager
def claimed(warehouse: str | os.PathLike[str], run_id: str, job: str) -> Iterator[Claim]:
    """Hold the claim of ``run_id`` (refreshed every :data:`HEARTBEAT_S`) for the ``with`` block."""
    claim = acquire(warehouse, run_id, job)
    stop = threading.Event()
    path = claim_path(warehouse, run_id)

    def heartbeat() -> None:
        while not stop.wait(HEARTBEAT_S):
            with contextlib.suppress(OSError):
                os.utime(path)

    beat = threading.Thread(target=heartbeat, name=f"claim-{run_id}", daemon=True)
    if _local(warehouse):
        beat.start()
    try:
        yield claim
    finally:
        stop.set()
        release(warehouse, claim)
