"""A measured run as a rocketsim scenario: its exact schedule, its client settings, the harness's
cluster, and the values calibration found.

The harness (``/realbroker/harness``, see docs/validation.md): one 4.9.8 broker (``broker-a``, 4.9.8
defaults: ``sendMessageThreadPoolNums`` = min(cores, 4), send queue 10,000, 200 ms in the queue) and
``producers`` unmodified 4.9.8 ``DefaultMQProducer`` instances in one driver process; send ``i`` goes to
producer ``i % producers``; bodies of ``size`` bytes to ``BenchTopic`` (auto-created: 4 queues); sync
sends run on a pool of ``threads`` sender threads fed in due order, async sends are submitted by one
dispatcher thread at their due time. The driver and the broker share one host of ``nproc`` processors
(``cpu.json``): ``producers.shared_host`` and ``store.on_producer_host``, its cores shared evenly
between the threads that want them (Linux's CFS: ``producers.host_scheduler = "fair"``; the validation's
``--fit-host-capacity`` sets the work-conserving ``"fair_conserving"``, none idle while one waits). Every
value calibration found is set by its dotted key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rocketsim.scenario import Scenario, scenario_from_mapping
from rocketsim.scenario.workload import generate
from rocketsim.validation.hosts import HOST_SCHEDULER  # producers.host_scheduler: Linux's CFS
from rocketsim.validation.measured import MeasuredRun

BROKER = "broker-a"
CLIENT_VERSION = "4.9.8"
TOPIC = "BenchTopic"
TOPIC_QUEUES = 4  # DefaultMQProducer.defaultTopicQueueNums: the auto-created topic's queues
BROKER_SEND_THREADS_MAX = 4  # BrokerConfig.sendMessageThreadPoolNums = min(availableProcessors, 4)
DRIVER_HEAP_MB = 1024  # the harness's run_load.sh: java -Xmx${DRIVER_HEAP:-1g} -XX:+UseG1GC
# producers.connect_ms: a Netty client's connect on a loopback, as measured (a median of 0.6-0.7 ms with 12
# threads waiting for it; tests/data/realbroker-reruns/connect_time), on the model's ms clock
CONNECT_MS = 1
# producers.failure_cpu_us and failure_log_cpu_us: the CPU of one failed sync attempt in a 4.9.8 client on
# the thread that failed (its exception made at the client's stack depth, its log events) and on the client
# logger's thread (writing them), the first time in the JVM (as a run's pause's are), 16 threads at once on
# a 2-core host: medians of six fresh JVMs (tests/data/realbroker-reruns/failure_cpu), per the client's log
# level; the harness logs at WARN (run_load.sh: -Drocketmq.client.logLevel=WARN)
FAILURE_CPU_US = {"WARN": (309.0, 1272.0), "INFO": (319.0, 1431.0)}
CLIENT_LOG_LEVEL = "WARN"
# producers.response_scan_offset_ms: the client starts before the driver's warm-up, its response-table scan
# with it, by a time no run's files record (1.7-3.2 s in our runs, docs/validation.md): which of the scan's
# 1 s ticks fails a request the broker held is that phase, unknown, so the validation takes its expected
# value, the middle of the period (the ticks at x.5 s)
RESPONSE_SCAN_OFFSET_MS = 500
# what a pending async send holds besides its body (an estimate): the Message and its properties, the
# executor's task, the RemotingCommand and its extFields, the ResponseFuture and the callback
PENDING_OBJECTS_KIB = 2.0


def pending_kib(run: MeasuredRun) -> float:
    """The heap one of ``run``'s pending sends holds, KiB: its request's bytes and the objects around them."""
    return request_bytes(run) / 1024.0 + PENDING_OBJECTS_KIB


def run_mapping(
    run: MeasuredRun, values: Mapping[str, float], *, seed: int = 1, host_scheduler: str = HOST_SCHEDULER
) -> dict[str, Any]:
    """The scenario of ``run`` as a raw mapping (what a TOML file would hold), ``values`` set over it, its
    host's cores shared as ``host_scheduler`` says (``producers.host_scheduler``)."""
    meta = run.meta
    processors = int(run.cpu.get("nproc", BROKER_SEND_THREADS_MAX))
    raw: dict[str, Any] = {
        "name": run.name,
        "seed": seed,
        "cluster": {
            "brokers": [BROKER],
            "write_queues": TOPIC_QUEUES,
            "read_queues": TOPIC_QUEUES,
            "broker_version": CLIENT_VERSION,
        },
        "producers": {
            "count": meta.producers,
            "threads": meta.threads if meta.mode == "sync" else 1,
            "processors": processors,
            "shared_host": True,  # the driver's producers in one process, on the broker's host
            "host_scheduler": host_scheduler,
            "client_version": CLIENT_VERSION,
            "send_mode": {meta.mode: 1.0},
            "send_msg_timeout_ms": meta.timeout_ms,
            "retry_times_when_send_failed": meta.retries,
            "retry_times_when_send_async_failed": meta.retries,
            "connect_ms": CONNECT_MS,
            "failure_cpu_us": FAILURE_CPU_US[CLIENT_LOG_LEVEL][0],
            "failure_log_cpu_us": FAILURE_CPU_US[CLIENT_LOG_LEVEL][1],
            "response_scan_offset_ms": RESPONSE_SCAN_OFFSET_MS,
        },
        "workload": {
            "messages": meta.n,
            "rate_steps": [[rate, secs] for rate, secs in meta.steps],
            "arrival": "uniform",
            "topics": [TOPIC],
            "tags": [],
            "keys": False,
            "body_size": {"distribution": "fixed", "median": meta.size, "min": meta.size, "max": meta.size},
            "message_types": {"normal": 1.0},
        },
        "brokers": {
            "coupling": "joint",
            "default": {
                "errors": {},
                "store": {"send_threads": min(processors, BROKER_SEND_THREADS_MAX), "on_producer_host": True},
            },
        },
    }
    if run.fault is not None:
        stop, cont = run.fault
        raw["faults"] = [{"broker": BROKER, "kind": "paused", "start_s": stop, "end_s": cont}]
    for key, value in values.items():
        set_dotted(raw, key, value)
    return raw


def request_bytes(run: MeasuredRun) -> int:
    """The bytes of one of ``run``'s requests as rocketsim counts them (body and properties)."""
    raw = run_mapping(run, {})
    raw["workload"].update(rate_steps=[[1.0, 1.0]], messages=0)
    m = generate(scenario_from_mapping(raw))
    return int(m["body_size"][0].as_py() + m["properties_size"][0].as_py())


def run_scenario(
    run: MeasuredRun, values: Mapping[str, float], *, seed: int = 1, host_scheduler: str = HOST_SCHEDULER
) -> Scenario:
    """:func:`run_mapping` validated into a :class:`rocketsim.scenario.Scenario`."""
    return scenario_from_mapping(run_mapping(run, values, seed=seed, host_scheduler=host_scheduler))


def set_dotted(raw: dict[str, Any], key: str, value: object) -> None:
    """Set ``a.b.c`` in a nested mapping, making the tables on the way."""
    *path, last = key.split(".")
    node = raw
    for part in path:
        node = node.setdefault(part, {})
    node[last] = value
