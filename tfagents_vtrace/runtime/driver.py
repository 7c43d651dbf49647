"""The run driver: one run lifecycle for every agent (docs/design.md, "The run agent").

As Acme's environment loop (``acme/environment_loop.py``) drives any agent with an injected
counter, logger and checkpointer, :class:`Driver` owns a run's life and the agent only
computes. It restores the run directory's checkpoint or writes a step-0 one (a run killed
before its first timed checkpoint resumes by the same command), counts
(:mod:`~tfagents_vtrace.runtime.rundir.counters`), calls the agent until ``total_steps``, writes a
metrics row (``metrics.jsonl`` + TensorBoard, trimmed to the checkpoint on resume) every
hundredth of ``total_steps`` or every ``log_every_s`` seconds, whichever comes first, once
the step moved (steps only with ``log_every_steps`` or ``deterministic``), evaluates greedily
every ``eval_every`` steps on separate environments (in the loop, or with ``eval_background``
in a thread beside it: :class:`~tfagents_vtrace.runtime.acting.evaluation.
BackgroundEvaluations`), checkpoints every ``checkpoint_every_s`` seconds (one trigger
semantics for the three: :mod:`~tfagents_vtrace.runtime.rundir.triggers`), stops at the
first evaluation reaching ``stop_return`` with the evaluated weights, and ends with an
evaluation, a checkpoint, the export to ``DIR/policy`` and ``final.json``. An ended run is
not retrained.

A user's callbacks (:mod:`~tfagents_vtrace.runtime.callbacks`) run in the driver's thread:
``on_row`` after each row (one returning true ends the run at that row, as at
``total_steps``, its final row marked ``stopped_by``), ``on_checkpoint`` after each
checkpoint of the loop and ``on_end`` with the final row; with none, the loop does no more
than without them.

One failure policy for every agent: an update whose loss or gradient is not finite is
skipped and counted by the learner (``nonfinite_streak``); after ``max_nonfinite_updates``
in a row the driver saves the last good weights and raises :class:`NonFiniteLossError`. A
stop request (Ctrl-C, SIGTERM: :mod:`~tfagents_vtrace.runtime.rundir.stop_signals`) ends the run
between two iterations with a checkpoint and ``RunInterrupted``.

The agent (:class:`RunAgent`) has one of three process shapes: an actor-learner over an
unroll source (IMPALA, A2C: :mod:`~tfagents_vtrace.runtime.actor_learner`), asynchronous
workers (A3C, ACER with workers: :mod:`~tfagents_vtrace.runtime.acting.workers`), or inline (ACER,
TAAC).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time

from tfagents_vtrace.envs.failures import EnvFailure
from tfagents_vtrace.replay import storage
from tfagents_vtrace.runtime import groups, self_play
from tfagents_vtrace.runtime import strategy as strategy_lib
from tfagents_vtrace.runtime.acting.evaluation import BackgroundEvaluations, Evaluator
from tfagents_vtrace.runtime.callbacks import CallbackError, CallbackList
from tfagents_vtrace.runtime.rundir.checkpointing import Checkpointer, warm_start
from tfagents_vtrace.runtime.rundir.config_io import dumps, run_config_dict, write_config
from tfagents_vtrace.runtime.rundir.counters import Counters
from tfagents_vtrace.runtime.rundir.metrics_log import MetricsLog
from tfagents_vtrace.runtime.rundir.progress import Progress
from tfagents_vtrace.runtime.rundir.run_dir import (
    discard_start_files,
    export_into_run,
    finished_row,
    remove_partial_exports,
    with_policy,
)
from tfagents_vtrace.runtime.rundir.stop_signals import (
    RunInterrupted,
    check_stop,
    checkpoint_on_interrupt,
    clear_stop,
    register_saver,
    stop_requested,
    stop_saved,
)
from tfagents_vtrace.runtime.rundir.triggers import EitherTrigger, IntervalTrigger, TimeTrigger
from tfagents_vtrace.runtime.rundir.write_errors import WriteError, writing
from tfagents_vtrace.utils.blas import one_blas_thread

log = logging.getLogger(__name__)


class NonFiniteLossError(RuntimeError):
    """Raised after too many consecutive non-finite updates (a checkpoint is saved first)."""


def make_driver(run, agent, agent_config, network_config, logdir: str, **kwargs) -> Driver:
    """A :class:`Driver` of ``agent`` (an :class:`~tfagents_vtrace.agents.spec.AgentSpec`)
    into run directory ``logdir``, of the run agent its ``run_agent(...)`` returns.

    ``kwargs``: ``strategy``, ``start_time`` (``time.time()`` at process start),
    ``env_factory`` (``(num_envs, seed) -> VectorEnv``, e.g. failing environments in
    tests), ``agent_name`` (stored in config.json; default: the spec's name),
    ``callbacks`` and ``verbose`` (:class:`Driver`) and the agent's own keyword arguments.
    """
    name = kwargs.pop("agent_name", None) or agent.name
    start_time = kwargs.pop("start_time", None)
    callbacks, verbose = kwargs.pop("callbacks", None), kwargs.pop("verbose", 1)
    kwargs.setdefault("strategy", None)
    seed_everything(run)  # before any network is built
    if groups.is_group_run(run):  # one run agent per group of a game's agents
        glue = groups.GroupsAgent(run, agent, agent_config, network_config, **kwargs)
    else:
        glue = agent.run_agent(run, agent_config, network_config, **kwargs)
    config = run_config_dict(name, run, agent_config, network_config)
    driver = Driver(
        run,
        glue,
        logdir,
        config,
        start_time,
        kwargs["strategy"],
        kwargs.get("env_factory"),
        callbacks=callbacks,
        verbose=verbose,
    )
    if driver.role.is_chief and verbose:
        print_compute_dtype(network_config, agent_config)
    return driver


def setting_variables(items: dict) -> list[tuple]:
    """``(variable, value)`` of the variables among checkpoint ``items`` that hold a setting
    rather than learned state: Keras optimizers' ``learning_rate`` (a variable when the rate
    is constant). Read before a restore and assigned after it, so that a resumed run trains
    at the rate its command gives, as ``config.json`` says, not at the checkpoint's."""
    import keras

    found, seen = [], set()

    def visit(value) -> None:
        if isinstance(value, keras.optimizers.Optimizer):
            for variable in value.variables:
                visit(variable)
        elif isinstance(value, list | tuple):
            for item in value:
                visit(item)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item)
        elif getattr(value, "name", None) == "learning_rate" and hasattr(value, "assign"):
            if id(value) not in seen:
                seen.add(id(value))
                found.append((value, value.numpy()))

    visit(items)
    return found


