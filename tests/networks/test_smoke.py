"""Construction smoke tests: every config builds, runs one step and one unroll."""

import gymnasium as gym
import numpy as np
import pytest

from tfagents_vtrace.networks import NetworkConfig, make_network

BOX_OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
DISCRETE = gym.spaces.Discrete(3)
BOX_ACT = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)


@pytest.mark.parametrize(
    "config,action_space",
    [
        (NetworkConfig(hidden_sizes=(8,)), DISCRETE),
        (NetworkConfig(hidden_sizes=(8,), core="lstm", lstm_size=4, q_head="discrete"), DISCRETE),
        (NetworkConfig(hidden_sizes=(8,), gaussian_std="global"), BOX_ACT),
        (NetworkConfig(hidden_sizes=(8,), policy_head="tanh_gaussian"), BOX_ACT),
    ],
)
def test_builds_and_runs(config, action_space):
    net = make_network(config, BOX_OBS, action_space)
    assert net.get_weights(), "variables must exist right after construction"
    out = net(net.dummy_inputs(3), net.initial_state(3))
    assert out.value.shape == (3,)
    seq = net.unroll(net.dummy_inputs(3, time=5), net.initial_state(3))
    assert seq.value.shape == (5, 3)
    assert net.distribution(seq.policy).sample().shape[:2] == (5, 3)


def test_config_validation():
    with pytest.raises(ValueError, match="torso"):
        NetworkConfig(torso="transformer")
    with pytest.raises(ValueError, match="use_time_step"):
        NetworkConfig(use_time_step=True)
    with pytest.raises(ValueError, match="policy_head"):
        make_network(NetworkConfig(policy_head="gaussian"), BOX_OBS, DISCRETE)


def test_bad_inputs_raise_value_error_naming_the_argument():
    net = make_network(
        NetworkConfig(hidden_sizes=(4,), core="lstm", lstm_size=3), BOX_OBS, DISCRETE
    )
    good = net.dummy_inputs(2)
    with pytest.raises(ValueError, match=r"observation: expected shape \['B', 4\], got \[2, 5\]"):
        net(good._replace(observation=np.zeros((2, 5), np.float32)), net.initial_state(2))
    with pytest.raises(ValueError, match="prev_action"):
        net(good._replace(prev_action=np.zeros((2, 3), np.int32)), net.initial_state(2))
    with pytest.raises(ValueError, match=r"observation: expected shape \['T', 'B', 4\]"):
        net.unroll(good, net.initial_state(2))  # one-step inputs given to unroll
    with pytest.raises(ValueError, match="first"):
        net(good._replace(first=np.zeros((2, 1), bool)), net.initial_state(2))
    with pytest.raises(ValueError, match="state"):
        net(good, ())
