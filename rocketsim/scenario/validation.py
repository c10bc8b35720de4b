"""A raw mapping (parsed TOML, overrides applied) -> a validated :class:`~rocketsim.scenario.config.Scenario`:
every value converted to its field's type and checked against its rule, then the rules between fields,
each failure one :class:`~rocketsim.scenario.config.ScenarioError` naming the key path, the rule and the
value; and the check of a run's summary window.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Mapping
from typing import Any

from rocketsim.broker.fault_kinds import FAULT_KINDS, Answer, Store
from rocketsim.client.versions import parse_broker_version
from rocketsim.errors import ConfigError
from rocketsim.scenario.config import (
    AUTO_BATCH_SETTINGS,
    BACKPRESSURE_SETTINGS,
    COUPLINGS,
    ProducerConfig,
    Scenario,
    ScenarioError,
)
from rocketsim.scenario.rules import (
    JAVA_INT_MAX,
    JAVA_INT_MIN,
    JAVA_LONG_MAX,
    JAVA_LONG_MIN,
    MAX_FLAP_CYCLES,
    MAX_QUEUE_WINDOW_ROWS,
    MAX_SCENARIO_S,
    MAX_WINDOW_MS,
    MAX_WINDOWS,
)
from rocketsim.scenario.span import queued_span_s
from rocketsim.scenario.toml_text import toml_value

# characters a string value may not hold (the text keys may hold newlines and tabs)
_CONTROL = {chr(c) for c in range(32)} | {chr(c) for c in range(0x7F, 0xA0)}
_TEXT_KEYS = ("description",)  # strings that may hold newlines and tabs


def _fail(path: str, rule: str, value: Any) -> typing.NoReturn:
    raise ScenarioError(f"{path} {rule}, got {toml_value(value)}")


def _unknown_key(where: str, known: typing.Iterable[str], value: Any) -> typing.NoReturn:
    """An unknown key: the known ones it is close to ("did you mean ...?", :mod:`difflib`), else every
    known one."""
    parent, _, key = where.rpartition(".")
    names = sorted(known)
    close = [f"{parent}.{c}" if parent else c for c in difflib.get_close_matches(key, names, n=3, cutoff=0.6)]
    if not close and not parent:  # a section's key written at the top: threads for producers.threads
        inner = _section_keys()
        close = [inner[c] for c in difflib.get_close_matches(key, sorted(inner), n=3, cutoff=0.8)]
    if close:
        _fail(where, f"is not a known key (did you mean {' or '.join(close)}?)", value)
    _fail(where, f"is not a known key (expected one of {', '.join(names)})", value)


def _section_keys() -> dict[str, str]:
    """The keys of the scenario's sections by name: ``threads`` -> ``producers.threads`` (the first
    section holding a name), and ``coupling`` -> ``brokers.coupling``."""
    out: dict[str, str] = {"coupling": "brokers.coupling"}
    for f in dataclasses.fields(Scenario):
        tp = typing.get_type_hints(Scenario)[f.name]
        if dataclasses.is_dataclass(tp):
            for inner in dataclasses.fields(tp):
                out.setdefault(inner.name, f"{f.name}.{inner.name}")
    return out


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
                _unknown_key(f"{path}.{k}", allowed, v)
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
            # broker_coupling is brokers.coupling in a file: the user never writes it
            _unknown_key(f"{path}.{key}" if path else key, set(fields) - {"broker_coupling"}, raw[key])
    kwargs = {}
    for name, f in fields.items():
        where = f"{path}.{name}" if path else name
        if name in raw:
            kwargs[name] = _convert(hints[name], raw[name], where, f.metadata)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            _fail(where, "is required", None)
    return cls(**kwargs)


def _check_cross_fields(sc: Scenario) -> None:
    """The rules between fields, in this order (the first broken one is reported)."""
    _check_cluster(sc)
    _check_versions(sc)
    _check_grpc_family(sc)
    _check_workload_volume(sc)
    if sc.producers.compress_type == "ZLIB" and not -1 <= sc.producers.compress_level <= 9:
        _fail(
            "producers.compress_level",
            "must be between -1 and 9 with compress_type ZLIB",
            sc.producers.compress_level,
        )
    _check_delays_and_topics(sc)
    _check_consumer_groups(sc)
    _check_faults(sc)
    _check_host(sc)


def _check_host(sc: Scenario) -> None:
    """A shared host needs the joint loop; the client's threads and heap on it what each needs; then the
    brokers' (:func:`_check_host_brokers`)."""
    if sc.producers.shared_host and sc.coupling != "joint":
        _fail(
            "producers.shared_host",
            "must be false unless brokers.coupling is joint (one loop for the host's producers and brokers)",
            True,
        )
    if sc.producers.host_scheduler != "fifo" and not sc.producers.shared_host:
        rule = "needs producers.shared_host = true (the host whose cores it shares)"
        _fail("producers.host_scheduler", rule, sc.producers.host_scheduler)
    if sc.producers.heap_stops != "host" and sc.producers.host_scheduler != "fair":
        rule = 'needs producers.host_scheduler = "fair" (a host that tells the processes\' threads apart)'
        _fail("producers.heap_stops", rule, sc.producers.heap_stops)
    if sc.producers.host_counts != "pieces" and sc.producers.host_scheduler == "fifo":
        rule = "needs a fair producers.host_scheduler (the host that counts the threads beside a piece)"
        _fail("producers.host_counts", rule, sc.producers.host_counts)
    if sc.producers.heap_mb > 0 and sc.producers.send_cpu_us <= 0:
        _fail(
            "producers.heap_mb",
            "needs producers.send_cpu_us > 0 (the host its collections pause)",
            sc.producers.heap_mb,
        )
    if sc.producers.heap_marking_on_host and not (sc.producers.shared_host and sc.producers.heap_mb > 0):
        rule = "needs producers.shared_host = true and heap_mb > 0 (the heap it marks, the host it runs on)"
        _fail("producers.heap_marking_on_host", rule, True)
    if sc.producers.host_stall_every > 0 and sc.producers.send_cpu_us <= 0:
        rule = "needs producers.send_cpu_us > 0 (the host that stalls)"
        _fail("producers.host_stall_every", rule, sc.producers.host_stall_every)
    if sc.producers.host_other_cpu_us > 0 and not (sc.producers.shared_host and sc.producers.send_cpu_us > 0):
        rule = "needs producers.shared_host = true and send_cpu_us > 0 (the host and the sends it follows)"
        _fail("producers.host_other_cpu_us", rule, sc.producers.host_other_cpu_us)
    shares = ("netty_write_cpu_share", "netty_read_cpu_share", "callback_cpu_share", "submit_cpu_share")
    for key in shares:
        if getattr(sc.producers, key) > 0 and not sc.producers.shared_host:
            rule = "needs producers.shared_host = true (the host whose threads run it)"
            _fail(f"producers.{key}", rule, getattr(sc.producers, key))
    if sum(getattr(sc.producers, key) for key in shares) > 1:
        rule = (
            "with netty_read_cpu_share, callback_cpu_share and submit_cpu_share must add up to at most 1"
            " (of send_cpu_us)"
        )
        _fail("producers.netty_write_cpu_share", rule, sc.producers.netty_write_cpu_share)
    for thread in ("worker", "selector"):
        if getattr(sc.producers, f"netty_{thread}_wakeup_us") > 0 and not (
            sc.producers.netty_write_cpu_share or sc.producers.netty_read_cpu_share
        ):
            rule = "needs producers.netty_write_cpu_share or netty_read_cpu_share (the Netty thread's pieces)"
            _fail(
                f"producers.netty_{thread}_wakeup_us",
                rule,
                getattr(sc.producers, f"netty_{thread}_wakeup_us"),
            )
    _check_host_brokers(sc)


