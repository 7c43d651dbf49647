"""A2C: config validation, the loss against a numpy reference, entropy annealing, strategies,
the registry hook and a short smoke train through the runtime."""

import dataclasses
import json
import os

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tests.agents._unroll_batch import unroll_batch
from tfagents_vtrace.agents import get_agent, register_agent
from tfagents_vtrace.agents.a2c import A2CConfig, A2CLearner, a2c_loss, entropy_coefficient
from tfagents_vtrace.networks import NetInputs, NetworkConfig, make_network

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Discrete(3)
GAMMA = 0.9


def _network(seed=0):
    tf.keras.utils.set_random_seed(seed)
    return make_network(NetworkConfig(hidden_sizes=(8,), policy_init_scale=1.0), OBS, ACT)


def _batch(rng, t=6, b=3, truncate=(), terminate=()):
    """A batch in the runtime's layout; (env, step) pairs in truncate/terminate end there."""
    return unroll_batch(rng, t, b, ACT.n, truncate, terminate)


def _numpy_loss(batch, values, logits, lam, baseline_cost, beta, normalize=False):
    """Slow A3C/GAE loss in the papers' notation, one env and one step at a time; with
    ``normalize``, the policy term's advantages standardised over the unmasked steps."""
    t, b = batch["reward"].shape
    adv, ret = np.zeros((t, b)), np.zeros((t, b))
    for e in range(b):
        a_next = 0.0
        for s in reversed(range(t)):
            m = 0.0 if batch["reset"][s, e] else 1.0
            r = batch["reward"][s, e] + GAMMA * batch["truncated"][s, e] * values[s + 1, e]
            d = GAMMA * (1 - batch["terminated"][s, e]) * (1 - batch["truncated"][s, e]) * m
            delta = r + d * values[s + 1, e] - values[s, e]
            a_next = delta + d * lam * a_next
            adv[s, e], ret[s, e] = a_next, a_next + values[s, e]
    z = logits - logits.max(-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(-1, keepdims=True))
    logp_a = np.take_along_axis(log_p, batch["action"][..., None], -1)[..., 0]
    ent = -(np.exp(log_p) * log_p).sum(-1)
    mask = 1.0 - batch["reset"][:-1]
    n = t * b
    if normalize:
        valid = adv[mask == 1]
        adv = (adv - valid.mean()) / (valid.std() + 1e-8)
    pg = -(mask * logp_a * adv).sum() / n
    bl = 0.5 * (mask * (ret - values[:-1]) ** 2).sum() / n
    h = (mask * ent).sum() / n
    return pg + baseline_cost * bl - beta * h, ret, pg, bl, h


