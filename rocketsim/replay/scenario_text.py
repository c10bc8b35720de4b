"""The replay's scenario file: the user's base scenario as they wrote it (cluster, producers, workload,
brokers, comments and all), its own fault timeline replaced by the incident's, under a new name.

The base text is kept line for line but for its ``[[faults]]`` tables (each runs to the next table
header) and its top-level ``name``; the new name goes first, the incident's faults last. The result is
loaded back (:func:`rocketsim.scenario.scenario_from_mapping`) so a file that would not run is never
written: a ``ScenarioError`` names the key.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence

from rocketsim.replay.timeline import Fault
from rocketsim.scenario import Scenario, ScenarioError, scenario_from_mapping

_HEADER = re.compile(r"^\s*\[")
_FAULTS = re.compile(r"^\s*\[\[\s*faults\s*\]\]\s*(#.*)?$")
_NAME = re.compile(r"^\s*name\s*=")


def toml_value(value: object) -> str:
    """A TOML literal of a string or number."""
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    if isinstance(value, float):
        return repr(value) if value != int(value) or abs(value) >= 1e16 else f"{value:.1f}"
    return str(value)


def faults_toml(faults: Sequence[Fault]) -> str:
    """``[[faults]]`` tables of the faults, one after the other."""
    blocks = []
    for f in faults:
        lines = ["[[faults]]", *(f"{k} = {toml_value(v)}" for k, v in f.items())]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _without_faults_and_name(base_text: str) -> list[str]:
    lines = base_text.splitlines()
    out: list[str] = []
    in_faults = seen_header = False
    for line in lines:
        if _HEADER.match(line):
            seen_header = True
            in_faults = bool(_FAULTS.match(line))
            if in_faults:
                continue
        if in_faults or (not seen_header and _NAME.match(line)):
            continue
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return out


def replay_text(
    base_text: str, name: str, header: Sequence[str], faults: Sequence[Fault]
) -> tuple[str, Scenario]:
    """The scenario text of the replay and the scenario it loads to; ``header``: comment lines that say
    where it comes from."""
    kept = _without_faults_and_name(base_text)
    try:
        left = tomllib.loads("\n".join(kept))
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"the base scenario is not valid TOML: {exc}") from None
    if "faults" in left:
        raise ScenarioError("the base scenario's faults must be written as [[faults]] tables to be replaced")
    parts = [*(f"# {h}" for h in header), f"name = {toml_value(name)}", *kept]
    if faults:
        parts += ["", "# the incident's fault timeline (seconds from the first sample)", faults_toml(faults)]
    text = "\n".join(parts) + "\n"
    raw = tomllib.loads(text)
    return text, scenario_from_mapping(raw, source_text=text)
