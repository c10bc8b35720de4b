"""What the parsers read out of users' files: measurements in one shape, whatever the format.

Each measurement names its ``source`` (the file), what it measures (:class:`View`), its labels (e.g.
``node_id``, ``response_code``) and how it was read (``note``). Times are in true milliseconds: a parser
turns a format's recording rule (floor to whole ms, ``[lo, hi)`` buckets, µs upper bounds) into the
interval of real time the count belongs to, so fitting never needs to know the format.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType


class View(StrEnum):
    """What a latency measures, and so which part of the model it calibrates."""

    CLIENT = "client"  # the send call as the client waits for it: brokers.*.latency
    BROKER = "broker"  # the broker's request time (5.x rpc_latency): no network, includes the send queue
    STORE = "store"  # the store's put time (PAGECACHERT, exporter pmdt / put_latency): the commit log


def _labels(labels: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(sorted((labels or {}).items())))


def label_text(labels: Mapping[str, str]) -> str:
    """``k=v`` pairs, for reports."""
    return " ".join(f"{k}={v}" for k, v in labels.items())


@dataclass(frozen=True)
class Binned:
    """Counts per interval of true latency: interval ``i`` is ``(lo[i], hi[i]]`` ms (``hi`` may be inf).

    Intervals are sorted and do not overlap; they need not cover every latency (a histogram that drops
    values past its last edge): the fit conditions on the covered range."""

    source: str
    view: View
    lo: tuple[float, ...]
    hi: tuple[float, ...]
    counts: tuple[float, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    note: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", _labels(self.labels))

    @property
    def total(self) -> float:
        return float(sum(self.counts))


@dataclass(frozen=True)
class Quantiles:
    """Latency at given levels (0-1), e.g. OMB's aggregated p50..p99.99 or the exporter's put p99/p99.9.

    ``n``: the number of measurements behind them, if known (it weighs them against other inputs)."""

    source: str
    view: View
    levels: tuple[float, ...]
    values_ms: tuple[float, ...]
    n: float | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    note: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", _labels(self.labels))


@dataclass(frozen=True)
class MeanMax:
    """A mean over ``n`` sends and (optionally) the largest of them, e.g. the benchmark tool's
    ``Average RT`` and ``Max RT``; ``resolution_ms``: the max is whole ms when 1."""

    source: str
    view: View
    n: float
    mean_ms: float
    max_ms: float | None = None
    resolution_ms: float = 0.0
    labels: Mapping[str, str] = field(default_factory=dict)
    note: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", _labels(self.labels))


@dataclass(frozen=True)
class WindowQuantiles:
    """Quantiles per time window (OMB's ``publishLatency50pct[i]``...): ``values_ms[w][j]`` is the
    ``levels[j]`` quantile of window ``w``, which starts ``starts_s[w]`` s into the run."""

    source: str
    view: View
    levels: tuple[float, ...]
    starts_s: tuple[float, ...]
    values_ms: tuple[tuple[float, ...], ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    note: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", _labels(self.labels))


@dataclass(frozen=True)
class ResponseCounts:
    """Send requests per response code (``success``, ``system_busy``, ...), e.g. 5.x ``rpc_latency``'s
    ``_count`` by ``response_code``."""

    source: str
    counts: Mapping[str, float]
    labels: Mapping[str, str] = field(default_factory=dict)
    note: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "counts", MappingProxyType(dict(sorted(self.counts.items()))))
        object.__setattr__(self, "labels", _labels(self.labels))


@dataclass(frozen=True)
class Throughput:
    """A throughput figure in messages per second. ``saturated``: the user says it is the most the
    brokers sustain (the knee); otherwise it is what was observed. ``request_bytes``: the bytes per
    message as rocketsim counts them (body + properties; ``wire_bytes``), if known."""

    source: str
    msgs_per_s: float
    saturated: bool = False
    request_bytes: float | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    note: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", _labels(self.labels))


@dataclass(frozen=True)
class QueueSeries:
    """The broker's send queue over time (``[WATERMARK] Send``, ``rocketmq_processor_watermark``):
    depth and the head's age (ms, -1 where unknown) at ``t_s`` seconds."""

    source: str
    t_s: tuple[float, ...]
    depth: tuple[float, ...]
    head_wait_ms: tuple[float, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    note: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", _labels(self.labels))


@dataclass(frozen=True)
class CpuUse:
    """The CPU seconds the client process and the broker process spent during one run, and the
    processors of the host when both ran on the same one (None: separate hosts, or not known); e.g. the
    real-broker harness's ``cpu.json``."""

    source: str
    client_cpu_s: float
    broker_cpu_s: float
    shared_processors: int | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    note: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", _labels(self.labels))

    @property
    def client_share(self) -> float:
        """The client's part of the two processes' CPU."""
        return self.client_cpu_s / (self.client_cpu_s + self.broker_cpu_s)


@dataclass(frozen=True)
class Measurements:
    """Everything read from one or more inputs, by kind."""

    binned: tuple[Binned, ...] = ()
    quantiles: tuple[Quantiles, ...] = ()
    means: tuple[MeanMax, ...] = ()
    windows: tuple[WindowQuantiles, ...] = ()
    responses: tuple[ResponseCounts, ...] = ()
    throughputs: tuple[Throughput, ...] = ()
    queues: tuple[QueueSeries, ...] = ()
    cpu: tuple[CpuUse, ...] = ()

    def __add__(self, other: Measurements) -> Measurements:
        return Measurements(
            *(getattr(self, f) + getattr(other, f) for f in self.__dataclass_fields__)  # field order
        )

    def __bool__(self) -> bool:
        return any(getattr(self, f) for f in self.__dataclass_fields__)

    def latency(self, view: View) -> tuple[Binned | Quantiles | MeanMax, ...]:
        """The latency measurements of ``view`` (what a fit of that view uses)."""
        items = (*self.binned, *self.quantiles, *self.means)
        return tuple(m for m in items if m.view == view)

    def matching(self, wanted: Mapping[str, str]) -> Measurements:
        """Only the measurements whose labels hold every ``wanted`` pair (unlabelled ones are kept)."""

        def keep(m: object) -> bool:
            labels = getattr(m, "labels", {})
            return all(labels.get(k, v) == v for k, v in wanted.items())

        return Measurements(
            *(tuple(m for m in getattr(self, f) if keep(m)) for f in self.__dataclass_fields__)
        )
