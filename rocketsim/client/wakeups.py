"""A Netty thread's leg whose CPU a request falls as requests queue on it: a fixed cost a wakeup plus a
cost a request, one wakeup serving every request queued on the leg when it runs.

That is what Netty's loops do with a queue (netty 4.1 ``NioEventLoop.run``: one ``select``, every ready
key read, every queued task run; ``NioSocketChannel.doWrite``: one gathering write of the outbound
buffer), on both sides of rocketmq-all-4.9.8 (``NettyRemotingClient``'s selector and worker;
``NettyRemotingServer``'s ``NettyServerNIOSelector_`` and ``NettyServerCodecThread_``). Measured per
thread on the real harness, their CPU a request halves from 20,000 to 40,000 sends a second and again
at 50,000-72,000 (docs/validation.md, "The Netty legs' cost a wakeup"; :mod:`rocketsim.calibration.wakeups`
fits the constants). A request ready by the time the leg's latest wakeup began joins it (``request_us``);
a later one waits for the next wakeup (``wakeup_us`` more), which takes every request queued by then: an
isolated request costs ``wakeup_us + request_us``, a burst of ``n`` ``wakeup_us + n x request_us``.
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
