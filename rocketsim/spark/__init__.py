"""The Spark layer of rocketsim: session, Delta sink and table readers.

Unlike the core modules, this subpackage imports pyspark; nothing in the core imports it.
"""

from __future__ import annotations
