"""Summarize a simulated run into ``isolation_intervals``, ``broker_windows``, ``queue_windows``,
``producer_windows`` and ``run_summary`` (again, e.g. with another ``--window-ms``): the tasks read their
producers' committed attempts and results, the driver merges their aggregates, writes the tables and
reconciles them with the run's other tables."""

from __future__ import annotations

import sys

from rocketsim.spark.cli import parse_job_args
from rocketsim.spark.launch import run_job
from rocketsim.spark.pipeline import print_summary, run_summarize
from rocketsim.stage.graph import tables_read
from rocketsim.tables.schemas import SUMMARIZE


def main(argv: list[str] | None = None) -> int:
    args, scenario = parse_job_args(argv, "jobs/summarize.py", __doc__)
    # claims the run id, starts Spark, runs; one line on stderr for any failure
    return run_job(
        "summarize",
        args,
        lambda spark: print_summary(args, run_summarize(spark, args, scenario)["run_summary"]),
        reads=tables_read((SUMMARIZE,)),
    )


if __name__ == "__main__":
    sys.exit(main())
