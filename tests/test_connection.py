"""The channel a producer's sender threads share with a broker, and what a close does to the requests on
it (rocketsim.client.connection); the engines' use of it: tests/test_engines.py
(test_a_sync_timeout_closes_the_channel_under_the_other_threads)."""

from __future__ import annotations

import pytest

from rocketsim.client.connection import (
    Connections,
    Fate,
    Waiter,
    budget_check_closes,
    budget_refuses,
    closes_on_timeout,
    race_draws,
)
from rocketsim.client.outcomes import OutcomeKind
from rocketsim.client.versions import parse_version

TIMEOUT = OutcomeKind.REMOTING_TIMEOUT


@pytest.mark.parametrize(
    ("version", "closes"),
    [("4.3.2", False), ("4.9.0", False), ("4.9.1", True), ("4.9.8", True), ("5.1.3", True), ("5.3.3", True)],
)
def test_which_lines_close_the_channel_on_a_sync_timeout(version: str, closes: bool) -> None:
    # apache/rocketmq NettyClientConfig.clientCloseSocketIfTimeout: false up to rocketmq-all-4.9.0,
    # NettySystemConfig.clientCloseSocketIfTimeout (com.rocketmq.remoting.client.closeSocketIfTimeout,
    # default true) from 4.9.1; NettyRemotingClient.invokeSync closes the channel when it is set
    assert closes_on_timeout(parse_version(version), 3000) is closes


def test_from_5_1_4_a_timeout_closes_only_with_time_left() -> None:
    # rocketmq-all-5.1.4 NettyRemotingClient.invokeSync: shouldClose = left > MIN_CLOSE_TIMEOUT_MILLIS (100)
    # || left > timeoutMillis / 4; left <= 0 is refused before the write
    v = parse_version("5.1.4")
    assert closes_on_timeout(v, 3000) and closes_on_timeout(v, 1)
    assert not closes_on_timeout(v, 0)
    assert closes_on_timeout(parse_version("5.1.3"), 0)  # 4.9.1-5.1.3 close whatever was left


def test_the_close_fails_the_others_pending_on_the_channel_once() -> None:
    # NettyConnectManageHandler.close -> NettyRemotingAbstract.failFast(channel): every ResponseFuture of
    # that channel (requestFail); a request answered in the same ms keeps its own answer; requests on the
    # new channel (getAndCreateChannel after closeChannel removed the old) are not touched, and a later
    # timeout on the closed channel leaves the new one alone (closeChannel: "has been closed before")
    c = Connections(parse_version("4.9.8"))
    for send, start in ((1, 0), (2, 2), (3, 4), (4, 6)):
        c.wrote("broker-a", send, start, start + 3001, 3000)
    c.wrote("broker-b", 9, 1, 5000, 3000)
    c.wrote("broker-a", 5, 1000, 3001, 3000)  # answered at the close's ms: its own answer
    failed = c.answered("broker-a", 1, TIMEOUT, 3001)
    assert sorted(p.send for p in failed) == [2, 3, 4]
    assert {p.start_ms for p in failed} == {2, 4, 6}
    c.wrote("broker-a", 2, 3001, 3004, 1)  # send 2's retry, on the new channel
    assert c.answered("broker-a", 5, TIMEOUT, 3001) == []  # the old channel's: nothing to close
    assert c.answered("broker-a", 2, TIMEOUT, 3004) == []  # the new channel, nothing else on it
    assert c.answered("broker-b", 9, OutcomeKind.OK, 5000) == []


def test_lines_that_keep_the_channel_fail_nothing() -> None:
    c = Connections(parse_version("4.9.0"))
    c.wrote("broker-a", 1, 0, 3001, 3000)
    c.wrote("broker-a", 2, 2, 3003, 3000)
    assert c.answered("broker-a", 1, TIMEOUT, 3001) == []


