"""Summarize a simulated run into ``isolation_intervals``, ``broker_windows``, ``queue_windows``,
``producer_windows`` and ``run_summary`` (again, e.g. with another ``--window-ms``): the tasks read their
producers' committed attempts and results, the driver merges their aggregates, writes the tables and
reconciles them with the run's other tables."""

from __future__ import annotations

import sys

from rocketsim.command.jobs import run_stage_job
from rocketsim.spark.cli import parse_job_args


def main(argv: list[str] | None = None) -> int:
    args, scenario = parse_job_args(argv, "jobs/summarize.py", __doc__)  # exits 2 before Spark on bad input
    # claims the run id, starts Spark, runs; one line on stderr for any failure
    return run_stage_job("summarize", args, scenario)


if __name__ == "__main__":
    sys.exit(main())
