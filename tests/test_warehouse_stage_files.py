"""The stage's protocols as files (:mod:`rocketsim.warehouse.stage_files`), without Spark: the stage's
tasks over files write the tables they write in memory, one file per table and task, named by the task;
a re-run task rewrites the same bytes; the stages that read committed files (simulate, broker side,
summarize) give the same tables as the one pass, a task reading files of many producers reads each row
group once; the work refuses what the stage does not do; a task reads files another writer made
(string_view columns) as the table's types; its memory does not grow with its producer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import MIXED

from rocketsim.scenario import Scenario, scenario_from_mapping, workload
from rocketsim.stage import memory
from rocketsim.stage.graph import STAGES, tables_read
from rocketsim.stage.producer import producer_task
from rocketsim.stage.protocols import PRODUCER, Task
from rocketsim.tables import schemas
from rocketsim.tables.schemas import BROKER_SIDE, GENERATE, SIMULATE, SUMMARIZE
from rocketsim.warehouse import files, stage_files
from rocketsim.warehouse.files import IpcGroupsSink, ipc_group_source, write_parquet
from rocketsim.warehouse.read import FileRange
from rocketsim.warehouse.stage_files import BROKER_RESULTS_ROW_GROUP, CommittedFiles, StageWork

WINDOW_MS = 1000
MESSAGES_DATA = schemas.data_schema(schemas.MESSAGES)


@pytest.fixture(scope="module")
def scenario(mixed: Scenario) -> Scenario:
    return mixed


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
    return pa.concat_tables([pq.read_table(f) for f in sorted(Path(folder).glob("part-*.parquet"))])


def _by_keys(t: pa.Table, name: str) -> pa.Table:
    return t.sort_by([(k, "ascending") for k in schemas.TABLES[name].keys])


def _run(scenario: Scenario, work: StageWork, tasks: int = 1) -> dict[str, int]:
    """Every task of the stage over the files of ``work``, then the driver's step; the summed counts."""
    counts, _ = memory.run_stage(scenario, work.plan, work.io(), tasks)
    assert not Path(work.scratch).exists()  # the driver's step deletes the scratch folder
    return counts


def _committed(work: StageWork) -> dict[str, list[FileRange]]:
    """The stage's files as committed inputs of a later stage (ranges unknown: any file may hold any)."""
    return {
        t: [FileRange(str(f), None, None) for f in sorted(Path(folder).glob("part-*.parquet"))]
        for t, folder in work.tables.items()
    }


@pytest.mark.parametrize(("tasks", "chunk_rows"), [(1, None), (3, 97)])
def test_the_files_hold_what_the_tasks_make_in_memory(
    scenario: Scenario, tmp_path: Path, tasks: int, chunk_rows: int | None
) -> None:
    """The one pass over files: every table's files hold the rows the same tasks make in memory (whose
    tables are the local oracle's: tests/test_stage.py), one file per table and task, and the counts."""
    work = _work(tmp_path, chunk_rows=chunk_rows)
    counts = _run(scenario, work, tasks)
    io = memory.memory_io()
    want_counts, _ = memory.run_stage(scenario, work.plan, io, tasks)
    assert counts == want_counts
    for name, folder in work.tables.items():
        assert _by_keys(_read(folder), name).equals(_by_keys(io.tables.table(name), name)), name
    assert sorted(p.name for p in Path(work.tables["send_attempts"]).iterdir()) == [
        stage_files.PRODUCER_PART.format(i) for i in range(tasks)
    ]
    assert sorted(p.name for p in Path(work.tables["commit_log"]).iterdir()) == [
        stage_files.BROKER_PART.format(b) for b in range(3)
    ]
    assert [p.name for p in Path(work.tables["run_summary"]).iterdir()] == [stage_files.DRIVER_PART]


