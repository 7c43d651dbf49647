"""Discounted returns, TD(lambda) returns and generalized advantage estimation over [T, B].

References:
  * Sutton & Barto, "Reinforcement Learning: An Introduction", ch. 12 (lambda-returns).
  * Schulman et al. 2015, "High-Dimensional Continuous Control Using Generalized Advantage
    Estimation", https://arxiv.org/abs/1506.02438 (GAE, eq. 16).

Conventions (shared by every op in this package):
  * Time-major: ``rewards``, ``discounts``, ``values`` are ``[T, B]``; ``bootstrap_value`` is
    ``[B]``, the value ``V(x_T)`` of the state after the last step.
  * ``discounts[t] = gamma * (1 - terminated[t])``: a zero discount cuts the recursion, so a
    trace holding two episodes gives the same targets as the two episodes computed apart.
  * Every output is a target: it is wrapped in ``tf.stop_gradient`` and no input receives a
    gradient through it.
  * The backward recursions run as a reversed ``tf.scan``; they work eagerly, inside
    ``tf.function`` and inside ``tf.function(jit_compile=True)``.
"""

from __future__ import annotations

import collections

import tensorflow as tf

from tfagents_vtrace.ops import _validate
from tfagents_vtrace.ops._recurrence import reverse_linear_recurrence
from tfagents_vtrace.ops._validate import to_float

__all__ = [
    "GAEReturns",
    "discounted_returns",
    "generalized_advantage_estimation",
    "lambda_returns",
]

GAEReturns = collections.namedtuple("GAEReturns", ["advantages", "returns"])
GAEReturns.__doc__ = """Output of `generalized_advantage_estimation`.

Fields:
  advantages: [T, B] GAE advantages A_t (stop-gradient).
  returns: [T, B] value targets A_t + V(x_t) (stop-gradient); these are the TD(lambda) returns.
"""


def validate_time_major(
    named: dict[str, object], bootstrap_value=None
) -> tuple[dict[str, tf.Tensor], tf.Tensor | None]:
    """Converts and checks [T, B] tensors and an optional [B] ``bootstrap_value``.

    The first entry of ``named`` is the reference: every other entry must match its shape and
    is cast to its dtype. Integer inputs, wrong ranks and shape mismatches raise ValueError
    naming the argument and both shapes.
    """
    out = {}
    ref_name, ref = None, None
    for name, value in named.items():
        t = to_float(name, value)
        _validate.check_rank(name, t, 2)
        if ref is None:
            ref_name, ref = name, t
        else:
            _validate.check_same_shape(name, t, ref_name, ref)
            t = tf.cast(t, ref.dtype)
        out[name] = t
    if bootstrap_value is not None:
        bootstrap_value = to_float("bootstrap_value", bootstrap_value)
        _validate.check_rank("bootstrap_value", bootstrap_value, 1)
        _validate.check_shape("bootstrap_value", bootstrap_value, ref.shape[1:], f"{ref_name}[0]")
        bootstrap_value = tf.cast(bootstrap_value, ref.dtype)
    return out, bootstrap_value


def _lambda_like(lambda_, rewards: tf.Tensor) -> tf.Tensor:
    """Broadcasts a scalar or [T, B] ``lambda_`` to the shape of ``rewards``."""
    lam = to_float("lambda_", lambda_)
    _validate.check_rank("lambda_", lam, (0, 2))
    if lam.shape.rank == 2:
        _validate.check_same_shape("lambda_", lam, "rewards", rewards)
    return tf.cast(lam, rewards.dtype) * tf.ones_like(rewards)


def _next_values(values: tf.Tensor, bootstrap_value: tf.Tensor) -> tf.Tensor:
    """[V(x_1), ..., V(x_T)] from ``values`` [T, B] = V(x_0..x_{T-1}) and V(x_T) [B]."""
    return tf.concat([values[1:], bootstrap_value[tf.newaxis]], axis=0)


def discounted_returns(
    rewards: tf.Tensor, discounts: tf.Tensor, bootstrap_value: tf.Tensor
) -> tf.Tensor:
    """Bootstrapped discounted returns (n-step returns to the end of the trace).

    Recursion, backwards from ``G_T = bootstrap_value``::

        G_t = r_t + discounts_t * G_{t+1}

    Args:
      rewards: [T, B] float rewards ``r_t`` (integer dtypes are rejected).
      discounts: [T, B] ``gamma * (1 - terminated_t)``.
      bootstrap_value: [B] ``V(x_T)``.

    Returns:
      [T, B] returns ``G_t``, wrapped in ``tf.stop_gradient``: no input receives a gradient.
    """
    t, bootstrap_value = validate_time_major(
        {"rewards": rewards, "discounts": discounts}, bootstrap_value
    )
    returns = reverse_linear_recurrence(t["rewards"], t["discounts"], bootstrap_value)
    return tf.stop_gradient(returns)


