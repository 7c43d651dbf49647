"""Dict / Tuple observations (the multi-input torso) and MultiDiscrete / MultiBinary actions:
output shapes and dtypes for each space, log-probabilities against numpy, small images."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tfagents_vtrace.export import actor_critic
from tfagents_vtrace.networks import NetInputs, NetworkConfig, make_network
from tfagents_vtrace.networks.multi_input import MultiInputTorso, conv_torso
from tfagents_vtrace.networks.torsos import MinAtarCNN, NatureCNN

BOX = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
IMAGE = gym.spaces.Box(0, 255, (5, 5, 3), np.uint8)
DISCRETE = gym.spaces.Discrete(4)
DICT = gym.spaces.Dict({"image": IMAGE, "pos": BOX, "mode": DISCRETE})
TUPLE = gym.spaces.Tuple((DISCRETE, gym.spaces.Box(0.0, 1.0, (2, 2), np.float32)))
NVEC = (3, 2, 4)
OBSERVATIONS = {"box": BOX, "image": IMAGE, "discrete": DISCRETE, "dict": DICT, "tuple": TUPLE}
ACTIONS = {
    "discrete": (DISCRETE, {"logits": (4,)}, tf.int32, ()),
    "box": (gym.spaces.Box(-1.0, 1.0, (2,), np.float32), {"loc": (2,), "scale": (2,)},
            tf.float32, (2,)),
    "multi_discrete": (gym.spaces.MultiDiscrete(NVEC), {"multi_logits": (9,)}, tf.int32, (3,)),
    "multi_binary": (gym.spaces.MultiBinary(5), {"bernoulli_logits": (5,)}, tf.int32, (5,)),
}  # fmt: skip


def _sample(space, lead, seed=0):
    space.seed(seed)
    n = int(np.prod(lead))
    samples = [space.sample() for _ in range(n)]
    return tf.nest.map_structure(lambda *xs: np.stack(xs).reshape(*lead, *np.shape(xs[0])),
                                 *samples)  # fmt: skip


def _inputs(net, obs_space, act_space, t, b):
    obs = _sample(obs_space, (t, b))
    if isinstance(obs_space, gym.spaces.Discrete):
        obs = obs.astype(np.int32)
    elif isinstance(obs_space, gym.spaces.Dict | gym.spaces.Tuple):
        obs = tf.nest.map_structure(lambda x: x.astype(np.int32) if x.dtype == np.int64 else x,
                                    dict(obs) if isinstance(obs, dict) else obs)  # fmt: skip
    actions = _sample(act_space, (t, b), seed=1)
    if actions.dtype.kind in "iu":
        actions = actions.astype(np.int32)
    first = np.zeros((t, b), bool)
    first[0] = True
    return NetInputs(obs, first, actions, np.ones((t, b), np.float32)), actions


@pytest.mark.parametrize("obs_name", list(OBSERVATIONS))
@pytest.mark.parametrize("act_name", list(ACTIONS))
def test_output_shapes_and_dtypes(obs_name, act_name):
    obs_space = OBSERVATIONS[obs_name]
    act_space, params, act_dtype, act_shape = ACTIONS[act_name]
    torso = "minatar_cnn" if obs_name == "image" else "nature_cnn" if obs_name == "dict" else "mlp"
    config = NetworkConfig(torso=torso, hidden_sizes=(8,), cnn_dense_size=8, core="lstm",
                           lstm_size=4, use_prev_action=True, use_prev_reward=True)  # fmt: skip
    net = make_network(config, obs_space, act_space)
    t, b = 3, 2
    inputs, actions = _inputs(net, obs_space, act_space, t, b)
    out = net.unroll(inputs, net.initial_state(b))
    assert {k: tuple(v.shape) for k, v in out.policy.items()} == {
        k: (t, b, *shape) for k, shape in params.items()
    }
    assert out.value.shape == (t, b) and out.value.dtype == tf.float32
    dist = net.distribution(out.policy)
    action = dist.sample(seed=tf.constant([1, 2]))
    assert action.shape == (t, b, *act_shape) and action.dtype == act_dtype
    assert net.greedy_action(out.policy).shape == (t, b, *act_shape)
    assert dist.log_prob(actions).shape == (t, b)
    assert np.all(np.isfinite(dist.log_prob(actions).numpy()))
    assert net.action_spec.dtype == act_dtype and tuple(net.action_spec.shape) == act_shape
    # One step at a time gives the unroll's outputs.
    step = net(NetInputs(*tf.nest.map_structure(lambda x: x[0], tuple(inputs))),
               net.initial_state(b))  # fmt: skip
    for k in params:
        np.testing.assert_allclose(step.policy[k], out.policy[k][0], rtol=1e-5, atol=1e-6)


def _log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def test_multi_discrete_log_prob_is_the_sum_of_categoricals(rng):
    net = make_network(NetworkConfig(policy_init_scale=1.0), BOX, ACTIONS["multi_discrete"][0])
    logits = rng.normal(size=(4, 6, sum(NVEC))).astype(np.float32) * 3.0
    actions = np.stack([rng.integers(0, n, (4, 6)) for n in NVEC], -1).astype(np.int32)
    dist = net.distribution({"multi_logits": tf.constant(logits)})
    expected = np.zeros((4, 6))
    entropy = np.zeros((4, 6))
    start = 0
    for d, n in enumerate(NVEC):
        log_p = _log_softmax(logits[..., start : start + n].astype(np.float64))
        expected += np.take_along_axis(log_p, actions[..., d : d + 1], -1)[..., 0]
        entropy += -(np.exp(log_p) * log_p).sum(-1)
        start += n
    np.testing.assert_allclose(dist.log_prob(actions), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dist.entropy(), entropy, rtol=1e-5, atol=1e-5)
    greedy = net.greedy_action({"multi_logits": tf.constant(logits)}).numpy()
    blocks = np.split(logits, np.cumsum(NVEC)[:-1], -1)
    np.testing.assert_array_equal(greedy, np.stack([x.argmax(-1) for x in blocks], -1))
    samples = dist.sample(2000, seed=tf.constant([3, 4])).numpy()
    for d, n in enumerate(NVEC):  # every draw in range, every category reached
        assert samples[..., d].min() == 0 and samples[..., d].max() == n - 1


def test_multi_binary_log_prob_is_the_sum_of_bernoullis(rng):
    net = make_network(NetworkConfig(), BOX, gym.spaces.MultiBinary(5))
    logits = rng.normal(size=(3, 5)).astype(np.float32) * 2.0
    bits = rng.integers(0, 2, (3, 5)).astype(np.int32)
    p = 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))
    expected = (bits * np.log(p) + (1 - bits) * np.log(1 - p)).sum(-1)
    dist = net.distribution({"bernoulli_logits": tf.constant(logits)})
    np.testing.assert_allclose(dist.log_prob(bits), expected, rtol=1e-5)
    entropy = -(p * np.log(p) + (1 - p) * np.log(1 - p)).sum(-1)
    np.testing.assert_allclose(dist.entropy(), entropy, rtol=1e-5)


@pytest.mark.parametrize("act_name", ["multi_discrete", "multi_binary"])
def test_portable_draws_from_noise_match_the_distribution(act_name, rng):
    net = make_network(NetworkConfig(policy_init_scale=1.0), BOX, ACTIONS[act_name][0])
    out = net(net.dummy_inputs(64)._replace(observation=rng.normal(size=(64, 3))), ())
    noise = tf.constant(rng.random((64, actor_critic.noise_size(net)), dtype=np.float32))
    action, log_prob = actor_critic.act_from_noise(net, out.policy, noise)
    assert action.dtype == tf.int32 and action.shape == (64, ACTIONS[act_name][3][0])
    dist = net.distribution(out.policy)
    np.testing.assert_allclose(log_prob, dist.log_prob(action), rtol=1e-5, atol=1e-5)
    greedy, greedy_lp = actor_critic.act_from_noise(net, out.policy, None)
    np.testing.assert_array_equal(greedy, net.greedy_action(out.policy))
    np.testing.assert_allclose(greedy_lp, dist.log_prob(greedy), rtol=1e-5, atol=1e-5)


def test_small_images_take_the_grid_cnn():
    config = NetworkConfig(torso="nature_cnn", cnn_dense_size=8)
    assert isinstance(conv_torso(config, (5, 5, 3), 1 / 255), MinAtarCNN)
    assert isinstance(conv_torso(config, (36, 36, 3), 1 / 255), NatureCNN)
    assert conv_torso(config, (2, 2, 1), 1 / 255) is None  # flattened instead
    net = make_network(config, IMAGE, DISCRETE)  # a single small image too
    assert isinstance(net.torso, MinAtarCNN)
    with pytest.raises(ValueError, match="at least 3x3"):
        make_network(config, gym.spaces.Box(0, 255, (2, 2, 1), np.uint8), DISCRETE)


def test_multi_input_torso_encodes_each_key():
    torso = MultiInputTorso(DICT, NetworkConfig(torso="nature_cnn", cnn_dense_size=8), (16,))
    kinds = [type(e).__name__ for e in torso.encoders]  # sorted keys: image, mode, pos
    assert kinds == ["MinAtarCNN", "MLPTorso", "MLPTorso"]
    obs = {"image": np.full((2, 5, 5, 3), 255, np.uint8), "pos": np.zeros((2, 3), np.float32),
           "mode": np.array([0, 3], np.int32)}  # fmt: skip
    assert torso(obs).shape == (2, 16)
    flat = MultiInputTorso(DICT, NetworkConfig(), ())  # the MLP torso: every key flattened
    codes = flat(obs).numpy()
    assert codes.shape == (2, 75 + 4 + 3)
    np.testing.assert_allclose(codes[:, :75], 1.0)  # uint8 images scaled by 1/255
    np.testing.assert_array_equal(codes[:, 75:79], [[1, 0, 0, 0], [0, 0, 0, 1]])  # one-hot


def test_a_named_conv_torso_encodes_board_planes_of_any_dtype():
    """A rank-3 Box leaf that is no uint8 image (a board game's int8 planes, float maps) goes
    through the conv torso the config names, as a plain rank-3 observation does; the MLP
    flattens it, and so does "auto" here: with no uint8 image leaf it resolves to the MLP
    (with a large uint8 image it would resolve to a conv torso, which would encode these
    leaves too)."""
    board = gym.spaces.Dict({
        "observation": gym.spaces.Box(0, 1, (6, 7, 2), np.int8),
        "heat": gym.spaces.Box(0.0, 1.0, (4, 4, 1), np.float32),
        "action_mask": gym.spaces.Box(0, 1, (7,), np.int8),
    })  # fmt: skip
    net = make_network(NetworkConfig(torso="minatar_cnn", hidden_sizes=(8,)), board,
                       DISCRETE.__class__(7))  # fmt: skip
    assert [type(e).__name__ for e in net.torso.encoders] == ["MinAtarCNN", "MinAtarCNN"]
    assert net.unroll(net.dummy_inputs(2, 3), ()).value.shape == (3, 2)
    for torso in ("auto", "mlp"):
        flat = make_network(NetworkConfig(torso=torso, hidden_sizes=(8,)), board,
                            DISCRETE.__class__(7))  # fmt: skip
        assert [type(e).__name__ for e in flat.torso.encoders] == ["MLPTorso", "MLPTorso"]


def test_nested_observation_specs_and_errors():
    net = make_network(NetworkConfig(hidden_sizes=(8,)), DICT, DISCRETE)
    spec = net.observation_spec
    assert {k: (s.name, tuple(s.shape), s.dtype) for k, s in spec.items()} == {
        "image": ("observation_image", (5, 5, 3), tf.uint8),
        "pos": ("observation_pos", (3,), tf.float32),
        "mode": ("observation_mode", (), tf.int32),
    }
    inputs = net.dummy_inputs(2)
    bad = dict(inputs.observation, pos=tf.zeros([2, 4]))
    with pytest.raises(ValueError, match=r"observation_pos: expected shape \['B', 3\]"):
        net(inputs._replace(observation=bad), ())
    missing = {k: v for k, v in inputs.observation.items() if k != "mode"}
    with pytest.raises(ValueError, match="observation: expected the structure"):
        net(inputs._replace(observation=missing), ())
    tup = make_network(NetworkConfig(hidden_sizes=(8,)), TUPLE, DISCRETE)
    assert [s.name for s in tup.observation_spec] == ["observation_0", "observation_1"]


def test_separate_value_torso_reads_the_nested_observation():
    config = NetworkConfig(hidden_sizes=(8,), value_hidden_sizes=(4,))
    net = make_network(config, DICT, ACTIONS["multi_binary"][0])
    assert isinstance(net.value_torso, MultiInputTorso)
    out = net.unroll(net.dummy_inputs(2, 3), ())
    assert out.value.shape == (3, 2)


def test_vector_action_spaces_refuse_other_heads():
    with pytest.raises(ValueError, match="policy_head='gaussian'"):
        make_network(NetworkConfig(policy_head="gaussian"), BOX, gym.spaces.MultiBinary(2))
    with pytest.raises(ValueError, match="q_head='stochastic_dueling'"):
        make_network(NetworkConfig(q_head="stochastic_dueling"), BOX, gym.spaces.MultiDiscrete([2]))
    with pytest.raises(ValueError, match="start != 0"):
        make_network(NetworkConfig(), BOX, gym.spaces.MultiDiscrete([2, 3], start=[1, 1]))
    with pytest.raises(ValueError, match="rank 1"):
        make_network(NetworkConfig(), BOX, gym.spaces.MultiBinary([2, 2]))
