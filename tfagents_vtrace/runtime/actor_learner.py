"""The actor-learner agent: actors -> bounded queue -> one compiled learner update (IMPALA, A2C).

IMPALA's decoupled acting and learning (Espeholt et al. 2018,
https://arxiv.org/abs/1802.01561) as a :class:`~tfagents_vtrace.runtime.driver.RunAgent`:
actor threads (or Ray actors, or one actor stepped inline when ``num_actors`` is 0) step
vector envs with the latest published weights (picked up by version); each
:meth:`ActorLearner.advance` concatenates ``batch_unrolls`` unrolls along B (with replayed
ones mixed in by IMPALA's ``replay_ratio``, :class:`~tfagents_vtrace.replay.unrolls.
UnrollReplay`), runs the learner's compiled train step and publishes the new weights.
Environment failures are absorbed by the actors (``env_restarts``).

Every metrics row also says where the wall time went since the previous row (``time_*``
fractions, see :func:`time_fractions`) and names the ``bottleneck`` (:func:`bottleneck`).
"""

from __future__ import annotations

import contextlib
import math
import queue
import threading
import time

import numpy as np

from tfagents_vtrace.replay.unrolls import UnrollReplay, replayed_per_batch
from tfagents_vtrace.runtime import strategy as strategy_lib
from tfagents_vtrace.runtime.actor import Actor, ActorSpec, ActorThread, WeightStore, build_network
from tfagents_vtrace.runtime.policies import NumpyMLPPolicy, make_policy

ACTOR_TIMES = ("env", "inference", "weights")
"""Actor-side parts of a row's time (``info["<part>_time"]`` of each unroll)."""
LEARNER_TIMES = ("wait", "learner", "publish", "eval")
"""Learner-thread parts: waiting for unrolls, stacking + ``train_step``, ``get_weights`` +
publishing, evaluation."""
WAIT_BOUND = 0.1
"""A learner thread waiting for unrolls less than this share of its time is the bottleneck."""


def time_fractions(actor: dict, learner: dict, interval: float, actor_threads: int) -> dict:
    """The ``time_<part>`` fields of a metrics row, from seconds spent per part.

    Learner-thread parts (:data:`LEARNER_TIMES`) are shares of that thread's wall time, the
    row's ``interval``. Actor parts (:data:`ACTOR_TIMES`, summed over the unrolls the
    learner consumed in the interval) are shares of all actors' wall time, ``interval *
    actor_threads`` (threads or Ray actors); an inline actor (``actor_threads`` 0) runs in
    the learner thread, so its parts are shares of that thread's time too (and ``wait``
    excludes them: the seven parts sum to at most 1). Each is clipped to [0, 1] (an unroll
    may have started in the previous interval) and rounded to 3 digits.
    """
    interval = max(interval, 1e-9)
    actor_wall = interval * max(actor_threads, 1)
    row = {f"time_{part}": _share(seconds, actor_wall) for part, seconds in actor.items()}
    row.update({f"time_{part}": _share(seconds, interval) for part, seconds in learner.items()})
    return row


def _share(seconds: float, wall: float) -> float:
    return round(min(max(seconds / wall, 0.0), 1.0), 3)


def bottleneck(fractions: dict, inline: bool) -> str:
    """Names the part of a row's ``time_<part>`` ``fractions`` that limits training speed.

    Inline actor (``inline``: one thread acts and learns in turn): the largest part other
    than ``wait``. Actor threads or Ray actors: a learner thread that waits for unrolls
    less than :data:`WAIT_BOUND` of its time is always busy, so the largest of its busy
    parts (``learner``, ``publish``, ``eval``) limits; otherwise the learner is starved and
    the actors limit: the largest actor part (``env``, ``inference`` or ``weights``).
    """
    if inline:
        parts = ACTOR_TIMES + LEARNER_TIMES[1:]
    elif fractions["time_wait"] < WAIT_BOUND:
        parts = LEARNER_TIMES[1:]
    else:
        parts = ACTOR_TIMES
    return max(parts, key=lambda part: fractions[f"time_{part}"])


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


