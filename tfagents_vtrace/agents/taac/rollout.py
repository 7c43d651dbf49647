"""TAAC's actor: act-or-repeat steps on a vector env, stored in sequence replay.

Yu et al., "TAAC: Temporally Abstract Actor-Critic for Continuous Control", 2021,
https://arxiv.org/abs/2104.06521. One :meth:`Rollout.step` is one compiled acting call over
all environments (:class:`~tfagents_vtrace.agents.taac.policy.TaacPolicy`), one
``env.step`` and one replay write with ALF's alignment: a stored step's reward, discount and
``is_last`` are those of *arriving* at its observation, so the replay holds
``(observation, reward, discount, is_last, prev_tau, tau, b)`` per step. The environments
autoreset NEXT_STEP: an observation where ``is_last`` is an episode's final one, and the
step after it returns the next episode's first observation (``first``).

The stored ``b`` is the rollout's switch decision that the compare-through return compares
with the current policy's: by default the *sampled* b, as ALF stores ``ap_out.b`` (a
``max_repeat_steps`` forced switch is not a cut); with ``forced_switch_cuts`` the effective
switch, sampled or forced (the behaviour before issue #16). Either way the repeat-length
statistics count effective switches.

With ``reward_dim`` D > 1 (ALF's multi-dim reward) the learner's reward is the [D] vector
that the environment puts in each step's ``info["reward_vector"]`` (gymnasium's vector envs
stack it to [N, D]); the environment's scalar reward is only reported (episode returns, as
the evaluation does). A step that starts a new episode (the NEXT_STEP autoreset) may lack
the vector: its reward is never read by the learner and is stored as zeros.
"""

from __future__ import annotations

import time

import numpy as np

from tfagents_vtrace.envs.factory import env_action
from tfagents_vtrace.envs.failures import (
    STEP_TIMEOUT_S,
    EnvFailure,
    check_actions,
    check_env_output,
    step_timeout,
    timeout_message,
    watchdog,
)
from tfagents_vtrace.runtime.rundir.stop_signals import stop_inline

REPLAY_FIELDS = ("observation", "reward", "discount", "is_last", "prev_tau", "tau", "b")
"""What each stored step holds (``SequenceReplay`` specs in this order)."""
REWARD_VECTOR_KEY = "reward_vector"
"""The ``info`` key of the [D] reward vector of an environment with ``reward_dim`` > 1."""


def replay_specs(
    observation_shape, trajectory_order: int, action_dim: int, reward_dim: int = 1
) -> dict:
    """``SequenceReplay`` specs of the stored steps: name -> (shape, dtype)."""
    tau = ((trajectory_order, action_dim), np.float32)
    reward = (() if reward_dim == 1 else (reward_dim,), np.float32)
    shapes = ((tuple(observation_shape), np.float32), reward, ((), np.float32),
              ((), bool), tau, tau, ((), np.int32))  # fmt: skip
    return dict(zip(REPLAY_FIELDS, shapes, strict=True))


def reward_vector(infos: dict, starting: np.ndarray, reward_dim: int) -> np.ndarray:
    """The [N, D] rewards of one vector step from ``infos[REWARD_VECTOR_KEY]``; zeros where
    the step started a new episode (``starting``) and the vector is missing.

    Raises:
      ValueError: another step lacks the vector, or it is not [D].
    """
    n = len(starting)
    vec = infos.get(REWARD_VECTOR_KEY)
    has = np.zeros(n, bool) if vec is None else infos.get("_" + REWARD_VECTOR_KEY, True)
    has = np.broadcast_to(np.asarray(has, bool), (n,))
    if vec is not None:
        vec = np.asarray(vec, np.float32)
    if (vec is not None and vec.shape != (n, reward_dim)) or not np.all(has | starting):
        got = None if vec is None else list(vec.shape)
        raise ValueError(
            f"reward_dim: {reward_dim} needs the environment to put a [{reward_dim}] reward "
            f"vector in each step's info[{REWARD_VECTOR_KEY!r}] (stacked [{n}, {reward_dim}]), "
            f"received {got}"
        )
    if vec is None:
        return np.zeros((n, reward_dim), np.float32)
    return np.where(has[:, None], vec, 0.0).astype(np.float32)


