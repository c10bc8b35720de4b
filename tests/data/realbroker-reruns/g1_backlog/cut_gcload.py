"""A cut of a measured run simulated as ``python -m rocketsim.validation ... --thread-split`` simulates it
(the command's calibration from a_low_async and b_ramp_async_p1, ``split_values`` with the per-thread run's
split, ``run_scenario``, ``simulate``), per second of due time beside the measured per_second.csv: OK
completions, OK p50 / p99, failures, and per second of the host's clock the client heap's collections
(young and full), their pause ms, the old generation (live and dead) after the last one, the sends held,
and G1's concurrent marking (cycles ended, its threads' CPU ms). docs/validation.md, "The collector's
cost under the in-flight backlog". Run from the project's root:
python tests/data/realbroker-reruns/g1_backlog/cut_gcload.py [STEPS] [--run=NAME] [--set=KEY=VALUE ...]
(STEPS default ``10000:1,72000:5`` of c_overload_async_p2_72000; 4-7 minutes of CPU, 2 GB: under the
heavy-run lock). ``--no-split``: the validation scenario without the thread split; ``--fit-stall-shape``:
the command's option."""

import sys
from collections import defaultdict

import cut_setup
import numpy as np

import rocketsim.engine.joint as joint
import rocketsim.engine.reference as reference
from rocketsim.client import heap as heap_module
from rocketsim.validation.compare import due_latency_ms, per_second, result_classes

heaps: list[heap_module.ClientHeap] = []
AFTER: dict[tuple[int, int], tuple[float, int]] = {}  # (heap, host second) -> (held MiB, pending) at its last
_collect = heap_module.ClientHeap.collect


def recorded(sc, cores):  # type: ignore[no-untyped-def]
    h = heap_module.client_heap(sc, cores)
    if h is not None:
        heaps.append(h)
    return h


def collect(self, at_us, young_kib):  # type: ignore[no-untyped-def]
    _collect(self, at_us, young_kib)
    AFTER[(id(self), int(at_us // 1e6))] = (self.held_kib() / 1024.0, self.pending)


def main() -> None:
    reference.client_heap = recorded  # type: ignore[assignment]
    joint.client_heap = recorded  # type: ignore[assignment]
    heap_module.ClientHeap.collect = collect  # type: ignore[method-assign]
    argv = sys.argv[1:]
    steps = cut_setup.steps(argv, "10000:1,72000:5")
    sets = cut_setup.overrides(argv)
    split = cut_setup.NO_SPLIT not in argv
    values = cut_setup.calibrated(sets, fit_stall_shape=cut_setup.FIT_STALL_SHAPE in argv, split=split)
    name = cut_setup.run_name(argv, "c_overload_async_p2_72000")
    run = cut_setup.read(name)
    _, out = cut_setup.simulated(cut_setup.cut(run, steps), values)
    results = out.results
    due_ms = np.asarray(results["born_ts_ms"], np.float64)
    second = (due_ms // 1000).astype(int)
    classes = result_classes(results)
    latency = due_latency_ms(results)
    sim = per_second(second, classes, latency)
    ok_end = ((due_ms + latency) // 1000).astype(int)[classes == "SEND_OK"]
    lead = run.meta.steps[0][1] - steps[0][1]
    measured = run.per_second
    pauses = defaultdict(list)
    for h in heaps:
        for start, length in h.pauses:
            pauses[int(start // 1e6)].append(length)
    print(
        f"{name} cut {steps}: {len(heaps)} heaps, {sum(len(v) for v in pauses.values())} collections "
        f"({sum(h.full_collections for h in heaps)} full), "
        f"{sum(sum(v) for v in pauses.values()) / 1000:,.0f} ms of pauses, "
        f"{sum(h.markings for h in heaps)} marking cycles, "
        f"{sum(h.marking_cpu_us for h in heaps) / 1000:,.0f} ms of marking CPU"
    )
    print(
        "sec  OK done/meas  p50 sim/meas  p99 sim/meas  failed | host s: collections, pause ms, old MiB, held"
    )
    for _, row in sim.iterrows():
        s = int(row["second"])
        m = measured[measured["second"] == s + lead].iloc[0]
        errs = {k[4:]: int(v) for k, v in row.items() if str(k).startswith("err_") and v}
        olds = [AFTER.get((id(h), s), (np.nan, 0)) for h in heaps]
        print(
            f"{s:3d} {int(np.sum(ok_end == s)):6d}/{int(m['ok']):6d} "
            f"{row['ok_latency_p50_ms']:6.0f}/{m['ok_latency_p50_ms']:6.0f} "
            f"{row['ok_latency_p99_ms']:6.0f}/{m['ok_latency_p99_ms']:6.0f} {errs} | "
            f"{len(pauses[s]):3d} {sum(pauses[s]) / 1000:5.0f} "
            + " ".join(f"{mib:5.0f} {n:6d}" for mib, n in olds)
        )
    after = [p for s, v in pauses.items() if s >= len(sim) for p in v]
    print(f"after the last due second (the drain): {len(after)} collections, {sum(after) / 1000:,.0f} ms")


if __name__ == "__main__":
    main()
