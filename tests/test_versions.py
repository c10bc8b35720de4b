"""Client and broker versions: what each version does, asked by name."""

from __future__ import annotations

import pytest

from rocketsim.client.versions import (
    BROKER_4_9_8,
    BROKER_5_3_3,
    LINE_4_8,
    LINE_4_9_7,
    LINE_4_9_8,
    LINE_5,
    LINE_5_2,
    LINE_5_3_0,
    LINE_5_3_1,
    REMOTING_LINES,
    AsyncBackpressure,
    before,
    parse_version,
    remoting_line,
    since,
)
from rocketsim.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "line", "busy", "go_away", "cap"),
    [
        ("4.8.0", LINE_4_8, False, False, False),
        ("4.9.7", LINE_4_9_7, False, False, False),
        ("4.9.8", LINE_4_9_8, False, False, False),
        ("5.2.0", LINE_5_2, False, False, False),
        ("5.3.0", LINE_5_3_0, True, False, False),
        ("5.3.1", LINE_5_3_1, True, True, False),
        ("5.3.3", LINE_5, True, True, True),
        ("5.x", LINE_5, True, True, True),
    ],
)
def test_send_behaviour_by_version(text: str, line: str, busy: bool, go_away: bool, cap: bool) -> None:
    v = parse_version(text)
    assert v.fault_line == line and v.line.name == line
    assert (v.retries_system_busy, v.retries_go_away, v.has_max_timeout_per_request) == (busy, go_away, cap)


def test_a_line_is_a_row_of_named_behaviours() -> None:
    # clients.md A.2: 4.9.8 is 4.9.7 with LAT-3 (no MessageQueue mutation, writable queue datas only); the
    # 5.3.3 line differs in every fault-strategy and remoting column the model has
    r497, r498, r5 = (remoting_line(name) for name in (LINE_4_9_7, LINE_4_9_8, LINE_5))
    assert REMOTING_LINES.index(r498) == REMOTING_LINES.index(r497) + 1
    differ = {f for f in vars(r497) if getattr(r497, f) != getattr(r498, f)}
    assert differ == {"name", "since", "rewrites_cached_queue", "counts_writable_queues_only"}
    assert r5.uses_queue_filters and r5.resets_index_on_retry and r5.tracks_reachability
    assert not r497.uses_queue_filters
    assert [parse_version(t).line for t in ("4.9.0", "4.9.7", "4.9.8", "5.3.3", "5.x")] == [
        r497,
        r497,
        r498,
        r5,
        r5,
    ]


def test_each_client_line_talks_to_its_broker() -> None:
    assert parse_version("4.9.7").broker == parse_version("4.9.8").broker == BROKER_4_9_8
    assert parse_version("5.2.0").broker == parse_version("5.3.3").broker == BROKER_5_3_3
    assert not BROKER_4_9_8.keeps_wait_in_store and BROKER_5_3_3.keeps_wait_in_store
    assert not BROKER_4_9_8.stores_half_transaction_id and BROKER_5_3_3.stores_half_transaction_id
    assert not BROKER_4_9_8.pc_synchronized_is_system_busy and BROKER_5_3_3.pc_synchronized_is_system_busy
    assert (BROKER_4_9_8.nameserver_scan_first_ms, BROKER_4_9_8.nameserver_scan_interval_ms) == (
        5_000,
        10_000,
    )
    assert (BROKER_5_3_3.nameserver_scan_first_ms, BROKER_5_3_3.nameserver_scan_interval_ms) == (5, 5_000)


