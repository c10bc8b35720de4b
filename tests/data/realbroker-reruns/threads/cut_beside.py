"""What the fair host counts beside the client's pauses and beside the client's pieces, by kind, in a cut
simulated as ``python -m rocketsim.validation ... --thread-split`` simulates it (``cut_pauses.py``: its
collections logged and ``cut_gcload.py``'s table printed): every piece the host places recorded with its
thread's kind and identity (the broker's unnamed pieces by the connection thread or send thread that runs
them), the rests a stop holds apart. Per client pause: the other processes' pieces booked over it when it
was placed (what the host shares its collector threads with) and the threads they are, time-averaged over
the pause, and the cores its collector threads got (their CPU over its wall). Per client piece (one in
``SAMPLE``): the threads beside it the host counted, and the pieces and threads by kind running at its
start. docs/validation.md, "Threads, not pieces, beside the client's pauses". Run from the project's root
(under the heavy-run lock, as cut_gcload.py):
python tests/data/realbroker-reruns/threads/cut_beside.py LOG.csv [cut_gcload's arguments]
"""

import sys
from array import array
from collections import defaultdict
from collections.abc import Hashable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1] / "g1_backlog"))

import cut_pauses  # noqa: E402

from rocketsim.broker import queue  # noqa: E402
from rocketsim.client import host  # noqa: E402

SAMPLE = 997  # one client piece in this many has its neighbours counted
KINDS: dict[str, int] = {}
IDENTS: dict[Hashable, int] = {}
STARTS, ENDS, KIND, IDENT, REST = array("d"), array("d"), array("i"), array("q"), bytearray()
PAUSES: list[tuple[float, float, float, int, int]] = []  # start, end, work a thread, threads, records then
SAMPLES: list[tuple[float, int, int, int, int]] = []  # start, records then, beside, at start, at the clock
BESIDE: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # kind -> sum of beside, pieces
CONTEXT: list[Hashable] = [None]  # the broker's thread running an unnamed piece now
_state = {"rest": False, "placing": None, "client_pieces": 0}
_place, _hold, _stop_client, _start = (
    host.FairShareHost.place,
    host.FairShareHost._hold,
    host.FairShareHost.stop_client,
    host.FairShareHost._start,
)
_on_thread, _read_request, _run_cpu, _on_host = (
    queue.BrokerStore._on_thread,
    queue.BrokerStore.read_request,
    queue.BrokerStore.run_cpu,
    queue.BrokerStore._on_host,
)
_append = host.PieceLog.append


def kind_of(thread: Hashable) -> tuple[str, Hashable]:
    """The kind of a piece's thread and the thread (the broker's unnamed ones from ``CONTEXT``)."""
    if thread is None:
        ident = CONTEXT[0]
        return ("broker " + str(ident[0]) if ident is not None else "unnamed"), ident
    if isinstance(thread, tuple) and isinstance(thread[0], int):
        name = str(thread[1])
        return "client " + (name if name in ("worker", "selector") else name.rstrip("_0123456789")), thread
    if isinstance(thread, tuple) and isinstance(thread[0], str) and thread[0].startswith("broker "):
        return str(thread[0]), thread
    return (str(thread[0]) if isinstance(thread, tuple) else str(thread)), thread


def record(start: float, end: float, thread: Hashable, rest: bool) -> None:
    kind, ident = kind_of(thread)
    STARTS.append(start)
    ENDS.append(end)
    KIND.append(KINDS.setdefault(kind, len(KINDS)))
    IDENT.append(IDENTS.setdefault(ident, len(IDENTS)))
    REST.append(rest)


def place(self, ready_us, work_us, thread=None):  # type: ignore[no-untyped-def]
    _state["placing"] = thread
    start, end = _place(self, ready_us, work_us, thread)
    _state["placing"] = None
    if end > start:
        record(start, end, thread, False)
    return start, end


