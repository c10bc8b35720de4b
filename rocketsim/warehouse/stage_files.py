"""The files of a run's stage, written by its tasks where they run (pyarrow only: no pyspark, no deltalake),
and the driver's step between the tasks and the publish.

The schedulers (:mod:`rocketsim.spark.run`, :mod:`rocketsim.spark.compare`) run two kinds of task over
the core stage (:mod:`rocketsim.stage`), then the driver's :func:`finish_stage`, then publish every
table's staged files as one commit per table. What they do is a :class:`StageWork`: the stages it runs
(of ``generate``, ``simulate``, ``broker_side``, ``summarize``; the whole run runs all four in one
pass), a staging folder per table they write, a scratch folder, and the committed files of the tables
they read (what an earlier job wrote and this one does not compute):

1. :func:`write_producer_files`, once per producer: its messages (generated, or read from the run's
   committed ``messages``); simulated a chunk of ``StageWork.chunk_rows`` messages at a time
   (:func:`rocketsim.stage.producer_chunks`), each chunk's rows appended to the files (``messages`` and
   ``send_attempts`` Parquet, the ``send_results`` rows that point at no stored copy, and for the broker
   step three Arrow IPC scratch files holding its commit-log records, the results that point at them
   and the results of its transactional messages with another stored half, one record batch per broker
   per chunk), or its committed attempts and results read back; its summary aggregates (folded chunk by
   chunk, :class:`rocketsim.tables.summaries.ProducerFold`) into the scratch folder (bytes,
   :meth:`rocketsim.tables.summaries.SummaryAggregates.to_bytes`); the ``transactions`` rows of its
   transactional messages whose result points at no half;
2. :func:`write_broker_files`, once per broker: that broker's batches of every producer's scratch files
   numbered and completed a chunk at a time (:func:`rocketsim.broker.store.numbered_chunks`,
   :class:`rocketsim.broker.store.PointedRecords`: ``commit_log`` and ``send_results`` Parquet), or its
   committed records read back; its ``broker_storage`` and the ``transactions`` rows of its halves
   (Parquet, from what :class:`rocketsim.stage.BrokerFold` kept), what consumers of its queues get
   (scratch);
3. :func:`finish_stage`, on the driver once every task is done: the producers' aggregates merged into
   the summary tables and the brokers' deliveries into ``consumer_load``, written into their staging
   folders (small tables: the driver writes them with pyarrow).

Each task returns its counts (:mod:`rocketsim.tables.reconcile`: rows, distinct keys and sums of what it made
or read), and the driver reconciles the run from them and from the commits' reports. Small aggregates
travel through the scratch folder rather than in the task's returned rows: they may reach megabytes
(a saturated run's queue waits take nearly one histogram entry per message), which a file keeps out of
the JVM, and a task that Spark re-runs rewrites the same file. Every file name is a function of the
producer or the broker, and each file is written under a temporary name and renamed, so a re-run task
rewrites the same file with the same bytes.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim import simulate, stage
from rocketsim.broker import side as broker_side
from rocketsim.broker import store
from rocketsim.engine import iterative
from rocketsim.scenario import Scenario, workload
from rocketsim.tables import reconcile, schemas, summaries
from rocketsim.tables.grouping import pack_keys
from rocketsim.tables.schemas import BROKER_SIDE, GENERATE, SIMULATE, SUMMARIZE
from rocketsim.warehouse.files import (
    IpcGroupSource,
    IpcGroupsSink,
    ParquetSink,
    ipc_group_source,
    map_bytes,
    read_bytes,
    read_ipc,
    read_ipc_group,
    read_parquet,
    write_bytes,
    write_ipc,
    write_parquet,
)
from rocketsim.warehouse.paths import delete_dir
from rocketsim.warehouse.read import FileRange, may_hold

MESSAGES_DATA = schemas.data_schema(schemas.MESSAGES)
ATTEMPTS_DATA = schemas.data_schema(schemas.SEND_ATTEMPTS)
RESULTS_DATA = schemas.data_schema(schemas.SEND_RESULTS)
COMMIT_LOG_DATA = schemas.data_schema(schemas.COMMIT_LOG)
RESULTS_CORE = schemas.without_run_id(schemas.SEND_RESULTS)  # what the simulation returns
PRODUCER_PART = "part-p{:06d}.parquet"
BROKER_PART = "part-b{:06d}.parquet"
DRIVER_PART = "part-d000000.parquet"
SCRATCH_LOG = "log-p{:06d}.arrow"
SCRATCH_RESULTS = "results-p{:06d}.arrow"
SCRATCH_OTHER_HALVES = "other-halves-p{:06d}.arrow"
SCRATCH_AGGREGATES = "aggregates-p{:06d}.bin"
SCRATCH_DELIVERIES = "deliveries-b{:06d}.arrow"
SCRATCH_VARIANT_AGGREGATES = "aggregates-g{:04d}-p{:06d}.bin"
SCRATCH_WHOLE_RUN_AGGREGATES = "aggregates-v{:04d}.bin"  # a capacity sweep: one per variant
SCRATCH_ROUND_WORK = "round{:03d}-work-p{:06d}.arrow"  # brokers.coupling = iterative
SCRATCH_TRAJECTORIES = "round{:03d}-trajectories.bin"
# A broker task's send_results file holds every producer's results pointing at that broker, in producer
# order: row groups this small let a task reading one producer's results back (jobs/summarize.py,
# jobs/broker_side.py) skip the others' by the footer's producer ranges, so reading every producer costs
# about one pass over the file, not one pass per producer.
BROKER_RESULTS_ROW_GROUP = 65_536
# the stages a run's tasks run, in order (a job runs a contiguous part of them; the whole run, all)
STAGES = (GENERATE, SIMULATE, BROKER_SIDE, SUMMARIZE)
# the column of the committed tables a task reads by which it picks its files (the Delta log's ranges)
INPUT_COLUMNS = {"messages": "producer", "send_attempts": "producer", "send_results": "producer"}
INPUT_COLUMNS["commit_log"] = "broker"
# what a task reads of committed tables: the columns the functions it calls read, and what it counts
_MESSAGE_KEYS = ("producer", "seq", "message_type")
_RESULT_COUNTS = ("producer", "seq", "status", "attempts", "broker", "queue_offset", "store_topic")
_LOG_READ = tuple(n for n in COMMIT_LOG_DATA.names if n != "offset_msg_id")


# messages a producer task simulates at a time by default: its memory is bounded by this, whatever the
# producer's size (one steady producer task's peak RSS: ~0.9 GB with 128k, ~1.4 GB with 256k, ~0.7 GB with
# 64k; the next chunk is given before a chunk's rows come out)
CHUNK_ROWS = 1 << 17


@dataclass(frozen=True)
class StageWork:
    """What a run's tasks do: the ``stages`` they run (a contiguous part of :data:`STAGES`), the staging
    folder of every table those stages write (``tables``), their ``scratch`` folder (local paths or URIs:
    shared storage on a cluster), the window of the summary tables, and the committed files of the tables
    they read (``inputs``: per table, each file with the range of its :data:`INPUT_COLUMNS` column)."""

    stages: tuple[str, ...]
    tables: Mapping[str, str]
    scratch: str
    window_ms: int = 10_000
    inputs: Mapping[str, Sequence[FileRange]] = field(default_factory=dict)
    # messages a producer task simulates at a time (its memory grows with this, not with the producer)
    chunk_rows: int = CHUNK_ROWS

    def __post_init__(self) -> None:
        at = [STAGES.index(s) for s in self.stages if s in STAGES]
        if len(at) != len(self.stages) or not at or at != list(range(at[0], at[0] + len(at))):
            raise ValueError(f"the stage runs a contiguous part of {STAGES}, got {self.stages}")
        wanted = {t.name for t in schemas.written_by(*self.stages)}
        if set(self.tables) != wanted:
            raise ValueError(
                f"stages {self.stages} write {sorted(wanted)}, given folders of {sorted(self.tables)}"
            )
        missing = sorted(set(self.reads()) - set(self.inputs))
        if missing:
            raise ValueError(f"stages {self.stages} read the committed {missing}: give their files")
        if self.window_ms <= 0:
            raise ValueError(f"window_ms must be > 0, got {self.window_ms}")
        if self.chunk_rows <= 0:
            raise ValueError(f"chunk_rows must be > 0, got {self.chunk_rows}")

    def runs(self, stage_name: str) -> bool:
        return stage_name in self.stages

    @property
    def has_brokers(self) -> bool:
        """Whether the stage has broker tasks (numbering commit logs, or the broker side)."""
        return self.runs(SIMULATE) or self.runs(BROKER_SIDE)

    def reads(self) -> tuple[str, ...]:
        """The committed tables the tasks read (:func:`tables_read`)."""
        return tables_read(self.stages)

    def all(self) -> tuple[str, ...]:
        """Every folder the tasks and the driver write."""
        return (*self.tables.values(), self.scratch)

    def part(self, table: str, name: str) -> str:
        return f"{self.tables[table]}/{name}"


def tables_read(stages: Sequence[str]) -> tuple[str, ...]:
    """The committed tables the tasks of ``stages`` read: what those stages need and do not compute."""
    g, s, b, z = (x in stages for x in STAGES)
    wanted = {
        "messages": not g and (s or b or z),
        "send_attempts": z and not s,
        "send_results": (b or z) and not s,
        "commit_log": b and not s,
    }
    return tuple(t for t, needed in wanted.items() if needed)


def derived_tables(stages: Sequence[str]) -> tuple[str, ...]:
    """The tables of a run made (by stages not in ``stages``) from the tables ``stages`` write: a job
    that rewrites those drops these from the run, which would otherwise describe rows it replaced (a
    rerun of ``jobs/simulate.py`` drops the broker side, the summaries and the ``runs`` row)."""
    reads = {st: tables_read((st,)) for st in STAGES[1:]}
    reads[schemas.RUNS_ROW] = ("messages", "send_attempts", "send_results")  # its counts
    written = {t.name for t in schemas.written_by(*stages)}
    changed = set(written)
    for st, read in reads.items():
        if st not in stages and changed & set(read):
            changed |= {t.name for t in schemas.written_by(st)}
    return tuple(t.name for t in schemas.REGISTRY if t.name in changed - written)


def give_back_memory() -> None:
    """What a task freed given back to the system: Arrow's pool's unused memory and glibc's free heap
    (``malloc_trim``; elsewhere nothing). A Python worker runs many tasks one after another: without this
    it carries the freed-but-kept memory of a producer task (~0.6 GB) into the broker task after it."""
    gc.collect()  # Python's garbage collector (not a Spark collect): frees the task's cycles first
    pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


# ---- producer tasks ------------------------------------------------------------------------------


def read_producer_rows(
    uris: Sequence[str],
    schema: pa.Schema,
    producer: int,
    order: Sequence[str] = ("seq",),
    filters: Sequence[tuple] = (),
) -> pa.Table:
    """One producer's rows of the Parquet files ``uris`` (which may hold other producers' too), the
    columns of ``schema``, in ``order``."""
    rows = read_parquet(uris, schema, filters=[("producer", "=", producer), *filters])
    return _in_order(rows, order)


def read_producer_messages(uris: Sequence[str], producer: int) -> pa.Table:
    """One producer's rows of the ``messages`` files ``uris``, whole, in seq order."""
    return read_producer_rows(uris, MESSAGES_DATA, producer)


