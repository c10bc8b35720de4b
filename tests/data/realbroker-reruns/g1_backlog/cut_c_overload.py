"""c_overload_async_p2_72000 cut to a schedule (default ``10000:1,72000:5``), simulated as the validation
does (the command's calibration from a_low_async and b_ramp_async_p1, ``run_scenario``, ``simulate``), per
second of due time beside the measured per_second.csv: OK, OK p50 / p99, failures by class, and the client
heap's young / full collections and pause ms by the second they start in (from the warm-up's first send).
Run from the project's root: python tests/data/realbroker-reruns/g1_backlog/cut_c_overload.py [STEPS]
[--no-startup]. ~2 minutes of CPU, 1.5 GB. STEPS ``whole``: the run's own schedule, as the validation
command simulates it, with its whole-run figures too (~5.5 minutes, 5 GB: under the heavy-run lock).
``--no-startup`` sizes G1's young generation from the calibrated costs from the start (the model before
G1's start-up predictions, rocketsim.client.g1_predictions). ``--set=KEY=VALUE`` (repeatable) sets a
scenario key over the calibrated values (e.g. ``--set=producers.heap_stops=client``); ``--run=NAME``
another run of tests/data/realbroker (``--run=b_steady_async_p2_60000 whole``: ~8 minutes, 6.5 GB)."""

import json
import sys
from dataclasses import replace

import cut_setup
import numpy as np

import rocketsim.engine.joint as joint
import rocketsim.engine.reference as reference
from rocketsim.client import heap as heap_module
from rocketsim.validation.compare import due_latency_ms, per_second, result_classes, simulated_metrics

args = cut_setup.positional(sys.argv[1:])
WHOLE = bool(args) and args[0] == "whole"
STEPS = () if WHOLE else cut_setup.steps(sys.argv[1:], "10000:1,72000:5")
STARTUP = "--no-startup" not in sys.argv
# as the scenario's --set reads them (a TOML value, else a string); a bad one refused before anything runs
OVERRIDES = cut_setup.overrides(sys.argv[1:])

heaps: list[heap_module.ClientHeap] = []


def recorded(sc, cores):  # type: ignore[no-untyped-def]
    h = heap_module.client_heap(sc, cores)
    if h is not None and not STARTUP:
        h = heap_module.ClientHeap(replace(h.params, g1_workers=0), cores)
    if h is not None:
        heaps.append(h)
    return h


reference.client_heap = recorded  # type: ignore[assignment]
joint.client_heap = recorded  # type: ignore[assignment]

values = cut_setup.calibrated(OVERRIDES)  # as the command calibrates (no --thread-split)
name = cut_setup.run_name(sys.argv[1:], "c_overload_async_p2_72000")
run = cut_setup.read(name)
if WHOLE:
    cut, STEPS = run, run.meta.steps
else:
    cut = cut_setup.cut(run, STEPS)
messages, out = cut_setup.simulated(cut, values)
results = out.results
second = (np.asarray(results["born_ts_ms"], np.float64) // 1000).astype(int)
sim = per_second(second, result_classes(results), due_latency_ms(results))
measured = run.per_second
lead = run.meta.steps[0][1] - STEPS[0][1]  # the measured second the cut's first one stands for
pauses = sorted(p for h in heaps for p in h.pauses)
full = sum(h.full_collections for h in heaps)
print(
    f"steps {STEPS}, G1 start-up predictions {STARTUP}: {len(heaps)} heaps, {len(pauses)} collections "
    f"({full} full), {sum(p for _, p in pauses) / 1000:,.0f} ms of pauses"
)
t0_us = float(np.min(np.asarray(results["born_ts_ms"], np.float64))) * 1000.0
print("sec  OK sim/meas  p50 ms  p99 ms  failed (sim classes)  collections, pause ms")
for _, row in sim.iterrows():
    s = int(row["second"])
    m = measured[measured["second"] == s + lead].iloc[0]
    in_s = [p for start, p in pauses if s * 1e6 <= start - t0_us < (s + 1) * 1e6]
    errs = {k[4:]: int(v) for k, v in row.items() if str(k).startswith("err_") and v}
    ok = f"{int(row['ok']):6d}/{int(m['ok']):6d}"
    p50 = f"{row['ok_latency_p50_ms']:5.0f}/{m['ok_latency_p50_ms']:5.0f}"
    p99 = f"{row['ok_latency_p99_ms']:5.0f}/{m['ok_latency_p99_ms']:5.0f}"
    failed = f"{int(row['failed']):6d}/{int(m['failed']):6d}"
    print(f"{s:3d} {ok} {p50} {p99} {failed} {errs} {len(in_s):3d}, {sum(in_s) / 1000:4.0f}")
if WHOLE:
    print(json.dumps(simulated_metrics(messages, out.attempts, results).to_json()))
after = [p for start, p in pauses if start - t0_us >= len(sim) * 1e6]
print(f"after the last due second (the drain): {len(after)} collections, {sum(after) / 1000:,.0f} ms")
