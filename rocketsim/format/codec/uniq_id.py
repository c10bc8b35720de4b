"""The client's unique message id (``UNIQ_KEY``, ``MessageClientIDSetter``): its layout, the month
start it counts from as Java's ``Calendar`` computes it, a stateful setter with an injected clock, and
the readers of an id's parts.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

from rocketsim.errors import EncodeError
from rocketsim.format.codec.message_id import hex_bytes
from rocketsim.format.message import Message
from rocketsim.javaint import int16, int32

# createUniqID(), written as uppercase hex (32 chars for an IPv4 client, 56 for IPv6):
#   bytes  IP        4 or 16 bytes, computed once (a fake 4-byte IP if the lookup fails)
#   short  PID       process id cast to short
#   int    CLHASH    MessageClientIDSetter.class.getClassLoader().hashCode()
#   int    TIME      (int)(now - start of the current month in the JVM default time zone)
#   short  COUNTER   low 16 bits of a process-wide counter
UNIQ_FIXED = struct.Struct(
    ">h"  # PID
    "i"  # CLHASH
)
UNIQ_TAIL = struct.Struct(
    ">i"  # TIME
    "H"  # COUNTER (low 16 bits)
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def _zone(tz: tzinfo | str) -> tzinfo:
    return ZoneInfo(tz) if isinstance(tz, str) else tz


def _resolve_wall(wall: datetime, tz: tzinfo) -> int:
    """Epoch ms of a naive local wall time, resolved as Java's lenient ``Calendar`` does (checked against
    JDK 17 and 25): in a DST gap with the offset before the gap (fold=0), an ambiguous time as the later
    instant (fold=1)."""
    local = wall.replace(tzinfo=tz)
    later = local.replace(fold=1)
    before, after = local.utcoffset(), later.utcoffset()
    if before is not None and after is not None and before > after:
        local = later
    return (local - _EPOCH) // _MS


def _wall(ms: int, tz: tzinfo) -> datetime:
    return (_EPOCH + timedelta(milliseconds=ms)).astimezone(tz).replace(tzinfo=None)


def _add_months(wall: datetime, months: int) -> datetime:
    # Only used on the 1st of a month, so the day never needs pinning.
    index = wall.year * 12 + wall.month - 1 + months
    return wall.replace(year=index // 12, month=index % 12 + 1)


def month_start_ms(now_ms: int, tz: tzinfo | str) -> int:
    """Midnight of the 1st of ``now_ms``'s month in ``tz``, as Java's ``Calendar`` computes it."""
    zone = _zone(tz)
    wall = _wall(now_ms, zone)
    return _resolve_wall(datetime(wall.year, wall.month, 1), zone)


def _shift_month_start(start_ms: int, months: int, zone: tzinfo) -> int:
    # Calendar.add(MONTH, n) first re-derives the wall fields from the resolved instant: a month start that
    # fell in a DST gap (00:00 -> 01:00) keeps 01:00 in the other month.
    return _resolve_wall(_add_months(_wall(start_ms, zone), months), zone)


def next_month_start_ms(now_ms: int, tz: tzinfo | str) -> int:
    """``setStartTime``'s ``nextStartTime``: the month start moved one month on with ``Calendar.add``."""
    zone = _zone(tz)
    return _shift_month_start(month_start_ms(now_ms, zone), 1, zone)


def _previous_month_start(now_ms: int, zone: tzinfo) -> int:
    return _shift_month_start(month_start_ms(now_ms, zone), -1, zone)


def fake_ip(now_ms: int) -> bytes:
    """``createFakeIP()``: the low 4 bytes of ``currentTimeMillis()``."""
    return (now_ms & 0xFFFF_FFFF).to_bytes(4, "big")


def _uniq_time_field(now_ms: int, start_ms: int) -> int:
    diff = int32(now_ms - start_ms)
    if -1_000_000 < diff < 0:  # a small step back (NTP) is written as 0
        diff = 0
    return diff


