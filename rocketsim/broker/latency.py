"""The seeded broker model: what one send attempt to a broker returns, and how long it takes.

Per broker: a latency distribution with a heavy tail (a lognormal body plus rare Pareto spikes), a
background error mix, and a fault timeline in simulated time (outage, hang, slowdown, flapping, error
burst, partition).

What a client sees per fault kind (``NettyRemotingClient``; the route side is :mod:`rocketsim.client.route`):

* ``outage`` and the down phases of ``flapping``: the process is dead, its host up: a connect is refused
  at once (RST, ``connect_refused_ms``, default 1 ms) -> ``RemotingConnectException``;
* ``hang``: the process is alive and unresponsive: the kernel accepts the connection, the request times
  out (the whole remaining timeout);
* ``partition``: no packet gets through between the producers and the broker (the broker still talks to
  the name server): a connect waits ``CONNECT_TIMEOUT_MILLIS`` (``producers.connect_timeout_ms``, 3000)
  and fails -> ``RemotingConnectException``. Approximation: every attempt during a partition connects
  anew (upstream's first request on a channel opened before the partition times out instead, and the
  client then closes the channel, so later ones connect);
* a connect failure's latency is never capped by the request timeout: ``createChannel`` waits for the
  connection before ``invokeSync`` looks at its timeout.

Every draw comes from a counter-based generator keyed by ``(seed, producer, seq, attempt)``, so an
attempt's outcome depends only on those keys, the broker, the start time and the timeout: the same inputs
give the same outcome on any machine, partition or order.

Answers are :class:`rocketsim.client.outcomes.OutcomeKind` values (small integers, so the compiled engine can
use them) with a latency and a response code; draws are :mod:`rocketsim.rng`'s.
"""

# Mirrored by engine/compiled.py (attempt_outcome, base_latency, over engine/plan.py's Model arrays);
# tests/test_engines.py compares them.

from __future__ import annotations

import math
from dataclasses import dataclass

from rocketsim.client.outcomes import OutcomeKind, outcome_label
from rocketsim.rng import draw_key, uniform
from rocketsim.scenario import BrokerModelConfig, FaultConfig, Scenario

# ---- draws -------------------------------------------------------------------------------------
# Every draw of an attempt is ``rng.uniform(rng.draw_key(seed, producer, seq, attempt), stream)``: a
# stateless generator, so any attempt's draws can be made alone, in any order, on any worker.

STREAM_ERROR = 0  # background error mix
STREAM_LATENCY_A = 1  # lognormal body (Box-Muller, first uniform)
STREAM_LATENCY_B = 2  # lognormal body (Box-Muller, second uniform)
STREAM_SPIKE = 3  # spike or not
STREAM_SPIKE_SIZE = 4  # Pareto spike size
STREAM_BURST = 5  # error burst hit or not
N_STREAMS = 6

MAX_SPIKE_EXPONENT = 50.0  # e^50 x the spike scale: far past any timeout, and finite
MAX_LATENCY_MS = 1e9  # about 11.6 days: an answer that never comes within any send timeout

# broker response codes (ResponseCode) of the error mix, and the store's own refusal
SYSTEM_ERROR = 1
SYSTEM_BUSY = 2
MESSAGE_ILLEGAL = 13
SERVICE_NOT_AVAILABLE = 14
BROKER_MAX_MESSAGE_SIZE = 4_194_304  # MessageStoreConfig.maxMessageSize (the broker's, not the client's)

# The remark a broker answers a code with, where the model knows it (the error mix's codes have none).
# SendMessageProcessor.handlePutMessageResult (4.9.8 and 5.3.3): MESSAGE_ILLEGAL and
# PROPERTIES_SIZE_EXCEEDED both answer MESSAGE_ILLEGAL with this text.
BROKER_REMARKS: dict[int, str] = {
    MESSAGE_ILLEGAL: (
        "the message is illegal, maybe msg body or properties length not matched. msg body length limit "
        f"{BROKER_MAX_MESSAGE_SIZE}B, msg properties length limit 32KB."
    ),
}


def broker_remark(code: int) -> str:
    """The remark of a broker's answer with response ``code`` ("" where the model has none)."""
    return BROKER_REMARKS.get(code, "")


