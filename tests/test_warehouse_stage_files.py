"""The files a stage's tasks write and the driver's step after them (:mod:`rocketsim.warehouse.stage_files`),
without Spark: the one pass's files equal the local oracle (the core functions called directly on the
whole run), a re-run task rewrites the same bytes, the stages that read committed files (simulate,
broker side, summarize) give the same tables as the one pass, a comparison's producer step writes only
its variants' aggregates, the work refuses what the stage does not do, and a task reads files another
writer made (string_view columns) as the table's types."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from rocketsim import simulate, stage
from rocketsim.broker import side as broker_side
from rocketsim.broker import store
from rocketsim.scenario import Scenario, scenario_from_mapping, workload
from rocketsim.tables import schemas, summaries
from rocketsim.tables.schemas import BROKER_SIDE, GENERATE, SIMULATE, SUMMARIZE
from rocketsim.warehouse import stage_files
from rocketsim.warehouse.files import IpcGroupsSink, ipc_group_source, write_parquet
from rocketsim.warehouse.read import FileRange
from rocketsim.warehouse.stage_files import STAGES, StageWork

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
WINDOW_MS = 1000
TABLES = ("messages", "send_attempts", "send_results", "commit_log")


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return scenario_from_mapping(MIXED)


def _work(
    root: Path, stages: tuple[str, ...] = STAGES, inputs: dict | None = None, chunk_rows: int | None = None
) -> StageWork:
    tables = {t.name: str(root / t.name) for t in schemas.written_by(*stages)}
    chunks = {} if chunk_rows is None else {"chunk_rows": chunk_rows}
    work = StageWork(stages, tables, str(root / "scratch"), WINDOW_MS, inputs or {}, **chunks)
    for d in work.all():
        Path(d).mkdir(parents=True)
    return work


def _read(folder: str) -> pa.Table:
    files = sorted(Path(folder).glob("part-*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files])


def _by(t: pa.Table, *keys: str) -> pa.Table:
    return t.sort_by([(k, "ascending") for k in keys])


def _run(scenario: Scenario, work: StageWork) -> dict[str, int]:
    """Every task of the stage, then the driver's step; returns the summed counts."""
    shares = workload.producer_shares(scenario)
    counts = [stage_files.write_producer_files(scenario, share, work) for share in shares]
    producers = [s.producer for s in shares]
    brokers = list(range(len(scenario.cluster.brokers)))
    if work.has_brokers:
        counts += [stage_files.write_broker_files(scenario, b, producers, work) for b in brokers]
    finished = stage_files.finish_stage(scenario, work, producers, brokers)
    assert not Path(work.scratch).exists()
    total: dict[str, int] = {}
    for part in [*counts, finished.counts]:
        for k, v in part.items():
            total[k] = total.get(k, 0) + v
    return total


def _committed(work: StageWork) -> dict[str, list[FileRange]]:
    """The stage's files as committed inputs of a later stage (ranges unknown: any file may hold any)."""
    return {
        t: [FileRange(str(f), None, None) for f in sorted(Path(folder).glob("part-*.parquet"))]
        for t, folder in work.tables.items()
    }


