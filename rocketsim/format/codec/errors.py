"""What the codec raises where the Java client throws (:class:`JavaEncodeError`, :class:`JavaDecodeError`,
naming the Java exception), the decoders' two modes, and the checks of Java's buffer sizes and integer
ranges that the encoders share.
"""

from __future__ import annotations

from typing import Literal

from rocketsim.errors import DecodeError, EncodeError

# a decoder's mode: "strict" reads only what the encoder writes, "java" what upstream's decoder reads
Mode = Literal["strict", "java"]


class JavaEncodeError(EncodeError):
    """Upstream's encoder throws for this input; ``java_exception``/``java_message`` say what it throws."""

    def __init__(self, message: str, java_exception: str, java_message: str | None = None) -> None:
        super().__init__(message)
        self.java_exception = java_exception
        self.java_message = java_message


class JavaDecodeError(DecodeError):
    """Upstream's decoder throws (or returns null) for these bytes; names the Java exception."""

    def __init__(self, message: str, java_exception: str, java_message: str | None = None) -> None:
        super().__init__(message)
        self.java_exception = java_exception
        self.java_message = java_message


# the Java exceptions the codec names (JavaEncodeError / JavaDecodeError.java_exception)
BUFFER_UNDERFLOW = "java.nio.BufferUnderflowException"
BUFFER_OVERFLOW = "java.nio.BufferOverflowException"
NEGATIVE_ARRAY = "java.lang.NegativeArraySizeException"
ILLEGAL_ARGUMENT = "java.lang.IllegalArgumentException"
NULL_POINTER = "java.lang.NullPointerException"


def java_allocate(capacity: int, needed: int, what: str) -> None:
    """``ByteBuffer.allocate(capacity)`` then writes of ``needed`` bytes: raise as Java would."""
    if capacity < 0:
        msg = f"capacity < 0: ({capacity} < 0)"
        raise JavaEncodeError(f"{what}: Java computes a negative buffer size ({msg})", ILLEGAL_ARGUMENT, msg)
    if needed > capacity:
        raise JavaEncodeError(
            f"{what}: {needed} bytes do not fit the {capacity}-byte buffer Java allocates", BUFFER_OVERFLOW
        )


def check_java_range(name: str, value: int, lo: int, hi: int, java_type: str) -> None:
    """An ``EncodeError`` unless ``value`` fits the Java type (``lo..hi``) a field is written as."""
    if not lo <= value <= hi:
        raise EncodeError(f"{name} must fit a Java {java_type}, got {value}")
