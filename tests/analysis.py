"""Plain, readable reference implementations of analysis metrics (no Spark, no I/O), the oracle the tests
hold the fast versions to.

The fast versions, vectorised over whole runs, are in :mod:`rocketsim.tables.summaries`:
:func:`~rocketsim.tables.summaries.isolation_intervals` and :func:`~rocketsim.tables.summaries.queue_spread`
(queue skew and Gini from per-queue partials).

* ``gini``: the Gini coefficient of per-queue send counts (0 = perfectly even, (n-1)/n = all on one).
* ``skew``: max / mean of per-queue send counts.
* ``isolation_intervals``: when each producer's latency-fault table kept a broker isolated, derived from
  the attempts' ``fault_isolated_until_ms`` column (see the function for the rule).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

INTERVAL_COLUMNS = ("producer", "broker", "start_ms", "end_ms")


def gini(values: Iterable[float]) -> float:
    """Gini coefficient of non-negative ``values`` (NaN if empty or all zero).

    ``G = sum_i (2i - n - 1) x_(i) / (n sum x)`` over the values sorted ascending, i = 1..n.
    """
    x = np.sort(np.asarray(list(values), dtype=np.float64))
    n, total = len(x), float(x.sum()) if len(x) else 0.0
    if n == 0 or total == 0:
        return float("nan")
    i = np.arange(1, n + 1)
    return float(((2 * i - n - 1) * x).sum() / (n * total))


def skew(values: Iterable[float]) -> float:
    """max / mean of ``values`` (1.0 = even; NaN if empty or all zero)."""
    x = np.asarray(list(values), dtype=np.float64)
    if len(x) == 0 or x.sum() == 0:
        return float("nan")
    return float(x.max() / x.mean())


def isolation_intervals(attempts: pd.DataFrame, keys: Sequence[str] = ()) -> pd.DataFrame:
    """Isolation intervals ``[start_ms, end_ms)`` per (keys..., producer, broker) from attempt rows.

    ``fault_isolated_until_ms`` on an attempt is the producer's fault-table state for that broker right
    after the attempt ended (``end = start_ts_ms + latency_ms``): isolated until that instant, or null.
    Walking one producer's attempts to one broker in order of their end:

    * an attempt whose ``fault_isolated_until_ms`` is after its end starts (or continues) an isolation
      lasting until that value;
    * the next attempt to the same broker replaces that state at its own end: 4.9 overwrites the fault
      item, so a fast success ends an isolation early (its value is null); 5.x only extends it;
    * touching pieces (an isolation still running when the next attempt extends it) form one interval.

    An isolation that nothing ends lasts until its ``fault_isolated_until_ms``, even past the last send.
    """
    cols = [*keys, *INTERVAL_COLUMNS]
    if attempts.empty:
        return pd.DataFrame(
            {c: pd.Series(dtype="object" if c in (*keys, "broker") else "int64") for c in cols}
        )
    a = attempts.assign(end_ms=attempts["start_ts_ms"] + attempts["latency_ms"])
    a = a.sort_values([*keys, "producer", "broker", "end_ms", "start_ts_ms", "seq", "attempt"], kind="stable")
    rows: list[tuple] = []
    for group, g in a.groupby([*keys, "producer", "broker"], sort=True):
        ends = g["end_ms"].to_numpy()
        until = g["fault_isolated_until_ms"].to_numpy(dtype="float64", na_value=np.nan)
        current: list[int] | None = None  # [start, end] of the interval being built
        for i, e in enumerate(ends):
            u = until[i]
            if np.isnan(u) or u <= e:
                continue
            stop = int(min(u, ends[i + 1])) if i + 1 < len(ends) else int(u)
            if stop <= e:
                continue  # replaced at the same instant
            if current is not None and current[1] >= e:
                current[1] = stop
            else:
                if current is not None:
                    rows.append((*group, *current))
                current = [int(e), stop]
        if current is not None:
            rows.append((*group, *current))
    out = pd.DataFrame(rows, columns=cols)
    return out.astype({"producer": "int32", "start_ms": "int64", "end_ms": "int64"})