@pytest.mark.parametrize("field,value", [
    ("discount", 0.0), ("gae_lambda", 1.5), ("learning_rate", -1.0), ("optimizer", "sgd"),
    ("entropy_cost", -0.1), ("entropy_cost_end", float("nan")), ("max_grad_norm", -1.0),
    ("reward_clipping", "abs_two"), ("rmsprop_decay", 1.0), ("max_nonfinite_updates", 0),
    ("normalize_advantages", 1),
])  # fmt: skip
def test_bad_config_value_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        A2CConfig(**{field: value})


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("lam", [1.0, 0.8])
def test_loss_matches_numpy_reference(rng, lam, normalize):
    batch = _batch(rng, truncate=[(0, 2)], terminate=[(1, 3)])
    net = _network()
    inputs = NetInputs(*(batch[k] for k in ("observation", "first", "prev_action", "prev_reward")))
    out = net.unroll(inputs, ())
    values, logits = out.value.numpy(), out.policy["logits"].numpy()[:-1]
    config = A2CConfig(
        discount=GAMMA, gae_lambda=lam, baseline_cost=0.7, value_target="lambda",
        loss_reduction="mean", normalize_advantages=normalize,
    )  # fmt: skip
    t, b = batch["reward"].shape
    loss, metrics = a2c_loss(net, config, batch, 0.3, 1.0 / (t * b))
    expected, ret, pg, bl, h = _numpy_loss(batch, values, logits, lam, 0.7, 0.3, normalize)
    if normalize:  # the raw advantages' policy term differs
        assert abs(_numpy_loss(batch, values, logits, lam, 0.7, 0.3)[2] - pg) > 1e-3
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(metrics["pg_loss"]), pg, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(metrics["baseline_loss"]), bl, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(metrics["entropy"]), h, rtol=1e-5, atol=1e-6)
    assert float(metrics["mean_abs_log_rho"]) > 0.0  # random behaviour logits: off-policy
    if lam == 1.0:  # GAE(lambda=1) is A3C's n-step return R_t = r'_t + d_t R_{t+1}
        r = batch["reward"]
        np.testing.assert_allclose(ret[5, 0], r[5, 0] + GAMMA * values[6, 0], rtol=1e-5)
        np.testing.assert_allclose(ret[2, 0], r[2, 0] + GAMMA * values[3, 0], rtol=1e-5)
        np.testing.assert_allclose(ret[3, 1], r[3, 1], rtol=1e-5)  # terminated: no bootstrap
        np.testing.assert_allclose(ret[1, 1], r[1, 1] + GAMMA * (r[2, 1] + GAMMA * r[3, 1]),
                                   rtol=1e-5)  # fmt: skip


def _fork_discount(x, gamma):
    """The fork's ``discount``: ``y_i = sum_{k>=i} gamma^(k-i) x_k`` (its lfilter, as a loop)."""
    y, acc = np.zeros(len(x)), 0.0
    for i in reversed(range(len(x))):
        acc = x[i] + gamma * acc
        y[i] = acc
    return y


def _fork_loss(batch, values, logits, lam, beta_v, beta_e):
    """The A3C meta-RL fork's loss (``a3c_meta_rl.txt``: ``process_rollout`` and the A3C
    graph), one rollout per env: no episode boundary inside, ``r = 0`` after a terminal."""
    t, b = batch["reward"].shape
    z = logits - logits.max(-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(-1, keepdims=True))
    total = 0.0
    for e in range(b):
        terminal = bool(batch["terminated"][:, e].any())
        r = 0.0 if terminal else values[t, e]
        rewards = batch["reward"][:, e].astype(np.float64)
        v_pred = np.append(values[:t, e], r)
        batch_return = _fork_discount(np.append(rewards, r), GAMMA)[:-1]
        delta = rewards + GAMMA * v_pred[1:] - v_pred[:-1]
        batch_adv = _fork_discount(delta, GAMMA * lam)
        ac = np.eye(ACT.n)[batch["action"][:, e]]
        pi_loss = -np.sum(np.sum(log_p[:, e] * ac, 1) * batch_adv)
        vf_loss = beta_v * np.sum(np.square(values[:t, e] - batch_return))
        entropy = -np.sum(np.exp(log_p[:, e]) * log_p[:, e])
        total += pi_loss + 0.05 * vf_loss - beta_e * entropy
    return total


