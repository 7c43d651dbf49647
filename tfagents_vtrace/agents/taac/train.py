"""TAAC training into a run directory: act-or-repeat rollouts into sequence replay, several
compiled updates per training call, greedy evaluation, checkpoints (with the replay), export.

Yu et al., "TAAC: Temporally Abstract Actor-Critic for Continuous Control", 2021,
https://arxiv.org/abs/2104.06521. One loop iteration is one vector-env step: one compiled
acting call over all environments, one ``env.step``, one replay write. Every
``train_interval`` iterations (once ``initial_collect_steps`` environment steps with uniform
random actions and b are stored) one compiled call runs ``updates_per_train`` updates on
freshly sampled windows. The run directory follows DESIGN.md (config.json, checkpoints/
with ``replay-<step>.npz`` beside each checkpoint, metrics.jsonl, TensorBoard, policy/); a
run directory with a checkpoint is resumed.

From :class:`~tfagents_vtrace.runtime.config.RunConfig` it uses ``env_id``, ``seed``,
``total_steps``, ``num_envs``, ``env_mode``, ``eval_every``, ``eval_episodes``,
``stop_return``, ``checkpoint_every_s``, ``log_every_s`` and ``export_policy``.

Metrics rows add ``repeat_length``: environment steps per trajectory started (a switch or an
episode start) in the rollouts since the previous row, after the random phase; evaluation
rows add ``eval_repeat_length``, the same over the greedy episodes. Rows come every
``log_every_s`` and at evaluations (the final step's row is the final evaluation's); each is
also shown by the progress display, and ``sps`` counts the steps since the previous row.

A run directory whose run already ended is not trained again
(:func:`~tfagents_vtrace.runtime.run_dir.finished_row`); Ctrl-C saves a checkpoint (with the
replay) and raises :class:`~tfagents_vtrace.runtime.stop_signals.RunInterrupted`.
"""

from __future__ import annotations

import collections
import re
import time

import gymnasium as gym
import numpy as np
import tensorflow as tf

from tfagents_vtrace.agents import placement
from tfagents_vtrace.agents.taac.config import TaacConfig
from tfagents_vtrace.agents.taac.learner import TaacLearner
from tfagents_vtrace.agents.taac.policy import TaacPolicy
from tfagents_vtrace.replay.sequence import SequenceReplay
from tfagents_vtrace.replay.storage import latest_replay_path, prune_replays, replay_path
from tfagents_vtrace.runtime import checkpointing, config_io, metrics_log, run_dir, stop_signals
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.progress import Progress

__all__ = ["TaacTrainer", "evaluate_policy", "train"]


def _default_factory(run: RunConfig):
    from tfagents_vtrace.envs import make_vector_env

    return lambda n, seed: make_vector_env(run.env_id, n, seed, mode=run.env_mode)


def evaluate_policy(env, policy: TaacPolicy, seed: int, max_steps: int = 100_000) -> dict:
    """One episode per sub-environment of ``env`` with ``policy``; mean return and mean
    repeat length (steps per trajectory started)."""
    n = env.num_envs
    obs, _ = env.reset(seed=seed)
    state = policy.initial_state(n)
    first = np.ones(n, bool)
    returns, running = np.zeros(n), np.ones(n, bool)
    steps = starts = 0
    for _ in range(max_steps):
        action, info, state = policy.step(obs, first, None, None, state)
        starts += int(np.sum(running & ((info["b"] > 0) | first)))
        steps += int(np.sum(running))
        obs, reward, terminated, truncated, _ = env.step(action)
        returns += np.where(running, reward, 0.0)
        running &= ~(terminated | truncated)
        if not running.any():
            break
        first = np.zeros(n, bool)
    return {
        "eval_return": float(returns.mean()),
        "eval_return_min": float(returns.min()),
        "eval_repeat_length": steps / max(starts, 1),
    }


