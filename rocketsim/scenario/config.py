"""The scenario's typed configuration: one frozen dataclass per section of a scenario file, each field
with upstream's default and the rule a given value must meet (in its metadata, read by
:mod:`rocketsim.scenario.validation`; the rules and the limits that keep a run's times and sizes in range:
:mod:`rocketsim.scenario.rules`). The brokers' sections: :mod:`rocketsim.scenario.broker_config`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from rocketsim.broker.fault_kinds import FAULT_KINDS
from rocketsim.client.grpc_versions import GRPC, GrpcClient, parse_grpc_version
from rocketsim.client.versions import (
    BACK_PRESSURE_MIN_SEND_NUM,
    BACK_PRESSURE_MIN_SEND_SIZE,
    BATCH_MAX_BYTES_MAX,
    BATCH_MAX_DELAY_MS_MAX,
    V5_3_3,
    AsyncBackpressure,
    AutoBatch,
    BrokerVersion,
    ClientVersion,
    parse_broker_version,
    parse_version,
)
from rocketsim.errors import ConfigError
from rocketsim.scenario import schedule
from rocketsim.scenario.broker_config import BROKER_ERRORS, BrokerModelConfig
from rocketsim.scenario.rules import (
    JAVA_INT_MAX,
    MAX_LATENCY_MS,
    MAX_MESSAGE_SIZE,
    MAX_SCENARIO_S,
    between,
    ge,
    gt,
    gt_le,
    one_of,
    rule,
)


class ScenarioError(ConfigError):
    """A scenario that cannot run: names the key path, the rule and the value."""


SEND_MODES = ("sync", "async", "oneway")
REMOTING = "remoting"
CLIENT_FAMILIES = (REMOTING, GRPC)  # producers.client_family
PROXY_MODES = ("cluster", "local")  # proxy.mode: rocketsim.broker.proxy
SENDER_MODELS = ("pool", "partitioned")
HOST_SCHEDULERS = ("fifo", "fair", "fair_conserving")  # producers.host_scheduler (rocketsim.client.host)
HEAP_STOPS = ("host", "client", "client_over", "client_left")  # producers.heap_stops (rocketsim.client.heap)
# G1 (JDK 17, 1 GiB heap, 2 threads): a full collection's CPU per live KiB over a young collection's per KiB
# it copies, both measured with a backlog of pending sends (tests/data/realbroker-reruns/g1_backlog)
FULL_GC_PER_COPIED_KIB = 1.2
MESSAGE_TYPES = ("normal", "ordered", "delay", "transaction", "batch")
COUPLINGS = ("open", "joint", "iterative")  # brokers.coupling: rocketsim.broker.queue
ARRIVALS = ("poisson", "uniform")
BODY_DISTRIBUTIONS = ("fixed", "lognormal", "uniform")
COMPRESS_TYPES = ("ZLIB", "LZ4", "ZSTD")
INVALID_KINDS = ("bad_topic", "empty_body", "oversize_body", "oversize_properties", "reserved_property")
TRANSACTION_STATES = ("commit", "rollback", "unknown")  # LocalTransactionState COMMIT/ROLLBACK_MESSAGE/UNKNOW


@dataclass(frozen=True)
class ClusterConfig:
    """Brokers (master names) and the topic's queues on each."""

    # the master brokers' names (brokerName), each holding the topic
    brokers: tuple[str, ...] = ("broker-a", "broker-b")
    # the topic's writeQueueNums on each broker
    write_queues: int = field(default=4, metadata=between(1, 1024))
    # the topic's readQueueNums on each broker (the queues consumers read)
    read_queues: int = field(default=4, metadata=between(1, 1024))
    # the topic's permission bits on the brokers (PermName: 4 read, 2 write, 6 both)
    perm: int = field(default=6, metadata=between(0, 15))
    # brokers without write permission for the topic (perm 4): still routed, never selected for sends
    read_only_brokers: tuple[str, ...] = ()
    # the brokers' version (None: the producers' line, ClientVersion.broker): everything broker-side reads
    # it (BrokerVersion properties): the closed-loop store's answers, what the brokers store (WAIT kept,
    # __transactionId__ of halves, the stored properties' encoding: record sizes, commit-log offsets,
    # properties checks), the name server's timers, the transaction check interval
    broker_version: str | None = None


