"""The one random generator of rocketsim: SplitMix64, counter-based and keyed, never stateful across calls.

Every draw is ``mix64`` (SplitMix64's finaliser, Stafford variant 13) of a key built from labels, so any
draw can be made alone, in any order, on any worker, and gives the same value on every machine:

* attempt draws, keyed by ``(seed, producer, seq, attempt)`` then a stream number: :func:`draw_key` /
  :func:`uniform` and their vectorised forms :func:`draw_keys` / :func:`uniforms` (the broker model, the
  workload, the transaction check-backs; each salts the seed with its own constant);
* index draws, keyed by labels that may be strings (``(seed, producer, thread, "sendWhichQueue:T", n)``):
  :func:`derive_key` and :class:`SplitMixIntSource`, the ``java.util.Random`` stand-in of
  ``ThreadLocalIndex`` (``nextInt()``, ``nextInt(bound)``).

The compiled engine has numba twins of ``mix64``, ``uniform``, the attempt key and the index key
(:mod:`rocketsim.engine.compiled`); ``tests/test_rng.py`` checks that they agree bit for bit.
"""

from __future__ import annotations

import numpy as np

from rocketsim.javaint import int32

M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15  # the golden-ratio increment of SplitMix64
MIX_C1 = 0xBF58476D1CE4E5B9
MIX_C2 = 0x94D049BB133111EB
SEED_SALT = 0x632BE59BD9B4E019  # added to the seed's product before the first mix of an attempt key
FNV_OFFSET = 0xCBF29CE484222325  # FNV-1a 64 over UTF-8: a string label's stable bits
FNV_PRIME = 0x100000001B3
INV_2_53 = 1.0 / (1 << 53)  # a 53-bit draw as a float in [0, 1)


def mix64(z: int) -> int:
    """SplitMix64's finaliser (Stafford variant 13)."""
    z &= M64
    z = ((z ^ (z >> 30)) * MIX_C1) & M64
    z = ((z ^ (z >> 27)) * MIX_C2) & M64
    return z ^ (z >> 31)


# ---- attempt draws: (seed, producer, seq, attempt) -> stream -------------------------------------------


def producer_key(seed: int, producer: int) -> int:
    """The first two steps of :func:`draw_key` (what the compiled engine takes per producer)."""
    z = mix64((seed * GAMMA + SEED_SALT) & M64)
    return mix64((z + producer * GAMMA + 1) & M64)


def attempt_key(producer_key_: int, seq: int, attempt: int) -> int:
    """The last two steps of :func:`draw_key`, from :func:`producer_key`'s value."""
    z = mix64((producer_key_ + seq * GAMMA + 2) & M64)
    return mix64((z + attempt * GAMMA + 3) & M64)


def draw_key(seed: int, producer: int, seq: int, attempt: int) -> int:
    """A 64-bit key for one attempt; streams are derived from it."""
    return attempt_key(producer_key(seed, producer), seq, attempt)


def uniform(key: int, stream: int) -> float:
    """A uniform in [0, 1) for one stream of one attempt key (53 bits)."""
    return (mix64((key + (stream + 1) * GAMMA) & M64) >> 11) * INV_2_53


def mix64_array(z: np.ndarray) -> np.ndarray:
    """:func:`mix64` over a uint64 array (uint64 arithmetic wraps exactly like the masked ints)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(MIX_C1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(MIX_C2)
    return z ^ (z >> np.uint64(31))


def draw_keys(seed: int, producer: int, seqs: np.ndarray, attempts: np.ndarray) -> np.ndarray:
    """Vectorised :func:`draw_key`."""
    g = np.uint64(GAMMA)
    with np.errstate(over="ignore"):
        z = np.uint64(producer_key(seed, producer)) + np.zeros(1, np.uint64)
        z = mix64_array(z + seqs.astype(np.uint64) * g + np.uint64(2))
        return mix64_array(z + attempts.astype(np.uint64) * g + np.uint64(3))


def uniforms(keys: np.ndarray, stream: int) -> np.ndarray:
    """Vectorised :func:`uniform`."""
    with np.errstate(over="ignore"):
        z = mix64_array(keys + np.uint64((stream + 1) * GAMMA & M64))
    return (z >> np.uint64(11)).astype(np.float64) * INV_2_53


# ---- index draws: keys from labels, the ThreadLocalIndex source ---------------------------------------


def part_bits(part: int | str) -> int:
    """A label's 64 bits: an int as is (masked), a string by FNV-1a over UTF-8 (stable, unlike ``hash()``)."""
    if isinstance(part, str):
        h = FNV_OFFSET
        for byte in part.encode("utf-8"):
            h = ((h ^ byte) * FNV_PRIME) & M64
        return h
    return part & M64


def derive_key(seed: int, *parts: int | str) -> int:
    """A 64-bit stream key from a seed and labels, e.g. ``(seed, producer, thread, "sendWhichQueue")``."""
    k = mix64(part_bits(seed) + GAMMA)
    for part in parts:
        k = mix64((k ^ part_bits(part)) + GAMMA)
    return k


class SplitMixIntSource:
    """Counter-based ``java.util.Random`` draws: draw ``i`` of stream ``key`` is ``mix64(key + i * GAMMA)``.

    Deterministic and independent of any other stream or of call order elsewhere; the compiled engine
    reproduces it from ``(key, counter)`` alone.
    """

    def __init__(self, key: int) -> None:
        self.key = key & M64
        self.counter = 0

    def _next64(self) -> int:
        self.counter += 1
        return mix64(self.key + self.counter * GAMMA)

    def next_int(self) -> int:
        """``nextInt()``: the high 32 bits as a Java int."""
        return int32(self._next64() >> 32)

    def next_int_bound(self, bound: int) -> int:
        """``nextInt(bound)``: multiply-shift of the high 32 bits (uniform enough for 2**31 bounds)."""
        if bound <= 0:
            raise ValueError(f"bound must be positive, got {bound}")
        return ((self._next64() >> 32) * bound) >> 32

    @classmethod
    def for_index(
        cls, seed: int, producer: int, thread: int, index_name: str, generation: int = 0
    ) -> SplitMixIntSource:
        """The stream of one index of one producer thread (``generation``: the N-th TopicPublishInfo)."""
        return cls(derive_key(seed, producer, thread, index_name, generation))