def test_many_small_producers_write_one_file_per_table_and_task(tmp_path: Path) -> None:
    """300 producers of a few messages over 2 tasks: one file per table and task; a broker's
    send_results file in (producer, seq) order in small row groups (readers of one producer skip the
    others'); the rows those of the same run in one task."""
    sc = scenario_from_mapping({**MIXED, "producers": {**MIXED["producers"], "count": 300}})
    work = _work(tmp_path / "two")
    _run(sc, work, tasks=2)
    for table in ("messages", "send_attempts"):
        assert len(list(Path(work.tables[table]).iterdir())) == 2
    for path in Path(work.tables["send_results"]).glob("part-b*.parquet"):
        part = pq.read_table(path)
        keys = (part.column("producer").to_numpy().astype(np.int64) << 40) | part.column("seq").to_numpy()
        assert (np.diff(keys) > 0).all()
        meta = pq.ParquetFile(path).metadata
        assert all(meta.row_group(g).num_rows <= BROKER_RESULTS_ROW_GROUP for g in range(meta.num_row_groups))
    one = _work(tmp_path / "one")
    _run(sc, one, tasks=1)
    for name in one.tables:
        assert _by_keys(_read(work.tables[name]), name).equals(_by_keys(_read(one.tables[name]), name)), name


def test_task_files_delta_encode_integers_and_read_back_the_same_rows(
    scenario: Scenario, tmp_path: Path
) -> None:
    """A producer task's Parquet: every integer column DELTA_BINARY_PACKED (smaller and cheaper to write
    than snappy over plain values) and the few-valued strings dictionary-encoded (that the rows read back
    are those made in memory: test_the_files_hold_what_the_tasks_make_in_memory)."""
    work = _work(tmp_path)
    shares = workload.producer_shares(scenario)[:2]
    producer_task(scenario, work.plan, work.io(), 0, shares)
    for table in ("messages", "send_attempts"):
        path = next(Path(work.tables[table]).glob("part-p*.parquet"))
        meta = pq.ParquetFile(path).metadata
        encodings = {
            meta.schema.column(c).name: meta.row_group(0).column(c).encodings for c in range(meta.num_columns)
        }
        schema = pq.read_schema(path)
        for field in schema:
            if pa.types.is_integer(field.type):
                assert "DELTA_BINARY_PACKED" in encodings[field.name], (table, field.name)
            elif field.name in files.DICTIONARY_COLUMNS:
                assert "RLE_DICTIONARY" in encodings[field.name], (table, field.name)


def test_dictionary_columns_write_the_files_strings_write(scenario: Scenario, tmp_path: Path) -> None:
    # a producer task hands the writer the generator's and the engine's codes as dictionary arrays: the
    # file must be the one of the strings (Arrow and Parquet schema, metadata, statistics, rows)
    share = workload.producer_shares(scenario)[0]
    coded = [
        pa.Table.from_batches([b])
        for b in workload.generate_producer(scenario, share, batch_rows=100, coded=True)
    ]
    assert len(coded) > 1
    for name, parts in (("strings", [c.cast(MESSAGES_DATA) for c in coded]), ("codes", coded)):
        sink = files.ParquetSink(str(tmp_path / f"{name}.parquet"), MESSAGES_DATA)
        for part in parts:
            sink.write(part)
        sink.close()
    strings, codes = (pq.ParquetFile(tmp_path / f"{n}.parquet") for n in ("strings", "codes"))
    assert codes.schema_arrow.equals(strings.schema_arrow, check_metadata=True)
    assert codes.schema == strings.schema
    assert codes.metadata.metadata == strings.metadata.metadata
    assert codes.metadata.num_row_groups == strings.metadata.num_row_groups == len(coded)
    for g in range(strings.metadata.num_row_groups):
        for c in range(strings.metadata.num_columns):
            ours, theirs = codes.metadata.row_group(g).column(c), strings.metadata.row_group(g).column(c)
            assert ours.statistics == theirs.statistics
            assert ours.encodings == theirs.encodings
    assert codes.read().equals(strings.read())


