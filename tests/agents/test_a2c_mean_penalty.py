"""A2C's ``policy_mean_cost``: the penalty ``0.5 * sum_a loc^2`` on a Gaussian policy's mean
(pre-tanh for "tanh_gaussian") against numpy, nothing added at cost 0, and refusals naming
the field (bad values, non-Gaussian heads)."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tests.agents._unroll_batch import unroll_batch
from tfagents_vtrace.agents.a2c import A2CConfig, A2CLearner, a2c_loss
from tfagents_vtrace.networks import NetInputs, NetworkConfig, make_network
from tfagents_vtrace.settings import build_configs

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
BOX = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)
T, B = 6, 3
FIELD = "policy_mean_cost"


def _network(head, action_space=BOX):
    tf.keras.utils.set_random_seed(0)
    config = NetworkConfig(hidden_sizes=(8,), policy_init_scale=3.0, policy_head=head)
    return make_network(config, OBS, action_space)


def _batch(rng):
    """A Box-action unroll batch with one truncation and one termination (masked steps)."""
    batch = unroll_batch(rng, T, B, 1, truncate=[(0, 2)], terminate=[(1, 3)])
    dim = BOX.shape[0]
    batch["action"] = rng.uniform(-1.9, 1.9, (T, B, dim)).astype(np.float32)
    batch["prev_action"] = np.zeros((T + 1, B, dim), np.float32)
    batch["policy"] = {
        "loc": rng.normal(size=(T, B, dim)).astype(np.float32),
        "scale": rng.uniform(0.5, 1.5, (T, B, dim)).astype(np.float32),
    }
    return batch


def _policy_loc(net, batch):
    """The network's policy mean over the T steps, ``[T, B, A]`` (numpy)."""
    keys = ("observation", "first", "prev_action", "prev_reward")
    out = net.unroll(NetInputs(*(batch[k] for k in keys)), ())
    return out.policy["loc"].numpy()[:-1]


def _loss(net, batch, reduction, cost):
    config = A2CConfig(
        discount=0.9, baseline_cost=0.7, loss_reduction=reduction, policy_mean_cost=cost
    )
    tf.keras.utils.set_random_seed(1)  # the tanh-Gaussian entropy estimate samples
    loss, metrics = a2c_loss(net, config, batch, 0.3, 1.0 / (T * B))
    return float(loss), {k: float(v) for k, v in metrics.items()}


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_zero_cost_adds_nothing(rng, reduction):
    net, batch = _network("gaussian"), _batch(rng)
    loss, metrics = _loss(net, batch, reduction, 0.0)
    assert A2CConfig().policy_mean_cost == 0.0
    assert "mean_penalty" not in metrics
    # The loss is exactly the three terms of before (float32, in the loss's order).
    f32 = np.float32
    mean_loss = f32(metrics["pg_loss"]) + f32(0.7) * f32(metrics["baseline_loss"])
    mean_loss = mean_loss - f32(0.3) * f32(metrics["entropy"])
    assert metrics["loss"] == float(mean_loss)
    if reduction == "mean":
        assert loss == float(mean_loss)


@pytest.mark.parametrize("head", ["gaussian", "tanh_gaussian"])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_penalty_matches_numpy(rng, head, reduction):
    net, batch = _network(head), _batch(rng)
    loc = _policy_loc(net, batch).astype(np.float64)
    assert np.abs(loc).max() > 0.5  # a mean far enough from 0 to matter
    mask = 1.0 - batch["reset"][:-1].astype(np.float64)
    penalty_sum = (mask * 0.5 * (loc**2).sum(-1)).sum()  # over the unmasked steps
    base, _ = _loss(net, batch, reduction, 0.0)
    for cost in (1e-3, 0.5):
        loss, metrics = _loss(net, batch, reduction, cost)
        # the other terms' reduction: per-step mean over [T, B] ("mean"), sum ("sum")
        expected = cost * (penalty_sum / (T * B) if reduction == "mean" else penalty_sum)
        atol = 1e-6 * max(1.0, abs(base))  # float32 rounding of the loss
        np.testing.assert_allclose(loss - base, expected, rtol=1e-4, atol=atol)
        np.testing.assert_allclose(metrics["mean_penalty"], penalty_sum / (T * B), rtol=1e-5)


def test_penalty_gradient_pulls_the_mean_in(rng):
    net, batch = _network("tanh_gaussian"), _batch(rng)
    loc_layer = net.policy_head.loc
    grads = []
    for cost in (0.0, 1.0):
        config = A2CConfig(discount=0.9, policy_mean_cost=cost)
        with tf.GradientTape() as tape:
            tf.keras.utils.set_random_seed(1)
            loss, _ = a2c_loss(net, config, batch, 0.0, 1.0 / (T * B))
        grads.append(tape.gradient(loss, loc_layer.bias).numpy())
    loc = _policy_loc(net, batch)
    mask = 1.0 - batch["reset"][:-1].astype(np.float32)
    expected = (mask[..., None] * loc).sum((0, 1)) / (T * B)  # d/d bias of 0.5 * loc^2
    np.testing.assert_allclose(grads[1] - grads[0], expected, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("value", [-1e-3, float("nan"), float("inf")])
def test_bad_value_names_the_field(value):
    with pytest.raises(ValueError, match=FIELD):
        A2CConfig(policy_mean_cost=value)


@pytest.mark.parametrize("text", ["-0.001", "nan", "abc"])
def test_bad_flag_names_the_field(text):
    with pytest.raises(ValueError, match=FIELD):
        build_configs("a2c", {FIELD: text})


def test_flag_sets_the_field():
    for agent in ("a2c", "a3c"):
        assert build_configs(agent, {FIELD: "0.001"}).agent_config.policy_mean_cost == 1e-3


def test_categorical_head_is_refused(rng):
    def factory():
        return _network("auto", gym.spaces.Discrete(3))

    batch = unroll_batch(rng, T, B, 3)
    with pytest.raises(ValueError, match=FIELD):  # the loss itself (A3C's workers use it)
        a2c_loss(factory(), A2CConfig(policy_mean_cost=1e-3), batch, 0.0, 1.0 / (T * B))
    learner = A2CLearner(A2CConfig(policy_mean_cost=1e-3), factory)
    with pytest.raises(ValueError, match=FIELD):  # the first update
        learner.train_step(batch)
    assert np.isfinite(A2CLearner(A2CConfig(), factory).train_step(batch)["loss"])  # cost 0
