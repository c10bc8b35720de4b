"""What a broker stores: what a stored attempt becomes in the broker's store (pure, vectorised).

An attempt the broker wrote has ``stored`` set in ``send_attempts`` (:func:`is_stored_outcome`): ``ok``
and ``status:*`` answers, and requests the client gave up on that the broker processed anyway (a slow
answer past the timeout, a lost reply), written at ``stored_ts_ms``; a retry of such a request stores the
message again (:func:`stored_copy_counts`: duplicates, lost and failed-but-stored messages). This package
says what was written, following the broker's release (``Scenario.broker_version``: by default the one of
the client's line, a 4.9.x client talks to a 4.9.8 broker, a 5.x client to a 5.3.3 broker;
``SendMessageProcessor``, ``CommitLog``/``HookUtils``, ``TransactionalMessageBridge``,
``MessageExtEncoder``). The broker re-encodes every stored properties string with its own release's
``MessageDecoder`` (``string2messageProperties``, then ``messageProperties2String``): the stored string
ends with ``\\x02`` or not, and lists its entries in the HashMap order, of the broker's release
(``BrokerVersion.properties_trailing_separator`` / ``properties_map_capacity``), whatever the client sent
(each kind of record: :mod:`rocketsim.broker.store.properties`).

Record sizes come from :func:`rocketsim.format.codec.store_sizes` (the exact ``calMsgLength``), stored
bodies are what the client sent (compressed where it compressed). Brokers get IPv4 store hosts
``10.1.0.N:10911`` by their place in ``cluster.brokers``; the offset message id is
``createMessageId(store host, offset)``.

Approximations: the client's properties are the workload's (``WAIT``, ``TAGS``, ``KEYS``, ``UNIQ_KEY``,
``DELAY``, ``TRAN_MSG``, ``PGROUP``); commit-log offsets are a running sum of record sizes, without the
blank filler a broker writes at the end of each 1 GiB file; what a broker writes later (the scheduled
delivery of a delay message, a committed transaction's final message, op-half and check-back records)
is not in the commit log here.

The broker step of the stage (:func:`number_broker`): one broker's records, from every producer, numbered
in its write order (:func:`with_offsets`), and the ``send_results`` rows that point at them completed
with the record's columns (:func:`attach_store_columns`, :data:`RESULT_STORE_COLUMNS`).

The parts: :mod:`~rocketsim.broker.store.layout` (names, sizes, columns, store files),
:mod:`~rocketsim.broker.store.hosts`, :mod:`~rocketsim.broker.store.properties` (the scalar reference),
:mod:`~rocketsim.broker.store.records` (the vectorised path), :mod:`~rocketsim.broker.store.copies`,
:mod:`~rocketsim.broker.store.commit_log`, :mod:`~rocketsim.broker.store.broker_step`.
"""

from __future__ import annotations

from rocketsim.broker.store.broker_step import (
    RESULT_STORE_COLUMNS,
    RESULTS_DATA,
    PointedOffsets,
    PointedRecords,
    attach_store_columns,
    number_broker,
    pointed_brokers,
    with_null_store_columns,
)
from rocketsim.broker.store.commit_log import (
    LOG_COLUMNS,
    OFFSET_NAMES,
    STORE_ORDER,
    broker_indexes,
    log_records,
    numbered_chunks,
    numbered_parts,
    with_offsets,
)
from rocketsim.broker.store.copies import (
    SENT_STATUSES,
    STORED_COPIES,
    copy_rows,
    delivery_counts,
    delivery_flags,
    is_answered_outcome,
    is_stored_outcome,
    log_copies,
    result_copies,
    result_copies_by_joins,
    result_keys,
    stored_copies,
    stored_copy_counts,
)
from rocketsim.broker.store.hosts import offset_msg_ids, store_hosts
from rocketsim.broker.store.layout import (
    ATTEMPT_COLUMNS,
    BATCH_ELEMENT,
    CLUSTER_NAME,
    COMMIT_LOG_FILE_BYTES,
    COPY_COLUMNS,
    CQ_ENTRIES_PER_FILE,
    CQ_ENTRY_BYTES,
    DELAYED,
    HALF,
    HALF_TOPIC,
    INDEX_ENTRIES_PER_FILE,
    INDEX_MAX_NUM,
    MESSAGE_COLUMNS,
    NORMAL,
    NOT_STORED_STATUSES,
    RESULT_COLUMNS,
    SCHEDULE_TOPIC,
    STORE_COLUMNS,
    STORE_PORT,
    TRANSACTION_ID,
    commit_log_files,
    consume_queue_files,
    index_files,
)
from rocketsim.broker.store.properties import (
    batch_properties,
    batch_request_properties,
    broker_ordered,
    client_properties,
    stored_properties,
    stored_record_size,
)
from rocketsim.broker.store.records import (
    PROPERTIES_LIMIT,
    illegal_properties_parts,
    properties_illegal,
    store_records,
)

__all__ = [
    "PROPERTIES_LIMIT",
    "CLUSTER_NAME",
    "COPY_COLUMNS",
    "LOG_COLUMNS",
    "COMMIT_LOG_FILE_BYTES",
    "CQ_ENTRIES_PER_FILE",
    "CQ_ENTRY_BYTES",
    "HALF_TOPIC",
    "INDEX_ENTRIES_PER_FILE",
    "RESULT_STORE_COLUMNS",
    "SCHEDULE_TOPIC",
    "STORE_COLUMNS",
    "STORE_PORT",
    "attach_store_columns",
    "PointedOffsets",
    "PointedRecords",
    "batch_properties",
    "broker_ordered",
    "batch_request_properties",
    "illegal_properties_parts",
    "properties_illegal",
    "client_properties",
    "commit_log_files",
    "consume_queue_files",
    "index_files",
    "is_stored_outcome",
    "broker_indexes",
    "log_records",
    "number_broker",
    "offset_msg_ids",
    "pointed_brokers",
    "store_hosts",
    "store_records",
    "with_null_store_columns",
    "with_offsets",
    "stored_copies",
    "stored_copy_counts",
    "delivery_counts",
    "delivery_flags",
    "result_copies",
    "result_copies_by_joins",
    "result_keys",
    "log_copies",
    "SENT_STATUSES",
    "STORED_COPIES",
    "is_answered_outcome",
    "stored_properties",
    "stored_record_size",
    "ATTEMPT_COLUMNS",
    "BATCH_ELEMENT",
    "DELAYED",
    "HALF",
    "INDEX_MAX_NUM",
    "MESSAGE_COLUMNS",
    "NORMAL",
    "NOT_STORED_STATUSES",
    "OFFSET_NAMES",
    "RESULTS_DATA",
    "RESULT_COLUMNS",
    "STORE_ORDER",
    "TRANSACTION_ID",
    "copy_rows",
    "numbered_chunks",
    "numbered_parts",
]
