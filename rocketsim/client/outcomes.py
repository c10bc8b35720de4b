"""What one send attempt comes to, as named integers both engines use (the compiled one inside its kernel).

* :class:`OutcomeKind`: the answer to one attempt (the broker model's, :mod:`rocketsim.broker.latency`, or
  the client's own refusal); the readable engine's :class:`rocketsim.client.send.Outcome` carries it as its
  ``kind`` (``engine.plan.to_outcome``), the compiled engine as an int: one vocabulary, no strings.
* :class:`Catch`: which ``catch`` clause of ``DefaultMQProducerImpl.sendDefaultImpl`` sees an outcome
  (none for a SendResult); :data:`rocketsim.client.fault.FAULT_UPDATES` is keyed by it.
* :data:`ONEWAY_SEES`: the outcomes a ONEWAY caller sees (as an exception); every other outcome of a
  oneway request reads as written.

Labels are the conformance vectors' spelling (``ok``, ``status:FLUSH_DISK_TIMEOUT``, ``remoting:timeout``,
``broker:<code>``, ``client``, ``interrupted``): the ``outcome`` column of ``send_attempts``. The broker
model never answers ``TOO_MANY_REQUESTS``: it is the client refusing a request it has no time left for.
"""

from __future__ import annotations

from enum import IntEnum


class OutcomeKind(IntEnum):
    """The broker model's answer to one attempt. 0..3 are also the SendStatus of a stored message."""

    OK = 0  # SEND_OK
    FLUSH_DISK_TIMEOUT = 1  # stored, SendStatus.FLUSH_DISK_TIMEOUT
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3
    REMOTING_CONNECT = 4  # RemotingConnectException
    REMOTING_TIMEOUT = 5  # RemotingTimeoutException
    REMOTING_SEND_REQUEST = 6  # RemotingSendRequestException
    BROKER_ERROR = 7  # MQBrokerException with a response code
    CLIENT_ERROR = 8  # MQClientException (e.g. the broker address is unknown)
    INTERRUPTED = 9  # InterruptedException
    TOO_MANY_REQUESTS = 10  # the client's own refusal, nothing sent (4.9 invokeAsync with no time left)


class Catch(IntEnum):
    """The clause of ``sendDefaultImpl``'s ``try`` that handles an outcome (``RESULT``: nothing thrown)."""

    RESULT = 0  # sendKernelImpl returned (a SendResult, or null for ASYNC/ONEWAY)
    REMOTING = 1  # catch (RemotingException e)
    CLIENT = 2  # catch (MQClientException e)
    BROKER = 3  # catch (MQBrokerException e)
    INTERRUPTED = 4  # catch (InterruptedException e)


# Both engines read it: send.Outcome.catch, and the compiled kernel through engine/plan's FaultRules.
CATCH_OF_KIND: dict[OutcomeKind, Catch] = {
    OutcomeKind.OK: Catch.RESULT,
    OutcomeKind.FLUSH_DISK_TIMEOUT: Catch.RESULT,
    OutcomeKind.FLUSH_SLAVE_TIMEOUT: Catch.RESULT,
    OutcomeKind.SLAVE_NOT_AVAILABLE: Catch.RESULT,
    OutcomeKind.REMOTING_CONNECT: Catch.REMOTING,
    OutcomeKind.REMOTING_TIMEOUT: Catch.REMOTING,
    OutcomeKind.REMOTING_SEND_REQUEST: Catch.REMOTING,
    OutcomeKind.BROKER_ERROR: Catch.BROKER,
    OutcomeKind.CLIENT_ERROR: Catch.CLIENT,
    OutcomeKind.INTERRUPTED: Catch.INTERRUPTED,
    OutcomeKind.TOO_MANY_REQUESTS: Catch.REMOTING,
}

# Keyed by ``ClientVersion.oneway_connects_synchronously``. Both lines write a oneway request with
# writeAndFlush and a listener that only logs a failed write; sendKernelImpl's own "The broker[..] not
# exist" (a CLIENT_ERROR) is thrown before any of it.
# * 4.9.x ``invokeOneway``: getAndCreateChannel connects in the caller's thread (RemotingConnectException)
#   and invokeOnewayImpl's semaphoreOneway.tryAcquire may be interrupted (InterruptedException);
# * 5.x ``invokeOneway``: getAndCreateChannelAsync returns at once; connecting, the semaphore and the write
#   run in the connect future's listener, which has no else branch: a failure is dropped silently.
ONEWAY_SEES: dict[bool, frozenset[OutcomeKind]] = {
    True: frozenset({OutcomeKind.REMOTING_CONNECT, OutcomeKind.CLIENT_ERROR, OutcomeKind.INTERRUPTED}),
    False: frozenset({OutcomeKind.CLIENT_ERROR}),
}

_LABELS = {
    OutcomeKind.OK: "ok",
    OutcomeKind.FLUSH_DISK_TIMEOUT: "status:FLUSH_DISK_TIMEOUT",
    OutcomeKind.FLUSH_SLAVE_TIMEOUT: "status:FLUSH_SLAVE_TIMEOUT",
    OutcomeKind.SLAVE_NOT_AVAILABLE: "status:SLAVE_NOT_AVAILABLE",
    OutcomeKind.REMOTING_CONNECT: "remoting:connect",
    OutcomeKind.REMOTING_TIMEOUT: "remoting:timeout",
    OutcomeKind.REMOTING_SEND_REQUEST: "remoting:send_request",
    OutcomeKind.CLIENT_ERROR: "client",
    OutcomeKind.INTERRUPTED: "interrupted",
    OutcomeKind.TOO_MANY_REQUESTS: "remoting:too_many_requests",
}


def is_send_result(kind: int) -> bool:
    """SEND_OK or a not-OK store status: a SendResult, no exception (its SendStatus is the kind's value).
    Plain arithmetic: the compiled engine compiles this very function (``compiled.is_result_kind``)."""
    return kind <= OutcomeKind.SLAVE_NOT_AVAILABLE


def send_status(kind: int) -> str:
    """The ``SendStatus`` name of a SendResult's kind (``SEND_OK``, ``FLUSH_DISK_TIMEOUT``, ...)."""
    return "SEND_OK" if kind == OutcomeKind.OK else OutcomeKind(kind).name


_KIND_OF_LABEL = {label: kind for kind, label in _LABELS.items()}


def parse_outcome_label(label: str) -> tuple[OutcomeKind, int]:
    """The (kind, response code) of a label (:func:`outcome_label` the other way); KeyError if unknown."""
    head, _, tail = label.partition(":")
    if head == "broker":
        return OutcomeKind.BROKER_ERROR, int(tail)
    return _KIND_OF_LABEL[label], 0


def outcome_label(kind: int, code: int = 0) -> str:
    """The vectors' spelling of an outcome: ``ok``, ``status:...``, ``remoting:...``, ``broker:<code>``."""
    if kind == OutcomeKind.BROKER_ERROR:
        return f"broker:{code}"
    return _LABELS[OutcomeKind(kind)]


# the SendStatus names of a SendResult that is not SEND_OK (the message was stored)
NOT_OK_STATUSES = tuple(
    send_status(k)
    for k in (
        OutcomeKind.FLUSH_DISK_TIMEOUT,
        OutcomeKind.FLUSH_SLAVE_TIMEOUT,
        OutcomeKind.SLAVE_NOT_AVAILABLE,
    )
)
