"""The send engine, chosen here and nowhere else: any producers' messages in, their ``send_attempts`` and
``send_results`` rows out, over Arrow (:func:`simulate`; one producer: :func:`simulate_producer`, a chunk
at a time: :func:`simulate_chunks`; producers coupled through closed-loop brokers: :func:`simulate_coupled`).

Two implementations give the same tables: :mod:`rocketsim.engine.reference` (the readable event loop over
:mod:`rocketsim.client.send` and :mod:`rocketsim.client.fault`; every input) and
:mod:`rocketsim.engine.compiled` (numba,
~100x faster; the inputs its ``supports`` accepts). Both read :mod:`rocketsim.engine.plan`.

More: docs/reference/modules.md, rocketsim/engine/__init__.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from rocketsim.broker.queue import ITERATIVE, JOINT, OPEN
from rocketsim.engine import compiled, grpc, iterative, joint, reference
from rocketsim.engine.choice import COMPILED, ENGINE_VARIABLE, ENGINES, REFERENCE, chosen
from rocketsim.engine.iterative import IterativeRun
from rocketsim.engine.joint import JointRun
from rocketsim.engine.plan import (
    SimChunk,
    SimOutput,
    SimulationError,
    chunk_cuts,
    gather_chunks,
    one_producer,
    slice_output,
)
from rocketsim.scenario import Scenario

__all__ = [
    "COMPILED",
    "ENGINES",
    "ENGINE_VARIABLE",
    "REFERENCE",
    "IterativeRun",
    "JointRun",
    "SimChunk",
    "SimOutput",
    "SimulationError",
    "chosen",
    "coupled_run",
    "simulate",
    "simulate_chunks",
    "simulate_coupled",
    "simulate_producer",
]


def _refuse_compiled(name: str | None) -> None:
    if name == COMPILED:
        raise SimulationError(
            "the compiled engine does not cover producers.client_family = grpc (it runs on the readable "
            "engine: unset ROCKETSIM_ENGINE)"
        )


def simulate_producer(messages: pa.Table, sc: Scenario) -> SimOutput:
    """Simulate one producer's messages (schema ``MESSAGES`` without run_id, any row order) with the engine
    ``ROCKETSIM_ENGINE`` names, else the compiled one where it supports them, else the reference."""
    name = chosen()
    if sc.producers.grpc_client is not None:
        _refuse_compiled(name)
        return grpc.simulate_producer(messages, sc)
    if sc.coupling != OPEN:  # the closed-loop store (this producer alone on it)
        if name == COMPILED and sc.coupling == JOINT:
            raise SimulationError(f"the compiled engine does not cover brokers.coupling = {sc.coupling}")
        p = one_producer(messages)
        run = joint.simulate_joint if sc.coupling == JOINT else iterative.simulate_iterative
        return run({p: messages}, sc).outputs[p]
    if name == REFERENCE:
        return reference.simulate_producer(messages, sc)
    if name == COMPILED:
        return compiled.simulate_producer(messages, sc)
    if compiled.unsupported(sc, messages) is None:
        return compiled.simulate_covered(messages, sc)
    return reference.simulate_producer(messages, sc)


def simulate_chunks(chunks: Iterable[pa.Table | pa.RecordBatch], sc: Scenario) -> Iterator[SimChunk]:
    """One producer's messages given in chunks (seq order) -> its tables in chunks
    (:class:`rocketsim.engine.plan.SimChunk`: concatenated, :func:`simulate_producer`'s tables), with the
    engine :func:`simulate_producer` would use: the compiled one streams the chunks (a producer's memory is
    bounded whatever its size); the reference, the closed-loop store and autoBatch run whole, then cut."""
    name = chosen()
    if sc.producers.grpc_client is not None:
        _refuse_compiled(name)
        return grpc.simulate_chunks(chunks, sc)
    whole = sc.coupling != OPEN or holds_across_chunks(sc)
    if not whole and name != REFERENCE:
        it = iter(chunks)
        first = next(it, None)
        if first is None:
            return iter(())
        table = first if isinstance(first, pa.Table) else pa.Table.from_batches([first])
        # which engine covers the messages is told from the first chunk (the others are checked as
        # they come: the compiled engine refuses input it does not cover)
        if name == COMPILED or compiled.unsupported(sc, table) is None:
            return compiled.simulate_chunks(itertools.chain([table], it), sc)
        chunks = itertools.chain([table], it)
    messages, ends = gather_chunks(chunks)
    if whole and messages.num_rows:  # the closed-loop store, the accumulator: whole, then cut
        return iter(slice_output(messages, simulate_producer(messages, sc), chunk_cuts(messages, ends)))
    parts = [messages.slice(a, b - a) for a, b in zip([0, *ends[:-1]], ends, strict=True)]
    return reference.simulate_chunks(parts, sc)


def holds_across_chunks(sc: Scenario) -> bool:
    """Whether a producer's sends depend on messages far apart in seq order (autoBatch's accumulator holds
    messages per topic and tag): its messages are then simulated whole, not streamed in chunks."""
    settings = sc.producers.auto_batching
    return settings is not None and settings.auto_batch


def simulate(messages: pa.Table, sc: Scenario) -> SimOutput:
    """Simulate any producers' messages, outputs in (producer, seq) order: each producer separately, or
    all of them together against the closed-loop brokers when ``brokers.coupling`` is not ``open``."""
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
        return joint.simulate_joint(messages, sc)
    if sc.coupling == ITERATIVE:
        return iterative.simulate_iterative(messages, sc)
    raise SimulationError(f"simulate_coupled needs brokers.coupling joint or iterative, got {sc.coupling}")
