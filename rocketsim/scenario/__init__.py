"""Scenario files (TOML) -> validated, typed configuration.

A scenario describes a cluster, producers, a workload, the broker model and a fault timeline. Loading
validates everything before any Spark work starts: an unknown key, a wrong type or a value out of range
raises ``ScenarioError`` naming the dotted key path, the rule and the value
(``producers.count must be >= 1, got 0``).

``--set key=value`` overrides use :func:`apply_overrides` on the raw mapping before validation, so an
override is checked exactly like a value in the file.

The parts: :mod:`~rocketsim.scenario.config` (the typed sections, their defaults and rules; the brokers' in
:mod:`~rocketsim.scenario.broker_config`, the rules and limits in :mod:`~rocketsim.scenario.rules`),
:mod:`~rocketsim.scenario.validation` (a raw mapping -> a :class:`Scenario`),
:mod:`~rocketsim.scenario.overrides`; this module reads the file.
"""

from __future__ import annotations

import stat
import tomllib
from pathlib import Path

from rocketsim.scenario.broker_config import (
    BROKER_ERRORS,
    STORE_MODES,
    BrokerModelConfig,
    LatencyConfig,
    StoreConfig,
)
from rocketsim.scenario.config import (
    ARRIVALS,
    AUTO_BATCH_SETTINGS,
    BACKPRESSURE_SETTINGS,
    BODY_DISTRIBUTIONS,
    CLIENT_FAMILIES,
    COMPRESS_TYPES,
    COUPLINGS,
    FAULT_KINDS,
    INVALID_KINDS,
    MESSAGE_TYPES,
    PROXY_MODES,
    REMOTING,
    SEND_MODES,
    SENDER_MODELS,
    TRANSACTION_STATES,
    BodySizeConfig,
    ClusterConfig,
    ConsumerGroupConfig,
    ConsumersConfig,
    FaultConfig,
    ProducerConfig,
    ProxyConfig,
    RouteConfig,
    Scenario,
    ScenarioError,
    TransactionConfig,
    WorkloadConfig,
)
from rocketsim.scenario.overrides import apply_overrides, parse_override
from rocketsim.scenario.rules import (
    JAVA_INT_MAX,
    JAVA_INT_MIN,
    JAVA_LONG_MAX,
    JAVA_LONG_MIN,
    MAX_FLAP_CYCLES,
    MAX_LATENCY_MS,
    MAX_MESSAGE_SIZE,
    MAX_QUEUE_WINDOW_ROWS,
    MAX_SCENARIO_BYTES,
    MAX_SCENARIO_S,
    MAX_WINDOW_MS,
    MAX_WINDOWS,
)
from rocketsim.scenario.validation import check_window, scenario_from_mapping

__all__ = [
    "ARRIVALS",
    "AUTO_BATCH_SETTINGS",
    "BACKPRESSURE_SETTINGS",
    "BODY_DISTRIBUTIONS",
    "BROKER_ERRORS",
    "CLIENT_FAMILIES",
    "COMPRESS_TYPES",
    "COUPLINGS",
    "FAULT_KINDS",
    "INVALID_KINDS",
    "JAVA_INT_MAX",
    "JAVA_INT_MIN",
    "JAVA_LONG_MAX",
    "JAVA_LONG_MIN",
    "MAX_FLAP_CYCLES",
    "MAX_LATENCY_MS",
    "MAX_MESSAGE_SIZE",
    "MAX_QUEUE_WINDOW_ROWS",
    "MAX_SCENARIO_BYTES",
    "MAX_SCENARIO_S",
    "MAX_WINDOWS",
    "MAX_WINDOW_MS",
    "MESSAGE_TYPES",
    "PROXY_MODES",
    "REMOTING",
    "SENDER_MODELS",
    "SEND_MODES",
    "STORE_MODES",
    "TRANSACTION_STATES",
    "BodySizeConfig",
    "BrokerModelConfig",
    "ClusterConfig",
    "ConsumerGroupConfig",
    "ConsumersConfig",
    "FaultConfig",
    "LatencyConfig",
    "ProducerConfig",
    "ProxyConfig",
    "RouteConfig",
    "Scenario",
    "ScenarioError",
    "StoreConfig",
    "TransactionConfig",
    "WorkloadConfig",
    "apply_overrides",
    "check_window",
    "load_scenario",
    "parse_override",
    "scenario_from_mapping",
]


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
