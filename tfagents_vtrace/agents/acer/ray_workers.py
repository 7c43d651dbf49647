"""ACER's asynchronous workers on Ray: acting and gradients in worker processes, the replay
and the updates in the training process.

Wang et al. 2016, https://arxiv.org/abs/1611.01224, run asynchronously as chainerrl's ACER
(one process per worker sharing one model). With ``--backend=ray`` and ``num_workers >= 1``
each :class:`AcerWorkerHost` Ray actor builds its own copies of the network and of the
average network and its own vector environment. One call (:meth:`AcerWorkerHost.iterate`)
is one ACER iteration of the thread worker:

1. load the learner's weights and average weights if newer (by version, as IMPALA's Ray
   actors);
2. act ``t_max`` steps (``num_envs`` environments, the runtime's
   :class:`~tfagents_vtrace.runtime.acting.actor.Actor`);
3. the gradients of the on-policy update on the weights that acted (exactly on-policy, as
   with threads), unless ``disable_online_update``, and of one replay update per replayed
   batch the call brought;
4. return the unroll, its info and the gradients (numpy).

:class:`AcerRayWorkers` (the driver's thread) samples each call's replayed batches from the
learner's :class:`~tfagents_vtrace.replay.episodic.EpisodicReplay` (``n_times_replay``, or a
Poisson count, once it holds ``replay_start_size`` transitions) when it sends the call, and
when the result arrives adds the unroll to that replay and applies the gradients in order
through :meth:`~tfagents_vtrace.agents.acer.learner.AcerLearner.apply_gradients` (the
average network follows each applied update).

The replay is the learner's, shared by the workers as with threads, not one per process as
in chainerrl: the driver archives it with every checkpoint and restores it on resume, a
replaced worker process loses no experience, and the rows' ``replay_size`` is the whole
run's. The price is transport: every unroll comes back and every replayed batch goes out
(small for vector observations; for pixels, per-process replays would save it). The other
difference from threads: a call's replay gradients are all taken on the weights it acted
with (a thread re-syncs before each replay update), so they are up to ``n_times_replay``
updates staler, plus the other workers' updates in between (``policy_lag``).

The pool's loop, process start-up and replacement, the step budget and the kill on stop are
:class:`~tfagents_vtrace.runtime.acting.ray_backend.RayWorkerPool`'s, shared with A3C: a dead
worker's call is dropped (its open episode discarded, its claimed steps given back) and its
process replaced, and one dying more than ``RESTART_LIMIT`` times within
``RESTART_WINDOW_S`` ends the run with
:class:`~tfagents_vtrace.runtime.acting.ray_backend.RayWorkerLost` after a checkpoint (replay
included).
"""

from __future__ import annotations

import numpy as np

from tfagents_vtrace.runtime.acting.ray_backend import AgentWorkerPool, NetworkHost
from tfagents_vtrace.runtime.config import STREAM_SEED_STRIDE


class AcerWorkerHost(NetworkHost):
    """The body of one ACER worker process (module docstring): its network and the average
    network the trust region reads; arguments as
    :class:`~tfagents_vtrace.runtime.acting.ray_backend.NetworkHost`'s (``config``: the
    run's ``AcerConfig``)."""

    NETWORKS = ("network", "average_network")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        from tfagents_vtrace.agents.acer.learner import gradients_fn

        self._grads = gradients_fn(self.network, self.average_network, self.config)

    def _numpy(self, grads, metrics) -> tuple[list, dict]:
        import tensorflow as tf

        grads = [np.asarray(tf.convert_to_tensor(g)) for g in grads]
        return grads, {k: np.asarray(v, np.float32) for k, v in metrics.items()}

    def iterate(self, version: int, weights_ref: list, batches: list):
        """One iteration (module docstring): ``(unroll, info, [(grads, metrics), ...])``, the
        on-policy update's first; None if the environment raised (recreated, unroll
        dropped)."""
        self.load(version, weights_ref)
        item = self.actor.unroll()
        if item is None:
            return None
        unroll, info = item
        results = []
        if not self.config.disable_online_update:
            results.append(self._numpy(*self._grads(unroll, on_policy=True)))
        for batch in batches:
            results.append(self._numpy(*self._grads(batch)))
        return unroll, info, results


class AcerRayWorkers(AgentWorkerPool):
    """The driver's view of ACER's Ray workers (module docstring); arguments as
    :class:`~tfagents_vtrace.runtime.acting.ray_backend.AgentWorkerPool`'s, ``agent`` the
    :class:`~tfagents_vtrace.agents.acer.agent.AcerAgent` (its learner, replay, replay
    sampling and actor specs)."""

    host_class = AcerWorkerHost
    what = "ACER Ray worker"

    def __init__(self, agent, counters, env_factory=None):
        super().__init__(agent, counters, agent.config.num_workers, agent.steps, env_factory)
        # Worker i acts as thread worker i + 1 would: same seeds, replay stream i + 1.
        self.specs = [
            agent.actor_spec(agent.config.t_max, counters.env_steps, STREAM_SEED_STRIDE * (i + 1))
            for i in range(self.num_actors)
        ]

    def host_args(self, actor_id: int) -> tuple:
        return (self.specs[actor_id], self.learner.config, actor_id, self._env_factory)

    def get(self) -> tuple[int, tuple[list, list]]:
        """``(version, (weights, average weights))``, read together."""
        learner = self.learner
        with learner.lock:
            weights = (learner.network.get_weights(), learner.average_network.get_weights())
            return int(learner.updates.numpy()), weights

    def call(self, worker_id: int):
        batches = []
        for _ in range(self.agent._replay_count()):
            batch = self.agent._replay_batch()
            if batch is None:
                break
            batches.append(batch)
        version, ref = self._weights(self)
        return self.handles[worker_id].iterate.remote(version, ref, batches)

    def apply(self, worker_id: int, item) -> tuple[dict, dict]:
        import tensorflow as tf

        unroll, info, results = item
        self.agent.extra_state.add_unroll(unroll, worker_id + 1)
        lag, metrics = self.version - info["weights_version"], self.metrics
        for grads, values in results:
            grads = [tf.convert_to_tensor(g) for g in grads]
            values = {k: tf.convert_to_tensor(v) for k, v in values.items()}
            metrics = self.learner.apply_gradients(grads, values)
        with self.learner.lock:  # counted with the updates, as a checkpoint sees them
            self.counters.add(steps=self.steps, updates=len(results), info=info, lag=lag)
        return metrics, info

    def dropped(self, worker_id: int) -> None:
        self.agent.extra_state.discard_open(worker_id + 1)
