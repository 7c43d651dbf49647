"""TAAC's compare-through multi-step return, batched over [T, B].

Reference: Yu et al. 2021, "TAAC: Temporally Abstract Actor-Critic for Continuous Control",
https://arxiv.org/abs/2104.06521 (the compare-through Q operator), as implemented by ALF's
``TAACTDLoss``.

Alignment (ALF's step-indexed convention, different from the other ops): index ``t`` is a
*time step* holding the observation ``x_t`` and the reward and discount received on arriving
at it, so the return of step ``t`` uses ``rewards[t + 1]`` and ``discounts[t + 1]``.
``rewards[0]`` and ``discounts[0]`` are never read. With the project's transition-aligned
rewards ``r`` ([T-1, B], ``r_t`` earned by the action at ``x_t``) pass
``rewards = concat([zeros[1], r])`` and likewise for the discounts.

The compare-through operator bootstraps from the first later step ``n`` at which either the
rollout policy or the current policy chose a new action (``b_n = 1``), or at which the
episode ends; until then it accumulates rewards, because the repeated action is the same
under both policies. ``b_0`` never matters (no step bootstraps from step 0).
"""

from __future__ import annotations

import collections

import tensorflow as tf

from tfagents_vtrace.ops import _validate
from tfagents_vtrace.ops._recurrence import reverse_linear_recurrence
from tfagents_vtrace.ops._validate import to_float
from tfagents_vtrace.ops.returns import validate_time_major

__all__ = ["CompareThroughReturns", "compare_through_returns", "compare_through_targets"]

CompareThroughReturns = collections.namedtuple(
    "CompareThroughReturns", ["returns", "bootstrap_mask"]
)
CompareThroughReturns.__doc__ = """Output of the compare-through ops.

Fields:
  returns: [T-1, B] targets for ``Q(x_t, a_t)``, t = 0..T-2 (stop-gradient).
  bootstrap_mask: [T, B] float, 1 where the accumulation is cut (the step bootstraps from
    ``target_values``); the last step is always 1.
"""


def _check_bool_like(name: str, value, ref_name: str, ref: tf.Tensor) -> tf.Tensor:
    t = tf.convert_to_tensor(value)
    _validate.check_rank(name, t, 2)
    _validate.check_same_shape(name, t, ref_name, ref)
    if t.dtype != tf.bool:
        t = tf.not_equal(t, tf.zeros([], t.dtype))
    return t


def compare_through_returns(
    rewards: tf.Tensor,
    discounts: tf.Tensor,
    target_values: tf.Tensor,
    is_lasts: tf.Tensor,
) -> CompareThroughReturns:
    """Discounted returns whose accumulation is cut at every ``is_lasts`` step.

    With ``L_t = is_lasts[t]`` (forced to 1 at ``t = T-1``)::

        acc_{T-1} = target_values[T-1]
        acc_t     = L_t * target_values[t] + (1 - L_t) * ret_t
        ret_t     = rewards[t+1] + discounts[t+1] * acc_{t+1},        t = 0 .. T-2

    so ``ret_t`` sums rewards forward until the first ``n > t`` with ``L_n = 1`` and then
    bootstraps from ``target_values[n]``. ``is_lasts[0]`` only affects ``acc_0``, which no
    return reads. As in the reference, the return of a step that ends an episode reads the
    next episode's first step: mask its loss.

    Example (T = 4, B = 1, unit rewards, discount 0.5, cut at step 2)::

        >>> out = compare_through_returns(
        ...     rewards=[[0.0], [1.0], [1.0], [1.0]], discounts=[[0.5]] * 4,
        ...     target_values=[[0.0], [0.0], [10.0], [20.0]],
        ...     is_lasts=[[False], [False], [True], [False]])
        >>> out.returns.numpy()[:, 0]   # [1 + .5 (1 + .5 * 10), 1 + .5 * 10, 1 + .5 * 20]
        array([ 4.,  6., 11.], dtype=float32)

    Args:
      rewards: [T, B] float, ``rewards[t]`` received on arriving at step t (T >= 2).
      discounts: [T, B] ``gamma * (1 - terminated)`` of arriving at step t (ALF's
        ``discount * gamma``).
      target_values: [T, B] bootstrap values (TAAC: the target critics' expectation over the
        current two-stage policy).
      is_lasts: [T, B] bool (or 0/1) cut flags.

    Returns:
      `CompareThroughReturns(returns [T-1, B], bootstrap_mask [T, B])`, wrapped in
      ``tf.stop_gradient``: no input receives a gradient.
    """
    named, _ = validate_time_major(
        {"rewards": rewards, "discounts": discounts, "target_values": target_values}
    )
    rewards, discounts, values = named["rewards"], named["discounts"], named["target_values"]
    steps = rewards.shape[0]
    if steps is not None and steps < 2:
        raise ValueError(
            f"`rewards` must have at least 2 time steps, got shape {rewards.shape.as_list()}."
        )
    cuts = _check_bool_like("is_lasts", is_lasts, "rewards", rewards)
    last = tf.one_hot(
        tf.shape(rewards)[0] - 1, tf.shape(rewards)[0], on_value=True, off_value=False
    )
    cut = tf.cast(tf.logical_or(cuts, last[:, tf.newaxis]), rewards.dtype)
    # ret_t = x_t + coef_t ret_{t+1} over t = 0..T-2, reading step t+1's inputs.
    xs = rewards[1:] + discounts[1:] * cut[1:] * values[1:]
    coeffs = discounts[1:] * (1.0 - cut[1:])
    returns = reverse_linear_recurrence(xs, coeffs, tf.zeros_like(rewards[0]))
    return CompareThroughReturns(
        returns=tf.stop_gradient(returns), bootstrap_mask=tf.stop_gradient(cut)
    )


def compare_through_targets(
    rewards: tf.Tensor,
    discounts: tf.Tensor,
    target_values: tf.Tensor,
    step_is_last: tf.Tensor,
    rollout_b: tf.Tensor,
    train_b: tf.Tensor,
) -> CompareThroughReturns:
    """TAAC's compare-through TD targets from the two policies' switch decisions.

    Cuts the accumulation where ``step_is_last`` or where either policy switches
    (``rollout_b | train_b``, with ``b`` at step 0 ignored), then calls
    `compare_through_returns`. The critic loss is ``(returns - Q(x_t, a_t))^2`` over
    ``t = 0..T-2`` (ALF pads the last step with a zero loss).

    Args:
      rewards, discounts, target_values: [T, B], as in `compare_through_returns`.
      step_is_last: [T, B] bool, the step ends an episode (``StepType.LAST``).
      rollout_b: [T, B] bool/int, 1 where the rollout policy chose a new action.
      train_b: [T, B] bool/int, 1 where the current policy's resample chose a new action.

    Returns:
      `CompareThroughReturns(returns [T-1, B], bootstrap_mask [T, B])`; no input receives a
      gradient.
    """
    ref = to_float("rewards", rewards)
    _validate.check_rank("rewards", ref, 2)
    lasts = _check_bool_like("step_is_last", step_is_last, "rewards", ref)
    rollout_b = _check_bool_like("rollout_b", rollout_b, "rewards", ref)
    train_b = _check_bool_like("train_b", train_b, "rewards", ref)
    switched = tf.logical_or(rollout_b, train_b)
    not_first = tf.range(tf.shape(switched)[0]) > 0
    switched = tf.logical_and(switched, not_first[:, tf.newaxis])
    return compare_through_returns(ref, discounts, target_values, tf.logical_or(lasts, switched))
