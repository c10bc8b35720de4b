"""The replay's scenario file: the user's base scenario as they wrote it (cluster, producers, workload,
brokers, comments and all), its own fault timeline replaced by the incident's, under a new name.

The base text is kept line for line but for its ``[[faults]]`` tables (each runs to the next table
header) and its top-level ``name``; the new name goes first, the incident's faults last. The result is
loaded back (:func:`rocketsim.scenario.scenario_from_mapping`) so a file that would not run is never
written: a ``ScenarioError`` names the key. A base whose simulated span ends before the incident does is
lengthened to the incident's span at its own rate (its ``workload.messages`` / ``duration_s`` line
replaced by ``duration_s``): a fault after the span would change nothing, and the run would refuse it.
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
_WORKLOAD = re.compile(r"^\s*\[\s*workload\s*\]\s*(#.*)?$")
_LENGTH = re.compile(r"^\s*(messages|duration_s)\s*=")


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


def _with_span(lines: list[str], span_s: float) -> list[str]:
    """``lines`` with the ``[workload]`` table's length set to ``duration_s = span_s``."""
    out: list[str] = []
    in_workload = found = False
    for line in lines:
        if _HEADER.match(line):
            in_workload = bool(_WORKLOAD.match(line))
            if in_workload:
                found = True
                out += [
                    line,
                    f"duration_s = {toml_value(float(span_s))}  # the incident's span (rocketsim replay)",
                ]
                continue
        if in_workload and _LENGTH.match(line):
            continue
        out.append(line)
    if not found:
        out += ["", "[workload]", f"duration_s = {toml_value(float(span_s))}  # the incident's span"]
    return out


def replay_text(
    base_text: str, name: str, header: Sequence[str], faults: Sequence[Fault], span_s: float = 0.0
) -> tuple[str, Scenario]:
    """The scenario text of the replay and the scenario it loads to; ``header``: comment lines that say
    where it comes from; ``span_s``: the incident's span (the run is made at least that long)."""
    kept = _without_faults_and_name(base_text)
    try:
        left = tomllib.loads("\n".join(kept))
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"the base scenario is not valid TOML: {exc}") from None
    if "faults" in left:
        raise ScenarioError("the base scenario's faults must be written as [[faults]] tables to be replaced")
    if span_s > scenario_from_mapping(left).workload.span_s:
        kept = _with_span(kept, span_s)
    parts = [*(f"# {h}" for h in header), f"name = {toml_value(name)}", *kept]
    if faults:
        parts += ["", "# the incident's fault timeline (seconds from the first sample)", faults_toml(faults)]
    text = "\n".join(parts) + "\n"
    raw = tomllib.loads(text)
    return text, scenario_from_mapping(raw, source_text=text)
