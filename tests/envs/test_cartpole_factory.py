"""CartPoleNoVel-v1 and the vector-env factory: registration, shapes, NEXT_STEP, seeding."""

import gymnasium as gym
import numpy as np
import pytest

import tfagents_vtrace.envs as envs

VEL_FREE = [0, 2]  # x and theta in CartPole's (x, x_dot, theta, theta_dot)


@pytest.mark.parametrize("env_id", ["CartPoleNoVel-v1", *envs.BANDIT_IDS])
def test_registered(env_id):
    assert env_id in gym.registry
    assert gym.spec(env_id).vector_entry_point is not None


def test_single_env_drops_exactly_the_velocities():
    full = gym.make("CartPole-v1")
    novel = envs.make_env("CartPoleNoVel-v1")
    assert novel.observation_space.shape == (2,)
    assert novel.spec.max_episode_steps == 500
    np.testing.assert_array_equal(
        novel.observation_space.high, full.observation_space.high[VEL_FREE]
    )
    obs_f, _ = full.reset(seed=3)
    obs_n, _ = novel.reset(seed=3)
    np.testing.assert_array_equal(obs_n, obs_f[VEL_FREE])
    actions = np.random.default_rng(0).integers(0, 2, size=200)
    steps = 0
    for a in actions:
        steps += 1
        of, rf, tf_, trf, _ = full.step(int(a))
        on, rn, tn, trn, _ = novel.step(int(a))
        np.testing.assert_array_equal(on, of[VEL_FREE])
        assert (rf, tf_, trf) == (rn, tn, trn)
        assert obs_f.shape == (4,) and on.shape == (2,)
        if tf_ or trf:
            break
    assert steps > 5  # the comparison covered a real trajectory


@pytest.mark.parametrize("mode", ["auto", "sync"])
def test_vector_env_drops_exactly_the_velocities(mode):
    vmode = "vector_entry_point" if mode == "auto" else "sync"
    full = gym.make_vec("CartPole-v1", num_envs=3, vectorization_mode=vmode)
    novel = envs.make_vector_env("CartPoleNoVel-v1", 3, seed=11, mode=mode)
    if mode == "auto":
        assert isinstance(novel.unwrapped, envs.CartPoleNoVelVectorEnv)
    obs_f, _ = full.reset(seed=11)
    obs_n, _ = novel.reset(seed=11)
    assert obs_n.shape == (3, 2) and obs_n.dtype == np.float32
    np.testing.assert_array_equal(obs_n, obs_f[:, VEL_FREE])
    rng = np.random.default_rng(1)
    ended = 0
    for _ in range(150):
        a = rng.integers(0, 2, size=3)
        of, rf, tf_, trf, _ = full.step(a)
        on, rn, tn, trn, _ = novel.step(a)
        np.testing.assert_array_equal(on, of[:, VEL_FREE])
        np.testing.assert_array_equal(rn, rf)
        np.testing.assert_array_equal(tn, tf_)
        ended += int(tn.sum())
    assert ended > 0  # autoresets happened during the comparison


def _check_next_step(env, steps=60):
    """Returns how many episode ends were checked against NEXT_STEP semantics."""
    b = env.num_envs
    rng = np.random.default_rng(0)
    prev_done = np.zeros(b, bool)
    checked = 0
    for _ in range(steps):
        obs, reward, term, trunc, _ = env.step(
            env.action_space.sample() * 0 + rng.integers(0, 2, b)
        )
        assert reward.shape == (b,) and term.shape == (b,) and trunc.shape == (b,)
        # The step after an end is a reset step: reward 0, neither flag set.
        np.testing.assert_array_equal(reward[prev_done], 0.0)
        assert not term[prev_done].any() and not trunc[prev_done].any()
        np.testing.assert_array_equal(reward[~prev_done], 1.0)
        if prev_done.any():
            # CartPole's first observation is drawn from U[-0.05, 0.05].
            assert np.all(np.abs(obs[prev_done]) <= 0.05)
            checked += int(prev_done.sum())
        prev_done = term | trunc
    return checked


