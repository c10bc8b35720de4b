"""Consumer load balancing in clustering mode: which consumer of a group reads which message queue.

``RebalanceImpl.rebalanceByTopic`` takes the topic's readable queues (``topicSubscribeInfoTable``: every
broker whose permission allows reading, queue ids ``0 .. readQueueNums - 1``), sorts them
(``MessageQueue.compareTo``: topic, broker name, queue id) and the group's consumer ids, and asks the
strategy; :func:`allocate_averagely` is ``AllocateMessageQueueAveragely``: consumer ``i`` of ``C`` gets a
contiguous block of the sorted queues, the first ``len(queues) % C`` consumers one queue more.
Producers write to the write queues (``0 .. writeQueueNums - 1``), so with fewer read than write queues
some messages are never consumed; with more consumers than queues some consumers idle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from rocketsim.client.route import PERM_READ, PERM_WRITE
from rocketsim.errors import RocketSimError
from rocketsim.scenario import Scenario

__all__ = [
    "MessageQueue",
    "RebalanceError",
    "allocate_averagely",
    "allocation",
    "consumer_ids",
    "readable_queues",
    "writable_queues",
]

T = TypeVar("T")


class RebalanceError(RocketSimError, ValueError):
    """What ``AbstractAllocateMessageQueueStrategy.check`` refuses (``IllegalArgumentException``)."""


@dataclass(frozen=True)
class MessageQueue:
    """``MessageQueue(topic, brokerName, queueId)``; sorts as ``compareTo`` (Java String order)."""

    topic: str
    broker_name: str
    queue_id: int

    def sort_key(self) -> tuple[bytes, bytes, int]:
        # String.compareTo compares UTF-16 code units: the order of their big-endian bytes
        return (
            self.topic.encode("utf-16-be", "surrogatepass"),
            self.broker_name.encode("utf-16-be", "surrogatepass"),
            self.queue_id,
        )


def allocate_averagely(
    consumer_group: str, current_cid: str, mq_all: Sequence[T], cid_all: Sequence[str]
) -> list[T]:
    """``AllocateMessageQueueAveragely.allocate``: the queues of ``current_cid`` (lists already sorted).

    Raises :class:`RebalanceError` with upstream's text for an empty id or list; a consumer id not in
    ``cid_all`` gets nothing (upstream logs "[BUG]" and returns an empty list).
    """
    if not current_cid:
        raise RebalanceError("currentCID is empty")
    if not mq_all:
        raise RebalanceError("mqAll is null or mqAll empty")
    if not cid_all:
        raise RebalanceError("cidAll is null or cidAll empty")
    if current_cid not in cid_all:
        return []
    index = list(cid_all).index(current_cid)
    n, c = len(mq_all), len(cid_all)
    mod = n % c
    bigger = mod > 0 and index < mod  # the first n % c consumers take one queue more
    average = 1 if n <= c else n // c + (1 if bigger else 0)
    start = index * average if bigger else index * average + mod
    count = min(average, n - start)
    return [mq_all[(start + i) % n] for i in range(max(count, 0))]


def consumer_ids(count: int) -> list[str]:
    """Ids of a group's ``count`` consumers, zero-padded so that sorted order is their number order.

    (Real ids are ``ip@instanceName`` and sort as strings; the padding keeps ``consumer`` k the k-th.)
    """
    width = len(str(max(count - 1, 0)))
    return [f"consumer-{i:0{width}d}" for i in range(count)]


def _perm(sc: Scenario, broker: str) -> int:
    return PERM_READ if broker in sc.cluster.read_only_brokers else sc.cluster.perm


def readable_queues(sc: Scenario, topic: str) -> list[MessageQueue]:
    """``topicSubscribeInfoTable`` of ``topic``, sorted as ``Collections.sort(mqAll)``."""
    queues = [
        MessageQueue(topic, b, q)
        for b in sc.cluster.brokers
        if _perm(sc, b) & PERM_READ
        for q in range(sc.cluster.read_queues)
    ]
    return sorted(queues, key=MessageQueue.sort_key)


def writable_queues(sc: Scenario, topic: str) -> list[MessageQueue]:
    """The queues producers can write: writable brokers, ids ``0 .. write_queues - 1``."""
    queues = [
        MessageQueue(topic, b, q)
        for b in sc.cluster.brokers
        if _perm(sc, b) & PERM_WRITE
        for q in range(sc.cluster.write_queues)
    ]
    return sorted(queues, key=MessageQueue.sort_key)


def allocation(sc: Scenario) -> list[dict[str, object]]:
    """Every group's view of every workload topic, one row per (consumer, queue):

    ``consumer_group``, ``consumer``, ``topic``, ``broker``, ``queue_id``. A queue producers write but no
    consumer reads gets a row with ``consumer`` None; a consumer without a queue gets one with
    ``broker`` and ``queue_id`` None.
    """
    rows: list[dict[str, object]] = []
    for group in sc.consumers.groups:
        cids = consumer_ids(group.count)
        for topic in sc.workload.topics:
            mq_all = readable_queues(sc, topic)
            assigned: set[MessageQueue] = set()
            for cid in sorted(cids):
                mine = allocate_averagely(group.name, cid, mq_all, sorted(cids)) if mq_all else []
                assigned.update(mine)
                for mq in mine:
                    rows.append(_row(group.name, cid, mq))
                if not mine:
                    rows.append(
                        {
                            "consumer_group": group.name,
                            "consumer": cid,
                            "topic": topic,
                            "broker": None,
                            "queue_id": None,
                        }
                    )
            for mq in writable_queues(sc, topic):
                if mq not in assigned:
                    rows.append(_row(group.name, None, mq))
    return rows


def _row(group: str, consumer: str | None, mq: MessageQueue) -> dict[str, object]:
    return {
        "consumer_group": group,
        "consumer": consumer,
        "topic": mq.topic,
        "broker": mq.broker_name,
        "queue_id": mq.queue_id,
    }
