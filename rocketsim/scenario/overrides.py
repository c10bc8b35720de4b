"""``--set key.path=value`` overrides, applied to the raw mapping before validation (so an override is
checked exactly like a value in the file).
"""

from __future__ import annotations

import tomllib
from typing import Any

from rocketsim.scenario.config import ScenarioError


def parse_override(item: str) -> tuple[str, Any]:
    """``key.path=value`` -> (path, value); the value is read as a TOML literal, else as a string."""
    if "=" not in item:
        raise ScenarioError(f"--set {item!r} must look like key.path=value")
    key, text = item.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ScenarioError(f"--set {item!r} must name a dotted key path")
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        value = text
    except RecursionError:
        raise ScenarioError(f"--set {key} nests tables or arrays too deeply for a scenario") from None
    except ValueError as exc:  # an integer literal beyond Python's 4300 digits
        raise ScenarioError(f"--set {key} must be a TOML value, got {text[:40]!r}...: {exc}") from None
    return key, value


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Set each ``key.path=value`` into (a copy of) the raw mapping; lists are indexed by number."""
    import copy

    out = copy.deepcopy(raw)
    for item in overrides:
        key, value = parse_override(item)
        node: Any = out
        parts = key.split(".")
        for i, part in enumerate(parts[:-1]):
            if isinstance(node, list):
                if not part.isdigit() or int(part) >= len(node):
                    raise ScenarioError(
                        f"--set {key}: {'.'.join(parts[: i + 1])} is not an index of the list"
                    )
                node = node[int(part)]
            else:
                node = node.setdefault(part, {})
                if not isinstance(node, dict | list):
                    raise ScenarioError(f"--set {key}: {'.'.join(parts[: i + 1])} is not a table")
        last = parts[-1]
        if isinstance(node, list):
            if not last.isdigit() or int(last) >= len(node):
                raise ScenarioError(f"--set {key}: {last} is not an index of the list")
            node[int(last)] = value
        else:
            node[last] = value
    return out
