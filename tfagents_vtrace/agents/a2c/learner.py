"""The A2C learner: one compiled synchronous advantage actor-critic update per batch.

Synchronous A2C (Mnih et al. 2016, https://arxiv.org/abs/1602.01783, the batched form of
A3C; Wu et al. 2017, https://arxiv.org/abs/1708.05144) over the unrolls of a vector env. The
loss is :func:`tfagents_vtrace.agents.a2c.loss.a2c_loss`; the entropy weight is annealed
linearly from ``entropy_start`` to ``entropy_end`` over ``total_updates`` updates.

On-policy data: A2C's gradient is only unbiased if the batch was collected with the current
weights. The runtime must therefore run its actor synchronously (act with the weights of
update k, train update k, publish, act again); the ``mean_abs_log_rho`` metric is 0 when it
does (see ``/work/notes/a2c_glue.md`` for the runtime's synchronous mode).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf

from tfagents_vtrace.agents import common
from tfagents_vtrace.agents.a2c.config import A2CConfig
from tfagents_vtrace.agents.a2c.loss import a2c_loss, entropy_coefficient


class A2CLearner:
    """Owns the network and optimizer; ``train_step(batch)`` runs one compiled update.

    Args:
      config: an :class:`A2CConfig`.
      network_factory: zero-argument callable building the (already built) network; called
        inside ``strategy.scope()``.
      strategy: a ``tf.distribute.Strategy`` (default: the current one). With several
        replicas the batch is split along B and the gradients are summed across replicas
        before clipping, so every strategy computes the same update.
      total_updates: updates of the whole run (entropy annealing and linear lr decay); None
        keeps the entropy weight at ``entropy_start``.
    """

    def __init__(
        self,
        config: A2CConfig,
        network_factory: Callable[[], object],
        strategy: tf.distribute.Strategy | None = None,
        total_updates: int | None = None,
    ):
        if not isinstance(config, A2CConfig):
            raise ValueError(f"config: expected an A2CConfig, received {type(config)}")
        self.config = config
        self.total_updates = total_updates
        self.strategy = strategy or tf.distribute.get_strategy()
        self.num_replicas = int(self.strategy.num_replicas_in_sync)
        with self.strategy.scope():
            self.network = network_factory()
            self.optimizer = common.optimizer_from_config(config, total_updates)
            self.optimizer.build(self.network.trainable_variables)
            self.updates = tf.Variable(0, dtype=tf.int64, trainable=False)
            self.nonfinite_streak = tf.Variable(0, dtype=tf.int64, trainable=False)
            self.skipped_updates = tf.Variable(0, dtype=tf.int64, trainable=False)
        jit = bool(config.jit_compile and self.num_replicas == 1)
        self._single_step = tf.function(self._single_replica_step, jit_compile=jit, autograph=False)
        self._dist_step = tf.function(self._distributed_step, autograph=False)

    # ------------------------------------------------------------------ public API
    def entropy_coef(self) -> float:
        """The entropy weight the next update will use."""
        return float(self._entropy_coef())

    def train_step(self, batch: dict) -> dict[str, float]:
        """One update on ``batch`` (runtime unroll layout); returns float metrics.

        A non-finite loss or gradient norm skips the update (``skipped`` is 1.0 and
        ``nonfinite_streak`` counts consecutive skips).
        """
        if self.num_replicas == 1:
            out = self._single_step(batch)
        else:
            out = self._dist_step(self._distribute(batch))
        # One device-to-host copy for all metrics (keys sorted, as stacked in _apply).
        return dict(zip(self._metric_names, out.numpy().tolist()))

    def get_weights(self) -> list[np.ndarray]:
        """The network weights as numpy arrays (for actors)."""
        return self.network.get_weights()

    def checkpoint_items(self) -> dict:
        """Trackables to checkpoint: network, optimizer, update and non-finite counters."""
        return {
            "network": self.network,
            "optimizer": self.optimizer,
            "a2c_updates": self.updates,
            "nonfinite_streak": self.nonfinite_streak,
            "skipped_updates": self.skipped_updates,
        }

    # ------------------------------------------------------------------ internals
    def _entropy_coef(self) -> tf.Tensor:
        """Update k of n uses ``start + (end - start) * k / (n - 1)``: the last one uses ``end``."""
        c = self.config
        total = None if not self.total_updates else max(int(self.total_updates) - 1, 1)
        return entropy_coefficient(self.updates, total, c.entropy_start, c.entropy_end)

    def _grads(self, batch: dict, entropy_coef: tf.Tensor):
        shape = tf.shape(batch["reward"])
        scale = 1.0 / tf.cast(shape[0] * shape[1] * self.num_replicas, tf.float32)
        variables = self.network.trainable_variables
        with tf.GradientTape() as tape:
            loss, metrics = a2c_loss(self.network, self.config, batch, entropy_coef, scale)
        return tape.gradient(loss, variables), metrics

    def _apply(self, grads, metrics: dict, entropy_coef: tf.Tensor) -> tf.Tensor:
        """Clips, checks finiteness, applies (or skips) in cross-replica context.

        Returns the metrics stacked in sorted-key order (names kept in ``_metric_names``).
        """
        metrics = dict(metrics)
        metrics.update(
            common.apply_if_finite(
                self.optimizer,
                grads,
                self.network.trainable_variables,
                metrics["loss"],
                self.config.max_grad_norm,
                self.nonfinite_streak,
                self.skipped_updates,
            )
        )
        self.updates.assign_add(1)
        metrics["entropy_coef"] = entropy_coef
        self._metric_names = sorted(metrics)
        return tf.stack([tf.cast(metrics[k], tf.float32) for k in self._metric_names])

    def _single_replica_step(self, batch: dict) -> tf.Tensor:
        entropy_coef = self._entropy_coef()
        grads, metrics = self._grads(batch, entropy_coef)
        return self._apply(grads, metrics, entropy_coef)

    def _distributed_step(self, batch) -> tf.Tensor:
        entropy_coef = self._entropy_coef()
        grads, metrics = self.strategy.run(self._grads, args=(batch, entropy_coef))
        reduce = lambda x: self.strategy.reduce(tf.distribute.ReduceOp.SUM, x, axis=None)
        grads = [reduce(g) for g in grads]
        metrics = {k: reduce(v) for k, v in metrics.items()}
        return self._apply(grads, metrics, entropy_coef)

    def _distribute(self, batch: dict):
        """Splits the numpy batch along B over the replicas (common.distribute_batch)."""
        return common.distribute_batch(self.strategy, batch)
