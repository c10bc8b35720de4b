"""A broker task: one broker's part of the stage, once every producer task is done.

With the simulation: that broker's records from every producer task numbered and the results pointing
at them completed a chunk at a time (:func:`rocketsim.broker.store.numbered_chunks`,
:class:`rocketsim.broker.store.PointedRecords`: offsets need all of a broker's records, which is why
this is a second step), written as its ``commit_log`` and ``send_results`` parts (the results in
(producer, seq) order: readers of one producer skip the others' row groups); without it, its committed
records read back. Then its broker side (:class:`rocketsim.stage.tables.BrokerFold` keeps what it
reads): ``broker_storage``, the ``transactions`` rows of the halves it holds, and what consumers of
its queues get (into the scratch store, for the driver's ``consumer_load``). Returns its counts.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from rocketsim.broker import side as broker_side
from rocketsim.broker import store
from rocketsim.scenario import Scenario
from rocketsim.stage.inputs import RESULTS_DATA, columns
from rocketsim.stage.plan import StagePlan
from rocketsim.stage.protocols import (
    BROKER,
    DELIVERIES,
    LOG,
    OTHER_HALVES,
    RESULTS,
    RowSource,
    StageIO,
    Task,
    scratch_key,
    write_through,
    write_whole,
)
from rocketsim.stage.scratch import (
    CODED_LOG,
    RESULTS_CORE,
    RESULTS_SCRATCH,
    broker_log,
    broker_results,
    log_scratch_schema,
)
from rocketsim.stage.tables import BrokerFold, BrokerTables
from rocketsim.tables import reconcile, schemas
from rocketsim.tables.grouping import single_values_coded
from rocketsim.tables.schemas import BROKER_SIDE, SIMULATE

COMMIT_LOG_DATA = schemas.data_schema(schemas.COMMIT_LOG)
# string columns often of one value in a part (one message type, one broker, every send SEND_OK and sync):
# such a part's column is written as a dictionary of that value (rocketsim.tables.grouping)
SINGLE_LOG = ("message_type",)
SINGLE_RESULTS = ("broker", "status", "send_mode")
_LOG_READ = tuple(n for n in COMMIT_LOG_DATA.names if n != "offset_msg_id")


def broker_task(sc: Scenario, plan: StagePlan, io: StageIO, b: int, producer_tasks: int) -> dict[str, int]:
    """Broker ``b``'s part of the stage (the module docstring), after the ``producer_tasks`` producer
    tasks; returns its counts."""
    if plan.runs(SIMULATE):
        n = len(sc.cluster.brokers)
        tasks = range(producer_tasks)
        schema = log_scratch_schema(sc)
        log_keys = [scratch_key(LOG, t) for t in tasks]
        source = io.scratch.group_source(log_keys, b, schema, n)
        log = broker_log(source, schema, sc.cluster.brokers[b], coded=CODED_LOG)
        keys = [scratch_key(RESULTS, t) for t in tasks]
        results = broker_results(io.scratch.group_source(keys, b, RESULTS_SCRATCH, n))
        keys = [scratch_key(OTHER_HALVES, t) for t in tasks]
        other = io.scratch.group_source(keys, b, broker_side.HALF_RESULTS, n)()
        out, counts = _numbered(sc, plan, io, b, log, results, other)
        for source in (log, results):  # read for the last time: the other broker tasks' groups stay cached
            source.let_go()
    elif plan.runs(BROKER_SIDE):
        out = _read_broker(sc, io, b)
        counts = reconcile.log_counts(out.commit_log, "read")
    else:
        raise ValueError(f"stages {plan.stages} have no broker tasks")
    if plan.runs(BROKER_SIDE):
        storage = out.storage(plan.window_ms)
        txns = out.stored_transactions(sc)
        for table, rows in (("broker_storage", storage), ("transactions", txns)):
            write_whole(io.tables.sink(table, Task(BROKER, b), rows.schema), rows)
        io.scratch.put_table(scratch_key(DELIVERIES, b), out.deliveries(txns))
        counts |= reconcile.storage_counts(storage) | reconcile.transaction_counts(txns)
    return counts


def _numbered(
    sc: Scenario, plan: StagePlan, io: StageIO, b: int, log: RowSource, results: RowSource, other: pa.Table
) -> tuple[BrokerFold, dict[str, int]]:
    """A broker's records numbered and the results pointing at them completed, a chunk at a time, each
    chunk written and counted and what its broker side reads of them folded (:class:`BrokerFold`).
    ``log`` and ``results`` give the records when asked (files mapped anew for each chunk, only what that
    chunk's rows are in, let go after: the pages a task touched do not stay in its memory). What it keeps
    across the chunks is a few ints a record (:func:`rocketsim.broker.store.numbered_parts`,
    :class:`rocketsim.broker.store.PointedOffsets`, :func:`_producer_order`) and the fold's sums."""
    log_sink = io.tables.sink("commit_log", Task(BROKER, b), COMMIT_LOG_DATA)
    results_sink = io.tables.sink("send_results", Task(BROKER, b), RESULTS_DATA)
    fold = BrokerFold(b, plan.window_ms, other)
    parts = [reconcile.log_counts(COMMIT_LOG_DATA.empty_table())]
    pointed = store.PointedOffsets(log, sc.cluster.brokers, plan.chunk_rows)

    def body() -> None:
        total = results.num_rows
        if pointed.results != total:
            raise AssertionError("send_results rows and the commit-log records they point at do not pair up")
        for part, rows in store.numbered_parts(log, sc, plan.chunk_rows):
            part = single_values_coded(part, SINGLE_LOG)
            log_sink.write(part)
            parts.append(reconcile.log_counts(part))
            fold.add_log(part)
            pointed.add(part, rows)
        parts.append(reconcile.stored_result_counts(RESULTS_DATA.empty_table()))
        order, last = _producer_order(results, plan.chunk_rows), -1
        for at in range(0, total, plan.chunk_rows):
            if order is None:
                rows, chunk = (
                    np.arange(at, min(at + plan.chunk_rows, total)),
                    results.slice(at, plan.chunk_rows),
                )
            else:
                rows = order[at : at + plan.chunk_rows]
                chunk = results.take(rows, RESULTS_CORE.names)
            last = _after(chunk, last)
            completed = single_values_coded(pointed.attach(chunk, rows), SINGLE_RESULTS)
            results_sink.write(completed)
            parts.append(reconcile.stored_result_counts(completed))
            fold.add_results(completed)

    write_through([log_sink, results_sink], body)
    return fold, reconcile.add_counts(parts)


def _producer_order(results: RowSource, piece: int) -> np.ndarray | None:
    """The row order that sorts ``results`` by producer, keeping each producer's rows in the order given
    (each in seq order: a producer task writes a producer's results in that order, :func:`_after` checks
    it); None when they come in it (each task holds a range of producers). From the ends of the pieces
    they are stored in when each holds one producer (a producer larger than a chunk is written a chunk at
    a time; a piece is in producer order, or :func:`_after` stops the task), else the column read
    ``piece`` rows at a time; int32 when it fits."""
    total = results.num_rows
    first, last, sizes = results.pieces("producer")
    if (first == last).all():
        by = np.argsort(first, kind="stable")
        if (by[1:] > by[:-1]).all():
            return None
        moved = np.cumsum(sizes[by]) - sizes[by] - (np.cumsum(sizes) - sizes)[by]  # each piece's shift
        order = np.arange(total) - np.repeat(moved, sizes[by])
    else:
        producer = np.empty(total, np.int32)
        for at in range(0, total, piece):
            column = results.slice(at, piece).column("producer")
            producer[at : at + len(column)] = column.to_numpy()
        if (producer[1:] >= producer[:-1]).all():
            return None
        order = np.argsort(producer, kind="stable")
    return order.astype(np.int32) if total < 1 << 31 else order


def _after(chunk: pa.Table, last: int) -> int:
    """The (producer, seq) key of the last of ``chunk``'s results, checking that they come in increasing
    key order after ``last`` (the previous chunk's)."""
    keys = store.result_keys(chunk)
    if len(keys) and (keys[0] <= last or not (keys[1:] > keys[:-1]).all()):
        raise AssertionError("a producer task's send_results are not in seq order")
    return int(keys[-1]) if len(keys) else last


def _read_broker(sc: Scenario, io: StageIO, b: int) -> BrokerTables:
    """A broker's committed commit-log records, and the committed results that point at halves (of any
    broker: a result's files are not by broker, so each broker task reads the few columns it needs of
    every result) or failed (a failed send may have left halves: its timed-out attempts the broker stored
    anyway); :func:`rocketsim.broker.side.stored_transactions` pairs them with its own halves."""
    name = sc.cluster.brokers[b]
    log = io.committed.rows("commit_log", columns(COMMIT_LOG_DATA, _LOG_READ), {"broker": name})
    schema = columns(RESULTS_DATA, broker_side.HALF_RESULT_COLUMNS)
    results = pa.concat_tables(
        [
            io.committed.rows("send_results", schema, {"store_topic": store.HALF_TOPIC}),
            io.committed.rows("send_results", schema, {"status": "FAILED"}),
        ]
    )
    return BrokerTables(b, log, results)
