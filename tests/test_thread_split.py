"""The threads of the real harness as the model's keys (:mod:`rocketsim.calibration.thread_split`, the
validation's ``--thread-split``), from the per-thread run at 40,000 sends/s (tests/data/realbroker-reruns/
threads/runs/r40_40000.summary.json) and JFR's stacks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from validate_scenarios import first_scenario

from rocketsim.calibration.other_threads import OTHER_GROUPS
from rocketsim.calibration.thread_split import (
    BROKER_GROUPS,
    CLIENT_GROUPS,
    CPU_KEYS,
    ThreadSplit,
    parse_split_json,
    split_json,
    split_values,
    thread_split,
)
from rocketsim.errors import MeasurementError
from rocketsim.validation.host_capacity import scaled
from rocketsim.warehouse.thread_runs import derive_thread_split, read_thread_split, shipped_split_path

DATA = Path(__file__).parent / "data" / "realbroker"


def test_the_split_of_the_40000_a_second_run() -> None:
    # r40_40000's summary, us a send due: the client's worker 4.573, selector 3.998, executor 2.329,
    # callbacks 0.954: 11.854 a send on the sends' threads, and the dispatcher's 2.0 (`main`, in
    # "driver/other"; the application's thread that calls send) beside them: 13.854; JFR: the worker's
    # way out 144 of 222 samples, the selector's 46 of 725. The broker's selector 3.425, codec 3.239, send
    # threads 4.487, reput 0.801. The other groups runnable 1.96 threads on average
    s = derive_thread_split()
    write = 4.573 * 144 / 222 + 3.998 * 46 / 725
    assert s.client["producers.netty_write_cpu_share"] == pytest.approx(write / 11.854, abs=1e-3)
    assert s.client["producers.netty_read_cpu_share"] == pytest.approx((8.571 - write) / 11.854, abs=1e-3)
    assert s.client["producers.callback_cpu_share"] == pytest.approx(0.954 / 11.854, abs=1e-3)
    assert s.dispatcher_share == pytest.approx(2.0 / 13.854, abs=1e-3)
    assert s.client["producers.netty_write_worker_share"] == pytest.approx(0.921, abs=1e-3)
    assert s.client["producers.netty_read_selector_share"] == pytest.approx(0.700, abs=1e-3)
    assert s.broker_io_share == pytest.approx(6.664 / 11.952, abs=1e-3)
    assert s.broker["brokers.default.store.codec_share"] == pytest.approx(3.239 / 6.664, abs=1e-3)
    assert s.broker["brokers.default.store.reput_share"] == pytest.approx(0.801 / 5.288, abs=1e-3)
    assert s.broker["brokers.default.store.unlocked_share"] == pytest.approx(4.487 * 0.85 / 5.288, abs=1e-3)
    assert s.other_threads == 2 and s.other_share == pytest.approx(0.1931, abs=1e-4)
    # of the other threads, the client JVM's G1 concurrent threads (G1 Conc, Main Marker, Refine, Service)
    # 0.273 of the 34.235 us a send of every group
    assert s.marking_share == pytest.approx(0.273 / 34.235, abs=1e-5)
    # per producer the worker does the most of a send's CPU of any one thread of the client: the executor's
    # is spread over its threads, the dispatcher's on a thread of its own
    worker = write * 0.921 + (8.571 - write) * 0.300
    assert worker > 2.329 / 2 and worker > 8.571 - worker


def test_the_package_ships_the_split_as_derived_from_the_run() -> None:
    # what --thread-split reads (rocketsim/calibration/thread_split.json, package data: an installed wheel
    # has no tests/data) is the run's split exactly; after a change to the run or to the derivation
    # `python -m rocketsim.warehouse.thread_runs --write` writes it again
    derived = derive_thread_split()
    assert read_thread_split() == derived, "run python -m rocketsim.warehouse.thread_runs --write"
    assert shipped_split_path().read_text(encoding="utf-8") == split_json(
        derived, "tests/data/realbroker-reruns/threads/runs/r40_40000.summary.json"
    )


def test_a_bad_shipped_split_names_its_file() -> None:
    text = split_json(derive_thread_split(), "r.json")
    assert parse_split_json(text, "s.json") == derive_thread_split()
    with pytest.raises(MeasurementError, match="s.json: expected a thread split"):
        parse_split_json(text.replace("rocketsim-thread-split/1", "rocketsim-thread-split/0"), "s.json")
    with pytest.raises(MeasurementError, match="s.json: expected a thread split"):
        parse_split_json(json.dumps({**json.loads(text), "other_share": None}), "s.json")


def test_split_values_keep_the_cpu_a_send_and_move_the_others_share() -> None:
    split = ThreadSplit(
        {"producers.callback_cpu_share": 0.1}, 0.6, {"brokers.default.store.codec_share": 0.5}, 0.2, 3
    )
    values = {
        "producers.send_cpu_us": 10.0,
        "brokers.default.store.io_us": 4.0,
        "brokers.default.store.append_us": 2.0,
    }
    out = split_values({**values, "producers.heap_mb": 1024.0}, split, 2048.0)
    send, io, append = (out[k] for k in CPU_KEYS)
    # 10 + 4 + 2 x 2 KiB = 18 us a send: a fifth on the other threads, the broker's 6.4 left as 60% I/O
    assert (
        send == pytest.approx(8.0)
        and io == pytest.approx(0.6 * 6.4)
        and append * 2 == pytest.approx(0.4 * 6.4)
    )
    assert out["producers.host_other_cpu_us"] == pytest.approx(3.6)
    assert send + io + append * 2 + out["producers.host_other_cpu_us"] == pytest.approx(18.0)
    assert out["producers.host_other_threads"] == 3 and out["producers.heap_mb"] == 1024.0
    assert out["producers.callback_cpu_share"] == 0.1 and out["brokers.default.store.codec_share"] == 0.5
    # --fit-host-capacity's rounds scale the whole CPU a send, the other threads' part with it
    half = scaled(out, 0.5)
    assert half["producers.host_other_cpu_us"] == 1.8 and half["producers.send_cpu_us"] == pytest.approx(4.0)
    assert half["producers.callback_cpu_share"] == 0.1 and half["producers.host_other_threads"] == 3


def test_with_a_client_heap_its_marking_leaves_the_other_threads_for_its_cycles() -> None:
    # producers.heap_marking_on_host: G1's concurrent threads' CPU by the live old generation a cycle
    # marks (rocketsim.client.heap), so their part of the other threads' (by the send) is taken off them
    split = ThreadSplit({}, 0.5, {}, 0.2, 2, marking_share=0.01)
    values = {"producers.send_cpu_us": 10.0, "brokers.default.store.io_us": 4.0}
    values["brokers.default.store.append_us"] = 2.0
    out = split_values({**values, "producers.heap_mb": 1024.0}, split, 2048.0)
    assert out["producers.host_other_cpu_us"] == pytest.approx(18.0 * 0.19)
    assert out["producers.heap_marking_on_host"] is True
    # its collections stop the client's JVM, not the host: the collector's threads take the cores the
    # broker's pieces leave over the pause
    assert out["producers.heap_stops"] == "client_left"
    conserving = split_values({**values, "producers.heap_mb": 1024.0}, split, 2048.0, client_stops=False)
    assert "producers.heap_stops" not in conserving and conserving["producers.heap_marking_on_host"] is True
    assert out["producers.send_cpu_us"] == pytest.approx(8.0)  # the rest as without it
    without = split_values(values, split, 2048.0)  # no client heap: nothing to mark
    assert without["producers.host_other_cpu_us"] == pytest.approx(3.6)
    assert "producers.heap_marking_on_host" not in without and "producers.heap_stops" not in without


def test_a_bad_summary_names_its_file() -> None:
    groups = {g: {"us_per_send": 1.0} for g in (*CLIENT_GROUPS.values(), *BROKER_GROUPS.values())}
    with pytest.raises(MeasurementError, match="runs/x.summary.json: expected a per-thread run's groups"):
        thread_split(json.dumps({"groups": groups}), "runs/x.summary.json")  # no window_means
    groups["broker/broker reput"] = {"us_per_send": 0.0}
    with pytest.raises(MeasurementError, match="y.json: expected every client and broker thread group"):
        means = {g: [0.1, 1.0, 0.5] for g in OTHER_GROUPS}
        thread_split(json.dumps({"groups": groups, "window_means": means}), "y.json")


@pytest.mark.parametrize("split", [False, True])
def test_the_split_reaches_the_scenario_with_the_option_only(
    split: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the first simulation is stopped once its scenario is built, to see what the command hands it
    runs = [str(DATA / n) for n in ("a_low_async", "b_ramp_async_p1", "a_low_sync")]
    argv = [*runs, "--calibrate-from", "a_low_async", "--calibrate-from", "b_ramp_async_p1"]
    sc = first_scenario(monkeypatch, [*argv, "--thread-split"] if split else argv)
    p, store = sc.producers, sc.brokers["default"].store
    if not split:
        assert p.netty_write_cpu_share == 0 and p.host_other_cpu_us == 0 and store.codec_share == 0
        assert not p.heap_marking_on_host and p.heap_stops == "host" and p.host_counts == "pieces"
        return
    assert p.netty_write_cpu_share == pytest.approx(0.272, abs=1e-3) and p.host_other_threads == 2
    assert store.codec_share == pytest.approx(0.486, abs=1e-3) and p.host_other_cpu_us > 0
    assert p.heap_marking_on_host  # the validation's client heap: G1's marking on the host
    assert p.heap_stops == "client_left"  # and its pauses stop the client's JVM only
    assert p.host_counts == "threads"  # the fair host counts threads beside a piece, not pieces
    # the dispatcher's part on neither the executor's threads nor a submitting thread: with the others'
    assert p.submit_cpu_share == 0


# the validation's calibration from a_low_async and b_ramp_async_p1 (`python -m rocketsim.validation`), the
# values that set the host: the CPU a send (the stalls' share taken off), the stalls and the client's heap
CALIBRATED = {
    "producers.send_cpu_us": 12.621,
    "brokers.default.store.io_us": 4.625,
    "brokers.default.store.append_us": 4.406,
    "producers.host_stall_every": 3078.2,
    "producers.host_stall_ms": 11.086,
    "producers.heap_mb": 1024,
    "producers.heap_pending_kib": 3.05,
    "producers.heap_pause_us": 3000.0,
    "producers.heap_alloc_kib": 9.324,
    "producers.heap_copy_us_per_kib": 0.528,
    "producers.heap_full_us_per_kib": 0.633,
    "producers.heap_pause_goal_ms": 200.0,
}


def waits_by_thread(
    split: bool, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, list[float]], np.ndarray, list]:
    """c_overload's first 0.4 s at 72,000/s after 0.2 s at 10,000/s: each client Netty thread's pieces'
    queue waits (us, in the order placed), each send's wait before its first request (ms, in due order)
    and the failures' error texts."""
    from dataclasses import replace

    from rocketsim.client import host
    from rocketsim.engine import simulate
    from rocketsim.scenario.workload import generate
    from rocketsim.validation.scenario import request_bytes, run_scenario
    from rocketsim.warehouse.measured_runs import read_run

    waits: dict[str, list[float]] = {"worker": [], "selector": []}
    on = host.ClientThreads._on

    free: list[float] = []
    place = host.FairShareHost.place

    def placed(self, ready_us, work_us, thread=None):  # type: ignore[no-untyped-def]
        free.append(ready_us)  # when the Netty thread is free for the piece (ClientThreads._on)
        return place(self, ready_us, work_us, thread)

    def traced(self, name, ready_us, work_us):  # type: ignore[no-untyped-def]
        free.clear()
        end = on(self, name, ready_us, work_us)
        if free:  # the thread's queue: from ready to when the thread is free for the piece
            waits[name].append(free[0] - ready_us)
        return end

    monkeypatch.setattr(host.FairShareHost, "place", placed)
    monkeypatch.setattr(host.ClientThreads, "_on", traced)
    run = read_run(DATA / "c_overload_async_p2_72000")
    steps = ((10_000, 0.2), (72_000, 0.4))
    cut = replace(run, meta=replace(run.meta, steps=steps, n=int(sum(r * s for r, s in steps))))
    # the threads alone: the collections stop the host as without the split (client_stops=False), so that
    # only where a send's CPU runs differs (with the client's JVM paused alone its executor threads wait
    # out the longer pauses too: docs/validation.md, "The collector's cost under the in-flight backlog")
    split_keys = split_values(CALIBRATED, read_thread_split(), request_bytes(run), client_stops=False)
    values = split_keys if split else CALIBRATED
    sc = run_scenario(cut, values, seed=1)
    out = simulate(generate(sc), sc)
    a, r = out.attempts, out.results
    first = np.asarray(a["attempt"]) == 0
    due = dict(zip(r["seq"].to_pylist(), r["born_ts_ms"].to_pylist(), strict=True))
    seqs = np.asarray(a["seq"])[first]
    before = np.asarray(a["start_ts_ms"], np.float64)[first] - np.array([due[q] for q in seqs], np.float64)
    order = np.argsort([due[q] for q in seqs], kind="stable")
    errors = [e for e in r["error"].to_pylist() if e] if "error" in r.column_names else []
    return waits, before[order], errors


