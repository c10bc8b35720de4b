"""Write a self-contained HTML report of one run (summary tables and charts, PNGs embedded).

Needs no Spark: python jobs/report.py [--run-id ID] [--warehouse DIR] [--out FILE] [--omb FILE ...]
"""

from __future__ import annotations

import argparse
import sys

import pyarrow as pa
from deltalake.exceptions import DeltaError

from rocketsim.errors import RocketSimError, first_line
from rocketsim.present.explore import find_warehouse, latest_run
from rocketsim.present.omb import load_measured
from rocketsim.present.report import write_report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="jobs/report.py", description=__doc__.splitlines()[0])
    p.add_argument("--run-id", default="", help="the run (default: the most recent run in the warehouse)")
    p.add_argument(
        "--warehouse", default="warehouse", help="folder of the Delta tables (default ./warehouse)"
    )
    p.add_argument("--out", default="", help="the HTML file (default reports/<run id>.html)")
    p.add_argument(
        "--omb",
        action="append",
        default=[],
        metavar="FILE",
        help="an OpenMessaging Benchmark result file to chart the run beside (repeatable)",
    )
    args = p.parse_args(argv)
    warehouse = find_warehouse(args.warehouse)
    try:
        measured = load_measured(args.omb)  # a bad file stops the job before any work
        run_id = args.run_id or latest_run(warehouse)
        path = write_report(warehouse, run_id, args.out or f"reports/{run_id}.html", measured)
    except (FileNotFoundError, RocketSimError, DeltaError, pa.ArrowException) as exc:
        # no run, a bad OMB file, or a damaged table or run_commits (the readers name it): nothing written
        print(f"error: {first_line(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:  # writing the report
        print(f"error: the report could not be written: {first_line(exc)}", file=sys.stderr)
        return 1
    print(f"report of run {run_id}: {path.resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
