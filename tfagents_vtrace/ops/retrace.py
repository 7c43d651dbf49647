"""ACER ops: Retrace targets Q_ret and Q_opc, truncated importance sampling with bias
correction, and the efficient trust-region projection.

Reference: Wang et al. 2016, "Sample Efficient Actor-Critic with Experience Replay" (ACER),
https://arxiv.org/abs/1611.01224 (eqs. 5, 9-12 and Algorithm 2); Retrace: Munos et al. 2016,
https://arxiv.org/abs/1606.02647.

Conventions: time-major ``[T, B]``; ``discounts[t] = gamma * (1 - terminated[t])``;
``bootstrap_value`` [B] is ``V(x_T)`` of the state after the trace (pass 0 and a zero last
discount for a terminal end); ``log_rhos = log pi(a_t|x_t) - log mu(a_t|x_t)``. Targets are
wrapped in ``tf.stop_gradient``; the policy-loss functions return per-step surrogate losses
whose gradients are documented on each function.
"""

from __future__ import annotations

import collections

import tensorflow as tf

from tfagents_vtrace.ops import _validate
from tfagents_vtrace.ops._recurrence import reverse_linear_recurrence
from tfagents_vtrace.ops._validate import to_float
from tfagents_vtrace.ops.returns import validate_time_major

__all__ = [
    "AcerPolicyLoss",
    "RetraceReturns",
    "TrustRegionProjection",
    "acer_trace_coefficients",
    "qopc_targets",
    "retrace_targets",
    "trust_region_projection",
    "truncated_is_with_bias_correction_continuous",
    "truncated_is_with_bias_correction_discrete",
]

RetraceReturns = collections.namedtuple(
    "RetraceReturns", ["q_ret", "v_targets", "trace_coefficients"]
)
RetraceReturns.__doc__ = """Output of `retrace_targets` (all [T, B], stop-gradient).

Fields:
  q_ret: Retrace targets ``Q_ret(x_t, a_t)`` for the critic and the policy gradient.
  v_targets: ``min(1, rho_t) * (Q_ret_t - Q(x_t, a_t)) + V(x_t)``, ACER's target for a
    separate state-value head (used with continuous actions).
  trace_coefficients: ``c_t`` of `acer_trace_coefficients` (``lambda_`` included).
"""

AcerPolicyLoss = collections.namedtuple(
    "AcerPolicyLoss", ["loss", "truncated_loss", "bias_correction_loss", "rhos"]
)
AcerPolicyLoss.__doc__ = """Per-step ACER policy surrogate losses (all [T, B]).

Fields:
  loss: ``truncated_loss + bias_correction_loss``; minimising it follows ACER's ``g``.
  truncated_loss: ``-min(c, rho_t) * log pi(a_t) * (Q_ret_t - V_t)``.
  bias_correction_loss: the bias-correction term (zero when ``c`` is None).
  rhos: the importance weights ``pi(a_t) / mu(a_t)`` (stop-gradient), for logging.
"""

TrustRegionProjection = collections.namedtuple("TrustRegionProjection", ["z", "scale"])
TrustRegionProjection.__doc__ = """Output of `trust_region_projection`.

Fields:
  z: [..., D] projected direction (stop-gradient).
  scale: [...] ``max(0, (k.g - delta) / ||k||^2)`` (0 where ``||k|| = 0``); ``z = g - scale k``.
"""


def acer_trace_coefficients(
    log_rhos: tf.Tensor, action_dim: int = 1, lambda_: float = 1.0
) -> tf.Tensor:
    """ACER trace coefficients ``c_t = lambda_ * min(1, rho_t ** (1 / action_dim))``.

    ``action_dim = 1`` is the discrete-action rule ``min(1, rho)``; continuous actions use the
    action dimension ``d`` (ACER section 5). Computed in log space, so ``rho = inf`` is safe.

    Args:
      log_rhos: [T, B] (or any shape) ``log pi(a_t|x_t) - log mu(a_t|x_t)``.
      action_dim: the action dimension ``d`` (1 for discrete actions).
      lambda_: Retrace's lambda (ACER uses 1).

    Returns:
      Tensor shaped like ``log_rhos``, wrapped in ``tf.stop_gradient``.
    """
    if action_dim < 1:
        raise ValueError(f"`action_dim` must be >= 1, got {action_dim}.")
    log_rhos = to_float("log_rhos", log_rhos)
    c = tf.exp(tf.minimum(log_rhos / float(action_dim), 0.0))
    return tf.stop_gradient(lambda_ * c)


