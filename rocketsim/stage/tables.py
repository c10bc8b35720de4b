"""What one producer task and one broker task compute, as plain dataclasses over Arrow.

A producer's messages (:func:`producer_message_chunks`) -> :func:`producer_chunks` (a chunk at a time)
or :func:`with_records` (whole producers): the simulation (:func:`rocketsim.engine.simulate_chunks`)
and the commit-log records its stored attempts make (:func:`rocketsim.broker.store.log_records`), each
record and result tagged with the broker that holds it (:class:`ProducerTables`, with what is derived
from them: summary aggregates, the ``transactions`` rows of unstored halves). One broker's records from
every producer -> :func:`broker_tables`, or a :class:`BrokerFold` fed a part at a time: numbered, with
the broker side derived from them (:class:`BrokerTables`). The tasks that write them:
:mod:`rocketsim.stage.producer`, :mod:`rocketsim.stage.broker`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from rocketsim import engine
from rocketsim.broker import side as broker_side
from rocketsim.broker import store
from rocketsim.scenario import Scenario, workload
from rocketsim.tables import schemas, summaries
from rocketsim.tables.grouping import is_value, regroup
from rocketsim.tables.summaries import SummaryAggregates

MESSAGES_DATA = schemas.data_schema(schemas.MESSAGES)


@dataclass(frozen=True)
class ProducerTables:
    """What a producer task computes of one producer, or of a few whole ones: their rows, in (producer,
    seq[, attempt]) order."""

    messages: pa.Table  # MESSAGES without run_id
    attempts: pa.Table  # SEND_ATTEMPTS without run_id
    results: pa.Table  # SEND_RESULTS without run_id and without the store columns (the broker step's)
    log: pa.Table  # the commit-log records before numbering (store.LOG_COLUMNS)
    log_broker: np.ndarray  # per record: its broker's place in cluster.brokers
    result_broker: np.ndarray  # per result: the broker of the record it points at, -1 for none
    # a chunk's (producer_chunks): no attempt of a later chunk starts before this; None: not known
    later_start_ms: int | None = None
    # False: a summaries-only run's (without_records): no record made, ``log`` empty, no result pointing
    recorded: bool = True
    # ``attempts`` and ``results`` with the engine's string columns as dictionary arrays
    # (:attr:`rocketsim.engine.SimChunk.coded`), None: not made
    coded: tuple[pa.Table, pa.Table] | None = None

    def coded_attempts(self) -> pa.Table:
        """``attempts``, as dictionary arrays the string columns that the engine gave as codes: what a reader
        of codes (the summary fold, the Parquet writer) takes without encoding them again."""
        return self.attempts if self.coded is None else self.coded[0]

    def coded_results(self) -> pa.Table:
        """``results`` as :meth:`coded_attempts` gives ``attempts``."""
        return self.results if self.coded is None else self.coded[1]

    def unstored_results(self) -> pa.Table:
        """The ``send_results`` rows that point at no record (FAILED, REJECTED, unstored oneway), whole:
        their store columns are null."""
        return store.with_null_store_columns(self.results.filter(pa.array(self.result_broker < 0)))

    def stored_results(self) -> tuple[pa.Table, np.ndarray]:
        """The results that point at a record (the broker step completes them), and each one's broker."""
        rows, brokers = self.stored_result_rows()
        return self.results.take(pa.array(rows)), brokers

    def stored_result_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`stored_results` as row numbers of ``results`` (and each one's broker)."""
        rows = np.flatnonzero(self.result_broker >= 0)
        return rows, self.result_broker[rows]

    def result_copies(self) -> np.ndarray:
        """Per result, the copies of its message the brokers stored
        (:func:`rocketsim.broker.store.result_copies`), counted from its records (if it has them)."""
        copies = store.log_copies(self.results, self.log) if self.recorded else None
        return store.result_copies(self.messages, self.attempts, self.results) if copies is None else copies

    def summary_aggregates(
        self, window_ms: int, faults: Sequence[summaries.FaultSpan] = ()
    ) -> SummaryAggregates:
        """The producer's mergeable summary aggregates
        (:func:`rocketsim.tables.summaries.producer_aggregates`; ``faults``: the scenario's)."""
        return summaries.producer_aggregates(
            self.attempts, self.results, window_ms, messages=self.messages, faults=faults
        )

    def other_half_results(self) -> tuple[pa.Table, np.ndarray]:
        """The results of its transactional messages with a stored half the result does not point at,
        once per broker holding one, and that broker (:func:`rocketsim.broker.side.other_half_results`)."""
        return broker_side.other_half_results(self.log, self.log_broker, self.results)

    def unstored_transactions(self, sc: Scenario) -> pa.Table:
        """``transactions`` rows of its transactional messages whose result points at no half
        (:func:`rocketsim.broker.side.unstored_transactions`)."""
        halves = broker_side.pointed_halves(self.log)
        return broker_side.unstored_transactions(self.messages, self.results, halves, sc)


@dataclass(frozen=True)
class BrokerTables:
    """What one broker task computes: its commit log, numbered, and the results pointing at it."""

    broker: int
    commit_log: pa.Table  # COMMIT_LOG without run_id, in the broker's write order
    results: pa.Table  # SEND_RESULTS without run_id, store columns filled
    # broker_side.HALF_RESULT_COLUMNS of the messages with a half here their result does not point at
    other_half_results: pa.Table | None = None

    def storage(self, window_ms: int) -> pa.Table:
        """Its ``broker_storage`` rows (:func:`rocketsim.broker.side.broker_storage`)."""
        return broker_side.broker_storage(self.commit_log, window_ms)

    def stored_transactions(self, sc: Scenario) -> pa.Table:
        """``transactions`` rows of the halves it stores
        (:func:`rocketsim.broker.side.stored_transactions`)."""
        results = self.results.select(list(broker_side.HALF_RESULT_COLUMNS)).cast(broker_side.HALF_RESULTS)
        if self.other_half_results is not None:
            results = pa.concat_tables([results, self.other_half_results.cast(broker_side.HALF_RESULTS)])
        return broker_side.stored_transactions(self.commit_log, results, sc)

    def deliveries(self, stored_transactions: pa.Table) -> pa.Table:
        """What consumers of each of its queues get (:func:`rocketsim.broker.side.queue_deliveries`), given
        its :meth:`stored_transactions`."""
        return broker_side.queue_deliveries(self.commit_log, stored_transactions)


def producer_messages(sc: Scenario, share: workload.ProducerShare) -> pa.Table:
    """One producer's generated messages (:func:`rocketsim.scenario.workload.generate_producer`) as one
    table."""
    return pa.Table.from_batches(list(workload.generate_producer(sc, share)), schema=MESSAGES_DATA)


def producer_message_chunks(
    sc: Scenario, share: workload.ProducerShare, rows: int | None = None
) -> Iterator[pa.Table]:
    """One producer's generated messages (:func:`rocketsim.scenario.workload.generate_producer`), a chunk (of
    ``rows`` at most) at a time."""
    for batch in workload.generate_producer(sc, share, batch_rows=rows):
        yield pa.Table.from_batches([batch], schema=MESSAGES_DATA)


def coded_message_chunks(
    sc: Scenario, share: workload.ProducerShare, rows: int | None = None
) -> Iterator[pa.Table]:
    """:func:`producer_message_chunks` as they are drawn, their
    :data:`rocketsim.scenario.workload.CODED_COLUMNS` dictionary arrays (what the ``messages`` Parquet
    writer takes without hashing every value; ``.cast(MESSAGES_DATA)``: the strings)."""
    for batch in workload.generate_producer(sc, share, batch_rows=rows, coded=True):
        yield pa.Table.from_batches([batch])


def producer_tables(sc: Scenario, messages: pa.Table, out: engine.SimOutput | None = None) -> ProducerTables:
    """One producer's messages -> its attempts, results and commit-log records; ``out``: its simulation
    when already made (:func:`rocketsim.engine.simulate_coupled`)."""
    producers = messages.column("producer").unique().to_pylist()
    if len(producers) > 1:
        raise ValueError(f"producer_tables takes one producer's messages, got producers {sorted(producers)}")
    if out is None:
        out = engine.simulate(messages, sc)
    return with_records(sc, messages, out.attempts, out.results)


def producer_chunks(
    sc: Scenario,
    chunks: Iterable[pa.Table | pa.RecordBatch],
    records: bool = True,
    simulate: Callable[[Iterable[pa.Table | pa.RecordBatch]], Iterator[engine.SimChunk]] | None = None,
) -> Iterator[ProducerTables]:
    """:func:`producer_tables` a chunk at a time: one producer's messages given in chunks (seq order) ->
    its rows in chunks of consecutive messages (``simulate``; default
    :func:`rocketsim.engine.simulate_chunks`; an iterative round's:
    :meth:`rocketsim.stage.coupled.IterativeRound.chunks`), each with its records (``records`` False:
    none, :func:`without_records`); each chunk's methods give that chunk's part of the producer's (rows
    of whole messages)."""
    made = False
    tables = with_records if records else without_records
    for c in engine.simulate_chunks(chunks, sc) if simulate is None else simulate(chunks):
        made = True
        made_tables = tables(sc, c.messages, c.attempts, c.results, c.later_start_ms)
        yield made_tables if c.coded is None else replace(made_tables, coded=c.coded)
    if not made:  # no message: the producer's (empty) rows all the same
        none = engine.SimOutput.empty()
        yield tables(sc, MESSAGES_DATA.empty_table(), none.attempts, none.results)


def with_records(
    sc: Scenario, messages: pa.Table, attempts: pa.Table, results: pa.Table, later_start_ms: int | None = None
) -> ProducerTables:
    """Rows of whole messages (of one producer, or of whole producers one after another: (producer, seq)
    order), with the commit-log records they make and their brokers."""
    log = store.log_records(messages, attempts, results, sc)
    log_broker, result_broker = store.pointed_brokers(results, log, tuple(sc.cluster.brokers))
    return ProducerTables(
        messages=messages,
        attempts=attempts,
        results=results,
        log=log,
        log_broker=log_broker,
        result_broker=result_broker,
        later_start_ms=later_start_ms,
    )


def without_records(
    sc: Scenario, messages: pa.Table, attempts: pa.Table, results: pa.Table, later_start_ms: int | None = None
) -> ProducerTables:
    """:func:`with_records` for a summaries-only run: the rows alone, no commit-log record made (the
    summaries count stored copies from the attempts, :func:`rocketsim.broker.store.result_copies`)."""
    return ProducerTables(
        messages=messages,
        attempts=attempts,
        results=results,
        log=store.LOG_COLUMNS.empty_table(),
        log_broker=np.zeros(0, np.int64),
        result_broker=np.full(results.num_rows, -1, np.int64),
        later_start_ms=later_start_ms,
        recorded=False,
    )


# the parts a BrokerFold keeps of each kind of sums before it adds them up
FOLD_PARTS = 64
_LOG_DATA = schemas.data_schema(schemas.COMMIT_LOG)


class BrokerFold:
    """A broker task's broker side fed its numbered commit log and its completed results a part at a time
    (:func:`rocketsim.broker.store.numbered_parts`, :class:`rocketsim.broker.store.PointedOffsets`): keeps
    of the records only their sums per queue and window (:func:`rocketsim.broker.side.storage_partials`)
    and per queue (:func:`rocketsim.broker.side.record_deliveries`), its halves whole, and the results
    pointing at its halves, so what it holds grows with the windows and the transactions, not the
    records. :meth:`storage`, :meth:`stored_transactions` and :meth:`deliveries` are
    :class:`BrokerTables`' of the whole."""

    def __init__(self, broker: int, window_ms: int, other_half_results: pa.Table | None = None) -> None:
        self.broker, self.window_ms, self.other_half_results = broker, window_ms, other_half_results
        self._storage: list[pa.Table] = []
        self._deliveries: list[pa.Table] = []
        self._halves: list[pa.Table] = []
        self._results: list[pa.Table] = []

    def add_log(self, part: pa.Table) -> None:
        self._storage.append(broker_side.storage_partials(part, self.window_ms))
        self._deliveries.append(broker_side.record_deliveries(part))
        halves = is_value(part.column("store_topic"), store.HALF_TOPIC)  # the part's columns may be codes
        if halves.any():
            self._halves.append(part.filter(pa.array(halves)).cast(_LOG_DATA))
        if len(self._storage) >= FOLD_PARTS:  # sums of sums: the same tables
            storage = pa.concat_tables(self._storage)
            self._storage = [regroup(storage, STORAGE_KEYS, ("messages", "store_bytes", "index_new"), (), ())]
            deliveries = pa.concat_tables(self._deliveries)
            self._deliveries = [
                regroup(deliveries, ("topic", "broker", "queue_id"), ("messages", "bytes"), (), ())
            ]

    def add_results(self, part: pa.Table) -> None:
        at_halves = is_value(part.column("store_topic"), store.HALF_TOPIC)
        if at_halves.any():
            self._results.append(
                part.filter(pa.array(at_halves)).select(list(broker_side.HALF_RESULT_COLUMNS))
            )

    def storage(self, window_ms: int) -> pa.Table:
        """Its ``broker_storage`` rows (the window it was made with)."""
        if window_ms != self.window_ms:
            raise ValueError(f"BrokerFold summed windows of {self.window_ms} ms, asked for {window_ms}")
        return broker_side.storage_of_partials(self._storage, window_ms)

    def stored_transactions(self, sc: Scenario) -> pa.Table:
        """``transactions`` rows of the halves it stores (:meth:`BrokerTables.stored_transactions`)."""
        log_schema = schemas.data_schema(schemas.COMMIT_LOG)
        half_results = broker_side.HALF_RESULTS
        return BrokerTables(
            self.broker,
            pa.concat_tables([log_schema.empty_table(), *self._halves]),
            pa.concat_tables([half_results.empty_table(), *(r.cast(half_results) for r in self._results)]),
            self.other_half_results,
        ).stored_transactions(sc)

    def deliveries(self, stored_transactions: pa.Table) -> pa.Table:
        """What consumers of each of its queues get (:meth:`BrokerTables.deliveries`)."""
        return broker_side.deliveries_of_parts(self._deliveries, stored_transactions)


STORAGE_KEYS = ("broker", "topic", "queue_id", "window")


def broker_tables(
    sc: Scenario, broker: int, log: pa.Table, results: pa.Table, other_half_results: pa.Table | None = None
) -> BrokerTables:
    """One broker's records from every producer and the results pointing at them -> its numbered commit
    log and those results completed; ``other_half_results``: the
    producers' :meth:`ProducerTables.other_half_results` of this broker."""
    commit_log, completed = store.number_broker(log, results, sc)
    return BrokerTables(broker, commit_log, completed, other_half_results)
