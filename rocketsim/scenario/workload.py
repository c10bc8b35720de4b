"""Synthetic messages: one producer's sends, generated column-wise from the scenario.

Every value comes from the counter-based generator keyed by ``(seed, producer, seq)`` (on a workload
salt, apart from the broker model's draws), so a producer's messages are the same whichever worker makes
them and however the run is partitioned. Arrival times need a running sum per producer, so a producer's
messages are made in order, in chunks (``chunk_rows``), carrying the clock from chunk to chunk.

What the client adds to a message's properties is modelled as the Java client does it:
``WAIT=true`` (Message's constructor), ``TAGS``, ``KEYS``, ``UNIQ_KEY`` (set on send), ``DELAY`` for delay
messages, ``TRAN_MSG=true`` and ``PGROUP`` for transactional half messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim import rng
from rocketsim.format.codec import decimal_lengths
from rocketsim.scenario import MESSAGE_TYPES, SEND_MODES, Scenario, schedule
from rocketsim.tables.schemas import MESSAGES, without_run_id

WORKLOAD_SALT = 0x5EED_0F_3E55A6E5  # keeps workload draws apart from the broker model's
EPOCH_MS = 1_700_000_000_000  # wall-clock instant of simulated time 0 (for UNIQ_KEY ids)

# streams of the workload draws
S_GAP, S_TYPE, S_MODE, S_TOPIC, S_TAG, S_BODY_A, S_BODY_B, S_ORDER, S_DELAY, S_INVALID, S_INVALID_KIND = (
    range(11)
)

BAD_TOPIC = "bad topic!"  # illegal characters: the client refuses it
RESERVED_PROPERTY = "UNIQ_KEY"  # a system property name putUserProperty refuses
OVERSIZE_PROPERTY_BYTES = 40_000  # a user property that pushes properties past 32767 bytes

_SCHEMA = without_run_id(MESSAGES)
# the string columns drawn as indexes into a few names: made as dictionary arrays of those codes
CODED_COLUMNS = ("topic", "tags", "message_type", "send_mode")
CODED_SCHEMA = pa.schema(
    [f.with_type(pa.dictionary(pa.int32(), pa.string())) if f.name in CODED_COLUMNS else f for f in _SCHEMA],
    metadata=_SCHEMA.metadata,
)


@dataclass(frozen=True)
class ProducerShare:
    """How many messages one producer sends and at what rate."""

    producer: int
    messages: int
    rate_per_s: float


def _split(total: int, count: int) -> list[int]:
    """``total`` over ``count`` parts as evenly as integers allow (the first ones get one more)."""
    return [total // count + (1 if i < total % count else 0) for i in range(count)]


def producer_shares(sc: Scenario) -> list[ProducerShare]:
    """Split the workload over the producers: evenly (the first ``total % count`` get one more), or,
    with ``workload.hot_share`` > 0, that fraction of messages and rate over the first
    ``hot_producers`` and the rest over the others."""
    wl = sc.workload
    total = wl.total_messages()
    if wl.rate_steps:  # the schedule's sends go round the producers (scenario.schedule)
        counts = schedule.producer_messages(wl.rate_steps, sc.producers.count)
        return [ProducerShare(p, n, wl.mean_rate_per_s() / sc.producers.count) for p, n in enumerate(counts)]
    count = sc.producers.count
    if wl.hot_share <= 0:
        rate = wl.rate_per_s / count
        return [ProducerShare(p, n, rate) for p, n in enumerate(_split(total, count))]
    hot, cold = wl.hot_producers, count - wl.hot_producers
    hot_total = int(round(total * wl.hot_share))
    counts = _split(hot_total, hot) + _split(total - hot_total, cold)
    rates = [wl.rate_per_s * wl.hot_share / hot] * hot + [wl.rate_per_s * (1 - wl.hot_share) / cold] * cold
    return [ProducerShare(p, n, r) for p, (n, r) in enumerate(zip(counts, rates, strict=True))]


def _uniforms(seed: int, producer: int, seqs: np.ndarray, stream: int) -> np.ndarray:
    keys = rng.draw_keys(seed ^ WORKLOAD_SALT, producer, seqs, np.zeros(len(seqs), np.int64))
    return rng.uniforms(keys, stream)


def _choose(u: np.ndarray, weights: dict[str, float], names: tuple[str, ...]) -> np.ndarray:
    """Index into ``names`` drawn by ``weights`` (names missing from weights have weight 0)."""
    w = np.array([weights.get(n, 0.0) for n in names], dtype=np.float64)
    cum = np.cumsum(w / w.sum())
    # np.minimum(np.searchsorted(cum, u, side="right"), len(names) - 1), as one comparison a bound (the
    # bounds are few): 5-50x quicker than the binary searches
    idx = np.zeros(len(u), np.intp)
    for bound in cum[:-1].tolist():
        idx += u >= bound
    return idx


# each 16-bit value's four uppercase hex digits, as one uint32 (the bytes of an Arrow string buffer)
_HEX_QUADS = np.frombuffer(b"".join(f"{i:04X}".encode() for i in range(1 << 16)), dtype="<u4")
# each number below 10,000 as its four decimal digits (leading zeros), as one uint32 (the bytes of a string)
_DIGIT_QUADS = np.frombuffer(b"".join(f"{i:04d}".encode() for i in range(10_000)), dtype="<u4")


def producer_identity(seed: int, producer: int) -> tuple[bytes, int, int]:
    """What MessageClientIDSetter fixes at class init for a producer's process: (ip, pid, loader hash).

    ip = 10.x.y.z from the producer number; pid and class-loader hash are drawn per producer.
    """
    k = rng.draw_key(seed ^ WORKLOAD_SALT, producer, 0xFFFFFFFF, 0)
    ip = ((10 << 24) | (producer & 0xFFFFFF)).to_bytes(4, "big")
    return ip, int(rng.uniform(k, 0) * 65536), int(rng.uniform(k, 1) * (1 << 32))


def uniq_ids(seed: int, producer: int, counters: np.ndarray, times_ms: np.ndarray) -> pa.Array:
    """UNIQ_KEY ids in MessageClientIDSetter's layout, for a producer that is a process of its own.

    ip (4), pid (2), class-loader hash (4) from :func:`producer_identity`; time (4) = ms since the start of
    the (UTC) month of ``times_ms``; counter (2) = the low 16 bits of ``counters``. The workload's
    messages carry a placeholder (born time, seq); the simulation gives each message the id the client
    made (:func:`rocketsim.engine.plan.uniq_keys`). The head's 20 hex digits are the producer's, the same
    on every row: made once; the last 12 per row, four at a time (the time's two halves, the counter).
    """
    seqs, born_ts_ms = np.asarray(counters, np.int64), np.asarray(times_ms, np.int64)
    n = len(seqs)
    ip, pid, loader = producer_identity(seed, producer)
    head = (ip + pid.to_bytes(2, "big") + loader.to_bytes(4, "big")).hex().upper().encode()
    now = born_ts_ms + EPOCH_MS
    time = (now - _month_start(now)).astype(np.uint32)
    chars = np.empty((n, 8), dtype="<u4")  # each row's 32 hex digits, four a word
    chars[:, :5] = np.frombuffer(head, "<u4")
    chars[:, 5] = _HEX_QUADS[time >> 16]
    chars[:, 6] = _HEX_QUADS[time & 0xFFFF]
    chars[:, 7] = _HEX_QUADS[seqs & 0xFFFF]
    offsets = np.arange(0, n * 32 + 1, 32, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(chars))


def _month_start(now_ms: np.ndarray) -> np.ndarray | np.int64:
    """The start (ms) of the UTC month of each instant; one number when they all fall in one month (the
    earliest's and the latest's month the same: months only grow with the instant)."""
    if not len(now_ms):
        return np.int64(0)
    ends = np.array([now_ms.min(), now_ms.max()]).astype("datetime64[ms]").astype("datetime64[M]")
    if ends[0] == ends[1]:  # the common case: one month, one start
        return np.int64(ends[0].astype("datetime64[ms]").astype(np.int64))
    return now_ms.astype("datetime64[ms]").astype("datetime64[M]").astype("datetime64[ms]").astype(np.int64)


def _utf8_len(s: str) -> int:
    return len(s.encode("utf-8"))


# messages per generated chunk: a producer's rows go through a task this many at a time; the arrival clock
# is a float sum carried from chunk to chunk, so the chunks' size is part of the messages: fixed
CHUNK_ROWS = 1 << 20


def generate_producer(
    sc: Scenario,
    share: ProducerShare,
    chunk_rows: int = CHUNK_ROWS,
    batch_rows: int | None = None,
    coded: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Yield the producer's messages as record batches (schema ``MESSAGES`` without run_id), in seq order:
    one per ``chunk_rows`` (the arrival clock's chunks), or cut into batches of ``batch_rows`` (the same
    messages; the clock still summed per chunk). ``coded``: :data:`CODED_COLUMNS` left as the dictionary
    arrays they are drawn as (:data:`CODED_SCHEMA`)."""
    mix = _Mix.of(sc, share)
    for lo, hi, born in _arrival_chunks(sc, share, chunk_rows, batch_rows or chunk_rows, mix.mean_gap):
        batch = _messages(sc, share, mix, lo, hi, born)
        yield batch if coded else batch.cast(_SCHEMA)


def _coded(names: tuple[str, ...] | list[str], idx: np.ndarray) -> pa.DictionaryArray:
    """``names[idx]`` as a dictionary array (its codes: ``idx``)."""
    return pa.DictionaryArray.from_arrays(pa.array(idx.astype(np.int32)), pa.array(names, pa.string()))


@dataclass(frozen=True)
class _Mix:
    """What a producer's messages are drawn from, the same for each of its chunks."""

    trailing: int  # -1: the client's properties string drops its last separator (4.9)
    tags: tuple[str, ...]
    tag_len: np.ndarray
    pgroup_len: int
    mtype_weights: dict[str, float]  # message types sent alone (batch apart)
    batch_p: float  # the share of batches
    mean_gap: float  # ms between arrivals
    order_names: pa.Array
    invalid: dict[str, float]
    invalid_total: float
    invalid_names: tuple[str, ...]

    @staticmethod
    def of(sc: Scenario, share: ProducerShare) -> _Mix:
        wl = sc.workload
        tags = wl.tags or ("",)
        mtype_weights = dict(wl.message_types)
        batch_weight = mtype_weights.pop("batch", 0.0)
        total_weight = batch_weight + sum(mtype_weights.values())
        invalid = dict(wl.invalid)
        return _Mix(
            trailing=0 if sc.producers.version.properties_trailing_separator else -1,
            tags=tags,
            tag_len=np.array([_utf8_len(t) for t in tags], np.int32),
            pgroup_len=_utf8_len(sc.producers.group),
            mtype_weights=mtype_weights,
            batch_p=batch_weight / total_weight,
            mean_gap=1000.0 / share.rate_per_s,
            order_names=pa.array([f"order-{k}" for k in range(wl.order_keys)], pa.string()),
            invalid=invalid,
            invalid_total=sum(invalid.values()),
            invalid_names=tuple(invalid),
        )


@dataclass(frozen=True)
class _Kinds:
    """Per message: in a batch (blocks of ``batch_size`` consecutive seqs), its block's first seq, its
    type, topic and send mode (indexes into MESSAGE_TYPES, the topics and SEND_MODES)."""

    in_batch: np.ndarray
    block_first: np.ndarray
    mtype: np.ndarray
    topic_idx: np.ndarray
    mode_idx: np.ndarray


def _messages(
    sc: Scenario, share: ProducerShare, mix: _Mix, lo: int, hi: int, born: np.ndarray
) -> pa.RecordBatch:
    """The messages of seqs ``lo..hi - 1``, born at ``born``."""
    wl = sc.workload
    seqs = np.arange(lo, hi, dtype=np.int64)
    n = hi - lo
    keys = rng.draw_keys(sc.seed ^ WORKLOAD_SALT, share.producer, seqs, np.zeros(n, np.int64))

    def u(stream: int, keys: np.ndarray = keys) -> np.ndarray:
        return rng.uniforms(keys, stream)

    kinds = _kinds(sc, share, mix, seqs, u)
    tag_idx = np.minimum((u(S_TAG) * len(mix.tags)).astype(np.int64), len(mix.tags) - 1)
    body = _body_sizes(sc, u(S_BODY_A), u(S_BODY_B))
    is_delay = kinds.mtype == MESSAGE_TYPES.index("delay")
    levels = np.array(wl.delay_levels or (1,), np.int32)
    delay = np.where(
        is_delay, levels[np.minimum((u(S_DELAY) * len(levels)).astype(np.int64), len(levels) - 1)], 0
    ).astype(np.int32)
    order_idx = np.minimum((u(S_ORDER) * wl.order_keys).astype(np.int64), wl.order_keys - 1)
    topic_col = _coded(wl.topics, kinds.topic_idx)
    topic_col, body, reserved, extra_props = _invalid_messages(sc, mix, u, n, topic_col, body)
    key_col = None
    key_len = np.zeros(n, np.int64)
    if wl.keys:
        key_col = seq_keys(f"k{share.producer}-", lo, hi)
        key_len = np.asarray(pc.binary_length(key_col), np.int64)
    props = _properties_sizes(mix, kinds.mtype, tag_idx, key_len, delay, extra_props)
    in_batch, block_first = kinds.in_batch, kinds.block_first
    batch_size = np.where(in_batch, np.minimum(wl.batch_size, share.messages - block_first), 1)
    reserved_col = pa.nulls(n, pa.string()) if reserved is None else pa.array(reserved, pa.string())
    cols = {
        "producer": pa.array(np.full(n, share.producer, np.int32)),
        "seq": pa.array(seqs),
        "thread": pa.array((seqs % sc.producers.threads).astype(np.int32)),
        "topic": topic_col,
        "tags": _coded(mix.tags, tag_idx),
        "keys": key_col if key_col is not None else pa.nulls(n, pa.string()),
        "uniq_msg_id": uniq_ids(sc.seed, share.producer, seqs, born),
        "body_size": pa.array(body.astype(np.int32)),
        "compressibility": pa.array(np.full(n, wl.compressibility, np.float32)),
        "properties_size": pa.array(props.astype(np.int32)),
        "flag": pa.array(np.zeros(n, np.int32)),
        "message_type": _coded(MESSAGE_TYPES, kinds.mtype),
        "delay_level": pa.array(delay),
        "send_mode": _coded(SEND_MODES, kinds.mode_idx),
        "born_ts_ms": pa.array(born),
        "batch_id": pa.array(np.where(in_batch, block_first, 0), mask=~in_batch),
        "batch_size": pa.array(batch_size.astype(np.int32)),
        "order_key": _order_keys(mix, kinds.mtype == MESSAGE_TYPES.index("ordered"), order_idx),
        "reserved_property": reserved_col,
    }
    return pa.RecordBatch.from_pydict(cols, schema=CODED_SCHEMA)


def seq_keys(prefix: str, lo: int, hi: int) -> pa.Array:
    """``prefix`` then each seq of ``lo..hi - 1`` in decimal: the messages' KEYS, as joining ``prefix`` to
    the seqs cast to strings makes them. Made from buffers (~4x cheaper) when every key is 8 to 15 bytes
    (a prefix of 1-7 bytes, seqs of at most 8 digits, none shorter than 8 bytes in all): each key's
    digits as one 8-byte number (two lookups of four digits), shifted past its leading zeros and after
    the prefix, written as two 8-byte words a key apart (the second first: a key's first word
    overwrites what the one before it wrote past its end)."""
    head, n = prefix.encode(), hi - lo
    if n <= 0 or not (0 < len(head) < 8 and 10 ** (8 - len(head)) <= lo and hi <= 10**8):
        seqs = pa.array(np.arange(lo, max(lo, hi), dtype=np.int64))
        return pc.binary_join_element_wise(prefix, pc.cast(seqs, pa.string()), "")
    high, low = np.divmod(np.arange(lo, hi, dtype=np.int32), 10_000)
    digits = _DIGIT_QUADS[high].astype(np.uint64) | (_DIGIT_QUADS[low].astype(np.uint64) << np.uint64(32))
    head_bits, p = np.uint64(int.from_bytes(head, "little")), len(head)
    lengths = np.empty(n, np.int32)
    data = np.zeros(n * (p + 8) + 16, np.uint8)
    at, start = lo, 0
    while at < hi:  # runs of seqs with as many digits
        width = len(str(at))
        end = min(hi, 10**width)
        key, rows = p + width, end - at
        value = digits[at - lo : end - lo] >> np.uint64(8 * (8 - width))  # its leading zeros dropped
        np.ndarray((rows,), "<u8", data, start + 8, (key,))[:] = value >> np.uint64(64 - 8 * p)
        np.ndarray((rows,), "<u8", data, start, (key,))[:] = head_bits | (value << np.uint64(8 * p))
        lengths[at - lo : end - lo] = key
        start += rows * key
        at = end
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data[:start]))