def lambda_returns(
    rewards: tf.Tensor,
    discounts: tf.Tensor,
    values: tf.Tensor,
    bootstrap_value: tf.Tensor,
    lambda_: float | tf.Tensor,
) -> tf.Tensor:
    """TD(lambda) returns, the targets of TD(lambda) / A3C-GAE critics.

    Recursion, backwards from ``G_T = V(x_T) = bootstrap_value``::

        G_t = r_t + discounts_t * ((1 - lambda_t) * V(x_{t+1}) + lambda_t * G_{t+1})

    Equivalently (constant gamma, lambda, no termination) the weighted n-step sum
    ``G_t = (1 - lambda) sum_{n>=1} lambda^{n-1} G_t^(n)`` where the n-step returns are
    truncated at the end of the trace, whose remaining weight goes to the full return.
    ``lambda_ = 1`` gives `discounted_returns`; ``lambda_ = 0`` gives one-step TD targets
    ``r_t + discounts_t * V(x_{t+1})``.

    Args:
      rewards: [T, B] float rewards ``r_t``.
      discounts: [T, B] ``gamma * (1 - terminated_t)``.
      values: [T, B] ``V(x_t)``.
      bootstrap_value: [B] ``V(x_T)``.
      lambda_: scalar or [T, B] mixing coefficient ``lambda_t`` (indexed by the step whose
        target is being mixed, as in rlax).

    Returns:
      [T, B] returns ``G_t``, wrapped in ``tf.stop_gradient``: no input receives a gradient.
    """
    t, bootstrap_value = validate_time_major(
        {"rewards": rewards, "discounts": discounts, "values": values}, bootstrap_value
    )
    rewards, d, values = t["rewards"], t["discounts"], t["values"]
    lam = _lambda_like(lambda_, rewards)
    next_values = _next_values(values, bootstrap_value)
    xs = rewards + d * (1.0 - lam) * next_values
    returns = reverse_linear_recurrence(xs, d * lam, bootstrap_value)
    return tf.stop_gradient(returns)


def generalized_advantage_estimation(
    rewards: tf.Tensor,
    values: tf.Tensor,
    bootstrap_value: tf.Tensor,
    discounts: tf.Tensor,
    lambda_: float | tf.Tensor,
) -> GAEReturns:
    """Generalized advantage estimation, GAE(gamma, lambda) (arXiv 1506.02438, eq. 16).

    With the TD residuals ``delta_t = r_t + discounts_t * V(x_{t+1}) - V(x_t)``::

        A_t = sum_{l>=0} (prod_{i<l} discounts_{t+i} * lambda_{t+i}) * delta_{t+l}
            = delta_t + discounts_t * lambda_t * A_{t+1},       A_T = 0
        returns_t = A_t + V(x_t)        (equal to `lambda_returns` with the same lambda)

    Note the argument order (``values`` and ``bootstrap_value`` before ``discounts``).

    Args:
      rewards: [T, B] float rewards ``r_t``.
      values: [T, B] ``V(x_t)``.
      bootstrap_value: [B] ``V(x_T)``.
      discounts: [T, B] ``gamma * (1 - terminated_t)``.
      lambda_: scalar or [T, B] ``lambda_t``.

    Returns:
      `GAEReturns(advantages, returns)`, both [T, B] and wrapped in ``tf.stop_gradient``:
      no input receives a gradient (the actor loss multiplies log-probs by ``advantages``;
      the critic regresses ``values`` onto ``returns``).
    """
    t, bootstrap_value = validate_time_major(
        {"rewards": rewards, "values": values, "discounts": discounts}, bootstrap_value
    )
    rewards, d, values = t["rewards"], t["discounts"], t["values"]
    lam = _lambda_like(lambda_, rewards)
    deltas = rewards + d * _next_values(values, bootstrap_value) - values
    advantages = reverse_linear_recurrence(deltas, d * lam, tf.zeros_like(bootstrap_value))
    advantages = tf.stop_gradient(advantages)
    return GAEReturns(advantages=advantages, returns=tf.stop_gradient(advantages + values))
