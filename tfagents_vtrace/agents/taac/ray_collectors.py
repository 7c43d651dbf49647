"""TAAC's collectors on Ray (Ape-X style): acting in Ray processes, replay and training in
the training process.

Horgan et al. 2018 (Ape-X, https://arxiv.org/abs/1803.00933) decouple acting from learning
for replay-based agents: actors step their environments with a recent copy of the policy and
send the steps to the learner's replay. With ``--backend=ray`` TAAC (Yu et al. 2021,
https://arxiv.org/abs/2104.06521) runs ``num_actors`` (0: one) :class:`TaacCollectorHost` Ray actor
processes, each with its own ``num_envs`` environments, a copy of the actor, the critics and
the b temperature (what the act-or-repeat step reads), and the inline agent's
:class:`~tfagents_vtrace.agents.taac.rollout.Rollout`. One call
(:meth:`TaacCollectorHost.collect`) loads the learner's weights if newer (by version, the
learner's update count), steps ``train_interval`` vector steps (uniform random actions and b
while the run is within ``initial_collect_steps``) and returns the stored steps.

:class:`TaacRayCollectors` (the driver's thread) writes each arriving call into the learner's
:class:`~tfagents_vtrace.replay.sequence.StreamReplay` (one stream per collector: they
arrive in any order), then runs one training call (``updates_per_train`` updates) as the
inline agent does after ``train_interval`` vector steps: the updates per collected step are
the inline run's. One call is in flight per collector, so collectors wait for the learner
and never outrun that ratio; the policy that acts is at most one call's updates (times the
other collectors') old (``policy_lag``).

A collector process that dies is replaced and counted in ``env_restarts`` (its claimed
steps go back to the budget); its stream's newest step is marked ``is_last`` (the
replacement starts new episodes there), as every stream is on resume. One dying more than
``RESTART_LIMIT`` times within ``RESTART_WINDOW_S`` ends the run with
:class:`~tfagents_vtrace.runtime.acting.ray_backend.RayWorkerLost` after a checkpoint (replay
included). The replay (all streams) is archived with each checkpoint by the
driver. The pool's loop, step budget, process start-up, replacement and kill on stop are
:class:`~tfagents_vtrace.runtime.acting.ray_backend.RayWorkerPool`'s, shared with A3C and ACER.
"""

from __future__ import annotations

import time

import numpy as np

from tfagents_vtrace.agents.taac.rollout import REPLAY_FIELDS, RepeatLengths
from tfagents_vtrace.runtime.acting.ray_backend import AgentWorkerPool, HostProcess
from tfagents_vtrace.runtime.config import stream_seed


class _Steps:
    """The rollout's replay in a collector: keeps the vector steps of one call."""

    def __init__(self):
        self.steps: list = []

    def add(self, step: dict) -> None:
        self.steps.append(step)

    def take(self) -> dict:
        """The call's steps, fields ``[steps, num_envs, ...]``; empties the list."""
        steps, self.steps = self.steps, []
        return {key: np.stack([np.asarray(s[key]) for s in steps]) for key in REPLAY_FIELDS}


