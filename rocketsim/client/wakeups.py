"""A Netty thread's leg whose CPU a request falls as requests queue on it: a fixed cost a wakeup plus a
cost a request, one wakeup serving every request queued on the leg when it runs.

What Netty's loops do with a queue (netty 4.1's ``NioEventLoop.run``: one ``select`` returns every ready
key, ``processSelectedKeys`` reads what each socket holds and ``runAllTasks`` runs every task queued
meanwhile; ``AbstractChannel.flush0`` / ``NioSocketChannel.doWrite`` writes every message queued on the
channel's outbound buffer with one gathering write; the ``DefaultEventExecutor`` a pipeline's handlers
run on takes its queued tasks one after another without sleeping): the wakeup's own cost (the system
calls, the selected keys, the hand-offs between the threads) is paid once for what queued while the thread
was busy or waiting for a core. rocketmq-all-4.9.8 runs its requests through such legs on both sides
(``NettyRemotingClient``: the selector event loop and the channel's worker of
``defaultEventExecutorGroup``; ``NettyRemotingServer``: the ``NettyServerNIOSelector_`` and the
``NettyServerCodecThread_`` that decodes a channel's requests). Measured per thread on the real harness,
their CPU a request halves from 20,000 to 40,000 sends a second and halves again at 50,000-72,000
(docs/validation.md, "The Netty legs' cost a wakeup"); :mod:`rocketsim.calibration.wakeups` fits the two
constants of each leg.

A request ready at or before the time the leg's latest wakeup began is one that wakeup takes (it was in
the socket, or the task queue, when the thread woke): it costs ``request_us``, after the wakeup's other
work. A request ready later waits for the next wakeup, which costs ``wakeup_us`` more; that next wakeup
begins when the thread is free again (and has a core), and takes every request queued by then. So an
isolated request costs ``wakeup_us + request_us``, a burst of ``n`` queued together ``wakeup_us + n x
request_us``, and a leg with a backlog spends ever less a request: its thread keeps up where a constant
cost a request would not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class WakeupLeg:
    """One thread's leg (one per thread: a producer's Netty worker or selector, a connection's selector or
    codec thread at the broker) and its latest wakeup. The caller places each piece :meth:`piece` gives
    on the thread (one after another, on the host's cores) and tells :meth:`placed` where it went."""

    wakeup_us: float  # the fixed CPU of one wakeup, whatever it takes
    request_us: float  # the CPU of each request a wakeup takes
    batch_start: float = -math.inf  # when the latest wakeup's work began
    batch_end: float = -math.inf  # when it has done every request it took so far

    def piece(self, ready_us: float) -> tuple[float, float, bool]:
        """A request ready at ``ready_us``: (when its work may start, its CPU, whether it joins the latest
        wakeup). Joining, it is done after the wakeup's other requests; else it opens a wakeup of its own."""
        if ready_us <= self.batch_start:
            return max(ready_us, self.batch_end), self.request_us, True
        return ready_us, self.wakeup_us + self.request_us, False

    def placed(self, start_us: float, end_us: float, joins: bool) -> None:
        """The piece :meth:`piece` gave went on the thread over [start, end)."""
        if joins:
            self.batch_end = max(self.batch_end, end_us)
        else:
            self.batch_start, self.batch_end = start_us, end_us


def wakeup_leg(wakeup_us: float, request_us: float) -> WakeupLeg | None:
    """The leg of those two constants (None: ``wakeup_us`` 0, the constant cost a request it replaces)."""
    return WakeupLeg(wakeup_us, request_us) if wakeup_us > 0 else None
