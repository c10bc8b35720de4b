"""Output table schemas, declared once (Arrow) and shared by the core, the jobs and the tests.

Every table is partitioned by ``run_id``. The Spark layer derives its ``StructType`` from these.
Columns beyond design §5 are additions the analyses need (timestamps of each send, the sender thread).
"""

from __future__ import annotations

import pyarrow as pa

RUN_ID = pa.field("run_id", pa.string(), nullable=False)

MESSAGES = pa.schema(
    [
        RUN_ID,
        pa.field("producer", pa.int32(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("thread", pa.int32(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("tags", pa.string()),
        pa.field("keys", pa.string()),
        pa.field("uniq_msg_id", pa.string(), nullable=False),
        pa.field("body_size", pa.int32(), nullable=False),
        pa.field("compressibility", pa.float32(), nullable=False),
        pa.field("properties_size", pa.int32(), nullable=False),
        pa.field("flag", pa.int32(), nullable=False),
        pa.field("message_type", pa.string(), nullable=False),  # normal|ordered|delay|transaction|batch
        pa.field("delay_level", pa.int32(), nullable=False),
        pa.field("send_mode", pa.string(), nullable=False),  # sync|async|oneway
        pa.field("born_ts_ms", pa.int64(), nullable=False),
        pa.field("batch_id", pa.int64()),
        pa.field("batch_size", pa.int32(), nullable=False),  # messages in the batch (1 if not a batch)
        pa.field("order_key", pa.string()),
        pa.field("reserved_property", pa.string()),  # a reserved name the message tried to set (rejected)
    ]
)

SEND_ATTEMPTS = pa.schema(
    [
        RUN_ID,
        pa.field("producer", pa.int32(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("attempt", pa.int32(), nullable=False),
        pa.field("start_ts_ms", pa.int64(), nullable=False),
        pa.field("latency_ms", pa.int64(), nullable=False),
        pa.field("broker", pa.string(), nullable=False),
        pa.field("queue_id", pa.int32(), nullable=False),
        pa.field("outcome", pa.string(), nullable=False),  # ok|status:*|remoting:*|broker:<code>|client|...
        pa.field("response_code", pa.int32()),
        pa.field("fault_isolated_until_ms", pa.int64()),  # the producer's isolation of this broker, if any
        pa.field("wire_bytes", pa.int32(), nullable=False),
    ]
)

SEND_RESULTS = pa.schema(
    [
        RUN_ID,
        pa.field("producer", pa.int32(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("uniq_msg_id", pa.string(), nullable=False),
        pa.field("send_mode", pa.string(), nullable=False),
        pa.field(
            "status", pa.string(), nullable=False
        ),  # SEND_OK|FLUSH_*|SLAVE_NOT_AVAILABLE|FAILED|REJECTED|...
        pa.field("error", pa.string()),
        pa.field("attempts", pa.int32(), nullable=False),
        pa.field("brokers_sent", pa.list_(pa.string())),
        pa.field("broker", pa.string()),
        pa.field("queue_id", pa.int32()),
        pa.field("born_ts_ms", pa.int64(), nullable=False),
        pa.field("send_ts_ms", pa.int64(), nullable=False),  # when the send began (after queueing)
        pa.field("end_ts_ms", pa.int64(), nullable=False),
        pa.field("queue_wait_ms", pa.int64(), nullable=False),
        pa.field("latency_ms", pa.int64(), nullable=False),  # send call duration, all attempts
        pa.field("wire_bytes", pa.int32(), nullable=False),
        pa.field("compressed", pa.bool_(), nullable=False),
        pa.field("sys_flag", pa.int32(), nullable=False),
        pa.field("retry_budget_exhausted", pa.bool_(), nullable=False),  # attempts left, but no time
    ]
)

_LATENCY_PERCENTILES = [
    pa.field(name, pa.float64())
    for name in (
        "latency_p50_ms",
        "latency_p75_ms",
        "latency_p95_ms",
        "latency_p99_ms",
        "latency_p999_ms",
        "latency_p9999_ms",
    )
]

BROKER_WINDOWS = pa.schema(
    [
        RUN_ID,
        pa.field("broker", pa.string(), nullable=False),
        pa.field("window_start_ms", pa.int64(), nullable=False),
        pa.field("window_ms", pa.int64(), nullable=False),
        pa.field("sends", pa.int64(), nullable=False),  # attempts that went to this broker
        pa.field("ok", pa.int64(), nullable=False),
        pa.field("failed_timeout", pa.int64(), nullable=False),
        pa.field("failed_connect", pa.int64(), nullable=False),
        pa.field("failed_broker_error", pa.int64(), nullable=False),
        pa.field("not_store_ok", pa.int64(), nullable=False),  # FLUSH_*_TIMEOUT / SLAVE_NOT_AVAILABLE
        pa.field("bytes", pa.int64(), nullable=False),
        *_LATENCY_PERCENTILES,
        pa.field("latency_max_ms", pa.int64()),
        pa.field("isolated_producers", pa.int64(), nullable=False),
        pa.field("queue_skew", pa.float64()),  # max / mean of sends over the broker's queues
    ]
)

PRODUCER_WINDOWS = pa.schema(
    [
        RUN_ID,
        pa.field("producer", pa.int32(), nullable=False),
        pa.field("window_start_ms", pa.int64(), nullable=False),
        pa.field("window_ms", pa.int64(), nullable=False),
        pa.field("sends", pa.int64(), nullable=False),
        pa.field("ok", pa.int64(), nullable=False),
        pa.field("publish_rate_per_s", pa.float64(), nullable=False),
        pa.field("error_rate", pa.float64(), nullable=False),
        pa.field("retries", pa.int64(), nullable=False),
        pa.field("retry_budget_exhausted", pa.int64(), nullable=False),
        pa.field("queue_wait_p50_ms", pa.float64()),
        pa.field("queue_wait_p99_ms", pa.float64()),
        pa.field("queue_wait_max_ms", pa.int64()),
    ]
)

RUN_SUMMARY = pa.schema(
    [
        RUN_ID,
        pa.field("scope", pa.string(), nullable=False),  # "all" or a broker name
        pa.field("messages", pa.int64(), nullable=False),
        pa.field("ok", pa.int64(), nullable=False),
        pa.field("failed", pa.int64(), nullable=False),
        pa.field("rejected", pa.int64(), nullable=False),
        pa.field("attempts", pa.int64(), nullable=False),
        pa.field("retries", pa.int64(), nullable=False),
        pa.field("share", pa.float64(), nullable=False),  # of all stored messages (brokers) / 1.0 (all)
        *_LATENCY_PERCENTILES,
        pa.field("latency_max_ms", pa.int64()),
    ]
)

RUNS = pa.schema(
    [
        RUN_ID,
        pa.field("scenario_name", pa.string(), nullable=False),
        pa.field("scenario_text", pa.string(), nullable=False),
        pa.field("overrides", pa.list_(pa.string()), nullable=False),
        pa.field("seed", pa.int64(), nullable=False),
        pa.field("code_version", pa.string(), nullable=False),
        pa.field("messages", pa.int64(), nullable=False),
        pa.field("attempts", pa.int64(), nullable=False),
        pa.field("started_at", pa.string(), nullable=False),  # wall-clock metadata of the job, not the model
        pa.field("wall_time_s", pa.float64(), nullable=False),
    ]
)

TABLES: dict[str, pa.Schema] = {
    "messages": MESSAGES,
    "send_attempts": SEND_ATTEMPTS,
    "send_results": SEND_RESULTS,
    "broker_windows": BROKER_WINDOWS,
    "producer_windows": PRODUCER_WINDOWS,
    "run_summary": RUN_SUMMARY,
    "runs": RUNS,
}


def without_run_id(schema: pa.Schema) -> pa.Schema:
    """The schema as the core produces it (the Spark layer adds the run_id partition column)."""
    return pa.schema([f for f in schema if f.name != "run_id"])
