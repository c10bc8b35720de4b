"""rocketsim: simulate Apache RocketMQ producer sends at scale.

The core modules (everything directly under ``rocketsim/`` except the ``spark`` subpackage) are pure
Python: no I/O, no pyspark, no wall clock, no global random.
"""

from __future__ import annotations

__version__ = "0.1.0"
