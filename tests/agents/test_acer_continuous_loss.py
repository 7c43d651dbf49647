"""Continuous ACER loss against a slow numpy version of chainerrl's ``ACER.compute_loss`` with a
Gaussian policy (https://github.com/chainer/chainerrl/blob/master/chainerrl/agents/acer.py; Wang et
al., "Sample Efficient Actor-Critic with Experience Replay", 2016,
https://arxiv.org/abs/1611.01224), written per step in the reference's notation.

The stub network's policy mean and standard deviation, V and Q are free variables per step
(``Q(x_t, a) = q0_t + w.a``, standing for the stochastic dueling network's evaluator), so
the loss gradient w.r.t. them is checkable. The numpy side differentiates by hand: the
trust region projects in the reference's phi = (mean, var) (``GaussianDistribution.params``)
or, with ``trust_region_params="loc_scale"``, in (mean, std); the bias correction uses the
sampled action ``a'`` the loss drew (read back from the stub); on the on-policy update
``mu`` is None (rho = 1, no correction).
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

from tests.agents.test_acer_loss import episode_parts, make_batch
from tfagents_vtrace.agents.acer import AcerConfig, acer_loss
from tfagents_vtrace.networks import NetOutput

tfd = tfp.distributions
T, B, A = 6, 3, 2


class StubGaussianNet:
    """Gaussian policy ``(loc, scale)`` ``[T+1, B, A]``, V ``[T+1, B]`` and ``q0``
    ``[T+1, B]`` are variables; Q of given actions is ``q0 + w.a``. Records the actions
    each unroll is given (the second one of a loss call holds the sampled ``a'``)."""

    is_discrete = False
    action_dim = A

    class config:  # noqa: N801 - mimics NetworkConfig's attribute
        q_head = "stochastic_dueling"

    def __init__(self, loc, scale, v, q0, w):
        self.loc, self.scale = tf.Variable(loc), tf.Variable(scale)
        self.v, self.q0 = tf.Variable(v), tf.Variable(q0)
        self.w = tf.constant(w)
        self.seen_actions = []

    def distribution(self, p):
        return tfd.Independent(tfd.Normal(p["loc"], p["scale"]), 1)

    def unroll(self, inputs, state=(), actions=None):
        q = None
        if actions is not None:
            self.seen_actions.append(np.asarray(actions))
            q = self.q0 + tf.reduce_sum(tf.convert_to_tensor(actions) * self.w, -1)
        policy = {"loc": tf.convert_to_tensor(self.loc), "scale": tf.convert_to_tensor(self.scale)}
        return NetOutput(policy, tf.convert_to_tensor(self.v), q, ())


def log_prob(x, m, s):
    return float(np.sum(-0.5 * ((x - m) / s) ** 2 - np.log(s) - 0.5 * np.log(2 * np.pi)))


def grad_log_prob(x, m, s, params):
    """d log N(x; m, s^2) / d phi, phi = (mean, var) or (mean, std)."""
    var = s**2
    if params == "mean_var":
        return np.concatenate([(x - m) / var, -0.5 / var + 0.5 * (x - m) ** 2 / var**2])
    return np.concatenate([(x - m) / var, -1 / s + (x - m) ** 2 / s**3])


def grad_kl(m0, s0, m, s, params):
    """d KL(N(m0, s0^2) || N(m, s^2)) / d phi (summed over the action dimensions)."""
    var, var0 = s**2, s0**2
    if params == "mean_var":
        return np.concatenate([(m - m0) / var, 0.5 / var - 0.5 * (var0 + (m0 - m) ** 2) / var**2])
    return np.concatenate([(m - m0) / var, 1 / s - (var0 + (m0 - m) ** 2) / s**3])


def to_loc_scale(z, s, params):
    """A phi-gradient as gradients w.r.t. (loc, scale): var = scale^2."""
    if params == "mean_var":
        return z[:A], z[A:] * 2 * s
    return z[:A], z[A:]


def reference_continuous(batch, stub, avg, sampled, cfg, on_policy=False):
    """chainerrl ``compute_loss`` per episode part with a Gaussian policy and an SDN-like Q:
    ``(d/d loc, d/d scale, d/d V, d/d q0)``."""
    loc, scale, v, q0, w = (x.numpy().astype(np.float64) for x in
                            (stub.loc, stub.scale, stub.v, stub.q0, stub.w))  # fmt: skip
    avg_loc, avg_scale = avg.loc.numpy(), avg.scale.numpy()
    mu_loc, mu_scale = batch["policy"]["loc"], batch["policy"]["scale"]
    gamma, c, delta, beta = (
        cfg.discount, cfg.truncation_threshold, cfg.trust_region_delta, cfg.entropy_cost
    )  # fmt: skip
    params, norm = cfg.trust_region_params, 1.0 / (T * B)
    d_loc, d_scale, d_v, d_q0 = (np.zeros_like(x) for x in (loc, scale, v, q0))
    for b in range(B):
        for part in episode_parts(batch, b):
            last = part[-1]
            R = 0.0 if batch["terminated"][last, b] else v[last + 1, b]
            Q_ret = Q_opc = R
            for i in reversed(part):
                r, a, m, s = batch["reward"][i, b], batch["action"][i, b], loc[i, b], scale[i, b]
                V = v[i, b]
                mu = (mu_loc[i, b], mu_scale[i, b])
                rho = 1.0 if on_policy else np.exp(log_prob(a, m, s) - log_prob(a, *mu))
                Q_ret = r + gamma * Q_ret
                Q_opc = r + gamma * Q_opc
                advantage = (Q_opc if cfg.use_q_opc else Q_ret) - V
                grad_a = grad_log_prob(a, m, s, params)
                if on_policy:
                    g = -grad_a * advantage
                elif c is None:
                    g = -rho * grad_a * advantage
                else:
                    g = -min(c, rho) * grad_a * advantage
                    a2 = sampled[i, b]  # compute_policy_gradient_sample_correction
                    rho_dash_inv = np.exp(log_prob(a2, *mu) - log_prob(a2, m, s))
                    if not (c > 0 and rho_dash_inv >= 1 / c):
                        weight = max(0.0, 1 - c * rho_dash_inv)
                        g -= weight * grad_log_prob(a2, m, s, params) * (q0[i, b] + w @ a2 - V)
                if cfg.use_trust_region:
                    k = -grad_kl(avg_loc[i, b], avg_scale[i, b], m, s, params)
                    kk = k @ k
                    k_factor = max(0.0, (k @ g - delta) / kk) if kk > 0 else 0.0
                    g = g - k_factor * k
                z_loc, z_scale = to_loc_scale(g, s, params)
                d_loc[i, b] += norm * cfg.pi_loss_coef * z_loc
                d_scale[i, b] += norm * cfg.pi_loss_coef * (z_scale - beta / s)  # dH/ds = 1/s
                Q = q0[i, b] + w @ a
                d_q0[i, b] += norm * cfg.q_loss_coef * (Q - Q_ret)
                v_target = min(1.0, rho) * (Q_ret - Q) + V
                d_v[i, b] += norm * cfg.q_loss_coef * (V - v_target)
                c_trace = min(1.0, rho ** (1 / A))
                Q_ret = c_trace * (Q_ret - Q) + V
                Q_opc = Q_opc - Q + V
    return d_loc, d_scale, d_v, d_q0


def _case(seed):
    rng = np.random.default_rng(seed)
    batch = make_batch(rng, T, B, 2)
    batch["action"] = rng.normal(size=(T, B, A)).astype(np.float32)
    batch["prev_action"] = np.zeros((T + 1, B, A), np.float32)
    batch["policy"] = {
        "loc": rng.normal(scale=0.7, size=(T, B, A)).astype(np.float32),
        "scale": rng.uniform(0.5, 1.5, size=(T, B, A)).astype(np.float32),
    }
    f32 = lambda x: x.astype(np.float32)
    stub = StubGaussianNet(
        f32(rng.normal(size=(T + 1, B, A))), f32(rng.uniform(0.5, 1.5, (T + 1, B, A))),
        f32(rng.normal(size=(T + 1, B))), f32(rng.normal(size=(T + 1, B))),
        f32(rng.normal(size=A)),
    )  # fmt: skip
    avg = StubGaussianNet(
        stub.loc.numpy() + f32(rng.normal(scale=1.0, size=(T + 1, B, A))),
        stub.scale.numpy() * f32(rng.uniform(0.6, 1.6, (T + 1, B, A))),
        stub.v.numpy(), stub.q0.numpy(), stub.w.numpy(),
    )  # fmt: skip
    return batch, stub, avg


CASES = {
    "mean_var": dict(),
    "loc_scale": dict(trust_region_params="loc_scale"),
    "plain_is": dict(truncation_threshold=None),
    "no_trust_region": dict(use_trust_region=False),
    "q_opc_coefficients": dict(use_q_opc=True, pi_loss_coef=0.5, q_loss_coef=0.7),
    "on_policy": dict(),
    "on_policy_loc_scale": dict(trust_region_params="loc_scale"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_gaussian_loss_gradients_match_the_reference(case):
    """Issue #16 items 3-5 for continuous actions: (mean, var) trust region by default,
    pi_loss_coef scaling the entropy, rho = 1 on the on-policy update."""
    batch, stub, avg = _case(seed=list(CASES).index(case))
    on_policy = case.startswith("on_policy")
    kw = dict(truncation_threshold=1.0, trust_region_delta=0.05, entropy_cost=0.2, discount=0.9)
    cfg = AcerConfig(**{**kw, **CASES[case]})
    with tf.GradientTape() as tape:
        loss, metrics = acer_loss(stub, avg, cfg, batch, on_policy=on_policy)
    got = [g.numpy() for g in tape.gradient(loss, [stub.loc, stub.scale, stub.v, stub.q0])]
    sampled = None
    if cfg.truncation_threshold is not None and not on_policy:
        sampled = stub.seen_actions[1][:-1]  # the a' ~ pi the loss drew
    want = reference_continuous(batch, stub, avg, sampled, cfg, on_policy)
    for name, g, w in zip(["loc", "scale", "v", "q0"], got, want):
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-6, err_msg=name)
    if cfg.use_trust_region:
        assert 0.0 < metrics["trust_region_active"] < 1.0  # the projection bound somewhere
    if on_policy:
        assert metrics["rho"] == 1.0 and len(stub.seen_actions) == 1  # no a' drawn


def test_mean_var_and_loc_scale_projections_differ():
    """The choice of phi changes the projected step (not only its parametrisation)."""
    batch, stub, avg = _case(seed=0)
    out = {}
    for params in ("mean_var", "loc_scale"):
        cfg = AcerConfig(trust_region_delta=0.05, trust_region_params=params)
        with tf.GradientTape() as tape:
            loss, _ = acer_loss(stub, avg, cfg, batch)
        out[params] = tape.gradient(loss, stub.scale).numpy()
    assert np.abs(out["mean_var"] - out["loc_scale"]).max() > 1e-3
