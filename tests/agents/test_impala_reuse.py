"""IMPALA sample reuse: epochs of minibatch SGD, the clipped surrogate, value clipping, KL.

Ground truth: sequential SGD steps written out by hand on the minibatches (whole unrolls),
V-trace recomputed on each, and numpy versions of PPO's formulas (Schulman et al. 2017).
"""

import gymnasium as gym
import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.agents._unroll_batch import unroll_batch
from tfagents_vtrace.agents.impala import ImpalaConfig, ImpalaLearner, impala_loss, loss_terms
from tfagents_vtrace.agents.impala.learner import OLD_LOG_PROB, OLD_VALUE, old_outputs
from tfagents_vtrace.agents.replicated_learner import take_columns
from tfagents_vtrace.networks import NetworkConfig, make_network
from tfagents_vtrace.runtime.strategy import make_strategy

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Discrete(3)
LR = 1e-2


def _network():
    tf.keras.utils.set_random_seed(0)
    return make_network(NetworkConfig(hidden_sizes=(8,)), OBS, ACT)


def _config(**kw):
    kw = {
        "optimizer": "adam",
        "learning_rate": LR,
        "lr_decay": "none",
        "normalize_advantages": False,
        "policy_loss": "vtrace",
        "num_epochs": 1,
        "num_minibatches": 1,
        **kw,
    }  # the references use raw advantages and the paper's update unless a test sets reuse
    return ImpalaConfig(**kw)


def _batch(rng, t=5, b=8):
    return unroll_batch(rng, t, b, ACT.n, truncate=[(1, 2)], terminate=[(4, 1)])


def _reference_update(config, batch, order):
    """Hand-written sample reuse: old outputs once, then one Adam step per minibatch (its
    columns in ``order``), each loss recomputing V-trace with the current weights."""
    net = _network()
    opt = keras.optimizers.Adam(LR)
    opt.build(net.trainable_variables)
    if config.needs_old_outputs:
        batch = {**batch, **{k: v.numpy() for k, v in old_outputs(net, config, batch).items()}}
    t = batch["reward"].shape[0]
    for idx in order:
        sub = take_columns(batch, np.asarray(idx), np.take)
        with tf.GradientTape() as tape:
            loss, _ = impala_loss(net, config, sub, 1.0 / (t * len(idx)))
        grads = tape.gradient(loss, net.trainable_variables)
        grads, _ = tf.clip_by_global_norm(grads, config.max_grad_norm)
        opt.apply(grads, net.trainable_variables)
    return net.get_weights()


def _assert_weights_close(a, b):
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=2e-5, atol=2e-6)


def test_one_epoch_one_minibatch_is_the_plain_impala_update(rng):
    batch = _batch(rng)
    config = _config()
    learner = ImpalaLearner(config, _network)
    learner.train_step(batch)
    _assert_weights_close(learner.get_weights(), _reference_update(config, batch, [range(8)]))


def test_clipped_surrogate_with_one_step_equals_the_vtrace_policy_gradient(rng):
    """At the first step pi = pi_old, so r = 1 and the surrogate's gradient is A grad log pi."""
    batch = _batch(rng)
    plain = ImpalaLearner(_config(), _network)
    clipped = ImpalaLearner(_config(policy_loss="clipped"), _network)
    plain.train_step(batch)
    metrics = clipped.train_step(batch)
    assert metrics["clip_fraction"] == 0.0
    _assert_weights_close(clipped.get_weights(), plain.get_weights())


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"policy_loss": "clipped", "clip_ratio": 0.1},
        {"value_clip": 0.05, "normalize_advantages": True, "kl_cost": 0.5},
    ],
)
def test_epochs_of_minibatches_equal_sequential_sgd_on_whole_unrolls(rng, options):
    batch = _batch(rng)
    config = _config(num_epochs=3, num_minibatches=2, **options)
    learner = ImpalaLearner(config, _network, seed=7)
    order = learner._minibatch_order(tf.constant(8)).numpy()
    assert order.shape == (6, 4)
    for epoch in range(3):  # each epoch is a permutation of all columns
        assert sorted(order[2 * epoch : 2 * epoch + 2].ravel().tolist()) == list(range(8))
    assert len({tuple(row) for row in order}) > 2  # epochs are shuffled differently
    metrics = learner.train_step(batch)
    assert metrics["skipped"] == 0.0
    _assert_weights_close(learner.get_weights(), _reference_update(config, batch, order))
    assert float(learner.optimizer.iterations.numpy()) == 6