def _retrace_recursion(rewards, discounts, q_values, values, bootstrap_value, traces):
    """Q_t = r_t + d_t (c_{t+1} (Q_{t+1} - Q(x_{t+1}, a_{t+1})) + V_{t+1}); Q_T := V(x_T)."""
    next_values = tf.concat([values[1:], bootstrap_value[tf.newaxis]], axis=0)
    # c_{t+1} Q(x_{t+1}, a_{t+1}), with c_T := 0 so that the last step bootstraps from V(x_T).
    zeros = tf.zeros_like(bootstrap_value)[tf.newaxis]
    next_traces = tf.concat([traces[1:], zeros], axis=0)
    next_q = tf.concat([q_values[1:], zeros], axis=0)
    xs = rewards + discounts * (next_values - next_traces * next_q)
    return reverse_linear_recurrence(xs, discounts * next_traces, tf.zeros_like(bootstrap_value))


def retrace_targets(
    rewards: tf.Tensor,
    discounts: tf.Tensor,
    q_values: tf.Tensor,
    values: tf.Tensor,
    bootstrap_value: tf.Tensor,
    log_rhos: tf.Tensor,
    action_dim: int = 1,
    lambda_: float = 1.0,
) -> RetraceReturns:
    """ACER's Retrace target ``Q_ret`` (Algorithm 2, eq. 5), batched over [T, B].

    Algorithm 2 runs ``Q_ret <- r_i + gamma Q_ret`` (use it at step i), then
    ``Q_ret <- c_i (Q_ret - Q(x_i, a_i)) + V(x_i)``. Written per step::

        Q_ret_{T-1} = r_{T-1} + discounts_{T-1} * V(x_T)
        Q_ret_t     = r_t + discounts_t * (c_{t+1} (Q_ret_{t+1} - Q(x_{t+1}, a_{t+1}))
                                           + V(x_{t+1}))
        c_t = lambda_ * min(1, rho_t ** (1 / action_dim))

    With every ``c = 1`` (``rho >= 1``, ``lambda_ = 1``) it equals `qopc_targets`; if also
    ``Q(x_t, a_t) = V(x_t)`` (on-policy, one action) it is the lambda = 1 discounted return.

    Args:
      rewards: [T, B] float rewards ``r_t``.
      discounts: [T, B] ``gamma * (1 - terminated_t)``.
      q_values: [T, B] ``Q(x_t, a_t)`` of the taken actions.
      values: [T, B] ``V(x_t)`` (``sum_a pi(a|x_t) Q(x_t, a)`` for discrete ACER).
      bootstrap_value: [B] ``V(x_T)``.
      log_rhos: [T, B] ``log pi(a_t|x_t) - log mu(a_t|x_t)``.
      action_dim: action dimension ``d`` for the continuous trace rule (1 for discrete).
      lambda_: Retrace lambda (1 in ACER).

    Returns:
      `RetraceReturns(q_ret, v_targets, trace_coefficients)`, each [T, B] and wrapped in
      ``tf.stop_gradient``: no input receives a gradient.
    """
    named, bootstrap_value = validate_time_major(
        {
            "rewards": rewards,
            "discounts": discounts,
            "q_values": q_values,
            "values": values,
            "log_rhos": log_rhos,
        },
        bootstrap_value,
    )
    q_values, values, log_rhos = (named[k] for k in ("q_values", "values", "log_rhos"))
    traces = acer_trace_coefficients(log_rhos, action_dim, lambda_)
    q_ret = _retrace_recursion(
        named["rewards"], named["discounts"], q_values, values, bootstrap_value, traces
    )
    v_targets = tf.exp(tf.minimum(log_rhos, 0.0)) * (q_ret - q_values) + values
    return RetraceReturns(
        q_ret=tf.stop_gradient(q_ret),
        v_targets=tf.stop_gradient(v_targets),
        trace_coefficients=traces,
    )


