"""Greedy evaluation on separate environments: one episode per environment, all at once.

Evaluation uses its own vector env (never the actors'), steps every environment with one
batched greedy policy call, and counts the first episode of each environment, so
``num_episodes`` episodes cost about one episode's worth of policy calls.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import gymnasium as gym
import numpy as np

from tfagents_vtrace.envs.factory import env_action
from tfagents_vtrace.envs.failures import EnvFailure, timeout_message, watchdog

log = logging.getLogger(__name__)


def evaluation_seed(seed: int, key: int) -> int:
    """The reset seed of the evaluation ``key`` of a run seeded ``seed``: a 31-bit hash of
    both. A vector env seeds its environments ``s, s + 1, ...``, so consecutive integers
    would share all but one start state between consecutive evaluations, and between runs
    of neighbouring seeds; hashed, every evaluation starts from its own states."""
    state = np.random.SeedSequence([0xE7A1, int(seed), int(key)]).generate_state(1)
    return int(state[0] >> 1)


class EvaluationCancelled(Exception):
    """An evaluation stopped by :meth:`Evaluator.cancel` (the run is ending)."""


class Evaluator:
    """Mean undiscounted return of ``num_episodes`` greedy episodes.

    Args:
      env_factory: ``(num_envs, seed) -> VectorEnv`` (NEXT_STEP autoreset).
      policy: a greedy acting policy (:mod:`tfagents_vtrace.runtime.acting.policies`); when it has
        ``episode_stats`` (``reset()``, ``add(info, first, running)`` per step, ``fields()``),
        the rows gain its fields (e.g. TAAC's ``eval_repeat_length``).
      num_episodes: environments, hence episodes, per evaluation.
      seed: the run's evaluation seed; an evaluation's environments are reset with
        :func:`evaluation_seed` of it and the evaluation's ``key`` (see :meth:`run`).
      max_steps: safety cap on the steps of one evaluation.
      timeout_s: seconds an environment call may take (``env_step_timeout_s``; None: no
        limit); one that takes longer stops the run with a checkpoint
        (:func:`~tfagents_vtrace.runtime.rundir.stop_signals.stop_inline`): the evaluation's
        environments step in the learner's thread (or the run's one evaluation thread),
        which cannot be replaced.
    """

    def __init__(
        self,
        env_factory,
        policy,
        num_episodes: int = 20,
        seed: int = 0,
        max_steps: int = 100_000,
        timeout_s: float | None = None,
    ):
        if num_episodes < 1:
            raise ValueError(f"eval_episodes: expected >= 1, received {num_episodes}")
        self.env_factory = env_factory
        self.policy = policy
        self.num_episodes = int(num_episodes)
        self.seed = int(seed)
        self.max_steps = int(max_steps)
        self.count = 0
        self._env = None
        self._cancel = threading.Event()
        self.env_call_since = 0.0  # perf_counter() while an env call runs (the watchdog's)
        if timeout_s is not None:
            from tfagents_vtrace.runtime.rundir.stop_signals import stop_inline

            def on_timeout(elapsed: float) -> None:
                stop_inline(timeout_message("the evaluation environment", elapsed, timeout_s))

            watchdog().watch(self, timeout_s, on_timeout)

    def cancel(self) -> None:
        """Stops a running evaluation at its next step (it raises
        :class:`EvaluationCancelled`), and every later one."""
        self._cancel.set()

    def set_weights(self, weights: list[np.ndarray]) -> None:
        self.policy.set_weights(weights)

    def run(self, retries: int = 3, key: int | None = None) -> dict[str, float]:
        """Plays one episode per environment; returns ``eval_return`` (mean) and extras.

        ``key`` picks the episodes' start states (the training driver passes the step of the
        weights, so a resumed run replays the evaluations of an uninterrupted one); without
        it, the evaluations are numbered 0, 1, ... An environment that raises is logged,
        recreated and the evaluation restarted (at most ``retries`` times).
        """
        if key is None:
            key = self.count
        self.count += 1
        for attempt in range(retries + 1):
            try:
                return self._run_once(evaluation_seed(self.seed, key))
            except EvaluationCancelled:
                raise
            except Exception as error:  # noqa: BLE001 - env failures are retried
                if attempt == retries:
                    raise EnvFailure(
                        f"the evaluation environment failed {retries + 1} times in a row; "
                        f"last error: {type(error).__name__}: {error}"
                    ) from error
                log.warning("evaluation env raised %r; recreating it", error)
                self.close()
        raise AssertionError("unreachable")

    def _run_once(self, seed: int) -> dict[str, float]:
        """The first episode of each of ``num_episodes`` environments reset with ``seed``
        (the loop: :func:`tfagents_vtrace.export.playing.play`)."""
        from tfagents_vtrace.export.playing import outcome_rates, play

        if self._env is None:
            self._env = self.env_factory(self.num_episodes, seed)
        n = self._env.num_envs  # a vector of games has a whole number of games' columns
        self.env_call_since = time.perf_counter()
        obs, reset_info = self._env.reset(seed=seed)
        self.env_call_since = 0.0
        space = self._env.single_action_space
        joint = isinstance(space, gym.spaces.Dict)  # every group's actions of a game
        last = {
            "action": None if joint else np.zeros((n, *space.shape), space.dtype),
            "state": self.policy.initial_state(n),
        }
        stats = getattr(self.policy, "episode_stats", None)  # the policy's own fields
        if stats is not None:
            stats.reset()

        def act(obs, first, reward, running):
            if self._cancel.is_set():
                raise EvaluationCancelled("the evaluation was cancelled")
            prev_reward = np.zeros(n, np.float32) if reward is None else reward
            action, info, last["state"] = self.policy.step(
                obs, first, last["action"], np.asarray(prev_reward, np.float32), last["state"]
            )
            if stats is not None:
                stats.add(info, first, running)
            if joint:
                last["action"] = action
                return {g: env_action(a, space[g]) for g, a in action.items()}
            last["action"] = np.asarray(action, space.dtype)
            return env_action(action, space)  # a Box action clipped to its bounds, as acting's

        outcomes: list[int] = []
        returns, lengths = play(_Stamped(self._env, self), obs, act, np.ones(n, np.int64),
                                self.max_steps, reset_info, outcomes)  # fmt: skip
        rates = outcome_rates(outcomes, len(returns))  # a game's wins, draws and losses
        return {
            "eval_return": float(np.mean(returns)),
            "eval_return_min": float(np.min(returns)),
            "eval_length": float(np.mean(lengths)),
            **{f"eval_{k}": v for k, v in rates.items()},
            **(stats.fields() if stats is not None else {}),
        }

    def close(self) -> None:
        if self._env is not None:
            try:
                self._env.close()
            except Exception:  # noqa: BLE001 - a broken env may fail to close too
                pass
            self._env = None


class _Stamped:
    """``env`` whose ``step`` stamps ``owner.env_call_since`` while it runs (the watchdog's
    view of a call that does not return)."""

    def __init__(self, env, owner):
        self.env, self.owner = env, owner

    def step(self, action):
        self.owner.env_call_since = time.perf_counter()
        try:
            return self.env.step(action)
        finally:
            self.owner.env_call_since = 0.0


class BackgroundEvaluations:
    """Evaluations of ``evaluator`` in one thread beside training, finished in the order
    they were submitted (``RunConfig.eval_background``).

    Each evaluation plays with its own copy of the weights, so the learner keeps updating
    while it plays. Its row holds ``step`` and ``eval_step`` (the step of the weights it
    evaluated) and ``wall_time`` (when it finished: when its result was known).

    Args:
      evaluator: the :class:`Evaluator` (used by this thread only while one is pending).
      wall_time: ``() -> float``, the run's wall clock.
    """

    def __init__(self, evaluator: Evaluator, wall_time):
        self.evaluator, self.wall_time = evaluator, wall_time
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="evaluation")
        self._pending: collections.deque = collections.deque()

    def submit(self, weights: list[np.ndarray], step: int) -> None:
        """Queues a greedy evaluation of ``weights`` (a copy taken at ``step``)."""

        def evaluate() -> dict:
            self.evaluator.set_weights(weights)
            row = self.evaluator.run(key=int(step))
            row.update(step=int(step), eval_step=int(step), wall_time=round(self.wall_time(), 3))
            return row

        self._pending.append((self._executor.submit(evaluate), weights))

    def __len__(self) -> int:
        return len(self._pending)

    def finished(self, keep: int | None = None) -> list[tuple[dict, list[np.ndarray]]]:
        """``(row, weights)`` of the evaluations that finished, oldest first; with ``keep``,
        first waits until at most ``keep`` are pending (0: all finished). An evaluation's
        error is raised here."""
        done = []
        while self._pending and (
            self._pending[0][0].done() or (keep is not None and len(self._pending) > keep)
        ):
            future, weights = self._pending.popleft()
            done.append((future.result(), weights))
        return done

    def close(self) -> None:
        """Cancels what is pending or playing and joins the thread."""
        self.evaluator.cancel()
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._pending.clear()


def make_evaluator(run, policy, env_factory=None) -> Evaluator:
    """The greedy :class:`Evaluator` of a run: ``run.eval_episodes`` environments of
    ``run.env_id`` (``make_vector_env`` unless ``env_factory(num_envs, seed)`` is given),
    acting with the greedy ``policy``, seeded from ``run.seed`` (:func:`evaluation_seed`)."""
    if env_factory is None:
        from tfagents_vtrace.envs.factory import vector_env_factory

        env_factory = vector_env_factory(run.env_id, "auto", run.env_kwargs)
    from tfagents_vtrace.envs.failures import step_timeout

    timeout = step_timeout(getattr(run, "env_step_timeout_s", None))
    return Evaluator(env_factory, policy, run.eval_episodes, seed=run.seed, timeout_s=timeout)
