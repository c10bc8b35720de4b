"""The output: an engine reports what it decided as an :class:`EngineOutput` (attempts in (send, attempt)
order, one outcome per send); :func:`build_tables` makes the ``send_attempts`` and ``send_results`` rows
(schemas ``ATTEMPTS_SCHEMA`` / ``RESULTS_SCHEMA``) from it; and a producer's run in chunks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim.broker.queue import BUSY_KINDS
from rocketsim.engine.plan.kinds import (
    ATTEMPTS_SCHEMA,
    MESSAGES_SCHEMA,
    NO_ISOLATION,
    NO_LATER_ATTEMPT,
    RESULTS_SCHEMA,
    STATUS_NAMES,
    SimChunk,
    SimOutput,
    Status,
)
from rocketsim.engine.plan.sends import Prepared, as_strings
from rocketsim.scenario import workload
from rocketsim.tables.grouping import as_plain_strings, dictionary_strings

# ---- the output: what an engine decided, as the two tables ---------------------------------------


@dataclass(frozen=True)
class StoreColumns:
    """Per attempt, what the closed-loop store saw (:class:`rocketsim.broker.queue.StoreAnswer`; -1: the
    store did not see it, or for ``busy`` it was not rejected): the rejection's
    :class:`rocketsim.broker.queue.Fate`, the queue depth it found, its append's writer time (us)."""

    busy: np.ndarray
    depth: np.ndarray
    service: np.ndarray


@dataclass
class EngineOutput:
    """What an engine decided: attempts in (send, attempt) order, and one outcome per send.

    Strings are indexes: brokers into ``brokers``, outcome labels into ``labels``, error texts into
    ``texts`` (-1: none); an attempt's isolated-until time is :data:`NO_ISOLATION` when not isolated.
    """

    brokers: list[str]
    labels: list[str]
    texts: list[str]
    a_send: np.ndarray
    a_attempt: np.ndarray
    a_start: np.ndarray
    a_latency: np.ndarray
    a_broker: np.ndarray
    a_queue_id: np.ndarray
    a_label: np.ndarray
    a_code: np.ndarray
    a_has_code: np.ndarray  # the outcome is a broker error (the response_code column is not null)
    a_isolated_until: np.ndarray
    a_stored: np.ndarray  # the broker stored the request (whatever the client saw)
    a_stored_ts: np.ndarray  # when (meaningless where not stored)
    a_start_us: np.ndarray  # the attempt's start in microseconds (a_start x 1000 but for the client's CPU)
    a_latency_us: np.ndarray  # its answer's latency in microseconds before rounding (-1: none, whole ms)
    att_off: np.ndarray  # send s has attempts att_off[s]:att_off[s + 1]
    status: np.ndarray  # Status
    error: np.ndarray  # index into texts, -1: none
    broker: np.ndarray  # the result's broker, else the last attempt's, else -1
    queue_id: np.ndarray  # -1: none
    begin: np.ndarray
    end: np.ndarray
    exhausted: np.ndarray  # the call-timeout budget ran out (retry_budget_exhausted)
    n_sent: np.ndarray  # attempts sent
    thread: np.ndarray  # the sender thread that took the send
    kernel_start: np.ndarray  # when sendKernelImpl first ran (ASYNC: on an executor thread), else begin
    a_store: StoreColumns | None = None  # closed-loop brokers only (None: the store columns are null)


# the string columns an engine makes from its codes (brokers, outcome labels, statuses, busy kinds), which
# its tables also give as dictionary arrays (:attr:`SimChunk.coded`)
CODED_COLUMNS = ("broker", "outcome", "busy_kind", "status")
_CODED = pa.dictionary(pa.int32(), pa.string())


def _coded_table(schema: pa.Schema, n: int, columns: dict[str, pa.Array | pa.ChunkedArray]) -> pa.Table:
    """A table of ``schema`` but for :data:`CODED_COLUMNS`, kept as dictionary arrays; a column the
    simulation does not fill is all nulls."""
    coded = pa.schema([f.with_type(_CODED) if f.name in CODED_COLUMNS else f for f in schema])
    return pa.Table.from_arrays([columns.get(f.name, pa.nulls(n, f.type)) for f in coded], schema=coded)


def _coded_str(names: list[str], idx: np.ndarray) -> pa.DictionaryArray:
    """``names[idx]`` as a dictionary array (its codes: ``idx``), null where ``idx < 0``."""
    missing = idx < 0
    codes = np.where(missing, 0, idx).astype(np.int32)
    return pa.DictionaryArray.from_arrays(
        pa.array(codes, mask=missing if missing.any() else None), pa.array(names, pa.string())
    )


