"""Asynchronous workers: threads that each repeat one iteration (act, then update a shared
learner) until the run's step budget is spent (A3C, ACER with workers).

Mnih et al., "Asynchronous Methods for Deep Reinforcement Learning", 2016,
https://arxiv.org/abs/1602.01783. Each worker claims its iteration's environment steps from
one :class:`~tfagents_vtrace.runtime.acting.step_budget.StepBudget` before acting and gives them
back when the iteration is dropped (it raised) or the worker is lost, so a run ends within
one iteration of ``total_steps`` whatever the number of workers. Workers count into the
run's :class:`~tfagents_vtrace.runtime.rundir.counters.Counters` themselves; :class:`WorkerPool` is
the driver's view of them: :meth:`WorkerPool.advance` waits a moment and returns the newest
metrics, and an unexpected error in every worker ends the run (as for actor threads). In a
deterministic run the workers take turns in a fixed round-robin order instead, one iteration
per :meth:`WorkerPool.advance`, in the driver's thread.

A worker whose environment call exceeds ``env_step_timeout_s`` (the
:class:`~tfagents_vtrace.envs.failures.Watchdog` of its actor) is lost: its claim goes
back to the budget at once, its thread is abandoned (a daemon that applies no update and
ends if the call ever returns) and the next :meth:`WorkerPool.advance` starts its
replacement (``worker.replacement()``: same id, new environments and seeds), with a warning.
In a deterministic run the workers act in the driver's thread, where a hung call stops the
run instead (:func:`~tfagents_vtrace.runtime.rundir.stop_signals.stop_inline`).
"""

from __future__ import annotations

import logging
import threading
import time

from tfagents_vtrace.envs.failures import (
    ActingError,
    ActorAbandoned,
    first_error,
    stuck,
    timeout_message,
)
from tfagents_vtrace.runtime.acting.step_budget import StepBudget

log = logging.getLogger(__name__)

CLOSE_S = 5.0
"""Seconds :meth:`WorkerPool.close` waits for all its worker threads together."""


class _Slot:
    """One worker's place in the pool: the worker, its thread, its claim and whether it was
    abandoned (all changed under the pool's lock)."""

    def __init__(self, index: int, worker):
        self.index, self.worker = index, worker
        self.thread: threading.Thread | None = None
        self.claimed = False
        self.abandoned = False


class WorkerPool:
    """Runs ``workers`` on threads (module docstring).

    Args:
      workers: objects with ``iterate() -> dict | None`` (the iteration's metrics, None when
        it was dropped), ``close()`` (called in the worker's thread when it ends), an
        ``actor`` (:class:`~tfagents_vtrace.runtime.acting.actor.Actor`, watched for hung calls)
        and optionally ``replacement()`` (a new worker in its place, see above). The list is
        updated in place when a worker is replaced.
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
        self.slots = [_Slot(i, w) for i, w in enumerate(workers)]
        self._lock = threading.Lock()
        self._lost: list[_Slot] = []
        self.errors: list[BaseException] = []

    @property
    def threads(self) -> list:
        return [slot.thread for slot in self.slots if slot.thread is not None]

    def start(self) -> None:
        for slot in self.slots:
            if not self.deterministic:
                self._start(slot)
            elif _actor(slot.worker) is not None:  # acts in the driver's thread
                _actor(slot.worker).watch(None)

    def _start(self, slot: _Slot) -> None:
        slot.thread = threading.Thread(target=self._work, args=(slot,),
                                       name=f"worker-{slot.index}", daemon=True)  # fmt: skip
        actor = _actor(slot.worker)
        if actor is not None:
            actor.watch(lambda elapsed: self._timed_out(slot, elapsed))
        slot.thread.start()

    def _timed_out(self, slot: _Slot, elapsed: float) -> None:
        """The watchdog's callback: gives the slot's claim back and abandons its thread."""
        actor = _actor(slot.worker)
        log.warning(
            "%s; abandoning worker %d's thread and starting a new worker with new environments",
            timeout_message(actor.what, elapsed, actor.timeout_s), slot.index,
        )  # fmt: skip
        with self._lock:
            if slot.claimed:
                self.budget.release(self.steps)
                slot.claimed = False
            slot.abandoned = True
            actor.abandoned = True
            self._lost.append(slot)
        actor.unwatch()

    def _work(self, slot: _Slot) -> None:
        worker = slot.worker
        try:
            while not self.stop.is_set():
                with self._lock:
                    if slot.abandoned or not self.budget.claim(self.steps):
                        return
                    slot.claimed = True
                metrics = None
                try:
                    metrics = worker.iterate()
                finally:
                    with self._lock:
                        if slot.claimed and metrics is None:  # dropped (or raised)
                            self.budget.release(self.steps)
                        slot.claimed = False
                if slot.abandoned:
                    return
                self.metrics = metrics or self.metrics
        except ActorAbandoned:
            pass  # its replacement works in its place
        except BaseException as error:  # noqa: BLE001 - reported by advance()
            if not slot.abandoned:
                self.errors.append(error)
                if isinstance(error, ActingError):  # one line for the user, no traceback
                    log.error("%s", error)
                else:
                    log.exception("worker %s failed", threading.current_thread().name)
        finally:
            try:
                worker.close()
            except Exception:  # noqa: BLE001, S110 - a broken environment may fail to close
                pass

    def _replace_lost(self) -> None:
        """Starts the replacements of the lost workers (in the driver's thread)."""
        while self._lost:
            slot = self._lost.pop(0)
            make = getattr(slot.worker, "replacement", None)
            if make is None or self.stop.is_set():
                continue
            new = _Slot(slot.index, make())
            self.slots[slot.index] = new
            self.workers[slot.index] = new.worker
            self._start(new)

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
        if self._lost:
            self._replace_lost()
        time.sleep(self.poll_s)
        if self.errors and not any(t.is_alive() for t in self.threads):
            raise first_error(self.errors, "workers")
        return self.metrics

    def close(self) -> None:
        """Stops the workers after their current iteration (waiting :data:`CLOSE_S` seconds
        at most for all of them, and not for one stuck in an environment call: a daemon
        thread, left behind); closes those that never ran."""
        self.stop.set()
        deadline = time.monotonic() + CLOSE_S
        for slot in self.slots:
            actor = _actor(slot.worker)
            if actor is not None:
                actor.unwatch()
            if slot.thread is None:
                slot.worker.close()
            elif not slot.abandoned and not stuck(actor):
                slot.thread.join(timeout=max(deadline - time.monotonic(), 0.0))


def _actor(worker):
    """The worker's :class:`~tfagents_vtrace.runtime.acting.actor.Actor`, if it has one."""
    return getattr(worker, "actor", None)
