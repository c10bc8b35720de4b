"""The facade every scheduler calls: one producer's messages in, its ``send_attempts`` and ``send_results``
rows out, over Arrow.

The work is :mod:`rocketsim.engine` (the engine is chosen there, by ``ROCKETSIM_ENGINE``); this module keeps
the names the schedulers and the broker side use.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from rocketsim import engine
from rocketsim.engine.plan import SimOutput, SimulationError
from rocketsim.scenario import Scenario

__all__ = ["SimOutput", "SimulationError", "simulate", "simulate_producer"]


def simulate_producer(messages: pa.Table, sc: Scenario) -> SimOutput:
    """Simulate one producer's messages (schema ``MESSAGES`` without run_id, any row order)."""
    return engine.simulate_producer(messages, sc)


def simulate(messages: pa.Table, sc: Scenario) -> SimOutput:
    """Simulate any producers' messages: each producer separately, outputs in (producer, seq) order."""
    if messages.num_rows == 0:
        return SimOutput.empty()
    outs = []
    producer_col = messages.column("producer")
    for p in sorted(pc.unique(producer_col).to_pylist()):
        outs.append(simulate_producer(messages.filter(pc.equal(producer_col, p)), sc))
    return SimOutput(
        pa.concat_tables([o.attempts for o in outs]), pa.concat_tables([o.results for o in outs])
    )
