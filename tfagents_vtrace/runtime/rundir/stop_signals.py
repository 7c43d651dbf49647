"""Stop signals: Ctrl-C, SIGTERM and SIGHUP become a stop request that training loops raise
between two steps, and a stop writes a checkpoint before the run ends, within a grace period.

:func:`tfagents_vtrace.runtime.run.stop_on_signals` turns the signals into
:func:`request_stop` (an exception raised inside TensorFlow's C++ calls can crash the
process); the driver's :func:`check_stop`, once per step, raises it as a
``KeyboardInterrupt``, which :func:`checkpoint_on_interrupt` turns into a checkpoint and
:class:`RunInterrupted`.

A batch scheduler (Slurm, Kubernetes, systemd) sends SIGTERM and then SIGKILL after a grace
period (10-30 s by default), so a stop must be checkpointed within it even when the training
loop cannot reach its next :func:`check_stop` (an environment step that hangs, a worker that
never returns). The first signal therefore also arms a :class:`GraceWatchdog`: if the process
is still running ``grace_s / 2`` seconds later and no stop checkpoint was written, the run's
registered saver (:func:`register_saver`, the driver's ``save``) is called from the
watchdog's thread; at ``grace_s`` (or as soon as that save returns) the process prints the
usual ``interrupted at step N; checkpoint P`` line and ends with exit code 130.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable

_STOP = threading.Event()

GRACE_S = 10.0
"""Seconds from the first stop signal to the process's end at the latest (a scheduler's
SIGKILL usually follows SIGTERM after 10-30 s)."""

EXIT_INTERRUPTED = 130
"""The exit code of a run stopped by a signal (128 + SIGINT, as shells report Ctrl-C)."""


def request_stop() -> None:
    """Asks every training loop of this process to stop at its next step: the safe way for a
    signal handler, since an exception raised inside TensorFlow's C++ calls can crash the
    process."""
    _STOP.set()


def stop_requested() -> bool:
    return _STOP.is_set()


def clear_stop() -> None:
    """Forgets a stop request no loop has seen (a run that ended meanwhile), so the next run
    of this process is not stopped by it."""
    _STOP.clear()


def check_stop() -> None:
    """Raises ``KeyboardInterrupt`` once :func:`request_stop` was called (clearing the
    request); training loops call it once per step, inside :func:`checkpoint_on_interrupt`."""
    if _STOP.is_set():
        _STOP.clear()
        raise KeyboardInterrupt("stop requested")


class RunInterrupted(KeyboardInterrupt):
    """Training stopped by Ctrl-C, SIGTERM or SIGHUP after a checkpoint was written.

    Attributes: ``step`` (environment steps saved) and ``path`` (the checkpoint).
    """

    def __init__(self, step: int, path: str):
        super().__init__(f"interrupted at step {step}; checkpoint {path}")
        self.step, self.path = step, path


# ------------------------------------------------------------------ the stop's checkpoint
class _SaveState:
    """The saver of the run in progress and the checkpoint its stop wrote (one run at a time
    per process: the run directory's lock and the signal handlers are per process too)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.saver: Callable[[], tuple[int, str]] | None = None
        self.saved: tuple[int, str] | None = None


_SAVES = _SaveState()


@contextlib.contextmanager
def register_saver(saver: Callable[[], tuple[int, str]]):
    """Inside, ``saver() -> (step, path)`` is what the grace watchdog calls to checkpoint a
    run whose loop did not stop in time; it must be safe to call from another thread."""
    with _SAVES.lock:
        _SAVES.saver, _SAVES.saved = saver, None
    try:
        yield
    finally:
        with _SAVES.lock:
            _SAVES.saver = None


def stop_saved(step: int, path: str) -> None:
    """Records that the stop's checkpoint (``path``, at ``step``) is on disk: from then on the
    watchdog has nothing to save, only the process's end to enforce."""
    _SAVES.saved = (int(step), str(path))


def interrupted_line(step: int, path: str) -> str:
    return f"{RunInterrupted(step, path)}; run the same command to resume."


def _say(text: str) -> None:
    """Prints ``text`` on stderr; a closed stderr (a dropped terminal) is not an error."""
    with contextlib.suppress(OSError, ValueError):
        print(text, file=sys.stderr, flush=True)


class GraceWatchdog:
    """Ends the process within ``grace_s`` of the first stop signal (module docstring).

    ``exit`` is ``os._exit`` (the process may be stuck in a call that never returns, where no
    exception can reach); tests pass their own. The watchdog does nothing once
    :meth:`disarm` was called (the run ended by itself).
    """

    def __init__(self, grace_s: float = GRACE_S, exit: Callable[[int], None] = os._exit):
        self.grace_s, self._exit = float(grace_s), exit
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def arm(self) -> None:
        """Starts the countdown (once; later calls do nothing)."""
        if self._thread is not None or self.grace_s <= 0:
            return
        self._thread = threading.Thread(target=self._watch, name="stop-grace", daemon=True)
        self._thread.start()

    def disarm(self) -> None:
        self._done.set()

    def _watch(self) -> None:
        start = time.monotonic()
        if self._done.wait(self.grace_s / 2):
            return
        deadline = start + self.grace_s * 0.9
        saved = _SAVES.saved
        if saved is None and _SAVES.saver is not None:
            saved = self._save(deadline)
        elif self._done.wait(max(deadline - time.monotonic(), 0)):
            # the checkpoint is written and what follows it (closing actors) is slow, or the
            # run saves without a saver here (multi-worker runs stop together, collectively)
            return
        saved = saved or _SAVES.saved
        if self._done.is_set():
            return
        if saved is None:
            _say(
                f"interrupted: no checkpoint could be written within {self.grace_s:g} s of the "
                "stop signal; the last checkpoint is kept. Run the same command to resume."
            )
        else:
            _say(interrupted_line(*saved))
        self._exit(EXIT_INTERRUPTED)

    def _save(self, deadline: float) -> tuple[int, str] | None:
        """Calls the registered saver in a thread of its own, waiting until ``deadline``."""
        saver = _SAVES.saver
        if saver is None:
            return None
        result: list = []

        def save() -> None:
            try:
                result.append(saver())
            except BaseException as error:  # noqa: BLE001 - reported as one line
                result.append(error)

        thread = threading.Thread(target=save, name="stop-grace-save", daemon=True)
        thread.start()
        thread.join(max(deadline - time.monotonic(), 0.0))
        if not result:
            return None
        if isinstance(result[0], BaseException):
            _say(f"interrupted: the stop's checkpoint failed: {result[0]}")
            return None
        _SAVES.saved = result[0]
        return result[0]


@contextlib.contextmanager
def checkpoint_on_interrupt(trainer, step: Callable[[], int]):
    """Inside, a ``KeyboardInterrupt`` first saves ``trainer`` (``save()``, then its
    ``metrics`` are closed) and is re-raised as :class:`RunInterrupted`; ``step()`` gives the
    environment steps it saved. Re-running the same command resumes from that checkpoint."""
    try:
        yield
    except RunInterrupted:
        raise
    except KeyboardInterrupt:
        path = trainer.save()
        stop_saved(int(step()), path)
        trainer.metrics.close()
        raise RunInterrupted(int(step()), path) from None


def stop_inline(message: str) -> None:
    """Stops a run whose learner thread is stuck in an environment call that cannot be
    abandoned (the actor steps in the learner's own thread: ``num_actors=0``, ACER without
    workers, a deterministic worker pool, TAAC): logs ``message`` as an error, asks for a
    stop and arms a :class:`GraceWatchdog`, which writes the checkpoint from its own thread
    and ends the process with exit code 1 (a fault, not an interruption)."""
    logging.getLogger(__name__).error("%s; stopping the run", message)
    request_stop()
    GraceWatchdog(exit=lambda code: os._exit(1)).arm()  # a fault, not an interruption
