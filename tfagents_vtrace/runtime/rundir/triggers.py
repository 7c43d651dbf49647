"""Interval triggers: one semantics for "every N steps" and "every N seconds".

As TF-Agents' ``IntervalTrigger`` (``tf_agents/utils/common.py``), one small object answers
whether something periodic is due. Here a trigger is due at the first value at or past each
multiple of its interval (counted from zero, so a resumed run keeps the schedule of the run
it continues); when one value passes several multiples at once the trigger fires once, and
the next multiple above that value is due next. The driver uses it for evaluations (every
``eval_every`` environment steps), metrics rows (every hundredth of ``total_steps`` or every
``log_every_s`` seconds, whichever comes first: :class:`EitherTrigger`) and checkpoints
(every ``checkpoint_every_s`` seconds, or every N steps when the workers of a cluster must
save together).
"""

from __future__ import annotations

import time


class IntervalTrigger:
    """Due at the first ``value`` at or past each multiple of ``interval``.

    Args:
      interval: the period (steps or seconds); 0 or less: never due.
      start: the value now (e.g. the restored step); the first multiple above it is due
        first.
    """

    def __init__(self, interval: float, start: float = 0):
        self.interval = interval
        self.next = self._after(start) if interval > 0 else None

    def _after(self, value: float) -> float:
        return (value // self.interval + 1) * self.interval

    def __call__(self, value: float) -> bool:
        """Whether ``value`` reached the next multiple; if so, the one above ``value`` is
        due next."""
        if self.next is None or value < self.next:
            return False
        self.next = self._after(value)
        return True


class TimeTrigger(IntervalTrigger):
    """An :class:`IntervalTrigger` over seconds of ``time.monotonic()`` since its creation;
    called with any arguments (e.g. the step), it reads the clock."""

    def __init__(self, seconds: float):
        self.origin = time.monotonic()
        super().__init__(seconds, 0.0)

    def __call__(self, *_) -> bool:
        return super().__call__(time.monotonic() - self.origin)


class EitherTrigger:
    """Due when any of ``triggers`` is; each is called every time (none skipped), so each
    keeps its own schedule."""

    def __init__(self, *triggers):
        self.triggers = triggers

    def __call__(self, value: float) -> bool:
        return any([trigger(value) for trigger in self.triggers])
