"""Action masks: an ``action_mask`` entry of a ``Dict`` observation says which actions the
policy may take at this step.

The convention is PettingZoo's (https://pettingzoo.farama.org/api/aec/#action-masking) and
Sample Factory's: a top-level ``Dict`` observation holds, besides what the agent observes,
``action_mask``, a ``MultiBinary(n)`` or a rank-1 ``Box`` of 0 / 1 entries, one per action:

* ``Discrete(n)`` actions: ``n`` entries, entry ``a`` > 0 allows action ``a``;
* ``MultiDiscrete(nvec)`` actions: ``sum(nvec)`` entries, the concatenation of each action
  dimension's mask (block ``d`` holds the ``nvec[d]`` entries of dimension ``d``).

The network applies the mask to its policy output (:func:`mask_policy`): a masked logit
becomes :data:`MASKED_LOGIT` (-1e9, finite, as ``distributions.padded_logits`` pads), so a
masked action has probability exactly 0 in float32 (``exp(-1e9 - max)`` underflows to 0),
is never sampled (categorical sampling, Gumbel-max with noise in [0, 1)) nor chosen greedily,
and adds ``0 * (-1e9 - logsumexp) = 0`` to the entropy and the KL (no ``0 * log 0`` NaN, which
``tf.float32.min`` or ``-inf`` would give). Every consumer of the network's policy (acting,
the learners' log-probabilities, V-trace's importance ratios and entropy, ACER's
``sum_a pi(a) Q(s, a)``, evaluation and every exported format) sees the masked distribution;
no gradient reaches a masked logit. This is the masking of Huang & Ontañón 2020, "A Closer
Look at Invalid Action Masking in Policy Gradient Algorithms",
https://arxiv.org/abs/2006.14171, and of SB3-contrib's ``MaskablePPO``.

The mask is an observation entry, so it travels through the actors' unrolls and replay as
any observation leaf does; it is not a feature of the torso (as in ``MaskablePPO``): the
multi-input torso encodes the other entries only (:func:`without_mask`). A game whose best
action depends on what is allowed can still learn it, since the masked policy renormalises
over the allowed actions; an environment that wants its policy to *see* the mask adds a copy
of it under another key.

A mask allowing nothing (for one MultiDiscrete dimension, or for a Discrete action) is the
environment's bug: the actors refuse it in one line (:func:`first_all_masked`) before the
policy is called, except at NEXT_STEP reset steps, whose action the environment ignores.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import tensorflow as tf

MASK_KEY = "action_mask"
MASKED_LOGIT = -1e9
MASKED_KINDS = ("categorical", "multi_categorical")
_LOGIT_KEYS = {"categorical": "logits", "multi_categorical": "multi_logits"}


def mask_space(observation_space):
    """The ``action_mask`` sub-space of a ``Dict`` observation space, or None."""
    if isinstance(observation_space, gym.spaces.Dict):
        return observation_space.spaces.get(MASK_KEY)
    return None


def has_mask(observation_space) -> bool:
    """Whether ``observation_space`` is a ``Dict`` with an ``action_mask`` entry."""
    return mask_space(observation_space) is not None


def mask_size(action_space) -> int | None:
    """Entries of the mask of ``action_space``: ``n`` (Discrete), ``sum(nvec)``
    (MultiDiscrete); None for an action space that cannot be masked."""
    if isinstance(action_space, gym.spaces.Discrete):
        return int(action_space.n)
    if isinstance(action_space, gym.spaces.MultiDiscrete) and len(action_space.shape) == 1:
        return int(np.sum(action_space.nvec))
    return None


def check_mask_spaces(observation_space, action_space, where: str = "observation_space") -> None:
    """Raises ValueError (one line naming ``where['action_mask']``) unless the mask of
    ``observation_space`` fits ``action_space``: a ``MultiBinary(n)`` or rank-1 ``Box`` of
    ``n = mask_size(action_space)`` entries, Discrete or MultiDiscrete actions, and something
    else to observe in the ``Dict``. Nothing to check without a mask."""
    space = mask_space(observation_space)
    if space is None:
        return
    name = f"{where}[{MASK_KEY!r}]"
    size = mask_size(action_space)
    if size is None:
        raise ValueError(
            f"{name}: action masks take Discrete or MultiDiscrete actions, got "
            f"{type(action_space).__name__} actions"
        )
    if not isinstance(space, gym.spaces.MultiBinary | gym.spaces.Box):
        raise ValueError(f"{name}: expected MultiBinary or Box, got {type(space).__name__}")
    if tuple(space.shape) != (size,):
        raise ValueError(
            f"{name}: expected shape ({size},) (one entry per action of {action_space}), got "
            f"{tuple(space.shape)}"
        )
    if len(observation_space.spaces) == 1:
        raise ValueError(f"{where}: a Dict holding only {MASK_KEY!r} has nothing to observe")


def without_mask(observation):
    """A ``Dict`` space or a dict observation without its ``action_mask`` entry (what the
    torso encodes); anything else unchanged."""
    if isinstance(observation, gym.spaces.Dict) and MASK_KEY in observation.spaces:
        return gym.spaces.Dict({k: v for k, v in observation.spaces.items() if k != MASK_KEY})
    if isinstance(observation, dict) and MASK_KEY in observation:
        return {k: v for k, v in observation.items() if k != MASK_KEY}
    return observation


def mask_policy(policy: dict, observation, kind: str) -> dict:
    """``policy`` (the head's parameters ``[N, A]``) with the logits of the actions that
    ``observation[action_mask]`` ``[N, A]`` forbids set to :data:`MASKED_LOGIT`; ``policy``
    itself when the observation has no mask."""
    if not (isinstance(observation, dict) and MASK_KEY in observation):
        return policy
    if kind not in MASKED_KINDS:
        raise ValueError(f"{MASK_KEY}: masks categorical policies, got a {kind!r} policy")
    key = _LOGIT_KEYS[kind]
    logits = policy[key]
    allowed = tf.cast(observation[MASK_KEY], logits.dtype) > 0
    masked = tf.where(allowed, logits, tf.constant(MASKED_LOGIT, logits.dtype))
    return {**policy, key: masked}


def mask_blocks(observation_space, action_space) -> list[int] | None:
    """The block sizes of the mask (``[n]`` for Discrete, ``nvec`` for MultiDiscrete), or
    None when ``observation_space`` has no mask."""
    if not has_mask(observation_space):
        return None
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        return [int(n) for n in action_space.nvec]
    return [mask_size(action_space)]


def first_all_masked(mask: np.ndarray, blocks: list[int], skip=None) -> tuple[int, int] | None:
    """``(row, block)`` of the first row of ``mask`` ``[B, sum(blocks)]`` where a block allows
    nothing (rows where ``skip`` ``[B]`` is true left out), or None: one ``any`` per block on
    a small array."""
    allowed = np.asarray(mask) > 0
    if len(blocks) == 1:
        some = allowed.any(axis=-1)[:, None]
    else:
        some = np.logical_or.reduceat(allowed, np.cumsum([0, *blocks[:-1]]), axis=-1)
    bad = ~some
    if skip is not None:
        bad &= ~np.asarray(skip, bool)[:, None]
    if not bad.any():
        return None
    row, block = np.argwhere(bad)[0]
    return int(row), int(block)
