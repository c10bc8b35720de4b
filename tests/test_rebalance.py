"""AllocateMessageQueueAveragely against upstream's example and hand-computed cases; the topic's queues
as the consumer sees them; a scenario's allocation rows."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketsim.broker.rebalance import (
    MessageQueue,
    RebalanceError,
    allocate_averagely,
    allocation,
    consumer_ids,
    readable_queues,
)
from rocketsim.scenario import ScenarioError, scenario_from_mapping


def _queues(n: int) -> list[MessageQueue]:
    return [MessageQueue("topic", "brokerName", i) for i in range(n)]


def _all(mqs: list[MessageQueue], cids: list[str]) -> list[list[int]]:
    return [[mq.queue_id for mq in allocate_averagely("", c, mqs, cids)] for c in cids]


def test_upstream_example_four_consumers_ten_queues() -> None:
    """AllocateMessageQueueAveragelyTest: sizes {3, 3, 2, 2}; the blocks are contiguous."""
    cids = [f"CID_PREFIX{i}" for i in range(4)]
    assert _all(_queues(10), cids) == [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]


@pytest.mark.parametrize(
    ("queues", "consumers", "expected"),
    [
        (8, 3, [[0, 1, 2], [3, 4, 5], [6, 7]]),
        (8, 4, [[0, 1], [2, 3], [4, 5], [6, 7]]),
        (3, 5, [[0], [1], [2], [], []]),  # more consumers than queues: the last ones idle
        (5, 1, [[0, 1, 2, 3, 4]]),
        (7, 7, [[0], [1], [2], [3], [4], [5], [6]]),
    ],
)
def test_hand_computed_allocations(queues: int, consumers: int, expected: list[list[int]]) -> None:
    assert _all(_queues(queues), [f"c{i}" for i in range(consumers)]) == expected


def test_refusals_carry_upstream_text() -> None:
    mqs = _queues(2)
    with pytest.raises(RebalanceError, match="^currentCID is empty$"):
        allocate_averagely("g", "", mqs, ["a"])
    with pytest.raises(RebalanceError, match="^mqAll is null or mqAll empty$"):
        allocate_averagely("g", "a", [], ["a"])
    with pytest.raises(RebalanceError, match="^cidAll is null or cidAll empty$"):
        allocate_averagely("g", "a", mqs, [])
    assert allocate_averagely("g", "stranger", mqs, ["a", "b"]) == []  # upstream logs [BUG], returns empty


@given(st.integers(1, 200), st.integers(1, 60))
def test_every_queue_goes_to_exactly_one_consumer(queues: int, consumers: int) -> None:
    blocks = _all(_queues(queues), [f"c{i:03d}" for i in range(consumers)])
    assert sorted(q for b in blocks for q in b) == list(range(queues))
    sizes = [len(b) for b in blocks]
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


def test_queues_sort_as_message_queue_compare_to() -> None:
    mqs = [MessageQueue("T", "broker-b", 10), MessageQueue("T", "broker-a", 2), MessageQueue("S", "z", 0)]
    mqs += [MessageQueue("T", "broker-b", 2), MessageQueue("T", "Broker-c", 0)]
    ordered = sorted(mqs, key=MessageQueue.sort_key)
    assert [(m.topic, m.broker_name, m.queue_id) for m in ordered] == [
        ("S", "z", 0),
        ("T", "Broker-c", 0),  # 'B' < 'b' in String.compareTo
        ("T", "broker-a", 2),
        ("T", "broker-b", 2),
        ("T", "broker-b", 10),  # queue ids compare as numbers
    ]


def test_consumer_ids_sort_in_number_order() -> None:
    ids = consumer_ids(12)
    assert ids == sorted(ids) and ids[0] == "consumer-00" and ids[11] == "consumer-11"


def test_scenario_allocation_with_unread_queues_and_idle_consumers() -> None:
    sc = scenario_from_mapping(
        {
            "cluster": {
                "brokers": ["broker-b", "broker-a", "broker-r"],
                "write_queues": 3,
                "read_queues": 2,
                "read_only_brokers": ["broker-r"],
            },
            "workload": {"topics": ["TopicTest"]},
            "consumers": {"groups": [{"name": "few", "count": 2}, {"name": "many", "count": 7}]},
        }
    )
    assert [(m.broker_name, m.queue_id) for m in readable_queues(sc, "TopicTest")] == [
        ("broker-a", 0),
        ("broker-a", 1),
        ("broker-b", 0),
        ("broker-b", 1),
        ("broker-r", 0),  # a read-only broker is still read
        ("broker-r", 1),
    ]
    rows = allocation(sc)
    few = [(r["consumer"], r["broker"], r["queue_id"]) for r in rows if r["consumer_group"] == "few"]
    assert few == [
        ("consumer-0", "broker-a", 0),
        ("consumer-0", "broker-a", 1),
        ("consumer-0", "broker-b", 0),
        ("consumer-1", "broker-b", 1),
        ("consumer-1", "broker-r", 0),
        ("consumer-1", "broker-r", 1),
        (None, "broker-a", 2),  # written (write_queues 3) but never read (read_queues 2)
        (None, "broker-b", 2),
    ]
    many = [r for r in rows if r["consumer_group"] == "many"]
    assert [r["consumer"] for r in many if r["broker"] is None] == ["consumer-6"]  # 7 consumers, 6 queues


def test_consumer_group_keys_are_validated() -> None:
    with pytest.raises(ScenarioError, match=r"consumers.groups\[1\].name must not repeat a group name"):
        scenario_from_mapping({"consumers": {"groups": [{"name": "g"}, {"name": "g"}]}})
    with pytest.raises(ScenarioError, match=r"consumers.groups\[0\].count must be between 1 and 10000"):
        scenario_from_mapping({"consumers": {"groups": [{"name": "g", "count": 0}]}})
