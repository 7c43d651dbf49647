"""TAAC's actor: act-or-repeat steps on a vector env, stored in sequence replay.

Yu et al., "TAAC: Temporally Abstract Actor-Critic for Continuous Control", 2021,
https://arxiv.org/abs/2104.06521. One :meth:`Rollout.step` is one compiled acting call over
all environments (:class:`~tfagents_vtrace.agents.taac.policy.TaacPolicy`), one
``env.step`` and one replay write with ALF's alignment: a stored step's reward, discount and
``is_last`` are those of *arriving* at its observation, so the replay holds
``(observation, reward, discount, is_last, prev_tau, tau, b)`` per step. The environments
autoreset NEXT_STEP: an observation where ``is_last`` is an episode's final one, and the
step after it returns the next episode's first observation (``first``).
"""

from __future__ import annotations

import numpy as np

from tfagents_vtrace.runtime.env_failures import EnvFailure, check_actions, check_env_output

REPLAY_FIELDS = ("observation", "reward", "discount", "is_last", "prev_tau", "tau", "b")
"""What each stored step holds (``SequenceReplay`` specs in this order)."""


def replay_specs(observation_shape, trajectory_order: int, action_dim: int) -> dict:
    """``SequenceReplay`` specs of the stored steps: name -> (shape, dtype)."""
    tau = ((trajectory_order, action_dim), np.float32)
    shapes = ((tuple(observation_shape), np.float32), ((), np.float32), ((), np.float32),
              ((), bool), tau, tau, ((), np.int32))  # fmt: skip
    return dict(zip(REPLAY_FIELDS, shapes, strict=True))


class RepeatLengths:
    """Environment steps per trajectory started (a switch or an episode start), as the row
    field ``name``: ``repeat_length`` of rollouts, ``eval_repeat_length`` of evaluations
    (the policy's ``episode_stats`` for :class:`~tfagents_vtrace.runtime.evaluation.
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
    """

    def __init__(self, env, policy, replay, seed: int):
        self.env, self.policy, self.replay = env, policy, replay
        self.obs, _ = env.reset(seed=seed)
        n = env.num_envs
        self.state, self.first = policy.initial_state(n), np.ones(n, bool)
        self.in_last = np.zeros(n, bool)  # the step that produced obs ended its episode
        self.in_reward = np.zeros(n, np.float32)  # reward of arriving at obs
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
        try:  # no restarts: the replay's running windows need the env's episodes intact
            next_obs, reward, terminated, truncated, _ = self.env.step(action)
            check_env_output(next_obs, reward)
        except Exception as error:  # noqa: BLE001 - ends the run with one line
            raise EnvFailure(
                f"the training environment failed; TAAC does not recreate it: "
                f"{type(error).__name__}: {error}"
            ) from error
        is_last = np.logical_or(terminated, truncated)
        stored = (self.obs, self.in_reward, self.in_discount, self.in_last)
        self.replay.add(dict(zip(REPLAY_FIELDS, (*stored, *(info[k] for k in REPLAY_FIELDS[4:])))))
        if not random_phase:
            self.repeats.add(info, self.first, np.ones_like(is_last))
        self.ep_return += reward
        self.ep_length += 1
        done = np.flatnonzero(is_last)
        ended = {"episode_returns": self.ep_return[done], "episode_lengths": self.ep_length[done]}
        self.ep_return[done], self.ep_length[done] = 0.0, 0
        self.obs, self.first, self.in_last = next_obs, self.in_last, is_last
        self.in_reward = np.asarray(reward, np.float32)
        self.in_discount = 1.0 - np.asarray(terminated, np.float32)
        return ended
