"""Open-loop rate schedules (workload.rate_steps, rocketsim/scenario/schedule.py): the real-broker harness's
schedule to the ms, its split over producers, Poisson arrivals inside each step, and the scenario's rules."""

from __future__ import annotations

import numpy as np
import pytest

from rocketsim.scenario import ScenarioError, scenario_from_mapping
from rocketsim.scenario.schedule import due_ms, producer_messages, total_messages
from rocketsim.scenario.workload import generate

STEPS = [[10_000.0, 0.5], [72_000.0, 0.25]]


def scenario(**workload: object) -> object:
    raw = {"name": "s", "producers": {"count": 2}, "workload": {"rate_steps": STEPS, **workload}}
    return scenario_from_mapping(raw)


def harness_due_ms(steps: list[list[float]]) -> np.ndarray:
    """LoadDriver.java: ``sched[idx] = (long) ((base + j / rate) * 1e9)`` ns, ``n = round(rate * secs)``."""
    out, base = [], 0.0
    for rate, secs in steps:
        n = round(rate * secs)
        out += [int((base + j / rate) * 1e9) / 1e6 for j in range(n)]
        base += secs
    return np.array(out)


def test_uniform_steps_are_the_harness_schedule_round_the_producers() -> None:
    sc = scenario(arrival="uniform")
    m = generate(sc)
    due = harness_due_ms(STEPS)
    assert m.num_rows == total_messages(STEPS) == due.size == 5000 + 18000
    for p in (0, 1):
        mine = m.filter(np.asarray(m["producer"]) == p)
        # send i of the driver goes to producer i % producers, due at its step's start + j / rate (the
        # driver truncates to whole ns, so 672 ms can read 671.999999: whole ms agree to that ns)
        assert np.array_equal(np.asarray(mine["born_ts_ms"]), np.floor(due[p::2] + 1e-5).astype(np.int64))
    assert producer_messages(STEPS, 3) == [7667, 7667, 7666]


def test_poisson_steps_keep_each_steps_count_inside_it() -> None:
    sc = scenario(arrival="poisson")
    born = np.sort(np.asarray(generate(sc)["born_ts_ms"]))
    assert (born < 500).sum() == 5000 and ((born >= 500) & (born < 750)).sum() == 18000
    again = np.sort(np.asarray(generate(sc)["born_ts_ms"]))
    assert np.array_equal(born, again)  # the draws are the workload's: keyed, not stateful
    # a Poisson process: the second step's sends are spread over it, not evenly spaced
    t = due_ms(STEPS, 1, 0, np.arange(5000, 23000), lambda p, s, w: np.random.default_rng(7).random(s.size))
    gaps = np.diff(t)
    assert t.min() >= 500 and t.max() < 750 and 0.8 < gaps.std() / gaps.mean() < 1.2


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"rate_steps": [[1000.0, 0.0]]},
            r"workload\.rate_steps\[0\] must be \[rate msg/s > 0, seconds > 0\]",
        ),
        ({"rate_steps": [[1000.0, 1.0, 2.0]]}, r"workload\.rate_steps\[0\] must be"),
        ({"messages": 5}, r"workload\.messages must be 0 or the schedule's 23000 with workload\.rate_steps"),
        ({"hot_share": 0.5}, r"workload\.hot_share must be 0 with workload\.rate_steps"),
    ],
)
def test_a_bad_schedule_is_one_line_naming_the_key(extra: dict, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        scenario(**extra)
