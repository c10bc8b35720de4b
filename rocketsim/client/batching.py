"""autoBatch (5.1.4+): the ``ProduceAccumulator`` that holds plain messages and sends them as one
``MessageBatch`` per (topic, tag), decided for one producer's messages before the engines run.

More: docs/reference/modules.md, rocketsim/client/batching.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketsim.client.versions import AutoBatch, ClientVersion
from rocketsim.format import codec
from rocketsim.format.message import MessageConst

__all__ = ["AutoBatches", "accumulate", "guard_sleep_ms", "request_properties_sizes"]


def guard_sleep_ms(hold_ms: int) -> int:
    """``GuardForAsyncSendService.doWork``'s sleep between passes: ``Math.max(1, holdMs / 2)``."""
    return max(1, hold_ms // 2)


@dataclass(frozen=True)
class AutoBatches:
    """The accumulator's batches of one producer: per row the batch it joined (-1: sent alone), per batch
    when it was sent (its send's start)."""

    batch: np.ndarray  # int64 per row
    sent_ms: np.ndarray  # int64 per batch

    @property
    def count(self) -> int:
        return int(self.sent_ms.size)


def accumulate(
    born: np.ndarray,
    key: np.ndarray,
    body: np.ndarray,
    through: np.ndarray,
    batchable: np.ndarray,
    settings: AutoBatch,
) -> AutoBatches:
    """The batches ``ProduceAccumulator`` forms of one producer's messages (rows in seq order).

    ``key``: the aggregate key's code per row (topic and tag); ``through``: the row's send goes through
    ``sendByAccumulator`` (a plain ``send(msg[, callback])``); ``batchable``: it passes ``canBatch``'s
    checks after ``tryAddMessage`` and the validators (not a delay message, not refused)."""
    order = np.lexsort((np.arange(born.size), born))
    batch, sent = _accumulate(
        np.ascontiguousarray(born[order], np.int64),
        np.ascontiguousarray(key[order], np.int64),
        np.ascontiguousarray(body[order], np.int64),
        np.ascontiguousarray(through[order], np.bool_),
        np.ascontiguousarray(batchable[order], np.bool_),
        int(key.max(initial=-1)) + 1,
        settings.batch_max_delay_ms,
        settings.batch_max_bytes,
        settings.total_batch_max_bytes,
        guard_sleep_ms(settings.batch_max_delay_ms),
    )
    out = np.empty_like(batch)
    out[order] = batch
    return AutoBatches(out, sent)


@numba.njit(cache=True)
def _due(created: int, hold_ms: int, sleep_ms: int) -> int:
    """The guard's first pass at or after ``created + hold_ms`` (passes at multiples of ``sleep_ms``)."""
    return ((created + hold_ms + sleep_ms - 1) // sleep_ms) * sleep_ms


@numba.njit(cache=True)
def _accumulate(born, key, body, through, batchable, n_keys, hold_ms, hold_size, total_hold, sleep_ms):
    """:func:`accumulate` over rows in (born, seq) order: (batch per row, sent time per batch)."""
    n = born.size
    batch = np.full(n, -1, np.int64)
    created = np.zeros(n, np.int64)
    held = np.zeros(n, np.int64)  # MessageAccumulation.messagesSize
    sent = np.full(n, -1, np.int64)
    key_of = np.zeros(n, np.int64)
    open_of_key = np.full(max(n_keys, 1), -1, np.int64)
    n_batches = 0
    oldest = 0  # batches before it are sent (they open in time order, so they fall due in that order)
    holding = 0  # ProduceAccumulator.currentlyHoldSize
    for r in range(n):
        t = born[r]
        while oldest < n_batches:  # the guard's passes before t send the batches due
            b = oldest
            if sent[b] < 0:
                due = _due(created[b], hold_ms, sleep_ms)
                if due >= t:
                    break
                sent[b] = due
                holding -= held[b]
                open_of_key[key_of[b]] = -1
            oldest += 1
        if not through[r] or holding >= total_hold:  # tryAddMessage false: sent alone
            continue
        if body[r] > 0:
            holding += body[r]
        if not batchable[r]:  # refused by canBatch or the validators after tryAddMessage: kept
            continue
        b = open_of_key[key[r]]
        if b < 0:
            b = n_batches
            n_batches += 1
            created[b] = t
            key_of[b] = key[r]
            open_of_key[key[r]] = b
        batch[r] = b
        held[b] += max(body[r], 0)
        if held[b] > hold_size or t >= created[b] + hold_ms:  # readyToSend after the add
            sent[b] = t
            holding -= held[b]
            open_of_key[key[r]] = -1
    for b in range(oldest, n_batches):  # after the last message: the guard's passes
        if sent[b] < 0:
            sent[b] = _due(created[b], hold_ms, sleep_ms)
    return batch, sent[:n_batches]


def request_properties_sizes(
    batch: np.ndarray, keys: pa.Array, tag_len: np.ndarray, n_batches: int, version: ClientVersion
) -> np.ndarray:
    """Per batch, the properties of the ``MessageBatch`` request ``MessageAccumulation.batch()`` makes:
    ``KEYS`` (its members' keys, split on spaces, as a set joined by spaces), ``TAGS`` (the key's tag,
    absent when null: ``tag_len`` -1), ``WAIT`` true, and the batch's own ``UNIQ_KEY`` (32 hex chars).

    ``batch``: per member row its batch; ``keys``: the members' KEYS; ``tag_len``: per batch."""
    words = pc.split_pattern(keys, " ")
    parents = pc.list_parent_indices(words)
    pairs = pa.table({"batch": pa.array(batch[np.asarray(parents)]), "key": pc.list_flatten(words)})
    pairs = pairs.filter(pc.greater(pc.binary_length(pairs.column("key")), 0))
    distinct = pairs.group_by(["batch", "key"]).aggregate([])
    which = np.asarray(distinct.column("batch"), np.int64)
    key_bytes = np.bincount(which, np.asarray(pc.binary_length(distinct.column("key"))), n_batches)
    key_count = np.bincount(which, minlength=n_batches)
    columns = {
        MessageConst.PROPERTY_KEYS: (key_bytes + np.maximum(key_count - 1, 0)).astype(np.int64),
        MessageConst.PROPERTY_TAGS: tag_len.astype(np.int64),
        MessageConst.PROPERTY_WAIT_STORE_MSG_OK: len("true"),
        MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: 32,
    }
    return codec.properties_sizes(columns, length=n_batches, version=version)