def start_of(self, ready_us, own, client, stops):  # type: ignore[no-untyped-def]
    start, beside = _start(self, ready_us, own, client, stops)
    thread = _state["placing"]
    if client and thread is not None:
        kind = kind_of(thread)[0]
        BESIDE[kind][0] += beside
        BESIDE[kind][1] += 1
        _state["client_pieces"] += 1
        if _state["client_pieces"] % SAMPLE == 0:  # the books a client piece counts: all of them
            books, now = self._running, self._now
            SAMPLES.append((start, len(STARTS), beside, books.covering(start), books.covering(now)))
    return start, beside


def append(self, start, end, rate, client, thread):  # type: ignore[no-untyped-def]
    _append(self, start, end, rate, client, thread)
    if _state["rest"]:
        record(start, end, thread, True)


def hold(self, stop_start, stop_end, client_only):  # type: ignore[no-untyped-def]
    _state["rest"] = True
    _hold(self, stop_start, stop_end, client_only)
    _state["rest"] = False


def stop_client(self, at_us, work_us, threads):  # type: ignore[no-untyped-def]
    records = len(STARTS)
    start, end = _stop_client(self, at_us, work_us, threads)
    PAUSES.append((start, end, work_us, threads, records))
    return start, end


def on_thread(self, conn, i, ready_us, work_us):  # type: ignore[no-untyped-def]
    CONTEXT[0] = ("selector" if i == 0 else "codec", self.index, id(conn))
    try:
        return _on_thread(self, conn, i, ready_us, work_us)
    finally:
        CONTEXT[0] = None


def read_request(self, conn, ready_us):  # type: ignore[no-untyped-def]
    CONTEXT.append(conn)
    try:
        return _read_request(self, conn, ready_us)
    finally:
        CONTEXT.pop()


def run_cpu(self, ready_us, work_us, thread=None):  # type: ignore[no-untyped-def]
    conn = CONTEXT[-1] if len(CONTEXT) > 1 else None
    last = "codec" if self.params.codec_share > 0 else "selector"
    CONTEXT[0] = (last, self.index, id(conn))  # the answer's write, on the connection's last thread
    try:
        return _run_cpu(self, ready_us, work_us, thread)
    finally:
        CONTEXT[0] = None


def on_host(self, d, cores):  # type: ignore[no-untyped-def]
    # which of the send threads takes it: the one free the earliest (BrokerStore.threads' heap)
    CONTEXT[0] = ("send thread", self.index, None)  # (which of them: not told apart unnamed)
    try:
        return _on_host(self, d, cores)
    finally:
        CONTEXT[0] = None


