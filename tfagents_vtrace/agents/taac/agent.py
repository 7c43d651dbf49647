"""TAAC on the run driver, inline: act-or-repeat rollouts into sequence replay, several
compiled updates per training call.

Yu et al., "TAAC: Temporally Abstract Actor-Critic for Continuous Control", 2021,
https://arxiv.org/abs/2104.06521. One :meth:`TaacAgent.advance` is one vector-env step of
the :class:`~tfagents_vtrace.agents.taac.rollout.Rollout`; every ``train_interval`` steps
(once ``initial_collect_steps`` environment steps with uniform random actions and b are
stored) one compiled call runs ``updates_per_train`` updates on freshly sampled windows. The
driver archives the replay beside each checkpoint. With ``backend="ray"``, ``num_actors``
(0: one) Ray processes collect into the replay (one stream each) and every collected call of
``train_interval`` vector steps is followed by one training call
(:mod:`~tfagents_vtrace.agents.taac.ray_collectors`, Ape-X style); ``deterministic`` is
refused with Ray (``RunConfig``). Rows add ``repeat_length`` (environment
steps per trajectory started since the previous row, after the random phase), evaluation
rows ``eval_repeat_length``.
"""

from __future__ import annotations

import contextlib

import gymnasium as gym
import numpy as np

from tfagents_vtrace.agents import placement
from tfagents_vtrace.agents.taac.config import TaacConfig
from tfagents_vtrace.agents.taac.learner import TaacLearner
from tfagents_vtrace.agents.taac.policy import TaacPolicy
from tfagents_vtrace.agents.taac.rollout import RepeatLengths, Rollout, replay_specs
from tfagents_vtrace.envs.factory import vector_env_factory
from tfagents_vtrace.replay.sequence import SequenceReplay, StreamReplay
from tfagents_vtrace.runtime.config import stream_seed


class TaacAgent:
    """The run agent of TAAC/TaacL/TaacQ (module docstring); ``network_config`` is unused
    (TAAC builds its own actor and critics), ``env_factory`` is ``(num_envs, seed) ->
    VectorEnv``."""

    lock = contextlib.nullcontext()

    def __init__(self, run, config, network_config=None, strategy=None, env_factory=None):
        placement.check_config(config, TaacConfig)
        placement.refuse_normalization("taac", config, network_config)
        # With Ray: num_actors collector processes (0: one); ImportError without Ray.
        self.num_collectors = max(run.num_actors, 1)
        if run.backend == "ray":
            from tfagents_vtrace.runtime.acting.ray_backend import import_ray

            import_ray()
        placement.require_single_replica(strategy, "TAAC")
        if config.callables():
            raise ValueError(
                f"{config.callables()[0]}: a run records its config in config.json, which "
                "cannot hold a callable; give the run numbers or a name (e.g. the values of "
                "TaacConfig.target_entropies(action_dim)), or call TaacLearner directly"
            )
        self.run_config, self.config = run, config
        self.max_nonfinite_updates = config.max_nonfinite_updates
        factory = env_factory or vector_env_factory(run.env_id, run.env_mode, run.env_kwargs)
        self.env = factory(run.num_envs, run.seed)
        self.env_factory = env_factory
        space = self.space = self.env.single_action_space
        if not isinstance(space, gym.spaces.Box):
            raise ValueError(f"env_id: TAAC needs a Box action space, {run.env_id!r} has {space}")
        obs_shape, action_dim = self.env.single_observation_space.shape, int(np.prod(space.shape))
        self.learner = TaacLearner(config, obs_shape, action_dim, seed=run.seed)
        specs = replay_specs(
            obs_shape, self.learner.trajectory.order, action_dim, config.reward_dim
        )
        self.source = None
        if run.backend == "ray":  # one replay stream per collector process
            self.extra_state = StreamReplay(
                specs, self.num_collectors, run.num_envs, config.replay_capacity
            )
        else:
            self.extra_state = SequenceReplay(specs, run.num_envs, config.replay_capacity)

    def checkpoint_items(self) -> dict:
        return {"network": self.learner.actor, **self.learner.checkpoint_items()}

    def _policy(self, greedy: bool, seed: int) -> TaacPolicy:
        low, high = self.space.low.reshape(-1), self.space.high.reshape(-1)
        return TaacPolicy(self.learner, greedy, low, high, seed=seed)

    def start(self, counters) -> None:
        """Fresh episodes in every environment, seeded by the restored step."""
        seed, self.counters = self.run_config.seed, counters
        restart, self.iteration = counters.env_steps, 0
        self.rng = np.random.default_rng([seed, restart])
        if self.run_config.backend == "ray":
            from tfagents_vtrace.agents.taac.ray_collectors import TaacRayCollectors

            for stream in range(self.num_collectors):
                self.extra_state.cut(stream)  # a restored stream's episodes end here
            self.source = TaacRayCollectors(self, counters, self.env_factory)
            self.rollout = self.source  # its ``repeats`` feed the rows
            self.source.start()
            return
        policy = self._policy(False, stream_seed(seed, restart))
        self.rollout = Rollout(
            self.env, policy, self.extra_state, stream_seed(seed, restart),
            forced_switch_cuts=self.config.forced_switch_cuts, reward_dim=self.config.reward_dim,
            step_timeout_s=self.run_config.env_step_timeout_s,
        )  # fmt: skip

    def advance(self) -> dict:
        """One vector step, then a training call when one is due (with Ray: the collectors'
        calls that arrived, each followed by a training call)."""
        if self.source is not None:
            return self.source.advance()
        cfg, counters = self.config, self.counters
        ended = self.rollout.step(counters.env_steps < cfg.initial_collect_steps)
        counters.add(steps=self.run_config.num_envs, info=ended)
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
        policy = self._policy(True, 10_000 + self.run_config.seed)
        policy.episode_stats = RepeatLengths("eval_repeat_length")
        return policy

    def export(self, path: str) -> None:
        from tfagents_vtrace.agents.taac.export import TaacPolicyModule
        from tfagents_vtrace.export.saved_model import export_policy

        export_policy(TaacPolicyModule(self.learner, self.space), path, overwrite=True)

    def row_fields(self, times: dict | None) -> dict:
        fields = {} if times is None else self.rollout.repeats.fields()
        self.rollout.repeats.reset()  # each row covers the trajectories since the previous
        return fields

    def close(self) -> None:
        if self.source is not None:
            self.source.close()
        self.env.close()
