"""Find the smallest cluster that meets a p99 target (and a failure bound) for a scenario, in one Spark job.

./spark-submit.sh jobs/capacity.py --scenario conf/scenarios/cascade.toml \\
    --brokers 4,5,6,7 --target-p99-ms 200 [--max-failure-rate 0.001] [--chart capacity.png]
    [--write-queues 2,4,8 instead of --brokers] [--warehouse DIR] [--run-id ID] [--set key=value ...]
"""

from __future__ import annotations

import sys

from rocketsim.command.jobs import capacity_job
from rocketsim.spark.cli import parse_capacity_args


def main(argv: list[str] | None = None) -> int:
    args, base, scenarios = parse_capacity_args(argv, "jobs/capacity.py", __doc__)  # exits 2 before Spark
    return capacity_job(args, base, scenarios)


if __name__ == "__main__":
    sys.exit(main())
