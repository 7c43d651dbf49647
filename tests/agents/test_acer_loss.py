"""Discrete ACER loss against a slow numpy version of chainerrl's ``ACER.compute_loss``
(https://github.com/chainer/chainerrl/blob/master/chainerrl/agents/acer.py; Algorithm 2 of Wang et
al., "Sample Efficient Actor-Critic with Experience Replay", 2016,
https://arxiv.org/abs/1611.01224), written per step in the reference's notation, on a stub network
whose logits and Q values are free variables per step, so the loss gradient w.r.t. them is
checkable.

The numpy side follows the reference's options: ``pi_loss_coef`` scales the policy loss
*with* its entropy term, V = sum_a pi(a) Q(a) only (no V-head loss), ``action_distrib_mu =
None`` (rho = 1, no truncation, no correction) on the on-policy update, ``use_Q_opc``, and
the trust region on the logits. Each episode part of a batch column is one reference update
(its own backward loop); the batch's normalisation is 1/(T B) (see docs/reference_map.md).
"""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from tfagents_vtrace.agents.acer import AcerConfig, acer_loss
from tfagents_vtrace.networks import NetOutput


class StubNet:
    """Logits ``[T+1, B, A]`` and Q ``[T+1, B, A]`` are variables; the value output is
    ``sum_a pi(a) Q(a)``, as the network's with the discrete Q head."""

    is_discrete = True

    class config:  # noqa: N801 - mimics NetworkConfig's attribute
        q_head = "discrete"

    def __init__(self, logits, q):
        self.logits = tf.Variable(logits, dtype=tf.float32)
        self.q = tf.Variable(q, dtype=tf.float32)

    def unroll(self, inputs, state=(), actions=None):
        v = tf.reduce_sum(tf.nn.softmax(self.logits) * self.q, -1)
        return NetOutput({"logits": tf.convert_to_tensor(self.logits)}, v, self.q + 0.0, ())


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def make_batch(rng, t, b, a):
    terminated = np.zeros((t, b), bool)
    truncated = np.zeros((t, b), bool)
    reset = np.zeros((t + 1, b), bool)
    terminated[1, 0], reset[2, 0] = True, True  # env 0: an episode ends at step 1
    truncated[3, 1], reset[4, 1] = True, True  # env 1: a time limit at step 3
    first = np.zeros((t + 1, b), bool)
    first[1:] = reset[:-1]
    return {
        "observation": np.zeros((t + 1, b, 1), np.float32),
        "first": first,
        "reset": reset,
        "prev_action": np.zeros((t + 1, b), np.int32),
        "prev_reward": np.zeros((t + 1, b), np.float32),
        "action": rng.integers(0, a, (t, b)).astype(np.int32),
        "reward": rng.normal(size=(t, b)).astype(np.float32),
        "terminated": terminated,
        "truncated": truncated,
        "policy": {"logits": rng.normal(size=(t, b, a)).astype(np.float32)},
        "state": (),
    }


def episode_parts(batch, b):
    """The reference's updates of column ``b``: lists of steps, each ending at an episode end
    or at the unroll's end (reset steps are not steps of any episode)."""
    parts, cur = [], []
    for t in range(batch["reward"].shape[0]):
        if batch["reset"][t, b]:
            continue
        cur.append(t)
        if batch["terminated"][t, b] or batch["truncated"][t, b]:
            parts.append(cur)
            cur = []
    return parts + ([cur] if cur else [])


