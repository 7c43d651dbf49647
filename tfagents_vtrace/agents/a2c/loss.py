"""The advantage actor-critic loss shared by A2C and A3C (the entropy-weight schedule is
:func:`tfagents_vtrace.agents.optimization.entropy_coefficient`).

Mnih et al., "Asynchronous Methods for Deep Reinforcement Learning", 2016,
https://arxiv.org/abs/1602.01783 (A3C, Algorithm S3), with the advantages of Schulman et al.,
"High-Dimensional Continuous Control Using Generalized Advantage Estimation", 2015,
https://arxiv.org/abs/1506.02438, and the annealed entropy bonus of Wang et al., "Learning to
reinforcement learn", 2016, https://arxiv.org/abs/1611.05763.

A batch has the runtime's unroll layout (see :mod:`tfagents_vtrace.runtime.acting.actor`): T+1
observations (one-step overlap), ``reset`` marking NEXT_STEP reset steps, ``terminated`` /
``truncated`` per step, the recurrent state at the unroll start. With ``V`` the network's
values over the T+1 observations, ``s`` the ``reward_scale`` and ``m_t = 1 - reset_t``:

    r'_t = clip(s * r_t) + gamma * truncated_t * sg(V(x_{t+1}))  (time-limit bootstrap)
    d_t  = gamma * (1 - terminated_t) * (1 - truncated_t) * m_t
    delta_t = r'_t + d_t * V(x_{t+1}) - V(x_t)
    A_t = delta_t + d_t * lambda * A_{t+1},   A_T = 0                        (all sg)
    R_t = r'_t + d_t R_{t+1},  R_T = V(x_T)     (value_target="nstep", the default)
    R_t = A_t + V(x_t)                          (value_target="lambda": the TD(lambda) return)
    L = sum_{t,b} m_t * [ -A_t log pi(a_t|x_t) + beta_v * 0.5 * (R_t - V(x_t))^2
                          - beta_e * H(pi(.|x_t))
                          + beta_m * 0.5 * sum_a loc_a(x_t)^2 ]   (loss_reduction="sum")

or ``mean_{t,b}`` of the same terms (``loss_reduction="mean"``: the sum times
``1 / (T * B)``). With ``lambda = 1`` both value targets are A3C's n-step returns. The last
term, with ``beta_m = policy_mean_cost`` (0 by default: no term), penalises a Gaussian
policy's mean ``loc`` (pre-tanh for "tanh_gaussian"), as SAC's ``mean_reg``; the metric
``mean_penalty`` (present when ``beta_m > 0``) is its per-step mean before the weight.

The reference for the defaults is an A3C meta-RL fork of universe-starter-agent's
``a3c.py`` (https://github.com/openai/universe-starter-agent) with the meta-RL inputs of Wang
et al., "Learning to reinforcement learn", 2016, https://arxiv.org/abs/1611.05763: its
``process_rollout`` regresses V onto ``discount(rewards + [r], gamma)``, the n-step return,
and weights the advantages of ``discount(delta, gamma * lambda)``; its loss
is ``pi_loss + 0.05 * vf_loss - beta_e * entropy`` with sums over the rollout and
``vf_loss = BETA_V * sum (V - R)^2``, i.e. ``baseline_cost = 0.1 * BETA_V`` here (the fork's
config has ``BETA_V = 0.05``; ``baseline_cost = 0.005``). ``value_target="lambda"`` and
``loss_reduction="mean"`` are kept as options: the shipped CartPole flagfiles were tuned with
them (``a2c_cartpole.cfg``, ``a3c_cartpole.cfg``, the bandit flagfiles pin them). Metrics
are per-step means whatever the reduction: the loss's terms over every ``[T, B]`` entry, as
the loss, the diagnostics ``mean_abs_log_rho`` and ``mean_penalty`` over the unmasked steps
(:func:`masked_means`).

Gradients reach the network through ``log pi``, ``V(x_t)`` (t < T) and the entropy; ``A``,
``R`` and the bootstrap values are stop-gradient. The policy is the one that acted (A2C/A3C
are on-policy): the metric ``mean_abs_log_rho`` measures how far the batch's behaviour
policy is from the network's (0 when the data is on-policy).
"""

from __future__ import annotations

import tensorflow as tf

from tfagents_vtrace.agents.a2c.config import A2CConfig
from tfagents_vtrace.agents.loss_inputs import (
    VALID_FRACTION,
    divide_by_valid,
    episode_targets,
    normalize_advantages,
    policy_terms,
)
from tfagents_vtrace.networks import NetInputs
from tfagents_vtrace.ops import returns

GAUSSIAN_KINDS = ("gaussian", "tanh_gaussian")
METRIC_KEYS = (
    "loss",
    "pg_loss",
    "baseline_loss",
    "entropy",
    "entropy_coef",
    "mean_abs_log_rho",
    "mean_penalty",  # with policy_mean_cost > 0 only
    "grad_norm",
    "learning_rate",
)


