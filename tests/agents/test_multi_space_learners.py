"""IMPALA, A2C and A3C updates on batches of Dict observations with MultiDiscrete or
MultiBinary actions: finite losses, moving weights, and V-trace's log-rho from summed
per-dimension log-probabilities."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tfagents_vtrace.agents.a2c import A2CConfig, A2CLearner
from tfagents_vtrace.agents.a3c.config import A3CConfig
from tfagents_vtrace.agents.a3c.shared import compute_gradients
from tfagents_vtrace.agents.impala import ImpalaConfig, ImpalaLearner
from tfagents_vtrace.agents.impala.learner import loss_terms
from tfagents_vtrace.networks import NetworkConfig, make_network
from tfagents_vtrace.runtime.strategy import make_strategy

OBS = gym.spaces.Dict({
    "image": gym.spaces.Box(0, 255, (5, 5, 2), np.uint8),
    "pos": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
    "mode": gym.spaces.Discrete(4),
})  # fmt: skip
NVEC = (3, 2, 4)
ACTIONS = {
    "multi_discrete": gym.spaces.MultiDiscrete(NVEC),
    "multi_binary": gym.spaces.MultiBinary(3),
}
POLICY_KEY = {
    "multi_discrete": ("multi_logits", sum(NVEC)),
    "multi_binary": ("bernoulli_logits", 3),
}
NET = NetworkConfig(torso="nature_cnn", hidden_sizes=(16,), cnn_dense_size=8,
                    use_prev_action=True, use_prev_reward=True, policy_init_scale=1.0)  # fmt: skip


def _factory(action, config=NET):
    def make():
        tf.keras.utils.set_random_seed(0)
        return make_network(config, OBS, ACTIONS[action])

    return make


def _batch(rng, action, t=5, b=4, state=()):
    """An unroll batch (the runtime's layout) with a nested observation [T+1, B, ...]."""
    if action == "multi_discrete":
        acts = np.stack([rng.integers(0, n, (t + 1, b)) for n in NVEC], -1).astype(np.int32)
    else:
        acts = rng.integers(0, 2, (t + 1, b, 3)).astype(np.int8)
    key, width = POLICY_KEY[action]
    batch = {
        "observation": {
            "image": rng.integers(0, 256, (t + 1, b, 5, 5, 2)).astype(np.uint8),
            "pos": rng.normal(size=(t + 1, b, 3)).astype(np.float32),
            "mode": rng.integers(0, 4, (t + 1, b)).astype(np.int32),
        },
        "first": np.zeros((t + 1, b), bool),
        "reset": np.zeros((t + 1, b), bool),
        "prev_action": np.concatenate([np.zeros_like(acts[:1]), acts[:-1]]),
        "prev_reward": rng.normal(size=(t + 1, b)).astype(np.float32),
        "action": acts[:-1],
        "reward": rng.normal(size=(t, b)).astype(np.float32),
        "terminated": np.zeros((t, b), bool),
        "truncated": np.zeros((t, b), bool),
        "policy": {key: rng.normal(size=(t, b, width)).astype(np.float32)},
        "state": state,
    }
    batch["first"][0] = True
    batch["terminated"][2, 1] = True
    batch["reset"][3, 1] = True
    batch["first"][4, 1] = True
    batch["truncated"][1, 0] = True
    batch["reset"][2, 0] = True
    batch["first"][3, 0] = True
    return batch


def _log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def _multi_log_prob(logits, actions):
    out, start = 0.0, 0
    for d, n in enumerate(NVEC):
        log_p = _log_softmax(np.asarray(logits[..., start : start + n], np.float64))
        out = out + np.take_along_axis(log_p, actions[..., d : d + 1].astype(int), -1)[..., 0]
        start += n
    return out


def _moved(before, after):
    return any(not np.array_equal(a, b) for a, b in zip(before, after))


@pytest.mark.parametrize("action", list(ACTIONS))
@pytest.mark.parametrize("options", [
    {},
    {"minibatch_unit": "steps", "num_minibatches": 2, "num_epochs": 2},
    {"policy_loss": "clipped", "kl_cost": 0.1, "value_clip": 0.5},
])  # fmt: skip
def test_impala_update_is_finite(rng, action, options):
    config = ImpalaConfig(optimizer="adam", learning_rate=1e-3, lr_decay="none", **options)
    learner = ImpalaLearner(config, _factory(action), make_strategy("default"))
    before = learner.network.get_weights()
    metrics = learner.train_step(_batch(rng, action))
    for k in ("loss", "pg_loss", "baseline_loss", "entropy", "mean_rho"):
        assert np.isfinite(metrics[k]), (k, metrics)
    assert metrics["entropy"] > 0.0
    assert _moved(before, learner.network.get_weights())


def test_impala_log_rhos_sum_the_dimensions(rng):
    net = _factory("multi_discrete")()
    batch = _batch(rng, "multi_discrete")
    terms = loss_terms(net, ImpalaConfig(), batch)
    target = terms.policy["multi_logits"].numpy()
    expected_lp = _multi_log_prob(target, batch["action"])
    np.testing.assert_allclose(terms.target_log_probs, expected_lp, rtol=1e-5, atol=1e-5)
    behaviour = _multi_log_prob(batch["policy"]["multi_logits"], batch["action"])
    np.testing.assert_allclose(terms.log_rhos, expected_lp - behaviour, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("action", list(ACTIONS))
def test_a2c_update_is_finite(rng, action):
    learner = A2CLearner(A2CConfig(), _factory(action), make_strategy("default"))
    before = learner.network.get_weights()
    metrics = learner.train_step(_batch(rng, action))
    for k in ("loss", "pg_loss", "baseline_loss", "entropy", "mean_abs_log_rho"):
        assert np.isfinite(metrics[k]), (k, metrics)
    assert _moved(before, learner.network.get_weights())


def test_a2c_update_with_an_lstm(rng):
    config = NetworkConfig(hidden_sizes=(16,), core="lstm", lstm_size=8, use_prev_action=True)
    learner = A2CLearner(A2CConfig(), _factory("multi_discrete", config), make_strategy("default"))
    state = tuple(np.zeros((4, 8), np.float32) for _ in range(2))
    metrics = learner.train_step(_batch(rng, "multi_discrete", state=state))
    assert np.isfinite(metrics["loss"])


@pytest.mark.parametrize("action", list(ACTIONS))
def test_a3c_gradients_are_finite(rng, action):
    net = _factory(action)()
    batch = tf.nest.map_structure(tf.constant, _batch(rng, action))
    grads, metrics = compute_gradients(net, A3CConfig(), batch, tf.constant(0.01))
    assert float(metrics["finite"]) == 1.0
    assert all(g is not None for g in grads)
    assert any(float(tf.reduce_sum(tf.abs(g))) > 0 for g in grads)
