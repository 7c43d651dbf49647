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