class TaacTrainer:
    """Builds env, learner, replay, policies and run directory; :meth:`run` trains.

    Args mirror :func:`train`; ``env_factory`` is ``(num_envs, seed) -> VectorEnv``.
    """

    def __init__(
        self,
        run: RunConfig,
        config: TaacConfig,
        logdir: str,
        *,
        start_time: float | None = None,
        env_factory=None,
        agent_name: str = "taac",
        network_config=None,
    ):
        placement.require_local_backend(run, "TAAC")
        if not isinstance(config, TaacConfig):
            raise ValueError(f"config: expected a TaacConfig, received {type(config)}")
        self.run_config, self.config, self.logdir = run, config, logdir
        self.start_time = time.time() if start_time is None else start_time
        tf.keras.utils.set_random_seed(run.seed)
        self.factory = env_factory or _default_factory(run)
        self.env = self.factory(run.num_envs, run.seed)
        space = self.env.single_action_space
        if not isinstance(space, gym.spaces.Box):
            raise ValueError(f"env_id: TAAC needs a Box action space, {run.env_id!r} has {space}")
        obs_shape = self.env.single_observation_space.shape
        action_dim = int(np.prod(space.shape))
        self.learner = TaacLearner(config, obs_shape, action_dim, seed=run.seed)
        k = self.learner.trajectory.order
        self.replay = SequenceReplay(
            {
                "observation": (obs_shape, np.float32),
                "reward": ((), np.float32),
                "discount": ((), np.float32),
                "is_last": ((), bool),
                "prev_tau": ((k, action_dim), np.float32),
                "tau": ((k, action_dim), np.float32),
                "b": ((), np.int32),
            },
            run.num_envs,
            config.replay_capacity,
        )
        self.checkpointer = checkpointing.Checkpointer(logdir, self.learner.checkpoint_items())
        self.resumed = self.checkpointer.restore()
        self.step = self.checkpointer.get("env_steps") if self.resumed else 0
        self.episodes = self.checkpointer.get("episodes") if self.resumed else 0
        self.wall_offset = self.checkpointer.get("wall_time") if self.resumed else 0.0
        if self.resumed:
            path = latest_replay_path(logdir, self.step)
            if path is not None:
                self.replay.load(path)
        self.metrics = metrics_log.MetricsLog(logdir)
        self.metrics.truncate_after(self.step if self.resumed else -1)
        config_io.write_run_config(logdir, agent_name, run, config, network_config)
        low, high = space.low.reshape(-1), space.high.reshape(-1)
        restart = int(self.step)
        self.policy = TaacPolicy(self.learner, False, low, high, seed=run.seed + 7919 * restart)
        self.eval_policy = TaacPolicy(self.learner, True, low, high, seed=10_000 + run.seed)
        self.eval_env = None
        self.eval_count = 0
        self.rng = np.random.default_rng([run.seed, restart])

    def wall_time(self) -> float:
        return self.wall_offset + time.time() - self.start_time

    def save(self) -> str:
        path = self.checkpointer.save(
            env_steps=self.step,
            updates=int(self.learner.updates.numpy()),
            episodes=self.episodes,
            wall_time=self.wall_time(),
        )
        self.replay.save(replay_path(self.logdir, self.step))
        keep = [
            int(re.search(r"(\d+)$", p).group(1)) for p in self.checkpointer.manager.checkpoints
        ]
        prune_replays(self.logdir, keep)
        return path

    def evaluate(self) -> dict:
        """Greedy (epsilon-greedy) evaluation, one episode per evaluation environment."""
        run = self.run_config
        if self.eval_env is None:
            self.eval_env = self.factory(run.eval_episodes, 10_000 + run.seed)
        row = evaluate_policy(self.eval_env, self.eval_policy, 10_000 + run.seed + self.eval_count)
        self.eval_count += 1
        row.update(step=int(self.step), wall_time=round(self.wall_time(), 3))
        return row

    def _train_once(self) -> dict:
        cfg = self.config
        batches = self.replay.sample(
            cfg.mini_batch_size, cfg.mini_batch_length, self.rng, num=cfg.updates_per_train
        )
        return self.learner.train(batches)

    def _reset_rollout(self) -> dict:
        """Fresh episodes in every environment: the rollout's numpy state."""
        n = self.run_config.num_envs
        obs, _ = self.env.reset(seed=self.run_config.seed + 7919 * int(self.step))
        return {
            "obs": obs,
            "state": self.policy.initial_state(n),
            "first": np.ones(n, bool),
            "in_last": np.zeros(n, bool),  # the step that produced obs ended its episode
            "in_reward": np.zeros(n, np.float32),  # reward of arriving at obs
            "in_discount": np.ones(n, np.float32),  # 1 - terminated of arriving at obs
            "ep_return": np.zeros(n),
        }

    def _collect(self, roll: dict, random_phase: bool, returns, window: dict) -> None:
        """One vector step: act, step the envs, store the step (ALF alignment), count."""
        action, info, roll["state"] = self.policy.step(
            roll["obs"], roll["first"], None, None, roll["state"], random_phase
        )
        next_obs, reward, terminated, truncated, _ = self.env.step(action)
        is_last = np.logical_or(terminated, truncated)
        self.replay.add(
            {
                "observation": roll["obs"],
                "reward": roll["in_reward"],
                "discount": roll["in_discount"],
                "is_last": roll["in_last"],
                "prev_tau": info["prev_tau"],
                "tau": info["tau"],
                "b": info["b"],
            }
        )
        if not random_phase:
            window["steps"] += len(is_last)
            window["starts"] += int(np.sum((info["b"] > 0) | roll["first"]))
        roll["ep_return"] += reward
        for i in np.flatnonzero(is_last):
            returns.append(float(roll["ep_return"][i]))
            roll["ep_return"][i] = 0.0
            self.episodes += 1
        # NEXT_STEP autoreset: next_obs is an episode's final observation where is_last;
        # the step after it returns the next episode's first observation.
        roll["obs"], roll["first"], roll["in_last"] = next_obs, roll["in_last"], is_last
        roll["in_reward"] = np.asarray(reward, np.float32)
        roll["in_discount"] = 1.0 - np.asarray(terminated, np.float32)
        self.step += len(is_last)

    def _close(self) -> None:
        self.env.close()
        if self.eval_env is not None:
            self.eval_env.close()

    def run(self) -> dict:
        """Trains until ``total_steps`` or ``stop_return``; returns the final row.

        A run that already ended at the restored step returns its final row with
        ``already_finished: True`` (no training, no new rows, no export). Ctrl-C: a
        checkpoint is saved and ``stop_signals.RunInterrupted`` raised.
        """
        finished = self.resumed and run_dir.finished_row(self.logdir, self.run_config, self.step)
        if finished:
            self._close()
            self.metrics.close()
            return finished
        progress = Progress(self.run_config.total_steps, self.step)
        self._last_row = (self.step, time.monotonic())
        try:
            with stop_signals.checkpoint_on_interrupt(self, lambda: self.step):
                try:
                    loop = self._loop(progress)
                finally:
                    progress.close()
        except stop_signals.RunInterrupted:
            self._close()
            raise
        return self._finish(*loop, progress)

    def _write_row(self, eval_row, returns, window, learn, progress: Progress) -> None:
        row = self._row(eval_row, self._last_row, returns, window, learn)
        self.metrics.write(row)
        progress.log(row)
        self._last_row = (self.step, time.monotonic())

    def _loop(self, progress: Progress) -> tuple:
        """Collects, trains, logs, evaluates and checkpoints until a stop criterion;
        returns ``(last_eval, solved_wall, returns, window, learn)``."""
        run, cfg = self.run_config, self.config
        roll, returns = self._reset_rollout(), collections.deque(maxlen=20)
        every = run.eval_every
        next_eval = (self.step // every + 1) * every if every else None
        last_log = time.monotonic()
        window = {"steps": 0, "starts": 0}
        learn, last_eval, solved_wall, iteration = {}, None, None, 0
        while self.step < run.total_steps:
            stop_signals.check_stop()
            self._collect(roll, self.step < cfg.initial_collect_steps, returns, window)
            iteration += 1
            if (
                self.step >= cfg.initial_collect_steps
                and iteration % cfg.train_interval == 0
                and self.replay.can_sample(cfg.mini_batch_length)
            ):
                learn = self._train_once()
            progress.update(self.step, returns)
            eval_row = None
            if next_eval is not None and self.step >= next_eval:
                next_eval = (self.step // every + 1) * every
                eval_row = last_eval = self.evaluate()
            final_step = self.step >= run.total_steps  # _finish writes that row
            due = time.monotonic() - last_log >= run.log_every_s and not final_step
            if eval_row is not None or due:
                self._write_row(eval_row, returns, window, learn, progress)
                last_log = time.monotonic()
                window = {"steps": 0, "starts": 0}
            if eval_row is not None and run.stop_return is not None:
                if eval_row["eval_return"] >= run.stop_return:
                    solved_wall = eval_row["wall_time"]
                    break
            if time.monotonic() - self.checkpointer.last_save >= run.checkpoint_every_s:
                self.save()
        return last_eval, solved_wall, returns, window, learn

    def _row(self, eval_row, last, returns, window, learn) -> dict:
        now = time.monotonic()
        row = {
            "step": int(self.step),
            "wall_time": round(self.wall_time(), 3),
            "sps": round((self.step - last[0]) / max(now - last[1], 1e-9), 1),
            "episode_return": float(np.mean(returns)) if returns else None,
            "episodes": int(self.episodes),
            "updates": int(self.learner.updates.numpy()),
            "repeat_length": window["steps"] / window["starts"] if window["starts"] else None,
        }
        row.update(learn)
        if eval_row is not None:
            row.update({k: v for k, v in eval_row.items() if k not in ("step", "wall_time")})
        return row

    def _finish(self, last_eval, solved_wall, returns, window, learn, progress) -> dict:
        if last_eval is None or last_eval["step"] != self.step:
            last_eval = self.evaluate()
            self._write_row(last_eval, returns, window, learn, progress)
        from tfagents_vtrace.agents.taac.export import export_taac_policy

        action_space = self.env.single_action_space
        row = run_dir.finish_run(
            self,
            None,
            last_eval,
            solved_wall,
            self.step,
            export=lambda path: export_taac_policy(
                self.learner, path, action_space, overwrite=True
            ),
            eval_repeat_length=last_eval["eval_repeat_length"],
            updates=int(self.learner.updates.numpy()),
            episodes=int(self.episodes),
            resumed=bool(self.resumed),
        )
        self._close()
        return row


def train(run: RunConfig, agent_config: TaacConfig, network_config, logdir: str, **kwargs) -> dict:
    """Trains TAAC/TaacL/TaacQ into run directory ``logdir``; returns the final row.

    ``kwargs``: ``start_time``, ``env_factory`` (``(num_envs, seed) -> VectorEnv``),
    ``agent_name``; ``strategy`` must be None or single-replica.
    """
    strategy = kwargs.pop("strategy", None)
    placement.require_single_replica(strategy, "TAAC")
    return TaacTrainer(run, agent_config, logdir, network_config=network_config, **kwargs).run()