class ActorLearner:
    """The run agent of a registry ``Learner`` fed by actors (module docstring).

    Args:
      run: the :class:`~tfagents_vtrace.runtime.config.RunConfig`.
      agent: the agent module (its ``Learner``).
      agent_config, network_config: the agent's ``Config`` and the ``NetworkConfig``.
      strategy: ``tf.distribute`` strategy of the learner (default strategy when None).
      env_factory: optional ``(num_envs, seed) -> VectorEnv`` of the actors.
    """

    extra_state = None  # recent unrolls are not archived

    def __init__(self, run, agent, agent_config, network_config, strategy=None, env_factory=None):
        if run.backend == "ray":  # ImportError without Ray, ValueError for num_actors=0
            from tfagents_vtrace.runtime import ray_backend

            ray_backend.check_run_config(run)
        self.run_config, self.network_config, self.env_factory = run, network_config, env_factory
        self.seed_offset = strategy_lib.worker_role(strategy).seed_offset
        net_factory = lambda: build_network(network_config, run.env_id)
        updates = math.ceil(run.total_steps / run.steps_per_update)
        self.learner = agent.Learner(agent_config, net_factory, strategy, updates, seed=run.seed)
        self.replay = UnrollReplay(
            getattr(agent_config, "replay_unrolls", 0),
            replayed_per_batch(getattr(agent_config, "replay_ratio", 0.0), run.batch_unrolls),
            seed=run.seed + 104729,
        )
        self.max_nonfinite_updates = getattr(agent_config, "max_nonfinite_updates", 10)
        self.lock = contextlib.nullcontext()
        self.threads, self.inline, self.stop = [], None, threading.Event()

    def checkpoint_items(self) -> dict:
        return {**self.learner.checkpoint_items(), "network": self.learner.network}

    def _acting_network(self):
        """The learner's network when the numpy policy will act (it only copies weights out
        of it), else a fresh copy (TF policies own one)."""
        if self.run_config.policy_impl != "tf" and NumpyMLPPolicy.supports(self.learner.network):
            return self.learner.network
        return build_network(self.network_config, self.run_config.env_id)

    def start(self, counters) -> None:
        run, factory = self.run_config, self.env_factory
        self.counters, actor_factory = counters, None
        if factory is not None:
            actor_factory = lambda seed: factory(run.num_envs, seed)
        spec = ActorSpec(
            run.env_id, self.network_config, run.num_envs, run.unroll_length,
            seed=run.seed + 7919 * counters.updates + self.seed_offset,
            env_mode=run.env_mode, policy_impl=run.policy_impl,
        )  # fmt: skip
        self.store, self.queue = WeightStore(), queue.Queue(maxsize=run.queue_capacity)
        self.store.publish(counters.updates, self.learner.get_weights())
        if run.backend == "ray":  # one driver thread for all Ray actors, same queue and store
            from tfagents_vtrace.runtime.ray_backend import RayActorPool

            pool = RayActorPool.from_run(run, spec, self.store, self.queue, self.stop, factory)
            self.threads = [pool]
        else:
            self.threads = [
                ActorThread(Actor(spec, i, self._acting_network(), actor_factory), self.store,
                            self.queue, self.stop)
                for i in range(run.num_actors)
            ]  # fmt: skip
        if not self.threads:  # num_actors=0: one actor stepped by this thread (no lag)
            self.inline = Actor(spec, 0, self._acting_network(), env_factory=actor_factory)
        self._actor_time = dict.fromkeys(ACTOR_TIMES, 0.0)
        self._busy = dict.fromkeys(LEARNER_TIMES[:-1], 0.0)
        for thread in self.threads:
            thread.start()

    def advance(self) -> dict:
        """One update on ``batch_unrolls`` fresh unrolls (and replayed ones), published."""
        run, counters = self.run_config, self.counters
        start = time.perf_counter()
        items = [self._next_unroll() for _ in range(run.batch_unrolls)]
        received = time.perf_counter()
        for _, info in items:
            counters.add(info=info, lag=counters.updates - info["weights_version"])
            for part in ACTOR_TIMES:
                self._actor_time[part] += info[f"{part}_time"]
        metrics = self.learner.train_step(stack_unrolls(self.replay.mix([u for u, _ in items])))
        trained = time.perf_counter()
        counters.add(steps=run.steps_per_update, updates=1)
        self.store.publish(counters.updates, self.learner.get_weights())
        # The learner thread's seconds; the inline actor's own time (in its infos) is not waiting.
        acting = 0.0
        if self.inline is not None:
            acting = sum(info[f"{part}_time"] for _, info in items for part in ACTOR_TIMES)
        self._busy["wait"] += max(received - start - acting, 0.0)
        self._busy["learner"] += trained - received
        self._busy["publish"] += time.perf_counter() - trained
        return metrics

    def _next_unroll(self):
        if self.inline is not None:
            if self.store.version > self.inline.weights_version:
                self.inline.set_weights(*self.store.get())
            item = None
            while item is None:  # None: the env raised, was recreated, the unroll dropped
                item = self.inline.unroll()
            return item
        while True:
            try:
                return self.queue.get(timeout=1.0)
            except queue.Empty:
                errors = [t.error for t in self.threads if t.error is not None]
                if errors and all(not t.is_alive() for t in self.threads):
                    raise RuntimeError(f"all actors failed; first error: {errors[0]!r}") from None

    def get_weights(self) -> list:
        return self.learner.get_weights()

    def set_weights(self, weights: list) -> None:
        self.learner.network.set_weights(weights)

    def evaluation_policy(self):
        return make_policy(self._acting_network(), self.run_config.policy_impl, greedy=True)

    def export(self, path: str) -> None:
        from tfagents_vtrace.export import export_policy

        export_policy(self.learner.network, path, overwrite=True)

    def row_fields(self, times: dict | None) -> dict:
        """The row's ``time_*`` fractions and ``bottleneck``; restarts the accumulation."""
        if times is None:
            return {}
        threads = 0 if self.inline is not None else self.run_config.num_actors
        busy = {**self._busy, "eval": times["eval"]}
        fractions = time_fractions(self._actor_time, busy, times["interval"], threads)
        self._actor_time = dict.fromkeys(ACTOR_TIMES, 0.0)
        self._busy = dict.fromkeys(LEARNER_TIMES[:-1], 0.0)
        return {**fractions, "bottleneck": bottleneck(fractions, self.inline is not None)}

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=10)
        if self.inline is not None:
            self.inline.close()