def reference_discrete(batch, logits, q, avg_logits, cfg, on_policy=False):
    """chainerrl ``compute_loss`` per episode part: ``(d loss/d logits, d loss/d Q, kls)``,
    ``kls`` the per-step KL(avg || pi) in the order the reference computes them."""
    t_len, b_len, n_act = batch["policy"]["logits"].shape
    gamma, c, delta, beta = (
        cfg.discount, cfg.truncation_threshold, cfg.trust_region_delta, cfg.entropy_cost
    )  # fmt: skip
    pi_all, avg_all = softmax(logits), softmax(avg_logits)
    mu_all = softmax(batch["policy"]["logits"])
    q_values = q
    eye = np.eye(n_act)
    d_logits, d_q, kls = np.zeros_like(logits), np.zeros_like(q), []
    norm = 1.0 / (t_len * b_len)  # the batch's normalize_loss_by_steps
    for b in range(b_len):
        for part in episode_parts(batch, b):
            last = part[-1]
            if batch["terminated"][last, b]:
                R = 0.0
            else:  # time limit or the unroll's end: V of the next observation
                R = float(pi_all[last + 1, b] @ q_values[last + 1, b])
            Q_ret = Q_opc = R
            for i in reversed(part):
                r, a = float(batch["reward"][i, b]), batch["action"][i, b]
                pi, avg = pi_all[i, b], avg_all[i, b]
                v = float(pi @ q_values[i, b])
                rho = 1.0 if on_policy else pi[a] / mu_all[i, b][a]
                Q_ret = r + gamma * Q_ret
                Q_opc = r + gamma * Q_opc
                advantage = (Q_opc if cfg.use_q_opc else Q_ret) - v
                dlogp = eye - pi[None, :]  # row x: d log pi(x) / d logits
                if on_policy:
                    g = -dlogp[a] * advantage
                elif c is None:
                    g = -rho * dlogp[a] * advantage
                else:
                    g = -min(c, rho) * dlogp[a] * advantage
                    rho_all_inv = mu_all[i, b] / pi
                    weight = np.maximum(1 - c * rho_all_inv, 0) * pi
                    g -= (weight * (q_values[i, b] - v)) @ dlogp
                if cfg.use_trust_region:
                    kls.append(float(avg @ (np.log(avg) - np.log(pi))))
                    k = avg - pi  # d(-KL(avg || pi)) / d logits
                    kk = k @ k
                    k_factor = max(0.0, (k @ g - delta) / kk) if kk > 0 else 0.0
                    z = g - k_factor * k
                else:
                    z = g
                entropy_grad = -pi * (np.log(pi) + (-(pi * np.log(pi)).sum()))  # dH/dlogits
                d_logits[i, b] += norm * cfg.pi_loss_coef * (z - beta * entropy_grad)
                Q = q_values[i, b, a]
                d_q[i, b, a] += norm * cfg.q_loss_coef * (Q - Q_ret)
                Q_ret = min(1.0, rho) * (Q_ret - Q) + v
                Q_opc = Q_opc - Q + v
    return d_logits, d_q, kls


CASES = {
    "plain_is": dict(truncation_threshold=None, use_trust_region=False),
    "plain_is_trust_region": dict(truncation_threshold=None),
    "truncated": dict(truncation_threshold=1.0, use_trust_region=False),
    "truncated_trust_region": dict(truncation_threshold=1.0),
    "q_opc": dict(truncation_threshold=1.0, use_q_opc=True),
    # pi_loss_coef scales the entropy term with the policy gradient (issue #16, item 3).
    "coefficients": dict(truncation_threshold=1.0, pi_loss_coef=0.5, q_loss_coef=0.7,
                         entropy_cost=0.3),
}  # fmt: skip


def _grads(batch, logits, q, avg_logits, cfg, on_policy=False):
    net, avg = StubNet(logits, q), StubNet(avg_logits, q)
    with tf.GradientTape() as tape:
        loss, metrics = acer_loss(net, avg, cfg, batch, on_policy=on_policy)
    d_logits, d_q = tape.gradient(loss, [net.logits, net.q])
    return d_logits.numpy(), d_q.numpy(), metrics


def _case(seed=0, t=6, b=3, a=4):
    rng = np.random.default_rng(seed)
    batch = make_batch(rng, t, b, a)
    logits = rng.normal(size=(t + 1, b, a)).astype(np.float32)
    q = rng.normal(size=(t + 1, b, a)).astype(np.float32)
    avg_logits = logits + rng.normal(scale=2.0, size=logits.shape).astype(np.float32)
    return batch, logits, q, avg_logits


