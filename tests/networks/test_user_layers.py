"""A torso and a core of one's own (networks/user_layers.py, core.CellCore) and torso="auto"
(multi_input.auto_torso): what the user's layers receive, how they are named and refused,
the recurrent contract against a slow numpy GRU, and the auto rule."""

import pickle
import re

import gymnasium as gym
import keras
import numpy as np
import pytest
import tensorflow as tf

import tests.user_layers as mine
from tfagents_vtrace.networks import (
    CellCore,
    NetInputs,
    NetworkConfig,
    make_network,
    multi_input,
    user_layers,
)

VECTOR = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
IMAGE = gym.spaces.Box(0, 255, (5, 4, 2), np.uint8)
GRID = gym.spaces.Box(0, 1, (10, 10, 3), np.uint8)  # MinAtar-like 0/1 channels
ACTIONS = gym.spaces.Discrete(3)


def _path(obj, name="torso"):
    return user_layers.resolve(obj, name)


def _features(net, obs):
    return net._features(tf.nest.map_structure(tf.constant, obs)).numpy()


@pytest.mark.parametrize(
    "space, expected",
    [
        (VECTOR, lambda x: x),
        (IMAGE, lambda x: x.astype(np.float32) / 255.0),  # 0-255 images scaled
        (GRID, lambda x: x.astype(np.float32)),  # 0/1 grids as they are
    ],
)
def test_the_torso_receives_the_observation_as_float32_preprocessed(space, expected):
    net = make_network(NetworkConfig(torso=_path(mine.FlattenTorso)), space, ACTIONS)
    space.seed(0)
    obs = np.stack([space.sample() for _ in range(4)])
    got = _features(net, obs)
    np.testing.assert_allclose(got, expected(obs).reshape(4, -1), rtol=1e-6)


def test_a_dict_observation_reaches_the_torso_as_the_dict_of_its_leaves():
    space = gym.spaces.Dict({"image": IMAGE, "vector": VECTOR, "cell": gym.spaces.Discrete(4)})
    net = make_network(NetworkConfig(torso=_path(mine.DictFlattenTorso)), space, ACTIONS)
    space.seed(1)
    samples = [space.sample() for _ in range(3)]
    obs = {k: np.stack([s[k] for s in samples]) for k in ("cell", "image", "vector")}
    got = _features(net, obs)
    one_hot = np.eye(4, dtype=np.float32)[obs["cell"]]
    image = obs["image"].reshape(3, -1).astype(np.float32) / 255.0
    np.testing.assert_allclose(got, np.concatenate([one_hot, image, obs["vector"]], -1), 1e-6)


def test_a_discrete_observation_reaches_the_torso_one_hot():
    net = make_network(NetworkConfig(torso=_path(mine.FlattenTorso)), gym.spaces.Discrete(5),
                       ACTIONS)  # fmt: skip
    np.testing.assert_array_equal(_features(net, np.array([0, 3])), np.eye(5)[[0, 3]])


def test_construction_rules_and_the_summary_shows_the_layer():
    net = make_network(NetworkConfig(torso=_path(mine.SpaceTorso)), VECTOR, ACTIONS)
    assert net.torso.space is VECTOR  # observation_space= given to an __init__ that takes it
    net = make_network(NetworkConfig(torso=_path(mine.dense_torso)), VECTOR, ACTIONS)
    assert net.torso.units == 12  # a function called with the observation space
    assert net.config.torso == "tests.user_layers:dense_torso"
    assert net.config.value_hidden_sizes is None  # the value shares a torso of one's own
    lines = []
    make_network(NetworkConfig(torso=_path(mine.LayerNormTorso)), VECTOR, ACTIONS).summary(
        print_fn=lambda line, **kw: lines.append(line)
    )
    assert "LayerNormTorso" in "\n".join(lines)


def _local_class():
    class Local(keras.layers.Layer):
        pass

    return Local


class MainTorso(keras.layers.Layer):
    pass


MainTorso.__module__ = "__main__"


@pytest.mark.parametrize(
    "value, message",
    [
        (lambda space: keras.layers.Dense(3), r"lambda has no name"),
        (_local_class(), r"defined inside a function"),
        (MainTorso, r"defined in the script run as the program"),
        (keras.layers.Dense(3), r"received a layer instance"),
        (mine.NotALayer, r"not a keras.layers.Layer subclass"),
        ("no_such_module_xyz:Torso", r"cannot import 'no_such_module_xyz'"),
        ("tests.user_layers:Nope", r"module 'tests.user_layers' has no 'Nope'"),
        ("tests.user_layers:", r"expected 'package.module:Name'"),
        (3, r"expected a built-in name"),
    ],
)
def test_refusals_are_one_line_naming_the_setting(value, message):
    with pytest.raises(ValueError, match=message) as raised:
        user_layers.resolve(value, "torso")
    assert str(raised.value).startswith("torso: ") and "\n" not in str(raised.value)


def test_a_path_never_given_in_this_process_is_not_imported():
    config = NetworkConfig(torso="tests.user_layers:NeverNamed")
    with pytest.raises(ValueError, match=r"^torso: .*never imports code: pass torso="):
        make_network(config, VECTOR, ACTIONS)


def test_a_pickled_config_carries_its_layers_to_another_process():
    path = _path(mine.LayerNormTorso)
    data = pickle.dumps(NetworkConfig(torso=path, core=_path(mine.SmallGRU, "core")))
    user_layers._REGISTRY.clear()  # as in a new process (a Ray actor)
    config = pickle.loads(data)
    assert config.torso == path and user_layers.registered(path) is mine.LayerNormTorso
    net = make_network(config, VECTOR, ACTIONS)
    assert isinstance(net.core.cell, mine.SmallGRU) and net.state_sizes == (8,)


