"""V-trace off-policy actor-critic targets over time-major ``[T, B]`` trajectories.

Reference: Espeholt, Soyer, Munos et al. 2018, "IMPALA: Scalable Distributed Deep-RL with
Importance Weighted Actor-Learner Architectures", https://arxiv.org/abs/1802.01561 (eq. 1,
section 4), extended with the lambda trace coefficient of Retrace / rlax.

Notation (paper, section 4.1), for ``s = 0 .. T-1`` with ``V(x_T) = bootstrap_value``::

    rho_t   = min(rho_bar, pi(a_t|x_t) / mu(a_t|x_t))        clip_rho_threshold
    c_t     = lambda * min(c_bar, pi(a_t|x_t) / mu(a_t|x_t))  clip_c_threshold, lambda_
    delta_t = rho_t * (r_t + gamma_t V(x_{t+1}) - V(x_t))     gamma_t = discounts[t]
    v_s     = V(x_s) + sum_{t>=s} (prod_{i=s}^{t-1} gamma_i c_i) delta_t
            = V(x_s) + delta_s + gamma_s c_s (v_{s+1} - V(x_{s+1}))      (the recursion)
    A_s     = rho^pg_s * (r_s + gamma_s v_{s+1} - V(x_s))      clip_pg_rho_threshold

``discounts[t] = gamma * (1 - terminated[t])``: a zero discount cuts the trace, so one
trajectory holding two episodes gives the targets of the two episodes computed apart.

Speed: the backward recursion is the only sequential part. Two code paths compute the same
numbers (both are tested against numpy):
  * graph mode / eager: the elementwise work (exp, clipping, TD errors, advantages) runs over
    the whole ``[T, B]`` block, and the recursion is a ``tf.while_loop`` whose body is one
    multiply-add on a ``[B]`` row (few ops per iteration: graph mode pays per op); the
    independent reads run ahead (``parallel_iterations``);
  * under ``tf.function(jit_compile=True)`` (detected while tracing): a single loop whose
    body computes everything for step t, which XLA fuses into one kernel per row, so the
    inputs are read once and no ``[T, B]`` intermediates are written.
``benchmarks/ops_bench.py`` measures both against a scalable_agent-style ``tf.scan``.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import inspect

import tensorflow as tf

from tfagents_vtrace.ops import _validate
from tfagents_vtrace.ops._recurrence import in_xla_context, reverse_recurrence

__all__ = [
    "VTraceFromLogitsReturns",
    "VTraceReturns",
    "from_distributions",
    "from_importance_weights",
    "from_logits",
    "log_probs_from_logits_and_actions",
]

VTraceReturns = collections.namedtuple("VTraceReturns", ["vs", "pg_advantages"])
VTraceReturns.__doc__ = """Output of `from_importance_weights`.

Fields:
  vs: [T, B, ...] V-trace value targets v_s (stop-gradient); train V(x_s) towards them.
  pg_advantages: [T, B, ...] policy-gradient advantages rho^pg_s (r_s + gamma_s v_{s+1} -
    V(x_s)) (stop-gradient).
"""

VTraceFromLogitsReturns = collections.namedtuple(
    "VTraceFromLogitsReturns",
    ["vs", "pg_advantages", "log_rhos", "behaviour_action_log_probs", "target_action_log_probs"],
)
VTraceFromLogitsReturns.__doc__ = """Output of `from_logits` and `from_distributions`.

Fields:
  vs, pg_advantages: as in `VTraceReturns` (stop-gradient).
  log_rhos: [T, B] log pi(a_t) - log mu(a_t); differentiable w.r.t. the target policy.
  behaviour_action_log_probs: [T, B] log mu(a_t); differentiable w.r.t. the behaviour policy
    parameters (usually constants).
  target_action_log_probs: [T, B] log pi(a_t); differentiable w.r.t. the target policy, the
    term of the policy-gradient loss -log pi(a_t) * pg_advantages.
