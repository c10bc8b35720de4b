"""The effective scenario (``--check`` of every job): every key with its value as the run uses it, every
default filled in, and where each value came from (the file, a ``--set``, or the default), as TOML a
user can read and copy.

Each broker gets the model the run gives it (:meth:`~rocketsim.scenario.config.Scenario.broker_model`: its
own ``[brokers.<name>]`` section, else ``[brokers.default]``, else the built-in defaults); a section is
taken whole, so a broker's own section does not inherit from ``[brokers.default]``.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any

from rocketsim.scenario import span
from rocketsim.scenario.config import Scenario
from rocketsim.scenario.overrides import parse_override
from rocketsim.scenario.toml_text import toml_value

FILE, SET, DEFAULT = "file", "--set", "default"


@dataclasses.dataclass(frozen=True)
class Sources:
    """Where a scenario's values came from: the file's mapping and the ``--set`` key paths."""

    file: Mapping[str, Any]
    overrides: tuple[str, ...]

    @staticmethod
    def of(file_raw: Mapping[str, Any], overrides: Sequence[str]) -> Sources:
        return Sources(file_raw, tuple(parse_override(o)[0] for o in overrides))

    def of_key(self, path: Sequence[str]) -> str:
        """``--set`` when an override set the key (or a table or list holding it), ``file`` when the
        file has it, else ``default``."""
        dotted = ".".join(path)
        if any(
            dotted == k or dotted.startswith(k + ".") or k.startswith(dotted + ".") for k in self.overrides
        ):
            return SET
        node: Any = self.file
        for part in path:
            if isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            elif isinstance(node, Mapping) and part in node:
                node = node[part]
            else:
                return DEFAULT
        return FILE


def _line(key: str, value: Any, source: str) -> str:
    if value is None:
        return f"# {key}: not set, the version's value  # {source}"
    return f"{key} = {toml_value(value)}  # {source}"


def _section(
    obj: Any, path: tuple[str, ...], sources: Sources, lookup: tuple[str, ...] | None = None
) -> list[str]:
    """The lines of a dataclass section: its plain keys first, then its sub-tables (``lookup``: where
    its keys are in the file, when not at ``path``)."""
    lookup = path if lookup is None else lookup
    lines, tables = [], []
    for f in dataclasses.fields(obj):
        if f.name == "source_text":
            continue
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            tables.append((f.name, value))
        else:
            lines.append(_line(f.name, value, sources.of_key((*lookup, f.name))))
    out = [f"[{'.'.join(path)}]", *lines] if path else lines
    for name, value in tables:
        out += ["", *_section(value, (*path, name), sources, (*lookup, name))]
    return out


def _broker_sections(sc: Scenario, sources: Sources) -> list[str]:
    """``[brokers.default]`` (the file's, else the built-in one) for the brokers without a section of
    their own, then each broker's own section (taken whole: it does not inherit from the default)."""
    own = [b for b in sc.cluster.brokers if b in sc.brokers]
    rest = [b for b in sc.cluster.brokers if b not in sc.brokers]
    out = []
    if rest:
        given = "default" in sc.brokers
        out += ["", f"# {', '.join(rest)}: {'[brokers.default]' if given else 'the built-in defaults'}"]
        out += _section(sc.broker_model(rest[0]), ("brokers", "default"), sources)
    for b in own:
        out += ["", f"# {b}: its own section, taken whole (not merged with [brokers.default])"]
        out += _section(sc.broker_model(b), ("brokers", b), sources)
    return out


def effective_lines(sc: Scenario, sources: Sources) -> list[str]:
    """The effective scenario as TOML lines, each value commented with its source."""
    top = [_line(n, getattr(sc, n), sources.of_key((n,))) for n in ("name", "seed", "description")]
    out = ["# the effective scenario: every key as the run uses it (# file, # --set or # default)", *top]
    for name in ("cluster", "producers", "workload"):
        out += ["", *_section(getattr(sc, name), (name,), sources)]
    out += ["", "[brokers]", _line("coupling", sc.coupling, sources.of_key(("brokers", "coupling")))]
    out += _broker_sections(sc, sources)
    for i, fault in enumerate(sc.faults):
        lines = _section(fault, (), sources, ("faults", str(i)))
        out += ["", f"[[faults]]  # faults[{i}]", *lines]
    for name in ("route", "transactions"):
        out += ["", *_section(getattr(sc, name), (name,), sources)]
    for i, group in enumerate(sc.consumers.groups):
        out += ["", f"[[consumers.groups]]  # consumers.groups[{i}]"]
        out += _section(group, (), sources, ("consumers", "groups", str(i)))
    return out


def check_text(sc: Scenario, overrides: Sequence[str]) -> str:
    """What ``--check`` prints of a scenario: the effective scenario (its file is ``sc.source_text``), then
    its span and faults and any warning, as comments."""
    raw = tomllib.loads(sc.source_text) if sc.source_text else {}
    lines = effective_lines(sc, Sources.of(raw, overrides))
    lines += ["", *(f"# {line.strip()}" for line in span.header_lines(sc))]
    lines += [f"# warning: {w}" for w in span.warnings(sc)]
    return "\n".join(lines)