def _check_host_brokers(sc: Scenario) -> None:
    """A broker's threads on the host: what each share needs; a spike maximum above the spikes' scale."""
    for name, model in sc.brokers.items():
        if model.store.selector_wakeup_us > 0 and model.store.io_us <= 0:
            rule = "needs store.io_us > 0 (the connection's reads)"
            _fail(f"brokers.{name}.store.selector_wakeup_us", rule, model.store.selector_wakeup_us)
        if model.store.codec_wakeup_us > 0 and model.store.codec_share <= 0:
            rule = "needs store.codec_share > 0 (the connection's codec thread)"
            _fail(f"brokers.{name}.store.codec_wakeup_us", rule, model.store.codec_wakeup_us)
        if model.store.on_producer_host and not sc.producers.shared_host:
            _fail(f"brokers.{name}.store.on_producer_host", "needs producers.shared_host = true", True)
        for key in ("unlocked_share", "reput_share"):
            if getattr(model.store, key) > 0 and not model.store.on_producer_host:
                rule = "needs store.on_producer_host = true (the host whose threads run it)"
                _fail(f"brokers.{name}.store.{key}", rule, getattr(model.store, key))
        if model.store.unlocked_share + model.store.reput_share > 1:
            rule = "with store.reput_share must add up to at most 1 (of append_us)"
            _fail(f"brokers.{name}.store.unlocked_share", rule, model.store.unlocked_share)
        for key in ("io_us", "reply_us", "codec_share"):
            if getattr(model.store, key) > 0 and sc.coupling == "iterative":
                _fail(
                    f"brokers.{name}.store.{key}",
                    "needs brokers.coupling = joint (the iterative rounds do not model a connection's reads)",
                    getattr(model.store, key),
                )
        lat = model.latency
        if 0 < lat.spike_max_ms <= lat.spike_scale_ms:
            _fail(
                f"brokers.{name}.latency.spike_max_ms",
                f"must be 0 (none) or above spike_scale_ms ({lat.spike_scale_ms:g})",
                lat.spike_max_ms,
            )


