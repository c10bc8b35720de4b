"""The seeded broker model: what one send attempt to a broker returns, and how long it takes.

Per broker: a latency distribution with a heavy tail (a lognormal body plus rare Pareto spikes), a
background error mix, and a fault timeline in simulated time (outage, hang, slowdown, flapping, error
burst, partition).

What each fault kind does (to a connect, an answer, the route, the detector's probe, the closed-loop
store) is the table :data:`rocketsim.broker.fault_kinds.FAULT_KINDS`; the decision chain that reads it is
:func:`answer`, one function both engines run (the compiled one compiles it). A connect failure's latency
is never capped by the request timeout: ``createChannel`` waits for the connection before ``invokeSync``
looks at its timeout.

More: docs/reference/modules.md, rocketsim/broker/latency.py.
"""

# Mirrored by engine/compiled.py (attempt_outcome, base_latency, over engine/plan's Model arrays; it
# compiles answer and fault_kinds.process_down themselves: broker_answer, broker_process_down);
# tests/test_engines.py and tests/test_fault_kinds.py compare them.

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rocketsim.broker.fault_kinds import (
    FAULT_KINDS,
    Effect,
    FaultKind,
    Probe,
    Store,
    down_cycle,
    down_intervals,
    process_down,
)
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
    exact_us: int = -1  # the broker's answer's latency in us before rounding (-1: none, or whole ms)

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
    spike_max_ms: float = 0.0  # the largest spike (0: none)

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
            lat.spike_max_ms,
        )


@dataclass(frozen=True)
class FaultWindow:
    """One fault in ms, for one broker; its kind's row is :attr:`rule`."""

    kind: str  # a name of fault_kinds.FAULT_KINDS
    start_ms: int
    end_ms: int
    factor: float
    period_ms: int
    down_ms: int
    burst_kind: int
    burst_code: int
    rate: float
    cycle_ms: int  # the process's down pattern: dead the first dead_ms of every cycle_ms (down_cycle)
    dead_ms: int
    store_holds: bool = False  # a closed-loop store holds what the kind defers (Store.DEFERS), not the answer

    @classmethod
    def from_config(cls, f: FaultConfig, closed: bool = False) -> FaultWindow:
        """The window of ``f``; ``closed``: the brokers have a closed-loop store."""
        burst_kind, burst_code = ERROR_KINDS[f.error]
        start, end = int(round(f.start_s * 1000)), int(round(f.end_s * 1000))
        period, down = int(round(f.period_s * 1000)), int(round(f.down_s * 1000))
        rule = FAULT_KINDS[f.kind]
        cycle, dead = down_cycle(rule.down, start, end, period, down)
        holds = closed and rule.store == Store.DEFERS
        return cls(
            f.kind, start, end, f.factor, period, down, burst_kind, burst_code, f.rate, cycle, dead, holds
        )

    @property
    def rule(self) -> FaultKind:
        return FAULT_KINDS[self.kind]

    def active(self, t_ms: int) -> bool:
        return self.start_ms <= t_ms < self.end_ms

    def down(self, t_ms: int) -> bool:
        """Whether the broker's process is dead at ``t_ms`` (:func:`fault_kinds.process_down`)."""
        return self.active(t_ms) and process_down(self.start_ms, self.cycle_ms, self.dead_ms, t_ms)

    def effect(self, t_ms: int) -> Effect:
        """What an attempt at ``t_ms`` meets in this (active) window."""
        if process_down(self.start_ms, self.cycle_ms, self.dead_ms, t_ms):
            return Effect.PROCESS_DOWN
        return self.live_effect

    @property
    def live_effect(self) -> Effect:
        """What an attempt meets while the process lives: the kind's, unless a closed-loop store holds the
        requests it defers (then the store's answer carries the wait)."""
        return Effect.NONE if self.store_holds else self.rule.effect

    def probe_fails(self, t_ms: int) -> bool:
        """Whether a detector probe at ``t_ms`` fails in this window: a dead process, or the kind's."""
        return self.down(t_ms) or (self.active(t_ms) and self.rule.probe == Probe.FAILS)

    def down_intervals(self, until_ms: int) -> list[tuple[int, int]]:
        """The [start, end) ms intervals of this window in which the process is dead."""
        return down_intervals(self.start_ms, self.end_ms, self.cycle_ms, self.dead_ms, until_ms)


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
        closed = sc.coupling != "open"
        faults = tuple(
            tuple(
                sorted(
                    (FaultWindow.from_config(f, closed) for f in sc.faults if f.broker == b),
                    key=lambda w: w.start_ms,
                )
            )
            for b in brokers
        )
        return cls(sc.seed, brokers, params, faults)

    def index(self, broker: str) -> int:
        return self.brokers.index(broker)

    def down_intervals(self, broker: str, until_ms: int) -> list[tuple[int, int]]:
        """The [start, end) ms intervals in which ``broker``'s process is dead (outages and flap downs)."""
        return [iv for w in self.faults[self.index(broker)] for iv in w.down_intervals(until_ms)]

    def answers_probe(self, broker: str, t_ms: int) -> bool:
        """Whether a 5.x detector probe (``getMaxOffset`` with ``detectTimeout`` 200 ms) to ``broker`` at
        ``t_ms`` succeeds (:class:`rocketsim.broker.fault_kinds.Probe`): not while its process is dead,
        nor while a fault kind's probe fails (a hung broker, a partition)."""
        return not any(w.probe_fails(t_ms) for w in self.faults[self.index(broker)])

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
        latency += spike_ms(uniform(key, STREAM_SPIKE_SIZE), p.spike_scale_ms, p.spike_alpha, p.spike_max_ms)
    return min(latency, MAX_LATENCY_MS)


