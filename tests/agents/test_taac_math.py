"""TAAC math against numpy references written from ALF's TAAC (arXiv 2104.06521): the
compare-through critic targets, the act-or-repeat probabilities, the trajectory maps."""

import numpy as np
import pytest
import tensorflow as tf

from tests.modes import RUN_MODES, run_in_mode
from tfagents_vtrace.agents.taac import loss as taac_loss
from tfagents_vtrace.agents.taac.config import TaacConfig
from tfagents_vtrace.agents.taac.policy import act_step
from tfagents_vtrace.agents.taac.trajectories import Trajectory


def _np_compare_through(rewards, discounts, values, step_is_last, rollout_b, train_b):
    """ALF's TAACTDLoss + _discounted_return, one step at a time."""
    b = np.logical_or(rollout_b, train_b)
    b[0] = False
    is_lasts = np.logical_or(step_is_last, b)
    return np_discounted_return(rewards, values, is_lasts, discounts)


def np_discounted_return(rewards, values, is_lasts, discounts):
    """ALF's ``_discounted_return``: cut (bootstrap from ``values``) where ``is_lasts``."""
    is_lasts = is_lasts.astype(np.float64)
    if values.ndim == 3:  # common.expand_dims_as
        is_lasts = is_lasts[..., None]
    rets = np.zeros_like(values)
    rets[-1] = values[-1]
    acc = rets.copy()
    for t in reversed(range(rewards.shape[0] - 1)):
        rets[t] = acc[t + 1] * discounts[t + 1] + rewards[t + 1]
        acc[t] = is_lasts[t] * values[t] + (1 - is_lasts[t]) * rets[t]
    return rets[:-1]


@pytest.mark.parametrize("mode", RUN_MODES)
def test_critic_loss_matches_numpy_compare_through(mode, rng):
    """The returns, and the ``mask_last_steps`` mean (the ALF default without the mask is in
    ``test_taac_alf.py``)."""
    t_len, batch = 7, 5
    rewards = rng.normal(size=(t_len, batch)).astype(np.float32)
    discounts = (0.9 * (rng.random((t_len, batch)) > 0.1)).astype(np.float32)
    values = rng.normal(size=(t_len, batch)).astype(np.float32)
    last = rng.random((t_len, batch)) < 0.15
    last[3, 0] = True  # an episode boundary inside a trace
    rollout_b = rng.random((t_len, batch)) < 0.3
    train_b = rng.random((t_len, batch)) < 0.3
    q = rng.normal(size=(t_len, batch, 2)).astype(np.float32)
    fn = run_in_mode(
        lambda *a: tuple(taac_loss.critic_loss(*a, mask_last_steps=True))[:2], mode
    )  # loss, returns
    loss, returns = fn(q, rewards, discounts, values, last, rollout_b, train_b)
    want = _np_compare_through(rewards, discounts, values, last, rollout_b, train_b)
    np.testing.assert_allclose(returns.numpy(), want, rtol=1e-5, atol=1e-5)
    mask = 1.0 - last[:-1]
    want_loss = (((want[..., None] - q[:-1]) ** 2).sum(-1) * mask).sum() / mask.sum()
    np.testing.assert_allclose(float(loss), want_loss, rtol=1e-5)


def test_repeat_accumulates_rewards_until_either_policy_switches():
    # One trace, no episode end: rollout switches at t=3, the current policy at t=2.
    rewards = np.array([[0.0], [1.0], [2.0], [4.0], [8.0]], np.float32)
    values = np.array([[0.0], [10.0], [20.0], [30.0], [40.0]], np.float32)
    disc = np.full((5, 1), 0.5, np.float32)
    rb = np.array([[1], [0], [0], [1], [0]], bool)
    tb = np.array([[0], [0], [1], [0], [0]], bool)
    out = taac_loss.critic_loss(
        tf.zeros([5, 1, 2]), rewards, disc, values, np.zeros((5, 1), bool), rb, tb
    )
    # t=0: 1 + .5 (2 + .5 * 20) ; t=1: 2 + .5*20 ; t=2: 4 + .5*30 ; t=3: 8 + .5*40
    np.testing.assert_allclose(out.returns.numpy()[:, 0], [7.0, 12.0, 19.0, 28.0])


@pytest.mark.parametrize("clipping", [None, (-0.5, 0.25)])
def test_beta_probabilities_by_hand(clipping):
    q0 = np.array([1.0, 0.0, 3.0], np.float32)
    q1 = np.array([2.0, -1.0, 3.0], np.float32)
    alpha = 0.5
    probs = tf.nn.softmax(taac_loss.beta_logits(q0, q1, alpha, clipping)).numpy()
    adv = q1 - q0 if clipping is None else np.clip(q1 - q0, *clipping)
    p1 = np.exp(adv / alpha) / (1.0 + np.exp(adv / alpha))  # e^{q1/a} / (e^{q0/a} + e^{q1/a})
    np.testing.assert_allclose(probs[:, 1], p1, rtol=1e-6)
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-6)


class _FixedActor:
    """pi(. | s, tau) with loc = s[:, :1], log_std = -3 (tanh-squashed)."""

    action_dim = 1

    def __call__(self, observation, tau):
        loc = observation[:, :1]
        return loc, tf.fill(tf.shape(loc), -3.0)


class _LinearCritics:
    """Q_1 = Q_2 = w * a for the trajectory's action a (both twins equal)."""

    def __init__(self, w):
        self.w = w

    def __call__(self, observation, tau):
        q = self.w * tau[:, 0, 0]
        return tf.stack([q, q + 1.0], axis=-1)  # min over twins is q