@dataclass(frozen=True)
class ProducerConfig:
    """DefaultMQProducer settings (snake_case, upstream defaults) and how many producers run them."""

    # producer instances (each a DefaultMQProducer with its own state)
    count: int = field(default=4, metadata=between(1, 100_000))
    # producerGroup
    group: str = "rocketsim_producer_group"
    # the application's sender threads per producer
    threads: int = field(default=1, metadata=between(1, 1024))
    # how the application's sender threads take the sends: "pool" (the next message goes to the idle
    # thread that became idle earliest) or "partitioned" (message seq to thread seq % threads)
    sender_model: str = field(default="pool", metadata=one_of(SENDER_MODELS))
    # which client: "remoting" (the RocketMQ client, talking to the brokers) or "grpc"
    # (apache/rocketmq-clients, through a Proxy: docs/grpc.md)
    client_family: str = field(default=REMOTING, metadata=one_of(CLIENT_FAMILIES))
    # the client release whose behaviour the producers follow: remoting any from 4.3.0 to 5.3.3, each
    # mapped to its behaviour line (docs/versions.md; the runs row records both); grpc a rocketmq-clients
    # tag, java-5.2.1 or python-5.1.2
    client_version: str = "4.9.8"
    # grpc: each attempt's own deadline (ClientConfiguration requestTimeout, 3 s in both clients)
    request_timeout_ms: int = field(default=3000, metadata=between(1, MAX_LATENCY_MS))
    # grpc: the Java client's own maxAttempts (ProducerBuilder.setMaxAttempts); Python takes the Proxy's
    max_attempts: int = field(default=3, metadata=between(1, 64))
    # share of messages sent sync, async and oneway
    send_mode: Mapping[str, float] = field(
        default_factory=lambda: {"sync": 1.0}, metadata={"keys": SEND_MODES, "weights": True}
    )
    # sendMsgTimeout: the time budget of one send, retries included
    send_msg_timeout_ms: int = field(default=3000, metadata=gt(0))
    # retryTimesWhenSendFailed: retries of a sync send
    retry_times_when_send_failed: int = field(default=2, metadata=between(0, 64))
    # retryTimesWhenSendAsyncFailed: retries of an async send
    retry_times_when_send_async_failed: int = field(default=2, metadata=between(0, 64))
    # sendLatencyFaultEnable: the latency-fault strategy (isolate slow brokers)
    send_latency_fault_enable: bool = False
    # compressMsgBodyOverHowmuch: bodies over this many bytes are compressed
    compress_msg_body_over_howmuch: int = field(default=4096, metadata=ge(0))
    # compressType: the compressor of large bodies (written in the sys flag from 4.9.4 on)
    compress_type: str = field(default="ZLIB", metadata=one_of(COMPRESS_TYPES))
    # compressLevel
    compress_level: int = field(default=5, metadata=between(-1, 22))
    # maxMessageSize: the largest body the client sends
    max_message_size: int = field(
        default=4_194_304,
        metadata=rule(
            f"must be between 1 and {MAX_MESSAGE_SIZE} (a commit-log file; beyond it a body, its wire and "
            "store sizes overflow a Java int)",
            lambda v: 1 <= v <= MAX_MESSAGE_SIZE,
        ),
    )
    # defaultTopicQueueNums: queues of a topic created through TBW102
    default_topic_queue_nums: int = field(default=4, metadata=between(1, 1024))
    # retryAnotherBrokerWhenNotStoreOK: retry a stored-but-not-OK send
    retry_another_broker_when_not_store_ok: bool = False
    # sendMsgMaxTimeoutPerRequest (5.3.3): a cap on one attempt's timeout; -1: none
    send_msg_max_timeout_per_request_ms: int = field(default=-1, metadata=ge(-1))
    # permits of NettyRemotingAbstract.semaphoreAsync: async requests in flight at once
    async_semaphore_permits: int = field(default=65535, metadata=ge(1))
    # startDetectorEnable (5.x): the detector that probes unreachable brokers
    start_detector_enable: bool = False
    # 5.x DefaultMQProducer async backpressure (None: the client version's default, see
    # ClientVersion.async_backpressure_defaults): an async send takes a permit of each semaphore before it
    # is queued (waiting up to its timeout) and gives them back when its callback runs
    # (rocketsim.client.backpressure). Refused on 4.x, which has no such settings.
    enable_backpressure_for_async_mode: bool | None = None
    # backPressureForAsyncSendNum (None: the version's default)
    back_pressure_for_async_send_num: int | None = field(
        default=None,
        metadata=rule(
            f"must be >= {BACK_PRESSURE_MIN_SEND_NUM} (DefaultMQProducerImpl raises smaller values to it)",
            lambda v: v >= BACK_PRESSURE_MIN_SEND_NUM,
        ),
    )
    # backPressureForAsyncSendSize in bytes (None: the version's default)
    back_pressure_for_async_send_size: int | None = field(
        default=None,
        metadata=rule(
            f"must be >= {BACK_PRESSURE_MIN_SEND_SIZE} (DefaultMQProducerImpl raises smaller values to it)",
            lambda v: v >= BACK_PRESSURE_MIN_SEND_SIZE,
        ),
    )
    # 5.1.4+ DefaultMQProducer.autoBatch: send(msg) / send(msg, callback) of a plain message held in the
    # ProduceAccumulator per (topic, tag), sync and async apart, and sent as one MessageBatch (a sync
    # batch's callers wait for its end) (rocketsim.client.batching); None: the version's default (off).
    # Refused on clients before 5.1.4.
    auto_batch: bool | None = None
    # batchMaxDelayMs: how long a batch is held at most (None: 10)
    batch_max_delay_ms: int | None = field(default=None, metadata=between(1, BATCH_MAX_DELAY_MS_MAX))
    # batchMaxBytes: a batch is sent once its bodies are over this many bytes (None: 32 KiB)
    batch_max_bytes: int | None = field(default=None, metadata=between(1, BATCH_MAX_BYTES_MAX))
    # totalBatchMaxBytes: bodies the accumulator holds at most before it sends messages alone (None: 32 MiB)
    total_batch_max_bytes: int | None = field(default=None, metadata=ge(1))
    # NettySystemConfig.connectTimeoutMillis (com.rocketmq.remoting.client.connect.timeout): how long a
    # connect to a host that never answers waits (a partition)
    connect_timeout_ms: int = field(default=3000, metadata=between(0, MAX_LATENCY_MS))
    # how long a new channel's connect takes, ms (NettyRemotingClient.createChannel's bootstrap.connect, a
    # round trip of the producers' host and network): SYNC requests to a broker wait for it after a close
    # (docs/validation.md). 0: no time (the model before it)
    connect_ms: int = field(default=0, metadata=between(0, MAX_LATENCY_MS))
    # ms the client started (NettyRemotingClient.start) before the schedule's 0: its scanResponseTable
    # ticks (docs/versions.md) that much earlier, the phase that decides which tick fails an unanswered
    # ASYNC request (docs/validation.md). 0: the client starts at 0
    response_scan_offset_ms: int = field(default=0, metadata=between(0, MAX_LATENCY_MS))
    # Runtime.availableProcessors() of the producers' host: the async sender executor's and the callback
    # executor's threads (unless set below), and the cores the client's own CPU work (send_cpu_us) runs on
    processors: int = field(default=4, metadata=between(1, 1024))
    # the client's own threads of an ASYNC send (their ThreadLocalIndex is what selects): the async
    # sender executor (DefaultMQProducerImpl: availableProcessors() threads; None: processors). Refused on
    # 4.3.x, which runs ASYNC sends on the callback executor (callback_executor_threads)
    async_sender_threads: int | None = field(
        default=None, metadata={**between(1, 1024), "unset": "processors"}
    )
    # ClientConfig.clientCallbackExecutorThreads (availableProcessors(); None: processors): the threads
    # that run async callbacks
    callback_executor_threads: int | None = field(
        default=None, metadata={**between(1, 1024), "unset": "processors"}
    )
    # DefaultMQProducerImpl's asyncSenderThreadPoolQueue = new LinkedBlockingQueue<>(50000): ASYNC sends
    # waiting for an executor thread; a send that finds it full fails at once ("executor rejected ").
    # 4.3.x has none (its callback executor's queue is unbounded): refused there unless left at 50000
    async_sender_queue: int = field(default=50_000, metadata=between(1, JAVA_INT_MAX))
    # the client's CPU per send, microseconds: sendDefaultImpl, the request's encoding and the response's
    # handling, on the thread that sends (ASYNC: an executor thread; SYNC, ONEWAY: the caller's), one of
    # the host's `processors` at a time. 0: free (no client capacity). Calibrated from a run's CPU
    # (docs/calibration.md); the real 4.9.8 client spent ~17 us (docs/validation.md)
    send_cpu_us: float = field(default=0.0, metadata=between(0, 1e6))
    # the share of send_cpu_us an ASYNC send runs on the producer's Netty threads before its request
    # reaches the broker: its encoding on the channel's worker (NettyRemotingClient's
    # defaultEventExecutorGroup of clientWorkerThreads = 4), then its write on the selector event loop, half
    # each; the rest of send_cpu_us not in the three shares runs on its async sender executor thread. Each
    # of these threads is one the shared host counts while it has work. Measured per thread on the real
    # client (docs/validation.md). Needs shared_host; 0: on the executor thread (the model before them)
    netty_write_cpu_share: float = field(default=0.0, metadata=between(0, 1))
    # the share run on those Netty threads when the answer comes back: its read on the selector, then its
    # decoding on the worker (processResponseCommand), half each; the callback waits for them. Needs
    # shared_host; 0: on the executor thread
    netty_read_cpu_share: float = field(default=0.0, metadata=between(0, 1))
    # the share run after that on a callback executor thread (executeInvokeCallback: the public executor of
    # clientCallbackExecutorThreads); the send ends when it has. Needs shared_host; 0: on the executor thread
    callback_cpu_share: float = field(default=0.0, metadata=between(0, 1))
    # of netty_write_cpu_share, the part on the channel's worker (the request's encoding and its write into
    # the channel); the rest on the selector (the socket's flush). Measured: 0.92 (JFR's samples of the
    # real client's threads, docs/validation.md); 0.5: half each (the model before it)
    netty_write_worker_share: float = field(default=0.5, metadata=between(0, 1))
    # of netty_read_cpu_share, the part on the selector (the socket's read); the rest on the worker (the
    # answer's decoding and processResponseCommand). Measured: 0.71; 0.5: half each
    netty_read_selector_share: float = field(default=0.5, metadata=between(0, 1))
    # the share of send_cpu_us an ASYNC send runs on the application's thread that calls send()
    # (DefaultMQProducerImpl.send's checks and the executor's submit), from its due time, before an executor
    # thread takes it: one thread for every producer of the shared host, one send after another (the
    # measured harness's dispatcher, `main`). Needs shared_host; 0: on the executor thread
    submit_cpu_share: float = field(default=0.0, metadata=between(0, 1))
    # the producer's Netty worker as a leg (rocketsim.client.wakeups): a fixed cost a wakeup, microseconds,
    # plus netty_worker_request_us a piece (a request out, an answer in), one wakeup taking every piece
    # queued when it runs; in place of its netty_*_cpu_share part (needed). 0: that constant cost
    netty_worker_wakeup_us: float = field(default=0.0, metadata=between(0, 1e6))
    # the Netty worker's CPU for each piece a wakeup takes, microseconds (with netty_worker_wakeup_us)
    netty_worker_request_us: float = field(default=0.0, metadata=between(0, 1e6))
    # the same for the producer's Netty selector (NettyClientSelector_: the socket's flush and read)
    netty_selector_wakeup_us: float = field(default=0.0, metadata=between(0, 1e6))
    # the Netty selector's CPU for each piece a wakeup takes, microseconds (with netty_selector_wakeup_us)
    netty_selector_request_us: float = field(default=0.0, metadata=between(0, 1e6))
    # the client's CPU per failed SYNC attempt on the thread that failed, microseconds: the exception
    # sendDefaultImpl catches, made with its stack trace, and its log events ("resend at once" with the
    # exception, the message) handed to the client's logger; run on the host's cores from the failure. A new
    # channel's connect (connect_ms) then ends only when the connection's I/O thread has had the connect's
    # CPU of the host's cores beside them, so a storm of failures slows it (docs/validation.md). 0: free
    failure_cpu_us: float = field(default=0.0, metadata=between(0, 1e6))
    # and on the client logger's one thread (ClientLogger's AsyncAppender dispatcher: the lines formatted,
    # the stack trace one line per frame, written to the log file), one failure after another
    failure_log_cpu_us: float = field(default=0.0, metadata=between(0, 1e6))
    # the client's CPU per failed ASYNC attempt that reaches MQClientAPIImpl.onExceptionImpl (invokeAsync's
    # throw caught by sendMessageAsync, an answer that fails, the response-table scan's timeout),
    # microseconds, on the thread that runs it (the async sender executor's when invokeAsync threw, else
    # the callback executor's): the exception made, the retry's queue chosen again and its WARN line
    # handed to the logger ("async send msg by retry", with the exception, 4.9.4+), or the application's
    # onException. The thread does it before its next task (docs/validation.md). 0: free
    async_failure_cpu_us: float = field(default=0.0, metadata=between(0, 1e6))
    # and on the client logger's one thread: the retry's WARN line with its stack trace written (4.9.4+);
    # ClientLogger's AsyncAppender does not block, so a line is dropped while 1,024 wait
    async_failure_log_cpu_us: float = field(default=0.0, metadata=between(0, 1e6))
    # every producer instance runs in one process on one host of `processors` cores (as one application
    # with several DefaultMQProducer instances), sharing them with the brokers whose
    # store.on_producer_host is true; needs brokers.coupling = "joint"
    shared_host: bool = False
    # how the shared host's cores are shared while more threads want them than it has: "fifo", each piece
    # of work on the core with room for it the earliest, first come, first served; or "fair", evenly
    # between the threads that want them, as Linux's CFS does (rocketsim.client.host.FairShareHost), so
    # a broker whose appends run one at a time has one thread's share of a busy host, each piece at the
    # speed the pieces running when it starts leave it; or "fair_conserving", the same shares with no core
    # idle while a piece waits (rocketsim.client.host.CapacityLedger: a piece speeds up when others end).
    # Needs shared_host
    host_scheduler: str = field(default="fifo", metadata=one_of(HOST_SCHEDULERS))
    # the client JVM's heap (-Xmx), MB: its young collections pause the host's cores, more often and
    # longer as pending sends fill it (rocketsim.client.heap; one heap for every producer of a shared
    # host). 0: no collections. Needs send_cpu_us > 0
    heap_mb: float = field(default=0.0, metadata=between(0, 1e7))
    # what one send allocates (short-lived), KiB: heap_mb x G1MaxNewSizePercent / the sends between two
    # collections of a run with no backlog (calibrated from the client's GC counts)
    heap_alloc_kib: float = field(default=8.0, metadata=between(0, 1e6))
    # what a send holds until it ends (Message, body, request, ResponseFuture), KiB
    heap_pending_kib: float = field(default=2.0, metadata=between(0, 1e6))
    # a young collection's fixed pause, microseconds (calibrated from a low-rate run's GC time per count)
    heap_pause_us: float = field(default=3000.0, metadata=between(0, 1e8))
    # a young collection's pause per KiB it copies (the pending sends still in the young generation), us
    heap_copy_us_per_kib: float = field(default=0.5, metadata=between(0, 1e6))
    # a full collection's pause per KiB live (every pending send), us: when the promoted sends, live or
    # ended, leave no room for the smallest young generation (G1's to-space exhausted). Measured: G1 on JDK
    # 17 compacting a 1 GiB heap with 2 threads (tests/data/realbroker-reruns/g1_backlog)
    heap_full_us_per_kib: float = field(default=0.5 * FULL_GC_PER_COPIED_KIB, metadata=between(0, 1e6))
    # what a collection's pause stops: "host", every core of the host (the brokers on it too); "client",
    # the client's threads only, its collector threads (ParallelGCThreads) beside the others' running at its
    # start; "client_over", beside them as they end and start over it; "client_left", in the cores the
    # others' pieces leave at the speeds they were placed at (at least that share). Needs a "fair" host
    heap_stops: str = field(default="host", metadata=one_of(HEAP_STOPS))
    # a fair host counts beside a piece the "pieces" (the brokers' a thread each, a held rest one more) or
    # the "threads" (the brokers' pieces and a held rest on their threads: one with work counts once, as CFS)
    host_counts: str = field(default="pieces", metadata=one_of(("pieces", "threads")))
    # G1's concurrent marking cycle, ms: from 45% of the heap in the old generation (IHOP), it frees the
    # promoted sends dead at its start when it ends (the mixed collections). 0: only full collections free
    # the old generation. Measured (G1 on JDK 17 with a backlog): the median of 21 cycles 1.0 s (0.3-2.9 s)
    heap_marking_ms: float = field(default=0.0, metadata=between(0, 1e7))
    # G1's marking cycle as CPU of its ConcGCThreads on the shared host: from the same 45%, 55 ms and
    # 0.168 us a KiB live in the old generation (G1 on JDK 17 with a backlog, g1_backlog above), ending
    # when the host gave its threads that CPU (heap_marking_ms unused). Needs shared_host, heap_mb > 0
    heap_marking_on_host: bool = False
    # G1's pause-time goal (MaxGCPauseMillis; the JVM's default 200), ms: with it the young generation
    # is sized as G1's adaptive sizing does after each collection, the largest eden whose predicted
    # pause fits the goal and whose predicted copy (its survival rate, 2.2 times) fits the free heap
    # outside the 10% reserve, so a backlog that fills the old generation makes collections smaller and
    # more frequent. 0: the young generation is the room the old generation and the reserve leave
    heap_pause_goal_ms: float = field(default=0.0, metadata=between(0, 1e7))
    # the host stalls (every core does something else) after one send in host_stall_every on average, for
    # a time of mean host_stall_ms: the variable service that makes a host's latency grow with its load
    # (rocketsim.client.host.HostStalls; fitted to latency at rising rates). 0: never. Needs send_cpu_us > 0
    host_stall_every: float = field(default=0.0, metadata=between(0, 1e12))
    host_stall_ms: float = field(default=0.0, metadata=between(0, 1e5))  # the stalls' mean length, ms
    # their lengths' gamma shape: 1 exponential, above 1 more alike (coefficient of variation 1/sqrt(shape))
    host_stall_shape: float = field(default=1.0, metadata=between(0.05, 1000))
    # the CPU a send costs the shared host's threads the model has not otherwise (the JVMs' JIT compilers,
    # the collector's threads beside the others, their other threads), microseconds: run after each send's
    # client work on host_other_threads threads of their own, beside every process's threads, neither
    # process's (a host-wide load, not a stop: rocketsim.client.host.HostOthers). 0: none. Needs
    # shared_host and send_cpu_us > 0
    host_other_cpu_us: float = field(default=0.0, metadata=between(0, 1e6))
    # the threads that run host_other_cpu_us, each send's on one of them in turn, one piece after another
    host_other_threads: int = field(default=2, metadata=between(1, 1024))

    @property
    def executor_threads(self) -> int:
        """The async sender executor's threads."""
        return self.async_sender_threads or self.processors

    @property
    def callback_threads(self) -> int:
        """The callback executor's threads."""
        return self.callback_executor_threads or self.processors

    @property
    def async_queue_bound(self) -> int | None:
        """The bound of the queue ASYNC sends wait in for a thread: the async sender executor's
        (``async_sender_queue``), or None where the version runs them on the callback executor, whose
        queue is unbounded (4.3.x: ``ClientVersion.async_sends_on_callback_executor``)."""
        if self.version.async_sends_on_callback_executor:
            return None
        return self.async_sender_queue

    @property
    def version(self) -> ClientVersion:
        """The remoting client whose messages the brokers receive: the producers' own, or for the gRPC
        family the Proxy's (a 5.3.3 Proxy sends with its embedded 5.3.3 remoting client)."""
        if self.client_family == GRPC:
            return V5_3_3
        return parse_version(self.client_version)

    @property
    def grpc_client(self) -> GrpcClient | None:
        """The gRPC client release (:mod:`rocketsim.client.grpc_versions`); None for the remoting family."""
        return parse_grpc_version(self.client_version) if self.client_family == GRPC else None

    @property
    def client_line(self) -> str:
        """The behaviour line the client runs as (the runs row's ``client_line``): a remoting line's id
        (R4.3 ... R5.3.3) or the gRPC client release's row name."""
        grpc = self.grpc_client
        return grpc.name if grpc is not None else self.version.line.name

    @property
    def compresses_bodies(self) -> bool:
        """Whether a large body is compressed on its way to the broker: by the remoting client
        (``compress_msg_body_over_howmuch``); the gRPC clients send ``Encoding.IDENTITY`` and the Proxy
        forwards the body as it came."""
        return self.client_family != GRPC

    @property
    def async_backpressure(self) -> AsyncBackpressure | None:
        """The 5.x async backpressure settings, the version's defaults where not given; None on 4.x."""
        defaults = self.version.async_backpressure_defaults
        if defaults is None:
            return None
        given = {
            name: getattr(self, name) for name in BACKPRESSURE_SETTINGS if getattr(self, name) is not None
        }
        return dataclasses.replace(defaults, **given)

    @property
    def auto_batching(self) -> AutoBatch | None:
        """The autoBatch settings, the version's defaults where not given; None before 5.1.4."""
        defaults = self.version.auto_batch_defaults
        if defaults is None:
            return None
        given = {name: getattr(self, name) for name in AUTO_BATCH_SETTINGS if getattr(self, name) is not None}
        return dataclasses.replace(defaults, **given)


