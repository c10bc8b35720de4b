"""Capacity planning: the smallest cluster that meets a p99 target (and a failure-rate bound) for a
scenario, e.g. one with a broker degraded (``jobs/capacity.py``).

The sweep is a set of variants of the scenario (:mod:`rocketsim.scenario.variants`), one per cluster size: the
number of brokers (``cluster.brokers``: the scenario's brokers first, then ``broker-<letter>`` names) or of
write queues per broker (``cluster.write_queues``). Each variant is a whole run (with closed-loop brokers,
every producer of the variant simulated together); its ``run_summary`` row "all" (and its
``broker_windows``) gives the variant's row of the ``capacity`` table (:func:`capacity_table`), and
:func:`answer` names the smallest size that meets both bounds and what limits it.

Honest answers only: a sweep of open-loop brokers is refused (their latency ignores load,
:func:`check_closed_loop`); a size whose iterative rounds did not converge is run again with the joint
loop (:func:`exact_rerun`) or answers nothing (:class:`Coupling`); the writers' load reads as offered load
against capacity beside a busy share capped at 100% and the backlog.
"""

from __future__ import annotations

import dataclasses
import itertools
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim.broker.queue import ITERATIVE, JOINT, OPEN
from rocketsim.scenario import Scenario, ScenarioError
from rocketsim.scenario.variants import Variant
from rocketsim.tables import schemas

BROKERS, QUEUES = "brokers", "write_queues"  # the axes of a sweep
CAPACITY_DATA = schemas.data_schema(schemas.CAPACITY)
# the largest size run again with the exact joint loop when its iterative rounds did not converge (the
# joint loop runs one task on the reference engine: about 4,000 messages/s on one core)
JOINT_RERUN_MESSAGES = 250_000
NEAR_CAPACITY = 0.9  # a writer window offered this share of its capacity limits the size
CLIENT_SHARE = 0.5  # sends waiting this share of the p99 target for a sender thread: the client limits
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


@dataclass(frozen=True)
class Coupling:
    """How a size's figures were made: its closed-loop coupling, and the iterative run's rounds and
    residual (None: not run iterative; a size run again ``joint`` keeps its iterative ones)."""

    coupling: str
    rounds: int | None = None
    residual: int | None = None

    @property
    def converged(self) -> bool:
        """Exact (joint), or a fixed point of the iterative rounds (residual 0)."""
        return self.coupling == JOINT or (self.coupling == ITERATIVE and self.residual == 0)

    def describe(self) -> str:
        """``iterative, 12 rounds, residual 53,343`` or ``joint``."""
        if self.rounds is None:
            return self.coupling
        return f"{self.coupling}, {plural(self.rounds, 'round')}, residual {self.residual:,}"


def check_closed_loop(sc: Scenario) -> None:
    """A sweep needs closed-loop brokers: with ``brokers.coupling = open`` latency ignores load, so every
    size would look the same and the smallest would always "meet" the target."""
    if sc.coupling == OPEN:
        raise ScenarioError(
            "brokers.coupling must be iterative or joint for a capacity sweep, got 'open': open-loop broker "
            "latency ignores load, so every cluster size answers alike (set brokers.coupling = "
            '"iterative", or "joint" for small runs)'
        )


def exact_rerun(sc: Scenario) -> Scenario | None:
    """``sc`` with the exact joint coupling, to run again a size whose iterative rounds did not converge;
    None when it is too large for the joint loop (:data:`JOINT_RERUN_MESSAGES`)."""
    if sc.workload.total_messages() > JOINT_RERUN_MESSAGES:
        return None
    return dataclasses.replace(sc, broker_coupling=JOINT)


def _scope_rows(run_summary: pa.Table, variant: str) -> dict[str, dict]:
    rows = run_summary.filter(pc.equal(run_summary.column("variant"), variant)).to_pylist()
    return {r["scope"]: r for r in rows}


