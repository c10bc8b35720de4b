"""Generate a scenario's synthetic messages into the ``messages`` Delta table."""

from __future__ import annotations

import sys

from rocketsim.spark.cli import parse_job_args
from rocketsim.spark.launch import run_job
from rocketsim.spark.pipeline import run_generate


def main(argv: list[str] | None = None) -> int:
    args, scenario = parse_job_args(argv, "jobs/generate.py", __doc__)
    # claims the run id, starts Spark, runs; one line on stderr for any failure
    return run_job("generate", args, lambda spark: run_generate(spark, args, scenario))


if __name__ == "__main__":
    sys.exit(main())
