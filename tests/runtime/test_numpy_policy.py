"""The numpy MLP policy on uint8 observations equals the TF network (0/1 grids and images)."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tfagents_vtrace.networks import NetInputs, NetworkConfig, make_network
from tfagents_vtrace.runtime.acting.policies import (
    NumpyConvPolicy,
    NumpyMLPPolicy,
    TFPolicy,
    make_policy,
)


@pytest.mark.parametrize("high", [1, 255])
def test_numpy_policy_matches_the_network_on_uint8_observations(high, rng):
    space = gym.spaces.Box(0, high, (10, 10, 4), np.uint8)
    tf.keras.utils.set_random_seed(0)
    net = make_network(
        NetworkConfig(
            torso="mlp", hidden_sizes=(16, 16), activation="relu", value_hidden_sizes=(8,)
        ),
        space,
        gym.spaces.Discrete(3),
    )
    assert NumpyMLPPolicy.supports(net)
    policy = make_policy(net)
    assert isinstance(policy, NumpyMLPPolicy)
    obs = rng.integers(0, high + 1, size=(5, 10, 10, 4)).astype(np.uint8)
    zeros = np.zeros(5, np.int32)
    out = net(NetInputs(obs, np.ones(5, bool), zeros, np.zeros(5, np.float32)))
    np.testing.assert_allclose(policy.logits(obs), out.policy["logits"].numpy(), atol=1e-5)
    assert np.abs(out.policy["logits"].numpy()).max() > 1e-4


@pytest.mark.parametrize(
    "torso,size,high",
    [("small_atari_cnn", 84, 255), ("nature_cnn", 84, 255), ("minatar_cnn", 10, 1)],
)
def test_numpy_conv_policy_matches_the_network(torso, size, high, rng):
    """policy_impl="numpy" on a conv torso: im2col numpy convolutions against TensorFlow's
    Conv2D on the same weights (strides 4/2/1 and 1, uint8 images and 0/1 grids)."""
    space = gym.spaces.Box(0, high, (size, size, 4), np.uint8)
    tf.keras.utils.set_random_seed(0)
    cfg = NetworkConfig(  # float32: the reference of the float32 numpy forward pass
        torso=torso, policy_init_scale=1.0, cnn_init="orthogonal", cnn_compute_dtype="float32"
    )
    net = make_network(cfg, space, gym.spaces.Discrete(6))
    assert isinstance(make_policy(net, "auto"), TFPolicy)  # opt-in only
    policy = make_policy(net, "numpy", seed=3)
    assert isinstance(policy, NumpyConvPolicy)
    obs = rng.integers(0, high + 1, size=(5, size, size, 4)).astype(np.uint8)
    zeros = np.zeros(5, np.int32)
    want = net(NetInputs(obs, np.ones(5, bool), zeros, np.zeros(5, np.float32))).policy["logits"]
    got = policy.logits(obs)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-4)
    assert np.std(want.numpy()) > 1e-2
    # new weights are picked up (conv kernels re-flattened)
    weights = [w * 0.5 if w.ndim == 4 else w for w in net.get_weights()]
    net.set_weights(weights)
    policy.set_weights(weights)
    want = net(NetInputs(obs, np.ones(5, bool), zeros, np.zeros(5, np.float32))).policy["logits"]
    np.testing.assert_allclose(policy.logits(obs), want.numpy(), rtol=1e-4, atol=1e-4)
    # greedy acts on the argmax; sampling follows the softmax (Gumbel-max)
    greedy = make_policy(net, "numpy", greedy=True)
    action, params, state = greedy.step(obs, np.ones(5, bool), zeros, zeros, ())
    np.testing.assert_array_equal(action, np.argmax(params["logits"], -1))
    assert state == ()
    one = np.repeat(obs[:1], 4000, axis=0)
    actions, params, _ = policy.step(one, np.ones(4000, bool), zeros[:1], zeros[:1], ())
    probs = tf.nn.softmax(params["logits"][0]).numpy()
    freq = np.bincount(actions, minlength=6) / 4000.0
    tolerance = 4 * np.sqrt(probs * (1 - probs) / 4000) + 1e-3  # 4 binomial std errors
    assert np.all(np.abs(freq - probs) <= tolerance), (freq, probs)


def test_numpy_policy_impl_refuses_networks_it_cannot_run():
    """The universe CNN ("same" ELU convs), an LSTM core and previous-action inputs."""
    space = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
    configs = [
        NetworkConfig(torso="universe_cnn"),
        NetworkConfig(torso="small_atari_cnn", core="lstm"),
        NetworkConfig(torso="small_atari_cnn", use_prev_action=True),
    ]
    for cfg in configs:
        net = make_network(cfg, space, gym.spaces.Discrete(3))
        with pytest.raises(ValueError, match="policy_impl"):
            make_policy(net, "numpy")
        assert isinstance(make_policy(net, "auto"), TFPolicy)


def test_numpy_policy_on_a_masked_dict_observation_matches_the_network(rng):
    """policy_impl="numpy" on a Dict observation (an int8 board, a Discrete leaf and an
    action mask): the leaves flattened / one-hot as the multi-input torso does, the masked
    logits equal, a masked action never sampled; "auto" keeps the TF policy."""
    space = gym.spaces.Dict(
        {
            "observation": gym.spaces.Box(0, 1, (6, 7, 2), np.int8),
            "turn": gym.spaces.Discrete(3),
            "action_mask": gym.spaces.Box(0, 1, (7,), np.int8),
        }
    )
    tf.keras.utils.set_random_seed(0)
    cfg = NetworkConfig(torso="mlp", hidden_sizes=(16, 16), policy_init_scale=1.0)
    net = make_network(cfg, space, gym.spaces.Discrete(7))
    assert isinstance(make_policy(net, "auto"), TFPolicy)  # opt-in only
    policy = make_policy(net, "numpy", seed=1)
    assert isinstance(policy, NumpyMLPPolicy)
    n = 64
    mask = rng.integers(0, 2, size=(n, 7)).astype(np.int8)
    mask[:, 3] = 1
    obs = {
        "observation": rng.integers(0, 2, size=(n, 6, 7, 2)).astype(np.int8),
        "turn": rng.integers(0, 3, size=n),
        "action_mask": mask,
    }
    zeros = np.zeros(n, np.int32)
    want = net(NetInputs(obs, np.ones(n, bool), zeros, np.zeros(n, np.float32)))
    want = want.policy["logits"].numpy()
    got = policy.logits(obs)
    allowed = mask > 0
    np.testing.assert_allclose(got[allowed], want[allowed], atol=1e-5)
    assert (got[~allowed] == want[~allowed]).all() and (got[~allowed] < -1e8).all()
    assert np.std(want[allowed]) > 1e-2
    for _ in range(20):
        action, _, _ = policy.step(obs, np.ones(n, bool), zeros, np.zeros(n, np.float32), ())
        assert allowed[np.arange(n), action].all()


@pytest.mark.parametrize("torso", ["minatar_cnn", "small_atari_cnn"])
def test_numpy_policy_on_a_dict_with_a_conv_encoded_board_matches_the_network(torso, rng):
    """A Dict of an int8 board (conv-encoded when the config names a conv torso; the small
    board takes the grid CNN), a uint8 image, a float vector and an action mask: numpy's
    masked logits equal the network's, before and after new weights."""
    space = gym.spaces.Dict(
        {
            "board": gym.spaces.Box(0, 1, (6, 7, 2), np.int8),
            "image": gym.spaces.Box(0, 255, (5, 5, 3), np.uint8),
            "pos": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
            "action_mask": gym.spaces.Box(0, 1, (7,), np.int8),
        }
    )
    tf.keras.utils.set_random_seed(0)
    cfg = NetworkConfig(torso=torso, hidden_sizes=(16,), cnn_dense_size=8, policy_init_scale=1.0,
                        cnn_init="orthogonal", cnn_compute_dtype="float32")  # fmt: skip
    net = make_network(cfg, space, gym.spaces.Discrete(7))
    kinds = [type(e).__name__ for e in net.torso.encoders]  # sorted keys: board, image, pos
    assert kinds == ["MinAtarCNN", "MinAtarCNN", "MLPTorso"]
    policy = make_policy(net, "numpy", seed=1)
    assert isinstance(policy, NumpyMLPPolicy)
    n = 32
    mask = rng.integers(0, 2, size=(n, 7)).astype(np.int8)
    mask[:, 0] = 1
    obs = {
        "board": rng.integers(0, 2, size=(n, 6, 7, 2)).astype(np.int8),
        "image": rng.integers(0, 256, size=(n, 5, 5, 3)).astype(np.uint8),
        "pos": rng.uniform(-1, 1, size=(n, 3)).astype(np.float32),
        "action_mask": mask,
    }
    zeros = np.zeros(n, np.int32)
    allowed = mask > 0
    for scale in (1.0, 0.5):
        weights = [w * scale if w.ndim == 4 else w for w in net.get_weights()]
        net.set_weights(weights)
        policy.set_weights(weights)
        want = net(NetInputs(obs, np.ones(n, bool), zeros, np.zeros(n, np.float32)))
        want = want.policy["logits"].numpy()
        got = policy.logits(obs)
        np.testing.assert_allclose(got[allowed], want[allowed], rtol=1e-4, atol=1e-4)
        assert (got[~allowed] < -1e8).all()
        assert np.std(want[allowed]) > 1e-2


def test_a_run_acts_with_one_blas_thread_and_gives_the_pool_back(tmp_path, monkeypatch):
    """From Python (no OPENBLAS_NUM_THREADS set), numpy's BLAS pool is limited to one thread
    while a run trains (utils/blas.py) and is the caller's again after it."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    import tfagents_vtrace as tv

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)

    def blas_threads():
        return {
            i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"
        }

    seen = []
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        if blas_threads() != {2}:
            pytest.skip("numpy's BLAS here does not take a thread count")
        tv.train("impala", env="CartPole-v1", logdir=str(tmp_path / "run"), total_steps=256,
                 num_envs=4, unroll_length=16, hidden_sizes=(8,), eval_episodes=1,
                 log_every_steps=64, verbose=0, export=False,
                 callbacks=[lambda row: seen.append(blas_threads())])  # fmt: skip
        assert seen and all(s == {1} for s in seen), seen
        assert blas_threads() == {2}