def qopc_targets(
    rewards: tf.Tensor,
    discounts: tf.Tensor,
    q_values: tf.Tensor,
    values: tf.Tensor,
    bootstrap_value: tf.Tensor,
) -> tf.Tensor:
    """ACER's ``Q_opc`` target: `retrace_targets` with every trace coefficient equal to 1.

    Recursion::

        Q_opc_{T-1} = r_{T-1} + discounts_{T-1} * V(x_T)
        Q_opc_t     = r_t + discounts_t * (Q_opc_{t+1} - Q(x_{t+1}, a_{t+1}) + V(x_{t+1}))

    ACER recommends it in place of ``Q_ret`` in the policy gradient for continuous actions.

    Args:
      rewards, discounts, q_values, values: [T, B], as in `retrace_targets`.
      bootstrap_value: [B] ``V(x_T)``.

    Returns:
      [T, B] ``Q_opc``, wrapped in ``tf.stop_gradient``: no input receives a gradient.
    """
    named, bootstrap_value = validate_time_major(
        {"rewards": rewards, "discounts": discounts, "q_values": q_values, "values": values},
        bootstrap_value,
    )
    q_opc = _retrace_recursion(
        named["rewards"],
        named["discounts"],
        named["q_values"],
        named["values"],
        bootstrap_value,
        tf.ones_like(named["rewards"]),
    )
    return tf.stop_gradient(q_opc)


def trust_region_projection(
    g: tf.Tensor, k: tf.Tensor, delta: float | tf.Tensor
) -> TrustRegionProjection:
    """ACER's efficient trust-region update (eq. 12), batched over leading dims.

    Solves ``min_z 1/2 ||g - z||^2  s.t.  k.z <= delta`` in closed form::

        scale = max(0, (k.g - delta) / ||k||^2)      (scale = 0 where ||k|| = 0)
        z = g - scale * k

    so ``k.z = min(k.g, delta)`` and ``z = g`` when the constraint is inactive. Pass ``g`` and
    ``k`` in one sign convention: (gradient of the objective, gradient of
    ``KL(avg_policy || policy)``) as in the paper, or (gradient of the loss, minus the KL
    gradient); both are with respect to the policy statistics ``phi``, per sample.

    Args:
      g: [..., D] float gradient.
      k: [..., D] float KL gradient, same shape as ``g``.
      delta: scalar (or broadcastable to ``[...]``) constraint ``delta``.

    Returns:
      `TrustRegionProjection(z [..., D], scale [...])`, both wrapped in ``tf.stop_gradient``.
      Use it as ``loss = sum(phi * z)`` to back-propagate ``z`` into the network.
    """
    g = to_float("g", g)
    _validate.check_min_rank("g", g, 1)
    k = to_float("k", k, dtype=g.dtype)
    _validate.check_same_shape("k", k, "g", g)
    delta = tf.cast(to_float("delta", delta), g.dtype)
    kg = tf.reduce_sum(k * g, axis=-1)
    kk = tf.reduce_sum(k * k, axis=-1)
    positive = kk > 0.0
    safe_kk = tf.where(positive, kk, tf.ones_like(kk))
    scale = tf.where(positive, tf.nn.relu((kg - delta) / safe_kk), tf.zeros_like(kk))
    z = g - scale[..., tf.newaxis] * k
    return TrustRegionProjection(z=tf.stop_gradient(z), scale=tf.stop_gradient(scale))


def _check_threshold(truncation_threshold: float | None) -> None:
    if truncation_threshold is not None and truncation_threshold <= 0:
        raise ValueError(f"`truncation_threshold` must be > 0 or None, got {truncation_threshold}.")


