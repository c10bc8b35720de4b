"""Scenario files (TOML) -> validated, typed configuration.

A scenario describes a cluster, producers, a workload, the broker model and a fault timeline. Loading
validates everything before any Spark work starts: an unknown key, a wrong type or a value out of range
raises ``ScenarioError`` naming the dotted key path, the rule and the value
(``producers.count must be >= 1, got 0``).

``--set key=value`` overrides use :func:`apply_overrides` on the raw mapping before validation, so an
override is checked exactly like a value in the file.
"""

from __future__ import annotations

import dataclasses
import math
import stat
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocketsim.client.versions import (
    BACK_PRESSURE_MIN_SEND_NUM,
    BACK_PRESSURE_MIN_SEND_SIZE,
    AsyncBackpressure,
    BrokerVersion,
    ClientVersion,
    parse_broker_version,
    parse_version,
)
from rocketsim.errors import ConfigError
from rocketsim.javaint import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN


class ScenarioError(ConfigError):
    """A scenario that cannot run: names the key path, the rule and the value."""


SEND_MODES = ("sync", "async", "oneway")
SENDER_MODELS = ("pool", "partitioned")
MESSAGE_TYPES = ("normal", "ordered", "delay", "transaction", "batch")
FAULT_KINDS = ("outage", "hang", "slowdown", "flapping", "error_burst", "partition", "store_stall")
COUPLINGS = ("open", "joint", "iterative")  # brokers.coupling: rocketsim.broker.queue
STORE_MODES = (
    "async",
    "sync",
)  # store.flush (ASYNC_FLUSH / SYNC_FLUSH), store.replication (ASYNC / SYNC_MASTER)
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
ARRIVALS = ("poisson", "uniform")
BODY_DISTRIBUTIONS = ("fixed", "lognormal", "uniform")
COMPRESS_TYPES = ("ZLIB", "LZ4", "ZSTD")
INVALID_KINDS = ("bad_topic", "empty_body", "oversize_body", "oversize_properties", "reserved_property")
TRANSACTION_STATES = ("commit", "rollback", "unknown")  # LocalTransactionState COMMIT/ROLLBACK_MESSAGE/UNKNOW


def _rule(rule: str, check: typing.Callable[[Any], bool]) -> dict[str, Any]:
    return {"rule": rule, "check": check}


def _ge(lo: float) -> dict[str, Any]:
    return _rule(f"must be >= {lo}", lambda v: v >= lo)


def _gt(lo: float) -> dict[str, Any]:
    return _rule(f"must be > {lo}", lambda v: v > lo)


def _between(lo: float, hi: float) -> dict[str, Any]:
    return _rule(f"must be between {lo} and {hi}", lambda v: lo <= v <= hi)


def _gt_le(lo: float, hi: float) -> dict[str, Any]:
    return _rule(f"must be > {lo} and <= {hi}", lambda v: lo < v <= hi)


# Upper limits that keep every time in int64 milliseconds and every latency finite (beyond them a
# validated scenario used to overflow, divide by zero or loop forever inside the simulate stage).
JAVA_INT_MIN, JAVA_INT_MAX = INT_MIN, INT_MAX
JAVA_LONG_MIN, JAVA_LONG_MAX = LONG_MIN, LONG_MAX
MAX_SCENARIO_S = 31_536_000  # one year: the longest workload span or fault time
MAX_LATENCY_MS = 86_400_000  # one day: the largest latency parameter
MAX_FLAP_CYCLES = 100_000
# The largest producers.max_message_size: a commit-log file (MappedFileSize of the commit log, 1 GiB),
# which a stored record cannot exceed. The sizes that derive from it are Java ints and int32 columns:
# an oversize body (max + 1), a message's wire bytes and its store record (body + headers and
# properties); at 2147483647 they wrapped to negative sizes and offsets that still reconciled.
MAX_MESSAGE_SIZE = 1 << 30
# Bounds of a run's summary windows (the --window-ms of the jobs): queue_windows has a row per queue and
# window from the first to the last attempt, broker_windows one per broker and window.
MAX_WINDOW_MS = MAX_SCENARIO_S * 1000
MAX_WINDOWS = 1_000_000
MAX_QUEUE_WINDOW_ROWS = 20_000_000
MAX_SCENARIO_BYTES = 16 << 20  # a scenario file is a few KiB; more is a mistake (or /dev/zero)
_CONTROL = {chr(c) for c in range(32)} | {chr(c) for c in range(0x7F, 0xA0)}
_TEXT_KEYS = ("description",)  # strings that may hold newlines and tabs


