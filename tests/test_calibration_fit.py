"""Calibration recovers a known model from each input format: latencies drawn from the broker model,
written as that format's producer writes them (tests/calibration_synth.py), parsed, fitted; the median
and sigma come back within 5%. And the model's CDF is the one rocketsim's own sampler draws."""

from __future__ import annotations

import math

import numpy as np
import pytest
from calibration_synth import (
    benchmark_text,
    histogram_json,
    latency_csv,
    omb_json,
    pagecachert_log,
    pmdt_text,
    put_latency_text,
    query_range_json,
    rpc_latency_text,
    send_cost_text,
)

from rocketsim.broker.latency import BrokerParams, base_latency_ms
from rocketsim.calibration.calibrate import Options, calibrate
from rocketsim.calibration.formats import parse_input
from rocketsim.calibration.latency_fit import fit_latency
from rocketsim.calibration.measurements import View
from rocketsim.calibration.model import LatencyDistribution
from rocketsim.rng import draw_key
from rocketsim.scenario import BrokerModelConfig, LatencyConfig

CLIENT = LatencyDistribution(2.0, 0.5, 0.01, 20.0, 1.8)  # a body with rare spikes
STORE = LatencyDistribution(20.0, 0.5)  # store put times the 1 ms buckets can resolve
N = 100_000


def draws(dist: LatencyDistribution, n: int = N, seed: int = 7) -> np.ndarray:
    return dist.sample(np.random.default_rng(seed), n)


def assert_recovers(fit_values: dict[str, float], truth: LatencyDistribution) -> None:
    assert fit_values["median_ms"] == pytest.approx(truth.median_ms, rel=0.05)
    assert fit_values["sigma"] == pytest.approx(truth.sigma, rel=0.05)


def fitted(text: str, fmt: str, view: View) -> dict[str, float]:
    ms = parse_input(text, f"synthetic.{fmt}", fmt)
    return fit_latency(ms.latency(view), view).distribution.values()


def test_the_cdf_is_the_distribution_rocketsims_sampler_draws() -> None:
    cfg = BrokerModelConfig(
        latency=LatencyConfig(
            median_ms=2.0, sigma=0.5, spike_probability=0.02, spike_scale_ms=20.0, spike_alpha=1.5
        )
    )
    p = BrokerParams.from_config(cfg)
    sample = np.sort([base_latency_ms(p, draw_key(11, 0, seq, 0)) for seq in range(40_000)])
    dist = LatencyDistribution(2.0, 0.5, 0.02, 20.0, 1.5)
    grid = np.geomspace(0.2, 2000, 60)
    empirical = np.searchsorted(sample, grid, side="right") / len(sample)
    assert np.max(np.abs(empirical - dist.cdf(grid))) < 0.01  # DKW: 1.36/sqrt(40000) = 0.0068 at 95%
    assert np.allclose(dist.cdf(grid) + dist.sf(grid), 1.0)


def test_quantiles_invert_the_cdf() -> None:
    levels = np.array([0.01, 0.5, 0.9, 0.99, 0.999, 0.99999])
    assert np.allclose(CLIENT.cdf(CLIENT.quantile(levels)), levels, rtol=1e-7)


@pytest.mark.parametrize(
    ("fmt", "make", "view", "truth"),
    [
        ("omb", omb_json, View.CLIENT, CLIENT),
        ("prometheus", rpc_latency_text, View.BROKER, CLIENT),
        ("prometheus", send_cost_text, View.CLIENT, CLIENT),
        ("prometheus-json", query_range_json, View.BROKER, CLIENT),
        ("csv", latency_csv, View.CLIENT, CLIENT),
        ("histogram", histogram_json, View.CLIENT, CLIENT),
        ("store-log", pagecachert_log, View.STORE, STORE),
        ("prometheus", pmdt_text, View.STORE, STORE),
    ],
    ids=["omb", "rpc_latency", "send_cost_time", "query_range", "csv", "histogram", "pagecachert", "pmdt"],
)
def test_each_binned_format_recovers_median_and_sigma(fmt, make, view, truth) -> None:
    assert_recovers(fitted(make(draws(truth)), fmt, view), truth)