AUTO_BATCH_SETTINGS = ("auto_batch", "batch_max_delay_ms", "batch_max_bytes", "total_batch_max_bytes")

BACKPRESSURE_SETTINGS = (
    "enable_backpressure_for_async_mode",
    "back_pressure_for_async_send_num",
    "back_pressure_for_async_send_size",
)


@dataclass(frozen=True)
class BodySizeConfig:
    # fixed (every body median bytes), lognormal (around median, sigma) or uniform (min..max)
    distribution: str = field(default="lognormal", metadata=one_of(BODY_DISTRIBUTIONS))
    # bytes: the fixed size, or the lognormal's median
    median: int = field(default=1024, metadata=ge(0))
    sigma: float = field(default=0.8, metadata=between(0, 10))  # beyond: exp() overflows
    # the smallest body (bytes)
    min: int = field(default=1, metadata=ge(0))
    # the largest body (bytes)
    max: int = field(default=65536, metadata=ge(0))


@dataclass(frozen=True)
class WorkloadConfig:
    """What the producers send, and when."""

    messages: int = field(default=0, metadata=ge(0))  # total; 0 means duration_s x rate_per_s
    # how long the producers send (when messages is 0)
    duration_s: float = field(default=60.0, metadata=gt_le(0, MAX_SCENARIO_S))
    rate_per_s: float = field(default=1000.0, metadata=gt(0))  # all producers together
    # poisson (exponential gaps between births) or uniform (a fixed gap)
    arrival: str = field(default="poisson", metadata=one_of(ARRIVALS))
    # the topics messages go to (drawn evenly)
    topics: tuple[str, ...] = ("TopicTest",)
    # TAGS values, drawn evenly
    tags: tuple[str, ...] = ("TagA", "TagB", "TagC")
    keys: bool = True  # one KEYS value per message
    # message body sizes
    body_size: BodySizeConfig = field(default_factory=BodySizeConfig)
    # share of each body that compresses (text); the rest is random bytes
    compressibility: float = field(default=0.5, metadata=between(0, 1))
    # share of messages of each type (weights)
    message_types: Mapping[str, float] = field(
        default_factory=lambda: {"normal": 1.0}, metadata={"keys": MESSAGE_TYPES, "weights": True}
    )
    # distinct selector keys of ordered messages
    order_keys: int = field(default=64, metadata=between(1, 1_000_000))
    # the delay levels delay messages use (drawn evenly)
    delay_levels: tuple[int, ...] = (1, 2, 3, 4, 5)
    # members per batch; a batch whose encoded body (22 bytes + body + properties per member) is over
    # producers.max_message_size is refused as the client refuses it (REJECTED, "the message body size
    # over max value", Validators.checkMessage on the MessageBatch)
    batch_size: int = field(default=8, metadata=between(1, 4096))
    # fraction of messages made invalid on purpose, by kind (they become REJECTED results)
    invalid: Mapping[str, float] = field(
        default_factory=dict, metadata={"keys": INVALID_KINDS, "fractions": True}
    )
    # a hot spot: the first hot_producers producers send hot_share of the messages (and of the rate)
    # between them, the others the rest; 0 splits both evenly over all producers
    hot_share: float = field(default=0.0, metadata=rule("must be >= 0 and < 1", lambda v: 0 <= v < 1))
    # how many producers share workload.hot_share
    hot_producers: int = field(default=1, metadata=between(1, 100_000))
    # an open-loop rate schedule, [[rate msg/s, seconds], ...] for all producers together: each step
    # sends round(rate x seconds) messages, the schedule's j-th to producer j % count (as the real-broker
    # harness does); it replaces rate_per_s and duration_s, and gives the messages
    # (rocketsim.scenario.schedule)
    rate_steps: tuple[tuple[float, ...], ...] = ()

    def total_messages(self) -> int:
        if self.rate_steps:
            return schedule.total_messages(self.rate_steps)
        return self.messages if self.messages > 0 else int(round(self.duration_s * self.rate_per_s))

    @property
    def span_s(self) -> float:
        """The simulated span the messages are born over, s from the scenario's start (nominal: the
        arrivals are drawn; a rate schedule's steps end to end)."""
        if self.rate_steps:
            return sum(secs for _, secs in self.rate_steps)
        return self.messages / self.rate_per_s if self.messages > 0 else self.duration_s

    def mean_rate_per_s(self) -> float:
        """Messages per second over the whole span, all producers together."""
        return self.total_messages() / self.span_s if self.rate_steps else self.rate_per_s


