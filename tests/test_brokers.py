"""The seeded broker model: counter-based draws, fault windows, error mix, heavy tail."""

from __future__ import annotations

import numpy as np
import pytest

from rocketsim.broker import latency as bm
from rocketsim.client.outcomes import OutcomeKind
from rocketsim.scenario import scenario_from_mapping


def model(**raw: object) -> bm.BrokerModel:
    base = {"cluster": {"brokers": ["broker-a", "broker-b"]}}
    return bm.BrokerModel.from_scenario(scenario_from_mapping({**base, **raw}))


def test_same_inputs_same_outcome_different_attempt_different_draw() -> None:
    m = model()
    a = m.attempt(0, 7, 0, "broker-a", 1000, 3000)
    assert a == m.attempt(0, 7, 0, "broker-a", 1000, 3000)
    lat = {m.attempt(0, 7, k, "broker-a", 1000, 3000).latency_ms for k in range(50)}
    assert len(lat) > 3


def test_latency_body_and_heavy_tail() -> None:
    m = model(
        brokers={
            "default": {
                "latency": {
                    "median_ms": 4.0,
                    "sigma": 0.3,
                    "spike_probability": 0.01,
                    "spike_scale_ms": 100.0,
                    "spike_alpha": 1.5,
                }
            }
        }
    )
    lat = np.array([m.attempt(0, s, 0, "broker-a", 0, 100_000).latency_ms for s in range(20_000)])
    assert 3 <= np.median(lat) <= 5
    spikes = (lat >= 100).mean()
    assert 0.005 < spikes < 0.015  # the Pareto spikes start at their scale
    assert lat.max() > 300  # a heavy tail


def test_error_mix_frequencies_and_kinds() -> None:
    m = model(
        brokers={
            "default": {"errors": {"system_busy": 0.1, "flush_slave_timeout": 0.05, "connect_refused": 0.05}}
        }
    )
    outs = [m.attempt(1, s, 0, "broker-a", 0, 3000) for s in range(20_000)]
    labels = [o.label for o in outs]
    assert abs(labels.count("broker:2") / 20_000 - 0.1) < 0.01
    assert abs(labels.count("status:FLUSH_SLAVE_TIMEOUT") / 20_000 - 0.05) < 0.008
    assert abs(labels.count("remoting:connect") / 20_000 - 0.05) < 0.008
    assert all(o.latency_ms <= 3000 for o in outs)


def test_timeouts_cost_the_whole_timeout() -> None:
    m = model(brokers={"default": {"errors": {"remoting_timeout": 1.0}}})
    out = m.attempt(0, 1, 0, "broker-a", 0, 1234)
    assert (out.kind, out.latency_ms) == (OutcomeKind.REMOTING_TIMEOUT, 1234)
    slow = model(
        brokers={"default": {"latency": {"median_ms": 5000.0, "sigma": 0.0, "spike_probability": 0.0}}}
    )
    out = slow.attempt(0, 1, 0, "broker-a", 0, 3000)
    assert (out.kind, out.latency_ms) == (OutcomeKind.REMOTING_TIMEOUT, 3000)


@pytest.mark.parametrize(
    ("fault", "inside", "label", "latency"),
    [
        ({"kind": "outage"}, 15_000, "remoting:connect", 1),
        ({"kind": "hang"}, 15_000, "remoting:timeout", 3000),
        ({"kind": "error_burst", "error": "system_error", "rate": 1.0}, 15_000, "broker:1", None),
        ({"kind": "flapping", "period_s": 4, "down_s": 1}, 10_500, "remoting:connect", 1),
        ({"kind": "flapping", "period_s": 4, "down_s": 1}, 12_500, "ok", None),
        ({"kind": "partition"}, 15_000, "remoting:connect", 3000),
    ],
)
def test_fault_windows(fault: dict, inside: int, label: str, latency: int | None) -> None:
    m = model(faults=[{"broker": "broker-b", "start_s": 10, "end_s": 20, **fault}])
    out = m.attempt(0, 3, 0, "broker-b", inside, 3000)
    assert out.label == label
    if latency is not None:
        assert out.latency_ms == latency
    assert m.attempt(0, 3, 0, "broker-b", 25_000, 3000).label == "ok"  # after the window
    assert m.attempt(0, 3, 0, "broker-a", inside, 3000).label == "ok"  # other broker untouched


def test_slowdown_multiplies_latency() -> None:
    m = model(
        faults=[{"broker": "broker-b", "kind": "slowdown", "start_s": 0, "end_s": 100, "factor": 30}],
        brokers={"default": {"latency": {"median_ms": 2.0, "sigma": 0.0, "spike_probability": 0.0}}},
    )
    assert m.attempt(0, 1, 0, "broker-b", 50_000, 3000).latency_ms == 60
    assert m.attempt(0, 1, 0, "broker-a", 50_000, 3000).latency_ms == 2


def test_down_intervals_of_flapping() -> None:
    m = model(
        faults=[
            {"broker": "broker-a", "kind": "flapping", "start_s": 0, "end_s": 10, "period_s": 4, "down_s": 1}
        ]
    )
    assert m.down_intervals("broker-a", 100_000) == [(0, 1000), (4000, 5000), (8000, 9000)]


