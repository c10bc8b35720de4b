"""Read the per-thread runs of the real harness (``NAME.summary.json`` and ``NAME.meta.json`` in one folder,
``tests/data/realbroker-reruns/threads/runs`` in a checkout) for :mod:`rocketsim.calibration.wakeups`,
:mod:`rocketsim.calibration.other_threads` and :mod:`rocketsim.calibration.thread_split`; the parsing is the
core's, the files are read here.

The validation's ``--thread-split`` needs only the split of one run, which the package ships
(``rocketsim/calibration/thread_split.json``, :func:`read_thread_split`) so that an installed wheel runs it
without the checkout's runs; ``python -m rocketsim.warehouse.thread_runs --write`` derives it again from
them (``tests/test_thread_split.py`` fails while the two differ)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from rocketsim.calibration.other_threads import other_threads_share
from rocketsim.calibration.thread_split import ThreadSplit, parse_split_json, split_json, thread_split
from rocketsim.calibration.wakeups import ThreadRun, parse_thread_run
from rocketsim.warehouse.calibration_inputs import read_text, write_text

THREAD_RUNS = (  # a checkout's: not in the package
    Path(__file__).resolve().parents[2] / "tests" / "data" / "realbroker-reruns" / "threads" / "runs"
)
LOAD_RUNS = ("lo_20000", "r40_40000", "r50_50000", "st_60000", "ov_72000")  # 20,000-72,000 sends/s
OTHER_THREADS_RUN = "r40_40000"  # 40,000 sends/s, none failed: the host kept up
SHIPPED_SPLIT = ("rocketsim.calibration", "thread_split.json")  # package data (pyproject.toml)


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


def derive_thread_split(folder: str | Path = THREAD_RUNS, name: str = OTHER_THREADS_RUN) -> ThreadSplit:
    """The threads of the run ``name`` of ``folder`` as the model's keys (:func:`rocketsim.calibration.
    thread_split.thread_split`)."""
    summary = str(Path(folder) / f"{name}.summary.json")
    return thread_split(read_text(summary), summary)


def read_thread_split() -> ThreadSplit:
    """The split the package ships (:func:`derive_thread_split` of :data:`OTHER_THREADS_RUN`, written by
    :func:`write_thread_split`): what ``--thread-split`` sets, installed or from a checkout."""
    package, name = SHIPPED_SPLIT
    text = resources.files(package).joinpath(name).read_text(encoding="utf-8")
    return parse_split_json(text, f"{package}/{name}")


def shipped_split_path() -> Path:
    """The checkout's copy of the shipped split, the file :func:`write_thread_split` writes."""
    package, name = SHIPPED_SPLIT
    return Path(str(resources.files(package).joinpath(name)))


def write_thread_split(name: str = OTHER_THREADS_RUN) -> Path:
    """Derive the split of the checkout's run ``name`` again and write it where the package ships it; the
    file's path."""
    source = f"tests/data/realbroker-reruns/threads/runs/{name}.summary.json"
    return write_text(str(shipped_split_path()), split_json(derive_thread_split(THREAD_RUNS, name), source))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rocketsim.warehouse.thread_runs --write``: the shipped split derived again."""
    p = argparse.ArgumentParser(prog="python -m rocketsim.warehouse.thread_runs", description=main.__doc__)
    p.add_argument("--write", action="store_true", required=True, help="write the shipped split")
    p.parse_args(argv)
    print(write_thread_split())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
