"""Java ``int`` arithmetic on Python ints: two's complement overflow, ``Math.abs``, ``%``, hash codes.

Upstream code that picks a queue or a hash bin does it with 32-bit ints (``ThreadLocalIndex``'s ``++index``,
``Math.abs(index++) % size``, ``ConcurrentHashMap.spread``); these helpers give the very same values.
The compiled engine has numba twins of ``int32``, ``java_abs`` and ``java_rem``
(:mod:`rocketsim.engine.compiled`); ``tests/test_javaint.py`` checks that they agree.
"""

from __future__ import annotations

INT_MIN = -(2**31)  # Integer.MIN_VALUE
INT_MAX = 2**31 - 1  # Integer.MAX_VALUE
LONG_MIN = -(2**63)  # Long.MIN_VALUE
LONG_MAX = 2**63 - 1  # Long.MAX_VALUE
POSITIVE_MASK = 0x7FFFFFFF  # ``index & 0x7FFFFFFF``: the non-negative part of an int
MASK32 = 0xFFFFFFFF


def int32(x: int) -> int:
    """Wrap to a Java ``int`` (two's complement overflow, as ``++index`` does)."""
    x &= MASK32
    return x - 0x100000000 if x & 0x80000000 else x


def int16(x: int) -> int:
    """A Java ``(short)`` cast."""
    return ((x + 0x8000) & 0xFFFF) - 0x8000


def int8(x: int) -> int:
    """A Java ``(byte)`` cast."""
    return ((x + 0x80) & 0xFF) - 0x80


def java_abs(x: int) -> int:
    """``Math.abs(int)``: ``Math.abs(Integer.MIN_VALUE)`` stays negative."""
    return x if x >= 0 or x == INT_MIN else -x


def java_rem(a: int, b: int) -> int:
    """Java ``a % b`` for ints: the sign follows the dividend."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def java_string_hash(text: str | None) -> int:
    """``String.hashCode()`` over UTF-16 code units, as a Java int (0 for null, as HashMap hashes it)."""
    if text is None:
        return 0
    h = 0
    if text.isascii():
        for ch in text.encode("ascii"):
            h = (31 * h + ch) & MASK32
    else:
        units = text.encode("utf-16-be", "surrogatepass")
        for k in range(0, len(units), 2):
            h = (31 * h + ((units[k] << 8) | units[k + 1])) & MASK32
    return int32(h)


def chm_spread(h: int) -> int:
    """``ConcurrentHashMap.spread``: ``(h ^ (h >>> 16)) & HASH_BITS``."""
    u = h & MASK32
    return (u ^ (u >> 16)) & POSITIVE_MASK
