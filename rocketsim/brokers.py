"""The seeded broker model: what one send attempt to a broker returns, and how long it takes.

Per broker: a latency distribution with a heavy tail (a lognormal body plus rare Pareto spikes), a
background error mix, and a fault timeline in simulated time (outage, hang, slowdown, flapping, error
burst). Every draw comes from a counter-based generator keyed by ``(seed, producer, seq, attempt)``,
so an attempt's outcome depends only on those keys, the broker, the start time and the timeout: the same
inputs give the same outcome on any machine, partition or order.

Outcome kinds are small integers (``OK`` ... ``INTERRUPTED``) so the compiled send loop can use them;
:func:`outcome_label` renders them as the conformance vectors write them (``remoting:timeout``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rocketsim.scenario import BrokerModelConfig, FaultConfig, Scenario

# ---- outcome kinds -------------------------------------------------------------------------------
OK = 0
FLUSH_DISK_TIMEOUT = 1
FLUSH_SLAVE_TIMEOUT = 2
SLAVE_NOT_AVAILABLE = 3
REMOTING_CONNECT = 4
REMOTING_TIMEOUT = 5
REMOTING_SEND_REQUEST = 6
BROKER_ERROR = 7
CLIENT_ERROR = 8
INTERRUPTED = 9

_LABELS = {
    OK: "ok",
    FLUSH_DISK_TIMEOUT: "status:FLUSH_DISK_TIMEOUT",
    FLUSH_SLAVE_TIMEOUT: "status:FLUSH_SLAVE_TIMEOUT",
    SLAVE_NOT_AVAILABLE: "status:SLAVE_NOT_AVAILABLE",
    REMOTING_CONNECT: "remoting:connect",
    REMOTING_TIMEOUT: "remoting:timeout",
    REMOTING_SEND_REQUEST: "remoting:send_request",
    CLIENT_ERROR: "client",
    INTERRUPTED: "interrupted",
}

# broker response codes (ResponseCode) of the error mix
SYSTEM_ERROR = 1
SYSTEM_BUSY = 2
SERVICE_NOT_AVAILABLE = 14

# error-mix entry -> (outcome kind, response code or 0)
ERROR_KINDS: dict[str, tuple[int, int]] = {
    "remoting_timeout": (REMOTING_TIMEOUT, 0),
    "connect_refused": (REMOTING_CONNECT, 0),
    "system_busy": (BROKER_ERROR, SYSTEM_BUSY),
    "system_error": (BROKER_ERROR, SYSTEM_ERROR),
    "service_not_available": (BROKER_ERROR, SERVICE_NOT_AVAILABLE),
    "flush_disk_timeout": (FLUSH_DISK_TIMEOUT, 0),
    "flush_slave_timeout": (FLUSH_SLAVE_TIMEOUT, 0),
    "slave_not_available": (SLAVE_NOT_AVAILABLE, 0),
}


def outcome_label(kind: int, code: int = 0) -> str:
    """The vectors' spelling of an outcome: ``ok``, ``status:...``, ``remoting:...``, ``broker:<code>``."""
    if kind == BROKER_ERROR:
        return f"broker:{code}"
    return _LABELS[kind]


# ---- counter-based random draws ------------------------------------------------------------------
# SplitMix64's finaliser over a key built from (seed, producer, seq, attempt, stream): a stateless
# generator, so any attempt's draws can be made alone, in any order, on any worker.
_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_C1 = 0xBF58476D1CE4E5B9
_C2 = 0x94D049BB133111EB

STREAM_ERROR = 0  # background error mix
STREAM_LATENCY_A = 1  # lognormal body (Box-Muller, first uniform)
STREAM_LATENCY_B = 2  # lognormal body (Box-Muller, second uniform)
STREAM_SPIKE = 3  # spike or not
STREAM_SPIKE_SIZE = 4  # Pareto spike size
STREAM_BURST = 5  # error burst hit or not
N_STREAMS = 6

MAX_SPIKE_EXPONENT = 50.0  # e^50 x the spike scale: far past any timeout, and finite
MAX_LATENCY_MS = 1e9  # about 11.6 days: an answer that never comes within any send timeout


def _mix(z: int) -> int:
    z = (z ^ (z >> 30)) * _C1 & _M64
    z = (z ^ (z >> 27)) * _C2 & _M64
    return z ^ (z >> 31)


def draw_key(seed: int, producer: int, seq: int, attempt: int) -> int:
    """A 64-bit key for one attempt; streams are derived from it."""
    z = _mix((seed * _GOLDEN + 0x632BE59BD9B4E019) & _M64)
    z = _mix((z + producer * _GOLDEN + 1) & _M64)
    z = _mix((z + seq * _GOLDEN + 2) & _M64)
    return _mix((z + attempt * _GOLDEN + 3) & _M64)


