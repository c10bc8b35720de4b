"""The options and help of ``rocketsim validate`` (and ``python -m rocketsim.validation``), apart from the
validation itself (:mod:`rocketsim.command.validate`: the engine, the calibration's fits, the report's
charts, seconds to import): ``--help`` and a usage error import none of them
(``tests/test_command_imports.py``)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from rocketsim.arguments import OneLineArgumentParser, examples_text
from rocketsim.validation.hosts import FIT_HOST_SCHEDULER, FIT_ROUNDS, HOST_SCHEDULER

PROG = "python -m rocketsim.validation"
EXAMPLES = (
    "rocketsim validate tests/data/realbroker --calibrate-from a_low_async \\\n"
    "      --calibrate-from b_ramp_async_p1 --json validation.json --report reports/validation",
)


def parser(prog: str = PROG, epilog: str | None = None) -> OneLineArgumentParser:
    p = OneLineArgumentParser(
        prog=prog,
        description="the model against runs of a real broker: calibrate from some, compare the others",
        epilog=epilog,
    )
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="a harness run folder, or a folder of them")
    p.add_argument(
        "--calibrate-from", action="append", required=True, metavar="NAME", help="a run to calibrate from"
    )
    p.add_argument("--json", default="", metavar="FILE", help='per run {"measured": ..., "simulated": ...}')
    p.add_argument("--report", default="", metavar="DIR", help="where to write the HTML report and charts")
    p.add_argument("--seed", type=int, default=1, help="the simulation's seed (default 1)")
    p.add_argument(
        "--include-calibration-runs", action="store_true", help="simulate the calibration runs too"
    )
    p.add_argument(
        "--fit-host-capacity",
        action="store_true",
        help="scale the CPU a send until the saturated calibration run's top rate, simulated, completes its "
        f"measured rate (up to {FIT_ROUNDS} simulations of ~1.5 min each), and simulate on the "
        f'work-conserving fair host ("{FIT_HOST_SCHEDULER}"; default: "{HOST_SCHEDULER}", the CPU as '
        "calibrated). Not the default: with it two producers keep up at 72,000/s where the real host "
        "collapsed (docs/validation.md)",
    )
    p.add_argument(
        "--thread-split",
        action="store_true",
        help="run each send's CPU on the threads the harness's per-thread run measured (the client's Netty "
        "worker and selector, its callbacks, the broker's connection, send and reput threads, the JVMs' "
        "other threads) instead of the executor's thread and the broker's two: the client's Netty worker "
        "queues under overload, as measured; up to about twice the CPU, the whole overloaded c_overload "
        "included (docs/validation.md)",
    )
    p.add_argument(
        "--fit-stall-shape",
        action="store_true",
        help="fit the host's stalls with their lengths' shape too (a gamma distribution, "
        "producers.host_stall_shape) against the saturated run's per-second quantiles, the stalls' share "
        "up to 0.9 of the host (default: exponential lengths, at most half the host; docs/validation.md)",
    )
    return p


def parse(argv: Sequence[str] | None, prog: str = PROG, epilog: str | None = None) -> argparse.Namespace:
    """The command line (``--help``: printed, exit 0; a usage error: one line, exit 2)."""
    return parser(prog, epilog).parse_args(argv)


def main(argv: Sequence[str] | None = None, prog: str = PROG, epilog: str | None = None) -> int:
    """The validation (:func:`rocketsim.command.validate.run`) once the command line parsed; its exit code."""
    args = parse(argv, prog, epilog)
    from rocketsim.command import validate  # the engine and the rest: only with work to do

    return validate.run(args, prog)


def command(argv: Sequence[str], prog: str) -> int:
    """``rocketsim validate``: :func:`main`, with examples in its help."""
    return main(argv, prog, examples_text(EXAMPLES))
