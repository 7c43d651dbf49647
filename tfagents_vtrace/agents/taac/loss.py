"""TAAC's losses as tensor functions: the act-or-repeat distribution, the compare-through
critic loss, the b-scaled actor loss and the two temperature losses.

Yu et al., "TAAC: Temporally Abstract Actor-Critic for Continuous Control", 2021,
https://arxiv.org/abs/2104.06521. Notation: ``tau^-`` the previous trajectory moved one step
(b = 0), ``tau_hat`` the trajectory started from a fresh actor sample (b = 1),
``Q(s, tau) = min_i Q_i(s, tau)`` over the critic replicas.

* Second stage: ``beta(b | s) = softmax_b([Q(s, tau^-), Q(s, tau_hat)] / alpha_b)``,
  optionally with the advantage ``Q(s, tau_hat) - Q(s, tau^-)`` clipped
  (``b1_advantage_clipping``).
* Critic: ``sum_i mean_d l(G_t^d, Q_i^d(s_t, tau_t))`` (``l`` squared or Huber) with ``G_t``
  the compare-through return of :func:`tfagents_vtrace.ops.taac.compare_through_targets`
  (cut at ``rollout_b | train_b`` and at episode ends) bootstrapping from
  ``beta_0 Q'(s, tau^-) + beta_1 Q'(s, tau_hat)`` of the target critics, averaged over the
  ``[T, B]`` window as ALF (``mask_last_steps``: over the steps not ending an episode).
* Critic replicas and reward dims: ``Q`` is the minimum over the R replicas per reward dim
  (sign-aware for D > 1) weighted by ``reward_weights`` (:func:`critic_value`).
* Actor: ``-sg(beta_1) Q(s, tau_hat(a)) + alpha_a log pi(a | s, tau^-)`` with ``a``
  reparameterized; its gradient equals ALF's ``0.5 (sg(dQ/da + a) - a)^2`` form.
* Temperatures: ``log alpha_b sg(H(beta) - H_b) + log alpha_a sg(-log pi(a) - H_a)``.
"""

from __future__ import annotations

import collections

import tensorflow as tf

from tfagents_vtrace.ops.taac import compare_through_targets

__all__ = [
    "CriticLoss",
    "actor_loss",
    "alpha_loss",
    "beta_logits",
    "critic_loss",
    "critic_value",
    "replica_min",
    "td_error_loss",
    "weighted_value",
]

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


def replica_min(q: tf.Tensor, reward_weights: tuple[float, ...]) -> tf.Tensor:
    """``[N, R, D] -> [N, D]``: the minimum over the R critic replicas, per reward dim.

    With ``D > 1`` (ALF's multi-dim reward) the minimum is taken of ``sign(w_d) Q`` and
    multiplied back, so a dim with a negative weight takes the replicas' maximum (and a zero
    weight gives 0); with ``D = 1`` it is the plain minimum. ``reward_weights``: D numbers.
    """
    q = tf.convert_to_tensor(q, tf.float32)
    d = len(reward_weights)
    if q.shape.rank != 3 or (q.shape[-1] is not None and q.shape[-1] != d):
        raise ValueError(f"q: expected shape [N, R, {d}], received {q.shape.as_list()}")
    if d == 1:
        return tf.reduce_min(q, axis=1)
    sign = tf.sign(tf.constant(reward_weights, tf.float32))
    return tf.reduce_min(q * sign, axis=1) * sign


def weighted_value(q: tf.Tensor, reward_weights: tuple[float, ...]) -> tf.Tensor:
    """``[N, D] -> [N]``: ``sum_d w_d Q_d`` (D = 1: ``Q``, unweighted, as ALF)."""
    if len(reward_weights) == 1:
        return q[:, 0]
    return tf.reduce_sum(q * tf.constant(reward_weights, tf.float32), axis=-1)


def critic_value(q: tf.Tensor, reward_weights: tuple[float, ...]) -> tf.Tensor:
    """``[N, R, D] -> [N]``: the value ``Q(s, tau)`` that the b choice and the actor use
    (ALF's ``_compute_critics`` with ``replica_min`` and ``apply_reward_weights``)."""
    return weighted_value(replica_min(q, reward_weights), reward_weights)


def td_error_loss(name_or_fn, target: tf.Tensor, value: tf.Tensor) -> tf.Tensor:
    """Elementwise TD loss: ``"squared"`` ``(G - Q)^2`` (ALF's ``element_wise_squared_loss``),
    ``"huber"`` ``0.5 e^2`` for ``|e| < 1`` else ``|e| - 0.5`` (ALF's
    ``element_wise_huber_loss``, smooth L1), or a callable ``(target, value) -> loss``."""
    if callable(name_or_fn):
        return name_or_fn(target, value)
    err = target - value
    if name_or_fn == "squared":
        return tf.square(err)
    if name_or_fn == "huber":
        abs_err = tf.abs(err)
        return tf.where(abs_err < 1.0, 0.5 * tf.square(err), abs_err - 0.5)
    raise ValueError(f"td_loss: expected 'squared', 'huber' or a callable, received {name_or_fn!r}")


