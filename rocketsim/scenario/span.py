"""What a scenario simulates, said before a job starts: the span its messages are born over, their rate,
each fault's window against that span, and whether the producers' sender threads can keep up.

* :func:`header_lines`: the lines every job prints in its header;
* :func:`check_faults_in_span`: a fault that starts after the span ends changes nothing (the run reads
  "100% SEND_OK"), so a job refuses it (:class:`~rocketsim.scenario.config.ScenarioError`, exit 2);
* :func:`warnings`: a fault the span's end cuts, sender threads that would queue a healthy producer, sync
  autoBatch callers that would hold more threads than the producer has;
* :func:`queued_span_s`, :func:`queued_bytes`: how long a producer's queued sync sends take and what its
  task holds for them (the window check and :func:`check_queued_bytes`, which refuses a run whose queue
  would not fit a worker).
"""

from __future__ import annotations

import math

from rocketsim.scenario.broker_config import LatencyConfig
from rocketsim.scenario.config import FaultConfig, Scenario, ScenarioError

# a sender thread busy more than this share of the time queues sends noticeably (the default scenario,
# 250 msg/s per producer of ~2.4 ms sends on one thread: busy 60%, a publish delay p99 of 249 ms; on two
# threads, 30% each: 3 ms); the advice sizes threads to this share
BUSY_WARNING, BUSY_ADVICE = 0.5, 0.3
# what a producer task may hold in sends waiting for a sender thread: a worker's 2 GiB less what the task
# holds besides (its chunk, its tables' parts: about half a GiB)
QUEUED_BYTES_LIMIT = 3 << 29  # 1.5 GiB
QUEUED_MESSAGE_OVERHEAD_B = 160  # a held message's columns besides its body (measured: docs/benchmarks.md)


def fault_text(f: FaultConfig) -> str:
    """``slowdown broker-b 120-420 s (latency x30)``: the fault's kind, broker, window and parameters."""
    what = {
        "slowdown": f"latency x{f.factor:g}",
        "flapping": f"down {f.down_s:g} s of every {f.period_s:g} s",
        "store_stall": f"a {f.down_s:g} s append stall every {f.period_s:g} s",
        "error_burst": f"{f.error} on {f.rate:.0%} of attempts",
    }.get(f.kind)
    return f"{f.kind} {f.broker} {f.start_s:g}-{f.end_s:g} s" + (f" ({what})" if what else "")


def _sent(sc: Scenario) -> str:
    wl = sc.workload
    return f"{wl.total_messages():,} messages at {wl.mean_rate_per_s():,g} msg/s"


def header_lines(sc: Scenario) -> list[str]:
    """The scenario's span, rate and fault timeline, as a job's header prints them."""
    p = sc.producers
    lines = [
        f"  simulated span: 0-{sc.workload.span_s:,.1f} s ({_sent(sc)}), {p.count:,} producer(s) x "
        f"{p.threads:,} sender thread(s), brokers {', '.join(sc.cluster.brokers)} (coupling {sc.coupling})"
    ]
    lines += [f"  fault {i}: {fault_text(f)}" for i, f in enumerate(sc.faults)]
    if not sc.faults:
        lines.append("  faults: none")
    return lines


def check_faults_in_span(sc: Scenario, where: str = "") -> None:
    """Refuse a fault that starts after the simulated span ends (it would change nothing)."""
    span = sc.workload.span_s
    for i, f in enumerate(sc.faults):
        if f.start_s >= span:
            raise ScenarioError(
                f"{where}faults[{i}].start_s must be before the simulated span ends at {span:,.1f} s "
                f"({_sent(sc)}), got {f.start_s:g}: the fault would change nothing (send more messages, at "
                "a lower workload.rate_per_s, or move the fault)"
            )


def warnings(sc: Scenario) -> list[str]:
    """What the job runs but the user should know: faults the span's end cuts, sender threads that would
    queue a healthy producer's sends."""
    span = sc.workload.span_s
    out = [
        f"fault {i}, {fault_text(f)}, ends after the simulated span (0-{span:,.1f} s): only "
        f"{span - f.start_s:,.1f} s of its {f.end_s - f.start_s:,.1f} s fall in the run"
        for i, f in enumerate(sc.faults)
        if f.start_s < span < f.end_s
    ]
    out += [w for w in (thread_advice(sc), sync_auto_batch_advice(sc)) if w is not None]
    return out


def mean_attempt_ms(latency: LatencyConfig, timeout_ms: float) -> float:
    """The mean latency of a healthy attempt: the lognormal body's mean plus the Pareto spikes' (each
    capped at the send's timeout)."""
    body = latency.median_ms * math.exp(latency.sigma**2 / 2)
    xm, a, cap = latency.spike_scale_ms, latency.spike_alpha, max(timeout_ms, latency.spike_scale_ms)
    # E[min(X, cap)] of a Pareto(xm, a): xm + the integral of (xm / x)^a from xm to cap
    tail = xm * math.log(cap / xm) if a == 1 else xm**a * (cap ** (1 - a) - xm ** (1 - a)) / (1 - a)
    return body + latency.spike_probability * (xm + tail)