def _store_columns(st: StoreColumns | None) -> dict[str, pa.Array]:
    """The attempt columns of the closed-loop store (none: left null)."""
    if st is None:
        return {}
    names = [""] * (max(BUSY_KINDS) + 1)
    for fate, name in BUSY_KINDS.items():
        names[fate] = name
    return {
        "busy_kind": _coded_str(names, st.busy),
        "store_queue_depth": pa.array(st.depth.astype(np.int32), mask=st.depth < 0),
        "store_service_us": pa.array(st.service, mask=st.service < 0),
    }


def _attempts_table(prep: Prepared, out: EngineOutput) -> pa.Table:
    """The ``send_attempts`` rows, :data:`CODED_COLUMNS` as dictionary arrays (:func:`decoded`)."""
    n_a = out.a_send.size
    return _coded_table(
        ATTEMPTS_SCHEMA,
        n_a,
        {
            "producer": pa.array(np.full(n_a, prep.producer, np.int32)),
            "seq": pa.array(prep.s_seq[out.a_send]),
            "attempt": pa.array(out.a_attempt.astype(np.int32, copy=False)),
            "start_ts_ms": pa.array(out.a_start),
            "latency_ms": pa.array(out.a_latency),
            "broker": _coded_str(out.brokers, out.a_broker),
            "queue_id": pa.array(out.a_queue_id.astype(np.int32, copy=False)),
            "outcome": _coded_str(out.labels, out.a_label),
            "response_code": pa.array(out.a_code.astype(np.int32, copy=False), mask=~out.a_has_code),
            "fault_isolated_until_ms": pa.array(
                out.a_isolated_until, mask=out.a_isolated_until == NO_ISOLATION
            ),
            "wire_bytes": pa.array(prep.s_wire[out.a_send].astype(np.int32)),
            "stored": pa.array(out.a_stored.astype(bool)),
            "stored_ts_ms": pa.array(out.a_stored_ts, mask=~out.a_stored.astype(bool)),
            **_store_columns(out.a_store),
        },
    )


def answer_sub_ms(out: EngineOutput) -> np.ndarray:
    """Per send, what its last attempt's answer adds to the whole-ms latency in microseconds: the answer's
    own microseconds (``a_start_us + a_latency_us``) against the whole ms the send loop took it at
    (``a_start + a_latency``), where that answer ended the send (it ended no sooner); else 0."""
    n = out.status.size
    last = out.att_off[1:] - 1
    has = out.att_off[1:] > out.att_off[:-1]
    k = np.where(has, last, 0)
    if out.a_send.size == 0:
        return np.zeros(n, np.int64)
    lat_us, start_us = out.a_latency_us[k], out.a_start_us[k]
    answer_ms = out.a_start[k] + out.a_latency[k]
    ended = has & (lat_us >= 0) & (out.end >= answer_ms)
    return np.where(ended, start_us + lat_us - answer_ms * 1000, 0).astype(np.int64)


