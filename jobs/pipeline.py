"""Run a scenario end to end, every table in one pass (generate -> simulate -> broker side -> summarize),
writing Delta tables.

./spark-submit.sh jobs/pipeline.py --scenario conf/scenarios/steady.toml [--warehouse DIR]
    [--run-id ID] [--set key=value ...] [--partitions N] [--tables all|summary|TABLE,...]
"""

from __future__ import annotations

import sys

from rocketsim.command.jobs import ALL, run_stage_job
from rocketsim.spark.cli import parse_job_args


def main(argv: list[str] | None = None) -> int:
    # exits 2 before Spark on bad input
    args, scenario = parse_job_args(argv, "jobs/pipeline.py", __doc__, whole_run=True)
    # claims the run id, starts Spark, runs; one line on stderr for any failure
    return run_stage_job(ALL, args, scenario)


if __name__ == "__main__":
    sys.exit(main())
