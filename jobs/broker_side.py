"""The broker side of a run: ``commit_log`` -> ``broker_storage``, ``transactions``, ``consumer_load``
(again: ``jobs/pipeline.py`` writes them in its one pass). Broker tasks read their broker's committed
commit-log records and the results of its halves, producer tasks their transactional messages and
results; ``commit_log`` and send_results' offsets are written by jobs/simulate.py.
"""

from __future__ import annotations

import sys

from rocketsim.command.jobs import run_stage_job
from rocketsim.spark.cli import parse_job_args


def main(argv: list[str] | None = None) -> int:
    args, scenario = parse_job_args(argv, "jobs/broker_side.py", __doc__)  # exits 2 before Spark on bad input
    # claims the run id, starts Spark, runs; one line on stderr for any failure
    return run_stage_job("broker-side", args, scenario)


if __name__ == "__main__":
    sys.exit(main())
