"""rocketsim: simulate Apache RocketMQ producer sends at scale.

Four layers, each importing only the ones before it (``docs/design.md``): the core (pure Python, no I/O,
no pyspark, no wall clock, no global random: ``format/``, ``client/``, ``broker/``, ``scenario/``,
``tables/``, ``engine/``, ``stage/`` and the few foundations at this level), ``rocketsim.warehouse``
(files and the Delta log: pyarrow, deltalake), ``rocketsim.present`` (charts, the report, notebook
helpers: matplotlib) and ``rocketsim.spark`` (the code that needs pyspark).

The design's public module names (``rocketsim.codec``, ``rocketsim.send``, ``rocketsim.store``, ...) are
kept importable: :data:`PUBLIC_MODULES` maps each to the module that holds it now, and importing the
public name gives that very module (not a copy). The package's own code imports the modules where they
are.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

__version__ = "0.1.0"

# the flat module names users know (docs/design.md §3, the module map, and the other names the core had at
# its top level) -> where they are
PUBLIC_MODULES = {
    "rocketsim.message": "rocketsim.format.message",
    "rocketsim.codec": "rocketsim.format.codec",
    "rocketsim.compression": "rocketsim.format.compression",
    "rocketsim.validate": "rocketsim.format.validate",
    "rocketsim.versions": "rocketsim.client.versions",
    "rocketsim.route": "rocketsim.client.route",
    "rocketsim.fault": "rocketsim.client.fault",
    "rocketsim.send": "rocketsim.client.send",
    "rocketsim.outcomes": "rocketsim.client.outcomes",
    "rocketsim.brokers": "rocketsim.broker.latency",
    "rocketsim.broker_store": "rocketsim.broker.queue",
    "rocketsim.store": "rocketsim.broker.store",
    "rocketsim.broker_side": "rocketsim.broker.side",
    "rocketsim.transactions": "rocketsim.broker.transactions",
    "rocketsim.rebalance": "rocketsim.broker.rebalance",
    "rocketsim.workload": "rocketsim.scenario.workload",
    "rocketsim.variants": "rocketsim.scenario.variants",
    "rocketsim.capacity": "rocketsim.scenario.capacity",
    "rocketsim.schemas": "rocketsim.tables.schemas",
    "rocketsim.summaries": "rocketsim.tables.summaries",
    "rocketsim.reconcile": "rocketsim.tables.reconcile",
    "rocketsim.grouping": "rocketsim.tables.grouping",
}


class _PublicNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports a name of :data:`PUBLIC_MODULES` as the module it maps to."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> object:
        if name not in PUBLIC_MODULES:
            return None
        return importlib.machinery.ModuleSpec(name, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(PUBLIC_MODULES[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module it maps to has run."""


# first, so that a stale copy of a moved module elsewhere on the path is never found instead
if not any(isinstance(f, _PublicNames) for f in sys.meta_path):
    sys.meta_path.insert(0, _PublicNames())
