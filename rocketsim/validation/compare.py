"""Measured against simulated: the figures the validation compares, made the same way from a measured run
and from rocketsim's tables of its simulation.

Per run: the OK share, the OK sends' latency percentiles (from the due time, as the harness measures it:
``np.percentile``'s linear interpolation, as its ``analyze.py``), the count of each outcome class
(:mod:`rocketsim.validation.classes`), what the broker stored, and per second of due time the OK count,
the failures by class and the OK latency p50 / p99.

Stored copies: the broker's logs give one number, the copies it stored for the run's sends (``S``). Read
as: every send stored at most once before any is stored twice, so the measured duplicates are
``max(0, S - n)`` and the failed sends stored ``min(S, n) - OK``; the simulation counts both exactly
(:func:`rocketsim.broker.store.stored_copy_counts`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from rocketsim.broker import store
from rocketsim.validation.classes import NOT_DONE, SEND_OK, outcome_class
from rocketsim.validation.measured import PERCENTILES, MeasuredRun

US_PER_MS = 1000.0


@dataclass(frozen=True)
class Metrics:
    """One side's figures of a run (``None``: not known on that side)."""

    n: int
    ok_share: float
    ok_latency_ms: Mapping[str, float]  # p50, p90, p99, p999, max
    outcomes: Mapping[str, int]
    stored: int | None = None
    duplicates: int | None = None
    failed_but_stored: int | None = None
    per_second: pd.DataFrame = field(default_factory=pd.DataFrame)

    def to_json(self) -> dict[str, object]:
        """The ``--json`` record: ``ok_share``, ``ok_<p>_ms``, ``outcomes``, and the stored copies."""
        out: dict[str, object] = {"ok_share": _num(self.ok_share)}
        for key in ("p50", "p90", "p99", "p999", "max"):
            out[f"ok_{key}_ms"] = _num(self.ok_latency_ms.get(key, math.nan))
        out["outcomes"] = {k: int(v) for k, v in sorted(self.outcomes.items(), key=lambda kv: -kv[1])}
        out["stored"] = self.stored
        out["duplicates"] = self.duplicates
        out["failed_but_stored"] = self.failed_but_stored
        return out


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), 6)


def latency_percentiles(latency_ms: np.ndarray) -> dict[str, float]:
    """p50, p90, p99, p99.9 and the maximum (NaN when empty)."""
    if latency_ms.size == 0:
        return {k: math.nan for k in (*dict(PERCENTILES), "max")}
    qs = np.percentile(latency_ms, [q for _, q in PERCENTILES])
    return {
        **{k: float(v) for (k, _), v in zip(PERCENTILES, qs, strict=True)},
        "max": float(latency_ms.max()),
    }


def measured_metrics(run: MeasuredRun) -> Metrics:
    """The measured side of a run."""
    s, n, ok = run.stored.copies, run.meta.n, run.ok
    dup = None if s is None else max(0, s - n)
    fbs = None if s is None else min(s, n) - ok
    frame = run.per_second.copy()
    return Metrics(n, run.ok_share, dict(run.ok_latency_ms), dict(run.outcomes), s, dup, fbs, frame)


