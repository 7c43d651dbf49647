"""V-trace losses with the call signatures of DI-engine's ``ding.rl_utils.vtrace``.

Reference: Espeholt, Soyer, Munos et al. 2018, "IMPALA: Scalable Distributed Deep-RL with
Importance Weighted Actor-Learner Architectures", https://arxiv.org/abs/1802.01561; the API
(names, arguments, defaults, shapes) follows DI-engine's ``ding.rl_utils.vtrace``
(https://github.com/opendilab/DI-engine/blob/main/ding/rl_utils/vtrace.py), written fresh in
TF2.

Differences from `tfagents_vtrace.ops.vtrace` that come from the DI-engine API:
  * ``value`` is ``[T+1, B]``: ``value[:-1]`` are V(x_0..x_{T-1}) and ``value[-1]`` the
    bootstrap V(x_T);
  * the discount is one scalar ``gamma`` (no per-step discounts, so no episode cuts), and the
    trace coefficient is ``gamma * lambda_ * min(c_clip_ratio, rho_t)``;
  * the losses are means over ``[T, B]`` weighted by ``weight`` (all ones when None);
  * ``reward`` may be an integer tensor (DI-engine documents it as a LongTensor): it is cast
    to the float dtype of the other inputs, as torch's type promotion does.

The recursion itself is shared with `tfagents_vtrace.ops.vtrace`::

    v_s = V(x_s) + delta_s + gamma lambda c_s (v_{s+1} - V(x_{s+1})),
    delta_s = rho_s (r_s + gamma V(x_{s+1}) - V(x_s)),
    A_s = rho^pg_s (r_s + gamma v_{s+1} - V(x_s)),    v_T = V(x_T).
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from tfagents_vtrace.ops import _recurrence, _validate, vtrace

__all__ = [
    "shape_fn_vtrace_discrete_action",
    "vtrace_advantage",
    "vtrace_data",
    "vtrace_error_continuous_action",
    "vtrace_error_discrete_action",
    "vtrace_loss",
    "vtrace_nstep_return",
]

vtrace_data = collections.namedtuple(
    "vtrace_data", ["target_output", "behaviour_output", "action", "value", "reward", "weight"]
)
vtrace_data.__doc__ = """Inputs of the V-trace losses (time-major).

Fields:
  target_output: the current policy's output: logits [T, B, N] (discrete) or a dict
    {'mu': [T, B, N], 'sigma': [T, B, N]} of a diagonal Normal (continuous).
  behaviour_output: the same for the behaviour policy that collected the data.
  action: [T, B] integer actions (discrete) or [T, B, N] float actions (continuous).
  value: [T+1, B] value estimates V(x_0) .. V(x_T) of the current critic.
  reward: [T, B] rewards, float or integer (cast to the float dtype of the outputs).
  weight: [T, B] per-step loss weights (float, int or bool mask), or None for all ones.
"""

vtrace_loss = collections.namedtuple("vtrace_loss", ["policy_loss", "value_loss", "entropy_loss"])
vtrace_loss.__doc__ = """Scalar V-trace losses.

Fields:
  policy_loss: -mean(log pi(a_t|x_t) * A_t * w_t).
  value_loss: mean((V(x_t) - v_t)^2 * w_t) (no factor 1/2).
  entropy_loss: mean(H[pi(.|x_t)] * w_t), positive: subtract it to encourage exploration.
