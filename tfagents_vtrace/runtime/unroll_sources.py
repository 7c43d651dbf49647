"""Unroll sources: where an actor-learner's unrolls come from, behind one interface.

IMPALA (Espeholt et al. 2018, https://arxiv.org/abs/1802.01561) decouples acting from
learning: actors step environments with the newest weights they have and ship unrolls. A
source is started with :func:`unroll_source`; ``publish(version, weights)`` hands new
weights to its actors (picked up by version), ``next()`` returns the next ``(unroll, info)``
and ``close()`` stops it. Three kinds:

* actor threads (``num_actors`` >= 1, local backend) and Ray actor processes (``backend=
  "ray"``): :class:`QueueSource`, a bounded queue (``queue_capacity``) that they fill;
* one actor stepped by the learner's thread when ``num_actors`` is 0: :class:`InlineSource`
  (synchronous, no policy lag; its acting time is the learner thread's);
* with ``deterministic``, actor threads in a fixed pipeline: :class:`LockstepSource` (each
  unroll acts with the weights exactly ``deterministic_lag`` updates old and the learner
  takes the actors' unrolls in turn, so timing changes nothing).

``start(version, weights)`` publishes the first weights, then starts the actors.
"""

from __future__ import annotations

import queue
import threading

import numpy as np
import tensorflow as tf

from tfagents_vtrace.runtime.actor import Actor, ActorThread, WeightStore, put_until_stopped
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


class VersionedWeights:
    """Every published ``(version, weights)`` still needed, for actors that must act with one
    exact version (the lockstep pipeline); ``wait_for`` blocks until it is published."""

    def __init__(self, lag: int):
        self.lag, self._weights, self._cond = int(lag), {}, threading.Condition()

    def publish(self, version: int, weights: list) -> None:
        with self._cond:
            self._weights[int(version)] = weights
            for old in [v for v in self._weights if v < version - self.lag]:
                del self._weights[old]  # the learner is past every update that acts with it
            self._cond.notify_all()

    def wait_for(self, version: int, stop: threading.Event) -> list | None:
        """The weights of ``version``; None if ``stop`` is set first."""
        with self._cond:
            while version not in self._weights:
                if stop.is_set():
                    return None
                self._cond.wait(timeout=0.1)
            return self._weights[version]


class LockstepActorThread(ActorThread):
    """An actor thread of the deterministic pipeline: its ``m``-th unroll is the
    ``g = m * num_actors + actor_id``-th the learner takes, for update ``n = start + g //
    batch_unrolls``, and acts with the weights of version ``max(n - lag, start)`` exactly."""

    def __init__(self, actor, weights: VersionedWeights, out, stop, num_actors, batch, start):
        super().__init__(actor, None, out, stop)
        self.weights, self.num_actors, self.batch, self.start_version = (
            weights, num_actors, batch, start,
        )  # fmt: skip
        self.made = 0

    def step(self) -> None:
        index = self.made * self.num_actors + self.actor.actor_id
        update = self.start_version + index // self.batch
        version = max(update - self.weights.lag, self.start_version)
        if self.actor.weights_version != version:
            weights = self.weights.wait_for(version, self.stop)
            if weights is None:
                return
            self.actor.set_weights(version, weights)
        item = self.actor.unroll()
        if item is not None and put_until_stopped(self.out, item, self.stop):
            self.made += 1


class LockstepSource(QueueSource):
    """The deterministic actor threads (:class:`LockstepActorThread`): each fills a queue
    of its own and :meth:`next` takes them in turn, so every update learns from the same
    unrolls, made with the same weights, whatever the threads' timing."""

    def __init__(self, threads: list, queues: list, weights: VersionedWeights, stop):
        super().__init__(threads, None, None, stop)
        self.queues, self.weights, self.taken = queues, weights, 0

    def publish(self, version: int, weights: list) -> None:
        self.weights.publish(version, weights)

    def next(self) -> tuple[dict, dict]:
        source = self.queues[self.taken % len(self.queues)]
        while True:
            try:
                item = source.get(timeout=1.0)
                self.taken += 1
                return item
            except queue.Empty:
                errors = [t.error for t in self.threads if t.error is not None]
                if errors:  # one missing actor stops the fixed order
                    raise first_error(errors, "actors") from None


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


def unroll_source(run, spec, network_factory, env_factory=None, start: int = 0, counters=None):
    """The source ``run`` asks for (module docstring), its actors built from ``spec``;
    ``network_factory()`` gives each actor its network, ``env_factory`` (``(num_envs, seed)
    -> VectorEnv``) replaces ``make_vector_env``; ``start`` is the update count the run
    starts from (the first weights' version); ``counters`` (optional) count a replaced Ray
    actor's restart at once."""
    actor_factory = None
    if env_factory is not None:
        actor_factory = lambda seed: env_factory(run.num_envs, seed)  # noqa: E731
    if run.backend == "local" and run.num_actors == 0:
        return InlineSource(Actor(spec, 0, network_factory(), env_factory=actor_factory))
    stop = threading.Event()
    if run.deterministic:  # local threads (RunConfig refuses Ray)
        weights = VersionedWeights(run.deterministic_lag)
        queues = [queue.Queue(maxsize=run.queue_capacity) for _ in range(run.num_actors)]
        threads = [
            LockstepActorThread(Actor(spec, i, network_factory(), actor_factory), weights,
                                queues[i], stop, run.num_actors, run.batch_unrolls, start)
            for i in range(run.num_actors)
        ]  # fmt: skip
        return LockstepSource(threads, queues, weights, stop)
    store = WeightStore()
    unrolls: queue.Queue = queue.Queue(maxsize=run.queue_capacity)
    if run.backend == "ray":  # one driver thread for all Ray actors, same queue and store
        from tfagents_vtrace.runtime.ray_backend import RayActorPool

        threads = [RayActorPool.from_run(run, spec, store, unrolls, stop, env_factory, counters)]
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
        elif isinstance(value, np.ndarray):
            out[key] = np.concatenate([u[key] for u in unrolls], 1)
        else:  # a Dict / Tuple observation: leaf by leaf
            concat = lambda *leaves: np.concatenate(leaves, 1)  # noqa: E731
            out[key] = tf.nest.map_structure(concat, *(u[key] for u in unrolls))
    return out