def simulated_metrics(
    messages: pa.Table, attempts: pa.Table, results: pa.Table, counted_at_ms: float = math.inf
) -> Metrics:
    """The simulated side: from the run's ``messages``, ``send_attempts`` and ``send_results`` rows. A send
    whose outcome came after ``counted_at_ms`` (the schedule's clock: when the harness's driver read the
    outcomes, :attr:`rocketsim.validation.measured.RunMeta.counted_at_ms`) is ``NOT_DONE``, as the
    driver files it: not OK, and failed but stored if the broker has it."""
    latency = due_latency_ms(results)
    late = np.asarray(results["born_ts_ms"], np.float64) + latency > counted_at_ms
    classes = np.where(late, NOT_DONE, result_classes(results))
    ok = classes == SEND_OK
    counts = pd.Series(classes).value_counts()
    copies = store.result_copies(messages, attempts, results)
    delivery = store.delivery_flags(results["status"], copies)
    failed_but_stored = (delivery["failed_but_stored"] > 0) | (late & (copies > 0))
    n = results.num_rows
    frame = per_second(np.asarray(results["born_ts_ms"]) // 1000, classes, latency)
    return Metrics(
        n,
        float(ok.mean()) if n else math.nan,
        latency_percentiles(latency[ok]),
        {str(k): int(v) for k, v in counts.items()},
        int(copies.sum()),
        int(delivery["duplicates"].sum()),
        int(failed_but_stored.sum()),
        frame,
    )


def result_classes(results: pa.Table) -> np.ndarray:
    """Each result's outcome class (:func:`rocketsim.validation.classes.outcome_class`), worked out once
    per distinct (status, error) pair."""
    frame = pd.DataFrame({"status": results["status"].to_numpy(), "error": results["error"].to_numpy()})
    pairs = frame.drop_duplicates()
    named = {(s, e): outcome_class(s, e) for s, e in zip(pairs["status"], pairs["error"], strict=True)}
    return np.array([named[k] for k in zip(frame["status"], frame["error"], strict=True)], dtype=object)


def due_latency_ms(results: pa.Table) -> np.ndarray:
    """Each send's latency from its due (born) time to its end, in ms, as the harness measures it: the wait
    for a sender thread (``queue_wait_ms``) and the send call, in microseconds where the tables have them
    (``latency_us``), else whole ms."""
    wait = np.asarray(results["queue_wait_ms"], np.float64)
    if "latency_us" in results.column_names:
        return wait + np.asarray(results["latency_us"], np.float64) / US_PER_MS
    return wait + np.asarray(results["latency_ms"], np.float64)


def per_second(second: np.ndarray, classes: np.ndarray, latency_ms: np.ndarray) -> pd.DataFrame:
    """The harness's ``per_second.csv`` columns from per-send values: scheduled, ok, failed, the OK
    latency p50 / p90 / p99 / p99.9 / max and ``err_<class>`` counts, per second of due time."""
    frame = pd.DataFrame({"second": second, "klass": classes, "lat": latency_ms})
    rows = []
    for sec, g in frame.groupby("second", sort=True):
        ok = g["lat"][g["klass"] == SEND_OK].to_numpy()
        row: dict[str, object] = {
            "second": int(sec),
            "scheduled": len(g),
            "ok": ok.size,
            "failed": len(g) - ok.size,
        }
        pct = latency_percentiles(ok)
        for key in ("p50", "p90", "p99", "p999", "max"):
            row[f"ok_latency_{key}_ms"] = pct[key]
        for k, c in g["klass"][g["klass"] != SEND_OK].value_counts().items():
            row[f"err_{k}"] = int(c)
        rows.append(row)
    return pd.DataFrame(rows).fillna({c: 0 for c in set().union(*rows) if str(c).startswith("err_")})


def relative_error(simulated: float | None, measured: float | None) -> float:
    """``simulated / measured - 1`` (NaN when either is unknown or the measured is 0)."""
    if simulated is None or measured is None or not measured or not math.isfinite(measured):
        return math.nan
    return float(simulated) / float(measured) - 1.0


@dataclass(frozen=True)
class RunComparison:
    """One run, measured and simulated (``calibration``: it was one of the runs calibrated from)."""

    name: str
    measured: Metrics
    simulated: Metrics
    calibration: bool = False
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"measured": self.measured.to_json(), "simulated": self.simulated.to_json()}

    def classes(self) -> list[str]:
        """Every outcome class either side saw, the measured's largest first."""
        seen = {**{k: 0 for k in self.simulated.outcomes}, **dict(self.measured.outcomes)}
        return sorted(
            seen, key=lambda k: (-self.measured.outcomes.get(k, 0), -self.simulated.outcomes.get(k, 0), k)
        )

    def table(self) -> pd.DataFrame:
        """Measured, simulated and their relative difference, one row per figure."""
        m, s = self.measured, self.simulated
        rows = [("OK share", m.ok_share, s.ok_share)]
        rows += [(f"OK latency {k} (ms)", m.ok_latency_ms.get(k), s.ok_latency_ms.get(k)) for k in _LAT_KEYS]
        rows += [(f"outcome {c}", m.outcomes.get(c, 0), s.outcomes.get(c, 0)) for c in self.classes()]
        rows += [
            ("stored copies", m.stored, s.stored),
            ("duplicates", m.duplicates, s.duplicates),
            ("failed but stored", m.failed_but_stored, s.failed_but_stored),
        ]
        return pd.DataFrame(
            [
                {"figure": f, "measured": a, "simulated": b, "sim/meas - 1": relative_error(b, a)}
                for f, a, b in rows
            ]
        )


_LAT_KEYS = ("p50", "p90", "p99", "p999", "max")
