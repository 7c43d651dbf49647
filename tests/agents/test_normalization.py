"""normalize_observations and normalize_rewards: running statistics against numpy, kept in
the network (checkpointed, restored, exported) and refused where an agent has none."""

import os

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

import tests.normalization_envs  # noqa: F401 - registers ScaledCartPole-v0
import tfagents_vtrace as tv
from tfagents_vtrace.networks import NetworkConfig, make_network
from tfagents_vtrace.networks.normalization import (
    CLIP,
    EPSILON,
    INITIAL_COUNT,
    ReturnScaler,
    RunningNormalizer,
)
from tfagents_vtrace.runtime.acting.policies import NumpyMLPPolicy, TFPolicy
from tfagents_vtrace.runtime.rundir.checkpointing import restore_network

ENV = "tests.normalization_envs:ScaledCartPole-v0"
RUN = dict(total_steps=1200, num_envs=4, unroll_length=10, eval_every=0, eval_episodes=2, seed=0)


def test_the_running_moments_are_those_of_every_sample_seen():
    rng = np.random.default_rng(0)
    batches = [rng.normal(500.0, 30.0, size=(n, 3)) for n in (7, 1, 40, 13)]
    norm = RunningNormalizer((3,))
    for batch in batches:
        norm.update(batch)
    seen = np.concatenate(batches)
    # the statistics start as INITIAL_COUNT samples of mean 0, variance 1
    n = len(seen) + INITIAL_COUNT
    mean = seen.sum(0) / n
    var = (np.square(seen - mean).sum(0) + INITIAL_COUNT * (1.0 + mean**2)) / n
    np.testing.assert_allclose(norm.mean.numpy(), mean, rtol=1e-6)
    np.testing.assert_allclose(norm.var.numpy(), var, rtol=1e-5)
    x = rng.normal(500.0, 90.0, size=(5, 3)).astype(np.float32)
    expected = np.clip((x - mean) / np.sqrt(var + EPSILON), -CLIP, CLIP)
    np.testing.assert_allclose(norm(x).numpy(), expected, rtol=1e-4, atol=1e-5)


def test_the_return_statistics_follow_episodes_across_unrolls():
    rng = np.random.default_rng(1)
    t, b, discount = 6, 3, 0.9
    rewards = [rng.normal(size=(t, b)) for _ in range(3)]
    firsts = [rng.random((t, b)) < 0.2 for _ in range(3)]
    scaler = ReturnScaler(discount)
    scaler.update([(rewards[0], firsts[0], 0)])
    scaler.update([(r, f, 0) for r, f in zip(rewards[1:], firsts[1:], strict=True)])
    # slow reference: each column's discounted return, reset where an episode starts
    returns = []
    for col in range(b):
        g = 0.0
        for reward, first in zip(rewards, firsts, strict=True):
            for step in range(t):
                g = reward[step, col] + (0.0 if first[step, col] else discount * g)
                returns.append(g)
    returns = np.asarray(returns)
    n = len(returns) + INITIAL_COUNT
    mean = returns.sum() / n
    var = (np.square(returns - mean).sum() + INITIAL_COUNT * (1.0 + mean**2)) / n
    np.testing.assert_allclose(scaler.statistics.var.numpy(), var, rtol=1e-5)
    reward = np.array([[3.0, -200.0]], np.float32)
    np.testing.assert_allclose(
        scaler.scale(reward), np.clip(reward / np.sqrt(var + EPSILON), -CLIP, CLIP), rtol=1e-5
    )


def _scaled_network():
    space = gym.make(ENV).observation_space
    config = NetworkConfig(normalize_observations=True, activation="tanh")
    network = make_network(config, space, gym.spaces.Discrete(2))
    rng = np.random.default_rng(2)
    network.update_observation_statistics(rng.normal(500.0, 300.0, size=(64, 4)))
    return network, rng


def test_the_numpy_actor_normalises_as_the_network_does():
    network, rng = _scaled_network()
    obs = rng.normal(500.0, 900.0, size=(8, 4)).astype(np.float32)
    numpy_logits = NumpyMLPPolicy(network).logits(obs)
    first = np.ones(8, bool)
    tf_logits = network(
        network.dummy_inputs(8)._replace(observation=tf.constant(obs), first=first)
    ).policy["logits"]
    np.testing.assert_allclose(numpy_logits, tf_logits.numpy(), rtol=1e-4, atol=1e-5)
    assert isinstance(TFPolicy(network), TFPolicy)


def test_an_observation_without_float_features_is_refused():
    with pytest.raises(ValueError, match=r"^normalize_observations: .* no float features"):
        make_network(
            NetworkConfig(normalize_observations=True), gym.spaces.Discrete(5),
            gym.spaces.Discrete(2),
        )  # fmt: skip


@pytest.fixture(scope="module")
def normalized_run(tmp_path_factory):
    logdir = str(tmp_path_factory.mktemp("norm") / "run")
    final = tv.train(
        "impala", env=ENV, logdir=logdir, normalize_observations=True, normalize_rewards=True,
        **RUN,
    )  # fmt: skip
    return logdir, final