def _in_order(rows: pa.Table, order: Sequence[str]) -> pa.Table:
    """``rows`` sorted by the int columns ``order`` (a single pass when they already are)."""
    if rows.num_rows < 2:
        return rows
    packed = pack_keys([np.asarray(rows.column(k).to_numpy(), np.int64) for k in order])
    if packed is not None and (packed[1:] >= packed[:-1]).all():
        return rows
    return rows.sort_by([(k, "ascending") for k in order])


def _columns(schema: pa.Schema, *groups: Sequence[str]) -> pa.Schema:
    """The fields of ``schema`` named in any of ``groups``, in the schema's order."""
    names = {n for g in groups for n in g}
    return pa.schema([f for f in schema if f.name in names])


@dataclass
class CoupledProducers:
    """The producers of a run coupled through closed-loop brokers (``brokers.coupling`` joint): simulated
    together, once, where the first of them is asked for (their task: every producer in one), each
    producer's output kept until its own part of the stage takes it."""

    sc: Scenario
    shares: Sequence[workload.ProducerShare]
    work: StageWork
    _outputs: dict[int, simulate.SimOutput] | None = None

    def output(self, producer: int, messages: pa.Table | None = None) -> simulate.SimOutput:
        """The producer's simulation (``messages``: unused, every producer's are generated or read here)."""
        if self._outputs is None:
            messages_of = {s.producer: input_messages(self.sc, s, self.work) for s in self.shares}
            self._outputs = simulate.simulate_coupled(messages_of, self.sc)
        return self._outputs.pop(producer)


