"""Generate a scenario's synthetic messages into the ``messages`` Delta table."""

from __future__ import annotations

import sys

from rocketsim.spark.cli import parse_job_args
from rocketsim.spark.pipeline import run_generate
from rocketsim.spark.session import build_session


def main(argv: list[str] | None = None) -> int:
    args, scenario = parse_job_args(argv, "jobs/generate.py", __doc__)
    spark = build_session(app_name=f"rocketsim-generate-{args.run_id}")
    try:
        run_generate(spark, args, scenario)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
