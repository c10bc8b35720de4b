"""How a host shared by the client and a broker (``producers.shared_host``) shares its cores while both want
them (``producers.host_scheduler``): first come, first served, or fair between runnable threads as Linux's
CFS does (docs/validation.md, "Under overload").

The threads counted (rocketmq-all-4.9.8): the client's async sender executor, ``availableProcessors()``
threads per producer (client/.../impl/producer/DefaultMQProducerImpl.java, the constructor's
``ThreadPoolExecutor``), its callback executor (remoting/.../netty/NettyClientConfig.java,
``clientCallbackExecutorThreads = availableProcessors()``) and the channel's Netty threads
(NettyRemotingClient: ``eventLoopGroupWorker`` of 1 thread, ``defaultEventExecutorGroup`` of
``clientWorkerThreads``); the broker's send threads (common/.../BrokerConfig.java,
``sendMessageThreadPoolNums = min(availableProcessors(), 4)``) and the channel's Netty threads
(remoting/.../netty/NettyServerConfig.java: ``serverSelectorThreads = 3``, ``serverWorkerThreads = 8``).
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from typing import Any

import numpy as np
import pytest

from rocketsim.client.heap import ClientHeap, HeapParams, client_heap, parallel_gc_threads
from rocketsim.client.host import (
    OTHER_THREAD,
    SUBMITTER,
    ClientThreads,
    FairShareHost,
    HostCores,
    HostOthers,
    client_threads,
    shared_host,
)
from rocketsim.engine import simulate
from rocketsim.scenario import ScenarioError, scenario_from_mapping
from rocketsim.scenario.workload import generate


def test_the_threads_that_want_the_cores_share_them_evenly() -> None:
    h = FairShareHost(2)
    assert h.run(0, 10) == 10 and h.run(0, 10) == 10  # two threads on two cores: a core each
    assert h.run(0, 10) == 15  # a third: two cores between three
    h.advance(5)
    assert h.run(100, 10) == 120  # booked ahead: beside what runs now (three pieces), not alone
    h.advance(200)
    assert h.stop_all(200, 100) == 200
    assert h.run(250, 10) == 310  # ready in a stop: from its end
    assert h.stop_all(400, 50) == 400
    assert h.run(395, 10) == 455  # a stop begins under it: it holds it
    h.advance(1000)
    assert h.run(1000, 10) == 1010  # alone again


def _shared(
    scheduler: str, producers: dict[str, Any] | None = None, *, steps: list | None = None, **store: Any
) -> Any:
    # 50,000 sends/s: the client's 2 executor threads at 20 us a send (1 core), the broker's appends at
    # ~16 us (0.8 core) one at a time: 1.8 cores of 2. First come, first served, both keep up; fair, the
    # writer has two thirds of a core beside the two busy executor threads: ~24 us an append, ~41,700/s
    raw: dict[str, Any] = {
        "name": "shared",
        "seed": 5,
        "cluster": {"brokers": ["broker-a"]},
        "producers": {
            "count": 1,
            "send_mode": {"async": 1},
            "processors": 2,
            "send_cpu_us": 20.0,
            "shared_host": True,
            "host_scheduler": scheduler,
            **(producers or {}),
        },
        "workload": {
            "rate_steps": steps or [[50_000.0, 0.3]],
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
                "store": {"append_us": 17.0, "send_threads": 1, "on_producer_host": True, **store},
            },
        },
    }
    return scenario_from_mapping(raw)


def test_a_broker_sharing_the_host_fairly_with_a_busy_client_overflows_its_send_queue() -> None:
    fifo, fair = _shared("fifo", send_queue_capacity=500), _shared("fair", send_queue_capacity=500)
    assert isinstance(shared_host(fifo), HostCores)
    assert isinstance(shared_host(fair), FairShareHost)
    kinds = {}
    for sc in (fifo, fair):
        out = simulate(generate(sc), sc)
        kinds[sc.producers.host_scheduler] = Counter(k for k in out.attempts["busy_kind"].to_pylist() if k)
    assert kinds["fifo"] == Counter()  # first come, first served: the broker keeps up
    assert kinds["fair"]["OVERLOAD"] > 1000  # on its share of the cores it does not: [OVERLOAD]


def test_a_connection_thread_that_cannot_keep_up_leaves_written_requests_unread_past_their_timeout() -> None:
    # Where a written request waits before the send queue (rocketmq-all-4.9.8): the client writes it once
    # it holds a semaphoreAsync permit and its ResponseFuture is in responseTable, with no writability check
    # (NettyRemotingAbstract.invokeAsyncImpl); the broker decodes a channel's requests on the channel's own
    # thread (NettyRemotingServer: NettyDecoder and NettyServerHandler on defaultEventExecutorGroup) and
    # writes each answer back on it (processRequestCommand: ctx.writeAndFlush(response)); scanResponseTable
    # fails a request from its timeout + 1000 ms. Here a request's timeout is 100 ms (the scan's first run
    # at 3 s); the connection's thread shares 2 cores with the 2 executor threads and the writer: at 4 us a
    # read it keeps up, at 4 + 400 us a request (store.reply_us, the answer's write) it reads ~2,500 a second
    fast = {"send_cpu_us": 10.0, "send_msg_timeout_ms": 100, "retry_times_when_send_async_failed": 0}
    runs = {}
    for reply_us in (0.0, 400.0):
        sc = _shared("fair", fast, append_us=4.0, io_us=4.0, reply_us=reply_us)
        runs[reply_us] = simulate(generate(sc), sc)
    kept_up, behind = runs[0.0], runs[400.0]
    assert Counter(kept_up.results["status"].to_pylist()) == Counter({"SEND_OK": 15_000})
    assert max(kept_up.attempts["latency_ms"].to_pylist()) < 100
    # the requests wait unread, not in the broker's send queue: no flow-control answer, the queue short
    assert not any(behind.attempts["busy_kind"].to_pylist())
    assert max(behind.attempts["store_queue_depth"].to_pylist()) <= 2
    # those answered before the scan's run past their timeout succeed; the later ones the scan fails
    # (each holding its permit until then), and the broker stores them all the same
    outcomes = Counter(behind.attempts["outcome"].to_pylist())
    assert outcomes["ok"] > 1000 and outcomes["remoting:timeout"] > 3000, outcomes
    assert sum(outcomes.values()) == 15_000
    assert all(behind.attempts["stored"].to_pylist())


def test_a_fair_host_needs_a_shared_one() -> None:
    raw = {"producers": {"host_scheduler": "fair"}}
    with pytest.raises(ScenarioError, match="producers.host_scheduler needs producers.shared_host = true"):
        scenario_from_mapping(raw)


def test_an_async_sends_client_cpu_runs_on_its_netty_and_callback_threads_in_order() -> None:
    # rocketmq-all-4.9.8, one client instance: NettyRemotingClient's one selector event loop
    # (NettyClientSelector_), the channel's worker of defaultEventExecutorGroup (clientWorkerThreads = 4:
    # NettyEncoder, NettyDecoder, NettyClientHandler), the public executor that runs async callbacks
    # (clientCallbackExecutorThreads = availableProcessors(); NettyRemotingAbstract.executeInvokeCallback)
    # and DefaultMQProducerImpl's async sender executor (AsyncSenderExecutor_)
    sc = _shared(
        "fair", {"netty_write_cpu_share": 0.4, "netty_read_cpu_share": 0.2, "callback_cpu_share": 0.1}
    )
    threads = client_threads(sc, HostCores(4), 0)
    assert threads is not None
    assert threads.executor_us == pytest.approx(6.0)  # 20 us a send: the executor keeps 30%
    assert threads.executor_us + sum(threads.write_us) + sum(threads.read_us) + threads.callback_us == 20.0
    assert threads.write(100.0) == 108.0  # the worker's 4 us, then the selector's
    assert threads.write(100.0) == 112.0  # the next request waits for the selector's previous one
    assert threads.read(200.0) == pytest.approx(204.0)  # the answer: selector 2, worker 2
    assert threads.callback(204.0, 0.0, "cb1") == pytest.approx(206.0)  # then the callback's 2
    assert threads.callback(204.0, 300.0, "cb1") == pytest.approx(302.0)  # its thread busy until 300
    assert client_threads(_shared("fair"), HostCores(4), 0) is None  # no shares: the model before them


def test_the_client_threads_the_fair_host_counts_take_the_brokers_share() -> None:
    # the same client CPU a send (20 us) at 50,000 sends/s on a 2-core host beside the broker's writer
    # (appends of 17 us one at a time, a send queue of 500): all of it on the 2 executor threads, or 30%
    # there and the rest on the producer's Netty worker and selector and its 2 callback threads. The host's
    # work is the same; more client threads have work at once, so the writer's share of the cores is
    # smaller: its queue overflows more often ([OVERLOAD]), and without the bound holds more
    split = {"netty_write_cpu_share": 0.4, "netty_read_cpu_share": 0.2, "callback_cpu_share": 0.1}
    overload, depth = {}, {}
    for name, producers in (("executor", None), ("split", split)):
        bounded, unbounded = _shared("fair", producers, send_queue_capacity=500), _shared("fair", producers)
        out = simulate(generate(bounded), bounded)
        overload[name] = Counter(out.attempts["busy_kind"].to_pylist())["OVERLOAD"]
        depth[name] = max(simulate(generate(unbounded), unbounded).attempts["store_queue_depth"].to_pylist())
    assert overload["split"] > 2 * overload["executor"] > 0, overload
    assert depth["split"] > 1.5 * depth["executor"], depth


def test_the_split_needs_a_shared_host_and_at_most_the_whole() -> None:
    with pytest.raises(ScenarioError, match="producers.callback_cpu_share needs producers.shared_host"):
        scenario_from_mapping({"producers": {"callback_cpu_share": 0.1}})
    with pytest.raises(ScenarioError, match="producers.netty_write_cpu_share with netty_read_cpu_share"):
        _shared("fair", {"netty_write_cpu_share": 0.6, "netty_read_cpu_share": 0.5})


def test_a_send_threads_work_outside_the_lock_leaves_the_writer_less_to_do_alone() -> None:
    # rocketmq-all-4.9.8 CommitLog.asyncPutMessage: the message is encoded (MessageExtEncoder.encode) before
    # putMessageLock.lock(); under the lock only MappedFile.appendMessage; SendMessageProcessor's handling
    # runs on the send thread (sendMessageThreadPoolNums = min(cores, 4)) before it; ReputMessageService
    # builds the consume queue on its own thread after. The same append_us a request, on a fair 2-core host
    # beside a busy client: all under the lock, or 60% on the send threads and 15% on the reput thread
    overload = {}
    for name, store in (("locked", {}), ("split", {"unlocked_share": 0.6, "reput_share": 0.15})):
        sc = _shared("fair", send_queue_capacity=500, send_threads=2, **store)
        out = simulate(generate(sc), sc)
        overload[name] = Counter(out.attempts["busy_kind"].to_pylist())["OVERLOAD"]
    assert overload["locked"] > 1000  # the writer alone on its share: its queue overflows
    assert overload["split"] < overload["locked"] / 2, overload  # the send threads take their part


def test_the_brokers_split_needs_its_host_and_at_most_the_whole() -> None:
    with pytest.raises(ScenarioError, match=r"store.reput_share needs store.on_producer_host = true"):
        scenario_from_mapping({"brokers": {"default": {"store": {"reput_share": 0.1}}}})
    with pytest.raises(ScenarioError, match=r"store.unlocked_share with store.reput_share"):
        _shared("fair", unlocked_share=0.7, reput_share=0.4)


def test_a_client_stop_holds_the_clients_threads_while_its_collector_shares_the_cores() -> None:
    # A G1 pause stops the client JVM's threads at a safepoint while its ParallelGCThreads workers (every
    # processor up to 8: HotSpot's WorkerPolicy::calc_parallel_worker_threads) do the collection; the
    # broker, another process, runs on beside them (tests/data/realbroker-reruns/threads: the driver's
    # GC threads runnable beside the broker's send and Netty threads)
    h = FairShareHost(2, client_stops=True)
    assert h.run(0, 100, ("writer", 0)) == 100  # the broker's writer, alone
    # two collector threads of 20 us each beside the writer: 2 cores among 3 threads, 30 us
    assert h.stop_client(10, 20, 2) == (10, 40)
    assert h.run(20, 10, None) == 40  # a broker read in the pause goes on, beside the writer and collector
    assert h.run(15, 10, (0, "executor")) == 50  # the client's executor thread waits for the pause's end
    assert h.stop_client(30, 20, 2) == (40, 70)  # one pause after another, the writer still beside it
    # the second pause holds the executor's piece placed over it (40-50): its 10 us run from 70, beside
    # the worker's piece, which waits for the pause too (every producer of the process): 3 on 2 cores
    assert h.run(45, 10, (1, "worker")) == 85
    h.advance(100)
    assert h.run(100, 10, (0, "executor")) == 110


def test_a_client_stop_holds_the_processs_submitting_thread_too() -> None:
    # The application's thread that calls send (DefaultMQProducerImpl.send with a callback: the checks and
    # the executor's submit, rocketmq-all-4.9.8) is a thread of the client's JVM, so a collection's pause
    # stops it at the safepoint as it stops the producers' threads (it was counted as another process's
    # thread and ran through the pause beside the collector's)
    h = FairShareHost(2, client_stops=True)
    assert h.stop_client(10, 20, 2) == (10, 30)  # two collector threads, a core each
    assert h.run(15, 10, SUBMITTER) == 40  # waits for the pause's end (was 30: 3 threads on 2 cores)
    # a submit placed before a pause over its time is held by it, not beside the collector (one core: the
    # collector's 5 us alone, 5-10; was 5-15, sharing the core with the submit as another process's)
    h = FairShareHost(1, client_stops=True)
    assert h.run(0, 10, SUBMITTER) == 10
    assert h.stop_client(5, 5, 1) == (5, 10)
    assert h.run(10, 10, ("writer", 0)) == 30  # the broker's writer beside the submit's 5 us rest


def test_a_collection_that_stops_the_client_only_takes_as_long_as_its_share_of_the_cores() -> None:
    idle, busy = FairShareHost(2, client_stops=True), FairShareHost(2, client_stops=True)
    for i in range(2):  # two of the broker's threads busy for the whole collection
        busy.run(0, 10_000, ("writer", i))
    pauses = {}
    for name, host in ("idle", idle), ("busy", busy):
        h = ClientHeap(HeapParams(10_000.0, 10.0, 2.0, 1000.0, 0.5, collector_threads=2), host)
        h.collect(100.0, 1000.0)
        pauses[name] = h.pauses[0]
    # the pause's 1,000 us of CPU shared by the two collector threads (G1's pause CPU per KiB copied, all
    # workers together, 0.50 us in tests/data/realbroker-reruns/g1_backlog, is about the calibrated pause
    # length per KiB, 0.53 us: the ramp's pauses, beside the broker, had about one core)
    assert pauses["idle"] == (100.0, 500.0)  # a core each
    assert pauses["busy"] == (100.0, 1000.0)  # 2 cores among 4 threads: twice as long
    # a pause of the host instead stops the broker's threads with it
    stop_all = ClientHeap(HeapParams(10_000.0, 10.0, 2.0, 1000.0, 0.5), FairShareHost(2))
    stop_all.collect(100.0, 1000.0)
    assert stop_all.cores.run(500.0, 10.0, ("writer", 0)) == 1110.0


def test_a_client_stop_needs_the_fair_host() -> None:
    raw = {
        "producers": {"shared_host": True, "heap_stops": "client", "send_cpu_us": 10.0},
        "brokers": {"coupling": "joint"},
    }
    with pytest.raises(ScenarioError, match='producers.heap_stops needs producers.host_scheduler = "fair"'):
        scenario_from_mapping(raw)
    assert parallel_gc_threads(2) == 2 and parallel_gc_threads(8) == 8 and parallel_gc_threads(16) == 13
    for stops, threads in ("host", 0), ("client", 2):
        sc = _shared("fair", {"heap_mb": 64.0, "heap_stops": stops})
        jvm = client_heap(sc, shared_host(sc))
        assert jvm is not None and jvm.params.collector_threads == threads
    with pytest.raises(ValueError, match="needs producers.host_scheduler"):
        HostCores(2).stop_client(0.0, 10.0, 2)


def test_each_netty_leg_runs_mostly_on_the_thread_measured_and_the_submit_on_the_processs_one_caller() -> (
    None
):
    # rocketmq-all-4.9.8 NettyRemotingClient: the channel's pipeline (NettyEncoder, NettyDecoder,
    # NettyClientHandler) on one NettyClientWorkerThread_ of defaultEventExecutorGroup (clientWorkerThreads =
    # NettySystemConfig.clientWorkerSize = 4), the socket on the one NettyClientSelector_ event loop
    # (NioEventLoopGroup(1)): a request is encoded and written on the worker, flushed on the selector; an
    # answer read on the selector, decoded and handled on the worker. DefaultMQProducerImpl.send(msg,
    # callback) submits to the async sender executor on the caller's thread: the harness's one dispatcher
    # for every producer of its process
    split = {
        "netty_write_cpu_share": 0.4,
        "netty_read_cpu_share": 0.2,
        "callback_cpu_share": 0.1,
        "netty_write_worker_share": 0.75,
        "netty_read_selector_share": 0.25,
        "submit_cpu_share": 0.1,
    }
    host = HostCores(4)
    threads, other = (
        client_threads(_shared("fair", split), host, 0),
        client_threads(_shared("fair", split), host, 1),
    )
    assert threads is not None and other is not None
    assert threads.write_us == pytest.approx((6.0, 2.0)) and threads.read_us == pytest.approx((1.0, 3.0))
    assert threads.executor_us == pytest.approx(4.0) and threads.submit_us == pytest.approx(2.0)
    assert threads.write(100.0) == pytest.approx(108.0)  # the worker's 6 us, then the selector's 2
    assert threads.read(200.0) == pytest.approx(204.0)  # selector 1, worker 3
    assert threads.submit(50.0) == pytest.approx(52.0)
    assert other.submit(50.0) == pytest.approx(54.0)  # another producer's send: the same caller, after it
    assert threads.submit(60.0) == pytest.approx(62.0)  # the caller free again
    for _ in range(10):  # ten requests ready at 200: the worker busy until 264, a flush after each
        threads.write(200.0)
    # an answer in at 250 is read at once (NioEventLoop takes what is ready: not behind the flushes the
    # worker hands over later), then waits for the worker's tasks queued before it
    assert threads.read(250.0) == pytest.approx(267.0)  # first come, first placed: 270
    worker = threads.busy["worker"]  # a backlog is one interval
    assert worker.starts + worker.ends == pytest.approx([100.0, 201.0, 106.0, 267.0])
    default = client_threads(_shared("fair", {"netty_write_cpu_share": 0.4}), HostCores(4), 0)
    assert default is not None and default.write_us == (4.0, 4.0)  # the keys left out: half each


def test_one_caller_submitting_every_producers_sends_makes_them_late_past_one_thread() -> None:
    # two producers sharing 50,000 sends/s on the 2-core host at 30 us of client CPU a send (1.5 cores) and
    # 2 us an append: on the producers' 4 executor threads the host keeps up; with 90% of it on the process's
    # one caller (27 us a send: 1.35 cores, more than one thread runs) the sends are submitted later and
    # later (send_ts_ms - born_ts_ms: queue_wait_ms), the same work on one thread
    waits = {}
    for share in (0.0, 0.9):
        producers = {
            "count": 2,
            "send_cpu_us": 30.0,
            "submit_cpu_share": share,
            "netty_write_cpu_share": 0.05,
        }
        sc = _shared("fair", producers, append_us=2.0)
        waits[share] = simulate(generate(sc), sc).results["queue_wait_ms"].to_pylist()
    assert max(waits[0.0]) <= 1 and len(waits[0.0]) == 15_000
    assert max(waits[0.9]) > 50 and sorted(waits[0.9])[7500] > 20, max(waits[0.9])


def test_a_connections_read_on_its_selector_and_codec_threads_keeps_up_where_one_thread_does_not() -> None:
    # rocketmq-all-4.9.8 NettyRemotingServer: a channel's socket is read on one NettyServerNIOSelector_
    # (serverSelectorThreads = 3), its NettyDecoder and NettyServerHandler run on one
    # NettyServerCodecThread_ of defaultEventExecutorGroup (serverWorkerThreads = 8): two threads one after
    # the other. 50,000 requests/s of 24 us each: 1.2 cores, more than one thread can have
    fast = {"send_cpu_us": 6.0, "send_msg_timeout_ms": 3000}
    waits = {}
    for share in (0.0, 0.5):
        sc = _shared("fair", fast, append_us=2.0, io_us=24.0, codec_share=share)
        out = simulate(generate(sc), sc)
        waits[share] = max(out.attempts["latency_ms"].to_pylist())
    assert waits[0.0] > 100  # one thread: the requests wait unread, more and more
    assert waits[0.5] < waits[0.0] / 4, waits


def test_the_codec_split_needs_the_joint_loop() -> None:
    with pytest.raises(ScenarioError, match=r"store.codec_share needs brokers.coupling = joint"):
        scenario_from_mapping(
            {"brokers": {"coupling": "iterative", "default": {"store": {"codec_share": 0.5}}}}
        )


def test_an_answer_the_clients_netty_threads_read_after_the_scans_tick_is_the_scans_failure() -> None:
    # rocketmq-all-4.9.8: NettyRemotingAbstract.processResponseCommand, on the channel's worker after the
    # selector's read and the decoding, is the only one that takes the ResponseFuture out of responseTable;
    # scanResponseTable (NettyRemotingClient.start: from 3 s, every 1 s) fails one once begin + timeoutMillis
    # + 1000 <= now; its callback (MQClientAPIImpl.sendMessageAsync's operationComplete: "wait response
    # timeout") retries with what is left of the budget, and invokeAsync refuses that at once
    # (RemotingTooMuchRequestException "invokeAsync call the addr[..] timeout"). Timeout 100 ms, 2,000 sends
    # in 2.5-3.0 s whose answers' read takes 1.8 ms of CPU each on the producer's selector and worker: the
    # broker answers each in time, the client reads them up to ~2 s later, racing the ticks at 4 s and 5 s
    p = {"send_cpu_us": 2000.0, "send_msg_timeout_ms": 100, "netty_read_cpu_share": 0.9}
    sc = _shared("fair", p, steps=[[20.0, 2.5], [4000.0, 0.5]], append_us=4.0)
    out = simulate(generate(sc), sc)
    res, att = out.results.to_pylist(), out.attempts.to_pylist()
    first = {a["seq"]: a for a in att if a["attempt"] == 0}
    assert all(a["stored"] and a["stored_ts_ms"] - a["start_ts_ms"] < 100 for a in first.values())
    failed = [r for r in res if r["status"] == "FAILED"]
    ok = [r for r in res if r["status"] == "SEND_OK"]
    assert len(failed) > 300 and len(ok) > 1000, (len(failed), len(ok))
    for r in failed:  # read past the tick: the scan's failure, then the retries with no budget left
        assert r["error"] == "RemotingTooMuchRequestException: invokeAsync call the addr[broker-a] timeout"
        assert first[r["seq"]]["outcome"] == "remoting:timeout" and r["attempts"] == 3
    for r in ok:  # read before the tick that would fail it (the first at 3 s, then every second)
        start = first[r["seq"]]["start_ts_ms"]
        tick = max(3000, 3000 + -(-(start + 1100 - 3000) // 1000) * 1000)
        assert r["end_ts_ms"] < tick
    assert sum(r["end_ts_ms"] - first[r["seq"]]["start_ts_ms"] > 1000 for r in ok) > 100  # late, not failed


def test_a_sync_answer_the_clients_netty_threads_read_after_the_timeout_is_a_timeout() -> None:
    # rocketmq-all-4.9.8: a SYNC request takes the channel's pipeline as an async one does
    # (NettyRemotingClient's defaultEventExecutorGroup: NettyEncoder, NettyDecoder, NettyClientHandler on
    # the worker, the socket on the selector); NettyRemotingAbstract.invokeSyncImpl's caller waits in
    # ResponseFuture.waitResponse(timeoutMillis) for processResponseCommand's putResponse, on the worker
    # after the read, and throws RemotingTimeoutException if it has not come by then. 64 sender threads,
    # timeout 30 ms, the answers' read 1.8 ms of CPU each on the selector and the worker: alone, a send
    # ends after its read; in a burst of 3,000/s the 64 answers in flight wait for each other's reads past
    # the timeout, though the broker stored each in time
    p = {
        "send_mode": {"sync": 1},
        "threads": 64,
        "send_cpu_us": 2000.0,
        "send_msg_timeout_ms": 30,
        "netty_read_cpu_share": 0.9,
    }
    sc = _shared("fair", p, steps=[[20.0, 0.5], [3000.0, 0.5]], append_us=4.0)
    out = simulate(generate(sc), sc)
    res, att = out.results.to_pylist(), out.attempts.to_pylist()
    first = {a["seq"]: a for a in att if a["attempt"] == 0}
    alone = [r for r in res if first[r["seq"]]["start_ts_ms"] < 500]
    assert len(alone) == 10 and all(r["status"] == "SEND_OK" for r in alone)
    assert all(r["end_ts_ms"] - first[r["seq"]]["start_ts_ms"] >= 2 for r in alone)  # the read's 1.8 ms
    late = [a for a in first.values() if a["outcome"] == "remoting:timeout"]
    assert len(late) > 1000, len(late)
    assert all(a["stored"] and a["stored_ts_ms"] - a["start_ts_ms"] < 30 for a in late)


def _exact_processor_sharing(ready: list[float], work: list[float], processors: int) -> list[float]:
    """Each piece's end under exact processor sharing (every runnable piece at min(1, processors / n) of
    a core, its speed changing whenever one starts or ends), the pieces known in advance."""
    order = sorted(range(len(ready)), key=ready.__getitem__)
    ends, left, t, i = [0.0] * len(ready), {}, 0.0, 0
    while i < len(order) or left:
        rate = min(1.0, processors / len(left)) if left else 0.0
        first = min(left, key=left.__getitem__) if left else -1
        done = t + left[first] / rate if left else math.inf
        arrives = ready[order[i]] if i < len(order) else math.inf
        step = min(done, arrives) - t
        for k in left:
            left[k] -= step * rate
        t += step
        if arrives <= done:
            left[order[i]] = work[order[i]]
            i += 1
        else:
            ends[first] = t
            del left[first]
    return ends


def _hosted(host: FairShareHost, ready: list[float], work: list[float]) -> list[float]:
    """Each piece's end on ``host``, placed in the order of their ready times, each on a thread of its own."""
    ends = [0.0] * len(ready)
    for k in sorted(range(len(ready)), key=ready.__getitem__):
        host.advance(ready[k])
        ends[k] = host.run(ready[k], work[k], ("piece", k))
    return ends


