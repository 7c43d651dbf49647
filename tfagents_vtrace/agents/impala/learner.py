"""The IMPALA learner: V-trace actor-critic loss and one compiled train step.

Espeholt et al., "IMPALA: Scalable Distributed Deep-RL with Importance Weighted Actor-Learner
Architectures", 2018, https://arxiv.org/abs/1802.01561.

A batch is a dict of numpy arrays, time-major, with one-step overlap (T+1 observations):

* ``observation [T+1, B, ...]`` (a dict / tuple of such arrays for a Dict / Tuple
  observation space), ``first [T+1, B]`` bool, ``prev_action [T+1, B(, A)]``,
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

Sample reuse (:class:`ImpalaConfig`; Schulman et al. 2017, https://arxiv.org/abs/1707.06347,
and RLlib's APPO): with ``A_t = pg_adv_t`` (normalised over the minibatch's mask when
``normalize_advantages``), ``r_t = pi(a_t|x_t) / pi_old(a_t|x_t)`` and ``pi_old``, ``V_old``
the learner's policy and values when the batch arrived (before its first SGD step),

    policy_loss="clipped":  -min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t)  replaces -A_t log pi
    value_clip=c:   0.5 max((vs_t - V_t)^2, (vs_t - V_old,t - clip(V_t - V_old,t, -c, c))^2)
    kl_cost=k:      + k KL(mu(.|x_t) || pi(.|x_t))

The learner runs ``num_epochs`` passes of ``num_minibatches`` SGD steps per batch, each
minibatch a random subset of whole unrolls (columns of ``[T, B]``), V-trace recomputed with
the current weights at every step. With one epoch, one minibatch and the default options the
update is IMPALA's. ``minibatch_unit="steps"`` (feed-forward networks) instead computes
V-trace over the whole batch with the current weights at the start of every epoch and takes
each minibatch as a random subset of single steps from all unrolls, as PPO does.
"""

from __future__ import annotations

import collections

import numpy as np
import tensorflow as tf

from tfagents_vtrace.agents import loss_inputs
from tfagents_vtrace.agents.impala.config import ImpalaConfig
from tfagents_vtrace.agents.replicated_learner import ReplicatedLearner
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
OLD_LOG_PROB, OLD_VALUE = "old_log_prob", "old_value"
_STEP_INPUTS = ("observation", "first", "prev_action", "prev_reward")  # NetInputs, [T+1, B]
VS, PG_ADV, MASK = "vs", "pg_advantages", "mask"


LossTerms = collections.namedtuple(
    "LossTerms",
    ["vtrace", "values", "target_log_probs", "log_rhos", "entropy", "mask", "policy"],
)


def _unroll(network, batch: dict):
    """The network's outputs over the unroll batch's ``T+1`` steps, from its start state."""
    inputs = NetInputs(*(batch[k] for k in _STEP_INPUTS))
    return network.unroll(inputs, tuple(batch["state"]), prepared=_prepared(network, batch))


def _prepared(network, batch: dict) -> bool:
    """Whether the batch's observations are the network's ``prepare_observation`` output
    (:meth:`ImpalaLearner._prepare`): not of the observation space's dtype."""
    return network.prepares_observations and (
        batch["observation"].dtype != network.observation_spec.dtype
    )


