"""Bandit baselines (benchmarks/baselines.py) and the policy hook of bandit_regret.py."""

import gymnasium as gym
import numpy as np
import pytest

import tfagents_vtrace.envs as envs
from tests.bench_modules import load_benchmark


def _load(name):
    return load_benchmark(name)


bandit_regret = _load("bandit_regret")  # also puts benchmarks/ on sys.path
baselines = _load("baselines")


def test_random_regret_matches_its_expectation():
    probs = envs.held_out_probs("independent", 500)
    regret = baselines.run_agent("random", probs, 100, seed=1).sum(axis=1)
    expected = 100 * np.abs(probs[:, 0] - probs[:, 1]) / 2  # half the pulls on the worse arm
    assert abs(regret.mean() - expected.mean()) < 4 * regret.std() / np.sqrt(500)


def test_thompson_and_ucb1_beat_random_on_easy_bandits():
    probs = envs.held_out_probs("dependent_easy", 500)
    total = {a: baselines.run_agent(a, probs, 100, seed=2).sum(1).mean() for a in baselines.AGENTS}
    assert total["random"] > 35  # 0.4 a pull
    assert total["thompson"] < 0.15 * total["random"]
    assert total["ucb1"] < 0.25 * total["random"]
    assert total["greedy"] < total["random"]


def test_ucb1_index_by_hand():
    agent = baselines.UCB1Agent(3, np.random.default_rng(0))
    # Problem 0: untried arm 1 first. Problem 1: arm 0 mean 2/3 + sqrt(2 ln4 / 3) = 1.628
    # against arm 1: 1 + sqrt(2 ln4) = 2.665. Problem 2: 0.9 + 0.678 vs 0.1 + 0.678.
    agent.n[:] = [[2, 0], [3, 1], [10, 10]]
    agent.s[:] = [[2, 0], [2, 1], [9, 1]]
    np.testing.assert_array_equal(agent.act(), [1, 1, 0])


def test_thompson_follows_the_posterior():
    agent = baselines.ThompsonAgent(2000, np.random.default_rng(0))
    agent.n[:] = [50, 50]
    agent.s[:] = [40, 10]  # Beta(41, 11) vs Beta(11, 41): arm 0 almost always
    assert (agent.act() == 0).mean() > 0.99


def test_held_out_bandits_are_fixed():
    a = envs.held_out_probs("independent", 10)
    np.testing.assert_array_equal(a, envs.held_out_probs("independent", 10))
    assert not np.array_equal(a, envs.held_out_probs("independent", 10, seed=0))


class _ArmPolicy:
    """A SavedModel policy pulling arm ``arm`` always (built lazily: TF imports slowly)."""

    @staticmethod
    def save(path, arm):
        import tensorflow as tf

        class Module(tf.Module):
            def __init__(self):
                super().__init__()
                sig = [
                    tf.TensorSpec([None, 1], tf.float32, "observation"),
                    tf.TensorSpec([None], tf.bool, "first"),
                    tf.TensorSpec([None], tf.int32, "prev_action"),
                    tf.TensorSpec([None], tf.float32, "prev_reward"),
                    (tf.TensorSpec([None, 1], tf.float32, "state_0"),),
                ]
                step = lambda observation, first, prev_action, prev_reward, state: {  # noqa: E731
                    "action": tf.fill(tf.shape(first), arm),
                    "state": state,
                }
                self.action = tf.function(step, input_signature=sig)
                self.greedy_action = tf.function(step, input_signature=sig)
                self.get_initial_state = tf.function(
                    lambda batch_size: (tf.zeros([batch_size, 1]),),
                    input_signature=[tf.TensorSpec([], tf.int32)],
                )

        tf.saved_model.save(Module(), path)
        return path


def test_policy_hook_regret(tmp_path):
    probs = np.array([[0.8, 0.3], [0.1, 0.6]])
    path = _ArmPolicy.save(str(tmp_path / "arm0"), 0)
    regret = bandit_regret.run_policy(path, probs, 10, seed=0)
    np.testing.assert_allclose(regret.sum(axis=1), [0.0, 5.0])


def test_policy_hook_with_a_real_lstm_export(tmp_path):
    from tfagents_vtrace.export.saved_model import export_policy
    from tfagents_vtrace.networks import NetworkConfig, make_network

    env = gym.make("BanditIndependent-v0")
    config = NetworkConfig(
        hidden_sizes=(8,),
        core="lstm",
        lstm_size=8,
        use_prev_action=True,
        use_prev_reward=True,
        use_time_step=True,
    )
    net = make_network(config, env.observation_space, env.action_space)
    path = export_policy(net, str(tmp_path / "lstm"))
    probs = envs.held_out_probs("independent", 16)
    for greedy in (False, True):
        regret = bandit_regret.run_policy(path, probs, 5, seed=0, greedy=greedy)
        assert regret.shape == (16, 5) and np.all(regret >= 0)
        assert np.all(regret.sum(1) <= 5 * np.abs(probs[:, 0] - probs[:, 1]) + 1e-9)


@pytest.mark.parametrize("name", ["nope"])
def test_unknown_agent(name):
    with pytest.raises(ValueError, match="name"):
        baselines.run_agent(name, np.full((2, 2), 0.5), 3, seed=0)
