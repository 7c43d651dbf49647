"""The replicated learner skeleton shared by IMPALA and A2C: one compiled update per batch.

IMPALA (Espeholt et al. 2018, https://arxiv.org/abs/1802.01561) and synchronous A2C (Mnih et
al. 2016, https://arxiv.org/abs/1602.01783) train the same way and differ only in the loss:
the learner owns the network and optimizer (built inside ``strategy.scope()``), computes the
loss summed over the ``[T, B]`` batch and scaled by ``1 / (T * global_B)``, and, with several
replicas, splits the batch along B and sums the replicas' gradients and metrics before the
global-norm clipping, so every strategy computes the same update. A non-finite loss or
gradient skips the update (:func:`tfagents_vtrace.agents.common.apply_if_finite`).

Subclasses set ``config_type`` and implement :meth:`ReplicatedLearner._loss`; they may
add variables (:meth:`ReplicatedLearner._make_variables`), per-step inputs
(:meth:`ReplicatedLearner._step_inputs`, e.g. A2C's annealed entropy weight) and post-update
bookkeeping (:meth:`ReplicatedLearner._after_update`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf

from tfagents_vtrace.agents import common


class ReplicatedLearner:
    """Owns the network and optimizer; ``train_step(batch)`` runs one compiled update.

    Args:
      config: an instance of the subclass's ``config_type`` with the optimizer fields of
        :func:`common.optimizer_from_config`, ``max_grad_norm`` and ``jit_compile``.
      network_factory: zero-argument callable building the (already built) network; called
        inside ``strategy.scope()``.
      strategy: a ``tf.distribute.Strategy`` (default: the current one). With several
        replicas the batch is split along B and gradients are summed across replicas before
        the global-norm clipping, so every strategy computes the same update.
      total_updates: number of updates of the whole run (for the linear lr decay).
    """

    config_type: type = object

    def __init__(
        self,
        config,
        network_factory: Callable[[], object],
        strategy: tf.distribute.Strategy | None = None,
        total_updates: int | None = None,
    ):
        if not isinstance(config, self.config_type):
            raise ValueError(
                f"config: expected an {self.config_type.__name__}, received {type(config)}"
            )
        self.config = config
        self.total_updates = total_updates
        self.strategy = strategy or tf.distribute.get_strategy()
        self.num_replicas = int(self.strategy.num_replicas_in_sync)
        with self.strategy.scope():
            self.network = network_factory()
            self.optimizer = common.optimizer_from_config(config, total_updates)
            self.optimizer.build(self.network.trainable_variables)
            self.nonfinite_streak = tf.Variable(0, dtype=tf.int64, trainable=False)
            self.skipped_updates = tf.Variable(0, dtype=tf.int64, trainable=False)
            self._make_variables()
        jit = bool(config.jit_compile and self.num_replicas == 1)
        self._single_step = common.BatchFunction(self._step_and_weights, jit_compile=jit)
        self._dist_step = tf.function(self._distributed_step, autograph=False)
        self._read_weights = tf.function(self._weight_values, autograph=False)
        self._metric_names: list[str] = []
        # Weights as the last single-replica update left them (read inside that update).
        self._updated_weights: list[tf.Tensor] | None = None

    # ------------------------------------------------------------------ public API
    def train_step(self, batch: dict) -> dict[str, float]:
        """One update on ``batch`` (the runtime's unroll layout); returns float metrics.

        A non-finite loss or gradient norm skips the update (``skipped`` is 1.0 and
        ``nonfinite_streak`` counts consecutive skips).
        """
        if self.num_replicas == 1:
            out, self._updated_weights = self._single_step(batch)
        else:
            out = self._dist_step(self._distribute(batch))
        # One device-to-host copy for all metrics (keys sorted, as stacked in _apply).
        return dict(zip(self._metric_names, out.numpy().tolist()))

    def get_weights(self) -> list[np.ndarray]:
        """The network weights as numpy arrays, in ``network.get_weights()`` order.

        After a single-replica update these are the values that update read back as it
        ended (which saves a second compiled call per update); otherwise one compiled call
        reads every variable (instead of one eager read per variable).
        """
        if self.num_replicas > 1:
            return self.network.get_weights()
        if self._updated_weights is not None:
            return [w.numpy() for w in self._updated_weights]
        return [w.numpy() for w in self._read_weights()]

    def checkpoint_items(self) -> dict:
        """Trackables to checkpoint: network and optimizer variables, non-finite counters.

        Variables are listed explicitly (in ``network.weights`` / ``optimizer.variables``
        order) rather than through the Keras objects, so every variable is saved whatever
        the layers' attribute tracking does.
        """
        return {
            "network_weights": list(self.network.weights),
            "optimizer_variables": list(self.optimizer.variables),
            "nonfinite_streak": self.nonfinite_streak,
            "skipped_updates": self.skipped_updates,
        }

    # ------------------------------------------------------------------ subclass hooks
    def _loss(self, batch: dict, scale: tf.Tensor, *inputs) -> tuple[tf.Tensor, dict]:
        """``(loss, metrics)`` of one replica's batch, summed over ``[T, B]`` times ``scale``
        (``1 / (T * global_B)``) so the replicas' values sum to the global-batch mean;
        ``inputs`` are :meth:`_step_inputs`. Gradients flow to the network weights."""
        raise NotImplementedError

    def _make_variables(self) -> None:
        """Creates the subclass's own variables (called inside ``strategy.scope()``)."""

    def _step_inputs(self) -> tuple[tf.Tensor, ...]:
        """Tensors computed once per update (cross-replica) and passed to every replica's
        :meth:`_loss` and to :meth:`_after_update`; none by default."""
        return ()

    def _after_update(self, metrics: dict, *inputs) -> None:
        """Runs after the optimizer step (cross-replica); may add entries to ``metrics``."""

    # ------------------------------------------------------------------ internals
    def _grads(self, batch: dict, *inputs):
        shape = tf.shape(batch["reward"])
        scale = 1.0 / tf.cast(shape[0] * shape[1] * self.num_replicas, tf.float32)
        variables = self.network.trainable_variables
        with tf.GradientTape() as tape:
            loss, metrics = self._loss(batch, scale, *inputs)
        return tape.gradient(loss, variables), metrics

    def _apply(self, grads, metrics: dict, inputs: tuple) -> tf.Tensor:
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
        self._after_update(metrics, *inputs)
        self._metric_names = sorted(metrics)
        return tf.stack([tf.cast(metrics[k], tf.float32) for k in self._metric_names])

    def _single_replica_step(self, batch: dict) -> tf.Tensor:
        inputs = self._step_inputs()
        grads, metrics = self._grads(batch, *inputs)
        return self._apply(grads, metrics, inputs)

    def _step_and_weights(self, batch: dict) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """The update, then every network weight read after it (automatic control
        dependencies order each read after the update's writes to that variable)."""
        metrics = self._single_replica_step(batch)
        return metrics, self._weight_values()

    def _weight_values(self) -> list[tf.Tensor]:
        """Every network weight's current value, in ``network.weights`` order."""
        return [tf.identity(w) for w in self.network.weights]

    def _distributed_step(self, batch) -> tf.Tensor:
        inputs = self._step_inputs()
        grads, metrics = self.strategy.run(self._grads, args=(batch, *inputs))
        reduce = lambda x: self.strategy.reduce(tf.distribute.ReduceOp.SUM, x, axis=None)
        grads = [reduce(g) for g in grads]
        metrics = {k: reduce(v) for k, v in metrics.items()}
        return self._apply(grads, metrics, inputs)

    def _distribute(self, batch: dict):
        """Splits the numpy batch along B over the replicas (common.distribute_batch)."""
        return common.distribute_batch(self.strategy, batch)