def truncated_is_with_bias_correction_discrete(
    target_policy_logits: tf.Tensor,
    behaviour_policy_logits: tf.Tensor,
    actions: tf.Tensor,
    q_ret: tf.Tensor,
    q_values: tf.Tensor,
    values: tf.Tensor,
    truncation_threshold: float | None = 10.0,
) -> AcerPolicyLoss:
    """ACER policy loss for discrete actions: truncated IS plus the exact bias correction.

    ACER eq. 9 / 10's ``g``, with ``rho(a) = pi(a|x_t) / mu(a|x_t)`` and ``c`` the threshold::

        g_t = min(c, rho_t(a_t)) grad log pi(a_t) (Q_ret_t - V_t)
              + sum_a [1 - c / rho_t(a)]_+ pi(a) grad log pi(a) (Q(x_t, a) - V_t)

    is returned as the per-step loss ``-(...)`` with the grad operators removed, so that
    ``-grad loss_t = g_t``. ``[1 - c/rho(a)]_+ pi(a)`` is computed as ``[pi(a) - c mu(a)]_+``
    (finite when ``pi(a) = 0``). With ``c = None`` the weight is the untruncated ``rho`` and
    there is no correction term.

    Gradients: only ``target_policy_logits`` (through ``log pi``) receive a gradient; the
    weights, ``q_ret``, ``q_values``, ``values`` and the behaviour logits are stopped.

    Args:
      target_policy_logits: [T, B, A] logits (or log-probs) of ``pi``.
      behaviour_policy_logits: [T, B, A] logits (or log-probs) of ``mu``.
      actions: [T, B] integer actions ``a_t``.
      q_ret: [T, B] ``Q_ret`` (or ``Q_opc``) targets.
      q_values: [T, B, A] ``Q(x_t, a)`` for all actions.
      values: [T, B] ``V(x_t)``.
      truncation_threshold: ``c`` (> 0), or None to disable truncation.

    Returns:
      `AcerPolicyLoss(loss, truncated_loss, bias_correction_loss, rhos)`, each [T, B].
    """
    _check_threshold(truncation_threshold)
    target_logits = to_float("target_policy_logits", target_policy_logits)
    _validate.check_rank("target_policy_logits", target_logits, 3)
    dtype = target_logits.dtype
    behaviour_logits = to_float("behaviour_policy_logits", behaviour_policy_logits, dtype)
    _validate.check_same_shape(
        "behaviour_policy_logits", behaviour_logits, "target_policy_logits", target_logits
    )
    q_values = to_float("q_values", q_values, dtype)
    _validate.check_same_shape("q_values", q_values, "target_policy_logits", target_logits)
    actions = tf.convert_to_tensor(actions)
    if not actions.dtype.is_integer:
        raise ValueError(f"`actions` must be an integer tensor, got dtype {actions.dtype.name}.")
    _validate.check_shape(
        "actions", actions, target_logits.shape[:2], "target_policy_logits[..., 0]"
    )
    q_ret = to_float("q_ret", q_ret, dtype)
    _validate.check_shape("q_ret", q_ret, target_logits.shape[:2], "target_policy_logits[..., 0]")
    values = to_float("values", values, dtype)
    _validate.check_same_shape("values", values, "q_ret", q_ret)

    log_pi = tf.nn.log_softmax(target_logits)  # receives the gradient
    log_mu = tf.stop_gradient(tf.nn.log_softmax(behaviour_logits))
    log_pi_a = tf.gather(log_pi, actions, batch_dims=2)
    log_rho_a = tf.stop_gradient(log_pi_a - tf.gather(log_mu, actions, batch_dims=2))
    rho_a = tf.exp(log_rho_a)
    adv_ret = tf.stop_gradient(q_ret - values)
    if truncation_threshold is None:
        truncated_loss = -tf.math.multiply_no_nan(log_pi_a, rho_a * adv_ret)
        return AcerPolicyLoss(truncated_loss, truncated_loss, tf.zeros_like(truncated_loss), rho_a)
    truncated_loss = -tf.math.multiply_no_nan(
        log_pi_a, tf.minimum(truncation_threshold, rho_a) * adv_ret
    )
    pi, mu = tf.stop_gradient(tf.exp(log_pi)), tf.exp(log_mu)
    weights = tf.nn.relu(pi - truncation_threshold * mu)  # [1 - c/rho(a)]_+ pi(a)
    adv_all = tf.stop_gradient(q_values - values[..., tf.newaxis])
    # multiply_no_nan: a zero weight times log pi(a) = -inf (masked action) contributes 0.
    correction_loss = -tf.reduce_sum(tf.math.multiply_no_nan(log_pi, weights * adv_all), -1)
    return AcerPolicyLoss(truncated_loss + correction_loss, truncated_loss, correction_loss, rho_a)


