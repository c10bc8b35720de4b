"""Compile the compiled engine once, into numba's on-disk cache: ``python -m rocketsim.engine.warm``.

``make`` runs it after installing (and again whenever ``engine/compiled.py`` changes), so the first
``make run`` or ``make test`` does not compile the kernel inside every Spark worker or test process at
once. A small mixed run (every message type and send mode, the fault strategy on) reaches every step of
the loop; the same run with ``brokers.coupling = iterative`` compiles the closed-loop store
(:mod:`rocketsim.engine.compiled_store`).
"""

from __future__ import annotations

import sys
import time

from rocketsim.engine import compiled, iterative
from rocketsim.scenario import Scenario, scenario_from_mapping, workload

WARM_SCENARIO = {
    "name": "warm",
    "cluster": {"brokers": ["broker-a", "broker-b"], "write_queues": 2, "read_queues": 2},
    "producers": {
        "count": 1,
        "threads": 2,
        "send_latency_fault_enable": True,
        "send_mode": {"sync": 0.6, "async": 0.3, "oneway": 0.1},
    },
    "workload": {
        "messages": 200,
        "message_types": {"normal": 0.7, "ordered": 0.1, "delay": 0.1, "transaction": 0.1},
    },
    "brokers": {"default": {"errors": {"system_busy": 0.05}}},
}


def warm_scenario() -> Scenario:
    """The small scenario whose run compiles every function of the loop."""
    return scenario_from_mapping(WARM_SCENARIO)


def main() -> int:
    """Run the compiled engine once on :func:`warm_scenario`; say how long it took."""
    started = time.perf_counter()
    sc = warm_scenario()
    messages = workload.generate(sc, [0])
    compiled.simulate_producer(messages, sc)
    for _ in compiled.simulate_chunks(messages.to_batches(max_chunksize=64), sc):  # streamed: give, take
        pass
    closed = scenario_from_mapping(
        {**WARM_SCENARIO, "brokers": {**WARM_SCENARIO["brokers"], "coupling": "iterative"}}
    )
    iterative.simulate_iterative({0: messages}, closed, max_rounds=2)
    print(f"compiled engine ready ({time.perf_counter() - started:.0f} s: numba compile, or cache load)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