def test_a_work_conserving_fair_host_gives_what_processor_sharing_gives_n_pieces_started_together() -> None:
    # 4 pieces of 10 us from 0 on 2 cores: processor sharing ends them all at 4 * 10 / 2 = 20 us. The
    # engine has returned the first pieces' ends before it places the later ones, so those ran at a core
    # each (10 us); the later ones take their fair share beside them and repay the capacity it took
    # beyond the cores' (the host's debt): the last ends within a twelfth of 20 us
    ready, work = [0.0] * 4, [10.0] * 4
    assert _exact_processor_sharing(ready, work, 2) == [20.0] * 4
    ends = _hosted(FairShareHost(2, conserving=True), ready, work)
    assert ends[:2] == [10.0, 10.0] and ends[2] == pytest.approx(40 / 3)
    assert ends[3] == pytest.approx(65 / 3)  # 21.7 us: the 5 us of its debt left unpaid by an idle core
    assert _hosted(FairShareHost(2), ready, work) == [10.0, 10.0, 15.0, 20.0]  # the speed fixed at start


def test_a_piece_left_alone_after_the_others_end_speeds_up_on_a_work_conserving_host() -> None:
    # two pieces of 1 us and one of 10 us from 0 on 2 cores: processor sharing gives the three 2/3 of a
    # core until the short ones end at 1.5 us, then the long one a core: it ends at 10.5 us. The fair host
    # that fixes a piece's speed when it starts leaves it at 2/3 of a core after they end (15 us, a core
    # idle for 13.5 us); the work-conserving one takes the room they leave (10.33 us)
    ready, work = [0.0, 0.0, 0.0], [1.0, 1.0, 10.0]
    assert _exact_processor_sharing(ready, work, 2) == pytest.approx([1.5, 1.5, 10.5])
    assert _hosted(FairShareHost(2), ready, work)[2] == pytest.approx(15.0)
    assert _hosted(FairShareHost(2, conserving=True), ready, work) == pytest.approx([1.0, 1.0, 31 / 3])


