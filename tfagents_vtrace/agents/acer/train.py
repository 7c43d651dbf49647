"""ACER training into a run directory: on-policy unrolls + episodic replay, sync or async.

Wang et al. 2016, https://arxiv.org/abs/1611.01224 (Algorithm 1). Each iteration acts
``t_max`` steps on ``num_envs`` environments, stores the unroll in the
:class:`~tfagents_vtrace.replay.episodic.EpisodicReplay`, runs one on-policy update (unless
``disable_online_update``) and, once the replay holds ``replay_start_size`` transitions,
``n_times_replay`` updates on replayed sequences.

* ``num_workers = 0`` (default): synchronous and batched, one inline actor that acts with
  the learner's own network (no copy, no policy lag).
* ``num_workers = N``: N worker threads (as A3C), each with its environments and a local
  network copy; they compute gradients locally and apply them to the global network and its
  average under the learner's lock; they share one replay. Each iteration's
  ``t_max * num_envs`` steps are claimed from one
  :class:`~tfagents_vtrace.runtime.step_budget.StepBudget` first, so the run ends within one
  iteration of ``total_steps``.

The calling thread writes metrics rows (``DIR/metrics.jsonl``: losses and the ACER
statistics ``average_value``, ``average_entropy``, ``average_kl``), runs the greedy
evaluation every ``eval_every`` steps, checkpoints, stops at ``total_steps`` or
``stop_return`` and exports ``DIR/policy``. The replay is saved beside every checkpoint
(``checkpoints/replay-<step>.npz``, written before the checkpoint) and restored on resume.
Every row, the last one included, is also shown by the progress display. A run directory
whose run already ended is not trained again
(:func:`~tfagents_vtrace.runtime.run_dir.finished_row`); Ctrl-C stops the workers, saves a
checkpoint (with the replay) and raises
:class:`~tfagents_vtrace.runtime.stop_signals.RunInterrupted`.
"""

from __future__ import annotations

import logging
import math
import threading
import time

import numpy as np
import tensorflow as tf

from tfagents_vtrace.agents import placement
from tfagents_vtrace.agents.acer.config import AcerConfig
from tfagents_vtrace.agents.acer.learner import AcerLearner
from tfagents_vtrace.replay import storage
from tfagents_vtrace.replay.episodic import EpisodicReplay
from tfagents_vtrace.runtime import checkpointing, config_io, metrics_log, run_dir, stop_signals
from tfagents_vtrace.runtime.actor import Actor, ActorSpec, build_network
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.evaluation import make_evaluator
from tfagents_vtrace.runtime.policies import make_policy
from tfagents_vtrace.runtime.progress import Progress
from tfagents_vtrace.runtime.step_budget import StepBudget

log = logging.getLogger(__name__)


