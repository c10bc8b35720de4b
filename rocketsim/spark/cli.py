"""The jobs' command line, declared once: the options every job shares, and the two parsers built on them
(a run's jobs: ``jobs/pipeline.py``, ``generate.py``, ``simulate.py``, ``broker_side.py``,
``summarize.py``; a comparison: ``jobs/compare.py``).

Everything is parsed and validated before Spark starts: a bad option, scenario or variant exits with
code 2 and one line on stderr naming the key, the rule and the value (``ScenarioError: ...``, or
argparse's usage error on one line). Nothing here starts Spark; the jobs call ``build_session`` after.
"""

from __future__ import annotations

import argparse
import os
import sys
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rocketsim.arguments import OneLineArgumentParser
from rocketsim.scenario import (
    JAVA_INT_MAX,
    Scenario,
    ScenarioError,
    capacity,
    check_window,
    effective,
    load_scenario,
    span,
)
from rocketsim.scenario.variants import Variant, build_scenarios, combine, parse_variants, sweep_variants
from rocketsim.stage.graph import ALL, RUN_TABLES, selected_tables
from rocketsim.warehouse.paths import unwritable

MAX_RUN_ID = 200
T = typing.TypeVar("T")


@dataclass(frozen=True)
class JobArgs:
    """The command line of a run's jobs."""

    scenario_path: str
    warehouse: str = "warehouse"
    run_id: str = ""
    overrides: tuple[str, ...] = ()
    partitions: int = 0  # 0: Spark's default parallelism
    window_ms: int = 10_000
    quiet: bool = False
    extra: dict[str, str] = field(default_factory=dict)
    tables: tuple[str, ...] = RUN_TABLES  # what a whole run writes (--tables: selected_tables)


@dataclass(frozen=True)
class CompareArgs:
    """The command line of ``jobs/compare.py``."""

    scenario_path: str
    variants: tuple[Variant, ...]
    baseline: str
    warehouse: str = "warehouse"
    run_id: str = ""
    overrides: tuple[str, ...] = ()
    partitions: int = 0  # 0: Spark's default parallelism
    window_ms: int = 10_000
    quiet: bool = False


@dataclass(frozen=True)
class CapacityArgs:
    """The command line of ``jobs/capacity.py``."""

    scenario_path: str
    variants: tuple[Variant, ...]
    target_p99_ms: float
    max_failure_rate: float
    chart: str
    warehouse: str = "warehouse"
    run_id: str = ""
    overrides: tuple[str, ...] = ()
    partitions: int = 0
    window_ms: int = 10_000
    quiet: bool = False


def shared_parser(
    prog: str,
    description: str | None,
    *,
    run_id_help: str,
    set_help: str,
    window_help: str,
    quiet_help: str,
    epilog: str | None = None,
    more_usage: Sequence[str] = (),
) -> OneLineArgumentParser:
    """A parser with the options every job shares: --scenario, --warehouse, --run-id, --set,
    --partitions, --window-ms, --quiet (``epilog``: what the help shows after them; ``more_usage``: what
    its usage line ends with, the options a command takes off before it parses, e.g. spark-submit's)."""
    p = OneLineArgumentParser(prog=prog, description=description, epilog=epilog, more_usage=more_usage)
    p.add_argument("--scenario", required=True, help="scenario TOML file, e.g. conf/scenarios/steady.toml")
    p.add_argument(
        "--warehouse", default="warehouse", help="folder of the Delta tables (default ./warehouse)"
    )
    p.add_argument("--run-id", default="", help=run_id_help)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=set_help)
    p.add_argument(
        "--partitions",
        type=int,
        default=None,
        help="tasks the producers are spread over (default: Spark's default parallelism)",
    )
    p.add_argument("--window-ms", type=int, default=10_000, help=window_help)
    p.add_argument("--quiet", action="store_true", help=quiet_help)
    p.add_argument(
        "--check",
        action="store_true",
        help="print the effective scenario (every default filled in, each value's source: the file, "
        "--set or the default), its span and faults, and exit without starting Spark",
    )
    p.add_argument(
        "--allow-late-faults",
        action="store_true",
        help="run even when a fault starts after the simulated span ends (it changes nothing; refused "
        "otherwise)",
    )
    p.add_argument(
        "--allow-large-backlog",
        action="store_true",
        help="run even when a producer's sync sends would queue more messages than a worker holds "
        "(about 1.5 GiB; refused otherwise)",
    )
    return p


