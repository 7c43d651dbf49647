"""A learner that passes over a batch of uint8 images many times converts them once
(``ActorCriticNetwork.prepare_observation``): the update is the one each pass's own
conversion makes, to the bit."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tests.agents._unroll_batch import unroll_batch
from tfagents_vtrace.agents.impala import ImpalaConfig, ImpalaLearner
from tfagents_vtrace.networks import NetInputs, NetworkConfig, make_network

IMAGES = gym.spaces.Box(0, 255, (12, 12, 2), np.uint8)
ACT = gym.spaces.Discrete(3)
T, B = 4, 4


def _network(dtype="float32", **kw):
    tf.keras.utils.set_random_seed(0)
    cfg = NetworkConfig(torso="minatar_cnn", cnn_compute_dtype=dtype, **kw)
    return make_network(cfg, IMAGES, ACT)


def _images(rng, *lead):
    return rng.integers(0, 256, (*lead, *IMAGES.shape)).astype(np.uint8)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_prepared_unroll_equals_the_unroll_of_the_frames(dtype, rng):
    net = _network(dtype)
    assert net.prepares_observations
    frames = _images(rng, T, B)
    prepared = net.prepare_observation(frames)
    assert prepared.dtype == dtype
    rest = (np.ones((T, B), bool), np.zeros((T, B), np.int32), np.zeros((T, B), np.float32))
    want = net.unroll(NetInputs(frames, *rest))
    got = net.unroll(NetInputs(prepared, *rest), prepared=True)
    np.testing.assert_array_equal(got.policy["logits"], want.policy["logits"])
    np.testing.assert_array_equal(got.value, want.value)
    # and the conversion is the scaled image: x / 255 in float32, then the compute dtype
    ref = tf.cast(frames.astype(np.float32) * np.float32(1 / 255), dtype)
    np.testing.assert_array_equal(prepared, ref)


def test_networks_that_read_the_observation_elsewhere_do_not_prepare(rng):
    floats = gym.spaces.Box(0.0, 1.0, (12, 12, 2), np.float32)
    others = [
        make_network(NetworkConfig(torso="mlp", hidden_sizes=(4,)), IMAGES, ACT),
        make_network(NetworkConfig(torso="minatar_cnn"), floats, ACT),
        _network(value_hidden_sizes=(4,)),  # a value MLP of its own on the raw observation
    ]
    for net in others:
        assert not net.prepares_observations
        with pytest.raises(ValueError, match="prepare_observation"):
            net.prepare_observation(_images(rng, 1))


@pytest.mark.parametrize("unit, dtype", [("steps", "bfloat16"), ("unrolls", "float32")])
def test_update_on_prepared_frames_is_the_update_on_the_frames(unit, dtype, rng, monkeypatch):
    """Two updates of four epochs of two minibatches, from the same weights: weights and
    metrics equal to the bit with and without the one-off conversion."""
    batch = unroll_batch(rng, T, B, ACT.n)
    batch["observation"] = _images(rng, T + 1, B)
    config = ImpalaConfig(
        optimizer="adam", learning_rate=1e-2, lr_decay="none", num_epochs=4,
        num_minibatches=2, minibatch_unit=unit,
    )  # fmt: skip
    results = []
    for prepare in (True, False):
        if not prepare:
            monkeypatch.setattr(ImpalaLearner, "_prepare", lambda self, b: b)
        learner = ImpalaLearner(config, lambda: _network(dtype), seed=0)
        assert learner.network.prepares_observations
        metrics = [learner.train_step(batch) for _ in range(2)]
        results.append((learner.get_weights(), metrics))
    (got_w, got_m), (want_w, want_m) = results
    for got, want in zip(got_w, want_w):
        np.testing.assert_array_equal(got, want)
    assert got_m == want_m
    assert not np.array_equal(got_w[0], _network(dtype).get_weights()[0])  # it did learn
