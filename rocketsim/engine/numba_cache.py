"""Where numba keeps the compiled engine, found by what the code says rather than where it lies.

numba keys a cached function by its source file's path and stamps it with that file alone. Two things
go wrong with that here. A Spark worker imports the package from the zip ``spark-submit`` ships into a
new temporary directory per application (whenever the job is not started from the checkout), so numba's
zip locator never finds an earlier entry: every such run compiled the engine again in every worker (a
minute each) and left a new directory in the user-wide cache. And a compiled function inlines the
functions and freezes the constants it reads from other modules, which the stamp of its own file does
not cover.

More: docs/reference/modules.md, rocketsim/engine/numba_cache.py.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Iterator
from importlib import resources
from importlib.abc import Traversable
from typing import Any

from numba.core import caching, config

CACHE_SUBDIR = "rocketsim-engine"
# the package's layers above the core (docs/design.md §2) and its developer tools: the compiled code reads
# none of them; every other source is the core the compiled code is made of (its own, the constants and
# rules it reads)
OUTSIDE_CORE = ("warehouse", "present", "spark", "command", "bench")


def core_sources(root: Traversable | None = None, prefix: str = "") -> Iterator[tuple[str, Traversable]]:
    """Every core source file as (its path in the package, the file), in path order."""
    root = resources.files("rocketsim") if root is None else root
    for f in sorted(root.iterdir(), key=lambda f: f.name):
        if f.is_dir() and not prefix and f.name in OUTSIDE_CORE:
            continue
        if f.is_dir() and f.joinpath("__init__.py").is_file():
            yield from core_sources(f, f"{prefix}{f.name}/")
        elif f.name.endswith(".py"):
            yield f"{prefix}{f.name}", f


def sources_stamp(root: Traversable) -> str:
    """The hash of every core source file of the package at ``root``, in path order."""
    digest = hashlib.sha256()
    for name, f in core_sources(root):
        digest.update(f"{name}\0".encode())
        digest.update(f.read_bytes())
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def core_sources_stamp() -> str:
    """:func:`sources_stamp` of this package (the same from a checkout or a zip)."""
    return sources_stamp(resources.files("rocketsim"))


class EngineCacheLocator(caching._CacheLocator):
    """numba's cache locator for the compiled engine's functions (module docstring)."""

    def __init__(self, py_func: Any, py_file: str) -> None:
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = os.path.join(config.CACHE_DIR, CACHE_SUBDIR)

    def get_cache_path(self) -> str:
        return self._cache_path

    def get_source_stamp(self) -> str:
        return core_sources_stamp()

    def get_disambiguator(self) -> str:
        return str(self._lineno)

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> EngineCacheLocator | None:
        if not config.CACHE_DIR or not py_func.__module__.startswith("rocketsim."):
            return None
        return cls(py_func, py_file)


def install() -> None:
    """Put :class:`EngineCacheLocator` first among numba's locators (before any ``njit(cache=True)`` of
    the engine is made); nothing if this numba keeps them elsewhere."""
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    classes = getattr(impl, "_locator_classes", None)
    if isinstance(classes, list) and EngineCacheLocator not in classes:
        classes.insert(0, EngineCacheLocator)
