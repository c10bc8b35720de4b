"""A value as a scenario file spells it (TOML): the text the scenario's errors and the effective scenario
quote values in."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any


def toml_value(value: Any) -> str:
    """``value`` as a scenario file spells it: ``true``, ``[1, 2]``, ``{ sync = 1.0 }``, ``'text'`` (a
    literal string; a basic one when it holds a quote, a backslash or a control character); ``nothing``
    for None (TOML has no null)."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        plain = not any(c in value for c in "'\\") and all(c >= " " and c != "\x7f" for c in value)
        return f"'{value}'" if plain else json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        items = ", ".join(f"{_toml_key(k)} = {toml_value(v)}" for k, v in value.items())
        return f"{{ {items} }}" if items else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return repr(value) if isinstance(value, float) else str(value)


def _toml_key(key: Any) -> str:
    text = str(key)
    bare = text and all(c.isascii() and (c.isalnum() or c in "-_") for c in text)
    return text if bare else json.dumps(text, ensure_ascii=False)
