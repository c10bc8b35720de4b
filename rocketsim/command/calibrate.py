"""Calibrate the broker model from your own measurements: a scenario fragment and a fit report.

Needs no Spark: rocketsim calibrate --input omb:result.json [--input store-log:store.log ...]
    [--saturation RATE[@BYTES]] [--fix latency.spike_alpha=1.5] [--match node_id=broker-a]
    [--broker NAME] --out calibrated.toml [--report DIR]

Formats (FORMAT:PATH, or a bare PATH to detect it): omb, benchmark, prometheus, prometheus-json, csv,
histogram, store-log, watermark-log (docs/calibration.md says what each calibrates).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from rocketsim.arguments import OneLineArgumentParser
from rocketsim.calibration.formats import FORMATS, parse_saturation
from rocketsim.command.options import examples_text
from rocketsim.errors import MeasurementError, RocketSimError

EXAMPLES = (
    "rocketsim calibrate --input omb:result.json --out calibrated.toml --report calibration/",
    "rocketsim calibrate --input prometheus:latency.json --input store-log:store.log \\\n"
    "      --match node_id=broker-a --fix latency.spike_alpha=1.5 --out broker-a.toml",
)


def _pairs(items: list[str], option: str, number: bool) -> dict[str, object]:
    out: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise MeasurementError(option, 0, f"expected KEY=VALUE, got {item!r}")
        if number:
            try:
                out[key.strip()] = float(value)
            except ValueError:
                raise MeasurementError(option, 0, f"expected a number after {key}=, got {value!r}") from None
        else:
            out[key.strip()] = value.strip()
    return out


def one_blas_thread() -> None:
    """One OpenBLAS thread for scipy's L-BFGS-B, unless ``OPENBLAS_NUM_THREADS`` says otherwise: its BLAS
    calls are on vectors of a few fitted values, which threads never speed up, and on a busy host the
    idle threads' spinning slowed the fit up to ~7x (docs/calibration.md). Read when scipy's OpenBLAS
    loads, so before the fit is first imported (in this process, scipy was not imported before)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def parser(prog: str, epilog: str | None = None) -> OneLineArgumentParser:
    p = OneLineArgumentParser(prog=prog, description=__doc__.splitlines()[0], epilog=epilog)
    p.add_argument("--input", action="append", default=[], metavar="[FORMAT:]PATH", help=", ".join(FORMATS))
    p.add_argument(
        "--out", required=True, metavar="FRAGMENT.toml", help="where to write the scenario fragment"
    )
    p.add_argument(
        "--report", default="", metavar="DIR", help="where to write the fit report (HTML, PNG, CSV)"
    )
    p.add_argument(
        "--saturation", default="", metavar="RATE[@BYTES]", help="msg/s the brokers sustain at most"
    )
    p.add_argument(
        "--fix", action="append", default=[], metavar="KEY=VALUE", help="hold e.g. latency.spike_alpha"
    )
    p.add_argument("--match", action="append", default=[], metavar="LABEL=VALUE", help="keep series with it")
    p.add_argument(
        "--broker", default="default", help="the [brokers.NAME] section to write (default: default)"
    )
    return p


def main(
    argv: Sequence[str] | None = None, prog: str = "jobs/calibrate.py", epilog: str | None = None
) -> int:
    p = parser(prog, epilog)
    args = p.parse_args(argv)
    if not args.input and not args.saturation:
        p.error("give at least one --input (or --saturation)")
    one_blas_thread()
    # the fit (scipy, pandas) and its report (matplotlib) only once the command line is good
    from rocketsim.calibration.calibrate import Options, calibrate
    from rocketsim.calibration.fragment import fragment_text, set_lines
    from rocketsim.present.calibration_report import write_report
    from rocketsim.warehouse.calibration_inputs import read_inputs, write_text

    try:
        measurements, sources = read_inputs(args.input)
        if args.saturation:
            measurements += type(measurements)(throughputs=(parse_saturation(args.saturation),))
            sources.append(f"--saturation {args.saturation}")
        measurements = measurements.matching(_pairs(args.match, "--match", number=False))  # type: ignore[arg-type]
        opts = Options(args.broker, _pairs(args.fix, "--fix", number=True))  # type: ignore[arg-type]
        cal = calibrate(measurements, opts)
        fragment = fragment_text(cal, sources)
    except (RocketSimError, ValueError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    path = write_text(args.out, fragment)
    print(f"scenario fragment: {path.resolve()}")
    for line in set_lines(cal):
        print(f"  {line}")
    for note in cal.notes:
        print(f"note: {note}")
    if args.report:
        page = write_report(cal, sources, fragment, args.report)
        print(f"fit report: {page.resolve()}")
    return 0


def command(argv: Sequence[str], prog: str) -> int:
    """``rocketsim calibrate``: :func:`main`, with examples in its help."""
    return main(argv, prog, examples_text(EXAMPLES))
