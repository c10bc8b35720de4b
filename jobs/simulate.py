"""Simulate the sends of a run's ``messages`` into ``send_attempts``, ``send_results`` and ``commit_log``
(reconciled with the messages)."""

from __future__ import annotations

import sys

from rocketsim.spark.cli import parse_job_args
from rocketsim.spark.pipeline import run_simulate
from rocketsim.spark.session import build_session


def main(argv: list[str] | None = None) -> int:
    args, scenario = parse_job_args(argv, "jobs/simulate.py", __doc__)
    spark = build_session(app_name=f"rocketsim-simulate-{args.run_id}")
    try:
        run_simulate(spark, args, scenario)  # raises ReconciliationError: the job fails
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