def _one_of(options: tuple[str, ...]) -> dict[str, Any]:
    return _rule(f"must be one of {', '.join(options)}", lambda v: v in options)


@dataclass(frozen=True)
class ClusterConfig:
    """Brokers (master names) and the topic's queues on each."""

    brokers: tuple[str, ...] = ("broker-a", "broker-b")
    write_queues: int = field(default=4, metadata=_between(1, 1024))
    read_queues: int = field(default=4, metadata=_between(1, 1024))
    perm: int = field(default=6, metadata=_between(0, 15))
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

    count: int = field(default=4, metadata=_between(1, 100_000))
    group: str = "rocketsim_producer_group"
    threads: int = field(default=1, metadata=_between(1, 1024))
    # how the application's sender threads take the sends: "pool" (the next message goes to the idle
    # thread that became idle earliest) or "partitioned" (message seq to thread seq % threads)
    sender_model: str = field(default="pool", metadata=_one_of(SENDER_MODELS))
    client_version: str = "4.9.8"
    send_mode: Mapping[str, float] = field(
        default_factory=lambda: {"sync": 1.0}, metadata={"keys": SEND_MODES, "weights": True}
    )
    send_msg_timeout_ms: int = field(default=3000, metadata=_gt(0))
    retry_times_when_send_failed: int = field(default=2, metadata=_between(0, 64))
    retry_times_when_send_async_failed: int = field(default=2, metadata=_between(0, 64))
    send_latency_fault_enable: bool = False
    compress_msg_body_over_howmuch: int = field(default=4096, metadata=_ge(0))
    compress_type: str = field(default="ZLIB", metadata=_one_of(COMPRESS_TYPES))
    compress_level: int = field(default=5, metadata=_between(-1, 22))
    max_message_size: int = field(
        default=4_194_304,
        metadata=_rule(
            f"must be between 1 and {MAX_MESSAGE_SIZE} (a commit-log file; beyond it a body, its wire and "
            "store sizes overflow a Java int)",
            lambda v: 1 <= v <= MAX_MESSAGE_SIZE,
        ),
    )
    default_topic_queue_nums: int = field(default=4, metadata=_between(1, 1024))
    retry_another_broker_when_not_store_ok: bool = False
    send_msg_max_timeout_per_request_ms: int = field(default=-1, metadata=_ge(-1))
    async_semaphore_permits: int = field(default=65535, metadata=_ge(1))
    start_detector_enable: bool = False
    # 5.x DefaultMQProducer async backpressure (None: the client version's default, see
    # ClientVersion.async_backpressure_defaults). Inert unless enabled, and enabling it is refused: the
    # semaphores are not modelled. Refused on 4.x, which has no such settings.
    enable_backpressure_for_async_mode: bool | None = None
    back_pressure_for_async_send_num: int | None = field(
        default=None,
        metadata=_rule(
            f"must be >= {BACK_PRESSURE_MIN_SEND_NUM} (DefaultMQProducerImpl raises smaller values to it)",
            lambda v: v >= BACK_PRESSURE_MIN_SEND_NUM,
        ),
    )
    back_pressure_for_async_send_size: int | None = field(
        default=None,
        metadata=_rule(
            f"must be >= {BACK_PRESSURE_MIN_SEND_SIZE} (DefaultMQProducerImpl raises smaller values to it)",
            lambda v: v >= BACK_PRESSURE_MIN_SEND_SIZE,
        ),
    )
    # NettySystemConfig.connectTimeoutMillis (com.rocketmq.remoting.client.connect.timeout): how long a
    # connect to a host that never answers waits (a partition)
    connect_timeout_ms: int = field(default=3000, metadata=_between(0, MAX_LATENCY_MS))
    # the client's own threads of an ASYNC send (their ThreadLocalIndex is what selects): the async
    # sender executor (DefaultMQProducerImpl: availableProcessors() threads) and the callback executor
    # (ClientConfig.clientCallbackExecutorThreads: availableProcessors()), upstream sized by the client
    # host's processors; here a setting (the machine running the simulation does not decide)
    async_sender_threads: int = field(default=4, metadata=_between(1, 1024))
    callback_executor_threads: int = field(default=4, metadata=_between(1, 1024))

    @property
    def version(self) -> ClientVersion:
        return parse_version(self.client_version)

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


BACKPRESSURE_SETTINGS = (
    "enable_backpressure_for_async_mode",
    "back_pressure_for_async_send_num",
    "back_pressure_for_async_send_size",
)


