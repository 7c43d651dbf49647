"""Statistical properties of ACER's policy gradient (https://arxiv.org/abs/1611.01224, Sec. 3)
on a one-step bandit with a softmax policy, whose exact gradient is known:

    J(theta) = sum_a pi(a) Q(a),    dJ/dtheta_j = pi_j (Q_j - V),   V = sum_a pi(a) Q(a).

Actions come from a behaviour policy mu that rarely picks the target's favourite action, so
plain importance weights are large. Each sample's estimate is minus the gradient of the
per-sample ACER loss (``acer_loss`` with a stub network whose logits are per-sample
variables). And the trust-region step: its linearised KL(avg || pi) increase is bounded by
delta, for categorical and Gaussian policies.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

from tests.agents.test_acer_loss import StubNet
from tfagents_vtrace.agents.acer import AcerConfig, acer_loss, project_policy_loss

tfd = tfp.distributions

PI_LOGITS = np.array([2.0, 0.0, 0.0, -0.5], np.float32)
MU_LOGITS = np.array([-2.0, 0.0, 0.5, 0.0], np.float32)
Q = np.array([1.0, -0.5, 0.5, 2.0], np.float32)
N = 20_000


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _estimates(truncation, behaviour_logits_in_batch, seed=0):
    """Per-sample gradient estimates ``[N, A]`` of dJ/dtheta from samples a ~ mu."""
    rng = np.random.default_rng(seed)
    mu = _softmax(MU_LOGITS)
    actions = rng.choice(len(Q), size=N, p=mu).astype(np.int32)
    rewards = Q[actions] + rng.normal(scale=0.5, size=N).astype(np.float32)
    batch = {
        "observation": np.zeros((2, N, 1), np.float32),
        "first": np.array([[True] * N, [True] * N]),
        "reset": np.array([[False] * N, [True] * N]),
        "prev_action": np.zeros((2, N), np.int32),
        "prev_reward": np.zeros((2, N), np.float32),
        "action": actions[None],
        "reward": rewards[None],
        "terminated": np.ones((1, N), bool),
        "truncated": np.zeros((1, N), bool),
        "policy": {"logits": np.broadcast_to(behaviour_logits_in_batch, (1, N, len(Q))).copy()},
        "state": (),
    }
    logits = np.broadcast_to(PI_LOGITS, (2, N, len(Q))).copy()
    q = np.broadcast_to(Q, (2, N, len(Q))).copy()
    net = StubNet(logits, q)
    cfg = AcerConfig(truncation_threshold=truncation, use_trust_region=False, entropy_cost=0.0)
    with tf.GradientTape() as tape:
        loss, _ = acer_loss(net, net, cfg, batch)
    grad = tape.gradient(loss, net.logits).numpy()[0]
    return -grad * N  # the loss is a mean over the N samples


def _exact():
    pi = _softmax(PI_LOGITS)
    return pi * (Q - pi @ Q)


@pytest.fixture(scope="module")
def estimators():
    return {
        "plain_is": _estimates(None, MU_LOGITS),
        "truncated_bc": _estimates(1.0, MU_LOGITS),
        "ignore_mu": _estimates(None, PI_LOGITS),  # the learner is told mu = pi: rho = 1
    }


def _bias_and_se(est):
    mean = est.mean(0)
    se = est.std(0, ddof=1) / np.sqrt(len(est))
    return mean - _exact(), se


def test_untruncated_importance_sampling_is_unbiased(estimators):
    bias, se = _bias_and_se(estimators["plain_is"])
    assert np.all(np.abs(bias) < 4.0 * se), (bias, se)


def test_truncation_with_bias_correction_is_unbiased_and_lower_variance(estimators):
    bias, se = _bias_and_se(estimators["truncated_bc"])
    assert np.all(np.abs(bias) < 4.0 * se), (bias, se)  # exact critic: no bias left
    var_tbc = estimators["truncated_bc"].var(0).sum()
    var_is = estimators["plain_is"].var(0).sum()
    assert var_tbc < 0.5 * var_is, (var_tbc, var_is)


def test_bias_lower_than_ignoring_the_behaviour_policy(estimators):
    bias_tbc, se_tbc = _bias_and_se(estimators["truncated_bc"])
    bias_ign, se_ign = _bias_and_se(estimators["ignore_mu"])
    assert np.linalg.norm(bias_ign) > 10.0 * np.linalg.norm(se_ign)  # really biased
    assert np.linalg.norm(bias_tbc) < 0.2 * np.linalg.norm(bias_ign)


def _categorical_case(rng, t, b, a):
    params = {"logits": tf.Variable(rng.normal(size=(t, b, a)).astype(np.float32))}
    avg_logits = rng.normal(size=(t, b, a))
    avg = tfd.Categorical(logits=avg_logits.astype(np.float32))
    actions = rng.integers(0, a, (t, b)).astype(np.int32)
    adv = rng.normal(scale=3.0, size=(t, b)).astype(np.float32)

    def dist(p):
        return tfd.Categorical(logits=p["logits"])

    def np_kl(p):  # float64 KL(avg || pi), independent of TFP
        log_avg = np.log(_softmax(avg_logits))
        log_pi = np.log(_softmax(p["logits"]))
        return (np.exp(log_avg) * (log_avg - log_pi)).sum(-1)

    return params, avg, dist, actions, adv, np_kl


def _gaussian_case(rng, t, b, a):
    params = {
        "loc": tf.Variable(rng.normal(size=(t, b, a)).astype(np.float32)),
        "scale": tf.Variable(rng.uniform(0.5, 1.5, size=(t, b, a)).astype(np.float32)),
    }
    m0, s0 = rng.normal(size=(t, b, a)), rng.uniform(0.5, 1.5, size=(t, b, a))
    avg = tfd.Independent(tfd.Normal(m0.astype(np.float32), s0.astype(np.float32)), 1)
    actions = rng.normal(size=(t, b, a)).astype(np.float32)
    adv = rng.normal(scale=3.0, size=(t, b)).astype(np.float32)

    def dist(p):
        return tfd.Independent(tfd.Normal(p["loc"], p["scale"]), 1)

    def np_kl(p):  # float64 KL(N(m0, s0) || N(loc, scale)), summed over the action dims
        m1, s1 = p["loc"], p["scale"]
        return (np.log(s1 / s0) + (s0**2 + (m0 - m1) ** 2) / (2 * s1**2) - 0.5).sum(-1)

    return params, avg, dist, actions, adv, np_kl


@pytest.mark.parametrize("case", [_categorical_case, _gaussian_case])
def test_trust_region_step_respects_the_linearised_kl_bound(case):
    rng = np.random.default_rng(3)
    delta, eta = 0.1, 1e-8
    params, avg, dist, actions, adv, np_kl = case(rng, 5, 8, 3)
    loss_fn = lambda p: -adv * dist(p).log_prob(actions)
    kl_fn = lambda p: tfd.kl_divergence(avg, dist(p))
    keys = sorted(params)
    with tf.GradientTape(persistent=True) as tape:
        surrogate, scale, _ = project_policy_loss(params, loss_fn, kl_fn, delta)
        total_surrogate = tf.reduce_sum(surrogate)
        total_loss = tf.reduce_sum(loss_fn(params))
        total_kl = tf.reduce_sum(kl_fn(params))
    z = [tape.gradient(total_surrogate, params[k]).numpy() for k in keys]
    g = [tape.gradient(total_loss, params[k]).numpy() for k in keys]
    dkl = [tape.gradient(total_kl, params[k]).numpy() for k in keys]
    # Linearised KL change of the step phi - eta z, per sample: eta * (-dKL . z) <= eta delta.
    lin = -sum((dk * zk).sum(-1) for dk, zk in zip(dkl, z))
    unprojected = -sum((dk * gk).sum(-1) for dk, gk in zip(dkl, g))
    assert np.any(unprojected > delta + 1e-3)  # the constraint binds somewhere
    tol = 1e-4 + 1e-5 * np.abs(unprojected)  # float32 rounding of k.g in the projection
    assert np.all(lin <= delta + tol), (lin - delta).max()
    inactive = scale.numpy() == 0.0
    assert inactive.any()
    for zk, gk in zip(z, g):
        np.testing.assert_allclose(zk[inactive], gk[inactive], rtol=1e-5, atol=1e-6)
    # The actual KL after a small step grows by at most eta * delta (+ second order).
    phi = {k: params[k].numpy().astype(np.float64) for k in keys}
    before = np_kl(phi)
    after = np_kl({k: phi[k] - eta * zk for k, zk in zip(keys, z)})
    growth = (after - before) / eta
    assert np.all(growth <= delta + tol), (growth - delta).max()
    unprojected_after = np_kl({k: phi[k] - eta * gk for k, gk in zip(keys, g)})
    assert np.any((unprojected_after - before) / eta > delta + 1e-2)  # g alone would exceed it