@pytest.mark.parametrize("chunk_rows", [None, 13, 97], ids=["whole", "chunks-of-13", "chunks-of-97"])
def test_one_pass_files_equal_the_local_oracle(
    scenario: Scenario, tmp_path: Path, chunk_rows: int | None
) -> None:
    """Every table of the one pass equals the core's of the whole run, whether a producer task simulates
    its messages whole or a few at a time (chunks that cut retries, in-flight sends of its other thread
    and ASYNC sends waiting for answers; never a batch)."""
    work = _work(tmp_path, chunk_rows=chunk_rows)
    counts = _run(scenario, work)

    messages = workload.generate(scenario)
    out = simulate.simulate(messages, scenario)
    log = store.with_offsets(store.log_records(messages, out.attempts, out.results, scenario), scenario)

    assert _by(_read(work.tables["messages"]), "producer", "seq").equals(_by(messages, "producer", "seq"))
    assert _read(work.tables["send_attempts"]).cast(out.attempts.schema).equals(out.attempts)
    assert _by(_read(work.tables["commit_log"]), "broker", "commit_log_offset").equals(
        _by(log, "broker", "commit_log_offset")
    )
    results = _by(_read(work.tables["send_results"]), "producer", "seq")
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

    # the summary tables: the core's of the whole run at once
    whole = summaries.summary_tables(
        summaries.producer_aggregates(
            out.attempts,
            out.results,
            WINDOW_MS,
            messages=messages,
            faults=summaries.fault_spans(scenario.faults),
        )
    )
    assert whole["fault_windows"].num_rows > 0  # the scenario has a fault
    for name, table in whole.items():
        assert _read(work.tables[name]).equals(table), name
    # the broker side: the core's of the whole commit log at once
    assert (
        _read(work.tables["broker_storage"])
        .sort_by([(k, "ascending") for k in schemas.TABLES["broker_storage"].keys])
        .equals(broker_side.broker_storage(log, WINDOW_MS))
    )
    txns = _read(work.tables["transactions"])
    other_halves = pc.sum(
        pc.and_(pc.equal(log.column("store_topic"), store.HALF_TOPIC), pc.invert(log.column("is_result")))
    ).as_py()
    transactional = pc.sum(pc.equal(messages.column("message_type"), "transaction")).as_py()
    assert txns.num_rows == transactional + other_halves > 0
    assert txns.column("half_queue_offset").null_count < txns.num_rows
    load = _read(work.tables["consumer_load"])
    assert pc.sum(load.column("messages")).as_py() > 0
    assert counts["messages.made"] == counts["send_results.made"] == messages.num_rows
    assert counts["commit_log.made"] == log.num_rows


def test_rewriting_a_task_gives_the_same_bytes(scenario: Scenario, tmp_path: Path) -> None:
    """Spark may run a task twice: the second run replaces each file by an identical one."""
    work = _work(tmp_path)
    share = workload.producer_shares(scenario)[1]
    stage_files.write_producer_files(scenario, share, work)
    first = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    stage_files.write_producer_files(scenario, share, work)
    second = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert first.keys() == second.keys() and all(first[p] == second[p] for p in first)
    assert not [p for p in first if p.name.endswith(".tmp")]
    assert {p.name for p in first} >= {"aggregates-p000001.bin", "log-p000001.arrow", "part-p000001.parquet"}


def test_messages_read_back_give_the_same_files(scenario: Scenario, tmp_path: Path) -> None:
    """The staged jobs: generate writes messages; simulate reads them from files that hold several
    producers each (as another writer may leave them) and writes the same tables as one pass."""
    generated = _work(tmp_path / "gen", (GENERATE,))
    _run(scenario, generated)
    assert sorted(p.name for p in Path(generated.tables["messages"]).iterdir()) == [
        f"part-p{p:06d}.parquet" for p in range(4)
    ]
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    everything = _by(_read(generated.tables["messages"]), "seq", "producer")  # producers interleaved
    write_parquet(everything.slice(0, 900), str(mixed / "a.parquet"))
    write_parquet(everything.slice(900), str(mixed / "b.parquet"))
    files = {"messages": [FileRange(str(mixed / n), 0, 3) for n in ("a.parquet", "b.parquet")]}
    simulated = _work(tmp_path / "sim", (SIMULATE,), files)
    counts = _run(scenario, simulated)
    assert counts["messages.read"] == counts["messages.keys"] == 2000
    one_pass = _work(tmp_path / "one")
    _run(scenario, one_pass)
    for table in TABLES[1:]:
        a, b = _read(simulated.tables[table]), _read(one_pass.tables[table])
        keys = ("broker", "commit_log_offset") if table == "commit_log" else ("producer", "seq")
        assert _by(a, *keys).equals(_by(b, *keys)), table
    empty = stage_files.read_producer_messages([str(mixed / "a.parquet")], 99)
    assert empty.num_rows == 0 and empty.schema.equals(stage_files.MESSAGES_DATA)


