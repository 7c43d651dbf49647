"""Vector environments that survive a flaky or hung simulator.

:class:`ResilientSyncVectorEnv` is gymnasium's ``SyncVectorEnv`` (NEXT_STEP autoreset) whose
sub-environments fail alone: a sub-environment whose ``reset`` or ``step`` raises, returns a
malformed result (not ``(observation, info)`` / five values), a reward that is not a number,
or an observation or reward that is not a finite float32 number is closed and made again
with a new seed, and the other sub-environments go on as if nothing happened. RLlib's
``restart_failed_sub_environments``
(https://docs.ray.io/en/latest/rllib/rllib-fault-tolerance.html) does the same. What the
failed column returns:

* a failure while the column was being reset (NEXT_STEP's reset step): the new
  environment's first observation, reward 0, as any reset step;
* a failure mid-episode, with ``cut_as_truncation`` (the default): the episode is truncated
  there, as a time limit would: the column returns its last good observation as the final
  one, reward 0 and ``truncated=True``, and the next step delivers the new environment's
  first observation (the NEXT_STEP reset step). Any consumer (an evaluation, a replay)
  sees a well-formed episode end;
* a failure mid-episode without ``cut_as_truncation``: the new environment's first
  observation at once, reward 0, ``terminated = truncated = False``. The caller marks the
  cut itself: the runtime's actor makes the step a masked reset step and truncates the
  episode at the step before, so no transition of the failure reaches the learner.

Either way the step's ``info`` holds ``env_failed`` (bool per sub-environment, with
gymnasium's ``_env_failed`` mask) on the steps where an episode was cut. ``restarts`` counts
the sub-environments made again; a warning is logged at the first one and then at most once a
minute. The limits of one sub-environment's restarts (a window of its steps, failures in a
row) are :class:`~tfagents_vtrace.envs.failures.RestartPolicy`'s; past them the step
raises :class:`~tfagents_vtrace.envs.failures.EnvFailure`.

:class:`TimedAsyncVectorEnv` is gymnasium's ``AsyncVectorEnv`` whose ``step`` and ``reset``
wait at most ``step_timeout_s`` (gymnasium's own ``step_wait(timeout=...)``): past it the
sub-processes are terminated and :class:`~tfagents_vtrace.envs.failures.EnvTimeout`
raised, so the caller recreates the whole vector.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import numbers
import time
from collections.abc import Callable, Sequence
from copy import deepcopy
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv
from gymnasium.vector.utils import concatenate, iterate

from tfagents_vtrace.envs.failures import (
    F32_MAX,
    EnvTimeout,
    MalformedEnvOutput,
    NonFiniteEnvOutput,
    RestartPolicy,
    check_reset_result,
    check_step_result,
)

log = logging.getLogger(__name__)

NUMBER_TYPES = frozenset({float, int, bool, np.float64, np.float32, np.int64, np.int32})
"""Reward types accepted by one set lookup (others by :func:`is_number`)."""

WARN_EVERY_S = 60.0
"""Seconds between two warnings about sub-environment restarts."""


def is_number(value: Any) -> bool:
    """A real number, or a numeric numpy array (a 0-d reward some environments return)."""
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "biuf"
    return isinstance(value, numbers.Real)


def _leaves(obs) -> list:
    """The arrays of a batched observation (a Dict / Tuple one has several)."""
    if isinstance(obs, dict):
        return [leaf for value in obs.values() for leaf in _leaves(value)]
    if isinstance(obs, tuple):
        return [leaf for value in obs for leaf in _leaves(value)]
    return [obs]


def _bad_rows(observations, rewards: np.ndarray) -> np.ndarray | None:
    """Rows whose observation or reward is not a finite float32 number; None when all are
    (one comparison per array; the rows are found only when one is bad)."""
    bad = None
    arrays = [leaf for leaf in _leaves(observations) if leaf.dtype.kind == "f"]
    for values in [*arrays, rewards]:
        if values.size and np.abs(values).max() <= F32_MAX:  # a NaN maximum compares false
            continue
        rows = ~(np.abs(values) <= F32_MAX).reshape(len(values), -1).all(axis=1)
        bad = rows if bad is None else bad | rows
    return bad


class ResilientSyncVectorEnv(SyncVectorEnv):
    """A sync vector whose sub-environments fail alone (module docstring).

    Args:
      env_fns: one callable per sub-environment, each making a new one (called again to
        replace a failed one).
      name: the environment's id, for messages (``label`` is ``"environment NAME"``; an
        actor may set its own).
      cut_as_truncation: how a failure mid-episode is reported (module docstring).
      copy: as ``SyncVectorEnv``'s.
    """

    checks_output = True
    """Observations and rewards are checked here (the actor need not check them again)."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], name: str = "",
                 cut_as_truncation: bool = True, copy: bool = True):  # fmt: skip
        super().__init__(env_fns, copy=copy, autoreset_mode=AutoresetMode.NEXT_STEP)
        self.label = f"environment {name}" if name else "environment"
        self.cut_as_truncation = bool(cut_as_truncation)
        self.restarts = 0
        self.last_error: BaseException | None = None
        self._policies = [RestartPolicy() for _ in range(self.num_envs)]
        self._steps = 0
        self._seed_key = 0
        self._fresh: dict[int, tuple] = {}  # first observations delivered at the next step
        self._warned_at = -math.inf
        self._slept = 0.0  # backoff waited in this step (sub-environments failing together)

    def _what(self, i: int) -> str:
        return f"{self.label} (sub-environment {i})"

    def reset(self, *, seed=None, options=None):
        """Resets every sub-environment as ``SyncVectorEnv.reset`` (an int ``seed`` seeds
        sub-environment ``i`` with ``seed + i``); one that fails is replaced."""
        if options is not None and "reset_mask" in options:
            return super().reset(seed=seed, options=options)
        if seed is None:
            seeds = [None] * self.num_envs
        elif isinstance(seed, int):
            self._seed_key = seed
            seeds = [seed + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"seed: expected {self.num_envs} seeds, received {len(seeds)}")
        self._terminations[:] = False
        self._truncations[:] = False
        self._autoreset_envs = np.zeros(self.num_envs, bool)
        self._fresh.clear()
        self._slept = 0.0
        infos: dict = {}
        for i, env in enumerate(self.envs):
            try:
                obs, info = check_reset_result(env.reset(seed=seeds[i], options=options))
                _check_first(obs)
            except Exception as error:  # noqa: BLE001 - any failure replaces the env
                obs, info = self._replace(i, explain(error, "reset"))
            self._env_obs[i] = obs
            if info:
                infos = self._add_info(infos, info, i)
        self._observations = concatenate(
            self.single_observation_space, self._env_obs, self._observations
        )
        return deepcopy(self._observations) if self.copy else self._observations, infos

    def step(self, actions):
        """``SyncVectorEnv.step`` with NEXT_STEP autoreset, each sub-environment's failure
        handled alone (module docstring)."""
        self._steps += 1
        self._slept = 0.0
        previous = self._env_obs.copy() if self.cut_as_truncation else None
        env_obs, envs = self._env_obs, self.envs
        rewards, terms, truncs = self._rewards, self._terminations, self._truncations
        resetting = self._autoreset_envs
        infos: dict = {}
        cut: list[int] = []
        for i, action in enumerate(iterate(self.action_space, actions)):
            try:
                if resetting[i]:
                    fresh = self._fresh.pop(i, None) if self._fresh else None
                    if fresh is None:
                        fresh = check_reset_result(envs[i].reset())
                    obs, info = fresh
                    rewards[i] = 0.0
                    terms[i] = truncs[i] = False
                else:
                    result = envs[i].step(action)
                    if type(result) is not tuple or len(result) != 5:
                        check_step_result(result)  # raises, naming what it received
                    obs, reward, terms[i], truncs[i], info = result
                    if type(reward) not in NUMBER_TYPES and not is_number(reward):
                        raise NonFiniteEnvOutput(
                            f"reward: expected a finite number, received {reward!r}"
                        )
                    rewards[i] = reward
                env_obs[i] = obs
            except Exception as error:  # noqa: BLE001 - any failure replaces the env
                info = None
                call = "reset" if resetting[i] else "step"
                if self._fail(i, explain(error, call), bool(resetting[i])):
                    cut.append(i)
            if info:
                infos = self._add_info(infos, info, i)
        self._observations = concatenate(self.single_observation_space, env_obs,
                                         self._observations)  # fmt: skip
        bad = _bad_rows(self._observations, rewards)
        if bad is not None:  # slow path: those sub-environments failed
            for i in np.flatnonzero(bad):
                if previous is not None:
                    env_obs[i] = previous[i]  # the final observation of a cut episode
                error = NonFiniteEnvOutput(
                    f"non-finite observation or reward (reward {rewards[i]!r}; float32 holds "
                    f"|r| <= {F32_MAX:.2g})"
                )
                if self._fail(i, error, bool(resetting[i])) and i not in cut:
                    cut.append(i)
            self._observations = concatenate(self.single_observation_space, env_obs,
                                             self._observations)  # fmt: skip
        self._autoreset_envs = np.logical_or(terms, truncs)
        if cut:
            failed = np.zeros(self.num_envs, bool)
            failed[cut] = True
            infos["env_failed"], infos["_env_failed"] = failed, failed.copy()
        return (
            deepcopy(self._observations) if self.copy else self._observations,
            np.copy(rewards),
            np.copy(terms),
            np.copy(truncs),
            infos,
        )

    def _fail(self, i: int, error: BaseException, resetting: bool) -> bool:
        """Replaces sub-environment ``i`` after ``error`` and sets its column's outcome;
        returns whether an episode was cut (module docstring)."""
        obs, info = self._replace(i, error)
        self._rewards[i] = 0.0
        self._terminations[i] = self._truncations[i] = False
        if resetting or not self.cut_as_truncation:
            self._env_obs[i] = obs
            return not resetting
        self._truncations[i] = True  # env_obs[i] stays the last good observation
        self._fresh[i] = (obs, info)
        return True

    def _replace(self, i: int, error: BaseException) -> tuple:
        """Closes sub-environment ``i`` and makes it again with a new seed until it resets
        (each failure counted by its :class:`RestartPolicy`, which may raise
        :class:`~tfagents_vtrace.envs.failures.EnvFailure`); returns its first
        ``(observation, info)``."""
        gap = 2 if self.cut_as_truncation else 1  # the new env's first step comes after
        while True:
            wait = self._policies[i].failed(error, self._what(i), self._steps, gap, self._slept)
            self._slept = max(self._slept, wait)
            self.restarts += 1
            self.last_error = error
            self._warn(i, error)
            try:
                self.envs[i].close()
            except Exception:  # noqa: BLE001, S110 - a broken env may fail to close too
                pass
            try:
                self.envs[i] = self.env_fns[i]()
                seed = int(np.random.SeedSequence([self._seed_key, i, self.restarts])
                            .generate_state(1)[0])  # fmt: skip
                obs, info = check_reset_result(self.envs[i].reset(seed=seed))
                _check_first(obs)
                return obs, info
            except Exception as new_error:  # noqa: BLE001 - counts as one more failure
                error = explain(new_error, "reset")

    def _warn(self, i: int, error: BaseException) -> None:
        now = time.monotonic()
        if now - self._warned_at < WARN_EVERY_S:
            return
        self._warned_at = now
        log.warning(
            "%s failed (%s: %s); made it again with a new seed, its episode cut there "
            "(%d sub-environment restarts so far; this warning repeats at most once a minute)",
            self._what(i), type(error).__name__, error, self.restarts,
        )  # fmt: skip

    def close_extras(self, **kwargs: Any) -> None:
        """Closes every sub-environment; one that fails to close is skipped."""
        for env in getattr(self, "envs", ()):
            try:
                env.close()
            except Exception:  # noqa: BLE001, S110 - a broken env may fail to close
                pass