@dataclass(frozen=True)
class FaultConfig:
    """One entry of the fault timeline, in seconds from the scenario start."""

    # the broker it hits
    broker: str
    # what happens to it (docs: the broker model)
    kind: str = field(metadata=one_of(FAULT_KINDS))
    # when it starts, s from the scenario's start
    start_s: float = field(metadata=between(0, MAX_SCENARIO_S))
    # when it ends
    end_s: float = field(metadata=gt_le(0, MAX_SCENARIO_S))
    factor: float = field(default=10.0, metadata=between(1, 1_000_000))  # slowdown: latency x factor
    # flapping: one down+up cycle (at least 1 ms: the model runs in whole milliseconds); store_stall: the
    # time between two stalls (a stall once: period_s >= end_s - start_s)
    period_s: float = field(default=20.0, metadata=between(0.001, MAX_SCENARIO_S))
    # flapping: down part of each cycle; store_stall: how long the append in the lock stalls
    down_s: float = field(default=10.0, metadata=gt(0))
    error: str = field(default="system_busy", metadata=one_of(BROKER_ERRORS))  # error_burst
    rate: float = field(default=0.5, metadata=between(0, 1))  # error_burst: probability per attempt

    @property
    def start_ms(self) -> int:
        """``start_s`` in whole ms (the model runs in whole milliseconds)."""
        return int(round(self.start_s * 1000))

    @property
    def end_ms(self) -> int:
        """``end_s`` in whole ms."""
        return int(round(self.end_s * 1000))


