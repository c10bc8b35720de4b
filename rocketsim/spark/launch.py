"""A job's life around its Spark work, the same for every job that writes a run (``jobs/pipeline.py``,
``generate.py``, ``simulate.py``, ``broker_side.py``, ``summarize.py``, ``compare.py``, ``capacity.py``).

After its command line and scenario were checked (:mod:`rocketsim.spark.cli`: exit 2 and one line):

More: docs/reference/modules.md, rocketsim/spark/launch.py.
"""

from __future__ import annotations

import errno
import os
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from deltalake.exceptions import DeltaError

from rocketsim.errors import RocketSimError
from rocketsim.spark import progress
from rocketsim.spark.cli import CapacityArgs, CompareArgs, JobArgs
from rocketsim.spark.submit import ERROR_FILE_ENV, SPARK_LOG_ENV
from rocketsim.warehouse.claims import ClaimError, claimed, warehouse_exists
from rocketsim.warehouse.delta import DamagedTableError
from rocketsim.warehouse.paths import DeltaSinkError
from rocketsim.warehouse.read import DamagedRunError, MissingRunError, require_run

if TYPE_CHECKING:
    from rocketsim.spark.session import Spark

EXIT_REFUSED = 2  # before Spark: bad input, a run id another job writes, missing or damaged input tables
EXIT_FAILED = 1  # after Spark started
# ERROR_FILE_ENV: set by spark-submit.sh, where the one line goes; SPARK_LOG_ENV: set by spark-submit.sh
# and the rocketsim command, the file Spark's logging goes to (rocketsim/spark/submit.py)
_MAX_DETAIL = 300
# What stops a job before Spark starts with one line and EXIT_REFUSED: nothing was written.
_REFUSALS = (ClaimError, MissingRunError, DamagedRunError, DamagedTableError)


class PublishedRunError(RocketSimError):
    """A failure after the job's run-level commit: the run is published, whole; what failed came after
    (e.g. the capacity chart)."""


def run_job(
    job: str,
    args: JobArgs | CompareArgs | CapacityArgs,
    body: Callable[[Spark], object],
    *,
    reads: Sequence[str] = (),
) -> int:
    """Claim ``args.run_id``, check the run's tables ``reads`` are there, start Spark, run
    ``body(spark)``; returns the exit code (module docstring)."""
    started = False
    try:
        if reads and not warehouse_exists(args.warehouse):  # refused before the claim makes its folder
            require_run(args.warehouse, reads[0], args.run_id)
        with claimed(args.warehouse, args.run_id, f"jobs/{job}.py"):
            for table in reads:
                require_run(args.warehouse, table, args.run_id)
            spark = start_spark(app_name=f"rocketsim-{job}-{args.run_id}")
            started = True
            try:
                with progress.reporting(spark, f"{job} {args.run_id}", enabled=not args.quiet):
                    body(spark)
            finally:
                spark.stop()
    except _REFUSALS as exc:
        if started:
            return _failed(exc, args)
        say_error(f"{type(exc).__name__}: {exc}")
        return EXIT_REFUSED
    except Exception as exc:  # noqa: BLE001 - every failure ends with one line
        return _failed(exc, args)
    return 0


def start_spark(app_name: str) -> Spark:
    """:func:`rocketsim.spark.session.start_spark`, imported here once nothing refused the job: a refusal
    never imports pyspark."""
    from rocketsim.spark.session import start_spark as start

    return start(app_name=app_name)


