"""Spark's arithmetic in numpy: the exact percentile, queue skew and Gini, ratios and rates.

Every float of the summary tables is computed with Spark's expression in Spark's order of operations, so
the tables equal what Spark aggregations computed, bit for bit and nulls included:

* windows: ``floor(ts / window_ms) * window_ms`` divides as doubles
  (:func:`rocketsim.tables.grouping.spark_window`);
* percentiles: ``Percentile.getPercentile`` (``percentiles.scala``) over (value, count) histograms
  (:func:`exact_percentiles`);
* ratios: ``num.cast(double) / den`` where ``den > 0``, else null; rates ``ok * 1000.0 / window_ms``;
  ``avg`` as the double sum over the count;
* queue skew and Gini: ranks by count, the sum of rank * count summed as a long then cast, idle queues
  shifting the ranks, from per-cell partials (:func:`queue_spread`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa

from rocketsim.tables.grouping import first_of_runs, sort_order


def histogram(
    group: np.ndarray, values: np.ndarray, n_groups: int, value_order: Callable[[], np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group, value, count) of every distinct pair, sorted by group then value: counted in place when
    the values span a small range; else the values in the low range counted in place and the few above
    it as (group, value) keys packed in one int64 and sorted (no row order needed: only the pairs and
    their counts come out), else (keys too wide) sorted by value (``value_order()``: the stable order of
    the values, if the caller keeps one) and then, stably, by group."""
    if not len(values):
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    lo = int(values.min())
    span = int(values.max()) - lo + 1
    bins = max(2 * len(values), 1 << 16)  # counted in place: about as many as the rows, so cheap
    if n_groups * span <= bins:
        return _counted(group, np.asarray(values, np.int64) - lo, n_groups, span, lo)
    if n_groups * span < 1 << 62:
        return _split(group, np.asarray(values, np.int64) - lo, n_groups, span, lo, bins)
    order = np.argsort(values, kind="stable") if value_order is None else value_order()
    if n_groups > 1:
        order = order[np.argsort(group[order].astype(_radix(n_groups)), kind="stable")]
    g, v = group[order], values[order]
    start = np.ones(len(g), bool)
    start[1:] = (g[1:] != g[:-1]) | (v[1:] != v[:-1])
    at = np.flatnonzero(start)
    return g[at], v[at], np.diff(np.append(at, len(g))).astype(np.int64)


def _radix(n_groups: int) -> type:
    """A key type numpy sorts by radix (stable and fast) when group numbers fit it."""
    return np.uint16 if n_groups <= 1 << 16 else np.int64


