"""Scenario files: defaults, overrides, and bad input that fails fast naming key, rule and value."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rocketsim.client.versions import AsyncBackpressure
from rocketsim.engine import simulate_producer
from rocketsim.scenario import (
    Scenario,
    ScenarioError,
    apply_overrides,
    load_scenario,
    parse_override,
    scenario_from_mapping,
    workload,
)

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "conf" / "scenarios").glob("*.toml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_shipped_scenarios_load_and_say_what_they_answer(path: Path) -> None:
    sc = load_scenario(path)
    assert sc.name == path.stem
    assert "Question:" in sc.source_text
    assert sc.workload.total_messages() > 0


def _publish_delay_p99_outside_faults(sc: Scenario) -> float:
    """The queue-wait (publish delay) p99 of the messages born outside every fault window."""
    waits, born = [], []
    for share in workload.producer_shares(sc):
        results = simulate_producer(workload.generate(sc, [share.producer]), sc).results
        waits.append(np.asarray(results.column("queue_wait_ms")))
        born.append(np.asarray(results.column("born_ts_ms")))
    w, b = np.concatenate(waits), np.concatenate(born)
    inside = np.zeros(len(b), bool)
    for f in sc.faults:
        inside |= (b >= f.start_s * 1000) & (b < f.end_s * 1000)
    return float(np.percentile(w[~inside], 99))


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_shipped_scenarios_do_not_saturate_healthy_producers(path: Path) -> None:
    # outside fault windows a healthy producer's sender threads keep up: publish delay p99 under 10 ms
    # (with one thread, or partitioned threads, brownout.toml gave 44 s at 2M messages, steady.toml 1.7 s)
    assert _publish_delay_p99_outside_faults(load_scenario(path)) < 10


@pytest.mark.parametrize("name", ["steady", "brownout"])
def test_shipped_scenarios_do_not_saturate_at_2m_messages(name: str) -> None:
    sc = load_scenario(ROOT / "conf" / "scenarios" / f"{name}.toml", ["workload.messages=2000000"])
    assert _publish_delay_p99_outside_faults(sc) < 10


def test_shipped_set_is_complete() -> None:
    names = {p.stem for p in SCENARIOS}
    assert {"steady", "broker_outage", "brownout", "flapping", "hung_broker"} <= names


def test_defaults_are_default_mq_producer_defaults() -> None:
    p = scenario_from_mapping({}).producers
    assert (p.send_msg_timeout_ms, p.retry_times_when_send_failed, p.retry_times_when_send_async_failed) == (
        3000,
        2,
        2,
    )
    assert p.send_latency_fault_enable is False
    assert (p.compress_msg_body_over_howmuch, p.max_message_size, p.default_topic_queue_nums) == (
        4096,
        4_194_304,
        4,
    )
    assert p.retry_another_broker_when_not_store_ok is False
    assert p.threads == 1 and p.sender_model == "pool"
    assert p.connect_timeout_ms == 3000  # NettySystemConfig.connectTimeoutMillis
    assert p.connect_ms == 0  # a new channel connects in no time unless the scenario says how long
    # DefaultMQProducerImpl's async sender executor and ClientConfig.clientCallbackExecutorThreads are
    # availableProcessors() upstream (rocketmq-all-4.9.8 and 5.3.3, DefaultMQProducerImpl's constructor,
    # NettyClientConfig.clientCallbackExecutorThreads): the host's processors, a fixed default here, never
    # the simulating machine's; its queue is new LinkedBlockingQueue<Runnable>(50000) in both
    assert p.processors == 4 and (p.executor_threads, p.callback_threads) == (4, 4)
    assert p.async_sender_queue == 50_000 and p.send_cpu_us == 0.0 and p.shared_host is False
    two = scenario_from_mapping({"name": "x", "producers": {"processors": 2, "callback_executor_threads": 3}})
    assert (two.producers.executor_threads, two.producers.callback_threads) == (2, 3)


@pytest.mark.parametrize(
    ("coupling", "producers", "store", "line"),
    [
        (
            "iterative",
            {"shared_host": True},
            {},
            "producers.shared_host must be false unless brokers.coupling is joint (one loop for the host's "
            "producers and brokers), got true",
        ),
        (
            "joint",
            {},
            {"on_producer_host": True},
            "brokers.default.store.on_producer_host needs producers.shared_host = true, got true",
        ),
        (
            "iterative",
            {},
            {"io_us": 20.0},
            "brokers.default.store.io_us needs brokers.coupling = joint (the iterative rounds do not model a "
            "connection's reads), got 20.0",
        ),
        (
            "iterative",
            {},
            {"reply_us": 5.0},
            "brokers.default.store.reply_us needs brokers.coupling = joint (the iterative rounds do not "
            "model a connection's reads), got 5.0",
        ),
    ],
)
def test_the_hosts_settings_are_refused_where_the_loop_cannot_run_them(
    coupling: str, producers: dict, store: dict, line: str
) -> None:
    raw = {"producers": producers, "brokers": {"coupling": coupling, "default": {"store": store}}}
    with pytest.raises(ScenarioError) as info:
        scenario_from_mapping(raw)
    assert str(info.value) == line
    raw["brokers"]["coupling"] = "joint"  # the joint loop runs them all (a broker on a shared host)
    raw["producers"] = {"shared_host": True}
    scenario_from_mapping(raw)


@pytest.mark.parametrize(("version", "send_num"), [("5.2.0", 10_000), ("5.3.3", 10_000), ("5.x", 1024)])
def test_async_backpressure_settings_default_to_the_versions(version: str, send_num: int) -> None:
    # DefaultMQProducer field initialisers: enableBackpressureForAsyncMode = false,
    # backPressureForAsyncSendNum = 10000 up to 5.3.3 (1024 on develop), backPressureForAsyncSendSize =
    # 100 * 1024 * 1024; inert unless enabled (DefaultMQProducerImpl.executeAsyncMessageSend takes the
    # semaphores only then)
    p = scenario_from_mapping({"producers": {"client_version": version}}).producers
    assert p.async_backpressure == AsyncBackpressure(False, send_num, 100 * 1024 * 1024)
    given = {"back_pressure_for_async_send_num": 50, "back_pressure_for_async_send_size": 2 * 1024 * 1024}
    p = scenario_from_mapping({"producers": {"client_version": version, **given}}).producers
    assert p.async_backpressure == AsyncBackpressure(False, 50, 2 * 1024 * 1024)
    off = {"client_version": version, "enable_backpressure_for_async_mode": False}
    assert (
        scenario_from_mapping(
            {"producers": off}
        ).producers.async_backpressure.enable_backpressure_for_async_mode
        is False
    )  # type: ignore[union-attr]
    assert scenario_from_mapping({}).producers.async_backpressure is None  # 4.9.8: no such settings


@pytest.mark.parametrize(
    "setting",
    [
        "enable_backpressure_for_async_mode=false",
        "back_pressure_for_async_send_num=10000",
        "back_pressure_for_async_send_size=104857600",
    ],
)
def test_async_backpressure_settings_are_refused_on_4x(setting: str) -> None:
    raw = apply_overrides({"producers": {"client_version": "4.9.8"}}, [f"producers.{setting}"])
    with pytest.raises(ScenarioError) as info:
        scenario_from_mapping(raw)
    name = setting.split("=")[0]
    assert str(info.value) == (
        f"producers.{name} exists only in 5.x clients (DefaultMQProducer 5.0.0 and later), "
        "not in client_version 4.9.8"
    )


def test_async_backpressure_is_refused_for_grpc_and_a_short_executor_queue() -> None:
    # DefaultMQProducerImpl.executeAsyncMessageSend: with backpressure on, a RejectedExecutionException
    # runs the send in the caller's thread (not modelled): the queue must hold every permitted send
    with pytest.raises(ScenarioError) as info:
        scenario_from_mapping(
            {
                "producers": {
                    "client_version": "5.3.3",
                    "enable_backpressure_for_async_mode": True,
                    "async_sender_queue": 100,
                }
            }
        )
    assert str(info.value) == (
        "producers.async_sender_queue must be at least the backpressure's send permits (10000) with "
        "enable_backpressure_for_async_mode (a rejected send runs in the caller's thread: not modelled), "
        "got 100"
    )
    sc = scenario_from_mapping(
        {"producers": {"client_version": "5.3.3", "enable_backpressure_for_async_mode": True}}
    )
    assert sc.producers.async_backpressure.enable_backpressure_for_async_mode


def test_overrides_set_nested_keys_and_list_items() -> None:
    raw = {
        "workload": {"messages": 10},
        "faults": [{"broker": "broker-a", "kind": "outage", "start_s": 1, "end_s": 2}],
    }
    out = apply_overrides(
        raw,
        [
            "seed=7",
            "workload.messages=200000",
            "faults.0.end_s=9.5",
            "producers.client_version=5.3.3",
            "producers.send_latency_fault_enable=true",
        ],
    )
    sc = scenario_from_mapping(out)
    assert sc.seed == 7 and sc.workload.messages == 200_000 and sc.faults[0].end_s == 9.5
    assert sc.producers.client_version == "5.3.3" and sc.producers.send_latency_fault_enable is True
    assert raw["workload"]["messages"] == 10  # the input is not mutated


def test_override_value_falls_back_to_string() -> None:
    assert parse_override("producers.group=my_group") == ("producers.group", "my_group")
    assert parse_override('workload.topics=["A","B"]') == ("workload.topics", ["A", "B"])


BAD = [
    ({"nope": 1}, "nope is not a known key"),
    ({"producers": {"cuont": 2}}, "producers.cuont is not a known key"),
    ({"seed": "x"}, "seed must be an integer, got 'x'"),
    ({"seed": 1.5}, "seed must be an integer, got 1.5"),
    ({"producers": {"count": 0}}, "producers.count must be between 1 and 100000, got 0"),
    ({"producers": {"send_msg_timeout_ms": -5}}, "producers.send_msg_timeout_ms must be > 0, got -5"),
    ({"producers": {"retry_times_when_send_failed": -1}}, "producers.retry_times_when_send_failed must be"),
    ({"producers": {"send_latency_fault_enable": "yes"}}, "must be true or false, got 'yes'"),
    ({"producers": {"client_version": "4.2.0"}}, "client_version must be a release from 4.3.0 to 5.3.3"),
    ({"producers": {"client_version": "5.4.0"}}, "client_version must be a release from 4.3.0 to 5.3.3"),
    ({"producers": {"client_version": "five"}}, "producers.client_version must look like"),
    ({"producers": {"send_mode": {"sync": 0}}}, "producers.send_mode weights must add up to more than 0"),
    ({"producers": {"send_mode": {"burst": 1}}}, "producers.send_mode.burst is not a known key"),
    ({"producers": {"compress_type": "GZIP"}}, "producers.compress_type must be one of ZLIB, LZ4, ZSTD"),
    ({"cluster": {"brokers": []}}, "cluster.brokers must name at least one broker"),
    ({"cluster": {"brokers": ["a", "a"]}}, "cluster.brokers must not repeat a broker name"),
    ({"cluster": {"write_queues": 0}}, "cluster.write_queues must be between 1 and 1024, got 0"),
    ({"workload": {"messages": -1}}, "workload.messages must be >= 0, got -1"),
    ({"workload": {"rate_per_s": 0}}, "workload.rate_per_s must be > 0, got 0"),
    ({"workload": {"topics": ["bad topic!"]}}, "workload.topics[0] is not a topic the client accepts"),
    ({"workload": {"topics": ["SCHEDULE_TOPIC_XXXX"]}}, "workload.topics[0]"),
    ({"workload": {"topics": "TopicTest"}}, "workload.topics must be a list of str"),
    ({"workload": {"body_size": {"min": 10, "max": 5}}}, "workload.body_size.min must be <="),
    ({"workload": {"compressibility": 1.5}}, "workload.compressibility must be between 0 and 1, got 1.5"),
    ({"workload": {"invalid": {"bad_topic": 0.7, "empty_body": 0.7}}}, "fractions must add up to at most 1"),
    ({"workload": {"delay_levels": [0]}}, "workload.delay_levels[0] must be >= 1, got 0"),
    ({"workload": {"hot_share": 1.0}}, "workload.hot_share must be >= 0 and < 1, got 1.0"),
    (
        {"producers": {"count": 2}, "workload": {"hot_share": 0.5, "hot_producers": 2}},
        "workload.hot_producers must be < producers.count (2) when workload.hot_share > 0, got 2",
    ),
    ({"brokers": {"broker-z": {}}}, "brokers.broker-z must be 'default' or a broker of cluster.brokers"),
    (
        {"brokers": {"default": {"latency": {"median_ms": 0}}}},
        "brokers.default.latency.median_ms must be > 0",
    ),
    (
        {"brokers": {"default": {"errors": {"system_busy": -0.1}}}},
        "brokers.default.errors.system_busy must be",
    ),
    (
        {"faults": [{"broker": "broker-z", "kind": "outage", "start_s": 1, "end_s": 2}]},
        "faults[0].broker must name a broker of cluster.brokers, got 'broker-z'",
    ),
    (
        {"faults": [{"broker": "broker-a", "kind": "outage", "start_s": 5, "end_s": 2}]},
        "faults[0].end_s must be after start_s (5.0), got 2.0",
    ),
    (
        {"faults": [{"broker": "broker-a", "kind": "meteor", "start_s": 1, "end_s": 2}]},
        "faults[0].kind must be one of outage",
    ),
    ({"faults": [{"broker": "broker-a", "kind": "outage", "end_s": 2}]}, "faults[0].start_s is required"),
    (
        {
            "faults": [
                {"broker": "broker-a", "kind": "outage", "start_s": 1, "end_s": 10},
                {"broker": "broker-a", "kind": "hang", "start_s": 5, "end_s": 20},
            ]
        },
        "faults[1] must not overlap faults[0]",
    ),
    (
        {
            "faults": [
                {
                    "broker": "broker-a",
                    "kind": "flapping",
                    "start_s": 1,
                    "end_s": 100,
                    "period_s": 10,
                    "down_s": 10,
                }
            ]
        },
        "faults[0].down_s must be shorter than period_s",
    ),
    ({"faults": {"broker": "broker-a"}}, "faults must be an array of tables"),
    (
        {"producers": {"client_version": "5.3.3", "back_pressure_for_async_send_num": 9}},
        "producers.back_pressure_for_async_send_num must be >= 10 (DefaultMQProducerImpl raises smaller",
    ),
    (
        {"producers": {"client_version": "5.3.3", "back_pressure_for_async_send_size": 1048575}},
        "producers.back_pressure_for_async_send_size must be >= 1048576",
    ),
    (
        {"producers": {"client_version": "5.3.3", "enable_backpressure_for_async_mode": "yes"}},
        "producers.enable_backpressure_for_async_mode must be true or false, got 'yes'",
    ),
]


@pytest.mark.parametrize(("raw", "message"), BAD, ids=[m for _, m in BAD])
def test_bad_scenarios_name_key_rule_and_value(raw: dict, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        scenario_from_mapping(raw)
    assert message in str(info.value)


def test_at_least_twenty_bad_cases() -> None:
    assert len(BAD) >= 20


def test_bad_toml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("seed = = 3\n")
    with pytest.raises(ScenarioError, match="is not valid TOML"):
        load_scenario(bad)
    with pytest.raises(ScenarioError, match="cannot be read"):
        load_scenario(tmp_path / "missing.toml")


def test_a_byte_order_mark_is_accepted_and_deep_nesting_refused(tmp_path: Path) -> None:
    marked = tmp_path / "bom.toml"  # some Windows editors start UTF-8 files with EF BB BF
    marked.write_bytes(b"\xef\xbb\xbfname = 'bom'\nseed = 5\n")
    sc = load_scenario(marked)
    assert (sc.name, sc.seed) == ("bom", 5) and not sc.source_text.startswith("\ufeff")
    deep = "{a = " * 2000 + "1" + "}" * 2000
    (tmp_path / "deep.toml").write_text(f"x = {deep}\n")
    with pytest.raises(ScenarioError, match="nests tables or arrays too deeply"):
        load_scenario(tmp_path / "deep.toml")
    with pytest.raises(ScenarioError, match="--set x nests tables or arrays too deeply"):
        parse_override(f"x={deep}")


def test_bad_override_is_a_scenario_error() -> None:
    with pytest.raises(ScenarioError, match="must look like key.path=value"):
        parse_override("seed")


def test_job_fails_fast_with_exit_2_and_leaves_no_trace(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "jobs" / "pipeline.py"),
            "--scenario",
            str(SCENARIOS[0]),
            "--warehouse",
            str(warehouse),
            "--set",
            "producers.count=0",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert "producers.count must be between 1 and 100000, got 0" in done.stderr
    assert "Traceback" not in done.stderr
    assert not warehouse.exists()


def test_run_id_defaults_to_name_and_seed() -> None:
    assert Scenario(name="brownout", seed=11).run_id == "brownout-s11"


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        (
            {"faults": [{"broker": "broker-a", "kind": "paused", "start_s": 1.0, "end_s": 2.0}]},
            "faults[0].kind must not be paused with client_family grpc (not modelled for it), got 'paused'",
        ),
        (
            {"producers": {"send_cpu_us": 5.0}},
            "producers.send_cpu_us must be 0 with client_family grpc (the client's CPU per send is modelled "
            "for remoting only), got 5.0",
        ),
        (
            {"producers": {"connect_ms": 3}},
            "producers.connect_ms must be 0 with client_family grpc (a new channel's connect is modelled "
            "for remoting only), got 3",
        ),
    ],
)
def test_the_client_capacity_and_pause_models_are_refused_for_grpc(extra: dict, line: str) -> None:
    grpc = {"client_family": "grpc", "client_version": "java-5.2.1"}
    raw = {**extra, "producers": {**grpc, **extra.get("producers", {})}}
    with pytest.raises(ScenarioError) as info:
        scenario_from_mapping(raw)
    assert str(info.value) == line
    scenario_from_mapping(
        {**raw, "producers": {**raw["producers"], "client_family": "remoting", "client_version": "5.3.3"}}
    )
