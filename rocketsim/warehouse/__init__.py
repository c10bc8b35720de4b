"""The warehouse layer: files and the Delta log, with pyarrow and deltalake (no pyspark).

More: docs/reference/modules.md, rocketsim/warehouse/__init__.py.
"""

from __future__ import annotations

__all__ = ["list_runs", "list_tables", "read_arrow", "read_pandas", "read_run"]


def __getattr__(name: str) -> object:
    if name in __all__:
        from rocketsim.warehouse import read

        return getattr(read, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
