"""The client JVM's heap and its young collections (``producers.heap_mb``): why a client's capacity falls
under its own backlog instead of levelling off.

A send the application has handed to the client holds heap until it ends (the ``Message`` and its body,
the async sender executor's task, the request, the response table's ``ResponseFuture``):
``heap_pending_kib`` each; every send also allocates ``heap_alloc_kib`` of short-lived objects on the
thread that sends. G1 (the JDK's default collector) sizes the young generation between
``G1NewSizePercent`` (5%) and ``G1MaxNewSizePercent`` (60%) of the heap, never into what the old
generation and ``G1ReservePercent`` (10%) hold, and collects it when it is full: a stop-the-world pause of
``heap_pause_us`` plus ``heap_copy_us_per_kib`` for every KiB it copies, which is what is still live in
it: the pending sends allocated since the previous collection, and as many older pending sends as fit the
survivor space (``SurvivorRatio`` 8: an eighth of the young generation; the rest are promoted).
Collections run the collector's threads on every core of the host (``ParallelGCThreads`` =
processors), so the client's work and a co-located broker's wait.

Under a backlog this feeds itself: pending sends fill the old generation, the young generation shrinks,
collections come more often and copy a full young generation each, the host does less useful work, and
the backlog grows faster; the answers come later and later until none comes before the client gives up.
With a backlog of a few sends (the usual case) collections are rare and short. Times in microseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketsim.client.host import HostCores
from rocketsim.scenario import Scenario

KIB_PER_MB = 1024.0
YOUNG_MIN_SHARE = 0.05  # G1NewSizePercent
YOUNG_MAX_SHARE = 0.60  # G1MaxNewSizePercent
RESERVE_SHARE = 0.10  # G1ReservePercent
SURVIVOR_RATIO = 8  # SurvivorRatio: the survivor space is young / 8


@dataclass(frozen=True)
class HeapParams:
    """One client JVM's heap in flat numbers (KiB, us)."""

    heap_kib: float
    alloc_kib: float  # allocated per send
    pending_kib: float  # held by a send until it ends
    pause_us: float  # a collection's fixed part
    copy_us_per_kib: float  # per KiB a collection copies

    def young_kib(self, pending: int) -> float:
        """The young generation's size while ``pending`` sends hold the old generation."""
        room = self.heap_kib * (1.0 - RESERVE_SHARE) - pending * self.pending_kib
        return min(max(room, YOUNG_MIN_SHARE * self.heap_kib), YOUNG_MAX_SHARE * self.heap_kib)


class ClientHeap:
    """The heap of one client process: its pending sends, what they allocated since the last collection,
    and the collections it runs on the host's cores."""

    def __init__(self, params: HeapParams, cores: HostCores) -> None:
        self.params = params
        self.cores = cores
        self.epoch = 0  # collections so far
        self.pending = 0  # sends held
        self.pending_young = 0  # of them, those allocated since the last collection
        self.allocated_kib = 0.0  # since the last collection
        self.pauses: list[tuple[float, float]] = []  # (start, length) of each collection

    def hold(self) -> int:
        """A send is handed to the client: it holds heap until :meth:`release`; its epoch."""
        self.pending += 1
        self.pending_young += 1
        return self.epoch

    def release(self, epoch: int) -> None:
        """The send held since collection ``epoch`` ended."""
        self.pending -= 1
        if epoch == self.epoch:
            self.pending_young -= 1

    def allocate(self, ready_us: float) -> None:
        """A send's work, ready at ``ready_us``, allocates; a full young generation is collected first."""
        self.allocated_kib += self.params.alloc_kib
        young = self.params.young_kib(self.pending)
        if self.allocated_kib >= young:
            self.collect(ready_us, young)

    def collect(self, at_us: float, young_kib: float) -> None:
        """A young collection at ``at_us``: copy what is live, pause every core, promote the overflow."""
        p = self.params
        cap = int(young_kib / SURVIVOR_RATIO / p.pending_kib) if p.pending_kib > 0 else 0
        copied = self.pending_young + min(self.pending - self.pending_young, cap)
        pause = p.pause_us + p.copy_us_per_kib * copied * p.pending_kib
        self.pauses.append((self.cores.stop_all(at_us, pause), pause))
        self.pending_young = 0
        self.allocated_kib = 0.0
        self.epoch += 1


def client_heap(sc: Scenario, cores: HostCores) -> ClientHeap | None:
    """The heap of a client process of ``sc`` on ``cores`` (None: ``producers.heap_mb`` is 0)."""
    p = sc.producers
    if p.heap_mb <= 0:
        return None
    params = HeapParams(
        p.heap_mb * KIB_PER_MB, p.heap_alloc_kib, p.heap_pending_kib, p.heap_pause_us, p.heap_copy_us_per_kib
    )
    return ClientHeap(params, cores)
