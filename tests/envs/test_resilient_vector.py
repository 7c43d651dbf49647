"""envs.resilient: a sync vector whose sub-environments fail alone, and the async vector's
step timeout."""

import time

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.classic_control import CartPoleEnv

from tfagents_vtrace.envs import failures as env_failures
from tfagents_vtrace.envs.factory import make_vector_env
from tfagents_vtrace.envs.resilient import ResilientSyncVectorEnv, TimedAsyncVectorEnv

B = 4


class Scripted(CartPoleEnv):
    """CartPole whose ``step`` misbehaves at the calls listed in the class attribute
    ``script`` (``{call: what}``, calls counted over every instance)."""

    script: dict = {}
    calls = 0

    def step(self, action):
        Scripted.calls += 1
        what = Scripted.script.get(Scripted.calls)
        if what == "raise":
            raise RuntimeError("crash")
        obs, reward, terminated, truncated, info = super().step(action)
        if what == "huge":
            reward = 1e300
        if what == "nan_obs":
            obs = np.full_like(obs, np.nan)
        if what == "four":
            return obs, reward, terminated, info
        return obs, reward, terminated, truncated, info


def vector(script, cut_as_truncation=True, n=B):
    """A vector of :class:`Scripted` (``script`` None: plain CartPole, not counted)."""
    cls = CartPoleEnv if script is None else Scripted
    if script is not None:
        Scripted.script, Scripted.calls = script, 0
    make = lambda: gym.wrappers.TimeLimit(cls(), 500)  # noqa: E731
    env = ResilientSyncVectorEnv([make] * n, "Scripted-v0", cut_as_truncation=cut_as_truncation)
    env.reset(seed=3)
    return env


def test_a_well_behaved_env_steps_exactly_as_gymnasiums_sync_vector():
    ours = make_vector_env("CartPole-v1", B, seed=5, mode="sync", max_episode_steps=9)
    theirs = gym.make_vec("CartPole-v1", B, vectorization_mode="sync", max_episode_steps=9)
    assert isinstance(ours, ResilientSyncVectorEnv)
    np.testing.assert_array_equal(ours.reset(seed=5)[0], theirs.reset(seed=5)[0])
    rng = np.random.default_rng(0)
    for _ in range(40):  # several NEXT_STEP autoresets
        action = rng.integers(0, 2, B)
        for a, b in zip(ours.step(action)[:4], theirs.step(action)[:4]):
            np.testing.assert_array_equal(a, b)
    assert ours.restarts == 0


@pytest.mark.parametrize("what", ["raise", "huge", "nan_obs", "four"])
def test_a_failing_sub_environment_is_cut_as_a_truncation_and_the_others_go_on(what):
    env = vector({2 * B + 2: what})  # the third step of sub-environment 1
    clean = vector(None)
    action = np.zeros(B, np.int64)
    for _ in range(2):
        np.testing.assert_array_equal(env.step(action)[0], clean.step(action)[0])
    last = env.step(action)  # the failure
    expected = clean.step(action)
    obs, reward, terminated, truncated, info = last
    others = [0, 2, 3]
    np.testing.assert_array_equal(obs[others], expected[0][others])
    assert truncated.tolist() == [False, True, False, False] and not terminated[1]
    assert reward[1] == 0.0 and np.isfinite(obs).all()
    assert info["env_failed"].tolist() == [False, True, False, False]
    assert env.restarts == 1 and env.last_error is not None
    obs, reward, terminated, truncated, info = env.step(action)  # the new episode's first
    assert reward[1] == 0.0 and not truncated[1] and "env_failed" not in info
    assert env.envs[1].unwrapped.steps_beyond_terminated is None  # a new env, just reset
    env.close()


