"""policy_impl="fastest": the candidates take turns, are timed, and the fastest acts."""

import time

import gymnasium as gym
import numpy as np
import pytest

from tfagents_vtrace.networks import NetInputs, NetworkConfig, make_network
from tfagents_vtrace.runtime.acting.policies import (
    FastestPolicy,
    NumpyConvPolicy,
    NumpyMLPPolicy,
    TFPolicy,
    make_policy,
)
from tfagents_vtrace.runtime.config import RunConfig


class Sleeper:
    """A stand-in policy that takes ``seconds`` per call and records its weights."""

    greedy = False

    def __init__(self, seconds):
        self.seconds, self.calls, self.weights = seconds, 0, []

    def step(self, obs, first, prev_action, prev_reward, state):
        self.calls += 1
        time.sleep(self.seconds)
        return np.zeros(len(first), np.int32), {"logits": np.zeros((len(first), 2))}, ()

    def set_weights(self, weights):
        self.weights.append(weights)


def test_the_fastest_candidate_acts_after_the_trials_and_the_choice_is_printed(capsys):
    slow, fast = Sleeper(0.004), Sleeper(0.0)
    policy = FastestPolicy({"slow": slow, "fast": fast}, warmup=2, trials=5, label="actor 3")
    policy.set_weights([1])
    assert slow.weights == [[1]] and fast.weights == [[1]]  # every candidate before the choice
    obs, first = np.zeros((4, 2)), np.zeros(4, bool)
    for _ in range(2 * (2 + 5)):
        policy.step(obs, first, None, None, ())
    assert policy.chosen == "fast" and slow.calls == fast.calls == 7
    err = capsys.readouterr().err
    assert err.startswith("actor 3: policy_impl fastest -> fast (")
    assert "at 4 observations per call; slow " in err
    for _ in range(5):
        policy.step(obs, first, None, None, ())
    assert slow.calls == 7 and fast.calls == 12  # the chosen one alone
    policy.set_weights([2])
    assert slow.weights == [[1]] and fast.weights == [[1], [2]]


def _net(torso, **kw):
    if torso == "mlp":
        space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    else:
        space = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
    return make_network(NetworkConfig(torso=torso, **kw), space, gym.spaces.Discrete(3))


@pytest.mark.parametrize("torso, numpy_class", [("mlp", NumpyMLPPolicy),
                                                ("small_atari_cnn", NumpyConvPolicy)])  # fmt: skip
def test_fastest_acts_like_the_network_through_every_candidate(torso, numpy_class):
    net = _net(torso)
    policy = make_policy(net, "fastest", seed=1)
    assert isinstance(policy, FastestPolicy)
    assert list(policy.candidates) == ["numpy", "tf", "xla"]
    assert isinstance(policy.candidates["numpy"], numpy_class)
    assert isinstance(policy.candidates["xla"], TFPolicy)
    rng = np.random.default_rng(0)
    shape = net.observation_spec.shape
    for _ in range(3 * (policy.warmup + policy.trials)):
        if torso == "mlp":
            obs = rng.normal(size=(5, *shape)).astype(np.float32)
        else:
            obs = rng.integers(0, 256, (5, *shape), np.uint8)
        first, prev_a, prev_r = np.zeros(5, bool), np.zeros(5, np.int32), np.zeros(5, np.float32)
        action, params, _ = policy.step(obs, first, prev_a, prev_r, ())
        out = net(NetInputs(obs, first, prev_a, prev_r), ())
        expected = np.asarray(out.policy["logits"], np.float32)
        np.testing.assert_allclose(params["logits"], expected, atol=0.05, rtol=0.05)
        assert action.shape == (5,) and np.all((action >= 0) & (action < 3))
    assert policy.chosen in ("numpy", "tf", "xla")


def test_a_recurrent_network_acts_as_auto_would():
    net = _net("mlp", core="lstm")
    assert type(make_policy(net, "fastest")) is type(make_policy(net, "auto"))


def test_fastest_is_refused_with_deterministic():
    with pytest.raises(ValueError, match=r"^policy_impl: 'fastest' chooses by timing"):
        RunConfig(policy_impl="fastest", deterministic=True)
    with pytest.raises(ValueError, match=r"^policy_impl: expected one of"):
        RunConfig(policy_impl="quickest")
