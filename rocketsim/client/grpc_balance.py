"""How a gRPC client picks the queue (and so the endpoint) an attempt goes to.

The queue only names the endpoint: the Proxy chooses the broker queue itself
(:mod:`rocketsim.broker.proxy`). Two balancers:

* :class:`PythonSelector`: ``PY/client/balancer/queue_selector.py`` ``QueueSelector`` (rocketmq-python-client
  5.1.2): one per topic, an index from a random start, ``queues[index++ % n]`` over writable master
  queues; FIFO ``int(sha256(group)) % n``. Each attempt picks anew.
* :class:`JavaBalancer`: ``JC/impl/producer/PublishingLoadBalancer.java`` (java-5.2.1): one per topic, an
  ``AtomicInteger`` from a random start, one tick per send; ``takeMessageQueues(isolated, maxAttempts)``
  walks the queues from there and keeps the first of each broker whose endpoints are not isolated (all of
  them ignoring isolation when every endpoint is); FIFO ``LongMath.mod(sipHash24(group), n)``.

More: docs/reference/modules.md, rocketsim/client/grpc_balance.py.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from rocketsim.javaint import int32

MASTER_BROKER_ID = 0
PERMS = ("NONE", "READ", "WRITE", "READ_WRITE")
MESSAGE_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION")


@dataclass(frozen=True)
class GrpcQueue:
    """A ``MessageQueue`` of a QueryRoute answer: its broker, id, permission, broker id, the endpoints its
    broker advertises and the message types it accepts."""

    broker: str
    queue_id: int
    endpoint: str
    perm: str = "READ_WRITE"
    broker_id: int = MASTER_BROKER_ID
    accept: tuple[str, ...] = MESSAGE_TYPES

    @property
    def writable(self) -> bool:
        return self.perm in ("WRITE", "READ_WRITE")

    @property
    def name(self) -> str:
        """The vectors' spelling, ``<broker>.<topic>.<id>`` without the topic: ``<broker>.<id>``."""
        return f"{self.broker}.{self.queue_id}"


def publishing_queues(route: Sequence[GrpcQueue]) -> list[GrpcQueue]:
    """The queues a producer may pick: writable, on a master broker, in route order."""
    return [q for q in route if q.writable and q.broker_id == MASTER_BROKER_ID]


def sha256_bucket(key: str, n: int) -> int:
    """``int.from_bytes(sha256(key.encode('utf-8')).digest(), 'big') % n`` (PY select_queue_by_hash_key)."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest(), "big") % n


# ---- Guava's Hashing.sipHash24() (k0 = 0x0706050403020100, k1 = 0x0f0e0d0c0b0a0908), asLong() --------

_MASK = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _MASK


def _sip_round(v0: int, v1: int, v2: int, v3: int) -> tuple[int, int, int, int]:
    v0 = (v0 + v1) & _MASK
    v1 = _rotl(v1, 13) ^ v0
    v0 = _rotl(v0, 32)
    v2 = (v2 + v3) & _MASK
    v3 = _rotl(v3, 16) ^ v2
    v0 = (v0 + v3) & _MASK
    v3 = _rotl(v3, 21) ^ v0
    v2 = (v2 + v1) & _MASK
    v1 = _rotl(v1, 17) ^ v2
    v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


def siphash24(data: bytes, k0: int = 0x0706050403020100, k1: int = 0x0F0E0D0C0B0A0908) -> int:
    """SipHash-2-4 of ``data`` as a signed 64-bit Java long (Guava ``HashCode.asLong()``)."""
    v0, v1 = k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D
    v2, v3 = k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573
    n = len(data)
    tail = n - n % 8
    words = [int.from_bytes(data[i : i + 8], "little") for i in range(0, tail, 8)]
    words.append(int.from_bytes(data[tail:], "little") | ((n & 0xFF) << 56))
    for m in words:
        v3 ^= m
        v0, v1, v2, v3 = _sip_round(*_sip_round(v0, v1, v2, v3))
        v0 ^= m
    v2 ^= 0xFF
    for _ in range(4):
        v0, v1, v2, v3 = _sip_round(v0, v1, v2, v3)
    h = v0 ^ v1 ^ v2 ^ v3
    return h - (1 << 64) if h >= 1 << 63 else h


def siphash_bucket(key: str, n: int) -> int:
    """``LongMath.mod(Hashing.sipHash24().hashBytes(key UTF-8).asLong(), n)`` (non-negative)."""
    return siphash24(key.encode("utf-8")) % n


# ---- the balancers ------------------------------------------------------------------------------------


class PythonSelector:
    """``QueueSelector.producer_queue_selector(route)``: the index starts at ``start`` (``random.randint(1,
    1000)``) and survives route updates (``QueueSelector.update``)."""

    def __init__(self, route: Sequence[GrpcQueue], start: int) -> None:
        self.queues = publishing_queues(route)
        self.index = start

    def next_queue(self) -> tuple[int, GrpcQueue]:
        """``select_next_queue``: the index used and its queue; the index moves on by one."""
        i = self.index
        self.index += 1
        return i, self.queues[i % len(self.queues)]

    def by_group(self, group: str) -> tuple[int, GrpcQueue]:
        """``select_queue_by_hash_key(group)``: the bucket and its queue; the index does not move."""
        k = sha256_bucket(group, len(self.queues))
        return k, self.queues[k]

    def update(self, route: Sequence[GrpcQueue]) -> None:
        self.queues = publishing_queues(route)


class JavaBalancer:
    """``PublishingLoadBalancer``: the index starts at ``start`` and survives route updates (``update``
    keeps it, rocketmq-clients commit cfb9daa7, java-5.0.3 on)."""

    def __init__(self, route: Sequence[GrpcQueue], start: int) -> None:
        self.queues = publishing_queues(route)
        self.index = start

    def take_queues(self, isolated: set[str] | frozenset[str], count: int) -> tuple[int, list[GrpcQueue]]:
        """``takeMessageQueues(excluded, count)``: the index it started from and up to ``count`` queues of
        distinct brokers whose endpoints are not isolated; if none is left, the same walk ignoring
        isolation. The index moves on by one per call (per send)."""
        start = self.index
        self.index = int32(self.index + 1)  # AtomicInteger.getAndIncrement wraps
        n = len(self.queues)
        nxt = start
        picked: list[GrpcQueue] = []
        for skip_isolated in (True, False):
            taken: set[str] = set()
            for _ in range(n):
                q = self.queues[nxt % n]  # IntMath.mod: never negative
                nxt = int32(nxt + 1)  # next++ on a Java int
                if (not skip_isolated or q.endpoint not in isolated) and q.broker not in taken:
                    taken.add(q.broker)
                    picked.append(q)
                if len(picked) >= count:
                    return start, picked
            if picked:
                break
        return start, picked

    def by_group(self, group: str) -> tuple[int, GrpcQueue]:
        """``takeMessageQueueByMessageGroup(group)``: one queue, isolation ignored."""
        k = siphash_bucket(group, len(self.queues))
        return k, self.queues[k]

    def update(self, route: Sequence[GrpcQueue]) -> None:
        self.queues = publishing_queues(route)
