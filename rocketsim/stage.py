"""The stage of a run as plain functions over Arrow: what a producer task and a broker task compute.

Every scheduler (the run's stage and the staged jobs in :mod:`rocketsim.spark.run`, the delta-spark
path, the comparison in :mod:`rocketsim.spark.compare`) calls these, and only decides where they run and
where their output goes (:mod:`rocketsim.warehouse.stage_files` writes the run's files):

1. a producer task, per producer: its messages (:func:`producer_messages`, or read back from the
   ``messages`` table), then :func:`producer_tables`: the simulation (:func:`rocketsim.simulate.simulate`)
   and the commit-log records its stored attempts make (:func:`rocketsim.store.log_records`), each
   record and each result tagged with the broker that holds it;
2. a broker task, per broker, once every producer is done: :func:`broker_tables` over that broker's
   records from every producer and the results pointing at them (:func:`rocketsim.store.number_broker`:
   offsets need all of a broker's records, which is why this is a second step).

What a task computes is a dataclass (:class:`ProducerTables`, :class:`BrokerTables`), so a new output is
a field computed here. Mergeable aggregates of the summary tables beside the rows, for instance: a field
of both dataclasses, computed here; written by :mod:`rocketsim.warehouse.stage_files` into the scratch
folder beside the records; merged by its ``finish_stage`` (which the schedulers already call once every
task is done) into the summary tables' staged files; their registry rows then name the simulate stage,
so the schedulers publish them with the stage's other tables. The schedulers do not change.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from rocketsim import schemas, simulate, store, workload
from rocketsim.scenario import Scenario

MESSAGES_DATA = schemas.data_schema(schemas.MESSAGES)


@dataclass(frozen=True)
class ProducerTables:
    """What one producer task computes: the producer's rows, in (producer, seq[, attempt]) order."""

    messages: pa.Table  # MESSAGES without run_id
    attempts: pa.Table  # SEND_ATTEMPTS without run_id
    results: pa.Table  # SEND_RESULTS without run_id and without the store columns (the broker step's)
    log: pa.Table  # the commit-log records before numbering (store.LOG_COLUMNS)
    log_broker: np.ndarray  # per record: its broker's place in cluster.brokers
    result_broker: np.ndarray  # per result: the broker of the record it points at, -1 for none

    def unstored_results(self) -> pa.Table:
        """The ``send_results`` rows that point at no record (FAILED, REJECTED, unstored oneway), whole:
        their store columns are null."""
        return store.with_null_store_columns(self.results.filter(pa.array(self.result_broker < 0)))

    def stored_results(self) -> tuple[pa.Table, np.ndarray]:
        """The results that point at a record (the broker step completes them), and each one's broker."""
        stored = self.result_broker >= 0
        return self.results.filter(pa.array(stored)), self.result_broker[stored]


@dataclass(frozen=True)
class BrokerTables:
    """What one broker task computes: its commit log, numbered, and the results pointing at it."""

    broker: int
    commit_log: pa.Table  # COMMIT_LOG without run_id, in the broker's write order
    results: pa.Table  # SEND_RESULTS without run_id, store columns filled


def producer_messages(sc: Scenario, share: workload.ProducerShare) -> pa.Table:
    """One producer's generated messages (:func:`rocketsim.workload.generate_producer`) as one table."""
    return pa.Table.from_batches(list(workload.generate_producer(sc, share)), schema=MESSAGES_DATA)


def producer_tables(sc: Scenario, messages: pa.Table) -> ProducerTables:
    """One producer's messages -> its attempts, results and commit-log records (step 1 of the module
    docstring)."""
    producers = messages.column("producer").unique().to_pylist()
    if len(producers) > 1:
        raise ValueError(f"producer_tables takes one producer's messages, got producers {sorted(producers)}")
    out = simulate.simulate(messages, sc)
    log = store.log_records(messages, out.attempts, out.results, sc)
    log_broker, result_broker = store.pointed_brokers(out.results, log, tuple(sc.cluster.brokers))
    return ProducerTables(
        messages=messages,
        attempts=out.attempts,
        results=out.results,
        log=log,
        log_broker=log_broker,
        result_broker=result_broker,
    )


def broker_tables(sc: Scenario, broker: int, log: pa.Table, results: pa.Table) -> BrokerTables:
    """One broker's records from every producer and the results pointing at them -> its numbered commit
    log and those results completed (step 2 of the module docstring)."""
    commit_log, completed = store.number_broker(log, results, sc)
    return BrokerTables(broker, commit_log, completed)


def balanced_bins(weights: Sequence[int], bins: int) -> list[list[int]]:
    """Items ``0..len(weights)-1`` spread over at most ``bins`` bins: heaviest first, each onto the least
    loaded bin (LPT), so one heavy item gets a bin of its own. Deterministic; each bin sorted."""
    bins = max(1, min(bins, len(weights)))
    heap = [(0, b) for b in range(bins)]
    out: list[list[int]] = [[] for _ in range(bins)]
    for item in sorted(range(len(weights)), key=lambda i: (-weights[i], i)):
        load, b = heapq.heappop(heap)
        out[b].append(item)
        heapq.heappush(heap, (load + max(weights[item], 1), b))
    return [sorted(b) for b in out if b]


def producer_bins(shares: Sequence[workload.ProducerShare], bins: int) -> list[list[int]]:
    """Producers spread over ``bins`` tasks by their message counts (:func:`balanced_bins`)."""
    by_index = balanced_bins([s.messages for s in shares], bins)
    return [sorted(shares[i].producer for i in b) for b in by_index]
