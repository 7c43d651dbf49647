"""IMPALA sample reuse with ``minibatch_unit="steps"``: PPO-style minibatches of single
steps drawn from all unrolls, V-trace recomputed over the whole batch once per epoch.

Ground truth: a hand-written update that, at each epoch start, computes the V-trace targets
on the whole ``[T, B]`` batch, then for each minibatch evaluates the loss on the *whole*
unroll grid and keeps only the minibatch's steps through an indicator mask (no flattening,
no gather), with PPO's formulas (Schulman et al. 2017) written out in numpy-like TF ops.
"""

import gymnasium as gym
import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.agents._unroll_batch import unroll_batch
from tfagents_vtrace.agents.impala import ImpalaConfig, ImpalaLearner, loss_terms
from tfagents_vtrace.networks import NetInputs, NetworkConfig, make_network
from tfagents_vtrace.runtime.strategy import make_strategy

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Discrete(3)
LR = 1e-2
T, B = 6, 4


def _network(core=None):
    tf.keras.utils.set_random_seed(0)
    return make_network(NetworkConfig(hidden_sizes=(8,), core=core, lstm_size=8), OBS, ACT)


def _config(**kw):
    kw = {"optimizer": "adam", "learning_rate": LR, "lr_decay": "none", **kw}
    return ImpalaConfig(minibatch_unit="steps", **kw)


def _batch(rng):
    return unroll_batch(rng, T, B, ACT.n, truncate=[(1, 2)], terminate=[(3, 1)])


def _grid_loss(net, config, batch, targets, old, indicator):
    """The minibatch loss on the full grid: every term times ``mask * indicator``."""
    inputs = NetInputs(
        batch["observation"], batch["first"], batch["prev_action"], batch["prev_reward"]
    )
    out = net.unroll(inputs, ())
    log_p = tf.nn.log_softmax(out.policy["logits"][:-1])
    onehot = tf.one_hot(batch["action"], ACT.n)
    log_pi = tf.reduce_sum(log_p * onehot, -1)
    entropy = -tf.reduce_sum(tf.exp(log_p) * log_p, -1)
    values = out.value[:-1]
    vs, adv, mask = targets
    w = mask * indicator
    n = tf.reduce_sum(indicator)
    if config.normalize_advantages:
        mean = tf.reduce_sum(w * adv) / tf.reduce_sum(w)
        std = tf.sqrt(tf.reduce_sum(w * (adv - mean) ** 2) / tf.reduce_sum(w))
        adv = (adv - mean) / (std + 1e-8)
    if config.policy_loss == "clipped":
        ratio = tf.exp(log_pi - old["log_pi"])
        lo, hi = 1.0 - config.clip_ratio, 1.0 + config.clip_ratio
        pg = -tf.minimum(ratio * adv, tf.clip_by_value(ratio, lo, hi) * adv)
    else:
        pg = -log_pi * adv
    err = (vs - values) ** 2
    if config.value_clip is not None:
        c = config.value_clip
        clipped = old["value"] + tf.clip_by_value(values - old["value"], -c, c)
        err = tf.maximum(err, (vs - clipped) ** 2)
    per_step = pg + config.baseline_cost * 0.5 * err - config.entropy_cost * entropy
    return tf.reduce_sum(w * per_step) / n