@dataclass(frozen=True)
class BodySizeConfig:
    distribution: str = field(default="lognormal", metadata=_one_of(BODY_DISTRIBUTIONS))
    median: int = field(default=1024, metadata=_ge(0))
    sigma: float = field(default=0.8, metadata=_between(0, 10))  # beyond: exp() overflows
    min: int = field(default=1, metadata=_ge(0))
    max: int = field(default=65536, metadata=_ge(0))


@dataclass(frozen=True)
class WorkloadConfig:
    """What the producers send, and when."""

    messages: int = field(default=0, metadata=_ge(0))  # total; 0 means duration_s x rate_per_s
    duration_s: float = field(default=60.0, metadata=_gt_le(0, MAX_SCENARIO_S))
    rate_per_s: float = field(default=1000.0, metadata=_gt(0))  # all producers together
    arrival: str = field(default="poisson", metadata=_one_of(ARRIVALS))
    topics: tuple[str, ...] = ("TopicTest",)
    tags: tuple[str, ...] = ("TagA", "TagB", "TagC")
    keys: bool = True  # one KEYS value per message
    body_size: BodySizeConfig = field(default_factory=BodySizeConfig)
    compressibility: float = field(default=0.5, metadata=_between(0, 1))
    message_types: Mapping[str, float] = field(
        default_factory=lambda: {"normal": 1.0}, metadata={"keys": MESSAGE_TYPES, "weights": True}
    )
    # distinct selector keys of ordered messages
    order_keys: int = field(default=64, metadata=_between(1, 1_000_000))
    delay_levels: tuple[int, ...] = (1, 2, 3, 4, 5)
    # members per batch; a batch whose encoded body (22 bytes + body + properties per member) is over
    # producers.max_message_size is refused as the client refuses it (REJECTED, "the message body size
    # over max value", Validators.checkMessage on the MessageBatch)
    batch_size: int = field(default=8, metadata=_between(1, 4096))
    # fraction of messages made invalid on purpose, by kind (they become REJECTED results)
    invalid: Mapping[str, float] = field(
        default_factory=dict, metadata={"keys": INVALID_KINDS, "fractions": True}
    )
    # a hot spot: the first hot_producers producers send hot_share of the messages (and of the rate)
    # between them, the others the rest; 0 splits both evenly over all producers
    hot_share: float = field(default=0.0, metadata=_rule("must be >= 0 and < 1", lambda v: 0 <= v < 1))
    hot_producers: int = field(default=1, metadata=_between(1, 100_000))

    def total_messages(self) -> int:
        return self.messages if self.messages > 0 else int(round(self.duration_s * self.rate_per_s))


@dataclass(frozen=True)
class LatencyConfig:
    """Per-attempt latency: a lognormal body with rare Pareto spikes (a heavy tail)."""

    median_ms: float = field(default=2.0, metadata=_gt_le(0, MAX_LATENCY_MS))
    sigma: float = field(default=0.5, metadata=_between(0, 10))
    spike_probability: float = field(default=0.001, metadata=_between(0, 1))
    spike_scale_ms: float = field(default=50.0, metadata=_gt_le(0, MAX_LATENCY_MS))
    spike_alpha: float = field(default=1.5, metadata=_ge(0.1))  # smaller: (1 - u) ** (1 / a) underflows
    # a refused connection fails fast
    connect_refused_ms: float = field(default=1.0, metadata=_between(0, MAX_LATENCY_MS))


@dataclass(frozen=True)
class StoreConfig:
    """One broker's store in the closed-loop model (``brokers.coupling`` joint or iterative; ignored when
    open): :mod:`rocketsim.broker.queue`. Upstream names: BrokerConfig.sendMessageThreadPoolNums,
    sendThreadPoolQueueCapacity, waitTimeMillsInSendQueue; MessageStoreConfig.osPageCacheBusyTimeOutMills,
    flushDiskType, brokerRole."""

    # the commit-log writer's time for one 1 KiB append (linear in the size), microseconds. Default 10:
    # ~100k appends/s, the published single-broker figures (apache/rocketmq #1515: 108k TPS ASYNC_MASTER;
    # #3315: 95k TPS on 4.9.1). Calibrate from your own brokers.
    append_us: float = field(default=10.0, metadata=_gt_le(0, 1e9))
    send_threads: int = field(default=4, metadata=_between(1, 1024))  # min(processors, 4) upstream
    send_queue_capacity: int = field(default=10_000, metadata=_between(1, 100_000_000))
    wait_time_ms_in_send_queue: int = field(default=200, metadata=_between(0, MAX_LATENCY_MS))
    os_page_cache_busy_timeout_ms: int = field(default=1000, metadata=_between(0, MAX_LATENCY_MS))
    flush: str = field(default="async", metadata=_one_of(STORE_MODES))
    replication: str = field(default="async", metadata=_one_of(STORE_MODES))
    # what a SYNC_FLUSH (GroupCommitService) and a SYNC_MASTER (HAService) wait add to an answer, ms
    sync_flush_ms: float = field(default=1.0, metadata=_between(0, MAX_LATENCY_MS))
    sync_replica_ms: float = field(default=1.0, metadata=_between(0, MAX_LATENCY_MS))