@pytest.mark.parametrize("lam", [1.0, 0.8])
def test_reference_defaults_match_the_a3c_meta_rl_fork_loss(rng, lam):
    """The reference preset's value_target="nstep" and loss_reduction="sum"
    (``configs/a2c_reference.cfg``), with baseline_cost = 0.1 * BETA_V, give the fork's loss
    (summed over the rollouts of the batch's envs)."""
    from tfagents_vtrace.api import make_configs

    reference = make_configs(flagfile="a2c_reference").agent_config
    batch = _batch(rng, terminate=[(1, 5)])  # env 1's rollout ends in a terminal
    net = _network()
    inputs = NetInputs(*(batch[k] for k in ("observation", "first", "prev_action", "prev_reward")))
    out = net.unroll(inputs, ())
    values, logits = out.value.numpy(), out.policy["logits"].numpy()[:-1]
    beta_v, beta_e = 0.05, 0.3
    config = dataclasses.replace(
        reference, discount=GAMMA, gae_lambda=lam, baseline_cost=0.1 * beta_v
    )
    assert (config.value_target, config.loss_reduction) == ("nstep", "sum")
    t, b = batch["reward"].shape
    loss, metrics = a2c_loss(net, config, batch, beta_e, 1.0 / (t * b))
    expected = _fork_loss(batch, values, logits, lam, beta_v, beta_e)
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(float(metrics["loss"]), expected / (t * b), rtol=1e-5, atol=1e-6)
    if lam < 1.0:  # the TD(lambda) target differs from the fork's n-step target
        lam_config = dataclasses.replace(config, value_target="lambda")
        lam_loss, _ = a2c_loss(net, lam_config, batch, beta_e, 1.0 / (t * b))
        assert abs(float(lam_loss) - expected) > 1e-4


def test_on_policy_batch_has_zero_log_rho_and_gradients_reach_every_weight(rng):
    batch = _batch(rng, terminate=[(2, 1)])
    net = _network()
    inputs = NetInputs(*(batch[k] for k in ("observation", "first", "prev_action", "prev_reward")))
    batch["policy"] = {"logits": net.unroll(inputs, ()).policy["logits"].numpy()[:-1]}
    with tf.GradientTape() as tape:
        loss, metrics = a2c_loss(net, A2CConfig(), batch, 0.01, 1.0 / 18)
    grads = tape.gradient(loss, net.trainable_variables)
    assert float(metrics["mean_abs_log_rho"]) == 0.0
    assert all(g is not None and float(tf.reduce_sum(tf.abs(g))) > 0 for g in grads)


def test_entropy_coefficient_anneals_linearly_and_hits_end():
    coef = lambda s, n: float(entropy_coefficient(s, n, 1.0, 0.0))
    assert coef(0, 10) == 1.0 and coef(5, 10) == pytest.approx(0.5) and coef(10, 10) == 0.0
    assert coef(25, 10) == 0.0 and coef(3, None) == 1.0  # clamps; no horizon: constant start
    config = A2CConfig(entropy_cost=0.5, entropy_cost_end=0.1)
    learner = A2CLearner(config, _network, total_updates=3)
    batch = _batch(np.random.default_rng(1))
    seen = [learner.train_step(batch)["entropy_coef"] for _ in range(4)]
    np.testing.assert_allclose(seen, [0.5, 0.3, 0.1, 0.1], rtol=1e-6)


def test_mirrored_update_equals_default_update(rng):
    from tfagents_vtrace.runtime.strategy import make_strategy

    batch = _batch(rng, 5, 4, truncate=[(0, 1)], terminate=[(3, 2)])
    config = A2CConfig(optimizer="adam", learning_rate=1e-2, max_grad_norm=0.1)
    default = A2CLearner(config, _network, make_strategy("default"))
    mirrored = A2CLearner(config, _network, make_strategy("mirrored"))
    assert mirrored.num_replicas == 2
    m_default, m_mirrored = default.train_step(batch), mirrored.train_step(batch)
    assert m_default["grad_norm"] > 0.1  # the clip is active
    np.testing.assert_allclose(m_mirrored["loss"], m_default["loss"], rtol=1e-5, atol=1e-6)
    for a, b in zip(default.get_weights(), mirrored.get_weights()):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)