def check_span(ns: argparse.Namespace, sc: Scenario, where: str = "") -> None:
    """A fault that starts after the simulated span ends is refused, unless --allow-late-faults
    (:func:`rocketsim.scenario.span.check_faults_in_span`); so is a producer whose queued sync sends
    would not fit a worker, unless --allow-large-backlog (``span.check_queued_bytes``)."""
    if not ns.allow_late_faults:
        span.check_faults_in_span(sc, where)
    if not ns.allow_large_backlog:
        span.check_queued_bytes(sc)


def exit_if_checked(ns: argparse.Namespace, sc: Scenario, *more: str) -> None:
    """With --check: print the effective scenario (and ``more`` lines), exit 0 before Spark starts."""
    if ns.check:
        print("\n".join([effective.check_text(sc, ns.overrides), *more]))
        raise SystemExit(0)


def check_shared(ns: argparse.Namespace, sc: Scenario) -> None:
    """The rules of the shared options: numbers in range (Spark's partitions are a Java int, the
    window bounded for the scenario's span: :func:`rocketsim.scenario.check_window`), a warehouse
    the job can write (:func:`rocketsim.warehouse.paths.unwritable`)."""
    if ns.partitions is not None and ns.partitions < 1:  # absent: Spark's default parallelism
        raise ScenarioError(f"--partitions must be >= 1, got {ns.partitions}")
    if ns.partitions is not None and ns.partitions > JAVA_INT_MAX:
        raise ScenarioError(f"--partitions must fit a Java int (at most {JAVA_INT_MAX}), got {ns.partitions}")
    check_window(sc, ns.window_ms)
    why = unwritable(ns.warehouse)
    if why is not None:
        raise ScenarioError(f"--warehouse {why}, got {ns.warehouse!r}")


def checked_run_id(given: str, default: str, name: str, what: str) -> str:
    """``--run-id`` or, when not given, ``default`` (made from the scenario's ``name``; it names a
    ``what``), checked: letters, digits, '-', '_' and '.' only (else ``write_run`` would refuse it after
    Spark started), at most 200 characters."""
    allowed = "letters, digits, '-', '_' and '.'"
    if given and not _plain(given):
        raise ScenarioError(f"--run-id may hold only {allowed}, got {given!r}")
    if not given and not _plain(default):
        raise ScenarioError(f"name must hold only {allowed} (it names the {what}), got {name!r}")
    run_id = given or default
    if len(run_id) > MAX_RUN_ID:
        raise ScenarioError(f"the run id must be at most {MAX_RUN_ID} characters, got {run_id!r}")
    return run_id


def _plain(run_id: str) -> bool:
    return all(c.isalnum() or c in "-_." for c in run_id)