def input_messages(sc: Scenario, share: workload.ProducerShare, work: StageWork) -> pa.Table:
    """One producer's messages, whole, to simulate: generated (not written), or read from the committed
    ``messages``."""
    if work.runs(GENERATE):
        return stage.producer_messages(sc, share)
    uris = may_hold(work.inputs["messages"], share.producer)
    return read_producer_rows(uris, MESSAGES_DATA, share.producer)


@dataclass
class IterativeRound:
    """One round of ``brokers.coupling = iterative`` (:mod:`rocketsim.engine.iterative`) as files: the
    driver writes the brokers' trajectories of round ``number`` (:meth:`write_trajectories`); each producer
    task simulates its producers against them and writes their arrival work (:meth:`write_work`); the
    driver merges it (:meth:`merged_work`). The trajectories are mapped once per task (kept here), not
    copied: the engines read the file's pages."""

    sc: Scenario
    work: StageWork
    number: int
    _trajectories: iterative.Trajectories | None = None

    def trajectories_uri(self) -> str:
        return f"{self.work.scratch}/{SCRATCH_TRAJECTORIES.format(self.number)}"

    def write_trajectories(self, trajs: Sequence[iterative.Trajectory]) -> None:
        write_bytes(iterative.trajectories_to_bytes(trajs), self.trajectories_uri())

    def trajectories(self) -> iterative.Trajectories:
        if self._trajectories is None:
            data = map_bytes(self.trajectories_uri())
            self._trajectories = iterative.trajectories_from_bytes(self.sc, data)
        return self._trajectories

    def simulate(self, producer: int, messages: pa.Table) -> tuple[simulate.SimOutput, iterative.ArrivalWork]:
        return iterative.simulate_round(messages, self.sc, producer, self.trajectories())

    def output(self, producer: int, messages: pa.Table) -> simulate.SimOutput:
        """The producer's simulation against this round's trajectories (the last round's: its rows)."""
        return self.simulate(producer, messages)[0]

    def write_work(self, share: workload.ProducerShare) -> dict[str, int]:
        """A producer task's part of the round: its arrival work into the scratch folder; its counts."""
        p = share.producer
        _, arrivals = self.simulate(p, input_messages(self.sc, share, self.work))
        uri = f"{self.work.scratch}/{SCRATCH_ROUND_WORK.format(self.number, p)}"
        write_ipc(iterative.work_table(arrivals), uri)
        return {"round.requests": arrivals.requests}

    def merged_work(self, producers: Sequence[int]) -> iterative.ArrivalWork:
        """Every producer's arrival work of the round, merged (sums: any order)."""
        uris = [f"{self.work.scratch}/{SCRATCH_ROUND_WORK.format(self.number, p)}" for p in producers]
        return iterative.arrival_work([iterative.work_from_table(read_ipc(u)) for u in uris])


