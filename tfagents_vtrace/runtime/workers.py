"""Asynchronous workers: threads that each repeat one iteration (act, then update a shared
learner) until the run's step budget is spent (A3C, ACER with workers).

Mnih et al., "Asynchronous Methods for Deep Reinforcement Learning", 2016,
https://arxiv.org/abs/1602.01783. Each worker claims its iteration's environment steps from
one :class:`~tfagents_vtrace.runtime.step_budget.StepBudget` before acting and gives them
back when the iteration is dropped (its environment failed), so a run ends within one
iteration of ``total_steps`` whatever the number of workers. Workers count into the run's
:class:`~tfagents_vtrace.runtime.counters.Counters` themselves; :class:`WorkerPool` is the
driver's view of them: :meth:`WorkerPool.advance` waits a moment and returns the newest
metrics, and an unexpected error in every worker ends the run (as for actor threads). In a
deterministic run the workers take turns in a fixed round-robin order instead, one iteration
per :meth:`WorkerPool.advance`, in the driver's thread.
"""

from __future__ import annotations

import logging
import threading
import time

from tfagents_vtrace.runtime.env_failures import ActingError, first_error
from tfagents_vtrace.runtime.step_budget import StepBudget

log = logging.getLogger(__name__)


class WorkerPool:
    """Runs ``workers`` on threads (module docstring).

    Args:
      workers: objects with ``iterate() -> dict | None`` (the iteration's metrics, None when
        it was dropped) and ``close()`` (called in the worker's thread when it ends).
      steps: environment steps of one iteration.
      start, total: the restored and the final environment step.
      deterministic: no threads; see :meth:`advance`.
    """

    poll_s = 0.02
    """Seconds :meth:`advance` waits."""

    def __init__(self, workers: list, steps: int, start: int, total: int, deterministic=False):
        self.workers, self.steps = workers, int(steps)
        self.budget = StepBudget(start, total)
        self.stop = threading.Event()
        self.metrics: dict = {}
        # Deterministic runs: no threads; each advance() runs the next worker's iteration
        # in a fixed round-robin order, in the caller's thread.
        self.deterministic, self.turn = deterministic, 0
        self.threads = [
            threading.Thread(target=self._work, args=(w,), name=f"worker-{i}", daemon=True)
            for i, w in enumerate(workers)
        ]
        self.errors: list[BaseException] = []

    def start(self) -> None:
        if self.deterministic:
            return
        for thread in self.threads:
            thread.start()

    def _work(self, worker) -> None:
        try:
            while not self.stop.is_set() and self.budget.claim(self.steps):
                metrics = None
                try:
                    metrics = worker.iterate()
                finally:
                    if metrics is None:  # dropped (or raised): the claim goes back
                        self.budget.release(self.steps)
                self.metrics = metrics or self.metrics
        except BaseException as error:  # noqa: BLE001 - reported by advance()
            self.errors.append(error)
            if isinstance(error, ActingError):  # one line for the user, no traceback
                log.error("%s", error)
            else:
                log.exception("worker %s failed", threading.current_thread().name)
        finally:
            try:
                worker.close()
            except Exception:  # noqa: BLE001 - a broken environment may fail to close too
                pass

    def advance(self) -> dict:
        """Waits ``poll_s``; the newest metrics. Raises RuntimeError once every worker failed.
        Deterministic: runs the next worker's iteration (round robin) and returns its metrics."""
        if self.deterministic:
            worker = self.workers[self.turn % len(self.workers)]
            if self.budget.claim(self.steps):
                metrics = worker.iterate()
                if metrics is None:  # dropped: the same worker tries again
                    self.budget.release(self.steps)
                    return self.metrics
                self.metrics = metrics
            self.turn += 1
            return self.metrics
        time.sleep(self.poll_s)
        if self.errors and not any(t.is_alive() for t in self.threads):
            raise first_error(self.errors, "workers")
        return self.metrics

    def close(self) -> None:
        """Stops the workers after their current iteration; closes those that never ran."""
        self.stop.set()
        for thread, worker in zip(self.threads, self.workers, strict=True):
            if thread.ident is None:
                worker.close()
            else:
                thread.join(timeout=30)
