"""ACER on the run driver: on-policy unrolls + episodic replay, inline or on worker threads.

Wang et al. 2016, https://arxiv.org/abs/1611.01224 (Algorithm 1). Each iteration acts
``t_max`` steps on ``num_envs`` environments, stores the unroll in the
:class:`~tfagents_vtrace.replay.episodic.EpisodicReplay`, runs one on-policy update (unless
``disable_online_update``) and, once the replay holds ``replay_start_size`` transitions,
``n_times_replay`` updates on replayed sequences (with ``replay_poisson`` a count drawn from
Poisson(``n_times_replay``), the paper's Algorithm 1).

* ``num_workers = 0`` (default): inline, one actor that acts with the learner's own network
  (no copy, no policy lag); :meth:`AcerAgent.advance` is one iteration.
* ``num_workers = N``: N asynchronous workers (:class:`~tfagents_vtrace.runtime.acting.workers.
  WorkerPool`), each with its environments and a local network copy; they compute gradients
  locally and apply them to the global network and its average under the learner's lock,
  and share one replay.
* ``num_workers = N`` with ``backend="ray"``: the N workers are Ray processes that act and
  compute gradients; the replay and the updates stay here
  (:mod:`~tfagents_vtrace.agents.acer.ray_workers`). ``deterministic`` is refused with Ray
  (``RunConfig``), as for IMPALA.

The driver archives the replay beside each checkpoint (before it) and restores it on resume.
Rows add the ACER statistics ``average_value``, ``average_entropy`` and ``average_kl``.
"""

from __future__ import annotations

import math

import numpy as np

from tfagents_vtrace.agents import placement
from tfagents_vtrace.agents.acer.config import AcerConfig
from tfagents_vtrace.agents.acer.learner import AcerLearner
from tfagents_vtrace.agents.acer.worker import AcerWorker
from tfagents_vtrace.networks.normalization import ReturnScaler
from tfagents_vtrace.replay.episodic import EpisodicReplay
from tfagents_vtrace.runtime.acting.actor import Actor
from tfagents_vtrace.runtime.config import STREAM_SEED_STRIDE, stream_seed
from tfagents_vtrace.runtime.run_agent import NetworkAgent, update_statistics


class AcerAgent(NetworkAgent):
    """The run agent of ACER (module docstring); ``env_factory`` is ``(num_envs, seed) ->
    VectorEnv``."""

    def __init__(self, run, config, network_config, strategy=None, env_factory=None):
        placement.check_config(config, AcerConfig)
        if run.backend == "ray":  # workers in Ray processes; ImportError without Ray
            placement.refuse_normalization("acer with backend='ray'", config, network_config)
            from tfagents_vtrace.runtime.acting.ray_backend import import_ray

            import_ray()
            if config.num_workers < 1:
                raise ValueError(
                    "num_workers: backend='ray' runs ACER's asynchronous workers as Ray "
                    "processes, expected >= 1, received 0 (the synchronous ACER acts in the "
                    "training process: --backend=local)"
                )
        placement.require_single_replica(strategy, "ACER")
        super().__init__(run, config, network_config, env_factory)
        self.steps = config.t_max * run.num_envs
        per_iter = max(int(not config.disable_online_update) + config.n_times_replay, 1)
        updates = math.ceil(run.total_steps / self.steps) * per_iter
        self.learner = AcerLearner(config, self.build_network, total_updates=updates)
        self.lock = self.learner.lock
        self.extra_state = EpisodicReplay(config.replay_capacity)
        self.inline, self.replay_size = None, config.replay_batch_size or run.num_envs
        state = self.learner.network.initial_state(self.replay_size)
        self.zero_state = tuple(s.numpy() for s in state)  # of replayed sequences, as numpy
        self.returns = ReturnScaler(config.discount) if config.normalize_rewards else None
        self.normalizes = bool(self.learner.network.observation_normalizers or self.returns)

    def checkpoint_items(self) -> dict:
        items = super().checkpoint_items()
        if self.returns is not None:
            items["return_statistics"] = self.returns.statistics
        return items

    def actor(self, worker: int, network) -> Actor:
        """Worker ``worker``'s actor (0: the inline one), seeded by the restored step."""
        spec = self.actor_spec(
            self.config.t_max, self.counters.env_steps, STREAM_SEED_STRIDE * worker
        )
        return Actor(spec, max(worker - 1, 0), network, self.actor_env_factory())

    def start(self, counters) -> None:
        self.counters = counters
        self.rng = np.random.default_rng(stream_seed(self.run_config.seed, counters.env_steps))
        if self.config.num_workers == 0:
            self.source = self.inline = self.actor(0, self.learner.network)
            return
        if self.run_config.backend == "ray":
            from tfagents_vtrace.agents.acer.ray_workers import AcerRayWorkers

            self.source = AcerRayWorkers(self, counters, self.env_factory)
            self.source.start()
            return
        workers = [AcerWorker(self, i + 1) for i in range(self.config.num_workers)]
        self.start_workers(workers, self.steps, counters.env_steps)

    def advance(self) -> dict:
        if self.inline is None:
            return super().advance()
        return self.iterate(self.inline, 0, self.learner.train_step)

    def iterate(self, actor: Actor, stream: int, update) -> dict:
        """One ACER iteration: act, store, on-policy update, replay updates, count."""
        item = None
        while item is None:  # None: the env raised and was recreated
            item = actor.unroll()
        unroll, info = item
        if self.normalizes:  # what the actor saw, before the updates that train on it
            with self.lock:
                update_statistics(self.learner.network, self.returns, [(unroll, stream)])
        self.extra_state.add_unroll(unroll, stream)  # raw rewards: scaled when trained on
        metrics, updates = {}, 0
        if not self.config.disable_online_update:
            metrics, updates = update(self._scaled(unroll), on_policy=True), 1
        for _ in range(self._replay_count()):
            batch = self._replay_batch()
            if batch is None:
                break
            metrics, updates = update(self._scaled(batch)), updates + 1
        with self.lock:  # counted with the updates, as a checkpoint sees them
            self.counters.add(steps=self.steps, updates=updates, info=info)
        return metrics

    def _scaled(self, batch: dict) -> dict:
        """``batch`` with its rewards divided by the return's spread (``normalize_rewards``)."""
        if self.returns is None:
            return batch
        return {**batch, "reward": self.returns.scale(batch["reward"])}

    def _replay_count(self) -> int:
        """Replay updates of this iteration: n_times_replay, or Poisson(n_times_replay)."""
        if not self.config.replay_poisson:
            return self.config.n_times_replay
        with self.lock:  # one generator shared by the worker threads
            return int(self.rng.poisson(self.config.n_times_replay))

    def _replay_batch(self) -> dict | None:
        """A replayed batch, or None while the replay is below ``replay_start_size``."""
        if len(self.extra_state) < max(self.config.replay_start_size, 1):
            return None
        size, t_max = self.replay_size, self.config.t_max
        return self.extra_state.sample(size, t_max, self.rng, self.zero_state)

    def row_fields(self, times: dict | None) -> dict:
        return {"replay_size": len(self.extra_state)} if times is not None else {}