def print_compute_dtype(network_config, agent_config=None) -> None:
    """The start line ``cnn compute dtype: bfloat16 (auto: CPU has amx_bf16)`` on stderr,
    for a network with a conv torso ("auto" resolved for this machine, as the network was),
    then a warning line for each setting that made a conv torso's learner several times
    slower on a CPU (``networks.precision.cpu_learner_warnings``: XLA from
    ``agent_config.jit_compile``, oneDNN off, bfloat16 forced without the instructions)."""
    from tfagents_vtrace.networks.config import CONV_TORSOS
    from tfagents_vtrace.networks.precision import compute_dtype_choice, cpu_learner_warnings

    value = getattr(network_config, "cnn_compute_dtype", None)
    if value is None or getattr(network_config, "torso", "mlp") not in CONV_TORSOS:
        return
    dtype, why = compute_dtype_choice(value)
    print(f"cnn compute dtype: {dtype} ({why})", file=sys.stderr, flush=True)
    jit = bool(getattr(agent_config, "jit_compile", False))
    for line in cpu_learner_warnings(value, jit):
        print(line, file=sys.stderr, flush=True)


def seed_everything(run) -> None:
    """Seeds Python's, numpy's and TensorFlow's global generators (network initialisation)
    from ``run.seed``; with ``run.deterministic`` also turns on TensorFlow op determinism
    (ops run their deterministic kernels, or raise where none exists)."""
    import tensorflow as tf

    tf.keras.utils.set_random_seed(run.seed)
    if run.deterministic:
        tf.config.experimental.enable_op_determinism()