# error-mix entry -> (outcome kind, response code or 0)
ERROR_KINDS: dict[str, tuple[OutcomeKind, int]] = {
    "remoting_timeout": (OutcomeKind.REMOTING_TIMEOUT, 0),
    "connect_refused": (OutcomeKind.REMOTING_CONNECT, 0),
    "system_busy": (OutcomeKind.BROKER_ERROR, SYSTEM_BUSY),
    "system_error": (OutcomeKind.BROKER_ERROR, SYSTEM_ERROR),
    "service_not_available": (OutcomeKind.BROKER_ERROR, SERVICE_NOT_AVAILABLE),
    "flush_disk_timeout": (OutcomeKind.FLUSH_DISK_TIMEOUT, 0),
    "flush_slave_timeout": (OutcomeKind.FLUSH_SLAVE_TIMEOUT, 0),
    "slave_not_available": (OutcomeKind.SLAVE_NOT_AVAILABLE, 0),
}


# ---- the model ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class AttemptOutcome:
    """What the broker model says one attempt does: the client's answer (``kind``, ``latency_ms``: how
    long the client waits, ``response_code``) and whether the broker stored the request, ``store_ms``
    after the attempt started (the broker writes what it processes, whether the client still waits or
    not: :func:`attempt_outcome`).

    ``late_ms`` (-1: none): a timeout whose answer does come, that long after the start, with
    ``late_code`` (0: SEND_OK, else the broker's error code). A SYNC caller has given up by then
    (``invokeSyncImpl`` removes its future); an ASYNC request's future stays in the response table until
    the scan removes it, and ``processResponseCommand`` takes an answer that arrives before that
    (:func:`rocketsim.client.send.async_send_steps`)."""

    kind: int
    latency_ms: int
    response_code: int = 0
    stored: bool = False
    store_ms: int = 0
    late_ms: int = -1
    late_code: int = 0
    remark: str = ""  # the broker's remark of response_code (or late_code), where not broker_remark's

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
    connect_timeout_ms: int  # a connect to a host that never answers (partition): CONNECT_TIMEOUT_MILLIS
    error_cum: tuple[float, ...]  # cumulative probabilities, in ERROR_KINDS order
    error_kind: tuple[int, ...]
    error_code: tuple[int, ...]

    @classmethod
    def from_config(cls, cfg: BrokerModelConfig, connect_timeout_ms: int = 3000) -> BrokerParams:
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
            connect_timeout_ms,
            tuple(cum),
            tuple(kinds),
            tuple(codes),
        )


