"""Write a run (or each variant of a comparison) as OpenMessaging Benchmark result files (TestResult JSON),
which OMB's bin/create_charts.py and the tools built on OMB's format read.

Needs no Spark: python jobs/export_omb.py --warehouse DIR --run-id ID --out DIR
    [--driver NAME] [--workload NAME] [--warmup-s S]
"""

from __future__ import annotations

import argparse
import math
import sys

from rocketsim.errors import RocketSimError
from rocketsim.spark.cli import OneLineArgumentParser
from rocketsim.warehouse.omb import DEFAULT_DRIVER, run_exports, write_exports


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = OneLineArgumentParser(prog="jobs/export_omb.py", description=__doc__.splitlines()[0])
    p.add_argument(
        "--warehouse", default="warehouse", help="folder of the Delta tables (default ./warehouse)"
    )
    p.add_argument("--run-id", required=True, help="the run, or the comparison (one file per variant)")
    p.add_argument("--out", required=True, help="the folder to write the files into")
    p.add_argument(
        "--driver",
        default=DEFAULT_DRIVER,
        help=f"OMB's driver field, the charts' line label ({DEFAULT_DRIVER})",
    )
    p.add_argument("--workload", default="", help="OMB's workload field (default: the scenario's name)")
    p.add_argument(
        "--warmup-s",
        type=float,
        default=0.0,
        help="leave out the first seconds, whole 10 s windows (OMB discards its warm-up)",
    )
    ns = p.parse_args(argv)
    if not (math.isfinite(ns.warmup_s) and ns.warmup_s >= 0):
        p.error(f"--warmup-s must be a number >= 0, got {ns.warmup_s}")
    if not ns.driver.strip():
        p.error("--driver must not be blank")
    return ns


def main(argv: list[str] | None = None) -> int:
    ns = parse(argv)
    try:
        exports = run_exports(
            ns.warehouse,
            ns.run_id,
            driver=ns.driver,
            workload=ns.workload or None,
            skip_windows=math.ceil(ns.warmup_s / 10.0),
        )
        paths = write_exports(exports, ns.out)
    except (RocketSimError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for e, path in zip(exports, paths, strict=True):
        windows = len(e.result["publishRate"])
        print(f"{e.variant or ns.run_id}: {windows} windows of 10 s -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