def test_the_broker_side_and_the_summaries_of_committed_files_equal_the_one_pass(
    scenario: Scenario, tmp_path: Path
) -> None:
    """jobs/broker_side.py and jobs/summarize.py: the tasks read the committed tables back."""
    one_pass = _work(tmp_path / "one")
    _run(scenario, one_pass)
    committed = _committed(one_pass)
    for stages in ((BROKER_SIDE,), (SUMMARIZE,), (BROKER_SIDE, SUMMARIZE)):
        again = _work(
            tmp_path / "-".join(stages), stages, {t: committed[t] for t in stage_files.tables_read(stages)}
        )
        counts = _run(scenario, again)
        for table in again.tables:
            keys = [(k, "ascending") for k in schemas.TABLES[table].keys]
            assert (
                _read(again.tables[table]).sort_by(keys).equals(_read(one_pass.tables[table]).sort_by(keys))
            ), (
                stages,
                table,
            )
        if SUMMARIZE in stages:
            assert counts["send_attempts.read"] == _read(one_pass.tables["send_attempts"]).num_rows
        if BROKER_SIDE in stages:
            assert counts["commit_log.read"] == _read(one_pass.tables["commit_log"]).num_rows


def test_a_comparison_task_writes_each_variants_aggregates(scenario: Scenario, tmp_path: Path) -> None:
    """Messages once, every variant of the signature simulated on them: only aggregates, by variant."""
    share = workload.producer_shares(scenario)[2]
    variants = {
        "on": scenario,
        "off": scenario_from_mapping(
            {**MIXED, "producers": {**MIXED["producers"], "send_latency_fault_enable": False}}
        ),
    }
    counts = stage_files.write_variant_aggregates(variants, share, WINDOW_MS, str(tmp_path), 3)
    (written,) = tmp_path.iterdir()
    assert written.name == stage_files.SCRATCH_VARIANT_AGGREGATES.format(3, 2)
    got = stage_files.merge_aggregates([str(written)])
    messages = stage.producer_messages(scenario, share)
    parts = []
    for name, sc in variants.items():
        out = simulate.simulate(messages, sc)
        parts.append(
            summaries.producer_aggregates(
                out.attempts,
                out.results,
                WINDOW_MS,
                {"variant": name},
                messages=messages,
                faults=summaries.fault_spans(sc.faults),
            )
        )
    want = summaries.merge(parts)
    for name, table in want.tables().items():
        assert got.tables()[name].equals(table), name
    assert counts["messages"] == 2 * share.messages
    other = scenario_from_mapping({**MIXED, "producers": {**MIXED["producers"], "client_version": "5.3.3"}})
    with pytest.raises(ValueError, match="do not share their messages"):
        stage.variant_aggregates({"a": scenario, "b": other}, share, WINDOW_MS)


def test_stage_work_refuses_what_the_stage_does_not_do(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="contiguous part"):
        StageWork((GENERATE, BROKER_SIDE), {}, str(tmp_path))
    with pytest.raises(ValueError, match="contiguous part"):
        StageWork(("runs_row",), {}, str(tmp_path))
    with pytest.raises(ValueError, match="write \\['messages'\\], given folders of \\['runs'\\]"):
        StageWork((GENERATE,), {"runs": str(tmp_path)}, str(tmp_path))
    with pytest.raises(ValueError, match="read the committed \\['send_attempts', 'send_results'\\]"):
        StageWork(
            (SUMMARIZE,),
            {t.name: str(tmp_path) for t in schemas.written_by(SUMMARIZE)},
            str(tmp_path),
            inputs={"messages": []},
        )
    assert stage_files.tables_read(STAGES) == ()
    assert stage_files.tables_read((SIMULATE,)) == ("messages",)
    assert stage_files.tables_read((BROKER_SIDE,)) == ("messages", "send_results", "commit_log")


