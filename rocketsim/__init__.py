"""rocketsim: simulate Apache RocketMQ producer sends at scale.

Four layers, each importing only the ones before it: the core (everything directly under ``rocketsim/``
and ``rocketsim/engine/``: pure Python, no I/O, no pyspark, no wall clock, no global random),
``rocketsim.warehouse`` (files and the Delta log: pyarrow, deltalake), ``rocketsim.present`` (charts,
the report, notebook helpers: matplotlib) and ``rocketsim.spark`` (the code that needs pyspark).
"""

from __future__ import annotations

__version__ = "0.1.0"
