"""A comparison's variant, simulated again for its OMB export.

A comparison keeps no per-message rows (only the producers' summary aggregates leave its tasks:
:mod:`rocketsim.spark.compare`), and OMB's percentiles need every send of a window. A run is a function
of its scenario and seed (design §4: the same tables whatever the partitioning), so the variant's sends
are made again here, in this process, exactly as the comparison's tasks made them
(:func:`rocketsim.stage.sweeps.variant_aggregates`: each producer's messages generated and simulated alone;
:func:`rocketsim.stage.sweeps.whole_run_aggregates`: every producer together with closed-loop brokers), and
folded a chunk at a time. The export then checks them against the comparison's own ``comparisons`` rows
(:mod:`rocketsim.warehouse.omb`).
"""

from __future__ import annotations

import pyarrow as pa

from rocketsim import engine
from rocketsim.broker.queue import OPEN
from rocketsim.omb.result import OMB_WINDOW_MS, RESULT_COLUMNS, PublishFold
from rocketsim.scenario import Scenario, workload
from rocketsim.stage.tables import producer_message_chunks, producer_messages


def variant_fold(sc: Scenario, window_ms: int = OMB_WINDOW_MS) -> PublishFold:
    """Every send of a run of ``sc``, simulated again and folded (:class:`PublishFold`)."""
    fold = PublishFold(window_ms)
    shares = workload.producer_shares(sc)
    if sc.coupling == OPEN:
        for share in shares:
            for chunk in engine.simulate_chunks(producer_message_chunks(sc, share), sc):
                fold.add(chunk.results.select(list(RESULT_COLUMNS)))
    else:
        messages = pa.concat_tables([producer_messages(sc, s) for s in shares])
        fold.add(engine.simulate(messages, sc).results.select(list(RESULT_COLUMNS)))
    return fold
