"""Meta-RL wiring (Wang et al. 2016, https://arxiv.org/abs/1611.05763): the LSTM policy sees
its previous action, previous reward and the time step; the runtime's bandit unrolls feed
them; an A2C update on a bandit unroll runs with the recurrent state."""

import numpy as np
import pytest
import tensorflow as tf

import tfagents_vtrace.envs  # noqa: F401 - registers the Bandit ids
from tfagents_vtrace.agents.a2c import A2CConfig, A2CLearner
from tfagents_vtrace.networks import NetInputs, NetworkConfig
from tfagents_vtrace.runtime.acting.actor import Actor, ActorSpec, build_network

ENV = "BanditDependentUniform-v0"
NET = NetworkConfig(
    hidden_sizes=(),
    core="lstm",
    lstm_size=8,
    use_prev_action=True,
    use_prev_reward=True,
    use_time_step=True,
)


@pytest.fixture(scope="module")
def network():
    tf.keras.utils.set_random_seed(0)
    return build_network(NET, ENV)


def _inputs(t, b, prev_action, prev_reward, first_at_zero=True):
    first = np.zeros((t, b), bool)
    first[0] = first_at_zero
    return NetInputs(
        np.zeros((t, b, 1), np.float32),
        first,
        np.asarray(prev_action, np.int32),
        np.asarray(prev_reward, np.float32),
    )


def test_lstm_output_depends_on_previous_action_and_reward(network):
    t, b = 4, 3
    rng = np.random.default_rng(0)
    action = rng.integers(0, 2, (t, b))
    reward = rng.integers(0, 2, (t, b)).astype(np.float32)
    state = network.initial_state(b)
    base = network.unroll(_inputs(t, b, action, reward), state)
    flipped_a = network.unroll(_inputs(t, b, 1 - action, reward), state)
    flipped_r = network.unroll(_inputs(t, b, action, 1.0 - reward), state)
    for other in (flipped_a, flipped_r):
        diff = np.abs(other.policy["logits"].numpy() - base.policy["logits"].numpy())
        assert diff[0].max() == 0.0  # first step: previous action/reward are masked out
        assert (diff[1:].reshape(t - 1, -1).max(-1) > 1e-6).all()  # later steps see them
        assert np.abs(other.value.numpy()[1:] - base.value.numpy()[1:]).max() > 1e-6


def test_time_step_input_changes_the_output(network):
    """Same inputs at every step: only the time counter in the state distinguishes them."""
    t, b = 3, 2
    out = network.unroll(
        _inputs(t, b, np.zeros((t, b)), np.zeros((t, b))), network.initial_state(b)
    )
    assert out.state[2].numpy().tolist() == [[3.0], [3.0]]  # counted inside the state
    no_time = NetworkConfig(**{**NET.to_dict(), "use_time_step": False})
    assert len(build_network(no_time, ENV).initial_state(1)) == 2


def test_bandit_unroll_feeds_previous_action_and_reward_and_trains(network):
    spec = ActorSpec(ENV, NET, num_envs=4, unroll_length=12, seed=3, policy_impl="tf")
    actor = Actor(spec, 0, env_factory=_short_bandits)
    actor.set_weights(0, network.get_weights())
    u, _ = actor.unroll()
    keep = ~u["first"][1:]
    np.testing.assert_array_equal(u["prev_action"][1:][keep], u["action"][keep])
    np.testing.assert_array_equal(u["prev_reward"][1:][keep], u["reward"][keep])
    assert u["terminated"][4].all() and u["reset"][5].all() and u["first"][6].all()
    assert len(u["state"]) == 3  # (h, c, t): the LSTM state travels with the unroll
    learner = A2CLearner(A2CConfig(discount=0.9), lambda: build_network(NET, ENV))
    learner.network.set_weights(network.get_weights())
    metrics = learner.train_step(u)
    assert metrics["skipped"] == 0.0 and metrics["mean_abs_log_rho"] < 1e-5  # on-policy
    u2, _ = actor.unroll()
    assert np.abs(u2["state"][0]).max() > 0.0  # the LSTM state carries across unrolls


def _short_bandits(seed):
    from tfagents_vtrace.envs import make_vector_env

    return make_vector_env(ENV, 4, seed, num_trials=5)
