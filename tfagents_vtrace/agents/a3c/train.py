"""A3C training into a run directory: worker threads + the runtime's run-directory pieces.

Mnih et al., "Asynchronous Methods for Deep Reinforcement Learning", 2016,
https://arxiv.org/abs/1602.01783. ``num_workers`` :class:`~tfagents_vtrace.agents.a3c.worker.Worker`
threads update one global network; the calling thread only watches: it writes metrics rows
(``DIR/metrics.jsonl`` + TensorBoard), runs the greedy evaluation every ``eval_every`` global
steps on separate environments, checkpoints, stops at ``total_steps`` or ``stop_return`` and
exports ``DIR/policy``. The run directory is the runtime's (:mod:`tfagents_vtrace.runtime.run_dir`):
training into an existing one resumes from its last checkpoint.

From :class:`~tfagents_vtrace.runtime.config.RunConfig` it uses ``env_id``, ``seed``,
``total_steps``, ``num_envs`` (environments *per worker*), ``env_mode``, ``policy_impl``,
``eval_every``, ``eval_episodes``, ``stop_return``, ``checkpoint_every_s``, ``log_every_s``
and ``export_policy``; the rollout length and thread count are the A3C config's ``t_max`` and
``num_workers``.

Step budget: before each rollout a worker claims its ``t_max * num_envs`` steps from one
shared :class:`~tfagents_vtrace.runtime.step_budget.StepBudget` and stops once ``total_steps``
are claimed (a rollout dropped by a failed environment gives its claim back), so a run ends
within one rollout of the target, whatever ``num_workers``:
``total_steps <= step < total_steps + t_max * num_envs``.

Rows: one every ``log_every_s`` once the global step has moved (none before the first
update), evaluation rows, and the final row; ``sps`` is global steps per second since the
previous row (or the start of :meth:`A3CTrainer.run`), and every row is also shown by the
progress display. Evaluations read a consistent copy of the global weights while the workers
go on; when one reaches ``stop_return`` those weights are restored into the global network
before the final checkpoint and export (``solve_step`` is the global step they were taken
at). A run directory whose run already ended is not trained again
(:func:`~tfagents_vtrace.runtime.run_dir.finished_row`); Ctrl-C stops the workers, saves a
checkpoint and raises :class:`~tfagents_vtrace.runtime.stop_signals.RunInterrupted`.
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import tensorflow as tf

from tfagents_vtrace.agents import placement
from tfagents_vtrace.agents.a3c.config import A3CConfig
from tfagents_vtrace.agents.a3c.shared import A3CLearner
from tfagents_vtrace.agents.a3c.worker import Worker, WorkerStats
from tfagents_vtrace.runtime import checkpointing, config_io, metrics_log, run_dir, stop_signals
from tfagents_vtrace.runtime.actor import ActorSpec, build_network
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.evaluation import Evaluator, make_evaluator
from tfagents_vtrace.runtime.policies import make_policy
from tfagents_vtrace.runtime.progress import Progress
from tfagents_vtrace.runtime.step_budget import StepBudget


class A3CTrainer:
    """Builds the global learner, the workers, evaluator and run directory; :meth:`run` trains.

    Args mirror :func:`train`; ``record_order`` keeps the worker id of every shared update in
    ``learner.shared.order`` (tests).
    """

    def __init__(
        self,
        run: RunConfig,
        config: A3CConfig,
        network_config,
        logdir: str,
        *,
        start_time: float | None = None,
        env_factory=None,
        agent_name: str = "a3c",
        record_order: bool = False,
    ):
        placement.require_local_backend(run, "A3C")
        if not isinstance(config, A3CConfig):
            raise ValueError(f"config: expected an A3CConfig, received {type(config)}")
        self.run_config, self.config, self.logdir = run, config, logdir
        self.start_time = time.time() if start_time is None else start_time
        self._env_factory = env_factory
        tf.keras.utils.set_random_seed(run.seed)
        per_update = config.t_max * run.num_envs
        self.learner = A3CLearner(
            config,
            lambda: build_network(network_config, run.env_id),
            total_updates=math.ceil(run.total_steps / per_update),
            total_steps=run.total_steps,
            record_order=record_order,
        )
        self.checkpointer = checkpointing.Checkpointer(logdir, self.learner.checkpoint_items())
        self.metrics = metrics_log.MetricsLog(logdir)
        self.resumed = self.checkpointer.restore()
        self.wall_offset = self.checkpointer.get("wall_time") if self.resumed else 0.0
        self.metrics.truncate_after(self.learner.shared.step if self.resumed else -1)
        config_io.write_run_config(logdir, agent_name, run, config, network_config)
        self.stats = WorkerStats()
        self.stats.episodes = self.checkpointer.get("episodes") if self.resumed else 0
        self.stop = threading.Event()
        factory = None
        if env_factory is not None:
            factory = lambda seed: env_factory(run.num_envs, seed)
        restart = self.learner.shared.step
        self.budget = StepBudget(restart, run.total_steps)
        self.workers = [
            Worker(
                i,
                self.learner,
                ActorSpec(
                    env_id=run.env_id,
                    network_config=network_config,
                    num_envs=run.num_envs,
                    unroll_length=config.t_max,
                    seed=run.seed + 7919 * restart,
                    env_mode=run.env_mode,
                    policy_impl=run.policy_impl,
                ),
                build_network(network_config, run.env_id),
                self.stats,
                self.stop,
                env_factory=factory,
                budget=self.budget,
            )
            for i in range(config.num_workers)
        ]
        self.evaluator = self._make_evaluator(network_config)
        self.eval_weights: list | None = None

    def _make_evaluator(self, network_config) -> Evaluator:
        run = self.run_config
        network = build_network(network_config, run.env_id)
        policy = make_policy(network, run.policy_impl, greedy=True)
        return make_evaluator(run, policy, self._env_factory)

    def wall_time(self) -> float:
        return self.wall_offset + time.time() - self.start_time

    def save(self) -> str:
        return self.checkpointer.save(
            env_steps=self.learner.shared.step,
            updates=self.learner.shared.updates,
            episodes=self.stats.episodes,
            env_restarts=sum(self.stats.env_restarts.values()),
            wall_time=self.wall_time(),
        )

    def evaluate(self) -> dict:
        """Greedy evaluation of the current global weights; a row with step and wall_time.

        The evaluated weights are kept in ``eval_weights`` (restored when they solve the task,
        since the workers keep updating while the evaluation runs)."""
        step, self.eval_weights = self.learner.shared.read(
            lambda: (self.learner.shared.step, self.learner.network.get_weights())
        )
        self.evaluator.set_weights(self.eval_weights)
        row = self.evaluator.run()
        row.update(step=int(step), wall_time=round(self.wall_time(), 3))
        return row

    def _row(self, eval_row: dict | None, last: tuple[int, float]) -> dict:
        """A metrics row at the current global step; ``sps`` over the steps and seconds
        since ``last = (step, time.monotonic())`` of the previous row."""
        step, now = self.learner.shared.step, time.monotonic()
        with self.stats.lock:
            returns, lengths = list(self.stats.returns), list(self.stats.lengths)
            row = {
                "step": int(step),
                "wall_time": round(self.wall_time(), 3),
                "sps": round((step - last[0]) / max(now - last[1], 1e-9), 1),
                "episode_return": float(np.mean(returns)) if returns else None,
                "episode_length": float(np.mean(lengths)) if lengths else None,
                "episodes": int(self.stats.episodes),
                "updates": int(self.learner.shared.updates),
            }
            row.update(self.stats.metrics)
        if eval_row is not None:
            row.update({k: v for k, v in eval_row.items() if k not in ("step", "wall_time")})
        return row

    def _check_workers(self) -> None:
        errors = [w.error for w in self.workers if w.error is not None]
        if errors and all(not w.is_alive() for w in self.workers):
            raise RuntimeError(f"all A3C workers failed; first error: {errors[0]!r}")

    def _write_row(self, eval_row: dict | None, progress: Progress) -> None:
        row = self._row(eval_row, self._last_row)
        self.metrics.write(row)
        progress.log(row)
        self._last_row = (row["step"], time.monotonic())

    def _watch(self, progress: Progress) -> tuple[dict | None, float | None]:
        """Logs, evaluates and checkpoints until the workers are done or a stop criterion."""
        run, shared = self.run_config, self.learner.shared
        every = run.eval_every
        next_eval = (shared.step // every + 1) * every if every else None
        last_log = time.monotonic()
        last_eval = None
        while any(w.is_alive() for w in self.workers):
            time.sleep(0.02)
            stop_signals.check_stop()
            self._check_workers()
            step = shared.step
            progress.update(step, self.stats.returns)
            eval_row = None
            if next_eval is not None and step >= next_eval:
                next_eval = (step // every + 1) * every
                eval_row = last_eval = self.evaluate()
            # A periodic row needs new steps; the final step's row is written by run().
            moved = self._last_row[0] < step < run.total_steps
            if eval_row is not None or (moved and time.monotonic() - last_log >= run.log_every_s):
                self._write_row(eval_row, progress)
                last_log = time.monotonic()
            if eval_row is not None and run.stop_return is not None:
                if eval_row["eval_return"] >= run.stop_return:
                    return last_eval, eval_row["wall_time"]
            if time.monotonic() - self.checkpointer.last_save >= run.checkpoint_every_s:
                self.save()
        return last_eval, None

    def _close(self) -> None:
        """Closes the environments of workers that never ran and the evaluator's."""
        for worker in self.workers:
            if worker.ident is None:
                worker.actor.close()
        self.evaluator.close()

    def run(self) -> dict:
        """Trains until ``total_steps``, ``stop_return`` or a fatal error; the final row.

        A run that already ended at the restored step returns its final row with
        ``already_finished: True`` (no training, no new rows, no export). Ctrl-C: the workers
        are stopped, a checkpoint is saved and ``stop_signals.RunInterrupted`` raised.
        """
        step = self.learner.shared.step
        finished = self.resumed and run_dir.finished_row(self.logdir, self.run_config, step)
        if finished:
            self._close()
            self.metrics.close()
            return finished
        progress = Progress(self.run_config.total_steps, step)
        self._last_row = (step, time.monotonic())
        try:
            with stop_signals.checkpoint_on_interrupt(self, lambda: self.learner.shared.step):
                try:
                    for worker in self.workers:
                        worker.start()
                    last_eval, solved_wall = self._watch(progress)
                finally:
                    self.stop.set()
                    for worker in self.workers:
                        if worker.ident is not None:
                            worker.join(timeout=30)
                    progress.close()
        except stop_signals.RunInterrupted:
            self._close()
            raise
        self._check_workers()
        step = self.learner.shared.step
        if solved_wall is not None:  # keep (and export) the weights that reached stop_return
            self.learner.shared.read(lambda: self.learner.network.set_weights(self.eval_weights))
        elif last_eval is None or last_eval["step"] != step:
            last_eval = self.evaluate()
            self._write_row(last_eval, progress)
        self._close()
        return run_dir.finish_run(
            self,
            self.learner.network,
            last_eval,
            solved_wall,
            step,
            updates=int(self.learner.shared.updates),
            episodes=int(self.stats.episodes),
            worker_steps=[int(w.steps) for w in self.workers],
            resumed=bool(self.resumed),
        )


def train(
    run: RunConfig,
    agent_config: A3CConfig,
    network_config,
    logdir: str,
    **kwargs,
) -> dict:
    """Trains A3C into run directory ``logdir``; returns the final row (``"final": true``,
    ``step``, ``wall_time``, ``eval_return``, ``worker_steps``...).

    ``kwargs``: ``start_time`` (``time.time()`` at process start), ``env_factory``
    (``(num_envs, seed) -> VectorEnv``), ``agent_name``, ``record_order``; ``strategy`` is
    accepted and must be None or single-replica (A3C runs on threads).
    """
    strategy = kwargs.pop("strategy", None)
    placement.require_single_replica(strategy, "A3C")
    return A3CTrainer(run, agent_config, network_config, logdir, **kwargs).run()