def _check_cluster(sc: Scenario) -> None:
    """Broker names: some, non-blank, distinct, one writable; per-broker sections name brokers."""
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


def _check_versions(sc: Scenario) -> None:
    """The client and broker versions parse, the client's settings exist in its version; a group name."""
    try:
        sc.producers.version  # noqa: B018 - parse to validate
        sc.producers.grpc_client  # noqa: B018
    except ConfigError as exc:
        _fail(
            "producers.client_version",
            str(exc).split(", got")[0].removeprefix("client_version "),
            sc.producers.client_version,
        )
    _check_async_sender_executor(sc.producers)
    _check_async_backpressure(sc.producers)
    _check_auto_batch(sc)
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


def _check_rate_steps(sc: Scenario) -> None:
    """Each step a [rate > 0, seconds > 0] pair, the schedule within a year; with a schedule, no other
    count or rate of messages (it gives them) and no hot spot (the sends go round the producers)."""
    wl = sc.workload
    for i, step in enumerate(wl.rate_steps):
        if len(step) != 2 or not all(math.isfinite(x) and x > 0 for x in step):
            _fail(f"workload.rate_steps[{i}]", "must be [rate msg/s > 0, seconds > 0]", list(step))
    if sum(secs for _, secs in wl.rate_steps) > MAX_SCENARIO_S:
        _fail(
            "workload.rate_steps", f"must last at most {MAX_SCENARIO_S} s", [list(s) for s in wl.rate_steps]
        )
    if wl.messages > 0 and wl.messages != wl.total_messages():
        _fail(
            "workload.messages",
            f"must be 0 or the schedule's {wl.total_messages()} with workload.rate_steps",
            wl.messages,
        )
    if wl.hot_share > 0:
        _fail(
            "workload.hot_share",
            "must be 0 with workload.rate_steps (sends go round the producers)",
            wl.hot_share,
        )