@pytest.mark.parametrize("load", [0.5, 0.85, 0.95, 1.1])
def test_a_work_conserving_fair_host_keeps_processor_sharings_capacity_and_mean_latency(load: float) -> None:
    # 3,000 pieces arriving at random (Poisson) with exponential work of 5 us mean, each on a thread of its
    # own, at 50%-110% of 2 cores. A work-conserving host ends the last piece when processor sharing does
    # (within 1%; the host that fixes a piece's speed at its start ends it 17.5% late at 110%: pieces
    # slowed by a crowd that has gone), and its pieces' mean latency (ready to end) is within 10% of
    # processor sharing's (measured: -4.5%, -5.6%, -3.7%, -0.8% at 50%, 85%, 95%, 110%; the fixed speed
    # -2.4%, -8.6%, -11.9%, -42%). Its tail is shorter than processor sharing's (p99 71 against 124 us at
    # 85%; the fixed speed 96), as first come, first served: a piece placed is not slowed by later ones
    rng = np.random.default_rng(1)
    work = list(rng.exponential(5.0, 3000))
    ready = list(np.cumsum(rng.exponential(5.0 / (2 * load), 3000)))
    exact = _exact_processor_sharing(ready, work, 2)
    ends = _hosted(FairShareHost(2, conserving=True), ready, work)
    assert max(ends) == pytest.approx(max(exact), rel=0.01)
    latency, exact_latency = np.mean(np.subtract(ends, ready)), np.mean(np.subtract(exact, ready))
    assert latency == pytest.approx(exact_latency, rel=0.10), (latency, exact_latency)
    if load > 1:
        assert max(_hosted(FairShareHost(2), ready, work)) > 1.15 * max(exact)