def truncated_is_with_bias_correction_continuous(
    target_log_prob: tf.Tensor,
    behaviour_log_prob: tf.Tensor,
    sampled_target_log_prob: tf.Tensor,
    sampled_behaviour_log_prob: tf.Tensor,
    q_ret: tf.Tensor,
    sampled_q_values: tf.Tensor,
    values: tf.Tensor,
    truncation_threshold: float | None = 10.0,
) -> AcerPolicyLoss:
    """ACER policy loss for continuous actions, bias correction from one sample ``a' ~ pi``.

    With ``rho_t = pi(a_t)/mu(a_t)`` and ``rho'_t = pi(a'_t)/mu(a'_t)``::

        g_t = min(c, rho_t) grad log pi(a_t) (Q_ret_t - V_t)
              + [1 - c / rho'_t]_+ grad log pi(a'_t) (Q(x_t, a'_t) - V_t)

    returned as the per-step loss ``-(...)`` without the grad operators (``-grad loss = g``).
    ACER passes ``Q_opc`` as ``q_ret`` here. ``c = None``: untruncated ``rho``, no correction.

    Gradients: only ``target_log_prob`` and ``sampled_target_log_prob`` receive a gradient
    (compute the latter on ``tf.stop_gradient(a')``); all weights and values are stopped.

    Args:
      target_log_prob: [T, B] ``log pi(a_t|x_t)`` of the behaviour action.
      behaviour_log_prob: [T, B] ``log mu(a_t|x_t)``.
      sampled_target_log_prob: [T, B] ``log pi(a'_t|x_t)`` of a fresh sample ``a' ~ pi``.
      sampled_behaviour_log_prob: [T, B] ``log mu(a'_t|x_t)``.
      q_ret: [T, B] ``Q_ret`` or ``Q_opc``.
      sampled_q_values: [T, B] ``Q(x_t, a'_t)``.
      values: [T, B] ``V(x_t)``.
      truncation_threshold: ``c`` (> 0), or None to disable truncation.

    Returns:
      `AcerPolicyLoss(loss, truncated_loss, bias_correction_loss, rhos)`, each [T, B].
    """
    _check_threshold(truncation_threshold)
    named, _ = validate_time_major(
        {
            "target_log_prob": target_log_prob,
            "behaviour_log_prob": behaviour_log_prob,
            "sampled_target_log_prob": sampled_target_log_prob,
            "sampled_behaviour_log_prob": sampled_behaviour_log_prob,
            "q_ret": q_ret,
            "sampled_q_values": sampled_q_values,
            "values": values,
        },
    )
    log_pi_a = named["target_log_prob"]
    values = tf.stop_gradient(named["values"])
    rho = tf.stop_gradient(tf.exp(log_pi_a - named["behaviour_log_prob"]))
    adv_ret = tf.stop_gradient(named["q_ret"]) - values
    if truncation_threshold is None:
        truncated_loss = -tf.math.multiply_no_nan(log_pi_a, rho * adv_ret)
        return AcerPolicyLoss(truncated_loss, truncated_loss, tf.zeros_like(truncated_loss), rho)
    truncated_loss = -tf.math.multiply_no_nan(
        log_pi_a, tf.minimum(truncation_threshold, rho) * adv_ret
    )
    log_pi_s = named["sampled_target_log_prob"]
    # [1 - c / rho']_+ = [1 - c exp(log mu - log pi)]_+, zero when pi(a') underflows.
    log_inv_rho_s = tf.stop_gradient(named["sampled_behaviour_log_prob"] - log_pi_s)
    weight = tf.nn.relu(1.0 - truncation_threshold * tf.exp(log_inv_rho_s))
    adv_s = tf.stop_gradient(named["sampled_q_values"]) - values
    correction_loss = -tf.math.multiply_no_nan(log_pi_s, weight * adv_s)
    return AcerPolicyLoss(truncated_loss + correction_loss, truncated_loss, correction_loss, rho)