def build_uniq_id(
    ip: bytes, pid: int, class_loader_hash: int, now_ms: int, start_time_ms: int, counter: int
) -> str:
    """One ``createUniqID()`` result from its inputs (see the layout above)."""
    if len(ip) not in (4, 16):
        raise EncodeError(f"ip must be 4 or 16 bytes, got {len(ip)}")
    raw = (
        bytes(ip)
        + UNIQ_FIXED.pack(int16(pid), int32(class_loader_hash))
        + UNIQ_TAIL.pack(_uniq_time_field(now_ms, start_time_ms), counter & 0xFFFF)
    )
    return raw.hex().upper()


class MessageClientIDSetter:
    """The stateful ``MessageClientIDSetter`` of one JVM, with its clock and default time zone injected.

    The fixed part (IP, pid, class-loader hash) and the month start are computed at construction, as the
    class initialiser does; ``create_uniq_id`` moves the month start only when the clock reaches the next
    month (a clock going backwards keeps the old start); ``counter`` is the ``AtomicInteger``.
    """

    def __init__(
        self,
        *,
        ip: bytes | None,
        pid: int,
        class_loader_hash: int,
        clock: Callable[[], int],
        tz: tzinfo | str = "UTC",
        counter: int = 0,
    ) -> None:
        self._clock = clock
        self._zone = _zone(tz)
        now = clock()
        self.ip = bytes(ip) if ip is not None else fake_ip(now)
        if len(self.ip) not in (4, 16):
            raise ValueError(f"ip must be 4 or 16 bytes, got {len(self.ip)}")
        self.pid = pid
        self.class_loader_hash = class_loader_hash
        self._fix_hex = (self.ip + UNIQ_FIXED.pack(int16(pid), int32(class_loader_hash))).hex().upper()
        self.counter = counter
        self.start_time_ms = 0
        self.next_start_time_ms = 0
        self._set_start_time(now)

    def _set_start_time(self, now_ms: int) -> None:
        self.start_time_ms = month_start_ms(now_ms, self._zone)
        self.next_start_time_ms = next_month_start_ms(now_ms, self._zone)

    def create_uniq_id(self) -> str:
        """``createUniqID()`` at the clock's current time."""
        now = self._clock()
        if now >= self.next_start_time_ms:
            self._set_start_time(now)
        count = self.counter
        self.counter = int32(count + 1)
        return (
            self._fix_hex
            + UNIQ_TAIL.pack(_uniq_time_field(now, self.start_time_ms), count & 0xFFFF).hex().upper()
        )

    def set_uniq_id(self, msg: Message) -> Message:
        """``setUniqID(msg)``: a copy with a new ``UNIQ_KEY`` unless the message has one."""
        if msg.uniq_key is not None:
            return msg
        return msg.with_uniq_key(self.create_uniq_id())


def _uniq_bytes(uniq_id: str) -> bytes:
    return hex_bytes(uniq_id, "uniq id", (32, 56))


def uniq_id_ip(uniq_id: str) -> bytes:
    """``getIPFromID``: the client address bytes (16 for a 56-char id, else 4)."""
    raw = _uniq_bytes(uniq_id)
    return raw[:16] if len(raw) == 28 else raw[:4]


def uniq_id_ip_str(uniq_id: str) -> str:
    """``getIPStrFromID``: dotted IPv4, or IPv6 as eight zero-padded lowercase groups."""
    ip = uniq_id_ip(uniq_id)
    if len(ip) == 4:
        return ".".join(str(b) for b in ip)
    return ":".join(ip[k : k + 2].hex() for k in range(0, 16, 2))


def uniq_id_pid(uniq_id: str) -> int:
    """``getPidFromID``: the 2-byte pid field as 0..65535."""
    raw = _uniq_bytes(uniq_id)
    return int.from_bytes(raw[len(raw) - 12 : len(raw) - 10], "big")


def uniq_id_nearly_time(uniq_id: str, reader_now_ms: int, tz: tzinfo | str) -> int:
    """``getNearlyTimeFromID``: the time field (unsigned) added to the reader's month start in ``tz``,
    one month earlier if that is not before the reader's now (so ids from another month come out shifted)."""
    raw = _uniq_bytes(uniq_id)
    span = int.from_bytes(raw[len(raw) - 6 : len(raw) - 2], "big")
    zone = _zone(tz)
    start = month_start_ms(reader_now_ms, zone)
    if start + span >= reader_now_ms:
        start = _previous_month_start(reader_now_ms, zone)
    return start + span
