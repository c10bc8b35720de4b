"""Run a scenario end to end, every table in one pass (generate -> simulate -> broker side -> summarize),
writing Delta tables.

./spark-submit.sh jobs/pipeline.py --scenario conf/scenarios/steady.toml [--warehouse DIR]
    [--run-id ID] [--set key=value ...] [--partitions N]
"""

from __future__ import annotations

import sys

from rocketsim.spark.cli import parse_job_args
from rocketsim.spark.pipeline import run_pipeline
from rocketsim.spark.session import build_session


def main(argv: list[str] | None = None) -> int:
    args, scenario = parse_job_args(argv, "jobs/pipeline.py", __doc__)  # exits 2 before Spark on bad input
    spark = build_session(app_name=f"rocketsim-pipeline-{args.run_id}")
    try:
        run_pipeline(spark, args, scenario)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
