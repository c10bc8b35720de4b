"""``ROCKETSIM_ENGINE``: which send engine the user asked for (read by :mod:`rocketsim.engine`, which
chooses for a producer, and :mod:`rocketsim.engine.iterative`, which chooses for a round)."""

from __future__ import annotations

import os

from rocketsim.errors import ConfigError

ENGINE_VARIABLE = "ROCKETSIM_ENGINE"
REFERENCE = "reference"
COMPILED = "compiled"
ENGINES = (REFERENCE, COMPILED)

__all__ = ["COMPILED", "ENGINES", "ENGINE_VARIABLE", "REFERENCE", "chosen"]


def chosen() -> str | None:
    """The engine ``ROCKETSIM_ENGINE`` names (None: unset, the compiled one where it applies)."""
    value = os.environ.get(ENGINE_VARIABLE, "").strip()
    if not value:
        return None
    if value not in ENGINES:
        raise ConfigError(f"{ENGINE_VARIABLE} must be one of {', '.join(ENGINES)} (or unset), got {value!r}")
    return value
