"""The environment steps that asynchronous workers may still take, claimed a rollout at a time.

Each worker claims its rollout's steps before acting and gives a claim back when the rollout
is dropped (its iteration raised), and its pool gives it back when the worker is lost (its
environment hung and its thread was abandoned, :mod:`tfagents_vtrace.runtime.acting.workers`), so a
run of any number of workers ends within one rollout of ``total_steps``: ``total <= counted <
total + steps of one claim``.
"""

from __future__ import annotations

import threading


class StepBudget:
    """The global steps the workers may still take: claimed a rollout at a time.

    Args:
      start: steps already taken (the restored global step).
      total: ``total_steps``; claims stop once this many are claimed, so the claimed total
        stays below ``total + steps`` of one claim.
    """

    def __init__(self, start: int, total: int):
        self.claimed, self.total = int(start), int(total)
        self._lock = threading.Lock()

    def claim(self, steps: int) -> bool:
        """Claims ``steps`` if fewer than ``total`` are claimed; returns whether it did."""
        with self._lock:
            if self.claimed >= self.total:
                return False
            self.claimed += int(steps)
            return True

    def release(self, steps: int) -> None:
        """Gives back a claim whose rollout was not counted."""
        with self._lock:
            self.claimed -= int(steps)
