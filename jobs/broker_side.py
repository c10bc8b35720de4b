"""The broker side of a run: ``commit_log`` -> ``broker_storage``, ``transactions``, ``consumer_load``
(again: ``jobs/pipeline.py`` writes them in its one pass). Broker tasks read their broker's committed
commit-log records and the results of its halves, producer tasks their transactional messages and
results; ``commit_log`` and send_results' offsets are written by jobs/simulate.py.
"""

from __future__ import annotations

import sys

from rocketsim.spark.cli import parse_job_args
from rocketsim.spark.pipeline import run_broker_side
from rocketsim.spark.session import build_session


def main(argv: list[str] | None = None) -> int:
    args, scenario = parse_job_args(argv, "jobs/broker_side.py", __doc__)
    spark = build_session(app_name=f"rocketsim-broker-side-{args.run_id}")
    try:
        run_broker_side(spark, args, scenario)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
