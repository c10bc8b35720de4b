"""The calibration as a scenario fragment: TOML tables of the estimated keys (the scenario loader's own
keys and ranges, checked by loading the fragment as a scenario), and the same values as ``--set`` lines.

A fragment alone is a valid scenario (every other key at its default); merge its tables into a scenario
file or pass its ``--set`` lines to a job. Note that a ``[brokers.<name>]`` section replaces
``[brokers.default]`` for that broker as a whole (:meth:`rocketsim.scenario.Scenario.broker_model`), so
a broker-specific fragment carries only what was calibrated for it, the rest at the built-in defaults.
"""

from __future__ import annotations

import tomllib

from rocketsim.calibration.calibrate import Calibration
from rocketsim.calibration.fit import Estimate
from rocketsim.scenario import Scenario, scenario_from_mapping


def _toml_key(part: str) -> str:
    bare = part.replace("_", "").replace("-", "").isalnum() and part.isascii()
    return part if bare else '"' + part.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _value(v: float) -> str:
    return repr(float(v))  # shortest text that reads back as the same double


def set_lines(cal: Calibration) -> list[str]:
    """``--set key=value`` for each estimate."""
    return [f"--set {e.key}={_value(e.value)}" for e in cal.estimates]


def fragment_text(cal: Calibration, sources: list[str]) -> str:
    """The TOML fragment, with a header saying where it came from and what was fixed."""
    lines = ["# Calibrated by rocketsim (jobs/calibrate.py) from:"]
    lines += [f"#   {s}" for s in sources]
    lines.append("# Merge these tables into a scenario, or pass the same values to a job:")
    lines += [f"#   {s}" for s in set_lines(cal)]
    fixed = [e for e in cal.estimates if e.fixed]
    if fixed:
        lines.append("# Held fixed (the data could not tell them, or --fix):")
        lines += [f"#   {e.key} = {_value(e.value)}: {e.why}" for e in fixed]
    tables: dict[str, list[Estimate]] = {}
    for e in cal.estimates:
        table, _, _ = e.key.rpartition(".")
        tables.setdefault(table, []).append(e)
    for table, items in tables.items():
        lines += ["", "[" + ".".join(_toml_key(p) for p in table.split(".")) + "]"]
        lines += [f"{_toml_key(e.key.rpartition('.')[2])} = {_value(e.value)}" for e in items]
    text = "\n".join(lines) + "\n"
    check_fragment(text, cal.target)
    return text


def check_fragment(text: str, target: str = "default") -> Scenario:
    """The fragment loaded as a scenario (with ``target`` among the cluster's brokers when it names
    one): a value out of the scenario's ranges raises ScenarioError."""
    raw = tomllib.loads(text)
    raw.setdefault("name", "calibration")
    if target != "default":
        raw.setdefault("cluster", {}).setdefault("brokers", [target])
    return scenario_from_mapping(raw, source_text=text)
