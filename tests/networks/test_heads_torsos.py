"""Heads, distributions and torsos against numpy written from the papers' formulas."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tfagents_vtrace.networks import (
    GaussianHead,
    ImpalaResNet,
    MinAtarCNN,
    NatureCNN,
    NetInputs,
    NetworkConfig,
    SmallAtariCNN,
    StochasticDuelingHead,
    greedy_action,
    make_distribution,
    make_network,
)


def _dense_np(layer, x, act=None):
    kernel, bias = (w.numpy() for w in layer.weights)
    y = x @ kernel + bias
    return np.tanh(y) if act == "tanh" else y


def test_stochastic_dueling_matches_numpy(rng):
    """Q~(s,a) = V(s) + A(s,a) - 1/n sum_i A(s,a'_i) (ACER, arXiv 1611.01224, eq. 13)."""
    N, F, E, n = 4, 5, 2, 3
    head = StochasticDuelingHead(hidden_sizes=(6,), activation="tanh")
    feats = tf.constant(rng.normal(size=(N, F)).astype(np.float32))
    actions = tf.constant(rng.normal(size=(N, E)).astype(np.float32))
    sampled = tf.Variable(rng.normal(size=(n, N, E)).astype(np.float32))
    with tf.GradientTape() as tape:
        q, v = head(feats, actions, sampled)
    grad_sampled = tape.gradient(q, sampled)

    def adv(f, a):
        h = _dense_np(head.adv_hidden[0], np.concatenate([f, a], -1), "tanh")
        return _dense_np(head.adv_out, h)[..., 0]

    f = feats.numpy()
    v_ref = _dense_np(head.value_head.value, f)[:, 0]
    adv_mean = np.mean([adv(f, sampled.numpy()[i]) for i in range(n)], axis=0)
    q_ref = v_ref + adv(f, actions.numpy()) - adv_mean
    np.testing.assert_allclose(v.numpy(), v_ref, atol=1e-5)
    np.testing.assert_allclose(q.numpy(), q_ref, atol=1e-5)
    assert grad_sampled is None, "sampled actions a'_i must be stop-gradient"


def test_network_stochastic_dueling_q_of_given_actions(rng):
    box = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    cfg = NetworkConfig(hidden_sizes=(8,), q_head="stochastic_dueling", sdn_num_samples=200)
    net = make_network(cfg, gym.spaces.Box(-1.0, 1.0, (3,), np.float32), box)
    inputs = net.dummy_inputs(3)._replace(observation=rng.normal(size=(3, 3)).astype(np.float32))
    out = net(inputs, (), actions=tf.zeros([3, 2]))
    assert out.q.shape == (3,) and out.value.shape == (3,)
    # E_{a~pi}[Q~(s, a)] = V(s): averaging Q~ over many policy actions recovers V.
    tf.random.set_seed(0)
    n = 400
    many = net.distribution(out.policy).sample(n, seed=1)  # [n, 3, 2]
    tiled = tf.nest.map_structure(lambda x: tf.concat([x] * n, axis=0), inputs)
    qs = tf.reshape(net(tiled, (), actions=tf.reshape(many, [n * 3, 2])).q, [n, 3]).numpy()
    assert np.std(qs, 0).min() > 1e-4  # Q~ really depends on the action
    tol = 4.0 * np.std(qs, 0) / np.sqrt(n) + 1e-4  # 4 standard errors
    assert np.all(np.abs(np.mean(qs, 0) - out.value.numpy()) < tol)
    # Without actions, q is None and the value is the SDN's V(s).
    assert net(inputs, ()).q is None
    np.testing.assert_allclose(net(inputs, ()).value.numpy(), out.value.numpy(), atol=1e-6)


def test_tanh_gaussian_log_prob_and_greedy_match_numpy(rng):
    low, high = np.array([-1.0, 0.0], np.float32), np.array([1.0, 4.0], np.float32)
    loc = rng.normal(size=(5, 2)).astype(np.float32)
    scale = rng.uniform(0.3, 1.5, size=(5, 2)).astype(np.float32)
    policy = {"loc": tf.constant(loc), "scale": tf.constant(scale)}
    dist = make_distribution("tanh_gaussian", policy, low, high)
    a = dist.sample(seed=3).numpy()
    assert a.shape == (5, 2) and np.all(a > low) and np.all(a < high)
    mid, half = (high + low) / 2, (high - low) / 2
    u = np.arctanh((a - mid) / half)
    log_normal = -0.5 * ((u - loc) / scale) ** 2 - np.log(scale) - 0.5 * np.log(2 * np.pi)
    log_det = np.log(half * (1 - np.tanh(u) ** 2))
    np.testing.assert_allclose(
        dist.log_prob(a).numpy(), np.sum(log_normal - log_det, -1), rtol=1e-3, atol=1e-3
    )
    greedy = greedy_action("tanh_gaussian", policy, low, high).numpy()
    np.testing.assert_allclose(greedy, mid + half * np.tanh(loc), atol=1e-6)
    gauss = make_distribution("gaussian", policy)
    assert gauss.event_shape == (2,) and gauss.batch_shape == (5,)
    logits = tf.constant(rng.normal(size=(5, 3)).astype(np.float32))
    np.testing.assert_array_equal(
        greedy_action("categorical", {"logits": logits}).numpy(), np.argmax(logits, -1)
    )


@pytest.mark.parametrize("std", ["state", "global"])
def test_gaussian_head_initial_std(std, rng):
    head = GaussianHead(3, std=std, init_std=0.5, min_std=0.01)
    zeros = head(tf.zeros([2, 4]))
    np.testing.assert_allclose(zeros["scale"].numpy(), 0.5, rtol=1e-5)
    out = head(tf.constant(rng.normal(size=(2, 4)).astype(np.float32)))
    assert np.all(out["scale"].numpy() > 0.01)
    if std == "global":
        np.testing.assert_allclose(out["scale"].numpy(), 0.5, rtol=1e-5)


@pytest.mark.parametrize("cls,flat", [(NatureCNN, 7 * 7 * 64), (ImpalaResNet, 11 * 11 * 32)])
def test_cnn_torsos_architecture_and_uint8_scaling(cls, flat, rng):
    torso = cls(dense_size=16)
    frames = rng.integers(0, 256, size=(2, 84, 84, 4)).astype(np.uint8)
    out = torso(tf.constant(frames))
    assert out.shape == (2, 16)
    assert torso.dense.weights[0].shape == (flat, 16)
    n_convs = sum(len(w.shape) == 4 for w in torso.weights)  # conv kernels [kh, kw, in, out]
    assert n_convs == (3 if cls is NatureCNN else 3 + 3 * 2 * 2)
    scaled = torso(tf.constant(frames.astype(np.float32) / 255.0))
    np.testing.assert_allclose(out.numpy(), scaled.numpy(), atol=1e-5)


def test_discrete_observations_are_one_hot(rng):
    net = make_network(
        NetworkConfig(hidden_sizes=(4,)), gym.spaces.Discrete(5), gym.spaces.Discrete(2)
    )
    kernel = net.torso.dense_layers[0].weights[0].numpy()
    assert kernel.shape == (5, 4)
    obs = tf.constant([3, 0], tf.int32)
    out = net.torso(obs).numpy()
    np.testing.assert_allclose(
        out, np.tanh(kernel[[3, 0]] + net.torso.dense_layers[0].weights[1].numpy()), atol=1e-6
    )


def test_config_round_trip():
    cfg = NetworkConfig(torso="impala_resnet", core="lstm", hidden_sizes=[32], q_head="discrete")
    assert cfg.hidden_sizes == (32,)
    assert NetworkConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown"):
        NetworkConfig.from_dict({"bogus": 1})
    with pytest.raises(ValueError, match="lstm_size"):
        NetworkConfig(lstm_size=0)


def test_minatar_cnn_architecture():
    torso = MinAtarCNN(dense_size=32)
    out = torso(tf.zeros([2, 10, 10, 4], tf.uint8))
    assert out.shape == (2, 32)
    assert torso.convs[0].weights[0].shape == (3, 3, 4, 16)
    assert torso.dense.weights[0].shape == (8 * 8 * 16, 32)  # valid 3x3 conv: 10 -> 8


def test_small_atari_cnn_architecture():
    torso = SmallAtariCNN()
    out = torso(tf.zeros([2, 84, 84, 4], tf.uint8))
    assert out.shape == (2, 256)
    assert [c.weights[0].shape for c in torso.convs] == [(8, 8, 4, 16), (4, 4, 16, 32)]
    # valid convs: 84 -> (84 - 8) / 4 + 1 = 20 -> (20 - 4) / 2 + 1 = 9
    assert torso.dense.weights[0].shape == (9 * 9 * 32, 256)


@pytest.mark.parametrize("torso", ["mlp", "minatar_cnn", "nature_cnn", "small_atari_cnn"])
def test_binary_uint8_grids_reach_the_network_as_0_1_and_images_are_divided_by_255(torso, rng):
    """A uint8 Box with high=1 (MinAtar) is fed as 0/1; one with high=255 is divided by 255.

    Ground truth: the same network on float32 observations of the expected values."""
    act = gym.spaces.Discrete(3)
    size = 36 if torso in ("nature_cnn", "small_atari_cnn") else 10
    grid = rng.integers(0, 2, size=(4, size, size, 4)).astype(np.uint8)
    for high, expected in ((1, grid.astype(np.float32)), (255, grid / np.float32(255.0))):
        space = gym.spaces.Box(0, high, (size, size, 4), np.uint8)
        cfg = NetworkConfig(torso=torso, hidden_sizes=(8,))
        tf.keras.utils.set_random_seed(0)
        net = make_network(cfg, space, act)
        tf.keras.utils.set_random_seed(0)
        ref = make_network(cfg, gym.spaces.Box(0.0, 1.0, (size, size, 4), np.float32), act)
        ref.set_weights(net.get_weights())
        got = net.torso(tf.constant(grid)).numpy()
        want = ref.torso(tf.constant(expected.astype(np.float32))).numpy()
        np.testing.assert_allclose(got, want, atol=1e-5)
        assert np.abs(got).max() > 0


def _torso_kernels(torso) -> list[np.ndarray]:
    """Every conv / dense kernel of a torso as a ``[fan_in, units]`` matrix."""
    return [w.numpy().reshape(-1, w.shape[-1]) for w in torso.weights if w.path.endswith("kernel")]


@pytest.mark.parametrize(
    "torso", ["nature_cnn", "small_atari_cnn", "minatar_cnn", "universe_cnn", "impala_resnet"]
)
def test_cnn_init_orthogonal_gives_relu_gain_orthogonal_kernels(torso):
    """cnn_init="orthogonal": every conv and dense kernel of the torso, as a [fan_in, units]
    matrix, has orthogonal columns of norm sqrt(2) (fan_in >= units for these layers); the
    default glorot_uniform kernels are not."""
    size = 10 if torso == "minatar_cnn" else 84
    obs = gym.spaces.Box(0, 255, (size, size, 4), np.uint8)
    kernels = {}
    for init in ("orthogonal", "glorot"):
        tf.keras.utils.set_random_seed(0)
        net = make_network(NetworkConfig(torso=torso, cnn_init=init), obs, gym.spaces.Discrete(3))
        kernels[init] = _torso_kernels(net.torso)
    expected = {"impala_resnet": 3 * 5 + 1, "nature_cnn": 4, "universe_cnn": 4}
    assert len(kernels["orthogonal"]) == expected.get(torso, 2 if torso == "minatar_cnn" else 3)
    for k in kernels["orthogonal"]:
        np.testing.assert_allclose(k.T @ k, 2.0 * np.eye(k.shape[1]), atol=1e-4)
    for k in kernels["glorot"]:
        assert not np.allclose(k.T @ k, 2.0 * np.eye(k.shape[1]), atol=0.1)


def test_bad_cnn_init_names_it():
    with pytest.raises(ValueError, match="cnn_init"):
        NetworkConfig(cnn_init="he")


@pytest.mark.parametrize("torso", ["small_atari_cnn", "minatar_cnn", "impala_resnet"])
def test_bfloat16_conv_torso_keeps_float32_weights_and_matches_float32(torso, rng):
    """cnn_compute_dtype="bfloat16": float32 variables (same count and shapes), float32
    features for the heads, and, on the float32 network's weights, policy logits and values
    within bfloat16's precision (8 mantissa bits) of the float32 network's."""
    size = 10 if torso == "minatar_cnn" else 84
    obs = gym.spaces.Box(0, 255, (size, size, 4), np.uint8)
    act = gym.spaces.Discrete(4)
    nets = {}
    for dtype in ("float32", "bfloat16"):
        tf.keras.utils.set_random_seed(0)
        cfg = NetworkConfig(torso=torso, cnn_compute_dtype=dtype, policy_init_scale=1.0)
        nets[dtype] = make_network(cfg, obs, act)
    f32, bf16 = nets["float32"], nets["bfloat16"]
    assert [w.dtype for w in bf16.weights] == [w.dtype for w in f32.weights]
    assert all(w.dtype == "float32" for w in bf16.weights)
    bf16.set_weights(f32.get_weights())
    x = tf.constant(rng.integers(0, 256, (5, size, size, 4)).astype(np.uint8))
    feats = bf16.torso(x)
    assert feats.dtype == tf.float32
    want = f32.torso(x).numpy()
    assert not np.array_equal(feats.numpy(), want)  # the arithmetic did change
    np.testing.assert_allclose(feats.numpy(), want, rtol=0.05, atol=0.05 * np.abs(want).max())
    first = np.ones((1, 5), bool)
    inputs = (x[None], first, np.zeros((1, 5), np.int32), np.zeros((1, 5), np.float32))
    got, ref = bf16.unroll(NetInputs(*inputs)), f32.unroll(NetInputs(*inputs))
    scale = np.abs(ref.policy["logits"].numpy()).max()
    np.testing.assert_allclose(got.policy["logits"], ref.policy["logits"], atol=0.05 * scale)


def test_bad_cnn_compute_dtype_names_it():
    with pytest.raises(ValueError, match="cnn_compute_dtype"):
        NetworkConfig(cnn_compute_dtype="float16")
    # not silently ignored by the torsos that do not implement them
    for torso in ("mlp",):
        with pytest.raises(ValueError, match=f"cnn_compute_dtype.*torso='{torso}'"):
            NetworkConfig(torso=torso, cnn_compute_dtype="bfloat16")
        with pytest.raises(ValueError, match=f"cnn_init.*torso='{torso}'"):
            NetworkConfig(torso=torso, cnn_init="orthogonal")
