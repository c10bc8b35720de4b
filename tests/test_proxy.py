"""The 5.3.3 Proxy between the gRPC clients and the brokers (``PX/`` =
proxy/src/main/java/org/apache/rocketmq/proxy/ at apache/rocketmq tag rocketmq-all-5.3.3)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketsim.broker import latency as bm
from rocketsim.broker.proxy import (
    ACCESS_POINT,
    CLUSTER,
    LOCAL,
    ProxyAttempt,
    backoff_ms,
    consistent_hash,
    endpoint_of,
    proxy_reply,
    proxy_status,
    reconnect_ready_ms,
)
from rocketsim.client.grpc_codes import DEADLINE_EXCEEDED, Code
from rocketsim.client.outcomes import OutcomeKind
from rocketsim.rng import draw_key
from rocketsim.scenario import ProxyConfig, scenario_from_mapping


def test_settings_are_the_5_3_3_proxys() -> None:
    # PX/config/ProxyConfig.java: grpcClientProducerMaxAttempts 3, BackoffInitialMillis 10, BackoffMaxMillis
    # 1000, BackoffMultiplier 2, topicRouteServiceCacheRefreshSeconds 20, proxyMode CLUSTER;
    # PX/processor/MessagingProcessor.java DEFAULT_TIMEOUT_MILLS = Duration.ofSeconds(2)
    s = ProxyConfig()
    assert (s.mode, s.grpc_client_producer_max_attempts, s.broker_timeout_ms, s.route_refresh_ms) == (
        CLUSTER,
        3,
        2000,
        20_000,
    )
    # ExponentialBackoffRetryPolicy.getNextAttemptDelay(a) = min(initial * multiplier^(a-1), max)
    assert [backoff_ms(s, a) for a in (1, 2, 3, 7, 8)] == [10, 20, 40, 640, 1000]


def test_broker_codes_map_as_response_builder_does() -> None:
    # PX/grpc/v2/common/ResponseBuilder.buildStatus: RESPONSE_CODE_MAPPING SYSTEM_BUSY -> TOO_MANY_REQUESTS,
    # others -> INTERNAL_SERVER_ERROR; RemotingTimeoutException -> PROXY_TIMEOUT; any other throwable ->
    # INTERNAL_SERVER_ERROR. SendMessageActivity.convertToSendMessageResponse: FLUSH_DISK_TIMEOUT ->
    # MASTER_PERSISTENCE_TIMEOUT, FLUSH_SLAVE_TIMEOUT -> SLAVE_PERSISTENCE_TIMEOUT, SLAVE_NOT_AVAILABLE ->
    # HA_NOT_AVAILABLE
    def code(kind: int, response_code: int = 0) -> int:
        return proxy_status(bm.AttemptOutcome(kind, 5, response_code), "broker-a")[0]

    assert code(OutcomeKind.OK) == Code.OK
    assert code(OutcomeKind.BROKER_ERROR, bm.SYSTEM_BUSY) == Code.TOO_MANY_REQUESTS
    assert code(OutcomeKind.BROKER_ERROR, bm.SYSTEM_ERROR) == Code.INTERNAL_SERVER_ERROR
    assert code(OutcomeKind.BROKER_ERROR, bm.SERVICE_NOT_AVAILABLE) == Code.INTERNAL_SERVER_ERROR
    assert code(OutcomeKind.REMOTING_TIMEOUT) == Code.PROXY_TIMEOUT
    assert code(OutcomeKind.REMOTING_CONNECT) == Code.INTERNAL_SERVER_ERROR
    assert code(OutcomeKind.FLUSH_DISK_TIMEOUT) == Code.MASTER_PERSISTENCE_TIMEOUT
    assert code(OutcomeKind.FLUSH_SLAVE_TIMEOUT) == Code.SLAVE_PERSISTENCE_TIMEOUT
    assert code(OutcomeKind.SLAVE_NOT_AVAILABLE) == Code.HA_NOT_AVAILABLE


def test_cluster_mode_gives_every_queue_the_access_point() -> None:
    # PX/service/route/ClusterTopicRouteService.getTopicRouteForProxy: ProxyTopicRouteData(route,
    # requestHostAndPortList); LocalTopicRouteService: ProxyTopicRouteData(route, grpcPort) per broker
    assert {endpoint_of(b, CLUSTER) for b in ("broker-a", "broker-b")} == {ACCESS_POINT}
    assert [endpoint_of(b, LOCAL) for b in ("broker-a", "broker-b")] == ["broker-a", "broker-b"]


@given(st.integers(-(2**31), 2**31 - 1), st.integers(1, 200))
def test_consistent_hash_moves_a_key_only_to_a_new_bucket(value: int, n: int) -> None:
    # Guava Hashing.consistentHash: growing n -> n + 1 buckets keeps a key or moves it to bucket n
    a, b = consistent_hash(value, n), consistent_hash(value, n + 1)
    assert 0 <= a < n and b in (a, n)


def _model(faults: list[dict]) -> bm.BrokerModel:
    raw = {"cluster": {"brokers": ["broker-a", "broker-b"]}, "faults": faults}
    return bm.BrokerModel.from_scenario(scenario_from_mapping(raw))


def test_the_proxy_waits_its_own_timeout_then_the_clients_deadline_decides() -> None:
    # a hung broker: the Proxy's 2 s wait ends in PROXY_TIMEOUT; a client deadline of 3 s sees it, one of
    # 1 s sees DEADLINE_EXCEEDED first (the per-attempt gRPC deadline)
    model = _model([{"broker": "broker-a", "kind": "hang", "start_s": 0, "end_s": 60}])
    s = ProxyConfig()
    queues = (("broker-a", 0),)
    slow = proxy_reply(model, s, ProxyAttempt(ACCESS_POINT, 100, 3000, draw_key(1, 0, 0, 0), queues))
    assert (slow.code, slow.latency_ms) == (Code.PROXY_TIMEOUT, 1 + 2000 + 1)
    short = proxy_reply(model, s, ProxyAttempt(ACCESS_POINT, 100, 1000, draw_key(1, 0, 0, 0), queues))
    assert (short.grpc_code, short.latency_ms) == (DEADLINE_EXCEEDED, 1000)


def test_fifo_messages_go_to_the_consistent_hash_of_the_groups_hashcode() -> None:
    # PX/grpc/v2/producer/SendMessageActivity.SendMessageQueueSelector.select: one message with a group ->
    # writeQueues.get(Hashing.consistentHash(shardingKey.hashCode(), writeQueues.size()))
    model = _model([])
    queues = tuple((b, q) for b in ("broker-a", "broker-b") for q in range(4))
    chosen = {
        (r.broker, r.queue_id)
        for r in (
            proxy_reply(
                model,
                ProxyConfig(),
                ProxyAttempt(ACCESS_POINT, 0, 3000, draw_key(1, 0, s, 0), queues, "g1"),
            )
            for s in range(20)
        )
    }
    assert len(chosen) == 1
    spread = {
        proxy_reply(
            model, ProxyConfig(), ProxyAttempt(ACCESS_POINT, 0, 3000, draw_key(1, 0, s, 0), queues)
        ).broker
        for s in range(50)
    }
    assert spread == {"broker-a", "broker-b"}


def test_reconnect_waits_for_the_backoff_after_the_endpoint_is_back() -> None:
    # grpc channel backoff 1 s x1.6 (no jitter): down at 0 for 1200 ms -> attempts at 1000 (refused) and 2600
    assert reconnect_ready_ms(0, 1200) == 2600
    assert reconnect_ready_ms(0, 900) == 1000
    assert reconnect_ready_ms(209, 1410) == 209 + 1000 + 1600  # G15: ep-b usable again at ~2827 ms