def test_the_work_conserving_fair_host_is_a_scheduler_of_its_own() -> None:
    sc = _shared("fair_conserving")
    host = shared_host(sc)
    assert isinstance(host, FairShareHost) and host.ledger is not None
    assert shared_host(_shared("fair")).ledger is None  # the fair host as before
    with pytest.raises(ScenarioError, match='producers.heap_stops needs producers.host_scheduler = "fair"'):
        _shared("fair_conserving", {"heap_mb": 64.0, "heap_stops": "client"})
    with pytest.raises(ValueError, match="does not stop the client alone"):
        FairShareHost(2, client_stops=True, conserving=True)


def _in_flight_peak(out: Any) -> tuple[int, int]:
    """The most requests between their start and their send's end (the callback's) at once, and the
    sends whose request started after their executor thread took them (waited for a permit)."""
    first = {a["seq"]: a for a in out.attempts.to_pylist() if a["attempt"] == 0}
    edges = []
    waited = 0
    for r in out.results.to_pylist():
        start = first[r["seq"]]["start_ts_ms"]
        edges += [(start, 1), (r["end_ts_ms"], -1)]
        waited += start > r["send_ts_ms"]
    held = peak = 0
    for _, d in sorted(edges, key=lambda e: (e[0], e[1])):
        held += d
        peak = max(peak, held)
    return peak, waited


