"""OpenMessaging Benchmark's result format (rocketsim.omb): HdrHistogram's arithmetic against a real
published result file and a readable oracle, the export's fields from sends, and the import of old- and
new-schema files (no Spark)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from omb_oracle import (
    TIME_CHARTS,
    check_quantile_map,
    create_charts_reading,
    expected,
    highest,
    mean,
    value_at,
)

from rocketsim.omb import hdr
from rocketsim.omb.measured import OmbFormatError, from_mapping, parse_result
from rocketsim.omb.result import (
    FIELD_ORDER,
    OmbMeta,
    file_name,
    fold_results,
    java_double,
    omb_result,
    result_json,
)

DATA = Path(__file__).parent / "data" / "omb"
KAFKA = DATA / "kafka-sync-200k.json"  # tests/data/omb/README.md: where it comes from
META = OmbMeta("steady", "rocketsim", 1024, 1, 8, 4)


def _kafka() -> dict:
    return json.loads(KAFKA.read_text())


def _real_histogram(quantiles: dict) -> tuple[np.ndarray, np.ndarray, int]:
    """The histogram a real quantile map implies: each key is 100 * cumulative / n, so n = 100 / the
    first key (a single send there), and each value the highest equivalent of its bucket."""
    n = round(100.0 / float(next(iter(quantiles))))
    cumulative = [round(float(k) * n / 100.0) for k in quantiles]
    values = np.array([round(v * 1000) for v in quantiles.values()], np.int64)
    return values, np.diff([0, *cumulative]).astype(np.int64), n


def test_the_percentile_iterator_gives_a_real_files_quantile_map_key_for_key() -> None:
    """redpanda-data/openmessaging-benchmark blog/results/kafka/latency/sync-200k.json (OMB, 2020): its
    1946 keys, Java's Double.toString of the percentile each step reached, and values, come back exactly
    from the histogram they imply (HdrHistogram 2.1.12 PercentileIterator, 100 ticks per half distance)."""
    quantiles = _kafka()["aggregatedPublishLatencyQuantiles"]
    values, counts, n = _real_histogram(quantiles)
    assert n == 120_758_626 and (hdr.highest_equivalent(values) == values).all()
    keys, c = hdr.bucketed(values, counts)
    got = {java_double(p): v for p, v in hdr.quantile_map(keys, c, 1000.0).items()}
    assert list(got) == list(quantiles)
    assert got == quantiles


def test_java_double_prints_as_double_to_string() -> None:
    for key in _kafka()["aggregatedPublishLatencyQuantiles"]:
        assert java_double(float(key)) == key
    cases = {100.0: "100.0", 1e7: "1.0E7", 1.5e-4: "1.5E-4", 0.001: "0.001", 0.5: "0.5", 56.25: "56.25",
             9999999.5: "9999999.5", -2.5e-9: "-2.5E-9", 0.0: "0.0", 1234567.0: "1234567.0"}  # fmt: skip
    assert {x: java_double(x) for x in cases} == cases


def test_buckets_have_unit_width_below_2_to_the_18_then_double() -> None:
    v = np.array([0, 1, 262_143, 262_144, 262_145, 524_287, 524_288, 524_291, 524_292, 60_000_000])
    assert hdr.lowest_equivalent(v).tolist() == [0, 1, 262_143, 262_144, 262_144, 524_286, 524_288,
                                                  524_288, 524_292, 60_000_000]  # fmt: skip
    assert hdr.highest_equivalent(v).tolist() == [highest(int(x)) for x in v]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 70_000), min_size=0, max_size=300),
    st.sampled_from([0.0, 1.0, 50.0, 75.0, 95.0, 99.0, 99.9, 99.99, 100.0]),
)
def test_value_at_percentile_and_mean_follow_hdrhistogram(values_ms: list[int], p: float) -> None:
    us = sorted(min(v * 1000, 60_000_000) for v in values_ms)
    keys, counts = hdr.bucketed(np.array(us, np.int64), np.ones(len(us), np.int64))
    if p == 0.0 and us:  # getValueAtPercentile(0): the lowest equivalent value of the first bucket
        assert hdr.value_at_percentile(keys, counts, p) == int(hdr.lowest_equivalent(np.array(us[:1]))[0])
    else:
        assert hdr.value_at_percentile(keys, counts, p) == value_at(us, p)
    assert hdr.mean(keys, counts) == mean(us)
    assert hdr.max_value(keys) == (highest(us[-1]) if us else 0)


def _results(rows: list[tuple[str, int, int, int]]) -> pa.Table:
    status, end, latency, wait = zip(*rows, strict=True) if rows else ((), (), (), ())
    return pa.table(
        {
            "status": pa.array(status, pa.string()),
            "end_ts_ms": pa.array(end, pa.int64()),
            "latency_ms": pa.array(latency, pa.int64()),
            "queue_wait_ms": pa.array(wait, pa.int64()),
        }
    )


def _random_results(seed: int, n: int = 5000) -> pa.Table:
    rng = np.random.default_rng(seed)
    statuses = np.array(["SEND_OK", "FLUSH_DISK_TIMEOUT", "ONEWAY_SENT", "FAILED", "REJECTED"])
    status = statuses[rng.choice(5, n, p=[0.9, 0.03, 0.02, 0.03, 0.02])]
    latency = np.minimum(rng.lognormal(1.0, 1.5, n).astype(np.int64), 70_000)  # some past the 60 s clamp
    latency[:3] = 65_000
    wait = rng.geometric(0.3, n) - 1
    end = np.sort(rng.integers(0, 95_000, n)) + latency
    rows = list(zip(status.tolist(), end.tolist(), latency.tolist(), wait.tolist(), strict=True))
    return _results(rows)


@pytest.mark.parametrize("skip", [0, 2])
def test_the_result_has_omb_fields_computed_as_omb_counts(skip: int) -> None:
    results = _random_results(7)
    parts = [results.slice(0, 1234), results.slice(1234, 2000), results.slice(3234)]  # any split
    result = omb_result(fold_results(parts), META, skip)
    want = expected(results, skip)
    assert tuple(result) == FIELD_ORDER  # TestResult.java's order
    for name, values in want.items():
        if not name.startswith("_"):
            assert result[name] == values, name
    n = len(result["publishRate"])
    assert n == len(want["publishRate"]) > 1
    for name in FIELD_ORDER:
        if isinstance(result[name], list):
            assert len(result[name]) == n, name
    assert all(isinstance(v, int) for v in result["publishDelayLatency99pct"] + result["backlog"])
    assert all(isinstance(v, float) for v in result["publishLatency99pct"] + result["consumeRate"])
    check_quantile_map(result["aggregatedPublishLatencyQuantiles"], want["_publishLatency_all"], True)
    check_quantile_map(
        result["aggregatedPublishDelayLatencyQuantiles"], want["_publishDelayLatency_all"], False
    )
    assert result["aggregatedEndToEndLatencyQuantiles"] == {}
    assert max(result["publishLatencyMax"]) == 60000.255  # clamped at 60 s, its bucket's top


def test_the_json_text_reads_back_and_charts_as_create_charts_reads_it() -> None:
    result = omb_result(fold_results([_random_results(3)]), META)
    text = result_json(result)
    assert '"driver" : "rocketsim"' in text  # Jackson's pretty printer
    back = json.loads(text)
    assert list(back) == list(FIELD_ORDER)
    first = next(iter(back["aggregatedPublishLatencyQuantiles"]))
    assert first == java_double(float(first)) and "E-" in first or float(first) >= 1e-3
    # today's script cannot chart a 2020 file as it is (no publishDelay*, no publishErrorRate): given those,
    # it charts beside the export
    old = {
        "publishDelayLatency99pct": [0],
        "publishErrorRate": [0],
        "aggregatedPublishDelayLatencyQuantiles": {},
    }
    charts = create_charts_reading([back, _kafka() | old])
    for field in TIME_CHARTS:
        points, (low, top) = charts[("steady", field)]  # type: ignore[misc]
        assert low == 0 and math.isfinite(top)
        assert [x for x, _ in points[0][1]] == [10 * i for i in range(len(result["publishRate"]))]
    curve = charts[("steady", "aggregatedPublishLatencyQuantiles")][0][1]  # type: ignore[index]
    xs = [x for x, _ in curve]
    assert xs == sorted(xs) and xs[-1] <= 5.0 and len(xs) > 100


def test_a_run_with_no_send_still_gives_one_window_of_each_field() -> None:
    result = omb_result(fold_results([_results([])]), META)
    assert result["publishRate"] == [0.0] and result["publishLatency99pct"] == [0.0]
    assert result["aggregatedPublishLatencyQuantiles"] == {} and result["aggregatedPublishLatencyMax"] == 0.0
    create_charts_reading([result])


def test_file_names_follow_benchmark_java() -> None:
    from datetime import datetime

    at = datetime(2026, 3, 4, 5, 6, 7)
    assert file_name(META, at) == "steady-rocketsim-2026-03-04-05-06-07.json"
    slash = OmbMeta("1 topic / 16 partitions", "rocketsim-fault_on", 1, 1, 1, 1)
    assert file_name(slash, at) == "1 topic - 16 partitions-rocketsim-fault_on-2026-03-04-05-06-07.json"


# ---- the import ------------------------------------------------------------------------------------


def test_a_real_old_schema_file_reads_into_a_measured_run() -> None:
    run = parse_result(KAFKA.read_text(), KAFKA.name)
    assert (run.workload, run.driver) == ("100-partitions-200K-rate-4-producer", "Kafka")
    assert run.counts == {}  # before OMB's 2020-08 description fields
    assert len(run.series["publishRate"]) == 60 and run.times_s("publishRate")[-1] == 590.0
    assert run.series["publishLatency99pct"][13] == 111.999
    assert "publishErrorRate" not in run.series and "publishDelayLatency99pct" not in run.series
    p, v = run.quantiles["aggregatedPublishLatencyQuantiles"]
    assert len(p) == 1946 and p[0] == 8.280981931675837e-07 and p[-1] == 100.0 and v[-1] == 330.533
    assert (np.diff(p) > 0).all() and (np.diff(v) >= 0).all()
    assert run.aggregated["aggregatedPublishLatency99pct"] == 19.712
    assert run.series["backlog"].min() < 0  # old files show negative backlogs: kept as written


def test_an_exported_result_reads_back_to_its_own_numbers() -> None:
    result = omb_result(fold_results([_random_results(11)]), META)
    run = parse_result(result_json(result), "sim.json")
    assert run.counts == {"messageSize": 1024, "topics": 1, "partitions": 8, "producersPerTopic": 4,
                          "consumersPerTopic": 0}  # fmt: skip
    assert run.series["publishErrorRate"].tolist() == result["publishErrorRate"]
    p, v = run.quantiles["aggregatedPublishDelayLatencyQuantiles"]
    assert dict(zip(p.tolist(), v.tolist(), strict=True)) == result["aggregatedPublishDelayLatencyQuantiles"]
    assert from_mapping({}, "empty").series == {}  # every field optional


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"workload": "w",\n "publishRate": [1, 2', "bad.json: line 2 column"),
        ("[1, 2]", "bad.json: expected a JSON object"),
        ('{"publishRate": "fast"}', "bad.json: field publishRate: expected an array of numbers"),
        ('{"publishRate": [1, "x"]}', "bad.json: field publishRate[1]: expected a number"),
        ('{"driver": 3}', "bad.json: field driver: expected a string"),
        ('{"topics": 1.5}', "bad.json: field topics: expected an integer"),
        ('{"aggregatedPublishLatencyQuantiles": {"p99": 3}}', "key 'p99': expected a percentile"),
        ('{"aggregatedPublishLatencyQuantiles": {"101.0": 3}}', "key '101.0': expected a percentile"),
        ('{"aggregatedPublishLatencyQuantiles": [1]}', "expected an object of percentile -> value"),
    ],
)
def test_a_malformed_file_names_the_file_the_field_and_what_was_expected(text: str, message: str) -> None:
    with pytest.raises(OmbFormatError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_result(text, "bad.json")


def test_nan_and_null_window_values_read_as_nan() -> None:
    run = parse_result('{"publishLatencyAvg": [NaN, null, 2.5]}', "f.json")
    assert np.isnan(run.series["publishLatencyAvg"][:2]).all() and run.series["publishLatencyAvg"][2] == 2.5


def test_the_overlay_puts_a_simulated_run_beside_a_measured_one_on_ombs_axes() -> None:
    from rocketsim.present.omb import overlay_figure, summary_frame

    simulated = from_mapping(omb_result(fold_results([_random_results(5)]), META), "sim.json")
    measured = parse_result(KAFKA.read_text(), KAFKA.name)
    fig = overlay_figure([simulated], [measured])
    p99, rate, errors, quantiles = fig.axes
    assert [len(ax.lines) for ax in fig.axes] == [2, 2, 1, 2]  # the 2020 file has no publishErrorRate
    assert "not in the file: Kafka" in " ".join(t.get_text() for t in errors.texts)
    assert rate.get_yscale() == "log"  # 200k msg/s beside a few hundred: both visible
    kafka_curve = quantiles.lines[1].get_xdata()
    assert kafka_curve.max() <= 5.0 and [t.get_text() for t in quantiles.get_xticklabels()][1] == "99 %"
    assert list(p99.lines[1].get_xdata()[:3]) == [0.0, 10.0, 20.0]
    frame = summary_frame([simulated, measured])
    assert frame.loc[measured.label, "p99 (ms)"] == 19.712 and np.isnan(
        frame.loc[measured.label, "errors (err/s)"]
    )
