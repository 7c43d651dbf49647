"""``tfp.distributions`` built from the policy-parameter dicts that the heads emit.

* "categorical": ``Categorical(logits, dtype=int32)``; mode = argmax.
* "gaussian": ``Independent(Normal(loc, scale), 1)`` (the action dim is the event); mode = loc.
  Samples are unbounded: clip to the action bounds in the environment wrapper if needed.
* "tanh_gaussian": ``TransformedDistribution(Independent(Normal(loc, scale), 1),
  Shift(mid) o Scale(half_range) o Tanh)`` with ``mid = (high + low) / 2`` and
  ``half_range = (high - low) / 2``, the squashed Gaussian of SAC (Haarnoja et al. 2018,
  https://arxiv.org/abs/1801.01290). Its greedy action is ``mid + half_range * tanh(loc)``,
  the image of the Gaussian mode (not the mode of the squashed density, which has no closed
  form); ``log_prob`` includes the tanh Jacobian. float32 ``tanh`` returns exactly +-1 for
  ``|x| > ~9``, so an action can sit exactly at a bound, where ``atanh`` is infinite: the
  inverse clips the squashed value ``u = (a - mid) / half_range`` into
  ``[-1 + TANH_EPS, 1 - TANH_EPS]`` first (as Stable-Baselines3's ``TanhBijector.inverse``),
  and an action with ``|u| >= 1 - TANH_EPS`` gets, per dimension, the log-mass of the Normal's
  tail beyond ``x_c = atanh(1 - TANH_EPS) = 7.25`` (``log P(x >= x_c)`` at the upper bound):
  the censored likelihood of the clipped action policy gradient (Fujita & Maeda 2018,
  https://arxiv.org/abs/1802.07564). ``log_prob`` and its gradient stay finite, and the
  gradient of a saturated action vanishes as the mean moves out instead of growing with it
  (scoring it as the clipped pre-image 7.25 gives ``(7.25 - loc) / scale^2``, which made A2C's
  mean run away on Pendulum). Interior actions' densities, sampling, the greedy action and the
  forward log-det-Jacobian are unchanged.
* "multi_categorical" (``MultiDiscrete(nvec)`` actions): one categorical per action dimension,
  ``Independent(Categorical(padded logits [..., D, max(nvec)]), 1)`` from the head's flat
  ``multi_logits`` ``[..., sum(nvec)]`` (block d holds dimension d's ``nvec[d]`` logits; the
  padding is a finite -1e9, so padded entries have probability 0 and add 0 to the entropy and
  the KL). ``log_prob`` and ``entropy`` are sums over the D dimensions; mode = argmax per block.
* "multi_binary" (``MultiBinary(n)`` actions): ``Independent(Bernoulli(bernoulli_logits
  [..., n]), 1)``, int32 samples in {0, 1}; ``log_prob`` and ``entropy`` summed over the n
  bits; mode = ``logits > 0``.

Batch shape is the leading dims of the parameters (``[B]`` or ``[T, B]``).

``tensorflow_probability`` is imported on first use (its import takes a noticeable part of a
small run's start: docs/results/implementation_choices.md): the categorical learners and the
numpy actors never build a ``tfp`` object, so a CartPole run does not pay for it before its
first evaluation.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

if TYPE_CHECKING:
    import tensorflow_probability as tfp

POLICY_KINDS = ("categorical", "gaussian", "tanh_gaussian", "multi_categorical", "multi_binary")
MULTI_LOGITS, BERNOULLI_LOGITS = "multi_logits", "bernoulli_logits"
_PAD_LOGIT = -1e9
# 1 - 1e-6 is 0.99999899 in float32 (spacing 6e-8 below 1), atanh of it 7.25: finite.
TANH_EPS = 1e-6


def padded_logits(flat_logits: tf.Tensor, nvec) -> tf.Tensor:
    """``[..., sum(nvec)]`` blocks of logits -> ``[..., D, max(nvec)]``, each block padded
    with -1e9 (probability 0) up to ``max(nvec)``."""
    flat_logits = tf.convert_to_tensor(flat_logits)
    nvec = [int(n) for n in nvec]
    width = max(nvec)
    if all(n == width for n in nvec):
        shape = tf.concat([tf.shape(flat_logits)[:-1], [len(nvec), width]], 0)
        return tf.reshape(flat_logits, shape)
    blocks = tf.split(flat_logits, nvec, axis=-1)
    pad = [[0, 0]] * (flat_logits.shape.rank - 1)
    padded = [
        tf.pad(b, pad + [[0, width - n]], constant_values=_PAD_LOGIT) for b, n in zip(blocks, nvec)
    ]
    return tf.stack(padded, axis=-2)


def one_hot_blocks(actions: tf.Tensor, nvec) -> tf.Tensor:
    """MultiDiscrete actions ``[..., D]`` -> the concatenated one-hots ``[..., sum(nvec)]``."""
    actions = tf.cast(actions, tf.int32)
    parts = [tf.one_hot(actions[..., d], int(n), dtype=tf.float32) for d, n in enumerate(nvec)]
    return tf.concat(parts, axis=-1)


def make_distribution(
    kind: str,
    policy: dict[str, tf.Tensor],
    low: np.ndarray | None = None,
    high: np.ndarray | None = None,
    nvec=None,
) -> tfp.distributions.Distribution:
    """The distribution of ``kind`` with the parameters in ``policy`` (see module docstring).

    ``low``/``high`` (``[A]``, finite) are required for "tanh_gaussian", ``nvec`` (the
    categories of each action dimension) for "multi_categorical".
    """
    import tensorflow_probability as tfp  # lazy: see the module docstring

    tfd, tfb = tfp.distributions, tfp.bijectors
    if kind == "categorical":
        return tfd.Categorical(logits=policy["logits"], dtype=tf.int32)
    if kind == "multi_categorical":
        logits = padded_logits(policy[MULTI_LOGITS], nvec)
        return tfd.Independent(tfd.Categorical(logits=logits, dtype=tf.int32), 1)
    if kind == "multi_binary":
        return tfd.Independent(tfd.Bernoulli(logits=policy[BERNOULLI_LOGITS], dtype=tf.int32), 1)
    base = tfd.Independent(
        tfd.Normal(loc=policy["loc"], scale=policy["scale"]), reinterpreted_batch_ndims=1
    )
    if kind == "gaussian":
        return base
    if kind == "tanh_gaussian":
        mid, half = _mid_half(low, high)
        bijector = tfb.Chain([tfb.Shift(mid), tfb.Scale(half), _clipped_tanh_class()()])
        return _squashed_gaussian_class()(base, bijector)
    raise ValueError(f"kind must be one of {POLICY_KINDS}, got {kind!r}")


def greedy_action(
    kind: str,
    policy: dict[str, tf.Tensor],
    low: np.ndarray | None = None,
    high: np.ndarray | None = None,
    nvec=None,
) -> tf.Tensor:
    """The deterministic (greedy) action: argmax logits (int32; per block for
    "multi_categorical"), ``logits > 0`` (int32, "multi_binary"), loc, or the squashed loc."""
    if kind == "categorical":
        return tf.argmax(policy["logits"], axis=-1, output_type=tf.int32)
    if kind == "multi_categorical":
        logits = padded_logits(policy[MULTI_LOGITS], nvec)
        return tf.argmax(logits, axis=-1, output_type=tf.int32)
    if kind == "multi_binary":
        return tf.cast(policy[BERNOULLI_LOGITS] > 0.0, tf.int32)
    if kind == "gaussian":
        return tf.identity(policy["loc"])
    if kind == "tanh_gaussian":
        mid, half = _mid_half(low, high)
        return mid + half * tf.tanh(policy["loc"])
    raise ValueError(f"kind must be one of {POLICY_KINDS}, got {kind!r}")


def check_bounds(low, high) -> None:
    """Raises ValueError unless ``low``/``high`` are finite arrays (needed by tanh_gaussian)."""
    if low is None or high is None:
        raise ValueError("tanh_gaussian needs finite action bounds low/high, got None")
    low = np.asarray(low, np.float32)
    high = np.asarray(high, np.float32)
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise ValueError(f"tanh_gaussian needs finite action bounds, got low={low} high={high}")


@functools.cache
def _clipped_tanh_class() -> type:
    """``tfb.Tanh`` whose inverse clips into ``[-1 + TANH_EPS, 1 - TANH_EPS]`` before ``atanh``
    (built on first use: ``tensorflow_probability`` is imported lazily)."""
    import tensorflow_probability as tfp

    class ClippedTanh(tfp.bijectors.Tanh):
        """``Y = tanh(X)``; the inverse of a ``Y`` at or beyond +-1 is that of +-(1 - eps)."""

        def __init__(self, validate_args=False, name="clipped_tanh"):
            super().__init__(validate_args=validate_args, name=name)

        def _inverse(self, y):
            bound = tf.cast(1.0 - TANH_EPS, y.dtype)
            return tf.atanh(tf.clip_by_value(y, -bound, bound))

    return ClippedTanh


@functools.cache
def _squashed_gaussian_class() -> type:
    """``TransformedDistribution(Independent(Normal), Shift o Scale o ClippedTanh)`` whose
    ``log_prob`` censors at the bounds (built on first use, as :func:`_clipped_tanh_class`)."""
    import tensorflow_probability as tfp

    class SquashedGaussian(tfp.distributions.TransformedDistribution):
        """The tanh-squashed Gaussian; an action within ``TANH_EPS`` (in ``u``) of a bound has
        the log-mass of the Normal's tail beyond ``x_c = atanh(1 - TANH_EPS)`` per dimension
        (the censored likelihood of Fujita & Maeda 2018's clipped action policy gradient,
        https://arxiv.org/abs/1802.07564), every other action the squashed density."""

        def __init__(self, distribution, bijector, validate_args=False, name="SquashedGaussian"):
            parameters = dict(locals())
            super().__init__(
                distribution=distribution,
                bijector=bijector,
                validate_args=validate_args,
                parameters=parameters,
                name=name,
            )

        def _log_prob(self, y):
            shift, scale, tanh = self.bijector.bijectors
            normal = self.distribution.distribution  # Independent(Normal) -> Normal
            u = (y - shift.shift) / scale.scale
            bound = tf.cast(1.0 - TANH_EPS, u.dtype)
            x = tanh.inverse(u)  # clipped: finite
            density = (
                normal.log_prob(x)
                - tf.math.log(scale.scale)
                - tanh.forward_log_det_jacobian(x, event_ndims=0)
            )
            x_c = tf.atanh(bound)
            upper = normal.log_survival_function(x_c)
            lower = normal.log_cdf(-x_c)
            per_dim = tf.where(u >= bound, upper, tf.where(u <= -bound, lower, density))
            return tf.reduce_sum(per_dim, axis=-1)

    return SquashedGaussian


def _mid_half(low, high) -> tuple[tf.Tensor, tf.Tensor]:
    check_bounds(low, high)
    low = np.asarray(low, np.float32)
    high = np.asarray(high, np.float32)
    return tf.constant((high + low) / 2.0), tf.constant((high - low) / 2.0)