EXPECTED = {
    "reset": "(observation, info)",
    "step": "(observation, reward, terminated, truncated, info)",
}


def explain(error: BaseException, call: str) -> BaseException:
    """``error``, or a :class:`MalformedEnvOutput` naming ``call`` when it is the unpacking
    of a malformed result (gymnasium's wrappers, e.g. ``TimeLimit``, unpack it first)."""
    if isinstance(error, ValueError) and "values to unpack" in str(error):
        return MalformedEnvOutput(
            f"{call} returned a malformed result ({error}); expected {EXPECTED[call]}"
        )
    return error


def _check_first(obs) -> None:
    """Raises :class:`NonFiniteEnvOutput` for a first observation beyond float32's range."""
    for leaf in _leaves(obs):
        leaf = np.asarray(leaf)
        if leaf.dtype.kind == "f" and not (np.abs(leaf) <= F32_MAX).all():
            raise NonFiniteEnvOutput("reset returned a non-finite observation")


class TimedAsyncVectorEnv(AsyncVectorEnv):
    """An ``AsyncVectorEnv`` whose ``step`` and ``reset`` wait at most ``step_timeout_s``
    (None: forever); past it the sub-processes are terminated and
    :class:`~tfagents_vtrace.envs.failures.EnvTimeout` is raised (module
    docstring)."""

    def __init__(self, env_fns, name: str = "", step_timeout_s: float | None = None,
                 **kwargs):  # fmt: skip
        super().__init__(env_fns, **kwargs)
        self.label = f"environment {name}" if name else "environment"
        self.step_timeout_s = step_timeout_s

    def step(self, actions):
        self.step_async(actions)
        try:
            return self.step_wait(timeout=self.step_timeout_s)
        except multiprocessing.TimeoutError:
            self._give_up("step")

    def reset(self, *, seed=None, options=None):
        self.reset_async(seed=seed, options=options)
        try:
            return self.reset_wait(timeout=self.step_timeout_s)
        except multiprocessing.TimeoutError:
            self._give_up("reset")

    def _give_up(self, call: str):
        self.close(terminate=True)
        raise EnvTimeout(
            f"{self.label}: {call} did not return within {self.step_timeout_s:g} s "
            "(--env_step_timeout_s); its processes were terminated"
        )
