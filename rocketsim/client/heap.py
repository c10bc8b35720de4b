"""The client JVM's heap and its young collections (``producers.heap_mb``): why a client's capacity falls
under its own backlog instead of levelling off.

More: docs/reference/modules.md, rocketsim/client/heap.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketsim.client.host import Host
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

    def __init__(self, params: HeapParams, cores: Host) -> None:
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


def client_heap(sc: Scenario, cores: Host) -> ClientHeap | None:
    """The heap of a client process of ``sc`` on ``cores`` (None: ``producers.heap_mb`` is 0)."""
    p = sc.producers
    if p.heap_mb <= 0:
        return None
    params = HeapParams(
        p.heap_mb * KIB_PER_MB, p.heap_alloc_kib, p.heap_pending_kib, p.heap_pause_us, p.heap_copy_us_per_kib
    )
    return ClientHeap(params, cores)
