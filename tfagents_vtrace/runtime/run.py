"""A whole training run as a user starts it, from Python or the command line: the lifecycle
around the run driver (docs/design.md, "The run directory").

:func:`run` takes the run directory's lock (a second trainer on the same directory is refused,
:mod:`~tfagents_vtrace.runtime.rundir.run_lock`), checks the directory (a foreign one is refused, a
run of this config resumes, ``overwrite`` replaces a previous run's own entries:
:func:`~tfagents_vtrace.runtime.rundir.run_dir.prepare_logdir`), turns Ctrl-C, SIGTERM and SIGHUP
into a stop request for the duration (the driver then checkpoints and raises
:class:`~tfagents_vtrace.runtime.rundir.stop_signals.RunInterrupted`; a second Ctrl-C stops at
once), trains through the driver (resume, evaluation, export, ``final.json``) and releases the
lock. A start that fails leaves nothing behind in a new directory.

``tfv-train`` is a shell over it that maps its exceptions to exit codes.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time

from tfagents_vtrace.runtime.rundir import stop_signals

STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
"""Ctrl-C, a scheduler's or service manager's stop, and a closed terminal (SIGHUP)."""


@contextlib.contextmanager
def stop_on_signals(grace_s: float = stop_signals.GRACE_S):
    """Inside, SIGINT, SIGTERM and SIGHUP request a stop and arm a
    :class:`~tfagents_vtrace.runtime.rundir.stop_signals.GraceWatchdog` that ends the process within
    ``grace_s`` (checkpointed: module docstring of ``stop_signals``); a second SIGINT raises
    ``KeyboardInterrupt`` at once. The previous handlers come back afterwards. Only the main
    thread can install handlers: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    watchdog = stop_signals.GraceWatchdog(grace_s)

    def stop(signum, frame) -> None:
        if stop_signals.stop_requested() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop_signals.request_stop()
        watchdog.arm()

    previous = {s: signal.signal(s, stop) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        watchdog.disarm()
        for s, handler in previous.items():
            signal.signal(s, handler)
        stop_signals.clear_stop()


def run(
    configs,
    logdir: str,
    *,
    strategy: str = "default",
    overwrite: bool = False,
    start_time: float | None = None,
    env_factory=None,
    callbacks=None,
    verbose: int = 1,
) -> dict:
    """Trains the run ``configs`` (a :class:`~tfagents_vtrace.settings.RunConfigs`)
    into ``logdir`` and returns its final row (``already_finished: True`` when the run had
    already ended there; the exported policy's path is ``policy``).

    Args:
      strategy: the learner's ``tf.distribute`` strategy ("default", "mirrored",
        "multi_worker").
      overwrite: replace a previous run in ``logdir`` (only its own entries are removed).
      start_time: ``time.time()`` when the user started (wall times count from it).
      env_factory: ``(num_envs, seed) -> VectorEnv`` for the actors and evaluations.
      callbacks: the run's callbacks (:mod:`~tfagents_vtrace.runtime.callbacks`), called in
        the driver's thread; not with the ``multi_worker`` strategy.
      verbose: 0 shows no progress line and no start line; 1 does.

    Raises:
      RunDirLockedError: another trainer holds ``logdir``.
      ValueError: ``logdir`` is refused (another run, files that are not a run's), or a
        config value is bad.
      RunInterrupted: Ctrl-C / SIGTERM; a checkpoint was written, the same call resumes.
      ActingError: the environment kept failing, or the policy went non-finite.
      WriteError: a file of the run could not be written (disk full, read-only).
      CheckpointError: no checkpoint of the directory reads back whole.
      CallbackError: a callback raised; a checkpoint was written first.
    """
    import os

    from tfagents_vtrace.runtime.callbacks import CallbackList
    from tfagents_vtrace.runtime.driver import train
    from tfagents_vtrace.runtime.rundir import config_io, run_dir
    from tfagents_vtrace.runtime.rundir.checkpointing import has_checkpoint
    from tfagents_vtrace.runtime.rundir.run_lock import RunLock
    from tfagents_vtrace.runtime.rundir.write_errors import writing
    from tfagents_vtrace.runtime.strategy import make_strategy, worker_role

    start_time = time.time() if start_time is None else start_time
    logdir = os.fspath(logdir)
    callbacks = CallbackList(callbacks)
    strategy_obj = make_strategy(strategy)
    config = config_io.run_config_dict(
        configs.agent, configs.run_config, configs.agent_config, configs.network_config
    )
    lock = RunLock(logdir)
    try:
        with stop_on_signals(configs.run_config.stop_grace_s):
            if worker_role(strategy_obj).is_chief:  # the others write elsewhere
                with writing("run directory", logdir):
                    lock.acquire()  # before anything in the directory is checked or written
                run_dir.prepare_logdir(logdir, config, overwrite=overwrite)
            for line in getattr(configs, "start_lines", ()):  # e.g. what torso="auto" chose
                print(line, file=sys.stderr, flush=True)
            final = train(
                configs.run_config,
                configs.spec,
                configs.agent_config,
                configs.network_config,
                logdir,
                strategy=strategy_obj,
                start_time=start_time,
                agent_name=configs.agent,
                env_factory=env_factory,
                callbacks=callbacks,
                verbose=verbose,
            )
    finally:
        with contextlib.suppress(OSError):
            lock.release(discard=not has_checkpoint(logdir))
    return run_dir.with_policy(final, logdir)
