"""What acting does when an environment or the policy misbehaves.

* An environment that raises (or returns a non-finite observation or a reward that is not a
  finite number) is closed and made again with a new seed, after a backoff that doubles
  from ``backoff_s`` up to ``max_backoff_s``; the unroll in progress is dropped. An
  environment that still fails after ``max_consecutive`` (5) restarts in a row (a
  successful unroll resets the count) ends the run with :class:`EnvFailure`: one that fails
  on every step stops it within about 16 s by default (the five backoffs), with one line
  naming the environment and its last error, instead of restarting forever.
* A non-finite observation never reaches the policy (a categorical sampler fed NaN logits
  can return an index past the last action), and an action outside the action space never
  reaches the environment (under XLA an out-of-range index is clamped silently):
  :class:`InvalidAction` stops the run.
"""

from __future__ import annotations

import math
import time

import numpy as np


class ActingError(RuntimeError):
    """Acting cannot go on; ``str(error)`` is one line for the user."""


class EnvFailure(ActingError):
    """The environment failed again after ``max_consecutive`` restarts in a row."""


class InvalidAction(ActingError):
    """The policy produced an action outside the action space."""


class NonFiniteEnvOutput(ValueError):
    """The environment returned NaN, infinity or a reward that is not a number (treated like
    an exception it raised)."""


MAX_CONSECUTIVE = 5  # restarts in a row; the failure after the last one ends the run
BACKOFF_S = 0.5  # the first wait; it doubles at each failure in a row
MAX_BACKOFF_S = 8.0


class RestartPolicy:
    """Counts consecutive environment failures and spaces the restarts (module docstring):
    each of the first ``max_consecutive`` failures in a row is followed by a backoff and a
    restart, the next one raises :class:`EnvFailure`. Arguments left None take the module's
    ``MAX_CONSECUTIVE``, ``BACKOFF_S`` and ``MAX_BACKOFF_S``."""

    def __init__(self, max_consecutive=None, backoff_s=None, max_backoff_s=None):
        self.max_consecutive = int(MAX_CONSECUTIVE if max_consecutive is None else max_consecutive)
        self.backoff_s = float(BACKOFF_S if backoff_s is None else backoff_s)
        self.max_backoff_s = float(MAX_BACKOFF_S if max_backoff_s is None else max_backoff_s)
        if self.max_consecutive < 1:
            raise ValueError(
                f"max_consecutive: expected an int >= 1, received {self.max_consecutive}"
            )
        self.consecutive = 0

    def failed(self, error: BaseException, what: str) -> None:
        """Records a failure; sleeps the backoff before the caller's restart, or raises
        :class:`EnvFailure` when ``max_consecutive`` restarts in a row did not help."""
        self.consecutive += 1
        if self.consecutive > self.max_consecutive:
            raise EnvFailure(
                f"{what} failed again after {self.consecutive - 1} restarts in a row; last "
                f"error: {type(error).__name__}: {error}"
            ) from error
        time.sleep(min(self.backoff_s * 2 ** (self.consecutive - 1), self.max_backoff_s))

    def succeeded(self) -> None:
        self.consecutive = 0


def check_env_output(obs, reward) -> None:
    """Raises :class:`NonFiniteEnvOutput` if a float observation is not finite, or a reward
    (a number, or one per sub-environment) is not a finite number. The check is one
    vectorized ``isfinite``; the message naming the bad reward is built only on failure."""
    obs = np.asarray(obs)
    if obs.dtype.kind == "f" and not np.isfinite(obs).all():
        raise NonFiniteEnvOutput("the environment returned a non-finite observation")
    try:
        finite = np.isfinite(np.asarray(reward, np.float64)).all()
    except (TypeError, ValueError):  # e.g. a string, or rewards of uneven shapes
        finite = False
    if not finite:
        raise NonFiniteEnvOutput(_reward_error(reward))


def _reward_error(reward) -> str:
    """``"reward of sub-environment i: expected a finite number, received v"`` for the first
    bad one (``"reward: ..."`` for a single reward), ``v`` as the environment returned it.
    A gymnasium vector stores a None as ``nan``: ``envs.factory.RewardIsNumber`` names it in
    the sub-environment first."""
    try:
        values = np.asarray(reward, dtype=object)
    except ValueError:  # rewards of uneven shapes
        return f"reward: expected a finite number per sub-environment, received {reward!r}"
    # numpy scalars as Python ones: the message shows nan, not np.float64(nan)
    flat = [v.item() if isinstance(v, np.generic) else v for v in values.ravel()]
    bad = [i for i, value in enumerate(flat) if not _finite_number(value)]
    if values.ndim == 0:
        return f"reward: expected a finite number, received {flat[0]!r}"
    if not bad:  # every element is a finite number, yet they make no float array
        return f"reward: expected a finite number per sub-environment, received {reward!r}"
    more = f" ({len(bad)} of {len(flat)} rewards are not finite numbers)" if len(bad) > 1 else ""
    return (
        f"reward of sub-environment {bad[0]}: expected a finite number, received "
        f"{flat[bad[0]]!r}{more}"
    )


def _finite_number(value) -> bool:
    try:
        return math.isfinite(value)
    except TypeError:  # None, a string...
        return False


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
