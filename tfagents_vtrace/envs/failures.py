"""What acting does when an environment or the policy misbehaves.

* An environment that raises, returns a malformed result (``reset`` not ``(observation,
  info)``, ``step`` not five values), a non-finite observation or a reward that is not a
  finite float32 number (NaN, infinity, or a float64 such as 1e300 that float32 cannot hold)
  has *failed*. A sub-environment of a sync vector (every ``package.module:Env-v0`` a user
  gives, :class:`~tfagents_vtrace.envs.resilient.ResilientSyncVectorEnv`) is recreated alone
  with a new seed and its episode ends there; the other sub-environments go on. A vector whose
  sub-environments cannot be told apart (a vectorized entry point such as CartPole's, ALE's,
  envpool, an async vector) is recreated whole. Either way the unroll in progress is kept.
* :class:`RestartPolicy` limits the restarts of one environment (a sub-environment, or the
  whole vector) by counting its failures in a window of its own steps: the run ends with
  :class:`EnvFailure` when it failed more than ``max_failures`` times in its last
  ``window_steps`` steps (50 of 100 by default), or more than ``max_consecutive`` times (8)
  in a row, that is, without one successful step in between. A simulator that fails on a
  few percent of its steps therefore runs on indefinitely, while one that fails on every
  step stops the run within about 10 s, with one line naming the environment and its last
  error. The first ``IMMEDIATE`` (3) failures in a row are restarted at once; only from
  the fourth in a row on does a restart wait (0.25 s, doubling up to 2 s), so a flaky
  sub-environment does not stall the others.
* A step (or reset) that does not return within ``env_step_timeout_s`` is a failure too
  (:class:`EnvTimeout`): :class:`Watchdog` is the thread that notices it, and the owner of
  the stuck acting thread abandons it and starts a new actor or worker with new
  environments (:mod:`tfagents_vtrace.runtime.acting.unroll_sources`,
  :mod:`tfagents_vtrace.runtime.acting.workers`); where acting runs in the learner's own thread the
  run is stopped instead (:func:`tfagents_vtrace.runtime.rundir.stop_signals.stop_inline`).
* A non-finite observation never reaches the policy (a categorical sampler fed NaN logits
  can return an index past the last action), and an action outside the action space never
  reaches the environment (under XLA an out-of-range index is clamped silently):
  :class:`InvalidAction` stops the run, and so does an action mask that allows nothing
  (:class:`NoActionAllowed`).
"""

from __future__ import annotations

import collections
import logging
import math
import threading
import time
import weakref
from collections.abc import Callable

import numpy as np

log = logging.getLogger(__name__)


class ActingError(RuntimeError):
    """Acting cannot go on; ``str(error)`` is one line for the user."""


class EnvFailure(ActingError):
    """An environment failed more often than :class:`RestartPolicy` allows, returned what
    the run cannot use, or hung where it cannot be replaced."""


class InvalidAction(ActingError):
    """The policy produced an action outside the action space."""


class NoActionAllowed(ActingError, ValueError):
    """The environment's ``action_mask`` allows no action (for one action dimension) at a
    step whose action it will take (``tfagents_vtrace.networks.action_masks``)."""


class ActorAbandoned(Exception):  # noqa: N818 - a state, not an error of the user's
    """Raised in an acting thread that was abandoned after a step timed out (its
    replacement acts instead): the thread ends without delivering anything."""


class NonFiniteEnvOutput(ValueError):
    """The environment returned NaN, infinity or a reward that is not a number (treated like
    an exception it raised)."""


class MalformedEnvOutput(ValueError):
    """``reset`` or ``step`` returned something else than gymnasium's tuple (treated like an
    exception the environment raised)."""


class EnvTimeout(RuntimeError):
    """An environment call did not return within ``env_step_timeout_s``."""


