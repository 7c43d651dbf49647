"""The replicated learner skeleton shared by IMPALA and A2C: one compiled update per batch.

IMPALA (Espeholt et al. 2018, https://arxiv.org/abs/1802.01561) and synchronous A2C (Mnih et
al. 2016, https://arxiv.org/abs/1602.01783) train the same way and differ only in the loss:
the learner owns the network and optimizer (built inside ``strategy.scope()``), computes the
loss summed over the ``[T, B]`` batch and scaled by ``1 / (T * global_B)``, and, with several
replicas, splits the batch along B and sums the replicas' gradients and metrics before the
global-norm clipping, so every strategy computes the same update. A non-finite loss or
gradient skips the update (:func:`tfagents_vtrace.agents.optimization.apply_if_finite`).

Sample reuse: a config with ``num_epochs`` / ``num_minibatches`` (IMPALA's) makes one update
``num_epochs`` passes over the batch, each shuffling the B columns (whole unrolls) and taking
``num_minibatches`` SGD steps on equal parts of them. On one replica the passes run inside the
one compiled update (a ``tf.while_loop``; the shuffles are stateless Philox draws from the learner's
seed and the optimizer's step count, so a resumed run draws the same ones, though XLA draws
other ones than the graph); with several replicas each SGD step is one distributed step of
the host-side minibatch, with the graph's shuffles. Subclasses whose
loss reads the policy from before the update provide :meth:`ReplicatedLearner._old_outputs`.

Subclasses set ``config_type`` and implement :meth:`ReplicatedLearner._loss`; they may
add variables (:meth:`ReplicatedLearner._make_variables`), per-step inputs
(:meth:`ReplicatedLearner._step_inputs`, e.g. A2C's annealed entropy weight) and post-update
bookkeeping (:meth:`ReplicatedLearner._after_update`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf

from tfagents_vtrace.agents import batching, optimization
from tfagents_vtrace.agents.batching import take_columns


class ReplicatedLearner:
    """Owns the network and optimizer; ``train_step(batch)`` runs one compiled update.

    Args:
      config: an instance of the subclass's ``config_type`` with the optimizer fields of
        :func:`optimization.optimizer_from_config`, ``max_grad_norm`` and ``jit_compile``.
      network_factory: zero-argument callable building the (already built) network; called
        inside ``strategy.scope()``.
      strategy: a ``tf.distribute.Strategy`` (default: the current one). With several
        replicas the batch is split along B and gradients are summed across replicas before
        the global-norm clipping, so every strategy computes the same update.
      total_updates: number of updates of the whole run (for the linear lr decay, which
        counts SGD steps: ``total_updates * num_epochs * num_minibatches``).
      seed: seeds the minibatch shuffles.
    """

    config_type: type = object

    def __init__(
        self,
        config,
        network_factory: Callable[[], object],
        strategy: tf.distribute.Strategy | None = None,
        total_updates: int | None = None,
        seed: int = 0,
    ):
        if not isinstance(config, self.config_type):
            raise ValueError(
                f"config: expected an {self.config_type.__name__}, received {type(config)}"
            )
        self.config = config
        self.total_updates = total_updates
        self.strategy = strategy or tf.distribute.get_strategy()
        self.num_replicas = int(self.strategy.num_replicas_in_sync)
        self._local_replicas = batching.local_replicas(self.strategy)
        self._epochs = int(getattr(config, "num_epochs", 1))
        self._minibatches = int(getattr(config, "num_minibatches", 1))
        self._sgd_steps = self._epochs * self._minibatches
        self._needs_old = bool(getattr(config, "needs_old_outputs", False))
        self._seed = int(seed)
        decay_steps = None if total_updates is None else total_updates * self._sgd_steps
        with self.strategy.scope():
            self.network = network_factory()
            self.optimizer = optimization.optimizer_from_config(config, decay_steps)
            self.optimizer.build(self.network.trainable_variables)
            self.nonfinite_streak = tf.Variable(0, dtype=tf.int64, trainable=False)
            self.skipped_updates = tf.Variable(0, dtype=tf.int64, trainable=False)
            self._make_variables()
        jit = bool(config.jit_compile and self.num_replicas == 1)
        self._single_step = batching.BatchFunction(self._step_and_weights, jit_compile=jit)
        self._dist_step = tf.function(self._distributed_step, autograph=False)
        self._old_fn = batching.BatchFunction(self._old_outputs)
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
        self._check_batch(batch)
        if self.num_replicas == 1:
            out, self._updated_weights = self._single_step(batch)
        elif self._sgd_steps == 1 and not self._needs_old:
            out = self._dist_step(self._distribute(batch))
        else:
            out = self._host_minibatch_steps(batch)
        # One device-to-host copy for all metrics (keys sorted, as stacked in _apply).
        return dict(zip(self._metric_names, np.asarray(out).tolist()))

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
    def _check_batch(self, batch: dict) -> None:
        """ValueError naming ``num_minibatches`` when the batch cannot be split."""
        b = int(np.shape(batch["reward"])[1])
        if b % (self._minibatches * self._local_replicas):
            raise ValueError(
                f"num_minibatches: the batch's B={b} columns must split into "
                f"{self._minibatches} minibatches of a size divisible by the "
                f"{self._local_replicas} replicas"
            )

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

    def _anneal(self, update: tf.Tensor, start: float, end: float) -> tf.Tensor:
        """A weight annealed linearly over the run: update k of ``total_updates`` n uses
        ``start + (end - start) * k / (n - 1)`` (the last one ``end``, then it stays);
        ``start`` throughout when ``total_updates`` is None."""
        total = None if not self.total_updates else max(int(self.total_updates) - 1, 1)
        return optimization.entropy_coefficient(update, total, start, end)

    def _old_outputs(self, batch: dict) -> dict[str, tf.Tensor]:
        """Entries added to the batch before its first SGD step (e.g. the policy's
        log-probs then), ``[T(+1), B, ...]`` each; none by default."""
        return {}

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
            optimization.apply_if_finite(
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
        if self._sgd_steps == 1 and not self._needs_old:
            grads, metrics = self._grads(batch, *inputs)
            return self._apply(grads, metrics, inputs)
        batch = {**batch, **self._old_outputs(batch)}
        order = self._minibatch_order(tf.shape(batch["reward"])[1])

        def sgd_step(i):
            sub = take_columns(batch, order[i], tf.gather)
            grads, metrics = self._grads(sub, *inputs)
            return self._apply(grads, metrics, inputs)

        total = sgd_step(0)  # traced outside the loop: fixes the metrics' count and names
        if self._sgd_steps > 1:
            _, total = tf.while_loop(
                lambda i, _: i < self._sgd_steps,
                lambda i, acc: (i + 1, acc + sgd_step(i)),
                (tf.constant(1), total),
            )
        return self._mean_metrics(total)

    def _minibatch_order(self, b: tf.Tensor) -> tf.Tensor:
        """``[num_epochs * num_minibatches, B / num_minibatches]`` column indices: one
        permutation of the B columns per epoch, split into equal minibatches. The draw is
        stateless, seeded by the learner's seed and the optimizer's step count."""
        seed = tf.stack(
            [tf.constant(self._seed, tf.int64), tf.cast(self.optimizer.iterations, tf.int64)]
        )
        keys = tf.random.stateless_uniform(tf.stack([self._epochs, b]), seed=seed, alg="philox")
        return tf.reshape(tf.argsort(keys, axis=-1), [self._sgd_steps, -1])

    def _mean_metrics(self, total):
        """Metrics summed over the SGD steps -> their mean, except ``nonfinite_streak``: the
        consecutive skipped SGD steps after the last one, in whole updates (``num_epochs *
        num_minibatches`` steps each), so ``max_nonfinite_updates`` counts updates whatever
        the sample reuse."""
        mean = total / float(self._sgd_steps)
        i = self._metric_names.index("nonfinite_streak")
        streak = tf.cast(self.nonfinite_streak // self._sgd_steps, mean.dtype)
        if isinstance(mean, np.ndarray):
            mean[i] = float(streak)
            return mean
        return tf.tensor_scatter_nd_update(mean, [[i]], [streak])

    def _host_minibatch_steps(self, batch: dict) -> np.ndarray:
        """Several replicas: each SGD step distributes one host-side minibatch."""
        if self._needs_old:
            batch = {**batch, **{k: v.numpy() for k, v in self._old_fn(batch).items()}}
        order = self._minibatch_order(tf.constant(np.shape(batch["reward"])[1])).numpy()
        total = 0.0
        for idx in order:  # the same shuffles as the single-replica update draws
            sub = take_columns(batch, idx, np.take)
            total = total + self._dist_step(self._distribute(sub)).numpy()
        return self._mean_metrics(total)

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
        """Splits the numpy batch along B over the replicas (batching.distribute_batch)."""
        return batching.distribute_batch(self.strategy, batch)
