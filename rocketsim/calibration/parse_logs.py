"""The broker's own logs (4.x and 5.x alike, ``~/logs/rocketmqlogs/``): ``store.log`` and ``watermark.log``.

* ``store.log`` (``StoreStatsService.printTps``, every 60 s): ``[PAGECACHERT] TotalPut n,
  PutMessageDistributeTime [<=0ms]:n [0~10ms]:n ... [10s~]:n`` counts the store's put times (from before
  ``CommitLog.asyncPutMessage`` until its future completes: lock wait, append, sync flush / replica
  wait; not the send queue, not the network). The time is whole ms (``value <= 0`` -> ``[<=0ms]``,
  ``< 10`` -> ``[0~10ms]``, ...), so in true time the buckets are ``[0,1)``, ``[1,10)``, ``[10,50)``, ...
  ``[STORETPS] put_tps x ...`` is the put rate over the minute (empty in a broker's first minute);
  ``findPutMessageEntireTimePX 0.99=x ms`` the p99 / p99.9 of the last minute (without PAGECACHERT).
* ``watermark.log`` (``BrokerController.printWaterMark``, every 1 s): ``[WATERMARK] Send Queue Size: n
  SlowTimeMills: m``: the send queue's depth and its head's age.

Both patterns start with ``%d{yyy-MM-dd HH:mm:ss,GMT+8}``; other lines of the files are skipped, but a
line with one of these tags that does not read is an error.
"""

from __future__ import annotations

import math
import re
from datetime import datetime

from rocketsim.calibration.measurements import Binned, Measurements, Quantiles, QueueSeries, Throughput, View
from rocketsim.calibration.reading import fail, nonblank_lines, shown

# StoreStatsService.PUT_MESSAGE_ENTIRE_TIME_MAX_DESC (4.7.1, 4.9.4, 5.x alike) and each bucket's true
# [lo, hi) in ms (setPutMessageEntireTimeMax: value <= 0, < 10, < 50, ..., else the last)
STORE_BUCKETS = (
    ("<=0ms", 0.0, 1.0),
    ("0~10ms", 1.0, 10.0),
    ("10~50ms", 10.0, 50.0),
    ("50~100ms", 50.0, 100.0),
    ("100~200ms", 100.0, 200.0),
    ("200~500ms", 200.0, 500.0),
    ("500ms~1s", 500.0, 1000.0),
    ("1~2s", 1000.0, 2000.0),
    ("2~3s", 2000.0, 3000.0),
    ("3~4s", 3000.0, 4000.0),
    ("4~5s", 4000.0, 5000.0),
    ("5~10s", 5000.0, 10000.0),
    ("10s~", 10000.0, math.inf),
)
_STAMP = r"^(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)"
_PAGECACHERT = re.compile(
    r"\[PAGECACHERT\] TotalPut (\d+), PutMessageDistributeTime ((?:\[[^\]]+\]:\d+\s*)+)$"
)
_BUCKET = re.compile(r"\[([^\]]+)\]:(\d+)")
_STORETPS = re.compile(r"\[STORETPS\] put_tps ([0-9.Ee+-]*) get_found_tps")
_PX = re.compile(r"StoreStatsService - findPutMessageEntireTimePX (0\.99|0\.999)=([0-9.]+)ms")
_WATERMARK = re.compile(_STAMP + r" - \[WATERMARK\] (.+?) Queue Size: (\d+) SlowTimeMills: (-?\d+)$")
PAGECACHERT_EXPECTED = (
    "expected '[PAGECACHERT] TotalPut n, PutMessageDistributeTime [<=0ms]:n [0~10ms]:n ... [10s~]:n'"
)


def store_bins(counts: list[float], source: str, view: View, labels: dict[str, str], note: str) -> Binned:
    """The 13 StoreStatsService buckets as binned data."""
    lo = tuple(b[1] for b in STORE_BUCKETS)
    hi = tuple(b[2] for b in STORE_BUCKETS)
    return Binned(source, view, lo, hi, tuple(counts), labels, note)


def parse_store_log(text: str, source: str) -> Measurements:
    """The store's put-time buckets summed over every PAGECACHERT line, and its largest put rate."""
    sums = [0.0] * len(STORE_BUCKETS)
    windows, rates, px = 0, [], {}
    for i, line in nonblank_lines(text):
        if "[PAGECACHERT]" in line:
            for k, n in enumerate(_pagecachert(line, source, i)):
                sums[k] += n
            windows += 1
        elif "[STORETPS]" in line:
            m = _STORETPS.search(line)
            if m is None:
                fail(source, i, f"expected '[STORETPS] put_tps x get_found_tps ...', got {shown(line)}")
            if m[1]:  # empty in the broker's first minute (no sample 60 s old): no rate
                rates.append(float(m[1]))
        elif m := _PX.search(line):
            px.setdefault(float(m[1]), []).append(float(m[2]))
    out = Measurements()
    if windows:
        note = f"PAGECACHERT, {windows} one-minute window(s) summed"
        out += Measurements(binned=(store_bins(sums, source, View.STORE, {}, note),))
    elif px:
        out += _px_quantiles(px, source)
    if rates:
        out += Measurements(
            throughputs=(Throughput(source, max(rates), note="largest STORETPS put_tps (60 s)"),)
        )
    if not out:
        fail(source, 0, f"{PAGECACHERT_EXPECTED} or [STORETPS] lines, found none")
    return out


def _pagecachert(line: str, source: str, i: int) -> list[float]:
    m = _PAGECACHERT.search(line)
    if m is None:
        fail(source, i, f"{PAGECACHERT_EXPECTED}, got {shown(line)}")
    found = _BUCKET.findall(m[2])
    names = [name for name, _ in found]
    if names != [b[0] for b in STORE_BUCKETS]:
        fail(source, i, f"expected the 13 buckets [<=0ms] ... [10s~] in order, got {shown(' '.join(names))}")
    return [float(n) for _, n in found]


def _px_quantiles(px: dict[float, list[float]], source: str) -> Measurements:
    """The last minute's p99 / p99.9 as quantiles (median over the minutes, zeros dropped: < 1 ms)."""
    levels = sorted(level for level, vals in px.items() if sorted(vals)[len(vals) // 2] > 0)
    if not levels:
        return Measurements()
    values = tuple(sorted(px[lv])[len(px[lv]) // 2] for lv in levels)
    note = "findPutMessageEntireTimePX (median over minutes; linear inside 1 ms..1 s buckets)"
    return Measurements(quantiles=(Quantiles(source, View.STORE, tuple(levels), values, note=note),))


def parse_watermark_log(text: str, source: str) -> Measurements:
    """The send queue's depth and head age, once a second."""
    t0, times, depth, wait = None, [], [], []
    for i, line in nonblank_lines(text):
        if "[WATERMARK]" not in line:
            continue
        m = _WATERMARK.match(line)
        if m is None:
            fail(
                source,
                i,
                f"expected '<time> - [WATERMARK] Send Queue Size: n SlowTimeMills: m', got {shown(line, 40)}",
            )
        if m[2] != "Send":
            continue
        t = datetime.strptime(m["time"], "%Y-%m-%d %H:%M:%S").timestamp()
        t0 = t if t0 is None else t0
        times.append(t - t0)
        depth.append(float(m[3]))
        wait.append(float(m[4]))
    if not times:
        fail(source, 0, "expected '[WATERMARK] Send Queue Size: n SlowTimeMills: m' lines, found none")
    series = QueueSeries(source, tuple(times), tuple(depth), tuple(wait), note="[WATERMARK] Send, 1 s")
    return Measurements(queues=(series,))