def _results_table(prep: Prepared, out: EngineOutput, uniq: pa.Array | None = None) -> pa.Table:
    """The ``send_results`` rows, :data:`CODED_COLUMNS` as dictionary arrays (:func:`decoded`)."""
    rows = prep.send_of_row
    n = rows.size
    sent = rows >= 0
    srow = np.where(sent, rows, 0)
    # every row its own send, in order (no batch, none rejected): a send's value is at its row, no gather
    in_place = out.status.size == n and bool((rows == np.arange(n)).all())

    def per_row(values: np.ndarray, default: np.ndarray | int) -> np.ndarray:
        """A per-send array spread over the message rows (``default`` on rejected rows)."""
        if values.size == 0:  # every row rejected
            return np.broadcast_to(np.asarray(default), rows.shape).copy()
        return np.where(sent, values if in_place else values[srow], default)

    status = per_row(out.status, Status.REJECTED)
    texts = list(out.texts)
    err_idx = per_row(out.error, -1)
    for r in np.flatnonzero(prep.rejected).tolist():
        err_idx[r] = len(texts)
        texts.append(prep.reject_text[r])
    # a batch's attempts are counted (and its brokers listed) on its first member only
    lead = per_row(prep.s_row, -1) == np.arange(n)
    counts = np.where(lead, per_row(out.n_sent, 0), 0)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    first = per_row(out.att_off[:-1], 0)
    value_pos = np.repeat(first - offsets[:-1], counts) + np.arange(offsets[-1])
    brokers_sent = pa.ListArray.from_arrays(
        pa.array(offsets.astype(np.int32)),
        dictionary_strings(_coded_str(out.brokers, out.a_broker[value_pos])),
    )
    begin = per_row(out.begin, prep.born)
    end = per_row(out.end, prep.born)
    broker = per_row(out.broker, -1)
    qid = per_row(out.queue_id, -1)
    exhausted = per_row(out.exhausted, False)
    thread = per_row(out.thread, -1)
    m = prep.messages
    return _coded_table(
        RESULTS_SCHEMA,
        n,
        {
            "producer": pa.array(np.full(n, prep.producer, np.int32)),
            "seq": m.column("seq"),
            "uniq_msg_id": uniq_keys(prep, out) if uniq is None else uniq,
            "send_mode": m.column("send_mode"),
            "status": _coded_str(list(STATUS_NAMES), status),
            "error": dictionary_strings(_coded_str(texts, err_idx)),
            "attempts": pa.array(counts.astype(np.int32)),
            "brokers_sent": brokers_sent,
            "broker": _coded_str(out.brokers, broker),
            "queue_id": pa.array(qid.astype(np.int32), mask=qid < 0),
            "born_ts_ms": m.column("born_ts_ms"),
            "send_ts_ms": pa.array(begin),
            "end_ts_ms": pa.array(end),
            "queue_wait_ms": pa.array(begin - prep.born),
            "latency_ms": pa.array(end - begin),
            "latency_us": pa.array((end - begin) * 1000 + per_row(answer_sub_ms(out), 0)),
            "wire_bytes": pa.array(prep.row_wire.astype(np.int32)),
            "compressed": pa.array(prep.compressed),
            "sys_flag": pa.array(prep.sys_flag.astype(np.int32)),
            "retry_budget_exhausted": pa.array(exhausted.astype(bool)),
            "sender_thread": pa.array(thread.astype(np.int32), mask=thread < 0),
        },
    )


def uniq_keys(prep: Prepared, out: EngineOutput) -> pa.Array:
    """Each message's UNIQ_KEY as the client made it (``MessageClientIDSetter.createUniqID``): its time field
    is when it was made and its counter the process-wide order of the calls (``COUNTER.getAndIncrement()``,
    one client process per producer, counting from 0), not the born time and seq.

    ``setUniqID`` (only if absent) runs in ``sendKernelImpl`` at a single message's first attempt (SYNC and
    ONEWAY in the caller's thread, ASYNC on the executor thread: :attr:`EngineOutput.kernel_start`), and in
    ``DefaultMQProducer.batch()`` for each member in order when ``send(Collection)`` is called (the batch
    send's begin); 5.x then gives the batch itself one (``setUniqID(msgBatch)``). Calls at the same ms are
    in seq order. A message the validators refused before ``sendKernelImpl`` (or a batch refused at all:
    an approximation, upstream's members before the failing one took theirs) took none: its row keeps the
    workload's placeholder (born time, seq), as does a send that never reached ``sendKernelImpl``."""
    m = prep.messages
    send = prep.send_of_row
    sent = send >= 0
    if not sent.any():
        return m.column("uniq_msg_id")
    calls = UniqCalls(prep.batch_uniq_key)
    made, time = calls.add_sends(prep, out, np.arange(out.status.size))
    rows, counters = calls.assign(np.iinfo(np.int64).max)
    counter = np.zeros(m.num_rows, np.int64)
    counter[rows] = counters
    return uniq_column(prep, made, time, counter)


def uniq_column(prep: Prepared, made: np.ndarray, time: np.ndarray, counter: np.ndarray) -> pa.Array:
    """The UNIQ_KEY column of ``prep``'s rows: a row that made a call (``made``) at ``time`` with ``counter``
    gets its key, the others keep the workload's placeholder."""
    ids = workload.uniq_ids(prep.seed, prep.producer, counter, np.where(made, time, prep.born))
    if made.all():  # every row made its call: no placeholder kept
        return ids
    return pc.if_else(pa.array(made), ids, prep.messages.column("uniq_msg_id").combine_chunks())


