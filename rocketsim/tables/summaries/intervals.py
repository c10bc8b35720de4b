"""Isolation intervals: the spans in which a producer's latency-fault strategy kept a broker
isolated, from its attempts, all at once (:func:`isolation_intervals`) or a part at a time
(:class:`IntervalFold`, which keeps only the attempts not yet settled).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from rocketsim.tables.grouping import Groups, sort_order
from rocketsim.tables.summaries.aggregates import AGGREGATE_TABLES, I64
from rocketsim.tables.summaries.columns import AttemptColumns


def isolation_intervals(attempts: pa.Table) -> pa.Table:
    """``isolation_intervals`` rows (producer, broker, start_ms, end_ms) of some producers' attempts
    (readable reference: :func:`tests.analysis.isolation_intervals`).

    Per (producer, broker), attempts in order of (end, start, seq, attempt): an attempt whose
    ``fault_isolated_until_ms`` is after its end ``e`` gives the piece ``[e, min(until, next end))``
    (the next attempt's end, if any); non-empty pieces that touch (previous end >= start) are merged.
    """
    return attempt_intervals(AttemptColumns(attempts, 1))


def attempt_intervals(a: AttemptColumns) -> pa.Table:
    """:func:`isolation_intervals` of attempt columns already read."""
    fold = IntervalFold()
    fold.add(a, _NO_MORE)
    return fold.result()


_NO_MORE = np.iinfo(np.int64).max  # a watermark past every attempt: no attempt is still to come
_I = np.int64


class IntervalFold:
    """The isolation intervals of attempts given a part at a time (:func:`isolation_intervals`' rule).

    Per (producer, broker), attempts in order of (end, start, seq, attempt): an attempt whose
    ``fault_isolated_until_ms`` is after its end ``e`` gives the piece ``[e, min(until, next end))``;
    pieces that touch (the previous piece's end >= start) make one interval. With each part, the caller
    gives a watermark: no attempt still to come starts before it (the engine knows it:
    :attr:`rocketsim.engine.plan.SimChunk.later_start_ms`). An attempt that ends before it and whose
    piece is known (none, or one that stops before the watermark, or a next attempt that ends before it)
    is settled: its piece joins the pair's open interval; only the others are kept."""

    def __init__(self) -> None:
        self.brokers: list[str] = []
        self._code: dict[str, int] = {}
        self.watermark = np.iinfo(np.int64).min
        names = ("producer", "broker", "end", "start", "seq", "attempt", "until")
        self._rows: dict[str, np.ndarray] = {k: np.zeros(0, _I) for k in names}
        self._rows["candidate"] = np.zeros(0, bool)
        self._open: dict[str, np.ndarray] = {
            k: np.zeros(0, _I) for k in ("producer", "broker", "start", "top", "last")
        }
        self._closed: list[dict[str, np.ndarray]] = []

    def add(self, a: AttemptColumns, watermark: int) -> None:
        """A part's attempts (no attempt of it starts before the last watermark), and the new one."""
        if a.n and int(a.start.min()) < self.watermark:
            raise ValueError(
                f"isolation intervals: an attempt starts at {int(a.start.min())}, before the watermark "
                f"{self.watermark} an earlier part gave"
            )
        names = a.broker_names.to_pylist()
        for name in names:
            if name not in self._code:
                self._code[name] = len(self.brokers)
                self.brokers.append(name)
        remap = np.array([self._code[x] for x in names] + [-1], _I)
        candidate = a.has_until & (a.until > a.end)
        rows = self._needed(a.end, a.until, candidate, watermark)
        part = {
            "producer": a.producer[rows],
            "broker": remap[a.broker[rows]],
            "end": a.end[rows],
            "start": a.start[rows],
            "seq": a.seq[rows],
            "attempt": a.attempt[rows],
            "until": a.until[rows],
            "candidate": candidate[rows],
        }
        self._rows = {k: np.concatenate([v, np.asarray(part[k], v.dtype)]) for k, v in self._rows.items()}
        self._settle(watermark)

    def _needed(self, end: np.ndarray, until: np.ndarray, candidate: np.ndarray, w: int) -> np.ndarray:
        """The rows of a part :meth:`_settle` may read at the watermark ``w``: those that end at or after
        it, the candidates, and those that end near a candidate that may settle now (its next attempt, as
        :meth:`_settle` looks for it); the others settle with no piece."""
        kept = self._rows
        old = kept["candidate"] & (kept["end"] < w)
        new = candidate & (end < w)
        needed = (end >= w) | candidate
        if old.any() or new.any():
            lo = np.concatenate([kept["end"][old], end[new]])
            needed |= _near(end, lo, np.concatenate([kept["until"][old], until[new]]))
        return np.flatnonzero(needed)

    @property
    def kept(self) -> int:
        """Attempts kept (not settled yet)."""
        return len(self._rows["end"])

    def _settle(self, w: int) -> None:
        """Settle what the watermark ``w`` lets: the attempts that end before it, each candidate's piece
        from its pair's next attempt (found among the rows near the candidates only: no sort of the rest)."""
        r = self._rows
        end = r["end"]
        settled = end < w  # a candidate's own rule below; the others: whether they end before w
        ending = np.flatnonzero(r["candidate"] & settled)
        pieces = [np.zeros(0, _I)] * 4  # producer, broker, start, stop
        if len(ending):
            near = np.flatnonzero(_near(end, end[ending], r["until"][ending]))
            s = {k: v[near] for k, v in r.items()}
            pair = Groups([s["producer"], s["broker"]]).index
            order = _order_by_end(pair, s["end"], s["start"], s["seq"], s["attempt"])
            s = {k: v[order] for k, v in s.items()}
            pair = pair[order]
            s_end, until, candidate = s["end"], s["until"], s["candidate"]
            has_next = np.append(pair[1:] == pair[:-1], False)
            next_end = np.append(s_end[1:], 0)
            stop = np.where(has_next, np.minimum(until, next_end), until)
            done = (s_end < w) & (~candidate | (until <= w) | (has_next & (next_end < w)))
            piece = done & candidate & (stop > s_end)
            pieces = [s["producer"][piece], s["broker"][piece], s_end[piece], stop[piece]]
            settled[near[order]] = done
        self._join(*pieces, w == _NO_MORE)
        self._rows = {k: v[~settled] for k, v in r.items()}
        self.watermark = max(self.watermark, w)

    def _join(
        self, producer: np.ndarray, broker: np.ndarray, start: np.ndarray, stop: np.ndarray, last: bool
    ) -> None:
        """Settled pieces (in order within each pair) joined to the open intervals."""
        o = self._open
        p = np.concatenate([o["producer"], producer])
        b = np.concatenate([o["broker"], broker])
        s = np.concatenate([o["start"], start])
        top = np.concatenate([o["top"], stop])  # an open interval: its end so far
        end = np.concatenate([o["last"], stop])  # and its last piece's end
        order = np.lexsort((end, s, b, p))
        p, b, s, top, end = p[order], b[order], s[order], top[order], end[order]
        if not len(p):
            return
        new = np.ones(len(p), bool)
        new[1:] = (p[1:] != p[:-1]) | (b[1:] != b[:-1]) | (end[:-1] < s[1:])
        first = np.flatnonzero(new)
        ends = np.maximum.reduceat(top, first)
        lasts = end[np.append(first[1:], len(p)) - 1]
        ip, ib, istart = p[first], b[first], s[first]
        still = np.zeros(len(first), bool)  # each pair's last interval stays open until no more come
        if not last:
            still = np.append((ip[1:] != ip[:-1]) | (ib[1:] != ib[:-1]), True)
        self._closed.append(
            {"producer": ip[~still], "broker": ib[~still], "start": istart[~still], "end": ends[~still]}
        )
        self._open = {
            "producer": ip[still],
            "broker": ib[still],
            "start": istart[still],
            "top": ends[still],
            "last": lasts[still],
        }

    def result(self) -> pa.Table:
        """The intervals of every attempt added (each pair's in start order, pairs by producer and broker
        name)."""
        if len(self._rows["end"]) or len(self._open["producer"]):
            self._settle(_NO_MORE)
        out_schema = AGGREGATE_TABLES["intervals"]
        if not self._closed:
            return out_schema.empty_table()
        c = {k: np.concatenate([x[k] for x in self._closed]) for k in ("producer", "broker", "start", "end")}
        if not len(c["producer"]):
            return out_schema.empty_table()
        rank = np.argsort(np.argsort(np.array(self.brokers, object)))  # fold code -> rank of its name
        order = np.lexsort((c["start"], rank[c["broker"]], c["producer"]))
        names = pa.array(self.brokers, pa.string())
        return pa.table(
            {
                "producer": pa.array(c["producer"][order].astype(np.int32)),
                "broker": names.take(pa.array(c["broker"][order])),
                "start_ms": pa.array(c["start"][order], I64),
                "end_ms": pa.array(c["end"][order], I64),
            },
            schema=out_schema,
        )


def _near(end: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Whether each ``end`` falls in one of the spans ``[lo, hi]``: a candidate's next attempt (in its
    pair's order by end) ends within the candidate's ``[end, until]``, or does not cut its piece, so
    only those rows (and every row between, which ends there too) are needed to find it."""
    by_lo = np.argsort(lo, kind="stable")
    starts, reach = lo[by_lo], np.maximum.accumulate(hi[by_lo])
    at = np.searchsorted(starts, end, "right") - 1
    return (at >= 0) & (end <= reach[np.maximum(at, 0)])


def _order_by_end(
    pair: np.ndarray, end: np.ndarray, start: np.ndarray, seq: np.ndarray, attempt: np.ndarray
) -> np.ndarray:
    """The row order of (pair, end, start, seq, attempt): one sort on (pair, end), then the few rows
    whose (pair, end) repeats ordered by the rest."""
    order = sort_order(pair, end)
    key_pair, key_end = pair[order], end[order]
    tie = np.zeros(len(order), bool)
    same = (key_pair[1:] == key_pair[:-1]) & (key_end[1:] == key_end[:-1])
    tie[1:] |= same
    tie[:-1] |= same
    if tie.any():
        at = np.flatnonzero(tie)  # whole runs of ties, in (pair, end) order
        rows = order[at]
        order[at] = rows[np.lexsort((attempt[rows], seq[rows], start[rows], end[rows], pair[rows]))]
    return order