def test_a_broker_encodes_stored_properties_as_its_release() -> None:
    # SendMessageProcessor (4.9.8 sendMessage, 5.3.3 sendMessage / sendBatchMessage) re-encodes the stored
    # properties with the broker's own common MessageDecoder: messageProperties2String (4.9.8 drops the final
    # separator, 5.3.3 keeps it) over string2messageProperties' HashMap (new HashMap<>() in 4.9.8,
    # new HashMap<>(128) in 5.3.3): the same module, so the same encoding, as its line's client
    for broker, client in ((BROKER_4_9_8, parse_version("4.9.8")), (BROKER_5_3_3, parse_version("5.3.3"))):
        assert broker.properties_trailing_separator == client.properties_trailing_separator
        assert broker.properties_map_capacity == client.properties_map_capacity
    assert (BROKER_4_9_8.properties_trailing_separator, BROKER_5_3_3.properties_trailing_separator) == (
        False,
        True,
    )
    assert (BROKER_4_9_8.properties_map_capacity, BROKER_5_3_3.properties_map_capacity) == (16, 128)
    # DefaultMessageStore.checkMessage: 4.9.8 refuses getPropertiesString().length() > Short.MAX_VALUE;
    # 5.3.3's has no such check (only the encoder's byte count)
    assert BROKER_4_9_8.checks_properties_string_length and not BROKER_5_3_3.checks_properties_string_length


def test_encoding_behaviour_by_version() -> None:
    v493, v494, v5 = parse_version("4.9.3"), parse_version("4.9.4"), parse_version("5.3.3")
    assert not v493.writes_compression_type and v494.writes_compression_type
    assert (v494.properties_map_capacity, v5.properties_map_capacity) == (16, 128)
    assert (v494.decoder_position_spelling, v5.decoder_position_spelling) == ("POSTION", "POSITION")
    assert not v494.gives_batch_uniq_key and v5.gives_batch_uniq_key
    assert not v5.declares_default_faq_url and parse_version("5.x").declares_default_faq_url


def test_since_and_before() -> None:
    assert since("5.3.2")(parse_version("5.3.2")) and not since("5.3.2")(parse_version("5.3.1"))
    assert before("5.3.3")(parse_version("5.3.2")) and not before("5.3.3")(parse_version("5.3.3"))


def test_unmodelled_versions_are_refused() -> None:
    with pytest.raises(ConfigError, match="a release from 4.3.0 to 5.3.3"):
        parse_version("4.2.9")


def test_transaction_check_interval_is_the_broker_versions() -> None:
    # BrokerConfig.transactionCheckInterval field initialiser: 60 * 1000 (4.9.8), 30 * 1000 (5.3.3)
    assert BROKER_4_9_8.transaction_check_interval_ms == 60_000
    assert BROKER_5_3_3.transaction_check_interval_ms == 30_000


def test_backpressure_is_off_by_default_in_5_3_3() -> None:
    # DefaultMQProducer (5.3.3): enableBackpressureForAsyncMode = false, backPressureForAsyncSendNum = 10000,
    # backPressureForAsyncSendSize = 100 * 1024 * 1024; develop after 5.3.3 lowered the count to 1024
    assert parse_version("5.3.3").async_backpressure_defaults == AsyncBackpressure(False, 10_000, 104_857_600)
    assert parse_version("5.2.0").async_backpressure_defaults == AsyncBackpressure(False, 10_000, 104_857_600)
    assert parse_version("5.x").async_backpressure_defaults == AsyncBackpressure(False, 1024, 104_857_600)
    assert parse_version("4.9.8").async_backpressure_defaults is None  # no such fields in 4.x


@pytest.mark.parametrize(
    ("text", "twice", "reached"),
    [("4.9.8", False, False), ("5.2.0", False, False), ("5.3.0", True, True), ("5.3.1", True, True)]
    + [("5.3.2", True, False), ("5.3.3", True, False)],
)
def test_a_late_async_request_fails_twice_from_5_3_0(text: str, twice: bool, reached: bool) -> None:
    # remoting/.../NettyRemotingClient.java invokeAsync at rocketmq-all-5.3.0..5.3.3: the connect listener's
    # `if (timeoutMillis < costTime) invokeCallback.operationFail(..)` has no return, so
    # invokeAsyncImpl -> NettyRemotingAbstract.invoke0 fails the request again; 5.2.0 throws
    # RemotingTooMuchRequestException from invokeAsync instead (one failure). A retry goes out with no time
    # left only without MQClientAPIImpl.onExceptionImpl's `timeoutMillis > 0` guard (added in 5.3.2).
    v = parse_version(text)
    assert v.fails_late_async_request_twice == twice
    assert (twice and not v.line.async_retry_needs_budget) == reached
