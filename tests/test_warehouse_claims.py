"""One writer per run id (:mod:`rocketsim.warehouse.claims`): a second claim of a run id fails naming the
holder, a dead holder's claim is taken over (dead pid, reused pid, another host's claim left unrefreshed),
racing takers cannot both win, and the job's claim is released and refreshed. The jobs' use of it (fail
fast before Spark, with one line): tests/test_launch.py."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rocketsim.warehouse import claims
from rocketsim.warehouse.claims import (
    ClaimError,
    acquire,
    claim_path,
    claimed,
    live_claims,
    new_claim,
    release,
)


def _plant(warehouse: Path, run_id: str, **changes: object) -> claims.Claim:
    """A claim file for ``run_id`` as another job would have left it."""
    claim = dataclasses.replace(new_claim(run_id, "jobs/pipeline.py"), **changes)
    path = Path(claim_path(warehouse, run_id))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dataclasses.asdict(claim)))
    return claim


def _dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return int(done.stdout)


def test_a_second_claim_fails_naming_the_first_and_release_lets_the_next_in(tmp_path: Path) -> None:
    first = acquire(tmp_path, "r1", "jobs/pipeline.py")
    with pytest.raises(ClaimError) as info:
        acquire(tmp_path, "r1", "jobs/summarize.py")
    text = str(info.value)
    assert text.startswith("run r1 is being written by jobs/pipeline.py (pid ")
    assert f"pid {os.getpid()} on host {first.host}, started {first.started_at}" in text
    assert "\n" not in text
    acquire(tmp_path, "r2", "jobs/pipeline.py")  # another run id: no conflict
    release(tmp_path, dataclasses.replace(first, token="someone else"))  # not ours: kept
    with pytest.raises(ClaimError):
        acquire(tmp_path, "r1", "jobs/summarize.py")
    release(tmp_path, first)
    assert acquire(tmp_path, "r1", "jobs/summarize.py").job == "jobs/summarize.py"


@pytest.mark.parametrize(
    "changes, reason",
    [
        (lambda: {"pid": _dead_pid()}, "its process is gone"),
        (lambda: {"pid": os.getpid(), "pid_start": "1"}, "the pid now belongs to another process"),
        (lambda: {"boot_id": "an-earlier-boot"}, "the host was restarted"),
    ],
)
def test_a_dead_jobs_claim_on_this_host_is_taken_over(tmp_path: Path, changes, reason: str) -> None:  # noqa: ANN001
    stale = _plant(tmp_path, "r1", **changes())
    assert claims.why_stale(stale, time.time()) is not None, reason
    assert live_claims(tmp_path) == {}
    mine = acquire(tmp_path, "r1", "jobs/pipeline.py")
    assert json.loads(Path(claim_path(tmp_path, "r1")).read_text())["token"] == mine.token


def test_another_hosts_claim_is_stale_only_when_not_refreshed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _plant(tmp_path, "r1", host="elsewhere", pid=1)
    with pytest.raises(ClaimError, match="pid 1 on host elsewhere"):
        acquire(tmp_path, "r1", "jobs/pipeline.py")
    assert set(live_claims(tmp_path)) == {"r1"}
    old = time.time() - claims.STALE_S - 5
    os.utime(claim_path(tmp_path, "r1"), (old, old))
    assert live_claims(tmp_path) == {}
    assert acquire(tmp_path, "r1", "jobs/pipeline.py").host != "elsewhere"
    monkeypatch.setenv(claims.STALE_ENV, "1")  # the limit is configurable
    _plant(tmp_path, "r2", host="elsewhere", pid=1)
    old = time.time() - 2
    os.utime(claim_path(tmp_path, "r2"), (old, old))
    acquire(tmp_path, "r2", "jobs/pipeline.py")


def test_racing_takers_of_a_stale_claim_cannot_both_win(tmp_path: Path) -> None:
    _plant(tmp_path, "r1", pid=_dead_pid())
    barrier = threading.Barrier(8)
    won: list[claims.Claim] = []
    lost: list[str] = []

    def take() -> None:
        barrier.wait()
        try:
            won.append(acquire(tmp_path, "r1", "jobs/pipeline.py"))
        except ClaimError as exc:
            lost.append(str(exc))

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and len(lost) == 7
    assert json.loads(Path(claim_path(tmp_path, "r1")).read_text())["token"] == won[0].token
    assert not Path(claim_path(tmp_path, "r1") + ".takeover").exists()


def test_the_job_claim_is_refreshed_while_held_and_released_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(claims, "HEARTBEAT_S", 0.05)
    path = Path(claim_path(tmp_path, "r1"))
    with pytest.raises(RuntimeError, match="the job failed"), claimed(tmp_path, "r1", "jobs/summarize.py"):
        old = time.time() - 100
        os.utime(path, (old, old))
        time.sleep(0.3)
        assert time.time() - path.stat().st_mtime < 5  # refreshed by the heartbeat
        assert set(live_claims(tmp_path)) == {"r1"}
        raise RuntimeError("the job failed")
    assert not path.exists()  # released however the job ended
