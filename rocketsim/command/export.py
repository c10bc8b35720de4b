"""A run in other tools' formats, ``rocketsim export FORMAT ...`` (needs no Spark).

* ``omb`` (:func:`omb`, also ``python jobs/export_omb.py``): a run, or each variant of a comparison, as
  OpenMessaging Benchmark result files (TestResult JSON), which OMB's bin/create_charts.py and the tools
  built on OMB's format read: --warehouse DIR --run-id ID --out DIR [--driver NAME] [--workload NAME]
  [--warmup-s S].
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence

from rocketsim.arguments import OneLineArgumentParser
from rocketsim.command.options import examples_text
from rocketsim.errors import RocketSimError
from rocketsim.omb import DEFAULT_DRIVER

OMB_DESCRIPTION = (
    "Write a run (or each variant of a comparison) as OpenMessaging Benchmark result files (TestResult\n"
    "JSON), which OMB's bin/create_charts.py and the tools built on OMB's format read."
)
OMB_EXAMPLES = (
    "rocketsim export omb --run-id brownout-s11 --out omb/",
    "rocketsim export omb --run-id brownout-s11-compare --out omb/ --warmup-s 60   # one file per variant",
)


def parse(argv: Sequence[str] | None, prog: str, epilog: str | None) -> argparse.Namespace:
    p = OneLineArgumentParser(prog=prog, description=OMB_DESCRIPTION, epilog=epilog)
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


def omb(
    argv: Sequence[str] | None = None, prog: str = "jobs/export_omb.py", epilog: str | None = None
) -> int:
    """OMB result files of a run (module docstring); returns the exit code."""
    ns = parse(argv, prog, epilog)
    from rocketsim.warehouse.omb import run_exports, write_exports  # the tables' readers and the engine

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


FORMATS: dict[str, tuple[Callable[..., int], str, tuple[str, ...]]] = {
    "omb": (
        omb,
        "OpenMessaging Benchmark result files, one per run or variant",
        OMB_EXAMPLES,
    ),
}


def overview(prog: str) -> str:
    """``rocketsim export --help``: the formats and examples."""
    listed = "\n".join(f"  {name:<6}{text}" for name, (_, text, _) in FORMATS.items())
    return (
        f"usage: {prog} FORMAT [options]      ({prog} FORMAT --help: its options)\n\n"
        f"A run in other tools' formats (needs no Spark).\n\nformats:\n{listed}\n\n"
        + examples_text([e for _, _, examples in FORMATS.values() for e in examples])
    )


def main(argv: Sequence[str] | None = None, prog: str = "rocketsim export") -> int:
    """``FORMAT`` and its options: that format's export; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-h"], ["--help"]):
        print(overview(prog))
        return 0
    if not argv or argv[0] not in FORMATS:
        got = f"unknown format {argv[0]!r}" if argv else "name a format"
        print(f"{prog}: error: {got}: one of {', '.join(FORMATS)} (see --help)", file=sys.stderr)
        return 2
    run, _, examples = FORMATS[argv[0]]
    return run(argv[1:], f"{prog} {argv[0]}", examples_text(examples))