@dataclass(frozen=True)
class RouteConfig:
    """Name-server and route-polling timings (ms), applied by :func:`rocketsim.engine.plan.route_timeline`."""

    poll_interval_ms: int = field(default=30_000, metadata=gt(0))  # ClientConfig.pollNameServerInterval
    # how long the name server keeps a broker that stopped registering: its channel idle time
    # (serverChannelMaxIdleTimeSeconds 120 s; scanNotActiveBroker's BROKER_CHANNEL_EXPIRED_TIME)
    broker_expire_ms: int = field(default=120_000, metadata=gt(0))
    # BrokerConfig.registerNameServerPeriod; the broker registers at max(10 s, min(this, 60 s)) intervals
    heartbeat_interval_ms: int = field(default=30_000, metadata=gt(0))


@dataclass(frozen=True)
class TransactionConfig:
    """Transactional messages after their half is stored: the producer's local transaction, and the
    broker's check-back (``BrokerConfig`` names: transactionCheckInterval, transactionCheckMax,
    transactionTimeOut)."""

    # state the local transaction returns after a SEND_OK half (weights)
    outcome: Mapping[str, float] = field(
        default_factory=lambda: {"commit": 0.9, "rollback": 0.05, "unknown": 0.05},
        metadata={"keys": TRANSACTION_STATES, "weights": True},
    )
    # the producer dies after its half is stored and before it ends the transaction
    producer_crash: float = field(default=0.0, metadata=between(0, 1))
    # state a check-back finds (checkLocalTransaction), drawn per check (weights)
    check_outcome: Mapping[str, float] = field(
        default_factory=lambda: {"commit": 0.5, "rollback": 0.25, "unknown": 0.25},
        metadata={"keys": TRANSACTION_STATES, "weights": True},
    )
    # None: the broker version's BrokerConfig.transactionCheckInterval (60 s in 4.9.8, 30 s in 5.3.3)
    check_interval_ms: int | None = field(default=None, metadata=gt(0))
    # BrokerConfig.transactionCheckMax and transactionTimeOut: 15 and 6 * 1000 in 4.9.8 and 5.3.3 alike
    check_max: int = field(default=15, metadata=between(1, 1000))
    # BrokerConfig.transactionTimeOut: a half younger than this is not checked back
    timeout_ms: int = field(default=6_000, metadata=ge(0))

    def check_interval_for(self, broker: BrokerVersion) -> int:
        """``check_interval_ms``, else ``broker``'s ``BrokerVersion.transaction_check_interval_ms``."""
        return (
            broker.transaction_check_interval_ms if self.check_interval_ms is None else self.check_interval_ms
        )


