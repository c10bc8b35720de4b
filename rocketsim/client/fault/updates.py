"""The ``updateFaultItem(broker, latency, isolation[, reachable])`` call each outcome makes, per client line
and per call site (``sendDefaultImpl``, ``sendMessageAsync``, its callback): :data:`FAULT_UPDATES`.
"""

from __future__ import annotations

from enum import IntEnum

from rocketsim.client.outcomes import Catch
from rocketsim.client.versions import RemotingLine, remoting_line

# ---- 1. the updateFaultItem rule ------------------------------------------------------------------
# Mirrored by engine/compiled.py (through engine/plan's FaultRules arrays); tests/test_engines.py
# runs both engines over every cell, tests/test_fault.py checks each cell against upstream's source.


class Site(IntEnum):
    """Where the client calls ``updateFaultItem``."""

    # DefaultMQProducerImpl.sendDefaultImpl: after sendKernelImpl returned (any mode: the ASYNC dispatch
    # update is this very call), and in each catch clause (SYNC and ONEWAY; ASYNC's MQClientException
    # from sendKernelImpl, e.g. an unknown broker address)
    SEND_DEFAULT_IMPL = 0
    # MQClientAPIImpl.sendMessageAsync: catch (Exception ex) around invokeAsync (thrown synchronously)
    SEND_MESSAGE_ASYNC_CATCH = 1
    # the InvokeCallback of sendMessageAsync: a response processed (RESULT), processSendResponse threw
    # (BROKER), or no response (send failed, timeout, 5.x connect failure, interrupt, refused permit)
    ASYNC_CALLBACK = 2


class Reachable(IntEnum):
    """The ``reachable`` argument of an ``updateFaultItem`` call."""

    NO = 0
    YES = 1
    UNLESS_DETECTOR = 2  # 5.x RemotingException: ``reachable = !mqFaultStrategy.isStartDetectorEnable()``
    NO_ARGUMENT = 3  # 4.9: ``updateFaultItem(brokerName, currentLatency, isolation)`` has none

    def value_for(self, start_detector_enable: bool) -> bool:
        """The boolean passed (4.9 has no such argument: its table ignores the value)."""
        if self is Reachable.UNLESS_DETECTOR:
            return not start_detector_enable
        return self is not Reachable.NO


FaultUpdateRule = tuple[bool, Reachable]  # (isolation, reachable)

_SEND_DEFAULT_IMPL_4_9: dict[Catch, FaultUpdateRule] = {
    Catch.RESULT: (False, Reachable.NO_ARGUMENT),
    Catch.REMOTING: (True, Reachable.NO_ARGUMENT),
    Catch.CLIENT: (True, Reachable.NO_ARGUMENT),
    Catch.BROKER: (True, Reachable.NO_ARGUMENT),
    Catch.INTERRUPTED: (False, Reachable.NO_ARGUMENT),
}
_ASYNC_4_9: dict[Site, dict[Catch, FaultUpdateRule]] = {
    # 4.9 invokeAsync throws connect failures, refused permits and interrupts itself
    Site.SEND_MESSAGE_ASYNC_CATCH: {
        Catch.REMOTING: (True, Reachable.NO_ARGUMENT),
        Catch.CLIENT: (True, Reachable.NO_ARGUMENT),
        Catch.INTERRUPTED: (True, Reachable.NO_ARGUMENT),
    },
    Site.ASYNC_CALLBACK: {
        Catch.RESULT: (False, Reachable.NO_ARGUMENT),
        Catch.REMOTING: (True, Reachable.NO_ARGUMENT),
        Catch.BROKER: (True, Reachable.NO_ARGUMENT),
    },
}


def _copy(sites: dict[Site, dict[Catch, FaultUpdateRule]]) -> dict[Site, dict[Catch, FaultUpdateRule]]:
    return {site: dict(cells) for site, cells in sites.items()}


# a set of calls (a line's ``fault_updates``: clients.md A.3.6's CS-1 / CS-2, with the async call sites of
# the same tags) -> call site -> what the outcome is caught as -> (isolation, reachable). Only the cells
# the simulation can reach are here (a missing cell is a KeyError, not a silent default). Upstream, at the
# tags rocketmq-all-4.9.7 and rocketmq-all-4.9.8 (CS-1) and rocketmq-all-5.3.3 (CS-2):
# DefaultMQProducerImpl.sendDefaultImpl and MQClientAPIImpl.sendMessageAsync (quoted in tests/test_fault.py).
FAULT_UPDATES: dict[str, dict[Site, dict[Catch, FaultUpdateRule]]] = {
    "CS-1": {Site.SEND_DEFAULT_IMPL: dict(_SEND_DEFAULT_IMPL_4_9), **_copy(_ASYNC_4_9)},
    "CS-2": {
        Site.SEND_DEFAULT_IMPL: {
            Catch.RESULT: (False, Reachable.YES),
            Catch.REMOTING: (True, Reachable.UNLESS_DETECTOR),
            Catch.CLIENT: (False, Reachable.YES),
            Catch.BROKER: (True, Reachable.NO),
            Catch.INTERRUPTED: (False, Reachable.YES),
        },
        # 5.x invokeAsync completes the future exceptionally instead of throwing, but for a client error
        Site.SEND_MESSAGE_ASYNC_CATCH: {Catch.CLIENT: (True, Reachable.NO)},
        Site.ASYNC_CALLBACK: {
            Catch.RESULT: (False, Reachable.YES),
            Catch.REMOTING: (True, Reachable.YES),
            Catch.BROKER: (True, Reachable.YES),
            Catch.INTERRUPTED: (True, Reachable.YES),
        },
    },
}


# 4.3-4.8: CS-1's calls, but sendMessageAsync catches nothing (clients.md AR-1/2): what invokeAsync throws
# leaves through sendDefaultImpl's catch (a first request) or onExceptionImpl's (a retry)
FAULT_UPDATES["CS-1/uncaught"] = {
    site: dict(cells)
    for site, cells in FAULT_UPDATES["CS-1"].items()
    if site != Site.SEND_MESSAGE_ASYNC_CATCH
}
# 5.1.4 and 5.2.0: CS-2's calls, with invokeAsync still throwing what fails synchronously (a connect
# failure, a refused permit, an interrupt): sendMessageAsync's catch (Exception ex) makes
# updateFaultItem(brokerName, cost, true, false) (5.2.0 MQClientAPIImpl.sendMessageAsync)
FAULT_UPDATES["CS-2/thrown"] = {
    **_copy(FAULT_UPDATES["CS-2"]),
    # an interrupt is thrown too, so it never reaches the callback
    Site.ASYNC_CALLBACK: {
        c: r for c, r in FAULT_UPDATES["CS-2"][Site.ASYNC_CALLBACK].items() if c != Catch.INTERRUPTED
    },
    Site.SEND_MESSAGE_ASYNC_CATCH: {
        Catch.REMOTING: (True, Reachable.NO),
        Catch.CLIENT: (True, Reachable.NO),
        Catch.INTERRUPTED: (True, Reachable.NO),
    },
}


def fault_updates(line: RemotingLine | str) -> dict[Site, dict[Catch, FaultUpdateRule]]:
    """The ``updateFaultItem`` calls of ``line`` (its cells of :data:`FAULT_UPDATES`)."""
    return FAULT_UPDATES[remoting_line(line).fault_updates]


def fault_update_rule(line: RemotingLine | str, site: Site, catch: Catch) -> FaultUpdateRule:
    """The (isolation, reachable) of the ``updateFaultItem`` call ``line`` makes at ``site`` for ``catch``."""
    return fault_updates(line)[site][catch]
