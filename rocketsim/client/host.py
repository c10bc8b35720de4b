"""The client host's processors: where the client's own CPU work runs (``producers.send_cpu_us``, on the
thread that sends), and, on a shared host (``producers.shared_host``), the co-located brokers' reads and
appends too.

A host of ``processors`` cores runs each piece of CPU work on the core that frees first, from when the work
is ready, first come first served (no preemption: the pieces are microseconds). So a producer's threads
together do at most ``processors`` sends' work at once: its maximum rate is ``processors /
send_cpu_us``, whatever its threads, and past it its queues grow (the async sender executor's 50,000,
the sender threads' backlog). Times are microseconds from the scenario's start (floats: the work need not
be whole microseconds).
"""

from __future__ import annotations

import heapq


class HostCores:
    """The cores of one host and when each is free."""

    def __init__(self, processors: int) -> None:
        if processors < 1:
            raise ValueError(f"a host needs at least one processor, got {processors}")
        self.processors = processors
        self._free = [0.0] * processors  # a heap of the cores' free times

    def run(self, ready_us: float, work_us: float) -> float:
        """Run ``work_us`` of CPU ready at ``ready_us`` on the core that frees first; when it ends."""
        if work_us <= 0:
            return ready_us
        free = heapq.heappop(self._free)
        done = max(ready_us, free) + work_us
        heapq.heappush(self._free, done)
        return done
