"""Capacity planning: the smallest cluster that meets a p99 target (and a failure-rate bound) for a
scenario, e.g. one with a broker degraded (``jobs/capacity.py``).

The sweep is a set of variants of the scenario (:mod:`rocketsim.scenario.variants`), one per cluster size: the
number of brokers (``cluster.brokers``: the scenario's brokers first, then ``broker-<letter>`` names) or of
write queues per broker (``cluster.write_queues``). Each variant is a whole run (with closed-loop brokers,
every producer of the variant simulated together); its ``run_summary`` row "all" (and its
``broker_windows``) gives the variant's row of the ``capacity`` table (:func:`capacity_table`), and
:func:`answer` names the smallest size that meets both bounds.
"""

from __future__ import annotations

import itertools
import string
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim.scenario import Scenario, ScenarioError
from rocketsim.scenario.variants import Variant
from rocketsim.tables import schemas

BROKERS, QUEUES = "brokers", "write_queues"  # the axes of a sweep
CAPACITY_DATA = schemas.data_schema(schemas.CAPACITY)


MAX_BROKERS = 1024  # a sweep's largest cluster (as many as a broker's write queues may be)


def broker_names(existing: Sequence[str], n: int) -> list[str]:
    """``n`` broker names: the scenario's own first, then ``broker-a``, ``broker-b``, ... (then
    ``broker-43``, ``broker-44``, ...) not yet used."""
    names = list(existing[:n])
    letters = (*string.ascii_lowercase, *(a + b for a in "ab" for b in "abcdefgh"))
    spare = itertools.chain((f"broker-{c}" for c in letters), (f"broker-{i}" for i in itertools.count(43)))
    while len(names) < n:
        name = next(spare)
        if name not in names:
            names.append(name)
    return names


def size_variants(sc: Scenario, axis: str, sizes: Sequence[int]) -> list[Variant]:
    """One variant per cluster size along ``axis`` (:data:`BROKERS` or :data:`QUEUES`), named
    ``brokers=N`` / ``write_queues=N``, in ascending size."""
    if axis not in (BROKERS, QUEUES):
        raise ScenarioError(f"the sweep's axis must be {BROKERS} or {QUEUES}, got {axis!r}")
    ordered = sorted(set(sizes))
    if len(ordered) < 2 or ordered[0] < 1:
        raise ScenarioError(
            f"--{axis.replace('_', '-')} needs at least 2 distinct sizes >= 1, got {list(sizes)}"
        )
    if axis == BROKERS and ordered[-1] > MAX_BROKERS:
        raise ScenarioError(f"--brokers sizes must be at most {MAX_BROKERS}, got {ordered[-1]}")
    out = []
    for n in ordered:
        if axis == BROKERS:
            names = ",".join(f'"{b}"' for b in broker_names(sc.cluster.brokers, n))
            override = f"cluster.brokers=[{names}]"
        else:
            override = f"cluster.write_queues={n}"
        out.append(Variant(f"{axis}={n}", (override,)))
    return out


def capacity_table(
    run_summary: pa.Table,
    broker_windows: pa.Table,
    scenarios: Mapping[str, Scenario],
    target_p99_ms: float,
    max_failure_rate: float,
) -> pa.Table:
    """One row per variant (``CAPACITY`` without run_id, in ascending size) from the variants' summary
    tables (a ``variant`` column first): its size, messages, failures, p99, flow-control rejections, the
    busiest broker window's utilisation, whether it meets both bounds, and ``smallest`` on the first
    that does."""
    rows = []
    for name, sc in scenarios.items():
        all_row = run_summary.filter(
            pc.and_(
                pc.equal(run_summary.column("variant"), name), pc.equal(run_summary.column("scope"), "all")
            )
        ).to_pylist()
        if len(all_row) != 1:
            raise ValueError(f"capacity: variant {name} has {len(all_row)} run_summary rows 'all'")
        r = all_row[0]
        windows = broker_windows.filter(pc.equal(broker_windows.column("variant"), name))
        util = pc.max(windows.column("utilisation")).as_py() if windows.num_rows else None
        failure = (r["failed"] + r["rejected"]) / r["messages"] if r["messages"] else None
        p99 = r["latency_p99_ms"]
        meets = (
            p99 is not None and failure is not None and p99 <= target_p99_ms and failure <= max_failure_rate
        )
        rows.append(
            {
                "variant": name,
                "brokers": len(sc.cluster.brokers),
                "write_queues": sc.cluster.write_queues,
                "messages": r["messages"],
                "failed": r["failed"],
                "failure_rate": failure,
                "latency_p99_ms": p99,
                "latency_p999_ms": r["latency_p999_ms"],
                "busy_rejections": int(sum(r[c] for c in schemas.BUSY_COLUMNS)),
                "max_utilisation": util,
                "target_p99_ms": float(target_p99_ms),
                "max_failure_rate": float(max_failure_rate),
                "meets_target": meets,
                "smallest": False,
            }
        )
    rows.sort(key=lambda x: (x["brokers"], x["write_queues"]))
    first = next((x for x in rows if x["meets_target"]), None)
    if first is not None:
        first["smallest"] = True
    return pa.Table.from_pylist(rows, CAPACITY_DATA)


def answer(table: pa.Table) -> str:
    """The sweep's answer in one sentence."""
    rows = table.to_pylist()
    if not rows:
        return "no variant ran"
    target, bound = rows[0]["target_p99_ms"], rows[0]["max_failure_rate"]
    chosen = [r for r in rows if r["smallest"]]
    bounds = f"p99 <= {target:g} ms and failures <= {bound:.3%}"
    if not chosen:
        largest = rows[-1]
        return (
            f"no cluster of the sweep meets {bounds}: the largest ({largest['variant']}) has p99 "
            f"{_ms(largest['latency_p99_ms'])} and {_pct(largest['failure_rate'])} failed"
        )
    r = chosen[0]
    return (
        f"smallest cluster meeting {bounds}: {r['variant']} ({r['brokers']} brokers x {r['write_queues']} "
        f"write queues): p99 {_ms(r['latency_p99_ms'])}, {_pct(r['failure_rate'])} failed"
    )


def _ms(v: float | None) -> str:
    return "-" if v is None or np.isnan(v) else f"{v:,.1f} ms"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.3%}"