def test_annealed_entropy_weight_is_used_for_every_sgd_step_of_its_update(rng):
    """entropy_cost_end: update k of n uses start + (end - start) * k / (n - 1) at each of its
    SGD steps; checked against hand-written updates with that weight, and the metric."""
    batches = [_batch(rng) for _ in range(3)]
    config = _config(num_epochs=2, num_minibatches=2, entropy_cost=0.5, entropy_cost_end=0.0)
    learner = ImpalaLearner(config, _network, total_updates=3, seed=5)
    net = _network()
    opt = keras.optimizers.Adam(LR)
    opt.build(net.trainable_variables)
    for k, (batch, want) in enumerate(zip(batches, [0.5, 0.25, 0.0])):
        assert learner.entropy_coef() == pytest.approx(want)
        order = learner._minibatch_order(tf.constant(8)).numpy()
        metrics = learner.train_step(batch)
        assert metrics["entropy_coef"] == pytest.approx(want), k
        for idx in order:
            sub = take_columns(batch, idx, np.take)
            with tf.GradientTape() as tape:
                loss, _ = impala_loss(net, config, sub, 1.0 / (5 * len(idx)), entropy_cost=want)
            grads = tape.gradient(loss, net.trainable_variables)
            grads, _ = tf.clip_by_global_norm(grads, config.max_grad_norm)
            opt.apply(grads, net.trainable_variables)
    _assert_weights_close(learner.get_weights(), net.get_weights())
    assert learner.entropy_coef() == 0.0  # stays at the end value after the last update
    constant = ImpalaLearner(_config(entropy_cost=0.5), _network, total_updates=3)
    assert "entropy_coef" not in constant.train_step(batches[0])
    with pytest.raises(ValueError, match="entropy_cost_end"):
        _config(entropy_cost_end=-0.1)


def test_minibatches_keep_unrolls_whole(rng):
    batch = _batch(rng)
    batch["state"] = (rng.normal(size=(8, 4)).astype(np.float32),)
    idx = np.array([5, 2, 7])
    sub = take_columns(batch, idx, np.take)
    for key in ("observation", "first", "reset", "action", "reward", "terminated"):
        assert sub[key].shape[0] == batch[key].shape[0]  # every step of the unroll
        np.testing.assert_array_equal(sub[key], batch[key][:, idx])
    np.testing.assert_array_equal(sub["policy"]["logits"], batch["policy"]["logits"][:, idx])
    np.testing.assert_array_equal(sub["state"][0], batch["state"][0][idx])  # start state


def test_clipped_surrogate_and_value_clipping_match_numpy(rng):
    """PPO's formulas in numpy on the loss terms, with pi_old moved away from pi."""
    batch = _batch(rng)
    net = _network()
    config = _config(policy_loss="clipped", clip_ratio=0.2, value_clip=0.1, baseline_cost=1.0)
    old = {k: v.numpy() for k, v in old_outputs(net, config, batch).items()}
    shift = rng.uniform(-0.5, 0.5, size=old[OLD_LOG_PROB].shape).astype(np.float32)
    old[OLD_LOG_PROB] = old[OLD_LOG_PROB] + shift  # r = exp(-shift): some inside, some clipped
    old[OLD_VALUE] = old[OLD_VALUE] + rng.uniform(-0.3, 0.3, old[OLD_VALUE].shape).astype(
        np.float32
    )
    full = {**batch, **old}
    terms = loss_terms(net, config, full)
    mask = terms.mask.numpy()
    adv = terms.vtrace.pg_advantages.numpy()
    vs = terms.vtrace.vs.numpy()
    v = terms.values.numpy()[:-1]
    ratio = np.exp(terms.target_log_probs.numpy() - old[OLD_LOG_PROB])
    surrogate = np.minimum(ratio * adv, np.clip(ratio, 0.8, 1.2) * adv)
    v_old = old[OLD_VALUE][:-1]
    v_clip = v_old + np.clip(v - v_old, -0.1, 0.1)
    value_err = np.maximum((vs - v) ** 2, (vs - v_clip) ** 2)
    n = mask.size
    _, metrics = impala_loss(net, config, full, 1.0 / n)
    np.testing.assert_allclose(metrics["pg_loss"], -np.sum(mask * surrogate) / n, rtol=1e-5)
    np.testing.assert_allclose(
        metrics["baseline_loss"], 0.5 * np.sum(mask * value_err) / n, rtol=1e-5
    )
    clipped = np.abs(ratio - 1.0) > 0.2
    assert 0 < clipped.sum() < clipped.size
    np.testing.assert_allclose(metrics["clip_fraction"], np.sum(mask * clipped) / n, rtol=1e-5)


