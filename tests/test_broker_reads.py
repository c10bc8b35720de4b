"""The broker's connection I/O thread on a shared fair host (``store.io_us`` and ``store.reply_us``): where a
written request waits before the broker's send queue (docs/validation.md, "Under overload").

Upstream (rocketmq-all-4.9.8): the client writes an async request with ``channel.writeAndFlush`` once
it holds a ``semaphoreAsync`` permit and has put its ``ResponseFuture`` in ``responseTable``, without a
writability check (remoting/.../netty/NettyRemotingAbstract.java, ``invokeAsyncImpl``), so nothing
bounds what waits in the channel; the broker reads and decodes a channel's requests on that channel's
own thread (NettyRemotingServer: ``defaultEventExecutorGroup`` of ``serverWorkerThreads`` carries the
channel's NettyDecoder and NettyServerHandler) and writes each answer back on the same thread
(``processRequestCommand``'s callback: ``ctx.writeAndFlush(response)``); only then does the request
meet the send queue (its executor's ``RejectedExecutionException``: ``[OVERLOAD]``). A request the
client has given up on is failed by ``scanResponseTable`` (every second: futures older than their
timeout + 1000 ms).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from rocketsim.engine import simulate
from rocketsim.scenario import scenario_from_mapping
from rocketsim.scenario.workload import generate


def _overloaded_reads(reply_us: float) -> Any:
    # 50,000 async sends/s for 0.3 s from one producer (one connection), a request's timeout 100 ms (the
    # response-table scan fails it from 1,100 ms after it began, its first run at 3 s). The connection's
    # thread shares 2 cores with the client's 2 executor threads and the writer: with 4 us a read it keeps
    # up; with 4 + 400 us a request (the answer's write) it reads ~2,500 a second, into the scan's runs
    raw: dict[str, Any] = {
        "name": "reads",
        "seed": 5,
        "cluster": {"brokers": ["broker-a"]},
        "producers": {
            "count": 1,
            "send_mode": {"async": 1},
            "processors": 2,
            "send_cpu_us": 10.0,
            "send_msg_timeout_ms": 100,
            "retry_times_when_send_async_failed": 0,
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
                "store": {
                    "append_us": 4.0,
                    "send_threads": 1,
                    "on_producer_host": True,
                    "io_us": 4.0,
                    "reply_us": reply_us,
                },
            },
        },
    }
    return scenario_from_mapping(raw)


def test_a_connection_thread_that_cannot_keep_up_leaves_written_requests_unread_past_their_timeout() -> None:
    runs = {}
    for reply_us in (0.0, 400.0):
        sc = _overloaded_reads(reply_us)
        runs[reply_us] = simulate(generate(sc), sc)
    kept_up, behind = runs[0.0], runs[400.0]
    assert Counter(kept_up.results["status"].to_pylist()) == Counter({"SEND_OK": 15_000})
    assert max(kept_up.attempts["latency_ms"].to_pylist()) < 100
    # the requests wait unread, not in the broker's send queue: no flow control answers, the queue short
    assert not any(behind.attempts["busy_kind"].to_pylist())
    depth = np.asarray(behind.attempts["store_queue_depth"].to_numpy(zero_copy_only=False))
    assert depth.max() <= 2
    # those answered before the scan's run past their timeout succeed; the later ones the scan fails
    # (each still holding its permit until then), and the broker stores them all the same
    outcomes = Counter(behind.attempts["outcome"].to_pylist())
    assert outcomes["ok"] > 1000 and outcomes["remoting:timeout"] > 3000, outcomes
    assert sum(outcomes.values()) == 15_000
    assert all(behind.attempts["stored"].to_pylist())
