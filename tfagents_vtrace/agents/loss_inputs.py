"""What the actor-critic losses read from an unroll batch: clipped rewards, discounts and
the loss mask with the time-limit bootstrap, and the policy's log-probabilities, importance
log-ratios and entropy for any policy kind.

Reward clipping follows IMPALA (Espeholt et al. 2018, https://arxiv.org/abs/1802.01561):
rewards clipped to [-1, 1] ("abs_one") or squashed asymmetrically ("soft_asymmetric",
``5 * tanh(r / 5)`` with negative rewards weighted by 0.3).
"""

from __future__ import annotations

import tensorflow as tf

from tfagents_vtrace.ops import vtrace

REWARD_CLIPPING = ("none", "abs_one", "soft_asymmetric")
VALID_FRACTION = "valid_fraction"  # the unmasked share of the batch, summed over replicas


def normalize_advantages(adv: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """``(adv - mean) / (std + 1e-8)`` over the entries where ``mask`` is 1 (stop-gradient;
    per replica under a distribution strategy)."""
    count = tf.maximum(tf.reduce_sum(mask), 1.0)
    mean = tf.reduce_sum(mask * adv) / count
    var = tf.reduce_sum(mask * tf.square(adv - mean)) / count
    return tf.stop_gradient((adv - mean) / (tf.sqrt(var) + 1e-8))


def divide_by_valid(metrics: dict, keys) -> None:
    """Turns the ``keys`` of replica-summed loss metrics (sums over ``[T, B]`` times ``1 / (T
    * global_B)``) into means over the unmasked steps, and drops ``valid_fraction`` (the same
    scaled sum of the mask); in place. A loss that averages over every ``[T, B]`` entry
    leaves such a diagnostic low by the share of reset steps until it is divided."""
    valid = tf.maximum(metrics.pop(VALID_FRACTION), 1e-12)
    for key in keys:
        if key in metrics:
            metrics[key] = metrics[key] / valid


def clip_rewards(rewards: tf.Tensor, mode: str) -> tf.Tensor:
    """Clips ``rewards`` (any shape, float) elementwise; no gradient flows (rewards are data).

    * "none": unchanged.
    * "abs_one": ``clip(r, -1, 1)``.
    * "soft_asymmetric": ``5 * tanh(r / 5)``, scaled by 0.3 where ``r < 0`` (IMPALA, DMLab).
    """
    rewards = tf.convert_to_tensor(rewards, tf.float32)
    if mode == "none":
        return rewards
    if mode == "abs_one":
        return tf.clip_by_value(rewards, -1.0, 1.0)
    if mode == "soft_asymmetric":
        squeezed = tf.tanh(rewards / 5.0)
        return tf.where(rewards < 0.0, 0.3 * squeezed, squeezed) * 5.0
    raise ValueError(f"reward_clipping: expected one of {REWARD_CLIPPING}, received {mode!r}")


def episode_targets(
    batch: dict,
    values: tf.Tensor,
    discount: float,
    reward_clipping: str,
    reward_scale: float = 1.0,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """``(rewards', discounts, mask)``, each ``[T, B]``, of a runtime unroll batch.

    ``values`` ``[T+1, B]`` are the network's values on the T+1 observations. With the loss
    mask ``m_t = 1 - reset_t`` (a reset step's action never reached an environment):

        r'_t = clip(s * r_t) + gamma * truncated_t * sg(V(x_{t+1}))   (time-limit bootstrap)
        d_t  = gamma * (1 - terminated_t) * (1 - truncated_t) * m_t

    where ``x_{t+1}`` after a truncated step is the episode's final observation (NEXT_STEP
    autoreset). No gradient flows through any output.
    """
    mask = 1.0 - tf.cast(batch["reset"][:-1], tf.float32)
    terminated = tf.cast(batch["terminated"], tf.float32)
    truncated = tf.cast(batch["truncated"], tf.float32)
    gamma = float(discount)
    rewards = tf.cast(batch["reward"], tf.float32) * float(reward_scale)
    rewards = clip_rewards(rewards, reward_clipping)
    rewards = rewards + gamma * truncated * tf.stop_gradient(values[1:])
    discounts = gamma * (1.0 - terminated) * (1.0 - truncated) * mask
    return rewards, discounts, mask


def policy_terms(
    network, target: dict, behaviour: dict, actions: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """``(log pi(a_t|x_t), log_rho_t, H(pi(.|x_t)))``, each ``[T, B]``, for any policy kind.

    ``target``/``behaviour`` are the policy parameters ``[T, B, ...]`` of the learner's and
    the actors' policy, ``actions`` ``[T, B(, A)]``; ``log_rho = log pi(a|x) - log mu(a|x)``.
    Categorical policies (a ``logits`` entry) take a fast path without tfp objects; a
    distribution without an analytic entropy (tanh-squashed Gaussian) uses the single-sample
    estimate ``-log pi(a'|x)``, ``a' ~ pi``. Gradients reach ``target`` through the log-prob
    and the entropy (and through ``log_rho``); ``behaviour`` is data.
    """
    if "logits" in target:  # categorical fast path (no tfp objects in the graph)
        logits = tf.cast(target["logits"], tf.float32)
        actions = tf.cast(actions, tf.int32)
        target_lp = vtrace.log_probs_from_logits_and_actions(logits, actions)
        behaviour_lp = vtrace.log_probs_from_logits_and_actions(
            tf.cast(behaviour["logits"], tf.float32), actions
        )
        log_p = tf.nn.log_softmax(logits)
        entropy = -tf.reduce_sum(tf.exp(log_p) * log_p, axis=-1)
        return target_lp, target_lp - behaviour_lp, entropy
    target_dist = network.distribution(target)
    behaviour_dist = network.distribution(behaviour)
    target_lp = target_dist.log_prob(actions)
    try:
        entropy = target_dist.entropy()
    except NotImplementedError:  # e.g. tanh-squashed Gaussian: single-sample estimate
        entropy = -target_dist.log_prob(tf.stop_gradient(target_dist.sample()))
    return target_lp, target_lp - behaviour_dist.log_prob(actions), entropy
