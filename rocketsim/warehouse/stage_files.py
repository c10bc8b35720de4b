"""The files of a run's stage, written by its tasks where they run (pyarrow only: no pyspark, no deltalake).

The schedulers (:mod:`rocketsim.spark.run`, :mod:`rocketsim.spark.compare`) run two kinds of task over
the core stage (:mod:`rocketsim.stage`) and then publish the files; this module is what the tasks write:

1. :func:`write_producer_files`, once per producer: its messages (generated, or read from the files of
   the run's committed ``messages``), :func:`rocketsim.stage.producer_tables`, then ``messages`` and
   ``send_attempts`` Parquet, the ``send_results`` rows that point at no stored copy (failed, rejected)
   and, for the broker step, two Arrow IPC scratch files holding its commit-log records and the results
   that point at them, one record batch per broker. Without a broker step (a comparison numbers no
   commit log) every result is written, its store columns null.
2. :func:`write_broker_files`, once per broker: that broker's batch of every producer's scratch files,
   :func:`rocketsim.stage.broker_tables`, then that broker's ``commit_log`` and ``send_results`` Parquet.

A task writes the tables :class:`StageDirs` names (each into its own folder); once every task is done
the driver calls :func:`finish_stage`, then publishes the staged files. Every file name is a
function of the producer or the broker, and each file is written under a temporary name and renamed, so
a task that Spark re-runs rewrites the same file with the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from rocketsim import schemas, stage, store, workload
from rocketsim.scenario import Scenario
from rocketsim.warehouse.files import read_ipc_group, read_parquet, write_ipc_groups, write_parquet
from rocketsim.warehouse.paths import delete_dir

MESSAGES_DATA = schemas.data_schema(schemas.MESSAGES)
ATTEMPTS_DATA = schemas.data_schema(schemas.SEND_ATTEMPTS)
RESULTS_CORE = schemas.without_run_id(schemas.SEND_RESULTS)  # what the simulation returns
PRODUCER_PART = "part-p{:06d}.parquet"
BROKER_PART = "part-b{:06d}.parquet"
SCRATCH_LOG = "log-p{:06d}.arrow"
SCRATCH_RESULTS = "results-p{:06d}.arrow"
# what the tasks can write: the tables of the generate and simulate stages
STAGE_TABLES = tuple(t.name for t in schemas.written_by(schemas.GENERATE, schemas.SIMULATE))


@dataclass(frozen=True)
class StageDirs:
    """Where the tasks write: a folder per table they write (local paths or URIs), and the scratch
    folder of the broker step (None: no broker step)."""

    tables: Mapping[str, str]
    scratch: str | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.tables) - set(STAGE_TABLES))
        if unknown:
            raise ValueError(f"the stage writes only {STAGE_TABLES}, not {unknown}")
        if self.scratch is not None and not {"commit_log", "send_results"} <= set(self.tables):
            raise ValueError("the broker step writes commit_log and send_results: give both folders")

    def all(self) -> tuple[str, ...]:
        return (*self.tables.values(), *([self.scratch] if self.scratch else []))

    @property
    def simulates(self) -> bool:
        return any(t != "messages" for t in self.tables)


@dataclass(frozen=True)
class ProducerCounts:
    """Rows one producer task made."""

    producer: int
    messages: int
    attempts: int
    results: int  # all of the producer's results (with a broker step, most are written by the broker tasks)


@dataclass(frozen=True)
class BrokerCounts:
    """Rows one broker task wrote."""

    broker: int
    log_records: int
    results: int


def read_producer_messages(uris: Sequence[str], producer: int) -> pa.Table:
    """One producer's rows of the ``messages`` files ``uris`` (which may hold other producers' too), in
    seq order."""
    messages = read_parquet(uris, MESSAGES_DATA, filters=[("producer", "=", producer)])
    seq = np.asarray(messages.column("seq").to_numpy(), np.int64)
    if len(seq) > 1 and not (seq[1:] > seq[:-1]).all():
        messages = messages.sort_by([("seq", "ascending")])
    return messages


def write_producer_files(
    sc: Scenario, share: workload.ProducerShare, dirs: StageDirs, message_files: Sequence[str] | None = None
) -> ProducerCounts:
    """One producer's files (step 1 of the module docstring); its messages are read from
    ``message_files`` (the committed ``messages`` files that may hold them), or generated when None."""
    p = share.producer
    if message_files is not None:
        messages = read_producer_messages(message_files, p)
    else:
        messages = stage.producer_messages(sc, share)
    if "messages" in dirs.tables:
        write_parquet(messages, _part(dirs, "messages", PRODUCER_PART.format(p)))
    if not dirs.simulates:
        return ProducerCounts(p, messages.num_rows, 0, 0)
    tables = stage.producer_tables(sc, messages)
    if "send_attempts" in dirs.tables:
        write_parquet(
            tables.attempts.cast(ATTEMPTS_DATA), _part(dirs, "send_attempts", PRODUCER_PART.format(p))
        )
    if dirs.scratch is None:
        if "send_results" in dirs.tables:
            results = store.with_null_store_columns(tables.results)
            write_parquet(results, _part(dirs, "send_results", PRODUCER_PART.format(p)))
    else:
        _write_for_brokers(tables, len(sc.cluster.brokers), p, dirs)
    return ProducerCounts(p, messages.num_rows, tables.attempts.num_rows, tables.results.num_rows)


def _write_for_brokers(tables: stage.ProducerTables, n_brokers: int, p: int, dirs: StageDirs) -> None:
    """The results that point at no record, whole; the records and the results pointing at them into
    the scratch files, one record batch per broker."""
    unstored = tables.unstored_results()
    if unstored.num_rows:
        write_parquet(unstored, _part(dirs, "send_results", PRODUCER_PART.format(p)))
    stored, stored_broker = tables.stored_results()
    write_ipc_groups(stored, stored_broker, n_brokers, f"{dirs.scratch}/{SCRATCH_RESULTS.format(p)}")
    write_ipc_groups(tables.log, tables.log_broker, n_brokers, f"{dirs.scratch}/{SCRATCH_LOG.format(p)}")


def write_broker_files(sc: Scenario, b: int, producers: Sequence[int], dirs: StageDirs) -> BrokerCounts:
    """Number one broker's commit log and write it and its results (step 2 of the module docstring)."""
    if dirs.scratch is None:
        raise ValueError("write_broker_files needs the scratch folder the producer tasks wrote")
    log = read_ipc_group([f"{dirs.scratch}/{SCRATCH_LOG.format(p)}" for p in producers], b, store.LOG_COLUMNS)
    results = read_ipc_group(
        [f"{dirs.scratch}/{SCRATCH_RESULTS.format(p)}" for p in producers], b, RESULTS_CORE
    )
    out = stage.broker_tables(sc, b, log, results)
    if out.commit_log.num_rows:
        write_parquet(out.commit_log, _part(dirs, "commit_log", BROKER_PART.format(b)))
    if out.results.num_rows:
        write_parquet(out.results, _part(dirs, "send_results", BROKER_PART.format(b)))
    return BrokerCounts(b, out.commit_log.num_rows, out.results.num_rows)


def finish_stage(dirs: StageDirs) -> None:
    """What the driver does once every task of the stage is done, before it publishes the tables: the
    scratch files are no longer needed."""
    if dirs.scratch is not None:
        delete_dir(dirs.scratch)


def _part(dirs: StageDirs, table: str, name: str) -> str:
    return f"{dirs.tables[table]}/{name}"