def write_producer_files(
    sc: Scenario,
    share: workload.ProducerShare,
    work: StageWork,
    coupled: CoupledProducers | IterativeRound | None = None,
) -> dict[str, int]:
    """One producer's part of the stage (step 1 of the module docstring); returns its counts.
    ``coupled``: the producer's simulation against the closed-loop brokers (the run's producers
    simulated together, or the last round of the iterative coupling). The memory it freed is given back
    to the system when it ends (:func:`give_back_memory`)."""
    try:
        return _producer_files(sc, share, work, coupled)
    finally:
        give_back_memory()


def _producer_files(
    sc: Scenario,
    share: workload.ProducerShare,
    work: StageWork,
    coupled: CoupledProducers | IterativeRound | None,
) -> dict[str, int]:
    if work.runs(SIMULATE):
        return _write_simulated(sc, share, work, coupled)
    if work.runs(GENERATE):  # the stages are contiguous: generate alone
        return _write_generated(sc, share, work)
    p = share.producer
    counts: dict[str, int] = {}
    messages = _messages(sc, share, work, counts)
    attempts, results = _read_attempts_results(work, p, counts)
    if work.runs(SUMMARIZE):
        faults = summaries.fault_spans(sc.faults)
        aggregates = summaries.producer_aggregates(
            attempts, results, work.window_ms, messages=messages, faults=faults
        )
        write_bytes(aggregates.to_bytes(), f"{work.scratch}/{SCRATCH_AGGREGATES.format(p)}")
    if work.runs(BROKER_SIDE):
        txns = broker_side.unstored_transactions(messages, results, broker_side.result_halves(results), sc)
        if txns.num_rows:
            write_parquet(txns, work.part("transactions", PRODUCER_PART.format(p)))
        counts |= reconcile.transaction_counts(txns)
    return counts


