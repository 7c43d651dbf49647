"""ACER loss against a naive numpy version in the paper's notation (chainerrl's per-step
loop: Algorithm 2 of https://arxiv.org/abs/1611.01224), on a stub network whose logits and
Q values are free variables per step, so the loss gradient w.r.t. them is checkable."""

import numpy as np
import pytest
import tensorflow as tf

from tfagents_vtrace.agents.acer import AcerConfig, acer_loss
from tfagents_vtrace.networks import NetOutput


class StubNet:
    """Logits ``[T+1, B, A]`` and Q ``[T+1, B, A]`` are variables; V head output is 0."""

    is_discrete = True

    class config:  # noqa: N801 - mimics NetworkConfig's attribute
        q_head = "discrete"

    def __init__(self, logits, q):
        self.logits = tf.Variable(logits, dtype=tf.float32)
        self.q = tf.Variable(q, dtype=tf.float32)

    def unroll(self, inputs, state=(), actions=None):
        v = tf.zeros(self.logits.shape[:2])
        return NetOutput({"logits": tf.convert_to_tensor(self.logits)}, v, self.q + 0.0, ())


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _batch(rng, t, b, a):
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


def _numpy_grads(batch, logits, q, avg_logits, cfg):
    """d loss / d logits and d loss / d Q, written per step as in chainerrl's ACER."""
    t_len, b_len, _ = batch["policy"]["logits"].shape
    gamma, c, delta = cfg.discount, cfg.truncation_threshold, cfg.trust_region_delta
    pi, mu, avg = _softmax(logits), _softmax(batch["policy"]["logits"]), _softmax(avg_logits)
    v = (pi * q).sum(-1)
    d_logits, d_q = np.zeros_like(logits), np.zeros_like(q)
    scale = 1.0 / (t_len * b_len)
    for b in range(b_len):
        steps = [t for t in range(t_len) if not batch["reset"][t, b]]
        segments, cur = [], []
        for t in steps:
            cur.append(t)
            if batch["terminated"][t, b] or batch["truncated"][t, b]:
                segments.append(cur)
                cur = []
        if cur:
            segments.append(cur)
        for seg in segments:
            last = seg[-1]
            if batch["terminated"][last, b]:
                q_ret = 0.0
            else:  # truncated or the unroll's end: bootstrap from the next observation
                q_ret = v[last + 1, b]
            for i in reversed(seg):
                a = batch["action"][i, b]
                rho_all = pi[i, b] / mu[i, b]
                q_ret = batch["reward"][i, b] + gamma * q_ret
                adv = q_ret - v[i, b]
                onehot = np.eye(len(pi[i, b]))[a]
                w = rho_all[a] if c is None else min(c, rho_all[a])
                g = -w * adv * (onehot - pi[i, b])  # d(-w log pi(a) adv)/d logits
                if c is not None:
                    weights = np.maximum(0.0, 1.0 - c / rho_all) * pi[i, b]
                    corr = weights * (q[i, b] - v[i, b])
                    g += -(corr[:, None] * (np.eye(len(corr)) - pi[i, b][None])).sum(0)
                if cfg.use_trust_region:
                    k = avg[i, b] - pi[i, b]  # -d KL(avg || pi) / d logits
                    kk = k @ k
                    g = g - (max(0.0, (k @ g - delta) / kk) if kk > 0 else 0.0) * k
                d_logits[i, b] += scale * cfg.pi_loss_coef * g
                d_q[i, b, a] += scale * cfg.q_loss_coef * (q[i, b, a] - q_ret)
                rho = min(1.0, rho_all[a])
                q_ret = rho * (q_ret - q[i, b, a]) + v[i, b]
    return d_logits, d_q


@pytest.mark.parametrize("c", [None, 1.0])
@pytest.mark.parametrize("trust_region", [False, True])
def test_discrete_loss_gradients_match_naive_numpy(c, trust_region):
    rng = np.random.default_rng(0)
    t, b, a = 6, 3, 4
    batch = _batch(rng, t, b, a)
    logits = rng.normal(size=(t + 1, b, a)).astype(np.float32)
    q = rng.normal(size=(t + 1, b, a)).astype(np.float32)
    avg_logits = logits + rng.normal(scale=2.0, size=logits.shape).astype(np.float32)
    cfg = AcerConfig(
        truncation_threshold=c,
        use_trust_region=trust_region,
        trust_region_delta=0.05,
        entropy_cost=0.0,
        discount=0.9,
    )
    net, avg = StubNet(logits, q), StubNet(avg_logits, q)
    with tf.GradientTape() as tape:
        loss, metrics = acer_loss(net, avg, cfg, batch)
    d_logits, d_q = tape.gradient(loss, [net.logits, net.q])
    want_logits, want_q = _numpy_grads(batch, logits, q, avg_logits, cfg)
    np.testing.assert_allclose(d_logits.numpy(), want_logits, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(d_q.numpy(), want_q, rtol=1e-4, atol=1e-6)
    if trust_region:
        assert 0.0 < metrics["trust_region_active"] <= 1.0  # the projection was exercised


def test_entropy_bonus_gradient():
    """With only the entropy term, d loss / d logits = -beta/(TB) dH/dlogits on valid steps."""
    rng = np.random.default_rng(1)
    t, b, a = 4, 2, 3
    batch = _batch(rng, t, b, a)
    batch["reset"][:] = False
    batch["terminated"][:] = False
    batch["truncated"][:] = False
    logits = rng.normal(size=(t + 1, b, a)).astype(np.float32)
    cfg = AcerConfig(pi_loss_coef=0.0, q_loss_coef=0.0, entropy_cost=0.3)
    net = StubNet(logits, np.zeros_like(logits))
    with tf.GradientTape() as tape:
        loss, _ = acer_loss(net, net, cfg, batch)
    got = tape.gradient(loss, net.logits).numpy()
    p = _softmax(logits[:-1])
    h = -(p * np.log(p)).sum(-1, keepdims=True)
    dh = -p * (np.log(p) + h)
    np.testing.assert_allclose(got[:-1], -0.3 / (t * b) * dh, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(got[-1], 0.0)


def test_acer_loss_needs_a_q_head():
    class NoQ(StubNet):
        class config:  # noqa: N801
            q_head = None

    net = NoQ(np.zeros((5, 2, 2)), np.zeros((5, 2, 2)))
    with pytest.raises(ValueError, match="Q head"):
        acer_loss(net, net, AcerConfig(), _batch(np.random.default_rng(0), 4, 2, 2))
