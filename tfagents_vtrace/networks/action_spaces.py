"""Vector discrete action spaces: ``MultiDiscrete`` and ``MultiBinary``.

* ``MultiDiscrete(nvec)`` (rank-1 ``nvec``, ``start`` 0): independent categoricals, one per
  action dimension ("multi_categorical"); actions int32 ``[D]``; the previous-action input
  is the concatenation of the D one-hots ``[sum(nvec)]``.
* ``MultiBinary(n)`` (rank-1): independent Bernoulli bits ("multi_binary"); actions int32
  ``[n]``; the previous-action input is the bits as float32.

The log-probability of an action is the sum of its dimensions' (``distributions.py``), so
V-trace and the A2C/A3C losses take these policies as they take any other.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import tensorflow as tf

from tfagents_vtrace.networks import distributions, heads

VECTOR_SPACES = (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


def is_vector_discrete(space) -> bool:
    """Whether ``space`` is a ``MultiDiscrete`` or ``MultiBinary`` action space."""
    return isinstance(space, VECTOR_SPACES)


def setup(config, space) -> tuple[str, tuple[int, ...] | None, int]:
    """``(policy_kind, nvec or None, action dimension)`` of a vector discrete ``space``.

    Raises:
      ValueError: naming ``action_space`` for a space of rank other than 1 or a
        ``MultiDiscrete`` whose ``start`` is not 0, ``policy_head`` unless "auto" (or the
        kind itself), ``q_head`` unless None.
    """
    name = type(space).__name__
    if len(space.shape) != 1:
        raise ValueError(f"action_space: {name} actions must have rank 1, got shape {space.shape}")
    if isinstance(space, gym.spaces.MultiDiscrete):
        if np.any(np.asarray(space.start) != 0):
            raise ValueError(f"action_space: MultiDiscrete with start != 0, got {space.start}")
        kind, nvec = "multi_categorical", tuple(int(n) for n in space.nvec)
    else:
        kind, nvec = "multi_binary", None
    if config.policy_head not in ("auto", kind):
        raise ValueError(f"policy_head={config.policy_head!r} does not fit {name} actions")
    if config.q_head is not None:
        raise ValueError(f"q_head={config.q_head!r} needs Discrete or Box actions, got {name}")
    return kind, nvec, int(space.shape[0])


def policy_head(kind: str, nvec, dim: int, init_scale: float):
    """The head of ``kind``: :class:`MultiCategoricalHead` or :class:`BernoulliHead`."""
    if kind == "multi_categorical":
        return heads.MultiCategoricalHead(nvec, init_scale)
    return heads.BernoulliHead(dim, init_scale)


def encode(kind: str, action: tf.Tensor, nvec) -> tf.Tensor:
    """Actions ``[..., D]`` as float vectors: concatenated one-hots, or the bits."""
    if kind == "multi_categorical":
        return distributions.one_hot_blocks(action, nvec)
    return tf.cast(action, tf.float32)
