"""Read a folder of the real-broker harness (``meta.json``, ``outcomes.csv``, ...) into a
:class:`rocketsim.validation.measured.MeasuredRun`; the parsing is the core's, the files are read here.

Required: ``meta.json``, ``outcomes.csv``, ``summary.json``, ``per_second.csv``. Read when present:
``latency_hist.json``, ``cpu.json``, ``broker_runtime.csv``, ``broker_logs/store.log``, and ``fault.txt``
(``run_load.sh``'s pause) when ``summary.json`` has no ``fault``.
"""

from __future__ import annotations

from pathlib import Path

from rocketsim.errors import MeasurementError
from rocketsim.validation import measured as m
from rocketsim.warehouse.calibration_inputs import read_text

REQUIRED = ("meta.json", "outcomes.csv", "summary.json", "per_second.csv")


def is_run_folder(path: str | Path) -> bool:
    """Whether ``path`` holds a harness run (its required files)."""
    p = Path(path)
    return all((p / name).is_file() for name in REQUIRED)


def read_run(path: str | Path) -> m.MeasuredRun:
    """One run folder; a missing or unreadable file raises :class:`MeasurementError` naming it."""
    folder = Path(path)
    if not folder.is_dir():
        raise MeasurementError(str(folder), 0, "expected a run folder of the real-broker harness")
    for name in REQUIRED:
        if not (folder / name).is_file():
            raise MeasurementError(str(folder / name), 0, "expected this file of a harness run")

    def text(name: str) -> str:
        return read_text(str(folder / name))

    def optional(name: str) -> str | None:
        return text(name) if (folder / name).is_file() else None

    meta = m.parse_meta(text("meta.json"), str(folder / "meta.json"))
    outcomes = m.parse_outcomes(text("outcomes.csv"), str(folder / "outcomes.csv"))
    summary = m.parse_summary(text("summary.json"), str(folder / "summary.json"))
    hist, cpu, series = optional("latency_hist.json"), optional("cpu.json"), optional("broker_runtime.csv")
    store_log = optional("broker_logs/store.log")
    ok = outcomes.get(m.SEND_OK, 0)
    stored = (
        m.stored_copies(store_log, str(folder / "broker_logs/store.log"), meta, ok, summary.rpcs)
        if store_log is not None
        else m.StoredCopies(None, "no broker_logs/store.log")
    )
    return m.MeasuredRun(
        name=folder.name,
        meta=meta,
        outcomes=outcomes,
        ok_latency_ms=summary.ok_latency_ms,
        step_completions=summary.step_completions,
        per_second=m.parse_per_second(text("per_second.csv"), str(folder / "per_second.csv")),
        ok_hist=m.parse_histogram(hist, str(folder / "latency_hist.json")) if hist else None,
        cpu=m.parse_cpu(cpu, str(folder / "cpu.json")) if cpu else {},
        stored=stored,
        fault=summary.fault if summary.fault is not None else fault_file(folder, meta),
        broker_series=m.parse_broker_series(series, str(folder / "broker_runtime.csv")) if series else None,
    )


def fault_file(folder: Path, meta: m.RunMeta) -> tuple[float, float] | None:
    """The pause ``run_load.sh`` wrote to ``fault.txt`` (``pack.py`` leaves the file out and
    ``analyze.py`` copies it into ``summary.json``; a folder may have the file alone), if any."""
    path = folder / "fault.txt"
    return m.parse_fault(read_text(str(path)), str(path), meta.t0_epoch_ms) if path.is_file() else None


def run_folders(paths: list[str]) -> list[Path]:
    """The run folders among ``paths``: each path a run folder, or a folder of run folders."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if is_run_folder(p):
            out.append(p)
        elif p.is_dir():
            found = sorted(c for c in p.iterdir() if is_run_folder(c))
            if not found:
                raise MeasurementError(raw, 0, "expected a harness run folder, or a folder of them")
            out.extend(found)
        else:
            raise MeasurementError(raw, 0, "expected a harness run folder, or a folder of them")
    return out
