"""Latency-fault tolerance and queue selection of the RocketMQ producer, for each client line.

A line is a row of :data:`rocketsim.client.versions.REMOTING_LINES` (``ClientVersion.line``), given by
itself or its name (``'R4.3'`` ... ``'R5.3.3'``); what differs between lines is asked of its named
columns (``line.uses_queue_filters``, ``line.isolation_only_extends``, ...), never of its name. Read in
order: :mod:`~rocketsim.client.fault.updates` (:data:`FAULT_UPDATES`, the ``updateFaultItem`` call each
outcome makes), :mod:`~rocketsim.client.fault.index` (random sources, ``ThreadLocalIndex``),
:mod:`~rocketsim.client.fault.table` (``LatencyFaultToleranceImpl``) and
:mod:`~rocketsim.client.fault.strategy` (``MQFaultStrategy``). Java int arithmetic is
:mod:`rocketsim.javaint`; nothing reads the wall clock (every time is an argument, simulated ms);
``on_event`` hooks, when set, report what happened in the conformance vectors' event format.
"""

# Mirrored by engine/compiled.py (select_queue, fault_table_update, pick_one_at_least, the kernel's
# fault-table arrays); tests/test_engines.py compares them. FAULT_UPDATES is data both engines read.

from __future__ import annotations

from rocketsim.client.fault.index import (
    NEXT_INT,
    NEXT_INT_MAX,
    EventHook,
    IntSource,
    ReplayExhaustedError,
    ReplayIntSource,
    ThreadKey,
    ThreadLocalIndex,
)
from rocketsim.client.fault.strategy import (
    Detector,
    FaultStrategy,
    FaultUpdate,
    new_strategy,
    select_avoiding_broker_4_9,
    select_avoiding_broker_one_tick,
    select_filtered,
    select_plain,
)
from rocketsim.client.fault.table import (
    DETECT_INTERVAL_MS,
    DETECT_PERIOD_MS,
    DETECT_TIMEOUT_MS,
    FaultArrays,
    FaultItem,
    FaultItemView,
    FaultTable,
    IndexOutOfBounds,
    queue_pos,
    shuffle,
)
from rocketsim.client.fault.updates import (
    FAULT_UPDATES,
    FaultUpdateRule,
    Reachable,
    Site,
    fault_update_rule,
    fault_updates,
)

__all__ = [
    "DETECT_INTERVAL_MS",
    "DETECT_PERIOD_MS",
    "DETECT_TIMEOUT_MS",
    "Detector",
    "EventHook",
    "FAULT_UPDATES",
    "FaultArrays",
    "FaultItem",
    "FaultItemView",
    "FaultStrategy",
    "FaultTable",
    "FaultUpdate",
    "FaultUpdateRule",
    "IndexOutOfBounds",
    "IntSource",
    "NEXT_INT",
    "NEXT_INT_MAX",
    "Reachable",
    "ReplayExhaustedError",
    "ReplayIntSource",
    "Site",
    "ThreadKey",
    "ThreadLocalIndex",
    "fault_update_rule",
    "fault_updates",
    "new_strategy",
    "queue_pos",
    "select_avoiding_broker_4_9",
    "select_avoiding_broker_one_tick",
    "select_filtered",
    "select_plain",
    "shuffle",
]
