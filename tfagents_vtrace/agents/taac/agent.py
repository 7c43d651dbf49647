"""TAAC on the run driver, inline: act-or-repeat rollouts into sequence replay, several
compiled updates per training call.

Yu et al., "TAAC: Temporally Abstract Actor-Critic for Continuous Control", 2021,
https://arxiv.org/abs/2104.06521. One :meth:`TaacAgent.advance` is one vector-env step: one
compiled acting call over all environments, one ``env.step``, one replay write (ALF
alignment: a step's reward and discount are those of arriving at its observation). Every
``train_interval`` steps (once ``initial_collect_steps`` environment steps with uniform
random actions and b are stored) one compiled call runs ``updates_per_train`` updates on
freshly sampled windows. The driver (:mod:`tfagents_vtrace.runtime.driver`) archives the
replay beside each checkpoint and owns everything else of the run.

Rows add ``repeat_length``: environment steps per trajectory started (a switch or an episode
start) in the rollouts since the previous row, after the random phase; evaluation rows add
``eval_repeat_length``, the same over the greedy episodes.
"""

from __future__ import annotations

import contextlib

import gymnasium as gym
import numpy as np
import tensorflow as tf

from tfagents_vtrace.agents import placement
from tfagents_vtrace.agents.taac.config import TaacConfig
from tfagents_vtrace.agents.taac.learner import TaacLearner
from tfagents_vtrace.agents.taac.policy import TaacPolicy
from tfagents_vtrace.replay.sequence import SequenceReplay


class RepeatLengths:
    """Environment steps per trajectory started, as the row field ``name``."""

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


class TaacAgent:
    """The run agent of TAAC/TaacL/TaacQ (module docstring); ``network_config`` is unused
    (TAAC builds its own actor and critics), ``env_factory`` is ``(num_envs, seed) ->
    VectorEnv``."""

    lock = contextlib.nullcontext()

    def __init__(self, run, config, network_config=None, strategy=None, env_factory=None):
        placement.check_local_agent(run, strategy, config, TaacConfig, "TAAC")
        tf.keras.utils.set_random_seed(run.seed)
        self.run_config, self.config = run, config
        self.max_nonfinite_updates = config.max_nonfinite_updates
        if env_factory is None:
            from tfagents_vtrace.envs import make_vector_env

            env_factory = lambda n, seed: make_vector_env(run.env_id, n, seed, mode=run.env_mode)
        self.env = env_factory(run.num_envs, run.seed)
        space = self.space = self.env.single_action_space
        if not isinstance(space, gym.spaces.Box):
            raise ValueError(f"env_id: TAAC needs a Box action space, {run.env_id!r} has {space}")
        obs_shape, action_dim = self.env.single_observation_space.shape, int(np.prod(space.shape))
        self.learner = TaacLearner(config, obs_shape, action_dim, seed=run.seed)
        k = self.learner.trajectory.order
        tau = ((k, action_dim), np.float32)
        specs = dict(observation=(obs_shape, np.float32), reward=((), np.float32),
                     discount=((), np.float32), is_last=((), bool), b=((), np.int32),
                     prev_tau=tau, tau=tau)  # fmt: skip
        self.extra_state = SequenceReplay(specs, run.num_envs, config.replay_capacity)
        self.window = RepeatLengths("repeat_length")

    def checkpoint_items(self) -> dict:
        return {"network": self.learner.actor, **self.learner.checkpoint_items()}

    def start(self, counters) -> None:
        """Fresh episodes in every environment, seeded by the restored step."""
        run, self.counters, restart = self.run_config, counters, counters.env_steps
        low, high = self.space.low.reshape(-1), self.space.high.reshape(-1)
        self.policy = TaacPolicy(self.learner, False, low, high, seed=run.seed + 7919 * restart)
        self.rng = np.random.default_rng([run.seed, restart])
        self.obs, _ = self.env.reset(seed=run.seed + 7919 * restart)
        n, self.iteration = run.num_envs, 0
        self.state, self.first = self.policy.initial_state(n), np.ones(n, bool)
        self.in_last = np.zeros(n, bool)  # the step that produced obs ended its episode
        self.in_reward = np.zeros(n, np.float32)  # reward of arriving at obs
        self.in_discount = np.ones(n, np.float32)  # 1 - terminated of arriving at obs
        self.ep_return, self.ep_length = np.zeros(n), np.zeros(n, np.int64)

    def advance(self) -> dict:
        """One vector step, then a training call when one is due."""
        cfg, counters = self.config, self.counters
        random_phase = counters.env_steps < cfg.initial_collect_steps
        action, info, self.state = self.policy.step(
            self.obs, self.first, None, None, self.state, random_phase
        )
        next_obs, reward, terminated, truncated, _ = self.env.step(action)
        is_last = np.logical_or(terminated, truncated)
        stored = dict(observation=self.obs, reward=self.in_reward, discount=self.in_discount,
                      is_last=self.in_last, b=info["b"])  # fmt: skip
        self.extra_state.add({**stored, "prev_tau": info["prev_tau"], "tau": info["tau"]})
        if not random_phase:
            self.window.add(info, self.first, np.ones_like(is_last))
        self.ep_return += reward
        self.ep_length += 1
        done = np.flatnonzero(is_last)
        episodes = {
            "episode_returns": self.ep_return[done],
            "episode_lengths": self.ep_length[done],
        }
        counters.add(steps=len(is_last), info=episodes)
        self.ep_return[done], self.ep_length[done] = 0.0, 0
        # NEXT_STEP autoreset: next_obs is an episode's final observation where is_last;
        # the step after it returns the next episode's first observation.
        self.obs, self.first, self.in_last = next_obs, self.in_last, is_last
        self.in_reward = np.asarray(reward, np.float32)
        self.in_discount = 1.0 - np.asarray(terminated, np.float32)
        self.iteration += 1
        due = self.iteration % cfg.train_interval == 0
        due = due and counters.env_steps >= cfg.initial_collect_steps
        if not (due and self.extra_state.can_sample(cfg.mini_batch_length)):
            return {}
        batches = self.extra_state.sample(
            cfg.mini_batch_size, cfg.mini_batch_length, self.rng, num=cfg.updates_per_train
        )
        metrics = self.learner.train(batches)
        counters.add(updates=cfg.updates_per_train)
        return metrics

    def get_weights(self) -> list:
        return []  # the policies read the learner's variables directly

    def set_weights(self, weights: list) -> None:
        del weights

    def evaluation_policy(self) -> TaacPolicy:
        low, high = self.space.low.reshape(-1), self.space.high.reshape(-1)
        policy = TaacPolicy(self.learner, True, low, high, seed=10_000 + self.run_config.seed)
        policy.episode_stats = RepeatLengths("eval_repeat_length")
        return policy

    def export(self, path: str) -> None:
        from tfagents_vtrace.agents.taac.export import export_taac_policy

        export_taac_policy(self.learner, path, self.space, overwrite=True)

    def row_fields(self, times: dict | None) -> dict:
        if times is None:
            return {}
        fields = self.window.fields()
        self.window.reset()
        return fields

    def close(self) -> None:
        self.env.close()