def _order_keys(mix: _Mix, ordered: np.ndarray, order_idx: np.ndarray) -> pa.Array:
    """The selector's key of each ordered message (null for the others)."""
    if not ordered.any():
        return pa.nulls(ordered.size, pa.string())
    return pc.if_else(ordered, pc.take(mix.order_names, order_idx), None)


def _kinds(
    sc: Scenario, share: ProducerShare, mix: _Mix, seqs: np.ndarray, u: Callable[[int], np.ndarray]
) -> _Kinds:
    """Batches, types, topics and send modes of the messages ``seqs`` (``u``: their uniforms of a
    stream); a batch's block decides for all its messages by its first seq."""
    n, topics, send_mode = len(seqs), sc.workload.topics, dict(sc.producers.send_mode)
    block_first = (seqs // sc.workload.batch_size) * sc.workload.batch_size
    in_batch = (
        _uniforms(sc.seed, share.producer, block_first, S_TYPE) < mix.batch_p
        if mix.batch_p > 0
        else (np.zeros(n, bool))
    )
    if mix.mtype_weights and sum(mix.mtype_weights.values()) > 0:
        mtype = _choose(u(S_TYPE + 16), mix.mtype_weights, MESSAGE_TYPES)
    else:
        mtype = np.zeros(n, np.int64)
    mtype = np.where(in_batch, MESSAGE_TYPES.index("batch"), mtype)
    topic_seq = np.where(in_batch, block_first, seqs)
    topic_idx = np.minimum(
        (_uniforms(sc.seed, share.producer, topic_seq, S_TOPIC) * len(topics)).astype(np.int64),
        len(topics) - 1,
    )
    mode_idx = _choose(u(S_MODE), send_mode, SEND_MODES)
    # a batch is one send: every message of the block takes the block's send mode (never oneway)
    block_mode = _choose(_uniforms(sc.seed, share.producer, block_first, S_MODE), send_mode, SEND_MODES)
    mode_idx = np.where(in_batch, block_mode, mode_idx)
    return _Kinds(in_batch, block_first, mtype, topic_idx, mode_idx)


def _invalid_messages(
    sc: Scenario,
    mix: _Mix,
    u: Callable[[int], np.ndarray],
    n: int,
    topic_col: pa.Array,
    body: np.ndarray,
) -> tuple[pa.Array, np.ndarray, np.ndarray | None, np.ndarray]:
    """Messages made invalid on purpose (``workload.invalid``: which kind, if any): (topics, body sizes,
    reserved property names (None: none; the array None: no row has one), extra properties bytes)."""
    reserved: np.ndarray | None = None
    extra_props = np.zeros(n, np.int64)
    if mix.invalid_total <= 0:
        return topic_col, body, reserved, extra_props
    bad = u(S_INVALID) < mix.invalid_total
    kind = _choose(u(S_INVALID_KIND), mix.invalid, mix.invalid_names)
    for j, name in enumerate(mix.invalid_names):
        hit = bad & (kind == j)
        if not hit.any():
            continue
        if name == "bad_topic":  # a name apart from the topics: coded again
            topic_col = pc.if_else(hit, BAD_TOPIC, topic_col.cast(pa.string())).dictionary_encode()
        elif name == "empty_body":
            body = np.where(hit, 0, body)
        elif name == "oversize_body":
            body = np.where(hit, sc.producers.max_message_size + 1, body)
        elif name == "oversize_properties":
            # one user property "BIG" whose value makes the whole string too long
            extra_props = np.where(hit, len("BIG") + 2 + OVERSIZE_PROPERTY_BYTES, extra_props)
        elif name == "reserved_property":
            before = np.full(n, None, object) if reserved is None else reserved
            reserved = np.where(hit, RESERVED_PROPERTY, before)
    return topic_col, body, reserved, extra_props


def _properties_sizes(
    mix: _Mix,
    mtype: np.ndarray,
    tag_idx: np.ndarray,
    key_len: np.ndarray,
    delay: np.ndarray,
    extra_props: np.ndarray,
) -> np.ndarray:
    """The bytes of each message's properties string as the client sends it: the sum of name + SEP1 +
    value + SEP2 of each property."""
    props = (len("WAIT") + 2 + len("true")) + (len("UNIQ_KEY") + 2 + 32) + extra_props
    props = props + np.where(mix.tag_len[tag_idx] > 0, len("TAGS") + 2 + mix.tag_len[tag_idx], 0)
    props = props + np.where(key_len > 0, len("KEYS") + 2 + key_len, 0)
    # DELAY = String.valueOf(level) (Message.setDelayTimeLevel): any level >= 1, any number of digits;
    # the broker clamps levels above its maximum (18) when it stores them, the client sends them as is
    is_delay = mtype == MESSAGE_TYPES.index("delay")
    props = props + np.where(is_delay, len("DELAY") + 2 + decimal_lengths(delay), 0)
    is_txn = mtype == MESSAGE_TYPES.index("transaction")
    props = props + np.where(
        is_txn, (len("TRAN_MSG") + 2 + len("true")) + (len("PGROUP") + 2 + mix.pgroup_len), 0
    )
    return props + mix.trailing


def _arrival_chunks(
    sc: Scenario, share: ProducerShare, chunk_rows: int, batch_rows: int, mean_gap: float
) -> Iterator[tuple[int, int, np.ndarray]]:
    """The born times of seqs ``lo..hi - 1``, ``batch_rows`` at a time: exponential gaps (poisson) or a
    fixed gap (uniform), summed a chunk of ``chunk_rows`` at a time from the clock the chunk before left;
    with ``workload.rate_steps``, the schedule's due times (:func:`rocketsim.scenario.schedule.due_ms`)."""
    if sc.workload.rate_steps:
        yield from _scheduled_chunks(sc, share, chunk_rows, batch_rows)
        return
    clock = 0.0
    for lo in range(0, share.messages, chunk_rows):
        hi = min(lo + chunk_rows, share.messages)
        n = hi - lo
        if sc.workload.arrival == "poisson":
            seqs = np.arange(lo, hi, dtype=np.int64)
            keys = rng.draw_keys(sc.seed ^ WORKLOAD_SALT, share.producer, seqs, np.zeros(n, np.int64))
            gaps = -np.log1p(-rng.uniforms(keys, S_GAP)) * mean_gap
        else:
            gaps = np.full(n, mean_gap)
        times = clock + np.cumsum(gaps)
        clock = float(times[-1])
        born = np.floor(times).astype(np.int64)
        for at in range(lo, hi, batch_rows):
            yield at, min(at + batch_rows, hi), born[at - lo : min(at + batch_rows, hi) - lo]


def _scheduled_chunks(
    sc: Scenario, share: ProducerShare, chunk_rows: int, batch_rows: int
) -> Iterator[tuple[int, int, np.ndarray]]:
    """:func:`_arrival_chunks` of a rate schedule: each send's due time, whole ms."""
    wl = sc.workload

    def draws(producer: int, seqs: np.ndarray, which: int) -> np.ndarray:
        keys = rng.draw_keys(sc.seed ^ WORKLOAD_SALT, producer, seqs, np.full(seqs.size, which, np.int64))
        return rng.uniforms(keys, S_GAP)

    poisson = draws if wl.arrival == "poisson" else None
    for lo in range(0, share.messages, chunk_rows):
        hi = min(lo + chunk_rows, share.messages)
        seqs = np.arange(lo, hi, dtype=np.int64)
        born = np.floor(schedule.due_ms(wl.rate_steps, sc.producers.count, share.producer, seqs, poisson))
        born = born.astype(np.int64)
        for at in range(lo, hi, batch_rows):
            yield at, min(at + batch_rows, hi), born[at - lo : min(at + batch_rows, hi) - lo]


def _body_sizes(sc: Scenario, u1: np.ndarray, u2: np.ndarray) -> np.ndarray:
    b = sc.workload.body_size
    if b.distribution == "fixed":
        size = np.full(len(u1), float(b.median))
    elif b.distribution == "uniform":
        size = b.min + u1 * (b.max - b.min + 1)
    else:  # lognormal around the median (Box-Muller from two uniforms)
        z = np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)
        size = b.median * np.exp(b.sigma * z)
    return np.clip(np.floor(size), b.min, b.max).astype(np.int64)


def generate(sc: Scenario, producers: list[int] | None = None) -> pa.Table:
    """All messages of the given producers (default: all) as one table: for tests and small runs."""
    shares = producer_shares(sc)
    chosen = shares if producers is None else [shares[p] for p in producers]
    batches = [b for s in chosen for b in generate_producer(sc, s)]
    return pa.Table.from_batches(batches, schema=_SCHEMA)
