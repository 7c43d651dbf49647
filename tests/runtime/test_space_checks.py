"""Acting with Dict / Tuple observations and MultiDiscrete / MultiBinary actions: the checks
at the environment boundary, the TF policy chosen over the numpy ones, and unrolls that
store each observation leaf ``[T+1, B, ...]``."""

import gymnasium as gym
import numpy as np
import pytest

from tests.agents._dict_env import DICT_ENV_ID, TinyDictEnv, register
from tfagents_vtrace.envs.failures import (
    InvalidAction,
    NonFiniteEnvOutput,
)
from tfagents_vtrace.networks import NetInputs, NetworkConfig, make_network
from tfagents_vtrace.runtime.acting.actor import Actor, ActorSpec
from tfagents_vtrace.runtime.acting.policies import (
    NumpyMLPPolicy,
    TFPolicy,
    make_policy,
    numpy_policy_class,
)
from tfagents_vtrace.runtime.acting.space_checks import check_actions, check_env_output

register()
NET = NetworkConfig(hidden_sizes=(8,), policy_init_scale=1.0)


def test_vector_actions_outside_the_space_stop_the_run():
    space = gym.spaces.MultiDiscrete([3, 2])
    check_actions(np.array([[2, 1], [0, 0]]), space, "actor 0")
    with pytest.raises(InvalidAction, match="actor 0: the policy chose \\[2\\]"):
        check_actions(np.array([[2, 2], [0, 0]]), space, "actor 0")
    with pytest.raises(InvalidAction):
        check_actions(np.array([[-1, 0]]), space, "actor 0")
    bits = gym.spaces.MultiBinary(3)
    check_actions(np.array([[0, 1, 1]], np.int8), bits, "actor 0")
    with pytest.raises(InvalidAction):
        check_actions(np.array([[0, 2, 1]], np.int8), bits, "actor 0")
    with pytest.raises(InvalidAction):  # other spaces: env_failures' check
        check_actions(np.array([4]), gym.spaces.Discrete(4), "actor 0")


def test_each_observation_leaf_is_checked():
    good = {"a": np.zeros((2, 3), np.float32), "b": (np.zeros(2, np.int64), np.ones((2, 4)))}
    check_env_output(good, np.zeros(2))
    bad = {"a": np.zeros((2, 3), np.float32), "b": (np.zeros(2), np.full((2, 4), np.nan))}
    with pytest.raises(NonFiniteEnvOutput, match="observation"):
        check_env_output(bad, np.zeros(2))
    with pytest.raises(NonFiniteEnvOutput, match="reward"):
        check_env_output(good, np.array([0.0, np.inf]))


@pytest.mark.parametrize("obs_space,act_space", [
    (TinyDictEnv.observation_space, gym.spaces.Discrete(3)),
    (gym.spaces.Box(-1.0, 1.0, (3,), np.float32), gym.spaces.MultiDiscrete([3, 2])),
    (gym.spaces.Box(-1.0, 1.0, (3,), np.float32), gym.spaces.MultiBinary(2)),
])  # fmt: skip
def test_the_tf_policy_acts_for_the_new_spaces(obs_space, act_space):
    """ "auto" acts through TF for a Dict observation and for vector actions; "numpy" opts in
    to a Dict observation of flattened leaves (image, box, Discrete), and refuses vector
    actions in one line."""
    net = make_network(NET, obs_space, act_space)
    assert numpy_policy_class(net, "auto") is None
    assert isinstance(make_policy(net, "auto"), TFPolicy)
    if isinstance(act_space, gym.spaces.Discrete):
        policy = make_policy(net, "numpy")
        assert isinstance(policy, NumpyMLPPolicy)
        obs = {k: np.stack([s.sample() for _ in range(6)])
               for k, s in obs_space.spaces.items()}  # fmt: skip
        zeros = np.zeros(6, np.int32)
        want = net(NetInputs(obs, np.ones(6, bool), zeros, np.zeros(6, np.float32)))
        np.testing.assert_allclose(policy.logits(obs), want.policy["logits"].numpy(), atol=1e-5)
        return
    with pytest.raises(ValueError, match="^policy_impl: 'numpy' needs"):
        make_policy(net, "numpy")


def test_actor_unrolls_store_each_observation_leaf():
    env_factory = lambda seed: gym.make_vec(DICT_ENV_ID, 3, vectorization_mode="sync")  # noqa: E731
    spec = ActorSpec(DICT_ENV_ID, NET, num_envs=3, unroll_length=7, policy_impl="auto")
    net = make_network(NET, TinyDictEnv.observation_space, TinyDictEnv.action_space)
    actor = Actor(spec, network=net, env_factory=env_factory)
    try:
        first, info = actor.unroll()
        second, _ = actor.unroll()
    finally:
        actor.close()
    obs = first["observation"]
    assert obs["image"].shape == (8, 3, 5, 5, 1) and obs["image"].dtype == np.uint8
    assert obs["pos"].shape == (8, 3, 2) and obs["mode"].shape == (8, 3)
    assert first["action"].shape == (7, 3, 2) and first["prev_action"].shape == (8, 3, 2)
    assert np.all((first["action"] >= 0) & (first["action"] < [3, 2]))
    assert first["policy"]["multi_logits"].shape == (7, 3, 5)
    for k in obs:  # the one-step overlap: entry T is entry 0 of the next unroll
        np.testing.assert_array_equal(obs[k][-1], second["observation"][k][0])
    np.testing.assert_array_equal(first["prev_action"][1:][~first["first"][1:]],
                                  first["action"][~first["first"][1:]])  # fmt: skip
