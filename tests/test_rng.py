"""The one generator (rocketsim.rng): counter-based SplitMix64 draws, scalar and vectorised, and their
compiled twins in rocketsim.engine.compiled, bit for bit."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketsim import rng
from rocketsim.broker import latency as bm
from rocketsim.engine import compiled
from rocketsim.javaint import INT_MAX, INT_MIN


def test_known_values_never_change() -> None:
    # every table of every run depends on these: a change here changes all results
    assert rng.mix64(0) == 0 and rng.mix64(1) == 0x5692161D100B05E5
    key = rng.draw_key(7, 3, 1000, 2)
    assert key == 0x1F17718116499D9F
    assert rng.uniform(key, 4) == 0.9406751490792075
    assert rng.derive_key(42, 3, 1, "sendWhichQueue:TopicTest", 2) == 0x79B443DADB647ADE
    source = rng.SplitMixIntSource(rng.derive_key(9, "whichItemWorst"))
    assert [source.next_int() for _ in range(3)] == [-1367119763, 642761170, 1768948391]
    assert source.next_int_bound(INT_MAX) == 694628333


@given(
    st.integers(0, 2**40),
    st.integers(0, 10_000),
    st.integers(0, 2**40),
    st.integers(0, 16),
    st.integers(0, 5),
)
def test_vectorised_draws_equal_scalar_draws(
    seed: int, producer: int, seq: int, attempt: int, stream: int
) -> None:
    keys = rng.draw_keys(seed, producer, np.array([seq], np.int64), np.array([attempt], np.int64))
    assert int(keys[0]) == rng.draw_key(seed, producer, seq, attempt)
    assert rng.uniforms(keys, stream)[0] == rng.uniform(int(keys[0]), stream)


def test_draws_are_uniform_and_independent_of_order() -> None:
    keys = rng.draw_keys(1, 2, np.arange(200_000), np.zeros(200_000, np.int64))
    u = rng.uniforms(keys, 0)
    assert u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.005
    hist, _ = np.histogram(u, bins=10, range=(0, 1))
    assert hist.min() > 19_000
    shuffled = np.random.default_rng(0).permutation(200_000)
    keys2 = rng.draw_keys(1, 2, shuffled, np.zeros(200_000, np.int64))
    assert np.array_equal(rng.uniforms(keys2, 0), u[shuffled])


def test_seeded_source_is_deterministic_and_keyed() -> None:
    a = rng.SplitMixIntSource.for_index(42, producer=3, thread=1, index_name="sendWhichQueue", generation=2)
    b = rng.SplitMixIntSource.for_index(42, producer=3, thread=1, index_name="sendWhichQueue", generation=2)
    other = rng.SplitMixIntSource.for_index(
        42, producer=3, thread=2, index_name="sendWhichQueue", generation=2
    )
    draws = [a.next_int() for _ in range(100)]
    assert draws == [b.next_int() for _ in range(100)]
    assert draws != [other.next_int() for _ in range(100)]
    assert all(INT_MIN <= d <= INT_MAX for d in draws)
    assert any(d < 0 for d in draws) and any(d > 0 for d in draws)
    bounded = [a.next_int_bound(INT_MAX) for _ in range(1000)] + [a.next_int_bound(3) for _ in range(300)]
    assert all(0 <= v < INT_MAX for v in bounded)
    assert set(bounded[1000:]) == {0, 1, 2}


def test_string_labels_hash_stably() -> None:
    assert rng.part_bits("") == rng.FNV_OFFSET
    assert rng.part_bits("a") == ((rng.FNV_OFFSET ^ ord("a")) * rng.FNV_PRIME) & rng.M64
    assert rng.part_bits(-1) == rng.M64  # an int label is its 64 bits


# ---- the compiled twins -------------------------------------------------------------------------------


@settings(deadline=None)  # the first call loads the compiled code
@given(st.integers(0, 2**64 - 1))
def test_compiled_mix64_is_mix64(z: int) -> None:
    assert int(compiled.mix64(np.uint64(z))) == rng.mix64(z)


def test_compiled_draw_keys_match_the_reference() -> None:
    seed, producer = 123456789, 5
    producer_key = np.uint64(rng.producer_key(seed, producer))
    for seq, attempt in ((0, 0), (1, 2), (10**9, 7), (2**40 + 3, 1)):
        key = np.uint64(compiled.attempt_key(producer_key, seq, attempt))  # keep it uint64, not a Python int
        assert int(key) == rng.draw_key(seed, producer, seq, attempt)
        for stream in range(bm.N_STREAMS):
            assert compiled.uniform(key, stream) == rng.uniform(int(key), stream)
    base = np.uint64(rng.derive_key(seed, producer))
    bits = np.uint64(rng.part_bits("sendWhichQueue:TopicTest"))
    for thread, generation in ((0, 0), (3, 2), (17, 11)):
        key = compiled.index_key(base, thread, bits, generation)
        src = rng.SplitMixIntSource.for_index(seed, producer, thread, "sendWhichQueue:TopicTest", generation)
        assert int(key) == src.key