def spike_ms(u: float, scale: float, alpha: float, maximum: float) -> float:
    """A spike at level ``u``: Pareto(``scale``, ``alpha``) by inversion, ``scale * U^(-1/alpha)`` with the
    exponent bounded so a tiny alpha cannot overflow; with a ``maximum`` (> 0), the Pareto truncated there,
    ``scale * (1 - u (1 - (scale / maximum)^alpha))^(-1/alpha)``. One function both engines run (the
    compiled engine compiles it: ``compiled.base_latency``)."""
    if maximum > 0.0:
        r = (scale / maximum) ** alpha
        return scale * (1.0 - u * (1.0 - r)) ** (-1.0 / alpha)
    e = -math.log(1.0 - u) / alpha
    return scale * math.exp(min(e, MAX_SPIKE_EXPONENT))


def attempt_outcome(
    p: BrokerParams, faults: tuple[FaultWindow, ...], key: int, start_ms: int, timeout_ms: int
) -> AttemptOutcome:
    """The model's answer to one attempt: the window active at ``start_ms`` (windows of a broker never
    overlap: the scenario's validation) and the attempt's draws, through :func:`answer`. Draws are
    stateless, so the burst draw is made only where a burst can hit."""
    w = next((w for w in faults if w.active(start_ms)), None)
    effect = Effect.NONE if w is None else w.effect(start_ms)
    burst_draw = uniform(key, STREAM_BURST) if effect == Effect.ERROR_BURST else 1.0
    *decided, exact_us = answer(
        effect,
        1.0 if w is None else w.factor,
        0.0 if w is None else w.rate,
        0 if w is None else w.burst_kind,
        0 if w is None else w.burst_code,
        burst_draw,
        uniform(key, STREAM_ERROR),
        base_latency_ms(p, key),
        p.error_cum,
        p.error_kind,
        p.error_code,
        int(round(p.connect_refused_ms)),
        p.connect_timeout_ms,
        timeout_ms,
        w.end_ms - start_ms if effect == Effect.PAUSED else 0,  # type: ignore[union-attr]
    )
    return AttemptOutcome(*decided, exact_us=exact_us)


