"""Unroll sources: where an actor-learner's unrolls come from, behind one interface.

IMPALA (Espeholt et al. 2018, https://arxiv.org/abs/1802.01561) decouples acting from
learning: actors step environments with the newest weights they have and ship unrolls. A
source is started with :func:`unroll_source`; ``publish(version, weights)`` hands new
weights to its actors (picked up by version), ``next()`` returns the next ``(unroll, info)``
and ``close()`` stops it. Three kinds:

* actor threads (``num_actors`` >= 1, local backend) and Ray actor processes (``backend=
  "ray"``): :class:`QueueSource`, a bounded queue (``queue_capacity``) that they fill;
* one actor stepped by the learner's thread when ``num_actors`` is 0: :class:`InlineSource`
  (synchronous, no policy lag; its acting time is the learner thread's).

``start(version, weights)`` publishes the first weights, then starts the actors.
"""

from __future__ import annotations

import queue
import threading

import numpy as np

from tfagents_vtrace.runtime.actor import Actor, ActorThread, WeightStore
from tfagents_vtrace.runtime.env_failures import first_error


class QueueSource:
    """Unrolls that actor threads or a Ray actor pool put into a bounded queue."""

    inline = False

    def __init__(self, threads: list, unrolls: queue.Queue, store: WeightStore, stop):
        self.threads, self.unrolls, self.store, self.stop = threads, unrolls, store, stop

    def start(self, version: int, weights: list) -> None:
        self.publish(version, weights)
        for thread in self.threads:
            thread.start()

    def publish(self, version: int, weights: list) -> None:
        self.store.publish(version, weights)

    def next(self) -> tuple[dict, dict]:
        """The next unroll; RuntimeError once every actor failed."""
        while True:
            try:
                return self.unrolls.get(timeout=1.0)
            except queue.Empty:
                errors = [t.error for t in self.threads if t.error is not None]
                if errors and all(not t.is_alive() for t in self.threads):
                    raise first_error(errors, "actors") from None

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            if thread.ident is not None:
                thread.join(timeout=10)


class InlineSource:
    """One actor stepped in the caller's thread with the newest published weights."""

    inline = True

    def __init__(self, actor: Actor):
        self.actor, self.version, self.weights = actor, -1, None

    def start(self, version: int, weights: list) -> None:
        self.publish(version, weights)

    def publish(self, version: int, weights: list) -> None:
        self.version, self.weights = version, weights  # loaded by the next unroll

    def next(self) -> tuple[dict, dict]:
        if self.version > self.actor.weights_version:
            self.actor.set_weights(self.version, self.weights)
        item = None
        while item is None:  # None: the env raised, was recreated, the unroll dropped
            item = self.actor.unroll()
        return item

    def close(self) -> None:
        self.actor.close()


def unroll_source(run, spec, network_factory, env_factory=None):
    """The source ``run`` asks for (module docstring), its actors built from ``spec``;
    ``network_factory()`` gives each actor its network, ``env_factory`` (``(num_envs, seed)
    -> VectorEnv``) replaces ``make_vector_env``."""
    actor_factory = None
    if env_factory is not None:
        actor_factory = lambda seed: env_factory(run.num_envs, seed)  # noqa: E731
    if run.backend == "local" and run.num_actors == 0:
        return InlineSource(Actor(spec, 0, network_factory(), env_factory=actor_factory))
    store, stop = WeightStore(), threading.Event()
    unrolls: queue.Queue = queue.Queue(maxsize=run.queue_capacity)
    if run.backend == "ray":  # one driver thread for all Ray actors, same queue and store
        from tfagents_vtrace.runtime.ray_backend import RayActorPool

        threads = [RayActorPool.from_run(run, spec, store, unrolls, stop, env_factory)]
    else:
        threads = [
            ActorThread(Actor(spec, i, network_factory(), actor_factory), store, unrolls, stop)
            for i in range(run.num_actors)
        ]
    return QueueSource(threads, unrolls, store, stop)


def stack_unrolls(unrolls: list[dict]) -> dict:
    """Concatenates unrolls along B (axis 1 of time-major arrays, axis 0 of the state)."""
    if len(unrolls) == 1:
        return unrolls[0]
    out = {}
    for key, value in unrolls[0].items():
        if key == "state":
            out[key] = tuple(np.concatenate(parts, 0) for parts in zip(*(u[key] for u in unrolls)))
        elif key == "policy":
            out[key] = {k: np.concatenate([u[key][k] for u in unrolls], 1) for k in value}
        else:
            out[key] = np.concatenate([u[key] for u in unrolls], 1)
    return out