def uniform(key: int, stream: int) -> float:
    """A uniform in [0, 1) for one stream of one attempt key (53 bits)."""
    return (_mix((key + (stream + 1) * _GOLDEN) & _M64) >> 11) * (1.0 / (1 << 53))


def _mix_np(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_C1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_C2)
    return z ^ (z >> np.uint64(31))


def draw_keys(seed: int, producer: int, seqs: np.ndarray, attempts: np.ndarray) -> np.ndarray:
    """Vectorised :func:`draw_key` (uint64 arithmetic wraps exactly like the masked scalar version)."""
    g = np.uint64(_GOLDEN)
    with np.errstate(over="ignore"):
        z = _mix_np(np.uint64(seed * _GOLDEN + 0x632BE59BD9B4E019 & _M64) + np.zeros(1, np.uint64))
        z = _mix_np(z + np.uint64(producer * _GOLDEN + 1 & _M64))
        z = _mix_np(z + seqs.astype(np.uint64) * g + np.uint64(2))
        return _mix_np(z + attempts.astype(np.uint64) * g + np.uint64(3))


def uniforms(keys: np.ndarray, stream: int) -> np.ndarray:
    """Vectorised :func:`uniform`."""
    with np.errstate(over="ignore"):
        z = _mix_np(keys + np.uint64((stream + 1) * _GOLDEN & _M64))
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


# ---- the model ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class AttemptOutcome:
    """What the broker model says one attempt does."""

    kind: int
    latency_ms: int
    response_code: int = 0

    @property
    def label(self) -> str:
        return outcome_label(self.kind, self.response_code)


@dataclass(frozen=True)
class BrokerParams:
    """One broker's model in flat numbers (what the compiled path consumes too)."""

    median_ms: float
    sigma: float
    spike_probability: float
    spike_scale_ms: float
    spike_alpha: float
    connect_refused_ms: float
    error_cum: tuple[float, ...]  # cumulative probabilities, in ERROR_KINDS order
    error_kind: tuple[int, ...]
    error_code: tuple[int, ...]

    @classmethod
    def from_config(cls, cfg: BrokerModelConfig) -> BrokerParams:
        cum, kinds, codes, total = [], [], [], 0.0
        for name, (kind, code) in ERROR_KINDS.items():
            total += cfg.errors.get(name, 0.0)
            cum.append(total)
            kinds.append(kind)
            codes.append(code)
        lat = cfg.latency
        return cls(
            lat.median_ms,
            lat.sigma,
            lat.spike_probability,
            lat.spike_scale_ms,
            lat.spike_alpha,
            lat.connect_refused_ms,
            tuple(cum),
            tuple(kinds),
            tuple(codes),
        )


# fault kinds as integers, in the order of the flat timeline arrays
FAULT_OUTAGE, FAULT_HANG, FAULT_SLOWDOWN, FAULT_FLAPPING, FAULT_ERROR_BURST = range(5)
_FAULT_CODES = {
    "outage": FAULT_OUTAGE,
    "hang": FAULT_HANG,
    "slowdown": FAULT_SLOWDOWN,
    "flapping": FAULT_FLAPPING,
    "error_burst": FAULT_ERROR_BURST,
}


@dataclass(frozen=True)
class FaultWindow:
    """One fault in ms, for one broker."""

    kind: int
    start_ms: int
    end_ms: int
    factor: float
    period_ms: int
    down_ms: int
    burst_kind: int
    burst_code: int
    rate: float

    @classmethod
    def from_config(cls, f: FaultConfig) -> FaultWindow:
        burst_kind, burst_code = ERROR_KINDS[f.error]
        return cls(
            _FAULT_CODES[f.kind],
            int(round(f.start_s * 1000)),
            int(round(f.end_s * 1000)),
            f.factor,
            int(round(f.period_s * 1000)),
            int(round(f.down_s * 1000)),
            burst_kind,
            burst_code,
            f.rate,
        )

    def active(self, t_ms: int) -> bool:
        return self.start_ms <= t_ms < self.end_ms

    def down(self, t_ms: int) -> bool:
        """Whether the broker is unreachable at ``t_ms`` (outage, or the down part of a flap)."""
        if not self.active(t_ms):
            return False
        if self.kind == FAULT_OUTAGE:
            return True
        if self.kind == FAULT_FLAPPING:
            return (t_ms - self.start_ms) % self.period_ms < self.down_ms
        return False


