"""Optimisation for the agents: optimizer and learning-rate schedule builders, global-norm
clipping and the non-finite skip.

Defaults follow IMPALA (Espeholt et al. 2018, https://arxiv.org/abs/1802.01561): RMSProp with
decay 0.99, momentum 0 and epsilon 0.1, and a learning rate decayed linearly to zero over
training. An update whose loss or gradient is NaN/inf is skipped and counted
(:func:`apply_if_finite`); the run driver stops the run after ``max_nonfinite_updates`` in a
row (:mod:`tfagents_vtrace.runtime.driver`).
"""

from __future__ import annotations

import keras
import tensorflow as tf

# Each optimizer's Keras class and, per constructor argument, the config field it comes from.
_OPTIMIZER_ARGS = {
    "rmsprop": (
        keras.optimizers.RMSprop,
        {"rho": "rmsprop_decay", "momentum": "rmsprop_momentum", "epsilon": "rmsprop_epsilon"},
    ),
    "adam": (
        keras.optimizers.Adam,
        {"beta_1": "adam_beta1", "beta_2": "adam_beta2", "epsilon": "adam_epsilon"},
    ),
}
OPTIMIZERS = tuple(_OPTIMIZER_ARGS)
LR_DECAYS = ("none", "linear")


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


def optimizer_from_config(config, total_updates: int | None) -> keras.optimizers.Optimizer:
    """The optimizer an agent config asks for, with its lr schedule and without built-in
    clipping (the learners clip the global norm).

    ``config.optimizer`` is "rmsprop" (IMPALA's uncentred RMSProp: ``rmsprop_decay``,
    ``rmsprop_momentum``, ``rmsprop_epsilon``) or "adam" (``adam_beta1``, ``adam_beta2``,
    ``adam_epsilon``), all fields of
    :class:`~tfagents_vtrace.agents.learner_config.LearnerConfig` with ``learning_rate`` and
    ``lr_decay``.
    """
    lr = make_learning_rate(config.learning_rate, config.lr_decay, total_updates)
    if config.optimizer not in _OPTIMIZER_ARGS:
        raise ValueError(f"optimizer: expected one of {OPTIMIZERS}, received {config.optimizer!r}")
    optimizer_class, fields = _OPTIMIZER_ARGS[config.optimizer]
    kwargs = {arg: getattr(config, field) for arg, field in fields.items()}
    return optimizer_class(learning_rate=lr, **kwargs)


def entropy_coefficient(
    step: tf.Tensor | int, total: tf.Tensor | int | None, start: float, end: float
) -> tf.Tensor:
    """Linearly annealed entropy weight: ``start + (end - start) * min(step / total, 1)``.

    ``step`` and ``total`` count the same unit (updates for A2C and IMPALA, environment steps
    for A3C); ``total`` None or 0 keeps the weight at ``start``. Returns a float32 scalar;
    no gradient.
    """
    start_t = tf.constant(float(start), tf.float32)
    if total is None or (isinstance(total, int) and total <= 0):
        return start_t
    frac = tf.cast(step, tf.float32) / tf.maximum(tf.cast(total, tf.float32), 1.0)
    frac = tf.clip_by_value(frac, 0.0, 1.0)
    return start_t + (float(end) - float(start)) * frac