class RepeatLengths:
    """Environment steps per trajectory started (a switch or an episode start), as the row
    field ``name``: ``repeat_length`` of rollouts, ``eval_repeat_length`` of evaluations
    (the policy's ``episode_stats`` for :class:`~tfagents_vtrace.runtime.acting.evaluation.
    Evaluator`)."""

    def __init__(self, name: str):
        self.name = name
        self.reset()

    def reset(self) -> None:
        self.steps = self.starts = 0

    def add(self, info: dict, first: np.ndarray, running: np.ndarray) -> None:
        """One vector step of ``info["b"]`` (1: switched) where ``running``."""
        self.starts += int(np.sum(running & ((info["b"] > 0) | first)))
        self.steps += int(np.sum(running))

    def fields(self) -> dict:
        return {self.name: self.steps / self.starts if self.starts else None}


class Rollout:
    """Steps ``env`` with ``policy`` into ``replay`` (module docstring).

    Args:
      env: the training vector env; reset here with ``seed``.
      policy: the sampling :class:`~tfagents_vtrace.agents.taac.policy.TaacPolicy`.
      replay: a ``SequenceReplay`` with :func:`replay_specs`.
      seed: the reset's seed.
      forced_switch_cuts: store the effective switch as ``b`` instead of the sampled one.
      reward_dim: D; D > 1 reads the reward vector from the step's info.
      step_timeout_s: seconds a step may take before the run is stopped (None or 0: no
        limit).
    """

    def __init__(
        self, env, policy, replay, seed: int, forced_switch_cuts: bool = False,
        reward_dim: int = 1, step_timeout_s: float | None = STEP_TIMEOUT_S,
    ):  # fmt: skip
        self.env, self.policy, self.replay = env, policy, replay
        self.env_call_since = 0.0  # perf_counter() while env.step runs (the watchdog's)
        limit = step_timeout(step_timeout_s)

        def on_timeout(elapsed: float) -> None:
            stop_inline(timeout_message("taac: the training environment", elapsed, limit))

        watchdog().watch(self, limit, on_timeout)
        self.b_key = "b" if forced_switch_cuts else "sampled_b"
        self.reward_dim = int(reward_dim)
        self.obs, _ = env.reset(seed=seed)
        n = env.num_envs
        self.state, self.first = policy.initial_state(n), np.ones(n, bool)
        self.in_last = np.zeros(n, bool)  # the step that produced obs ended its episode
        # reward of arriving at obs
        self.in_reward = np.zeros((n,) if reward_dim == 1 else (n, reward_dim), np.float32)
        self.in_discount = np.ones(n, np.float32)  # 1 - terminated of arriving at obs
        self.ep_return, self.ep_length = np.zeros(n), np.zeros(n, np.int64)
        self.repeats = RepeatLengths("repeat_length")

    def step(self, random_phase: bool) -> dict:
        """One vector step (uniform random actions and b in the ``random_phase``); returns
        the info of the episodes it ended (``episode_returns``, ``episode_lengths``)."""
        action, info, self.state = self.policy.step(
            self.obs, self.first, None, None, self.state, random_phase
        )
        check_actions(action, self.env.single_action_space, "taac")
        try:  # a whole vector is not made again: the replay's windows need the episodes
            self.env_call_since = time.perf_counter()
            # in the Box's bounds: the affine map from [-1, 1] can round one ulp past them
            env_input = env_action(action, self.env.single_action_space)
            next_obs, reward, terminated, truncated, infos = self.env.step(env_input)
            self.env_call_since = 0.0
            check_env_output(next_obs, reward)
        except EnvFailure:  # a sub-environment past its restart limits: its own line
            raise
        except Exception as error:  # noqa: BLE001 - ends the run with one line
            self.env_call_since = 0.0
            raise EnvFailure(
                f"the training environment failed; TAAC does not recreate it: "
                f"{type(error).__name__}: {error}"
            ) from error
        is_last = np.logical_or(terminated, truncated)
        stored = (self.obs, self.in_reward, self.in_discount, self.in_last)
        stored += (info["prev_tau"], info["tau"], info[self.b_key])
        self.replay.add(dict(zip(REPLAY_FIELDS, stored, strict=True)))
        if not random_phase:
            self.repeats.add(info, self.first, np.ones_like(is_last))
        self.ep_return += reward
        self.ep_length += 1
        done = np.flatnonzero(is_last)
        ended = {"episode_returns": self.ep_return[done], "episode_lengths": self.ep_length[done]}
        self.ep_return[done], self.ep_length[done] = 0.0, 0
        if self.reward_dim == 1:
            self.in_reward = np.asarray(reward, np.float32)
        else:  # where obs was an episode's final one, this step started the next episode
            self.in_reward = reward_vector(infos, self.in_last, self.reward_dim)
        self.obs, self.first, self.in_last = next_obs, self.in_last, is_last
        self.in_discount = 1.0 - np.asarray(terminated, np.float32)
        return ended
