"""An asynchronous ACER worker: its own network copy and actor, updates to the global network.

Wang et al. 2016, https://arxiv.org/abs/1611.01224, run asynchronously as A3C's workers
(Mnih et al. 2016, https://arxiv.org/abs/1602.01783). Each iteration (repeated on its own
thread by a :class:`~tfagents_vtrace.runtime.acting.workers.WorkerPool`) is the agent's ACER
iteration (:meth:`~tfagents_vtrace.agents.acer.agent.AcerAgent.iterate`) with this worker's
actor and an ``update`` that computes the gradients on the local copy against the shared
average network and applies them globally under the learner's lock.

The local copy is synced before acting and before each replay update. The on-policy
update's gradient is taken on the weights that acted, unsynced, as chainerrl's ACER (its
``sync_parameters`` follows each update), so that update is exactly on-policy (rho = 1);
with ``on_policy_importance_weights`` the copy is re-synced first and the unroll is
importance-weighted against the stored behaviour policy instead.

A worker whose environment hangs is abandoned by its pool and :meth:`AcerWorker.replacement`
takes its place: the same stream, a new network copy and new environments with new seeds.
"""

from __future__ import annotations


class AcerWorker:
    """Worker ``worker`` (1, 2, ...) of ``agent`` (module docstring): it uses the agent's
    ``learner`` (``get_weights``, ``gradients_fn``, ``apply_gradients``, ``lock``),
    ``build_network``, ``actor`` and ``iterate``."""

    def __init__(self, agent, worker: int, predecessor: AcerWorker | None = None):
        self.agent, self.learner, self.worker = agent, agent.learner, worker
        self.network = agent.build_network()
        if predecessor is None:
            self.actor = agent.actor(worker, self.network)
        else:
            self.actor = predecessor.actor.successor(self.network)
        self._grads = self.learner.gradients_fn(self.network)

    def replacement(self) -> AcerWorker:
        """A new worker in this one's place (its environment hung): the same stream, a new
        network copy and new environments with new seeds. The stream's unfinished episodes
        are dropped from the replay (the new environments start new ones)."""
        self.agent.extra_state.discard_open(self.worker)
        return AcerWorker(self.agent, self.worker, predecessor=self)

    def _sync(self) -> None:
        with self.learner.lock:
            weights = self.learner.get_weights()
        self.network.set_weights(weights)

    def update(self, batch: dict, on_policy: bool = False) -> dict:
        """Compute gradients on the local copy (synced first unless this is the exact
        on-policy update, see the module docstring) and apply them globally."""
        if not on_policy or self.learner.config.on_policy_importance_weights:
            self._sync()
        grads, metrics = self._grads(batch, on_policy)
        return self.learner.apply_gradients(grads, metrics)

    def iterate(self) -> dict:
        self._sync()
        return self.agent.iterate(self.actor, self.worker, self.update)

    def close(self) -> None:
        self.actor.close()