MAX_FAILURES = 50  # failures of one environment in its last WINDOW_STEPS steps ...
WINDOW_STEPS = 100  # ... beyond which the run ends
MAX_CONSECUTIVE = 8  # failures in a row (no successful step between) beyond which it ends
IMMEDIATE = 3  # failures in a row restarted without a wait
BACKOFF_S = 0.25  # the wait before the next restart in a row; it doubles at each one
MAX_BACKOFF_S = 2.0
STEP_TIMEOUT_S = 60.0
"""The default ``env_step_timeout_s``: seconds an environment call may take before it is a
failure (generous: an Atari reset with its no-op starts takes well under a second)."""
F32_MAX = float(np.finfo(np.float32).max)


class RestartPolicy:
    """The restart limits of one environment (module docstring).

    :meth:`failed` is told the environment's step count at each failure (steps are counted
    by the caller, so nothing is recorded on a successful step). Arguments left None take
    the module's ``MAX_FAILURES``, ``WINDOW_STEPS``, ``MAX_CONSECUTIVE``, ``BACKOFF_S`` and
    ``MAX_BACKOFF_S``; the backoff starts after ``IMMEDIATE`` failures in a row.
    """

    def __init__(self, max_failures=None, window_steps=None, max_consecutive=None,
                 backoff_s=None, max_backoff_s=None):  # fmt: skip
        pick = lambda value, default: default if value is None else value  # noqa: E731
        self.max_failures = int(pick(max_failures, MAX_FAILURES))
        self.window_steps = int(pick(window_steps, WINDOW_STEPS))
        self.max_consecutive = int(pick(max_consecutive, MAX_CONSECUTIVE))
        self.backoff_s = float(pick(backoff_s, BACKOFF_S))
        self.max_backoff_s = float(pick(max_backoff_s, MAX_BACKOFF_S))
        for name in ("max_failures", "window_steps", "max_consecutive"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected an int >= 1, received {getattr(self, name)}")
        self.consecutive = 0
        self._failures: collections.deque = collections.deque()  # steps of recent failures
        self._last: int | None = None

    def failed(self, error: BaseException, what: str, step: int, gap: int = 1,
               slept: float = 0.0) -> float:  # fmt: skip
        """Records a failure at the environment's step ``step``; sleeps the backoff of a
        failure in a row (less the ``slept`` seconds the caller already waited in this step:
        sub-environments failing together wait once), or raises :class:`EnvFailure` past a
        limit. A failure within ``gap`` steps of the previous one follows it in a row
        (``gap`` 2 where the step after a restart only delivers the new environment's first
        observation). Returns the backoff."""
        step = int(step)
        in_a_row = self._last is not None and step - self._last <= gap
        self.consecutive = self.consecutive + 1 if in_a_row else 1
        self._last = step
        self._failures.append(step)
        while self._failures[0] <= step - self.window_steps:
            self._failures.popleft()
        last = f"last error: {type(error).__name__}: {error}"
        if self.consecutive > self.max_consecutive:
            raise EnvFailure(
                f"{what} failed {self.consecutive} times in a row (without one successful "
                f"step; the limit is {self.max_consecutive}); {last}"
            ) from error
        if len(self._failures) > self.max_failures:
            raise EnvFailure(
                f"{what} failed {len(self._failures)} times in its last {self.window_steps} "
                f"steps (the limit is {self.max_failures}); {last}"
            ) from error
        wait = self.wait_s()
        if wait > slept:
            time.sleep(wait - slept)
        return wait

    def wait_s(self) -> float:
        """The backoff before the restart of the current failure in a row (0 for the first
        ``IMMEDIATE``)."""
        if self.consecutive <= IMMEDIATE:
            return 0.0
        return min(self.backoff_s * 2 ** (self.consecutive - IMMEDIATE - 1), self.max_backoff_s)


def check_reset_result(result, what: str = ""):
    """``(observation, info)`` of a ``reset`` result; :class:`MalformedEnvOutput` (its
    message starting with ``what:``, the environment, when given) otherwise."""
    if type(result) is not tuple or len(result) != 2 or not isinstance(result[1], dict):
        prefix = f"{what}: " if what else ""
        raise MalformedEnvOutput(f"{prefix}reset returned {_shape(result)}; expected "
                                 "(observation, info)")  # fmt: skip
    return result


def check_step_result(result, what: str = ""):
    """The five values of a ``step`` result; :class:`MalformedEnvOutput` (as
    :func:`check_reset_result`'s) otherwise. A cheap check: the tuple's length."""
    if type(result) is not tuple or len(result) != 5:
        prefix = f"{what}: " if what else ""
        raise MalformedEnvOutput(
            f"{prefix}step returned {_shape(result)}; expected (observation, reward, "
            "terminated, truncated, info)"
        )
    return result


def _shape(result) -> str:
    if isinstance(result, tuple):
        return f"{len(result)} values"
    return f"a {type(result).__name__}"


def check_env_output(obs, reward) -> None:
    """Raises :class:`NonFiniteEnvOutput` if a float observation, or a reward (a number, or
    one per sub-environment), is not a finite number that float32 can hold: the learner
    computes in float32, where 1e300 is infinity. The check is one vectorized comparison
    per array (NaN compares false); the message naming the bad reward is built only on
    failure."""
    obs = np.asarray(obs)
    if obs.dtype.kind == "f" and not _in_f32_range(obs):
        raise NonFiniteEnvOutput(
            "the environment returned a non-finite observation (or one beyond float32's range)"
        )
    try:
        finite = _in_f32_range(np.asarray(reward, np.float64))
    except (TypeError, ValueError):  # e.g. a string, or rewards of uneven shapes
        finite = False
    if not finite:
        raise NonFiniteEnvOutput(_reward_error(reward))


def _in_f32_range(values: np.ndarray) -> bool:
    """Whether every value is a number float32 holds (two array operations: a NaN makes
    the maximum NaN, which compares false)."""
    if values.size == 0:
        return True
    if values.dtype == np.float32:  # every finite float32 is in range
        return bool(np.isfinite(values).all())
    return bool(np.abs(values).max() <= F32_MAX)


def _reward_error(reward) -> str:
    """``"reward of sub-environment i: expected a finite number, received v"`` for the first
    bad one (``"reward: ..."`` for a single reward), ``v`` as the environment returned it; a
    finite number beyond float32's range says so. A gymnasium vector stores a None as
    ``nan``: ``envs.factory.RewardIsNumber`` names it in the sub-environment first."""
    try:
        values = np.asarray(reward, dtype=object)
    except ValueError:  # rewards of uneven shapes
        return f"reward: expected a finite number per sub-environment, received {reward!r}"
    # numpy scalars as Python ones: the message shows nan, not np.float64(nan)
    flat = [v.item() if isinstance(v, np.generic) else v for v in values.ravel()]
    bad = [i for i, value in enumerate(flat) if not _finite_number(value)]
    if values.ndim == 0:
        return f"reward: expected a finite number{_range_note(flat[0])}, received {flat[0]!r}"
    if not bad:  # every element is a finite number, yet they make no float array
        return f"reward: expected a finite number per sub-environment, received {reward!r}"
    more = f" ({len(bad)} of {len(flat)} rewards are not finite numbers)" if len(bad) > 1 else ""
    value = flat[bad[0]]
    return (
        f"reward of sub-environment {bad[0]}: expected a finite number{_range_note(value)}, "
        f"received {value!r}{more}"
    )


def _finite_number(value) -> bool:
    try:
        return math.isfinite(value) and abs(value) <= F32_MAX
    except TypeError:  # None, a string...
        return False


def _range_note(value) -> str:
    """`` within float32's range (|r| <= 3.4e+38)`` for a finite number beyond it."""
    try:
        beyond = math.isfinite(value) and abs(value) > F32_MAX
    except TypeError:
        beyond = False
    return f" within float32's range (|r| <= {F32_MAX:.2g})" if beyond else ""


def check_actions(actions: np.ndarray, space, where: str) -> None:
    """Raises :class:`InvalidAction` unless every row of ``actions`` is in ``space``
    (Discrete: ints in ``[0, n)``; Box: finite values)."""
    actions = np.asarray(actions)
    n = getattr(space, "n", None)
    if n is not None:
        bad = (actions < 0) | (actions >= n)
    else:
        bad = ~np.isfinite(actions.astype(np.float64))
    if bad.any():
        raise InvalidAction(
            f"{where}: the policy chose {actions[bad].ravel()[:4].tolist()} outside the action "
            f"space {space}; its weights or inputs are not finite"
        )


def first_error(errors: list[BaseException], what: str) -> BaseException:
    """The error to raise once every actor / worker thread ended: an :class:`ActingError`
    as it is (its one line is for the user), else a RuntimeError wrapping the first."""
    for error in errors:
        if isinstance(error, ActingError):
            return error
    return RuntimeError(f"all {what} failed; first error: {errors[0]!r}")


def step_timeout(value) -> float | None:
    """``env_step_timeout_s`` as seconds, or None when 0 / None disable the timeout."""
    if value is None or float(value) <= 0:
        return None
    return float(value)


class Watchdog:
    """Notices environment calls that do not return (module docstring).

    A watched object (an :class:`~tfagents_vtrace.runtime.acting.actor.Actor`) sets its attribute
    ``env_call_since`` to ``time.perf_counter()`` before each environment call and back to
    0.0 after it: two attribute writes, no lock and no hand-off to another thread in the
    acting loop. This thread looks at the stamps every ``poll_s`` seconds and calls the
    object's ``on_timeout(elapsed_s)`` once per call that has run longer than its limit. The
    callback runs in the watchdog's thread; it should only mark things (the owner of the
    acting thread builds the replacement in its own thread). Watched objects are held
    weakly (one that is collected is no longer watched). One watchdog serves a process
    (:func:`watchdog`); its thread ends when nothing is watched.
    """

    def __init__(self, poll_s: float = 0.25):
        self.poll_s = float(poll_s)
        self._lock = threading.Lock()
        self._watched: dict[int, list] = {}  # id -> [target, limit, on_timeout, fired stamp]
        self._thread: threading.Thread | None = None

    def watch(self, target, limit_s: float | None, on_timeout: Callable[[float], None]) -> None:
        """Watches ``target``'s calls (``limit_s`` None: not at all)."""
        if limit_s is None:
            return
        with self._lock:
            self._watched[id(target)] = [weakref.ref(target), float(limit_s), on_timeout, 0.0]
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="env-watchdog",
                                                daemon=True)  # fmt: skip
                self._thread.start()

    def unwatch(self, target) -> None:
        with self._lock:
            self._watched.pop(id(target), None)

    def _run(self) -> None:
        while True:
            time.sleep(self.poll_s)
            with self._lock:
                if not self._watched:
                    self._thread = None
                    return
                entries = list(self._watched.values())
            now = time.perf_counter()
            for entry in entries:
                ref, limit, on_timeout, fired = entry
                target = ref()
                if target is None:
                    with self._lock:
                        self._watched = {k: v for k, v in self._watched.items() if v is not entry}
                    continue
                since = getattr(target, "env_call_since", 0.0)
                if since and since != fired and now - since > limit:
                    entry[3] = since  # once per call
                    try:
                        on_timeout(now - since)
                    except Exception:  # noqa: BLE001 - the watchdog must keep watching
                        log.exception("the environment watchdog's callback failed")


_WATCHDOG = Watchdog()


def watchdog() -> Watchdog:
    """The process's :class:`Watchdog`."""
    return _WATCHDOG


def stuck(actor, after_s: float = 1.0) -> bool:
    """Whether ``actor`` is in an environment call that began more than ``after_s`` seconds
    ago (closing does not wait for it: the thread is a daemon)."""
    since = getattr(actor, "env_call_since", 0.0)
    return bool(since) and time.perf_counter() - since > after_s


def timeout_message(what: str, elapsed_s: float, limit_s: float) -> str:
    return (
        f"{what}: an environment call has not returned for {elapsed_s:.3g} s (the limit is "
        f"--env_step_timeout_s={limit_s:g})"
    )
