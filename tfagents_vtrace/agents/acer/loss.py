"""The ACER loss over a ``[T, B]`` batch, discrete and continuous actions.

Wang et al. 2016, "Sample Efficient Actor-Critic with Experience Replay",
https://arxiv.org/abs/1611.01224 (Algorithms 1-2, eqs. 5 and 9-12), as chainerrl's
``ACER.compute_loss``
(https://github.com/chainer/chainerrl/blob/master/chainerrl/agents/acer.py), batched over the
runtime's unroll
layout (:mod:`tfagents_vtrace.runtime.acting.actor`): T+1 observations, ``reset`` marking
NEXT_STEP reset steps, behaviour policy parameters ``mu`` under ``batch["policy"]``.
Per step ``t`` with mask ``m_t = 1 - reset_t`` and the targets of
:func:`tfagents_vtrace.agents.loss_inputs.episode_targets` (time-limit bootstrap included)::

    rho_t = pi(a_t|x_t) / mu(a_t|x_t)                  (1 on an exact on-policy update)
    Q_ret = Retrace(r', d, Q(x_t, a_t), V(x_t), V(x_T), rho)       (ops.retrace, stop-grad)
    g_t   = min(c, rho_t) grad log pi(a_t) (Q_ret_t - V_t) + bias correction     (eq. 9)
    z_t   = g_t - max(0, (k_t.g_t - delta) / |k_t|^2) k_t,  k_t = grad_phi KL(avg || pi)
    L = s * sum_t m_t [ pi_coef * (<phi_t, sg(z_t)> - beta * H(pi(.|x_t)))
                        + q_coef * 1/2 (Q_ret_t - Q(x_t, a_t))^2
                        (+ q_coef * 1/2 (V_target_t - V(x_t))^2, continuous) ]

Discrete: ``Q(x, .)`` is the Q head and ``V = sum_a pi(a|x) Q(x, a)`` (stop-gradient in the
targets and advantages, as in the reference; there is no V head), the bias correction sums
over all actions. Continuous: the stochastic dueling network gives ``Q~(x, a)`` and
``V(x)``, the correction uses one sample ``a' ~ pi``, the trace coefficient is
``min(1, rho^(1/d))`` and V is trained towards ``min(1, rho) (Q_ret - Q) + V``. ``phi`` are
the policy statistics: the logits, or the Gaussian's (mean, variance) (``trust_region_params``
"mean_var", the reference's) or (mean, std) ("loc_scale"); ``avg`` is the exponentially
averaged network. ``s = 1/(T B)`` with ``normalize_loss_by_steps`` (else ``1/B``).

An *exact on-policy* update (``on_policy=True`` without ``on_policy_importance_weights``) is
the reference's ``update_on_policy``: rho = 1, no truncation and no bias correction (``mu``
is not read). Gradients reach the network through ``phi`` (via ``z``), the entropy,
``Q(x_t, a_t)`` and ``V(x_t)`` (continuous); the average network receives none.

The metrics also carry the pieces of the per-step exponential statistics (keys ``ema/...``,
see :func:`ema_parts`), which the learner folds into ``average_value``, ``average_entropy``
and ``average_kl``.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from tfagents_vtrace.agents.acer.config import AcerConfig
from tfagents_vtrace.agents.loss_inputs import episode_targets
from tfagents_vtrace.networks import NetInputs
from tfagents_vtrace.ops import retrace


def _tfd():
    """``tfp.distributions``, imported on first use: importing this module (the agent
    registry does, for every agent's flags) must not cost a run of another agent the
    second ``tensorflow_probability`` takes (``networks.distributions`` does the same)."""
    import tensorflow_probability as tfp

    return tfp.distributions


def project_policy_loss(
    params: dict[str, tf.Tensor],
    per_step_loss: Callable[[dict[str, tf.Tensor]], tf.Tensor],
    per_step_kl: Callable[[dict[str, tf.Tensor]], tf.Tensor],
    delta: float,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """ACER's efficient trust region (eq. 12) applied to a per-step policy loss.

    With ``phi_t`` the concatenated policy statistics of step t (``params``, each
    ``[T, B, k_i]``), ``g_t = d loss_t / d phi_t`` and ``k_t = -d KL_t / d phi_t`` (the loss
    convention of :func:`tfagents_vtrace.ops.retrace.trust_region_projection`), returns the
    surrogate ``<phi_t, sg(z_t)>`` whose gradient w.r.t. ``phi_t`` is ``z_t``; a step
    ``phi - eta z`` changes the linearised KL by ``eta * min(k.g, delta)`` at most
    ``eta * delta``.

    Args:
      params: name -> ``[T, B, k]`` policy statistics (they carry the network's gradient).
      per_step_loss: ``params -> [T, B]`` policy loss (already masked).
      per_step_kl: ``params -> [T, B]`` ``KL(avg || pi_params)``.
      delta: the trust-region delta (> 0).

    Returns:
      ``(surrogate [T, B], scale [T, B], kl [T, B])``; ``scale`` is the projection factor
      (0 when the constraint is inactive). Only ``surrogate`` carries gradients.
    """
    keys = sorted(params)
    detached = {k: tf.stop_gradient(params[k]) for k in keys}
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([detached[k] for k in keys])
        loss = per_step_loss(detached)
        kl = per_step_kl(detached)
        total_loss = tf.reduce_sum(loss)
        neg_total_kl = -tf.reduce_sum(kl)
    zero = tf.UnconnectedGradients.ZERO
    g = tape.gradient(total_loss, [detached[k] for k in keys], unconnected_gradients=zero)
    k = tape.gradient(neg_total_kl, [detached[k] for k in keys], unconnected_gradients=zero)
    del tape
    proj = retrace.trust_region_projection(tf.concat(g, -1), tf.concat(k, -1), delta)
    phi = tf.concat([params[key] for key in keys], -1)
    surrogate = tf.reduce_sum(phi * proj.z, axis=-1)
    return surrogate, proj.scale, tf.stop_gradient(kl)


def ema_parts(x: tf.Tensor, mask: tf.Tensor, decay: float, order: tf.Tensor) -> tuple:
    """``(decay^N, sum_j (1 - decay) decay^(N - j) x_j)`` over the N valid steps of ``x``.

    The exponential average ``avg <- avg + (1 - decay) (x_j - avg)`` applied to the valid
    (``mask`` = 1) entries of ``x`` ``[T, B]`` one after the other, in increasing ``order``
    (``[T, B]`` distinct integer keys), equals ``avg <- decay^N avg + sum``. Stop-gradient.
    """
    perm = tf.argsort(tf.reshape(order, [-1]))
    x = tf.gather(tf.reshape(tf.stop_gradient(x), [-1]), perm)
    mask = tf.gather(tf.reshape(tf.stop_gradient(mask), [-1]), perm)
    n = tf.reduce_sum(mask)
    position = tf.cumsum(mask)  # j of each valid entry (1-based)
    weights = mask * (1.0 - decay) * tf.pow(decay, n - position)
    return tf.pow(decay, n), tf.reduce_sum(weights * x)


def acting_order(mask: tf.Tensor) -> tf.Tensor:
    """``[T, B]`` keys of the acting order: time step by time step, environments in turn."""
    t, b = tf.shape(mask)[0], tf.shape(mask)[1]
    return tf.range(t)[:, None] * b + tf.range(b)[None, :]


def backward_order(ends: tf.Tensor) -> tf.Tensor:
    """``[T, B]`` keys of the reference's update loops: column by column, its episodes in
    time order, each from its last step back (``ends[t, b]``: an episode ends at step t)."""
    t, b = tf.shape(ends)[0], tf.shape(ends)[1]
    segment = tf.cumsum(tf.cast(ends, tf.int32), axis=0, exclusive=True)
    steps_back = (t - 1) - tf.range(t)[:, None]
    return (tf.range(b)[None, :] * (t + 1) + segment) * t + steps_back


def _inputs(batch: dict) -> NetInputs:
    return NetInputs(
        batch["observation"], batch["first"], batch["prev_action"], batch["prev_reward"]
    )


def _targets(config: AcerConfig, batch: dict, values_all: tf.Tensor):
    return episode_targets(
        batch, values_all, config.discount, config.reward_clipping, config.reward_scale
    )


def _pg_target(config, ret, rewards, discounts, q_sg, values, bootstrap):
    if not config.use_q_opc:
        return ret.q_ret
    return retrace.qopc_targets(rewards, discounts, q_sg, values, bootstrap)


def _discrete_terms(network, avg_network, config: AcerConfig, batch: dict, exact: bool):
    """Per-step policy-loss/KL closures, Q loss and statistics for discrete actions."""
    inputs, state = _inputs(batch), tuple(batch["state"])
    actions = tf.cast(batch["action"], tf.int32)
    out = network.unroll(inputs, state)
    logits_all, q_all = out.policy["logits"], out.q
    values_all = tf.stop_gradient(tf.reduce_sum(tf.nn.softmax(logits_all) * q_all, -1))
    rewards, discounts, mask = _targets(config, batch, values_all)
    logits = logits_all[:-1]
    # Exact on-policy: mu = pi, so rho = 1 everywhere (and c = None: no correction).
    mu_logits = (
        tf.stop_gradient(logits)
        if exact
        else tf.convert_to_tensor(batch["policy"]["logits"], tf.float32)
    )
    c = None if exact else config.truncation_threshold
    q_taken = tf.gather(q_all[:-1], actions, batch_dims=2)
    log_rhos = tf.zeros_like(rewards)
    if not exact:
        log_pi_a = tf.gather(tf.nn.log_softmax(logits), actions, batch_dims=2)
        log_mu_a = tf.gather(tf.nn.log_softmax(mu_logits), actions, batch_dims=2)
        log_rhos = tf.stop_gradient(log_pi_a - log_mu_a)
    values, q_sg = values_all[:-1], tf.stop_gradient(q_taken)
    ret = retrace.retrace_targets(
        rewards, discounts, q_sg, values, values_all[-1], log_rhos, 1, config.retrace_lambda
    )
    pg_target = _pg_target(config, ret, rewards, discounts, q_sg, values, values_all[-1])
    q_all_sg = tf.stop_gradient(q_all[:-1])
    avg_logp = tf.stop_gradient(
        tf.nn.log_softmax(avg_network.unroll(inputs, state).policy["logits"][:-1])
    )

    def loss_fn(p):
        return (
            mask
            * retrace.truncated_is_with_bias_correction_discrete(
                p["logits"], mu_logits, actions, pg_target, q_all_sg, values, c
            ).loss
        )

    def kl_fn(p):
        return tf.reduce_sum(tf.exp(avg_logp) * (avg_logp - tf.nn.log_softmax(p["logits"])), -1)

    q_loss = 0.5 * tf.square(ret.q_ret - q_taken)
    entropy = _tfd().Categorical(logits=logits).entropy()
    return {"logits": logits}, loss_fn, kl_fn, q_loss, entropy, values, log_rhos, mask


def _pad_last(x: tf.Tensor) -> tf.Tensor:
    """``[T, ...] -> [T+1, ...]`` repeating the last entry (actions for the bootstrap step)."""
    return tf.concat([x, x[-1:]], axis=0)


def _gaussian_phi(config: AcerConfig, params: dict) -> tuple[dict, Callable[[dict], dict]]:
    """``(phi, phi -> policy params)``: the trust region's statistics of a Gaussian policy."""
    if config.trust_region_params == "loc_scale":
        return dict(params), dict
    phi = {"mean": params["loc"], "var": tf.square(params["scale"])}
    return phi, lambda p: {"loc": p["mean"], "scale": tf.sqrt(p["var"])}


def _continuous_terms(network, avg_network, config: AcerConfig, batch: dict, exact: bool):
    """Per-step policy-loss/KL closures, Q + V loss and statistics for continuous actions."""
    inputs, state = _inputs(batch), tuple(batch["state"])
    actions = tf.convert_to_tensor(batch["action"], tf.float32)
    out = network.unroll(inputs, state, actions=_pad_last(actions))
    params = {k: v[:-1] for k, v in out.policy.items()}
    values_all = out.value
    values_sg_all = tf.stop_gradient(values_all)
    rewards, discounts, mask = _targets(config, batch, values_sg_all)
    q_taken, values = out.q[:-1], values_sg_all[:-1]
    pi = network.distribution({k: tf.stop_gradient(v) for k, v in params.items()})
    # Exact on-policy: rho = 1 and c = None (mu is not read, no sampled correction).
    c = None if exact else config.truncation_threshold
    log_rhos, log_mu_a = tf.zeros_like(rewards), None
    if not exact:
        mu = network.distribution({k: tf.convert_to_tensor(v) for k, v in batch["policy"].items()})
        log_mu_a = mu.log_prob(actions)
        log_rhos = tf.stop_gradient(pi.log_prob(actions) - log_mu_a)
    sampled = log_mu_s = q_sampled = None
    if c is not None:
        sampled = tf.stop_gradient(pi.sample())
        q_sampled = tf.stop_gradient(
            network.unroll(inputs, state, actions=_pad_last(sampled)).q[:-1]
        )
        log_mu_s = mu.log_prob(sampled)
    q_sg = tf.stop_gradient(q_taken)
    ret = retrace.retrace_targets(
        rewards, discounts, q_sg, values, values_sg_all[-1], log_rhos,
        network.action_dim, config.retrace_lambda,
    )  # fmt: skip
    pg_target = _pg_target(config, ret, rewards, discounts, q_sg, values, values_sg_all[-1])
    avg_out = avg_network.unroll(inputs, state)
    avg = network.distribution({k: tf.stop_gradient(v[:-1]) for k, v in avg_out.policy.items()})
    phi, to_params = _gaussian_phi(config, params)

    def loss_fn(p):
        d = network.distribution(to_params(p))
        log_pi_a = d.log_prob(actions)
        if c is None:  # no correction term: the sampled inputs are not read
            log_mu = tf.stop_gradient(log_pi_a) if exact else log_mu_a
            sample_terms = (log_pi_a, log_pi_a, values)
        else:
            log_mu, sample_terms = log_mu_a, (d.log_prob(sampled), log_mu_s, q_sampled)
        return mask * retrace.truncated_is_with_bias_correction_continuous(
            log_pi_a, log_mu, sample_terms[0], sample_terms[1], pg_target, sample_terms[2],
            values, c,
        ).loss  # fmt: skip

    def kl_fn(p):
        return _tfd().kl_divergence(avg, network.distribution(to_params(p)))

    q_loss = 0.5 * tf.square(ret.q_ret - q_taken) + 0.5 * tf.square(ret.v_targets - values_all[:-1])
    entropy = network.distribution(params).entropy()
    return phi, loss_fn, kl_fn, q_loss, entropy, values, log_rhos, mask


def acer_loss(
    network, avg_network, config: AcerConfig, batch: dict, on_policy: bool = False
) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
    """The ACER loss of one batch (module docstring) and its metrics.

    Args:
      network: the learning :class:`~tfagents_vtrace.networks.ActorCriticNetwork` with a Q
        head ("discrete" for Discrete actions, "stochastic_dueling" for Box actions).
      avg_network: the exponentially averaged copy (trust region); receives no gradient.
      config: an :class:`AcerConfig`.
      batch: runtime unroll layout, ``[T+1, B]`` observations, ``[T, B]`` actions/rewards.
      on_policy: the batch is the unroll just acted by ``network``'s weights (the on-policy
        update): rho = 1 unless ``config.on_policy_importance_weights``, and its steps feed
        the ``average_value`` / ``average_entropy`` statistics.

    Returns:
      ``(loss, metrics)``: scalar loss; metrics ``loss, pi_loss, q_loss, entropy, value,
      kl, rho, trust_region_active`` (masked means over steps) and the ``ema/...`` pieces.
    """
    if network.config.q_head is None:
        raise ValueError("network: ACER needs a Q head (NetworkConfig.q_head), got None")
    exact = bool(on_policy) and not config.on_policy_importance_weights
    terms = _discrete_terms if network.is_discrete else _continuous_terms
    phi, loss_fn, kl_fn, q_loss, entropy, values, log_rhos, mask = terms(
        network, avg_network, config, batch, exact
    )
    if config.use_trust_region:
        pi_surrogate, tr_scale, kl = project_policy_loss(
            phi, loss_fn, kl_fn, config.trust_region_delta
        )
        pi_loss = tf.stop_gradient(loss_fn(phi))
    else:
        pi_surrogate = pi_loss = loss_fn(phi)
        tr_scale = tf.zeros_like(pi_loss)
        kl = tf.stop_gradient(kl_fn(phi))
    shape = tf.shape(mask)
    t, b = tf.cast(shape[0], tf.float32), tf.cast(shape[1], tf.float32)
    scale = 1.0 / (t * b) if config.normalize_loss_by_steps else 1.0 / b
    # The reference's pi_loss (entropy bonus included) is scaled by pi_loss_coef.
    per_step = config.pi_loss_coef * (pi_surrogate - mask * config.entropy_cost * entropy)
    per_step += mask * config.q_loss_coef * q_loss
    loss = scale * tf.reduce_sum(per_step)
    count = tf.maximum(tf.reduce_sum(mask), 1.0)
    mean = lambda x: tf.reduce_sum(mask * tf.stop_gradient(x)) / count
    metrics = {
        "loss": loss,
        "pi_loss": scale * tf.reduce_sum(pi_loss),
        "q_loss": scale * tf.reduce_sum(mask * q_loss),
        "entropy": mean(entropy),
        "value": mean(values),
        "kl": mean(kl),
        "rho": mean(tf.exp(tf.minimum(log_rhos, 20.0))),
        "trust_region_active": mean(tf.cast(tr_scale > 0.0, tf.float32)),
    }
    decay, none = config.stats_decay, (tf.constant(1.0), tf.constant(0.0))
    acting = acting_order(mask)
    ends = tf.logical_or(
        tf.cast(batch["terminated"], tf.bool), tf.cast(batch["truncated"], tf.bool)
    )
    parts = {
        "value": ema_parts(values, mask, decay, acting) if on_policy else none,
        "entropy": ema_parts(entropy, mask, decay, acting) if on_policy else none,
        "kl": ema_parts(kl, mask, decay, backward_order(ends)) if config.use_trust_region else none,
    }
    for key, (factor, total) in parts.items():
        metrics[f"ema/{key}_factor"], metrics[f"ema/{key}_sum"] = factor, total
    return loss, metrics
