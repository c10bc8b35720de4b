"""What a SYNC request's channel does to its answer, for the readable engine
(:mod:`rocketsim.engine.reference`): the connect it waited for (the answer counts from the request's start)
and the close that fails it (``NettyRemotingClient.invokeSync`` at 4.9.8). The compiled engine's twin is
in :mod:`rocketsim.engine.compiled` (its connect and close of a SYNC channel)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from rocketsim.client.outcomes import OutcomeKind
from rocketsim.client.send import Outcome


@dataclass(frozen=True)
class ConnectEnd:
    """The event of a broker's channel connecting (what its waiting requests are resumed by), the connect
    started at ``start_ms``; ``decided``: its end is known (else ``connect_ms`` from its start at least)."""

    broker: str
    start_ms: int
    decided: bool = False


def after_connect(outcome: Outcome, wait_ms: int) -> Outcome:
    """The broker model's answer to a request written ``wait_ms`` after it started (the connect it waited
    for): its latency and store time from the request's start."""
    late = outcome.late
    return replace(
        outcome,
        latency_ms=outcome.latency_ms + wait_ms,
        store_ms=outcome.store_ms + wait_ms if outcome.stored else outcome.store_ms,
        late=None if late is None else after_connect(late, wait_ms),
        latency_us=outcome.latency_us + wait_ms * 1000 if outcome.latency_us >= 0 else -1,
    )


def failed_fast(answer: Outcome, waited_ms: int) -> Outcome:
    """A pending SYNC request failed by its channel's close after ``waited_ms``: a
    ``RemotingSendRequestException``; the broker still stores what it was written (``stored``)."""
    return replace(
        answer,
        kind=OutcomeKind.REMOTING_SEND_REQUEST,
        latency_ms=waited_ms,
        response_code=0,
        remark="",
        late=None,
        latency_us=-1,
    )
