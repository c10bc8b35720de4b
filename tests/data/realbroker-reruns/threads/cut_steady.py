"""Where the model's sends wait in a cut of b_steady_async_p2_60000 with ``--thread-split``'s values
(``cut_waits.py``'s stages: before the request, from its start to the store, from the store to the send's
end, medians over the OK sends) and, per second of the host's clock, each kind of the fair host's threads:
its pieces' time on the host outside the stops (the threads of that kind runnable on average), their CPU
(cores), the speed they ran at (CPU over that time: processor sharing's ``P / N``) and the host's and the
client's stops; beside them ``run_queue.py``'s measured speeds. docs/validation.md, "`b_steady`'s latency
below the host's capacity". Run from the project's root (under the heavy-run lock: ~2 minutes of CPU,
1.1 GB): python tests/data/realbroker-reruns/threads/cut_steady.py [STEPS] [--set=KEY=VALUE ...] (STEPS
default ``10000:1,60000:4``; ``--run=NAME`` another run of tests/data/realbroker; ``--fit-stall-shape``: the
command's option)."""

import sys
from collections import defaultdict
from collections.abc import Hashable
from pathlib import Path

from rocketsim.client import host

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "g1_backlog"))
import cut_setup  # noqa: E402
import cut_waits  # noqa: E402

PIECES: dict[tuple[int, str], list[float]] = defaultdict(lambda: [0.0, 0.0])  # (s, kind) -> CPU, time
STOPS: dict[tuple[int, str], float] = defaultdict(float)
_place, _stop_all, _stop_client = (
    host.FairShareHost.place,
    host.FairShareHost.stop_all,
    host.FairShareHost.stop_client,
)


def kind(thread: Hashable) -> str:
    """The kind of a fair host's thread, as its callers name them (rocketsim.client.host)."""
    if thread is None:
        return "broker connection"
    if isinstance(thread, tuple) and isinstance(thread[0], int):
        name = str(thread[1])
        return "client " + (name if name in ("worker", "selector") else name.rstrip("_0123456789"))
    return str(thread[0]) if isinstance(thread, tuple) else str(thread)


def place(self, ready_us, work_us, thread=None):  # type: ignore[no-untyped-def]
    start, end = _place(self, ready_us, work_us, thread)
    stops = self._stops_of(host.is_client_thread(thread))
    piece = PIECES[(int(start // 1e6), kind(thread))]
    piece[0] += work_us
    piece[1] += end - start - host._held(stops, start, end)
    return start, end


def stop_all(self, at_us, length_us):  # type: ignore[no-untyped-def]
    start = _stop_all(self, at_us, length_us)
    STOPS[(int(start // 1e6), "host")] += length_us
    return start


def stop_client(self, at_us, work_us, threads):  # type: ignore[no-untyped-def]
    start, end = _stop_client(self, at_us, work_us, threads)
    STOPS[(int(start // 1e6), "client")] += end - start
    return start, end


def main() -> None:
    host.FairShareHost.place = place  # type: ignore[method-assign]
    host.FairShareHost.stop_all = stop_all  # type: ignore[method-assign]
    host.FairShareHost.stop_client = stop_client  # type: ignore[method-assign]
    cut_waits.main(
        cut_setup.run_name(sys.argv[1:], "b_steady_async_p2_60000"),
        "10000:1,60000:4",
        split=True,  # the command's calibration with --thread-split's values over it
        fit_stall_shape=cut_setup.FIT_STALL_SHAPE in sys.argv,
        backlog=False,  # c_overload's columns
    )
    print("host s  kind: threads runnable on average, cores, speed while runnable")
    for s in sorted({k[0] for k in PIECES}):
        kinds = sorted(k for (t, k) in PIECES if t == s)
        cores = sum(PIECES[(s, k)][0] for k in kinds) / 1e6
        runnable = sum(PIECES[(s, k)][1] for k in kinds) / 1e6
        print(
            f"{s:3d} all: {runnable:5.2f} runnable, {cores:4.2f} cores; stops: the host's "
            f"{STOPS[(s, 'host')] / 1e3:4.0f} ms, the client's {STOPS[(s, 'client')] / 1e3:4.0f} ms"
        )
        for k in kinds:
            cpu, time = PIECES[(s, k)]
            print(f"      {k:28s} {time / 1e6:5.2f} {cpu / 1e6:6.3f} {cpu / time if time else 1.0:5.2f}")


if __name__ == "__main__":
    main()
