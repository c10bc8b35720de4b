"""rocketsim/engine/trajectory_layout.py: the packed trajectories and their bytes come back whole, int32
where every value fits and int64 where one does not; the compiled answer reads either as the readable one
(the store's rules are upstream's, cited in broker_store.py and tests/test_engine_compiled_store.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_engine_compiled_store import STALL, params, random_work

from rocketsim.engine import compiled_store as cs
from rocketsim.engine import trajectory_layout as tl
from rocketsim.engine.iterative import Trajectories, Trajectory


def some_trajectories() -> list[Trajectory]:
    p = params(stalls=(STALL,))
    out = []
    for seed, rate in ((1, 0.35), (2, 0.05)):
        ms, count, size = random_work(np.random.default_rng(seed), 6000, rate)
        out.append(Trajectory.replay(p, ms, count, size))
    out.append(Trajectory(params()))  # a broker without arrivals
    return out


def test_packed_trajectories_survive_their_bytes() -> None:
    trajs = some_trajectories()
    packed = Trajectories.of(trajs)
    assert packed.tables.data.dtype == np.int32
    buf = np.frombuffer(bytearray(packed.to_bytes()), np.uint8)
    brokers, head, data = tl.from_buffer(buf)
    assert brokers == len(trajs)
    assert np.array_equal(head, packed.tables.head) and np.array_equal(data, packed.tables.data)
    assert np.shares_memory(data, buf)  # a view, not a copy
    for b, t in enumerate(trajs):
        back = tl.unpack(head, data, b)
        assert all(np.array_equal(back[k], v) for k, v in t.arrays().items())
        assert t.same(packed[b])


def test_a_file_of_another_layout_is_refused() -> None:
    raw = bytearray(Trajectories.of(some_trajectories()).to_bytes())
    raw[8] = 99  # the layout's version
    with pytest.raises(ValueError, match="not a trajectories file"):
        tl.from_buffer(np.frombuffer(raw, np.uint8))


def test_values_past_int32_keep_int64_and_the_same_answers() -> None:
    # a stall of 40 minutes: the writer is free ~2.4e9 us after the ms that started the append
    long = dataclasses.replace(STALL, start_us=1_000_000, end_us=9_000_000_000, stall_us=2_400_000_000)
    p = params(stalls=(long,))
    ms, count, size = random_work(np.random.default_rng(5), 4000, 0.2)
    t = Trajectory.replay(p, ms, count, size)
    assert max(v.max(initial=0) for v in t.arrays().values()) > np.iinfo(np.int32).max
    packed = Trajectories.of([t])
    assert packed.tables.data.dtype == np.int64
    for m in range(0, 4500, 7):
        ref = t.answer(m, 900)
        fate, answer_us, stored_us, depth, *_ = cs.trajectory_answer(packed.tables, 0, m, 900)
        assert (fate, answer_us, stored_us, depth) == (
            ref.fate,
            ref.answer_us,
            ref.stored_us,
            ref.queue_depth,
        )