def _busiest_sync_sends(sc: Scenario) -> tuple[float, float, float]:
    """The busiest producer's share of the messages that it sends sync, its sync sends per second and a
    healthy attempt's mean latency over the brokers (ms)."""
    p, wl = sc.producers, sc.workload
    sync = p.send_mode.get("sync", 0.0) / sum(p.send_mode.values())
    hot = wl.hot_share / wl.hot_producers if wl.hot_share > 0 else 0.0
    rest = (1 - wl.hot_share) / max(p.count - (wl.hot_producers if wl.hot_share > 0 else 0), 1)
    share = max(hot, rest) * sync
    brokers = sc.cluster.brokers
    mean_ms = sum(mean_attempt_ms(sc.broker_model(b).latency, p.send_msg_timeout_ms) for b in brokers)
    return share, wl.mean_rate_per_s() * share, mean_ms / len(brokers)


def queued_span_s(sc: Scenario) -> float:
    """The span the busiest producer's healthy sync sends take on its sender threads, one after the other
    (s): longer than the arrivals' span when the threads cannot keep up (the sends queue, and the run,
    its windows and its tables last that long)."""
    share, _, mean_ms = _busiest_sync_sends(sc)
    return sc.workload.total_messages() * share * mean_ms / 1000.0 / sc.producers.threads


def mean_body_bytes(sc: Scenario) -> float:
    """The mean body size of the workload (the lognormal's mean, capped at its maximum)."""
    b = sc.workload.body_size
    if b.distribution == "uniform":
        return (b.min + b.max) / 2
    mean = b.median * math.exp(b.sigma**2 / 2) if b.distribution == "lognormal" else b.median
    return float(min(max(mean, b.min), b.max))


def queued_bytes(sc: Scenario) -> tuple[int, float]:
    """The busiest producer's sync sends still waiting for a sender thread when the last one arrives, and
    what its task holds for them (bytes): a producer's messages are made in arrival order, so the ones its
    threads have not reached are held."""
    share, rate, mean_ms = _busiest_sync_sends(sc)
    capacity = sc.producers.threads * 1000.0 / mean_ms if mean_ms > 0 else math.inf
    if rate <= capacity:
        return 0, 0.0
    waiting = int(sc.workload.total_messages() * share * (1 - capacity / rate))
    return waiting, waiting * (mean_body_bytes(sc) + QUEUED_MESSAGE_OVERHEAD_B)


def check_queued_bytes(sc: Scenario) -> None:
    """Refuse a run whose busiest producer would hold more queued sends than a worker can
    (:data:`QUEUED_BYTES_LIMIT`), saying how many and what keeps up."""
    waiting, held = queued_bytes(sc)
    if held > QUEUED_BYTES_LIMIT:
        _, rate, mean_ms = _busiest_sync_sends(sc)
        raise ScenarioError(
            f"producers.threads must keep up with a producer's sync sends, got {sc.producers.threads}: its "
            f"{rate:,.0f} sends/s of about {mean_ms:.1f} ms each leave about {waiting:,} messages waiting "
            f"for a thread when the last arrives, about {held / 2**30:.1f} GiB its task would hold (at "
            f"most {QUEUED_BYTES_LIMIT / 2**30:.1f} GiB); raise producers.threads or producers.count, "
            "lower workload.rate_per_s, or pass --allow-large-backlog"
        )


def thread_advice(sc: Scenario) -> str | None:
    """A warning when a producer's sender threads would be busy more than :data:`BUSY_WARNING` of the
    time with healthy sync sends (they queue: the publish delay grows), with the thread count that keeps
    them at :data:`BUSY_ADVICE`; None when they keep up."""
    p = sc.producers
    _, rate, mean_ms = _busiest_sync_sends(sc)
    if rate <= 0:
        return None
    busy = rate * mean_ms / 1000.0  # sender threads busy at once, on average
    if busy / p.threads <= BUSY_WARNING:
        return None
    advice = math.ceil(busy / BUSY_ADVICE)
    queued = queued_span_s(sc)
    late = (
        f"; they take about {queued:,.1f} s to send what arrives in {sc.workload.span_s:,.1f} s"
        if queued > sc.workload.span_s
        else ""
    )
    return (
        f"producers.threads = {p.threads}: a producer's {rate:,.0f} sync sends/s of about "
        f"{mean_ms:.1f} ms each keep {busy:.2f} sender threads busy, {busy / p.threads:.0%} "
        f"of each: healthy sends will queue (queue_wait_ms){late}; producers.threads = {advice} keeps up"
    )


def sync_auto_batch_advice(sc: Scenario) -> str | None:
    """A warning when a producer's sync sends through autoBatch's accumulator would hold more callers at
    once (each waits for its batch: the hold, then the batch's send) than it has sender threads: upstream
    its threads then run out and its batches are smaller; the model adds each message when it is born (its
    caller has a thread of its own: docs/autobatch.md). None otherwise."""
    p = sc.producers
    settings = p.auto_batching
    if settings is None or not settings.auto_batch or sc.workload.message_types.get("normal", 0) <= 0:
        return None
    _, rate, mean_ms = _busiest_sync_sends(sc)
    held = rate * (settings.batch_max_delay_ms + mean_ms) / 1000.0  # callers waiting at once, on average
    if held <= p.threads:
        return None
    return (
        f"producers.auto_batch with sync sends: a producer's {rate:,.0f} sync sends/s each wait about "
        f"{settings.batch_max_delay_ms + mean_ms:.0f} ms for their batch, {held:,.0f} callers at once, more "
        f"than producers.threads = {p.threads}: the model gives each caller a thread of its own (upstream's "
        f"batches would be smaller and its sends queue); producers.threads = {math.ceil(held)} matches it"
    )