def _write_generated(sc: Scenario, share: workload.ProducerShare, work: StageWork) -> dict[str, int]:
    """The producer's messages generated and written, a chunk at a time; returns their counts."""
    sink = ParquetSink(work.part("messages", PRODUCER_PART.format(share.producer)), MESSAGES_DATA)
    parts = [reconcile.message_counts(MESSAGES_DATA.empty_table())]
    try:
        for messages in stage.producer_message_chunks(sc, share, work.chunk_rows):
            sink.write(messages)
            parts.append(reconcile.message_counts(messages))
        sink.close()
    except BaseException:
        sink.abort()
        raise
    return reconcile.add_counts(parts)


def _messages(
    sc: Scenario, share: workload.ProducerShare, work: StageWork, counts: dict[str, int]
) -> pa.Table | None:
    """What the stages after the simulation need of the producer's committed messages."""
    p = share.producer
    if "messages" not in work.reads():
        return None
    uris = may_hold(work.inputs["messages"], p)
    if work.runs(SUMMARIZE):  # every row: counted
        both = broker_side.UNSTORED_MESSAGE_COLUMNS if work.runs(BROKER_SIDE) else ()
        schema = _columns(MESSAGES_DATA, _MESSAGE_KEYS, summaries.MESSAGE_COLUMNS, both)
        messages = read_producer_rows(uris, schema, p)
        counts |= reconcile.message_counts(messages, "read")
        return messages
    # the broker side alone: its transactional messages
    schema = _columns(MESSAGES_DATA, broker_side.UNSTORED_MESSAGE_COLUMNS)
    messages = read_producer_rows(uris, schema, p, filters=[("message_type", "=", "transaction")])
    counts["messages.transaction"] = messages.num_rows
    return messages


class _ProducerSinks:
    """A simulating producer task's files, written a chunk at a time: ``messages`` (when generated) and
    ``send_attempts`` Parquet, the ``send_results`` rows that point at no record, whole; the records, the
    results pointing at them and the results of its transactional messages with another stored half
    into the scratch files (one record batch per broker per chunk); the ``transactions`` rows of its
    transactional messages whose result points at no half."""

    def __init__(self, sc: Scenario, p: int, work: StageWork) -> None:
        brokers = len(sc.cluster.brokers)
        name = PRODUCER_PART.format(p)
        self.messages = (
            ParquetSink(work.part("messages", name), MESSAGES_DATA) if work.runs(GENERATE) else None
        )
        self.attempts = ParquetSink(work.part("send_attempts", name), ATTEMPTS_DATA)
        self.unstored = ParquetSink(work.part("send_results", name), RESULTS_DATA, empty_file=False)
        self.results = IpcGroupsSink(f"{work.scratch}/{SCRATCH_RESULTS.format(p)}", RESULTS_CORE, brokers)
        self.log = IpcGroupsSink(f"{work.scratch}/{SCRATCH_LOG.format(p)}", store.LOG_COLUMNS, brokers)
        self.other = IpcGroupsSink(
            f"{work.scratch}/{SCRATCH_OTHER_HALVES.format(p)}", broker_side.HALF_RESULTS, brokers
        )
        self.transactions = (
            ParquetSink(work.part("transactions", name), None, empty_file=False)
            if work.runs(BROKER_SIDE)
            else None
        )

    def all(self) -> list[ParquetSink | IpcGroupsSink]:
        sinks = (self.messages, self.attempts, self.unstored, self.results, self.log, self.other)
        return [s for s in (*sinks, self.transactions) if s is not None]

    def write(self, tables: stage.ProducerTables) -> None:
        self.attempts.write(tables.attempts)
        self.unstored.write(tables.unstored_results())
        rows, brokers = tables.stored_result_rows()
        self.results.write(tables.results, brokers, rows)
        self.log.write(tables.log, tables.log_broker)
        self.other.write(*tables.other_half_results())


