"""Summarize a simulated run into ``isolation_intervals``, ``broker_windows``, ``queue_windows``,
``producer_windows`` and ``run_summary``."""

from __future__ import annotations

import sys

from rocketsim.spark.cli import parse_job_args
from rocketsim.spark.pipeline import print_summary, reconcile, run_summarize
from rocketsim.spark.session import build_session


def main(argv: list[str] | None = None) -> int:
    args, scenario = parse_job_args(argv, "jobs/summarize.py", __doc__)
    spark = build_session(app_name=f"rocketsim-summarize-{args.run_id}")
    try:
        run_summarize(spark, args)
        reconcile(spark, args, through="summarize")  # raises ReconciliationError: the job fails
        print_summary(args)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
