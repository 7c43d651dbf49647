"""Frames shipped once (``runtime/acting/frames.py``): ``unpack(pack(x))`` is ``x`` bit for
bit, and the packed form holds the frames a slow per-column count says it must.

Ground truth is built step by step in plain numpy: each column's stack is slid by one new
frame per step, except where the column resets (its stack rebuilt the way some environment
might: copies of the first frame, zeros and the frame, or anything random) or restarts.
"""

import importlib.util

import numpy as np
import pytest

from tfagents_vtrace.runtime.acting.frames import PackedFrames, pack, unpack, unpack_unroll


def stacked_columns(rng, steps, b, frame, s, breaks):
    """``[steps, b, *frame, s]`` uint8: each column's stack slides one new random frame
    per step, and is rebuilt at ``t = 0`` and at the ``(t, column)`` pairs of ``breaks``
    (a fresh stack of one of three kinds)."""
    x = np.zeros((steps, b, *frame, s), np.uint8)
    for col in range(b):
        stack = None
        for t in range(steps):
            new = rng.integers(0, 256, frame, np.uint8)
            if stack is None or (t, col) in breaks:
                kind = rng.integers(3)
                if kind == 0:  # the first frame repeated (ALE's vector env)
                    stack = np.stack([new] * s, -1)
                elif kind == 1:  # zeros, then the frame (gymnasium's FrameStackObservation)
                    stack = np.concatenate(
                        [np.zeros((*frame, s - 1), np.uint8), new[..., None]], -1
                    )
                else:  # any stack at all (a restarted environment, a shuffled one)
                    stack = rng.integers(0, 256, (*frame, s), np.uint8)
            else:
                stack = np.concatenate([stack[..., 1:], new[..., None]], -1)
            x[t, col] = stack
    return x


def frames_needed(x):
    """Per column, slowly: ``s`` frames at ``t = 0`` and where the stack did not slide, one
    where it did."""
    steps, b, s = x.shape[0], x.shape[1], x.shape[-1]
    counts = []
    for col in range(b):
        n = s
        for t in range(1, steps):
            n += 1 if np.array_equal(x[t, col, ..., :-1], x[t - 1, col, ..., 1:]) else s
        counts.append(n)
    return counts


@pytest.mark.parametrize(
    "s, frame, steps, b",
    [(2, (5, 6), 9, 3), (4, (7, 7), 17, 5), (3, (4,), 6, 2), (4, (3, 5), 1, 2)],
)
def test_round_trip_is_exact(s, frame, steps, b):
    rng = np.random.default_rng(s * 100 + steps)
    # columns break at different steps; column 0 never does, the last one at t = 1
    breaks = {(1, b - 1)} | {(int(t), int(c)) for t, c in rng.integers(1, max(steps, 2), (3, 2))
                             if 0 < c < b}  # fmt: skip
    x = stacked_columns(rng, steps, b, frame, s, breaks)
    packed = pack(x)
    assert isinstance(packed, PackedFrames)
    needed = frames_needed(x)
    assert packed.frames.shape == (max(needed), b, *frame)
    assert packed.index.shape == (steps, b) and packed.index.dtype == np.int32
    np.testing.assert_array_equal(packed.index[-1], np.array(needed) - 1)
    out = unpack(packed)
    assert out.dtype == np.uint8 and out.shape == x.shape
    np.testing.assert_array_equal(out, x)


def test_a_frame_repeated_across_a_reset_still_round_trips():
    """A new episode whose stack happens to equal the slid one is stored as a slide: the
    stack is the same either way."""
    rng = np.random.default_rng(1)
    x = stacked_columns(rng, 8, 2, (3, 3), 4, set())
    x[5, 1] = np.concatenate([x[4, 1, ..., 1:], x[5, 1, ..., -1:]], -1)
    np.testing.assert_array_equal(unpack(pack(x)), x)


def test_more_breaks_than_slides_ships_as_is():
    rng = np.random.default_rng(2)
    every = {(t, c) for t in range(1, 10) for c in range(3) if t % 2 == 0 or c == 0}
    x = stacked_columns(rng, 10, 3, (4, 4), 4, every)
    assert pack(x) is x  # 15 of 27 stacks do not slide
    noise = rng.integers(0, 256, (6, 2, 4, 4, 4), np.uint8)
    assert pack(noise) is noise


@pytest.mark.parametrize(
    "observation",
    [
        np.zeros((5, 2, 4, 4, 4), np.float32),  # not uint8
        np.zeros((5, 2, 4, 4, 1), np.uint8),  # one frame per stack
        np.zeros((5, 2), np.uint8),  # no frame axis
        {"image": np.zeros((5, 2, 4, 4, 4), np.uint8)},  # a Dict observation
    ],
)
def test_other_observations_ship_as_they_are(observation):
    assert pack(observation) is observation


def test_unroll_helpers_pack_only_the_observation():
    rng = np.random.default_rng(3)
    x = stacked_columns(rng, 6, 2, (3, 3), 4, {(3, 1)})
    unroll = {"observation": pack(x), "reward": np.ones((5, 2), np.float32)}
    plain = unpack_unroll(unroll)
    np.testing.assert_array_equal(plain["observation"], x)
    assert plain["reward"] is unroll["reward"]
    assert unpack_unroll(plain) is plain


def test_bad_packed_input_is_refused():
    x = stacked_columns(np.random.default_rng(4), 5, 2, (3, 3), 4, set())
    packed = pack(x)
    with pytest.raises(TypeError, match="expected PackedFrames"):
        unpack(x)
    with pytest.raises(ValueError, match="index must lie in"):
        unpack(PackedFrames(packed.frames, packed.index + 100, 4))
    with pytest.raises(ValueError, match="index must lie in"):
        unpack(PackedFrames(packed.frames, packed.index - 3, 4))
    with pytest.raises(ValueError, match=r"index \[T\+1, B\]"):
        unpack(PackedFrames(packed.frames, packed.index[:, :1], 4))


@pytest.mark.skipif(importlib.util.find_spec("ale_py") is None, reason="needs ale_py")
def test_an_atari_unroll_round_trips():
    from tfagents_vtrace.networks.config import NetworkConfig
    from tfagents_vtrace.runtime.acting.actor import Actor, ActorSpec

    spec = ActorSpec("ALE/Pong-v5", NetworkConfig(torso="small_atari_cnn"), num_envs=2,
                     unroll_length=40, policy_impl="numpy")  # fmt: skip
    actor = Actor(spec)
    try:
        unroll, _ = actor.unroll()
    finally:
        actor.close()
    x = unroll["observation"]
    assert x.shape == (41, 2, 84, 84, 4)
    packed = pack(x)
    assert isinstance(packed, PackedFrames)
    assert packed.frames.shape[0] == max(frames_needed(x))
    assert x.nbytes / packed.nbytes > 3.5  # 41 steps of 4 frames in about 44
    np.testing.assert_array_equal(unpack(packed), x)
