"""The broker's names and sizes (system topics, cluster name, port, file sizes), the columns of a
stored copy of a message and of what storing adds to it, and how many store files hold a broker's
records.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from rocketsim.format.message import MessageConst, MessageSysFlag

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"  # TopicValidator.RMQ_SYS_SCHEDULE_TOPIC
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"  # TransactionalMessageUtil.buildHalfTopic()
TRANSACTION_ID = "__transactionId__"  # TransactionalMessageUtil.TRANSACTION_ID (5.x half messages)
CLUSTER_NAME = "DefaultCluster"  # BrokerConfig.brokerClusterName
STORE_PORT = 10911  # NettyServerConfig.listenPort of a broker
COMMIT_LOG_FILE_BYTES = 1024 * 1024 * 1024  # MessageStoreConfig.mappedFileSizeCommitLog
CQ_ENTRY_BYTES = 20  # ConsumeQueue.CQ_STORE_UNIT_SIZE: offset (8), size (4), tags code (8)
CQ_ENTRIES_PER_FILE = 300_000  # mappedFileSizeConsumeQueue / CQ_STORE_UNIT_SIZE
INDEX_MAX_NUM = 5_000_000 * 4  # MessageStoreConfig.maxIndexNum
INDEX_ENTRIES_PER_FILE = INDEX_MAX_NUM - 1  # IndexHeader.indexCount starts at 1; full at maxIndexNum

# What a stored record is, for the properties the broker writes.
NORMAL, DELAYED, HALF, BATCH_ELEMENT = 0, 1, 2, 3

# One stored copy of a message, before store_records: the storing attempt, the message, its result.
COPY_COLUMNS = pa.schema(
    [
        pa.field("producer", pa.int32(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),  # the message (a batch: each member)
        pa.field("send_seq", pa.int64(), nullable=False),  # the send's leading message (attempt rows' seq)
        pa.field("attempt", pa.int32(), nullable=False),
        pa.field("start_ts_ms", pa.int64(), nullable=False),
        pa.field("latency_ms", pa.int64(), nullable=False),
        pa.field("broker", pa.string(), nullable=False),
        pa.field("queue_id", pa.int32(), nullable=False),
        pa.field("outcome", pa.string(), nullable=False),
        pa.field("stored_ts_ms", pa.int64(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("tags", pa.string()),
        pa.field("keys", pa.string()),
        pa.field("uniq_msg_id", pa.string(), nullable=False),
        pa.field("body_size", pa.int32(), nullable=False),
        pa.field("properties_size", pa.int32(), nullable=False),
        pa.field("message_type", pa.string(), nullable=False),
        pa.field("delay_level", pa.int32(), nullable=False),
        pa.field("batch_id", pa.int64()),
        pa.field("status", pa.string(), nullable=False),
        pa.field("wire_bytes", pa.int32(), nullable=False),
        pa.field("sys_flag", pa.int32(), nullable=False),
    ]
)
MESSAGE_COLUMNS = (
    "topic",
    "tags",
    "keys",
    "body_size",
    "properties_size",
    "message_type",
    "delay_level",
    "batch_id",
)
ATTEMPT_COLUMNS = ("attempt", "start_ts_ms", "latency_ms", "broker", "queue_id", "outcome", "stored_ts_ms")
# uniq_msg_id: the UNIQ_KEY the client set when it sent the message (send_results), not the workload's
RESULT_COLUMNS = ("status", "wire_bytes", "sys_flag", "uniq_msg_id")
NOT_STORED_STATUSES = ("FAILED", "REJECTED")  # results that point at no stored copy

# Columns store_records adds to its input.
STORE_COLUMNS = pa.schema(
    [
        pa.field("store_ts_ms", pa.int64(), nullable=False),
        pa.field("store_topic", pa.string(), nullable=False),
        pa.field("store_queue_id", pa.int32(), nullable=False),
        pa.field("store_sys_flag", pa.int32(), nullable=False),
        pa.field("store_body_size", pa.int32(), nullable=False),
        pa.field("store_props_size", pa.int32(), nullable=False),
        pa.field("store_size", pa.int32(), nullable=False),
        pa.field("delay_level_stored", pa.int32()),  # the clamped level of a delayed record
        pa.field("deliver_ts_ms", pa.int64()),
        pa.field("real_topic", pa.string()),  # REAL_TOPIC of delayed and half records
        pa.field("real_queue_id", pa.int32()),  # REAL_QID
        pa.field("index_entries", pa.int32(), nullable=False),  # IndexService keys of the record
    ]
)

# the properties and flag bits the broker's rules read
WAIT_PROPERTY = MessageConst.PROPERTY_WAIT_STORE_MSG_OK
UNIQ_PROPERTY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
TRANSACTION_BITS = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE  # 0xC: the transaction type bits


def _ceil_div(values: np.ndarray | int, size: int) -> np.ndarray:
    return -(-np.asarray(values, np.int64) // size)


def commit_log_files(total_bytes: np.ndarray | int) -> np.ndarray:
    """1 GiB commit-log files holding ``total_bytes`` (end-of-file fillers not counted)."""
    return _ceil_div(total_bytes, COMMIT_LOG_FILE_BYTES)


def consume_queue_files(entries: np.ndarray | int) -> np.ndarray:
    """Files of one consume queue with ``entries`` entries (300,000 x 20 bytes per file)."""
    return _ceil_div(entries, CQ_ENTRIES_PER_FILE)


def index_files(entries: np.ndarray | int) -> np.ndarray:
    """Index files for ``entries`` index entries: the first is made with the first record."""
    return np.maximum(_ceil_div(entries, INDEX_ENTRIES_PER_FILE), 1)