def test_without_cut_as_truncation_the_first_observation_comes_at_once():
    env = vector({2 * B + 2: "raise"}, cut_as_truncation=False)
    action = np.zeros(B, np.int64)
    before = [env.step(action)[0] for _ in range(2)][-1]
    obs, reward, terminated, truncated, info = env.step(action)
    assert not truncated.any() and reward[1] == 0.0 and info["env_failed"][1]
    assert abs(obs[1]).max() <= 0.05  # CartPole's first observations are within 0.05
    assert not np.array_equal(obs[1], before[1])


def test_a_broken_reset_ends_with_one_line_naming_the_environment_and_the_call(monkeypatch):
    monkeypatch.setattr(env_failures.time, "sleep", lambda s: None)

    class ThreeValues(CartPoleEnv):
        def reset(self, *, seed=None, options=None):
            return (*super().reset(seed=seed), None)

    env = ResilientSyncVectorEnv([ThreeValues] * 2, name="ThreeValues-v0")
    with pytest.raises(env_failures.EnvFailure) as error:
        env.reset(seed=0)
    assert str(error.value) == (
        "environment ThreeValues-v0 (sub-environment 0) failed 9 times in a row (without one "
        "successful step; the limit is 8); last error: MalformedEnvOutput: reset returned 3 "
        "values; expected (observation, info)"
    )


def test_a_restart_gets_a_new_seed_each_time():
    env = vector({2 * B + 1: "raise", 2 * B + 2: "raise"})
    for _ in range(3):  # sub-environments 0 and 1 fail at the third step
        env.step(np.zeros(B, np.int64))
    assert env.restarts == 2
    seeds = [sub.unwrapped.np_random_seed for sub in env.envs]
    assert seeds[2:] == [5, 6]  # reset(seed=3): seed + i
    assert len(set(seeds)) == B  # the new ones are neither those nor each other's


class Sleeper(CartPoleEnv):
    def step(self, action):
        time.sleep(60)
        return super().step(action)


def test_an_async_step_past_its_timeout_ends_the_processes_and_raises_env_timeout():
    env = TimedAsyncVectorEnv([Sleeper] * 2, name="Sleeper-v0", step_timeout_s=0.5)
    env.reset(seed=0)
    start = time.monotonic()
    with pytest.raises(env_failures.EnvTimeout, match=r"^environment Sleeper-v0: step did not "
                       r"return within 0.5 s \(--env_step_timeout_s\)"):  # fmt: skip
        env.step(np.zeros(2, np.int64))
    assert time.monotonic() - start < 10
    assert env.closed and not any(p.is_alive() for p in env.processes)


def test_sub_environments_failing_together_wait_once_per_step(waits):

    class FourValues(CartPoleEnv):  # gym < 0.26's step: every call fails
        def step(self, action):
            obs, reward, terminated, truncated, info = super().step(action)
            return obs, reward, terminated, info

    env = ResilientSyncVectorEnv([FourValues] * 16, name="FourValues-v0")
    env.reset(seed=0)
    expected = (
        r"^environment FourValues-v0 \(sub-environment 0\) failed 9 times in a row .* "
        r"MalformedEnvOutput: step returned 4 values"
    )
    with pytest.raises(env_failures.EnvFailure, match=expected):
        for _ in range(20):
            env.step(np.zeros(16, np.int64))
    assert sum(waits) < 8.0  # 16 sub-environments, yet one backoff per step


@pytest.mark.filterwarnings("ignore::UserWarning")  # gymnasium's checker on the bad return
def test_a_malformed_step_behind_gymnasiums_wrappers_is_named():
    import tests.user_envs  # noqa: F401 - registers StepArity-v0 (a 500-step TimeLimit)

    env = make_vector_env("StepArity-v0", 2, seed=0, mode="sync")
    info = env.step(np.zeros(2, np.int64))[-1]
    assert info["env_failed"].all() and isinstance(env.last_error, env_failures.MalformedEnvOutput)
    assert str(env.last_error) == (
        "step returned a malformed result (not enough values to unpack (expected 5, got 4)); "
        "expected (observation, reward, terminated, truncated, info)"
    )
    env.close()
