"""A run's data files, written where the producers are simulated (pure: pyarrow only, no pyspark).

The fused simulate stage (:mod:`rocketsim.spark.fused`) runs two kinds of task and the driver commits
their files to Delta; this module is what the tasks do:

1. :func:`write_producer_files`, once per producer: generate its messages, simulate its sends, make
   its commit-log records (:func:`rocketsim.broker.log_records`), then write ``messages`` and
   ``send_attempts`` Parquet, the ``send_results`` rows that point at no stored copy (failed,
   rejected) and, for the next step, two Arrow IPC scratch files holding its commit-log records and
   the results that point at them, one record batch per broker.
2. :func:`write_broker_files`, once per broker: read that broker's batch from every producer's scratch
   files, number the records in the broker's write order (:func:`rocketsim.broker.with_offsets`:
   commit-log and queue offsets need every producer's records of the broker, which is why this is a
   second step) and write that broker's ``commit_log`` and ``send_results`` Parquet.

Every file name is a function of the producer or the broker, and each file is written under a
temporary name and renamed, so a task that Spark re-runs rewrites the same file with the same bytes.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from rocketsim import broker, schemas, simulate, workload
from rocketsim.scenario import Scenario

MESSAGES_DATA = schemas.data_schema(schemas.MESSAGES)
ATTEMPTS_DATA = schemas.data_schema(schemas.SEND_ATTEMPTS)
RESULTS_DATA = schemas.data_schema(schemas.SEND_RESULTS)
LOG_DATA = schemas.data_schema(schemas.COMMIT_LOG)
RESULTS_CORE = schemas.without_run_id(schemas.SEND_RESULTS)  # what the simulator returns
RESULT_STORE_COLUMNS = tuple(f.name for f in schemas.SEND_RESULTS if schemas.is_broker_side(f))
# String columns with few distinct values: the only ones worth Parquet dictionary encoding (ids,
# keys and error texts are nearly unique, and trying a dictionary on them doubles the write time).
DICTIONARY_COLUMNS = (
    "topic",
    "tags",
    "message_type",
    "send_mode",
    "order_key",
    "broker",
    "outcome",
    "status",
    "brokers_sent",
    "store_topic",
    "real_topic",
)
# Columns whose min/max go into the file footers (and so into Delta's data-skipping statistics): the
# keys and times a reader filters on. Statistics of every column cost a tenth of the write time.
STATISTICS_COLUMNS = (
    "producer",
    "seq",
    "attempt",
    "topic",
    "message_type",
    "broker",
    "queue_id",
    "status",
    "outcome",
    "born_ts_ms",
    "send_ts_ms",
    "end_ts_ms",
    "start_ts_ms",
    "store_ts_ms",
    "commit_log_offset",
    "queue_offset",
)
PRODUCER_PART = "part-p{:06d}.parquet"
BROKER_PART = "part-b{:06d}.parquet"
SCRATCH_LOG = "log-p{:06d}.arrow"
SCRATCH_RESULTS = "results-p{:06d}.arrow"


def table_path(warehouse: str | os.PathLike[str], table: str) -> str:
    """``<warehouse>/<table>``: an absolute local path, or a URI kept as given."""
    base = os.fspath(warehouse)
    if "://" in base:
        return base.rstrip("/") + "/" + table
    return os.path.join(os.path.abspath(base), table)


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem of a local path or URI (s3://, gs://, hdfs://, file://) and its path."""
    if "://" in uri:
        return pafs.FileSystem.from_uri(uri)
    return pafs.LocalFileSystem(), uri


@dataclass(frozen=True)
class RunDirs:
    """Where the tasks write: each table's staging folder and a scratch folder (local paths or URIs)."""

    messages: str
    send_attempts: str
    send_results: str
    commit_log: str
    scratch: str

    def all(self) -> tuple[str, ...]:
        return (self.messages, self.send_attempts, self.send_results, self.commit_log, self.scratch)


@dataclass(frozen=True)
class ProducerCounts:
    """Rows one producer task wrote."""

    producer: int
    messages: int
    attempts: int
    results: int  # all of the producer's results (most are written by the broker tasks)


@dataclass(frozen=True)
class BrokerCounts:
    """Rows one broker task wrote."""

    broker: int
    log_records: int
    results: int


def write_parquet(table: pa.Table, uri: str) -> None:
    """Write ``table`` to ``uri`` atomically: a temporary name in the same folder, then a rename."""
    fs, path = filesystem(uri)
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    dictionary = [n for n in table.column_names if n in DICTIONARY_COLUMNS]
    statistics = [n for n in table.column_names if n in STATISTICS_COLUMNS]
    try:
        with fs.open_output_stream(tmp) as sink:
            pq.write_table(
                table, sink, compression="snappy", use_dictionary=dictionary, write_statistics=statistics
            )
        fs.move(tmp, path)
    except BaseException:
        _delete_quietly(fs, tmp)
        raise


def _write_ipc_per_broker(table: pa.Table, broker_index: np.ndarray, n_brokers: int, uri: str) -> None:
    """``table`` split by ``broker_index`` into ``n_brokers`` record batches (one per broker, in order)."""
    order = np.argsort(broker_index, kind="stable")
    ends = np.cumsum(np.bincount(broker_index, minlength=n_brokers))
    grouped = table.take(pa.array(order)).combine_chunks()
    fs, path = filesystem(uri)
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    try:
        with fs.open_output_stream(tmp) as sink, pa.ipc.new_file(sink, table.schema) as writer:
            start = 0
            for end in ends.tolist():
                writer.write_batch(_one_batch(grouped.slice(start, end - start)))
                start = end
        fs.move(tmp, path)
    except BaseException:
        _delete_quietly(fs, tmp)
        raise