@pytest.mark.parametrize("env_id", ["CartPole-v1", "CartPoleNoVel-v1"])
@pytest.mark.parametrize("mode", ["auto", "sync"])
def test_next_step_autoreset_after_truncation(env_id, mode):
    env = envs.make_vector_env(env_id, 4, seed=0, mode=mode, max_episode_steps=7)
    assert env.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    assert _check_next_step(env) >= 4 * 7  # every sub-env truncated several times


@pytest.mark.parametrize("mode", ["auto", "sync"])
def test_next_step_autoreset_after_termination(mode):
    env = envs.make_vector_env("CartPole-v1", 4, seed=0, mode=mode)
    env.reset(seed=0)
    # Always pushing right terminates every episode within ~10-15 steps.
    prev_done = np.zeros(4, bool)
    seen = 0
    for _ in range(60):
        obs, reward, term, trunc, _ = env.step(np.ones(4, np.int64))
        assert not trunc.any()
        np.testing.assert_array_equal(reward[prev_done], 0.0)
        assert not term[prev_done].any()
        seen += int(prev_done.sum())
        prev_done = term
    assert seen >= 8


@pytest.mark.parametrize("env_id", ["CartPole-v1", "CartPoleNoVel-v1", "BanditIndependent-v0"])
@pytest.mark.parametrize("mode", ["auto", "sync"])
def test_seeding_is_reproducible(env_id, mode):
    def rollout(seed):
        env = envs.make_vector_env(env_id, 3, seed=seed, mode=mode)
        obs, _ = env.reset()
        out = [obs]
        for _ in range(120):
            obs, reward, term, trunc, _ = env.step(env.action_space.sample())
            out += [obs, reward, term]
        return np.concatenate([np.asarray(x, np.float64).ravel() for x in out])

    a, b, c = rollout(5), rollout(5), rollout(6)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_make_env_seed_is_reproducible():
    e1 = envs.make_env("CartPoleNoVel-v1", seed=4)
    e2 = envs.make_env("CartPoleNoVel-v1", seed=4)
    np.testing.assert_array_equal(e1.reset()[0], e2.reset()[0])


@pytest.mark.parametrize("num_envs", [0, -1, 2.0, True])
def test_bad_num_envs(num_envs):
    with pytest.raises(ValueError, match="num_envs"):
        envs.make_vector_env("CartPole-v1", num_envs, seed=0)


def test_bad_mode():
    with pytest.raises(ValueError, match="mode"):
        envs.make_vector_env("CartPole-v1", 2, seed=0, mode="threads")


def test_envpool_missing_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(envs.factory, "_has_module", lambda name: False)
    with pytest.raises(ImportError, match="envpool"):
        envs.make_vector_env("CartPole-v1", 2, seed=0, mode="envpool")


def test_async_mode():
    env = envs.make_vector_env("CartPoleNoVel-v1", 2, seed=0, mode="async")
    try:
        assert isinstance(env, gym.vector.AsyncVectorEnv)
        obs, *_ = env.step(np.zeros(2, np.int64))
        assert obs.shape == (2, 2)
    finally:
        env.close()


class _SameStepCartPole(gym.envs.classic_control.cartpole.CartPoleVectorEnv):
    metadata = {"render_modes": [], "autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}


def test_auto_falls_back_to_sync_for_other_autoreset_modes():
    env_id = "TestSameStepCartPole-v0"
    if env_id not in gym.registry:
        gym.register(
            id=env_id,
            entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv",
            vector_entry_point=_SameStepCartPole,
            max_episode_steps=500,
        )
    env = envs.make_vector_env(env_id, 2, seed=0)
    assert isinstance(env, gym.vector.SyncVectorEnv)
    assert env.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
