"""IMPALA learner: config validation, truncation bootstrapping, strategies, non-finite skips."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tests.agents._unroll_batch import unroll_batch
from tfagents_vtrace.agents import get_agent
from tfagents_vtrace.agents.impala import (
    ImpalaConfig,
    ImpalaLearner,
    impala_loss,
    loss_terms,
    masked_means,
)
from tfagents_vtrace.networks import NetInputs, NetworkConfig, make_network
from tfagents_vtrace.runtime.strategy import make_strategy

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Discrete(2)
GAMMA = 0.9


def _network(seed=0):
    tf.keras.utils.set_random_seed(seed)
    return make_network(NetworkConfig(hidden_sizes=(8,)), OBS, ACT)


def _batch(rng, t=5, b=4, truncate=(), terminate=()):
    """A batch in the runtime's layout; (env, step) pairs in truncate/terminate end there."""
    return unroll_batch(rng, t, b, ACT.n, truncate, terminate)


@pytest.mark.parametrize(
    "field,value",
    [
        ("discount", 1.5),
        ("learning_rate", 0.0),
        ("reward_scale", -1.0),
        ("optimizer", "sgd"),
        ("lr_decay", "cosine"),
        ("reward_clipping", "abs_two"),
        ("entropy_cost", -0.1),
        ("baseline_cost", float("nan")),
        ("max_grad_norm", -1.0),
        ("clip_rho_threshold", 0.0),
        ("vtrace_lambda", 1.1),
        ("rmsprop_decay", 1.0),
        ("jit_compile", "yes"),
        ("max_nonfinite_updates", 0),
    ],
)
def test_bad_config_value_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        ImpalaConfig(**{field: value})


def test_registry_finds_impala():
    agent = get_agent("impala")
    assert agent.Config is ImpalaConfig and agent.run_agent.Learner is ImpalaLearner
    with pytest.raises(ValueError, match="agent"):
        get_agent("nope")


def test_truncation_bootstraps_from_final_observation_and_termination_does_not(rng):
    """On-policy V-trace with rho = c = lambda = 1 equals the bootstrapped n-step return."""
    t, b = 6, 3
    batch = _batch(rng, t, b, truncate=[(0, 2)], terminate=[(1, 2)])
    net = _network()
    inputs = NetInputs(
        batch["observation"], batch["first"], batch["prev_action"], batch["prev_reward"]
    )
    out = net.unroll(inputs, ())
    batch["policy"] = {"logits": out.policy["logits"][:-1].numpy()}  # on-policy: rho = 1
    values = out.value.numpy()
    config = ImpalaConfig(discount=GAMMA, clip_rho_threshold=None, clip_pg_rho_threshold=None)
    terms = loss_terms(net, config, batch)
    vs = terms.vtrace.vs.numpy()

    # Slow reference in the paper's notation: G_t = r_t + gamma * G_{t+1}; a terminated step
    # ends the sum, a truncated step bootstraps from V(x_{t+1}), the final observation.
    expected = np.zeros((t, b))
    for e in range(b):
        g = values[t, e]
        for s in reversed(range(t)):
            r = batch["reward"][s, e]
            if batch["terminated"][s, e]:
                g = r
            elif batch["truncated"][s, e]:
                g = r + GAMMA * values[s + 1, e]
            elif batch["reset"][s, e]:
                g = 0.0  # masked reset step: its target is never used
            else:
                g = r + GAMMA * g
            expected[s, e] = g
    mask = terms.mask.numpy() > 0
    np.testing.assert_allclose(vs[mask], expected[mask], rtol=1e-5, atol=1e-5)
    assert not mask[3, 0] and not mask[3, 1]  # reset steps are masked
    np.testing.assert_allclose(
        vs[2, 0], batch["reward"][2, 0] + GAMMA * values[3, 0], rtol=1e-5
    )  # truncated: bootstrap from V(final obs)
    np.testing.assert_allclose(vs[2, 1], batch["reward"][2, 1], rtol=1e-5)  # terminated
    assert abs(values[3, 0]) > 1e-4  # the bootstrap term is not trivially zero


# The paper's update: one V-trace policy-gradient step per batch (the default reuses it).
PLAIN_UPDATE = {"policy_loss": "vtrace", "num_epochs": 1, "num_minibatches": 1}


def _learner(strategy, weights=None, **kw):
    # Raw advantages: normalised ones are normalised per replica, so a mirrored update
    # would differ from the single-device one by design.
    kw.setdefault("normalize_advantages", False)
    kw = {**PLAIN_UPDATE, **kw}
    config = ImpalaConfig(optimizer="adam", learning_rate=1e-2, lr_decay="none", **kw)
    learner = ImpalaLearner(config, _network, strategy)
    if weights is not None:
        learner.network.set_weights(weights)
    return learner