@dataclass(frozen=True)
class BrokerModelConfig:
    """One broker's behaviour outside faults: latency and a background error mix (probabilities), and its
    store (the closed-loop model)."""

    latency: LatencyConfig = field(default_factory=LatencyConfig)
    errors: Mapping[str, float] = field(
        default_factory=dict, metadata={"keys": BROKER_ERRORS, "fractions": True}
    )
    store: StoreConfig = field(default_factory=StoreConfig)


@dataclass(frozen=True)
class FaultConfig:
    """One entry of the fault timeline, in seconds from the scenario start."""

    broker: str
    kind: str = field(metadata=_one_of(FAULT_KINDS))
    start_s: float = field(metadata=_between(0, MAX_SCENARIO_S))
    end_s: float = field(metadata=_gt_le(0, MAX_SCENARIO_S))
    factor: float = field(default=10.0, metadata=_between(1, 1_000_000))  # slowdown: latency x factor
    # flapping: one down+up cycle (at least 1 ms: the model runs in whole milliseconds); store_stall: the
    # time between two stalls (a stall once: period_s >= end_s - start_s)
    period_s: float = field(default=20.0, metadata=_between(0.001, MAX_SCENARIO_S))
    # flapping: down part of each cycle; store_stall: how long the append in the lock stalls
    down_s: float = field(default=10.0, metadata=_gt(0))
    error: str = field(default="system_busy", metadata=_one_of(BROKER_ERRORS))  # error_burst
    rate: float = field(default=0.5, metadata=_between(0, 1))  # error_burst: probability per attempt


@dataclass(frozen=True)
class RouteConfig:
    """Name-server and route-polling timings (ms), applied by :func:`rocketsim.engine.plan.route_timeline`."""

    poll_interval_ms: int = field(default=30_000, metadata=_gt(0))  # ClientConfig.pollNameServerInterval
    # how long the name server keeps a broker that stopped registering: its channel idle time
    # (serverChannelMaxIdleTimeSeconds 120 s; scanNotActiveBroker's BROKER_CHANNEL_EXPIRED_TIME)
    broker_expire_ms: int = field(default=120_000, metadata=_gt(0))
    # BrokerConfig.registerNameServerPeriod; the broker registers at max(10 s, min(this, 60 s)) intervals
    heartbeat_interval_ms: int = field(default=30_000, metadata=_gt(0))


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
    producer_crash: float = field(default=0.0, metadata=_between(0, 1))
    # state a check-back finds (checkLocalTransaction), drawn per check (weights)
    check_outcome: Mapping[str, float] = field(
        default_factory=lambda: {"commit": 0.5, "rollback": 0.25, "unknown": 0.25},
        metadata={"keys": TRANSACTION_STATES, "weights": True},
    )
    # None: the broker version's BrokerConfig.transactionCheckInterval (60 s in 4.9.8, 30 s in 5.3.3)
    check_interval_ms: int | None = field(default=None, metadata=_gt(0))
    # BrokerConfig.transactionCheckMax and transactionTimeOut: 15 and 6 * 1000 in 4.9.8 and 5.3.3 alike
    check_max: int = field(default=15, metadata=_between(1, 1000))
    timeout_ms: int = field(default=6_000, metadata=_ge(0))

    def check_interval_for(self, broker: BrokerVersion) -> int:
        """``check_interval_ms``, else ``broker``'s ``BrokerVersion.transaction_check_interval_ms``."""
        return (
            broker.transaction_check_interval_ms if self.check_interval_ms is None else self.check_interval_ms
        )


@dataclass(frozen=True)
class ConsumerGroupConfig:
    """One consumer group in clustering mode: ``count`` instances rebalancing every workload topic with
    AllocateMessageQueueAveragely."""

    name: str = "rocketsim_consumer_group"
    count: int = field(default=4, metadata=_between(1, 10_000))


@dataclass(frozen=True)
class ConsumersConfig:
    """The consumer groups whose per-consumer load the run reports (``consumer_load``)."""

    groups: tuple[ConsumerGroupConfig, ...] = (ConsumerGroupConfig(),)


