"""An asynchronous ACER worker: its own network copy and actor, updates to the global network.

Wang et al. 2016, https://arxiv.org/abs/1611.01224, run asynchronously as A3C's workers
(Mnih et al. 2016, https://arxiv.org/abs/1602.01783). Each iteration (repeated on its own
thread by a :class:`~tfagents_vtrace.runtime.workers.WorkerPool`) is the agent's ACER
iteration (:meth:`~tfagents_vtrace.agents.acer.agent.AcerAgent.iterate`) with this worker's
actor and an ``update`` that syncs the local copy, computes the gradients on it against the
shared average network and applies them globally under the learner's lock.
"""

from __future__ import annotations


class AcerWorker:
    """Worker ``worker`` (1, 2, ...) of ``agent`` (module docstring): it uses the agent's
    ``learner`` (``get_weights``, ``gradients_fn``, ``apply_gradients``, ``lock``),
    ``build_network``, ``actor`` and ``iterate``."""

    def __init__(self, agent, worker: int):
        self.agent, self.learner, self.worker = agent, agent.learner, worker
        self.network = agent.build_network()
        self.actor = agent.actor(worker, self.network)
        self._grads = self.learner.gradients_fn(self.network)

    def _sync(self) -> None:
        with self.learner.lock:
            weights = self.learner.get_weights()
        self.network.set_weights(weights)

    def update(self, batch: dict) -> dict:
        """Sync the local copy, compute gradients on it, apply them globally."""
        self._sync()
        grads, metrics = self._grads(batch)
        return self.learner.apply_gradients(grads, metrics)

    def iterate(self) -> dict:
        self._sync()
        return self.agent.iterate(self.actor, self.worker, self.update)

    def close(self) -> None:
        self.actor.close()