def _one_batch(table: pa.Table) -> pa.RecordBatch:
    batches = table.combine_chunks().to_batches()
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=table.schema)
    return batches[0]


def _delete_quietly(fs: pafs.FileSystem, path: str) -> None:
    with contextlib.suppress(OSError):
        fs.delete_file(path)


def with_null_store_columns(results: pa.Table) -> pa.Table:
    """``send_results`` rows that point at no stored copy: the broker-side columns are null."""
    for name in RESULT_STORE_COLUMNS:
        field = RESULTS_DATA.field(name)
        results = results.append_column(field, pa.nulls(results.num_rows, field.type))
    return results.select(RESULTS_DATA.names).cast(RESULTS_DATA)


def _key(producer: np.ndarray, seq: np.ndarray) -> np.ndarray:
    return (np.asarray(producer, np.int64) << 40) | np.asarray(seq, np.int64)


def _np_col(table: pa.Table, name: str) -> np.ndarray:
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False))


def write_producer_files(sc: Scenario, share: workload.ProducerShare, dirs: RunDirs) -> ProducerCounts:
    """Generate, simulate and write one producer's files (step 1 of the module docstring)."""
    p = share.producer
    batches = list(workload.generate_producer(sc, share))
    messages = pa.Table.from_batches(batches, schema=MESSAGES_DATA)
    out = simulate.simulate(messages, sc)
    log = broker.log_records(messages, out.attempts, out.results, sc)

    write_parquet(messages, f"{dirs.messages}/{PRODUCER_PART.format(p)}")
    write_parquet(out.attempts.cast(ATTEMPTS_DATA), f"{dirs.send_attempts}/{PRODUCER_PART.format(p)}")

    brokers = tuple(sc.cluster.brokers)
    results = out.results
    seq = _np_col(results, "seq")
    if len(seq) > 1 and not (np.diff(seq) > 0).all():
        raise AssertionError(f"producer {p}: simulate returned results out of seq order")
    log_broker = broker.broker_indexes(log.column("broker"), brokers)
    is_result = _np_col(log, "is_result").astype(bool)
    pointed_seq = _np_col(log, "seq")[is_result]
    at = np.searchsorted(seq, pointed_seq)
    if len(at) and (at.max() >= len(seq) or not (seq[at] == pointed_seq).all()):
        raise AssertionError(f"producer {p}: a commit-log record points at no result")
    result_broker = np.full(len(seq), -1, np.int64)
    result_broker[at] = log_broker[is_result]

    unpointed = results.filter(pa.array(result_broker < 0))
    if unpointed.num_rows:
        write_parquet(with_null_store_columns(unpointed), f"{dirs.send_results}/{PRODUCER_PART.format(p)}")
    stored = result_broker >= 0
    _write_ipc_per_broker(
        results.filter(pa.array(stored)),
        result_broker[stored],
        len(brokers),
        f"{dirs.scratch}/{SCRATCH_RESULTS.format(p)}",
    )
    _write_ipc_per_broker(log, log_broker, len(brokers), f"{dirs.scratch}/{SCRATCH_LOG.format(p)}")
    return ProducerCounts(p, messages.num_rows, out.attempts.num_rows, results.num_rows)


def _read_broker_batches(uris: list[str], b: int, schema: pa.Schema) -> pa.Table:
    """Record batch ``b`` of each IPC file: memory-mapped (no copy) when local, read when remote."""
    batches = []
    for uri in uris:
        fs, path = filesystem(uri)
        if isinstance(fs, pafs.LocalFileSystem):
            batches.append(pa.ipc.open_file(pa.memory_map(path)).get_batch(b))
        else:
            with fs.open_input_file(path) as handle:
                batches.append(pa.ipc.open_file(handle).get_batch(b))
    return pa.Table.from_batches(batches, schema=schema)


def attach_store_columns(results: pa.Table, numbered: pa.Table) -> pa.Table:
    """``results`` (each pointing at one record of ``numbered``) with that record's broker-side columns."""
    pointed = numbered.filter(numbered.column("is_result"))
    keys = _key(_np_col(pointed, "producer"), _np_col(pointed, "seq"))
    wanted = _key(_np_col(results, "producer"), _np_col(results, "seq"))
    order = np.argsort(keys, kind="stable")
    at = np.searchsorted(keys, wanted, sorter=order)
    paired = len(keys) == len(wanted) and (
        not len(at) or (at.max() < len(keys) and (keys[order[at]] == wanted).all())
    )
    if not paired:
        raise AssertionError("send_results rows and the commit-log records they point at do not pair up")
    take = pa.array(order[at])
    for name in RESULT_STORE_COLUMNS:
        results = results.append_column(RESULTS_DATA.field(name), pointed.column(name).take(take))
    return results.select(RESULTS_DATA.names).cast(RESULTS_DATA)


def write_broker_files(sc: Scenario, b: int, producers: list[int], dirs: RunDirs) -> BrokerCounts:
    """Number one broker's commit log and write it and its results (step 2 of the module docstring)."""
    log = _read_broker_batches(
        [f"{dirs.scratch}/{SCRATCH_LOG.format(p)}" for p in producers], b, broker.LOG_COLUMNS
    )
    results = _read_broker_batches(
        [f"{dirs.scratch}/{SCRATCH_RESULTS.format(p)}" for p in producers], b, RESULTS_CORE
    )
    numbered = broker.with_offsets(log, sc)
    if numbered.num_rows:
        write_parquet(numbered, f"{dirs.commit_log}/{BROKER_PART.format(b)}")
    if results.num_rows:
        write_parquet(attach_store_columns(results, numbered), f"{dirs.send_results}/{BROKER_PART.format(b)}")
    return BrokerCounts(b, numbered.num_rows, results.num_rows)
