"""The facade every scheduler calls: one producer's messages in, its ``send_attempts`` and ``send_results``
rows out, over Arrow.

The work is :mod:`rocketsim.engine` (the engine is chosen there, by ``ROCKETSIM_ENGINE``); this module keeps
the names the schedulers and the broker side use.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from rocketsim import engine
from rocketsim.broker.queue import ITERATIVE, JOINT, OPEN
from rocketsim.engine.iterative import IterativeRun, simulate_iterative
from rocketsim.engine.joint import JointRun, simulate_joint
from rocketsim.engine.plan import SimChunk, SimOutput, SimulationError
from rocketsim.scenario import Scenario

__all__ = [
    "SimChunk",
    "SimOutput",
    "SimulationError",
    "simulate",
    "simulate_chunks",
    "simulate_coupled",
    "simulate_producer",
]


def simulate_producer(messages: pa.Table, sc: Scenario) -> SimOutput:
    """Simulate one producer's messages (schema ``MESSAGES`` without run_id, any row order)."""
    return engine.simulate_producer(messages, sc)


def simulate_chunks(chunks: Iterable[pa.Table | pa.RecordBatch], sc: Scenario) -> Iterator[SimChunk]:
    """Simulate one producer's messages given in chunks in seq order (e.g.
    :func:`rocketsim.scenario.workload.generate_producer`'s batches): its tables in chunks of consecutive
    messages (:class:`SimChunk`) whose concatenation is :func:`simulate_producer`'s tables."""
    return engine.simulate_chunks(chunks, sc)


def simulate(messages: pa.Table, sc: Scenario) -> SimOutput:
    """Simulate any producers' messages, outputs in (producer, seq) order: each producer separately, or
    all of them together against the closed-loop brokers when ``brokers.coupling`` is ``joint``."""
    if messages.num_rows == 0:
        return SimOutput.empty()
    producer_col = messages.column("producer")
    by_producer = {
        p: messages.filter(pc.equal(producer_col, p)) for p in sorted(pc.unique(producer_col).to_pylist())
    }
    if sc.coupling != OPEN:
        outs = list(simulate_coupled(by_producer, sc).values())
    else:
        outs = [simulate_producer(m, sc) for m in by_producer.values()]
    return SimOutput(
        pa.concat_tables([o.attempts for o in outs]), pa.concat_tables([o.results for o in outs])
    )


def simulate_coupled(messages: Mapping[int, pa.Table], sc: Scenario) -> dict[int, SimOutput]:
    """Every producer of a run (producer -> its messages) against the closed-loop brokers they share
    (``brokers.coupling`` joint: :func:`rocketsim.engine.joint.simulate_joint`; iterative:
    :func:`rocketsim.engine.iterative.simulate_iterative`); outputs by producer."""
    return coupled_run(messages, sc).outputs


def coupled_run(messages: Mapping[int, pa.Table], sc: Scenario) -> JointRun | IterativeRun:
    """:func:`simulate_coupled` with what the coupling reports (the iterative rounds and residual)."""
    if sc.coupling == JOINT:
        return simulate_joint(messages, sc)
    if sc.coupling == ITERATIVE:
        return simulate_iterative(messages, sc)
    raise SimulationError(f"simulate_coupled needs brokers.coupling joint or iterative, got {sc.coupling}")
