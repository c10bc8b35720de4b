"""The threads of the real harness as the model's keys (the validation's ``--thread-split``): which thread
runs what part of the calibrated CPU a send, from a per-thread run where the host kept up
(``tests/data/realbroker-reruns/threads``, ``NAME.summary.json``'s ``groups``) and JFR's stacks.

Client (rocketmq-all-4.9.8 ``NettyRemotingClient.start``): the request's way out, the answer's way in and
the callback as shares of the client's threads' CPU a send (``producers.netty_*_cpu_share``,
``callback_cpu_share``), the rest on the executor threads; the application's thread that calls send (the
harness's dispatcher) is no thread of the sends': its part (``dispatcher_share``) runs with the other
threads. Broker (``NettyRemotingServer``, ``SendMessageProcessor``, ``ReputMessageService``): the
connection threads' share (``io_us``, ``store.codec_share``), the append's parts outside the lock and on
the reput thread (``store.unlocked_share``, ``reput_share``). The threads the model has nowhere else
(:mod:`rocketsim.calibration.other_threads`) on ``host_other_threads``. docs/validation.md, "Which threads
do a send's work", says what each is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from rocketsim.calibration.other_threads import OTHER_GROUPS, other_threads_share
from rocketsim.errors import MeasurementError

CLIENT_GROUPS = {
    "worker": "driver/client netty worker",
    "selector": "driver/client netty selector",
    "executor": "driver/client executor",
    "callback": "driver/client callback",
}
BROKER_GROUPS = {
    "selector": "broker/broker netty selector",
    "codec": "broker/broker netty worker",  # NettyServerCodecThread_
    "send": "broker/broker send",
    "reput": "broker/broker reput",
}
# The harness's dispatcher (`main`, the application's thread that calls send: the checks and the executor's
# submit), us a send: in the summaries' "driver/other" with the driver's housekeeping threads; its part of
# r40_40000's (1.3 of their 1.4 s in the window, docs/validation.md "The host's other threads")
DISPATCHER_US = 2.0
# JFR's samples of the client's worker: the request's encoding and write 144 of the 222 in a send's work
# (the answer's decoding and handling 78); of its selector's, 46 of 725 socket writes
# (tests/data/realbroker-reruns/threads/runs/jfr_driver_25000.txt)
WORKER_WRITE_SHARE = 144 / 222
SELECTOR_WRITE_SHARE = 46 / 725
MARKING_GROUP = "driver/gc concurrent"  # the client JVM's G1 concurrent threads (G1 Conc, Refine, ...)
# JFR's samples of the broker's send threads: MappedFile.appendMessage under putMessageLock 13-18 of 104
# (docs/validation.md, "Which threads do a send's work")
SEND_LOCKED_SHARE = 0.15


@dataclass(frozen=True)
class ThreadSplit:
    """The measured split: the client's share keys, the broker's I/O share of its CPU a send and its
    append's shares, and the other threads' share of all of it on ``other_threads`` threads."""

    client: Mapping[str, float]  # producers.* share keys
    broker_io_share: float  # of the broker's CPU a send: its connection's selector and codec threads
    broker: Mapping[str, float]  # brokers.default.store.* share keys
    other_share: float
    other_threads: int
    marking_share: float = 0.0  # of other_share: the client JVM's G1 concurrent threads (MARKING_GROUP)
    # of the client's CPU a send: the application's thread that calls send (DISPATCHER_US), not the executor's
    dispatcher_share: float = 0.0


def _group_us(groups: Mapping[str, Mapping[str, float]], names: Mapping[str, str]) -> dict[str, float]:
    return {k: float(groups[g]["us_per_send"]) for k, g in names.items()}


def thread_split(summary_text: str, source: str) -> ThreadSplit:
    """The split of a per-thread run's ``summary.json`` (module docstring); a bad file raises
    :class:`MeasurementError` naming ``source``."""
    try:
        summary = json.loads(summary_text)
        client = _group_us(summary["groups"], CLIENT_GROUPS)
        broker = _group_us(summary["groups"], BROKER_GROUPS)
        runnable = sum(float(summary["window_means"][g][2]) for g in OTHER_GROUPS)
        marking = float(summary["groups"].get(MARKING_GROUP, {}).get("us_per_send", 0.0))
        total = sum(float(g["us_per_send"]) for g in summary["groups"].values())
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise MeasurementError(
            source, 0, f"expected a per-thread run's groups and window means ({exc!r})"
        ) from None
    if min(*client.values(), *broker.values()) <= 0:
        raise MeasurementError(source, 0, "expected every client and broker thread group's CPU above 0")
    write = client["worker"] * WORKER_WRITE_SHARE + client["selector"] * SELECTOR_WRITE_SHARE
    read = client["worker"] + client["selector"] - write
    threads_total = sum(client.values())  # the sends' own threads; the dispatcher's beside them
    io = broker["selector"] + broker["codec"]
    append = broker["send"] + broker["reput"]
    return ThreadSplit(
        client={
            "producers.netty_write_cpu_share": write / threads_total,
            "producers.netty_read_cpu_share": read / threads_total,
            "producers.callback_cpu_share": client["callback"] / threads_total,
            "producers.netty_write_worker_share": client["worker"] * WORKER_WRITE_SHARE / write,
            "producers.netty_read_selector_share": client["selector"] * (1 - SELECTOR_WRITE_SHARE) / read,
        },
        broker_io_share=io / (io + append),
        broker={
            "brokers.default.store.codec_share": broker["codec"] / io,
            "brokers.default.store.unlocked_share": broker["send"] * (1 - SEND_LOCKED_SHARE) / append,
            "brokers.default.store.reput_share": broker["reput"] / append,
        },
        other_share=other_threads_share(summary_text, source),
        other_threads=max(1, round(runnable)),
        marking_share=marking / total,
        dispatcher_share=DISPATCHER_US / (threads_total + DISPATCHER_US),
    )


SHIPPED_FORMAT = "rocketsim-thread-split/1"


def split_json(split: ThreadSplit, measured_from: str) -> str:
    """``split`` as the text of the file the package ships (``rocketsim/calibration/thread_split.json``,
    read by :func:`rocketsim.warehouse.thread_runs.read_thread_split`), naming the run it was measured from;
    floats as Python writes them, so a read gives back the same split."""
    doc = {
        "format": SHIPPED_FORMAT,
        "measured_from": measured_from,
        "client": dict(split.client),
        "broker_io_share": split.broker_io_share,
        "broker": dict(split.broker),
        "other_share": split.other_share,
        "other_threads": split.other_threads,
        "marking_share": split.marking_share,
        "dispatcher_share": split.dispatcher_share,
    }
    return json.dumps(doc, indent=2) + "\n"


def parse_split_json(text: str, source: str) -> ThreadSplit:
    """The split :func:`split_json` wrote; a bad file raises :class:`MeasurementError` naming ``source``."""
    try:
        doc = json.loads(text)
        if doc["format"] != SHIPPED_FORMAT:
            raise ValueError(f"format {doc['format']!r}, not {SHIPPED_FORMAT!r}")
        return ThreadSplit(
            client={str(k): float(v) for k, v in doc["client"].items()},
            broker_io_share=float(doc["broker_io_share"]),
            broker={str(k): float(v) for k, v in doc["broker"].items()},
            other_share=float(doc["other_share"]),
            other_threads=int(doc["other_threads"]),
            marking_share=float(doc["marking_share"]),
            dispatcher_share=float(doc["dispatcher_share"]),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise MeasurementError(source, 0, f"expected a thread split ({exc!r})") from None


CPU_KEYS = ("producers.send_cpu_us", "brokers.default.store.io_us", "brokers.default.store.append_us")
KIB = 1024.0


def split_values(
    values: Mapping[str, float], split: ThreadSplit, request_bytes: float, client_stops: bool = True
) -> dict[str, float | str]:
    """``values`` (the calibrated CPU a send: ``CPU_KEYS``, ``append_us`` a KiB of a ``request_bytes``
    request) with ``split`` set over them: the other threads' share of the three taken off each
    (``producers.host_other_cpu_us``), the broker's part split between ``io_us`` and ``append_us`` as its
    threads measured, and the share keys. The total a send stays the calibrated one, except that with a
    client heap (``producers.heap_mb``) G1's concurrent threads' part (``marking_share``) leaves the other
    threads for the heap's marking cycles on the host (``producers.heap_marking_on_host``), which cost by
    the live old generation, not by the send; and its collections stop the client's threads only, their
    collector threads taking the cores the broker's pieces leave over the pause (``producers.heap_stops =
    "client_left"``: the driver's JVM, not the host, pauses), unless ``client_stops`` is false (a
    work-conserving host cannot stop one process). The dispatcher's part of the client's CPU
    (``dispatcher_share``) runs with the other threads' too: the application calls send on a thread of its
    own that keeps its schedule (the harness's dispatcher called every send within 22 ms of its due time),
    not on the executor's threads that take the sends. The fair host counts threads, not pieces, beside a
    piece (``producers.host_counts = "threads"``): the broker's pieces on their connection and send
    threads, a held rest on its own thread."""
    send, io, append = (values[k] for k in CPU_KEYS)
    append *= request_bytes / KIB
    total = send + io + append
    keep = 1.0 - split.other_share
    broker = (io + append) * keep
    out: dict[str, float | str] = dict(values)
    dispatcher = send * keep * split.dispatcher_share
    out["producers.send_cpu_us"] = send * keep - dispatcher
    out["brokers.default.store.io_us"] = broker * split.broker_io_share
    out["brokers.default.store.append_us"] = broker * (1.0 - split.broker_io_share) * KIB / request_bytes
    out["producers.host_other_cpu_us"] = total * split.other_share + dispatcher
    out["producers.host_other_threads"] = split.other_threads
    out["producers.host_counts"] = "threads"
    if values.get("producers.heap_mb", 0) > 0:  # G1's marking on the host as the heap's, not the others'
        out["producers.host_other_cpu_us"] = total * (split.other_share - split.marking_share) + dispatcher
        out["producers.heap_marking_on_host"] = True
        if client_stops:
            out["producers.heap_stops"] = "client_left"
    out.update(split.client)
    out.update(split.broker)
    return out
