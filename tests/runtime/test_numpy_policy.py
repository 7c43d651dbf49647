"""The numpy MLP policy on uint8 observations equals the TF network (0/1 grids and images)."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tfagents_vtrace.networks import NetInputs, NetworkConfig, make_network
from tfagents_vtrace.runtime.policies import NumpyMLPPolicy, make_policy


@pytest.mark.parametrize("high", [1, 255])
def test_numpy_policy_matches_the_network_on_uint8_observations(high, rng):
    space = gym.spaces.Box(0, high, (10, 10, 4), np.uint8)
    tf.keras.utils.set_random_seed(0)
    net = make_network(
        NetworkConfig(hidden_sizes=(16, 16), activation="relu", value_hidden_sizes=(8,)),
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
