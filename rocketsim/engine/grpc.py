"""The gRPC client family in simulated time: the readable engine's event loop with the gRPC send path.

:class:`GrpcProducerSimulation` is :class:`rocketsim.engine.reference.ProducerSimulation` with three hooks
overridden (the loop itself is the reference engine's: sender threads, events in time order, the
records as the same two tables):

More: docs/reference/modules.md, rocketsim/engine/grpc.py.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, replace

import pyarrow as pa

from rocketsim.broker import latency as bm
from rocketsim.broker import store
from rocketsim.broker.proxy import (
    CLUSTER,
    ProxyAttempt,
    backoff_ms,
    endpoint_of,
    local_endpoint_reply,
    proxy_reply,
    reconnect_ready_ms,
)
from rocketsim.client.grpc_balance import GrpcQueue
from rocketsim.client.grpc_codes import Reply
from rocketsim.client.grpc_send import GrpcSettings, ProducerState, grpc_send_steps
from rocketsim.client.grpc_versions import GrpcClient
from rocketsim.client.route import TopicRouteData, route_versions
from rocketsim.engine.plan import (
    SendKind,
    SimChunk,
    SimOutput,
    SimulationError,
    chunk_cuts,
    gather_chunks,
    horizon_ms,
    one_producer,
    prepare,
    producer_route_versions,
    route_timeline,
    route_version_at,
    slice_output,
)
from rocketsim.engine.reference import ProducerSimulation, Send, engine_output, producer_tables, sends_of
from rocketsim.rng import attempt_key, derive_key, producer_key
from rocketsim.scenario import ProxyConfig, Scenario

__all__ = ["GrpcConfig", "GrpcProducerSimulation", "HeartbeatClock", "simulate_chunks", "simulate_producer"]

SUPPORTED_KINDS = (SendKind.SYNC, SendKind.ASYNC, SendKind.ORDERED, SendKind.ORDERED_ASYNC)


@dataclass(frozen=True)
class GrpcConfig:
    """A gRPC producer's setup: its client row, the Proxy, its request timeout and its own maxAttempts
    (Java ``ProducerBuilder.setMaxAttempts``; Python takes the Proxy's)."""

    client: GrpcClient
    proxy: ProxyConfig
    request_timeout_ms: int = 3000
    max_attempts: int = 3

    @classmethod
    def of(cls, sc: Scenario) -> GrpcConfig:
        """The scenario's (``producers.client_family = "grpc"``)."""
        client = sc.producers.grpc_client
        if client is None:
            raise SimulationError("the gRPC engine needs producers.client_family = grpc")
        return cls(client, sc.proxy, sc.producers.request_timeout_ms, sc.producers.max_attempts)

    def settings(self) -> GrpcSettings:
        """What the send path reads, the Proxy's pushed settings applied as the client applies them."""
        pushed = self.proxy.grpc_client_producer_max_attempts
        return GrpcSettings(
            request_timeout_ms=self.request_timeout_ms,
            max_attempts=pushed if self.client.max_attempts_from_server else self.max_attempts,
            backoff_ms=lambda attempt: backoff_ms(self.proxy, attempt),
        )


def grpc_route(route: TopicRouteData, mode: str) -> list[GrpcQueue]:
    """A QueryRoute answer as the client sees it: each broker's writable queues carrying the endpoint the
    Proxy gives them (``endpoint_of``), in route order."""
    return [
        GrpcQueue(qd.broker_name, q, endpoint_of(qd.broker_name, mode))
        for qd in route.queue_datas
        if qd.writeable
        for q in range(qd.write_queue_nums)
    ]


def proxy_queues(route: TopicRouteData) -> tuple[tuple[str, int], ...]:
    """A cluster-mode Proxy's writable queues, sorted as ``MessageQueueSelector`` sorts them."""
    return tuple(
        sorted(
            (qd.broker_name, q)
            for qd in route.queue_datas
            if qd.writeable
            for q in range(qd.write_queue_nums)
        )
    )


class Channels:
    """The client's gRPC channels to local-mode endpoints (one per broker's Proxy): a connect is refused
    while the broker's process is down; after a refused connect the channel retries on its backoff from
    then on, so it carries RPCs again only at its first reconnect after the endpoint is back
    (:func:`rocketsim.broker.proxy.reconnect_ready_ms`). A channel nothing used while its endpoint was down
    connects at once."""

    def __init__(self, model: bm.BrokerModel, until_ms: int) -> None:
        self.down = {b: model.down_intervals(b, until_ms) for b in model.brokers}
        self.blocked_until: dict[str, int] = {}

    def connect(self, endpoint: str, t: int) -> bool:
        """An RPC to ``endpoint`` at ``t``: whether the channel carries it (a refusal starts its backoff)."""
        if t < self.blocked_until.get(endpoint, 0):
            return False
        for a, b in self.down[endpoint]:
            if a <= t < b:
                self.blocked_until[endpoint] = reconnect_ready_ms(t, b)
                return False
        return True

    def would_connect(self, endpoint: str, t: int) -> bool:
        """:meth:`connect` without its effect, for a time at or after every RPC made so far."""
        return t >= self.blocked_until.get(endpoint, 0) and not any(
            a <= t < b for a, b in self.down[endpoint]
        )


class HeartbeatClock:
    """The client's heartbeat timer in the place of the fault strategy (the loop calls ``advance_to``
    before each event): at every tick (``heartbeat_first_ms``, then every ``heartbeat_period_ms``) a
    heartbeat goes to every endpoint of the client's route (``ClientImpl.doHeartbeat``), and an isolated
    one that answers rejoins (``isolated.remove``)."""

    def __init__(
        self,
        state: ProducerState,
        endpoints_at: Callable[[int], Iterable[str]],
        answers: Callable[[str, int], bool],
        would_answer: Callable[[str, int], bool],
    ) -> None:
        self.state = state
        self.endpoints_at = endpoints_at
        self.answers = answers
        self.would_answer = would_answer
        self.first = state.client.heartbeat_first_ms
        self.period = state.client.heartbeat_period_ms
        self.next_tick = self.first

    def advance_to(self, t: int) -> None:
        while self.next_tick <= t:
            for endpoint in sorted(self.endpoints_at(self.next_tick)):
                if self.answers(endpoint, self.next_tick):
                    self.state.rejoin(endpoint)
            self.next_tick += self.period

    def rejoin_at(self, endpoint: str, after_ms: int, until_ms: int) -> int | None:
        """The first tick after ``after_ms`` at which ``endpoint`` would answer (None: none before
        ``until_ms``)."""
        k = max(0, -(-(after_ms + 1 - self.first) // self.period))
        t = self.first + k * self.period
        while t <= until_ms:
            if self.would_answer(endpoint, t):
                return t
            t += self.period
        return None


class GrpcProducerSimulation(ProducerSimulation):
    """One gRPC producer instance: the reference engine's loop with the gRPC hooks (module doc)."""

    def __init__(self, sc: Scenario, producer: int, cfg: GrpcConfig, groups: dict[int, str]) -> None:
        super().__init__(sc, producer)
        self.grpc = cfg
        self.settings = cfg.settings()
        self.groups = groups  # send index -> its FIFO group
        self.mode = cfg.proxy.mode
        self.horizon = horizon_ms(sc)
        self.channels = Channels(self.model, self.horizon)
        proxy_sc = replace(sc, route=replace(sc.route, poll_interval_ms=cfg.proxy.route_refresh_ms))
        proxy_versions = route_versions(route_timeline(proxy_sc), self.horizon)
        self._proxy_starts = [t for t, _ in proxy_versions]
        self._proxy_queues = [proxy_queues(r) for _, r in proxy_versions]
        self._client_routes = [grpc_route(r, self.mode) for _, r in producer_route_versions(sc)]
        self._local_queues = {
            b: tuple((b, q) for q in range(sc.cluster.write_queues)) for b in self.model.brokers
        }
        self._producer_key = producer_key(sc.seed, producer)  # draw_key's first half, once
        self.state = ProducerState(cfg.client, self._start_of, self._rejoin_at)
        self.strategy = HeartbeatClock(  # type: ignore[assignment]
            self.state, self._route_endpoints, self._answers_heartbeat, self._would_answer_heartbeat
        )

    def executor_queue_bound(self) -> int | None:
        """None: the gRPC clients' async sends queue without a bound (no ``LinkedBlockingQueue(50000)``:
        rocketmq-clients java/client ClientImpl's callback executor has an unbounded queue, Python awaits)."""
        return None

    def _start_of(self, topic: str) -> int:
        """The topic's random start, drawn from the seed in the client's range."""
        c = self.grpc.client
        u = derive_key(self.sc.seed, self.producer, f"grpcStart:{topic}")
        return c.start_low + u % (c.start_high - c.start_low + 1)

    def _route_endpoints(self, t: int) -> set[str]:
        return {q.endpoint for q in self._client_routes[route_version_at(self._version_starts, t)]}

    def _answers_heartbeat(self, endpoint: str, t: int) -> bool:
        if self.mode == CLUSTER:
            return True  # the access point is its own process, up whatever its brokers do
        connected = self.channels.connect(endpoint, t)
        return local_endpoint_reply(self.model, endpoint, t, 1, connected) is None

    def _would_answer_heartbeat(self, endpoint: str, t: int) -> bool:
        if self.mode == CLUSTER:
            return True
        connected = self.channels.would_connect(endpoint, t)
        return local_endpoint_reply(self.model, endpoint, t, 1, connected) is None

    def _rejoin_at(self, endpoint: str, now: int) -> int | None:
        return self.strategy.rejoin_at(endpoint, now, self.horizon)  # type: ignore[attr-defined]

    def steps(self, s: Send, begin: int) -> Generator:
        if s.kind not in SUPPORTED_KINDS:
            raise SimulationError(f"the gRPC clients have no {s.kind.name.lower()} send")
        route = self._client_routes[route_version_at(self._version_starts, begin)]
        return grpc_send_steps(
            self.state,
            route,
            self.settings,
            s.topic,
            begin,
            group=self.groups.get(s.index),
            mode="async" if s.kind in (SendKind.ASYNC, SendKind.ORDERED_ASYNC) else "sync",
        )

    def transport_for(self, s: Send) -> Callable[[int, str, int, int, int], Reply]:  # type: ignore[override]
        group = self.groups.get(s.index)

        def illegal(answer: bm.AttemptOutcome, broker: str, queue_id: int) -> bm.AttemptOutcome:
            if store.properties_illegal(s.props_base, s.props_qid, s.props_chars, queue_id):
                return bm.refused_as_illegal(answer)
            return answer

        def transport(attempt: int, broker: str, queue_id: int, start_ms: int, timeout_ms: int) -> Reply:
            if self.mode == CLUSTER:
                v = bisect.bisect_right(self._proxy_starts, start_ms) - 1
                queues, endpoint = self._proxy_queues[v], endpoint_of(broker, CLUSTER)
            else:
                connected = self.channels.connect(broker, start_ms)
                refused = local_endpoint_reply(self.model, broker, start_ms, timeout_ms, connected)
                if refused is not None:
                    return refused
                queues, endpoint = self._local_queues[broker], broker
            key = attempt_key(self._producer_key, s.seq, attempt)  # rng.draw_key
            a = ProxyAttempt(endpoint, start_ms, timeout_ms, key, queues, group)
            return proxy_reply(self.model, self.grpc.proxy, a, illegal)

        return transport


def _groups(prep) -> dict[int, str]:  # noqa: ANN001 - engine.plan.Prepared
    """Send index -> message group: an ordered message's key."""
    keys = prep.messages.column("order_key").take(pa.array(prep.s_row)).to_pylist()
    kinds = prep.s_kind.tolist()
    ordered = (SendKind.ORDERED, SendKind.ORDERED_ASYNC)
    return {
        i: k for i, (k, kind) in enumerate(zip(keys, kinds, strict=True)) if k is not None and kind in ordered
    }


def simulate_producer(messages: pa.Table, sc: Scenario, cfg: GrpcConfig | None = None) -> SimOutput:
    """Simulate one gRPC producer's messages (schema ``MESSAGES`` without run_id, any row order);
    ``cfg``: the scenario's (:meth:`GrpcConfig.of`) unless given."""
    if messages.num_rows == 0:
        return SimOutput.empty()
    producer = one_producer(messages)
    prep = prepare(messages, sc)
    sends = sends_of(prep)
    done = GrpcProducerSimulation(sc, producer, cfg or GrpcConfig.of(sc), _groups(prep)).run(sends)
    out, ranks = engine_output(sc, len(sends), done)  # type: ignore[arg-type]
    return producer_tables(prep, out, ranks)


def simulate_chunks(
    chunks: Iterable[pa.Table | pa.RecordBatch], sc: Scenario, cfg: GrpcConfig | None = None
) -> Iterator[SimChunk]:
    """One gRPC producer's messages in chunks (seq order) -> its tables in chunks: run whole, then cut."""
    messages, ends = gather_chunks(chunks)
    if messages.num_rows:
        yield from slice_output(messages, simulate_producer(messages, sc, cfg), chunk_cuts(messages, ends))