"""


def log_probs_from_logits_and_actions(policy_logits, actions) -> tf.Tensor:
    """Log-probabilities of the taken actions under softmax policies.

    Args:
      policy_logits: float [T, B, NUM_ACTIONS] unnormalised log-probabilities (any leading
        dims are accepted: [..., NUM_ACTIONS]).
      actions: integer [T, B] (the leading dims of ``policy_logits``) action indices.

    Returns:
      float [T, B]: ``log softmax(policy_logits)[actions]``. Differentiable w.r.t.
      ``policy_logits``.
    """
    policy_logits = _validate.to_float("policy_logits", policy_logits)
    actions = tf.convert_to_tensor(actions)
    if not actions.dtype.is_integer:
        raise ValueError(f"`actions` must be an integer tensor, got dtype {actions.dtype.name}.")
    _validate.check_min_rank("policy_logits", policy_logits, 2)
    _validate.check_shape("actions", actions, policy_logits.shape[:-1], ref="policy_logits[..., 0]")
    log_probs = tf.nn.log_softmax(policy_logits)
    return tf.gather(log_probs, actions, batch_dims=len(actions.shape))


def _in_name_scope(fn):
    """Runs ``fn`` inside ``tf.name_scope(name)``, ``name`` being one of its arguments.

    scalable_agent's functions take ``name=`` (a TF1 name scope); None means no scope of
    our own, anything else but a string raises ValueError naming ``name``.
    """
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        name = signature.bind(*args, **kwargs).arguments.get(
            "name", signature.parameters["name"].default
        )
        if name is not None and not isinstance(name, str):
            raise ValueError(
                f"`name` must be a string (a tf.name_scope) or None, got "
                f"{type(name).__name__} {name!r}; `clip_c_threshold` and `lambda_` are "
                "keyword-only."
            )
        with contextlib.nullcontext() if name is None else tf.name_scope(name):
            return fn(*args, **kwargs)

    return wrapper


def _threshold(name: str, value, dtype: tf.DType) -> tf.Tensor | None:
    """A scalar clipping threshold as a tensor, or None (no clipping)."""
    if value is None:
        return None
    t = _validate.to_float(name, value, dtype)
    _validate.check_rank(name, t, 0)
    return t


@_in_name_scope
def from_importance_weights(
    log_rhos,
    discounts,
    rewards,
    values,
    bootstrap_value,
    clip_rho_threshold: float | tf.Tensor | None = 1.0,
    clip_pg_rho_threshold: float | tf.Tensor | None = 1.0,
    name: str | None = "vtrace_from_importance_weights",
    *,
    clip_c_threshold: float | tf.Tensor | None = 1.0,
    lambda_: float | tf.Tensor = 1.0,
) -> VTraceReturns:
    """V-trace targets from log importance weights (IMPALA eq. 1, module docstring).

    Computes, backwards from ``v_T = bootstrap_value``,
    ``v_s = V(x_s) + delta_s + gamma_s c_s (v_{s+1} - V(x_{s+1}))`` with
    ``delta_s = rho_s (r_s + gamma_s V(x_{s+1}) - V(x_s))``, and
    ``A_s = rho^pg_s (r_s + gamma_s v_{s+1} - V(x_s))``. All of ``log_rhos``, ``discounts``,
    ``rewards``, ``values`` have one shape: time-major [T, B] or [T, B, C...] (extra
    trailing dims are elementwise, e.g. one critic per C).

    The positional parameters are scalable_agent's, in its order (``name`` is the eighth);
    the extensions ``clip_c_threshold`` and ``lambda_`` are keyword-only, and their
    defaults (1.0) give the reference's ``c_t = min(1, rho_t)``.

    Args:
      log_rhos: float [T, B] log(pi(a_t|x_t) / mu(a_t|x_t)).
      discounts: float [T, B] gamma_t = gamma * (1 - terminated_t).
      rewards: [T, B] r_t; integer rewards are cast to the float dtype of ``log_rhos`` (as
        the reference does).
      values: float [T, B] V(x_t) of the target policy's critic.
      bootstrap_value: float [B] V(x_T).
      clip_rho_threshold: rho_bar for ``delta_t``; None: no clipping.
      clip_pg_rho_threshold: the clipping threshold of rho in the policy-gradient advantage;
        None: no clipping.
      name: the ``tf.name_scope`` all the ops are created in; None: no scope of our own.
      clip_c_threshold: (keyword-only) c_bar for the trace coefficients; None: no clipping.
      lambda_: (keyword-only) scalar trace coefficient multiplier,
        c_t = lambda_ * min(c_bar, rho_t).

    Returns:
      `VTraceReturns(vs, pg_advantages)`, both [T, B]. No input receives a gradient: both
      outputs are wrapped in ``tf.stop_gradient``.

    Raises:
      ValueError: naming the argument, on wrong rank, mismatched T or B, non-float input
        (integer rewards are cast) or a ``name`` that is not a string.
    """
    log_rhos = _validate.to_float("log_rhos", log_rhos)
    dtype = log_rhos.dtype
    discounts = _validate.to_float("discounts", discounts, dtype)
    rewards = _validate.rewards_to_float("rewards", rewards, dtype)
    values = _validate.to_float("values", values, dtype)
    bootstrap_value = _validate.to_float("bootstrap_value", bootstrap_value, dtype)
    _validate.check_min_rank("values", values, 2)
    for name, tensor in (("log_rhos", log_rhos), ("discounts", discounts), ("rewards", rewards)):
        _validate.check_same_shape(name, tensor, "values", values)
    _validate.check_shape(
        "bootstrap_value", bootstrap_value, values.shape[1:], ref="values without its time axis"
    )
    rho_bar = _threshold("clip_rho_threshold", clip_rho_threshold, dtype)
    pg_rho_bar = _threshold("clip_pg_rho_threshold", clip_pg_rho_threshold, dtype)
    c_bar = _threshold("clip_c_threshold", clip_c_threshold, dtype)
    lambda_ = _threshold("lambda_", lambda_, dtype)

    # Targets only: keep the loop out of any gradient tape.
    inputs = [tf.stop_gradient(x) for x in (log_rhos, discounts, rewards, values, bootstrap_value)]
    clips = (rho_bar, c_bar, pg_rho_bar, lambda_)
    if in_xla_context():
        vs, pg_advantages = _vtrace_fused_loop(*inputs, clips)
    else:
        vs, pg_advantages = _vtrace_vectorized(*inputs, clips)
    return VTraceReturns(vs=tf.stop_gradient(vs), pg_advantages=tf.stop_gradient(pg_advantages))


def _importance_weights(log_rhos: tf.Tensor, clips) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(rho_t, c_t, rho^pg_t) = clipped importance weights; c_t includes lambda."""
    rho_bar, c_bar, pg_rho_bar, lambda_ = clips
    ratios = tf.exp(log_rhos)
    clip = lambda bar: ratios if bar is None else tf.minimum(bar, ratios)
    return clip(rho_bar), lambda_ * clip(c_bar), clip(pg_rho_bar)


