"""Where an actor-learner's wall time goes: the ``time_*`` shares and the ``bottleneck`` of
each metrics row.

Actors report the seconds of each unroll spent stepping environments, running the policy and
loading weights (``info["<part>_time"]``, :mod:`tfagents_vtrace.runtime.acting.actor`); the learner
thread's seconds are measured around each update (waiting for unrolls, updating, publishing)
and evaluation. :class:`TimeShares` adds them up between two rows; :func:`time_fractions`
turns them into shares and :func:`bottleneck` names the part that limits training speed.
"""

from __future__ import annotations

ACTOR_TIMES = ("env", "inference", "weights")
"""Actor-side parts of a row's time (``info["<part>_time"]`` of each unroll)."""
LEARNER_TIMES = ("wait", "learner", "publish", "eval")
"""Learner-thread parts: waiting for unrolls, stacking + ``train_step``, ``get_weights`` +
publishing, evaluation."""
WAIT_BOUND = 0.1
"""A learner thread waiting for unrolls less than this share of its time is the bottleneck."""


def time_fractions(actor: dict, learner: dict, interval: float, actor_threads: int) -> dict:
    """The ``time_<part>`` fields of a metrics row, from seconds spent per part.

    Learner-thread parts (:data:`LEARNER_TIMES`) are shares of that thread's wall time, the
    row's ``interval``. Actor parts (:data:`ACTOR_TIMES`, summed over the unrolls the
    learner consumed in the interval) are shares of all actors' wall time, ``interval *
    actor_threads`` (threads or Ray actors); an inline actor (``actor_threads`` 0) runs in
    the learner thread, so its parts are shares of that thread's time too (and ``wait``
    excludes them: the seven parts sum to at most 1). Each is clipped to [0, 1] (an unroll
    may have started in the previous interval) and rounded to 3 digits.
    """
    interval = max(interval, 1e-9)
    actor_wall = interval * max(actor_threads, 1)
    row = {f"time_{part}": _share(seconds, actor_wall) for part, seconds in actor.items()}
    row.update({f"time_{part}": _share(seconds, interval) for part, seconds in learner.items()})
    return row


def _share(seconds: float, wall: float) -> float:
    return round(min(max(seconds / wall, 0.0), 1.0), 3)


def bottleneck(fractions: dict, inline: bool) -> str:
    """Names the part of a row's ``time_<part>`` ``fractions`` that limits training speed.

    Inline actor (``inline``: one thread acts and learns in turn): the largest part other
    than ``wait``. Actor threads or Ray actors: a learner thread that waits for unrolls
    less than :data:`WAIT_BOUND` of its time is always busy, so the largest of its busy
    parts (``learner``, ``publish``, ``eval``) limits; otherwise the learner is starved and
    the actors limit: the largest actor part (``env``, ``inference`` or ``weights``).
    """
    if inline:
        parts = ACTOR_TIMES + LEARNER_TIMES[1:]
    elif fractions["time_wait"] < WAIT_BOUND:
        parts = LEARNER_TIMES[1:]
    else:
        parts = ACTOR_TIMES
    return max(parts, key=lambda part: fractions[f"time_{part}"])


class TimeShares:
    """Seconds per part since the previous row (module docstring).

    Args:
      actor_threads: actor threads or Ray actors (0: one inline actor in the learner thread).
    """

    def __init__(self, actor_threads: int):
        self.actor_threads, self.inline = actor_threads, actor_threads == 0
        self._reset()

    def _reset(self) -> None:
        self.actor = dict.fromkeys(ACTOR_TIMES, 0.0)
        self.learner = dict.fromkeys(LEARNER_TIMES[:-1], 0.0)

    def add_update(self, infos: list[dict], start, received, trained, published) -> None:
        """One update: the unrolls' ``infos`` and the learner thread's ``perf_counter``
        marks (before waiting, unrolls received, trained, published). The inline actor's
        own time (in its infos) is not waiting."""
        for part in ACTOR_TIMES:
            self.actor[part] += sum(info[f"{part}_time"] for info in infos)
        acting = 0.0
        if self.inline:
            acting = sum(info[f"{part}_time"] for info in infos for part in ACTOR_TIMES)
        self.learner["wait"] += max(received - start - acting, 0.0)
        self.learner["learner"] += trained - received
        self.learner["publish"] += published - trained

    def fields(self, interval: float, eval_seconds: float) -> dict:
        """The row's ``time_*`` fractions and ``bottleneck``; restarts the accumulation."""
        learner = {**self.learner, "eval": eval_seconds}
        fractions = time_fractions(self.actor, learner, interval, self.actor_threads)
        self._reset()
        return {**fractions, "bottleneck": bottleneck(fractions, self.inline)}
