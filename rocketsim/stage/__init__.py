"""The stage of a run, in the core: what its tasks compute, as plain functions over Arrow (no I/O).

One pass (design §6), over the stage graph (:mod:`rocketsim.stage.graph`: which stage reads which
tables): producer tasks, each over a bin of producers (:mod:`~rocketsim.stage.producer`; coupled
producers: :mod:`~rocketsim.stage.coupled`), then one broker task per broker
(:mod:`~rocketsim.stage.broker`), then the driver's finish step (:mod:`~rocketsim.stage.driver`); a
comparison's and a capacity sweep's tasks (:mod:`~rocketsim.stage.sweeps`). What one producer or broker
computes is a dataclass (:mod:`~rocketsim.stage.tables`). The tasks write and read only through the
protocols of :mod:`~rocketsim.stage.protocols`: a scheduler decides where they run and hands them
file-backed implementations (:mod:`rocketsim.warehouse.stage_files`), the tests in-memory ones
(:mod:`~rocketsim.stage.memory`).
"""

from __future__ import annotations

import importlib

# the package's names -> the module that holds each, imported when first asked for (so that importing one
# module of the package, e.g. the graph, does not import every task)
_EXPORTS = {
    "broker": ("broker_task",),
    "coupled": ("iterate_rounds", "round_task"),
    "driver": ("FinishedStage", "finish_stage"),
    "graph": ("STAGES", "derived_tables", "tables_read"),
    "plan": ("CHUNK_ROWS", "StagePlan", "balanced_bins", "producer_bins", "stage_bins"),
    "producer": ("producer_task",),
    "protocols": ("StageIO",),
    "sweeps": ("WholeRun", "variant_aggregates", "whole_run_aggregates"),
    "tables": (
        "MESSAGES_DATA",
        "BrokerFold",
        "BrokerTables",
        "ProducerTables",
        "broker_tables",
        "producer_chunks",
        "producer_message_chunks",
        "producer_messages",
        "producer_tables",
        "with_records",
    ),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> object:
    if name not in _WHERE:
        raise AttributeError(f"module 'rocketsim.stage' has no attribute {name!r}")
    return getattr(importlib.import_module(f"rocketsim.stage.{_WHERE[name]}"), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