def test_an_async_permit_is_held_until_the_callback_the_clients_threads_run_late_has_run() -> None:
    # rocketmq-all-4.9.8 NettyRemotingAbstract: invokeAsyncImpl takes a semaphoreAsync permit
    # (tryAcquire(timeoutMillis), blocking the calling thread) and hands the ResponseFuture a
    # SemaphoreReleaseOnlyOnce; processResponseCommand -> executeInvokeCallback releases it in the callback
    # task's finally on the callback executor (after the callback), scanResponseTable before the callback,
    # requestFail at once. 1,000 sends in 0.5 s whose answers' read takes 1.8 ms of CPU each on the
    # producer's selector and worker: the broker answers at once, the client reads them up to ~1 s later;
    # with 20 permits no more than 20 requests are between their start and their callback's end, and
    # the executor threads wait in tryAcquire for the callbacks
    p = {"send_cpu_us": 2000.0, "netty_read_cpu_share": 0.9, "async_semaphore_permits": 20}
    sc = _shared("fair", p, steps=[[2000.0, 0.5]], append_us=4.0)
    out = simulate(generate(sc), sc)
    statuses = Counter(out.results["status"].to_pylist())
    assert statuses == Counter({"SEND_OK": 1000}), statuses
    peak, waited = _in_flight_peak(out)
    assert peak <= 20 and waited > 500, (peak, waited)


