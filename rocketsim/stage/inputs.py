"""What a producer task reads: a producer's messages (generated, or its committed ones) and the columns
of its committed attempts and results that the stages after the simulation need, in order."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from rocketsim.broker import side as broker_side
from rocketsim.scenario import Scenario, workload
from rocketsim.stage.plan import StagePlan
from rocketsim.stage.protocols import CommittedRows
from rocketsim.stage.tables import MESSAGES_DATA, producer_message_chunks, producer_messages
from rocketsim.tables import reconcile, schemas, summaries
from rocketsim.tables.grouping import pack_keys
from rocketsim.tables.schemas import BROKER_SIDE, GENERATE, SUMMARIZE

ATTEMPTS_DATA = schemas.data_schema(schemas.SEND_ATTEMPTS)
RESULTS_DATA = schemas.data_schema(schemas.SEND_RESULTS)
# what a task reads of committed tables: the columns the functions it calls read, and what it counts
MESSAGE_KEYS = ("producer", "seq", "message_type")
RESULT_COUNTS = ("producer", "seq", "status", "attempts", "broker", "queue_offset", "store_topic")


def columns(schema: pa.Schema, *groups: Sequence[str]) -> pa.Schema:
    """The fields of ``schema`` named in any of ``groups``, in the schema's order."""
    names = {n for g in groups for n in g}
    return pa.schema([f for f in schema if f.name in names])


def in_order(rows: pa.Table, order: Sequence[str]) -> pa.Table:
    """``rows`` sorted by the int columns ``order`` (a single pass when they already are)."""
    if rows.num_rows < 2:
        return rows
    packed = pack_keys([np.asarray(rows.column(k).to_numpy(), np.int64) for k in order])
    if packed is not None and (packed[1:] >= packed[:-1]).all():
        return rows
    return rows.sort_by([(k, "ascending") for k in order])


def read_producer_rows(
    committed: CommittedRows,
    table: str,
    producer: int,
    schema: pa.Schema,
    order: Sequence[str] = ("seq",),
    where: Mapping[str, object] | None = None,
) -> pa.Table:
    """One producer's committed rows of ``table``, the columns of ``schema``, in ``order``."""
    return in_order(committed.producer_rows(table, producer, schema, where), order)


def input_messages(
    sc: Scenario, plan: StagePlan, committed: CommittedRows, share: workload.ProducerShare
) -> pa.Table:
    """One producer's messages, whole, to simulate: generated, or its committed ones."""
    if plan.runs(GENERATE):
        return producer_messages(sc, share)
    return read_producer_rows(committed, "messages", share.producer, MESSAGES_DATA)


def input_message_chunks(
    sc: Scenario, plan: StagePlan, committed: CommittedRows, share: workload.ProducerShare
) -> Iterator[pa.Table]:
    """One producer's messages to simulate, ``plan.chunk_rows`` at a time: generated a chunk at a time, or
    its committed ones (read whole) cut."""
    if plan.runs(GENERATE):
        yield from producer_message_chunks(sc, share, plan.chunk_rows)
        return
    messages = read_producer_rows(committed, "messages", share.producer, MESSAGES_DATA)
    for at in range(0, messages.num_rows, plan.chunk_rows):
        yield messages.slice(at, plan.chunk_rows)


@dataclass(frozen=True)
class CommittedInputs:
    """What the stages after the simulation read of some whole producers' committed rows (the columns
    they need; None: a table they do not read), in (producer, seq[, attempt]) order."""

    messages: pa.Table | None
    attempts: pa.Table | None
    results: pa.Table | None

    @property
    def rows(self) -> int:
        return max(
            (t.num_rows for t in (self.messages, self.attempts, self.results) if t is not None), default=0
        )

    def counts(self, plan: StagePlan) -> dict[str, int]:
        """Their counts (:mod:`rocketsim.tables.reconcile`, rows read)."""
        out: dict[str, int] = {}
        if self.messages is not None:
            if plan.runs(SUMMARIZE):
                out |= reconcile.message_counts(self.messages, "read")
            else:  # the broker side alone read the transactional ones
                out["messages.transaction"] = self.messages.num_rows
        if self.attempts is not None:
            out |= reconcile.attempt_counts(self.attempts, "read")
        if self.results is not None:
            out |= reconcile.result_counts(self.results, "read")
        return out


def concat_inputs(parts: Sequence[CommittedInputs]) -> CommittedInputs:
    """Several producers' inputs (in producer order) as one."""

    def cat(tables: list[pa.Table | None]) -> pa.Table | None:
        return None if tables[0] is None else pa.concat_tables(tables)

    return CommittedInputs(
        *(cat([getattr(p, n) for p in parts]) for n in ("messages", "attempts", "results"))
    )


def committed_inputs(plan: StagePlan, committed: CommittedRows, producer: int) -> CommittedInputs:
    """What the stages after the simulation read of one producer's committed rows."""
    reads = plan.reads()
    messages = attempts = results = None
    if "messages" in reads:
        if plan.runs(SUMMARIZE):  # every row: counted
            both = broker_side.UNSTORED_MESSAGE_COLUMNS if plan.runs(BROKER_SIDE) else ()
            schema = columns(MESSAGES_DATA, MESSAGE_KEYS, summaries.MESSAGE_COLUMNS, both)
            messages = read_producer_rows(committed, "messages", producer, schema)
        else:  # the broker side alone: its transactional messages
            schema = columns(MESSAGES_DATA, broker_side.UNSTORED_MESSAGE_COLUMNS)
            where = {"message_type": "transaction"}
            messages = read_producer_rows(committed, "messages", producer, schema, where=where)
    if "send_attempts" in reads:
        schema = columns(ATTEMPTS_DATA, summaries.ATTEMPT_COLUMNS)
        attempts = read_producer_rows(committed, "send_attempts", producer, schema, ("seq", "attempt"))
    if "send_results" in reads:
        wanted = [RESULT_COUNTS]
        if plan.runs(SUMMARIZE):
            wanted.append(summaries.RESULT_COLUMNS)
        if plan.runs(BROKER_SIDE):
            wanted.append(broker_side.UNSTORED_RESULT_COLUMNS)
        results = read_producer_rows(committed, "send_results", producer, columns(RESULTS_DATA, *wanted))
    return CommittedInputs(messages, attempts, results)