def _load(windows: pa.Table, end_ms: int) -> tuple[float | None, int | None]:
    """The busiest broker window's writer load (its appends' writer time over the part of the window
    inside the run, which ends at ``end_ms``: a short run's last window is not diluted) and the deepest
    send queue a request found."""
    util = windows.column("utilisation").to_numpy(zero_copy_only=False).astype(np.float64)
    has = ~np.isnan(util)
    if not has.any():
        return None, None
    start = windows.column("window_start_ms").to_numpy()
    length = windows.column("window_ms").to_numpy()
    covered = np.clip(np.minimum(start + length, end_ms) - start, 1, length)
    load = float(np.max((util * length / covered)[has]))
    return load, pc.max(windows.column("queue_depth_max")).as_py()


def _degraded(scopes: Mapping[str, dict], sc: Scenario) -> tuple[float | None, float | None]:
    """The faults' brokers' share of the attempts and the slowest one's attempt p99."""
    hit = sorted({f.broker for f in sc.faults} & set(scopes))
    if not hit or not scopes["all"]["sends"]:
        return None, None
    share = sum(scopes[b]["sends"] for b in hit) / scopes["all"]["sends"]
    p99s = [
        scopes[b]["attempt_latency_p99_ms"] for b in hit if scopes[b]["attempt_latency_p99_ms"] is not None
    ]
    return share, max(p99s, default=None)


def limited_by(row: Mapping, degraded: str) -> str:
    """What limits a size (a ``capacity`` row without it), in words: the brokers' commit-log writers
    (their busiest window at :data:`NEAR_CAPACITY` of what they can do, or flow control rejecting), the
    degraded broker (its attempts' p99 over the target), the client (sends waiting for a sender thread
    longer than :data:`CLIENT_SHARE` of the target, p99), or nothing near its limit."""
    out = []
    load = row["peak_writer_load"]
    if (load is not None and load >= NEAR_CAPACITY) or row["busy_rejections"]:
        what = "" if load is None else f"busiest window offered {load:.0%} of a writer's capacity"
        busy = f"{row['busy_rejections']:,} flow-control rejections" if row["busy_rejections"] else ""
        out.append(f"the brokers' writers ({', '.join(x for x in (what, busy) if x)})")
    target = row["target_p99_ms"]
    if row["degraded_p99_ms"] is not None and row["degraded_p99_ms"] > target:
        out.append(
            f"the degraded broker {degraded} ({row['degraded_share']:.0%} of attempts, attempt p99 "
            f"{row['degraded_p99_ms']:,.0f} ms)"
        )
    wait = row["queue_wait_p99_ms"]
    if wait is not None and wait > CLIENT_SHARE * target:
        out.append(
            f"the client (sends wait {wait:,.0f} ms for a sender thread, p99: the brokers got the load later "
            "than offered; raise producers.threads)"
        )
    return "; ".join(out) or "nothing near its limit"