@dataclass(frozen=True)
class BrokerModel:
    """The whole cluster's model: per-broker params and fault windows, plus the seed."""

    seed: int
    brokers: tuple[str, ...]
    params: tuple[BrokerParams, ...]
    faults: tuple[tuple[FaultWindow, ...], ...]  # per broker, sorted by start

    @classmethod
    def from_scenario(cls, sc: Scenario) -> BrokerModel:
        brokers = sc.cluster.brokers
        params = tuple(BrokerParams.from_config(sc.broker_model(b)) for b in brokers)
        faults = tuple(
            tuple(
                sorted(
                    (FaultWindow.from_config(f) for f in sc.faults if f.broker == b), key=lambda w: w.start_ms
                )
            )
            for b in brokers
        )
        return cls(sc.seed, brokers, params, faults)

    def index(self, broker: str) -> int:
        return self.brokers.index(broker)

    def down_intervals(self, broker: str, until_ms: int) -> list[tuple[int, int]]:
        """The [start, end) ms intervals in which ``broker`` is unreachable (outages and flap downs)."""
        out: list[tuple[int, int]] = []
        for w in self.faults[self.index(broker)]:
            if w.kind == FAULT_OUTAGE:
                out.append((w.start_ms, w.end_ms))
            elif w.kind == FAULT_FLAPPING:
                t = w.start_ms
                while t < min(w.end_ms, until_ms):
                    out.append((t, min(t + w.down_ms, w.end_ms)))
                    t += w.period_ms
        return out

    def attempt(
        self, producer: int, seq: int, attempt: int, broker: str, start_ms: int, timeout_ms: int
    ) -> AttemptOutcome:
        """The outcome of one attempt starting at ``start_ms`` with ``timeout_ms`` left for the call."""
        key = draw_key(self.seed, producer, seq, attempt)
        b = self.index(broker)
        return attempt_outcome(self.params[b], self.faults[b], key, start_ms, timeout_ms)


def base_latency_ms(p: BrokerParams, key: int) -> float:
    """Lognormal body (Box-Muller) with a Pareto spike on top with probability ``spike_probability``."""
    u1 = uniform(key, STREAM_LATENCY_A)
    u2 = uniform(key, STREAM_LATENCY_B)
    z = math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2.0 * math.pi * u2)
    latency = p.median_ms * math.exp(p.sigma * z)
    if uniform(key, STREAM_SPIKE) < p.spike_probability:
        # Pareto(scale, alpha) by inversion, scale * U^(-1/alpha), with the exponent bounded so a tiny
        # alpha cannot overflow
        e = -math.log(1.0 - uniform(key, STREAM_SPIKE_SIZE)) / p.spike_alpha
        latency += p.spike_scale_ms * math.exp(min(e, MAX_SPIKE_EXPONENT))
    return min(latency, MAX_LATENCY_MS)


def attempt_outcome(
    p: BrokerParams, faults: tuple[FaultWindow, ...], key: int, start_ms: int, timeout_ms: int
) -> AttemptOutcome:
    """The model's decision, in the order: fault window, background error, latency vs timeout."""
    timeout_ms = max(int(timeout_ms), 0)
    factor = 1.0
    for w in faults:
        if not w.active(start_ms):
            continue
        if w.down(start_ms):  # connection refused, fast
            return AttemptOutcome(REMOTING_CONNECT, min(int(round(p.connect_refused_ms)), timeout_ms))
        if w.kind == FAULT_HANG:  # the broker accepts the request and never answers
            return AttemptOutcome(REMOTING_TIMEOUT, timeout_ms)
        if w.kind == FAULT_SLOWDOWN:
            factor *= w.factor
        elif w.kind == FAULT_ERROR_BURST and uniform(key, STREAM_BURST) < w.rate:
            latency = min(int(round(base_latency_ms(p, key))), timeout_ms)
            if w.burst_kind == REMOTING_TIMEOUT:
                return AttemptOutcome(REMOTING_TIMEOUT, timeout_ms)
            if w.burst_kind == REMOTING_CONNECT:
                return AttemptOutcome(REMOTING_CONNECT, min(int(round(p.connect_refused_ms)), timeout_ms))
            return AttemptOutcome(w.burst_kind, latency, w.burst_code)
    u = uniform(key, STREAM_ERROR)
    latency_f = base_latency_ms(p, key) * factor
    latency = int(round(latency_f))
    for cum, kind, code in zip(p.error_cum, p.error_kind, p.error_code, strict=True):
        if u < cum:
            if kind == REMOTING_TIMEOUT:
                return AttemptOutcome(REMOTING_TIMEOUT, timeout_ms)
            if kind == REMOTING_CONNECT:
                return AttemptOutcome(REMOTING_CONNECT, min(int(round(p.connect_refused_ms)), timeout_ms))
            return AttemptOutcome(kind, min(latency, timeout_ms), code)
    if latency >= timeout_ms:  # the call gives up at its timeout
        return AttemptOutcome(REMOTING_TIMEOUT, timeout_ms)
    return AttemptOutcome(OK, latency)