def _write_simulated(
    sc: Scenario,
    share: workload.ProducerShare,
    work: StageWork,
    coupled: CoupledProducers | IterativeRound | None,
) -> dict[str, int]:
    """A producer task that simulates: its messages (generated, or its committed ones read) simulated a
    chunk at a time (:func:`rocketsim.stage.producer_chunks`; coupled producers: their simulation made
    whole, one chunk), each chunk's rows appended to its files (:class:`_ProducerSinks`), counted
    and folded into the producer's summary aggregates (:class:`rocketsim.tables.summaries.ProducerFold`)."""
    p = share.producer
    parts: list[dict[str, int]] = []
    faults = summaries.fault_spans(sc.faults)
    fold = summaries.ProducerFold(work.window_ms, faults=faults) if work.runs(SUMMARIZE) else None
    sinks = _ProducerSinks(sc, p, work)
    try:
        message_chunks = _message_chunks(sc, share, work, sinks, parts)
        if coupled is not None:
            messages = pa.concat_tables([MESSAGES_DATA.empty_table(), *message_chunks])
            out = coupled.output(p, messages)
            chunks: Iterable[stage.ProducerTables] = [stage.producer_tables(sc, messages, out)]
        else:
            chunks = stage.producer_chunks(sc, message_chunks)
        for tables in chunks:
            sinks.write(tables)
            parts.append(reconcile.attempt_counts(tables.attempts) | reconcile.result_counts(tables.results))
            if fold is not None:
                fold.add(
                    tables.attempts,
                    tables.results,
                    tables.messages,
                    tables.later_start_ms,
                    tables.result_copies(),
                )
            if sinks.transactions is not None:
                txns = tables.unstored_transactions(sc)
                sinks.transactions.write(txns)
                parts.append(reconcile.transaction_counts(txns))
        for sink in sinks.all():
            sink.close()
    except BaseException:
        for sink in sinks.all():
            sink.abort()
        raise
    if fold is not None:
        write_bytes(fold.result().to_bytes(), f"{work.scratch}/{SCRATCH_AGGREGATES.format(p)}")
    return reconcile.add_counts(parts)


def _message_chunks(
    sc: Scenario, share: workload.ProducerShare, work: StageWork, sinks: _ProducerSinks, parts: list
) -> Iterator[pa.Table]:
    """The producer's messages a chunk at a time: generated (and written, and counted), or its committed
    ones read (and counted) and cut into chunks."""
    if sinks.messages is not None:
        parts.append(reconcile.message_counts(MESSAGES_DATA.empty_table()))  # its names, were there none
        for messages in stage.producer_message_chunks(sc, share, work.chunk_rows):
            sinks.messages.write(messages)
            parts.append(reconcile.message_counts(messages))
            yield from _cut(messages, work.chunk_rows)
        return
    p = share.producer
    messages = read_producer_rows(may_hold(work.inputs["messages"], p), MESSAGES_DATA, p)
    parts.append(reconcile.message_counts(messages, "read"))
    yield from _cut(messages, work.chunk_rows)


def _cut(table: pa.Table, rows: int) -> Iterator[pa.Table]:
    for at in range(0, table.num_rows, rows):
        yield table.slice(at, rows)


def _read_attempts_results(
    work: StageWork, p: int, counts: dict[str, int]
) -> tuple[pa.Table | None, pa.Table | None]:
    """The producer's committed attempts and results, the columns the stages read."""
    attempts = results = None
    if "send_attempts" in work.reads():
        schema = _columns(ATTEMPTS_DATA, summaries.ATTEMPT_COLUMNS)
        attempts = read_producer_rows(
            may_hold(work.inputs["send_attempts"], p), schema, p, ("seq", "attempt")
        )
        counts |= reconcile.attempt_counts(attempts, "read")
    if "send_results" in work.reads():
        wanted = [_RESULT_COUNTS]
        if work.runs(SUMMARIZE):
            wanted.append(summaries.RESULT_COLUMNS)
        if work.runs(BROKER_SIDE):
            wanted.append(broker_side.UNSTORED_RESULT_COLUMNS)
        schema = _columns(RESULTS_DATA, *wanted)
        results = read_producer_rows(may_hold(work.inputs["send_results"], p), schema, p)
        counts |= reconcile.result_counts(results, "read")
    return attempts, results


# ---- broker tasks --------------------------------------------------------------------------------


def write_broker_files(sc: Scenario, b: int, producers: Sequence[int], work: StageWork) -> dict[str, int]:
    """One broker's part of the stage (step 2 of the module docstring); returns its counts. The memory it
    freed is given back to the system when it ends (:func:`give_back_memory`)."""
    try:
        return _broker_files(sc, b, producers, work)
    finally:
        give_back_memory()


