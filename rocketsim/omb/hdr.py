"""HdrHistogram's arithmetic, as OpenMessaging Benchmark's figures come out of it (HdrHistogram 2.1.12, the
version ``benchmark-framework/pom.xml`` pins), over exact ``(value, count)`` histograms.

OMB records publish latency and publish delay in microseconds into ``new Recorder(60 s in us, 5)``
(``worker/WorkerStats.java``): 5 significant digits, lowest discernible value 1. A value then stands for
its *bucket*: values below 2**18 alone, above that ranges of 2**k values (``AbstractHistogram``:
``getBucketIndex``, ``lowestEquivalentValue``, ``highestEquivalentValue``, ``medianEquivalentValue``).
What OMB writes is read off the buckets:

More: docs/reference/modules.md, rocketsim/omb/hdr.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

SIGNIFICANT_DIGITS = 5
# WorkerStats.highestTrackableValue: publish latency and delay are clamped there (Math.min) before recording
HIGHEST_TRACKABLE_US = 60_000_000
# values below 2 * 10**5 need unit resolution: 2**18 sub-buckets (AbstractHistogram.init)
_SUB_BUCKET_MAGNITUDE = math.ceil(math.log2(2 * 10**SIGNIFICANT_DIGITS))
PERCENTILE_TICKS_PER_HALF_DISTANCE = 100  # WorkloadGenerator: agg.publishLatency.percentiles(100)


def _bucket_index(values: np.ndarray) -> np.ndarray:
    """``getBucketIndex``: how many powers of two a value is past the unit-resolution range (its bit
    length less 18, at least 0; ``frexp`` gives the bit length exactly below 2**53)."""
    v = np.asarray(values, np.int64)
    bit_length = np.frexp(v.astype(np.float64))[1].astype(np.int64)
    return np.maximum(bit_length - _SUB_BUCKET_MAGNITUDE, 0)


def lowest_equivalent(values: np.ndarray) -> np.ndarray:
    """``lowestEquivalentValue``: the first value of each value's bucket (the bucket's key here)."""
    v = np.asarray(values, np.int64)
    shift = _bucket_index(v)
    return (v >> shift) << shift


def bucket_size(values: np.ndarray) -> np.ndarray:
    """``sizeOfEquivalentValueRange``: how many values each value's bucket holds."""
    return np.int64(1) << _bucket_index(values)


def highest_equivalent(values: np.ndarray) -> np.ndarray:
    """``highestEquivalentValue``: the last value of each value's bucket."""
    return lowest_equivalent(values) + bucket_size(values) - 1


def median_equivalent(values: np.ndarray) -> np.ndarray:
    """``medianEquivalentValue``: the middle (rounded up) of each value's bucket."""
    return lowest_equivalent(values) + (bucket_size(values) >> 1)


def bucketed(values: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An exact ``(value, count)`` histogram as HdrHistogram holds it: (bucket keys ascending, counts)
    of the non-empty buckets (keys: :func:`lowest_equivalent`)."""
    keys = lowest_equivalent(np.asarray(values, np.int64))
    order = np.argsort(keys, kind="stable")
    keys, c = keys[order], np.asarray(counts, np.int64)[order]
    if not len(keys):
        return keys, c
    starts = np.flatnonzero(np.append(True, keys[1:] != keys[:-1]))
    summed = np.add.reduceat(c, starts)
    keep = summed > 0
    return keys[starts][keep], summed[keep]


def value_at_percentile(keys: np.ndarray, counts: np.ndarray, percentile: float) -> int:
    """``getValueAtPercentile`` of a bucketed histogram (:func:`bucketed`); 0 when empty."""
    total = int(counts.sum())
    if total == 0:
        return 0
    requested = min(max(math.nextafter(percentile, -math.inf), 0.0), 100.0)
    rank = max(math.ceil((requested * total) / 100.0), 1)
    at = int(np.searchsorted(np.cumsum(counts), rank, "left"))
    at = min(at, len(keys) - 1)
    key = keys[at : at + 1]
    return int(key[0] if percentile == 0.0 else highest_equivalent(key)[0])


def mean(keys: np.ndarray, counts: np.ndarray) -> float:
    """``getMean`` of a bucketed histogram: median equivalent values times counts, summed one after the
    other in ascending order (``np.cumsum`` adds sequentially, as Java's loop does), over the count."""
    total = int(counts.sum())
    if total == 0:
        return 0.0
    products = median_equivalent(keys).astype(np.float64) * counts.astype(np.float64)
    return float(np.cumsum(products)[-1]) * 1.0 / total


def max_value(keys: np.ndarray) -> int:
    """``getMaxValue`` of a bucketed histogram (0 when empty)."""
    if not len(keys) or int(keys[-1]) == 0:
        return 0
    return int(highest_equivalent(keys[-1:])[0])


def _next_level(level: float, ticks_per_half_distance: int) -> float:
    """``PercentileIterator.incrementIterationLevel``: fixed-size ticks within each half distance to 100 %."""
    halvings = int(math.log(100.0 / (100.0 - level)) / math.log(2))
    return level + 100.0 / (ticks_per_half_distance * 2 ** (halvings + 1))


def percentile_steps(
    keys: np.ndarray, counts: np.ndarray, ticks_per_half_distance: int = PERCENTILE_TICKS_PER_HALF_DISTANCE
) -> list[tuple[float, int]]:
    """``histogram.percentiles(ticks)``: (percentile reached, value iterated to) of every step, in order.

    A step stops at the first non-empty bucket whose cumulative percentile ``100.0 * cumulative / n``
    reaches the iteration level (a bucket may answer several levels: its steps repeat), then the level
    moves on; after the last bucket one more step goes to 100 %. The value iterated to is the bucket's
    highest equivalent value."""
    total = int(counts.sum())
    steps: list[tuple[float, int]] = []
    if total == 0:
        return steps
    tops = highest_equivalent(keys).tolist()
    cumulative = np.cumsum(counts).tolist()
    level, at = 0.0, 0
    while True:
        if cumulative[at] >= total:  # the last bucket: its own step (if still due), then the one to 100 %
            reached = 100.0 * cumulative[at] / total
            if reached >= level:
                steps.append((reached, tops[at]))
            steps.append((reached, tops[at]))
            return steps
        reached = 100.0 * cumulative[at] / total
        if reached >= level:
            steps.append((reached, tops[at]))
            level = _next_level(level, ticks_per_half_distance)
        else:
            at += 1


def quantile_map(
    keys: np.ndarray, counts: np.ndarray, divisor: float | None = None
) -> dict[float, float | int]:
    """The ``aggregated*Quantiles`` map OMB builds from :func:`percentile_steps` (a ``TreeMap``: a
    percentile answered twice keeps its last value): percentile -> value iterated to, divided by
    ``divisor`` (``/ 1000.0``: microseconds to milliseconds) or as the integer it is (``None``)."""
    out: dict[float, float | int] = {}
    for reached, value in percentile_steps(keys, counts):
        out[reached] = value if divisor is None else value / divisor
    return dict(sorted(out.items()))


def percentiles(keys: np.ndarray, counts: np.ndarray, ps: Sequence[float]) -> list[int]:
    """:func:`value_at_percentile` of each of ``ps``."""
    return [value_at_percentile(keys, counts, p) for p in ps]
