"""A3C on Ray: each worker a Ray actor process, the learner the parameter server.

A3C as universe-starter-agent runs it (``a3c.py`` of
https://github.com/openai/universe-starter-agent, which the meta-RL fork of Wang et al.,
"Learning to reinforcement learn", 2016, https://arxiv.org/abs/1611.05763, builds on) has
every worker in its own process (``/job:worker/task:N``) that pulls the shared weights from a
parameter server, computes gradients on its own rollout and pushes them back (Mnih et al.,
"Asynchronous Methods for Deep Reinforcement Learning", 2016,
https://arxiv.org/abs/1602.01783, Algorithm S3). With ``--backend=ray``:

* each of ``num_workers`` :class:`WorkerHost` Ray actors builds its own network copy and
  vector environment (``num_envs``) from the picklable ``ActorSpec``; a call
  :meth:`WorkerHost.rollout` loads the weights it is given if they are newer than its own
  (by version, as the IMPALA Ray actors do), acts ``t_max`` steps with the runtime's
  :class:`~tfagents_vtrace.runtime.acting.actor.Actor` (LSTM state and NEXT_STEP bookkeeping carry
  over between rollouts), and returns the clipped gradients of the A2C loss (numpy), the
  loss metrics and the rollout's ``info`` (episode statistics, environment restarts, the
  weights version it acted and computed with);
* :class:`RayWorkers`, in the training process, keeps one call in flight per worker. Each
  :meth:`RayWorkers.advance` (the driver's loop) takes the gradients that arrived, applies
  them in arrival order with the :class:`~tfagents_vtrace.agents.a3c.shared.SharedOptimizer`
  (the worker's own optimizer statistics with ``--noshared_optimizer``), counts the steps,
  and sends that worker its next rollout with the new weights (one ``ray.put`` per version
  that leaves). The update lag of the gradients (updates applied between the weights the
  worker used and its own update) is the rows' ``policy_lag``.

Updates happen in the driver's thread, between its checkpoints and evaluations, so a
checkpoint never holds half an update. Rollouts are claimed from the run's
:class:`~tfagents_vtrace.runtime.acting.step_budget.StepBudget` before they are sent, so the run
ends within one rollout of ``total_steps`` as with threads. A rollout whose environment
raised comes back empty (the environment was recreated in the worker; its claim goes back);
a worker process that dies is replaced (each one counted in ``env_restarts``) and its
rollout dropped, its claimed steps given back to the budget; one worker dying more than
``RESTART_LIMIT`` times within ``RESTART_WINDOW_S`` ends the run with
:class:`~tfagents_vtrace.runtime.acting.ray_backend.RayWorkerLost` after a checkpoint (one line,
exit 1). An exception of the worker's code is fatal. The pool's loop, process start-up,
replacement, weights by version and the kill on stop are
:class:`~tfagents_vtrace.runtime.acting.ray_backend.RayWorkerPool`'s (shared with ACER's Ray
workers; its :class:`~tfagents_vtrace.runtime.acting.ray_backend.RayProcesses` with IMPALA's
actors).
"""

from __future__ import annotations

import numpy as np

from tfagents_vtrace.runtime.acting.actor import group_size
from tfagents_vtrace.runtime.acting.ray_backend import NetworkHost, RayWorkerPool, host_env_factory


class WorkerHost(NetworkHost):
    """The body of one A3C worker process (module docstring); arguments as
    :class:`~tfagents_vtrace.runtime.acting.ray_backend.NetworkHost`'s (``config``: the run's
    ``A3CConfig``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        from tfagents_vtrace.agents import batching

        self._grads = batching.BatchFunction(self._grads_fn)

    def _grads_fn(self, batch: dict, entropy_coef):
        from tfagents_vtrace.agents.a3c.shared import compute_gradients

        return compute_gradients(self.network, self.config, batch, entropy_coef)

    def rollout(self, version: int, weights_ref: list, entropy_coef: float):
        """Loads weights ``version`` if newer, acts ``t_max`` steps, returns ``(grads,
        metrics, info)``: numpy gradients in the order of the trainable variables, float
        metrics (``finite`` among them) and the unroll's info; None if the environment
        raised (it was recreated, the rollout dropped)."""
        import tensorflow as tf

        self.load(version, weights_ref)
        item = self.actor.unroll()
        if item is None:
            return None
        batch, info = item
        grads, metrics = self._grads(batch, tf.constant(entropy_coef, tf.float32))
        grads = [np.asarray(tf.convert_to_tensor(g)) for g in grads]
        return grads, {k: float(v) for k, v in metrics.items()}, info


class RayWorkers(RayWorkerPool):
    """The driver's view of the A3C Ray workers (module docstring): a
    :class:`~tfagents_vtrace.runtime.acting.ray_backend.RayWorkerPool` whose calls are rollouts and
    whose results are gradients, applied with the shared optimizer.

    Args:
      spec: the ``ActorSpec`` every worker is built from.
      learner: the :class:`~tfagents_vtrace.agents.a3c.shared.A3CLearner` (global network,
        shared optimizer, entropy schedule).
      counters: the run's counters.
      start, total: the restored and the final environment step.
      env_factory: optional picklable ``(num_envs, seed) -> VectorEnv`` (tests).
      ray_options: ``address``, ``actor_cpus``, ``max_actor_restarts``,
        ``restart_window_s``, ``start_timeout_s``
        (:class:`~tfagents_vtrace.runtime.acting.ray_backend.RayProcesses`).
    """

    host_class = WorkerHost
    what = "A3C Ray worker"

    def __init__(self, spec, learner, counters, start: int, total: int, *, env_factory=None,
                 **ray_options):  # fmt: skip
        steps = spec.unroll_length * spec.num_envs
        super().__init__(learner.config.num_workers, steps, start, total, counters, **ray_options)
        self.spec, self.learner = spec, learner
        self._env_factory = host_env_factory(env_factory, group_size(spec))

    @classmethod
    def from_run(cls, run, spec, learner, counters, start: int, env_factory=None):
        """The workers a ``RunConfig`` asks for (``ray_address``, ``ray_actor_cpus``)."""
        return cls(spec, learner, counters, start, run.total_steps, env_factory=env_factory,
                   address=run.ray_address, actor_cpus=run.ray_actor_cpus)  # fmt: skip

    def host_args(self, actor_id: int) -> tuple:
        return (self.spec, self.learner.config, actor_id, self._env_factory)

    @property
    def version(self) -> int:
        """The weights version: the shared optimizer's update count (``_weights``' store)."""
        return self.learner.shared.updates

    def get(self) -> tuple[int, tuple[list]]:
        """``(version, (weights,))`` of the global network, read together."""
        shared = self.learner.shared
        return shared.read(lambda: (shared.updates, (self.learner.network.get_weights(),)))

    def call(self, worker_id: int):
        version, ref = self._weights(self)
        coef = self.learner.entropy_coef()
        return self.handles[worker_id].rollout.remote(version, ref, coef)

    def apply(self, worker_id: int, item) -> tuple[dict, dict]:
        import tensorflow as tf

        from tfagents_vtrace.agents.a3c.shared import finish_update

        grads, metrics, info = item
        shared, grads = self.learner.shared, [tf.convert_to_tensor(g) for g in grads]
        with shared.lock:  # the update and its count, as a checkpoint sees them
            lag = shared.updates - info["weights_version"]
            out = finish_update(shared, grads, metrics, self.steps, caller=worker_id)
            self.counters.add(steps=self.steps, updates=1, info=info, lag=lag)
        return out, info
