"""The local training loop: actor threads -> bounded queue -> one compiled learner update.

IMPALA's decoupled acting and learning (Espeholt et al. 2018,
https://arxiv.org/abs/1802.01561) on one machine: actor threads step vector envs with the
latest published weights (picked up by version), the learner concatenates ``batch_unrolls``
unrolls along B and runs its compiled train step, then publishes the new weights. The loop
also owns the run directory (config, checkpoints, metrics, evaluation, export) and failure
handling: environment failures are absorbed by the actors (``env_restarts``), non-finite
updates are skipped by the learner and ``max_nonfinite_updates`` in a row stop the run with
:class:`NonFiniteLossError` after saving the last good weights.

Every metrics row also says where the wall time went since the previous row (``time_*``
fractions, see :func:`time_fractions`) and names the ``bottleneck`` (:func:`bottleneck`).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import math
import queue
import threading
import time

import numpy as np

from tfagents_vtrace.replay.unrolls import UnrollReplay, replayed_per_batch
from tfagents_vtrace.runtime import run_dir
from tfagents_vtrace.runtime import strategy as strategy_lib
from tfagents_vtrace.runtime.actor import Actor, ActorSpec, ActorThread, WeightStore, build_network
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.evaluation import Evaluator, make_evaluator
from tfagents_vtrace.runtime.policies import NumpyMLPPolicy
from tfagents_vtrace.runtime.progress import Progress

log = logging.getLogger(__name__)

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


class NonFiniteLossError(RuntimeError):
    """Raised after too many consecutive non-finite updates (a checkpoint is saved first)."""


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


@dataclasses.dataclass
class _Stats:
    """Running statistics between metrics rows."""

    returns: collections.deque = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=100)
    )
    lengths: collections.deque = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=100)
    )
    episodes: int = 0
    restarts: dict = dataclasses.field(default_factory=dict)
    lag: list = dataclasses.field(default_factory=list)
    actor_time: dict = dataclasses.field(default_factory=lambda: dict.fromkeys(ACTOR_TIMES, 0.0))

    def add(self, info: dict, version: int) -> None:
        self.returns.extend(info["episode_returns"].tolist())
        self.lengths.extend(info["episode_lengths"].tolist())
        self.episodes += len(info["episode_returns"])
        self.restarts[info["actor_id"]] = info["env_restarts"]
        self.lag.append(version - info["weights_version"])
        for part in ACTOR_TIMES:
            self.actor_time[part] += info[f"{part}_time"]


class Trainer:
    """Builds learner, actors, evaluator and run directory; :meth:`run` trains.

    Args:
      run: the :class:`RunConfig`.
      agent: the agent module (``tfagents_vtrace.agents.get_agent(name)``).
      agent_config: the agent's ``Config``.
      network_config: the ``NetworkConfig``.
      logdir: run directory (resumed when it holds a checkpoint).
      strategy: ``tf.distribute`` strategy for the learner (default strategy when None).
      start_time: ``time.time()`` at process start (wall times count from it).
      env_factory: optional ``(num_envs, seed) -> VectorEnv`` used by actors and evaluation
        instead of ``make_vector_env`` (tests inject failing environments with it).
      agent_name: stored in config.json.
    """

    def __init__(
        self,
        run: RunConfig,
        agent,
        agent_config,
        network_config,
        logdir: str,
        *,
        strategy=None,
        start_time: float | None = None,
        env_factory=None,
        agent_name: str = "impala",
    ):
        if run.backend == "ray":  # ImportError without Ray, ValueError for num_actors=0
            from tfagents_vtrace.runtime import ray_backend

            ray_backend.check_run_config(run)
        # multi_worker: only the chief writes into logdir; other workers write a temp dir.
        self.role = strategy_lib.worker_role(strategy)
        self.chief_logdir, logdir = logdir, strategy_lib.write_dir(logdir, self.role)
        self.run_config, self.logdir = run, logdir
        self.start_time = time.time() if start_time is None else start_time
        self._env_factory = env_factory
        total_updates = math.ceil(run.total_steps / run.steps_per_update)
        net_factory = lambda: build_network(network_config, run.env_id)
        self.learner = agent.Learner(
            agent_config, net_factory, strategy, total_updates, seed=run.seed
        )
        # IMPALA's replay of recent unrolls (ImpalaConfig.replay_ratio; none for A2C).
        self.replay = UnrollReplay(
            getattr(agent_config, "replay_unrolls", 0),
            replayed_per_batch(getattr(agent_config, "replay_ratio", 0.0), run.batch_unrolls),
            seed=run.seed + 104729,
        )
        self.max_nonfinite = getattr(agent_config, "max_nonfinite_updates", 10)
        self.checkpointer = run_dir.Checkpointer(logdir, self.learner.checkpoint_items())
        self.metrics = run_dir.MetricsLog(logdir)
        self.resumed = strategy_lib.restore_checkpoint(
            self.checkpointer, self.chief_logdir, self.role
        )
        self.env_steps = self.checkpointer.get("env_steps") if self.resumed else 0
        self.updates = self.checkpointer.get("updates") if self.resumed else 0
        self.wall_offset = self.checkpointer.get("wall_time") if self.resumed else 0.0
        self.metrics.truncate_after(self.env_steps if self.resumed else -1)
        run_dir.write_run_config(logdir, agent_name, run, agent_config, network_config)
        self.spec = ActorSpec(
            env_id=run.env_id,
            network_config=network_config,
            num_envs=run.num_envs,
            unroll_length=run.unroll_length,
            seed=run.seed + 7919 * self.updates + self.role.seed_offset,
            env_mode=run.env_mode,
            policy_impl=run.policy_impl,
        )
        self.stats = _Stats()
        self.stats.episodes = self.checkpointer.get("episodes") if self.resumed else 0
        self._restarts_base = self.checkpointer.get("env_restarts") if self.resumed else 0

    # ------------------------------------------------------------------ helpers
    def wall_time(self) -> float:
        return self.wall_offset + time.time() - self.start_time

    def _actor_env_factory(self):
        if self._env_factory is None:
            return None
        return lambda seed: self._env_factory(self.run_config.num_envs, seed)

    def _make_evaluator(self) -> Evaluator:
        return make_evaluator(self.run_config, self._acting_network(), self._env_factory)

    def _acting_network(self):
        """A network for an acting policy: the learner's own when the numpy policy will be
        used (it only copies weights out of it), else a fresh copy (TF policies own one)."""
        if self.run_config.policy_impl != "tf" and NumpyMLPPolicy.supports(self.learner.network):
            return self.learner.network
        return build_network(self.spec.network_config, self.run_config.env_id)

    def env_restarts(self) -> int:
        return self._restarts_base + sum(self.stats.restarts.values())

    def save(self) -> str:
        return self.checkpointer.save(
            env_steps=self.env_steps,
            updates=self.updates,
            episodes=self.stats.episodes,
            env_restarts=self.env_restarts(),
            wall_time=self.wall_time(),
        )

    # ------------------------------------------------------------------ main loop
    def run(self) -> dict:
        """Trains until ``total_steps``, ``stop_return`` or a fatal error; returns the final row."""
        run = self.run_config
        finished = self.resumed and run_dir.finished_row(self.chief_logdir, run, self.env_steps)
        if finished:  # nothing left to do: no actors, no new rows, no export
            self.metrics.close()
            return finished
        store = WeightStore()
        store.publish(self.updates, self.learner.get_weights())
        unrolls: queue.Queue = queue.Queue(maxsize=run.queue_capacity)
        stop = threading.Event()
        actor_factory = self._actor_env_factory()
        threads = [
            ActorThread(
                Actor(self.spec, i, self._acting_network(), env_factory=actor_factory),
                store,
                unrolls,
                stop,
            )
            for i in range(run.num_actors if run.backend == "local" else 0)
        ]
        if run.backend == "ray":  # one driver thread for all Ray actors, same queue and store
            from tfagents_vtrace.runtime.ray_backend import RayActorPool

            threads = [
                RayActorPool.from_run(run, self.spec, store, unrolls, stop, self._env_factory)
            ]
        # num_actors=0: one actor stepped inline by the learner thread (no threads, no lag).
        self._inline = (
            None
            if threads
            else Actor(self.spec, 0, self._acting_network(), env_factory=actor_factory)
        )
        self._store = store
        self._last_metrics: dict = {}
        evaluator = self._make_evaluator()
        progress = Progress(run.total_steps, self.env_steps)
        for thread in threads:
            thread.start()
        last_eval = None
        solved_wall = None
        loop_start, loop_steps = time.monotonic(), self.env_steps
        # Multi-worker saves are collective, so only a single process saves on Ctrl-C.
        on_interrupt = (
            run_dir.checkpoint_on_interrupt(self, lambda: self.env_steps)
            if self.role.task_type is None
            else contextlib.nullcontext()
        )
        with on_interrupt:
            try:
                last_eval, solved_wall = self._loop(threads, unrolls, store, evaluator, progress)
            finally:
                stop.set()
                for thread in threads:
                    thread.join(timeout=10)
                progress.close()
                if self._inline is not None:
                    self._inline.close()
        train_sps = (self.env_steps - loop_steps) / max(time.monotonic() - loop_start, 1e-9)
        if last_eval is None or last_eval["step"] != self.env_steps:
            last_eval = self._evaluate(evaluator)
            self._write_row(self._last_metrics, last_eval, progress)
        evaluator.close()
        return run_dir.finish_run(
            self,
            self.learner.network,
            last_eval,
            solved_wall,
            self.env_steps,
            train_sps=round(train_sps, 1),
            updates=int(self.updates),
            episodes=int(self.stats.episodes),
            env_restarts=int(self.env_restarts()),
            resumed=bool(self.resumed),
        )

    def _next_unroll(self, unrolls: queue.Queue, threads: list[ActorThread]):
        if self._inline is not None:
            if self._store.version > self._inline.weights_version:
                self._inline.set_weights(*self._store.get())
            item = None
            while item is None:  # None: the env raised, was recreated, the unroll dropped
                item = self._inline.unroll()
            return item
        while True:
            try:
                return unrolls.get(timeout=1.0)
            except queue.Empty:
                errors = [t.error for t in threads if t.error is not None]
                if errors and all(not t.is_alive() for t in threads):
                    raise RuntimeError(f"all actors failed; first error: {errors[0]!r}") from None

    def _loop(self, threads, unrolls, store, evaluator, progress):
        run = self.run_config
        next_eval = (
            (self.env_steps // run.eval_every + 1) * run.eval_every if run.eval_every else None
        )
        last_log = time.monotonic()
        last_eval, solved_wall, learner_metrics = None, None, {}
        self._row_steps, self._row_time = self.env_steps, time.monotonic()
        self._busy = dict.fromkeys(LEARNER_TIMES, 0.0)
        while self.env_steps < run.total_steps:
            run_dir.check_stop()
            start = time.perf_counter()
            items = [self._next_unroll(unrolls, threads) for _ in range(run.batch_unrolls)]
            received = time.perf_counter()
            for _, info in items:
                self.stats.add(info, self.updates)
            batch = stack_unrolls(self.replay.mix([u for u, _ in items]))
            learner_metrics = self.learner.train_step(batch)
            trained = time.perf_counter()
            self.updates += 1
            self.env_steps += run.steps_per_update
            store.publish(self.updates, self.learner.get_weights())
            self._add_busy(items, start, received, trained, time.perf_counter())
            progress.update(self.env_steps, self.stats.returns)
            if learner_metrics.get("nonfinite_streak", 0) >= self.max_nonfinite:
                path = self.save()
                raise NonFiniteLossError(
                    f"{int(learner_metrics['nonfinite_streak'])} consecutive updates had a "
                    f"non-finite loss or gradient (at step {self.env_steps}); training stopped. "
                    f"The last good weights are in checkpoint {path}."
                )
            eval_row = None
            if next_eval is not None and self.env_steps >= next_eval:
                next_eval += run.eval_every
                eval_row = last_eval = self._evaluate(evaluator)
            now = time.monotonic()
            self._last_metrics = learner_metrics
            final_step = self.env_steps >= run.total_steps  # the row after the loop covers it
            if eval_row is not None or (now - last_log >= run.log_every_s and not final_step):
                last_log = now
                self._write_row(learner_metrics, eval_row, progress)
            if eval_row is not None and run.stop_return is not None:
                if eval_row["eval_return"] >= run.stop_return:
                    solved_wall = eval_row["wall_time"]
                    break
            if self.role.task_type is None:
                due = now - self.checkpointer.last_save >= run.checkpoint_every_s
            else:  # multi_worker saves are collective: every worker must save at the same
                due = eval_row is not None  # update, so use the step-based evaluation schedule
            if due:
                self.save()
        return last_eval, solved_wall

    def _add_busy(self, items, start, received, trained, published) -> None:
        """Adds one update's learner-thread seconds (``perf_counter`` marks) to the row's.
        The inline actor's own time (in its infos) is not waiting."""
        acting = 0.0
        if self._inline is not None:
            acting = sum(info[f"{part}_time"] for _, info in items for part in ACTOR_TIMES)
        self._busy["wait"] += max(received - start - acting, 0.0)
        self._busy["learner"] += trained - received
        self._busy["publish"] += published - trained

    def _evaluate(self, evaluator: Evaluator) -> dict:
        start = time.perf_counter()
        evaluator.set_weights(self.learner.get_weights())
        row = evaluator.run()
        row["step"] = int(self.env_steps)
        row["wall_time"] = round(self.wall_time(), 3)
        self._busy["eval"] += time.perf_counter() - start
        return row

    def _write_row(self, learner_metrics: dict, eval_row: dict | None, progress) -> None:
        now = time.monotonic()
        elapsed = max(now - self._row_time, 1e-9)
        row = {
            "step": int(self.env_steps),
            "wall_time": round(self.wall_time(), 3),
            "sps": round((self.env_steps - self._row_steps) / elapsed, 1),
            "episode_return": float(np.mean(self.stats.returns)) if self.stats.returns else None,
            "episode_length": float(np.mean(self.stats.lengths)) if self.stats.lengths else None,
            "episodes": int(self.stats.episodes),
            "updates": int(self.updates),
            "env_restarts": int(self.env_restarts()),
            "policy_lag": float(np.mean(self.stats.lag)) if self.stats.lag else 0.0,
        }
        row.update({k: v for k, v in learner_metrics.items() if k != "nonfinite_streak"})
        if eval_row is not None:
            row.update({k: v for k, v in eval_row.items() if k not in ("step", "wall_time")})
        row.update(self._time_row(elapsed))
        self.stats.lag = []
        self._row_steps, self._row_time = self.env_steps, now
        self.metrics.write(row)
        progress.log(row)

    def _time_row(self, elapsed: float) -> dict:
        """The row's ``time_*`` fractions and ``bottleneck``; restarts the accumulation."""
        threads = 0 if self._inline is not None else self.run_config.num_actors
        fractions = time_fractions(self.stats.actor_time, self._busy, elapsed, threads)
        self.stats.actor_time = dict.fromkeys(ACTOR_TIMES, 0.0)
        self._busy = dict.fromkeys(LEARNER_TIMES, 0.0)
        return {**fractions, "bottleneck": bottleneck(fractions, self._inline is not None)}


def train(run: RunConfig, agent, agent_config, network_config, logdir: str, **kwargs) -> dict:
    """Builds a :class:`Trainer` and runs it; returns the final row (see ``Trainer.run``)."""
    return Trainer(run, agent, agent_config, network_config, logdir, **kwargs).run()