def _counted(
    group: np.ndarray, offset: np.ndarray, n_groups: int, span: int, lo: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`histogram` of values ``lo + offset`` (0 <= offset < span), counted in place."""
    counts = np.bincount(group * span + offset, minlength=n_groups * span)
    at = np.flatnonzero(counts)
    return at // span, at % span + lo, counts[at].astype(np.int64)


def _split(
    group: np.ndarray, offset: np.ndarray, n_groups: int, span: int, lo: int, bins: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`histogram` of values ``lo + offset`` spread wide (latencies: most low, a few spikes): those
    with offset below ``cap`` (a power of two, ``bins`` in place at most) counted in place, the others'
    packed (group, offset) keys sorted; both parts sorted by (group, value) and every value of the first
    below every value of the second, so one stable sort by group merges them."""
    cap = 1 << max((bins // n_groups).bit_length() - 1, 0)
    low = offset < cap
    high = np.flatnonzero(~low)
    if not len(high):
        return _counted(group, offset, n_groups, cap, lo)
    g1, v1, n1 = _counted(group[low], offset[low], n_groups, cap, lo)
    keys = np.sort(np.asarray(group[high], np.int64) * span + offset[high])
    at = np.flatnonzero(first_of_runs(keys))
    g2, v2, n2 = keys[at] // span, keys[at] % span + lo, np.diff(np.append(at, len(keys))).astype(np.int64)
    g, v, n = np.concatenate([g1, g2]), np.concatenate([v1, v2]), np.concatenate([n1, n2])
    order = np.argsort(g.astype(_radix(n_groups)), kind="stable")
    return g[order], v[order], n[order]


def exact_percentiles(
    group: np.ndarray, values: np.ndarray, counts: np.ndarray, n_groups: int, ps: Sequence[float]
) -> tuple[np.ndarray, np.ndarray]:
    """Spark's exact ``percentile`` of each group of a (value, count) histogram: a (groups x ps) array
    and whether the group has values (else Spark's null).

    ``Percentile.getPercentile``: with n values, position ``pos = (n - 1) * p`` (a double); ``lower``,
    ``higher`` its floor and ceiling; the values at 0-based ranks lower and higher (the first with a
    cumulative count > rank); the lower value alone when ``higher == lower`` or both values are equal,
    else ``(higher - pos) * low + (pos - lower) * high``. Values may repeat within a group.
    """
    out = np.zeros((n_groups, len(ps)), np.float64)
    if not len(values):
        return out, np.zeros(n_groups, bool)
    order = sort_order(group, values)
    g, v, c = group[order], np.asarray(values, np.int64)[order].astype(np.float64), counts[order]
    cum = np.cumsum(c)
    n = np.bincount(g, weights=c, minlength=n_groups).astype(np.int64)
    has = n > 0
    ends = np.zeros(n_groups, np.int64)
    last = np.flatnonzero(np.append(g[1:] != g[:-1], True))
    ends[g[last]] = cum[last]
    base = ends - n
    top = len(cum) - 1
    for j, p in enumerate(ps):
        pos = (n - 1).astype(np.float64) * float(p)
        lower, higher = np.floor(pos), np.ceil(pos)
        lo_i = np.minimum(np.searchsorted(cum, base + lower.astype(np.int64) + 1, "left"), top)
        hi_i = np.minimum(np.searchsorted(cum, base + higher.astype(np.int64) + 1, "left"), top)
        low, high = v[lo_i], v[hi_i]
        mixed = (higher - pos) * low + (pos - lower) * high
        out[:, j] = np.where((higher == lower) | (high == low), low, mixed)
    return out, has


def histogram_max(group: np.ndarray, values: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """max of the values of each group (and whether it has any)."""
    out = np.full(n_groups, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(out, group, values)
    return out, out != np.iinfo(np.int64).min


def percentile_columns(
    group: np.ndarray,
    values: np.ndarray,
    counts: np.ndarray,
    n_groups: int,
    ps: Sequence[float],
    names: Sequence[str],
    max_name: str,
) -> dict[str, pa.Array]:
    """Per group of a (value, count) histogram: its exact percentiles ``ps`` as the double columns
    ``names`` and its maximum as the long column ``max_name`` (null for a group without values)."""
    pct, has = exact_percentiles(group, values, counts, n_groups, ps)
    cols = {name: arrow_column(pct[:, j], pa.float64(), has) for j, name in enumerate(names)}
    top, has_top = histogram_max(group, values, n_groups)
    cols[max_name] = arrow_column(top, pa.int64(), has_top)
    return cols


def queue_spread(
    present: np.ndarray, total: np.ndarray, busiest: np.ndarray, sum_ix: np.ndarray, n_queues: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(skew, gini, valid) of per-queue counts from their partials (Spark's ``queue_stats`` before).

    ``present`` queues with attempts, ``total`` attempts, ``busiest`` the largest count, ``sum_ix`` the
    sum of rank * count over the present queues ranked by count ascending (a long), ``n_queues`` the
    queues of the group in all (the idle ones sort first: ranks shift by n_queues - present)::

        sum_ix' = double(sum_ix) + double(q - present) * double(total)
        skew = busiest / (total / q)
        gini = (2 * sum_ix' - (q + 1) * total) / (q * total)      all in doubles, null without attempts
    """
    q = np.asarray(n_queues, np.int64)
    total_d = np.asarray(total, np.int64).astype(np.float64)
    shifted = np.asarray(sum_ix, np.int64).astype(np.float64) + (q - present).astype(np.float64) * total_d
    valid = total_d > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        skew = np.asarray(busiest, np.int64).astype(np.float64) / (total_d / q.astype(np.float64))
        gini = (2.0 * shifted - (q + 1).astype(np.float64) * total_d) / (q.astype(np.float64) * total_d)
    return skew, gini, valid


def spread_partials(cell: np.ndarray, n: np.ndarray, n_cells: int) -> tuple[np.ndarray, ...]:
    """(present, total, busiest, sum_ix) per cell of per-queue counts ``n`` (> 0): ``queue_stats``'s
    aggregation over ``row_number() over (partition by cell order by n)`` (ties give the same sums)."""
    present, total, busiest, sum_ix = (np.zeros(n_cells, np.int64) for _ in range(4))
    if not len(cell):
        return present, total, busiest, sum_ix
    order = sort_order(cell, n)
    c, v = cell[order], np.asarray(n, np.int64)[order]
    starts = np.flatnonzero(first_of_runs(c))
    sizes = np.diff(np.append(starts, len(c)))
    rank = np.arange(len(c)) - np.repeat(starts, sizes) + 1
    cells = c[starts]
    present[cells] = sizes
    total[cells] = np.add.reduceat(v, starts)
    sum_ix[cells] = np.add.reduceat(rank * v, starts)
    busiest[cells] = v[starts + sizes - 1]  # sorted ascending within the cell
    return present, total, busiest, sum_ix


def ratio(num: np.ndarray, den: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``when(den > 0, num.cast(double) / den)``: values and validity."""
    num_d = np.asarray(num).astype(np.float64)
    den_d = np.asarray(den).astype(np.float64)
    valid = den_d > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        return num_d / np.where(valid, den_d, 1.0), valid


def rate_per_s(ok: np.ndarray, window_ms: int | np.ndarray) -> np.ndarray:
    """``ok * 1000.0 / window_ms`` (multiply first, in doubles)."""
    return np.asarray(ok, np.int64).astype(np.float64) * 1000.0 / np.asarray(window_ms).astype(np.float64)


def arrow_column(values: np.ndarray, type_: pa.DataType, valid: np.ndarray | None = None) -> pa.Array:
    """``values`` as an Arrow array of ``type_``, null where not ``valid``."""
    mask = None if valid is None or valid.all() else ~valid
    return pa.array(values, type_, mask=mask)
