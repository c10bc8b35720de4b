"""The scenario ``python -m rocketsim.validation`` hands its first simulation, without simulating: what the
tests of its options (``--thread-split``, ``--fit-host-capacity``) look at."""

from __future__ import annotations

import pytest

from rocketsim.scenario import Scenario


class Simulated(Exception):
    """Raised in place of the first simulation, once its scenario is built."""


def first_scenario(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> Scenario:
    """Run the command on ``argv`` up to its first simulation; the scenario it built for it."""
    import rocketsim.command.validate as validate
    from rocketsim.command.validate_options import main

    scenarios: list[Scenario] = []
    real_run_scenario = validate.run_scenario

    def run_scenario(*args, **kwargs) -> Scenario:
        scenarios.append(sc := real_run_scenario(*args, **kwargs))
        return sc

    def simulate(*args) -> None:
        raise Simulated

    monkeypatch.setattr(validate, "run_scenario", run_scenario)
    monkeypatch.setattr(validate, "simulate", simulate)
    with pytest.raises(Simulated):
        main(argv)
    (sc,) = scenarios
    return sc
