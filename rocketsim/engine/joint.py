"""``brokers.coupling = "joint"``: every producer of a run and the closed-loop brokers in one event loop.

Each producer is the readable engine's :class:`rocketsim.engine.reference.ProducerSimulation`, its own
state as ever; they share one :class:`rocketsim.broker.queue.StoreCluster`, and their events are handled
in one time order: (time, completions before starts, producer, the producer's own order). So every request
reaches its broker after every request that started earlier, from any producer, and the store decides it
exactly (:mod:`rocketsim.broker.queue`). The reference of the coupled model: exact, one core; the
scalable method is :mod:`rocketsim.engine.iterative`.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa

from rocketsim.broker.queue import StoreCluster
from rocketsim.client.heap import client_heap
from rocketsim.client.host import shared_host
from rocketsim.engine.plan import SimOutput, prepare
from rocketsim.engine.reference import ProducerSimulation, engine_output, producer_tables, sends_of
from rocketsim.scenario import Scenario

__all__ = ["JointRun", "simulate_joint"]


@dataclass(frozen=True)
class JointRun:
    """The outputs of a joint run, per producer, and the brokers' stores at its end."""

    outputs: dict[int, SimOutput]
    stores: StoreCluster


def simulate_joint(messages: Mapping[int, pa.Table], sc: Scenario) -> JointRun:
    """Simulate the producers' messages (producer -> its rows, schema ``MESSAGES`` without run_id) together
    against the closed-loop brokers."""
    host = shared_host(sc) if sc.producers.shared_host else None
    jvm = client_heap(sc, host) if host is not None else None  # one process: one heap
    stores = StoreCluster.from_scenario(sc, host)
    runs = {}
    answers: dict = {}
    starts: dict = {}
    heap: list[tuple[int, int, int, Iterator[tuple[int, int]]]] = []
    for p in sorted(messages):
        if messages[p].num_rows == 0:
            continue
        prep = prepare(messages[p], sc)
        sends = sends_of(prep)
        done: list = []
        sim = ProducerSimulation(sc, p, stores, host, jvm)
        steps = sim.stepper(sends, done)
        runs[p] = (prep, sends, done)
        answers[p] = sim.store_answers
        starts[p] = sim.start_us
        first = next(steps, None)
        if first is not None:
            heapq.heappush(heap, (first[0], first[1], p, steps))
    while heap:
        _, _, p, steps = heap[0]
        following = next(steps, None)  # handles the event, says when its next one is
        if following is None:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, (following[0], following[1], p, steps))
    outputs = {p: SimOutput.empty() for p in messages}
    for p, (prep, sends, done) in runs.items():
        out, ranks = engine_output(sc, len(sends), done, answers[p], starts[p])
        out.texts = [stores.fill_sizes(t) for t in out.texts]
        outputs[p] = producer_tables(prep, out, ranks)
    return JointRun(outputs, stores)
