"""What crosses the actor's environment boundary, checked for every supported space.

:mod:`tfagents_vtrace.envs.failures` checks an observation array and ``Discrete`` /
``Box`` actions. Here the same checks cover a ``Dict`` / ``Tuple`` observation (a nest of
arrays: each leaf checked) and ``MultiDiscrete`` / ``MultiBinary`` actions (each dimension
in its range), with the same exceptions: a non-finite leaf is an environment failure
(``NonFiniteEnvOutput``), an action outside the space stops the run (``InvalidAction``).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from tfagents_vtrace.envs import failures as env_failures
from tfagents_vtrace.envs.failures import InvalidAction


def observation_leaves(obs) -> list:
    """The arrays of an observation nest (dicts in sorted key order, as ``tf.nest``)."""
    if isinstance(obs, dict):
        return [leaf for k in sorted(obs) for leaf in observation_leaves(obs[k])]
    if isinstance(obs, tuple | list):
        return [leaf for v in obs for leaf in observation_leaves(v)]
    return [obs]


def check_env_output(obs, reward) -> None:
    """:func:`env_failures.check_env_output` on every leaf of ``obs`` (an array or a nest)."""
    if isinstance(obs, np.ndarray):
        env_failures.check_env_output(obs, reward)
        return
    for leaf in observation_leaves(obs):
        env_failures.check_env_output(leaf, reward)


def check_actions(actions: np.ndarray, space, where: str) -> None:
    """Raises ``InvalidAction`` unless every row of ``actions`` is in ``space``: each
    ``MultiDiscrete`` dimension d in ``[0, nvec[d])``, ``MultiBinary`` bits in {0, 1}; other
    spaces as :func:`env_failures.check_actions`."""
    if isinstance(space, gym.spaces.MultiDiscrete):
        actions = np.asarray(actions)
        bad = (actions < 0) | (actions >= np.asarray(space.nvec))
    elif isinstance(space, gym.spaces.MultiBinary):
        actions = np.asarray(actions)
        bad = (actions != 0) & (actions != 1)
    else:
        env_failures.check_actions(actions, space, where)
        return
    if bad.any():
        raise InvalidAction(
            f"{where}: the policy chose {actions[bad].ravel()[:4].tolist()} outside the action "
            f"space {space}; its weights or inputs are not finite"
        )