def test_the_statistics_are_the_observations_trained_on_and_checkpointed(normalized_run):
    logdir, final = normalized_run
    norm = restore_network(logdir).observation_normalizers["0"]
    # every fresh observation once: total_steps of them, on CartPole's scale times 1000 + 500
    assert norm.count.numpy() == pytest.approx(final["step"] + INITIAL_COUNT)
    assert 300.0 < float(np.mean(norm.mean.numpy())) < 700.0
    assert np.all(norm.var.numpy() > 1.0)
    reader = tf.train.load_checkpoint(os.path.join(logdir, "checkpoints"))
    names = reader.get_variable_to_shape_map()
    assert any(name.startswith("return_statistics/") for name in names)


def test_a_resume_continues_the_statistics(normalized_run, tmp_path):
    logdir, final = normalized_run
    longer = tv.train(
        "impala", env=ENV, logdir=logdir, normalize_observations=True, normalize_rewards=True,
        **{**RUN, "total_steps": final["step"] + 400},
    )  # fmt: skip
    assert longer["resumed"]
    norm = restore_network(logdir).observation_normalizers["0"]
    assert norm.count.numpy() == pytest.approx(longer["step"] + INITIAL_COUNT)


def test_the_exported_policy_takes_raw_observations(normalized_run):
    logdir, _ = normalized_run
    network = restore_network(logdir)
    policy = tv.load_policy(os.path.join(logdir, "policy"))
    obs = np.random.default_rng(3).normal(500.0, 500.0, size=(16, 4)).astype(np.float32)
    action, _ = policy.step(obs, greedy=True)
    inputs = network.dummy_inputs(16)._replace(observation=tf.constant(obs))
    expected = np.argmax(network(inputs).policy["logits"].numpy(), axis=-1)
    np.testing.assert_array_equal(np.asarray(action), expected)


@pytest.mark.parametrize("setting", ["normalize_observations", "normalize_rewards"])
def test_an_agent_without_the_statistics_refuses_them(setting, tmp_path):
    with pytest.raises(ValueError, match=rf"^{setting}: not available for taac"):
        tv.train("taac", env="Pendulum-v1", logdir=str(tmp_path / "run"), **{setting: True}, **RUN)


@pytest.mark.parametrize("agent, extra", [("a3c", {"num_workers": 2}), ("acer", {}),
                                          ("acer", {"num_workers": 2})])  # fmt: skip
def test_workers_and_replay_keep_the_statistics_of_what_they_saw(agent, extra, tmp_path):
    logdir = str(tmp_path / agent)
    final = tv.train(
        agent, env=ENV, logdir=logdir, normalize_observations=True, normalize_rewards=True,
        **extra, **RUN,
    )  # fmt: skip
    norm = restore_network(logdir).observation_normalizers["0"]
    # every worker's rollout steps, each observation once
    assert norm.count.numpy() == pytest.approx(final["step"] + INITIAL_COUNT)
    assert 300.0 < float(np.mean(norm.mean.numpy())) < 700.0
    reader = tf.train.load_checkpoint(os.path.join(logdir, "checkpoints"))
    assert any(n.startswith("return_statistics/") for n in reader.get_variable_to_shape_map())


@pytest.mark.parametrize("fmt", ["tflite", "onnx"])
def test_every_format_normalises_inside_and_agrees(normalized_run, fmt, tmp_path):
    pytest.importorskip("ai_edge_litert" if fmt == "tflite" else "tf2onnx")
    from tfagents_vtrace.export import artefacts

    logdir, _ = normalized_run
    network = restore_network(logdir)
    path = artefacts.write(network, str(tmp_path / f"policy.{fmt}"), fmt)
    report = artefacts.check(network, path, fmt, gym.make(ENV), steps=200)
    assert report.passed, report


def test_an_action_mask_is_not_normalised():
    space = gym.spaces.Dict(
        {
            "x": gym.spaces.Box(-1e4, 1e4, (3,), np.float32),
            "action_mask": gym.spaces.Box(0.0, 1.0, (4,), np.float32),
        }
    )
    network = make_network(
        NetworkConfig(normalize_observations=True), space, gym.spaces.Discrete(4)
    )
    names = [s.name for s in tf.nest.flatten(network.observation_spec)]
    normalised = [names[int(i)] for i in network.observation_normalizers]
    assert normalised == ["observation_x"]


def test_the_statistics_are_in_a_checkpoint_of_the_network_object(tmp_path):
    """A3C, ACER and TAAC checkpoint the network as an object (not IMPALA's variable list)."""
    network, _ = _scaled_network()
    path = tf.train.Checkpoint(network=network).write(str(tmp_path / "ckpt"))
    fresh, _ = _scaled_network()
    fresh.observation_normalizers["0"].update(np.zeros((3, 4)))
    tf.train.Checkpoint(network=fresh).read(path).assert_existing_objects_matched()
    for name in ("mean", "var", "count"):
        np.testing.assert_array_equal(
            getattr(fresh.observation_normalizers["0"], name).numpy(),
            getattr(network.observation_normalizers["0"], name).numpy(),
        )


def test_a_file_named_without_its_extension_is_checked_as_its_format(normalized_run, tmp_path):
    pytest.importorskip("tf2onnx")
    from tfagents_vtrace.export import artefacts

    network = restore_network(normalized_run[0])
    path = artefacts.write(network, str(tmp_path / "policy_file"), "onnx")
    assert artefacts.check(network, path, "onnx", gym.make(ENV), steps=50).passed