"""

_LOG_2PI = math.log(2.0 * math.pi)


def vtrace_nstep_return(
    clipped_rhos,
    clipped_cs,
    reward,
    bootstrap_values,
    gamma: float = 0.99,
    lambda_: float = 0.95,
) -> tf.Tensor:
    """V-trace value targets v_s.

    Args:
      clipped_rhos: float [T, B] min(rho_bar, rho_t).
      clipped_cs: float [T, B] min(c_bar, rho_t).
      reward: [T, B], float or integer (cast to the dtype of ``clipped_rhos``).
      bootstrap_values: float [T+1, B] V(x_0) .. V(x_T).
      gamma: scalar discount; lambda_: scalar trace multiplier.

    Returns:
      float [T, B] ``v_s`` with ``v_s - V(x_s) = delta_s + gamma lambda_ c_s (v_{s+1} -
      V(x_{s+1}))``, ``delta_s = rho_s (r_s + gamma V(x_{s+1}) - V(x_s))``. Differentiable
      w.r.t. every input (as in DI-engine; the losses below call it on stopped inputs).
    """
    clipped_rhos, clipped_cs, reward, bootstrap_values = _check_trace(
        "bootstrap_values",
        clipped_rhos=clipped_rhos,
        clipped_cs=clipped_cs,
        reward=reward,
        bootstrap_values=bootstrap_values,
    )
    values, next_values = bootstrap_values[:-1], bootstrap_values[1:]
    deltas = clipped_rhos * (reward + gamma * next_values - values)
    return values + _recurrence.reverse_recurrence(gamma * lambda_ * clipped_cs, deltas)


def vtrace_advantage(clipped_pg_rhos, reward, return_, bootstrap_values, gamma) -> tf.Tensor:
    """Policy-gradient advantage ``clipped_pg_rhos * (reward + gamma * return_ - V)``.

    Args:
      clipped_pg_rhos: float [T, B] min(rho_bar_pg, rho_t).
      reward: [T, B], float or integer (cast to the dtype of ``clipped_pg_rhos``).
      return_: float [T, B] the targets of the *next* step, v_{t+1} (v_T = V(x_T)).
      bootstrap_values: float [T, B] V(x_t) (``value[:-1]``).
      gamma: scalar discount.

    Returns:
      float [T, B]; differentiable w.r.t. every input.
    """
    tensors = _check_trace(
        None,
        reward=reward,
        clipped_pg_rhos=clipped_pg_rhos,
        return_=return_,
        bootstrap_values=bootstrap_values,
    )
    reward, clipped_pg_rhos, return_, bootstrap_values = tensors
    return clipped_pg_rhos * (reward + gamma * return_ - bootstrap_values)


def shape_fn_vtrace_discrete_action(args, kwargs) -> tf.TensorShape:
    """The shape [T, B, N] of ``data.target_output`` in a call of `vtrace_error_discrete_action`.

    DI-engine's ``hpc_wrapper`` calls it with the positional and keyword arguments of a call
    of ``vtrace_error_discrete_action`` and keys its cache of CUDA (HPC) kernels on the
    result. As there: ``data`` is ``args[0]`` when there are positional arguments, else
    ``kwargs['data']``. This package has no HPC kernels; the function is kept for API parity
    (e.g. to key a cache of compiled functions per input shape). DI-engine has no
    continuous-action counterpart.

    Args:
      args: the positional arguments of the call (a tuple; ``args[0]`` is the `vtrace_data`).
      kwargs: its keyword arguments (a dict, read only when ``args`` is empty).

    Returns:
      ``tf.TensorShape([T, B, N])`` of the target logits; like DI-engine's ``torch.Size`` it
      iterates as ints (None for dimensions unknown while tracing).

    Raises:
      ValueError: naming ``data`` when the call holds none, or ``data.target_output`` when
        it is not a rank-3 array of logits.
    """
    if len(args) > 0:
        data = args[0]
    elif "data" in kwargs:
        data = kwargs["data"]
    else:
        raise ValueError("`data` not found: expected args[0] or kwargs['data'] (a vtrace_data).")
    if hasattr(data, "target_output"):
        target = data.target_output
    elif isinstance(data, tuple | list) and len(data) == len(vtrace_data._fields):
        target = data[0]
    else:
        raise ValueError(f"`data` must be a vtrace_data, got {type(data).__name__}.")
    if isinstance(target, dict):
        raise ValueError(
            "`data.target_output` must be logits [T, B, N], got a dict (continuous actions "
            "have no shape_fn)."
        )
    shape = tf.TensorShape(target.shape if hasattr(target, "shape") else np.shape(target))
    if shape.rank != 3:
        got = "unknown rank" if shape.rank is None else f"shape {shape.as_list()}"
        raise ValueError(f"`data.target_output` must have rank 3 [T, B, N], got {got}.")
    return shape


def _vtrace_error(policy_terms: Callable) -> Callable[..., vtrace_loss]:
    """DI-engine's error function for one kind of policy, named and documented as
    ``policy_terms``.

    ``policy_terms(target_output, behaviour_output, action)`` validates the kind's policy
    outputs and returns the target and behaviour log-probabilities of the actions and the
    target policy's entropy, ``[T, B]`` each; what follows is the same for every kind: the
    V-trace targets and advantages computed without gradient, then the weighted means.
    """

    def error(
        data: vtrace_data,
        gamma: float = 0.99,
        lambda_: float = 0.95,
        rho_clip_ratio: float = 1.0,
        c_clip_ratio: float = 1.0,
        rho_pg_clip_ratio: float = 1.0,
    ) -> vtrace_loss:
        target, behaviour, action, value, reward, weight = data
        target_log_prob, behaviour_log_prob, entropy = policy_terms(target, behaviour, action)
        reward = _validate.rewards_to_float("reward", reward, target_log_prob.dtype)
        _validate.check_shape("reward", reward, target_log_prob.shape, ref="action[:2]")
        reward, value = _check_trace("value", reward=reward, value=value)
        if weight is None:
            weight = tf.ones_like(reward)
        else:
            weight = tf.convert_to_tensor(weight)
            if not weight.dtype.is_floating:  # a 0/1 or boolean mask
                weight = tf.cast(weight, reward.dtype)
            _validate.check_same_shape("weight", weight, "reward", reward)
            weight = tf.stop_gradient(tf.cast(weight, reward.dtype))
        rhos = tf.exp(tf.stop_gradient(target_log_prob - behaviour_log_prob))
        stopped_value = tf.stop_gradient(value)
        return_ = vtrace_nstep_return(
            tf.minimum(rho_clip_ratio, rhos),
            tf.minimum(c_clip_ratio, rhos),
            tf.stop_gradient(reward),
            stopped_value,
            gamma,
            lambda_,
        )
        return_t_plus_1 = tf.concat([return_[1:], stopped_value[-1:]], axis=0)
        advantage = vtrace_advantage(
            tf.minimum(rho_pg_clip_ratio, rhos),
            tf.stop_gradient(reward),
            return_t_plus_1,
            stopped_value[:-1],
            gamma,
        )
        return_, advantage = tf.stop_gradient(return_), tf.stop_gradient(advantage)
        return vtrace_loss(
            policy_loss=-tf.reduce_mean(target_log_prob * advantage * weight),
            value_loss=tf.reduce_mean(tf.square(value[:-1] - return_) * weight),
            entropy_loss=tf.reduce_mean(entropy * weight),
        )

    error.__name__ = error.__qualname__ = policy_terms.__name__
    error.__doc__ = policy_terms.__doc__
    return error


@_vtrace_error
def vtrace_error_discrete_action(target, behaviour, action):
    """V-trace losses for a softmax policy (``target_output`` are logits [T, B, N]).

    Called as ``vtrace_error_discrete_action(data, gamma=0.99, lambda_=0.95,
    rho_clip_ratio=1.0, c_clip_ratio=1.0, rho_pg_clip_ratio=1.0)``, ``data`` a `vtrace_data`.
    rho_t = pi(a_t) / mu(a_t) from the two Categorical(logits=...) policies; the targets
    ``v_s`` and the advantages are computed without gradient. Gradients reach
    ``target_output`` (policy and entropy losses) and ``value[:-1]`` (value loss) only;
    ``behaviour_output``, ``reward``, ``weight`` and ``value[-1]`` get none.

    Returns:
      `vtrace_loss` of scalars, see its docstring.
    """
    target = _validate.to_float("target_output", target)
    behaviour = _validate.to_float("behaviour_output", behaviour)
    _validate.check_rank("target_output", target, 3)
    _validate.check_same_shape("behaviour_output", behaviour, "target_output", target)
    action = tf.convert_to_tensor(action)
    _validate.check_shape("action", action, target.shape[:-1], ref="target_output[..., 0]")
    target_log_prob = vtrace.log_probs_from_logits_and_actions(target, action)
    behaviour_log_prob = vtrace.log_probs_from_logits_and_actions(behaviour, action)
    log_softmax = tf.nn.log_softmax(target)
    entropy = -tf.reduce_sum(tf.exp(log_softmax) * log_softmax, axis=-1)
    return target_log_prob, behaviour_log_prob, entropy


@_vtrace_error
def vtrace_error_continuous_action(target, behaviour, action):
    """V-trace losses for a diagonal Gaussian policy.

    Called with the arguments of `vtrace_error_discrete_action`. ``target_output`` /
    ``behaviour_output`` are dicts {'mu', 'sigma'} of [T, B, N] tensors (``sigma`` is the
    standard deviation), ``action`` is [T, B, N]. Log-probabilities and entropies are those
    of Independent(Normal(mu, sigma), 1): summed over the N action dims. Gradients reach
    ``target_output['mu']``, ``target_output['sigma']`` and ``value[:-1]`` only.

    Returns:
      `vtrace_loss` of scalars, see its docstring.
    """
    params = {}
    for name, output in (("target_output", target), ("behaviour_output", behaviour)):
        if not isinstance(output, dict) or set(output) != {"mu", "sigma"}:
            got = sorted(output) if isinstance(output, dict) else type(output).__name__
            raise ValueError(f"`{name}` must be a dict with keys 'mu' and 'sigma', got {got}.")
        for key in ("mu", "sigma"):
            params[name, key] = _validate.to_float(f"{name}['{key}']", output[key])
            _validate.check_rank(f"{name}['{key}']", params[name, key], 3)
            ref = params["target_output", "mu"]
            _validate.check_same_shape(
                f"{name}['{key}']", params[name, key], "target_output['mu']", ref
            )
    action = _validate.to_float("action", action)
    _validate.check_same_shape(
        "action", action, "target_output['mu']", params["target_output", "mu"]
    )

    def log_prob(name):
        mu, sigma = params[name, "mu"], params[name, "sigma"]
        z = (action - mu) / sigma
        return tf.reduce_sum(-0.5 * tf.square(z) - tf.math.log(sigma) - 0.5 * _LOG_2PI, axis=-1)

    sigma = params["target_output", "sigma"]
    entropy = tf.reduce_sum(0.5 + 0.5 * _LOG_2PI + tf.math.log(sigma), axis=-1)
    return log_prob("target_output"), log_prob("behaviour_output"), entropy


def _check_trace(values_name: str | None, **tensors) -> list[tf.Tensor]:
    """Validates [T, B] inputs and the [T+1, B] ``values_name`` one; returns float tensors.

    ``reward`` may be integer: it is cast to the dtype of the first other input.
    """
    floats = {name: _validate.to_float(name, x) for name, x in tensors.items() if name != "reward"}
    dtype = next(iter(floats.values())).dtype
    out = {
        name: floats[name] if name != "reward" else _validate.rewards_to_float(name, x, dtype)
        for name, x in tensors.items()
    }
    ref_name = next(iter(out))
    ref = out[ref_name]
    _validate.check_rank(ref_name, ref, 2)
    for name, t in out.items():
        if name == values_name:
            steps = None if ref.shape[0] is None else ref.shape[0] + 1
            _validate.check_shape(name, t, [steps, ref.shape[1]], ref=f"{ref_name}, one step more")
        else:
            _validate.check_same_shape(name, t, ref_name, ref)
    return list(out.values())
