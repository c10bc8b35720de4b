"""A producer's connections: one channel per broker that every sender thread shares, what a close does
to the requests pending on it, and who waits for a new channel's connect (``producers.connect_ms``).

More: docs/reference/modules.md, rocketsim/client/connection.py.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field
from enum import IntEnum

from rocketsim.client.host import LOGGER, Host, run_in_turn
from rocketsim.client.outcomes import Catch, OutcomeKind
from rocketsim.client.versions import ClientVersion
from rocketsim.rng import draw_key, uniform

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


# ---- a new channel's connect (producers.connect_ms) ------------------------------------------------------

# the catches of DefaultMQProducerImpl.sendDefaultImpl that log the exception with its stack trace
# (log.warn("sendKernelImpl exception, resend at once ...", e)): the failures that cost FailureCpu
LOGGED_CATCHES = frozenset({Catch.REMOTING, Catch.CLIENT, Catch.BROKER})
# the CPU of a connect on the connection's I/O thread, us: an idle loopback connect's median, 0.32-0.36 ms
# (tests/data/realbroker-reruns/connect_time; the kernel's handshake is 0.012 ms of it)
CONNECT_IO_US = 330.0
STREAM_CONNECT_ORDER = 17  # the attempt draw that orders the waiters at a connect's end
STREAM_CONNECT_RACE = 18  # the attempt draw: did a waiter take the channel before the close, or look after
TOOK_CHANNEL_BELOW = 0.5  # that draw below this: it had taken the channel


class Fate(IntEnum):
    """What a SYNC request that waited for its channel's connect comes to at the connect's end."""

    WRITE = 0  # written on the new channel (the broker model answers it from the connect's end)
    BUDGET = 1  # invokeSync's budget check: the wait used up its timeout; RPC counted, not written
    WRITE_FAILED = 2  # took the channel before a budget check closed it: "send a request command ... failed"
    CONNECT_FAILED = 3  # looked at the channel after that close: RemotingConnectException, no RPC


def budget_refuses(wait_ms: int, timeout_ms: int, needs_time_left: bool) -> bool:
    """``invokeSync``'s check after ``getAndCreateChannel``: whether a request given ``timeout_ms`` that
    waited ``wait_ms`` for the connect throws ``invokeSync call the addr[...] timeout`` before its write.
    4.3.x-5.1.3: ``timeoutMillis < costTime``; 5.1.4+ (``left``): ``timeoutMillis - costTime <= 0``."""
    return timeout_ms - wait_ms <= 0 if needs_time_left else timeout_ms < wait_ms


def budget_close_rule(closes_on_timeout: bool, needs_time_left: bool) -> bool:
    """Whether that check's ``RemotingTimeoutException`` closes the channel, for a line that closes on a
    timeout (``closes_on_timeout``) and needs time left for it (``needs_time_left``): the catch closes with
    ``clientCloseSocketIfTimeout`` (4.9.1-5.1.3); 5.1.4+'s ``shouldClose`` needs time left, and none is.
    Both engines run it (the compiled engine compiles it)."""
    return closes_on_timeout and not needs_time_left


def budget_check_closes(version: ClientVersion) -> bool:
    """:func:`budget_close_rule` of ``version``."""
    return budget_close_rule(version.closes_channel_on_sync_timeout, version.close_on_timeout_needs_time_left)


def unwritten_kind(fate: Fate) -> OutcomeKind:
    """What a waiter that was not written comes to (RPC counted or not, nothing stored): the budget check's
    ``RemotingTimeoutException`` ("invokeSync call the addr[...] timeout"), a failed write's
    ``RemotingSendRequestException``, a look after the close's ``RemotingConnectException``."""
    if fate == Fate.BUDGET:
        return OutcomeKind.REMOTING_TIMEOUT
    if fate == Fate.WRITE_FAILED:
        return OutcomeKind.REMOTING_SEND_REQUEST
    return OutcomeKind.REMOTING_CONNECT


def race_draws(seed: int, producer: int, seq: int, attempt: int) -> tuple[float, bool]:
    """A waiting request's place among the waiters of a connect (lower wakes first) and whether, after a
    budget check closed the channel, it had already taken the channel: the race between the threads
    ``awaitUninterruptibly`` wakes at once, drawn from the attempt's key (the same on every partitioning)."""
    key = draw_key(seed, producer, seq, attempt)
    return uniform(key, STREAM_CONNECT_ORDER), uniform(key, STREAM_CONNECT_RACE) < TOOK_CHANNEL_BELOW