@dataclass(frozen=True)
class Scenario:
    """A whole, validated scenario."""

    name: str = "scenario"
    seed: int = 42
    description: str = ""
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    producers: ProducerConfig = field(default_factory=ProducerConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    brokers: Mapping[str, BrokerModelConfig] = field(default_factory=dict)  # "default" and per-broker names
    faults: tuple[FaultConfig, ...] = ()
    route: RouteConfig = field(default_factory=RouteConfig)
    transactions: TransactionConfig = field(default_factory=TransactionConfig)
    consumers: ConsumersConfig = field(default_factory=ConsumersConfig)
    # brokers.coupling in the file (the brokers table holds it beside the per-broker sections)
    broker_coupling: str = field(default="open", metadata=_one_of(COUPLINGS))
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

    def broker_model(self, broker: str) -> BrokerModelConfig:
        """The model of ``broker``: its own section if any, else ``default``, else built-in defaults."""
        return self.brokers.get(broker) or self.brokers.get("default") or BrokerModelConfig()

    @property
    def run_id(self) -> str:
        """The default run id: scenario name and seed."""
        return f"{self.name}-s{self.seed}"


# ---------------------------------------------------------------------------------------------------
# Building typed config from a raw mapping
# ---------------------------------------------------------------------------------------------------


def _fail(path: str, rule: str, value: Any) -> typing.NoReturn:
    raise ScenarioError(f"{path} {rule}, got {value!r}")


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _convert(tp: Any, value: Any, path: str, meta: Mapping[str, Any]) -> Any:
    origin = typing.get_origin(tp)
    if origin is types.UnionType and type(None) in typing.get_args(tp):
        # ``X | None``: None (the default) means "the version's value"; TOML has no null, so a given
        # value is always checked as an X
        (tp,) = (a for a in typing.get_args(tp) if a is not type(None))
        origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            _fail(path, "must be a table", value)
        return _build(tp, value, path)
    if origin is tuple:
        (item_tp, _) = typing.get_args(tp)
        if not isinstance(value, list | tuple):
            _fail(path, f"must be a list of {_type_name(item_tp)}", value)
        return tuple(_convert(item_tp, v, f"{path}[{i}]", {}) for i, v in enumerate(value))
    if origin is Mapping or origin is dict:
        _, val_tp = typing.get_args(tp)
        if not isinstance(value, Mapping):
            _fail(path, "must be a table", value)
        allowed = meta.get("keys")
        out: dict[str, Any] = {}
        for k, v in value.items():
            if allowed is not None and k not in allowed:
                _fail(f"{path}.{k}", f"is not a known key (expected one of {', '.join(allowed)})", v)
            out[k] = _convert(val_tp, v, f"{path}.{k}", {})
            if (meta.get("weights") or meta.get("fractions")) and (not math.isfinite(out[k]) or out[k] < 0):
                _fail(f"{path}.{k}", "must be a finite number >= 0", v)
        if meta.get("weights") and out and sum(out.values()) <= 0:
            _fail(path, "weights must add up to more than 0", dict(value))
        if meta.get("weights") and not out:
            _fail(path, "must name at least one entry", dict(value))
        if meta.get("fractions") and sum(out.values()) > 1:
            _fail(path, "fractions must add up to at most 1", dict(value))
        return types.MappingProxyType(out)
    if tp is bool:
        if not isinstance(value, bool):
            _fail(path, "must be true or false", value)
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            _fail(path, "must be an integer", value)
        # the client's settings are Java ints; the seed lands in an int64 column of ``runs``
        kind, lo, hi = ("int", JAVA_INT_MIN, JAVA_INT_MAX)
        if path == "seed":
            kind, lo, hi = ("long", JAVA_LONG_MIN, JAVA_LONG_MAX)
        if not lo <= value <= hi:
            _fail(path, f"must fit a Java {kind} ({lo}..{hi})", value)
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            _fail(path, "must be a number", value)
        try:
            value = float(value)
        except OverflowError:  # an integer beyond a double: shown by its size, not its 400 digits
            digits = math.floor(value.bit_length() * math.log10(2)) + 1  # str() refuses > 4300 digits
            raise ScenarioError(
                f"{path} must be a finite number, got an integer of {digits} digits"
            ) from None
        if not math.isfinite(value):
            _fail(path, "must be a finite number", value)
    elif tp is str:
        if not isinstance(value, str):
            _fail(path, "must be a string", value)
        allowed = "\n\t\r" if path in _TEXT_KEYS else ""
        if any(ch in _CONTROL and ch not in allowed for ch in value):
            _fail(path, "must not contain control characters", value)
    if "check" in meta and not meta["check"](value):
        _fail(path, meta["rule"], value)
    return value


def _build(cls: Any, raw: Mapping[str, Any], path: str) -> Any:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name != "source_text"}
    for key in raw:
        if key not in fields:
            where = f"{path}.{key}" if path else key
            _fail(where, f"is not a known key (expected one of {', '.join(sorted(fields))})", raw[key])
    kwargs = {}
    for name, f in fields.items():
        where = f"{path}.{name}" if path else name
        if name in raw:
            kwargs[name] = _convert(hints[name], raw[name], where, f.metadata)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            _fail(where, "is required", None)
    return cls(**kwargs)