def _dictionary_coded(part: pa.Table) -> pa.Table:
    """``part`` with its columns the writer dictionary-encodes given as dictionary arrays (as a producer
    task gives the generator's and the engine's codes)."""
    for name in files.DICTIONARY_COLUMNS:
        if name in part.column_names:
            part = part.set_column(part.schema.get_field_index(name), name, pc.dictionary_encode(part[name]))
    return part


def test_the_writers_batches_leave_the_file_as_pyarrows_default_writes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the sinks give the Parquet writer WRITE_BATCH_ROWS rows at a time (less work a batch than pyarrow's
    # 1,024); the file must be the one pyarrow's default batches make, byte for byte (columns under ~50 B
    # a row: their pages end at the writer's row limit either way)
    sc = scenario_from_mapping({**MIXED, "workload": {**MIXED["workload"], "messages": 20_000}})
    messages = pa.Table.from_batches(
        [b for share in workload.producer_shares(sc) for b in workload.generate_producer(sc, share)]
    ).combine_chunks()
    parts = [_dictionary_coded(messages.slice(at, 6_000)) for at in range(0, messages.num_rows, 6_000)]
    assert len(parts) > 2
    given = []
    writer = pq.ParquetWriter

    def recording(*args: object, **kwargs: object) -> pq.ParquetWriter:
        given.append(kwargs.get("write_batch_size"))
        return writer(*args, **kwargs)

    def write(name: str) -> bytes:
        sink = files.ParquetSink(str(tmp_path / name), MESSAGES_DATA)
        for part in parts:
            sink.write(part)
        sink.close()
        return (tmp_path / name).read_bytes()

    monkeypatch.setattr(files.pq, "ParquetWriter", recording)
    ours = write("ours.parquet")
    assert given == [files.WRITE_BATCH_ROWS] and files.WRITE_BATCH_ROWS > 1_024
    monkeypatch.setattr(files, "WRITE_BATCH_ROWS", None)  # pyarrow's default
    assert write("default.parquet") == ours and given[-1] is None


def test_rewriting_a_task_gives_the_same_bytes(scenario: Scenario, tmp_path: Path) -> None:
    """Spark may run a task twice: the second run replaces each file by an identical one, named by the
    task's bin."""
    work = _work(tmp_path)
    shares = workload.producer_shares(scenario)[1:3]
    producer_task(scenario, work.plan, work.io(), 1, shares)
    first = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    producer_task(scenario, work.plan, work.io(), 1, shares)
    second = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert first.keys() == second.keys() and all(first[p] == second[p] for p in first)
    assert not [p for p in first if p.name.endswith(".tmp")]
    names = {p.name for p in first}
    assert names >= {"aggregates-p000001.bin", "log-p000001.arrow", "part-p000001.parquet"}
    assert len(list(Path(work.tables["messages"]).iterdir())) == 1


def test_a_task_run_again_without_rows_leaves_no_part_of_the_first_run(tmp_path: Path) -> None:
    """A producer task run again (an iterative round's producer tasks, written over by a later pass) that
    has no row for a table whose empty part is no file leaves no part of its first run, as files and in
    memory."""
    work = _work(tmp_path)
    task = Task(PRODUCER, 3)
    rows = pa.table({"x": pa.array([1, 2], pa.int64())})
    for tables in (stage_files.FileTables(work.tables), memory.MemoryTables()):
        first = tables.sink("send_results", task, None)
        first.write(rows)
        first.close()
        again = tables.sink("send_results", task, None)
        again.close()
        if isinstance(tables, memory.MemoryTables):
            assert task not in tables.parts["send_results"]
        else:
            assert not list(Path(work.tables["send_results"]).iterdir())


def test_messages_read_back_give_the_same_files(scenario: Scenario, tmp_path: Path) -> None:
    """The staged jobs: generate writes messages; simulate reads them from files that hold several
    producers each, interleaved (as another writer may leave them), and writes the same tables as one
    pass."""
    generated = _work(tmp_path / "gen", (GENERATE,))
    _run(scenario, generated, tasks=2)
    assert sorted(p.name for p in Path(generated.tables["messages"]).iterdir()) == [
        f"part-p{t:06d}.parquet" for t in range(2)
    ]
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    everything = _read(generated.tables["messages"]).sort_by(
        [("seq", "ascending"), ("producer", "ascending")]
    )
    write_parquet(everything.slice(0, 900), str(mixed / "a.parquet"), row_group_size=200)
    write_parquet(everything.slice(900), str(mixed / "b.parquet"), row_group_size=200)
    inputs = {"messages": [FileRange(str(mixed / n), 0, 3) for n in ("a.parquet", "b.parquet")]}
    simulated = _work(tmp_path / "sim", (SIMULATE,), inputs, chunk_rows=400)
    counts = _run(scenario, simulated, tasks=3)
    assert counts["messages.read"] == counts["messages.keys"] == 2000
    one_pass = _work(tmp_path / "one")
    _run(scenario, one_pass)
    for table in ("send_attempts", "send_results", "commit_log"):
        a, b = _read(simulated.tables[table]), _read(one_pass.tables[table])
        assert _by_keys(a, table).equals(_by_keys(b, table)), table


def test_the_broker_side_and_the_summaries_of_committed_files_equal_the_one_pass(
    scenario: Scenario, tmp_path: Path
) -> None:
    """jobs/broker_side.py and jobs/summarize.py: the tasks read the committed tables' files back."""
    one_pass = _work(tmp_path / "one")
    _run(scenario, one_pass, tasks=2)
    committed = _committed(one_pass)
    for stages in ((BROKER_SIDE,), (SUMMARIZE,), (BROKER_SIDE, SUMMARIZE)):
        inputs = {t: committed[t] for t in tables_read(stages)}
        again = _work(tmp_path / "-".join(stages), stages, inputs)
        counts = _run(scenario, again, tasks=3)
        for table in again.tables:
            assert _by_keys(_read(again.tables[table]), table).equals(
                _by_keys(_read(one_pass.tables[table]), table)
            ), (stages, table)
        if SUMMARIZE in stages:
            assert counts["send_attempts.read"] == _read(one_pass.tables["send_attempts"]).num_rows
        if BROKER_SIDE in stages:
            assert counts["commit_log.read"] == _read(one_pass.tables["commit_log"]).num_rows


def test_a_producer_task_reads_each_row_group_of_many_producers_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files that hold many producers each (a producer task's): asked for its producers in order, a task
    reads every row group that may hold them once, not once per producer, and gets each one's rows."""
    sc = scenario_from_mapping({**MIXED, "producers": {**MIXED["producers"], "count": 50}})
    messages = workload.generate(sc)
    path = tmp_path / "m.parquet"
    pq.write_table(messages, path, row_group_size=300)
    reads: list[int] = []
    real = files.read_row_group

    def counted(uri: str, group: int, *args: object) -> pa.Table:
        reads.append(group)
        return real(uri, group, *args)

    monkeypatch.setattr(stage_files, "read_row_group", counted)
    committed = CommittedFiles({"messages": [FileRange(str(path), 0, 49)]})
    for p in range(50):
        got = committed.producer_rows("messages", p, MESSAGES_DATA)
        assert got.equals(messages.filter(pc.equal(messages.column("producer"), p))), p
    assert sorted(reads) == list(range(pq.ParquetFile(path).num_row_groups))


def test_stage_work_refuses_what_the_stage_does_not_do(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="contiguous part"):
        StageWork((GENERATE, BROKER_SIDE), {}, str(tmp_path))
    with pytest.raises(ValueError, match="write \\['messages'\\], given folders of \\['runs'\\]"):
        StageWork((GENERATE,), {"runs": str(tmp_path)}, str(tmp_path))
    with pytest.raises(ValueError, match="read the committed \\['send_attempts', 'send_results'\\]"):
        StageWork(
            (SUMMARIZE,),
            {t.name: str(tmp_path) for t in schemas.written_by(SUMMARIZE)},
            str(tmp_path),
            inputs={"messages": []},
        )


def test_files_of_another_writer_with_string_views_read_the_same(
    scenario: Scenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """delta-rs rewrites a file (a DELETE) with string_view columns: a task reads it as the table's
    types, its producer's rows only, the row groups that cannot hold it skipped by their statistics."""
    messages = workload.generate(scenario)
    views = pa.schema(
        [f.with_type(pa.string_view()) if pa.types.is_string(f.type) else f for f in messages.schema]
    )
    path = tmp_path / "views.parquet"
    pq.write_table(_by_keys(messages, "messages").cast(views), path, row_group_size=200)
    read_groups: list[int] = []
    read_row_group = pq.ParquetFile.read_row_group

    def spy(self: pq.ParquetFile, group: int, *args: object, **kwargs: object) -> pa.Table:
        read_groups.append(group)
        return read_row_group(self, group, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", spy)
    committed = CommittedFiles({"messages": [FileRange(str(path), None, None)]})
    got = committed.producer_rows("messages", 2, MESSAGES_DATA)
    assert 0 < len(read_groups) < pq.ParquetFile(path).num_row_groups
    assert got.equals(messages.filter(pc.equal(messages.column("producer"), 2)))
    where = {"message_type": "transaction"}
    transactional = CommittedFiles({"messages": [FileRange(str(path), None, None)]}).producer_rows(
        "messages", 2, MESSAGES_DATA, where
    )
    assert transactional.num_rows > 0 and set(transactional.column("message_type").to_pylist()) == {
        "transaction"
    }
    halves = CommittedFiles({"messages": [FileRange(str(path), None, None)]}).rows(
        "messages", MESSAGES_DATA, where
    )
    assert halves.num_rows == pc.sum(pc.equal(messages.column("message_type"), "transaction")).as_py()


_PEAK_RSS = """
import resource, sys, tempfile
from pathlib import Path
from rocketsim.tables import schemas
from rocketsim.scenario import workload
from rocketsim.scenario import load_scenario
from rocketsim.stage.graph import STAGES
from rocketsim.stage.producer import producer_task
from rocketsim.stage.protocols import PRODUCER, Task
from rocketsim.warehouse.stage_files import StageWork
n, chunk = int(sys.argv[1]), int(sys.argv[2])
sc = load_scenario(
    "conf/scenarios/steady.toml", [f"workload.messages={n}", "producers.count=1", "producers.threads=16"]
)
root = Path(tempfile.mkdtemp())
tables = {t.name: str(root / t.name) for t in schemas.written_by(*STAGES)}
work = StageWork(STAGES, tables, str(root / "scratch"), 10_000, {}, chunk_rows=chunk)
for d in work.all():
    Path(d).mkdir(parents=True)
producer_task(sc, work.plan, work.io(), 0, workload.producer_shares(sc))
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


_BROKER_PEAK_RSS = """
import resource, sys
from pathlib import Path
from rocketsim.tables import schemas
from rocketsim.scenario import load_scenario, workload
from rocketsim.stage.broker import broker_task
from rocketsim.stage.graph import STAGES
from rocketsim.stage.plan import stage_bins
from rocketsim.stage.producer import producer_task
from rocketsim.stage.protocols import PRODUCER, Task
from rocketsim.warehouse.stage_files import StageWork
step, n, chunk, root = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
sc = load_scenario("conf/scenarios/steady.toml", [f"workload.messages={n}", "producers.count=2"])
tables = {t.name: str(root / t.name) for t in schemas.written_by(*STAGES)}
work = StageWork(STAGES, tables, str(root / "scratch"), 10_000, {}, chunk_rows=chunk)
if step == "producers":
    for d in work.all():
        Path(d).mkdir(parents=True)
    shares = workload.producer_shares(sc)
    by_producer = {s.producer: s for s in shares}
    for i, b in enumerate(stage_bins(sc, work.plan, shares, 2)):
        producer_task(sc, work.plan, work.io(), i, [by_producer[p] for p in b])
else:
    counts = broker_task(sc, work.plan, work.io(), 0, 2)
    print(counts["commit_log.made"], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def _broker_peak_rss(messages: int, chunk_rows: int, root: Path) -> tuple[int, int]:
    """(records, peak RSS in bytes) of a fresh process running broker task 0 of a steady run of
    ``messages`` whose producer tasks ran in another process."""
    import subprocess
    import sys

    cwd = Path(__file__).resolve().parents[1]
    for step in ("producers", "broker"):
        argv = [sys.executable, "-c", _BROKER_PEAK_RSS, step, str(messages), str(chunk_rows), str(root)]
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=True)
    records, peak = done.stdout.split()[-2:]
    return int(records), int(peak)


@pytest.mark.slow
def test_a_broker_task_memory_grows_by_a_few_bytes_a_record(tmp_path: Path) -> None:
    """docs/design.md §7, every worker under 2 GiB: a broker task keeps a few ints a record (the write
    order, each result's record and its two offsets), not the records: numbered, written and folded a
    chunk at a time, the results completed from the log mapped again. From 100k to 400k records of
    broker 0 its peak grows by 50-75 B a record (the few ints and what settles over the first chunks;
    ~20 B a record from 0.8M to 3.2M records), where it grew by 286 B a record (docs/benchmarks.md)."""
    small = _broker_peak_rss(400_000, 16_384, tmp_path / "small")
    large = _broker_peak_rss(1_600_000, 16_384, tmp_path / "large")
    per_record = (large[1] - small[1]) / (large[0] - small[0])
    assert large[0] > 3 * small[0] > 250_000
    assert per_record < 150, f"{small} -> {large} (records, bytes): {per_record:.0f} bytes a record"


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
        first, last, sizes = source.pieces("k")  # each non-empty batch's ends and rows
        ends = np.cumsum(sizes)
        keys = whole.column("k").to_numpy()
        assert sizes.sum() == whole.num_rows and (sizes > 0).all()
        assert (first == keys[ends - sizes]).all() and (last == keys[ends - 1]).all()
        source.let_go()  # a hint to the page cache: the rows read the same after
        assert source().equals(whole)


@pytest.mark.parametrize("one_producer_a_batch", [True, False])
def test_a_broker_task_orders_results_by_producer_as_a_sort_would(
    tmp_path: Path, one_producer_a_batch: bool
) -> None:
    """A broker task takes its results producer by producer: from the ends of the scratch batches when
    each holds one producer (no read of the column), else from the column; either way the stable sort's
    order (None when they come sorted)."""
    from rocketsim.stage.broker import _producer_order

    schema = pa.schema([pa.field("producer", pa.int32())])
    rng = np.random.default_rng(7)
    uris = []
    for f, producers in enumerate(([2, 0, 2], [1, 3], [0])):
        uri = str(tmp_path / f"results-{f}.arrow")
        sink = IpcGroupsSink(uri, schema, 1)
        for p in producers:
            n = int(rng.integers(1, 6))
            values = [p] * n if one_producer_a_batch else sorted([p, p + 1] * n)
            sink.write(pa.table({"producer": pa.array(values, pa.int32())}), np.zeros(len(values), np.int64))
        sink.close()
        uris.append(uri)
    source = ipc_group_source(uris, 0, schema, 1)
    producer = source().column("producer").to_numpy()
    assert (_producer_order(source, 3) == np.argsort(producer, kind="stable")).all()
    sorted_source = ipc_group_source(uris[1:2], 0, schema, 1)  # producers 1 then 3
    assert _producer_order(sorted_source, 3) is None