def _broker_files(sc: Scenario, b: int, producers: Sequence[int], work: StageWork) -> dict[str, int]:
    if work.runs(SIMULATE):
        n = len(sc.cluster.brokers)
        log = ipc_group_source(
            [f"{work.scratch}/{SCRATCH_LOG.format(p)}" for p in producers], b, store.LOG_COLUMNS, n
        )
        results = ipc_group_source(
            [f"{work.scratch}/{SCRATCH_RESULTS.format(p)}" for p in producers], b, RESULTS_CORE, n
        )
        other = read_ipc_group(
            [f"{work.scratch}/{SCRATCH_OTHER_HALVES.format(p)}" for p in producers],
            b,
            broker_side.HALF_RESULTS,
            n,
        )
        out, counts = _number_broker(sc, b, log, results, other, work)
    elif work.runs(BROKER_SIDE):
        out = _read_broker(sc, b, work)
        counts = reconcile.log_counts(out.commit_log, "read")
    else:
        raise ValueError(f"stages {work.stages} have no broker tasks")
    if work.runs(BROKER_SIDE):
        storage = out.storage(work.window_ms)
        if storage.num_rows:
            write_parquet(storage, work.part("broker_storage", BROKER_PART.format(b)))
        txns = out.stored_transactions(sc)
        if txns.num_rows:
            write_parquet(txns, work.part("transactions", BROKER_PART.format(b)))
        write_ipc(out.deliveries(txns), f"{work.scratch}/{SCRATCH_DELIVERIES.format(b)}")
        counts |= reconcile.storage_counts(storage) | reconcile.transaction_counts(txns)
    return counts


def _number_broker(
    sc: Scenario,
    b: int,
    log: IpcGroupSource,
    results: IpcGroupSource,
    other: pa.Table,
    work: StageWork,
) -> tuple[stage.BrokerTables, dict[str, int]]:
    """A broker's records numbered and the results pointing at them completed, a chunk at a time
    (:func:`rocketsim.broker.store.numbered_chunks`, :class:`rocketsim.broker.store.PointedRecords`), each
    chunk
    appended to its ``commit_log`` and ``send_results`` files and counted; what its broker side reads
    of them folded (:class:`rocketsim.stage.BrokerFold`). ``log`` and ``results`` give the scratch
    files' records when asked (:class:`rocketsim.warehouse.files.IpcGroupSource`): local ones
    memory-mapped anew for each chunk, only the batches that chunk's rows are in, and let go after, so
    the pages a task touched do not stay in its memory."""
    name = BROKER_PART.format(b)
    log_sink = ParquetSink(work.part("commit_log", name), COMMIT_LOG_DATA, empty_file=False)
    results_sink = ParquetSink(
        work.part("send_results", name),
        RESULTS_DATA,
        empty_file=False,
        row_group_size=BROKER_RESULTS_ROW_GROUP,
    )
    fold = stage.BrokerFold(b, other)
    parts = [reconcile.log_counts(COMMIT_LOG_DATA.empty_table())]
    pointed = store.PointedRecords(sc.cluster.brokers)
    try:
        for part in store.numbered_chunks(log, sc, work.chunk_rows):
            log_sink.write(part)
            parts.append(reconcile.log_counts(part))
            fold.add_log(part)
            pointed.add(part)
        total = results.num_rows
        if pointed.rows != total:
            raise AssertionError("send_results rows and the commit-log records they point at do not pair up")
        parts.append(reconcile.stored_result_counts(RESULTS_DATA.empty_table()))
        for at in range(0, total, work.chunk_rows):
            completed = pointed.attach(results.slice(at, work.chunk_rows))
            results_sink.write(completed)
            parts.append(reconcile.stored_result_counts(completed))
            fold.add_results(completed)
        log_sink.close()
        results_sink.close()
    except BaseException:
        log_sink.abort()
        results_sink.abort()
        raise
    return fold.tables(), reconcile.add_counts(parts)


def _read_broker(sc: Scenario, b: int, work: StageWork) -> stage.BrokerTables:
    """A broker's committed commit-log records, and the committed results that point at halves (of any
    broker: a result's files are not by broker, so each broker task scans the few columns it needs of
    every results file) or failed (a failed send may have left halves: its timed-out attempts the
    broker stored anyway); :func:`rocketsim.broker.side.stored_transactions` pairs them with its own
    halves."""
    name = sc.cluster.brokers[b]
    log = read_parquet(
        may_hold(work.inputs["commit_log"], name),
        _columns(COMMIT_LOG_DATA, _LOG_READ),
        filters=[("broker", "=", name)],
    )
    uris = [f.uri for f in work.inputs["send_results"]]
    schema = _columns(RESULTS_DATA, broker_side.HALF_RESULT_COLUMNS)
    results = pa.concat_tables(
        [
            read_parquet(uris, schema, filters=[("store_topic", "=", store.HALF_TOPIC)]),
            read_parquet(uris, schema, filters=[("status", "=", "FAILED")]),
        ]
    )
    return stage.BrokerTables(b, log, results)


