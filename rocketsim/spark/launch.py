"""A job's life around its Spark work, the same for every job that writes a run (``jobs/pipeline.py``,
``generate.py``, ``simulate.py``, ``broker_side.py``, ``summarize.py``, ``compare.py``).

After its command line and scenario were checked (:mod:`rocketsim.spark.cli`: exit 2 and one line):

1. the job claims its run id in the warehouse (:mod:`rocketsim.warehouse.claims`): a second job on a
   run id being written fails here, naming the first (when it started, its host and pid), exit 2;
2. a job that reads a run's tables checks they are there, complete (exit 2 and one line saying which
   is missing: e.g. ``jobs/summarize.py`` on a run id with no data);
3. Spark starts and the job runs; the claim is released however the job ends;
4. an error after Spark started ends the job with exit 1 and one line on stderr saying what happened
   and what the user can do (a full disk, a damaged Delta log, a missing file, a run that does not
   reconcile, ...), with no trace; an error it does not know prints the same kind of line, then the
   trace (a bug to report). Nothing the job wrote is visible then (:mod:`rocketsim.warehouse.run_commit`).
"""

from __future__ import annotations

import errno
import re
import sys
import traceback
from collections.abc import Callable, Sequence

from deltalake.exceptions import DeltaError
from pyspark.sql import SparkSession

from rocketsim.spark.cli import CapacityArgs, CompareArgs, JobArgs
from rocketsim.spark.session import build_session
from rocketsim.tables.reconcile import ReconciliationError
from rocketsim.warehouse.claims import ClaimError, claimed
from rocketsim.warehouse.delta import DamagedTableError
from rocketsim.warehouse.paths import DeltaSinkError
from rocketsim.warehouse.read import MissingRunError, require_run

EXIT_REFUSED = 2  # before Spark: bad input, a run id another job writes, missing input tables
EXIT_FAILED = 1  # after Spark started
_MAX_DETAIL = 300


def run_job(
    job: str,
    args: JobArgs | CompareArgs | CapacityArgs,
    body: Callable[[SparkSession], object],
    *,
    reads: Sequence[str] = (),
) -> int:
    """Claim ``args.run_id``, check the run's tables ``reads`` are there, start Spark, run
    ``body(spark)``; returns the exit code (module docstring)."""
    started = False
    try:
        with claimed(args.warehouse, args.run_id, f"jobs/{job}.py"):
            for table in reads:
                require_run(args.warehouse, table, args.run_id)
            spark = build_session(app_name=f"rocketsim-{job}-{args.run_id}")
            started = True
            try:
                body(spark)
            finally:
                spark.stop()
    except (ClaimError, MissingRunError) as exc:
        if started:
            return _failed(exc, args)
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except Exception as exc:  # noqa: BLE001 - every failure ends with one line
        return _failed(exc, args)
    return 0


def _failed(exc: BaseException, args: JobArgs | CompareArgs | CapacityArgs) -> int:
    line, known = describe_failure(exc, args.warehouse, args.run_id)
    print(line, file=sys.stderr, flush=True)
    if not known:
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
    error the jobs know (else the caller prints the trace too)."""
    chain = _chain(exc)
    text = "\n".join(str(e) for e in chain)  # a Spark task's error carries its Python trace as text
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
        if isinstance(e, ClaimError | DeltaSinkError):
            return f"{type(e).__name__}: {e}", True
        if isinstance(e, DamagedTableError):
            return (
                f"error: {_detail(e)}: restore that table's _delta_log from a backup, or move the table "
                f"away (the other tables are unaffected); {nothing}",
                True,
            )
    if any(isinstance(e, DeltaError) for e in chain) or "_delta_log" in text:
        return (
            f"error: a Delta table in {warehouse} cannot be read or written ({_detail(exc)}): if a "
            "table's _delta_log was damaged, restore it from a backup or move that table away "
            f"(the other tables are unaffected); {nothing}",
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
