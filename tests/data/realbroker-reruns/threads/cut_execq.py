"""Where the model's ASYNC sends wait under c_overload's backlog, before or after the executor: a cut
simulated as ``python -m rocketsim.validation ... --thread-split`` simulates it (``cut_gcload.py``'s
setup), traced per second of the host's clock for both producers together:

* the executor: the sends in its queues at the second's end, the median and max wait of the sends its
  threads took in the second (their task's ``costTime``), those over the 3 s (``DEFAULT ASYNC send call
  timeout``), the rejections; its threads' time in the second (a thread-second each): doing a send's CPU
  (ready to done, the wait for a core in it) and blocked in ``tryAcquire`` (``semaphoreAsync``);
* the permits (``semaphoreAsync``, 65,535 a producer): in use at the second's end, the threads waiting;
* the requests: those granted a permit in the second, the median timeout left when ``invokeAsync`` was
  called and when the ``ResponseFuture`` was made (after the permit's wait), refused for want of a permit;
  at the second's end written (on the wire) but not answered (their answer not yet read and decoded) and
  the median age of those, and those still in the worker's queue (not yet written);
* the response-table scan: the requests it failed at its ticks in the second (no answer read by
  ``begin + timeout + 1000``).

Beside it the measured per_second.csv by due second (OK, failed by class). docs/validation.md, "Where the
backlog waits: the executor's queue or the response table". Run from the project's root:
python tests/data/realbroker-reruns/threads/cut_execq.py [STEPS] [--run=NAME] [--set=KEY=VALUE ...]
(STEPS default ``10000:1,72000:10``; ~15 minutes of CPU, 3 GB: under the heavy-run lock)."""

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

import rocketsim.client.send.async_send as async_send
import rocketsim.engine.reference as reference
from rocketsim.client import host
from rocketsim.client.outcomes import OutcomeKind
from rocketsim.client.send.steps import Pool
from rocketsim.validation.compare import per_second, result_classes

sys.path.insert(0, str(Path(__file__).parents[1] / "g1_backlog"))
import cut_setup  # noqa: E402

TIMEOUT_MS = 3000
SAMPLE: dict[tuple[int, int], dict[str, int]] = {}  # (producer, host second) -> the state at its end
EXEC_WAIT: dict[int, list[int]] = defaultdict(list)  # second the task ran -> its costTime
EXEC_CPU: dict[int, float] = defaultdict(float)  # second -> executor threads' ready-to-done us
PERMIT_WAIT: dict[int, float] = defaultdict(float)  # second -> executor threads' us blocked on a permit
REQUESTS: list[tuple[int, int, int, int, bool]] = []  # (call begin, grant, timeout asked, left, refused)
WRITES: list[tuple[float, float]] = []  # (ready, on the wire) us
READS: list[tuple[float, float]] = []  # (answer in, handed to the callback) us
SCANNED: dict[int, int] = defaultdict(int)  # scan tick's second -> requests it failed
BUSY: dict[tuple[str, int], float] = defaultdict(
    float
)  # (thread group, second) -> its pieces' us on the host
WORK: dict[tuple[str, int], float] = defaultdict(float)  # (thread group, second) -> its pieces' CPU us
GROUPS = {"AsyncSenderExecutor": "executor", "worker": "worker", "selector": "selector"}


