"""The host's other threads (``producers.host_other_cpu_us``): the share of a shared host's CPU a send that
the JVMs' threads the model has nowhere else take, from a per-thread run of the harness
(``tests/data/realbroker-reruns/threads``: every thread of the driver and the broker read from
``/proc/PID/task/TID/schedstat``, grouped by name; ``NAME.summary.json``'s ``groups``, CPU a send due).

Left out of the model's threads, so counted here: both JVMs' JIT compilers (``C1``/``C2 CompilerThre``), the
driver's G1 threads that run beside the application (``G1 Conc``, ``G1 Refine``, ``G1 Main Marker``, ``G1
Service``) and its VM thread, the broker's collector threads and every other thread of the broker (its
flush, housekeeping and stats services). Not counted: the threads the model has (the client's executor,
Netty and callback threads, the broker's send, Netty and reput threads), the driver's collector pauses
(``GC Thread``: the client heap's collections, ``producers.heap_*``) and the driver's other threads (its
main thread, the harness's dispatcher that calls send: the sends' own CPU).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from rocketsim.errors import MeasurementError

OTHER_GROUPS = (
    "driver/jit",
    "driver/gc concurrent",
    "driver/gc vm thread",
    "broker/jit",
    "broker/gc",
    "broker/gc concurrent",
    "broker/gc vm thread",
    "broker/broker flush",
    "broker/other",
)


def other_threads_share(summary_text: str, source: str) -> float:
    """Of the CPU a send due of every group in ``summary_text`` (a per-thread run's ``summary.json``), the
    share of :data:`OTHER_GROUPS`; a bad file raises :class:`MeasurementError` naming ``source``."""
    try:
        groups: Mapping[str, Mapping[str, float]] = json.loads(summary_text)["groups"]
        us = {name: float(g["us_per_send"]) for name, g in groups.items()}
        other = sum(us[name] for name in OTHER_GROUPS)
    except (ValueError, KeyError, TypeError) as exc:
        raise MeasurementError(
            source, 0, f"expected a per-thread run's groups with us_per_send ({exc!r})"
        ) from None
    total = sum(us.values())
    if total <= 0 or other < 0:
        raise MeasurementError(source, 0, "expected CPU a send above 0")
    return other / total