def _check_grpc_family(sc: Scenario) -> None:
    """What the gRPC clients cannot do (no oneway send, no batch), what is not modelled for them (the
    closed-loop store), and the Python client's whole-second timeout."""
    client = sc.producers.grpc_client
    if client is None:
        return
    if sc.producers.send_mode.get("oneway", 0) > 0:
        _fail(
            "producers.send_mode.oneway",
            "must be 0 with client_family grpc (no gRPC client sends oneway)",
            sc.producers.send_mode["oneway"],
        )
    if sc.workload.message_types.get("batch", 0) > 0:
        _fail(
            "workload.message_types.batch",
            "must be 0 with client_family grpc (no gRPC client sends batches)",
            sc.workload.message_types["batch"],
        )
    if sc.coupling != "open":
        _fail(
            "brokers.coupling",
            "must be open with client_family grpc (the closed-loop store is not modelled for it)",
            sc.coupling,
        )
    for i, fault in enumerate(sc.faults):
        if FAULT_KINDS[fault.kind].answer == Answer.PAUSED:
            _fail(
                f"faults[{i}].kind",
                "must not be paused with client_family grpc (not modelled for it)",
                fault.kind,
            )
    if sc.producers.send_cpu_us > 0:
        _fail(
            "producers.send_cpu_us",
            "must be 0 with client_family grpc (the client's CPU per send is modelled for remoting only)",
            sc.producers.send_cpu_us,
        )
    for key in ("failure_cpu_us", "failure_log_cpu_us", "async_failure_cpu_us", "async_failure_log_cpu_us"):
        if getattr(sc.producers, key) > 0:
            rule = "must be 0 with client_family grpc (a failure's CPU is modelled for remoting only)"
            _fail(f"producers.{key}", rule, getattr(sc.producers, key))
    if sc.producers.connect_ms > 0:
        _fail(
            "producers.connect_ms",
            "must be 0 with client_family grpc (a new channel's connect is modelled for remoting only)",
            sc.producers.connect_ms,
        )
    if client.whole_second_timeout and sc.producers.request_timeout_ms % 1000:
        rule = f"must be whole seconds with {client.name} (its request_timeout is an int of seconds)"
        _fail("producers.request_timeout_ms", rule, sc.producers.request_timeout_ms)


def _check_workload_volume(sc: Scenario) -> None:
    """Body sizes, topics, the hot spot, and a message count that fits a Java int and a year."""
    wl = sc.workload
    if wl.rate_steps:
        _check_rate_steps(sc)
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
    if not wl.rate_steps and wl.messages > 0 and wl.messages / wl.rate_per_s > MAX_SCENARIO_S:
        _fail(
            "workload.rate_per_s",
            f"must send workload.messages ({wl.total_messages()}) within {MAX_SCENARIO_S} s",
            wl.rate_per_s,
        )


def _check_delays_and_topics(sc: Scenario) -> None:
    """Delay levels (some when delay messages are sent), and topics the client accepts."""
    wl = sc.workload
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


def _check_consumer_groups(sc: Scenario) -> None:
    """Some consumer groups, with distinct, non-blank names."""
    groups = [g.name for g in sc.consumers.groups]
    if not groups:
        _fail("consumers.groups", "must name at least one consumer group", [])
    for i, name in enumerate(groups):
        if not name.strip():
            _fail(f"consumers.groups[{i}].name", "must not be blank", name)
        if name in groups[:i]:
            _fail(f"consumers.groups[{i}].name", "must not repeat a group name", name)


def _check_faults(sc: Scenario) -> None:
    """Each fault on a broker of the cluster, after its start, with sane cycles, none overlapping another
    on the same broker; store stalls only with a closed-loop store."""
    windows: dict[str, list[tuple[float, float, int]]] = {}
    for i, fault in enumerate(sc.faults):
        where = f"faults[{i}]"
        if fault.broker not in sc.cluster.brokers:
            _fail(f"{where}.broker", "must name a broker of cluster.brokers", fault.broker)
        if fault.end_s <= fault.start_s:
            _fail(f"{where}.end_s", f"must be after start_s ({fault.start_s})", fault.end_s)
        rule = FAULT_KINDS[fault.kind]  # the kind's row: what it acts on
        if rule.periodic and fault.down_s >= fault.period_s:
            _fail(f"{where}.down_s", f"must be shorter than period_s ({fault.period_s})", fault.down_s)
        if not rule.open_model_sees and sc.coupling == "open":
            _fail(
                f"{where}.kind",
                f"{fault.kind} needs a closed-loop store (brokers.coupling = joint or iterative)",
                fault.kind,
            )
        if rule.store == Store.DEFERS and sc.coupling == "iterative":
            _fail(
                f"{where}.kind",
                f"{fault.kind} with a closed-loop store needs brokers.coupling = joint (iterative rounds do "
                "not model requests held in the socket)",
                fault.kind,
            )
        cycles = (fault.end_s - fault.start_s) / fault.period_s
        if rule.periodic and cycles > MAX_FLAP_CYCLES:
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


