"""The scalar reference: the property maps a stored copy carries, as client and broker build them,
and the exact size of the record the broker writes for it (``codec.store_size``).

More: docs/reference/modules.md, rocketsim/broker/store/properties.py.
"""

from __future__ import annotations

from collections.abc import Mapping

from rocketsim.broker.store.layout import (
    CLUSTER_NAME,
    HALF_TOPIC,
    TRANSACTION_ID,
    UNIQ_PROPERTY,
    WAIT_PROPERTY,
)
from rocketsim.client.versions import BrokerVersion, ClientVersion
from rocketsim.format import codec
from rocketsim.format.codec import SocketAddress, StoredMessage
from rocketsim.format.message import MessageConst, MessageSysFlag, broker_delay_transform
from rocketsim.scenario import Scenario


def client_properties(row: Mapping[str, object], sc: Scenario) -> dict[str, str]:
    """The properties the client sent for one ``messages`` row (the workload's model of the client)."""
    props = {WAIT_PROPERTY: "true"}
    if row.get("tags"):
        props[MessageConst.PROPERTY_TAGS] = str(row["tags"])
    if row.get("keys"):
        props[MessageConst.PROPERTY_KEYS] = str(row["keys"])
    props[UNIQ_PROPERTY] = str(row["uniq_msg_id"])
    if row["message_type"] == "delay":
        props[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(row["delay_level"])
    if row["message_type"] == "transaction":
        props[MessageConst.PROPERTY_TRANSACTION_PREPARED] = "true"
        props[MessageConst.PROPERTY_PRODUCER_GROUP] = sc.producers.group
    return props


def batch_request_properties(version: ClientVersion) -> dict[str, str]:
    """The batch request's own properties as the client sends them: ``WAIT=true`` (``generateFromList``
    -> ``setWaitStoreMsgOK``); 5.x ``DefaultMQProducer.batch()`` also gives the batch a UNIQ_KEY (32 hex
    chars, IPv4); 4.9.8's never does (``sendKernelImpl`` skips a ``MessageBatch``)."""
    props = {WAIT_PROPERTY: "true"}
    if version.gives_batch_uniq_key:
        props[UNIQ_PROPERTY] = "0" * 32
    return props


def batch_properties(version: ClientVersion) -> dict[str, str]:
    """The batch request's own properties as the broker sees them (``version``: the client's): the
    client's, then CLUSTER. The broker encodes them (``encodeBatch``: ``messageProperties2String`` of the
    batch's map), so their bytes are the broker's encoding."""
    return {**batch_request_properties(version), MessageConst.PROPERTY_CLUSTER: CLUSTER_NAME}


def broker_ordered(props: Mapping[str, str], broker: BrokerVersion) -> dict[str, str]:
    """``props`` in the order the broker's ``HashMap`` iterates them (``string2messageProperties`` of its
    release, then its puts): the order its ``messageProperties2String`` writes them."""
    return {k: props[k] for k in codec.parsed_properties_java_order(props, version=broker)}


def stored_properties(
    row: Mapping[str, object], sc: Scenario
) -> tuple[str, int, dict[str, str] | list[tuple[str, str]], int | None]:
    """(stored topic, stored queue id, properties as written, delivery delay in ms or None) for one
    stored copy: ``row`` holds the ``messages`` columns plus the attempt's ``queue_id``. A batch element's
    properties are the element's items (as the client sent them) then the batch's; the others are in the
    order the broker (``sc.broker_version``) writes them."""
    broker = sc.broker_version
    topic, queue_id = str(row["topic"]), int(row["queue_id"])  # type: ignore[call-overload]
    props = client_properties(row, sc)
    if row.get("batch_id") is not None:
        batch = broker_ordered(batch_properties(sc.producers.version), broker)
        return topic, queue_id, [*props.items(), *batch.items()], None
    props[MessageConst.PROPERTY_CLUSTER] = CLUSTER_NAME
    if row["message_type"] == "transaction":  # TransactionalMessageBridge.parseHalfMessageInner
        if broker.stores_half_transaction_id:
            props[TRANSACTION_ID] = props[UNIQ_PROPERTY]
        props[MessageConst.PROPERTY_REAL_TOPIC] = topic
        props[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(queue_id)
        return HALF_TOPIC, 0, broker_ordered(props, broker), None
    sys_flag = int(row.get("sys_flag") or 0)  # type: ignore[call-overload]
    moved = broker_delay_transform(topic, queue_id, props, sys_flag, 0)
    if moved.delayed:
        return (
            moved.topic,
            moved.queue_id,
            broker_ordered(moved.properties, broker),
            moved.deliver_timestamp_ms,
        )
    if not broker.keeps_wait_in_store:
        props.pop(WAIT_PROPERTY, None)
    return topic, queue_id, broker_ordered(props, broker), None


def stored_record_size(row: Mapping[str, object], sc: Scenario, store_host: SocketAddress) -> int:
    """``codec.store_size`` of the record the broker writes for one stored copy (the scalar reference).

    ``row`` holds the ``messages`` columns, the attempt's ``queue_id`` and the result's ``wire_bytes``
    and ``sys_flag``. The broker (``sc.broker_version``) encodes the properties it writes. A batch element
    is sized as ``encodeBatch`` does (4.9.8 ``CommitLog.MessageExtBatchEncoder``, 5.3.3
    ``MessageExtEncoder``): the record without properties, plus the element's properties as the client
    encoded them, a separator when they do not end with one (``needAppendLastPropertySeparator``), and
    the batch's properties as the broker encodes them.
    """
    client, broker = sc.producers.version, sc.broker_version
    topic, queue_id, props, _ = stored_properties(row, sc)
    is_batch = row.get("batch_id") is not None
    body_len = int(row["body_size"] if is_batch else row["wire_bytes"] - row["properties_size"])  # type: ignore[operator]
    sys_flag = int(row.get("sys_flag") or 0)  # type: ignore[call-overload]
    if topic == HALF_TOPIC:
        sys_flag = MessageSysFlag.reset_transaction_value(sys_flag, MessageSysFlag.TRANSACTION_NOT_TYPE)
    producer = int(row.get("producer") or 0)  # type: ignore[call-overload]
    born = SocketAddress(((10 << 24) | (producer & 0xFFFFFF)).to_bytes(4, "big"), 0)
    msg = StoredMessage(
        topic=topic,
        body=bytes(body_len),
        born_host=born,
        store_host=store_host,
        properties={} if is_batch else props,  # type: ignore[arg-type]
        sys_flag=sys_flag,
        queue_id=queue_id,
    )
    size = codec.store_size(msg, version=broker)
    if is_batch:
        items = list(props)  # element items, then the batch's
        n_element = len(client_properties(row, sc))
        element = codec.properties_to_bytes(items[:n_element], version=client)
        batch = codec.properties_to_bytes(items[n_element:], version=broker)
        sep = 1 if element and batch and not element.endswith(b"\x02") else 0
        size += len(element) + sep + len(batch)
    return size