class TaacCollectorHost(HostProcess):
    """The body of one TAAC collector process (module docstring).

    Args:
      run: the run's ``RunConfig`` (env id, mode, kwargs, ``num_envs``, seed).
      config: the run's ``TaacConfig``.
      collector_id: identifies the collector (``info["actor_id"]``, its replay stream).
      seed: seeds its environments and its policy's draws.
      env_factory: optional picklable ``seed -> VectorEnv``.
      env_restarts: restart count to continue from (a replaced collector keeps its count).
      tf_threads: TensorFlow intra/inter-op threads in this process.
    """

    def __init__(self, run, config, collector_id: int, seed: int, env_factory=None,
                 env_restarts: int = 0, tf_threads: int = 1):  # fmt: skip
        super().__init__(tf_threads)
        from tfagents_vtrace.agents.taac.learner import TaacLearner
        from tfagents_vtrace.agents.taac.policy import TaacPolicy
        from tfagents_vtrace.agents.taac.rollout import Rollout
        from tfagents_vtrace.envs.factory import vector_env_factory

        self.collector_id, self.env_restarts = int(collector_id), int(env_restarts)
        seed = int(seed) + 15_485_863 * self.env_restarts  # a replacement's own episodes
        if env_factory is None:
            env_factory = vector_env_factory(run.env_id, run.env_mode, run.env_kwargs)
            self.env = env_factory(run.num_envs, seed)
        else:
            self.env = env_factory(seed)
        space = self.env.single_action_space
        obs_shape, action_dim = self.env.single_observation_space.shape, int(np.prod(space.shape))
        self.learner = TaacLearner(config, obs_shape, action_dim, seed=seed)
        low, high = space.low.reshape(-1), space.high.reshape(-1)
        policy = TaacPolicy(self.learner, False, low, high, seed=seed)
        self.sink = _Steps()
        self.rollout = Rollout(
            self.env, policy, self.sink, seed, forced_switch_cuts=config.forced_switch_cuts,
            reward_dim=config.reward_dim,
        )  # fmt: skip
        self.weights_version = -1
        self.weights_time = 0.0

    def _load(self, version: int, weights_ref: list) -> None:
        """Loads ``(actor, critics, log_alpha_b)`` of ``version`` if newer than its own."""
        if version <= self.weights_version:
            return
        import ray

        start = time.perf_counter()
        actor, critics, log_alpha_b = ray.get(weights_ref[0])
        self.weights_time += time.perf_counter() - start
        self.learner.actor.set_weights(actor)
        self.learner.critics.set_weights(critics)
        self.learner.log_alpha_b.assign(log_alpha_b)
        self.weights_version = version

    def collect(self, version: int, weights_ref: list, steps: int, random_steps: int):
        """Loads the weights if newer, steps ``steps`` vector steps (the first
        ``random_steps`` of them uniformly random); returns ``(steps, info)``: the stored
        steps (fields ``[steps, num_envs, ...]``) and the episodes ended, the repeat-length
        counts, the weights version that acted and the env restarts."""
        self._load(version, weights_ref)
        returns, lengths = [], []
        repeats = self.rollout.repeats
        repeats.reset()
        for t in range(int(steps)):
            ended = self.rollout.step(t < random_steps)
            returns.extend(ended["episode_returns"])
            lengths.extend(ended["episode_lengths"])
        info = {
            "episode_returns": np.asarray(returns, np.float64),
            "episode_lengths": np.asarray(lengths, np.int64),
            "actor_id": self.collector_id,
            "env_restarts": self.env_restarts,
            "weights_version": self.weights_version,
            "weights_time": self.weights_time,
            "repeat_steps": repeats.steps,
            "repeat_starts": repeats.starts,
        }
        return self.sink.take(), info


class TaacRayCollectors(AgentWorkerPool):
    """The driver's view of TAAC's Ray collectors (module docstring); arguments as
    :class:`~tfagents_vtrace.runtime.acting.ray_backend.AgentWorkerPool`'s, ``agent`` the
    :class:`~tfagents_vtrace.agents.taac.agent.TaacAgent` (its learner, replay and sampling
    generator)."""

    host_class = TaacCollectorHost
    what = "TAAC Ray collector"

    def __init__(self, agent, counters, env_factory=None):
        self.vector_steps = agent.config.train_interval
        steps = self.vector_steps * agent.run_config.num_envs
        super().__init__(agent, counters, agent.num_collectors, steps, env_factory)
        start = counters.env_steps
        self.seeds = [stream_seed(self.run.seed, start, i + 1) for i in range(self.num_actors)]
        self.repeats = RepeatLengths("repeat_length")

    def host_args(self, actor_id: int) -> tuple:
        return (self.run, self.agent.config, actor_id, self.seeds[actor_id], self._env_factory)

    def get(self) -> tuple[int, tuple]:
        """``(version, (actor weights, critic weights, log_alpha_b))``."""
        learner = self.learner
        weights = (learner.actor.get_weights(), learner.critics.get_weights(),
                   learner.log_alpha_b.numpy())  # fmt: skip
        return self.version, weights

    def call(self, worker_id: int):
        # The call's steps were just claimed: they start at claimed - steps.
        first = self.budget.claimed - self.steps
        initial = self.agent.config.initial_collect_steps
        random_steps = min(max(-(-(initial - first) // self.run.num_envs), 0), self.vector_steps)
        version, ref = self._weights(self)
        return self.handles[worker_id].collect.remote(version, ref, self.vector_steps, random_steps)

    def apply(self, worker_id: int, item) -> tuple[dict, dict]:
        steps, info = item
        replay = self.agent.extra_state
        for t in range(self.vector_steps):
            replay.add({key: value[t] for key, value in steps.items()}, worker_id)
        self.repeats.steps += int(info["repeat_steps"])
        self.repeats.starts += int(info["repeat_starts"])
        counters, cfg = self.counters, self.agent.config
        counters.add(steps=self.steps, info=info)
        if counters.env_steps < cfg.initial_collect_steps or not replay.can_sample(
            cfg.mini_batch_length
        ):
            return {}, info
        lag = self.version - info["weights_version"]
        batches = replay.sample(
            cfg.mini_batch_size, cfg.mini_batch_length, self.agent.rng, num=cfg.updates_per_train
        )
        metrics = self.learner.train(batches)
        counters.add(updates=cfg.updates_per_train, lag=lag)
        return metrics, info

    def dropped(self, worker_id: int) -> None:
        self.agent.extra_state.cut(worker_id)
