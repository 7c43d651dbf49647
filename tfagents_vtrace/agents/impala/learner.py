"""The IMPALA learner: V-trace actor-critic loss and one compiled train step.

Espeholt et al., "IMPALA: Scalable Distributed Deep-RL with Importance Weighted Actor-Learner
Architectures", 2018, https://arxiv.org/abs/1802.01561.

A batch is a dict of numpy arrays, time-major, with one-step overlap (T+1 observations):

* ``observation [T+1, B, ...]``, ``first [T+1, B]`` bool, ``prev_action [T+1, B(, A)]``,
  ``prev_reward [T+1, B]``, ``reset [T+1, B]`` bool (the observation is the final one of an
  ended episode: NEXT_STEP autoreset "reset step");
* ``action [T, B(, A)]``, ``reward [T, B]``, ``terminated [T, B]``, ``truncated [T, B]`` bool;
* ``policy``: dict of the behaviour policy's parameters ``[T, B, ...]``;
* ``state``: tuple of the recurrent state at the unroll start, ``[B, k]`` each.

Loss, with ``V`` the network's values over the T+1 observations, ``m_t = 1 - reset_t``:

    r'_t = clip(s * r_t) + gamma * truncated_t * sg(V(x_{t+1}))   (bootstrap a time-limit end)
    d_t = gamma * (1 - terminated_t) * (1 - truncated_t) * m_t
    vs, pg_adv = vtrace(log_rhos = log pi(a_t|x_t) - log mu(a_t|x_t), d, r', sg(V), sg(V_T))
    L = mean_{t,b} m_t * [ -pg_adv_t log pi(a_t|x_t)
                           + baseline_cost * 0.5 * (vs_t - V(x_t))^2
                           - entropy_cost * H(pi(.|x_t)) ]

(``s`` is ``reward_scale``.) Gradients reach the network weights through ``log pi``,
``V(x_t)`` (t < T) and the entropy;
V-trace targets and the bootstrap values are stop-gradient.
"""

from __future__ import annotations

import collections

import tensorflow as tf

from tfagents_vtrace.agents import common
from tfagents_vtrace.agents.common_learner import ReplicatedLearner
from tfagents_vtrace.agents.impala.config import ImpalaConfig
from tfagents_vtrace.networks import NetInputs
from tfagents_vtrace.ops import vtrace

METRIC_KEYS = (
    "loss",
    "pg_loss",
    "baseline_loss",
    "entropy",
    "grad_norm",
    "mean_rho",
    "learning_rate",
)


LossTerms = collections.namedtuple(
    "LossTerms", ["vtrace", "values", "target_log_probs", "log_rhos", "entropy", "mask"]
)


def loss_terms(network, config: ImpalaConfig, batch: dict) -> LossTerms:
    """Unrolls the network over the batch and computes the V-trace targets.

    Returns a :class:`LossTerms` of ``[T, B]`` tensors (``values`` is ``[T+1, B]``):
    ``vtrace`` (``VTraceReturns``: ``vs`` and ``pg_advantages``, stop-gradient), the
    target policy's log-probs of the actions, ``log_rhos``, the policy entropy and the loss
    mask ``1 - reset``. Rewards are clipped, and a truncated step's reward gains
    ``gamma * sg(V(final observation))`` with its discount set to 0 (module docstring).
    """
    inputs = NetInputs(
        batch["observation"], batch["first"], batch["prev_action"], batch["prev_reward"]
    )
    out = network.unroll(inputs, tuple(batch["state"]))
    values = out.value  # [T+1, B]
    target = {k: v[:-1] for k, v in out.policy.items()}
    rewards, discounts, mask = common.episode_targets(
        batch, values, config.discount, config.reward_clipping, config.reward_scale
    )
    target_lp, log_rhos, entropy = common.policy_terms(
        network, target, batch["policy"], batch["action"]
    )
    vt = vtrace.from_importance_weights(
        log_rhos=log_rhos,
        discounts=discounts,
        rewards=rewards,
        values=tf.stop_gradient(values[:-1]),
        bootstrap_value=tf.stop_gradient(values[-1]),
        clip_rho_threshold=config.clip_rho_threshold,
        clip_pg_rho_threshold=config.clip_pg_rho_threshold,
        clip_c_threshold=config.clip_c_threshold,
        lambda_=config.vtrace_lambda,
    )
    return LossTerms(vt, values, target_lp, log_rhos, entropy, mask)


def impala_loss(
    network, config: ImpalaConfig, batch: dict, scale: float | tf.Tensor
) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
    """The IMPALA loss of the module docstring, summed over ``[T, B]`` and times ``scale``.

    ``scale`` is ``1 / (T * global_B)`` so replica losses sum to the global-batch mean.
    Returns ``(loss, metrics)``; metrics are scaled the same way (they sum over replicas).
    """
    terms = loss_terms(network, config, batch)
    mask, vt = terms.mask, terms.vtrace
    pg_loss = -tf.reduce_sum(mask * terms.target_log_probs * vt.pg_advantages) * scale
    baseline_loss = 0.5 * tf.reduce_sum(mask * tf.square(vt.vs - terms.values[:-1])) * scale
    entropy_sum = tf.reduce_sum(mask * terms.entropy) * scale
    loss = pg_loss + config.baseline_cost * baseline_loss - config.entropy_cost * entropy_sum
    metrics = {
        "loss": loss,
        "pg_loss": pg_loss,
        "baseline_loss": baseline_loss,
        "entropy": entropy_sum,
        "mean_rho": tf.reduce_sum(mask * tf.exp(terms.log_rhos)) * scale,
    }
    return loss, metrics


class ImpalaLearner(ReplicatedLearner):
    """One compiled update of :func:`impala_loss` per ``train_step(batch)``.

    Arguments as :class:`ReplicatedLearner` (``config`` is an :class:`ImpalaConfig`).
    """

    config_type = ImpalaConfig

    def _loss(self, batch: dict, scale: tf.Tensor) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        return impala_loss(self.network, self.config, batch, scale)
