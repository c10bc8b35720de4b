"""Summarize a simulated run into ``isolation_intervals``, ``broker_windows``, ``queue_windows``,
``producer_windows`` and ``run_summary`` (again, e.g. with another ``--window-ms``): the tasks read their
producers' committed attempts and results, the driver merges their aggregates, writes the tables and
reconciles them with the run's other tables."""

from __future__ import annotations

import sys

from rocketsim.spark.cli import parse_job_args
from rocketsim.spark.pipeline import print_summary, run_summarize
from rocketsim.spark.session import build_session


def main(argv: list[str] | None = None) -> int:
    args, scenario = parse_job_args(argv, "jobs/summarize.py", __doc__)
    spark = build_session(app_name=f"rocketsim-summarize-{args.run_id}")
    try:
        tables = run_summarize(spark, args, scenario)  # raises ReconciliationError: the job fails
        print_summary(args, tables["run_summary"])
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