@dataclass(frozen=True)
class ConsumerGroupConfig:
    """One consumer group in clustering mode: ``count`` instances rebalancing every workload topic with
    AllocateMessageQueueAveragely."""

    # the consumer group
    name: str = "rocketsim_consumer_group"
    # its consumer instances
    count: int = field(default=4, metadata=between(1, 10_000))


@dataclass(frozen=True)
class ConsumersConfig:
    """The consumer groups whose per-consumer load the run reports (``consumer_load``)."""

    groups: tuple[ConsumerGroupConfig, ...] = (ConsumerGroupConfig(),)


@dataclass(frozen=True)
class ProxyConfig:
    """The 5.x Proxy between gRPC producers and the brokers (``ProxyConfig`` names, 5.3.3 defaults; read with
    producers.client_family = "grpc" only: docs/grpc.md)."""

    # cluster: one access point in front of every broker; local: a Proxy inside each broker's process
    mode: str = field(default="cluster", metadata=one_of(PROXY_MODES))
    # grpcClientProducerMaxAttempts: the maxAttempts it pushes (the Python client takes it)
    grpc_client_producer_max_attempts: int = field(default=3, metadata=between(1, 64))
    # grpcClientProducerBackoffInitialMillis: the pushed backoff's first delay (the Java client's wait
    # before retrying a throttled attempt)
    grpc_client_producer_backoff_initial_millis: int = field(default=10, metadata=between(0, MAX_LATENCY_MS))
    # grpcClientProducerBackoffMaxMillis: the pushed backoff's longest delay
    grpc_client_producer_backoff_max_millis: int = field(default=1000, metadata=between(0, MAX_LATENCY_MS))
    # grpcClientProducerBackoffMultiplier: each delay is the previous one times this
    grpc_client_producer_backoff_multiplier: int = field(default=2, metadata=between(1, 1000))
    # MessagingProcessor.DEFAULT_TIMEOUT_MILLS: how long the Proxy waits for its broker
    broker_timeout_ms: int = field(default=2000, metadata=between(1, MAX_LATENCY_MS))
    # topicRouteServiceCacheRefreshSeconds, in ms: how stale the Proxy's route may be
    route_refresh_ms: int = field(default=20_000, metadata=between(1, MAX_LATENCY_MS))
    # the client <-> Proxy hop (network and the Proxy's own work), added to the broker's latency
    hop_ms: int = field(default=1, metadata=between(0, 60_000))