def _exact_processor_sharing_stopped(
    ready: list[float], work: list[float], processors: int, stops: list[tuple[float, float]]
) -> list[float]:
    """:func:`_exact_processor_sharing` on a host that ``stops`` (start, length; apart) hold: no piece
    runs in them, each resumes its rest after them."""
    order = sorted(range(len(ready)), key=ready.__getitem__)
    ends, left, t, i = [0.0] * len(ready), {}, 0.0, 0
    edges = sorted({x for a, length in stops for x in (a, a + length)})
    while i < len(order) or left:
        stopped = any(a <= t < a + length for a, length in stops)
        rate = 0.0 if stopped or not left else min(1.0, processors / len(left))
        first = min(left, key=left.__getitem__) if left else -1
        done = t + left[first] / rate if rate else math.inf
        arrives = ready[order[i]] if i < len(order) else math.inf
        edge = next((x for x in edges if x > t), math.inf)
        step = min(done, arrives, edge) - t
        for k in left:
            left[k] -= step * rate
        t += step
        if arrives == t:
            left[order[i]] = work[order[i]]
            i += 1
        elif done == t:
            ends[first] = t
            del left[first]
    return ends


@pytest.mark.parametrize("conserving", [False, True])
def test_a_stop_holds_the_pieces_placed_before_it_over_its_time(conserving: bool) -> None:
    # two pieces of 100 us from 0 on 2 cores, a core each; then a stall from 50 us for 50 us, placed
    # after them (HostStalls.after_send places a stall at the end of a send's piece, when others are
    # already placed over it), then a piece of 10 us ready at 100 us. Processor sharing holds the two in
    # the stall: at 100 us each has 50 us left, the new piece runs beside them at 2/3 of a core and ends
    # at 115 us. A stop that held only the pieces placed after it left the cores to the new piece alone
    # (110 us): 50 us of each of the two were done in the stall
    ready, work, stall = [0.0, 0.0, 100.0], [100.0, 100.0, 10.0], (50.0, 50.0)
    exact = _exact_processor_sharing_stopped(ready, work, 2, [stall])
    assert exact == pytest.approx([155.0, 155.0, 115.0])
    h = FairShareHost(2, conserving=conserving)
    assert h.run(0, 100, ("piece", 0)) == 100 and h.run(0, 100, ("piece", 1)) == 100  # returned: kept
    assert h.stop_all(*stall) == 50
    h.advance(100)
    assert h.run(100, 10, ("piece", 2)) == pytest.approx(exact[2])


