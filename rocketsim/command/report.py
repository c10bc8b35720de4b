"""Write a self-contained HTML report of one run (summary tables and charts, PNGs embedded).

Needs no Spark (``rocketsim report``, ``python jobs/report.py``): [--run-id ID] [--warehouse DIR]
[--out FILE] [--omb FILE ...]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rocketsim.arguments import OneLineArgumentParser
from rocketsim.command.options import examples_text
from rocketsim.errors import RocketSimError, first_line

EXAMPLES = (
    "rocketsim report                      # the most recent run in ./warehouse -> reports/<run id>.html",
    "rocketsim report --run-id brownout-s11 --out brownout.html",
    "rocketsim report --run-id steady-s42 --omb omb-result.json   # beside a measured OMB run",
)


def main(argv: Sequence[str] | None = None, prog: str = "jobs/report.py", epilog: str | None = None) -> int:
    p = OneLineArgumentParser(prog=prog, description=__doc__.splitlines()[0], epilog=epilog)
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
    # the readers and charts (deltalake, matplotlib, the engine) only once the command line is good
    import pyarrow as pa
    from deltalake.exceptions import DeltaError

    from rocketsim.present.explore import find_warehouse, latest_run
    from rocketsim.present.omb import load_measured
    from rocketsim.present.report import write_report

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


def command(argv: Sequence[str], prog: str) -> int:
    """``rocketsim report``: :func:`main`, with examples in its help."""
    return main(argv, prog, examples_text(EXAMPLES))
