"""Frames shipped once (``runtime/acting/frames.py``): ``unpack(pack(x))`` is ``x`` bit for
bit, and the packed form holds the frames a slow per-column count says it must.

Ground truth is built step by step in plain numpy: each column's stack is slid by one new
frame per step, except where the column resets (its stack rebuilt the way some environment
might: copies of the first frame, zeros and the frame, or anything random) or restarts.
"""

import importlib.util

import gymnasium as gym
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


class StackedStrip(gym.Env):
    """A frame-stack environment: a dot walks a 6x6 strip (Discrete(2): left, right), each
    frame the strip with the dot and noise, the last 4 frames stacked (uint8 ``[6, 6, 4]``);
    an episode ends at the right edge (reward 1) or after 12 steps, and starts with its
    first frame repeated."""

    observation_space = gym.spaces.Box(0, 255, (6, 6, 4), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def _frame(self):
        frame = self.np_random.integers(0, 32, (6, 6), np.uint8)
        frame[:, self.x] = 255
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x, self.t = 0, 0
        self.stack = np.stack([self._frame()] * 4, -1)
        return self.stack, {}

    def step(self, action):
        self.x, self.t = int(np.clip(self.x + (1 if action else -1), 0, 5)), self.t + 1
        self.stack = np.concatenate([self.stack[..., 1:], self._frame()[..., None]], -1)
        return self.stack, float(self.x == 5), self.x == 5, self.t >= 12, {}


STRIP_ID = "StackedStrip-v0"
# registered on import, so that a Ray actor that imports this module can make it
if STRIP_ID not in gym.registry:
    gym.register(STRIP_ID, entry_point=StackedStrip, disable_env_checker=True)


def assert_strip_stacks(observation, first):
    """The stacks :class:`StackedStrip` makes: the first frame repeated where an episode
    starts, slid by one frame from the step before elsewhere (after step 0)."""
    starts = observation[first]
    np.testing.assert_array_equal(starts, np.repeat(starts[..., :1], 4, axis=-1))
    later = ~first[1:]
    np.testing.assert_array_equal(
        observation[1:][later][..., :-1], observation[:-1][later][..., 1:]
    )
    assert first.any() and later.any()


def test_deterministic_rows_are_the_same_with_frames_shipped_once(tmp_path, monkeypatch):
    """Two ``--deterministic`` IMPALA runs on an actor thread, frames shipped once and
    stacked: the same rows and final row, and the first did pack its unrolls."""
    import tfagents_vtrace as tv
    from tests.runtime.test_determinism import TIMINGS
    from tfagents_vtrace.runtime.acting import frames
    from tfagents_vtrace.runtime.rundir.metrics_log import read_metrics

    packed = []
    real_unpack = frames.unpack
    monkeypatch.setattr(frames, "unpack", lambda p: packed.append(p) or real_unpack(p))
    runs, finals = [], []
    for ship in (True, False):
        logdir = str(tmp_path / str(ship))
        final = tv.train("impala", env=StackedStrip, logdir=logdir, deterministic=True,
                         num_actors=1, num_envs=4, unroll_length=16, total_steps=1280,
                         eval_every=640, eval_episodes=2, export=False,
                         ship_frames_once=ship, verbose=0)  # fmt: skip
        rows = [{k: v for k, v in row.items() if k not in TIMINGS and not k.startswith("time_")}
                for row in read_metrics(logdir)]  # fmt: skip
        runs.append(rows)
        finals.append({k: v for k, v in final.items() if k not in TIMINGS and "wall" not in k})
        if ship:
            assert len(packed) >= 1280 // 64
            assert all(p.frames.shape[0] < 17 * 4 for p in packed)  # fewer than 17 stacks of 4
    assert len(runs[0]) >= 5
    assert runs[0] == runs[1]
    assert finals[0] == finals[1]


RAY = {"num_actors": 1, "backend": "ray"}
CLUSTER = {**RAY, "ray_address": "auto"}


@pytest.mark.parametrize(
    "settings, packs",
    [
        ({"num_actors": 1}, False),  # threads share the learner's memory: not by default
        ({"num_actors": 1, "ship_frames_once": True}, True),
        ({"num_actors": 0, "ship_frames_once": True}, False),  # the inline actor ships nothing
        (RAY, False),  # a private Ray's actors: through this machine's memory
        (CLUSTER, True),  # a cluster's: maybe over a network
        ({**RAY, "ship_frames_once": True}, True),
        ({**CLUSTER, "ship_frames_once": False}, False),
    ],
)
def test_which_actors_ship_frames_once(settings, packs):
    from tfagents_vtrace.networks.config import NetworkConfig
    from tfagents_vtrace.runtime.acting.actor import ActorSpec, build_network
    from tfagents_vtrace.runtime.acting.unroll_sources import unroll_source
    from tfagents_vtrace.runtime.config import RunConfig

    if settings.get("backend") == "ray":
        pytest.importorskip("ray", reason="ray is not installed (pip install .[ray])")
    net = NetworkConfig(hidden_sizes=(8,))
    run = RunConfig(env_id=STRIP_ID, num_envs=2, **settings)
    spec = ActorSpec(STRIP_ID, net, num_envs=2, unroll_length=4)
    source = unroll_source(run, spec, lambda: build_network(net, STRIP_ID))
    (actor,) = [source.actor] if source.inline else source.threads  # a Ray pool is not started
    actor = getattr(actor, "actor", actor)  # an actor thread's actor
    assert actor.spec.ship_frames_once is packs
    if hasattr(actor, "close"):
        actor.close()


def test_ship_frames_once_takes_none_or_a_bool():
    from tfagents_vtrace.runtime.config import RunConfig

    assert RunConfig().ship_frames_once is None
    with pytest.raises(ValueError, match="ship_frames_once: expected None or a bool"):
        RunConfig(ship_frames_once="yes")