def train(run, agent, agent_config, network_config, logdir: str, **kwargs) -> dict:
    """Trains ``agent`` into ``logdir`` (:func:`make_driver`); returns the final row."""
    return make_driver(run, agent, agent_config, network_config, logdir, **kwargs).run()


class Driver:
    """Runs ``agent`` into run directory ``logdir`` (module docstring); :meth:`run` trains.

    Args:
      run: the :class:`~tfagents_vtrace.runtime.config.RunConfig`.
      agent: a :class:`RunAgent`.
      logdir: the run directory (resumed when it holds a checkpoint).
      config: what ``config.json`` holds (``config_io.run_config_dict``).
      start_time: ``time.time()`` at process start (wall times count from it).
      strategy: the learner's strategy; under ``multi_worker`` only the chief writes
        ``logdir`` (the others a temporary directory) and checkpoints follow steps.
      env_factory: ``(num_envs, seed) -> VectorEnv`` of the evaluation (and the agent's).
      callbacks: a :class:`~tfagents_vtrace.runtime.callbacks.CallbackList` (or what one
        takes: a list of callbacks); not on a multi-worker cluster.
      verbose: 0 shows no progress line and no start line (resume, compute dtype); 1 does.
    """

    def __init__(
        self,
        run,
        agent,
        logdir,
        config,
        start_time=None,
        strategy=None,
        env_factory=None,
        *,
        callbacks=None,
        verbose: int = 1,
    ):
        self.run_config, self.agent, self.env_factory = run, agent, env_factory
        self.strategy, self.role = strategy, strategy_lib.worker_role(strategy)
        if not isinstance(callbacks, CallbackList):
            callbacks = CallbackList(callbacks)
        if callbacks and self.role.task_type is not None:
            raise ValueError(
                "callbacks: not on a multi-worker cluster (a callback's stop would not reach "
                "the other workers, which train in step)"
            )
        self.callbacks, self.verbose = callbacks, verbose
        self._stopped_by: str | None = None  # the callback that stopped the run
        self.chief_logdir, self.logdir = logdir, strategy_lib.write_dir(logdir, self.role)
        items = agent.checkpoint_items()
        if "network" not in items:
            raise ValueError(f"checkpoint_items: a 'network' entry is required, {sorted(items)}")
        if run.eval_background and self.role.task_type is not None:
            raise ValueError(
                "eval_background: not on a multi-worker cluster (its workers evaluate in "
                "step); evaluate in the training loop (eval_background=False)"
            )
        self.checkpointer = Checkpointer(self.logdir, items)
        self.extra_restored = 0
        self._save_lock = threading.Lock()  # the loop's saves and a stop's grace save
        settings = setting_variables(items)
        self.resumed = strategy_lib.restore_checkpoint(
            self.checkpointer, logdir, self.role, accept=self._restore_extra
        )
        if self.resumed:  # the command's settings, not the checkpoint's, go on
            for variable, value in settings:
                variable.assign(value)
        elif run.init_from:  # before the step-0 checkpoint and the first weights published
            started = warm_start(items, run.init_from)
            if self.role.is_chief:
                print(started, file=sys.stderr, flush=True)
        restored = self.checkpointer.values() if self.resumed else {}
        self.counters = Counters(restored, start_time)
        if self.resumed and self.role.is_chief and verbose:
            step = self.counters.env_steps
            print(f"Resuming {logdir} from step {step} (ckpt-{step}).", file=sys.stderr, flush=True)
        self._saved_step = self.counters.env_steps if self.resumed else None
        if self.resumed and agent.extra_state is not None:
            # A start killed between a checkpoint and the prune after it left the archive of
            # a step no longer kept; a resumed run may end without saving again.
            storage.prune_replays(self.logdir, self.checkpointer.steps())
        self.metrics = MetricsLog(self.logdir)
        with writing("metrics", self.metrics.path):
            self.metrics.truncate_after(self.counters.env_steps if self.resumed else -1)
        with writing("run config", os.path.join(self.logdir, "config.json")):
            write_config(self.logdir, config)
        if self.role.is_chief:
            remove_partial_exports(self.logdir)
        self._metrics: dict = {}
        self._eval_seconds, self.eval_weights = 0.0, None
        # The newest evaluation row of the run: a resumed run whose last row evaluated the
        # restored step (a kill during the final evaluation's export) is not evaluated again.
        self._last_eval: dict | None = None
        last = self.metrics.last_row
        if (
            last is not None
            and last.get("step") == self.counters.env_steps
            and "eval_return" in last
        ):
            self._last_eval = last
        self._row_step, self._row_time = self.counters.env_steps, time.monotonic()
        self._row_cpu = time.process_time()

    # ------------------------------------------------------------------ checkpoints
    def save(self) -> str:
        """Extra state (replay) first, then the checkpoint of the same step; stale archives
        are pruned. Counters are read once, under the agent's lock. A step already saved (or
        restored) is not written again.

        Raises:
          WriteError: the archive or the checkpoint could not be written (the previous
            checkpoint stays intact: TensorFlow commits a checkpoint by renaming it).
        """
        state = self.agent.extra_state
        with self._save_lock, self.agent.lock:
            counts = self.counters.snapshot()
            step = counts["env_steps"]
            if step == self._saved_step:
                return self.checkpointer.path(step)
            if state is not None:
                archive = storage.replay_path(self.logdir, step)
                with writing("replay archive", archive):
                    state.save(archive)
            with writing("checkpoint", self.checkpointer.path(step)):
                path = self.checkpointer.save(**counts)
            self._saved_step = step
            if state is not None:
                storage.prune_replays(self.logdir, self.checkpointer.steps())
        return path

    def _checkpoint(self) -> str:
        """:meth:`save` in the loop, then the callbacks' ``on_checkpoint`` when it wrote a new
        checkpoint (only a stop signal's grace watchdog saves from another thread, and the
        run then ends with ``RunInterrupted``)."""
        before = self._saved_step
        path = self.save()
        if self.callbacks and self._saved_step != before:
            self.callbacks.checkpoint(self._saved_step, path)
        return path

    def _stop_save(self) -> tuple[int, str]:
        """``(step, path)`` of a checkpoint of the newest state: what a stop signal's grace
        watchdog calls from its own thread when the loop did not stop in time."""
        path = self.save()
        return self._saved_step, path

    def _restore_extra(self, step: int) -> None:
        """Loads the replay archive of checkpoint ``step`` (``Checkpointer.restore`` moves
        both aside and falls back when its checksum fails)."""
        state = self.agent.extra_state
        if state is None:
            return
        path = storage.replay_path(self.chief_logdir, step)
        if not os.path.exists(path):
            log.warning("no replay archive %s: the replay starts empty", path)
            return
        state.load(path)
        self.extra_restored = len(state)

    # ------------------------------------------------------------------ the run
    def run(self) -> dict:
        """Trains until ``total_steps``, ``stop_return`` or a fatal error; the final row.

        A run that already ended at the restored step returns its final row with
        ``already_finished: True`` (no training, no new rows, no export). Ctrl-C / SIGTERM
        (a stop request): acting stops, a checkpoint is saved and ``RunInterrupted`` raised.
        The callbacks' ``on_end`` get the row last, with ``policy`` as ``tv.train`` returns it
        (:func:`~tfagents_vtrace.runtime.rundir.run_dir.with_policy`).

        Raises:
          CallbackError: a callback raised (after a checkpoint of the newest state).
        """
        with one_blas_thread():  # the numpy policies' small products (utils/blas.py)
            final = self._run_or_finished()
        if self.callbacks:
            self.callbacks.end(with_policy(final, self.chief_logdir))
        return final

    def _run_or_finished(self) -> dict:
        run, counters = self.run_config, self.counters
        finished = self.resumed and finished_row(self.chief_logdir, run, counters.env_steps)
        if finished:
            self.agent.close()
            self._close_metrics()
            return finished
        try:
            return self._run()
        except WriteError as e:  # keep the newest state where the disk allows
            if e.what != "checkpoint" and self._saved_step is not None and self.role.is_chief:
                with contextlib.suppress(WriteError):
                    self.save()
            raise
        except RunInterrupted:
            raise
        except BaseException as error:
            if self._saved_step is None and self.role.is_chief:  # a start that failed
                self._close_metrics()
                discard_start_files(self.logdir)
            elif self.role.task_type is None and not isinstance(error, WriteError):
                self._save_after(error)  # the newest state, where it can be had
            raise
        finally:
            self.checkpointer.close()

    def _save_after(self, error: BaseException) -> None:
        """Checkpoints the newest state before ``error`` ends the run (a fault of acting,
        of memory, of a callback...); a save that fails too leaves the previous checkpoint."""
        try:
            path = self.save()
        except Exception as save_error:  # noqa: BLE001 - the first error is the one to report
            log.warning("no checkpoint after %r: %r", error, save_error)
            return
        with contextlib.suppress(Exception):
            self._close_metrics()
        if isinstance(error, CallbackError):  # its one line names the checkpoint
            error.checkpoint = path
        elif hasattr(error, "add_note"):
            error.add_note(f"checkpoint {path} holds the newest state")

    def _solved_before(self) -> bool:
        """Whether the restored step's evaluation row (a run killed after it solved, before
        it ended) reached ``stop_return``."""
        stop, row = self.run_config.stop_return, self._last_eval
        return stop is not None and row is not None and (row.get("eval_return") or -1e300) >= stop

    def _run(self) -> dict:
        run, counters = self.run_config, self.counters
        # Multi-worker saves are collective, so only a single process saves on Ctrl-C.
        guard = checkpoint_on_interrupt(self, lambda: self.counters.env_steps)
        progress = Progress(run.total_steps, counters.env_steps, enabled=bool(self.verbose))
        policy = self.agent.evaluation_policy()
        evaluator = self_play.make_evaluator(run, policy, self.env_factory)
        background = None
        if run.eval_background:
            background = BackgroundEvaluations(evaluator, counters.wall_time)
        start, start_steps = time.monotonic(), counters.env_steps
        cpu_start = time.process_time()
        single = self.role.task_type is None
        try:
            # Acting closes before a stop is saved, so the checkpoint holds what the workers
            # last counted; closing does not wait on a thread stuck in its environment, and a
            # stop's grace watchdog saves from its own thread if closing takes too long.
            with guard if single else contextlib.nullcontext():
                with register_saver(self._stop_save) if single else contextlib.nullcontext():
                    try:
                        solved = self._solved_before()
                        self.agent.start(counters)
                        if not self.resumed:
                            self._checkpoint()  # step 0: the same command resumes an early kill
                        try:
                            solved = solved or self._loop(evaluator, progress, background)
                        except EnvFailure:  # the learner is fine: keep its work
                            if single:
                                self.save()
                            raise
                    finally:
                        self.agent.close()
                        progress.close()
            steps = counters.env_steps - start_steps
            sps = steps / max(time.monotonic() - start, 1e-9)
            cpu = 1e3 * (time.process_time() - cpu_start) / steps if steps else None
            last_eval = self._last_eval
            if solved and self.eval_weights is not None:  # keep (and export) those weights
                self.agent.set_weights(self.eval_weights)
            elif last_eval is None or last_eval["step"] != counters.env_steps:
                last_eval = self._evaluate(evaluator)
                self._write_row(last_eval, progress)
        finally:
            if background is not None:
                background.close()
            evaluator.close()
        solved_wall = last_eval["wall_time"] if solved else None
        return self._finish(last_eval, solved_wall, round(sps, 1), cpu)

    def _loop(
        self, evaluator: Evaluator, progress: Progress, background: BackgroundEvaluations | None
    ) -> bool:
        """Advances the agent, writes rows, evaluates (in the loop, or in ``background``) and
        checkpoints until ``total_steps``, ``stop_return`` or a callback's stop
        (``_stopped_by``); returns whether an evaluation reached ``stop_return`` (then it is
        ``_last_eval``, its weights ``eval_weights``)."""
        run, counters = self.run_config, self.counters
        evals = IntervalTrigger(run.eval_every, counters.env_steps)
        rows = IntervalTrigger(run.row_every_steps, counters.env_steps)
        if run.row_every_s is not None:  # else steps only: the same rows whatever the load
            rows = EitherTrigger(rows, TimeTrigger(run.row_every_s))
        if self.role.task_type is None:
            saves = TimeTrigger(run.checkpoint_every_s)
        else:  # multi_worker saves are collective: every worker saves at the same step
            every = run.eval_every or max(run.total_steps // 10, 1)
            saves = IntervalTrigger(every, counters.env_steps)
        while counters.env_steps < run.total_steps:
            if self.role.task_type is None:
                check_stop()
            elif strategy_lib.any_worker(self.strategy, stop_requested()):
                self._stop_together()
            self._metrics = self.agent.advance() or self._metrics
            step = counters.env_steps
            progress.update(step, counters.returns)
            self._check_finite()
            due = evals(step)
            if background is None:
                done = [(self._evaluate(evaluator), self.eval_weights)] if due else []
            else:  # at most one evaluation playing and one waiting
                done = self._finished(background, keep=1 if due else None)
                if due:
                    with self.agent.lock:
                        background.submit(self.agent.get_weights(), counters.env_steps)
            if done:
                if self._write_evals(done, progress):
                    return True
                if self._stopped_by is not None:
                    return False
            elif self._row_step < step < run.total_steps and rows(step):
                if self._write_row(None, progress):
                    return False
            if saves(step) and step < run.total_steps:  # the final one follows the loop
                self._checkpoint()
        if background is not None:  # the evaluations still playing
            return self._write_evals(self._finished(background, 0), progress)
        return False

    def _stop_together(self) -> None:
        """A stop on a multi-worker cluster: every worker saves at this same update (the
        save is collective; only the chief writes the run directory) and raises
        :class:`RunInterrupted`."""
        clear_stop()
        path = self.save()
        stop_saved(self.counters.env_steps, path)
        self._close_metrics()
        raise RunInterrupted(self.counters.env_steps, path)

    def _finished(self, background: BackgroundEvaluations, keep: int | None) -> list:
        """``(row, weights)`` of the background evaluations that finished, waiting until at
        most ``keep`` are pending (:meth:`BackgroundEvaluations.finished`); the wait counts
        as evaluation time."""
        start = time.perf_counter()
        done = background.finished(keep)
        if keep is not None:
            self._eval_seconds += time.perf_counter() - start
        return done

    def _write_evals(self, done: list, progress: Progress) -> bool:
        """Writes the rows of ``(row, weights)`` evaluations in order, up to the first that
        reaches ``stop_return`` or that a callback stops at, each one's row becoming
        ``_last_eval`` and its weights ``eval_weights`` (a solving one's are kept). Returns
        whether one reached ``stop_return``."""
        stop = self.run_config.stop_return
        for row, weights in done:
            self.eval_weights, self._last_eval = weights, row
            stopped = self._write_row(row, progress)
            if stop is not None and row["eval_return"] >= stop:
                return True
            if stopped:
                return False
        return False

    def _check_finite(self) -> None:
        streak = int(self._metrics.get("nonfinite_streak", 0))
        if streak >= self.agent.max_nonfinite_updates:
            path = self.save()
            raise NonFiniteLossError(
                f"{streak} consecutive updates had a non-finite loss or gradient (at step "
                f"{self.counters.env_steps}); training stopped. The last good weights are in "
                f"checkpoint {path}."
            )

    def _evaluate(self, evaluator: Evaluator) -> dict:
        """Greedy evaluation of a copy of the weights (kept: a solving one is restored)."""
        start = time.perf_counter()
        with self.agent.lock:
            self.eval_weights, step = self.agent.get_weights(), self.counters.env_steps
        evaluator.set_weights(self.eval_weights)
        row = evaluator.run(key=int(step))
        row.update(step=int(step), wall_time=round(self.counters.wall_time(), 3))
        self._eval_seconds += time.perf_counter() - start
        return row

    def _write_row(self, eval_row: dict | None, progress: Progress) -> bool:
        """Writes a metrics row (with ``eval_row``'s fields) and shows it; the callbacks'
        ``on_row`` get it as written. Returns whether a callback stopped the run at it."""
        now, step, cpu = time.monotonic(), self.counters.env_steps, time.process_time()
        interval = max(now - self._row_time, 1e-9)
        steps = step - self._row_step
        row = {
            "step": int(step),
            "wall_time": round(self.counters.wall_time(), 3),
            "sps": round(steps / interval, 1),
            # the process's CPU time (every thread's) per agent step since the last row
            "cpu_ms_per_step": round(1e3 * (cpu - self._row_cpu) / steps, 4) if steps else None,
            **self.counters.row(),
            **{k: v for k, v in self._metrics.items() if k != "nonfinite_streak"},
            **self.agent.row_fields({"interval": interval, "eval": self._eval_seconds}),
        }
        if eval_row is not None:
            row.update({k: v for k, v in eval_row.items() if k not in ("step", "wall_time")})
        self._eval_seconds, self._row_step, self._row_time = 0.0, step, now
        self._row_cpu = cpu
        with writing("metrics", self.metrics.path):
            self.metrics.write(row)
        progress.log(row)
        if not self.callbacks:
            return False
        stop = self.callbacks.row(json.loads(dumps(row)))  # as metrics.jsonl holds it
        if stop is not None and self._stopped_by is None:
            self._stopped_by = stop
        return stop is not None

    def _close_metrics(self) -> None:
        with writing("metrics", self.metrics.path):  # TensorBoard's buffered summaries
            self.metrics.close()

    def _finish(
        self, last_eval: dict, solved_wall: float | None, train_sps: float, cpu: float | None
    ) -> dict:
        """The last checkpoint, the export, ``final.json``; returns the final row
        (``train_cpu_ms_per_step``: the process's CPU time, every thread's, per agent step
        of the training loop that ``train_sps`` times; None without a step)."""
        self._checkpoint()
        train_wall = self.counters.wall_time()
        if self.run_config.export_policy:
            policy = os.path.join(self.logdir, "policy")
            with writing("policy", policy):
                export_into_run(policy, self.agent.export)
        self._close_metrics()
        counts, state = self.counters.snapshot(), self.agent.extra_state
        final = {
            "final": True,
            "step": counts["env_steps"],
            "wall_time": round(self.counters.wall_time(), 3),
            "train_wall_time": round(train_wall, 3),
            "solve_wall_time": solved_wall,
            "solve_step": last_eval["step"] if solved_wall is not None else None,
            **{k: v for k, v in last_eval.items() if k not in ("step", "wall_time")},
            "train_sps": train_sps,
            "train_cpu_ms_per_step": None if cpu is None else round(cpu, 4),
            **{k: counts[k] for k in ("updates", "episodes", "env_restarts")},
            "resumed": bool(self.resumed),
            **self.agent.row_fields(None),
        }
        stopped = self._stopped_by is not None and solved_wall is None
        if stopped and final["step"] < self.run_config.total_steps:
            # a stop at the last rows (total_steps reached), or at the evaluation that reached
            # stop_return, is the run's ordinary end
            final.update(stopped_by="callback", stop_callback=self._stopped_by)
        if state is not None:
            final.update(replay_size=len(state), replay_restored=int(self.extra_restored))
        with writing("final row", os.path.join(self.logdir, "final.json")):
            write_config(self.logdir, final, name="final.json")
        return final