def _check_async_sender_executor(producers: ProducerConfig) -> None:
    """The async sender executor's settings are refused where the client has none (4.3.x runs its ASYNC
    sends on the callback executor: ``ClientVersion.async_sends_on_callback_executor``): set there, they
    would size a pool the client does not have (``async_sender_queue``: any value but its default)."""
    if not producers.version.async_sends_on_callback_executor:
        return
    default_queue = {f.name: f.default for f in dataclasses.fields(ProducerConfig)}["async_sender_queue"]
    for name, unset, value in (
        ("async_sender_threads", None, producers.async_sender_threads),
        ("async_sender_queue", default_queue, producers.async_sender_queue),
    ):
        if value != unset:
            _fail(
                f"producers.{name}",
                f"must be unset with client_version {producers.client_version} (its ASYNC sends run on the "
                "callback executor: callback_executor_threads threads, an unbounded queue)",
                value,
            )


def _check_async_backpressure(producers: ProducerConfig) -> None:
    """The 5.x backpressure settings: refused on 4.x (no such fields) and for the gRPC family; with them on,
    the async sender executor's queue must hold every permitted send (a rejected one runs inline in the
    caller's thread, not modelled)."""
    given = [name for name in BACKPRESSURE_SETTINGS if getattr(producers, name) is not None]
    if given and producers.version.async_backpressure_defaults is None:
        raise ScenarioError(
            f"producers.{given[0]} exists only in 5.x clients (DefaultMQProducer 5.0.0 and later), "
            f"not in client_version {producers.client_version}"
        )
    if not producers.enable_backpressure_for_async_mode:
        return
    if producers.grpc_client is not None:
        _fail(
            "producers.enable_backpressure_for_async_mode",
            "must be false with client_family grpc (a remoting DefaultMQProducer setting)",
            True,
        )
    permits = producers.async_backpressure.back_pressure_for_async_send_num  # type: ignore[union-attr]
    queue = producers.async_sender_queue
    if queue is not None and queue < permits:
        _fail(
            "producers.async_sender_queue",
            f"must be at least the backpressure's send permits ({permits}) with "
            "enable_backpressure_for_async_mode (a rejected send runs in the caller's thread: not modelled)",
            queue,
        )


def _check_auto_batch(sc: Scenario) -> None:
    """The 5.1.4+ autoBatch settings: refused before 5.1.4 (no ProduceAccumulator) and for the gRPC
    family."""
    producers = sc.producers
    given = [name for name in AUTO_BATCH_SETTINGS if getattr(producers, name) is not None]
    if given and producers.version.auto_batch_defaults is None:
        raise ScenarioError(
            f"producers.{given[0]} exists only in clients 5.1.4 and later (DefaultMQProducer.autoBatch, "
            f"ProduceAccumulator), not in client_version {producers.client_version}"
        )
    if not producers.auto_batch:
        return
    if producers.grpc_client is not None:
        _fail("producers.auto_batch", "must be false with client_family grpc (no gRPC client batches)", True)


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


def check_window(sc: Scenario, window_ms: int, *, option: str = "--window-ms") -> None:
    """The summary window of a run of ``sc``: between 1 ms and a year, and few enough windows over the
    run's span (arrivals, or the time queued sync sends take when the sender threads cannot keep up, plus
    every attempt's timeout) that ``broker_windows`` and ``queue_windows`` stay a sane size
    (:data:`MAX_WINDOWS`, :data:`MAX_QUEUE_WINDOW_ROWS`)."""
    if not 1 <= window_ms <= MAX_WINDOW_MS:
        _fail(option, f"must be between 1 and {MAX_WINDOW_MS} (one year)", window_ms)
    wl, pr = sc.workload, sc.producers
    queued_s = queued_span_s(sc)
    arrivals_s = max(wl.span_s, queued_s)
    why = " (the sends queue on producers.threads)" if queued_s > wl.span_s else ""
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
            f"must be >= {least} for this scenario (a span of about {span_ms / 1000:,.0f} s{why} over "
            f"{queues} queues would give {windows:,} windows and {windows * queues:,} queue_windows rows; "
            f"at most {MAX_WINDOWS:,} and {MAX_QUEUE_WINDOW_ROWS:,})",
            window_ms,
        )
