"""The share of the host's CPU a send the threads the model has nowhere else take
(:mod:`rocketsim.calibration.other_threads`), from the per-thread runs of the harness
(tests/data/realbroker-reruns/threads)."""

from __future__ import annotations

import json

import pytest

from rocketsim.calibration.other_threads import OTHER_GROUPS, other_threads_share
from rocketsim.errors import MeasurementError
from rocketsim.warehouse.thread_runs import read_other_threads_share


def test_the_other_threads_share_of_the_40000_a_second_run() -> None:
    # r40_40000's summary.txt, us a send due: the driver's compilers 4.056, G1's concurrent threads 0.273,
    # its VM thread 0.023; the broker's compilers 1.157, other threads 0.625, collector 0.390, flush 0.060,
    # VM thread 0.024, G1's concurrent 0.003: 6.611 of every group's 34.235
    assert read_other_threads_share() == pytest.approx(6.611 / 34.235, abs=1e-4)


def test_the_share_counts_the_other_groups_of_every_groups_cpu() -> None:
    groups = {name: {"us_per_send": 1.0} for name in OTHER_GROUPS}
    groups["driver/client executor"] = {"us_per_send": 3.0 * len(OTHER_GROUPS)}
    assert other_threads_share(json.dumps({"groups": groups}), "s.json") == pytest.approx(0.25)


def test_a_bad_summary_names_its_file() -> None:
    with pytest.raises(MeasurementError, match="runs/x.summary.json: expected a per-thread run's groups"):
        other_threads_share('{"groups": {"driver/jit": {}}}', "runs/x.summary.json")
    with pytest.raises(MeasurementError, match="x.json: expected a per-thread run's groups"):
        other_threads_share("not json", "x.json")
