"""The files a stage's tasks write (:mod:`rocketsim.warehouse.stage_files`), without Spark: they equal the
local oracle (the core functions called directly), a re-run task rewrites the same bytes, a producer's
messages read back from other files give the same tables, and a comparison's producer step writes every
result without a broker step."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from rocketsim import simulate, store, workload
from rocketsim.scenario import Scenario, scenario_from_mapping
from rocketsim.warehouse import stage_files
from rocketsim.warehouse.files import write_parquet
from rocketsim.warehouse.stage_files import StageDirs

MIXED = {
    "name": "stage",
    "seed": 11,
    "cluster": {"brokers": ["broker-a", "broker-b", "broker-c"], "write_queues": 4},
    "producers": {
        "count": 4,
        "threads": 2,
        "client_version": "4.9.8",
        "send_latency_fault_enable": True,
        "send_mode": {"sync": 0.8, "async": 0.1, "oneway": 0.1},
    },
    "workload": {
        "messages": 2000,
        "rate_per_s": 400.0,
        "message_types": {"normal": 0.6, "ordered": 0.1, "delay": 0.1, "transaction": 0.1, "batch": 0.1},
        "invalid": {"bad_topic": 0.01, "oversize_body": 0.01},
    },
    "brokers": {"default": {"errors": {"system_error": 0.01, "remoting_timeout": 0.005}}},
    "faults": [{"broker": "broker-b", "kind": "outage", "start_s": 1, "end_s": 3}],
}
TABLES = ("messages", "send_attempts", "send_results", "commit_log")


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return scenario_from_mapping(MIXED)


def _dirs(root: Path, tables: tuple[str, ...] = TABLES, scratch: bool = True) -> StageDirs:
    dirs = StageDirs({t: str(root / t) for t in tables}, str(root / "scratch") if scratch else None)
    for d in dirs.all():
        Path(d).mkdir(parents=True)
    return dirs


def _read(folder: str) -> pa.Table:
    files = sorted(Path(folder).glob("part-*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files])


def _by(t: pa.Table, *keys: str) -> pa.Table:
    return t.sort_by([(k, "ascending") for k in keys])


def _run(scenario: Scenario, dirs: StageDirs, message_files: dict[int, list[str]] | None = None) -> None:
    shares = workload.producer_shares(scenario)
    for share in shares:
        files = None if message_files is None else message_files[share.producer]
        stage_files.write_producer_files(scenario, share, dirs, files)
    producers = [s.producer for s in shares]
    if dirs.scratch is not None:
        for b in range(len(scenario.cluster.brokers)):
            stage_files.write_broker_files(scenario, b, producers, dirs)


def test_task_files_equal_the_local_oracle(scenario: Scenario, tmp_path: Path) -> None:
    dirs = _dirs(tmp_path)
    _run(scenario, dirs)

    messages = workload.generate(scenario)
    out = simulate.simulate(messages, scenario)
    log = store.with_offsets(store.log_records(messages, out.attempts, out.results, scenario), scenario)

    assert _by(_read(dirs.tables["messages"]), "producer", "seq").equals(_by(messages, "producer", "seq"))
    assert _read(dirs.tables["send_attempts"]).cast(out.attempts.schema).equals(out.attempts)
    assert _by(_read(dirs.tables["commit_log"]), "broker", "commit_log_offset").equals(
        _by(log, "broker", "commit_log_offset")
    )
    results = _by(_read(dirs.tables["send_results"]), "producer", "seq")
    assert results.num_rows == messages.num_rows
    assert results.select(out.results.column_names).cast(out.results.schema).equals(out.results)
    # each result carries the columns of the record it points at, or nulls when none
    pointed = _by(log.filter(log.column("is_result")), "producer", "seq")
    stored = results.filter(pc.is_valid(results.column("commit_log_offset")))
    assert stored.num_rows == pointed.num_rows > 0
    for name in store.RESULT_STORE_COLUMNS:
        assert stored.column(name).equals(pointed.column(name)), name
    failed = results.filter(pc.is_null(results.column("commit_log_offset")))
    # and a oneway request the broker did not store (the caller never knows): lost
    assert set(failed.column("status").to_pylist()) <= {"FAILED", "REJECTED", "ONEWAY_SENT"}
    lost = failed.filter(pc.equal(failed.column("status"), "ONEWAY_SENT")).select(["producer", "seq"])
    stored_attempts = out.attempts.filter(out.attempts.column("stored")).select(["producer", "seq"])
    assert not set(map(tuple, lost.to_pandas().values)) & set(map(tuple, stored_attempts.to_pandas().values))
    assert failed.num_rows > 0


def test_rewriting_a_task_gives_the_same_bytes(scenario: Scenario, tmp_path: Path) -> None:
    """Spark may run a task twice: the second run replaces each file by an identical one."""
    dirs = _dirs(tmp_path)
    share = workload.producer_shares(scenario)[1]
    stage_files.write_producer_files(scenario, share, dirs)
    first = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    stage_files.write_producer_files(scenario, share, dirs)
    second = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert first.keys() == second.keys() and all(first[p] == second[p] for p in first)
    assert not [p for p in first if p.name.endswith(".tmp")]


def test_messages_read_back_give_the_same_files(scenario: Scenario, tmp_path: Path) -> None:
    """The staged jobs: generate writes messages; simulate reads them from files that hold several
    producers each (as another writer may leave them) and writes the same tables as one pass."""
    generated = _dirs(tmp_path / "gen", ("messages",), scratch=False)
    _run(scenario, generated)
    assert sorted(p.name for p in Path(generated.tables["messages"]).iterdir()) == [
        f"part-p{p:06d}.parquet" for p in range(4)
    ]
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    everything = _by(_read(generated.tables["messages"]), "seq", "producer")  # producers interleaved
    write_parquet(everything.slice(0, 900), str(mixed / "a.parquet"))
    write_parquet(everything.slice(900), str(mixed / "b.parquet"))
    files = {p: [str(mixed / "a.parquet"), str(mixed / "b.parquet")] for p in range(4)}
    simulated = _dirs(tmp_path / "sim", TABLES[1:])
    _run(scenario, simulated, files)
    one_pass = _dirs(tmp_path / "one")
    _run(scenario, one_pass)
    for table in TABLES[1:]:
        a, b = _read(simulated.tables[table]), _read(one_pass.tables[table])
        keys = ("broker", "commit_log_offset") if table == "commit_log" else ("producer", "seq")
        assert _by(a, *keys).equals(_by(b, *keys)), table
    empty = stage_files.read_producer_messages([str(mixed / "a.parquet")], 99)
    assert empty.num_rows == 0 and empty.schema.equals(stage_files.MESSAGES_DATA)


def test_without_a_broker_step_every_result_is_written(scenario: Scenario, tmp_path: Path) -> None:
    dirs = _dirs(tmp_path, ("send_attempts", "send_results"), scratch=False)
    _run(scenario, dirs)
    results = _by(_read(dirs.tables["send_results"]), "producer", "seq")
    out = simulate.simulate(workload.generate(scenario), scenario)
    assert results.select(out.results.column_names).cast(out.results.schema).equals(out.results)
    assert results.column("commit_log_offset").null_count == results.num_rows
    assert not Path(tmp_path / "commit_log").exists()


def test_stage_dirs_refuse_what_the_stage_does_not_write(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not \\['runs'\\]"):
        StageDirs({"runs": str(tmp_path)})
    with pytest.raises(ValueError, match="give both folders"):
        StageDirs({"send_results": str(tmp_path)}, scratch=str(tmp_path))
