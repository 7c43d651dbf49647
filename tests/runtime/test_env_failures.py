"""runtime.env_failures: the restart limits (a window of steps, failures in a row) and their
messages, plain bad-reward messages, float32's range, malformed reset / step results."""

import gymnasium as gym
import numpy as np
import pytest

from tfagents_vtrace.envs import failures as env_failures
from tfagents_vtrace.envs.factory import make_vector_env
from tfagents_vtrace.envs.failures import (
    NonFiniteEnvOutput,
    check_env_output,
)


def test_failures_in_a_row_end_it_after_max_consecutive_with_a_doubling_capped_backoff(
    waits,
):
    policy = env_failures.RestartPolicy()
    for step in range(env_failures.MAX_CONSECUTIVE):  # one failure per step: in a row
        policy.failed(RuntimeError("boom"), "env", step)
    assert waits == [0.25, 0.5, 1.0, 2.0, 2.0]  # the first three in a row restart at once
    with pytest.raises(env_failures.EnvFailure) as error:
        policy.failed(RuntimeError("boom"), "actor 0: environment E-v0", 8)
    assert str(error.value) == (
        "actor 0: environment E-v0 failed 9 times in a row (without one successful step; the "
        "limit is 8); last error: RuntimeError: boom"
    )
    assert len(waits) == 5  # no wait before giving up


def test_a_successful_step_between_failures_resets_the_run_and_its_backoff(waits):
    policy = env_failures.RestartPolicy()
    for step in (10, 11, 12, 13, 14, 20):  # 15..19 succeeded
        policy.failed(RuntimeError("x"), "env", step)
    assert policy.consecutive == 1 and waits == [0.25, 0.5]
    policy.failed(RuntimeError("x"), "env", 22, gap=2)  # 21 only delivered a first obs
    assert policy.consecutive == 2 and len(waits) == 2


def test_more_than_max_failures_in_the_window_end_it(waits):
    policy = env_failures.RestartPolicy(max_failures=5, window_steps=20, max_consecutive=100)
    for step in (0, 4, 8, 12, 16):  # five in 20 steps: at the limit, not past it
        policy.failed(RuntimeError("x"), "env", step)
    policy.failed(RuntimeError("x"), "env", 20)  # step 0 has left the window
    with pytest.raises(env_failures.EnvFailure, match=r"^env failed 6 times in its last 20 "
                       r"steps \(the limit is 5\); last error: RuntimeError: y$"):  # fmt: skip
        policy.failed(RuntimeError("y"), "env", 21)


@pytest.mark.parametrize("rate, stall_s", [(0.01, 0.5), (0.05, 20.0), (0.1, 300.0)])
def test_the_defaults_carry_a_simulator_failing_on_a_few_percent_of_its_steps(rate, stall_s, waits):
    policy = env_failures.RestartPolicy()
    failing = np.flatnonzero(np.random.default_rng(0).random(1_000_000) < rate)
    for step in failing:  # a million steps of one sub-environment: it never ends
        policy.failed(RuntimeError("x"), "env", step, gap=2)
    # and its backoffs seldom stall the others: seconds per million steps of one
    # sub-environment (each of a run's B sub-environments takes 1/B of its steps)
    assert sum(waits) <= stall_s


def test_one_that_fails_on_every_step_ends_after_a_few_seconds_of_backoff(waits):
    policy = env_failures.RestartPolicy()
    with pytest.raises(env_failures.EnvFailure, match="9 times in a row"):
        for step in range(0, 1000, 2):  # fail, deliver the new first observation, fail...
            policy.failed(RuntimeError("x"), "env", step, gap=2)
    assert 4.0 < sum(waits) < 10.0


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
        # finite in float64, not in the float32 the learner takes: refused like NaN
        (
            1e300,
            "reward: expected a finite number within float32's range (|r| <= 3.4e+38), "
            "received 1e+300",
        ),  # fmt: skip
        (
            np.array([0.0, -1e39, 1.0]),
            "reward of sub-environment 1: expected a finite number within float32's range "
            "(|r| <= 3.4e+38), received -1e+39",
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
def test_a_none_reward_is_named_before_the_vector_env_turns_it_into_nan(waits):
    if "NoneReward-v0" not in gym.registry:
        gym.register("NoneReward-v0", entry_point=NoneReward)
    env = make_vector_env("NoneReward-v0", 3, seed=0, mode="sync")
    try:
        with pytest.raises(env_failures.EnvFailure) as error:
            for _ in range(30):  # each step fails: the sub-environments are made again
                env.step(np.zeros(3, np.int64))
    finally:
        env.close()
    assert str(error.value).startswith("environment NoneReward-v0 (sub-environment 0) failed 9 ")
    assert str(error.value).endswith(
        "last error: NonFiniteEnvOutput: reward: expected a finite number, received None"
    )


def test_an_observation_beyond_float32_is_refused():
    with pytest.raises(NonFiniteEnvOutput, match="non-finite observation"):
        check_env_output(np.array([[0.0, 1e300]]), 0.0)
    check_env_output(np.array([[0.0, 3e38]]), np.float32(3e38))  # the largest values pass


@pytest.mark.parametrize(
    "result, message",
    [
        ((np.zeros(2), {}, None), "E-v0: reset returned 3 values; expected (observation, info)"),
        (np.zeros(2), "E-v0: reset returned a ndarray; expected (observation, info)"),
        ((np.zeros(2), None), "E-v0: reset returned 2 values; expected (observation, info)"),
    ],
)
def test_a_malformed_reset_is_named(result, message):
    with pytest.raises(env_failures.MalformedEnvOutput) as error:
        env_failures.check_reset_result(result, "E-v0")
    assert str(error.value) == message


def test_a_malformed_step_is_named():
    with pytest.raises(env_failures.MalformedEnvOutput) as error:
        env_failures.check_step_result((np.zeros(2), 1.0, False, {}), "E-v0")
    assert str(error.value) == (
        "E-v0: step returned 4 values; expected (observation, reward, terminated, truncated, info)"
    )
