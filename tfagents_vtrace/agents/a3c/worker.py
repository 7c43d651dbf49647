"""An A3C worker: its own environment(s), a local network copy, t_max-step rollouts.

Mnih et al., "Asynchronous Methods for Deep Reinforcement Learning", 2016,
https://arxiv.org/abs/1602.01783 (Algorithm S3). Each iteration (:meth:`Worker.iterate`,
repeated on its own thread by a :class:`~tfagents_vtrace.runtime.acting.workers.WorkerPool`):

1. copy the global weights into the local network (under the shared lock);
2. act ``t_max`` steps on the worker's environments with the runtime's
   :class:`~tfagents_vtrace.runtime.acting.actor.Actor` (which carries the LSTM state, previous
   action / reward and the NEXT_STEP reset bookkeeping across rollouts);
3. compute the clipped gradients of the shared A2C loss on the local copy (one compiled
   call), with the entropy weight of the current global step;
4. apply them to the global network through the one shared optimizer, add the rollout's
   steps to the global step and count them in the run's counters, atomically.

A worker whose environment hangs is abandoned by its pool and :meth:`Worker.replacement`
takes its place: the same id and counts, a new network copy and new environments.
"""

from __future__ import annotations

import tensorflow as tf

from tfagents_vtrace.agents import batching
from tfagents_vtrace.agents.a3c.shared import A3CLearner, compute_gradients, finish_update
from tfagents_vtrace.runtime.acting.actor import Actor, ActorSpec


class Worker:
    """One A3C worker (module docstring).

    Args:
      worker_id: distinguishes seeds and the update log.
      learner: the :class:`A3CLearner` holding the global network and shared optimizer.
      spec: the worker's :class:`ActorSpec` (``unroll_length`` = t_max, ``num_envs``).
      network: the worker's local network (same architecture as the global one).
      counters: the run's :class:`~tfagents_vtrace.runtime.rundir.counters.Counters`.
      env_factory: optional ``seed -> VectorEnv`` for the runtime actor.
      network_factory: ``() -> network`` for a replacement's copy.
      actor: the worker's actor (default: a new one from ``spec`` and ``env_factory``).
    """

    def __init__(self, worker_id: int, learner: A3CLearner, spec: ActorSpec, network, counters,
                 env_factory=None, network_factory=None, actor: Actor | None = None):  # fmt: skip
        self.worker_id = int(worker_id)
        self.learner, self.spec, self.network, self.counters = learner, spec, network, counters
        self.network_factory = network_factory
        if actor is None:
            actor = Actor(spec, worker_id, network=network, env_factory=env_factory)
        self.actor = actor
        self.steps = 0
        self.updates = 0
        self._grads = batching.BatchFunction(self._grads_fn)

    def _grads_fn(self, batch: dict, entropy_coef: tf.Tensor):
        return compute_gradients(self.network, self.learner.config, batch, entropy_coef)

    def sync(self) -> int:
        """Copies the global weights into the local network and the acting policy; returns
        the global update count they are at."""
        version, weights = self.learner.shared.read(
            lambda: (self.learner.shared.updates, self.learner.network.get_weights())
        )
        self.actor.set_weights(version, weights)
        if getattr(self.actor.policy, "network", None) is not self.network:
            self.network.set_weights(weights)
        return version

    def iterate(self) -> dict[str, float]:
        """One sync -> rollout -> gradient -> shared update (an abandoned worker's actor
        raises ``ActorAbandoned`` before the update)."""
        version = self.sync()
        batch, info = self.actor.unroll()
        batch = self.learner.observe(batch, self.worker_id)
        steps = self.spec.unroll_length * self.spec.num_envs
        coef = tf.constant(self.learner.entropy_coef(), tf.float32)
        grads, metrics = self._grads(batch, coef)
        shared = self.learner.shared
        with shared.lock:  # the update and its count, as a checkpoint sees them
            lag = shared.updates - version
            out = finish_update(shared, grads, metrics, steps, caller=self.worker_id)
            self.counters.add(steps=steps, updates=1, info=info, lag=lag)
        self.steps += steps
        self.updates += 1
        return out

    def replacement(self) -> Worker:
        """A new worker in this one's place (its environment hung): the same id, learner and
        counts, a new network copy and new environments with new seeds."""
        network = self.network_factory()
        new = Worker(self.worker_id, self.learner, self.spec, network, self.counters,
                     network_factory=self.network_factory,
                     actor=self.actor.successor(network))  # fmt: skip
        new.steps, new.updates = self.steps, self.updates
        return new

    def close(self) -> None:
        self.actor.close()
