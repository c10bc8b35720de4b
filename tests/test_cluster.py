"""Cluster proof: a standalone master and two workers on 127.0.0.1 run a job submitted by
./spark-submit.sh, and the same job run by the ``rocketsim`` command with ``--master`` (its driver here,
the tasks in the workers' executors with the package it ships); every table equals a local run's.

Uses pyspark's own ``bin/spark-class`` (no Spark download). The job is the real pipeline on a small
broker-outage scenario, submitted from another working directory.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
from sample_runs import assert_same

from rocketsim.stage.graph import RUN_TABLES
from rocketsim.tables.schemas import SEND_RESULTS, TABLES
from rocketsim.warehouse.read import read_arrow

ROOT = Path(__file__).resolve().parents[1]
SPARK_HOME = Path(pyspark.__file__).parent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.spark,
    pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs Java 17"),
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        # Own process group: stopping it also stops the executor JVMs the worker forks.
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _master_state(webui_port: int) -> dict[str, object]:
    with urllib.request.urlopen(f"http://127.0.0.1:{webui_port}/json/", timeout=2) as resp:
        return json.load(resp)


WORKERS = 2


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int, list[Path]]]:
    """A master and two 1-core workers bound to 127.0.0.1, started once for the module's runs (each
    run checks its own application); yields (master URL, web UI port, each worker's work dir)."""
    tmp_path = tmp_path_factory.mktemp("standalone")
    port, webui = _free_port(), _free_port()
    conf_dir = tmp_path / "spark-conf"  # empty: no site defaults leak in
    works = [tmp_path / f"work-{i}" for i in range(WORKERS)]
    conf_dir.mkdir()
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_CONF_DIR": str(conf_dir),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(tmp_path / "local"),
        "SPARK_NO_DAEMONIZE": "1",
        # the master's and workers' JVMs tuned as the tests' drivers are (tests/conftest.py)
        "SPARK_DAEMON_JAVA_OPTS": os.environ.get("SPARK_SUBMIT_OPTS", ""),
    }
    master = _start(
        [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(webui),
        ],
        tmp_path / "master.log",
        env,
    )
    procs = [master]
    try:
        for i, work in enumerate(works):
            procs.append(_start(_worker_args(port, work), tmp_path / f"worker-{i}.log", env))
        deadline = time.monotonic() + 60
        while True:
            try:
                alive = [w for w in _master_state(webui).get("workers", []) if w.get("state") == "ALIVE"]
                if len(alive) == WORKERS:
                    break
            except (OSError, ValueError):
                pass  # master not listening yet, or its UI still attaching /json/ (its page's HTML comes)
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                logs = "\n".join(p.read_text()[-2000:] for p in tmp_path.glob("*.log"))
                pytest.fail(f"standalone workers did not register:\n{logs}")
            time.sleep(0.5)
        yield f"spark://127.0.0.1:{port}", webui, works
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _worker_args(port: int, work: Path) -> list[str]:
    """A 1-core worker of the master at ``port``, its executors' files in ``work``."""
    return [
        "org.apache.spark.deploy.worker.Worker",
        f"spark://127.0.0.1:{port}",
        "--host",
        "127.0.0.1",
        "--cores",
        "1",
        "--memory",
        "1g",
        "--webui-port",
        str(_free_port()),
        "--work-dir",
        str(work),
    ]


# the job both runs take: broker_outage.toml, small, over the outage from 60 s
JOB = [
    "--scenario",
    str(ROOT / "conf/scenarios/broker_outage.toml"),
    "--run-id",
    "cluster-1",
    "--set",
    "workload.messages=3000",
    "--set",
    "workload.rate_per_s=40",
    "--set",
    "producers.count=2",
    "--partitions",
    "2",
]


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The warehouse of :data:`JOB` run locally (``local[2]``), the tables the cluster's must equal."""
    warehouse = tmp_path_factory.mktemp("local") / "warehouse"
    cmd = [str(ROOT / "spark-submit.sh"), "--master", "local[2]", "jobs/pipeline.py", *JOB]
    done = subprocess.run(
        [*cmd, "--warehouse", str(warehouse)], cwd=ROOT, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return warehouse


def assert_same_run(want: Path, got: Path, run_id: str) -> None:
    """Every table of a run equal in two warehouses, row for row (wall-clock columns aside)."""
    for name in RUN_TABLES:
        spec = TABLES[name]
        one, other = (
            read_arrow(str(w), name, run_id).drop_columns(list(spec.wall_clock)) for w in (want, got)
        )
        if spec.keys:
            assert_same(one, other, spec.keys)
        else:
            assert one.drop_columns(["run_id"]).equals(other.drop_columns(["run_id"])), name


@pytest.mark.parametrize("via", ["spark-submit.sh", "rocketsim"])
def test_pipeline_runs_on_a_two_worker_standalone_cluster_as_locally(
    standalone: tuple[str, int, list[Path]], local_run: Path, tmp_path: Path, via: str
) -> None:
    """The pipeline's tasks spread over two workers' executors give every table a local run gives
    (docs/design.md §2: the same tables whatever the partitioning or the cores)."""
    master_url, webui, works = standalone
    warehouse = tmp_path / "warehouse"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    entry = [str(ROOT / "spark-submit.sh")]
    if via == "rocketsim":  # the command: its options first, the job's after, in any order
        entry = [sys.executable, "-m", "rocketsim", "run"]
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    cmd = [
        *entry,
        "--master",
        master_url,
        "--conf",
        "spark.executor.memory=768m",
        # conf/spark-defaults.conf's executor options, and the short-job JIT and GC of the tests' drivers
        "--conf",
        f"spark.executor.extraJavaOptions=-Duser.timezone=UTC {os.environ.get('SPARK_SUBMIT_OPTS', '')}",
        "--conf",
        f"spark.cores.max={WORKERS}",
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.driver.bindAddress=127.0.0.1",
        "--driver-memory",
        "1g",
        *(["jobs/pipeline.py"] if via == "spark-submit.sh" else []),
        *JOB,
        "--warehouse",
        str(warehouse),
    ]
    before = {app["id"] for app in _master_state(webui).get("completedapps", [])}
    # From another CWD: the script must resolve the repo itself.
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "run cluster-1: 3,000 messages" in done.stdout

    results = read_arrow(warehouse, "send_results", "cluster-1")
    assert results.schema.equals(SEND_RESULTS)
    assert results.num_rows == 3000
    assert_same_run(local_run, warehouse, "cluster-1")

    # The run was one application, whose tasks ran in executors both workers launched, not in the driver.
    apps = {app["id"] for app in _master_state(webui).get("completedapps", [])} - before
    assert len(apps) == 1, apps
    (app,) = apps
    for work in works:
        assert list(work.glob(f"{app}/*/stderr")), f"no executor of {app} was launched on {work.name}"


def test_spark_submit_usage_and_bad_job() -> None:
    usage = subprocess.run([str(ROOT / "spark-submit.sh"), "-h"], capture_output=True, text=True, timeout=30)
    assert usage.returncode == 0 and "usage: spark-submit.sh" in usage.stdout
    missing = subprocess.run(
        [str(ROOT / "spark-submit.sh"), "--master", "local[1]", "jobs/no_such_job.py"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert missing.returncode == 2 and "job file not found" in missing.stderr