def say_error(line: str) -> None:
    """The job's one error line: on stderr, or into the file spark-submit.sh prints on stderr."""
    target = os.environ.get(ERROR_FILE_ENV)
    if target:
        try:
            with open(target, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")
            return
        except OSError:
            pass  # then stderr, as without spark-submit.sh
    print(line, file=sys.stderr, flush=True)


def _failed(exc: BaseException, args: JobArgs | CompareArgs | CapacityArgs) -> int:
    line, known = describe_failure(exc, args.warehouse, args.run_id)
    log = os.environ.get(SPARK_LOG_ENV)
    if not known and log:
        try:
            with open(log, "a", encoding="utf-8") as handle:
                traceback.print_exception(exc, file=handle)
            line += f" (its trace is in Spark's log {log})"
        except OSError:
            log = None
    elif log:
        line += f" (Spark's log: {log})"
    say_error(line)
    if not known and not log:
        traceback.print_exception(exc, file=sys.stderr)
    return EXIT_FAILED


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    while exc is not None and exc not in out:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


_RAISED = re.compile(r"^\s*(?:[\w.]+\.)?\w*(?:Error|Exception): .+$")


def _detail(exc: BaseException) -> str:
    """What an error says in one line, shortened: of a Spark task's error (whose text is the task's
    trace), the last ``SomeError: ...`` line; else the first line."""
    lines = str(exc).strip().splitlines()
    raised = [line.strip() for line in lines[1:] if _RAISED.match(line)]
    first = raised[-1] if raised else (lines[0] if lines else type(exc).__name__)
    return first if len(first) <= _MAX_DETAIL else first[: _MAX_DETAIL - 3] + "..."


def describe_failure(exc: BaseException, warehouse: str, run_id: str) -> tuple[str, bool]:
    """One line for an error after Spark started: what happened and what to do; and whether it is an
    error the jobs know (else the caller reports the trace too). The advice never costs data: no table
    is to be moved away or deleted."""
    from rocketsim.tables.reconcile import ReconciliationError  # the engine's modules: loaded by now

    chain = _chain(exc)
    text = "\n".join(str(e) for e in chain)  # a Spark task's error carries its Python trace as text
    published = next((e for e in chain if isinstance(e, PublishedRunError)), None)
    if published is not None:
        return f"error: {published} (run {run_id} is published, whole)", True
    nothing = f"nothing of this job is visible in run {run_id}"
    if any(isinstance(e, OSError) and e.errno == errno.ENOSPC for e in chain) or "No space left" in text:
        return (
            f"error: the disk is full (No space left on device) while writing run {run_id} to {warehouse}: "
            f"free some space and run the job again ({nothing}; jobs/vacuum.py deletes what it left)",
            True,
        )
    for e in chain:
        if isinstance(e, ReconciliationError):
            return f"ReconciliationError: {e} ({nothing}: its tables are as they were)", True
        if isinstance(e, MissingRunError):
            return f"MissingRunError: {e} (run the job that writes it first)", True
        if isinstance(e, ClaimError | DeltaSinkError | DamagedRunError):
            return f"{type(e).__name__}: {e} ({nothing})", True
        if isinstance(e, DamagedTableError):
            return f"error: {_detail(e)}: {_RESTORE}; {nothing}", True
    if any(isinstance(e, DeltaError) for e in chain) or "_delta_log" in text:
        return (
            f"error: a Delta table in {warehouse} cannot be read or written ({_detail(exc)}): {_RESTORE}; "
            f"{nothing}",
            True,
        )
    missing = ("FileNotFoundException", "FileNotFoundError", "No such file or directory")
    if any(isinstance(e, FileNotFoundError) for e in chain) or any(m in text for m in missing):
        return (
            f"error: a file the job needs is missing ({_detail(exc)}): a table's data files were deleted "
            f"or moved outside rocketsim; restore them or rerun the job that wrote the run ({nothing})",
            True,
        )
    return f"error: the job failed with {type(exc).__name__}: {_detail(exc)} ({nothing})", False


# What to do about a damaged Delta log. Not "move the table away": a warehouse without its run_commits
# looks, to a vacuum, like one whose every write is unpublished (jobs/vacuum.py now refuses it).
_RESTORE = (
    "restore that table's _delta_log from a backup (jobs/vacuum.py leaves a damaged table alone, and "
    "refuses a warehouse whose run_commits is damaged)"
)
