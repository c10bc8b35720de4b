"""The scenario's ``[brokers.<name>]`` sections: one broker's model outside faults (its latency, a
background error mix) and its store in the closed-loop model, each field with upstream's default and its
rule (:mod:`rocketsim.scenario.rules`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rocketsim.scenario.rules import MAX_LATENCY_MS, between, ge, gt_le, one_of

STORE_MODES = ("async", "sync")  # store.flush (ASYNC_ / SYNC_FLUSH), store.replication (ASYNC_ / SYNC_MASTER)
BROKER_ERRORS = (
    "remoting_timeout",
    "connect_refused",
    "system_busy",
    "system_error",
    "service_not_available",
    "flush_disk_timeout",
    "flush_slave_timeout",
    "slave_not_available",
)


@dataclass(frozen=True)
class LatencyConfig:
    """Per-attempt latency: a lognormal body with rare Pareto spikes (a heavy tail)."""

    # the lognormal body's median of an attempt's latency
    median_ms: float = field(default=2.0, metadata=gt_le(0, MAX_LATENCY_MS))
    # the lognormal body's shape
    sigma: float = field(default=0.5, metadata=between(0, 10))
    # chance that an attempt gets a Pareto spike added
    spike_probability: float = field(default=0.001, metadata=between(0, 1))
    # the spikes' scale (their smallest size)
    spike_scale_ms: float = field(default=50.0, metadata=gt_le(0, MAX_LATENCY_MS))
    spike_alpha: float = field(default=1.5, metadata=ge(0.1))  # smaller: (1 - u) ** (1 / a) underflows
    # the largest spike (a truncated Pareto: a tail that ends, as a VM's scheduling delays do); 0: none
    spike_max_ms: float = field(default=0.0, metadata=between(0, MAX_LATENCY_MS))
    # a refused connection fails fast
    connect_refused_ms: float = field(default=1.0, metadata=between(0, MAX_LATENCY_MS))


@dataclass(frozen=True)
class StoreConfig:
    """One broker's store in the closed-loop model (``brokers.coupling`` joint or iterative; ignored when
    open): :mod:`rocketsim.broker.queue`. Upstream names: BrokerConfig.sendMessageThreadPoolNums,
    sendThreadPoolQueueCapacity, waitTimeMillsInSendQueue; MessageStoreConfig.osPageCacheBusyTimeOutMills,
    flushDiskType, brokerRole."""

    # the commit-log writer's time for one 1 KiB append (linear in the size), microseconds. Default 10:
    # ~100k appends/s, the published single-broker figures (apache/rocketmq #1515: 108k TPS ASYNC_MASTER;
    # #3315: 95k TPS on 4.9.1). Calibrate from your own brokers.
    append_us: float = field(default=10.0, metadata=gt_le(0, 1e9))
    send_threads: int = field(default=4, metadata=between(1, 1024))  # min(processors, 4) upstream
    # sendThreadPoolQueueCapacity: a full queue rejects with [OVERLOAD]
    send_queue_capacity: int = field(default=10_000, metadata=between(1, 100_000_000))
    # waitTimeMillsInSendQueue: older requests expire with [TIMEOUT_CLEAN_QUEUE]
    wait_time_ms_in_send_queue: int = field(default=200, metadata=between(0, MAX_LATENCY_MS))
    # osPageCacheBusyTimeOutMills: an append held longer makes the page cache busy
    os_page_cache_busy_timeout_ms: int = field(default=1000, metadata=between(0, MAX_LATENCY_MS))
    # flushDiskType: async (ASYNC_FLUSH) or sync (SYNC_FLUSH)
    flush: str = field(default="async", metadata=one_of(STORE_MODES))
    # brokerRole: async (ASYNC_MASTER) or sync (SYNC_MASTER)
    replication: str = field(default="async", metadata=one_of(STORE_MODES))
    # what a SYNC_FLUSH (GroupCommitService) and a SYNC_MASTER (HAService) wait add to an answer, ms
    sync_flush_ms: float = field(default=1.0, metadata=between(0, MAX_LATENCY_MS))
    # what a SYNC_MASTER wait (HAService) adds to an answer, ms
    sync_replica_ms: float = field(default=1.0, metadata=between(0, MAX_LATENCY_MS))
    # the broker's CPU per request on the client connection's I/O thread before the send queue
    # (NettyDecoder, processRequestCommand's flow control), microseconds: one FIFO per producer instance's
    # connection, where requests wait (in the socket) while it is busy. 0: none
    io_us: float = field(default=0.0, metadata=between(0, 1e9))
    # the broker's CPU per request to write its answer back on the same connection's I/O thread (the
    # answer is encoded and flushed on the channel's own thread, serially with the requests it reads),
    # microseconds; the thread's reads wait for it. 0: none (the answer's write is free)
    reply_us: float = field(default=0.0, metadata=between(0, 1e9))
    # the share of io_us run on the connection's codec thread after its selector thread's read (a channel's
    # socket on one NettyServerNIOSelector_ of 3, its NettyDecoder and NettyServerHandler on one
    # NettyServerCodecThread_ of 8): two threads in turn per connection, each a request after another;
    # reply_us then runs on the codec thread (NettyEncoder). Measured: 0.48 (3.2 of 6.6 us). 0: one thread
    codec_share: float = field(default=0.0, metadata=between(0, 1))
    # a connection's selector thread as a leg (rocketsim.client.wakeups): a fixed cost a wakeup,
    # microseconds, plus selector_request_us a request it reads (every one in the socket when it runs), in
    # place of its part of io_us (needed); fitted per thread (docs/validation.md). 0: io_us's constant cost
    selector_wakeup_us: float = field(default=0.0, metadata=between(0, 1e6))
    # the selector's CPU for each request a wakeup reads, microseconds (with selector_wakeup_us)
    selector_request_us: float = field(default=0.0, metadata=between(0, 1e6))
    # the same for the connection's codec thread (NettyServerCodecThread_); they replace codec_share's part
    codec_wakeup_us: float = field(default=0.0, metadata=between(0, 1e6))
    # the codec thread's CPU for each request a wakeup takes, microseconds (with codec_wakeup_us)
    codec_request_us: float = field(default=0.0, metadata=between(0, 1e6))
    # the share of append_us a send thread runs before it takes putMessageLock, on its own thread of the
    # producers' host (SendMessageProcessor's handling, and CommitLog.asyncPutMessage's encoding, outside
    # the lock at 4.9.8); the rest runs under the lock on the commit-log writer. Measured per thread and
    # stack on the real broker (docs/validation.md). Needs on_producer_host; 0: all under the lock
    unlocked_share: float = field(default=0.0, metadata=between(0, 1))
    # the share of append_us the ReputMessageService thread runs after each append (the consume queue and
    # the index, from the commit log), on its own thread of the producers' host; the answer does not wait
    # for it. Needs on_producer_host; 0: on the writer
    reput_share: float = field(default=0.0, metadata=between(0, 1))
    # the broker's process runs on the producers' host (producers.shared_host): its reads and appends take
    # that host's processors too
    on_producer_host: bool = False


@dataclass(frozen=True)
class BrokerModelConfig:
    """One broker's behaviour outside faults: latency and a background error mix (probabilities), and its
    store (the closed-loop model)."""

    latency: LatencyConfig = field(default_factory=LatencyConfig)
    # background error probabilities per attempt, by error
    errors: Mapping[str, float] = field(
        default_factory=dict, metadata={"keys": BROKER_ERRORS, "fractions": True}
    )
    store: StoreConfig = field(default_factory=StoreConfig)
