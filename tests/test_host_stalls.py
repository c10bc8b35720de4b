"""The host's stalls (``producers.host_stall_*``, rocketsim.client.host.HostStalls) and their fit to latency
against load (rocketsim.calibration.stalls): what makes the measured 4.9.8 host's latency grow with its
load far below its saturation rate (``b_ramp_async_p1``: OK p50 0.5 ms at 44% of it, 10 ms at 73%, 25 ms
at 87%), as a queue of variable service does (Pollaczek-Khinchine)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import gamma, kstest

from rocketsim.calibration.stalls import (
    DRAWS,
    SEED,
    STALL_SHAPE,
    ShapeDraws,
    StepLatency,
    chained_stalls,
    fit_stall_shape,
    fit_stalls,
    fluid_waits,
    queue_waits,
    shape_quantiles,
    step_quantiles,
)
from rocketsim.client.host import HostCores, HostStalls
from rocketsim.engine import reference
from rocketsim.rng import derive_key, uniform
from rocketsim.scenario import scenario_from_mapping
from rocketsim.scenario.workload import generate
from rocketsim.validation.calibrate import saturation, stall_values
from rocketsim.warehouse.measured_runs import read_run


def stalled_sends(stalls: HostStalls, sends: int) -> list[int]:
    """The sends after which ``stalls`` stop both cores of a host (work ready then waits for the stall)."""
    out = []
    for seq in range(sends):
        cores = HostCores(2)
        stalls.after_send(cores, seq, 0.0)
        if cores.run(0.0, 1.0) > 1.0 and cores.run(0.0, 1.0) > 1.0:
            out.append(seq)
    return out


def test_a_stall_stops_every_core_after_one_send_in_every() -> None:
    hit = stalled_sends(HostStalls(every=10.0, mean_us=1000.0, key=7), 2000)
    assert 160 <= len(hit) <= 240  # one in 10 on average
    assert stalled_sends(HostStalls(every=10.0, mean_us=1000.0, key=7), 2000) == hit  # drawn from the key
    assert stalled_sends(HostStalls(every=10.0, mean_us=1000.0, key=8), 2000) != hit


def test_the_fluid_queue_waits_out_a_stall_and_drains_at_what_is_spare() -> None:
    stalled = np.zeros(100, dtype=bool)
    stalled[10:20] = True
    waits = fluid_waits(np.full(100, 0.5), stalled)
    assert waits[:10] == pytest.approx(0.0)
    assert waits[10] == pytest.approx(10.5)  # the stall's 10 ms and the half ms of work before it
    assert waits[19] == pytest.approx(6.0)  # 5 ms of work piled up, 1 ms of stall left
    assert waits[20] == pytest.approx(4.5) and waits[29] == pytest.approx(0.0)  # drains at 0.5 ms a ms


def test_the_fit_finds_the_stalls_that_made_a_schedules_latency() -> None:
    steps = [StepLatency(load, 6.0, (0.0, 0.0, 0.0)) for load in (0.3, 0.5, 0.7, 0.85)]
    rng = np.random.default_rng(SEED)
    draws = (rng.exponential(size=DRAWS), rng.exponential(size=DRAWS))
    made = step_quantiles(steps, 0.2, 8.0, draws)
    fit = fit_stalls([StepLatency(s.load, s.seconds, tuple(q)) for s, q in zip(steps, made, strict=True)])
    assert fit.share == pytest.approx(0.2, rel=0.15) and fit.mean_ms == pytest.approx(8.0, rel=0.15)
    assert fit.every(50_000.0) == pytest.approx(0.008 * 50_000 / fit.share * fit.mean_ms / 8.0, rel=1e-9)


def test_stalls_make_latency_grow_with_load() -> None:
    def p90_p99(rate: float, every: float) -> tuple[float, float]:
        sc = scenario_from_mapping(
            {
                "name": "stalls",
                "seed": 2,
                "cluster": {"brokers": ["broker-a"]},
                "producers": {
                    "count": 1,
                    "send_mode": {"async": 1},
                    "processors": 2,
                    "send_cpu_us": 80.0,
                    "host_stall_every": every,
                    "host_stall_ms": 5.0,
                },
                "workload": {"rate_steps": [[rate, 1.0]], "arrival": "uniform", "tags": [], "keys": False},
                "brokers": {
                    "default": {"latency": {"median_ms": 0.3, "sigma": 0.1, "spike_probability": 0.0}}
                },
            }
        )
        r = reference.simulate_producer(generate(sc), sc).results  # latency from the due time
        p90, p99 = np.percentile(np.asarray(r["end_ts_ms"]) - np.asarray(r["born_ts_ms"]), [90, 99])
        return float(p90), float(p99)

    # 25,000 sends/s at most at 80 us on 2 cores; a 5 ms stall every 500 sends takes 20% more
    light, busy = p90_p99(5_000.0, 500.0), p90_p99(18_000.0, 500.0)
    assert light[0] == 0.0 and 0.0 < light[1] < busy[1]  # the stalls pass almost unseen at light load
    assert p90_p99(18_000.0, 0.0)[0] <= 1.0 < 10.0 <= busy[0]  # and make a queue near capacity


def test_calibration_fits_the_ramps_stalls_and_keeps_its_saturation_rate() -> None:
    runs = [read_run("tests/data/realbroker/a_low_async"), read_run("tests/data/realbroker/b_ramp_async_p1")]
    cpu = {
        "producers.send_cpu_us": 17.0,
        "brokers.default.store.io_us": 6.0,
        "brokers.default.store.append_us": 6.0,
    }
    out = stall_values(runs, cpu)
    share = 1.0 - out["producers.send_cpu_us"] / 17.0
    assert 0.0 < share <= 0.5
    assert out["brokers.default.store.io_us"] == pytest.approx(6.0 * (1.0 - share))
    # the stalls take that share of the two cores at the ramp's saturation rate
    sat = saturation(runs[1]).msgs_per_s  # type: ignore[union-attr]
    stall_us_per_send = out["producers.host_stall_ms"] * 1000.0 / out["producers.host_stall_every"]
    assert stall_us_per_send * sat / 1e6 == pytest.approx(share)
    assert stall_values(runs[:1], cpu) == {}


class _Stops:
    """A host that only records the stops asked of it (``Host.stop_all``)."""

    def __init__(self) -> None:
        self.lengths: list[float] = []

    def stop_all(self, at_us: float, length_us: float) -> float:
        self.lengths.append(length_us)
        return at_us


def drawn_lengths(stalls: HostStalls, sends: int) -> np.ndarray:
    host = _Stops()
    for seq in range(sends):
        stalls.after_send(host, seq, 0.0)  # type: ignore[arg-type]
    return np.array(host.lengths)


def test_the_engines_stall_lengths_are_the_gamma_distribution_of_their_shape() -> None:
    lengths = drawn_lengths(HostStalls(every=1.0, mean_us=4000.0, key=11, shape=4.0), 20_000)
    assert lengths.mean() == pytest.approx(4000.0, rel=0.02)
    assert lengths.std() / lengths.mean() == pytest.approx(0.5, rel=0.03)  # 1 / sqrt(4)
    assert kstest(lengths, gamma(a=4.0, scale=1000.0).cdf).pvalue > 0.01
    spread = drawn_lengths(HostStalls(every=1.0, mean_us=4000.0, key=11, shape=0.5), 20_000)
    assert spread.std() / spread.mean() == pytest.approx(2.0**0.5, rel=0.05)
    assert kstest(spread, gamma(a=0.5, scale=8000.0).cdf).pvalue > 0.01


def test_shape_one_is_the_exponential_the_stalls_always_drew() -> None:
    lengths = drawn_lengths(HostStalls(every=1.0, mean_us=4000.0, key=11), 2_000)
    before = [-4000.0 * math.log(1.0 - uniform(derive_key(11, seq), 1)) for seq in range(2_000)]
    assert lengths.tolist() == before  # to the bit: every shipped table keeps its stalls


@pytest.mark.parametrize(("share", "mean_ms"), [(0.3, 15.0), (0.7, 9.0)])
def test_the_shape_fit_recovers_the_share_and_mean_that_made_a_schedules_latency(
    share: float, mean_ms: float
) -> None:
    steps = [StepLatency(load, 6.0, (0.0, 0.0, 0.0)) for load in (0.15, 0.45, 0.6, 0.75, 0.87, 1.0)]
    draws = ShapeDraws.drawn(2)
    made = shape_quantiles(steps, share, mean_ms, STALL_SHAPE, draws)
    assert made[0][0] < 1.0 < made[-1][0]  # the latency grows with the load
    measured = [StepLatency(s.load, s.seconds, tuple(q)) for s, q in zip(steps, made, strict=True)]
    fit = fit_stall_shape(measured, draws=draws)
    assert fit.share == pytest.approx(share, rel=0.05) and fit.mean_ms == pytest.approx(mean_ms, rel=0.05)
    assert fit.shape == STALL_SHAPE


def test_the_shape_fits_fluid_chains_stalls_and_waits_out_the_part_of_a_millisecond_they_take() -> None:
    begin, end = chained_stalls(np.array([10.0, 12.0, 40.5]), np.array([5.0, 2.0, 1.0]))
    assert begin.tolist() == [10.0, 15.0, 40.5] and end.tolist() == [15.0, 17.0, 41.5]  # the second waits
    waits = queue_waits(np.full(60, 0.5), begin, end)
    assert waits[9] == pytest.approx(0.0)
    assert waits[10] == pytest.approx(0.5 + 6.5)  # its own ms's work, the rest of both stalls (to 17)
    assert waits[16] == pytest.approx(3.5 + 0.5)  # 7 ms of work piled up, half a ms of stall left
    assert waits[17] == pytest.approx(3.0) and waits[23] == pytest.approx(0.0)  # drains at 0.5 ms a ms
    assert waits[40] == pytest.approx(1.0)  # half of ms 40 free for its work, the stall from 40.5 to 41.5


def test_the_shape_fit_of_the_ramp_takes_more_of_the_host_in_shorter_stalls() -> None:
    runs = [read_run("tests/data/realbroker/a_low_async"), read_run("tests/data/realbroker/b_ramp_async_p1")]
    cpu = {
        k: 10.0
        for k in ("producers.send_cpu_us", "brokers.default.store.io_us", "brokers.default.store.append_us")
    }
    default, shaped = stall_values(runs, cpu), stall_values(runs, cpu, shape=True)
    assert "producers.host_stall_shape" not in default and shaped["producers.host_stall_shape"] == STALL_SHAPE
    share = 1.0 - shaped["producers.send_cpu_us"] / 10.0
    assert 0.5 < share <= 0.9 and share > 1.0 - default["producers.send_cpu_us"] / 10.0
    assert shaped["producers.host_stall_ms"] < default["producers.host_stall_ms"]
    sat = saturation(runs[1]).msgs_per_s  # type: ignore[union-attr]
    stall_us_per_send = shaped["producers.host_stall_ms"] * 1000.0 / shaped["producers.host_stall_every"]
    assert stall_us_per_send * sat / 1e6 == pytest.approx(share)  # the saturation rate kept
