"""The A2C learner: one compiled synchronous advantage actor-critic update per batch.

Synchronous A2C (Mnih et al. 2016, https://arxiv.org/abs/1602.01783, the batched form of
A3C; Wu et al. 2017, https://arxiv.org/abs/1708.05144) over the unrolls of a vector env. The
loss is :func:`tfagents_vtrace.agents.a2c.loss.a2c_loss`; the entropy weight is annealed
linearly from ``entropy_cost`` to ``entropy_cost_end`` over ``total_updates`` updates.

On-policy data: A2C's gradient is only unbiased if the batch was collected with the current
weights. The runtime must therefore run its actor synchronously (act with the weights of
update k, train update k, publish, act again); the ``mean_abs_log_rho`` metric is 0 when it
does (see ``/work/notes/a2c_glue.md`` for the runtime's synchronous mode).
"""

from __future__ import annotations

import tensorflow as tf

from tfagents_vtrace.agents.a2c.config import A2CConfig
from tfagents_vtrace.agents.a2c.loss import a2c_loss, masked_means
from tfagents_vtrace.agents.replicated_learner import ReplicatedLearner


class A2CLearner(ReplicatedLearner):
    """One compiled update of :func:`a2c_loss` per ``train_step(batch)``.

    Arguments as :class:`ReplicatedLearner` (``config`` is an :class:`A2CConfig`);
    ``total_updates`` also sets the entropy annealing horizon (None keeps the entropy weight
    at ``entropy_cost``). ``updates`` counts the updates (applied or skipped).
    """

    config_type = A2CConfig

    # ------------------------------------------------------------------ public API
    def entropy_coef(self) -> float:
        """The entropy weight the next update will use."""
        return float(self._entropy_coef())

    def checkpoint_items(self) -> dict:
        """Trackables to checkpoint: network, optimizer, update and non-finite counters
        (the Keras objects themselves, as A2C run directories have always saved them)."""
        return {
            "network": self.network,
            "optimizer": self.optimizer,
            "a2c_updates": self.updates,
            "nonfinite_streak": self.nonfinite_streak,
            "skipped_updates": self.skipped_updates,
        }

    # ------------------------------------------------------------------ hooks
    def _make_variables(self) -> None:
        self.updates = tf.Variable(0, dtype=tf.int64, trainable=False)

    def _entropy_coef(self) -> tf.Tensor:
        """Update k of n uses ``start + (end - start) * k / (n - 1)``: the last one uses ``end``."""
        return self._anneal(self.updates, *self.config.entropy_schedule)

    def _step_inputs(self) -> tuple[tf.Tensor]:
        return (self._entropy_coef(),)

    def _loss(self, batch: dict, scale: tf.Tensor, entropy_coef: tf.Tensor):
        return a2c_loss(self.network, self.config, batch, entropy_coef, scale)

    def _after_update(self, metrics: dict, entropy_coef: tf.Tensor) -> None:
        masked_means(metrics)
        self.updates.assign_add(1)
        metrics["entropy_coef"] = entropy_coef
