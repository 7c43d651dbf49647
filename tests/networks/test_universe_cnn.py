"""The A3C meta-RL fork's Atari torso (``--torso=universe_cnn``) against a numpy convolution
written from its definition: four conv 32x3x3 stride 2 with "same" padding and ELU, then
flatten, no dense layer (42x42 frames give 3 * 3 * 32 = 288 features)."""

import gymnasium as gym
import numpy as np
import tensorflow as tf

from tfagents_vtrace.networks import NetworkConfig, make_network
from tfagents_vtrace.networks.torsos import UniverseCNN


def _conv_same_elu(x, kernel, bias, stride):
    """[H, W, C] -> [ceil(H/s), ceil(W/s), F]: TF "same" padding (extra row/column at the
    bottom/right), then ELU."""
    h, w, _ = x.shape
    k = kernel.shape[0]
    oh, ow = -(-h // stride), -(-w // stride)
    pad_h = max((oh - 1) * stride + k - h, 0)
    pad_w = max((ow - 1) * stride + k - w, 0)
    xp = np.pad(x, ((pad_h // 2, pad_h - pad_h // 2), (pad_w // 2, pad_w - pad_w // 2), (0, 0)))
    out = np.zeros((oh, ow, kernel.shape[-1]))
    for i in range(oh):
        for j in range(ow):
            patch = xp[i * stride : i * stride + k, j * stride : j * stride + k, :]
            out[i, j] = np.tensordot(patch, kernel, axes=3) + bias
    return np.where(out > 0, out, np.expm1(np.minimum(out, 0)))


def test_universe_cnn_matches_numpy_and_has_no_dense_layer():
    tf.keras.utils.set_random_seed(3)
    torso = UniverseCNN(input_scale=1.0 / 255.0)
    frames = np.random.default_rng(0).integers(0, 256, (2, 42, 42, 4), dtype=np.uint8)
    out = torso(tf.constant(frames)).numpy()
    assert out.shape == (2, 288) and torso.dense is None
    for n in range(2):
        x = frames[n].astype(np.float64) / 255.0
        for conv in torso.convs:
            assert conv.kernel.shape[:2] == (3, 3) and conv.strides == (2, 2)
            x = _conv_same_elu(x, conv.kernel.numpy(), conv.bias.numpy(), 2)
        assert x.shape == (3, 3, 32)
        np.testing.assert_allclose(out[n], x.reshape(-1), rtol=1e-4, atol=1e-5)


def test_universe_cnn_network_with_lstm_and_dense_option():
    obs = gym.spaces.Box(0, 255, (42, 42, 4), np.uint8)
    act = gym.spaces.Discrete(6)
    net = make_network(NetworkConfig(torso="universe_cnn", core="lstm", lstm_size=256), obs, act)
    out = net.unroll(net.dummy_inputs(2, time=3), net.initial_state(2))
    assert out.policy["logits"].shape == (3, 2, 6)
    dense = make_network(NetworkConfig(torso="universe_cnn", cnn_dense_size=64), obs, act)
    assert dense.torso.dense is not None and dense.torso.dense.units == 64