# ---- a new channel's connect (producers.connect_ms) ------------------------------------------------------
# apache/rocketmq rocketmq-all-4.9.8 remoting NettyRemotingClient: invokeSync calls getAndCreateChannel,
# whose createChannel starts bootstrap.connect for the first caller and has the others awaitUninterruptibly
# the same ChannelFuture; then doBeforeRpcHooks and `if (timeoutMillis < costTime) throw new
# RemotingTimeoutException("invokeSync call the addr[...] timeout")` inside the try whose catch closes the
# channel (clientCloseSocketIfTimeout); a thread that checks cw.isOK() after that close gets null
# (RemotingConnectException), one that had the channel fails its write (invokeSyncImpl's listener:
# "send a request command to channel ... failed"). rocketmq-all-5.1.4: `left -= costTime; if (left <= 0)`,
# and shouldClose needs left > 0.


def waiter(send: int, start: int, timeout: int, order: float, took: bool = True) -> Waiter:
    return Waiter(send, start, timeout, order, took)


def test_requests_wait_for_one_connect_started_by_the_first() -> None:
    c = Connections(parse_version("4.9.8"), connect_ms=4)
    assert c.needs_connect("broker-a")  # the first request connects too
    assert c.wait_for_channel("broker-a", waiter(1, 10, 3000, 0.5)) == (14, True)
    assert c.wait_for_channel("broker-a", waiter(2, 12, 3000, 0.1)) == (14, False)
    fates = c.connect_ended("broker-a", 14)
    assert [(w.send, f) for w, f in fates] == [(2, Fate.WRITE), (1, Fate.WRITE)]  # in the wake order
    assert not c.needs_connect("broker-a")
    assert c.close("broker-a", 20) == [] and c.needs_connect("broker-a")  # a close: the next connects again
    assert not Connections(parse_version("4.9.8")).needs_connect("broker-a")  # connect_ms 0: no wait


def test_the_budget_check_after_the_connect_closes_the_channel_unwritten() -> None:
    c = Connections(parse_version("4.9.8"), connect_ms=5)
    c.wait_for_channel("broker-a", waiter(1, 100, 3000, 0.1))  # written: before the close
    c.wait_for_channel("broker-a", waiter(2, 100, 4, 0.2))  # 4 ms left, waited 5: refused, closes
    c.wait_for_channel("broker-a", waiter(3, 101, 4, 0.3))  # waited 4 of 4: would be written (0 ms left)
    c.wait_for_channel("broker-a", waiter(4, 102, 3000, 0.4, took=False))  # looks after the close
    c.wait_for_channel("broker-a", waiter(5, 103, 1, 0.5))  # had the channel, but its budget is gone
    fates = {w.send: f for w, f in c.connect_ended("broker-a", 105)}
    assert fates == {
        1: Fate.WRITE,
        2: Fate.BUDGET,
        3: Fate.WRITE_FAILED,
        4: Fate.CONNECT_FAILED,
        5: Fate.BUDGET,
    }
    c.wrote("broker-a", 1, 100, 3100, 2995)
    assert [p.send for p in c.close("broker-a", 105)] == [1]  # the close fails what was written


def test_the_budget_check_of_each_line() -> None:
    assert not budget_refuses(5, 5, needs_time_left=False)  # 4.9.8: timeoutMillis < costTime
    assert budget_refuses(6, 5, needs_time_left=False)
    assert budget_refuses(5, 5, needs_time_left=True)  # 5.1.4+: left <= 0
    assert budget_check_closes(parse_version("4.9.8")) and budget_check_closes(parse_version("5.1.3"))
    assert not budget_check_closes(parse_version("4.9.0"))  # clientCloseSocketIfTimeout false
    assert not budget_check_closes(parse_version("5.1.4"))  # shouldClose: no time left
    c = Connections(parse_version("5.1.4"), connect_ms=5)
    for send, order in ((1, 0.1), (2, 0.2)):
        c.wait_for_channel("broker-a", waiter(send, 0, 5 if send == 1 else 3000, order))
    assert [f for _, f in c.connect_ended("broker-a", 5)] == [Fate.BUDGET, Fate.WRITE]  # nothing closed


def test_the_race_draws_are_the_attempts_own() -> None:
    a = race_draws(7, 0, 1234, 1)
    assert a == race_draws(7, 0, 1234, 1) and a != race_draws(7, 0, 1234, 2)
    assert 0.0 <= a[0] < 1.0
    took = [race_draws(7, 0, seq, 0)[1] for seq in range(2000)]
    assert 0.45 < sum(took) / len(took) < 0.55