def _check_cross_fields(sc: Scenario) -> None:
    brokers = sc.cluster.brokers
    if not brokers:
        _fail("cluster.brokers", "must name at least one broker", list(brokers))
    for i, b in enumerate(brokers):
        if not b or not b.strip():
            _fail(f"cluster.brokers[{i}]", "must be a non-blank broker name", b)
    if len(set(brokers)) != len(brokers):
        _fail("cluster.brokers", "must not repeat a broker name", list(brokers))
    for i, b in enumerate(sc.cluster.read_only_brokers):
        if b not in brokers:
            _fail(f"cluster.read_only_brokers[{i}]", "must name a broker of cluster.brokers", b)
    if set(sc.cluster.read_only_brokers) >= set(brokers):
        _fail("cluster.read_only_brokers", "must leave at least one writable broker", list(brokers))
    for name in sc.brokers:
        if name != "default" and name not in brokers:
            _fail(f"brokers.{name}", "must be 'default' or a broker of cluster.brokers", name)
    try:
        sc.producers.version  # noqa: B018 - parse to validate
    except ConfigError as exc:
        _fail(
            "producers.client_version",
            str(exc).split(", got")[0].removeprefix("client_version "),
            sc.producers.client_version,
        )
    _check_async_backpressure(sc.producers)
    if sc.cluster.broker_version is not None:
        try:
            parse_broker_version(sc.cluster.broker_version)
        except ConfigError as exc:
            _fail(
                "cluster.broker_version",
                str(exc).split(", got")[0].removeprefix("broker_version "),
                sc.cluster.broker_version,
            )
    if sc.producers.group.strip() == "":
        _fail("producers.group", "must not be blank", sc.producers.group)
    wl = sc.workload
    if wl.body_size.min > wl.body_size.max:
        _fail(
            "workload.body_size.min",
            f"must be <= workload.body_size.max ({wl.body_size.max})",
            wl.body_size.min,
        )
    if not wl.topics:
        _fail("workload.topics", "must name at least one topic", [])
    if wl.hot_share > 0 and wl.hot_producers >= sc.producers.count:
        _fail(
            "workload.hot_producers",
            f"must be < producers.count ({sc.producers.count}) when workload.hot_share > 0",
            wl.hot_producers,
        )
    if wl.total_messages() <= 0:
        _fail(
            "workload.messages",
            "must give at least one message (or duration_s x rate_per_s >= 1)",
            wl.messages,
        )
    if wl.total_messages() > JAVA_INT_MAX:
        _fail(
            "workload.duration_s x workload.rate_per_s",
            f"must give at most {JAVA_INT_MAX} messages",
            wl.total_messages(),
        )
    if wl.messages > 0 and wl.messages / wl.rate_per_s > MAX_SCENARIO_S:  # else duration_s bounds it
        _fail(
            "workload.rate_per_s",
            f"must send workload.messages ({wl.total_messages()}) within {MAX_SCENARIO_S} s",
            wl.rate_per_s,
        )
    if sc.producers.compress_type == "ZLIB" and not -1 <= sc.producers.compress_level <= 9:
        _fail(
            "producers.compress_level",
            "must be between -1 and 9 with compress_type ZLIB",
            sc.producers.compress_level,
        )
    for i, lvl in enumerate(wl.delay_levels):
        if lvl < 1:
            _fail(f"workload.delay_levels[{i}]", "must be >= 1", lvl)
    if wl.message_types.get("delay", 0) > 0 and not wl.delay_levels:
        _fail("workload.delay_levels", "must not be empty when message_types.delay > 0", [])
    from rocketsim.errors import MQClientError
    from rocketsim.format.validate import (  # the client's own topic rules
        check_send_topic_allowed,
        check_topic,
    )

    for i, topic in enumerate(wl.topics):
        try:
            check_topic(topic, version=sc.producers.version)
            check_send_topic_allowed(topic, version=sc.producers.version)
        except MQClientError as exc:  # keep upstream's text as the rule
            _fail(f"workload.topics[{i}]", f"is not a topic the client accepts ({exc.error_message})", topic)
    groups = [g.name for g in sc.consumers.groups]
    if not groups:
        _fail("consumers.groups", "must name at least one consumer group", [])
    for i, name in enumerate(groups):
        if not name.strip():
            _fail(f"consumers.groups[{i}].name", "must not be blank", name)
        if name in groups[:i]:
            _fail(f"consumers.groups[{i}].name", "must not repeat a group name", name)
    windows: dict[str, list[tuple[float, float, int]]] = {}
    for i, fault in enumerate(sc.faults):
        where = f"faults[{i}]"
        if fault.broker not in brokers:
            _fail(f"{where}.broker", "must name a broker of cluster.brokers", fault.broker)
        if fault.end_s <= fault.start_s:
            _fail(f"{where}.end_s", f"must be after start_s ({fault.start_s})", fault.end_s)
        if fault.kind in ("flapping", "store_stall") and fault.down_s >= fault.period_s:
            _fail(f"{where}.down_s", f"must be shorter than period_s ({fault.period_s})", fault.down_s)
        if fault.kind == "store_stall" and sc.coupling == "open":
            _fail(
                f"{where}.kind",
                "store_stall needs a closed-loop store (brokers.coupling = joint or iterative)",
                fault.kind,
            )
        cycles = (fault.end_s - fault.start_s) / fault.period_s
        if fault.kind in ("flapping", "store_stall") and cycles > MAX_FLAP_CYCLES:
            _fail(
                f"{where}.period_s",
                f"must give at most {MAX_FLAP_CYCLES} flapping cycles between start_s and end_s "
                f"({cycles:.0f} cycles)",
                fault.period_s,
            )
        for s, e, j in windows.get(fault.broker, []):
            if fault.start_s < e and s < fault.end_s:
                _fail(
                    f"{where}",
                    f"must not overlap faults[{j}] on the same broker ({s}-{e} s)",
                    f"{fault.start_s}-{fault.end_s} s",
                )
        windows.setdefault(fault.broker, []).append((fault.start_s, fault.end_s, i))


