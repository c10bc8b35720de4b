"""The validation command's parts (docs/validation.md): the harness's outcome classes from rocketsim's own
texts, the run folders of tests/data/realbroker read back, the figures both sides are reduced to, and the
report."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from validate_scenarios import first_scenario

from rocketsim.client.send import (
    ClientError,
    MQBrokerError,
    RemotingTooMuchRequestError,
    async_call_timeout_error,
    invoke_async_timeout_error,
    send_failed_error,
)
from rocketsim.client.versions import parse_version
from rocketsim.engine.plan import error_text
from rocketsim.errors import MeasurementError
from rocketsim.validation.calibrate import peak_step, saturation, step_latencies
from rocketsim.validation.classes import NOT_DONE, SEND_OK, outcome_class
from rocketsim.validation.compare import due_latency_ms, measured_metrics, per_second, simulated_metrics
from rocketsim.validation.measured import parse_meta, parse_steps, stored_copies
from rocketsim.warehouse.measured_runs import read_run, run_folders

DATA = Path(__file__).parent / "data" / "realbroker"
# our own runs of the harness's other schedules (run_all.sh's b_ramp_async_p2, b_ramp_sync_t64,
# f_stop5s_async, a_low_async_r2): tests/data/realbroker-reruns/heldout/README.md
HELDOUT = DATA.parent / "realbroker-reruns" / "heldout"
SECOND_HOST = DATA.parent / "realbroker-reruns" / "second_host" / "runs"
V = parse_version("4.9.8")
FAQ = V.faq_url


def klass(err: BaseException) -> str:
    return outcome_class("FAILED", error_text(err))


def test_the_harness_classes_of_rocketsims_own_texts() -> None:
    # the harness's pack.py files a send by the broker's tag in the remark first, then by the client's texts
    overload = MQBrokerError(2, "[OVERLOAD]system busy, start flow control for a while", "broker-a", V)
    swept = MQBrokerError(
        2,
        "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: 203ms, "
        "size of queue: 9660",
        "broker-a",
        V,
    )
    assert klass(overload) == "OVERLOAD" and klass(swept) == "TIMEOUT_CLEAN_QUEUE"
    # DefaultMQProducerImpl.send(msg, callback, timeout): executor.submit's RejectedExecutionException
    assert klass(ClientError("executor rejected ", FAQ)) == "executor_rejected"
    assert klass(invoke_async_timeout_error("broker-a", V.line)) == "invokeAsync_timeout"
    assert klass(async_call_timeout_error(False)) == "async_call_timeout"
    assert (
        klass(RemotingTooMuchRequestError("sendDefaultImpl call timeout")) == "sendDefaultImpl_call_timeout"
    )
    failed = send_failed_error(3, 3004, "BenchTopic", ["broker-a"] * 3, None, V)
    assert klass(failed) == "send_times_still_failed"
    assert outcome_class("SEND_OK", None) == "SEND_OK"
    # a not-OK store status has no exception (LoadDriver.record: err stays null): pack.py's class is the
    # status, a colon and no remark, as NOT_DONE's is
    assert outcome_class("FLUSH_DISK_TIMEOUT", None) == "FLUSH_DISK_TIMEOUT:"
    assert outcome_class("NOT_DONE", None) == NOT_DONE == "NOT_DONE:"
    # anything else: the simple class and the start of the remark, commas made safe as the harness does
    other = klass(MQBrokerError(14, "service not available, now, really", "broker-a", V))
    assert other == "MQBrokerException:service not available; now; really"


def test_every_class_the_runs_recorded_is_one_rocketsim_can_name() -> None:
    names = {"SEND_OK", "OVERLOAD", "TIMEOUT_CLEAN_QUEUE", "executor_rejected", "invokeAsync_timeout"}
    names |= {"sendDefaultImpl_call_timeout", "send_times_still_failed"}
    seen = {c for p in run_folders([str(DATA)]) for c in read_run(p).outcomes}
    assert seen <= names


def test_the_harness_other_schedules_read_back_and_build_their_scenarios() -> None:
    from rocketsim.validation.scenario import run_scenario

    runs = {p.name: read_run(p) for p in run_folders([str(HELDOUT)])}
    assert set(runs) >= {"a_low_async_r2", "b_ramp_async_p2", "b_ramp_sync_t64", "f_stop5s_async_warm"}
    # every class they recorded is one rocketsim names the same way (invokeAsyncImpl's "invoke too fast" is
    # the harness's fallback class: the exception's simple name and its remark)
    too_fast = "RemotingTooMuchRequestException:invokeAsyncImpl invoke too fast"
    known = {"SEND_OK", "OVERLOAD", "TIMEOUT_CLEAN_QUEUE", "executor_rejected", "invokeAsync_timeout"}
    known |= {"async_call_timeout", "sendDefaultImpl_call_timeout", "send_times_still_failed", too_fast}
    assert {c for r in runs.values() for c in r.outcomes} <= known
    assert klass(RemotingTooMuchRequestError("invokeAsyncImpl invoke too fast")) == too_fast
    # sync with 64 sender threads: the pool is the scenario's sender threads, one producer
    sync = runs["b_ramp_sync_t64"]
    assert (sync.meta.mode, sync.meta.threads, sync.meta.producers) == ("sync", 64, 1)
    sc = run_scenario(sync, {})
    assert sc.producers.threads == 64 and sc.producers.count == 1 and sc.producers.send_mode == {"sync": 1.0}
    # two producers, seven steps: the async sends are submitted by one dispatcher (one thread a producer)
    p2 = runs["b_ramp_async_p2"]
    assert p2.meta.producers == 2 and len(p2.meta.steps) == 7 and p2.meta.steps[-1] == (90000.0, 6.0)
    sc = run_scenario(p2, {})
    assert sc.producers.count == 2 and sc.producers.threads == 1 and sc.workload.messages == p2.meta.n
    # an async run with the broker stopped (kill -STOP) and --drain-ms 12000: the pause from fault.txt via
    # summary.json, the drain not in meta.json (every send completed within it)
    stop = runs["f_stop5s_async_warm"]
    assert stop.meta.mode == "async" and stop.fault == (5.008, 10.012)
    ((fault),) = run_scenario(stop, {}).faults
    assert (fault.kind, fault.start_s, fault.end_s) == ("paused", 5.008, 10.012)
    assert sum(stop.outcomes.values()) == stop.meta.n == 12_500


def test_a_pause_is_read_from_fault_txt_when_the_summary_lacks_it(tmp_path: Path) -> None:
    # run_load.sh writes "STOP <epoch ms>" / "CONT <epoch ms>" to fault.txt; analyze.py places them after
    # meta.json's t0_epoch_ms in summary.json's "fault", which pack.py copies (the file itself it leaves out)
    import shutil

    run = tmp_path / "f_stop5s_async"
    shutil.copytree(HELDOUT / "f_stop5s_async_warm", run)
    summary = json.loads((run / "summary.json").read_text())
    assert summary.pop("fault") == {"stop_at_s": 5.008, "cont_at_s": 10.012}
    (run / "summary.json").write_text(json.dumps(summary))
    assert read_run(run).fault == (5.008, 10.012)  # from fault.txt
    (run / "fault.txt").write_text("STOP 1795921121333\nCONT soon\n")
    with pytest.raises(MeasurementError, match=r"fault\.txt line 2: expected 'STOP <epoch ms>'"):
        read_run(run)
    (run / "fault.txt").unlink()
    assert read_run(run).fault is None


def test_the_runs_read_back_as_the_harness_summarised_them() -> None:
    runs = {p.name: read_run(p) for p in run_folders([str(DATA)])}
    assert len(runs) == 6
    c = runs["c_overload_async_p2_72000"]
    assert c.meta.steps == ((10000.0, 5.0), (72000.0, 20.0)) and c.meta.producers == 2
    assert c.meta.mode == "async" and c.meta.timeout_ms == 3000 and c.meta.retries == 2
    assert sum(c.outcomes.values()) == c.meta.n == 1_490_000
    assert c.ok_share == pytest.approx(0.4804, abs=5e-5)  # summary.txt: 48% OK
    assert c.ok_latency_ms["p50"] == 2392.643 and c.ok_latency_ms["p99"] == 4748.118
    f = runs["f_stop5s_sync"]
    assert f.fault == (5.009, 10.013) and f.meta.threads == 16 and f.meta.mode == "sync"
    ramp = runs["b_ramp_async_p1"]
    assert ramp.step_completions[-1] == 68787.3 and len(ramp.meta.steps) == 6
    edges, counts = runs["a_low_async"].ok_hist
    assert edges.size == counts.size + 1 and counts.sum() == 10_000


def test_the_capacity_is_the_ramps_peak_goodput_not_its_collapse() -> None:
    # the shipped ramp saturates in its last step: that step's completions, as before
    ramp = read_run(DATA / "b_ramp_async_p1")
    assert peak_step(ramp) == 5 and saturation(ramp).msgs_per_s == 68787.3  # type: ignore[union-attr]
    assert len(step_latencies(ramp, 68787.3)) == 6
    # the second host's ramp (the same schedule) saturates at 50,000/s and collapses past it: its OK
    # completions fall to 25,992 and 13,664 a second at 60,000 and 70,000/s (summary.json's per_step;
    # no send due at 70,000/s was OK); the knee's step is the capacity
    knee = read_run(SECOND_HOST / "bramp")
    assert knee.step_completions[3:] == (47768.3, 25991.8, 13663.8)
    assert peak_step(knee) == 3 and saturation(knee).msgs_per_s == pytest.approx(47768.3)  # type: ignore[union-attr]
    assert [s.load for s in step_latencies(knee, 47768.3)][-1] == pytest.approx(50000 / 47768.3)
    # a run whose latency never grew through a step says nothing of the capacity
    assert saturation(read_run(DATA / "a_low_async")) is None


def test_stored_copies_come_from_the_runs_pagecachert_windows() -> None:
    runs = {p.name: read_run(p) for p in run_folders([str(DATA)])}
    # 14,517 puts in the window less 2,000 warm-up sends: the 12,500 sends and 17 more copies
    f = measured_metrics(runs["f_stop5s_sync"])
    assert (f.stored, f.duplicates, f.failed_but_stored) == (12_517, 17, 16)
    c = measured_metrics(runs["c_overload_async_p2_72000"])
    assert (c.stored, c.duplicates, c.failed_but_stored) == (1_218_788, 0, 1_218_788 - 715_797)
    # a_low_async's window holds 3,100 puts more than its 10,000 single-RPC sends: not the run's alone
    low = runs["a_low_async"]
    assert low.stored.copies is None and "outside" in low.stored.note
    assert measured_metrics(low).duplicates is None


def test_stored_copies_refuse_a_window_that_cannot_be_the_runs() -> None:
    meta = read_run(DATA / "f_stop5s_sync").meta
    line = (
        "2026-11-27 15:32:18 INFO StoreStatsService - [PAGECACHERT] TotalPut {n}, PutMessageDistributeTime "
        "[<=0ms]:{n} [0~10ms]:0 [10~50ms]:0 [50~100ms]:0 [100~200ms]:0 [200~500ms]:0 [500ms~1s]:0 "
        "[1~2s]:0 [2~3s]:0 [3~4s]:0 [4~5s]:0 [5~10s]:0 [10s~]:0 "
    )
    ok = stored_copies(line.format(n=14_500), "store.log", meta, ok=12_500, rpcs=12_600)
    assert ok.copies == 12_500
    assert stored_copies(line.format(n=14_000), "store.log", meta, ok=12_500, rpcs=12_600).copies is None
    assert stored_copies(line.format(n=15_000), "store.log", meta, ok=12_500, rpcs=12_600).copies is None
    # a run that ended before its minute's window closed: the broker's on-demand lines alone, no count
    px = "2026-11-29 22:06:26 INFO AdminBrokerThread_13 - findPutMessageEntireTimePX 0.99=0.00ms cost 1ms\n"
    early = stored_copies(px * 3, "store.log", meta, ok=12_500, rpcs=12_600)
    assert early.copies is None and "no [PAGECACHERT] line" in early.note


def test_a_bad_run_folder_names_the_file(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for name in ("meta.json", "outcomes.csv", "summary.json", "per_second.csv"):
        (run / name).write_text((DATA / "a_low_sync" / name).read_text())
    meta = json.loads((run / "meta.json").read_text())
    meta["steps"] = "500:x"
    (run / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(MeasurementError, match=r"meta\.json: expected steps as rate:seconds"):
        read_run(run)
    (run / "summary.json").unlink()
    with pytest.raises(MeasurementError, match=r"summary\.json: expected this file"):
        read_run(run)
    with pytest.raises(MeasurementError, match="expected a harness run folder"):
        run_folders([str(tmp_path / "nothing")])
    assert parse_steps("10000:5,72000:20", "x") == ((10000.0, 5.0), (72000.0, 20.0))


def test_the_driver_counts_the_outcomes_its_drain_and_last_sample_after_the_dispatch() -> None:
    # LoadDriver.main: after the dispatch it waits for the outcomes --drain-ms at most (8000 by default;
    # meta.json does not record it), sleeps min(--stats-ms, 1000) + 100 ms for the poller's last sample,
    # then reads each send's status: one with none is NOT_DONE
    low = read_run(DATA / "a_low_async").meta
    assert low.dispatch_end_us == 19_998_086 and low.drain_ms == 8000
    assert low.counted_at_ms == pytest.approx(19_998.086 + 8000 + 1100)
    meta = json.loads((DATA / "a_low_async" / "meta.json").read_text())
    meta["drain_ms"] = 12000  # a driver that records its option
    assert parse_meta(json.dumps(meta), "m.json").counted_at_ms == pytest.approx(19_998.086 + 12000 + 1100)
    del meta["dispatch_end_us"]  # the schedule's end stands for the dispatch's
    assert parse_meta(json.dumps(meta), "m.json").counted_at_ms == pytest.approx(20_000 + 12000 + 1100)


def test_a_send_that_ends_after_the_driver_counted_is_not_done() -> None:
    # the simulated side filed as the harness files its sends: one whose outcome came after the driver read
    # the statuses is NOT_DONE (pack.py "NOT_DONE:"), not OK, and failed but stored if the broker has it
    from dataclasses import replace

    from rocketsim.engine import simulate
    from rocketsim.scenario.workload import generate
    from rocketsim.validation.scenario import run_scenario

    run = read_run(DATA / "a_low_async")
    cut = replace(run, meta=replace(run.meta, steps=((500.0, 1.0),), n=500))
    sc = run_scenario(cut, {}, seed=1)
    messages = generate(sc)
    out = simulate(messages, sc)
    whole = simulated_metrics(messages, out.attempts, out.results)
    assert whole.outcomes == {SEND_OK: 500} and whole.failed_but_stored == 0 and whole.stored == 500
    ends = np.asarray(out.results["born_ts_ms"], np.float64) + due_latency_ms(out.results)
    late = int((ends > 600.0).sum())
    assert 150 < late < 250  # due 0.6-1 s at 500/s, answered in ~0.3 ms
    cut_short = simulated_metrics(messages, out.attempts, out.results, counted_at_ms=600.0)
    assert cut_short.outcomes == {SEND_OK: 500 - late, NOT_DONE: late}
    assert cut_short.ok_share == pytest.approx((500 - late) / 500)
    assert cut_short.failed_but_stored == late and cut_short.stored == 500 and cut_short.duplicates == 0
    assert cut_short.per_second[f"err_{NOT_DONE}"].sum() == late


def test_the_validation_takes_the_scan_timers_expected_phase() -> None:
    # NettyRemotingClient.start's scanResponseTable timer starts with the client, before the driver's
    # warm-up, by a time no run file records: the validation's scenario puts its ticks at x.5 s, the middle
    # of the period (producers.response_scan_offset_ms 500), where a client started at the schedule's 0
    # ticks on whole seconds, 12 ms before this run's broker continues: nearly the most it can fail
    from rocketsim.engine import simulate
    from rocketsim.scenario.workload import generate
    from rocketsim.validation.scenario import RESPONSE_SCAN_OFFSET_MS, run_scenario

    run = read_run(HELDOUT / "f_stop5s_async_warm")
    failed_ends = {}
    for offset in (RESPONSE_SCAN_OFFSET_MS, 0):
        sc = run_scenario(run, {"producers.response_scan_offset_ms": offset})
        r = simulate(generate(sc), sc).results
        failed_ends[offset] = np.asarray(r["end_ts_ms"])[np.asarray(r["status"]) == "FAILED"]
    assert RESPONSE_SCAN_OFFSET_MS == 500 and run_scenario(run, {}).producers.response_scan_offset_ms == 500
    assert set(failed_ends[500] % 1000) == {500} and set(failed_ends[0] % 1000) == {0}
    assert 150 < failed_ends[500].size < 350 < 450 < failed_ends[0].size <= 500


def test_per_second_figures_are_the_harness_columns() -> None:
    second = np.array([0, 0, 0, 1, 1, 2])
    classes = np.array(["SEND_OK", "SEND_OK", "OVERLOAD", "SEND_OK", "executor_rejected", "OVERLOAD"], object)
    latency = np.array([1.0, 3.0, 9.0, 2.0, 0.5, 7.0])
    frame = per_second(second, classes, latency)
    assert frame["scheduled"].tolist() == [3, 2, 1] and frame["ok"].tolist() == [2, 1, 0]
    assert frame["err_OVERLOAD"].tolist() == [1, 0, 1] and frame["err_executor_rejected"].tolist() == [
        0,
        1,
        0,
    ]
    # percentiles of the OK sends only, linear interpolation as the harness's analyze.py
    assert frame["ok_latency_p50_ms"].tolist()[:2] == [2.0, 2.0] and math.isnan(frame["ok_latency_p50_ms"][2])
    assert frame["ok_latency_p99_ms"][0] == pytest.approx(np.percentile([1.0, 3.0], 99))


def test_the_host_part_splits_the_saturated_hosts_cpu_between_client_and_broker() -> None:
    from rocketsim.calibration.calibrate import BROKER_IO_SHARE, Options, calibrate
    from rocketsim.calibration.formats import detect_format, parse_input
    from rocketsim.calibration.measurements import Measurements, Throughput

    text = (DATA / "b_ramp_async_p1" / "cpu.json").read_text()
    assert detect_format(text, "cpu.json") == "cpu"
    (cpu,) = parse_input(text, "cpu.json").cpu
    assert (cpu.client_cpu_s, cpu.broker_cpu_s, cpu.shared_processors) == (37.26, 27.31, 2)
    sat = Throughput("ramp", 68_787.3, saturated=True, request_bytes=1075.0)
    cal = calibrate(Measurements(throughputs=(sat,), cpu=(cpu,)), Options())
    values = cal.values()
    per_send_us = 2 * 1e6 / 68_787.3  # the host's two processors at the rate it sustained
    client = per_send_us * 37.26 / (37.26 + 27.31)
    assert values["producers.send_cpu_us"] == pytest.approx(client)
    broker = per_send_us - client
    assert values["brokers.default.store.io_us"] == pytest.approx(broker * BROKER_IO_SHARE)
    assert values["brokers.default.store.append_us"] == pytest.approx(
        broker * (1 - BROKER_IO_SHARE) * 1024 / 1075
    )
    # the store part leaves append_us to it; without the CPU figures it is the store part's again
    assert [e.key for e in cal.estimates].count("brokers.default.store.append_us") == 1
    alone = calibrate(Measurements(throughputs=(sat,)), Options()).values()
    assert alone["brokers.default.store.append_us"] == pytest.approx(1e6 * 1024 / (68_787.3 * 1075))
    assert "producers.send_cpu_us" not in alone


def test_a_cpu_file_without_the_brokers_seconds_names_itself() -> None:
    from rocketsim.calibration.formats import parse_input

    with pytest.raises(
        MeasurementError, match=r"cpu\.json line 1: expected a JSON object with \"broker_cpu_s\""
    ):
        parse_input('{"driver_cpu_s_in_window": 3.0}', "cpu.json", "cpu")
    with pytest.raises(MeasurementError, match=r"cpu\.json line 1: expected the broker's CPU seconds > 0"):
        parse_input('{"broker_cpu_s": -1, "driver_cpu_s_in_window": 3.0}', "cpu.json", "cpu")


def test_the_report_draws_each_run_and_tabulates_both_sides(tmp_path: Path) -> None:
    from rocketsim.present.validation_report import write_report
    from rocketsim.validation.compare import Metrics, RunComparison

    run = read_run(DATA / "c_overload_async_p2_72000")
    measured = measured_metrics(run)
    frame = measured.per_second.copy()
    frame["ok"] = frame["ok"] * 0.9
    simulated = Metrics(
        run.meta.n,
        0.43,
        {"p50": 2000.0, "p90": 3000.0, "p99": 4000.0, "p999": 4500.0, "max": 5000.0},
        {"SEND_OK": 640_000, "executor_rejected": 300_000, "invokeAsync_timeout": 550_000},
        per_second=frame,
    )
    cmp = RunComparison(run.name, measured, simulated, notes=("a note",))
    table = cmp.table().set_index("figure")
    assert table.loc["outcome invokeAsync_timeout", "measured"] == 510_811
    assert table.loc["outcome invokeAsync_timeout", "sim/meas - 1"] == pytest.approx(550_000 / 510_811 - 1)
    assert cmp.classes()[:3] == ["SEND_OK", "invokeAsync_timeout", "executor_rejected"]
    page = write_report([cmp], tmp_path)
    html = page.read_text()
    assert run.name in html and "a note" in html and "48.0% / 43.0%" in html
    png = (tmp_path / f"{run.name}.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    assert json.loads(json.dumps(cmp.to_json()))["measured"]["outcomes"]["invokeAsync_timeout"] == 510_811


def _spread_runs() -> list[dict[str, str]]:
    """The reruns of f_stop5s_sync's settings on the same harness, the published run first."""
    import csv

    path = DATA.parent / "realbroker-reruns" / "f_stop5s_sync_spread" / "runs.csv"
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def small_runs_validated(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    """The command on the small runs (and our f_stop5s_async), calibrated from a_low_async and
    b_ramp_async_p1 only (~20 s): its JSON document and what it printed."""
    import contextlib
    import io

    from rocketsim.command.validate_options import main

    runs = [DATA / n for n in ("a_low_async", "b_ramp_async_p1", "a_low_sync", "f_stop5s_sync")]
    runs.append(HELDOUT / "f_stop5s_async_warm")  # ~2 s more
    out = tmp_path_factory.mktemp("validation") / "v.json"
    argv = [*map(str, runs), "--calibrate-from", "a_low_async", "--calibrate-from", "b_ramp_async_p1"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main([*argv, "--json", str(out)]) == 0
    return json.loads(out.read_text()), printed.getvalue()


@pytest.mark.slow
def test_the_command_on_the_shipped_runs_meets_the_low_rate_and_pause_targets(
    small_runs_validated: tuple[dict, str],
) -> None:
    # the criteria that the small runs can check in seconds: a_low_sync's p50 and p99 within 25%;
    # f_stop5s_sync (the broker stopped 5 s by SIGSTOP) fails 16 +- 3 sends, and the requests the first
    # timeouts' closes failed (NettyRemotingClient.invokeSync closes the shared channel,
    # NettyRemotingAbstract.failFast fails the other threads' requests) are stored when it continues:
    # duplicates, as the broker stored them
    doc, printed = small_runs_validated
    assert set(doc) == {"a_low_sync", "f_stop5s_sync", "f_stop5s_async_warm"}  # not the calibration runs
    low = doc["a_low_sync"]
    for key in ("ok_p50_ms", "ok_p99_ms"):
        assert low["simulated"][key] == pytest.approx(low["measured"][key], rel=0.25)
    stop = doc["f_stop5s_sync"]
    failed = {
        side: sum(n for c, n in stop[side]["outcomes"].items() if c != "SEND_OK")
        for side in ("measured", "simulated")
    }
    assert failed["measured"] == 16 and abs(failed["simulated"] - 16) <= 3
    assert stop["measured"]["failed_but_stored"] == stop["simulated"]["failed_but_stored"] == 16
    # the real broker stored 10-33 duplicates in five runs of these settings with the client's log at WARN
    # (tests/data/realbroker-reruns/f_stop5s_sync_spread); the model, 0 before the channel was shared
    spread = [int(r["stored_duplicates"]) for r in _spread_runs() if r["client_log"] == "WARN"]
    assert min(spread) <= stop["simulated"]["duplicates"] <= max(spread)
    assert "a_low_sync: OK 100.0% / 100.0%" in printed


@pytest.mark.slow
def test_an_async_pause_fails_what_the_response_scan_removes_before_the_broker_continues(
    small_runs_validated: tuple[dict, str],
) -> None:
    # f_stop5s_async (500/s async, the broker stopped 5 s): every request written in the pause waits in the
    # stopped broker's socket. NettyRemotingAbstract.scanResponseTable (rocketmq-all-4.9.8; run by
    # NettyRemotingClient.start every 1 s from 3 s after the start) removes one once begin + timeout + 1000
    # <= now; MQClientAPIImpl.sendMessageAsync's callback goes to onExceptionImpl, whose retries carry
    # timeoutMillis - cost < 0, which NettyRemotingClient.invokeAsync refuses after its RPC hook
    # ("invokeAsync call the addr[..] timeout"): nothing more written. So the failures are the requests
    # of at most one scan period (which ones: the scan's phase), each stored once when the broker continues,
    # and the others are answered then
    stop = small_runs_validated[0]["f_stop5s_async_warm"]
    assert stop["measured"]["outcomes"] == {"SEND_OK": 12_338, "invokeAsync_timeout": 162}
    for side in ("measured", "simulated"):
        outcomes = stop[side]["outcomes"]
        assert set(outcomes) == {"SEND_OK", "invokeAsync_timeout"}
        assert 0 < outcomes["invokeAsync_timeout"] <= 500 + 10  # a second of the schedule, and in flight
        assert stop[side]["failed_but_stored"] == outcomes["invokeAsync_timeout"]
        assert stop[side]["duplicates"] == 0
        assert 3000 < stop[side]["ok_p99_ms"] < 5000  # answered when the broker continued


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="the real system's own count varies: eight reruns of the same settings stored 4-33 duplicates "
    "(tests/data/realbroker-reruns/f_stop5s_sync_spread), following the connect made during the retries; "
    "with the storm's CPU measured (producers.failure_cpu_us, tests/data/realbroker-reruns/failure_cpu) "
    "slowing that connect to 2-3 ms the model stores 25 at seed 1 (4-25 over seeds 1-8), inside that range "
    "but not within 5 of the published run's 17 (docs/validation.md, \"The storm's own CPU\")",
)
def test_the_pause_stores_as_many_duplicates_as_the_real_broker(
    small_runs_validated: tuple[dict, str],
) -> None:
    # the criterion: f_stop5s_sync's duplicates stored 17 +- 5
    stop = small_runs_validated[0]["f_stop5s_sync"]
    assert stop["measured"]["duplicates"] == 17 and abs(stop["simulated"]["duplicates"] - 17) <= 5


@pytest.mark.parametrize("fit", [False, True])
def test_the_capacity_rounds_and_their_host_run_with_the_option_only(
    fit: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the rounds take minutes (tests/test_host_capacity.py checks their search): here they are replaced by
    # a fit of scale 0.5, and the first simulation is stopped once its scenario is built, to see what the
    # command hands it: the CPU values scaled and the work-conserving host with --fit-host-capacity, the
    # calibrated values and the fair host without
    import rocketsim.command.validate as validate
    from rocketsim.validation.calibrate import CPU_KEYS
    from rocketsim.validation.host_capacity import CapacityFit, CapacityRound

    fits: list[tuple[list[str], dict[str, float], int]] = []

    def capacity_fit(runs, values, seed):
        fits.append(([r.name for r in runs], dict(values), seed))
        return CapacityFit(0.5, 68_787.3, (CapacityRound(1.0, 60_000.0), CapacityRound(0.5, 68_787.3)))

    monkeypatch.setattr(validate, "capacity_fit", capacity_fit)
    runs = [str(DATA / n) for n in ("a_low_async", "b_ramp_async_p1", "a_low_sync")]
    argv = [*runs, "--calibrate-from", "a_low_async", "--calibrate-from", "b_ramp_async_p1", "--seed", "3"]
    sc = first_scenario(monkeypatch, [*argv, "--fit-host-capacity"] if fit else argv)
    assert sc.name == "a_low_sync"
    assert sc.producers.host_scheduler == ("fair_conserving" if fit else "fair")
    if not fit:
        assert fits == []
        return
    ((names, values, seed),) = fits
    assert names == ["a_low_async", "b_ramp_async_p1"] and seed == 3
    assert sc.producers.send_cpu_us == pytest.approx(values["producers.send_cpu_us"] * 0.5)
    assert sc.brokers["default"].store.io_us == pytest.approx(values[CPU_KEYS[1]] * 0.5)
