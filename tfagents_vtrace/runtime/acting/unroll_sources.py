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

With ``ship_frames_once`` (by default: a Ray cluster's actors) the actors of a queue ship a
stacked-frame observation with each frame once (:mod:`~tfagents_vtrace.runtime.acting.
frames`); the Ray pool's thread stacks it again as the unroll arrives, and
:meth:`QueueSource.next` an actor thread's as it leaves the queue, so the learner, the replay
and the statistics take the actor's plain layout.

Hung environments (``env_step_timeout_s``, :class:`~tfagents_vtrace.envs.failures.
Watchdog`): an actor thread whose environment call exceeds the limit is abandoned (a daemon
thread that delivers nothing more and ends if the call ever returns) and replaced, on the
learner's next :meth:`~QueueSource.next`, by a new actor with the same id, new environments
and new seeds (counted in ``env_restarts``), with a warning. The inline actor acts in the
learner's thread, where nothing can replace it: a hung call stops the run instead
(:func:`~tfagents_vtrace.runtime.rundir.stop_signals.stop_inline`).

Every ``next()`` that waits for actors returns to the learner's loop within
:data:`WAIT_S` seconds of a stop request (:mod:`~tfagents_vtrace.runtime.rundir.stop_signals`,
raised there as the driver's ``check_stop`` does), so a stop is never stuck behind actors that
deliver nothing.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import queue
import threading
import time

import numpy as np
import tensorflow as tf

from tfagents_vtrace.envs.failures import (
    first_error,
    stuck,
    timeout_message,
)
from tfagents_vtrace.runtime.acting.actor import Actor, ActorThread, WeightStore, group_size
from tfagents_vtrace.runtime.acting.frames import unpack_unroll
from tfagents_vtrace.runtime.rundir import stop_signals

log = logging.getLogger(__name__)

WAIT_S = 0.25
"""Seconds between two looks at the actors' errors and at a stop request while waiting."""
CLOSE_S = 5.0
"""Seconds :meth:`QueueSource.close` waits for all its actor threads together."""


def check_stop_while_waiting(stop: threading.Event) -> None:
    """Raises the driver's stop (``KeyboardInterrupt``) when one was requested, or
    RuntimeError when the source was closed, from a wait for unrolls."""
    if stop_signals.stop_requested():
        stop_signals.check_stop()
    if stop.is_set():
        raise RuntimeError("the unroll source was closed")


class QueueSource:
    """Unrolls that actor threads or a Ray actor pool put into a bounded queue.

    ``replace(thread) -> thread`` (optional) makes the replacement of an abandoned actor
    thread (module docstring); without it a hung actor is only abandoned.
    """

    inline = False

    def __init__(self, threads: list, unrolls: queue.Queue, store: WeightStore, stop,
                 replace=None):  # fmt: skip
        self.threads, self.unrolls, self.store, self.stop = threads, unrolls, store, stop
        self.replace = replace
        self._lost: list = []  # threads the watchdog abandoned, replaced by next()

    def start(self, version: int, weights: list) -> None:
        self.publish(version, weights)
        for thread in self.threads:
            self._watch(thread)
            thread.start()

    def _watch(self, thread) -> None:
        actor = getattr(thread, "actor", None)  # a Ray pool watches its own processes
        if actor is not None:
            actor.watch(lambda elapsed: self._timed_out(thread, elapsed))

    def _timed_out(self, thread, elapsed: float) -> None:
        """The watchdog's callback: abandons ``thread``, to be replaced by :meth:`next`."""
        actor = thread.actor
        log.warning(
            "%s; abandoning its thread and starting a new actor with new environments",
            timeout_message(actor.what, elapsed, actor.timeout_s),
        )
        thread.abandon()
        actor.unwatch()
        self._lost.append(thread)

    def _replace_lost(self) -> None:
        """Starts the replacements of the abandoned threads (in the learner's thread)."""
        while self._lost:
            old = self._lost.pop(0)
            if self.replace is None or self.stop.is_set():
                continue
            new = self.replace(old)
            self.threads[self.threads.index(old)] = new
            self._watch(new)
            new.start()

    def publish(self, version: int, weights: list) -> None:
        self.store.publish(version, weights)

    def next(self) -> tuple[dict, dict]:
        """The next unroll; RuntimeError once every actor failed."""
        return self._take(self.unrolls)

    def _take(self, source: queue.Queue, check_all: bool = True) -> tuple[dict, dict]:
        while True:
            if self._lost:
                self._replace_lost()
            try:
                unroll, info = source.get(timeout=WAIT_S)
            except queue.Empty:
                check_stop_while_waiting(self.stop)
                errors = [t.error for t in self.threads if t.error is not None]
                if errors and (not check_all or all(not t.is_alive() for t in self.threads)):
                    raise first_error(errors, "actors") from None
                continue
            return unpack_unroll(unroll), info

    def close(self) -> None:
        """Stops the actors; waits :data:`CLOSE_S` seconds at most for all of them, and not
        for one stuck in an environment call (a daemon thread, left behind)."""
        self.stop.set()
        deadline = time.monotonic() + CLOSE_S
        for thread in self.threads:
            actor = getattr(thread, "actor", None)
            if actor is not None:
                actor.unwatch()
            if thread.ident is None or getattr(thread, "abandoned", False) or stuck(actor):
                continue
            thread.join(timeout=max(deadline - time.monotonic(), 0.0))


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
        if self.deliver(self.actor.unroll()):
            self.made += 1


class LockstepSource(QueueSource):
    """The deterministic actor threads (:class:`LockstepActorThread`): each fills a queue
    of its own and :meth:`next` takes them in turn, so every update learns from the same
    unrolls, made with the same weights, whatever the threads' timing. A replaced thread
    continues its predecessor's place in the order."""

    def __init__(self, threads: list, queues: list, weights: VersionedWeights, stop,
                 replace=None):  # fmt: skip
        super().__init__(threads, None, None, stop, replace)
        self.queues, self.weights, self.taken = queues, weights, 0

    def publish(self, version: int, weights: list) -> None:
        self.weights.publish(version, weights)

    def next(self) -> tuple[dict, dict]:
        item = self._take(self.queues[self.taken % len(self.queues)], check_all=False)
        self.taken += 1  # one missing actor stops the fixed order: any error ends the run
        return item


class InlineSource:
    """One actor stepped in the caller's thread with the newest published weights; a hung
    environment call stops the run (module docstring)."""

    inline = True

    def __init__(self, actor: Actor):
        self.actor, self.version, self.weights = actor, -1, None

    def start(self, version: int, weights: list) -> None:
        self.actor.watch(None)
        self.publish(version, weights)

    def publish(self, version: int, weights: list) -> None:
        self.version, self.weights = version, weights  # loaded by the next unroll

    def next(self) -> tuple[dict, dict]:
        if self.version > self.actor.weights_version:
            self.actor.set_weights(self.version, self.weights)
        return self.actor.unroll()

    def close(self) -> None:
        self.actor.close()


def acting_spec(run, spec):
    """``spec`` with the run's ``env_step_timeout_s`` and whether its actors ship each frame
    once (``RunConfig.ship_frames_once``; by default when unrolls may cross a network)."""
    timeout = getattr(run, "env_step_timeout_s", spec.env_step_timeout_s)
    inline = run.backend == "local" and run.num_actors == 0
    ship = getattr(run, "ship_frames_once", None)
    if ship is None:  # unrolls that may cross a network (RunConfig.ship_frames_once)
        ship = run.backend == "ray" and bool(getattr(run, "ray_address", None))
    ship = ship and not inline
    return dataclasses.replace(spec, env_step_timeout_s=timeout, ship_frames_once=ship)


class SplitQueue:
    """A bounded queue of ``{group: (unroll, info)}`` items (a Ray pool's actors step whole
    games of several groups), taken apart for each group's learner: :meth:`view` is the
    ``get(timeout=)`` of one group's share. The groups' parts have no bound of their own:
    the groups' learners take a batch's worth each in turn, so what waits in them stays
    within a batch."""

    def __init__(self, groups, maxsize: int):
        self.joint: queue.Queue = queue.Queue(maxsize=maxsize)
        self._parts = {name: collections.deque() for name in groups}
        self._lock = threading.Lock()

    def put(self, item: dict, block: bool = True, timeout: float | None = None) -> None:
        self.joint.put(item, block, timeout)

    def get(self, group: str, timeout: float | None = None) -> tuple[dict, dict]:
        """Group ``group``'s next ``(unroll, info)``; ``queue.Empty`` after ``timeout``."""
        with self._lock:
            if self._parts[group]:
                return self._parts[group].popleft()
        item = self.joint.get(timeout=timeout)
        with self._lock:
            for name, part in item.items():
                self._parts[name].append(part)
            return self._parts[group].popleft()

    def view(self, group: str) -> _GroupView:
        return _GroupView(self, group)


@dataclasses.dataclass(frozen=True)
class _GroupView:
    split: SplitQueue
    group: str

    def get(self, timeout: float | None = None) -> tuple[dict, dict]:
        return self.split.get(self.group, timeout)


class GroupSource(QueueSource):
    """Group ``group``'s unrolls from a pool (its one thread) whose actors step whole games
    of several groups into ``split`` (:class:`SplitQueue`); ``store`` holds the group's
    weights. Whoever made the pool starts it once every group's source has published its
    first weights."""

    def __init__(self, pool, split: SplitQueue, group: str, store: WeightStore, stop):
        super().__init__([pool], split.view(group), store, stop)

    def start(self, version: int, weights: list) -> None:
        self.publish(version, weights)


def unroll_source(run, spec, network_factory, env_factory=None, start: int = 0, counters=None,
                  snapshots=None):  # fmt: skip
    """The source ``run`` asks for (module docstring), its actors built from ``spec`` (with
    the run's ``env_step_timeout_s``); ``network_factory()`` gives each actor its network,
    ``env_factory`` (``(num_envs, seed) -> VectorEnv``) replaces ``make_vector_env``;
    ``start`` is the update count the run starts from (the first weights' version);
    ``counters`` (optional) count a replaced Ray actor's restart at once; ``snapshots``, a
    self-play run's ``(SelfPlaySpec, SnapshotPool)``, go to Ray actors' processes (threads
    play the pool of this process: :mod:`~tfagents_vtrace.runtime.self_play`)."""
    inline = run.backend == "local" and run.num_actors == 0
    spec = acting_spec(run, spec)
    actor_factory = None
    if env_factory is not None:
        actor_factory = lambda seed: env_factory(group_size(spec), seed)  # noqa: E731

    def new_actor(i: int) -> Actor:
        return Actor(spec, i, network_factory(), actor_factory)

    if inline:
        return InlineSource(new_actor(0))
    stop = threading.Event()
    if run.deterministic:  # local threads (RunConfig refuses Ray)
        weights = VersionedWeights(run.deterministic_lag)
        queues = [queue.Queue(maxsize=run.queue_capacity) for _ in range(run.num_actors)]

        def lockstep(actor: Actor, made: int = 0) -> LockstepActorThread:
            i = actor.actor_id
            thread = LockstepActorThread(actor, weights, queues[i], stop, run.num_actors,
                                         run.batch_unrolls, start)  # fmt: skip
            thread.made = made
            return thread

        def replace_lockstep(old: LockstepActorThread) -> LockstepActorThread:
            return lockstep(old.actor.successor(network_factory()), old.made)

        threads = [lockstep(new_actor(i)) for i in range(run.num_actors)]
        return LockstepSource(threads, queues, weights, stop, replace_lockstep)
    store = WeightStore()
    unrolls: queue.Queue = queue.Queue(maxsize=run.queue_capacity)
    if run.backend == "ray":  # one driver thread for all Ray actors, same queue and store
        from tfagents_vtrace.runtime.acting.ray_backend import RayActorPool

        threads = [RayActorPool.from_run(run, spec, store, unrolls, stop, env_factory, counters,
                                         snapshots)]  # fmt: skip
        return QueueSource(threads, unrolls, store, stop)

    def replace(old: ActorThread) -> ActorThread:
        return ActorThread(old.actor.successor(network_factory()), store, unrolls, stop)

    threads = [ActorThread(new_actor(i), store, unrolls, stop) for i in range(run.num_actors)]
    return QueueSource(threads, unrolls, store, stop, replace)


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
