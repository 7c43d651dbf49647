"""Export of Dict / Tuple observations and MultiDiscrete / MultiBinary actions.

The SavedModel takes a Dict observation as a dict (``policy.action(observation={...})``) and
as ``observation_<key>`` inputs in its flat signatures, and matches the in-process network
over a few steps with an episode reset; LiteRT and ONNX take a Dict observation as one
``observation_<key>`` input per leaf and carry the vector-action policies (trajectory parity
with the SavedModel).
"""

import importlib.util
import json

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tests.agents._dict_env import TinyDictEnv, register
from tests.test_export_portable import ToyEnv
from tfagents_vtrace.export import parity
from tfagents_vtrace.export.litert import export_tflite
from tfagents_vtrace.export.onnx import export_onnx
from tfagents_vtrace.export.saved_model import export_policy
from tfagents_vtrace.networks import NetInputs, NetworkConfig, make_network

DICT = gym.spaces.Dict({
    "image": gym.spaces.Box(0, 255, (5, 5, 2), np.uint8),
    "pos": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
    "mode": gym.spaces.Discrete(4),
})  # fmt: skip
OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACTIONS = {"multi_discrete": gym.spaces.MultiDiscrete([3, 2, 4]),
           "multi_binary": gym.spaces.MultiBinary(3)}  # fmt: skip
NET = NetworkConfig(torso="nature_cnn", hidden_sizes=(8,), cnn_dense_size=8, core="lstm",
                    lstm_size=4, use_prev_action=True, use_prev_reward=True,
                    cnn_compute_dtype="float32")  # the export's reference  # fmt: skip
FORMATS = {"tflite": ("ai_edge_litert",), "onnx": ("tf2onnx", "onnxruntime")}


def _installed(fmt: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in FORMATS[fmt])


def _observations(rng, t, b):
    return {
        "image": rng.integers(0, 256, (t, b, 5, 5, 2)).astype(np.uint8),
        "pos": rng.uniform(-1, 1, (t, b, 3)).astype(np.float32),
        "mode": rng.integers(0, 4, (t, b)).astype(np.int32),
    }


@pytest.mark.parametrize("action", list(ACTIONS))
def test_saved_model_takes_a_dict_observation(tmp_path, rng, action):
    net = make_network(NET, DICT, ACTIONS[action])
    policy = tf.saved_model.load(export_policy(net, tmp_path / "policy"))
    t, b = 6, 2
    obs = _observations(rng, t, b)
    first = np.zeros((t, b), bool)
    first[0], first[3, 1] = True, True
    prev = np.zeros((b, 3), np.int32)
    reward = rng.normal(size=(t, b)).astype(np.float32)
    state = policy.get_initial_state(batch_size=tf.constant(b))
    net_state = net.initial_state(b)
    for s in range(t):
        o = {k: v[s] for k, v in obs.items()}
        out = policy.greedy_action(observation=o, first=first[s], prev_action=prev,
                                   prev_reward=reward[s], state=state)  # fmt: skip
        ref = net(NetInputs(o, first[s], prev, reward[s]), net_state)
        np.testing.assert_allclose(out["value"], ref.value, atol=1e-5)
        np.testing.assert_array_equal(out["action"], net.greedy_action(ref.policy))
        sampled = policy.action(observation=o, first=first[s], prev_action=prev,
                                prev_reward=reward[s], state=state)["action"].numpy()  # fmt: skip
        assert ACTIONS[action].contains(sampled[0].astype(ACTIONS[action].dtype))
        state, net_state, prev = out["state"], ref.state, out["action"].numpy()
    flat = {f"observation_{k}": v[0] for k, v in obs.items()}
    flat.update(first=first[0], prev_action=prev, prev_reward=reward[0])
    flat.update(policy.signatures["get_initial_state"](batch_size=tf.constant(b)))
    assert policy.signatures["greedy_action"](**flat)["action"].shape == (b, 3)
    noise = rng.random((b, 9 if action == "multi_discrete" else 3), dtype=np.float32)
    assert policy.signatures["action_from_noise"](**flat, noise=noise)["action"].shape == (b, 3)
    with pytest.raises((ValueError, TypeError)):  # a wrong shape is rejected
        bad = dict({k: v[0] for k, v in obs.items()}, pos=np.zeros((b, 4), np.float32))
        policy.action(observation=bad, first=first[0], prev_action=prev, prev_reward=reward[0],
                      state=state)  # fmt: skip
    meta = json.loads(policy.metadata.numpy())
    assert meta["observation_dtype"] == {"observation_image": "uint8", "observation_mode": "int32",
                                         "observation_pos": "float32"}  # fmt: skip


def test_tuple_observations_are_numbered(tmp_path):
    space = gym.spaces.Tuple((gym.spaces.Discrete(3), OBS))
    net = make_network(NetworkConfig(hidden_sizes=(8,)), space, ACTIONS["multi_binary"])
    policy = tf.saved_model.load(export_policy(net, tmp_path / "policy"))
    inputs = policy.signatures["serving_default"].structured_input_signature[1]
    assert {"observation_0", "observation_1"} <= set(inputs)
    out = policy.action(observation=(tf.constant([2]), tf.zeros([1, 3])), first=tf.constant([True]),
                        prev_action=tf.zeros([1, 3], tf.int32), prev_reward=tf.zeros([1]),
                        state=policy.get_initial_state(batch_size=tf.constant(1)))  # fmt: skip
    assert out["action"].shape == (1, 3)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_litert_and_onnx_take_dict_observations_one_input_per_leaf(tmp_path, fmt):
    if not _installed(fmt):
        pytest.skip(f"the {fmt} extra is not installed")
    register()
    env = TinyDictEnv()
    net = make_network(NET, env.observation_space, env.action_space)
    for variable in net.policy_head.trainable_variables:  # O(1) logits: a telling parity
        if len(variable.shape) == 2:
            variable.assign(variable * 100.0)
    saved = export_policy(net, tmp_path / "saved")
    artefact = (export_tflite if fmt == "tflite" else export_onnx)(net, tmp_path / f"p.{fmt}")
    report = parity.check_parity(saved, artefact, env, steps=40)
    assert report.passed, report.failures
    assert report.action_mismatches == {"greedy": 0, "sample": 0}
    assert {"observation_image", "observation_mode", "observation_pos"} <= set(
        parity.record(parity.SavedModelRunner(saved), env, 2)
    )


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("action", list(ACTIONS))
def test_litert_and_onnx_carry_vector_actions(tmp_path, fmt, action):
    if not _installed(fmt):
        pytest.skip(f"the {fmt} extra is not installed")
    config = NetworkConfig(hidden_sizes=(8,), core="lstm", lstm_size=4, use_prev_action=True)
    net = make_network(config, OBS, ACTIONS[action])
    saved = export_policy(net, tmp_path / "saved")
    artefact = (export_tflite if fmt == "tflite" else export_onnx)(net, tmp_path / f"p.{fmt}")
    report = parity.check_parity(saved, artefact, ToyEnv(OBS, ACTIONS[action]), steps=40)
    assert report.passed, report.failures
    assert report.action_mismatches == {"greedy": 0, "sample": 0}
