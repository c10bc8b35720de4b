"""The channel a producer's sender threads share with a broker, and what a close does to the requests on
it (rocketsim.client.connection); the engines' use of it: tests/test_engines.py
(test_a_sync_timeout_closes_the_channel_under_the_other_threads)."""

from __future__ import annotations

import pytest

from rocketsim.client.connection import Connections, closes_on_timeout
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
