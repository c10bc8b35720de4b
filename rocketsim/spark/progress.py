"""A long job's progress on stderr, for the ``rocketsim`` command: what the driver's Spark work is (named by
:func:`step`: "producer tasks, 1,000,000 messages"), how far it is (the tasks done of the active stages,
from Spark's status tracker) and the time since Spark started.

On a terminal it is ONE line, redrawn in place twice a second and wiped before anything else is printed
and when the job ends; elsewhere (a log file, CI) a plain line now and then, every
``ROCKETSIM_PROGRESS_EVERY_S`` seconds (30 by default; the first after as long, so a short job prints
none and a failure stays one line). Off unless ``ROCKETSIM_PROGRESS`` is set (the command sets it;
through spark-submit.sh the driver's stderr is no terminal and reaches the JVM's stdout).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TextIO

if TYPE_CHECKING:  # the command reads PROGRESS_ENV without starting pyspark
    from rocketsim.spark.session import Spark

PROGRESS_ENV = "ROCKETSIM_PROGRESS"
EVERY_ENV = "ROCKETSIM_PROGRESS_EVERY_S"
PLAIN_EVERY_S = 30.0
REDRAW_S = 0.5
STARTING = "starting"
_CLEAR = "\r\x1b[K"  # back to the line's start, erase to its end


class StatusTracker(Protocol):
    """What is read of :class:`pyspark.status.StatusTracker`."""

    def getActiveStageIds(self) -> list[int]: ...  # noqa: N802 - pyspark's names

    def getStageInfo(self, stageId: int) -> Any: ...  # noqa: N802, N803


class _Step:
    """The driver's Spark work under way, as :func:`step` last named it (one job per process)."""

    what = STARTING


def step(spark: Spark, what: str) -> None:
    """Name the Spark work that follows: in the progress line, and as its description in Spark's UI."""
    from rocketsim.spark.session import context_of  # pyspark: once Spark runs

    context_of(spark).setJobDescription(what)
    _Step.what = what


@dataclass(frozen=True)
class Tasks:
    """The tasks of the active stages."""

    done: int
    total: int
    running: int
    failed: int


def active_tasks(tracker: StatusTracker) -> Tasks | None:
    """The tasks of Spark's active stages (None: none is active, the driver is at work)."""
    infos = [i for s in tracker.getActiveStageIds() if (i := tracker.getStageInfo(s)) is not None]
    if not infos:
        return None
    return Tasks(
        done=sum(i.numCompletedTasks for i in infos),
        total=sum(i.numTasks for i in infos),
        running=sum(i.numActiveTasks for i in infos),
        failed=sum(i.numFailedTasks for i in infos),
    )


def clock(seconds: float) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour)."""
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def describe(title: str, what: str, tasks: Tasks | None, seen_tasks: bool, elapsed_s: float) -> str:
    """The progress line, e.g. ``[0:42] pipeline r1: producer tasks, 300,000 messages: 3/8 tasks done,
    2 running``."""
    if tasks is not None:
        how = f"{tasks.done}/{tasks.total} tasks done"
        how += f", {tasks.running} running" if tasks.running else ""
        how += f", {tasks.failed} failed (Spark retries them)" if tasks.failed else ""
    elif seen_tasks:
        how = "done; the driver is at work"
    else:
        how = "the driver is at work" if what == STARTING else "starting its tasks"
    return f"[{clock(elapsed_s)}] {title}: {what}: {how}"


class Reporter:
    """Renders the progress line on ``stream``: in place on a terminal, else every ``every_s``."""

    def __init__(
        self,
        tracker: StatusTracker,
        title: str,
        stream: TextIO,
        terminal: bool,
        every_s: float = PLAIN_EVERY_S,
        now: Callable[[], float] = time.monotonic,
        width: Callable[[], int] = lambda: shutil.get_terminal_size((100, 24)).columns,
    ) -> None:
        self.tracker, self.title, self.stream, self.terminal = tracker, title, stream, terminal
        self.every_s, self.now, self.width = every_s, now, width
        self.started = now()
        self.next_plain = self.started + every_s
        self.shown = ""  # the line on the terminal now
        self.seen: set[str] = set()  # the steps whose tasks were seen
        self.lock = threading.Lock()

    def line(self) -> str:
        what = _Step.what
        tasks = active_tasks(self.tracker)
        if tasks is not None:
            self.seen.add(what)
        return describe(self.title, what, tasks, what in self.seen, self.now() - self.started)

    def tick(self) -> None:
        """Redraw (terminal), or print a plain line when one is due."""
        text = self.line()
        with self.lock:
            if self.terminal:
                self.shown = text[: max(10, self.width() - 1)]  # one line: never wrapped
                self.stream.write(_CLEAR + self.shown)
            elif self.now() >= self.next_plain:
                self.next_plain = self.now() + self.every_s
                self.stream.write(text + "\n")
            self.stream.flush()

    def wipe(self) -> None:
        """Take the terminal's line away (before other output, and at the end)."""
        with self.lock:
            if self.shown:
                self.stream.write(_CLEAR)
                self.stream.flush()
                self.shown = ""


class _WipingStream:
    """stdout while the line is on the terminal: wipes it before each write (the next tick redraws it)."""

    def __init__(self, inner: TextIO, reporter: Reporter) -> None:
        self._inner, self._reporter = inner, reporter

    def write(self, text: str) -> int:
        self._reporter.wipe()
        return self._inner.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def wanted() -> bool:
    return os.environ.get(PROGRESS_ENV, "0") not in ("", "0")


def _every_s() -> float:
    try:
        every = float(os.environ.get(EVERY_ENV, PLAIN_EVERY_S))
    except ValueError:
        return PLAIN_EVERY_S
    return every if every > 0 else PLAIN_EVERY_S


@contextlib.contextmanager
def reporting(spark: Spark, title: str, enabled: bool = True) -> Iterator[None]:
    """The job's progress on stderr while the block runs (module docstring), if :func:`wanted`."""
    if not (enabled and wanted()):
        yield
        return
    stream = sys.stderr
    terminal = stream.isatty() and os.environ.get("TERM", "") != "dumb"
    _Step.what = STARTING
    from rocketsim.spark.session import context_of  # pyspark: once Spark runs

    reporter = Reporter(context_of(spark).statusTracker(), title, stream, terminal, _every_s())
    done = threading.Event()

    def loop() -> None:
        while not done.wait(REDRAW_S if terminal else min(1.0, reporter.every_s)):
            with contextlib.suppress(Exception):  # Spark stopping under the tracker: the next tick
                reporter.tick()

    thread = threading.Thread(target=loop, name="rocketsim-progress", daemon=True)
    stdout = sys.stdout
    if terminal:
        sys.stdout = _WipingStream(stdout, reporter)  # type: ignore[assignment]
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        sys.stdout = stdout
        reporter.wipe()