# ---- the driver ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FinishedStage:
    """What :func:`finish_stage` made: its counts (:func:`rocketsim.tables.reconcile.table_counts` of every
    table it wrote) and the summary tables (to print the run's summary without reading it back)."""

    counts: dict[str, int]
    summary_tables: dict[str, pa.Table]


def finish_stage(
    sc: Scenario, work: StageWork, producers: Sequence[int], brokers: Sequence[int]
) -> FinishedStage:
    """The driver's step once every task is done, before it publishes the tables (step 3 of the module
    docstring); the scratch folder is deleted."""
    counts: dict[str, int] = {}
    made: dict[str, pa.Table] = {}
    if work.runs(SUMMARIZE):
        merged = merge_aggregates([f"{work.scratch}/{SCRATCH_AGGREGATES.format(p)}" for p in producers])
        made = summaries.summary_tables(merged)
    if work.runs(BROKER_SIDE):
        deliveries = [read_ipc(f"{work.scratch}/{SCRATCH_DELIVERIES.format(b)}") for b in brokers]
        made["consumer_load"] = broker_side.consumer_load(deliveries, sc)
    for name, table in made.items():
        write_driver_table(work.tables[name], table)
        counts |= reconcile.table_counts(name, table)
    delete_dir(work.scratch)
    return FinishedStage(counts, {n: t for n, t in made.items() if n in summaries.SUMMARY_TABLES})


def merge_aggregates(uris: Sequence[str]) -> summaries.SummaryAggregates:
    """The summary aggregates the tasks wrote into the scratch folder, merged."""
    return summaries.merge(summaries.SummaryAggregates.from_bytes(read_bytes(u)) for u in uris)


def write_driver_table(folder: str, table: pa.Table) -> None:
    """A table the driver made (small), as the one Parquet file of its staging folder."""
    write_parquet(table, f"{folder}/{DRIVER_PART}")


# ---- a comparison's producer tasks ------------------------------------------------------------------


def write_variant_aggregates(
    scenarios: Mapping[str, Scenario],
    share: workload.ProducerShare,
    window_ms: int,
    scratch: str,
    group: int,
) -> dict[str, int]:
    """A comparison's producer task: :func:`rocketsim.stage.variant_aggregates` of one producer under
    the variants of message-signature group ``group``, into the scratch folder; returns its counts
    (messages and attempts over those variants)."""
    aggregates = stage.variant_aggregates(scenarios, share, window_ms)
    write_bytes(
        aggregates.to_bytes(), f"{scratch}/{SCRATCH_VARIANT_AGGREGATES.format(group, share.producer)}"
    )
    scopes = aggregates.result_scopes
    return {
        "messages": int(pc.sum(scopes.column("messages")).as_py() or 0),
        "attempts": int(pc.sum(scopes.column("attempts")).as_py() or 0),
    }


def write_whole_run_aggregates(
    sc: Scenario, variant: str, index: int, window_ms: int, scratch: str
) -> dict[str, int]:
    """A capacity sweep's task for variant number ``index`` (:func:`rocketsim.stage.whole_run_aggregates`):
    its aggregates into the scratch folder; its counts (and the iterative coupling's ``rounds`` and
    ``residual``)."""
    run = stage.whole_run_aggregates(sc, variant, window_ms)
    write_bytes(run.aggregates.to_bytes(), f"{scratch}/{SCRATCH_WHOLE_RUN_AGGREGATES.format(index)}")
    coupling = {"rounds": run.rounds, "residual": run.residual} if run.rounds is not None else {}
    return {"messages": sc.workload.total_messages(), **coupling}


def whole_run_aggregate_files(scratch: str, n: int) -> list[str]:
    """The files :func:`write_whole_run_aggregates` wrote for ``n`` variants."""
    return [f"{scratch}/{SCRATCH_WHOLE_RUN_AGGREGATES.format(i)}" for i in range(n)]


def variant_aggregate_files(scratch: str, groups: Sequence[Sequence[int]]) -> list[str]:
    """The files :func:`write_variant_aggregates` wrote: per group, its producers'."""
    return [f"{scratch}/{SCRATCH_VARIANT_AGGREGATES.format(g, p)}" for g, ps in enumerate(groups) for p in ps]
