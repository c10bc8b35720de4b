"""Turn an incident's per-broker series (Prometheus range queries or Grafana CSV downloads) into a fault
timeline, write it as a scenario on your own cluster and workload, and optionally run it.

rocketsim replay --base conf/scenarios/steady.toml --latency p99.json [--errors codes.json]
    [--up up.csv] [--broker-map 10.0.0.5:5557=broker-a ...] [--baseline-s 0:300] [--name NAME]
    [--out FILE] [--error-code system_busy]
rocketsim replay ... --run [--warehouse DIR] [--run-id ID]   (runs it as rocketsim run does)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rocketsim.arguments import OneLineArgumentParser
from rocketsim.command import options
from rocketsim.errors import RocketSimError
from rocketsim.replay.kinds import ERRORS, LATENCY, RESPONSE_CODES, UP

if TYPE_CHECKING:
    from rocketsim.replay.timeline import Replay

EXAMPLES = (
    "rocketsim replay --base conf/scenarios/steady.toml --latency p99.json --errors codes.json \\\n"
    "      --broker-map 10.0.0.5:10911=broker-a --baseline-s 0:300 --out incident.toml",
    "rocketsim replay --base conf/scenarios/steady.toml --latency grafana-p99.csv --run --run-id incident-1",
)
# runs a job that needs Spark (the pipeline, for --run) and returns its exit code
SparkRunner = Callable[[Callable[[], int]], int]


def parse(
    argv: Sequence[str] | None,
    prog: str = "jobs/replay.py",
    epilog: str | None = None,
    more_usage: Sequence[str] = (),
) -> argparse.Namespace:
    p = OneLineArgumentParser(
        prog=prog, description=__doc__.splitlines()[0], epilog=epilog, more_usage=more_usage
    )
    p.add_argument("--base", required=True, help="the scenario whose cluster, producers and workload to use")
    for kind, what in (
        (LATENCY, "per-broker send latency: a quantile (ms), or histogram buckets by le"),
        (ERRORS, "per-broker requests by response_code (rates), or an error ratio (see --error-code)"),
        (UP, "per-broker up (1 running, 0 down)"),
    ):
        p.add_argument(f"--{kind}", action="append", default=[], metavar="FILE", help=f"{what} (repeatable)")
    p.add_argument(
        "--broker-map",
        action="append",
        default=[],
        metavar="SERIES=BROKER",
        help="the scenario broker of a series' broker label (repeatable)",
    )
    p.add_argument(
        "--baseline-s",
        default="",
        metavar="START:END",
        help="the quiet period, seconds from the first sample (default: the whole span)",
    )
    p.add_argument(
        "--error-code",
        default="system_busy",
        choices=sorted(set(RESPONSE_CODES.values())),
        help="the error an error-ratio series counts (system_busy)",
    )
    p.add_argument("--name", default="", help="the scenario's name (default <base name>-replay)")
    p.add_argument("--out", default="", help="the scenario file to write (default <name>.toml)")
    p.add_argument(
        "--run", action="store_true", help="run the scenario (the pipeline: every table in one pass)"
    )
    p.add_argument("--warehouse", default="warehouse", help="with --run: the warehouse (./warehouse)")
    p.add_argument("--run-id", default="", help="with --run: the run id (default <name>-s<seed>)")
    ns = p.parse_args(argv)
    if not (ns.latency or ns.errors or ns.up):
        p.error("give at least one of --latency, --errors, --up")
    try:
        ns.mapping = dict(_pair(item, "=", "--broker-map") for item in ns.broker_map)
        ns.baseline = None
        if ns.baseline_s:
            start, end = (float(x) for x in _pair(ns.baseline_s, ":", "--baseline-s"))
            if not 0 <= start < end:
                raise ValueError(
                    f"--baseline-s must be START:END with 0 <= START < END, got {ns.baseline_s!r}"
                )
            ns.baseline = (start, end)
    except ValueError as exc:
        p.error(str(exc))
    return ns


def _pair(text: str, sep: str, option: str) -> tuple[str, str]:
    left, found, right = text.partition(sep)
    if not found or not left.strip() or not right.strip():
        raise ValueError(f"{option} must look like A{sep}B, got {text!r}")
    return left.strip(), right.strip()


def _report(result: Replay, out: Path) -> None:
    print(f"incident: {result.windows} windows of 10 s; the series' resolution {result.resolution_s:g} s")
    for f in result.faults:
        print(f"  fault  {f.describe()}")
    for line in result.left_out:
        print(f"  left out: {line}")
    for line in result.notes:
        print(f"  note: {line}")
    print(f"scenario: {out}")


def main(
    argv: Sequence[str] | None = None,
    prog: str = "jobs/replay.py",
    epilog: str | None = None,
    on_spark: SparkRunner | None = None,
    more_usage: Sequence[str] = (),
) -> int:
    """The incident's scenario written (and run with --run: by ``on_spark``, default in this process as
    spark-submit started it); returns the exit code. ``more_usage``: the end of the usage line (the
    command's spark-submit options)."""
    ns = parse(argv, prog, epilog, more_usage)
    # the series' readers (pandas), the algorithm (scipy) and the scenarios: once the command line parsed
    from rocketsim.replay.scenario_text import replay_text
    from rocketsim.replay.series import read_series
    from rocketsim.replay.timeline import WINDOW_S, replay
    from rocketsim.scenario import load_scenario

    try:
        base = load_scenario(ns.base)
        series = [
            s
            for kind in (LATENCY, ERRORS, UP)
            for path in getattr(ns, kind)
            for s in read_series(Path(path).read_text(encoding="utf-8"), path, kind)
        ]
        result = replay(
            series,
            base.cluster.brokers,
            broker_map=ns.mapping,
            baseline_s=ns.baseline,
            error_code=ns.error_code,
            closed_loop=base.coupling != "open",
        )
        name = ns.name or f"{base.name}-replay"
        files = [str(p) for k in (LATENCY, ERRORS, UP) for p in getattr(ns, k)]
        header = [
            f"{name}: the incident of {', '.join(files)}",
            f"replayed on {ns.base} (rocketsim replay); left to the model: {len(result.left_out)} item(s)",
            *(f"  left out: {line}" for line in result.left_out),
        ]
        text, _ = replay_text(base.source_text, name, header, result.faults, result.windows * WINDOW_S)
        out = Path(ns.out or f"{name}.toml")
        out.write_text(text, encoding="utf-8")
    except (RocketSimError, OSError, UnicodeDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _report(result, out)
    if not ns.run:
        return 0
    return _run(out, ns, on_spark or (lambda job: job()))


def _run(scenario: Path, ns: argparse.Namespace, on_spark: SparkRunner) -> int:
    """The written scenario through the pipeline job (jobs/pipeline.py's own steps)."""
    from rocketsim.command.jobs import ALL, run_stage_job  # Spark only for --run
    from rocketsim.spark.cli import scenario_job_args

    args, sc = scenario_job_args(str(scenario), ns.warehouse, ns.run_id)
    return on_spark(lambda: run_stage_job(ALL, args, sc))


def command(argv: Sequence[str], prog: str) -> int:
    """``rocketsim replay``: :func:`main`, with spark-submit's options for --run (the pipeline in this
    process, as ``rocketsim run`` runs it) and examples in its help."""
    ns, rest = options.split(argv, prog)
    epilog = options.help_text(prog, EXAMPLES)
    return main(rest, prog, epilog, lambda job: options.run_on_spark(ns, "pipeline", job), options.usage())