def _vtrace_vectorized(log_rhos, discounts, rewards, values, bootstrap_value, clips):
    """Graph/eager path: all elementwise work over [T, B] at once, a lean loop between."""
    rhos, cs, pg_rhos = _importance_weights(log_rhos, clips)
    values_tp1 = tf.concat([values[1:], bootstrap_value[None]], axis=0)
    deltas = rhos * (rewards + discounts * values_tp1 - values)
    vs = values + reverse_recurrence(discounts * cs, deltas)
    vs_tp1 = tf.concat([vs[1:], bootstrap_value[None]], axis=0)
    return vs, pg_rhos * (rewards + discounts * vs_tp1 - values)


def _vtrace_fused_loop(log_rhos, discounts, rewards, values, bootstrap_value, clips):
    """XLA path: one pass, each iteration reads the step-t rows and writes v_t and A_t.

    XLA compiles the body to a few fused kernels per row, so no [T, B] intermediates are
    materialised (the vectorized path makes about three times as many passes over memory).
    Only ``t`` and ``acc_{t+1} = v_{t+1} - V(x_{t+1})`` are carried: ``V(x_{t+1})`` is read
    again (the bootstrap value at ``t = T-1``) and ``v_{t+1} = V(x_{t+1}) + acc_{t+1}``, which
    saves XLA the copies of extra loop-carried rows (the XLA column of
    ``benchmarks/ops_bench.py`` times this path).
    """
    num_steps = tf.shape(values)[0]
    arrays = [
        tf.TensorArray(values.dtype, size=num_steps, element_shape=values.shape[1:])
        for _ in range(2)  # two buffers (one object twice would cost XLA a copy)
    ]

    def body(t, acc, vs_out, pg_out):
        rho, c, pg_rho = _importance_weights(log_rhos[t], clips)
        discount, reward, value = discounts[t], rewards[t], values[t]
        value_tp1 = tf.where(
            t + 1 < num_steps, values[tf.minimum(t + 1, num_steps - 1)], bootstrap_value
        )
        pg_advantage = pg_rho * (reward + discount * (value_tp1 + acc) - value)
        acc = rho * (reward + discount * value_tp1 - value) + discount * c * acc
        return t - 1, acc, vs_out.write(t, value + acc), pg_out.write(t, pg_advantage)

    init = (num_steps - 1, tf.zeros_like(bootstrap_value))
    *_, vs_out, pg_out = tf.while_loop(
        lambda t, *_: t >= 0, body, (*init, *arrays), maximum_iterations=num_steps
    )
    return vs_out.stack(), pg_out.stack()


