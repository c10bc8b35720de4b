"""Read the per-thread runs of the real harness (``NAME.summary.json`` and ``NAME.meta.json`` in one folder,
``tests/data/realbroker-reruns/threads/runs``) for :mod:`rocketsim.calibration.wakeups`,
:mod:`rocketsim.calibration.other_threads` and :mod:`rocketsim.calibration.thread_split`; the parsing is the
core's, the files are read here."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rocketsim.calibration.other_threads import other_threads_share
from rocketsim.calibration.thread_split import ThreadSplit, thread_split
from rocketsim.calibration.wakeups import ThreadRun, parse_thread_run
from rocketsim.warehouse.calibration_inputs import read_text

THREAD_RUNS = (
    Path(__file__).resolve().parents[2] / "tests" / "data" / "realbroker-reruns" / "threads" / "runs"
)
LOAD_RUNS = ("lo_20000", "r40_40000", "r50_50000", "st_60000", "ov_72000")  # 20,000-72,000 sends/s
OTHER_THREADS_RUN = "r40_40000"  # 40,000 sends/s, none failed: the host kept up


def read_thread_runs(folder: str | Path = THREAD_RUNS, names: Sequence[str] = LOAD_RUNS) -> list[ThreadRun]:
    """The runs ``names`` of ``folder``; a missing or bad file raises ``MeasurementError`` naming it."""
    out = []
    for name in names:
        summary = str(Path(folder) / f"{name}.summary.json")
        meta = str(Path(folder) / f"{name}.meta.json")
        out.append(parse_thread_run(name, read_text(summary), read_text(meta), summary))
    return out


def read_other_threads_share(folder: str | Path = THREAD_RUNS, name: str = OTHER_THREADS_RUN) -> float:
    """The share of the host's CPU a send the threads the model has nowhere else take in the run ``name``
    (:func:`rocketsim.calibration.other_threads.other_threads_share`)."""
    summary = str(Path(folder) / f"{name}.summary.json")
    return other_threads_share(read_text(summary), summary)


def read_thread_split(folder: str | Path = THREAD_RUNS, name: str = OTHER_THREADS_RUN) -> ThreadSplit:
    """The threads of the run ``name`` as the model's keys (:func:`rocketsim.calibration.thread_split.
    thread_split`)."""
    summary = str(Path(folder) / f"{name}.summary.json")
    return thread_split(read_text(summary), summary)
