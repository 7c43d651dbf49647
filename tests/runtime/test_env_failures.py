"""runtime.env_failures: the restart count its message gives, and plain bad-reward messages."""

import gymnasium as gym
import numpy as np
import pytest

from tfagents_vtrace.envs.factory import make_vector_env
from tfagents_vtrace.runtime import env_failures
from tfagents_vtrace.runtime.env_failures import NonFiniteEnvOutput, check_env_output


def test_the_failure_after_max_consecutive_restarts_ends_it_and_says_how_many(monkeypatch):
    waits = []
    monkeypatch.setattr(env_failures.time, "sleep", waits.append)
    policy = env_failures.RestartPolicy()
    for _ in range(env_failures.MAX_CONSECUTIVE):  # each failure is followed by a restart
        policy.failed(RuntimeError("boom"), "env")
    assert len(waits) == env_failures.MAX_CONSECUTIVE == 5
    with pytest.raises(env_failures.EnvFailure) as error:
        policy.failed(RuntimeError("boom"), "actor 0: environment E-v0")
    assert str(error.value) == (
        "actor 0: environment E-v0 failed again after 5 restarts in a row; "
        "last error: RuntimeError: boom"
    )
    assert len(waits) == 5  # no wait before giving up


@pytest.mark.parametrize(
    "reward, message",
    [
        (None, "reward: expected a finite number, received None"),
        ("abc", "reward: expected a finite number, received 'abc'"),
        (np.float64("nan"), "reward: expected a finite number, received nan"),
        ([1.0, None, 2.0], "reward of sub-environment 1: expected a finite number, received None"),
        (
            np.array([0.0, 1.0, np.inf, np.nan]),
            "reward of sub-environment 2: expected a finite number, received inf "
            "(2 of 4 rewards are not finite numbers)",
        ),
    ],
)
def test_a_bad_reward_is_reported_plainly(reward, message):
    with pytest.raises(NonFiniteEnvOutput) as error:
        check_env_output(np.zeros((3, 2), np.float32), reward)
    assert str(error.value) == message


@pytest.mark.parametrize("reward", [1, 0.5, np.float32(2.0), np.array([1, 2, 3]), [0.0, -1.0]])
def test_finite_rewards_pass(reward):
    check_env_output(np.zeros((3, 2), np.float32), reward)


class NoneReward(gym.Env):
    """An environment whose step returns ``reward=None``."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), None, False, False, {}


@pytest.mark.filterwarnings("ignore:.*reward returned by `step..` must be")  # gymnasium's checker
def test_a_none_reward_is_named_before_the_vector_env_turns_it_into_nan():
    if "NoneReward-v0" not in gym.registry:
        gym.register("NoneReward-v0", entry_point=NoneReward)
    env = make_vector_env("NoneReward-v0", 3, seed=0, mode="sync")
    try:
        with pytest.raises(ValueError, match=r"^reward: expected a finite number, received None$"):
            env.step(np.zeros(3, np.int64))
    finally:
        env.close()