def _from_action_log_probs(
    behaviour_action_log_probs,
    target_action_log_probs,
    discounts,
    rewards,
    values,
    bootstrap_value,
    **kwargs,
) -> VTraceFromLogitsReturns:
    """Shared tail of `from_logits` / `from_distributions`."""
    log_rhos = target_action_log_probs - behaviour_action_log_probs
    returns = from_importance_weights(
        log_rhos, discounts, rewards, values, bootstrap_value, **kwargs
    )
    return VTraceFromLogitsReturns(
        vs=returns.vs,
        pg_advantages=returns.pg_advantages,
        log_rhos=log_rhos,
        behaviour_action_log_probs=behaviour_action_log_probs,
        target_action_log_probs=target_action_log_probs,
    )


@_in_name_scope
def from_logits(
    behaviour_policy_logits,
    target_policy_logits,
    actions,
    discounts,
    rewards,
    values,
    bootstrap_value,
    clip_rho_threshold: float | tf.Tensor | None = 1.0,
    clip_pg_rho_threshold: float | tf.Tensor | None = 1.0,
    name: str | None = "vtrace_from_logits",
    *,
    clip_c_threshold: float | tf.Tensor | None = 1.0,
    lambda_: float | tf.Tensor = 1.0,
) -> VTraceFromLogitsReturns:
    """V-trace for softmax policies: log rho_t = log pi(a_t) - log mu(a_t), then
    `from_importance_weights`.

    Args:
      behaviour_policy_logits: float [T, B, NUM_ACTIONS] logits of mu (the actors' policy).
      target_policy_logits: float [T, B, NUM_ACTIONS] logits of pi (the learner's policy).
      actions: integer [T, B] actions taken by mu.
      discounts, rewards, values: float [T, B] (integer rewards are cast); bootstrap_value:
        float [B]; thresholds and ``lambda_``: as in `from_importance_weights` (the
        positional parameters are scalable_agent's; ``clip_c_threshold`` and ``lambda_``
        are keyword-only).
      name: the ``tf.name_scope`` of the ops (`from_importance_weights` nests its default
        scope inside it, as in the reference); None: no scope of our own.

    Returns:
      `VTraceFromLogitsReturns`. ``vs`` and ``pg_advantages`` are stop-gradient targets;
      ``log_rhos``, ``target_action_log_probs`` (and ``behaviour_action_log_probs``) keep
      their gradients w.r.t. ``target_policy_logits`` (``behaviour_policy_logits``), so
      ``-target_action_log_probs * pg_advantages`` is the policy-gradient loss.
    """
    behaviour_policy_logits = _validate.to_float("behaviour_policy_logits", behaviour_policy_logits)
    target_policy_logits = _validate.to_float("target_policy_logits", target_policy_logits)
    _validate.check_rank("target_policy_logits", target_policy_logits, 3)
    _validate.check_same_shape(
        "behaviour_policy_logits",
        behaviour_policy_logits,
        "target_policy_logits",
        target_policy_logits,
    )
    actions = tf.convert_to_tensor(actions)
    _validate.check_shape(
        "actions", actions, target_policy_logits.shape[:-1], ref="target_policy_logits[..., 0]"
    )
    _check_time_batch(actions, discounts, rewards, values)
    return _from_action_log_probs(
        log_probs_from_logits_and_actions(behaviour_policy_logits, actions),
        log_probs_from_logits_and_actions(target_policy_logits, actions),
        discounts,
        rewards,
        values,
        bootstrap_value,
        clip_rho_threshold=clip_rho_threshold,
        clip_pg_rho_threshold=clip_pg_rho_threshold,
        clip_c_threshold=clip_c_threshold,
        lambda_=lambda_,
    )


