"""Small runs simulated in this process (no Spark, no warehouse) for the tests of the charts and the
report: the :class:`~rocketsim.present.explore.RunData` the report reads, with a fault inside the run and
a last window that the run's end cuts short."""

from __future__ import annotations

from functools import cache

from rocketsim.present.closed_loop import summary_of
from rocketsim.present.explore import RunData
from rocketsim.present.timeline import fault_spans
from rocketsim.scenario import Scenario, scenario_from_mapping

WINDOW_MS = 1000
RATE_PER_S = 400.0
# 4 producers at 100 msg/s each, uniform arrivals: they all stop at 7.5 s, half-way through the last
# 1 s window; broker-b 200x slower (600 ms answers) from 2 s to 5 s (the fault strategy isolates it)
SCENARIO = {
    "seed": 7,
    "producers": {"count": 4, "threads": 4, "client_version": "4.9.8", "send_latency_fault_enable": True},
    "workload": {"messages": 3000, "rate_per_s": RATE_PER_S, "arrival": "uniform"},
    "brokers": {"default": {"latency": {"median_ms": 3.0, "sigma": 0.5}}},
    "faults": [{"broker": "broker-b", "kind": "slowdown", "start_s": 2.0, "end_s": 5.0, "factor": 200.0}],
}


def scenario(brokers: int = 4, closed: bool = False) -> Scenario:
    """The scenario of :func:`small_run` (``closed``: the brokers' exact closed loop)."""
    names = [f"broker-{chr(ord('a') + i)}" for i in range(brokers)]
    raw = {
        "name": f"charts-{brokers}",
        "cluster": {"brokers": names, "write_queues": 4, "read_queues": 4},
        **SCENARIO,
    }
    if closed:
        raw["brokers"] = {**raw["brokers"], "coupling": "joint"}
    return scenario_from_mapping(raw)


@cache
def small_run(brokers: int = 4, closed: bool = False) -> RunData:
    """The run of :func:`scenario`, summarised in ``WINDOW_MS`` windows, as the report reads it."""
    sc = scenario(brokers, closed)
    tables = {name: t.to_pandas() for name, t in summary_of(sc, WINDOW_MS).items()}
    return RunData(
        run_id=sc.name,
        summary=tables["run_summary"],
        broker_windows=tables["broker_windows"],
        queue_windows=tables["queue_windows"],
        producer_windows=tables["producer_windows"],
        intervals=tables["isolation_intervals"],
        scenario=sc,
        faults=fault_spans(sc),
        fault_windows=tables["fault_windows"],
    )
