"""The Netty legs as a cost a wakeup plus a cost a request (``producers.netty_*_wakeup_us``,
``store.selector_wakeup_us`` and ``codec_wakeup_us``; docs/validation.md, "The Netty legs' cost a wakeup").

Upstream: netty 4.1 (rocketmq-all-4.9.8's netty-all) ``NioEventLoop.run`` wakes from one ``select`` and
handles every ready key (``processSelectedKeys``: ``NioByteUnsafe.read`` reads what the socket holds, and
``ByteToMessageDecoder.callDecode`` decodes every frame in it, ``NettyDecoder`` being a
``LengthFieldBasedFrameDecoder``) and every task queued meanwhile (``runAllTasks``: the writes other
threads handed it); a flush writes every message queued on the channel with one gathering write
(``NioSocketChannel.doWrite``). rocketmq-all-4.9.8 runs a request through such threads:
``NettyRemotingClient`` (one selector event loop, ``eventLoopGroupWorker``; the channel's
``NettyEncoder``/``NettyDecoder``/``NettyClientHandler`` on ``defaultEventExecutorGroup``) and
``NettyRemotingServer`` (the channel's socket on one ``eventLoopGroupSelector`` thread, its decoder and
``NettyServerHandler`` on one thread of ``defaultEventExecutorGroup``, ``NettyServerCodecThread_``).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from rocketsim.broker.queue import BrokerStore, StoreParams
from rocketsim.calibration.wakeups import LEGS, ThreadRun, fit_legs, leg_cost_us, parse_thread_run
from rocketsim.client.host import ClientThreads, HostCores, client_threads
from rocketsim.client.wakeups import WakeupLeg
from rocketsim.engine import simulate
from rocketsim.errors import MeasurementError
from rocketsim.scenario import ScenarioError, scenario_from_mapping
from rocketsim.scenario.workload import generate
from rocketsim.warehouse.thread_runs import read_thread_runs


def _worker(leg: WakeupLeg | None, constant_us: float = 4.0) -> ClientThreads:
    """A producer's Netty worker alone (the write's selector part 0), on cores with room for everything."""
    legs = {"worker": leg} if leg is not None else {}
    return ClientThreads(HostCores(8), 0, 0.0, (constant_us, 0.0), (0.0, 0.0), 0.0, {}, 0.0, legs)


def test_a_queued_burst_costs_one_wakeup_plus_its_requests_and_an_isolated_request_a_wakeup_plus_one() -> (
    None
):
    threads = _worker(WakeupLeg(wakeup_us=5.0, request_us=1.0))
    # ten requests in the queue when the thread wakes at 100: one wakeup, then one request after another
    ends = [threads.write(100.0) for _ in range(10)]
    assert ends == pytest.approx([106.0 + k for k in range(10)])  # 5 + 10 x 1: the last done at 115
    # a request alone, long after: a wakeup of its own
    assert threads.write(1000.0) == pytest.approx(1006.0)
    # one that arrives while a wakeup runs waits for the next, which takes what queued meanwhile
    assert threads.write(1003.0) == pytest.approx(1012.0)  # the next wakeup from 1006: 5 + 1
    assert threads.write(1005.0) == pytest.approx(1013.0)  # queued before it began: 1 more


def test_a_burst_drains_faster_on_a_leg_than_at_a_constant_cost_a_request() -> None:
    burst = 100
    constant = _worker(None, constant_us=4.0)  # today's: the 40,000/s figure, whatever the queue
    leg = _worker(WakeupLeg(wakeup_us=5.0, request_us=1.0))
    assert max(constant.write(0.0) for _ in range(burst)) == pytest.approx(400.0)
    assert max(leg.write(0.0) for _ in range(burst)) == pytest.approx(105.0)
    # one request alone costs the leg more than the constant: the wakeup is paid by one
    assert _worker(WakeupLeg(5.0, 1.0)).write(0.0) > _worker(None).write(0.0)


def _params(**kw: Any) -> StoreParams:
    return StoreParams(16.0, 2, 10_000, 200, 1000, 0, 2, **kw)


def test_a_connections_selector_and_codec_threads_read_a_queued_burst_with_one_wakeup_each() -> None:
    store = BrokerStore(
        _params(
            io_us=6.0,
            codec_share=0.5,
            selector_wakeup_us=4.0,
            selector_request_us=0.5,
            codec_wakeup_us=3.0,
            codec_request_us=1.0,
        )
    )
    conn = store.connection()
    # three requests in the socket at 10: the selector reads them in one wakeup (4 + 3 x 0.5: at 14.5,
    # 15, 15.5); the codec thread, woken by the first at 14.5 (3 + 1), finds the second after it began:
    # the next wakeup (from 18.5) takes the second and the third, queued by then
    done = [store.read_request(conn, 10.0) for _ in range(3)]
    assert done == pytest.approx([18.5, 22.5, 23.5])
    assert store.read_request(conn, 100.0) == pytest.approx(100.0 + 4.5 + 4.0)  # alone: both wakeups
    # without the legs: io_us's halves a request, one after another
    plain = BrokerStore(_params(io_us=6.0, codec_share=0.5))
    assert [plain.read_request(plain.connection(), 10.0) for _ in range(1)] == [16.0]
    c = plain.connection()
    assert [plain.read_request(c, 10.0) for _ in range(3)] == pytest.approx([16.0, 19.0, 22.0])


def _shared(store: dict[str, Any]) -> Any:
    # 50,000 requests/s of 24 us each on one connection's one thread: 1.2 cores, more than a thread has
    raw: dict[str, Any] = {
        "name": "wakeups",
        "seed": 5,
        "cluster": {"brokers": ["broker-a"]},
        "producers": {
            "count": 1,
            "send_mode": {"async": 1},
            "processors": 2,
            "send_cpu_us": 6.0,
            "send_msg_timeout_ms": 3000,
            "shared_host": True,
            "host_scheduler": "fair",
        },
        "workload": {
            "rate_steps": [[50_000.0, 0.3]],
            "arrival": "uniform",
            "tags": [],
            "keys": False,
            "body_size": {"distribution": "fixed", "median": 900, "min": 900, "max": 900},
        },
        "brokers": {
            "coupling": "joint",
            "default": {
                "latency": {"median_ms": 0.3, "sigma": 0.1, "spike_probability": 0.0},
                "errors": {},
                "store": {"append_us": 2.0, "on_producer_host": True, "io_us": 24.0, **store},
            },
        },
    }
    return scenario_from_mapping(raw)


def test_a_connection_read_as_a_leg_keeps_up_where_the_constant_cost_a_request_falls_behind() -> None:
    waits = {}
    for name, store in {
        "constant": {},
        # an isolated request costs the leg 22 + 2 = 24 us, as the constant does; queued ones 2 us each
        "leg": {"selector_wakeup_us": 22.0, "selector_request_us": 2.0},
    }.items():
        sc = _shared(store)
        out = simulate(generate(sc), sc)
        waits[name] = max(out.attempts["latency_ms"].to_pylist())
    assert waits["constant"] > 100  # the requests wait unread, more and more
    assert waits["leg"] < 10, waits  # the socket's queue read a wakeup at a time: it keeps up


def test_the_legs_are_off_by_default_and_refused_without_their_threads() -> None:
    sc = _shared({})
    store = BrokerStore(_params(io_us=6.0))
    assert store.connection().legs == (None, None)
    split = scenario_from_mapping(
        {
            "producers": {"shared_host": True, "send_cpu_us": 10.0, "netty_write_cpu_share": 0.4},
            "brokers": {"coupling": "joint"},
        }
    )
    threads = client_threads(split, HostCores(2), 0)
    assert threads is not None and threads.legs == {}
    assert sc.producers.netty_worker_wakeup_us == 0.0
    with pytest.raises(ScenarioError, match="producers.netty_worker_wakeup_us needs producers.netty_write"):
        scenario_from_mapping({"producers": {"netty_worker_wakeup_us": 5.0}})
    with pytest.raises(ScenarioError, match=r"store.selector_wakeup_us needs store.io_us > 0"):
        scenario_from_mapping({"brokers": {"default": {"store": {"selector_wakeup_us": 5.0}}}})
    with pytest.raises(ScenarioError, match=r"store.codec_wakeup_us needs store.codec_share > 0"):
        scenario_from_mapping(
            {"brokers": {"coupling": "joint", "default": {"store": {"io_us": 5.0, "codec_wakeup_us": 5.0}}}}
        )


def test_the_fit_recovers_known_constants_from_the_cpu_a_send_they_give() -> None:
    rates, stretch = (20_000.0, 40_000.0, 50_000.0, 60_000.0, 72_000.0), (4.0, 5.0, 6.0, 6.5, 7.0)
    runs = []
    for i, (rate, s) in enumerate(zip(rates, stretch, strict=True)):
        us = {}
        for leg in LEGS:
            lam = np.array([leg.pieces * rate / 2 / 1e6])
            us[leg.group] = float(leg_cost_us(5.0, 0.8, leg.pieces, lam, np.array([s]))[0])
        runs.append(ThreadRun(f"r{i}", rate, 2, us, {leg.group: s for leg in LEGS}))
    for fit in fit_legs(runs):
        assert fit.wakeup_us == pytest.approx(5.0, rel=0.01)
        assert fit.request_us == pytest.approx(0.8, rel=0.01)
        assert fit.max_relative_error < 1e-4


def test_the_fit_on_the_measured_threads_gives_their_falling_cost_a_send() -> None:
    fits = fit_legs(read_thread_runs())
    for fit in fits:
        assert fit.runs == ("lo_20000", "r40_40000", "r50_50000", "st_60000", "ov_72000")
        assert fit.wakeup_us > 0
        # the fitted cost a send falls with the rate, as the measured one does (from 20,000 to 40,000 and
        # to 72,000 a second; the measured 50,000 is below the 60,000)
        assert fit.fitted[0] > fit.fitted[1] > fit.fitted[-1], fit.fitted
        assert fit.fitted[0] > 1.5 * fit.fitted[-1]
        assert fit.max_relative_error < 0.9


def test_a_bad_thread_run_is_one_line_naming_the_file() -> None:
    meta = json.dumps({"producers": 2})
    with pytest.raises(MeasurementError, match=r"^x.summary.json: expected a per-thread run's summary"):
        parse_thread_run("x", "{}", meta, "x.summary.json")