def test_a_held_threads_rests_run_one_after_another_beside_the_others_and_its_own_later_piece() -> None:
    # Thread a books two pieces of 40 us back to back from 0, b one of 1,000 us; a stall from 20 us for
    # 80 us is placed after them (HostStalls.after_send: a send's piece ends, a broker's appends are already
    # booked over it). Processor sharing runs a as one thread with 60 us left at 100 us: c's 10 us from
    # 100 us runs beside a and b at 2/3 of a core and ends at 115 us. a's two rests, one after another,
    # are one piece beside c (as separate pieces, two: c ended at 120 us)
    exact = _exact_processor_sharing_stopped([0.0, 0.0, 100.0], [80.0, 1000.0, 10.0], 2, [(20.0, 80.0)])
    assert exact[2] == pytest.approx(115.0)
    h = FairShareHost(2)
    assert (h.run(0, 40, ("a", 0)), h.run(40, 40, ("a", 0)), h.run(0, 1000, ("b", 0))) == (40, 80, 1000)
    assert h.stop_all(20, 80) == 20
    h.advance(100)
    assert h.run(100, 10, ("c", 0)) == pytest.approx(exact[2])
    # a's own next piece at 100 us, its ends returned (80 us): processor sharing runs it after a's rest, at
    # 160 us (a piece of 100 us, a stall from 50 us for 50 us, b beside it). The fair host cannot move
    # what it returned, so the rest runs beside the later piece and counts beside it (3 threads on 2
    # cores: 115 us); not counted (a core of its own: 110 us) the piece would end further from 160 us.
    # So the commit-log writer, its appends booked over each stall, is slowed by its own rests: what
    # takes b_steady's writer below 60,000 appends a second (docs/validation.md, "b_steady's overflow")
    exact = _exact_processor_sharing_stopped([0.0, 0.0], [110.0, 1000.0], 2, [(50.0, 50.0)])
    assert exact[0] == pytest.approx(160.0)
    h = FairShareHost(2)
    assert (h.run(0, 100, ("a", 0)), h.run(0, 1000, ("b", 0)), h.stop_all(50, 50)) == (100, 1000, 50)
    h.advance(100)
    assert h.run(100, 10, ("a", 0)) == pytest.approx(115.0)


def _busy_threads_under_stalls(host: FairShareHost, threads: int, pieces: int = 10_000) -> float:
    """The work ``threads`` threads that always have work do on ``host`` (each piece, exponential of 2 us
    mean, placed when its thread's last ends, in time order, as the engine places them), with a stall
    of 50 us after one piece in 50 (:class:`rocketsim.client.host.HostStalls`: from the piece's end, some
    of the others already placed over it): the work ended by the time no thread is still on its last
    piece, over what the cores have outside the stalls by then."""
    rng = np.random.default_rng(7)
    queue, ended, stalls = [(0.0, k) for k in range(threads)], [], []
    for _ in range(pieces):
        ready, k = heapq.heappop(queue)
        host.advance(ready)
        work = rng.exponential(2.0)
        end = host.run(ready, work, ("thread", k))
        ended.append((end, work))
        if rng.random() < 1 / 50:
            stalls.append(host.stop_all(end, 50.0))
        heapq.heappush(queue, (end, k))
    horizon = queue[0][0]
    stopped = sum(min(horizon, start + 50.0) - start for start in stalls if start < horizon)
    return sum(w for end, w in ended if end <= horizon) / (host.processors * (horizon - stopped))


@pytest.mark.parametrize("threads", [3, 10, 20])
def test_under_dense_stalls_a_fair_host_does_no_more_work_than_its_cores_have(threads: int) -> None:
    # Processor sharing with threads that always have work does exactly what the cores have outside the
    # stops (2 cores x the time not stopped). Before a stop held the pieces placed over it (booked before
    # it, their ends returned), the fair host did 2.2%, 9.9%, 18.9% more (3, 10, 20 threads) and the
    # work-conserving one 1.4%, 2.3%, 2.4% more (its 1 us slots cut by a stop also counted whole); now
    # -0.4% to -0.7% (the fair host's fixed speeds leave a little idle) and -0.4% to +0.7%
    for host in FairShareHost(2), FairShareHost(2, conserving=True):
        assert _busy_threads_under_stalls(host, threads) == pytest.approx(0.995, abs=0.015)


def test_a_thread_counts_once_beside_the_others_however_many_of_its_pieces_overlap() -> None:
    # A Netty thread's piece is placed in the first gap its work fits in before the thread's next piece
    # (ClientThreads._on, BusyIntervals.room), and on a busy fair host it runs longer than the gap: the
    # thread's pieces overlap. One thread runs one piece at a time, so beside another thread's piece it
    # is one thread, as processor sharing has it: two threads on 2 cores, a core each (B ends at 25 us).
    # Counted per piece, a Netty selector was hundreds of threads at once in an overloaded c_overload cut,
    # and the process's one submitting thread got 1/4,400 of a core (7.8 ms a 1.8 us submit): its sends
    # began ~3 s after their due time, up to ~90 s in a longer cut, where the client's 3 s timeout starts
    # (DefaultMQProducerImpl.send's beginStartTime), so they were answered OK that late
    h = FairShareHost(2)
    assert h.run(0, 100, ("a", 0)) == 100  # thread a, alone: a core
    assert h.run(10, 10, ("a", 0)) == 20  # a's next piece, placed over its first (its own: not beside it)
    assert _exact_processor_sharing([0.0, 15.0], [100.0, 10.0], 2)[1] == 25.0
    assert h.run(15, 10, ("b", 0)) == 25  # beside a once (was 30: 3 on 2 cores)
    ledger = FairShareHost(2, conserving=True)
    ledger.run(0, 100, ("a", 0)), ledger.run(10, 10, ("a", 0))
    assert ledger.run(15, 10, ("b", 0)) == pytest.approx(25.0)