def a2c_loss(
    network,
    config: A2CConfig,
    batch: dict,
    entropy_coef: tf.Tensor | float,
    scale: tf.Tensor | float,
) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
    """The loss of the module docstring: with ``loss_reduction="mean"`` summed over
    ``[T, B]`` and multiplied by ``scale``, with "sum" summed over ``[T, B]`` only.

    Args:
      network: an ``ActorCriticNetwork`` (``unroll`` over ``[T+1, B]``).
      config: the :class:`A2CConfig` (discount, gae_lambda, baseline_cost, reward_scale,
        reward_clipping).
      batch: the runtime's unroll dict (module docstring); ``policy`` holds the behaviour
        policy's parameters ``[T, B, ...]`` (used only for the ``mean_abs_log_rho`` metric).
      entropy_coef: beta_e, float32 scalar (see
        :func:`tfagents_vtrace.agents.optimization.entropy_coefficient`).
      scale: ``1 / (T * global_B)`` so replica losses sum to the global-batch mean.

    Returns:
      ``(loss, metrics)``; the metrics are sums times ``scale`` (per-step means), with
      ``valid_fraction`` (the mask's): :func:`masked_means` of the metrics summed over
      replicas gives ``mean_abs_log_rho`` and ``mean_penalty`` as means over unmasked steps.
    """
    inputs = NetInputs(
        batch["observation"], batch["first"], batch["prev_action"], batch["prev_reward"]
    )
    out = network.unroll(inputs, tuple(batch["state"]))
    values = out.value  # [T+1, B]
    rewards, discounts, mask = episode_targets(
        batch, values, config.discount, config.reward_clipping, config.reward_scale
    )
    sg_values, bootstrap = tf.stop_gradient(values[:-1]), tf.stop_gradient(values[-1])
    gae = returns.generalized_advantage_estimation(
        rewards, sg_values, bootstrap, discounts, float(config.gae_lambda)
    )
    if config.value_target == "lambda" or float(config.gae_lambda) == 1.0:
        value_targets = gae.returns
    else:  # the n-step return to the end of the unroll
        value_targets = returns.generalized_advantage_estimation(
            rewards, sg_values, bootstrap, discounts, 1.0
        ).returns
    policy = {k: v[:-1] for k, v in out.policy.items()}
    log_prob, log_rho, entropy = policy_terms(network, policy, batch["policy"], batch["action"])
    advantages = gae.advantages
    if config.normalize_advantages:
        advantages = normalize_advantages(advantages, mask)
    pg_loss = -tf.reduce_sum(mask * log_prob * advantages) * scale
    baseline_loss = 0.5 * tf.reduce_sum(mask * tf.square(value_targets - values[:-1])) * scale
    entropy_sum = tf.reduce_sum(mask * entropy) * scale
    entropy_coef = tf.cast(entropy_coef, tf.float32)
    mean_loss = pg_loss + config.baseline_cost * baseline_loss - entropy_coef * entropy_sum
    mean_cost = float(config.policy_mean_cost)
    if mean_cost > 0.0:
        mean_penalty = policy_mean_penalty(policy, mask, scale)
        mean_loss = mean_loss + mean_cost * mean_penalty
    loss = mean_loss
    if config.loss_reduction == "sum":  # replica sums add up to the global batch's sum
        loss = mean_loss / tf.cast(scale, mean_loss.dtype)
    metrics = {
        "loss": mean_loss,
        "pg_loss": pg_loss,
        "baseline_loss": baseline_loss,
        "entropy": entropy_sum,
        "mean_abs_log_rho": tf.reduce_sum(mask * tf.abs(log_rho)) * scale,
        VALID_FRACTION: tf.reduce_sum(mask) * scale,
    }
    if mean_cost > 0.0:
        metrics["mean_penalty"] = mean_penalty
    return loss, metrics


def masked_means(metrics: dict) -> None:
    """Turns ``mean_abs_log_rho`` and ``mean_penalty`` of replica-summed :func:`a2c_loss`
    metrics into means over the unmasked steps and drops ``valid_fraction``; in place."""
    divide_by_valid(metrics, ("mean_abs_log_rho", "mean_penalty"))


def policy_mean_penalty(policy: dict, mask: tf.Tensor, scale: tf.Tensor | float) -> tf.Tensor:
    """``sum_{t,b} m_t * 0.5 * sum_a loc_{t,b,a}^2`` times ``scale``: the unweighted mean
    penalty of the module docstring, from the policy parameters ``[T, B, ...]``.

    Raises:
      ValueError: naming ``policy_mean_cost`` when ``policy`` has no ``loc`` (not Gaussian).
    """
    if "loc" not in policy:
        raise ValueError(
            f"policy_mean_cost: penalises a Gaussian policy's mean (policy heads "
            f"{GAUSSIAN_KINDS}); this policy has no 'loc' (its parameters: {sorted(policy)})"
        )
    loc = tf.cast(policy["loc"], tf.float32)
    per_step = 0.5 * tf.reduce_sum(tf.square(loc), axis=-1)
    return tf.reduce_sum(mask * per_step) * scale
