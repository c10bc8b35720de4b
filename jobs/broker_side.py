"""The broker side of a run: ``commit_log`` -> ``broker_storage``, ``transactions``, ``consumer_load``
(again: ``jobs/pipeline.py`` writes them in its one pass). Broker tasks read their broker's committed
commit-log records and the results of its halves, producer tasks their transactional messages and
results; ``commit_log`` and send_results' offsets are written by jobs/simulate.py.
"""

from __future__ import annotations

import sys

from rocketsim.spark.cli import parse_job_args
from rocketsim.spark.launch import run_job
from rocketsim.spark.pipeline import run_broker_side
from rocketsim.stage.graph import tables_read
from rocketsim.tables.schemas import BROKER_SIDE


def main(argv: list[str] | None = None) -> int:
    args, scenario = parse_job_args(argv, "jobs/broker_side.py", __doc__)
    # claims the run id, starts Spark, runs; one line on stderr for any failure
    return run_job(
        "broker_side",
        args,
        lambda spark: run_broker_side(spark, args, scenario),
        reads=tables_read((BROKER_SIDE,)),
    )


if __name__ == "__main__":
    sys.exit(main())