def _as_tbd(name: str, x: tf.Tensor, d: int) -> tf.Tensor:
    """[T, B] (D = 1) or [T, B, D] -> [T, B, D]."""
    x = tf.convert_to_tensor(x, tf.float32)
    if x.shape.rank == 2:
        x = x[..., tf.newaxis]
    if x.shape.rank != 3 or (x.shape[-1] is not None and x.shape[-1] != d):
        raise ValueError(
            f"{name}: expected shape [T, B] or [T, B, {d}], received {x.shape.as_list()}"
        )
    return x


def critic_loss(
    q_rollout: tf.Tensor,
    rewards: tf.Tensor,
    discounts: tf.Tensor,
    target_values: tf.Tensor,
    step_is_last: tf.Tensor,
    rollout_b: tf.Tensor,
    train_b: tf.Tensor,
    *,
    td_loss="squared",
    mask_last_steps: bool = False,
) -> CriticLoss:
    """Compare-through TD loss of the critic replicas (ALF's ``TAACTDLoss``, summed over the
    replicas and averaged over the window).

    Per replica i, reward dim d and step ``t < T-1``: ``l = td_loss(G_t^d, Q_i^d(s_t, tau_t))``
    with ``G`` the compare-through return of
    :func:`tfagents_vtrace.ops.taac.compare_through_targets` of each dim (cut where
    ``rollout_b | train_b`` or the episode ends). The per-step loss is
    ``sum_i mean_d l`` (zero at ``t = T-1``); ``loss`` is its mean over the ``[T, B]``
    window (ALF), or with ``mask_last_steps`` its mean over the steps ``t < T-1`` that do not
    end an episode (whose return reads the next episode).

    Args:
      q_rollout: [T, B, R] or [T, B, R, D] ``Q_i(s_t, tau_t)`` of the rollout trajectories
        (receives the gradient).
      rewards: [T, B] or [T, B, D] reward received on arriving at step t (ALF alignment).
      discounts: [T, B] ``gamma * (1 - terminated)`` of arriving at step t, or [T, B, D]
        with one gamma per reward dim.
      target_values: [T, B] or [T, B, D] ``beta_0 Q'(s, tau^-) + beta_1 Q'(s, tau_hat)`` of
        the target critics (replica minimum per dim; stop-gradient).
      step_is_last: [T, B] bool, the step ends an episode.
      rollout_b, train_b: [T, B] switch decisions of the rollout and the current policy.
      td_loss: ``"squared"``, ``"huber"`` or a callable (:func:`td_error_loss`).
      mask_last_steps: see above.

    Returns:
      ``CriticLoss(loss, returns [T-1, B(, D)], mask [T-1, B])``; ``mask`` is 1 where a step
      counts (all ones without ``mask_last_steps``).
    """
    q_rollout = tf.convert_to_tensor(q_rollout, tf.float32)
    if q_rollout.shape.rank not in (3, 4):
        raise ValueError(
            f"q_rollout: expected shape [T, B, R] or [T, B, R, D], received "
            f"{q_rollout.shape.as_list()}"
        )
    scalar = q_rollout.shape.rank == 3
    q = q_rollout[..., tf.newaxis] if scalar else q_rollout  # [T, B, R, D]
    d = q.shape[-1]
    rewards = _as_tbd("rewards", rewards, d)
    discounts = tf.convert_to_tensor(discounts, tf.float32)
    if discounts.shape.rank == 2:  # one gamma for every dim
        discounts = discounts[..., tf.newaxis]
    if discounts.shape.rank == 3 and discounts.shape[-1] == 1:
        discounts = tf.repeat(discounts, d, axis=-1)
    discounts = _as_tbd("discounts", discounts, d)
    target_values = _as_tbd("target_values", target_values, d)
    shape = tf.shape(rewards)
    flags = [tf.convert_to_tensor(f) for f in (step_is_last, rollout_b, train_b)]
    # Each reward dim is one more column of the [T, B * D] op.
    fold = lambda x: tf.reshape(x, [shape[0], -1])  # noqa: E731
    spread = lambda f: fold(tf.repeat(f[..., tf.newaxis], shape[2], axis=-1))  # noqa: E731
    targets = compare_through_targets(
        fold(rewards), fold(discounts), fold(target_values), *(spread(f) for f in flags)
    )
    returns = tf.reshape(targets.returns, shape - [1, 0, 0])  # [T-1, B, D]
    per_step = tf.reduce_sum(
        tf.reduce_mean(td_error_loss(td_loss, returns[:, :, tf.newaxis], q[:-1]), axis=-1),
        axis=-1,
    )  # [T-1, B]: sum over replicas of the mean over reward dims
    if mask_last_steps:
        mask = 1.0 - tf.cast(flags[0][:-1], tf.float32)
        count = tf.maximum(tf.reduce_sum(mask), 1.0)
    else:
        mask = tf.ones_like(per_step)
        count = tf.cast(shape[0] * shape[1], tf.float32)  # the zero loss of step T-1 counts
    loss = tf.reduce_sum(per_step * mask) / count
    return CriticLoss(loss, returns[..., 0] if scalar else returns, mask)


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