def test_mirrored_update_equals_default_update(rng):
    assert len(tf.config.list_logical_devices("CPU")) >= 2, "conftest makes 2 logical CPUs"
    batch = _batch(rng, 5, 4, truncate=[(0, 1)], terminate=[(3, 2)])
    default = _learner(make_strategy("default"), max_grad_norm=0.1)
    init = default.network.get_weights()
    mirrored = _learner(make_strategy("mirrored"), weights=init, max_grad_norm=0.1)
    assert mirrored.num_replicas == 2
    m_default = default.train_step(batch)
    m_mirrored = mirrored.train_step(batch)
    assert m_default["grad_norm"] > 0.1  # the global-norm clip is active
    np.testing.assert_allclose(m_mirrored["loss"], m_default["loss"], rtol=1e-5, atol=1e-6)
    for a, b in zip(default.network.get_weights(), mirrored.network.get_weights()):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)
    assert not np.allclose(default.network.get_weights()[0], init[0])


@pytest.mark.parametrize("jit_compile", [False, True])
def test_learner_weights_are_the_updated_variables(rng, jit_compile):
    """get_weights() after an update (read inside the compiled update) equals an eager read of
    the variables, i.e. the values after the optimizer step, never before it."""
    learner = _learner(None, jit_compile=jit_compile)
    before = learner.network.get_weights()
    for _ in range(2):
        learner.train_step(_batch(rng))
        published = learner.get_weights()
        current = learner.network.get_weights()
        assert len(published) == len(current)
        for a, b in zip(published, current):
            np.testing.assert_array_equal(a, b)
        assert not all(np.array_equal(a, b) for a, b in zip(before, published))
        before = published


def test_non_finite_loss_skips_the_update(rng):
    learner = _learner(None)
    before = learner.network.get_weights()
    bad = _batch(rng)
    bad["reward"][0, 0] = np.nan
    for i in range(3):
        metrics = learner.train_step(bad)
        assert metrics["skipped"] == 1.0 and metrics["nonfinite_streak"] == i + 1
    for a, b in zip(before, learner.network.get_weights()):
        np.testing.assert_array_equal(a, b)
    metrics = learner.train_step(_batch(rng))
    assert metrics["skipped"] == 0.0 and metrics["nonfinite_streak"] == 0
    assert int(learner.skipped_updates.numpy()) == 3
    assert not np.allclose(before[0], learner.network.get_weights()[0])


def test_multi_worker_strategy_single_worker_smoke(rng):
    """Without TF_CONFIG, MultiWorkerMirroredStrategy is one worker; same update as default."""
    batch = _batch(rng, 5, 4)
    default = _learner(make_strategy("default"))
    worker = _learner(make_strategy("multi_worker"), weights=default.network.get_weights())
    np.testing.assert_allclose(worker.train_step(batch)["loss"], default.train_step(batch)["loss"],
                               rtol=1e-6)  # fmt: skip
    for a, b in zip(default.network.get_weights(), worker.network.get_weights()):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("strategy", ["default", "mirrored"])
def test_mean_rho_and_clip_fraction_average_over_the_unmasked_steps(rng, strategy):
    """Reset steps (mask 0) carry no action: the diagnostics average over the other steps,
    across replicas by step count (the resets sit in one replica's columns only)."""
    t, b = 5, 4
    batch = _batch(rng, t, b, truncate=[(0, 0), (0, 2)], terminate=[(1, 1)])
    learner = _learner(make_strategy(strategy), policy_loss="clipped", clip_ratio=0.1)
    inputs = NetInputs(
        batch["observation"], batch["first"], batch["prev_action"], batch["prev_reward"]
    )
    logits = learner.network.unroll(inputs, ()).policy["logits"][:-1].numpy()
    metrics = learner.train_step(batch)

    # Slow reference: rho_t = pi(a_t|x_t) / mu(a_t|x_t) on the steps whose action was taken.
    def log_softmax(x):
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    a = batch["action"][..., None]
    log_pi = np.take_along_axis(log_softmax(logits.astype(np.float64)), a, -1)[..., 0]
    log_mu = np.take_along_axis(log_softmax(batch["policy"]["logits"].astype(np.float64)), a, -1)
    rho = np.exp(log_pi - log_mu[..., 0])
    valid = ~batch["reset"][:-1]
    assert valid.sum() < t * b  # some steps are masked
    np.testing.assert_allclose(metrics["mean_rho"], rho[valid].mean(), rtol=1e-5)
    assert "valid_fraction" not in metrics

    # clip_fraction: the share of unmasked steps whose ratio to the old policy leaves [0.9, 1.1].
    logits = learner.network.unroll(inputs, ()).policy["logits"][:-1].numpy()  # updated weights
    log_pi = np.take_along_axis(log_softmax(logits.astype(np.float64)), a, -1)[..., 0]
    old_log_prob = log_pi + rng.normal(scale=0.1, size=log_pi.shape)
    batch["old_log_prob"] = old_log_prob.astype(np.float32)
    config = ImpalaConfig(policy_loss="clipped", clip_ratio=0.1)
    _, sums = impala_loss(learner.network, config, batch, 1.0 / (t * b))
    masked_means(sums)  # in place
    clipped = np.abs(np.exp(log_pi - old_log_prob) - 1.0) > 0.1
    assert 0 < clipped[valid].mean() < 1
    np.testing.assert_allclose(sums["clip_fraction"], clipped[valid].mean(), rtol=1e-6)
