"""Shared fixtures: one SparkSession for the whole run, requested only by Spark tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
# One numba cache for the test processes, the Spark workers and the jobs the tests start
# (spark-submit.sh and the Makefile use the same directory), so the send loop compiles once.
os.environ.setdefault("NUMBA_CACHE_DIR", str(Path(__file__).resolve().parents[1] / "build" / "numba-cache"))


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
