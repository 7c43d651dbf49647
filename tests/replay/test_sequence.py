"""SequenceReplay: contiguous windows, uniform coverage, wrap-around, save/load; StreamReplay:
streams written at their own pace, sampled together, cut, archived together."""

import numpy as np
import pytest

from tfagents_vtrace.replay.sequence import SequenceReplay, StreamReplay
from tfagents_vtrace.replay.storage import ReplayCorruptError

SPECS = {"t": ((), np.int64), "obs": ((2,), np.float32), "b": ((), np.int32)}


def _fill(replay, steps, num_envs):
    for t in range(steps):
        replay.add(
            {
                "t": np.full(num_envs, t) * 10 + np.arange(num_envs),
                "obs": np.full((num_envs, 2), float(t), np.float32),
                "b": np.full(num_envs, t % 2, np.int32),
            }
        )


def test_windows_are_contiguous_after_wraparound(rng):
    replay = SequenceReplay(SPECS, num_envs=3, capacity=30)  # 10 per env
    _fill(replay, 23, 3)  # wrapped: steps 13..22 kept
    assert replay.num_steps == 30
    out = replay.sample(16, 4, rng, num=5)
    assert out["t"].shape == (5, 4, 16) and out["obs"].shape == (5, 4, 16, 2)
    steps, env = out["t"] // 10, out["t"] % 10
    np.testing.assert_array_equal(np.diff(steps, axis=1), 1)  # consecutive in time
    np.testing.assert_array_equal(np.diff(env, axis=1), 0)  # one environment per window
    assert steps.min() >= 13 and steps.max() <= 22
    np.testing.assert_array_equal(out["obs"][..., 0], steps)


def test_sampling_is_uniform_over_windows(rng):
    replay = SequenceReplay(SPECS, num_envs=2, capacity=16)
    _fill(replay, 8, 2)  # 8 per env -> 6 windows of 3 per env, 12 in all
    out = replay.sample(12_000, 3, rng)
    starts = out["t"][0, 0]
    counts = np.unique(starts, return_counts=True)[1]
    assert len(counts) == 12
    assert np.all(np.abs(counts / 12_000 - 1 / 12) < 0.015)


def test_bad_inputs_raise():
    replay = SequenceReplay(SPECS, num_envs=2, capacity=8)
    with pytest.raises(ValueError, match="obs"):
        replay.add({"t": np.zeros(2), "obs": np.zeros((3, 2)), "b": np.zeros(2)})
    with pytest.raises(ValueError, match="length"):
        replay.sample(4, 2, np.random.default_rng(0))


def test_save_load_roundtrip_and_corruption(tmp_path, rng):
    replay = SequenceReplay(SPECS, num_envs=2, capacity=12)
    _fill(replay, 9, 2)  # wrapped (6 per env)
    path = str(tmp_path / "replay-9.npz")
    replay.save(path)
    other = SequenceReplay(SPECS, num_envs=2, capacity=12)
    other.load(path)
    assert other.num_steps == replay.num_steps and other.added == 9
    a = replay.sample(50, 3, np.random.default_rng(1))
    b = other.sample(50, 3, np.random.default_rng(1))
    # Same stored windows (oldest-first order is preserved), so the same draws agree.
    for key in SPECS:
        np.testing.assert_array_equal(a[key], b[key])
    other.add({"t": np.array([90, 91]), "obs": np.zeros((2, 2)), "b": np.zeros(2)})
    assert other.sample(200, 2, rng)["t"].max() == 91
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(path, "wb").write(bytes(data))
    with pytest.raises(ReplayCorruptError):
        other.load(path)


def test_streams_fill_at_their_own_pace_sample_uniformly_cut_and_save(rng, tmp_path):
    specs = {**SPECS, "is_last": ((), bool)}
    replay = StreamReplay(specs, num_streams=2, num_envs=2, capacity=40)  # 10 per column
    for stream, steps in ((0, 13), (1, 3)):  # stream 0 wrapped (steps 3..12 kept)
        for t in range(steps):
            step = {"t": np.full(2, 100 * stream + t), "obs": np.zeros((2, 2))}
            replay.add({**step, "b": np.zeros(2, np.int32), "is_last": np.zeros(2, bool)}, stream)
    assert len(replay) == 26 and replay.can_sample(3) and not replay.can_sample(11)
    out = replay.sample(50, 3, rng, num=4)
    assert out["t"].shape == (4, 3, 50)
    np.testing.assert_array_equal(np.diff(out["t"], axis=1), 1)  # contiguous, one stream
    from_1 = np.mean(out["t"][:, 0] >= 100)  # 2 x 1 of the 2 x 8 + 2 x 1 windows
    assert 0.02 < from_1 < 0.3 and out["t"].min() >= 3
    replay.cut(1)
    assert (
        replay.streams[1].data["is_last"][:, 2].all()
        and not replay.streams[0].data["is_last"].any()
    )
    path = str(tmp_path / "replay-1.npz")
    replay.save(path)
    other = StreamReplay(specs, num_streams=2, num_envs=2, capacity=40)
    other.load(path)
    assert len(other) == 26 and other.streams[0].added == 13
    np.testing.assert_array_equal(other.sample(8, 3, np.random.default_rng(1))["t"],
                                  replay.sample(8, 3, np.random.default_rng(1))["t"])  # fmt: skip
    with pytest.raises(ValueError, match="holds 2 replay streams, this run 3"):
        StreamReplay(specs, num_streams=3, num_envs=2, capacity=60).load(path)