def _check_async_backpressure(producers: ProducerConfig) -> None:
    """The 5.x backpressure settings: refused on 4.x (no such fields), and enabling them is not modelled."""
    given = [name for name in BACKPRESSURE_SETTINGS if getattr(producers, name) is not None]
    if given and producers.version.async_backpressure_defaults is None:
        raise ScenarioError(
            f"producers.{given[0]} exists only in 5.x clients (DefaultMQProducer 5.0.0 and later), "
            f"not in client_version {producers.client_version}"
        )
    if producers.enable_backpressure_for_async_mode:
        raise ScenarioError(
            "producers.enable_backpressure_for_async_mode = true is not modelled yet (the async send "
            "semaphores of DefaultMQProducerImpl); leave it false (upstream's default)"
        )


def scenario_from_mapping(raw: Mapping[str, Any], source_text: str = "") -> Scenario:
    """Validate a raw mapping (parsed TOML, overrides applied) into a :class:`Scenario`."""
    raw = dict(raw)
    faults = raw.get("faults", [])
    if not isinstance(faults, list):
        _fail("faults", "must be an array of tables ([[faults]])", faults)
    if "broker_coupling" in raw:  # only as brokers.coupling
        _fail("broker_coupling", "is not a known key (write brokers.coupling)", raw["broker_coupling"])
    brokers = raw.get("brokers")
    if isinstance(brokers, Mapping) and "coupling" in brokers:
        brokers = dict(brokers)
        coupling = brokers.pop("coupling")
        if not isinstance(coupling, str) or coupling not in COUPLINGS:
            _fail("brokers.coupling", f"must be one of {', '.join(COUPLINGS)}", coupling)
        raw["brokers"], raw["broker_coupling"] = brokers, coupling
    sc = _build(Scenario, raw, "")
    sc = dataclasses.replace(sc, source_text=source_text)
    _check_cross_fields(sc)
    return sc