@pytest.mark.parametrize("case", list(CASES))
def test_discrete_loss_gradients_match_the_reference(case):
    batch, logits, q, avg_logits = _case()
    kw = dict(trust_region_delta=0.05, entropy_cost=0.0, discount=0.9)
    cfg = AcerConfig(**{**kw, **CASES[case]})
    got_logits, got_q, metrics = _grads(batch, logits, q, avg_logits, cfg)
    want_logits, want_q, _ = reference_discrete(batch, logits, q, avg_logits, cfg)
    np.testing.assert_allclose(got_logits, want_logits, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got_q, want_q, rtol=1e-4, atol=1e-6)
    if cfg.use_trust_region:
        assert 0.0 < metrics["trust_region_active"] <= 1.0  # the projection was exercised


@pytest.mark.parametrize("truncation", [None, 1.0])
def test_on_policy_update_is_the_references_rho_one(truncation):
    """Issue #16, item 5: the on-policy update ignores the stored mu (here far from pi):
    rho = 1, no truncation, no bias correction; ``on_policy_importance_weights=True`` keeps
    the first version's importance-weighted update (the replay's)."""
    batch, logits, q, avg_logits = _case(seed=1)
    cfg = AcerConfig(
        truncation_threshold=truncation, trust_region_delta=0.05, entropy_cost=0.1, discount=0.9
    )
    got_logits, got_q, metrics = _grads(batch, logits, q, avg_logits, cfg, on_policy=True)
    want_logits, want_q, _ = reference_discrete(batch, logits, q, avg_logits, cfg, True)
    np.testing.assert_allclose(got_logits, want_logits, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got_q, want_q, rtol=1e-4, atol=1e-6)
    assert metrics["rho"] == 1.0
    off = dataclasses.replace(cfg, on_policy_importance_weights=True)
    got_logits, got_q, _ = _grads(batch, logits, q, avg_logits, off, on_policy=True)
    want_logits, want_q, _ = reference_discrete(batch, logits, q, avg_logits, off, False)
    np.testing.assert_allclose(got_logits, want_logits, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got_q, want_q, rtol=1e-4, atol=1e-6)


def test_entropy_bonus_gradient():
    """With only the entropy term, d loss / d logits = -pi_coef beta/(TB) dH/dlogits."""
    rng = np.random.default_rng(1)
    t, b, a = 4, 2, 3
    batch = make_batch(rng, t, b, a)
    batch["reset"][:] = False
    batch["terminated"][:] = False
    batch["truncated"][:] = False
    batch["reward"][:] = 0.0
    logits = rng.normal(size=(t + 1, b, a)).astype(np.float32)
    cfg = AcerConfig(pi_loss_coef=0.5, q_loss_coef=0.0, entropy_cost=0.3)
    net = StubNet(logits, np.zeros_like(logits))  # Q = 0: no policy-gradient term
    with tf.GradientTape() as tape:
        loss, _ = acer_loss(net, net, cfg, batch)
    got = tape.gradient(loss, net.logits).numpy()
    p = softmax(logits[:-1])
    h = -(p * np.log(p)).sum(-1, keepdims=True)
    dh = -p * (np.log(p) + h)
    np.testing.assert_allclose(got[:-1], -0.5 * 0.3 / (t * b) * dh, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(got[-1], 0.0)


def test_acer_loss_needs_a_q_head():
    class NoQ(StubNet):
        class config:  # noqa: N801
            q_head = None

    net = NoQ(np.zeros((5, 2, 2)), np.zeros((5, 2, 2)))
    with pytest.raises(ValueError, match="Q head"):
        acer_loss(net, net, AcerConfig(), make_batch(np.random.default_rng(0), 4, 2, 2))
