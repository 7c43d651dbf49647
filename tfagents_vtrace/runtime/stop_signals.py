"""Stop signals: Ctrl-C and SIGTERM become a stop request that training loops raise between
two steps, and a stop writes a checkpoint before the run ends.

``experiments.train`` turns Ctrl-C and SIGTERM into :func:`request_stop` (an exception raised
inside TensorFlow's C++ calls can crash the process); the driver's :func:`check_stop`, once
per step, raises it as a ``KeyboardInterrupt``, which :func:`checkpoint_on_interrupt` turns
into a checkpoint and :class:`RunInterrupted`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

_STOP = threading.Event()


def request_stop() -> None:
    """Asks every training loop of this process to stop at its next step: the safe way for a
    signal handler (``experiments.train`` calls it on Ctrl-C and SIGTERM), since an exception
    raised inside TensorFlow's C++ calls can crash the process."""
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
    """Training stopped by Ctrl-C or SIGTERM after a checkpoint was written.

    Attributes: ``step`` (environment steps saved) and ``path`` (the checkpoint).
    """

    def __init__(self, step: int, path: str):
        super().__init__(f"interrupted at step {step}; checkpoint {path}")
        self.step, self.path = step, path


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
        trainer.metrics.close()
        raise RunInterrupted(int(step()), path) from None