def _reference_update(config, batch, order):
    net = _network()
    opt = keras.optimizers.Adam(LR)
    opt.build(net.trainable_variables)
    first = loss_terms(net, config, batch)
    old = {"log_pi": first.target_log_probs, "value": first.values[:-1]}
    per_epoch = len(order) // config.num_epochs
    for i, idx in enumerate(order):
        recompute = i % per_epoch == 0 if config.vtrace_every_epoch else i == 0
        if recompute:  # V-trace on the whole batch with the current weights
            terms = loss_terms(net, config, batch)
            targets = (terms.vtrace.vs, terms.vtrace.pg_advantages, terms.mask)
        indicator = np.zeros((T, B), np.float32)
        indicator[np.asarray(idx) // B, np.asarray(idx) % B] = 1.0  # step k = (k // B, k % B)
        with tf.GradientTape() as tape:
            loss = _grid_loss(net, config, batch, targets, old, indicator)
        grads = tape.gradient(loss, net.trainable_variables)
        grads, _ = tf.clip_by_global_norm(grads, config.max_grad_norm)
        opt.apply(grads, net.trainable_variables)
    return net.get_weights()


def _assert_weights_close(a, b):
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"policy_loss": "clipped", "clip_ratio": 0.1, "normalize_advantages": True,
         "value_clip": 0.05},
        {"policy_loss": "clipped", "vtrace_every_epoch": False},
    ],
)  # fmt: skip
def test_step_minibatches_equal_hand_written_sgd_with_vtrace_per_epoch_or_per_batch(rng, options):
    batch = _batch(rng)
    config = _config(num_epochs=3, num_minibatches=4, **options)
    learner = ImpalaLearner(config, _network, seed=11)
    order = learner._minibatch_order(tf.constant(T * B)).numpy()
    assert order.shape == (12, T * B // 4)
    for epoch in range(3):  # each epoch visits every step once
        assert sorted(order[4 * epoch : 4 * epoch + 4].ravel().tolist()) == list(range(T * B))
    # a minibatch mixes unrolls: its steps come from more than one column of [T, B]
    assert all(len(set((row % B).tolist())) > 1 for row in order)
    metrics = learner.train_step(batch)
    assert metrics["skipped"] == 0.0
    assert float(learner.optimizer.iterations.numpy()) == 12
    _assert_weights_close(learner.get_weights(), _reference_update(config, batch, order))


def test_jit_step_minibatches_equal_the_hand_written_update(rng):
    """Under XLA the shuffles differ (another Philox layout); the update is the reference's
    on the XLA learner's own order."""
    batch = _batch(rng)
    config = _config(num_epochs=2, num_minibatches=3, policy_loss="clipped", jit_compile=True)
    learner = ImpalaLearner(config, _network, seed=4)
    order = tf.function(learner._minibatch_order, jit_compile=True)(tf.constant(T * B)).numpy()
    learner.train_step(batch)
    _assert_weights_close(learner.get_weights(), _reference_update(config, batch, order))


def test_one_minibatch_per_epoch_equals_the_whole_unroll_update(rng):
    """With one minibatch the steps are the whole batch (in another order) and V-trace is
    recomputed before every SGD step in both modes: the updates agree."""
    batch = _batch(rng)
    kw = {"num_epochs": 2, "num_minibatches": 1, "policy_loss": "clipped"}
    steps = ImpalaLearner(_config(**kw), _network, seed=2)
    unrolls = ImpalaLearner(ImpalaConfig(**{**_config(**kw).__dict__, "minibatch_unit":
                                            "unrolls"}), _network, seed=2)  # fmt: skip
    m_steps = steps.train_step(batch)
    m_unrolls = unrolls.train_step(batch)
    np.testing.assert_allclose(m_steps["loss"], m_unrolls["loss"], rtol=1e-5, atol=1e-6)
    _assert_weights_close(steps.get_weights(), unrolls.get_weights())


def test_steps_need_a_feed_forward_network_on_one_replica(rng):
    config = _config(num_epochs=2, num_minibatches=2)
    with pytest.raises(ValueError, match="minibatch_unit.*recurrent"):
        ImpalaLearner(config, lambda: _network(core="lstm"))
    assert len(tf.config.list_logical_devices("CPU")) >= 2, "conftest makes 2 logical CPUs"
    with pytest.raises(ValueError, match="minibatch_unit.*one replica"):
        ImpalaLearner(config, _network, make_strategy("mirrored"))


def test_steps_must_split_into_minibatches(rng):
    learner = ImpalaLearner(_config(num_minibatches=5), _network)  # 24 steps, 5 parts
    with pytest.raises(ValueError, match="num_minibatches.*T\\*B=24"):
        learner.train_step(_batch(rng))
    # B=4 columns cannot split into 3 whole unrolls, but 24 steps can
    ImpalaLearner(_config(num_minibatches=3), _network).train_step(_batch(rng))


def test_bad_minibatch_unit_names_it():
    with pytest.raises(ValueError, match="minibatch_unit"):
        ImpalaConfig(minibatch_unit="columns")
    with pytest.raises(ValueError, match="vtrace_every_epoch.*steps"):
        ImpalaConfig(vtrace_every_epoch=False)