def one_line_errors(parse: Callable[[], T]) -> T:
    """``parse()``, with a ScenarioError reported as one line on stderr and exit code 2."""
    try:
        return parse()
    except ScenarioError as exc:
        print(f"ScenarioError: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


TABLES_HELP = (
    "what the run writes: all (every table, the default), summary (only the summary tables and the runs "
    "row: producers fold the simulation without writing messages, attempts, results or the commit log, "
    "and there is no broker side; for long what-ifs and sweeps) or a comma-separated list of summary tables"
)


def parse_job_args(
    argv: list[str] | None,
    prog: str,
    description: str | None,
    epilog: str | None = None,
    *,
    whole_run: bool = False,
    more_usage: Sequence[str] = (),
) -> tuple[JobArgs, Scenario]:
    """Parse and validate a run's job before Spark starts; bad input exits with code 2 and one line.
    ``whole_run``: the job runs every stage (``jobs/pipeline.py``), so it takes ``--tables``."""
    p = shared_parser(
        prog,
        description,
        run_id_help="run id (default: <scenario name>-s<seed>)",
        set_help="override a scenario key by dotted path, e.g. --set workload.messages=200000",
        window_help="window of the summary tables (ms)",
        quiet_help="print only the final summary",
        epilog=epilog,
        more_usage=more_usage,
    )
    if whole_run:
        p.add_argument("--tables", default=ALL, metavar="all|summary|TABLE,...", help=TABLES_HELP)
    ns = p.parse_args(argv)

    def parse() -> tuple[JobArgs, Scenario]:
        tables = _selected(getattr(ns, "tables", ALL))
        sc = load_scenario(ns.scenario, ns.overrides)
        check_shared(ns, sc)
        check_span(ns, sc)
        run_id = checked_run_id(ns.run_id, sc.run_id, sc.name, "run")
        exit_if_checked(ns, sc)
        args = JobArgs(
            ns.scenario,
            ns.warehouse,
            run_id,
            tuple(ns.overrides),
            ns.partitions or 0,
            ns.window_ms,
            ns.quiet,
            tables=tables,
        )
        return args, sc

    return one_line_errors(parse)


def _selected(spec: str) -> tuple[str, ...]:
    """``--tables`` as the tables the run writes (:func:`rocketsim.stage.graph.selected_tables`)."""
    try:
        return selected_tables(spec)
    except ValueError as exc:
        raise ScenarioError(str(exc)) from None


def scenario_job_args(scenario_path: str, warehouse: str, run_id: str = "") -> tuple[JobArgs, Scenario]:
    """A run's arguments for a scenario file another job wrote (``jobs/replay.py --run``), parsed and
    checked as :func:`parse_job_args` checks a command line."""
    argv = ["--scenario", scenario_path, "--warehouse", warehouse, *(["--run-id", run_id] if run_id else [])]
    return parse_job_args(argv, "jobs/pipeline.py", None)


def parse_compare_args(
    argv: list[str] | None,
    prog: str = "jobs/compare.py",
    description: str | None = None,
    epilog: str | None = None,
    more_usage: Sequence[str] = (),
) -> tuple[CompareArgs, Scenario, dict[str, Scenario]]:
    """Parse and validate every variant before Spark starts; bad input exits with code 2 and one line."""
    p = shared_parser(
        prog,
        description,
        run_id_help="comparison id (default: <scenario name>-s<seed>-compare)",
        set_help="override a scenario key for every variant, e.g. --set workload.messages=200000",
        window_help="window of comparison_windows (ms)",
        quiet_help="print only the comparison table",
        epilog=epilog,
        more_usage=more_usage,
    )
    p.add_argument(
        "--variant",
        "--variants",
        dest="variants",
        action="extend",
        nargs="+",
        default=[],
        metavar="NAME[:KEY=VALUE]",
        help="a variant and one of its overrides (repeat NAME for more), e.g. "
        "fault_on:producers.send_latency_fault_enable=true",
    )
    p.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="a grid axis, e.g. --sweep producers.client_version=4.9.7,4.9.8,5.3.3 (repeatable)",
    )
    p.add_argument("--baseline", default="", help="the variant deltas are taken against (default: the first)")
    ns = p.parse_args(argv)

    def parse() -> tuple[CompareArgs, Scenario, dict[str, Scenario]]:
        variants = combine(parse_variants(ns.variants), sweep_variants(ns.sweep))
        base, scenarios = build_scenarios(ns.scenario, ns.overrides, variants)
        names = [v.name for v in variants]
        baseline = ns.baseline or names[0]
        if baseline not in names:
            raise ScenarioError(f"--baseline must name a variant ({', '.join(names)}), got {baseline!r}")
        check_shared(ns, base)
        check_span(ns, base)
        for name, sc in scenarios.items():  # a variant may move its faults
            check_span(ns, sc, f"variant {name}: ")
        run_id = checked_run_id(ns.run_id, f"{base.run_id}-compare", base.name, "comparison")
        exit_if_checked(
            ns,
            base,
            "",
            "# the variants, each the scenario above with its overrides:",
            *(f"#   {v.name}: {v.describe()}" for v in variants),
        )
        args = CompareArgs(
            scenario_path=ns.scenario,
            variants=tuple(variants),
            baseline=baseline,
            warehouse=ns.warehouse,
            run_id=run_id,
            overrides=tuple(ns.overrides),
            partitions=ns.partitions or 0,
            window_ms=ns.window_ms,
            quiet=ns.quiet,
        )
        return args, base, scenarios

    return one_line_errors(parse)