def test_non_finite_batch_skips_the_update(rng):
    learner = A2CLearner(A2CConfig(), _network)
    before = learner.get_weights()
    bad = _batch(rng)
    bad["reward"][0, 0] = np.nan
    assert learner.train_step(bad)["skipped"] == 1.0
    for a, b in zip(before, learner.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_registered_a2c_trains_on_policy_through_the_runtime(tmp_path):
    import tfagents_vtrace.envs  # noqa: F401
    from tfagents_vtrace.runtime.config import RunConfig
    from tfagents_vtrace.runtime.driver import train

    register_agent("a2c", "tfagents_vtrace.agents.a2c")
    agent = get_agent("a2c")
    assert agent.Config is A2CConfig and agent.run_agent.Learner is A2CLearner
    run = RunConfig(
        env_id="CartPole-v1", total_steps=400, num_envs=4, unroll_length=5, num_actors=0,
        eval_episodes=2, export_policy=False, log_every_s=0.01,
    )  # fmt: skip
    config = A2CConfig(entropy_cost=0.02, entropy_cost_end=0.0)
    final = train(run, agent, config, NetworkConfig(hidden_sizes=(16,)), str(tmp_path))
    assert final["final"] and final["step"] == 400 and final["updates"] == 20
    rows = [json.loads(line) for line in open(os.path.join(tmp_path, "metrics.jsonl"))]
    assert rows[-1]["step"] == 400 and "eval_return" in rows[-1]
    coefs = [r["entropy_coef"] for r in rows if "entropy_coef" in r]
    assert coefs and coefs[-1] == pytest.approx(0.0, abs=1e-6)
    # num_actors=0 acts inline with the newest weights: the data is on-policy.
    assert all(r["policy_lag"] == 0.0 for r in rows)
    assert max(r.get("mean_abs_log_rho", 0.0) for r in rows) < 1e-5


def _mean_abs_log_rho_over_unmasked_steps(net, batch):
    """Slow reference: |log pi(a|x) - log mu(a|x)| averaged over the steps whose action was
    taken (mask 1), from the network's logits before the update."""
    inputs = NetInputs(*(batch[k] for k in ("observation", "first", "prev_action", "prev_reward")))
    logits = net.unroll(inputs, ()).policy["logits"].numpy()[:-1].astype(np.float64)

    def log_softmax(x):
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    a = batch["action"][..., None]
    log_pi = np.take_along_axis(log_softmax(logits), a, -1)[..., 0]
    mu = batch["policy"]["logits"].astype(np.float64)
    log_mu = np.take_along_axis(log_softmax(mu), a, -1)[..., 0]
    valid = ~batch["reset"][:-1]
    assert 0 < valid.sum() < valid.size  # some steps are masked
    return np.abs(log_pi - log_mu)[valid].mean()


@pytest.mark.parametrize("strategy", ["default", "mirrored"])
def test_mean_abs_log_rho_averages_over_the_unmasked_steps(rng, strategy):
    """Reset steps carry no action; across replicas by step count (the resets sit in one
    replica's columns only). Averaged over every [T, B] entry it read low by their share."""
    from tfagents_vtrace.runtime.strategy import make_strategy

    batch = _batch(rng, 5, 4, truncate=[(0, 0), (0, 2)], terminate=[(1, 1)])
    learner = A2CLearner(A2CConfig(), _network, make_strategy(strategy))
    expected = _mean_abs_log_rho_over_unmasked_steps(learner.network, batch)
    metrics = learner.train_step(batch)
    np.testing.assert_allclose(metrics["mean_abs_log_rho"], expected, rtol=1e-5)
    assert "valid_fraction" not in metrics


def test_a3c_mean_abs_log_rho_averages_over_the_unmasked_steps(rng):
    from tfagents_vtrace.agents.a3c import A3CConfig
    from tfagents_vtrace.agents.a3c.shared import compute_gradients

    batch = _batch(rng, 5, 4, truncate=[(0, 0), (0, 2)], terminate=[(1, 1)])
    net = _network()
    expected = _mean_abs_log_rho_over_unmasked_steps(net, batch)
    _, metrics = compute_gradients(net, A3CConfig(), batch, tf.constant(0.01))
    np.testing.assert_allclose(float(metrics["mean_abs_log_rho"]), expected, rtol=1e-5)
    assert "valid_fraction" not in metrics