def test_connect_failures_are_not_capped_by_the_request_timeout() -> None:
    # Upstream NettyRemotingClient.createChannel (4.9.8): bootstrap.connect with CONNECT_TIMEOUT_MILLIS =
    # connectTimeoutMillis (3000), then channelFuture.awaitUninterruptibly(connectTimeoutMillis); the
    # failure (null channel -> RemotingConnectException) comes before invokeSync looks at its timeout.
    # 5.3.3 getAndCreateChannel: awaitUninterruptibly() bounded by the same CONNECT_TIMEOUT_MILLIS.
    m = model(
        faults=[
            {"broker": "broker-a", "kind": "outage", "start_s": 0, "end_s": 10},
            {"broker": "broker-b", "kind": "partition", "start_s": 0, "end_s": 10},
        ],
        brokers={"default": {"latency": {"connect_refused_ms": 40.0}}},
        producers={"connect_timeout_ms": 2500},
    )
    refused = m.attempt(0, 1, 0, "broker-a", 5_000, 10)
    unreachable = m.attempt(0, 1, 0, "broker-b", 5_000, 10)
    assert (refused.label, refused.latency_ms) == ("remoting:connect", 40)
    assert (unreachable.label, unreachable.latency_ms) == ("remoting:connect", 2500)
    burst = model(
        brokers={"default": {"errors": {"connect_refused": 1.0}, "latency": {"connect_refused_ms": 40.0}}}
    )
    assert burst.attempt(0, 1, 0, "broker-a", 0, 5).latency_ms == 40


TIMEOUT_CLEAN = (
    "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: 250ms, size"
)


def test_the_broker_refuses_illegal_properties_only_of_what_it_would_store() -> None:
    # 4.9.8 DefaultMessageStore.asyncPutMessage: checkStoreStatus, then checkMessage (properties string
    # over Short.MAX_VALUE: MESSAGE_ILLEGAL), then CommitLog.asyncPutMessage's encoder (PROPERTIES_SIZE_
    # EXCEEDED); 5.3.3: the checkBeforePutMessage hook (HookUtils) before CommitLog.asyncPutMessage's
    # MessageExtEncoder.encode. SendMessageProcessor.handlePutMessageResult answers both MESSAGE_ILLEGAL.
    # What reached that point and would be stored is refused, stored nothing; a late answer is the refusal.
    ok = bm.AttemptOutcome(OutcomeKind.OK, 12, 0, True, 10)
    assert bm.refused_as_illegal(ok) == bm.AttemptOutcome(OutcomeKind.BROKER_ERROR, 12, bm.MESSAGE_ILLEGAL)
    flush = bm.AttemptOutcome(OutcomeKind.FLUSH_DISK_TIMEOUT, 40, 0, True, 40)
    assert bm.refused_as_illegal(flush) == bm.AttemptOutcome(OutcomeKind.BROKER_ERROR, 40, bm.MESSAGE_ILLEGAL)
    slow = bm.AttemptOutcome(OutcomeKind.REMOTING_TIMEOUT, 3000, 0, True, 3400, 3400)
    assert bm.refused_as_illegal(slow) == bm.AttemptOutcome(
        OutcomeKind.REMOTING_TIMEOUT, 3000, late_ms=3400, late_code=bm.MESSAGE_ILLEGAL
    )
    lost_reply = bm.AttemptOutcome(OutcomeKind.REMOTING_TIMEOUT, 3000, 0, True, 20)
    assert bm.refused_as_illegal(lost_reply) == bm.AttemptOutcome(OutcomeKind.REMOTING_TIMEOUT, 3000)


@pytest.mark.parametrize(
    "answer",
    [
        # the closed-loop store's flow control, answered in time and late: NettyRemotingAbstract
        # .processRequestCommand ([REJECTREQUEST], [OVERLOAD]) and BrokerFastFailure.cleanExpiredRequest
        # ([PCBUSY_CLEAN_QUEUE], [TIMEOUT_CLEAN_QUEUE]) answer before SendMessageProcessor runs;
        # [PC_SYNCHRONIZED] is checkStoreStatus (4.9.8) / HookUtils.checkBeforePutMessage (5.3.3), before
        # checkMessage and the encoder (4.9.8 and 5.3.3): the busy answer stands whatever the properties
        bm.AttemptOutcome(OutcomeKind.BROKER_ERROR, 260, bm.SYSTEM_BUSY, remark=TIMEOUT_CLEAN),
        bm.AttemptOutcome(
            OutcomeKind.REMOTING_TIMEOUT, 150, late_ms=260, late_code=bm.SYSTEM_BUSY, remark=TIMEOUT_CLEAN
        ),
        bm.AttemptOutcome(
            OutcomeKind.BROKER_ERROR,
            3,
            bm.SYSTEM_ERROR,
            remark="[PC_SYNCHRONIZED]broker busy, start flow control for a while",
        ),
        # what the broker never processed: the error mix's codes, a refused connect, a hang
        bm.AttemptOutcome(OutcomeKind.BROKER_ERROR, 5, bm.SERVICE_NOT_AVAILABLE),
        bm.AttemptOutcome(OutcomeKind.REMOTING_CONNECT, 1),
        bm.AttemptOutcome(OutcomeKind.REMOTING_TIMEOUT, 3000),
    ],
)
def test_an_answer_before_the_properties_check_stands(answer: bm.AttemptOutcome) -> None:
    assert bm.refused_as_illegal(answer) == answer