def _sizes(text: str, option: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise ScenarioError(
            f"{option} must be comma-separated integers, e.g. 3,4,5,6, got {text!r}"
        ) from None


def chart_file(chart: str) -> str:
    """The PNG ``--chart`` names: the path itself, ``.png`` added if it has no such suffix."""
    return chart if chart.endswith(".png") else f"{chart}.png"


def check_chart(chart: str) -> None:
    """``--chart`` must name a PNG file the job can write (its folder, or the nearest existing parent of
    one to create, writable), not a folder: checked before Spark, since the chart is written after the
    sweep is published."""
    path = chart_file(chart)
    if not chart.strip() or os.path.isdir(chart) or os.path.isdir(path):
        raise ScenarioError(f"--chart must name a PNG file, not a folder, got {chart!r}")
    why = unwritable(os.path.dirname(os.path.abspath(path)))
    if why is not None:
        raise ScenarioError(f"--chart's folder {why}, got {chart!r}")


def parse_capacity_args(
    argv: list[str] | None,
    prog: str = "jobs/capacity.py",
    description: str | None = None,
    epilog: str | None = None,
    more_usage: Sequence[str] = (),
) -> tuple[CapacityArgs, Scenario, dict[str, Scenario]]:
    """Parse and validate a capacity sweep before Spark starts; bad input exits with code 2 and one line."""
    p = shared_parser(
        prog,
        description,
        run_id_help="sweep id (default: <scenario name>-s<seed>-capacity)",
        set_help="override a scenario key for every cluster size, e.g. --set workload.rate_per_s=600",
        window_help="window of the summaries (ms)",
        quiet_help="print only the answer",
        epilog=epilog,
        more_usage=more_usage,
    )
    axis = p.add_mutually_exclusive_group(required=True)
    axis.add_argument("--brokers", help="the numbers of brokers to try, e.g. 3,4,5,6")
    axis.add_argument("--write-queues", help="the numbers of write queues per broker to try, e.g. 2,4,8")
    p.add_argument("--target-p99-ms", type=float, required=True, help="the send-latency p99 to meet (ms)")
    p.add_argument(
        "--max-failure-rate",
        type=float,
        default=0.001,
        help="the failed share of sends to stay under (0.001)",
    )
    p.add_argument("--chart", default="", help="where to write the chart (PNG; default capacity-<id>.png)")
    ns = p.parse_args(argv)

    def parse() -> tuple[CapacityArgs, Scenario, dict[str, Scenario]]:
        if not ns.target_p99_ms > 0:
            raise ScenarioError(f"--target-p99-ms must be > 0, got {ns.target_p99_ms}")
        if not 0 <= ns.max_failure_rate <= 1:
            raise ScenarioError(f"--max-failure-rate must be in [0, 1], got {ns.max_failure_rate}")
        base = load_scenario(ns.scenario, ns.overrides)
        if ns.brokers is not None:
            variants = capacity.size_variants(base, capacity.BROKERS, _sizes(ns.brokers, "--brokers"))
        else:
            sizes = _sizes(ns.write_queues, "--write-queues")
            variants = capacity.size_variants(base, capacity.QUEUES, sizes)
        base, scenarios = build_scenarios(ns.scenario, ns.overrides, variants)
        check_shared(ns, base)
        check_span(ns, base)
        capacity.check_closed_loop(base)
        run_id = checked_run_id(ns.run_id, f"{base.run_id}-capacity", base.name, "sweep")
        check_chart(ns.chart or f"capacity-{run_id}.png")
        exit_if_checked(
            ns,
            base,
            "",
            "# the sizes, each the scenario above with its override:",
            *(f"#   {v.name}: {v.describe()}" for v in variants),
        )
        args = CapacityArgs(
            scenario_path=ns.scenario,
            variants=tuple(variants),
            target_p99_ms=ns.target_p99_ms,
            max_failure_rate=ns.max_failure_rate,
            chart=ns.chart or f"capacity-{run_id}.png",
            warehouse=ns.warehouse,
            run_id=run_id,
            overrides=tuple(ns.overrides),
            partitions=ns.partitions or 0,
            window_ms=ns.window_ms,
            quiet=ns.quiet,
        )
        return args, base, scenarios

    return one_line_errors(parse)