def test_files_of_another_writer_with_string_views_read_the_same(
    scenario: Scenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """delta-rs rewrites a file (a DELETE) with string_view columns: a task reads it as the table's
    types, its producer's rows only, row groups skipped by their statistics."""
    messages = workload.generate(scenario)
    views = pa.schema(
        [f.with_type(pa.string_view()) if pa.types.is_string(f.type) else f for f in messages.schema]
    )
    path = tmp_path / "views.parquet"
    pq.write_table(_by(messages, "producer", "seq").cast(views), path, row_group_size=200)
    read_groups: list[int] = []
    read_row_groups = pq.ParquetFile.read_row_groups

    def spy(self: pq.ParquetFile, groups: list[int], *args: object, **kwargs: object) -> pa.Table:
        read_groups.extend(groups)
        return read_row_groups(self, groups, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", spy)
    got = stage_files.read_producer_messages([str(path)], 2)
    assert 0 < len(read_groups) < pq.ParquetFile(path).num_row_groups
    assert got.equals(messages.filter(pc.equal(messages.column("producer"), 2)))
    transactional = stage_files.read_producer_rows(
        [str(path)], stage_files.MESSAGES_DATA, 2, filters=[("message_type", "=", "transaction")]
    )
    assert transactional.num_rows > 0 and set(transactional.column("message_type").to_pylist()) == {
        "transaction"
    }


_PEAK_RSS = """
import resource, sys, tempfile
from pathlib import Path
from rocketsim.tables import schemas
from rocketsim.scenario import workload
from rocketsim.scenario import load_scenario
from rocketsim.warehouse import stage_files
n, chunk = int(sys.argv[1]), int(sys.argv[2])
sc = load_scenario(
    "conf/scenarios/steady.toml", [f"workload.messages={n}", "producers.count=1", "producers.threads=16"]
)
root = Path(tempfile.mkdtemp())
tables = {t.name: str(root / t.name) for t in schemas.written_by(*stage_files.STAGES)}
work = stage_files.StageWork(stage_files.STAGES, tables, str(root / "scratch"), 10_000, {}, chunk_rows=chunk)
for d in work.all():
    Path(d).mkdir(parents=True)
stage_files.write_producer_files(sc, workload.producer_shares(sc)[0], work)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def _peak_rss(messages: int, chunk_rows: int) -> int:
    """Peak RSS (bytes) of a fresh process running one producer task of ``messages`` steady messages."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, str(messages), str(chunk_rows)],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.split()[-1])


def test_a_producer_task_memory_does_not_grow_with_the_producer() -> None:
    """docs/design.md §7: a producer's rows stream out in chunks, so a task's memory is bounded whatever the
    size of the producer: 4x the messages in chunks of the same size cost (nearly) no more memory. A task's
    memory settles over its first chunks (peaks at 25k-message chunks: 100k 385 MiB, 400k 424, 800k 457,
    1.6M 478), so both sizes are past the first chunks."""
    _peak_rss(10_000, 25_000)  # the compiled engine's cache warm: no compilation in what is measured
    small, large = _peak_rss(400_000, 25_000), _peak_rss(1_600_000, 25_000)
    per_message = (large - small) / 1_200_000  # bytes per message more; a whole producer costs ~1,100
    assert per_message < 100, f"{small:,} -> {large:,} bytes: {per_message:.0f} a message"


def test_a_scratch_group_given_whole_taken_or_sliced_gives_the_same_rows(tmp_path: Path) -> None:
    """A broker task reads its group of the producers' scratch files (IpcGroupsSink: one batch per group
    per part) whole, by rows (only the batches holding them mapped) or by a range: the same rows."""
    schema = pa.schema([pa.field("k", pa.int64()), pa.field("s", pa.string())])
    rng = np.random.default_rng(4)
    uris = []
    for f, parts in enumerate((3, 0, 2)):
        uri = str(tmp_path / f"scratch-{f}.arrow")
        sink = IpcGroupsSink(uri, schema, 3)
        for _ in range(parts):
            n = int(rng.integers(0, 9))
            keys = rng.integers(0, 1000, n)
            sink.write(
                pa.table({"k": keys, "s": [f"v{k}" for k in keys]}, schema=schema), rng.integers(0, 3, n)
            )
        sink.close()
        uris.append(uri)
    for g in range(3):
        source = ipc_group_source(uris, g, schema, 3)
        whole = source()
        assert source.num_rows == whole.num_rows
        for rows in (
            rng.permutation(whole.num_rows),
            rng.integers(0, max(whole.num_rows, 1), 5)[: whole.num_rows],
        ):
            assert source.take(rows, ["s"]).equals(whole.select(["s"]).take(pa.array(rows, pa.int64())))
        for start in range(whole.num_rows + 1):
            for length in (0, 1, 4, whole.num_rows):
                assert source.slice(start, length).equals(whole.slice(start, length))
