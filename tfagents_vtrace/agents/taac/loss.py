"""TAAC's losses as tensor functions: the act-or-repeat distribution, the compare-through
critic loss, the b-scaled actor loss and the two temperature losses.

Yu et al., "TAAC: Temporally Abstract Actor-Critic for Continuous Control", 2021,
https://arxiv.org/abs/2104.06521. Notation: ``tau^-`` the previous trajectory moved one step
(b = 0), ``tau_hat`` the trajectory started from a fresh actor sample (b = 1),
``Q(s, tau) = min_i Q_i(s, tau)`` over the twin critics.

* Second stage: ``beta(b | s) = softmax_b([Q(s, tau^-), Q(s, tau_hat)] / alpha_b)``,
  optionally with the advantage ``Q(s, tau_hat) - Q(s, tau^-)`` clipped
  (``b1_advantage_clipping``).
* Critic: ``sum_i (G_t - Q_i(s_t, tau_t))^2`` with ``G_t`` the compare-through return of
  :func:`tfagents_vtrace.ops.taac.compare_through_targets` (cut at ``rollout_b | train_b``
  and at episode ends) bootstrapping from
  ``beta_0 Q'(s, tau^-) + beta_1 Q'(s, tau_hat)`` of the target critics.
* Actor: ``-sg(beta_1) Q(s, tau_hat(a)) + alpha_a log pi(a | s, tau^-)`` with ``a``
  reparameterized; its gradient equals ALF's ``0.5 (sg(dQ/da + a) - a)^2`` form.
* Temperatures: ``log alpha_b sg(H(beta) - H_b) + log alpha_a sg(-log pi(a) - H_a)``.
"""

from __future__ import annotations

import collections

import tensorflow as tf

from tfagents_vtrace.ops.taac import compare_through_targets

__all__ = ["CriticLoss", "actor_loss", "alpha_loss", "beta_logits", "critic_loss"]

CriticLoss = collections.namedtuple("CriticLoss", ["loss", "returns", "mask"])


def beta_logits(
    q0: tf.Tensor,
    q1: tf.Tensor,
    alpha_b: tf.Tensor,
    clipping: tuple[float, float] | None = None,
) -> tf.Tensor:
    """Logits ``[..., 2]`` of the act-or-repeat choice ``b`` (index 1 = new trajectory).

    ``[q0, q1] / max(alpha_b, 1e-10)``; with ``clipping = (lo, hi)``:
    ``[0, clip(q1 - q0, lo, hi)] / alpha_b`` (the same softmax when unclipped). Inputs are
    wrapped in ``tf.stop_gradient``: nothing receives a gradient.
    """
    q0 = tf.stop_gradient(tf.convert_to_tensor(q0, tf.float32))
    q1 = tf.stop_gradient(tf.convert_to_tensor(q1, tf.float32))
    if q0.shape != q1.shape:
        raise ValueError(f"q1: expected shape {q0.shape.as_list()}, received {q1.shape.as_list()}")
    alpha_b = tf.maximum(tf.stop_gradient(tf.cast(alpha_b, q0.dtype)), 1e-10)
    if clipping is None:
        logits = tf.stack([q0, q1], axis=-1)
    else:
        adv = tf.clip_by_value(q1 - q0, float(clipping[0]), float(clipping[1]))
        logits = tf.stack([tf.zeros_like(adv), adv], axis=-1)
    logits = logits / alpha_b
    return logits - tf.reduce_max(logits, axis=-1, keepdims=True)


def critic_loss(
    q_rollout: tf.Tensor,
    rewards: tf.Tensor,
    discounts: tf.Tensor,
    target_values: tf.Tensor,
    step_is_last: tf.Tensor,
    rollout_b: tf.Tensor,
    train_b: tf.Tensor,
) -> CriticLoss:
    """Compare-through TD loss of the twin critics.

    Args:
      q_rollout: [T, B, C] ``Q_i(s_t, tau_t)`` of the rollout trajectories (receives the
        gradient).
      rewards: [T, B] reward received on arriving at step t (ALF alignment).
      discounts: [T, B] ``gamma * (1 - terminated)`` of arriving at step t.
      target_values: [T, B] ``beta_0 Q'(s, tau^-) + beta_1 Q'(s, tau_hat)`` (stop-gradient).
      step_is_last: [T, B] bool, the step ends an episode.
      rollout_b, train_b: [T, B] switch decisions of the rollout and the current policy.

    Returns:
      ``CriticLoss(loss, returns [T-1, B], mask [T-1, B])``: ``loss`` is the scalar
      ``sum_i mean_{t, b in mask} (G_t - Q_i)^2`` over ``t < T-1`` whose step does not end an
      episode (the return of such a step would read the next episode).
    """
    q_rollout = tf.convert_to_tensor(q_rollout, tf.float32)
    if q_rollout.shape.rank != 3:
        raise ValueError(
            f"q_rollout: expected shape [T, B, C], received {q_rollout.shape.as_list()}"
        )
    targets = compare_through_targets(
        rewards, discounts, target_values, step_is_last, rollout_b, train_b
    )
    mask = 1.0 - tf.cast(step_is_last[:-1], tf.float32)
    err = tf.square(targets.returns[..., tf.newaxis] - q_rollout[:-1])
    per_step = tf.reduce_sum(err, axis=-1) * mask
    loss = tf.reduce_sum(per_step) / tf.maximum(tf.reduce_sum(mask), 1.0)
    return CriticLoss(loss, targets.returns, mask)


def actor_loss(
    p_b1: tf.Tensor, q_new: tf.Tensor, log_prob: tf.Tensor, alpha_a: tf.Tensor
) -> tf.Tensor:
    """Scalar ``mean(-sg(p_b1) Q(s, tau_hat(a)) + sg(alpha_a) log pi(a))``.

    ``q_new`` [N] must depend on the reparameterized action (the actor's gradient comes
    through it and ``log_prob`` [N]); ``p_b1`` [N] and ``alpha_a`` are constants.
    """
    p_b1 = tf.stop_gradient(p_b1)
    alpha_a = tf.stop_gradient(alpha_a)
    return tf.reduce_mean(-p_b1 * q_new + alpha_a * log_prob)


def alpha_loss(
    log_alpha_a: tf.Tensor,
    log_alpha_b: tf.Tensor,
    action_entropy: tf.Tensor,
    beta_entropy: tf.Tensor,
    target_action_entropy: float,
    target_beta_entropy: float,
) -> tf.Tensor:
    """``log_alpha_a * mean(sg(H_a - target_a)) + log_alpha_b * mean(sg(H_b - target_b))``.

    Minimizing it raises a temperature while its policy's entropy is below target. Only the
    log-temperatures receive gradients.
    """
    da = tf.stop_gradient(tf.reduce_mean(action_entropy) - target_action_entropy)
    db = tf.stop_gradient(tf.reduce_mean(beta_entropy) - target_beta_entropy)
    return log_alpha_a * da + log_alpha_b * db