def answer(
    effect: int,
    factor: float,
    rate: float,
    burst_kind: int,
    burst_code: int,
    burst_draw: float,
    error_draw: float,
    base_ms: float,
    error_cum: Sequence[float],
    error_kind: Sequence[int],
    error_code: Sequence[int],
    refused_ms: int,
    connect_timeout_ms: int,
    timeout_ms: int,
    held_ms: int,
) -> tuple[int, int, int, bool, int, int, int, int]:
    """The decision chain of the open model, the one both engines run (the compiled engine compiles this
    very function: ``compiled.broker_answer``): ``(kind, latency, response code, stored, store ms, late
    ms, late code, exact us)`` of one attempt (late ms -1: no late answer; exact us: the broker's answer's
    latency in microseconds before the rounding to whole ms, -1 where no answer comes).

    In order: the window's :class:`rocketsim.broker.fault_kinds.Effect` (a dead process refuses the
    connect at once, ``refused_ms``, which no request timeout caps; a partition times the connect out; a
    hung broker never answers; a paused one takes the request ``held_ms`` later, when it continues, and
    answers it then as ever); a burst error (``burst_draw < rate``) at the body latency ``base_ms``;
    the background error mix (``error_draw`` against the cumulative ``error_cum``) at the latency, times
    ``factor`` in a slowdown; the latency against the timeout.

    Stored (the broker processed the request; nothing deduplicates a retry of it): SEND_OK and the not-OK
    store statuses at their latency; a timeout from a slow answer (latency past the timeout) and a
    ``remoting_timeout`` error (a reply lost on the way back) at the broker's own latency, after the
    client gave up. Not stored: connect failures (dead process, partition), a hung broker (model choice:
    it never processes what it accepts), the broker's error codes. A slow answer is also the timeout's
    late answer (SEND_OK at the broker's own latency); a lost reply and a hang have none.
    """
    timeout = max(timeout_ms, 0)
    if effect == Effect.PROCESS_DOWN:
        return OutcomeKind.REMOTING_CONNECT, refused_ms, 0, False, 0, -1, 0, -1
    if effect == Effect.CONNECT_TIMES_OUT:
        return OutcomeKind.REMOTING_CONNECT, connect_timeout_ms, 0, False, 0, -1, 0, -1
    if effect == Effect.NO_ANSWER:
        return OutcomeKind.REMOTING_TIMEOUT, timeout, 0, False, 0, -1, 0, -1
    erred, err_kind, err_code = False, 0, 0
    exact = base_ms
    if effect == Effect.ERROR_BURST and burst_draw < rate:
        erred, err_kind, err_code = True, burst_kind, burst_code
        latency = round(base_ms)
    else:
        if effect == Effect.SLOWER:
            exact = base_ms * factor
        latency = round(exact)
        for e in range(len(error_cum)):
            if error_draw < error_cum[e]:
                erred, err_kind, err_code = True, error_kind[e], error_code[e]
                break
    if effect == Effect.PAUSED:  # the process takes the request only when it continues
        latency += held_ms
        exact += held_ms
    exact_us = int(round(exact * 1000.0))
    if not erred:
        if latency >= timeout:  # the call gives up at its timeout; the broker stores it when it gets there
            return OutcomeKind.REMOTING_TIMEOUT, timeout, 0, True, latency, latency, 0, exact_us
        return OutcomeKind.OK, latency, 0, True, latency, -1, 0, exact_us
    if err_kind == OutcomeKind.REMOTING_TIMEOUT:  # stored, the reply lost
        return OutcomeKind.REMOTING_TIMEOUT, timeout, 0, True, latency, -1, 0, -1
    if err_kind == OutcomeKind.REMOTING_CONNECT:
        return OutcomeKind.REMOTING_CONNECT, refused_ms, 0, False, 0, -1, 0, -1
    answered = min(latency, timeout)
    stored = err_kind <= OutcomeKind.SLAVE_NOT_AVAILABLE
    # the microseconds of an answer the broker gives (a store status, an error code), not of a failure
    exact_us = exact_us if latency < timeout and (stored or err_kind == OutcomeKind.BROKER_ERROR) else -1
    return err_kind, answered, err_code, stored, answered, -1, 0, exact_us


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