def waiter_fate(closed: bool, took_channel: bool, refused: bool) -> Fate:
    """One waiter's fate at the connect's end, in its turn: after a budget check ``closed`` the channel, a
    waiter that had not ``took_channel`` looks too late (``cw.isOK()`` false: ``RemotingConnectException``);
    else its own budget check (``refused``: :func:`budget_refuses`) throws, or it writes, which fails on a
    closed channel. Both engines run it (the compiled engine compiles it)."""
    if closed and not took_channel:
        return Fate.CONNECT_FAILED
    if refused:
        return Fate.BUDGET
    return Fate.WRITE_FAILED if closed else Fate.WRITE


@dataclass
class Waiter:
    """A SYNC request waiting for its broker's channel to connect: its send, start and timeout, its place
    in the race at the connect's end (:func:`race_draws`), and what the engine resumes it with."""

    send: int
    start_ms: int
    timeout_ms: int
    order: float
    took_channel: bool
    payload: object = None


def settle_connect(waiters: list[Waiter], now: int, version: ClientVersion) -> list[tuple[Waiter, Fate]]:
    """Each waiter's fate at the connect's end ``now``, in the order they wake (``createChannel``'s
    ``awaitUninterruptibly`` returns for all at once). Until a budget check closes the channel, each is
    written or, its budget gone, throws. After the close, a waiter either looks at the channel too late
    (``cw.isOK()`` false: ``RemotingConnectException``) or had taken it: then its own budget check, else
    its write, fails (:func:`waiter_fate`)."""
    needs_time_left = version.close_on_timeout_needs_time_left
    fates: list[tuple[Waiter, Fate]] = []
    closed = False
    for w in sorted(waiters, key=lambda w: (w.order, w.send)):
        refused = budget_refuses(now - w.start_ms, w.timeout_ms, needs_time_left)
        fate = waiter_fate(closed, w.took_channel, refused)
        fates.append((w, fate))
        closed = closed or (fate == Fate.BUDGET and budget_check_closes(version))
    return fates


@dataclass
class Connections:
    """The SYNC requests pending on each broker's channel of one producer (``channelTables``' channels), and,
    with a connect time (``connect_ms``), which channels are connected and who waits for a connect."""

    version: ClientVersion
    connect_ms: int = 0
    pending: dict[str, dict[int, Pending]] = field(default_factory=dict)
    channel: dict[str, int] = field(default_factory=dict)  # broker -> its current channel's number
    connected: set[str] = field(default_factory=set)  # brokers whose current channel is connected
    connecting: dict[str, int] = field(default_factory=dict)  # broker -> when its channel's connect ends
    waiters: dict[str, list[Waiter]] = field(default_factory=dict)  # broker -> requests waiting for it

    def needs_connect(self, broker: str) -> bool:
        """Whether a SYNC request to the broker now waits for a connect (its channel is not connected)."""
        return self.connect_ms > 0 and broker not in self.connected

    def wait_for_channel(self, broker: str, waiter: Waiter) -> tuple[int, bool]:
        """A SYNC request wants the broker's unconnected channel at ``waiter.start_ms``
        (``getAndCreateChannel``) and waits: when the connect ends, and whether this request starts it."""
        self.waiters.setdefault(broker, []).append(waiter)
        if broker in self.connecting:
            return self.connecting[broker], False
        self.connecting[broker] = ready = waiter.start_ms + self.connect_ms
        return ready, True

    def connect_later(self, broker: str, ready: int) -> None:
        """The broker's connect under way ends at ``ready`` (its I/O thread waited for the host's cores)."""
        self.connecting[broker] = ready

    def connect_ended(self, broker: str, now: int) -> list[tuple[Waiter, Fate]]:
        """The broker's channel connected at ``now``: the fates of the requests that waited
        (:func:`settle_connect`). The channel is the broker's, connected, until a close (:meth:`close`)."""
        del self.connecting[broker]
        self.connected.add(broker)
        return settle_connect(self.waiters.pop(broker, []), now, self.version)

    def wrote(self, broker: str, send: int, start_ms: int, done_ms: int, timeout_ms: int) -> None:
        """Send ``send``'s request (given ``timeout_ms``) went out on the broker's current channel at
        ``start_ms`` and is answered at ``done_ms``."""
        ch = self.channel.get(broker, 0)
        self.pending.setdefault(broker, {})[send] = Pending(send, start_ms, done_ms, timeout_ms, ch)

    def answered(self, broker: str, send: int, kind: OutcomeKind, now: int) -> list[Pending]:
        """Send ``send``'s request came to ``kind`` at ``now``. A timeout on a closing line closes its
        channel if it is still the broker's (``closeChannel`` leaves a channel already replaced alone):
        :meth:`close`."""
        waiting = self.pending.get(broker, {})
        mine = waiting.pop(send, None)
        if mine is None or kind != OutcomeKind.REMOTING_TIMEOUT:
            return []
        if mine.channel != self.channel.get(broker, 0) or not closes_on_timeout(
            self.version, mine.timeout_ms
        ):
            return []
        return self.close(broker, now)

    def close(self, broker: str, now: int) -> list[Pending]:
        """The client closes the broker's current channel at ``now``: the next request opens a new one, and
        the requests pending on the closed one whose answer would come later fail now (returned, removed);
        one answered at ``now`` keeps its answer."""
        waiting = self.pending.get(broker, {})
        current = self.channel.get(broker, 0)
        self.channel[broker] = current + 1
        self.connected.discard(broker)
        failed = [p for p in waiting.values() if p.channel == current and p.done_ms > now]
        for p in failed:
            del waiting[p.send]
        return failed