class AcerTrainer:
    """Builds learner, replay, actor(s), evaluator and run directory; :meth:`run` trains.

    Args mirror :func:`train`.
    """

    def __init__(
        self,
        run: RunConfig,
        config: AcerConfig,
        network_config,
        logdir: str,
        *,
        start_time: float | None = None,
        env_factory=None,
        agent_name: str = "acer",
    ):
        placement.require_local_backend(run, "ACER")
        if not isinstance(config, AcerConfig):
            raise ValueError(f"config: expected an AcerConfig, received {type(config)}")
        self.run_config, self.config, self.logdir = run, config, logdir
        self.network_config = network_config
        self.start_time = time.time() if start_time is None else start_time
        self._env_factory = env_factory
        tf.keras.utils.set_random_seed(run.seed)
        self.steps_per_iter = config.t_max * run.num_envs
        iters = math.ceil(run.total_steps / self.steps_per_iter)
        per_iter = int(not config.disable_online_update) + config.n_times_replay
        self.learner = AcerLearner(
            config, self._build_network, total_updates=iters * max(per_iter, 1)
        )
        self.checkpointer = checkpointing.Checkpointer(logdir, self.learner.checkpoint_items())
        self.metrics = metrics_log.MetricsLog(logdir)
        self.replay = EpisodicReplay(config.replay_capacity)
        self.resumed = self.checkpointer.restore()
        self.env_steps = self.checkpointer.get("env_steps") if self.resumed else 0
        self.episodes = self.checkpointer.get("episodes") if self.resumed else 0
        self.wall_offset = self.checkpointer.get("wall_time") if self.resumed else 0.0
        self.replay_restored = self._restore_replay() if self.resumed else 0
        self.metrics.truncate_after(self.env_steps if self.resumed else -1)
        config_io.write_run_config(logdir, agent_name, run, config, network_config)
        self.rng = np.random.default_rng(run.seed + 7919 * self.env_steps)
        self.returns: list[float] = []
        self.lengths: list[float] = []
        self.last_metrics: dict[str, float] = {}
        self.stats_lock = threading.Lock()
        policy = make_policy(self._build_network(), run.policy_impl, greedy=True)
        self.evaluator = make_evaluator(run, policy, env_factory)
        self._zero_states: dict[int, tuple] = {}

    # ------------------------------------------------------------------ construction
    def _build_network(self):
        return build_network(self.network_config, self.run_config.env_id)

    def _spec(self, worker: int) -> ActorSpec:
        run = self.run_config
        return ActorSpec(
            env_id=run.env_id,
            network_config=self.network_config,
            num_envs=run.num_envs,
            unroll_length=self.config.t_max,
            seed=run.seed + 7919 * self.env_steps + 104_729 * worker,
            env_mode=run.env_mode,
            policy_impl=run.policy_impl,
        )

    def _actor_factory(self):
        if self._env_factory is None:
            return None
        return lambda seed: self._env_factory(self.run_config.num_envs, seed)

    def _restore_replay(self) -> int:
        path = storage.latest_replay_path(self.logdir, self.env_steps)
        if path is None:
            log.warning(
                "no replay archive for checkpoint %d: the replay starts empty", self.env_steps
            )
            return 0
        self.replay.load(path)
        return len(self.replay)

    # ------------------------------------------------------------------ helpers
    def wall_time(self) -> float:
        return self.wall_offset + time.time() - self.start_time

    def save(self) -> str:
        """Replay archive first, then the checkpoint of the same step; old archives pruned."""
        with self.learner.lock:
            self.replay.save(storage.replay_path(self.logdir, self.env_steps))
            path = self.checkpointer.save(
                env_steps=self.env_steps,
                updates=int(self.learner.updates.numpy()),
                episodes=self.episodes,
                wall_time=self.wall_time(),
            )
        keep = [int(p.rsplit("-", 1)[1]) for p in self.checkpointer.manager.checkpoints]
        storage.prune_replays(self.logdir, keep)
        return path

    def _zero_state(self, batch: int) -> tuple:
        """The network's initial state for ``batch`` as numpy (built once per batch size)."""
        if batch not in self._zero_states:
            state = self.learner.network.initial_state(batch)
            self._zero_states[batch] = tuple(s.numpy() for s in state)
        return self._zero_states[batch]

    def _record(self, info: dict, metrics: dict | None) -> None:
        with self.stats_lock:
            self.returns.extend(info["episode_returns"].tolist())
            self.lengths.extend(info["episode_lengths"].tolist())
            self.returns, self.lengths = self.returns[-100:], self.lengths[-100:]
            self.episodes += len(info["episode_returns"])
            if metrics:
                self.last_metrics = metrics

    def replay_batch(self) -> dict | None:
        """A replayed batch, or None while the replay is below ``replay_start_size``."""
        if len(self.replay) < max(self.config.replay_start_size, 1):
            return None
        size = self.config.replay_batch_size or self.run_config.num_envs
        return self.replay.sample(size, self.config.t_max, self.rng, self._zero_state(size))

    def iterate(self, actor: Actor, stream: int, update) -> None:
        """One ACER iteration: act, store, on-policy update, replay updates."""
        item = None
        while item is None:  # None: the env raised and was recreated
            item = actor.unroll()
        unroll, info = item
        self.replay.add_unroll(unroll, stream)
        metrics = None
        if not self.config.disable_online_update:
            metrics = update(unroll)
        for _ in range(self.config.n_times_replay):
            batch = self.replay_batch()
            if batch is None:
                break
            metrics = update(batch)
        self._record(info, metrics)
        if metrics and metrics.get("nonfinite_streak", 0) >= self.config.max_nonfinite_updates:
            raise FloatingPointError(
                f"{int(metrics['nonfinite_streak'])} consecutive non-finite ACER updates"
            )

    # ------------------------------------------------------------------ evaluation / rows
    def evaluate(self) -> dict:
        with self.learner.lock:
            weights, step = self.learner.get_weights(), self.env_steps
        self.evaluator.set_weights(weights)
        row = self.evaluator.run()
        row.update(step=int(step), wall_time=round(self.wall_time(), 3))
        return row

    def row(self, eval_row: dict | None, last: tuple[int, float]) -> dict:
        step, now = self.env_steps, time.monotonic()
        with self.stats_lock:
            row = {
                "step": int(step),
                "wall_time": round(self.wall_time(), 3),
                "sps": round((step - last[0]) / max(now - last[1], 1e-9), 1),
                "episode_return": float(np.mean(self.returns)) if self.returns else None,
                "episode_length": float(np.mean(self.lengths)) if self.lengths else None,
                "episodes": int(self.episodes),
                "updates": int(self.learner.updates.numpy()),
                "replay_size": len(self.replay),
            }
            row.update({k: v for k, v in self.last_metrics.items() if k != "nonfinite_streak"})
        if eval_row is not None:
            row.update({k: v for k, v in eval_row.items() if k not in ("step", "wall_time")})
        return row

    # ------------------------------------------------------------------ main loop
    def _bookkeeping(self, state: dict, progress: Progress) -> bool:
        """Logs / evaluates / checkpoints after the step count moved; True to stop."""
        run, step = self.run_config, self.env_steps
        progress.update(step, self.returns)
        eval_row = None
        if state["next_eval"] is not None and step >= state["next_eval"]:
            state["next_eval"] = (step // run.eval_every + 1) * run.eval_every
            eval_row = state["last_eval"] = self.evaluate()
        now = time.monotonic()
        final = step >= run.total_steps
        if eval_row is not None or (now - state["last_log"] >= run.log_every_s and not final):
            row = self.row(eval_row, state["last"])
            self.metrics.write(row)
            progress.log(row)
            state["last"], state["last_log"] = (step, now), now
        if eval_row is not None and run.stop_return is not None:
            if eval_row["eval_return"] >= run.stop_return:
                state["solved_wall"] = eval_row["wall_time"]
                state["eval_weights"] = self.learner.get_weights()
                return True
        if now - self.checkpointer.last_save >= run.checkpoint_every_s:
            self.save()
        return final

    def _sync_loop(self, state: dict, progress: Progress) -> None:
        actor = Actor(self._spec(0), 0, self.learner.network, self._actor_factory())
        try:
            while self.env_steps < self.run_config.total_steps:
                stop_signals.check_stop()
                self.iterate(actor, 0, self.learner.train_step)
                self.env_steps += self.steps_per_iter
                if self._bookkeeping(state, progress):
                    break
        finally:
            actor.close()

    def _async_loop(self, state: dict, progress: Progress) -> None:
        stop = threading.Event()
        # Each iteration is claimed first, so the run ends within one of total_steps.
        budget = StepBudget(self.env_steps, self.run_config.total_steps)
        workers = [AcerWorker(self, i, stop, budget) for i in range(self.config.num_workers)]
        for w in workers:
            w.start()
        try:
            seen = self.env_steps
            while any(w.is_alive() for w in workers):
                time.sleep(0.02)
                stop_signals.check_stop()
                errors = [w.error for w in workers if w.error is not None]
                if errors:
                    raise RuntimeError(f"ACER worker failed: {errors[0]!r}") from errors[0]
                if self.env_steps != seen:
                    seen = self.env_steps
                    if self._bookkeeping(state, progress):
                        break
        finally:
            stop.set()
            for w in workers:
                w.join(timeout=30)

    def run(self) -> dict:
        """Trains until ``total_steps``, ``stop_return`` or an error; returns the final row.

        A run that already ended at the restored step returns its final row with
        ``already_finished: True`` (no training, no new rows, no export). Ctrl-C: the workers
        are stopped, a checkpoint is saved and ``stop_signals.RunInterrupted`` raised.
        """
        run = self.run_config
        finished = self.resumed and run_dir.finished_row(self.logdir, run, self.env_steps)
        if finished:
            self.evaluator.close()
            self.metrics.close()
            return finished
        progress = Progress(run.total_steps, self.env_steps)
        state = {
            "next_eval": (self.env_steps // run.eval_every + 1) * run.eval_every
            if run.eval_every
            else None,
            "last": (self.env_steps, time.monotonic()),
            "last_log": time.monotonic(),
            "last_eval": None,
            "solved_wall": None,
            "eval_weights": None,
        }
        try:
            with stop_signals.checkpoint_on_interrupt(self, lambda: self.env_steps):
                try:
                    if self.config.num_workers == 0:
                        self._sync_loop(state, progress)
                    else:
                        self._async_loop(state, progress)
                finally:
                    progress.close()
        except stop_signals.RunInterrupted:
            self.evaluator.close()
            raise
        return self._finish(state, progress)

    def _finish(self, state: dict, progress: Progress) -> dict:
        last_eval = state["last_eval"]
        if state["solved_wall"] is not None:  # keep (and export) the weights that solved it
            self.learner.network.set_weights(state["eval_weights"])
        elif last_eval is None or last_eval["step"] != self.env_steps:
            last_eval = self.evaluate()
            row = self.row(last_eval, state["last"])
            self.metrics.write(row)
            progress.log(row)
        self.evaluator.close()
        return run_dir.finish_run(
            self,
            self.learner.network,
            last_eval,
            state["solved_wall"],
            self.env_steps,
            updates=int(self.learner.updates.numpy()),
            episodes=int(self.episodes),
            replay_size=len(self.replay),
            replay_restored=int(self.replay_restored),
            resumed=bool(self.resumed),
        )


class AcerWorker(threading.Thread):
    """An asynchronous ACER worker: local network + actor, global updates under the lock."""

    def __init__(
        self, trainer: AcerTrainer, worker_id: int, stop: threading.Event, budget: StepBudget
    ):
        super().__init__(name=f"acer-worker-{worker_id}", daemon=True)
        self.trainer, self.worker_id, self.stop, self.budget = trainer, worker_id, stop, budget
        self.network = trainer._build_network()
        self.actor = Actor(
            trainer._spec(worker_id + 1), worker_id, self.network, trainer._actor_factory()
        )
        self._grads = trainer.learner.gradients_fn(self.network)
        self.error: BaseException | None = None

    def update(self, batch: dict) -> dict[str, float]:
        """Sync the local copy, compute gradients on it, apply them globally."""
        learner = self.trainer.learner
        with learner.lock:
            weights = learner.get_weights()
        self.network.set_weights(weights)
        grads, metrics = self._grads(batch)
        return learner.apply_gradients(grads, metrics)

    def run(self) -> None:
        trainer = self.trainer
        try:
            while not self.stop.is_set() and self.budget.claim(trainer.steps_per_iter):
                with trainer.learner.lock:
                    self.network.set_weights(trainer.learner.get_weights())
                trainer.iterate(self.actor, self.worker_id + 1, self.update)
                with trainer.stats_lock:
                    trainer.env_steps += trainer.steps_per_iter
        except BaseException as error:  # noqa: BLE001 - reported by the training loop
            self.error = error
            log.exception("ACER worker %d failed", self.worker_id)
        finally:
            try:
                self.actor.close()
            except Exception:  # noqa: BLE001
                pass


def train(run: RunConfig, agent_config: AcerConfig, network_config, logdir: str, **kwargs) -> dict:
    """Trains ACER into run directory ``logdir``; returns the final row (``"final": true``,
    ``step``, ``wall_time``, ``eval_return``, ``replay_size``, ``replay_restored``...).

    ``kwargs``: ``start_time``, ``env_factory`` (``(num_envs, seed) -> VectorEnv``),
    ``agent_name``; ``strategy`` must be None or single-replica.
    """
    strategy = kwargs.pop("strategy", None)
    placement.require_single_replica(strategy, "ACER")
    return AcerTrainer(run, agent_config, network_config, logdir, **kwargs).run()
