"""The shipped closed-loop scenarios answer their questions (small runs, joint coupling: the exact loop).

* cascade.toml: broker-b browns out, the 4.9.8 fault strategy isolates it (latency >= 550 ms: 30 s and
  more, MQFaultStrategy.latencyMax / notAvailableDuration) and its traffic overloads the others: their
  BrokerFastFailure sweeper sheds it as [TIMEOUT_CLEAN_QUEUE]; with the strategy off nothing moves.
* store_stall.toml: a 1.5 s append stall fills broker-a's queue: [TIMEOUT_CLEAN_QUEUE] after 200 ms,
  then (page cache busy past 1000 ms) [PCBUSY_CLEAN_QUEUE] and [REJECTREQUEST]; a 4.9.8 client fails them
  (DefaultMQProducer.retryResponseCodes has no SYSTEM_BUSY before 5.3.0), a 5.3.3 client retries them.
* overload_retry.toml: 118% of capacity: 4.9.8 fails the shed sends, 5.3.3 retries them (fewer failures,
  more attempts, higher latency); nothing is stored twice (a rejected request is not stored).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim import engine
from rocketsim.scenario import load_scenario, workload
from rocketsim.stage import tables as stage

ROOT = Path(__file__).resolve().parents[1]


@cache
def run(name: str, *overrides: str) -> engine.SimOutput:
    sc = load_scenario(ROOT / "conf" / "scenarios" / f"{name}.toml", ["brokers.coupling=joint", *overrides])
    m = pa.concat_tables([stage.producer_messages(sc, s) for s in workload.producer_shares(sc)])
    return engine.simulate(m, sc)


def busy(out: engine.SimOutput, kind: str, broker: str | None = None) -> int:
    a = out.attempts
    if broker is not None:
        a = a.filter(pc.equal(a.column("broker"), broker))
    return pc.sum(pc.equal(a.column("busy_kind"), kind)).as_py() or 0


def failed(out: engine.SimOutput) -> int:
    return pc.sum(pc.equal(out.results.column("status"), "FAILED")).as_py() or 0


def test_cascade_the_healthy_brokers_shed_the_moved_traffic() -> None:
    on = run("cascade", "workload.duration_s=60")
    off = run("cascade", "workload.duration_s=60", "producers.send_latency_fault_enable=false")
    for broker in ("broker-a", "broker-c", "broker-d"):
        assert busy(on, "TIMEOUT_CLEAN_QUEUE", broker) > 50, broker
        assert busy(off, "TIMEOUT_CLEAN_QUEUE", broker) == 0, broker
    assert failed(on) > 0.03 * on.results.num_rows and failed(off) < 0.05 * failed(on)


def test_store_stall_fails_on_4_9_8_and_is_retried_on_5_3_3() -> None:
    old = run("store_stall", "workload.duration_s=40")
    new = run("store_stall", "workload.duration_s=40", "producers.client_version=5.3.3")
    for kind in ("TIMEOUT_CLEAN_QUEUE", "PCBUSY_CLEAN_QUEUE", "REJECTREQUEST"):
        assert busy(old, kind, "broker-a") > 0, kind
    assert busy(old, "TIMEOUT_CLEAN_QUEUE") == busy(old, "TIMEOUT_CLEAN_QUEUE", "broker-a")
    assert failed(old) > 100 and failed(new) == 0
    retries = pc.sum(pc.greater(new.attempts.column("attempt"), 0)).as_py()
    assert retries > 20 and pc.sum(pc.greater(old.attempts.column("attempt"), 0)).as_py() == 0


def test_overload_retrying_system_busy_trades_failures_for_load_and_latency() -> None:
    old = run("overload_retry", "workload.duration_s=20")
    new = run("overload_retry", "workload.duration_s=20", "producers.client_version=5.3.3")
    assert failed(old) > 0.05 * old.results.num_rows
    assert failed(new) < 0.2 * failed(old)
    assert new.attempts.num_rows > 1.1 * old.attempts.num_rows  # the retries' extra load
    p99 = [np.percentile(np.asarray(o.results.column("latency_ms")), 99) for o in (old, new)]
    assert p99[1] > p99[0]
    for out in (old, new):  # a request the sweeper rejected was not stored: no duplicates
        assert pc.sum(out.attempts.column("stored")).as_py() == out.results.num_rows - failed(out)
