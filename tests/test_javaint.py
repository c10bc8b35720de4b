"""Java int arithmetic (rocketsim.javaint), and its compiled twins in rocketsim.engine.compiled."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketsim.engine import compiled
from rocketsim.javaint import (
    INT_MAX,
    INT_MIN,
    chm_spread,
    int8,
    int16,
    int32,
    java_abs,
    java_rem,
    java_string_hash,
)

java_ints = st.integers(INT_MIN, INT_MAX)


def test_overflow_wraps_like_java() -> None:
    assert int32(INT_MAX + 1) == INT_MIN and int32(INT_MIN - 1) == INT_MAX
    assert int32(2**32 + 5) == 5
    assert int16(0x8000) == -0x8000 and int16(-1) == -1
    assert int8(0x80) == -0x80 and int8(0x17F) == 0x7F


def test_math_abs_and_remainder() -> None:
    assert java_abs(INT_MIN) == INT_MIN  # Math.abs(Integer.MIN_VALUE) stays negative
    assert java_abs(-5) == 5 and java_abs(5) == 5
    assert java_rem(-7, 3) == -1 and java_rem(7, -3) == 1 and java_rem(-7, -3) == -1


def test_string_hash_code() -> None:
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == INT_MIN  # the well-known Java overflow example
    assert java_string_hash("KEYS") == 2303476 and java_string_hash("") == 0 and java_string_hash(None) == 0
    assert java_string_hash("\U0001f600") == 31 * 0xD83D + 0xDE00  # over UTF-16 units
    assert java_string_hash("héllo") == int32(sum(ord(c) * 31 ** (4 - i) for i, c in enumerate("héllo")))


def test_concurrent_hash_map_spread() -> None:
    assert chm_spread(-1) == 0x7FFF0000  # (h ^ (h >>> 16)) & HASH_BITS
    assert chm_spread(0x12345678) == (0x12345678 ^ 0x1234) & 0x7FFFFFFF


@settings(deadline=None)  # the first call loads the compiled code
@given(st.integers(-(2**40), 2**40))
def test_compiled_int32_is_int32(x: int) -> None:
    assert compiled.int32(x) == int32(x)


@settings(deadline=None)
@given(java_ints)
def test_compiled_abs_is_java_abs(x: int) -> None:
    assert compiled.java_abs(x) == java_abs(x)


@settings(deadline=None)
@given(java_ints, java_ints.filter(lambda b: b != 0))
def test_compiled_rem_is_java_rem(a: int, b: int) -> None:
    assert compiled.java_rem(a, b) == java_rem(a, b)