@dataclass(frozen=True)
class Scenario:
    """A whole, validated scenario."""

    # the scenario's name, and its runs' (<name>-s<seed>); a file without one takes the file's name
    name: str = "scenario"
    # the seed of every random draw of the run (the same seed and scenario give the same tables)
    seed: int = 42
    # free text: what the scenario asks
    description: str = ""
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    producers: ProducerConfig = field(default_factory=ProducerConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    brokers: Mapping[str, BrokerModelConfig] = field(default_factory=dict)  # "default" and per-broker names
    faults: tuple[FaultConfig, ...] = ()
    route: RouteConfig = field(default_factory=RouteConfig)
    transactions: TransactionConfig = field(default_factory=TransactionConfig)
    consumers: ConsumersConfig = field(default_factory=ConsumersConfig)
    proxy: ProxyConfig = field(default_factory=ProxyConfig)
    # brokers.coupling in the file (the brokers table holds it beside the per-broker sections)
    broker_coupling: str = field(default="open", metadata=one_of(COUPLINGS))
    source_text: str = field(default="", compare=False, repr=False)

    @property
    def coupling(self) -> str:
        """``brokers.coupling``: open (latency independent of load), joint or iterative
        (:mod:`rocketsim.broker.queue`)."""
        return self.broker_coupling

    @property
    def broker_version(self) -> BrokerVersion:
        """``cluster.broker_version``, else the broker of the producers' line."""
        if self.cluster.broker_version is None:
            return self.producers.version.broker
        return parse_broker_version(self.cluster.broker_version)

    @property
    def client_summary(self) -> str:
        """The producers' client in a few words (a run's banner): its release and the fault strategy, or
        its gRPC release and the Proxy's mode."""
        p = self.producers
        if p.grpc_client is not None:
            return f"client {p.client_version} (gRPC through a {self.proxy.mode}-mode Proxy)"
        return f"client {p.client_version}, fault strategy {'on' if p.send_latency_fault_enable else 'off'}"

    def broker_model(self, broker: str) -> BrokerModelConfig:
        """The model of ``broker``: its own section if any, else ``default``, else built-in defaults."""
        return self.brokers.get(broker) or self.brokers.get("default") or BrokerModelConfig()

    @property
    def run_id(self) -> str:
        """The default run id: scenario name and seed."""
        return f"{self.name}-s{self.seed}"