def test_the_omb_spikes_are_found_too() -> None:
    values = fitted(omb_json(draws(CLIENT, 400_000)), "omb", View.CLIENT)
    assert values["spike_probability"] == pytest.approx(CLIENT.spike_probability, rel=0.25)
    assert values["spike_scale_ms"] == pytest.approx(CLIENT.spike_scale_ms, rel=0.25)


def test_exporter_p99_and_p999_give_a_lognormal_exactly() -> None:
    body = LatencyDistribution(20.0, 0.5)
    p99, p999 = body.quantile([0.99, 0.999])
    values = fitted(put_latency_text(float(p99), float(p999)), "prometheus", View.STORE)
    assert_recovers(values, body)
    assert values["spike_probability"] == 0.0


def test_benchmark_mean_and_max_recover_a_lognormal_body() -> None:
    """The benchmark tool prints means and a running max only: two numbers, so a lognormal without
    spikes; the max is one draw, so the tolerance is wider than for buckets."""
    body = LatencyDistribution(1.5, 0.6)
    ms = parse_input(benchmark_text(draws(body, 1_000_000)), "producer.out", "benchmark")
    fit = fit_latency(ms.latency(View.CLIENT), View.CLIENT)
    assert fit.distribution.median_ms == pytest.approx(1.5, rel=0.1)
    assert fit.distribution.sigma == pytest.approx(0.6, rel=0.1)
    assert fit.param("spike_probability").fixed
    assert "too few" in fit.param("spike_alpha").why


def test_without_tail_buckets_the_spikes_are_fixed_and_the_reason_given() -> None:
    body = LatencyDistribution(3.0, 0.4)
    coarse = parse_input(send_cost_text(draws(body)), "c", "prometheus").latency(View.CLIENT)
    fit = fit_latency(coarse, View.CLIENT)  # counts in 4 buckets: 3 numbers, 2 parameters at most
    assert_recovers(fit.distribution.values(), body)
    spikes = fit.param("spike_probability")
    assert spikes.fixed and spikes.value == 0.0 and "too few" in spikes.why
    fine = parse_input(histogram_json(draws(body)), "h", "histogram").latency(View.CLIENT)
    fit = fit_latency(fine, View.CLIENT)  # many buckets, none holding spikes: BIC decides
    assert_recovers(fit.distribution.values(), body)
    assert (
        fit.param("spike_probability").fixed and "BIC prefers no spikes" in fit.param("spike_probability").why
    )


def test_fixed_values_are_held() -> None:
    ms = parse_input(histogram_json(draws(CLIENT)), "h", "histogram")
    cal = calibrate(ms, Options(fixed={"latency.spike_alpha": 1.8}))
    est = {e.key.rsplit(".", 1)[1]: e for e in cal.estimates}
    assert est["spike_alpha"].value == 1.8 and est["spike_alpha"].fixed and "--fix" in est["spike_alpha"].why
    assert est["median_ms"].value == pytest.approx(2.0, rel=0.05)


def test_error_mix_and_saturation_become_scenario_values() -> None:
    ms = parse_input(rpc_latency_text(draws(CLIENT, 10_000), busy=50), "scrape", "prometheus")
    cal = calibrate(ms, Options())
    values = cal.values()
    assert values["brokers.default.errors.system_busy"] == pytest.approx(50 / 10_050)
    assert any("system_busy" in n for n in cal.notes)
    assert "brokers.default.store.append_us" not in values  # no saturation figure: said, not guessed
    assert any("append_us" in n for n in cal.notes)


def test_a_saturation_figure_gives_append_us() -> None:
    from rocketsim.calibration.formats import parse_saturation
    from rocketsim.calibration.measurements import Measurements

    ms = Measurements(throughputs=(parse_saturation("65000@1100"),))
    ms += parse_input(histogram_json(draws(CLIENT, 5_000)), "h", "histogram")
    values = calibrate(ms).values()
    assert values["brokers.default.store.append_us"] == pytest.approx(1e6 * 1024 / (65000 * 1100))
    assert math.isfinite(values["brokers.default.latency.median_ms"])