# fault kinds as integers, in the order of the flat timeline arrays
# store_stall acts in the closed-loop store only (rocketsim.broker.queue); the open model ignores it
FAULT_OUTAGE, FAULT_HANG, FAULT_SLOWDOWN, FAULT_FLAPPING, FAULT_ERROR_BURST, FAULT_PARTITION = range(6)
FAULT_STORE_STALL = 6
FAULT_CODES = {
    "outage": FAULT_OUTAGE,
    "hang": FAULT_HANG,
    "slowdown": FAULT_SLOWDOWN,
    "flapping": FAULT_FLAPPING,
    "error_burst": FAULT_ERROR_BURST,
    "partition": FAULT_PARTITION,
    "store_stall": FAULT_STORE_STALL,
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
            FAULT_CODES[f.kind],
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
        connect_timeout = sc.producers.connect_timeout_ms
        params = tuple(BrokerParams.from_config(sc.broker_model(b), connect_timeout) for b in brokers)
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
        """The [start, end) ms intervals in which ``broker``'s process is dead (outages and flap downs)."""
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

    def answers_probe(self, broker: str, t_ms: int) -> bool:
        """Whether a 5.x detector probe (``getMaxOffset`` with ``detectTimeout`` 200 ms) to ``broker`` at
        ``t_ms`` succeeds: not while its process is dead (connect refused), hung (the probe times out)
        or cut off by a partition (the connect times out)."""
        for w in self.faults[self.index(broker)]:
            if w.active(t_ms) and (w.down(t_ms) or w.kind in (FAULT_HANG, FAULT_PARTITION)):
                return False
        return True

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
    """The model's decision, in the order: fault window, background error, latency vs timeout.

    Stored (the broker processed the request; nothing deduplicates a retry of it): SEND_OK and the not-OK
    store statuses at their latency; a timeout from a slow answer (latency past the timeout) and a
    ``remoting_timeout`` error (a reply lost on the way back) at the broker's own latency, after the
    client gave up. Not stored: connect failures (dead process, partition), a hung broker (model choice:
    it never processes what it accepts), the broker's error codes. A slow answer is also the timeout's
    ``late_ms`` answer (SEND_OK at the broker's own latency); a lost reply and a hang have none.
    """
    timeout_ms = max(int(timeout_ms), 0)
    refused = int(round(p.connect_refused_ms))  # not capped by the timeout: the connect comes first
    factor = 1.0
    for w in faults:
        if not w.active(start_ms):
            continue
        if w.down(start_ms):  # the process is dead: connection refused, fast
            return AttemptOutcome(OutcomeKind.REMOTING_CONNECT, refused)
        if w.kind == FAULT_PARTITION:  # nothing answers: the connect times out
            return AttemptOutcome(OutcomeKind.REMOTING_CONNECT, p.connect_timeout_ms)
        if w.kind == FAULT_HANG:  # the broker accepts the request and never answers
            return AttemptOutcome(OutcomeKind.REMOTING_TIMEOUT, timeout_ms)
        if w.kind == FAULT_SLOWDOWN:
            factor *= w.factor
        elif w.kind == FAULT_ERROR_BURST and uniform(key, STREAM_BURST) < w.rate:
            natural = int(round(base_latency_ms(p, key)))
            latency = min(natural, timeout_ms)
            if w.burst_kind == OutcomeKind.REMOTING_TIMEOUT:  # stored, the reply lost
                return AttemptOutcome(OutcomeKind.REMOTING_TIMEOUT, timeout_ms, 0, True, natural)
            if w.burst_kind == OutcomeKind.REMOTING_CONNECT:
                return AttemptOutcome(OutcomeKind.REMOTING_CONNECT, refused)
            stored = w.burst_kind <= OutcomeKind.SLAVE_NOT_AVAILABLE
            return AttemptOutcome(w.burst_kind, latency, w.burst_code, stored, latency)
    u = uniform(key, STREAM_ERROR)
    latency_f = base_latency_ms(p, key) * factor
    latency = int(round(latency_f))
    for cum, kind, code in zip(p.error_cum, p.error_kind, p.error_code, strict=True):
        if u < cum:
            if kind == OutcomeKind.REMOTING_TIMEOUT:  # stored, the reply lost
                return AttemptOutcome(OutcomeKind.REMOTING_TIMEOUT, timeout_ms, 0, True, latency)
            if kind == OutcomeKind.REMOTING_CONNECT:
                return AttemptOutcome(OutcomeKind.REMOTING_CONNECT, refused)
            answered = min(latency, timeout_ms)
            return AttemptOutcome(kind, answered, code, kind <= OutcomeKind.SLAVE_NOT_AVAILABLE, answered)
    if latency >= timeout_ms:  # the call gives up at its timeout; the broker stores it when it gets there
        return AttemptOutcome(OutcomeKind.REMOTING_TIMEOUT, timeout_ms, 0, True, latency, latency)
    return AttemptOutcome(OutcomeKind.OK, latency, 0, True, latency)


def refused_as_illegal(o: AttemptOutcome) -> AttemptOutcome:
    """The answer to a message whose properties the broker refuses
    (``rocketsim.broker.store.properties_illegal``).

    The check runs only on a request the broker goes on to store (``o.stored``): 4.9.8
    ``DefaultMessageStore.asyncPutMessage`` calls ``checkStoreStatus`` before ``checkMessage`` and the
    CommitLog encoder; 5.3.3 runs the ``checkBeforePutMessage`` hook (``HookUtils``) before
    ``CommitLog.asyncPutMessage`` encodes. There it stores nothing, a SendResult (SEND_OK or a not-OK store
    status) becomes MESSAGE_ILLEGAL, as fast, and a late answer is the refusal too. Whatever the broker
    answers before it stands, code, remark and late answer: connect failures, hangs, the error mix's codes,
    and the closed-loop store's flow control (``rocketsim.broker.queue.Fate``: ``[REJECTREQUEST]`` and
    ``[OVERLOAD]`` in ``NettyRemotingAbstract.processRequestCommand``, ``[PCBUSY_CLEAN_QUEUE]`` and
    ``[TIMEOUT_CLEAN_QUEUE]`` from ``BrokerFastFailure`` on a queued request, ``[PC_SYNCHRONIZED]`` from
    ``checkStoreStatus``). Compiled twin: ``engine/compiled.py`` ``refused_as_illegal``."""
    if not o.stored:
        return o
    if o.kind <= OutcomeKind.SLAVE_NOT_AVAILABLE:
        return AttemptOutcome(OutcomeKind.BROKER_ERROR, o.latency_ms, MESSAGE_ILLEGAL)
    late_code = MESSAGE_ILLEGAL if o.late_ms >= 0 else 0
    return AttemptOutcome(o.kind, o.latency_ms, o.response_code, late_ms=o.late_ms, late_code=late_code)