def traced_place(self, ready_us, work_us, thread=None):  # type: ignore[no-untyped-def]
    start, end = _place(self, ready_us, work_us, thread)
    if isinstance(thread, tuple) and len(thread) == 2 and isinstance(thread[1], str):
        group = GROUPS.get(thread[1].split("_")[0])
        if group is not None:
            BUSY[(group, int(start // 1e6))] += end - start
            WORK[(group, int(start // 1e6))] += work_us
    return start, end


def traced_events(self):  # type: ignore[no-untyped-def]
    """EventLoop.events, sampling the producer's executor and permits at each second it passes."""
    last = -1
    for t, kind in _events(self):
        second = t // 1000
        if second > last:
            if last >= 0:
                sem, pool = self.sim.semaphore, self.pools[Pool.EXECUTOR]
                SAMPLE[(self.sim.producer, last)] = {
                    "queued": len(pool._waiting),
                    "permits": sem.in_flight(t),
                    "waiting": len(sem.waiters),
                }
            last = second
        yield t, kind


def traced_begin(self):  # type: ignore[no-untyped-def]
    EXEC_WAIT[self.now // 1000].append(self.now - self.begin_ms)
    return (yield from _begin(self))


def traced_request(self):  # type: ignore[no-untyped-def]
    asked = self.req_timeout
    req = yield from _request(self)
    refused = req.refused is not None and not req.no_time_left
    REQUESTS.append((req.call_begin, req.start, asked, req.call_timeout, refused))
    wait_end = req.start if req.refused is None else req.start + req.outcome.latency_ms
    for second in range(req.call_begin // 1000, wait_end // 1000 + 1):  # the thread blocked in tryAcquire
        lo, hi = max(req.call_begin, second * 1000), min(wait_end, second * 1000 + 1000)
        PERMIT_WAIT[second] += max(0, hi - lo) * 1000.0
    return req


def traced_hold(self, req, fired):  # type: ignore[no-untyped-def]
    if req.refused is None and req.outcome.kind == OutcomeKind.REMOTING_TIMEOUT:
        SCANNED[fired // 1000] += 1  # no answer read before the scan's tick
    return _hold(self, req, fired)


def traced_read_later(self, payload, t):  # type: ignore[no-untyped-def]
    s = payload[0]
    before = s.index in self.scanned
    out = _read_later(self, payload, t)
    if not before and s.index in self.scanned:
        SCANNED[int(self.handed_us[s.index] // 1e6)] += 1  # read after the tick: the scan failed it then
    return out


def traced_cpu_done(self, s, ready_us, thread):  # type: ignore[no-untyped-def]
    done = _cpu_done(self, s, ready_us, thread)
    if self.threads is not None and not s.waits:
        EXEC_CPU[int(ready_us // 1e6)] += done - ready_us
    return done


def traced_write(self, ready_us):  # type: ignore[no-untyped-def]
    end = _write(self, ready_us)
    WRITES.append((ready_us, end))
    return end


def traced_read(self, ready_us):  # type: ignore[no-untyped-def]
    end = _read(self, ready_us)
    READS.append((ready_us, end))
    return end


_events = reference.EventLoop.events
_begin = async_send._AsyncSend.begin
_request = async_send._AsyncSend.request
_hold = async_send._AsyncSend.hold_permit
_read_later = reference.EventLoop.read_later
_cpu_done = reference.ProducerSimulation.cpu_done
_write = host.ClientThreads.write
_place = host.FairShareHost.place
_read = host.ClientThreads.read


def patch() -> None:
    reference.EventLoop.events = traced_events  # type: ignore[method-assign]
    async_send._AsyncSend.begin = traced_begin  # type: ignore[method-assign]
    async_send._AsyncSend.request = traced_request  # type: ignore[method-assign]
    async_send._AsyncSend.hold_permit = traced_hold  # type: ignore[method-assign]
    reference.EventLoop.read_later = traced_read_later  # type: ignore[method-assign]
    reference.ProducerSimulation.cpu_done = traced_cpu_done  # type: ignore[method-assign]
    host.ClientThreads.write = traced_write  # type: ignore[method-assign]
    host.ClientThreads.read = traced_read  # type: ignore[method-assign]
    host.FairShareHost.place = traced_place  # type: ignore[method-assign]


def at_ends(starts: np.ndarray, ends: np.ndarray, seconds: int) -> list[tuple[int, float]]:
    """For each second's end: how many of the intervals span it, and their median age (ms)."""
    out = []
    for s in range(seconds):
        edge = (s + 1) * 1e6
        inside = (starts <= edge) & (ends > edge)
        age = np.median(edge - starts[inside]) / 1000.0 if inside.any() else 0.0
        out.append((int(inside.sum()), age))
    return out


def main() -> None:
    patch()
    argv = sys.argv[1:]
    steps = cut_setup.steps(argv, "10000:1,72000:10")
    sets = cut_setup.overrides(argv)
    values = cut_setup.calibrated(sets, split=cut_setup.NO_SPLIT not in argv)  # as the command calibrates
    name = cut_setup.run_name(argv, "c_overload_async_p2_72000")
    run = cut_setup.read(name)
    _, out = cut_setup.simulated(cut_setup.cut(run, steps), values)
    results = out.results
    due_ms = np.asarray(results["born_ts_ms"], np.float64)
    classes = result_classes(results)
    sim = per_second((due_ms // 1000).astype(int), classes, np.zeros(len(due_ms)))
    lead = run.meta.steps[0][1] - steps[0][1]
    measured = run.per_second
    seconds = max(s for _, s in SAMPLE) + 1
    req = np.asarray(REQUESTS, np.int64).reshape(-1, 5)
    granted = req[req[:, 4] == 0]
    writes, reads = np.asarray(WRITES).reshape(-1, 2), np.asarray(READS).reshape(-1, 2)
    # written and not yet read: on the wire from its write's end to its answer's read (by request order
    # the model does not keep, so by counts: written by the edge less handed by the edge)
    unwritten = at_ends(writes[:, 0], writes[:, 1], seconds)
    print(f"{name} cut {steps}: classes {dict(zip(*np.unique(classes, return_counts=True), strict=True))}")
    print(
        "s | exec: queued, wait p50/max ms, >3s, thread-s CPU/permit | permits, waiting | granted, "
        "left asked/at future p50 ms, refused | worker queue, written not read | scan failed | "
        "busy thread-s executor/worker/selector | "
        "measured by due second: ok, failed by class"
    )
    for s in range(seconds):
        st = [SAMPLE.get((p, s), {}) for p in (0, 1)]
        waits = np.asarray(EXEC_WAIT.get(s, [0]))
        g = granted[(granted[:, 1] // 1000) == s]
        refused = int(np.sum((req[:, 4] == 1) & ((req[:, 0] + req[:, 2]) // 1000 == s)))
        edge = (s + 1) * 1e6
        in_flight = int(np.sum(writes[:, 1] <= edge) - np.sum(reads[:, 1] <= edge))
        m = measured[measured["second"] == s + lead]
        meas = ""
        if len(m):
            row = m.iloc[0]
            errs = {k[4:]: int(v) for k, v in row.items() if str(k).startswith("err_") and v}
            meas = f"{int(row['ok'])} {errs}"
        simrow = sim[sim["second"] == s]
        sim_errs = (
            {k[4:]: int(v) for k, v in simrow.iloc[0].items() if str(k).startswith("err_") and v}
            if len(simrow)
            else {}
        )
        print(
            f"{s:2d} | {sum(x.get('queued', 0) for x in st):6d} {np.median(waits):5.0f} {waits.max():5.0f} "
            f"{int(np.sum(waits > TIMEOUT_MS)):6d} {EXEC_CPU[s] / 1e6:4.2f} {PERMIT_WAIT[s] / 1e6:4.2f} | "
            f"{sum(x.get('permits', 0) for x in st):6d} {sum(x.get('waiting', 0) for x in st):2d} | "
            f"{len(g):6d} {np.median(g[:, 2]) if len(g) else 0:5.0f}/"
            f"{np.median(g[:, 3]) if len(g) else 0:5.0f}"
            f" {refused:6d} | {unwritten[s][0]:6d} ({unwritten[s][1]:4.0f} ms) {in_flight:6d} | "
            f"{SCANNED.get(s, 0):6d} | "
            + "/".join(
                f"{BUSY[(g, s)] / 1e6:4.2f} (CPU {WORK[(g, s)] / 1e6:4.2f})"
                for g in ("executor", "worker", "selector")
            )
            + f" | sim due {sim_errs} | meas {meas}"
        )


if __name__ == "__main__":
    main()
