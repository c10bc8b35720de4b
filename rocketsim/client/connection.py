"""A producer's connections: one channel per broker that every sender thread shares, and what a close does
to the requests pending on it.

More: docs/reference/modules.md, rocketsim/client/connection.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rocketsim.client.outcomes import OutcomeKind
from rocketsim.client.versions import ClientVersion

MIN_CLOSE_TIMEOUT_MILLIS = 100  # 5.1.4+ NettyRemotingClient: a timeout closes only with more left than this


def close_rule(closes_on_timeout: bool, needs_time_left: bool, timeout_ms: int) -> bool:
    """Whether ``invokeSync`` closes the channel when a request given ``timeout_ms`` times out, for a line
    that closes on a timeout (``closes_on_timeout``) and needs time left for it (``needs_time_left``).

    4.9.1-5.1.3: always (``clientCloseSocketIfTimeout``). 5.1.4+: ``shouldClose = left >
    MIN_CLOSE_TIMEOUT_MILLIS || left > timeoutMillis / 4``, where ``left`` is the timeout less the
    (zero-ms) connect: any request with time left. 4.3.x-4.9.0: never. Both engines run it (the
    compiled engine compiles it)."""
    if not closes_on_timeout:
        return False
    if needs_time_left:
        return timeout_ms > MIN_CLOSE_TIMEOUT_MILLIS or timeout_ms > timeout_ms // 4
    return True


def closes_on_timeout(version: ClientVersion, timeout_ms: int) -> bool:
    """:func:`close_rule` of ``version``."""
    return close_rule(
        version.closes_channel_on_sync_timeout, version.close_on_timeout_needs_time_left, timeout_ms
    )


@dataclass
class Pending:
    """A SYNC request written to a channel and not yet answered: its send, start, answer time, timeout and
    the channel (a broker's n-th) it went out on."""

    send: int
    start_ms: int
    done_ms: int
    timeout_ms: int
    channel: int


@dataclass
class Connections:
    """The SYNC requests pending on each broker's channel of one producer (``channelTables``' channels)."""

    version: ClientVersion
    pending: dict[str, dict[int, Pending]] = field(default_factory=dict)
    channel: dict[str, int] = field(default_factory=dict)  # broker -> its current channel's number

    def wrote(self, broker: str, send: int, start_ms: int, done_ms: int, timeout_ms: int) -> None:
        """Send ``send``'s request (given ``timeout_ms``) went out on the broker's current channel at
        ``start_ms`` and is answered at ``done_ms``."""
        ch = self.channel.get(broker, 0)
        self.pending.setdefault(broker, {})[send] = Pending(send, start_ms, done_ms, timeout_ms, ch)

    def answered(self, broker: str, send: int, kind: OutcomeKind, now: int) -> list[Pending]:
        """Send ``send``'s request came to ``kind`` at ``now``. A timeout on a closing line closes its
        channel if it is still the broker's (``closeChannel`` leaves a channel already replaced alone):
        the next request opens a new one, and the requests pending on the closed one whose answer would
        come later fail now (returned, removed); one answered at ``now`` keeps its answer."""
        waiting = self.pending.get(broker, {})
        mine = waiting.pop(send, None)
        if mine is None or kind != OutcomeKind.REMOTING_TIMEOUT:
            return []
        current = self.channel.get(broker, 0)
        if mine.channel != current or not closes_on_timeout(self.version, mine.timeout_ms):
            return []
        self.channel[broker] = current + 1
        failed = [p for p in waiting.values() if p.channel == current and p.done_ms > now]
        for p in failed:
            del waiting[p.send]
        return failed
