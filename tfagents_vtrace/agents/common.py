"""Pieces shared by the agents: reward clipping, optimizer and learning-rate schedule builders.

Defaults follow IMPALA (Espeholt et al. 2018, https://arxiv.org/abs/1802.01561): RMSProp with
decay 0.99, momentum 0 and epsilon 0.1, a learning rate decayed linearly to zero over
training, and rewards clipped to [-1, 1] ("abs_one") or squashed asymmetrically
("soft_asymmetric", ``5 * tanh(r / 5)`` with negative rewards weighted by 0.3).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

from tfagents_vtrace.ops import vtrace

REWARD_CLIPPING = ("none", "abs_one", "soft_asymmetric")
OPTIMIZERS = ("rmsprop", "adam")
LR_DECAYS = ("none", "linear")


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


def make_learning_rate(learning_rate: float, decay: str, decay_steps: int | None):
    """A constant rate, or a linear decay from ``learning_rate`` to 0 over ``decay_steps``.

    ``decay_steps`` counts optimizer updates; with ``decay="linear"`` and no ``decay_steps``
    the rate stays constant.
    """
    if decay not in LR_DECAYS:
        raise ValueError(f"lr_decay: expected one of {LR_DECAYS}, received {decay!r}")
    if decay == "none" or not decay_steps:
        return float(learning_rate)
    return keras.optimizers.schedules.PolynomialDecay(
        float(learning_rate), int(decay_steps), end_learning_rate=0.0, power=1.0
    )


def make_optimizer(
    name: str,
    learning_rate,
    *,
    rmsprop_decay: float = 0.99,
    rmsprop_momentum: float = 0.0,
    rmsprop_epsilon: float = 0.1,
    adam_beta1: float = 0.9,
    adam_beta2: float = 0.999,
    adam_epsilon: float = 1e-7,
) -> keras.optimizers.Optimizer:
    """A Keras optimizer without built-in clipping (the learners clip the global norm).

    ``name`` is "rmsprop" (IMPALA's uncentred RMSProp) or "adam". ``learning_rate`` is a
    float or a Keras schedule.
    """
    if name == "rmsprop":
        return keras.optimizers.RMSprop(
            learning_rate=learning_rate,
            rho=rmsprop_decay,
            momentum=rmsprop_momentum,
            epsilon=rmsprop_epsilon,
        )
    if name == "adam":
        return keras.optimizers.Adam(
            learning_rate=learning_rate,
            beta_1=adam_beta1,
            beta_2=adam_beta2,
            epsilon=adam_epsilon,
        )
    raise ValueError(f"optimizer: expected one of {OPTIMIZERS}, received {name!r}")


def clip_and_check(
    grads: list[tf.Tensor], max_norm: float | None
) -> tuple[list[tf.Tensor], tf.Tensor, tf.Tensor]:
    """Clips ``grads`` to global norm ``max_norm`` (None/0: no clipping).

    Returns ``(clipped_grads, global_norm, all_finite)``; ``all_finite`` is a bool scalar,
    false when any gradient entry is NaN or infinite.
    """
    norm = tf.linalg.global_norm(grads)
    finite = tf.math.is_finite(norm)
    if max_norm:
        grads, _ = tf.clip_by_global_norm(grads, float(max_norm), use_norm=norm)
    return grads, norm, finite


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


def apply_if_finite(
    optimizer,
    grads: list[tf.Tensor],
    variables: list[tf.Variable],
    loss: tf.Tensor,
    max_grad_norm: float | None,
    nonfinite_streak: tf.Variable,
    skipped_updates: tf.Variable,
) -> dict[str, tf.Tensor]:
    """Clips ``grads`` by global norm and applies them unless the loss or a gradient is
    NaN/inf, in which case the update is skipped and counted.

    ``nonfinite_streak`` (reset to 0 by an applied update) and ``skipped_updates`` are int
    variables the caller checkpoints. Returns the metrics ``grad_norm``, ``skipped`` (1.0 when
    skipped), ``nonfinite_streak`` and ``learning_rate``. Call in cross-replica context.
    """
    grads, norm, finite = clip_and_check(grads, max_grad_norm)
    finite = tf.logical_and(finite, tf.math.is_finite(loss))

    def apply():
        optimizer.apply(grads, variables)
        nonfinite_streak.assign(0)
        return tf.constant(0.0)

    def skip():
        nonfinite_streak.assign_add(1)
        skipped_updates.assign_add(1)
        return tf.constant(1.0)

    skipped = tf.cond(finite, apply, skip)
    return {
        "grad_norm": norm,
        "skipped": skipped,
        "nonfinite_streak": tf.cast(nonfinite_streak, tf.float32),
        "learning_rate": tf.cast(optimizer.learning_rate, tf.float32),
    }


def distribute_batch(strategy: tf.distribute.Strategy, batch: dict):
    """Splits a numpy unroll batch over the strategy's replicas along B.

    Every entry is ``[T(+1), B, ...]`` (split on axis 1) except ``batch["state"]``, a tuple of
    ``[B, ...]`` arrays (split on axis 0). Raises ValueError when B is not divisible by the
    number of replicas.
    """
    n = strategy.num_replicas_in_sync
    b = int(np.shape(batch["reward"])[1])
    if b % n:
        raise ValueError(f"batch: B={b} must be divisible by the {n} replicas")
    k = b // n

    def part(ctx):
        lo = ctx.replica_id_in_sync_group * k
        out = {
            key: tf.nest.map_structure(lambda x: x[:, lo : lo + k], val)
            for key, val in batch.items()
            if key != "state"
        }
        out["state"] = tuple(x[lo : lo + k] for x in batch["state"])
        return out

    return strategy.experimental_distribute_values_from_function(part)


def optimizer_from_config(config, total_updates: int | None):
    """The optimizer an agent config asks for (RMSProp or Adam) with its lr schedule.

    ``config`` has the fields ``learning_rate``, ``lr_decay``, ``optimizer``,
    ``rmsprop_decay``, ``rmsprop_momentum``, ``rmsprop_epsilon``, ``adam_beta1``,
    ``adam_beta2`` and ``adam_epsilon`` (ImpalaConfig, A2CConfig and A3CConfig do).
    """
    lr = make_learning_rate(config.learning_rate, config.lr_decay, total_updates)
    return make_optimizer(
        config.optimizer,
        lr,
        rmsprop_decay=config.rmsprop_decay,
        rmsprop_momentum=config.rmsprop_momentum,
        rmsprop_epsilon=config.rmsprop_epsilon,
        adam_beta1=config.adam_beta1,
        adam_beta2=config.adam_beta2,
        adam_epsilon=config.adam_epsilon,
    )


def require_single_replica(strategy, agent_name: str) -> None:
    """Raises ValueError unless ``strategy`` is None or has one replica: A3C, ACER and TAAC
    train on one device (A3C's parallelism is its worker threads)."""
    if strategy is not None and strategy.num_replicas_in_sync != 1:
        raise ValueError(
            f"strategy: {agent_name} trains on one replica, expected 1, received "
            f"{strategy.num_replicas_in_sync}"
        )


def require_local_backend(run, agent_name: str) -> None:
    """Raises ValueError unless ``run.backend`` is "local": agents that drive their own loop
    (A3C, ACER, TAAC) act in this process and have no Ray actors."""
    if run.backend != "local":
        raise ValueError(
            f"backend: {agent_name} acts in the training process, expected 'local', "
            f"received {run.backend!r} (--backend=ray serves the IMPALA and A2C runtime)"
        )


class StepBudget:
    """The global steps the workers may still take: claimed a rollout at a time.

    Args:
      start: steps already taken (the restored global step).
      total: ``total_steps``; claims stop once this many are claimed, so the claimed total
        stays below ``total + steps`` of one claim.
    """

    def __init__(self, start: int, total: int):
        self.claimed, self.total = int(start), int(total)
        self._lock = threading.Lock()

    def claim(self, steps: int) -> bool:
        """Claims ``steps`` if fewer than ``total`` are claimed; returns whether it did."""
        with self._lock:
            if self.claimed >= self.total:
                return False
            self.claimed += int(steps)
            return True

    def release(self, steps: int) -> None:
        """Gives back a claim whose rollout was not counted."""
        with self._lock:
            self.claimed -= int(steps)


class BatchFunction:
    """``fn(batch, *args)`` compiled once per signature and called with little Python.

    ``batch`` is a nest (dicts, tuples) of numpy arrays, e.g. the runtime's unroll layout;
    ``args`` are a few tensors or numbers (e.g. an entropy weight). Each signature (batch
    structure, leaf shapes and dtypes, args' shapes and dtypes) is traced once into a
    concrete function. The batch crosses into TensorFlow as one flat array per dtype (the
    leaves concatenated on the host, split and reshaped again inside the graph).

    Calling a ``tf.function`` with the nested numpy batch instead costs about 1 ms more per
    call on the 2-core reference machine (trace-type lookup and one Python-level conversion
    per leaf), more than a whole CartPole update.
    """

    def __init__(self, fn: Callable, jit_compile: bool = False):
        self._fn = fn
        self._jit = bool(jit_compile)
        self._concrete: dict[tuple, tuple[Callable, list[list[int]]]] = {}

    def __call__(self, batch, *args):
        leaves = [np.asarray(x) for x in tf.nest.flatten(batch)]
        args = [tf.convert_to_tensor(a) for a in args]
        key = (
            _structure_key(batch),
            *((a.shape, a.dtype.str) for a in leaves),
            *((tuple(a.shape), a.dtype.name) for a in args),
        )
        entry = self._concrete.get(key)
        if entry is None:
            entry = self._concrete[key] = self._trace(batch, leaves, args)
        step, groups = entry
        buffers = [tf.constant(np.concatenate([leaves[i].ravel() for i in idx])) for idx in groups]
        return step(*buffers, *args)

    def _trace(self, structure, leaves: list[np.ndarray], args: list[tf.Tensor]):
        """``(concrete function of the flat per-dtype buffers and args, leaf indices per
        buffer)``."""
        by_dtype: dict[str, list[int]] = {}
        for i, a in enumerate(leaves):
            by_dtype.setdefault(a.dtype.str, []).append(i)
        groups = list(by_dtype.values())

        def flat_fn(*inputs):
            buffers, rest = inputs[: len(groups)], inputs[len(groups) :]
            out = [None] * len(leaves)
            for buffer, idx in zip(buffers, groups):
                sizes = [int(leaves[i].size) for i in idx]
                for i, part in zip(idx, tf.split(buffer, sizes)):
                    out[i] = tf.reshape(part, leaves[i].shape)
            return self._fn(tf.nest.pack_sequence_as(structure, out), *rest)

        specs = [
            tf.TensorSpec(
                [sum(int(leaves[i].size) for i in idx)], tf.as_dtype(leaves[idx[0]].dtype)
            )
            for idx in groups
        ] + [tf.TensorSpec(a.shape, a.dtype) for a in args]
        traced = tf.function(flat_fn, jit_compile=self._jit, autograph=False)
        return traced.get_concrete_function(*specs), groups


def _structure_key(nest) -> object:
    """A hashable description of a nest's structure (dict keys, sequence types and lengths)."""
    if isinstance(nest, dict):
        return tuple((k, _structure_key(nest[k])) for k in sorted(nest))
    if isinstance(nest, list | tuple):
        return (type(nest).__name__, tuple(_structure_key(v) for v in nest))
    return None