def report() -> None:
    starts, ends = np.frombuffer(STARTS), np.frombuffer(ENDS)
    kinds, idents, rests = (
        np.frombuffer(KIND, np.int32),
        np.frombuffer(IDENT, np.int64),
        np.frombuffer(REST, np.uint8),
    )
    names = {v: k for k, v in KINDS.items()}
    client_kind = np.array(
        [
            k.startswith("client ") or k in (host.SUBMITTER, host.LOGGER, host.G1_CONCURRENT)
            for k in sorted(KINDS, key=KINDS.get)
        ]
    )
    print(f"\n{len(starts):,} pieces recorded, {int(rests.sum()):,} of them rests a stop held")
    print("client pauses: the others' pieces booked over each when it was placed, time-averaged over it")
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])  # pieces, rests, threads
    wall_sum = cpu_sum = 0.0
    for start, end, work, threads, n in PAUSES:
        wall = end - start
        if wall <= 0:
            continue
        wall_sum += wall
        cpu_sum += work * threads
        s, e, k, r = starts[:n], ends[:n], kinds[:n], rests[:n]
        over = (e > start) & (s < end) & ~client_kind[k]
        inside = np.minimum(e[over], end) - np.maximum(s[over], start)
        for kind, rest, t in zip(k[over].tolist(), r[over].tolist(), inside.tolist(), strict=True):
            totals[names[kind]][1 if rest else 0] += t
        # the threads: a thread's pieces over the same time counted once
        for ident in np.unique(idents[:n][over]).tolist():
            mine = over & (idents[:n] == ident)
            lo, hi = np.maximum(s[mine], start), np.minimum(e[mine], end)
            order = np.argsort(lo)
            covered, reach = 0.0, start
            for a, b in zip(lo[order].tolist(), hi[order].tolist(), strict=True):
                covered += max(0.0, b - max(a, reach))
                reach = max(reach, b)
            totals[names[int(k[mine][0])]][2] += covered
    print(
        f"{len(PAUSES)} pauses, {wall_sum / 1e3:,.0f} ms of wall, {cpu_sum / 1e3:,.0f} ms of collector CPU: "
        f"{cpu_sum / wall_sum if wall_sum else 0:.2f} cores while paused"
    )
    w = wall_sum or 1.0
    print("  kind                          pieces  rests  threads (time-averaged over the pauses)")
    print(
        f"  {'all':28s} {sum(v[0] for v in totals.values()) / w:7.2f} "
        f"{sum(v[1] for v in totals.values()) / w:6.2f} {sum(v[2] for v in totals.values()) / w:8.2f}"
    )
    for name in sorted(totals, key=lambda n: -sum(totals[n][:2])):
        v = totals[name]
        print(f"  {name:28s} {v[0] / w:7.2f} {v[1] / w:6.2f} {v[2] / w:8.2f}")
    print("\nclient pieces: threads beside each the host counted (mean over all)")
    for kind, (total, count) in sorted(BESIDE.items()):
        print(f"  {kind:20s} {total / count:6.2f}  ({int(count):,} pieces)")
    print(f"sampled ({len(SAMPLES)}): pieces and threads by kind running at their starts (booked then)")
    by_kind: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    counted = 0.0
    at_start = at_clock = 0.0
    for start, n, beside, on_start, on_clock in SAMPLES:
        at_start, at_clock = at_start + on_start, at_clock + on_clock
        at = (starts[:n] <= start) & (ends[:n] > start)
        counted += beside
        for kind in np.unique(kinds[:n][at]).tolist():
            mine = at & (kinds[:n] == kind)
            by_kind[names[kind]][0] += int(mine.sum())
            by_kind[names[kind]][1] += len(np.unique(idents[:n][mine]))
    m = max(1, len(SAMPLES))
    pieces, threads = (sum(v[i] for v in by_kind.values()) / m for i in (0, 1))
    print(
        f"  counted beside {counted / m:.2f} (the books at its start {at_start / m:.2f}, at the engine's "
        f"clock {at_clock / m:.2f}, its own thread's among them); running at its start {pieces:.2f} "
        f"pieces of {threads:.2f} threads (the collector's left out)"
    )
    for name in sorted(by_kind, key=lambda n: -by_kind[n][0]):
        print(f"  {name:28s} {by_kind[name][0] / m:6.2f} pieces {by_kind[name][1] / m:6.2f} threads")


def main() -> None:
    host.FairShareHost.place = place  # type: ignore[method-assign]
    host.FairShareHost._start = start_of  # type: ignore[method-assign]
    host.FairShareHost._hold = hold  # type: ignore[method-assign]
    host.FairShareHost.stop_client = stop_client  # type: ignore[method-assign]
    host.PieceLog.append = append  # type: ignore[method-assign]
    queue.BrokerStore._on_thread = on_thread  # type: ignore[method-assign]
    queue.BrokerStore.read_request = read_request  # type: ignore[method-assign]
    queue.BrokerStore.run_cpu = run_cpu  # type: ignore[method-assign]
    queue.BrokerStore._on_host = on_host  # type: ignore[method-assign]
    try:
        cut_pauses.main()
    finally:  # what was recorded, also when cut_gcload's table fails (a cut of part of a second)
        if len(STARTS):
            report()


if __name__ == "__main__":
    main()
