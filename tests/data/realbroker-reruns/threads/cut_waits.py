"""Where the model's sends wait in a cut of c_overload_async_p2_72000 (docs/validation.md, "Where a written
request waits"): per second of due time, the OK p50; medians over the OK sends whose first attempt was
stored of the wait before the request (the executor's queue and CPU: the attempt's start less the due
time), from the start to the store, and from the store to the send's end (the answer's way back, its read
and the callback); the requests started by each second's end and stored after it (the model's written
backlog) beside the measured upper bound (due, less rejected, stored and refused: the executor queues and
the requests in flight; broker_runtime.csv's commit log at 1,199 bytes a message); the failures by class.
Run from the project's root: python tests/data/realbroker-reruns/threads/cut_waits.py [STEPS]
[--set=KEY=VALUE ...] (STEPS default ``10000:1,72000:5``; 2-7 minutes of CPU, 1.5 GB)."""

import csv
import sys
from pathlib import Path

import numpy as np

from rocketsim.validation.compare import due_latency_ms, per_second, result_classes

sys.path.insert(0, str(Path(__file__).parents[1] / "g1_backlog"))
import cut_setup  # noqa: E402

RUNS = cut_setup.RUNS
NAME = "c_overload_async_p2_72000"
BYTES_A_MESSAGE = 1199


def measured_backlog(lead: float) -> dict[int, float]:
    """The measured run's due less rejected, stored and refused sends at each broker sample, by the cut's
    second (``lead`` seconds of the run before the cut's first)."""
    with open(RUNS + NAME + "/per_second.csv") as f:
        rows = list(csv.DictReader(f))
    with open(RUNS + NAME + "/broker_runtime.csv") as f:
        samples = list(csv.DictReader(f))
    broker = [r for r in samples if r["rel_us"]]  # the first sample, before t0, is the base

    def upto(col: str, t: float) -> float:
        return sum(float(r[col] or 0) * min(1.0, max(0.0, t - int(r["second"]))) for r in rows)

    base = int(samples[0]["commitLogMaxOffset"])
    out = {}
    for r in broker:
        t = float(r["rel_us"]) / 1e6
        stored = (int(r["commitLogMaxOffset"]) - base) / BYTES_A_MESSAGE
        refused = upto("err_OVERLOAD", t) + upto("err_TIMEOUT_CLEAN_QUEUE", t)
        out[round(t - lead)] = upto("scheduled", t) - upto("err_executor_rejected", t) - stored - refused
    return out


def main(
    name: str = NAME,
    default_steps: str = "10000:1,72000:5",
    *,
    split: bool = False,
    fit_stall_shape: bool = False,
    backlog: bool = True,
) -> None:
    """The table for the measured run ``name`` cut to STEPS (else ``default_steps``), simulated with the
    command's calibration (``split``, ``fit_stall_shape``: its ``--thread-split``, ``--fit-stall-shape``);
    ``backlog``: the measured bound beside the model's written backlog (c_overload's columns)."""
    argv = sys.argv[1:]
    sets = cut_setup.overrides(argv)
    steps = cut_setup.steps(argv, default_steps)
    values = cut_setup.calibrated(sets, fit_stall_shape=fit_stall_shape, split=split)
    run = cut_setup.read(name)
    _, out = cut_setup.simulated(cut_setup.cut(run, steps), values)
    results, attempts = out.results, out.attempts
    due_ms = np.asarray(results["born_ts_ms"], np.float64)
    second = (due_ms // 1000).astype(int)
    classes = result_classes(results)
    latency = due_latency_ms(results)
    send_end = due_ms + latency  # the send's end: its callback run (the answer read and decoded before it)
    sim = per_second(second, classes, latency)
    lead = run.meta.steps[0][1] - steps[0][1]
    m = run.per_second

    key = lambda p, s: np.asarray(p, np.int64) * (1 << 40) + np.asarray(s, np.int64)  # noqa: E731
    first = np.asarray(attempts["attempt"]) == 0
    a_key = key(attempts["producer"], attempts["seq"])[first]
    start = np.asarray(attempts["start_ts_ms"], np.float64)[first]
    stored_at = np.asarray(attempts["stored_ts_ms"].to_pandas().fillna(np.nan), np.float64)[first]
    order = np.argsort(a_key)
    r_key = key(results["producer"], results["seq"])
    idx = order[np.searchsorted(a_key[order], r_key)]
    ok = classes == "SEND_OK"
    t0 = float(due_ms.min())
    all_start = np.asarray(attempts["start_ts_ms"], np.float64) - t0
    all_stored = np.asarray(attempts["stored_ts_ms"].to_pandas().fillna(np.inf), np.float64) - t0
    backlog_m = measured_backlog(lead) if backlog else {}
    print(
        "sec  OK p50 sim/meas  OK p99 sim/meas  waits (median ms, OK sends): before the request / start to"
        " store / store to"
        " end;  started, not stored at the second's end (measured bound); failures"
    )
    for _, row in sim.iterrows():
        s = int(row["second"])
        ms = m[m["second"] == s + lead].iloc[0]
        sel = ok & (second == s)
        i = idx[sel]
        waits = [
            np.nanmedian(start[i] - due_ms[sel]) if i.size else np.nan,
            np.nanmedian(stored_at[i] - start[i]) if i.size else np.nan,
            np.nanmedian(send_end[sel] - stored_at[i]) if i.size else np.nan,
        ]
        edge = (s + 1) * 1000.0  # written by then, stored after it (refused or never stored: not counted)
        unstored = int(np.sum((all_start < edge) & (all_stored >= edge) & np.isfinite(all_stored)))
        errs = {k[4:]: int(v) for k, v in row.items() if str(k).startswith("err_") and v}
        print(
            f"{s:3d} {row['ok_latency_p50_ms']:6.0f}/{ms['ok_latency_p50_ms']:6.0f}  "
            f"{row['ok_latency_p99_ms']:6.0f}/{ms['ok_latency_p99_ms']:6.0f}  "
            f"{waits[0]:7.1f} {waits[1]:7.1f} {waits[2]:7.1f}  {unstored:7d} "
            f"({backlog_m.get(s + 1, float('nan')):7.0f})  {errs}"
        )


if __name__ == "__main__":
    main()
