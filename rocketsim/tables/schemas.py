"""Output table schemas, declared once (Arrow), and the table registry: what each table is.

Every table is partitioned by ``run_id`` (and, in the Delta log, by the ``write_id`` the warehouse adds:
:mod:`rocketsim.warehouse.run_commit`). The Spark layer derives its ``StructType`` from these.
Columns beyond docs/design.md §6 are additions the analyses need (timestamps of each send, the sender thread).

:data:`REGISTRY` has one row per table (name, schema, keys, the stage that writes it); the end-of-run
listing, the reconciliation, the readers' declared schemas and the table tests iterate it, so a new
table is its schema and row here plus the code of the stage that writes it (the stage names its module).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

# the run (a comparison's or a sweep's id for their tables): the partition of every table
RUN_ID = pa.field("run_id", pa.string(), nullable=False)

MESSAGES = pa.schema(
    [
        RUN_ID,
        # the producer instance that sends it (0 .. producers.count - 1)
        pa.field("producer", pa.int32(), nullable=False),
        # the message's number in its producer's sends (from 0, in birth order)
        pa.field("seq", pa.int64(), nullable=False),
        # seq % threads: the sender thread of the "partitioned" model (send_results.sender_thread: the
        # thread that sent it, in either model)
        pa.field("thread", pa.int32(), nullable=False),
        # the topic it is sent to (workload.topics)
        pa.field("topic", pa.string(), nullable=False),
        # its TAGS property (null: none)
        pa.field("tags", pa.string()),
        # its KEYS property (null: none)
        pa.field("keys", pa.string()),
        # the client's unique id (the UNIQ_KEY property, MessageClientIDSetter's layout)
        pa.field("uniq_msg_id", pa.string(), nullable=False),
        # the body's bytes before compression
        pa.field("body_size", pa.int32(), nullable=False),
        # the share of the body that is compressible text (the rest random bytes)
        pa.field("compressibility", pa.float32(), nullable=False),
        # bytes of the user properties as the client encodes them
        pa.field("properties_size", pa.int32(), nullable=False),
        # Message.flag, the application's own int
        pa.field("flag", pa.int32(), nullable=False),
        pa.field("message_type", pa.string(), nullable=False),  # normal|ordered|delay|transaction|batch
        # the DELAY property's level (0: not a delay message)
        pa.field("delay_level", pa.int32(), nullable=False),
        pa.field("send_mode", pa.string(), nullable=False),  # sync|async|oneway
        # when the application hands it over (its intended send time), ms from the scenario's start
        pa.field("born_ts_ms", pa.int64(), nullable=False),
        # the batch it is sent in (null: sent alone)
        pa.field("batch_id", pa.int64()),
        pa.field("batch_size", pa.int32(), nullable=False),  # messages in the batch (1 if not a batch)
        # the selector's key of an ordered message (null: not ordered)
        pa.field("order_key", pa.string()),
        pa.field("reserved_property", pa.string()),  # a reserved name the message tried to set (rejected)
    ]
)

SEND_ATTEMPTS = pa.schema(
    [
        RUN_ID,
        # the producer instance
        pa.field("producer", pa.int32(), nullable=False),
        # the send's (leading) message
        pa.field("seq", pa.int64(), nullable=False),
        # the attempt of the send: 0, then one more per retry
        pa.field("attempt", pa.int32(), nullable=False),
        # when the attempt started, ms from the scenario's start
        pa.field("start_ts_ms", pa.int64(), nullable=False),
        # how long the attempt took: until its answer, its timeout or its failure
        pa.field("latency_ms", pa.int64(), nullable=False),
        # the broker it was sent to
        pa.field("broker", pa.string(), nullable=False),
        # the queue it was sent to
        pa.field("queue_id", pa.int32(), nullable=False),
        # ok|status:*|remoting:*|broker:<code>|client|...; gRPC: ok|proxy:<Code>|grpc:<status> (docs/grpc.md)
        pa.field("outcome", pa.string(), nullable=False),
        # the broker's answer (ResponseCode; null: none came)
        pa.field("response_code", pa.int32()),
        pa.field("fault_isolated_until_ms", pa.int64()),  # the producer's isolation of this broker, if any
        # bytes of the request on the wire
        pa.field("wire_bytes", pa.int32(), nullable=False),
        # the broker stored the request (also when the client gave up on it first), and when
        pa.field("stored", pa.bool_(), nullable=False),
        # when the broker stored it (null: not stored)
        pa.field("stored_ts_ms", pa.int64()),
        # the closed-loop store's view of the request (rocketsim.broker.queue; null with brokers.coupling
        # open, and for a request that never reached a working broker): the flow-control answer that
        # rejected it (REJECTREQUEST, OVERLOAD, PC_SYNCHRONIZED, PCBUSY_CLEAN_QUEUE, TIMEOUT_CLEAN_QUEUE;
        # null: not rejected), the send-queue depth it found, the commit-log writer's time of its append
        pa.field("busy_kind", pa.string()),
        # the send-queue depth it found on arrival (closed loop; else null)
        pa.field("store_queue_depth", pa.int32()),
        # the commit-log writer's time of its append, us (closed loop; else null)
        pa.field("store_service_us", pa.int64()),
    ]
)

BROKER_SIDE_KEY = b"rocketsim.stage"
BROKER_SIDE_VALUE = b"broker_side"


def _broker_side(name: str, type_: pa.DataType) -> pa.Field:
    """A nullable column that the broker-side step adds after the simulation (tagged in its metadata)."""
    return pa.field(name, type_, metadata={BROKER_SIDE_KEY: BROKER_SIDE_VALUE})


def is_broker_side(field: pa.Field) -> bool:
    """Whether ``field`` is added by the broker-side step rather than produced by the simulation."""
    return (field.metadata or {}).get(BROKER_SIDE_KEY) == BROKER_SIDE_VALUE


SEND_RESULTS = pa.schema(
    [
        RUN_ID,
        # the producer instance
        pa.field("producer", pa.int32(), nullable=False),
        # the message
        pa.field("seq", pa.int64(), nullable=False),
        # the message's unique id (messages.uniq_msg_id)
        pa.field("uniq_msg_id", pa.string(), nullable=False),
        # sync|async|oneway
        pa.field("send_mode", pa.string(), nullable=False),
        pa.field(
            "status", pa.string(), nullable=False
        ),  # SEND_OK|FLUSH_*|SLAVE_NOT_AVAILABLE|FAILED|REJECTED|...
        # the exception's text of a FAILED or REJECTED send (null otherwise)
        pa.field("error", pa.string()),
        # attempts the send made (a batch: on its first member, 0 on the others)
        pa.field("attempts", pa.int32(), nullable=False),
        # the brokers its attempts went to, in order
        pa.field("brokers_sent", pa.list_(pa.string())),
        # the broker of its last attempt (null: no attempt)
        pa.field("broker", pa.string()),
        # the queue of its last attempt
        pa.field("queue_id", pa.int32()),
        # when the message was born (its intended send time)
        pa.field("born_ts_ms", pa.int64(), nullable=False),
        pa.field("send_ts_ms", pa.int64(), nullable=False),  # when the send began (after queueing)
        # when the send ended (the call returned, or the async callback ran)
        pa.field("end_ts_ms", pa.int64(), nullable=False),
        # send_ts_ms - born_ts_ms: waiting for a sender thread (OMB's publish delay)
        pa.field("queue_wait_ms", pa.int64(), nullable=False),
        pa.field("latency_ms", pa.int64(), nullable=False),  # send call duration, all attempts
        # latency_ms in microseconds: the last answer's own sub-ms time kept (the decisions are whole ms)
        pa.field("latency_us", pa.int64(), nullable=False),
        # bytes of its request on the wire
        pa.field("wire_bytes", pa.int32(), nullable=False),
        # whether the client compressed the body
        pa.field("compressed", pa.bool_(), nullable=False),
        # the MessageSysFlag bits of the request
        pa.field("sys_flag", pa.int32(), nullable=False),
        pa.field("retry_budget_exhausted", pa.bool_(), nullable=False),  # attempts left, but no time
        pa.field("sender_thread", pa.int32()),  # the application thread that sent it (null: rejected)
        # -- the broker side (rocketsim.broker.store, added by the broker step after the simulation; null
        # unless
        # the result points at a stored copy: status not FAILED/REJECTED and its last answered attempt
        # (or its oneway request) was stored) --
        _broker_side("store_ts_ms", pa.int64()),  # when the broker stored it (send_attempts.stored_ts_ms)
        _broker_side("store_topic", pa.string()),  # topic the broker wrote (SCHEDULE_TOPIC_XXXX, half topic)
        _broker_side("store_queue_id", pa.int32()),  # its queue (delay: level - 1, half: 0)
        _broker_side("queue_offset", pa.int64()),  # in (broker, store_topic, store_queue_id)
        _broker_side("commit_log_offset", pa.int64()),  # in the broker's commit log
        _broker_side("store_size", pa.int32()),  # exact store-format record size
        _broker_side("offset_msg_id", pa.string()),  # MessageDecoder.createMessageId(store host, offset)
        _broker_side("deliver_ts_ms", pa.int64()),  # delay messages: store time + the level's delay
    ]
)

# the exact percentiles of the summary tables (rocketsim.tables.summaries.PERCENTILES: p50 ... p99.99)
LATENCY_PERCENTILE_COLUMNS = (
    "latency_p50_ms",
    "latency_p75_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "latency_p999_ms",
    "latency_p9999_ms",
)
_LATENCY_PERCENTILES = [pa.field(name, pa.float64()) for name in LATENCY_PERCENTILE_COLUMNS]
# the exact percentiles and the maximum of attempt latency
ATTEMPT_LATENCY_COLUMNS = (*(f"attempt_{n}" for n in LATENCY_PERCENTILE_COLUMNS), "attempt_latency_max_ms")
_ATTEMPT_LATENCY = [
    *(pa.field(name, pa.float64()) for name in ATTEMPT_LATENCY_COLUMNS[:-1]),
    pa.field(ATTEMPT_LATENCY_COLUMNS[-1], pa.int64()),
]

# attempts by outcome (the rule: rocketsim.tables.summaries.OUTCOME_KINDS): ok, remoting:timeout,
# remoting:connect, broker:<code>, status:<not SEND_OK>, other; a gRPC attempt's proxy:<Code> and
# grpc:<status> count in the same columns (docs/grpc.md)
OUTCOME_COLUMNS = (
    "ok",
    "failed_timeout",
    "failed_connect",
    "failed_broker_error",
    "not_store_ok",
    "failed_other",
)
_ATTEMPT_OUTCOMES = [pa.field(name, pa.int64(), nullable=False) for name in OUTCOME_COLUMNS]
_QUEUE_WAIT = [  # OMB's "publish delay": born -> send start
    pa.field("queue_wait_p50_ms", pa.float64()),
    pa.field("queue_wait_p99_ms", pa.float64()),
    pa.field("queue_wait_max_ms", pa.int64()),
]
_QUEUE_SPREAD = [  # of sends over queues; idle queues count as 0; null without sends
    pa.field("queue_skew", pa.float64()),  # max / mean (1.0 = even)
    pa.field("queue_gini", pa.float64()),  # Gini coefficient (0 = even)
]

# delivery outcomes of messages (rocketsim.broker.store.stored_copy_counts): extra stored copies (a retry
# after a
# timed-out request the broker stored anyway), messages whose result says sent with no stored copy (a
# oneway the broker never stored), FAILED messages a broker stored anyway
DELIVERY_COLUMNS = ("duplicates", "lost", "failed_but_stored")
_DELIVERY = [pa.field(n, pa.int64(), nullable=False) for n in DELIVERY_COLUMNS]
# what became of the messages beside ok (SEND_OK), failed and rejected: messages = ok + not_ok_status +
# oneway + failed + rejected
MESSAGE_STATUS_COLUMNS = ("not_ok_status", "oneway")
# messages whose send returned a not-OK store status (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT,
# SLAVE_NOT_AVAILABLE): the broker stored them without confirming the flush or the replica
_NOT_OK_STATUS = [pa.field("not_ok_status", pa.int64(), nullable=False)]
# ONEWAY_SENT messages: written to the broker, no answer (neither ok nor failed)
_ONEWAY = [pa.field("oneway", pa.int64(), nullable=False)]
# attempts the closed-loop store's flow control rejected, by kind (send_attempts.busy_kind, lower-cased);
# 0 with brokers.coupling open (no store: no flow control)
BUSY_COLUMNS = (
    "busy_rejectrequest",
    "busy_overload",
    "busy_pc_synchronized",
    "busy_pcbusy_clean_queue",
    "busy_timeout_clean_queue",
)
_BUSY = [pa.field(n, pa.int64(), nullable=False) for n in BUSY_COLUMNS]
# send_attempts' columns of the closed-loop store
STORE_ATTEMPT_COLUMNS = ("busy_kind", "store_queue_depth", "store_service_us")

BROKER_WINDOWS = pa.schema(
    [
        RUN_ID,
        # the broker
        pa.field("broker", pa.string(), nullable=False),
        # the window's start, ms from the scenario's start
        pa.field("window_start_ms", pa.int64(), nullable=False),
        # the window's length (the job's --window-ms)
        pa.field("window_ms", pa.int64(), nullable=False),
        pa.field("sends", pa.int64(), nullable=False),  # attempts that went to this broker (0: none)
        *_ATTEMPT_OUTCOMES,
        pa.field("error_rate", pa.float64()),  # (sends - ok) / sends; null without sends
        pa.field("publish_rate_per_s", pa.float64(), nullable=False),  # ok attempts per second
        pa.field("retries", pa.int64(), nullable=False),  # attempts after a message's first
        # wire bytes of the attempts
        pa.field("bytes", pa.int64(), nullable=False),
        *_LATENCY_PERCENTILES,  # of attempt latency; null without sends
        # the longest attempt (null without sends)
        pa.field("latency_max_ms", pa.int64()),
        pa.field("isolated_producers", pa.int64(), nullable=False),  # with an isolation overlapping it
        *_QUEUE_SPREAD,  # over the broker's queues
        # of the messages whose send began in the window and last went to this broker (the result's
        # broker: for a failed send, the last one it tried); summed over brokers: run_summary's "all"
        *_DELIVERY,
        *_BUSY,  # of the attempts that went to this broker
        # the closed-loop store (null where no request of the window reached it: always with coupling
        # open): the mean and max send-queue depth the window's requests found on arrival, and the
        # commit-log writer's time of their appends over the window (can pass 1.0 a little when appends
        # queued in one window run into the next)
        pa.field("queue_depth_mean", pa.float64()),
        # the deepest send queue a request of the window found
        pa.field("queue_depth_max", pa.int64()),
        # the share of the window the commit-log writer spent appending
        pa.field("utilisation", pa.float64()),
    ]
)

PRODUCER_WINDOWS = pa.schema(
    [
        RUN_ID,
        # the producer instance
        pa.field("producer", pa.int32(), nullable=False),
        # the window's start (by the sends' start)
        pa.field("window_start_ms", pa.int64(), nullable=False),
        # the window's length
        pa.field("window_ms", pa.int64(), nullable=False),
        pa.field("sends", pa.int64(), nullable=False),  # messages whose send began in the window
        # messages whose status is SEND_OK
        pa.field("ok", pa.int64(), nullable=False),
        # messages whose send threw (FAILED)
        pa.field("failed", pa.int64(), nullable=False),
        # messages the client's validators refused (REJECTED)
        pa.field("rejected", pa.int64(), nullable=False),
        pa.field("publish_rate_per_s", pa.float64(), nullable=False),  # SEND_OK messages per second
        pa.field("error_rate", pa.float64(), nullable=False),  # (failed + rejected) / sends
        # attempts of those sends
        pa.field("attempts", pa.int64(), nullable=False),
        # attempts after each send's first
        pa.field("retries", pa.int64(), nullable=False),
        pa.field("retry_budget_exhausted", pa.int64(), nullable=False),  # "lost retry opportunity"
        # wire bytes of the attempts
        pa.field("bytes", pa.int64(), nullable=False),
        *_LATENCY_PERCENTILES,  # of the send call (all attempts)
        # the longest send call (null without sends)
        pa.field("latency_max_ms", pa.int64()),
        *_QUEUE_WAIT,
        *_QUEUE_SPREAD,  # of this producer's attempts over all the run's queues
        pa.field("isolated_brokers", pa.int64(), nullable=False),  # with an isolation overlapping it
        *_DELIVERY,  # of the messages whose send began in the window
        *_BUSY,  # their attempts the closed-loop store rejected, by kind
    ]
)

RUN_SUMMARY = pa.schema(
    [
        RUN_ID,
        pa.field("scope", pa.string(), nullable=False),  # "all" or a broker name
        # messages of the scope (a broker: those its stored results point at)
        pa.field("messages", pa.int64(), nullable=False),
        # SEND_OK messages
        pa.field("ok", pa.int64(), nullable=False),
        # FAILED messages
        pa.field("failed", pa.int64(), nullable=False),
        # REJECTED messages
        pa.field("rejected", pa.int64(), nullable=False),
        *_NOT_OK_STATUS,
        *_ONEWAY,
        # attempts of those messages' sends
        pa.field("attempts", pa.int64(), nullable=False),
        # attempts after each send's first
        pa.field("retries", pa.int64(), nullable=False),
        pa.field("share", pa.float64(), nullable=False),  # of all stored messages (brokers) / 1.0 (all)
        # the send call (all its attempts) of every message: the "all" row only, null on a broker's (a send
        # may try several brokers; a broker's latency is attempt_latency_*)
        *_LATENCY_PERCENTILES,
        # the longest send call ("all" only)
        pa.field("latency_max_ms", pa.int64()),
        # the latency of every attempt sent to the scope (a broker: to it; "all": to any), failed and
        # timed-out ones included: broker_windows' latency over the whole run
        *_ATTEMPT_LATENCY,
        # -- added for analysis (rocketsim.tables.summaries) --
        pa.field("retry_budget_exhausted", pa.int64(), nullable=False),
        *_QUEUE_WAIT,
        pa.field("error_rate", pa.float64()),  # (failed + rejected) / messages
        pa.field("publish_rate_per_s", pa.float64()),  # ok / duration
        pa.field("duration_ms", pa.int64(), nullable=False),  # the run: first birth to last send end
        pa.field("sends", pa.int64(), nullable=False),  # attempts sent to the scope
        *[f for f in _ATTEMPT_OUTCOMES if f.name != "ok"],
        pa.field("attempt_error_rate", pa.float64()),  # failed attempts / sends
        pa.field("bytes", pa.int64(), nullable=False),  # wire bytes of those attempts
        *_QUEUE_SPREAD,
        pa.field("isolations", pa.int64(), nullable=False),  # isolation intervals of the scope's brokers
        pa.field("isolated_ms", pa.int64(), nullable=False),  # their producer-ms up to the run's end
        *_DELIVERY,  # of the scope's messages
        *_BUSY,  # of the attempts sent to the scope
    ]
)

# What happened during each fault of the scenario against the rest of the run (the fault-window view,
# rocketsim.tables.summaries.fault_windows): one row per fault, period and scope; each fault's two
# periods add up to the run.
FAULT_WINDOWS = pa.schema(
    [
        RUN_ID,
        # the fault's place in the scenario's [[faults]] (from 0)
        pa.field("fault", pa.int32(), nullable=False),
        # the broker the fault hits
        pa.field("fault_broker", pa.string(), nullable=False),
        # its kind (outage, hang, slowdown, ...)
        pa.field("fault_kind", pa.string(), nullable=False),
        # its window as the scenario gives it, ms from the scenario's start: [fault_start_ms, fault_end_ms)
        pa.field("fault_start_ms", pa.int64(), nullable=False),
        # see fault_start_ms
        pa.field("fault_end_ms", pa.int64(), nullable=False),
        # "during": the attempts that started, and the messages whose send began, in the fault's window;
        # "outside": the rest of the run
        pa.field("period", pa.string(), nullable=False),
        # "all" or a broker
        pa.field("scope", pa.string(), nullable=False),
        # the part of the run's span (first birth to last send end) in the period, ms: a fault the run's
        # end cuts covers less than its window, one after it none
        pa.field("period_ms", pa.int64(), nullable=False),
        pa.field("sends", pa.int64(), nullable=False),  # attempts of the period sent to the scope
        *[f for f in _ATTEMPT_OUTCOMES if f.name != "ok"],  # those attempts by failure class
        pa.field("attempt_error_rate", pa.float64()),  # failed attempts / sends (null without sends)
        # the scope's share of the period's attempts (the traffic share; null without attempts)
        pa.field("share", pa.float64()),
        *_ATTEMPT_LATENCY,  # of those attempts, as run_summary's
        # messages whose send began in the period ("all": every one; a broker: those whose last attempt
        # went to it, as broker_windows' delivery columns), and how their sends ended
        pa.field("messages", pa.int64(), nullable=False),
        # of those messages, SEND_OK
        pa.field("ok", pa.int64(), nullable=False),
        # FAILED
        pa.field("failed", pa.int64(), nullable=False),
        # REJECTED
        pa.field("rejected", pa.int64(), nullable=False),
        *_NOT_OK_STATUS,
        *_ONEWAY,
        pa.field("error_rate", pa.float64()),  # (failed + rejected) / messages (null without messages)
        *_LATENCY_PERCENTILES,  # of their send calls, as run_summary's: the "all" rows only
        # the longest send call ("all" only)
        pa.field("latency_max_ms", pa.int64()),
        # isolation intervals of the scope's broker (any broker for "all") that began in the period
        pa.field("isolations", pa.int64(), nullable=False),
        # producer-ms of isolation within the period (clipped at the run's last send end)
        pa.field("isolated_ms", pa.int64(), nullable=False),
        *_DELIVERY,  # of the period's messages
        *_BUSY,  # of the period's attempts sent to the scope
    ]
)

# Derived from send_attempts.fault_isolated_until_ms (tests.analysis.isolation_intervals): when a
# producer's latency-fault table kept a broker isolated, [start_ms, end_ms).
ISOLATION_INTERVALS = pa.schema(
    [
        RUN_ID,
        # the producer whose latency-fault table isolated the broker
        pa.field("producer", pa.int32(), nullable=False),
        # the broker isolated
        pa.field("broker", pa.string(), nullable=False),
        # the isolation's start, ms from the scenario's start
        pa.field("start_ms", pa.int64(), nullable=False),
        # its end (exclusive)
        pa.field("end_ms", pa.int64(), nullable=False),
    ]
)

QUEUE_WINDOWS = pa.schema(
    [
        RUN_ID,
        # the broker
        pa.field("broker", pa.string(), nullable=False),
        # the queue
        pa.field("queue_id", pa.int32(), nullable=False),
        # the window's start
        pa.field("window_start_ms", pa.int64(), nullable=False),
        # the window's length
        pa.field("window_ms", pa.int64(), nullable=False),
        pa.field("sends", pa.int64(), nullable=False),  # attempts to this queue (0 included)
        # of those, attempts answered SEND_OK
        pa.field("ok", pa.int64(), nullable=False),
        pa.field("skew", pa.float64()),  # sends / mean sends of the broker's queues in the window
    ]
)

# the variant of a comparison or a capacity sweep (its --variant name, or the size tried)
VARIANT = pa.field("variant", pa.string(), nullable=False)

# One row per (comparison, variant, scope, metric): each run_summary metric side by side with the
# baseline variant's (rocketsim.spark.compare).
COMPARISONS = pa.schema(
    [
        RUN_ID,  # the comparison's id
        VARIANT,
        pa.field("overrides", pa.list_(pa.string()), nullable=False),  # the variant's, after --set
        pa.field("baseline", pa.string(), nullable=False),  # the baseline variant's name
        pa.field("scope", pa.string(), nullable=False),  # "all" or a broker
        pa.field("metric", pa.string(), nullable=False),  # a run_summary column
        # the variant's value of the metric
        pa.field("value", pa.float64()),
        # the baseline variant's value (null: no such scope)
        pa.field("baseline_value", pa.float64()),
        pa.field("delta", pa.float64()),  # value - baseline_value
        pa.field("delta_pct", pa.float64()),  # 100 * delta / |baseline_value|; null if that is 0
    ]
)

# broker_windows of every variant of a comparison
COMPARISON_WINDOWS = pa.schema([RUN_ID, VARIANT, *[f for f in BROKER_WINDOWS if f.name != "run_id"]])
# fault_windows of every variant of a comparison (each variant's own faults)
COMPARISON_FAULT_WINDOWS = pa.schema([RUN_ID, VARIANT, *[f for f in FAULT_WINDOWS if f.name != "run_id"]])

RUNS = pa.schema(
    [
        RUN_ID,
        # the scenario's name
        pa.field("scenario_name", pa.string(), nullable=False),
        # the scenario file's text as run
        pa.field("scenario_text", pa.string(), nullable=False),
        # the --set overrides
        pa.field("overrides", pa.list_(pa.string()), nullable=False),
        # the scenario's seed
        pa.field("seed", pa.int64(), nullable=False),
        # rocketsim's version that ran it
        pa.field("code_version", pa.string(), nullable=False),
        # messages of the run
        pa.field("messages", pa.int64(), nullable=False),
        # attempts of the run
        pa.field("attempts", pa.int64(), nullable=False),
        pa.field("started_at", pa.string(), nullable=False),  # wall-clock metadata of the job, not the model
        # how long the job took
        pa.field("wall_time_s", pa.float64(), nullable=False),
        # brokers.coupling = iterative (rocketsim.engine.iterative): the rounds run and the last one's
        # residual ((broker, ms) buckets whose arrivals still changed; 0: a fixed point); null otherwise
        pa.field("coupling_rounds", pa.int64()),
        # see coupling_rounds
        pa.field("coupling_residual", pa.int64()),
        # producers.client_version as run, and the behaviour line it maps to (a remoting line of
        # rocketsim.client.versions REMOTING_LINES, R4.3 ... R5.3.3, or the gRPC client's row name)
        pa.field("client_version", pa.string()),
        # see client_version
        pa.field("client_line", pa.string()),
        # the tables the run wrote (--tables: every table of a run, or a summaries-only run's summary
        # tables and this row); a reader of another table of the run is told it was not written
        pa.field("tables", pa.list_(pa.string()), nullable=False),
    ]
)

# a capacity sweep (rocketsim.scenario.capacity, jobs/capacity.py): one row per cluster size
CAPACITY = pa.schema(
    [
        RUN_ID,
        VARIANT,  # brokers=N or write_queues=N
        # brokers of the size tried
        pa.field("brokers", pa.int64(), nullable=False),
        # write queues per broker of the size tried
        pa.field("write_queues", pa.int64(), nullable=False),
        # messages of the run
        pa.field("messages", pa.int64(), nullable=False),
        # FAILED messages (failure_rate adds the REJECTED ones)
        pa.field("failed", pa.int64(), nullable=False),
        pa.field("failure_rate", pa.float64()),  # (failed + rejected) / messages
        pa.field("latency_p99_ms", pa.float64()),  # send latency of the messages (run_summary "all")
        # as latency_p99_ms, p99.9
        pa.field("latency_p999_ms", pa.float64()),
        pa.field("busy_rejections", pa.int64(), nullable=False),  # the BUSY_COLUMNS summed
        # the closed-loop coupling the size's figures come from: iterative, or joint (an iterative run
        # that did not converge, run again with the exact event loop)
        pa.field("coupling", pa.string(), nullable=False),
        # the iterative run's rounds (null: not run iterative)
        pa.field("coupling_rounds", pa.int64()),
        # its last round's residual: (broker, ms) buckets whose arrivals still changed (0: a fixed point)
        pa.field("coupling_residual", pa.int64()),
        # the figures are a fixed point of the iterative coupling or the exact joint loop's: false when the
        # iterative run stopped at its round limit and was too large to run again joint (no answer then)
        pa.field("converged", pa.bool_(), nullable=False),
        # the busiest broker window's offered load on its commit-log writer: the appends' writer time over
        # the window (1.0: all the writer can do; above it the appends wait, a backlog builds)
        pa.field("peak_writer_load", pa.float64()),
        # that load capped at 1.0: the share of the window the writer was busy
        pa.field("peak_writer_busy", pa.float64()),
        # the deepest send queue a request found (the backlog, in requests)
        pa.field("peak_queue_depth", pa.int64()),
        # the client: how long sends waited for a sender thread, p99 (run_summary's queue_wait_p99_ms)
        pa.field("queue_wait_p99_ms", pa.float64()),
        # the faults' brokers' share of the attempts (null: no fault)
        pa.field("degraded_share", pa.float64()),
        # the latency p99 of the attempts sent to them (the slowest of them)
        pa.field("degraded_p99_ms", pa.float64()),
        # what limits the size, in words: the brokers' writers, the degraded broker, the client, or none
        pa.field("limited_by", pa.string(), nullable=False),
        # the --target-p99-ms given
        pa.field("target_p99_ms", pa.float64(), nullable=False),
        # the --max-failure-rate given
        pa.field("max_failure_rate", pa.float64(), nullable=False),
        # p99 and failure rate both within the targets (null: not known, the size did not converge)
        pa.field("meets_target", pa.bool_()),
        # the answer: the smallest size meeting both, every smaller one known not to
        pa.field("smallest", pa.bool_(), nullable=False),
    ]
)

# The run-level commit (rocketsim.warehouse.run_commit): one row per table of a run, naming the write of
# that table the run holds (every other table is partitioned by (run_id, write_id)); replaced in one
# commit when a job publishes the run. A row of a table is part of a complete run iff its write_id is here.
RUN_COMMITS = pa.schema(
    [
        RUN_ID,
        # the table
        pa.field("table", pa.string(), nullable=False),
        # the write of it the run holds (its partition)
        pa.field("write_id", pa.string(), nullable=False),
        pa.field("job", pa.string(), nullable=False),  # the job that wrote it (pipeline, summarize, ...)
        pa.field("rows", pa.int64(), nullable=False),  # rows the write committed
        pa.field("committed_at", pa.string(), nullable=False),  # UTC, ISO 8601 (wall-clock metadata)
    ]
)

COMMIT_LOG = pa.schema(
    [
        RUN_ID,
        # the broker whose commit log holds it
        pa.field("broker", pa.string(), nullable=False),
        pa.field("commit_log_offset", pa.int64(), nullable=False),  # running sum of store sizes
        pa.field("store_size", pa.int32(), nullable=False),  # exact store-format record size
        pa.field("store_ts_ms", pa.int64(), nullable=False),  # storing attempt's start + latency
        pa.field("store_topic", pa.string(), nullable=False),  # as written: SCHEDULE_TOPIC_XXXX, half topic
        # the queue written (store_topic's)
        pa.field("store_queue_id", pa.int32(), nullable=False),
        pa.field("queue_offset", pa.int64(), nullable=False),  # in (broker, store_topic, store_queue_id)
        # MessageDecoder.createMessageId(store host, offset)
        pa.field("offset_msg_id", pa.string(), nullable=False),
        # the MessageSysFlag bits as stored
        pa.field("store_sys_flag", pa.int32(), nullable=False),
        # the producer that sent it
        pa.field("producer", pa.int32(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),  # the message (each member of a batch)
        pa.field("send_seq", pa.int64(), nullable=False),  # the send's leading message (attempt rows' seq)
        # the attempt that stored it
        pa.field("attempt", pa.int32(), nullable=False),
        pa.field("born_ts_ms", pa.int64(), nullable=False),  # the storing attempt's start
        # normal|ordered|delay|transaction|batch
        pa.field("message_type", pa.string(), nullable=False),
        pa.field("real_topic", pa.string()),  # REAL_TOPIC / REAL_QID of delay and half records
        # see real_topic
        pa.field("real_queue_id", pa.int32()),
        pa.field("delay_level", pa.int32()),  # the (clamped) level of a delay record
        pa.field("deliver_ts_ms", pa.int64()),  # store time + the level's delay
        pa.field("index_entries", pa.int32(), nullable=False),  # IndexService keys: UNIQ_KEY + keys
        pa.field("is_result", pa.bool_(), nullable=False),  # the copy send_results points at
    ]
)

BROKER_STORAGE = pa.schema(
    [
        RUN_ID,
        # the broker
        pa.field("broker", pa.string(), nullable=False),
        pa.field("window_start_ms", pa.int64(), nullable=False),  # by store time
        # the window's length
        pa.field("window_ms", pa.int64(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),  # as stored (SCHEDULE_TOPIC_XXXX, half topic, ...)
        # the queue of the topic as stored
        pa.field("queue_id", pa.int32(), nullable=False),
        pa.field("messages", pa.int64(), nullable=False),  # records written to this queue in the window
        pa.field("store_bytes", pa.int64(), nullable=False),  # their commit-log bytes
        pa.field("cq_entries", pa.int64(), nullable=False),  # this consume queue, cumulative (20 B each)
        pa.field("cq_files", pa.int64(), nullable=False),  # its files (300,000 entries each), cumulative
        # broker-wide and cumulative at the window's end (the same on every queue row of a broker window)
        pa.field("commit_log_bytes", pa.int64(), nullable=False),
        pa.field("commit_log_files", pa.int64(), nullable=False),  # 1 GiB each
        pa.field("index_entries", pa.int64(), nullable=False),  # one per UNIQ_KEY and per key
        # its IndexService files, cumulative
        pa.field("index_files", pa.int64(), nullable=False),
    ]
)

# One row per stored transactional half, and one per transactional message whose result points at no
# half (rocketsim.broker.transactions): the half the result points at is ended by the producer, any other (a
# timed-out attempt the broker stored anyway) is checked back by the broker.
TRANSACTIONS = pa.schema(
    [
        RUN_ID,
        # the producer
        pa.field("producer", pa.int32(), nullable=False),
        # the message
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("attempt", pa.int32()),  # the attempt that stored the half (null: no half)
        pa.field("is_result", pa.bool_(), nullable=False),  # the half send_results points at
        # the message's unique id
        pa.field("uniq_msg_id", pa.string(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),  # the real topic
        pa.field("send_status", pa.string(), nullable=False),  # the message's result
        pa.field("broker", pa.string()),  # where the half is stored (null: not stored)
        pa.field("queue_id", pa.int32()),  # the real queue (REAL_QID)
        # when the half was stored
        pa.field("half_store_ts_ms", pa.int64()),
        pa.field("half_queue_offset", pa.int64()),  # in RMQ_SYS_TRANS_HALF_TOPIC queue 0
        # the half's commit-log offset
        pa.field("half_commit_log_offset", pa.int64()),
        # the half's store-format size
        pa.field("half_store_size", pa.int32()),
        pa.field("local_state", pa.string(), nullable=False),  # commit|rollback|unknown|crash|not_run
        pa.field("checks", pa.int32(), nullable=False),  # check-backs made
        pa.field("resolution", pa.string(), nullable=False),  # commit|rollback|discard|not_stored
        pa.field("resolved_by", pa.string()),  # producer|check|discard
        # when it was resolved (null: never)
        pa.field("resolved_ts_ms", pa.int64()),
        pa.field("delivered", pa.bool_(), nullable=False),  # committed: consumers get it (once per half)
    ]
)

CONSUMER_LOAD = pa.schema(
    [
        RUN_ID,
        # the consumer group
        pa.field("consumer_group", pa.string(), nullable=False),
        pa.field("consumer", pa.string()),  # null: a queue no consumer reads (queue id >= read_queues)
        # the topic
        pa.field("topic", pa.string(), nullable=False),
        pa.field("broker", pa.string()),  # null with queue_id: a consumer that got no queue
        # see broker
        pa.field("queue_id", pa.int32()),
        pa.field("messages", pa.int64(), nullable=False),  # messages consumers of the topic get here
        # their store-format record bytes
        pa.field("bytes", pa.int64(), nullable=False),
    ]
)

# ---- the table registry -----------------------------------------------------------------------------

# The stages that write tables, and where each one is (a new table is a row below plus the stage's code).
# A run's stages and what each reads are the stage graph (rocketsim.stage.graph): the first four are parts
# of one stage (rocketsim.stage, scheduled by rocketsim.spark.run), which jobs/pipeline.py runs in one pass
# and the other jobs one at a time.
GENERATE = "generate"  # producer tasks (rocketsim.stage.producer)
SIMULATE = "simulate"  # producer and broker tasks (rocketsim.stage.producer, rocketsim.stage.broker)
BROKER_SIDE = "broker_side"  # broker and producer tasks, the driver's consumer_load (rocketsim.broker.side)
SUMMARIZE = "summarize"  # producer tasks' aggregates, merged by the driver (rocketsim.tables.summaries)
RUNS_ROW = "runs_row"  # the driver, once a run is complete (rocketsim.spark.pipeline.write_runs_row)
COMPARE = "compare"  # a comparison of variants (rocketsim.spark.compare)
CAPACITY_SWEEP = "capacity"  # a capacity sweep (rocketsim.spark.capacity)
PUBLISH = "publish"  # the run-level commit of any job that writes a run (rocketsim.warehouse.run_commit)


@dataclass(frozen=True)
class TableSpec:
    """One Delta table: its name (``<warehouse>/<name>``), schema, the columns that identify a row within
    a run (``run_id`` aside), the stage that writes it, and its wall-clock columns (job metadata that a
    rerun changes; every other column is a function of the scenario)."""

    name: str
    schema: pa.Schema
    keys: tuple[str, ...]
    stage: str
    wall_clock: tuple[str, ...] = ()


# In the order the end of a run lists them (and a run's stage commits its own tables: messages first).
REGISTRY: tuple[TableSpec, ...] = (
    TableSpec("messages", MESSAGES, ("producer", "seq"), GENERATE),
    TableSpec("send_attempts", SEND_ATTEMPTS, ("producer", "seq", "attempt"), SIMULATE),
    TableSpec("send_results", SEND_RESULTS, ("producer", "seq"), SIMULATE),
    TableSpec("broker_windows", BROKER_WINDOWS, ("broker", "window_start_ms"), SUMMARIZE),
    TableSpec("queue_windows", QUEUE_WINDOWS, ("broker", "queue_id", "window_start_ms"), SUMMARIZE),
    TableSpec("producer_windows", PRODUCER_WINDOWS, ("producer", "window_start_ms"), SUMMARIZE),
    TableSpec("isolation_intervals", ISOLATION_INTERVALS, ("producer", "broker", "start_ms"), SUMMARIZE),
    TableSpec("run_summary", RUN_SUMMARY, ("scope",), SUMMARIZE),
    TableSpec("fault_windows", FAULT_WINDOWS, ("fault", "period", "scope"), SUMMARIZE),
    TableSpec("commit_log", COMMIT_LOG, ("broker", "commit_log_offset"), SIMULATE),
    TableSpec(
        "broker_storage", BROKER_STORAGE, ("broker", "window_start_ms", "topic", "queue_id"), BROKER_SIDE
    ),
    TableSpec("transactions", TRANSACTIONS, ("producer", "seq", "attempt"), BROKER_SIDE),
    TableSpec(
        "consumer_load",
        CONSUMER_LOAD,
        ("consumer_group", "topic", "broker", "queue_id", "consumer"),
        BROKER_SIDE,
    ),
    TableSpec("runs", RUNS, (), RUNS_ROW, wall_clock=("started_at", "wall_time_s", "code_version")),
    TableSpec("comparisons", COMPARISONS, ("variant", "scope", "metric"), COMPARE),
    TableSpec("comparison_windows", COMPARISON_WINDOWS, ("variant", "broker", "window_start_ms"), COMPARE),
    TableSpec(
        "comparison_fault_windows",
        COMPARISON_FAULT_WINDOWS,
        ("variant", "fault", "period", "scope"),
        COMPARE,
    ),
    TableSpec("capacity", CAPACITY, ("variant",), CAPACITY_SWEEP),
    TableSpec("run_commits", RUN_COMMITS, ("table",), PUBLISH, wall_clock=("write_id", "committed_at")),
)
TABLES: dict[str, TableSpec] = {t.name: t for t in REGISTRY}


def written_by(*stages: str) -> tuple[TableSpec, ...]:
    """The tables the given stages write, in registry order."""
    return tuple(t for t in REGISTRY if t.stage in stages)


def without_run_id(schema: pa.Schema) -> pa.Schema:
    """The schema as the core produces it: the Spark layer adds the run_id partition column and the
    broker-side columns (``is_broker_side``) of ``send_results``."""
    return pa.schema([f for f in schema if f.name != "run_id" and not is_broker_side(f)])


def data_schema(schema: pa.Schema) -> pa.Schema:
    """Every column a table's data files hold: all but the run_id partition column."""
    return pa.schema([f for f in schema if f.name != "run_id"])