class UniqCalls:
    """The process-wide order of a producer's ``createUniqID`` calls (:func:`uniq_keys`), made as a run
    goes: sends are added as they end, with their calls (row, time, leading seq, seq); :meth:`assign`
    gives the next counters to every call before a time no call still to come can precede (calls at
    the same ms in (leading seq, seq) order, a 5.x batch's own key after its members)."""

    def __init__(self, batch_uniq_key: bool) -> None:
        self.batch_uniq_key = batch_uniq_key
        self.next = 0  # the counter of the next call
        self._pending: list[tuple[np.ndarray, ...]] = []  # (row, time, lead, seq) of calls not counted

    def add_sends(
        self, prep: Prepared, out: EngineOutput, sends: np.ndarray, row0: int = 0
    ) -> tuple[np.ndarray, np.ndarray]:
        """The calls of the rows of ``sends`` (ended sends of ``prep``/``out``, row ids as in ``prep`` plus
        ``row0``: a chunk's rows numbered in the run); returns per row of ``prep`` whether it made one
        (for these sends) and when."""
        m = prep.messages
        send = prep.send_of_row
        if out.status.size == 0:  # rows the validators refused only: no call
            return np.zeros(m.num_rows, bool), np.zeros(m.num_rows, np.int64)
        mine = np.zeros(out.status.size + 1, bool)
        mine[sends] = True
        sent = (send >= 0) & mine[send]
        s = np.where(sent, send, 0)
        is_batch = np.asarray(pc.is_valid(m.column("batch_id")))
        member = sent & is_batch
        made = member | (sent & ~is_batch & (out.n_sent[s] > 0))
        seq = np.asarray(m.column("seq"), np.int64)
        time = np.where(member, out.begin[s], out.kernel_start[s])
        if prep.auto_member is not None:  # sendByAccumulator's setUniqID, as the message is added
            time = np.where(prep.auto_member, prep.born, time)
        call_row = np.flatnonzero(made) + row0
        lead = prep.s_seq[s] if prep.auto_member is None else np.where(prep.auto_member, seq, prep.s_seq[s])
        call_time, call_lead, call_seq = time[made], lead[made], seq[made]
        if self.batch_uniq_key and member.any():
            batches = np.unique(send[member])
            last = np.iinfo(np.int64).max
            call_time = np.concatenate([call_time, out.begin[batches]])
            call_lead = np.concatenate([call_lead, prep.s_seq[batches]])
            call_seq = np.concatenate([call_seq, np.full(batches.size, last)])
            call_row = np.concatenate([call_row, np.full(batches.size, -1)])
        self._pending.append((call_row, call_time, call_lead, call_seq))
        return made, time

    def assign(self, before: int) -> tuple[np.ndarray, np.ndarray]:
        """Counters of the calls added whose time is before ``before`` (no call to come is earlier):
        (their rows, their counters); the others wait."""
        if not self._pending:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        row, time, lead, seq = (np.concatenate(c) for c in zip(*self._pending, strict=True))
        now = time < before
        self._pending = [(row[~now], time[~now], lead[~now], seq[~now])]
        row, time, lead, seq = row[now], time[now], lead[now], seq[now]
        order = np.lexsort((seq, lead, time))
        counters = self.next + np.arange(order.size)
        self.next += order.size
        mine = row[order] >= 0
        return row[order][mine], counters[mine]


def decoded(coded: pa.Table, schema: pa.Schema) -> pa.Table:
    """A table of :func:`_coded_table` as one of ``schema`` (its dictionary columns as strings)."""
    return as_plain_strings(coded, schema)


def build_tables(prep: Prepared, out: EngineOutput) -> SimOutput:
    """The ``send_attempts`` and ``send_results`` rows of one producer (results in seq order)."""
    return SimOutput(
        decoded(_attempts_table(prep, out), ATTEMPTS_SCHEMA),
        decoded(_results_table(prep, out), RESULTS_SCHEMA),
    )


# ---- chunks: one producer's run in parts ------------------------------------------------------------


def gather_chunks(chunks: Iterable[pa.Table | pa.RecordBatch]) -> tuple[pa.Table, list[int]]:
    """One producer's messages given in chunks, as one table (string columns given as dictionary arrays
    as strings, :func:`as_strings`), and the row where each chunk ends."""
    tables, ends, n = [], [], 0
    for chunk in chunks:
        table = chunk if isinstance(chunk, pa.Table) else pa.Table.from_batches([chunk])
        if table.num_rows:
            tables.append(as_strings(table))
            n += table.num_rows
            ends.append(n)
    if not tables:
        return MESSAGES_SCHEMA.empty_table(), []
    messages = pa.concat_tables(tables)
    seq = np.asarray(messages.column("seq"), np.int64)
    if not bool(np.all(seq[1:] >= seq[:-1])):
        messages = messages.sort_by([("seq", "ascending")])
    return messages, ends