def test_act_step_probabilities_and_repeats_by_hand():
    traj = Trajectory("constant")
    obs = tf.constant([[0.5], [-0.5], [0.0]])
    tau = tf.constant([[[0.9]], [[0.9]], [[-0.2]]])
    repeats = tf.constant([1, 3, 2])
    w, alpha = 2.0, 0.3
    out = act_step(
        _FixedActor(), _LinearCritics(w), traj, obs, tf.constant([False, False, True]),
        tau, repeats, tf.constant([1, 2]), alpha_b=alpha, greedy=True, epsilon=0.0,
        max_repeat_steps=3,
    )  # fmt: skip
    # Greedy: x = tanh(loc); env 2 starts an episode, so its tau^- is 0.
    x = np.tanh([0.5, -0.5, 0.0])
    prev = np.array([0.9, 0.9, 0.0])
    p1 = 1.0 / (1.0 + np.exp(-(w * x - w * prev) / alpha))
    np.testing.assert_allclose(out["p_b1"].numpy(), p1, rtol=1e-5)
    # env 0: p1 < .5 -> repeat; env 1: forced by repeats >= 3; env 2: tie -> argmax picks 0.
    np.testing.assert_array_equal(out["b"].numpy(), [0, 1, 0])
    np.testing.assert_array_equal(out["sampled_b"].numpy(), [0, 0, 0])  # env 1: forced only
    np.testing.assert_array_equal(out["repeats"].numpy(), [2, 1, 1])
    np.testing.assert_allclose(out["action"].numpy()[:, 0], [0.9, x[1], 0.0], rtol=1e-6)


def test_act_step_sampled_b_frequency_matches_probability():
    traj = Trajectory("constant")
    n = 4000
    obs = tf.fill([n, 1], 0.3)
    tau = tf.fill([n, 1, 1], 0.1)
    out = act_step(
        _FixedActor(), _LinearCritics(1.0), traj, obs, tf.zeros([n], tf.bool), tau,
        tf.zeros([n], tf.int32), tf.constant([3, 4]), alpha_b=0.2, greedy=False,
    )  # fmt: skip
    p1 = out["p_b1"].numpy()
    assert p1.std() < 0.05  # noise std e^-3 barely moves the sample
    assert abs(out["b"].numpy().mean() - p1.mean()) < 4 * np.sqrt(0.25 / n)


def _np_follow(kind, a, v, u):
    """ALF's _update_tau."""
    if kind == "linear":
        return np.clip(a + 2 * v, -1, 1), v, u
    v = np.clip(v + 2 * u, -1, 1)
    return np.clip(a + 2 * v, -1, 1), v, u


def _np_from_action(kind, inverse, x, a):
    """ALF's _action2tau."""
    if inverse:
        v = (x - a) / 2
        return (x, v, v / 2) if kind == "quadratic" else (x, v, None)
    if kind == "linear":
        return _np_follow(kind, a, x, None)
    return _np_follow(kind, a, np.zeros_like(x), x)


@pytest.mark.parametrize("kind", ["linear", "quadratic"])
@pytest.mark.parametrize("inverse", [True, False])
def test_trajectory_updates_match_reference_recursions(kind, inverse, rng):
    traj = Trajectory(kind, inverse)
    k, n, adim = traj.order, 6, 2
    tau = rng.uniform(-1, 1, (n, k, adim)).astype(np.float32)
    x = rng.uniform(-1, 1, (n, adim)).astype(np.float32)
    u = tau[:, 2] if k == 3 else None
    # Several steps along the trajectory.
    cur = tau
    a, v = tau[:, 0], tau[:, 1]
    for _ in range(3):
        cur = traj.follow(cur).numpy()
        a, v, _ = _np_follow(kind, a, v, u)
        np.testing.assert_allclose(cur[:, 0], a, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(cur[:, 1], v, rtol=1e-6, atol=1e-6)
    fresh = traj.from_action(x, tau).numpy()
    want = _np_from_action(kind, inverse, x, tau[:, 0])
    for i in range(k):
        np.testing.assert_allclose(fresh[:, i], want[i], rtol=1e-6, atol=1e-6)


def test_constant_trajectory_repeats_and_gradient_flows_to_action():
    traj = Trajectory("constant")
    tau = tf.constant([[[0.3, -0.4]]])
    np.testing.assert_array_equal(traj.follow(tau).numpy(), tau.numpy())
    x = tf.Variable([[0.1, 0.2]])
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(Trajectory("quadratic").from_action(x, tf.zeros([1, 3, 2])))
    # d/dx of (x + (x - 0)/2 + (x - 0)/4) = 1.75
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), [[1.75, 1.75]])


def test_config_validation_and_default_entropies():
    with pytest.raises(ValueError, match="trajectory"):
        TaacConfig(trajectory="cubic")
    with pytest.raises(ValueError, match="mini_batch_length"):
        TaacConfig(mini_batch_length=1)
    with pytest.raises(ValueError, match="b1_advantage_clipping"):
        TaacConfig(b1_advantage_clipping=(1.0, -1.0))
    cfg = TaacConfig(actor_hidden_sizes=["32", "16"], b1_advantage_clipping=["-1", "2"])
    assert cfg.actor_hidden_sizes == (32, 16) and cfg.b1_advantage_clipping == (-1.0, 2.0)
    b_default, a_default = cfg.target_entropies(2)
    assert a_default == pytest.approx(2 * np.log(0.2))
    assert b_default == pytest.approx(-(0.9 * np.log(0.9) + 0.1 * np.log(0.1)))
    assert TaacConfig(trajectory="quadratic").tau_order == 3