def test_kl_penalty_matches_numpy(rng):
    batch = _batch(rng)
    net = _network()
    config = _config(kl_cost=1.0)
    terms = loss_terms(net, config, batch)
    log_mu = batch["policy"]["logits"] - np.log(
        np.sum(np.exp(batch["policy"]["logits"]), -1, keepdims=True)
    )
    logits = terms.policy["logits"].numpy()
    log_pi = logits - np.log(np.sum(np.exp(logits), -1, keepdims=True))
    kl = np.sum(np.exp(log_mu) * (log_mu - log_pi), -1)
    mask = terms.mask.numpy()
    _, metrics = impala_loss(net, config, batch, 1.0 / mask.size)
    np.testing.assert_allclose(metrics["kl"], np.sum(mask * kl) / mask.size, rtol=1e-5)


def test_mirrored_minibatch_update_equals_single_replica(rng):
    assert len(tf.config.list_logical_devices("CPU")) >= 2, "conftest makes 2 logical CPUs"
    batch = _batch(rng)
    config = _config(num_epochs=2, num_minibatches=2, policy_loss="clipped", value_clip=0.2)
    single = ImpalaLearner(config, _network, make_strategy("default"), seed=3)
    mirrored = ImpalaLearner(config, _network, make_strategy("mirrored"), seed=3)
    m_single = single.train_step(batch)
    m_mirrored = mirrored.train_step(batch)
    np.testing.assert_allclose(m_mirrored["loss"], m_single["loss"], rtol=1e-4, atol=1e-6)
    _assert_weights_close(mirrored.network.get_weights(), single.get_weights())


def test_jit_minibatch_update_runs_and_learns_the_same_way(rng):
    """Under XLA the shuffles differ (another Philox layout) but the update is the same kind:
    it equals the sequential reference on the XLA learner's own order."""
    batch = _batch(rng)
    config = _config(num_epochs=2, num_minibatches=2, jit_compile=True)
    learner = ImpalaLearner(config, _network, seed=1)
    order = tf.function(learner._minibatch_order, jit_compile=True)(tf.constant(8)).numpy()
    learner.train_step(batch)
    _assert_weights_close(learner.get_weights(), _reference_update(config, batch, order))


def test_the_nonfinite_streak_counts_updates_not_sgd_steps(rng):
    """A NaN batch skips all 2 x 2 SGD steps of its update: the streak the driver compares
    with max_nonfinite_updates grows by one update, not by four steps."""
    learner = ImpalaLearner(_config(num_epochs=2, num_minibatches=2), _network)
    before = learner.network.get_weights()
    bad = _batch(rng)
    bad["reward"][0, :] = np.nan  # every minibatch holds a NaN
    for i in range(3):
        metrics = learner.train_step(bad)
        assert metrics["skipped"] == 1.0 and metrics["nonfinite_streak"] == i + 1
    assert int(learner.skipped_updates.numpy()) == 12  # every SGD step was skipped
    for a, b in zip(before, learner.network.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert learner.train_step(_batch(rng))["nonfinite_streak"] == 0


def test_batch_must_split_into_minibatches(rng):
    learner = ImpalaLearner(_config(num_minibatches=3), _network)
    with pytest.raises(ValueError, match="num_minibatches"):
        learner.train_step(_batch(rng))


@pytest.mark.parametrize(
    "field,value",
    [("num_epochs", 0), ("num_minibatches", 0), ("policy_loss", "ppo"), ("clip_ratio", 0.0),
     ("kl_cost", -1.0), ("value_clip", 0.0), ("normalize_advantages", 1),
     ("replay_ratio", -0.5), ("replay_unrolls", -1)],
)  # fmt: skip
def test_bad_reuse_field_names_it(field, value):
    with pytest.raises(ValueError, match=field):
        ImpalaConfig(**{field: value})
