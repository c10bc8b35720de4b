"""The ``rocketsim`` command: one entry point for what users do, ``rocketsim COMMAND [options]``.

Each command runs the same job function, with the same options and checks, as its ``jobs/*.py`` file
(which ``./spark-submit.sh`` and the docs use): bad input is one line on stderr and exit code 2 before
anything starts; a failure once Spark started is one line on stderr and exit code 1, Spark's own logging
in the log file the line names (``build/logs/spark-<job>-*.log``). Commands that need Spark run with this
process as the driver, started as ``./spark-submit.sh`` starts one (:mod:`rocketsim.spark.submit`), and
show their progress on stderr (:mod:`rocketsim.spark.progress`).

A command's module is imported only when it runs (``--help`` and the commands without Spark never import
pyspark). ``python -m rocketsim`` is the same command.
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from rocketsim import __version__


@dataclass(frozen=True)
class Command:
    name: str
    group: str
    summary: str
    target: str  # "module:function", called with (argv, prog=...)


SIMULATE = "Simulate (on Spark)"
FIT = "Fit the model to your brokers (no Spark)"
RESULTS = "Look at results (no Spark)"
HOUSEKEEPING = "Look after a warehouse (no Spark)"
COMMANDS = (
    Command(
        "run",
        SIMULATE,
        "run a scenario: every table of a run in one pass (or one stage of it: --stage)",
        "rocketsim.command.spark_jobs:run",
    ),
    Command(
        "compare",
        SIMULATE,
        "variants of one scenario on the same messages and fault timeline",
        "rocketsim.command.spark_jobs:compare",
    ),
    Command(
        "capacity",
        SIMULATE,
        "the smallest cluster that meets a p99 target (and a failure bound)",
        "rocketsim.command.spark_jobs:capacity",
    ),
    Command(
        "replay",
        SIMULATE,
        "an incident's metrics as a fault timeline on your scenario (--run runs it)",
        "rocketsim.command.replay:command",
    ),
    Command(
        "calibrate",
        FIT,
        "fit the broker model from your measurements: a scenario fragment and a fit report",
        "rocketsim.command.calibrate:command",
    ),
    Command(
        "validate",
        FIT,
        "the model against runs of a real broker: calibrate from some, simulate and compare the others",
        "rocketsim.command.validate_options:command",
    ),
    Command(
        "report",
        RESULTS,
        "a self-contained HTML page of a run: its summary tables and charts",
        "rocketsim.command.report:command",
    ),
    Command(
        "export",
        RESULTS,
        "a run in another tool's format: export omb (OpenMessaging Benchmark result files)",
        "rocketsim.command.export:main",
    ),
    Command(
        "vacuum",
        HOUSEKEEPING,
        "remove what killed jobs left in a warehouse (only what is provably garbage)",
        "rocketsim.command.vacuum:command",
    ),
)
BY_NAME = {c.name: c for c in COMMANDS}
EXAMPLES = (
    "rocketsim run --scenario conf/scenarios/steady.toml",
    "rocketsim compare --scenario conf/scenarios/brownout.toml \\",
    "    --variant fault_off:producers.send_latency_fault_enable=false \\",
    "    --variant fault_on:producers.send_latency_fault_enable=true",
    "rocketsim report",
    "rocketsim run --master spark://spark-master:7077 --scenario conf/scenarios/brownout.toml \\",
    "    --warehouse /shared/warehouse",
)


def overview() -> str:
    """``rocketsim --help``: the commands grouped by what users do, and examples."""
    lines = [
        "usage: rocketsim COMMAND [options]      (rocketsim COMMAND --help: its options and examples)",
        "",
        "Simulate Apache RocketMQ producer sends at scale: scenarios in, Delta tables out.",
    ]
    for group in dict.fromkeys(c.group for c in COMMANDS):
        lines += ["", f"{group}:"]
        lines += [f"  {c.name:<11}{c.summary}" for c in COMMANDS if c.group == group]
    lines += ["", "examples:", *(f"  {e}" for e in EXAMPLES)]
    lines += ["", "Bad input: one line on stderr, exit code 2, nothing written. The docs: docs/README.md."]
    return "\n".join(lines)


def _refuse(message: str) -> int:
    print(f"rocketsim: error: {message} (see rocketsim --help)", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: ``COMMAND [options]``; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        return _refuse(f"name a command: {', '.join(BY_NAME)}")
    name, rest = argv[0], argv[1:]
    if name in ("-h", "--help", "help"):
        print(overview())
        return 0
    if name == "--version":
        print(f"rocketsim {__version__}")
        return 0
    command = BY_NAME.get(name)
    if command is None:
        close = difflib.get_close_matches(name, list(BY_NAME), n=1)
        hint = f"; did you mean {close[0]}?" if close else f": one of {', '.join(BY_NAME)}"
        return _refuse(f"unknown command {name!r}{hint}")
    _numba_cache_default()
    module, _, function = command.target.partition(":")
    return getattr(importlib.import_module(module), function)(rest, prog=f"rocketsim {name}")


def _numba_cache_default() -> None:
    """numba's cache of the compiled engine where spark-submit.sh and the Makefile keep it (read when numba
    is first imported, so before the command's modules are)."""
    from rocketsim.spark.submit import project_root

    os.environ.setdefault("NUMBA_CACHE_DIR", str(project_root() / "build" / "numba-cache"))


def entry() -> None:
    """The console script (``[project.scripts]``)."""
    sys.exit(main())
