"""The Spark jobs, each defined once for its ``jobs/*.py`` file and the ``rocketsim`` command: what runs in
Spark (the job step of :mod:`rocketsim.spark.pipeline`, :mod:`~rocketsim.spark.compare`,
:mod:`~rocketsim.spark.capacity`) and which of the run's tables it must find first, around the same life
(:func:`rocketsim.spark.launch.run_job`: the run id claimed, the inputs checked, one line on failure).

The Spark layer (pyspark, the engine, numba) is imported only when a job runs: parsing a command line,
``--help`` and bad input read this table of jobs and nothing heavier (``tests/test_command_imports.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rocketsim.scenario import Scenario
from rocketsim.spark.cli import CapacityArgs, CompareArgs, JobArgs
from rocketsim.stage.graph import tables_read
from rocketsim.tables.schemas import BROKER_SIDE, SIMULATE, SUMMARIZE

ALL = "all"
PIPELINE = "rocketsim.spark.pipeline"  # the stages' Spark steps (imports pyspark and the engine)

Body = Callable[[Any, JobArgs, Scenario], object]  # (the SparkSession, the job's args, the scenario)


@dataclass(frozen=True)
class RunJob:
    """One of a run's jobs: the whole run in one pass, or one stage of it."""

    job: str  # its file in jobs/, without .py; the claim and Spark's log name it
    body: Body
    reads: tuple[str, ...] = ()  # the run's tables it reads, checked before Spark starts
    summary: str = ""


def _pipeline_step(name: str) -> Body:
    """:mod:`rocketsim.spark.pipeline`'s function ``name``, imported when the job runs."""

    def step(spark: Any, args: JobArgs, sc: Scenario) -> object:
        return getattr(importlib.import_module(PIPELINE), name)(spark, args, sc)

    step.__name__ = name
    return step


def _summarize(spark: Any, args: JobArgs, sc: Scenario) -> None:
    from rocketsim.spark.pipeline import print_summary, run_summarize

    print_summary(args, run_summarize(spark, args, sc))


# by the name of `rocketsim run --stage`
RUN_JOBS = {
    ALL: RunJob("pipeline", _pipeline_step("run_pipeline"), summary="every table in one pass (the default)"),
    "generate": RunJob("generate", _pipeline_step("run_generate"), summary="messages"),
    "simulate": RunJob(
        "simulate",
        _pipeline_step("run_simulate"),
        tuple(tables_read((SIMULATE,))),
        "send_attempts, send_results, commit_log from the run's messages",
    ),
    "broker-side": RunJob(
        "broker_side",
        _pipeline_step("run_broker_side"),
        tuple(tables_read((BROKER_SIDE,))),
        "broker_storage, transactions, consumer_load from the run's commit log",
    ),
    "summarize": RunJob(
        "summarize",
        _summarize,
        tuple(tables_read((SUMMARIZE,))),
        "the summary tables from the run's attempts and results (again, e.g. with another --window-ms)",
    ),
}


def run_stage_job(stage: str, args: JobArgs, sc: Scenario) -> int:
    """A run's job (:data:`RUN_JOBS`) on Spark; returns the exit code."""
    from rocketsim.spark.launch import run_job

    job = RUN_JOBS[stage]
    return run_job(job.job, args, lambda spark: job.body(spark, args, sc), reads=job.reads)


def compare_job(args: CompareArgs, base: Scenario, scenarios: dict[str, Scenario]) -> int:
    """The variants of a scenario on the same messages (``jobs/compare.py``); returns the exit code."""
    from rocketsim.spark.compare import run_compare
    from rocketsim.spark.launch import run_job

    return run_job("compare", args, lambda spark: run_compare(spark, args, base, scenarios))


def capacity_job(args: CapacityArgs, base: Scenario, scenarios: dict[str, Scenario]) -> int:
    """A capacity sweep (``jobs/capacity.py``); returns the exit code."""
    from rocketsim.spark.capacity import run_capacity
    from rocketsim.spark.launch import run_job

    return run_job("capacity", args, lambda spark: run_capacity(spark, args, base, scenarios))
