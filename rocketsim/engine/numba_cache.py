"""Where numba keeps the compiled engine, found by what the code says rather than where it lies.

numba keys a cached function by its source file's path and stamps it with that file alone. Two things
go wrong with that here. A Spark worker imports the package from the zip ``spark-submit`` ships into a
new temporary directory per application (whenever the job is not started from the checkout), so numba's
zip locator never finds an earlier entry: every such run compiled the engine again in every worker (a
minute each) and left a new directory in the user-wide cache. And a compiled function inlines the
functions and freezes the constants it reads from other modules, which the stamp of its own file does
not cover.

:class:`EngineCacheLocator` answers for every ``njit(cache=True)`` function of ``rocketsim.engine``
when ``NUMBA_CACHE_DIR`` is set (``make``, ``spark-submit.sh`` and the tests set it): one directory,
``<NUMBA_CACHE_DIR>/rocketsim-engine``, whatever the path of the source, and one stamp, the hash of every
core source (``rocketsim/*.py`` and ``rocketsim/engine/*.py``), read from the checkout or from the zip
alike. :func:`install` puts it first in numba's list of locators; without ``NUMBA_CACHE_DIR`` numba's own
locators apply.
"""

from __future__ import annotations

import functools
import hashlib
import os
from importlib import resources
from typing import Any

from numba.core import caching, config

CACHE_SUBDIR = "rocketsim-engine"
# the packages whose sources the compiled code is made of (its own, the constants and rules it reads)
CORE_PACKAGES = ("rocketsim", "rocketsim.engine")


@functools.lru_cache(maxsize=1)
def core_sources_stamp() -> str:
    """The hash of every core source file, in name order (the same from a checkout or a zip)."""
    digest = hashlib.sha256()
    for package in CORE_PACKAGES:
        files = sorted(
            (f for f in resources.files(package).iterdir() if f.name.endswith(".py")), key=lambda f: f.name
        )
        for f in files:
            digest.update(f"{package}/{f.name}\0".encode())
            digest.update(f.read_bytes())
    return digest.hexdigest()


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
        if not config.CACHE_DIR or not py_func.__module__.startswith("rocketsim.engine."):
            return None
        return cls(py_func, py_file)


def install() -> None:
    """Put :class:`EngineCacheLocator` first among numba's locators (before any ``njit(cache=True)`` of
    the engine is made); nothing if this numba keeps them elsewhere."""
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    classes = getattr(impl, "_locator_classes", None)
    if isinstance(classes, list) and EngineCacheLocator not in classes:
        classes.insert(0, EngineCacheLocator)
