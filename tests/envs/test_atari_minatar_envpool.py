"""Atari / MinAtar preprocessing and the envpool adapter (skipped without their extras)."""

import importlib.util

import gymnasium as gym
import numpy as np
import pytest

import tfagents_vtrace.envs as envs

has = lambda m: importlib.util.find_spec(m) is not None  # noqa: E731
needs_atari = pytest.mark.skipif(not (has("ale_py") and has("cv2")), reason="atari extra")
needs_minatar = pytest.mark.skipif(not has("minatar"), reason="minatar extra")
needs_envpool = pytest.mark.skipif(not has("envpool"), reason="envpool extra")


def _check_stack_shifts(prev, obs):
    """Frame stacking, channels last: the newest 3 frames of prev are the oldest 3 of obs."""
    np.testing.assert_array_equal(obs[..., :3], prev[..., 1:])


@needs_atari
@pytest.mark.parametrize("mode", ["auto", "sync"])
def test_atari_vector_preprocessing(mode):
    env = envs.make_vector_env("ALE/Pong-v5", 2, seed=0, mode=mode)
    try:
        assert env.single_observation_space.shape == (84, 84, 4)
        assert env.single_observation_space.dtype == np.uint8
        assert env.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
        prev, _ = env.reset(seed=1)
        assert prev.shape == (2, 84, 84, 4) and prev.dtype == np.uint8
        for _ in range(3):
            obs, reward, term, trunc, _ = env.step(np.array([2, 3]))
            assert reward.dtype.kind == "f" and obs.dtype == np.uint8
            _check_stack_shifts(prev, obs)
            prev = obs
        assert prev.std() > 0  # real pixels, not a blank frame
    finally:
        env.close()


@needs_atari
def test_atari_single_env_preprocessing():
    env = envs.make_env("ALE/Pong-v5", seed=0)
    assert env.observation_space.shape == (84, 84, 4)
    assert env.unwrapped.spec.kwargs["frameskip"] == 1  # the wrapper skips, not the emulator
    prev, _ = env.reset()
    obs, reward, *_ = env.step(0)
    assert isinstance(reward, float)
    _check_stack_shifts(prev, obs)


@needs_minatar
@pytest.mark.parametrize("obs_dtype", ["uint8", "float32"])
def test_minatar(obs_dtype):
    env = envs.make_vector_env("MinAtar/Breakout-v1", 3, seed=0, obs_dtype=obs_dtype)
    obs, _ = env.reset()
    assert obs.shape == (3, 10, 10, 4) and obs.dtype == np.dtype(obs_dtype)
    assert set(np.unique(obs)) <= {0, 1} and obs.sum() > 0
    assert env.single_action_space == gym.spaces.Discrete(3)
    single = envs.make_env("MinAtar/Breakout-v1", seed=0, obs_dtype=obs_dtype)
    assert single.observation_space.shape == (10, 10, 4)
    with pytest.raises(ValueError, match="obs_dtype"):
        envs.make_env("MinAtar/Breakout-v1", obs_dtype="bool")


@needs_envpool
def test_envpool_cartpole_next_step_and_seeding():
    env = envs.make_vector_env("CartPole-v1", 4, seed=3, mode="envpool")
    again = envs.make_vector_env("CartPole-v1", 4, seed=3, mode="envpool")
    np.testing.assert_array_equal(env.reset()[0], again.reset()[0])
    prev_done = np.zeros(4, bool)
    ends = 0
    for _ in range(40):
        obs, reward, term, trunc, _ = env.step(np.ones(4, np.int64))
        np.testing.assert_array_equal(reward[prev_done], 0.0)
        assert not term[prev_done].any()
        assert np.all(np.abs(obs[prev_done]) <= 0.05)
        ends += int(prev_done.sum())
        prev_done = term | trunc
    assert ends >= 4
    with pytest.raises(ValueError, match="env_id"):
        envs.make_vector_env("CartPoleNoVel-v1", 2, seed=0, mode="envpool")


@needs_envpool
@needs_atari
def test_envpool_atari_channels_last():
    env = envs.make_vector_env("ALE/Pong-v5", 2, seed=0, mode="envpool")
    prev, _ = env.reset()
    obs, *_ = env.step(np.zeros(2, np.int64))
    assert obs.shape == (2, 84, 84, 4) and obs.dtype == np.uint8
    _check_stack_shifts(prev, obs)
    env.close()


class _RandomUpDown:
    """Each env takes UP (2) or DOWN (3) uniformly at random every step; logits unused."""

    def __init__(self, num_envs: int):
        self.rng = np.random.default_rng(0)
        self.num_envs = num_envs

    def step(self, obs, first, prev_action, prev_reward, state):
        action = self.rng.choice([2, 3], size=self.num_envs).astype(np.int32)
        return action, {"logits": np.zeros((self.num_envs, 6), np.float32)}, state


def _paddle_row(frame: np.ndarray) -> float:
    """Mean row of our (right-hand) paddle in an 84x84 Pong frame: the non-background pixels
    of columns 73-76 between the top and bottom walls."""
    band = frame[14:78, 73:77].astype(np.int32)
    rows = np.nonzero((band != np.bincount(band.ravel()).argmax()).any(axis=1))[0]
    return float(rows.mean()) if rows.size else np.nan


@needs_atari
def test_atari_unroll_actions_line_up_with_the_observations_they_cause():
    """The learner's view of Pong is causal: in an unroll, the action recorded at step t moves
    our paddle between ``observation[t]`` and ``observation[t + 1]`` (DOWN minus UP: a mean
    move of ~2.8 rows; Pong's paddle lags, so action t - 1 moves it more, ~5 rows), while the
    action recorded at t + 1 cannot have moved it (~0.3). Actions recorded one step early
    or late relative to the observations fail one of the two bounds."""
    from tfagents_vtrace.networks.config import NetworkConfig
    from tfagents_vtrace.runtime.acting.actor import Actor, ActorSpec

    b_envs, steps = 8, 200
    spec = ActorSpec(
        "ALE/Pong-v5",
        NetworkConfig(torso="small_atari_cnn"),
        num_envs=b_envs,
        unroll_length=steps,
        env_kwargs={"repeat_action_probability": 0.0},
    )
    actor = Actor(spec)
    actor.policy = _RandomUpDown(b_envs)
    u, _ = actor.unroll()
    actor.close()
    frames = u["observation"][..., -1]
    rows = np.array([[_paddle_row(frames[t, b]) for b in range(b_envs)] for t in range(steps + 1)])
    dy = rows[1:] - rows[:-1]  # move between observation t and t + 1
    valid = ~(u["reset"][:-1] | u["reset"][1:]) & np.isfinite(dy)

    def effect(shift: int) -> float:
        """Mean move after DOWN minus after UP, for the action recorded at t + shift."""
        t = np.arange(1, steps - 1)
        a, d, ok = u["action"][t + shift], dy[t], valid[t]
        return float(d[ok & (a == 3)].mean() - d[ok & (a == 2)].mean())

    assert valid.sum() > 0.9 * valid.size
    assert effect(0) > 1.5, effect(0)
    assert abs(effect(1)) < 1.0, effect(1)
