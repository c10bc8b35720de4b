"""The outcome classes of the real-broker harness, and rocketsim's results mapped onto them.

The harness (``pack.py``'s ``klass``) files each send under one class: ``SEND_OK``, the broker's
flow-control tag when the remark carries one (``OVERLOAD``, ``TIMEOUT_CLEAN_QUEUE``, ...), then a few
client texts (``executor_rejected``, ``invokeAsync_timeout``, ...), else the exception's simple class and
the start of its remark. rocketsim's ``send_results`` carry the same Java texts (``error`` is
``<class>: <message>``), so the same rules, in the same order, file a simulated send.
"""

from __future__ import annotations

SEND_OK = "SEND_OK"
# pack.py's class of a send the driver had no outcome for when it counted them (status NOT_DONE, no
# exception: ``exc + ":" + remark`` with both the status and an empty remark)
NOT_DONE = "NOT_DONE:"
# the broker's flow-control tags, checked first (the remark of an MQBrokerException)
BROKER_TAGS = ("OVERLOAD", "TIMEOUT_CLEAN_QUEUE", "PCBUSY_CLEAN_QUEUE", "REJECTREQUEST", "PC_SYNCHRONIZED")
# the client's own texts, in the harness's order: (text in the message, class)
CLIENT_TEXTS = (
    ("executor rejected", "executor_rejected"),
    ("invokeAsync call the addr", "invokeAsync_timeout"),
    ("DEFAULT ASYNC send call timeout", "async_call_timeout"),
    ("sendDefaultImpl call timeout", "sendDefaultImpl_call_timeout"),
    ("still failed", "send_times_still_failed"),
)
OTHER_WIDTH = 40  # the harness keeps this many characters of an unlisted remark


def outcome_class(status: str, error: str | None) -> str:
    """The harness's class of one send: its status (``SEND_OK``, a not-OK store status) or the class of
    the exception text ``error`` (``<Java class>: <message>``, as ``send_results.error``)."""
    if status == SEND_OK:
        return SEND_OK
    if not error:
        return f"{status}:"  # FLUSH_DISK_TIMEOUT, NOT_DONE: no exception, pack.py's "<status>:" and no remark
    java_class, _, message = error.partition(": ")
    for tag in BROKER_TAGS:
        if f"[{tag}]" in message:
            return tag
    for text, name in CLIENT_TEXTS:
        if text in message:
            return name
    return f"{java_class.rsplit('.', 1)[-1]}:{_remark(message)[:OTHER_WIDTH]}".replace(",", ";")


def _remark(message: str) -> str:
    """What the harness records as the remark of an exception message: an MQBrokerException's or a coded
    MQClientException's ``DESC:`` part, else the message; the FAQ suffix dropped."""
    text = message.split("\n", 1)[0]
    _, sep, desc = text.partition("  DESC: ")
    if sep:
        text = desc.rsplit(" BROKER: ", 1)[0]
    return text
