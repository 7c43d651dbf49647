"""Two-armed bandit episodes: regret bookkeeping, fixed arms, task families, NEXT_STEP."""

import gymnasium as gym
import numpy as np
import pytest

import tfagents_vtrace.envs as envs
from tfagents_vtrace.envs import bandits


def test_single_env_regret_by_hand():
    env = envs.make_env("BanditIndependent-v0", seed=0, num_trials=4)
    obs, info = env.reset(options={"probs": [0.2, 0.7]})
    assert obs.shape == (1,) and obs.dtype == np.float32 and not obs.any()
    np.testing.assert_array_equal(info["probs"], [0.2, 0.7])
    # Pulls 0, 1, 0, 0: regret max(p) - p_a = 0.5, 0, 0.5, 0.5.
    expected = [(0.5, 0.5, False), (0.0, 0.5, False), (0.5, 1.0, False), (0.5, 1.5, True)]
    for a, (regret, cumulative, done) in zip([0, 1, 0, 0], expected):
        obs, reward, terminated, truncated, info = env.step(a)
        assert reward in (0.0, 1.0) and not truncated
        assert info["expected_regret"] == pytest.approx(regret)
        assert info["cumulative_regret"] == pytest.approx(cumulative)
        assert terminated == done


def test_vector_env_regret_by_hand():
    env = envs.make_vector_env("BanditIndependent-v0", 2, seed=0, num_trials=3)
    assert isinstance(env.unwrapped, envs.TwoArmedBanditVectorEnv)
    env.reset(options={"probs": [[0.2, 0.7], [0.9, 0.1]]})
    actions = [[0, 0], [1, 1], [0, 1]]
    regrets = [[0.5, 0.0], [0.0, 0.8], [0.5, 0.8]]
    cumulative = np.cumsum(regrets, axis=0)
    for t in range(3):
        _, _, term, trunc, info = env.step(np.array(actions[t]))
        np.testing.assert_allclose(info["expected_regret"], regrets[t])
        np.testing.assert_allclose(info["cumulative_regret"], cumulative[t])
        np.testing.assert_array_equal(term, [t == 2, t == 2])
        assert not trunc.any()


@pytest.mark.parametrize("mode", ["auto", "sync"])
def test_rewards_are_bernoulli_of_the_pulled_arm(mode):
    env = envs.make_vector_env("BanditIndependent-v0", 8, seed=1, mode=mode, num_trials=500)
    env.reset(options={"probs": [1.0, 0.3]})
    r0 = np.stack([env.step(np.zeros(8, np.int64))[1] for _ in range(5)])
    np.testing.assert_array_equal(r0, 1.0)
    r1 = np.stack([env.step(np.ones(8, np.int64))[1] for _ in range(400)])
    n = r1.size
    assert abs(r1.mean() - 0.3) < 4 * np.sqrt(0.3 * 0.7 / n)


@pytest.mark.parametrize("env_id", list(envs.BANDIT_IDS))
def test_task_families(env_id):
    env = envs.make_vector_env(env_id, 400, seed=2)
    p = env.reset()[1]["probs"]
    assert p.shape == (400, 2) and np.all((p >= 0) & (p <= 1))
    task = envs.BANDIT_IDS[env_id]
    if task == "independent":
        assert abs(np.corrcoef(p[:, 0], p[:, 1])[0, 1]) < 0.2
        assert p.min() < 0.05 and p.max() > 0.95
    else:
        np.testing.assert_allclose(p[:, 0] + p[:, 1], 1.0)
    if task in envs.PROB_SETS:
        lo, hi = envs.PROB_SETS[task]
        assert set(np.round(p[:, 0], 6)) == {lo, hi}
    if task == "dependent_uniform":
        assert p[:, 0].min() < 0.05 and p[:, 0].max() > 0.95
    assert envs.PROB_SETS == {
        "dependent_easy": (0.1, 0.9),
        "dependent_medium": (0.25, 0.75),
        "dependent_hard": (0.4, 0.6),
    }


def test_vector_next_step_draws_a_new_problem():
    env = envs.make_vector_env("BanditDependentUniform-v0", 3, seed=0, num_trials=2)
    _, info = env.reset(options={"probs": [0.3, 0.7]})
    for _ in range(2):
        _, _, term, _, info = env.step(np.zeros(3, np.int64))
    assert term.all()
    np.testing.assert_allclose(info["cumulative_regret"], 0.8)
    obs, reward, term, trunc, info = env.step(np.zeros(3, np.int64))
    # Reset step: action ignored, reward 0, flags off, a new problem with p1 + p2 = 1.
    np.testing.assert_array_equal(reward, 0.0)
    assert not term.any() and not trunc.any()
    np.testing.assert_array_equal(info["cumulative_regret"], 0.0)
    np.testing.assert_array_equal(info["trial"], 0)
    assert not np.allclose(info["probs"][:, 0], 0.3)
    np.testing.assert_allclose(info["probs"].sum(axis=1), 1.0)
    _, _, _, _, info = env.step(np.zeros(3, np.int64))
    np.testing.assert_array_equal(info["trial"], 1)


def test_sync_and_vector_single_env_reset_infos_agree():
    single = gym.make("BanditDependentEasy-v0")
    _, info = single.reset(seed=0)
    assert info["expected_regret"] == 0.0 and info["cumulative_regret"] == 0.0
    assert sorted(np.round(info["probs"], 6)) == [0.1, 0.9]


@pytest.mark.parametrize(
    "probs,match",
    [([0.1, 0.2, 0.3], r"expected shape \[2\]"), ([0.5, 1.5], r"values in \[0, 1\]")],
)
def test_bad_probs(probs, match):
    env = envs.make_env("BanditIndependent-v0")
    with pytest.raises(ValueError, match=match):
        env.reset(options={"probs": probs})
    venv = envs.make_vector_env("BanditIndependent-v0", 2, seed=0)
    with pytest.raises(ValueError, match="options"):
        venv.reset(options={"probs": probs})


def test_bad_arguments():
    with pytest.raises(ValueError, match="task"):
        bandits.TwoArmedBanditEnv(task="easy")
    with pytest.raises(ValueError, match="num_trials"):
        bandits.TwoArmedBanditVectorEnv(2, num_trials=0)
    venv = envs.make_vector_env("BanditIndependent-v0", 2, seed=0)
    with pytest.raises(ValueError, match="actions"):
        venv.step(np.array([0, 2]))
    with pytest.raises(ValueError, match="actions"):
        venv.step(np.array([0]))
