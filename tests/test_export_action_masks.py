"""Every exported format takes the action mask (an ``observation_action_mask`` input) and
keeps to it: 10,000 masked observations per format, sampled and greedy, never a masked
action; the same noise gives the same action in every format; trajectory parity on the
masked game (which raises on a masked action)."""

import importlib.util

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tests._masked_game import load
from tfagents_vtrace.export import parity
from tfagents_vtrace.export.litert import export_tflite
from tfagents_vtrace.export.onnx import export_onnx
from tfagents_vtrace.export.saved_model import export_policy
from tfagents_vtrace.networks import NetworkConfig, make_network

masked_game = load()
FORMATS = {"tflite": ("ai_edge_litert",), "onnx": ("tf2onnx", "onnxruntime")}
NVEC = (3, 2, 4)
N = 10_000
CASES = {
    "discrete": gym.spaces.Discrete(masked_game.NUM_ACTIONS),
    "multi_discrete": gym.spaces.MultiDiscrete(NVEC),
}


def _installed(fmt: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in FORMATS[fmt])


def _spaces(case):
    action = CASES[case]
    n = masked_game.NUM_ACTIONS if case == "discrete" else sum(NVEC)
    observation = gym.spaces.Dict({
        "clock": gym.spaces.Box(0.0, 1.0, (1,), np.float32),
        "action_mask": gym.spaces.MultiBinary(n),
    })  # fmt: skip
    blocks = [n] if case == "discrete" else list(NVEC)
    return observation, action, blocks


def _network(case):
    """An LSTM network (previous action and reward inputs) whose logits are O(1) and far from
    uniform, so that masked actions would be likely if the mask were ignored."""
    import keras

    keras.utils.set_random_seed(5)
    observation, action, _ = _spaces(case)
    config = NetworkConfig(hidden_sizes=(16,), core="lstm", lstm_size=8, use_prev_action=True,
                           use_prev_reward=True, policy_init_scale=5.0)  # fmt: skip
    return make_network(config, observation, action)


def _masked_inputs(rng, blocks, n):
    parts = []
    for size in blocks:  # about half the actions masked, one allowed at least per block
        m = (rng.random((n, size)) < 0.5).astype(np.float32)
        m[np.arange(n), rng.integers(0, size, n)] = 1.0
        parts.append(m)
    mask = np.concatenate(parts, axis=-1)
    return mask, {
        "observation_action_mask": mask,
        "observation_clock": rng.random((n, 1), dtype=np.float32),
        "first": rng.random(n) < 0.5,
        "prev_reward": rng.normal(size=n).astype(np.float32),
    }


def _masked_taken(mask, action, blocks) -> int:
    action = np.asarray(action).reshape(len(mask), -1)
    offsets = np.cumsum([0, *blocks[:-1]])
    return int((mask[np.arange(len(mask))[:, None], offsets + action] == 0).sum())


@pytest.fixture(scope="module", params=list(CASES))
def artefacts(request, tmp_path_factory):
    case = request.param
    tmp = tmp_path_factory.mktemp(f"masked_{case}")
    net = _network(case)
    paths = {"saved_model": export_policy(net, tmp / "policy")}
    for fmt in FORMATS:
        if _installed(fmt):
            writer = export_tflite if fmt == "tflite" else export_onnx
            paths[fmt] = writer(net, tmp / f"policy.{fmt}")
    return case, net, paths


def test_every_format_keeps_to_the_mask_on_10000_observations(artefacts, rng):
    case, net, paths = artefacts
    _, action_space, blocks = _spaces(case)
    mask, inputs = _masked_inputs(rng, blocks, N)
    inputs["prev_action"] = np.zeros((N, *action_space.shape), np.int32)
    reference = parity.SavedModelRunner(paths["saved_model"])
    noise = parity.draw_noises(reference.metadata, rng, N)
    state = reference.initial_state(N)
    actions = {}
    for fmt, path in paths.items():
        runner = parity.open_runner(path)
        feed = {**inputs, **runner.initial_state(N)}
        actions[fmt] = {"greedy": runner.greedy(feed)["action"],
                        "sample": runner.sample(feed, noise)["action"]}  # fmt: skip
        for kind, action in actions[fmt].items():
            assert _masked_taken(mask, action, blocks) == 0, (fmt, kind)
    for fmt in actions:  # the same noise, the same action
        for kind in ("greedy", "sample"):
            np.testing.assert_array_equal(actions[fmt][kind], actions["saved_model"][kind])
    # The SavedModel's own sampler (TensorFlow Probability) keeps to the mask too.
    policy = tf.saved_model.load(paths["saved_model"])
    observation = {"action_mask": mask, "clock": inputs["observation_clock"]}
    out = policy.action(observation=observation, first=inputs["first"],
                        prev_action=inputs["prev_action"], prev_reward=inputs["prev_reward"],
                        state=tuple(state.values()))  # fmt: skip
    assert _masked_taken(mask, out["action"].numpy(), blocks) == 0
    # Were the mask ignored, these logits would choose masked actions often.
    unmasked = {**inputs, "observation_action_mask": np.ones_like(mask)}
    free = reference.greedy({**unmasked, **state})["action"]
    assert _masked_taken(mask, free, blocks) > N // 10


@pytest.mark.parametrize("artefacts", ["discrete"], indirect=True)
def test_trajectory_parity_on_the_masked_game(artefacts):
    _, _, paths = artefacts
    for fmt, path in paths.items():
        report = parity.check_parity(paths["saved_model"], path, masked_game.MaskedGame(),
                                     steps=60, max_episode_steps=8)  # fmt: skip
        assert report.passed, (fmt, report.failures)
        assert report.action_mismatches == {"greedy": 0, "sample": 0}
        assert report.episodes >= 5
