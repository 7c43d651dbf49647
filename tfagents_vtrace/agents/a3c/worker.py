"""An A3C worker thread: its own environment(s), a local network copy, t_max-step rollouts.

Mnih et al., "Asynchronous Methods for Deep Reinforcement Learning", 2016,
https://arxiv.org/abs/1602.01783 (Algorithm S3). Each iteration:

1. copy the global weights into the local network (under the shared lock);
2. act ``t_max`` steps on the worker's environments with the runtime's
   :class:`~tfagents_vtrace.runtime.actor.Actor` (which carries the LSTM state, previous
   action / reward and the NEXT_STEP reset bookkeeping across rollouts);
3. compute the clipped gradients of the shared A2C loss on the local copy (one compiled
   call), with the entropy weight of the current global step;
4. apply them to the global network through the one shared optimizer and add the
   rollout's steps to the global step counter.
"""

from __future__ import annotations

import collections
import logging
import threading

import tensorflow as tf

from tfagents_vtrace.agents import batching
from tfagents_vtrace.agents.a3c.shared import A3CLearner, compute_gradients, finish_update
from tfagents_vtrace.runtime.actor import Actor, ActorSpec
from tfagents_vtrace.runtime.step_budget import StepBudget

log = logging.getLogger(__name__)


class WorkerStats:
    """Thread-safe episode statistics and last metrics shared by the workers."""

    def __init__(self, window: int = 100):
        self.lock = threading.Lock()
        self.returns: collections.deque = collections.deque(maxlen=window)
        self.lengths: collections.deque = collections.deque(maxlen=window)
        self.episodes = 0
        self.metrics: dict[str, float] = {}
        self.env_restarts: dict[int, int] = {}

    def add(self, info: dict, metrics: dict[str, float]) -> None:
        with self.lock:
            self.returns.extend(info["episode_returns"].tolist())
            self.lengths.extend(info["episode_lengths"].tolist())
            self.episodes += len(info["episode_returns"])
            self.env_restarts[info["actor_id"]] = info["env_restarts"]
            self.metrics = metrics


class Worker(threading.Thread):
    """One A3C worker (module docstring). Stops when ``stop`` is set or ``budget`` refuses its
    next rollout; an unexpected exception is kept in ``error``.

    Args:
      worker_id: distinguishes seeds and the update log.
      learner: the :class:`A3CLearner` holding the global network and shared optimizer.
      spec: the worker's :class:`ActorSpec` (``unroll_length`` = t_max, ``num_envs``).
      network: the worker's local network (same architecture as the global one).
      stats: shared :class:`WorkerStats`.
      stop: event that ends every worker.
      budget: the shared :class:`StepBudget`; each rollout's ``t_max * num_envs`` steps are
        claimed before it starts and given back if it is dropped (None: run until ``stop``).
      env_factory: optional ``seed -> VectorEnv`` for the runtime actor.
    """

    def __init__(
        self,
        worker_id: int,
        learner: A3CLearner,
        spec: ActorSpec,
        network,
        stats: WorkerStats,
        stop: threading.Event,
        budget: StepBudget | None = None,
        env_factory=None,
    ):
        super().__init__(name=f"a3c-worker-{worker_id}", daemon=True)
        self.worker_id = int(worker_id)
        self.learner, self.spec, self.network = learner, spec, network
        self.stats, self.stop, self.budget = stats, stop, budget
        self.actor = Actor(spec, worker_id, network=network, env_factory=env_factory)
        self.steps = 0
        self.updates = 0
        self.error: BaseException | None = None
        self._grads = batching.BatchFunction(self._grads_fn)

    def _grads_fn(self, batch: dict, entropy_coef: tf.Tensor):
        return compute_gradients(self.network, self.learner.config, batch, entropy_coef)

    def sync(self) -> None:
        """Copies the global weights into the local network and the acting policy."""
        weights = self.learner.get_weights()
        self.actor.set_weights(self.learner.shared.updates, weights)
        if getattr(self.actor.policy, "network", None) is not self.network:
            self.network.set_weights(weights)

    def run_once(self) -> dict[str, float] | None:
        """One sync -> rollout -> gradient -> shared update; None if the env failed."""
        self.sync()
        item = self.actor.unroll()
        if item is None:
            return None
        batch, info = item
        steps = self.spec.unroll_length * self.spec.num_envs
        coef = tf.constant(self.learner.entropy_coef(), tf.float32)
        grads, metrics = self._grads(batch, coef)
        out = finish_update(self.learner.shared, grads, metrics, steps, caller=self.worker_id)
        self.steps += steps
        self.updates += 1
        self.stats.add(info, out)
        return out

    def run(self) -> None:
        rollout = self.spec.unroll_length * self.spec.num_envs
        try:
            while not self.stop.is_set():
                if self.budget is not None and not self.budget.claim(rollout):
                    break
                try:
                    counted = self.run_once() is not None
                except BaseException:
                    counted = False
                    raise
                finally:
                    if self.budget is not None and not counted:  # the rollout was dropped
                        self.budget.release(rollout)
        except BaseException as error:  # noqa: BLE001 - reported by the training loop
            self.error = error
            log.exception("A3C worker %d failed", self.worker_id)
        finally:
            try:
                self.actor.close()
            except Exception:  # noqa: BLE001
                pass
