"""Simulate the sends of a run's ``messages`` into ``send_attempts``, ``send_results`` and ``commit_log``
(reconciled with the messages)."""

from __future__ import annotations

import sys

from rocketsim.spark.cli import parse_job_args
from rocketsim.spark.launch import run_job
from rocketsim.spark.pipeline import run_simulate
from rocketsim.stage.graph import tables_read
from rocketsim.tables.schemas import SIMULATE


def main(argv: list[str] | None = None) -> int:
    args, scenario = parse_job_args(argv, "jobs/simulate.py", __doc__)
    # claims the run id, starts Spark, runs; one line on stderr for any failure
    return run_job(
        "simulate", args, lambda spark: run_simulate(spark, args, scenario), reads=tables_read((SIMULATE,))
    )


if __name__ == "__main__":
    sys.exit(main())