def test_with_the_split_the_backlog_waits_on_the_client_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    # rocketmq-all-4.9.8 NettyRemotingClient.start: NettyEncoder, NettyDecoder and NettyClientHandler on
    # defaultEventExecutorGroup (a channel's one NettyClientWorkerThread_), so invokeAsyncImpl's
    # channel.writeAndFlush from the executor's thread, after the permit and the ResponseFuture, queues a
    # write task on the worker (netty 4.1.65 AbstractChannelHandlerContext.write: a WriteTask, never refused)
    # and processResponseCommand runs there too, behind it. Measured (ov_72000): the worker the one thread
    # runnable all the time, the executor threads 0.37-0.41, the broker's threads waiting for requests
    # A Netty thread runs one piece at a time: its pieces queue as long as they run on the host, so its
    # selector (3.4 us a send in the model, a constant: the measured fell to 2.0 under the backlog, one read
    # taking many answers) queues too; the sends' wait before the request (the executor's) stays under them
    waits, before, errors = waits_by_thread(True, monkeypatch)
    late = len(waits["worker"]) * 3 // 4  # the pieces of the last ~0.1 s
    worker = np.median(waits["worker"][late:])
    tail = slice(len(before) * 9 // 10, None)
    assert worker > 5_000 and np.median(before[tail]) * 1000 < worker  # us
    assert not any("[OVERLOAD]" in e or "[TIMEOUT_CLEAN_QUEUE]" in e for e in errors)
    # without the split the executor's thread does all of a send's client CPU: the backlog waits before the
    # request, in the executor queues, and no Netty thread of the model queues
    waits_without, before_without, _ = waits_by_thread(False, monkeypatch)
    assert waits_without == {"worker": [], "selector": []}
    assert np.median(before_without[tail]) > 2 * np.median(before[tail])


def test_the_dispatchers_cpu_runs_beside_the_sends_not_on_the_executors_threads() -> None:
    # The application calls send on a thread of its own (rocketmq-all-4.9.8 DefaultMQProducerImpl.send(msg,
    # callback, timeout): the executor.submit in the caller's thread; the harness's dispatcher, which called
    # every send of c_overload within 22 ms of its due time): its CPU a send (2.0 us of r40_40000's 13.854 on
    # the client) is not the executor's, whose threads then take the sends at their own measured cost (the
    # executor's 2.33 us: the 4.33 with the dispatcher's made them, not the permits, the queue of the
    # model's overloaded client). It runs with the host's other threads, the total a send kept
    split = ThreadSplit({"producers.callback_cpu_share": 0.1}, 0.5, {}, 0.2, 2, dispatcher_share=0.25)
    values = {"producers.send_cpu_us": 10.0, "brokers.default.store.io_us": 4.0}
    values["brokers.default.store.append_us"] = 2.0
    out = split_values(values, split, 2048.0)
    assert out["producers.send_cpu_us"] == pytest.approx(10.0 * 0.8 * 0.75)  # the sends' own threads
    assert out["producers.host_other_cpu_us"] == pytest.approx(18.0 * 0.2 + 10.0 * 0.8 * 0.25)
    total = sum(float(out[k]) * (2.0 if k.endswith("append_us") else 1.0) for k in CPU_KEYS)
    assert total + float(out["producers.host_other_cpu_us"]) == pytest.approx(18.0)
    # the shipped split: the executor's part of the sends' own threads is the executor's measured 2.329
    shipped = read_thread_split()
    client = shipped.client
    on_executor = 1.0 - sum(
        client[f"producers.{k}_cpu_share"] for k in ("netty_write", "netty_read", "callback")
    )
    assert on_executor * (1.0 - shipped.dispatcher_share) * 13.854 == pytest.approx(2.329, abs=1e-2)
