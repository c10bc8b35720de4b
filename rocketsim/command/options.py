"""The options the ``rocketsim`` command adds to a job's own: spark-submit's (``--master``, ``--conf``,
...: what ``./spark-submit.sh`` takes before the job file) and, for ``rocketsim run``, ``--stage``. They
are taken off the command line first; the rest is the job's, parsed and checked by the job's own parser
(:mod:`rocketsim.spark.cli`), whose ``--help`` lists these too (:func:`help_text`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rocketsim.arguments import OneLineArgumentParser, examples_text
from rocketsim.spark.progress import PROGRESS_ENV
from rocketsim.spark.submit import SparkOptions, java_problem, parse_spark_options, run_as_driver

SPARK_TITLE = "Spark (passed to spark-submit, as ./spark-submit.sh takes them before the job file)"
SPARK_USAGE = "[SPARK OPTIONS]"  # in a usage line: the options listed under SPARK_TITLE
SPARK_OPTIONS = (  # (option, metavar, help); anything else: --conf
    ("--master", "URL", "where to run: local[*] (the default), spark://HOST:7077, yarn, k8s://..."),
    ("--conf", "KEY=VALUE", "any Spark property, e.g. spark.executor.memory=4g (repeatable)"),
    ("--properties-file", "FILE", "Spark's defaults (default conf/spark-defaults.conf)"),
    ("--driver-memory", "MEM", "the driver's heap (this process's JVM), e.g. 4g"),
    ("--executor-memory", "MEM", "each executor's heap, e.g. 4g"),
    ("--executor-cores", "N", "cores per executor"),
    ("--total-executor-cores", "N", "standalone: cores for the job in all"),
    ("--num-executors", "N", "YARN, Kubernetes: executors to start"),
    ("--jars", "JARS", "jars for the driver and executors, comma-separated (e.g. delta-spark's)"),
    ("--packages", "COORDS", "Maven coordinates of jars to fetch"),
    ("--py-files", "FILES", "more Python files for the executors (the package is shipped anyway)"),
    ("--files", "FILES", "files for the executors' working folders"),
)


@dataclass(frozen=True)
class Extra:
    """An option of the command's own, e.g. ``--stage`` (its group's title, then argparse's keywords)."""

    title: str
    flag: str
    kwargs: dict[str, object]
    description: str | None = None  # shown under the group's title


def _parser(prog: str, extras: Sequence[Extra]) -> argparse.ArgumentParser:
    p = OneLineArgumentParser(
        prog=prog,
        add_help=False,
        allow_abbrev=False,
        usage=argparse.SUPPRESS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for extra in extras:
        group = p.add_argument_group(extra.title, extra.description)
        group.add_argument(extra.flag, **extra.kwargs)  # type: ignore[arg-type]
    spark = p.add_argument_group(SPARK_TITLE)
    for option, metavar, text in SPARK_OPTIONS:
        action = "append" if option == "--conf" else "store"
        spark.add_argument(option, metavar=metavar, action=action, help=text)
    return p


def usage(extras: Sequence[Extra] = ()) -> tuple[str, ...]:
    """What the usage line of a command that runs on Spark ends with, after its job's options: its own
    (``[--stage STAGE]``) and spark-submit's, which its help lists under :data:`SPARK_TITLE`."""
    own = tuple(f"[{e.flag} {e.kwargs.get('metavar', e.flag.lstrip('-').upper())}]" for e in extras)
    return (*own, SPARK_USAGE)


def help_text(prog: str, examples: Sequence[str], extras: Sequence[Extra] = ()) -> str:
    """The part of a Spark job's ``--help`` after its own options: these options, then examples."""
    listed = _parser(prog, extras).format_help().strip("\n")
    return f"{listed}\n\n{examples_text(examples)}"


def split(
    argv: Sequence[str], prog: str, extras: Sequence[Extra] = ()
) -> tuple[argparse.Namespace, list[str]]:
    """The command's options taken off ``argv`` (a bad one: one line, exit 2); (them, the job's)."""
    return _parser(prog, extras).parse_known_args(list(argv))


def spark_options(ns: argparse.Namespace) -> SparkOptions:
    """The spark-submit options given, as :mod:`rocketsim.spark.submit` reads them."""
    words: list[str] = []
    for option, _, _ in SPARK_OPTIONS:
        value = getattr(ns, option.lstrip("-").replace("-", "_"))
        for v in value if isinstance(value, list) else [] if value is None else [value]:
            words += [option, v]
    opts, _ = parse_spark_options(words)
    return opts


def run_on_spark(ns: argparse.Namespace, job: str, body: Callable[[], int]) -> int:
    """``body()`` (the job) with this process as its Spark driver, as ``./spark-submit.sh`` would start it
    (:func:`rocketsim.spark.submit.run_as_driver`), the progress line on; returns the exit code (Java
    missing: one line, exit 1, as the script)."""
    problem = java_problem()
    if problem:
        print(problem, file=sys.stderr)
        return 1
    progress = {PROGRESS_ENV: os.environ.get(PROGRESS_ENV, "1")}
    return run_as_driver(spark_options(ns), job, body, progress)