def loss_terms(network, config: ImpalaConfig, batch: dict) -> LossTerms:
    """Unrolls the network over the batch and computes the V-trace targets.

    Returns a :class:`LossTerms` of ``[T, B]`` tensors (``values`` is ``[T+1, B]``):
    ``vtrace`` (``VTraceReturns``: ``vs`` and ``pg_advantages``, stop-gradient), the
    target policy's log-probs of the actions, ``log_rhos``, the policy entropy, the loss
    mask ``1 - reset`` and the target policy's parameters ``[T, B, ...]``. Rewards are
    clipped, and a truncated step's reward gains ``gamma * sg(V(final observation))`` with
    its discount set to 0 (module docstring).
    """
    out = _unroll(network, batch)
    values = out.value  # [T+1, B]
    target = {k: v[:-1] for k, v in out.policy.items()}
    rewards, discounts, mask = loss_inputs.episode_targets(
        batch, values, config.discount, config.reward_clipping, config.reward_scale
    )
    target_lp, log_rhos, entropy = loss_inputs.policy_terms(
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
    return LossTerms(vt, values, target_lp, log_rhos, entropy, mask, target)


def impala_loss(
    network,
    config: ImpalaConfig,
    batch: dict,
    scale: float | tf.Tensor,
    entropy_cost: float | tf.Tensor | None = None,
) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
    """The IMPALA loss of the module docstring, summed over ``[T, B]`` and times ``scale``.

    ``batch`` is an unroll batch, or a minibatch of single steps (entries of
    :func:`step_batch`, ``[N, ...]``, told apart by their ``vs``) whose V-trace targets were
    computed beforehand: the network runs on the N observations as one time step of N
    columns (a feed-forward network has no state to carry), and ``vs`` / ``pg_advantages``
    are the given ones. ``scale`` is ``1 / (T * global_B)`` (``1 / N``) so replica losses
    sum to the global-batch mean; ``entropy_cost`` overrides ``config.entropy_cost`` (the
    learner's annealed weight). Returns ``(loss, metrics)``; metrics are scaled the same way
    (they sum over replicas), with ``valid_fraction``, the scaled count of unmasked steps:
    :func:`masked_means` of the summed metrics gives ``mean_rho`` and ``clip_fraction`` as
    means over those steps.
    """
    if VS in batch:
        terms, values, behaviour, old_log_prob, old_value = _step_terms(network, batch)
    else:
        terms = loss_terms(network, config, batch)
        values, behaviour = terms.values[:-1], batch["policy"]
        old_log_prob = batch.get(OLD_LOG_PROB)
        old_value = batch[OLD_VALUE][:-1] if OLD_VALUE in batch else None
    return _combine(
        network, config, terms, values, behaviour, old_log_prob, old_value, scale, entropy_cost
    )


def _combine(
    network,
    config: ImpalaConfig,
    terms: LossTerms,
    values: tf.Tensor,
    behaviour: dict,
    old_log_prob: tf.Tensor | None,
    old_value: tf.Tensor | None,
    scale: float | tf.Tensor,
    entropy_cost: float | tf.Tensor | None,
) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
    """The loss of :func:`impala_loss` from its terms; ``values``, ``old_log_prob`` and
    ``old_value`` are aligned with ``terms.vtrace`` (no bootstrap row)."""
    if entropy_cost is None:
        entropy_cost = config.entropy_cost
    mask, vt = terms.mask, terms.vtrace
    adv = vt.pg_advantages
    if config.normalize_advantages:
        adv = loss_inputs.normalize_advantages(adv, mask)
    metrics = {}
    if config.policy_loss == "clipped":
        ratio = tf.exp(terms.target_log_probs - old_log_prob)
        eps = config.clip_ratio
        surrogate = tf.minimum(ratio * adv, tf.clip_by_value(ratio, 1.0 - eps, 1.0 + eps) * adv)
        pg_loss = -tf.reduce_sum(mask * surrogate) * scale
        clipped = tf.cast(tf.abs(ratio - 1.0) > eps, tf.float32)
        metrics["clip_fraction"] = tf.reduce_sum(mask * clipped) * scale
    else:
        pg_loss = -tf.reduce_sum(mask * terms.target_log_probs * adv) * scale
    value_error = tf.square(vt.vs - values)
    if config.value_clip is not None:
        clipped_values = old_value + tf.clip_by_value(
            values - old_value, -config.value_clip, config.value_clip
        )
        value_error = tf.maximum(value_error, tf.square(vt.vs - clipped_values))
    baseline_loss = 0.5 * tf.reduce_sum(mask * value_error) * scale
    entropy_sum = tf.reduce_sum(mask * terms.entropy) * scale
    loss = pg_loss + config.baseline_cost * baseline_loss - entropy_cost * entropy_sum
    if config.kl_cost > 0.0:
        kl = tf.reduce_sum(mask * _behaviour_kl(network, behaviour, terms.policy)) * scale
        loss = loss + config.kl_cost * kl
        metrics["kl"] = kl
    metrics.update(
        {
            "loss": loss,
            "pg_loss": pg_loss,
            "baseline_loss": baseline_loss,
            "entropy": entropy_sum,
            "mean_rho": tf.reduce_sum(mask * tf.exp(terms.log_rhos)) * scale,
            loss_inputs.VALID_FRACTION: tf.reduce_sum(mask) * scale,
        }
    )
    return loss, metrics


def masked_means(metrics: dict) -> None:
    """Turns ``mean_rho`` and ``clip_fraction`` of replica-summed :func:`impala_loss`
    metrics into means over the valid (unmasked) steps, and drops ``valid_fraction``; in
    place (:func:`~tfagents_vtrace.agents.loss_inputs.divide_by_valid`)."""
    loss_inputs.divide_by_valid(metrics, ("mean_rho", "clip_fraction"))


def _behaviour_kl(network, behaviour: dict, target: dict) -> tf.Tensor:
    """``KL(mu(.|x_t) || pi(.|x_t))`` ``[T, B]``; gradients reach pi only."""
    if "logits" in behaviour:
        log_mu = tf.nn.log_softmax(tf.cast(behaviour["logits"], tf.float32))
        log_pi = tf.nn.log_softmax(tf.cast(target["logits"], tf.float32))
        return tf.reduce_sum(tf.exp(log_mu) * (log_mu - log_pi), axis=-1)
    return network.distribution(behaviour).kl_divergence(network.distribution(target))


def old_outputs(network, config: ImpalaConfig, batch: dict) -> dict[str, tf.Tensor]:
    """The learner's ``log pi_old(a_t|x_t)`` ``[T, B]`` and ``V_old`` ``[T+1, B]`` on
    ``batch`` with the current weights (stop-gradient), under the keys the loss reads."""
    out = _unroll(network, batch)
    target = {k: v[:-1] for k, v in out.policy.items()}
    log_prob, _, _ = loss_inputs.policy_terms(network, target, batch["policy"], batch["action"])
    return {OLD_LOG_PROB: tf.stop_gradient(log_prob), OLD_VALUE: tf.stop_gradient(out.value)}


def _merge(x: tf.Tensor) -> tf.Tensor:
    """``[T, B, ...]`` -> ``[T * B, ...]``."""
    return tf.reshape(x, tf.concat([[-1], tf.shape(x)[2:]], axis=0))


def step_batch(network, config: ImpalaConfig, batch: dict) -> dict:
    """Flattens an unroll batch into ``T * B`` single steps for ``minibatch_unit="steps"``.

    Returns each step's network inputs, action, behaviour policy and loss mask, the
    learner's log-prob and value with the current weights (``old_log_prob``,
    ``old_value``) and the V-trace targets ``vs`` and ``pg_advantages`` computed over the
    whole ``[T, B]`` batch with them, each ``[T * B, ...]`` (stop-gradient).
    """
    terms = loss_terms(network, config, batch)
    steps = {k: tf.nest.map_structure(lambda x: _merge(x[:-1]), batch[k]) for k in _STEP_INPUTS}
    steps["action"] = _merge(batch["action"])
    steps["policy"] = {k: _merge(v) for k, v in batch["policy"].items()}
    steps[MASK] = _merge(terms.mask)
    steps[OLD_LOG_PROB] = tf.stop_gradient(_merge(terms.target_log_probs))
    steps[OLD_VALUE] = tf.stop_gradient(_merge(terms.values[:-1]))
    steps.update(step_targets(terms))
    return steps


def step_targets(terms: LossTerms) -> dict[str, tf.Tensor]:
    """``vs`` and ``pg_advantages`` of :func:`loss_terms`, flattened to ``[T * B]``."""
    return {
        VS: tf.stop_gradient(_merge(terms.vtrace.vs)),
        PG_ADV: tf.stop_gradient(_merge(terms.vtrace.pg_advantages)),
    }


def _step_terms(network, steps: dict) -> tuple:
    """:func:`impala_loss`'s terms, values, behaviour policy, ``old_log_prob`` and
    ``old_value`` on a minibatch of single steps, as one time step ``[1, N, ...]``."""
    lead = lambda x: x[None]
    inputs = NetInputs(*(tf.nest.map_structure(lead, steps[k]) for k in _STEP_INPUTS))
    out = network.unroll(inputs, (), prepared=_prepared(network, steps))
    policy = tf.nest.map_structure(lead, steps["policy"])
    target_lp, log_rhos, entropy = loss_inputs.policy_terms(
        network, out.policy, policy, lead(steps["action"])
    )
    vt = vtrace.VTraceReturns(vs=lead(steps[VS]), pg_advantages=lead(steps[PG_ADV]))
    terms = LossTerms(vt, None, target_lp, log_rhos, entropy, lead(steps[MASK]), out.policy)
    return terms, out.value, policy, lead(steps[OLD_LOG_PROB]), lead(steps[OLD_VALUE])


class ImpalaLearner(ReplicatedLearner):
    """One compiled update of :func:`impala_loss` per ``train_step(batch)``.

    Arguments as :class:`ReplicatedLearner` (``config`` is an :class:`ImpalaConfig`).
    """

    config_type = ImpalaConfig

    def __init__(self, config, network_factory, *args, **kwargs):
        super().__init__(config, network_factory, *args, **kwargs)
        if self._by_steps:
            if self.num_replicas > 1:
                raise ValueError(
                    "minibatch_unit: 'steps' runs on one replica; this strategy has "
                    f"{self.num_replicas} (use 'unrolls')"
                )
            if self.network.state_sizes:
                raise ValueError(
                    "minibatch_unit: 'steps' needs a feed-forward network; this one has a "
                    "recurrent core, whose steps must stay in their unrolls (use 'unrolls')"
                )

    @property
    def _by_steps(self) -> bool:
        return self.config.minibatch_unit == "steps" and self._sgd_steps > 1

    def entropy_coef(self) -> float:
        """The entropy weight the next update will use."""
        return float(self._entropy_coef())

    def _entropy_coef(self) -> tf.Tensor:
        """``entropy_cost``, or update k of n (k counted from the optimizer's applied SGD
        steps, so it resumes with the checkpoint) uses ``start + (end - start) * k / (n - 1)``."""
        c = self.config
        if c.entropy_cost_end is None:
            return tf.constant(float(c.entropy_cost), tf.float32)
        update = tf.cast(self.optimizer.iterations, tf.int64) // self._sgd_steps
        return self._anneal(update, c.entropy_cost, c.entropy_cost_end)

    def _step_inputs(self) -> tuple[tf.Tensor]:
        return (self._entropy_coef(),)

    def _loss(
        self, batch: dict, scale: tf.Tensor, entropy_cost: tf.Tensor
    ) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        return impala_loss(self.network, self.config, batch, scale, entropy_cost)

    def _after_update(self, metrics: dict, entropy_cost: tf.Tensor) -> None:
        masked_means(metrics)
        if self.config.entropy_cost_end is not None:
            metrics["entropy_coef"] = entropy_cost

    def _old_outputs(self, batch: dict) -> dict[str, tf.Tensor]:
        return old_outputs(self.network, self.config, batch) if self._needs_old else {}

    def _check_batch(self, batch: dict) -> None:
        if not self._by_steps:
            return super()._check_batch(batch)
        t, b = np.shape(batch["reward"])[:2]
        if (t * b) % self._minibatches:
            raise ValueError(
                f"num_minibatches: the batch's T*B={t * b} steps must split into "
                f"{self._minibatches} equal minibatches"
            )

    def _prepare(self, batch: dict) -> dict:
        """The batch with its uint8 frames converted once (``prepare_observation``: scaled, in
        the conv torso's compute dtype) where the update passes over them more than once:
        the same numbers each pass would make, without each pass's elementwise conversions
        of every frame (cast, scale and, for bfloat16, cast again)."""
        if self._sgd_steps > 1 and self.network.prepares_observations:
            return {**batch, "observation": self.network.prepare_observation(batch["observation"])}
        return batch

    def _single_replica_step(self, batch: dict) -> tf.Tensor:
        """``minibatch_unit="steps"``: every epoch (or only the first, without
        ``vtrace_every_epoch``) computes V-trace over the whole batch with the current
        weights, then takes ``num_minibatches`` SGD steps on shuffled single steps;
        otherwise the base class's update."""
        batch = self._prepare(batch)
        if not self._by_steps:
            return super()._single_replica_step(batch)
        inputs = self._step_inputs()
        steps = step_batch(self.network, self.config, batch)
        order = self._minibatch_order(tf.shape(steps[MASK])[0])
        scale = 1.0 / tf.cast(tf.shape(order)[1], tf.float32)
        variables = self.network.trainable_variables

        def sgd_step(i, targets):
            sub = tf.nest.map_structure(lambda x: tf.gather(x, order[i]), {**steps, **targets})
            with tf.GradientTape() as tape:
                loss, metrics = impala_loss(self.network, self.config, sub, scale, *inputs)
            return self._apply(tape.gradient(loss, variables), metrics, inputs)

        def epoch_targets():
            return step_targets(loss_terms(self.network, self.config, batch))

        targets = {k: steps[k] for k in (VS, PG_ADV)}
        total = sgd_step(0, targets)  # traced outside the loop: fixes the metrics' names

        def body(i, targets, acc):
            if self.config.vtrace_every_epoch:
                new_epoch = tf.equal(i % self._minibatches, 0)
                targets = tf.cond(new_epoch, epoch_targets, lambda: targets)
            return i + 1, targets, acc + sgd_step(i, targets)

        _, _, total = tf.while_loop(
            lambda i, *_: i < self._sgd_steps, body, (tf.constant(1), targets, total)
        )
        return self._mean_metrics(total)
