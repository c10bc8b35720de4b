"""Shared fixtures: one SparkSession for the whole run, requested only by Spark tests, and the mixed
scenario the stage's tests share; the order in which ``make test``'s two processes take the files."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
# One numba cache for the test processes, the Spark workers and the jobs the tests start
# (spark-submit.sh and the Makefile use the same directory), so the send loop compiles once.
os.environ.setdefault("NUMBA_CACHE_DIR", str(Path(__file__).resolve().parents[1] / "build" / "numba-cache"))
# Every Spark driver JVM the tests start (the session's below, and those of the jobs, the command and the
# benchmark they run as processes: spark-submit reads SPARK_SUBMIT_OPTS) tuned for short jobs: C1 JIT only
# and the serial GC. The tests' jobs are small, so C2's compiles and G1's threads cost CPU that the two
# test processes and their jobs share; on the 2-core host this halves the Spark files' time (e.g.
# test_delta_sink + test_pipeline 80-102 s -> 46-56 s). What a job computes does not depend on it.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
# One BLAS thread a process (read when numpy loads, after this file): ``make test``'s two processes already
# fill the two cores, and OpenBLAS's threads, waking for scipy's small L-BFGS-B steps, then wait on each
# other: rocketsim.calibration's fit of 100k csv latencies took 10.2 s with them, 1.2 s without (load ~5).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


# Everything the stage handles, small: three brokers, async and oneway sends, ordered, delay, transactional
# and batch messages, invalid ones, broker errors (lost replies: halves stored twice) and an outage.
MIXED = {
    "name": "stage",
    "seed": 11,
    "cluster": {"brokers": ["broker-a", "broker-b", "broker-c"], "write_queues": 4},
    "producers": {
        "count": 4,
        "threads": 2,
        "client_version": "4.9.8",
        "send_latency_fault_enable": True,
        "send_mode": {"sync": 0.8, "async": 0.1, "oneway": 0.1},
    },
    "workload": {
        "messages": 2000,
        "rate_per_s": 400.0,
        "message_types": {"normal": 0.6, "ordered": 0.1, "delay": 0.1, "transaction": 0.1, "batch": 0.1},
        "invalid": {"bad_topic": 0.01, "oversize_body": 0.01},
    },
    "brokers": {"default": {"errors": {"system_error": 0.01, "remoting_timeout": 0.005}}},
    "faults": [{"broker": "broker-b", "kind": "outage", "start_s": 1, "end_s": 3}],
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a process of ``make test`` (pytest-xdist, ``--dist loadfile --no-loadscope-reorder``: a file's
    tests stay in one process, handed out in collection order): the files with a ``slow`` test first,
    then those with a ``spark`` test, then the rest, so that the short files even out the two processes'
    ends. A run in one process keeps the files' order."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return
    rank: dict[str, int] = {}
    for item in items:
        file = item.nodeid.split("::", 1)[0]
        mine = 0 if item.get_closest_marker("slow") else 1 if item.get_closest_marker("spark") else 2
        rank[file] = min(rank.get(file, 2), mine)
    items.sort(key=lambda item: rank[item.nodeid.split("::", 1)[0]])  # stable: files stay in order


@pytest.fixture(scope="session")
def mixed() -> object:
    """:data:`MIXED` as a scenario."""
    from rocketsim.scenario import scenario_from_mapping

    return scenario_from_mapping(MIXED)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A small, fast local SparkSession shared by every Spark test; never stopped by a test."""
    from rocketsim.spark.session import build_session

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = build_session(
        app_name="rocketsim-tests",
        master="local[2]",
        extra_conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.warehouse.dir": str(warehouse),
        },
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def sample_runs(spark, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The runs of ``tests/sample_runs.py`` made by the pipeline's one pass, in one warehouse."""
    from sample_runs import make_runs

    warehouse = tmp_path_factory.mktemp("sample-runs")
    make_runs(spark, warehouse)
    return warehouse