def chunk_cuts(messages: pa.Table, ends: Iterable[int]) -> list[int]:
    """The rows where chunks of ``messages`` (seq order) end: each of ``ends`` moved on past the batch it
    would split (a batch is one send: its members' records need its attempts), then the last row.
    Messages whose seqs do not increase (several sends of one seq) are one chunk."""
    n = messages.num_rows
    seq = np.asarray(messages.column("seq"), np.int64)
    if n < 2 or not bool(np.all(seq[1:] > seq[:-1])):
        return [n] if n else []
    batch = messages.column("batch_id")
    same = np.zeros(n + 1, bool)  # same[r]: rows r - 1 and r are members of one batch
    if batch.null_count < n:
        ids = np.asarray(batch.fill_null(-1), np.int64)
        same[1:n] = (ids[1:] == ids[:-1]) & (ids[1:] >= 0)
    allowed = np.flatnonzero(~same)  # rows where a chunk may end (n included)
    cuts = sorted({int(allowed[np.searchsorted(allowed, min(max(e, 1), n))]) for e in ends} | {n})
    return cuts


def batch_aligned(chunks: Iterable[pa.Table | pa.RecordBatch]) -> Iterator[pa.Table]:
    """One producer's messages given in chunks (seq order) as chunks that never split a batch: the rows
    of a chunk's last batch go on with the next chunk (for an engine that prepares a chunk at a time: a
    batch is one send, made once its last member is)."""
    carry: pa.Table | None = None
    for chunk in chunks:
        table = chunk if isinstance(chunk, pa.Table) else pa.Table.from_batches([chunk])
        if carry is not None:
            table = pa.concat_tables([carry, table.cast(carry.schema)])
        n = table.num_rows
        if not n:
            continue
        end = _batch_start(table) if table.column("batch_id")[n - 1].is_valid else n
        if end:
            yield table.slice(0, end)
        carry = table.slice(end) if end < n else None
    if carry is not None:
        yield carry


def _batch_start(table: pa.Table) -> int:
    """The first row of the batch ``table``'s last row is a member of (its rows are consecutive)."""
    ids = np.asarray(table.column("batch_id").fill_null(-1), np.int64)
    last = ids[-1]
    other = np.flatnonzero(ids != last)
    return int(other[-1]) + 1 if other.size else 0


def slice_output(messages: pa.Table, out: SimOutput, cuts: Iterable[int]) -> Iterator[SimChunk]:
    """A whole run's tables (results in seq order, attempts in (seq, attempt) order) cut into the
    chunks that end at rows ``cuts`` of ``messages`` (:func:`chunk_cuts`)."""
    seq = np.asarray(out.results.column("seq"), np.int64)
    attempt_seq = np.asarray(out.attempts.column("seq"), np.int64)
    later = _later_starts(np.asarray(out.attempts.column("start_ts_ms"), np.int64))
    r0 = a0 = 0
    for r1 in cuts:
        a1 = int(np.searchsorted(attempt_seq, seq[r1 - 1], "right")) if r1 > r0 else a0
        yield SimChunk(
            messages.slice(r0, r1 - r0),
            out.attempts.slice(a0, a1 - a0),
            out.results.slice(r0, r1 - r0),
            int(later[a1]),
        )
        r0, a0 = r1, a1


def _later_starts(start: np.ndarray) -> np.ndarray:
    """Per attempt position k, the earliest start among attempts k.. (one more: none, NO_LATER_ATTEMPT)."""
    out = np.full(start.size + 1, NO_LATER_ATTEMPT, np.int64)
    if start.size:
        out[:-1] = np.minimum.accumulate(start[::-1])[::-1]
    return out


def sim_chunk(prep: Prepared, out: EngineOutput, uniq: pa.Array, later_start_ms: int) -> SimChunk:
    """A :class:`SimChunk` of whole sends: ``prep`` and ``out`` hold its rows and sends only, ``uniq``
    their UNIQ_KEY column (:func:`uniq_column`)."""
    attempts, results = _attempts_table(prep, out), _results_table(prep, out, uniq)
    return SimChunk(
        prep.messages,
        decoded(attempts, ATTEMPTS_SCHEMA),
        decoded(results, RESULTS_SCHEMA),
        later_start_ms,
        (attempts, results),
    )


def error_text(err: BaseException) -> str:
    """The ``error`` column's text of an exception a send ended with: ``<Java class>: <message>``."""
    cls = getattr(err, "java_class", type(err).__name__)
    text = getattr(err, "full_message", None) or str(err)
    return f"{cls}: {text}"