def test_the_hosts_other_threads_run_each_sends_share_beside_both_processes() -> None:
    # The threads the model has not otherwise (tests/data/realbroker-reruns/threads, r40_40000's
    # summary.txt: the driver's C1/C2 compiler threads 4.06 us a send, its collector's 1.46 + 0.27, its other
    # threads 2.36; the broker's 2.2 more) run beside both processes' threads: on one core, a broker piece
    # beside one of them has half the core; a thread's pieces run one after another; a stop of the client
    # does not hold them (not the client's: the compilers run through a safepoint), a stop of the host does
    h = FairShareHost(1, client_stops=True)
    others = HostOthers(10.0, 2)
    others.after_send(h, 0, 0.0)
    others.after_send(h, 2, 0.0)  # the same thread (2 % 2): after the first piece
    assert h.free_us[(OTHER_THREAD, 0)] == 20.0
    assert h.run(0, 10, ("writer", 0)) == 20  # beside the other thread: half the core
    h = FairShareHost(1, client_stops=True)
    assert h.stop_client(0, 10, 1) == (0, 10)
    others.after_send(h, 1, 0.0)
    assert h.free_us[(OTHER_THREAD, 1)] == 20.0  # beside the collector's thread, not held by its stop
    h = FairShareHost(1)
    h.stop_all(0, 10)
    others.after_send(h, 1, 0.0)
    assert h.free_us[(OTHER_THREAD, 1)] == 20.0  # held by the host's stop


def test_the_same_cpu_a_send_on_the_hosts_other_threads_takes_the_writers_share() -> None:
    # 20 us of CPU a send at 50,000 sends/s beside the broker's writer (17 us appends one at a time, a send
    # queue of 500), on a fair 2-core host: all on the 2 executor threads, or 15 us there and 5 on the
    # host's other threads. The host's work is the same; one more thread has work at once, so the writer's
    # share of the cores is smaller and its queue overflows more often ([OVERLOAD])
    overload = {}
    for name, producers in ("executor", None), ("others", {"send_cpu_us": 15.0, "host_other_cpu_us": 5.0}):
        sc = _shared("fair", producers, send_queue_capacity=500)
        out = simulate(generate(sc), sc)
        overload[name] = Counter(out.attempts["busy_kind"].to_pylist())["OVERLOAD"]
    assert overload["others"] > 1.5 * overload["executor"] > 0, overload
    with pytest.raises(ScenarioError, match="producers.host_other_cpu_us needs producers.shared_host"):
        scenario_from_mapping({"producers": {"host_other_cpu_us": 5.0, "send_cpu_us": 10.0}})


@pytest.mark.parametrize("conserving", [False, True])
def test_a_threads_own_overlapping_pieces_count_once_beside_the_others(conserving: bool) -> None:
    # a thread's piece placed in a gap before its next one can overlap it on the host: the host counts the
    # thread once there (FairShareHost._book), so a third piece of it sees no other thread beside it (it
    # saw -1 and the work-conserving host divided by zero: a sync run of the validation scenario)
    host = FairShareHost(2, conserving=conserving)
    host.place(0.0, 100.0, "t")
    host.place(10.0, 50.0, "t")
    host.advance(15.0)
    start, end = host.place(20.0, 10.0, "t")
    assert start == 20.0 and end == pytest.approx(30.0)


def test_a_netty_thread_runs_one_piece_at_a_time_however_long_the_host_makes_it() -> None:
    # rocketmq-all-4.9.8 NettyRemotingClient.start: the encoder, decoder and NettyClientHandler on
    # defaultEventExecutorGroup (a DefaultEventExecutorGroup of clientWorkerThreads, a channel bound to one
    # thread), whose tasks (netty 4.1.65 SingleThreadEventExecutor.runAllTasks) run one after another. On a
    # fair host beside three busy threads a piece of 10 us runs 20 us: placed in a gap of 10 us before the
    # thread's piece booked ahead, it would run over it, the thread doing two pieces at once (as it did: the
    # model's worker did ~4 at a time under c_overload's backlog, capacity no thread has); it goes after it
    host = FairShareHost(2)
    for k in range(3):
        host.run(0, 1_000, ("other", k))
    threads = ClientThreads(host, 0, 0.0, (10.0, 0.0), (0.0, 10.0), 0.0, {})
    assert threads.write(100.0) == 120.0  # the worker's piece booked ahead: 20 us on its share
    assert host.span(90.0, 10.0, (0, "worker")) == (90.0, 110.0)  # it would reach the piece at 100
    assert threads.read(90.0) == 140.0  # the answer's decoding: after the piece booked ahead, not over it
    busy = threads.busy["worker"]
    assert busy.starts == [100.0] and busy.ends == [140.0]  # one thread's pieces, one after another
    # a gap it fits as long as it runs is still taken (an answer's decoding does not wait for a write
    # booked ahead of it)
    assert threads.write(200.0) == 220.0
    assert threads.read(170.0) == 190.0


def test_a_span_is_where_place_would_put_the_piece_and_places_nothing() -> None:
    # Host.span answers where place would put a piece now and leaves the host as it was: on a fair host no
    # piece booked and no books made for a thread it has not seen (place makes them); first come, first
    # served, the earliest room on a core, as place finds it
    fair = FairShareHost(2)
    fair.place(0.0, 100.0, "a")
    fair.place(0.0, 100.0, "b")
    assert fair.span(10.0, 10.0, "c") == (10.0, 25.0)  # beside two threads on two cores: 2/3 of one
    assert "c" not in fair._threads
    assert fair.span(10.0, 10.0, "c") == fair.place(10.0, 10.0, "c") == (10.0, 25.0)
    assert "c" in fair._threads
    cores = HostCores(2)
    cores.place(0.0, 100.0)
    cores.place(0.0, 50.0)  # on the other core
    assert cores.span(10.0, 20.0) == cores.span(10.0, 20.0) == (50.0, 70.0)
    assert cores.place(10.0, 20.0) == (50.0, 70.0)
    assert cores.span(10.0, 20.0) == (70.0, 90.0)