# ClientLogger's AsyncAppender: rocketmq.client.logAsyncQueueSize's default, the lines that may wait for its
# thread; built non-blocking (withAsync(false, queueSize)), it drops a line while that many wait
LOG_QUEUE = 1024


@dataclass
class FailureCpu:
    """The client's CPU per failed SYNC attempt on its host (``producers.failure_cpu_us`` on the thread that
    failed, ``failure_log_cpu_us`` on the client logger's one thread), per failed ASYNC attempt that
    reaches ``onExceptionImpl`` (``async_failure_cpu_us``, ``async_failure_log_cpu_us`` for a retry's WARN
    line), and the connect it slows. The logger is the process's one thread (:data:`LOGGER`): its lines one
    after another, a line dropped while :data:`LOG_QUEUE` wait."""

    host: Host
    producer: int
    thread_us: float
    log_us: float
    async_us: float = 0.0
    async_log_us: float = 0.0

    def on(self) -> bool:
        """Whether failed SYNC attempts cost the host CPU."""
        return self.thread_us > 0 or self.log_us > 0

    def async_on(self) -> bool:
        """Whether failed ASYNC attempts cost the host CPU."""
        return self.async_us > 0 or self.async_log_us > 0

    def failed(self, thread: Hashable, now_ms: int) -> None:
        """An attempt of ``thread`` threw at ``now_ms``: the thread makes the exception and its log events,
        then the logger's thread writes them, after what it was given before."""
        logged = self.host.run(now_ms * 1000.0, self.thread_us, (self.producer, thread))
        self.log(logged, self.log_us)

    def failed_async(self, thread: Hashable, ready_us: float, logged: bool) -> float:
        """``onExceptionImpl`` runs for a failed ASYNC attempt on ``thread`` from ``ready_us`` (``logged``:
        a retry whose WARN line the logger writes): when the thread is done with it."""
        done = self.host.run(ready_us, self.async_us, (self.producer, thread))
        if logged:
            self.log(done, self.async_log_us)
        return done

    def log(self, ready_us: float, us: float) -> None:
        """A line of ``us`` of the logger's CPU handed over at ``ready_us``, dropped if :data:`LOG_QUEUE`
        lines of that cost wait (``AsyncAppender.append``, not blocking)."""
        if us <= 0 or self.host.free_us.get(LOGGER, 0.0) - ready_us >= LOG_QUEUE * us:
            return
        run_in_turn(self.host, LOGGER, ready_us, us)

    def connect_done(self, broker: str, start_ms: int, connect_ms: int) -> int:
        """When the broker's connect started at ``start_ms`` ends: ``connect_ms`` later, or when the
        connection's I/O thread has had the connect's CPU (:data:`CONNECT_IO_US`) of the host beside the
        failures' CPU, if that is later."""
        if not self.on():
            return start_ms + connect_ms
        done_us = self.host.run(start_ms * 1000.0, CONNECT_IO_US, (self.producer, "connect", broker))
        return max(start_ms + connect_ms, math.ceil(done_us / 1000.0))
