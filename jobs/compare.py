"""Compare variants of one scenario on the same messages and fault timeline, in one Spark job.

./spark-submit.sh jobs/compare.py --scenario conf/scenarios/brownout.toml \\
    --variant fault_off:producers.send_latency_fault_enable=false \\
    --variant fault_on:producers.send_latency_fault_enable=true [--sweep KEY=V1,V2 ...]
    [--baseline NAME] [--warehouse DIR] [--run-id ID] [--set key=value ...] [--window-ms MS]
"""

from __future__ import annotations

import sys

from rocketsim.command.jobs import compare_job
from rocketsim.spark.cli import parse_compare_args


def main(argv: list[str] | None = None) -> int:
    args, base, scenarios = parse_compare_args(argv, "jobs/compare.py", __doc__)  # exits 2 before Spark
    # claims the comparison's run id, starts Spark, runs; one line on stderr for any failure
    return compare_job(args, base, scenarios)


if __name__ == "__main__":
    sys.exit(main())
