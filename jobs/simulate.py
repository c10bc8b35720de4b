"""Simulate the sends of a run's ``messages`` into ``send_attempts``, ``send_results`` and ``commit_log``
(reconciled with the messages)."""

from __future__ import annotations

import sys

from rocketsim.command.jobs import run_stage_job
from rocketsim.spark.cli import parse_job_args


def main(argv: list[str] | None = None) -> int:
    args, scenario = parse_job_args(argv, "jobs/simulate.py", __doc__)  # exits 2 before Spark on bad input
    # claims the run id, starts Spark, runs; one line on stderr for any failure
    return run_stage_job("simulate", args, scenario)


if __name__ == "__main__":
    sys.exit(main())