def test_the_time_step_input_needs_the_lstm_core():
    with pytest.raises(ValueError, match="use_time_step=True requires core='lstm'"):
        NetworkConfig(core="tests.user_layers:SmallGRU", use_time_step=True)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def numpy_gru(x, first, h, kernel, recurrent, bias):
    """Cho et al. 2014's GRU as Keras computes it (reset_after, gates z, r, h), the state
    zeroed where ``first``."""
    ys = []
    h = h.copy()
    for t in range(x.shape[0]):
        h = h * (1.0 - first[t][:, None])
        xz, xr, xh = np.split(x[t] @ kernel + bias[0], 3, -1)
        hz, hr, hh = np.split(h @ recurrent + bias[1], 3, -1)
        z, r = _sigmoid(xz + hz), _sigmoid(xr + hr)
        h = z * h + (1.0 - z) * np.tanh(xh + r * hh)
        ys.append(h)
    return np.stack(ys), h


def test_a_gru_cell_core_resets_where_first_against_numpy(rng):
    T, B, F = 6, 3, 5
    core = CellCore(mine.SmallGRU())
    x = rng.normal(size=(T, B, F)).astype(np.float32)
    first = np.zeros((T, B), bool)
    first[0, 0] = first[3, 1] = True
    state = (rng.normal(size=(B, 8)).astype(np.float32),)
    ys, final = core.unroll(tf.constant(x), tf.constant(first), state)
    kernel, recurrent, bias = (w.numpy() for w in core.cell.weights)
    ref_y, ref_h = numpy_gru(x, first.astype(np.float32), state[0], kernel, recurrent, bias)
    np.testing.assert_allclose(ys.numpy(), ref_y, atol=1e-5)
    np.testing.assert_allclose(final[0].numpy(), ref_h, atol=1e-5)
    h = state
    for t in range(T):  # stepping T times equals the unroll
        y, h = core.step(tf.constant(x[t]), tf.constant(first[t]), h)
        np.testing.assert_allclose(y.numpy(), ref_y[t], atol=1e-5)


def test_a_network_with_a_core_of_ones_own_unrolls_as_it_steps(rng):
    config = NetworkConfig(torso=_path(mine.LayerNormTorso), core=_path(mine.TwoStateCell, "core"),
                           use_prev_action=True)  # fmt: skip
    net = make_network(config, VECTOR, ACTIONS)
    assert net.state_sizes == (4, 4)
    T, B = 5, 2
    obs = rng.normal(size=(T, B, 3)).astype(np.float32)
    first = np.zeros((T, B), bool)
    first[0] = first[2, 1] = True
    inputs = NetInputs(obs, first, rng.integers(0, 3, (T, B)).astype(np.int32),
                       np.zeros((T, B), np.float32))  # fmt: skip
    state = net.initial_state(B)
    unrolled = net.unroll(inputs, state)
    for t in range(T):
        out = net(NetInputs(*(v[t] for v in inputs)), state)
        np.testing.assert_allclose(out.value.numpy(), unrolled.value.numpy()[t], atol=1e-5)
        state = out.state
    for a, b in zip(state, unrolled.state):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)
    # The cell's weights are the network's (trained, checkpointed).
    assert {id(w) for w in net.core.cell.weights} <= {id(w) for w in net.trainable_weights}


@pytest.mark.parametrize(
    "space, torso, why",
    [
        (gym.spaces.Box(0, 255, (84, 84, 3), np.uint8), "small_atari_cnn", "84x84x3 uint8 images"),
        (gym.spaces.Box(0, 255, (36, 40, 1), np.uint8), "small_atari_cnn", "36x40x1 uint8 images"),
        (gym.spaces.Box(0, 255, (35, 84, 1), np.uint8), "minatar_cnn", "35x84x1 uint8 images"),
        (GRID, "minatar_cnn", "10x10x3 uint8 images"),
        (gym.spaces.Box(0, 255, (2, 2, 3), np.uint8), "mlp", "smaller than 3x3"),
        (gym.spaces.Box(0.0, 1.0, (84, 84, 3), np.float32), "mlp", "float32 observations"),
        (gym.spaces.Box(0, 255, (84, 84), np.uint8), "mlp", "uint8 observations"),
        (VECTOR, "mlp", "float32 observations of shape (3,)"),
        (gym.spaces.Discrete(4), "mlp", "Discrete observations"),
        (gym.spaces.Dict({"image": GRID, "v": VECTOR}), "mlp", "images in a Dict observation"),
        (
            gym.spaces.Tuple((GRID, gym.spaces.Box(0, 255, (40, 36, 3), np.uint8))),
            "small_atari_cnn",
            "40x36x3 uint8 images in a Tuple observation",
        ),
        (gym.spaces.Dict({"v": VECTOR}), "mlp", "Dict observations without uint8 images"),
    ],
)
def test_auto_torso_picks_by_the_image_size(space, torso, why):
    got, reason = multi_input.auto_torso(space)
    assert got == torso and why in reason
    assert make_network(NetworkConfig(), space, ACTIONS).config.torso == torso


def test_auto_keeps_the_separate_value_network_of_the_mlp_only():
    assert make_network(NetworkConfig(), VECTOR, ACTIONS).config.value_hidden_sizes == (64, 64)
    net = make_network(NetworkConfig(cnn_dense_size=8), GRID, ACTIONS)
    assert net.config.torso == "minatar_cnn" and net.config.value_hidden_sizes is None
    with pytest.raises(ValueError, match=re.escape("cnn_init='orthogonal' applies to")):
        make_network(NetworkConfig(cnn_init="orthogonal"), VECTOR, ACTIONS)