def parse_override(item: str) -> tuple[str, Any]:
    """``key.path=value`` -> (path, value); the value is read as a TOML literal, else as a string."""
    if "=" not in item:
        raise ScenarioError(f"--set {item!r} must look like key.path=value")
    key, text = item.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ScenarioError(f"--set {item!r} must name a dotted key path")
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        value = text
    except RecursionError:
        raise ScenarioError(f"--set {key} nests tables or arrays too deeply for a scenario") from None
    except ValueError as exc:  # an integer literal beyond Python's 4300 digits
        raise ScenarioError(f"--set {key} must be a TOML value, got {text[:40]!r}...: {exc}") from None
    return key, value


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Set each ``key.path=value`` into (a copy of) the raw mapping; lists are indexed by number."""
    import copy

    out = copy.deepcopy(raw)
    for item in overrides:
        key, value = parse_override(item)
        node: Any = out
        parts = key.split(".")
        for i, part in enumerate(parts[:-1]):
            if isinstance(node, list):
                if not part.isdigit() or int(part) >= len(node):
                    raise ScenarioError(
                        f"--set {key}: {'.'.join(parts[: i + 1])} is not an index of the list"
                    )
                node = node[int(part)]
            else:
                node = node.setdefault(part, {})
                if not isinstance(node, dict | list):
                    raise ScenarioError(f"--set {key}: {'.'.join(parts[: i + 1])} is not a table")
        last = parts[-1]
        if isinstance(node, list):
            if not last.isdigit() or int(last) >= len(node):
                raise ScenarioError(f"--set {key}: {last} is not an index of the list")
            node[int(last)] = value
        else:
            node[last] = value
    return out


def _read_scenario_text(p: Path) -> str:
    """The scenario file's text: a regular file of at most :data:`MAX_SCENARIO_BYTES` in UTF-8 (a FIFO
    would block the job and a device never end)."""
    try:
        st = p.stat()
        if not stat.S_ISREG(st.st_mode):
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else "a FIFO, socket or device"
            raise ScenarioError(f"scenario file {str(p)!r} must be a regular file, got {kind}")
        if st.st_size > MAX_SCENARIO_BYTES:
            raise ScenarioError(
                f"scenario file {str(p)!r} must be at most {MAX_SCENARIO_BYTES} bytes, got {st.st_size}"
            )
        data = p.read_bytes()
    except OSError as exc:
        raise ScenarioError(f"scenario file {str(p)!r} cannot be read: {exc.strerror}") from None
    try:
        return data.decode("utf-8-sig")  # a leading byte order mark (some editors write one) is dropped
    except UnicodeDecodeError as exc:
        bad = f"byte 0x{data[exc.start]:02x} at offset {exc.start}"
        raise ScenarioError(f"scenario file {str(p)!r} must be UTF-8 text, got {bad}") from None


def check_window(sc: Scenario, window_ms: int, *, option: str = "--window-ms") -> None:
    """The summary window of a run of ``sc``: between 1 ms and a year, and few enough windows over the
    run's span (arrivals, plus every attempt's timeout) that ``broker_windows`` and ``queue_windows``
    stay a sane size (:data:`MAX_WINDOWS`, :data:`MAX_QUEUE_WINDOW_ROWS`)."""
    if not 1 <= window_ms <= MAX_WINDOW_MS:
        _fail(option, f"must be between 1 and {MAX_WINDOW_MS} (one year)", window_ms)
    wl, pr = sc.workload, sc.producers
    arrivals_s = wl.messages / wl.rate_per_s if wl.messages > 0 else wl.duration_s
    sends_ms = pr.send_msg_timeout_ms * (
        1 + max(pr.retry_times_when_send_failed, pr.retry_times_when_send_async_failed)
    )
    span_ms = arrivals_s * 1000 + sends_ms
    windows = math.floor(span_ms / window_ms) + 1
    queues = len(sc.cluster.brokers) * sc.cluster.write_queues
    if windows > MAX_WINDOWS or windows * queues > MAX_QUEUE_WINDOW_ROWS:
        least = max(math.ceil(span_ms / MAX_WINDOWS), math.ceil(span_ms * queues / MAX_QUEUE_WINDOW_ROWS))
        _fail(
            option,
            f"must be >= {least} for this scenario (a span of about {span_ms / 1000:,.0f} s over "
            f"{queues} queues would give {windows:,} windows and {windows * queues:,} queue_windows rows; "
            f"at most {MAX_WINDOWS:,} and {MAX_QUEUE_WINDOW_ROWS:,})",
            window_ms,
        )


def load_scenario(path: str | Path, overrides: list[str] | None = None) -> Scenario:
    """Read, override and validate a scenario file. Raises ``ScenarioError`` on any problem."""
    p = Path(path)
    text = _read_scenario_text(p)
    try:
        raw = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as exc:  # ValueError: an integer beyond 4300 digits
        raise ScenarioError(f"scenario file {str(p)!r} is not valid TOML: {exc}") from None
    except RecursionError:  # tomllib parses nested inline tables and arrays recursively
        raise ScenarioError(
            f"scenario file {str(p)!r} nests tables or arrays too deeply for a scenario"
        ) from None
    raw.setdefault("name", p.stem)
    raw = apply_overrides(raw, overrides or [])
    return scenario_from_mapping(raw, source_text=text)