@_in_name_scope
def from_distributions(
    behaviour_distribution,
    target_distribution,
    actions,
    discounts,
    rewards,
    values,
    bootstrap_value,
    clip_rho_threshold: float | tf.Tensor | None = 1.0,
    clip_pg_rho_threshold: float | tf.Tensor | None = 1.0,
    name: str | None = "vtrace_from_distributions",
    *,
    clip_c_threshold: float | tf.Tensor | None = 1.0,
    lambda_: float | tf.Tensor = 1.0,
) -> VTraceFromLogitsReturns:
    """V-trace for any pair of ``tfp.distributions`` policies over [T, B].

    ``log rho_t = target.log_prob(a_t) - behaviour.log_prob(a_t)``. The distributions' batch
    shape must begin with [T, B]. For continuous actions the log-probability of the whole
    action vector is used: an ``Independent``/multivariate distribution (event shape [A])
    already gives [T, B]; a distribution whose batch shape carries the action dims (e.g. a
    ``Normal`` with ``loc`` [T, B, A], treated as independent per dimension) gives
    [T, B, A], and those trailing dims are summed. Both cases give the same numbers.

    Args:
      behaviour_distribution: mu, batch shape [T, B] (or [T, B, A...]).
      target_distribution: pi, the same shapes as ``behaviour_distribution``.
      actions: [T, B] (discrete) or [T, B, A...] actions taken by mu.
      discounts, rewards, values, bootstrap_value, thresholds, ``lambda_``, ``name``: as in
        `from_logits` (no scalable_agent counterpart; the parameters follow `from_logits`).

    Returns:
      `VTraceFromLogitsReturns`, see `from_logits`: ``vs``/``pg_advantages`` are
      stop-gradient; the log-probs and ``log_rhos`` keep gradients w.r.t. the parameters of
      the distributions (the target's, and the behaviour's if they are not constants).
    """
    actions = tf.convert_to_tensor(actions)
    _check_time_batch(actions, discounts, rewards, values)
    log_probs = []
    for name, dist in (
        ("behaviour_distribution", behaviour_distribution),
        ("target_distribution", target_distribution),
    ):
        log_prob = dist.log_prob(actions)
        _validate.check_min_rank(f"{name}.log_prob(actions)", log_prob, 2)
        if log_prob.shape.rank is not None and log_prob.shape.rank > 2:
            log_prob = tf.reduce_sum(log_prob, axis=list(range(2, log_prob.shape.rank)))
        _validate.check_shape(
            f"{name}.log_prob(actions)", log_prob, actions.shape[:2], "actions[:2]"
        )
        log_probs.append(log_prob)
    return _from_action_log_probs(
        *log_probs,
        discounts,
        rewards,
        values,
        bootstrap_value,
        clip_rho_threshold=clip_rho_threshold,
        clip_pg_rho_threshold=clip_pg_rho_threshold,
        clip_c_threshold=clip_c_threshold,
        lambda_=lambda_,
    )


def _check_time_batch(actions: tf.Tensor, discounts, rewards, values) -> None:
    """Checks that ``actions`` starts with [T, B] and the [T, B] inputs match it."""
    _validate.check_min_rank("actions", actions, 2)
    for name, x in (("discounts", discounts), ("rewards", rewards), ("values", values)):
        convert = _validate.rewards_to_float if name == "rewards" else _validate.to_float
        x = convert(name, x)
        _validate.check_rank(name, x, 2)
        _validate.check_shape(name, x, actions.shape[:2], ref="actions[:2]")