def capacity_table(
    run_summary: pa.Table,
    broker_windows: pa.Table,
    scenarios: Mapping[str, Scenario],
    target_p99_ms: float,
    max_failure_rate: float,
    couplings: Mapping[str, Coupling] | None = None,
) -> pa.Table:
    """One row per variant (``CAPACITY`` without run_id, in ascending size) from the variants' summary
    tables (a ``variant`` column first) and how each was coupled (``couplings``; default: its scenario's
    coupling): its size, messages, failures, p99, flow-control rejections, the writers' peak load and
    backlog, the client's wait, the degraded broker's share and p99, what limits it, whether it meets both
    bounds (null when it did not converge), and ``smallest`` on the first that does when every smaller
    size is known not to."""
    rows = []
    for name, sc in scenarios.items():
        scopes = _scope_rows(run_summary, name)
        if "all" not in scopes:
            raise ValueError(f"capacity: variant {name} has no run_summary row 'all'")
        r = scopes["all"]
        coupling = (couplings or {}).get(name) or Coupling(sc.coupling)
        windows = broker_windows.filter(pc.equal(broker_windows.column("variant"), name))
        load, depth = _load(windows, r["duration_ms"])
        share, slow = _degraded(scopes, sc)
        failure = (r["failed"] + r["rejected"]) / r["messages"] if r["messages"] else None
        p99 = r["latency_p99_ms"]
        meets = (
            p99 is not None and failure is not None and p99 <= target_p99_ms and failure <= max_failure_rate
        )
        row = {
            "variant": name,
            "brokers": len(sc.cluster.brokers),
            "write_queues": sc.cluster.write_queues,
            "messages": r["messages"],
            "failed": r["failed"],
            "failure_rate": failure,
            "latency_p99_ms": p99,
            "latency_p999_ms": r["latency_p999_ms"],
            "busy_rejections": int(sum(r[c] for c in schemas.BUSY_COLUMNS)),
            "coupling": coupling.coupling,
            "coupling_rounds": coupling.rounds,
            "coupling_residual": coupling.residual,
            "converged": coupling.converged,
            "peak_writer_load": load,
            "peak_writer_busy": None if load is None else min(load, 1.0),
            "peak_queue_depth": depth,
            "queue_wait_p99_ms": r["queue_wait_p99_ms"],
            "degraded_share": share,
            "degraded_p99_ms": slow,
            "target_p99_ms": float(target_p99_ms),
            "max_failure_rate": float(max_failure_rate),
            "meets_target": meets if coupling.converged else None,
            "smallest": False,
        }
        row["limited_by"] = limited_by(row, ", ".join(sorted({f.broker for f in sc.faults})))
        rows.append(row)
    rows.sort(key=lambda x: (x["brokers"], x["write_queues"]))
    for x in rows:  # the first that meets, if every smaller one is known not to
        if x["meets_target"] is None:
            break
        if x["meets_target"]:
            x["smallest"] = True
            break
    return pa.Table.from_pylist(rows, CAPACITY_DATA)


def answer(table: pa.Table) -> str:
    """The sweep's answer in a few sentences: the size, its figures and what limits it; the sizes that
    did not converge and how they were run, or why there is no answer."""
    rows = table.to_pylist()
    if not rows:
        return "no variant ran"
    target, bound = rows[0]["target_p99_ms"], rows[0]["max_failure_rate"]
    bounds = f"p99 <= {target:g} ms and failures <= {bound:.3%}"
    notes = [_not_converged(r) for r in rows if r["coupling_rounds"] is not None and r["coupling_residual"]]
    chosen = [r for r in rows if r["smallest"]]
    unknown = next((r for r in rows if r["meets_target"] is None), None)
    if chosen:
        r = chosen[0]
        head = (
            f"smallest cluster meeting {bounds}: {r['variant']} ({plural(r['brokers'], 'broker')} x "
            f"{plural(r['write_queues'], 'write queue')}): p99 {_ms(r['latency_p99_ms'])}, "
            f"{_pct(r['failure_rate'])} failed; limited by {r['limited_by']}"
        )
    elif unknown is not None:
        head = (
            f"no answer: {unknown['variant']} did not converge and could not be run again exactly, and no "
            f"smaller size meets {bounds}"
        )
    else:
        largest = rows[-1]
        head = (
            f"no cluster of the sweep meets {bounds}: the largest ({largest['variant']}) has p99 "
            f"{_ms(largest['latency_p99_ms'])} and {_pct(largest['failure_rate'])} failed; limited by "
            f"{largest['limited_by']}"
        )
    return "\n".join([head, *(f"  note: {n}" for n in notes)])


def _not_converged(r: Mapping) -> str:
    """A size whose iterative rounds stopped at the limit: how it was answered."""
    how = Coupling(ITERATIVE, r["coupling_rounds"], r["coupling_residual"]).describe()  # the iterative run
    if r["converged"]:
        return f"{r['variant']} did not converge ({how}): its figures are the exact joint loop's"
    return (
        f"{r['variant']} did not converge ({how}): no answer for it, too large to run again joint (at most "
        f"{JOINT_RERUN_MESSAGES:,} messages): rerun the sweep with fewer messages or brokers.coupling = joint"
    )


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _ms(v: float | None) -> str:
    return "-" if v is None or np.isnan(v) else f"{v:,.1f} ms"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.3%}"
